//! Closed-loop random I/O: `Q` uniformly random requests kept outstanding at the
//! drive (whose queue is made that deep), each completion immediately replaced by a
//! new one. Also defines the OP,
//! the unit of cost of the proximal I/O paper: the drive's mean random 4 KiB read at
//! queue depth 1.

use std::sync::Arc;

use proxima_disk::{closed_loop, DiskModel, DiskOp, Scheduler};
use serde::Serialize;

use crate::seed000_proximal::placement::block_sectors;
use crate::LabError;

/// Requests simulated to measure one OP: enough for a mean within about 1 % (the
/// service time's standard deviation is about a third of its mean).
pub const OP_REQUEST_COUNT: u32 = 4000;

/// One closed-loop experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClosedLoopConfig {
    /// Requests kept outstanding (the drive's queue is made this deep).
    pub queue_depth: u32,
    /// The drive's scheduler.
    pub scheduler: Scheduler,
    /// Read or write.
    pub op: DiskOp,
    /// Size of each request, in sectors (DiskSim's "blocks"; 8 is 4 KiB on
    /// 512-byte sectors). Requests start at multiples of it.
    pub sectors_per_request: u32,
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

/// Runs the closed loop on a fresh drive running `model` (the simulator's own
/// closed-loop driver, after checking the parameters).
pub fn run_closed_loop(model: &Arc<DiskModel>, config: &ClosedLoopConfig) -> Result<ClosedLoopResult, LabError> {
    check_config(model, config)?;
    let driver_config = closed_loop::ClosedLoopConfig {
        queue_depth: config.queue_depth as usize,
        scheduler: config.scheduler,
        op: config.op,
        sectors_per_request: config.sectors_per_request,
        request_count: u64::from(config.request_count),
        seed: config.seed,
    };
    let result = closed_loop::run(Arc::clone(model), &driver_config);
    Ok(ClosedLoopResult {
        requests: config.request_count,
        iops: result.iops,
        mean_response_ms: result.mean_response_ms,
        elapsed_ms: result.elapsed_ns as f64 / 1e6,
    })
}

fn check_config(model: &DiskModel, config: &ClosedLoopConfig) -> Result<(), LabError> {
    if config.queue_depth == 0 {
        return Err(LabError::InvalidParameter { parameter: "queue-depth", message: "must be at least 1".into() });
    }
    if config.request_count == 0 {
        return Err(LabError::InvalidParameter { parameter: "count", message: "complete at least one request".into() });
    }
    if config.sectors_per_request == 0 || u64::from(config.sectors_per_request) > model.sector_count() {
        return Err(LabError::InvalidParameter {
            parameter: "blocks",
            message: format!(
                "a request of {} sectors does not fit a disk of {} sectors",
                config.sectors_per_request,
                model.sector_count()
            ),
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
        sectors_per_request: block_sectors(model),
        request_count: OP_REQUEST_COUNT,
        seed,
    };
    Ok(run_closed_loop(model, &config)?.mean_response_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cheetah() -> Arc<DiskModel> {
        Arc::new(DiskModel::builtin("cheetah15k5").expect("the built-in Cheetah 15K.5 loads"))
    }

    fn config(queue_depth: u32, scheduler: Scheduler, seed: u64) -> ClosedLoopConfig {
        ClosedLoopConfig { queue_depth, scheduler, op: DiskOp::Read, sectors_per_request: 8, request_count: 1000, seed }
    }

    #[test]
    fn completes_exactly_the_requested_count_and_is_deterministic() {
        let model = cheetah();
        let first = run_closed_loop(&model, &config(4, Scheduler::Sptf, 3)).unwrap();
        let again = run_closed_loop(&model, &config(4, Scheduler::Sptf, 3)).unwrap();
        assert_eq!(first.requests, 1000);
        assert_eq!(first, again);
    }

    #[test]
    fn sptf_at_depth_eight_beats_fcfs() {
        let model = cheetah();
        let fcfs = run_closed_loop(&model, &config(8, Scheduler::Fcfs, 4)).unwrap();
        let sptf = run_closed_loop(&model, &config(8, Scheduler::Sptf, 4)).unwrap();
        assert!(sptf.iops > fcfs.iops * 1.2, "SPTF {} vs FCFS {} IOPS", sptf.iops, fcfs.iops);
    }

    #[test]
    fn at_queue_depth_one_response_time_is_the_inverse_of_throughput() {
        let result = run_closed_loop(&cheetah(), &config(1, Scheduler::Fcfs, 5)).unwrap();
        let implied_ms = 1000.0 / result.iops;
        assert!((implied_ms - result.mean_response_ms).abs() < 1e-6 * implied_ms);
    }

    #[test]
    fn an_empty_request_is_rejected() {
        let mut bad = config(1, Scheduler::Fcfs, 1);
        bad.sectors_per_request = 0;
        assert!(matches!(
            run_closed_loop(&cheetah(), &bad),
            Err(LabError::InvalidParameter { parameter: "blocks", .. })
        ));
    }
}
