//! Closed-loop random I/O: `Q` uniformly random requests kept outstanding at the
//! drive, each completion immediately replaced by a new one. Also defines the OP,
//! the unit of cost of the proximal I/O paper: the drive's mean random 4 KiB read at
//! queue depth 1.

use std::sync::Arc;

use proxima_disk::{DiskModel, DiskOp, DiskRequest, HardDisk, Nanos, Scheduler};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::placement::block_sectors;
use crate::progress::Progress;
use crate::LabError;

/// Requests simulated to measure one OP: enough for a mean within about 1 % (the
/// service time's standard deviation is about a third of its mean).
pub const OP_REQUEST_COUNT: u32 = 4000;

/// One closed-loop experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClosedLoopConfig {
    /// Requests kept outstanding (the drive's queue is made at least this deep).
    pub queue_depth: u32,
    /// The drive's scheduler.
    pub scheduler: Scheduler,
    /// Read or write.
    pub op: DiskOp,
    /// Size of each request, in 4 KiB blocks.
    pub blocks: u32,
    /// Requests completed in the run.
    pub request_count: u32,
    /// Seed of the run: request positions and the platter's phase.
    pub seed: u64,
}

/// What a closed-loop experiment measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClosedLoopResult {
    /// Requests completed.
    pub requests: u32,
    /// Requests completed per second of virtual time.
    pub iops: f64,
    /// Mean time from arrival at the drive to completion.
    pub mean_response_ms: f64,
    /// Virtual time from the first arrival to the last completion.
    pub elapsed_ms: f64,
}

/// Runs the closed loop on a fresh drive running `model`.
pub fn run_closed_loop(
    model: &Arc<DiskModel>,
    config: &ClosedLoopConfig,
    progress: &mut dyn Progress,
) -> Result<ClosedLoopResult, LabError> {
    check_config(model, config)?;
    let mut random = ChaCha8Rng::seed_from_u64(config.seed);
    let queue_depth = config.queue_depth as usize;
    let mut disk = HardDisk::new(Arc::clone(model), config.seed)
        .with_scheduler(config.scheduler)
        .with_queue_depth(queue_depth.max(model.max_queue_length()));
    let block = u64::from(block_sectors(model));
    let request_sectors = block * u64::from(config.blocks);
    // Block-aligned starts such that the whole request fits on the disk.
    let start_slots = (model.sector_count() - request_sectors) / block + 1;
    let mut next_request = |id: u64| DiskRequest {
        id,
        op: config.op,
        lbn: random.gen_range(0..start_slots) * block,
        sector_count: request_sectors as u32,
    };
    let mut issued = 0u64;
    for _ in 0..queue_depth.min(config.request_count as usize) {
        disk.arrive(0, next_request(issued));
        issued += 1;
    }
    let mut completed = 0u32;
    let mut total_response_ns: u128 = 0;
    let mut last_completion_ns: Nanos = 0;
    let mut produced = Vec::new();
    while completed < config.request_count {
        let event_ns = disk.next_event_ns().expect("outstanding requests give the drive a next event");
        disk.advance(event_ns, &mut produced);
        for completion in produced.drain(..) {
            completed += 1;
            total_response_ns += u128::from(completion.response_ns());
            last_completion_ns = completion.completion_ns;
            if issued < u64::from(config.request_count) {
                disk.arrive(completion.completion_ns, next_request(issued));
                issued += 1;
            }
            progress.advance(1);
        }
    }
    let elapsed_s = last_completion_ns as f64 / 1e9;
    Ok(ClosedLoopResult {
        requests: completed,
        iops: f64::from(completed) / elapsed_s,
        mean_response_ms: total_response_ns as f64 / f64::from(completed) / 1e6,
        elapsed_ms: elapsed_s * 1e3,
    })
}

fn check_config(model: &DiskModel, config: &ClosedLoopConfig) -> Result<(), LabError> {
    if config.queue_depth == 0 {
        return Err(LabError::InvalidParameter { parameter: "queue-depth", message: "must be at least 1".into() });
    }
    if config.request_count == 0 {
        return Err(LabError::InvalidParameter { parameter: "count", message: "complete at least one request".into() });
    }
    let request_sectors = u64::from(block_sectors(model)) * u64::from(config.blocks);
    if config.blocks == 0 || request_sectors > model.sector_count() || request_sectors > u64::from(u32::MAX) {
        return Err(LabError::InvalidParameter {
            parameter: "blocks",
            message: format!("{} blocks of 4 KiB do not make a request on this disk", config.blocks),
        });
    }
    Ok(())
}

/// One OP for `model`: the mean response time of [`OP_REQUEST_COUNT`] uniformly
/// random 4 KiB reads at queue depth 1, in milliseconds, simulated from `seed`.
pub fn measure_op_ms(model: &Arc<DiskModel>, seed: u64) -> Result<f64, LabError> {
    let config = ClosedLoopConfig {
        queue_depth: 1,
        scheduler: Scheduler::Fcfs,
        op: DiskOp::Read,
        blocks: 1,
        request_count: OP_REQUEST_COUNT,
        seed,
    };
    Ok(run_closed_loop(model, &config, &mut crate::progress::NoProgress)?.mean_response_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;

    fn cheetah() -> Arc<DiskModel> {
        Arc::new(DiskModel::builtin("cheetah15k5").expect("the built-in Cheetah 15K.5 loads"))
    }

    fn config(queue_depth: u32, scheduler: Scheduler, seed: u64) -> ClosedLoopConfig {
        ClosedLoopConfig { queue_depth, scheduler, op: DiskOp::Read, blocks: 1, request_count: 1000, seed }
    }

    #[test]
    fn completes_exactly_the_requested_count_and_is_deterministic() {
        let model = cheetah();
        let first = run_closed_loop(&model, &config(4, Scheduler::Sptf, 3), &mut NoProgress).unwrap();
        let again = run_closed_loop(&model, &config(4, Scheduler::Sptf, 3), &mut NoProgress).unwrap();
        assert_eq!(first.requests, 1000);
        assert_eq!(first, again);
    }

    #[test]
    fn sptf_at_depth_eight_beats_fcfs() {
        let model = cheetah();
        let fcfs = run_closed_loop(&model, &config(8, Scheduler::Fcfs, 4), &mut NoProgress).unwrap();
        let sptf = run_closed_loop(&model, &config(8, Scheduler::Sptf, 4), &mut NoProgress).unwrap();
        assert!(sptf.iops > fcfs.iops * 1.2, "SPTF {} vs FCFS {} IOPS", sptf.iops, fcfs.iops);
    }

    #[test]
    fn at_queue_depth_one_response_time_is_the_inverse_of_throughput() {
        let result = run_closed_loop(&cheetah(), &config(1, Scheduler::Fcfs, 5), &mut NoProgress).unwrap();
        let implied_ms = 1000.0 / result.iops;
        assert!((implied_ms - result.mean_response_ms).abs() < 1e-6 * implied_ms);
    }

    #[test]
    fn a_request_larger_than_the_disk_is_rejected() {
        let mut bad = config(1, Scheduler::Fcfs, 1);
        bad.blocks = 0;
        assert!(matches!(
            run_closed_loop(&cheetah(), &bad, &mut NoProgress),
            Err(LabError::InvalidParameter { parameter: "blocks", .. })
        ));
    }
}
