//! A closed-loop workload on one drive: keep `queue_depth` uniformly random
//! requests outstanding (the drive's queue is set to that depth, so the drive
//! schedules all of them), replacing each as it completes. Used to check the
//! model against DiskSim's published closed-loop figures and by the benchmark.

use std::sync::Arc;

use crate::disk::split_mix;
use crate::{DiskModel, DiskOp, DiskRequest, HardDisk, Nanos, Scheduler};

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClosedLoopConfig {
    /// Requests kept outstanding (and the drive's queue length).
    pub queue_depth: usize,
    /// The drive's scheduler.
    pub scheduler: Scheduler,
    /// Read or write.
    pub op: DiskOp,
    /// Sectors per request; requests start at multiples of it.
    pub sectors_per_request: u32,
    /// Requests to complete.
    pub request_count: u64,
    /// Seed for addresses and the platter's initial angle.
    pub seed: u64,
}

/// What it measured, in virtual time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClosedLoopResult {
    /// Requests completed.
    pub completed: u64,
    /// Virtual time from the first arrival to the last completion.
    pub elapsed_ns: Nanos,
    /// Completions per virtual second.
    pub iops: f64,
    /// Mean response time (arrival to completion), ms.
    pub mean_response_ms: f64,
}

/// A small, fast, seedable generator (SplitMix64 stream).
#[derive(Debug, Clone)]
pub struct Random {
    state: u64,
}

impl Random {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Random {
        Random { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        split_mix(self.state)
    }

    /// Uniform in `0..bound` (bound > 0), by widening multiplication.
    pub fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0, "empty range");
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }
}

/// Runs the closed loop.
pub fn run(model: Arc<DiskModel>, config: &ClosedLoopConfig) -> ClosedLoopResult {
    assert!(config.queue_depth > 0 && config.sectors_per_request > 0 && config.request_count > 0);
    let slots = model.sector_count() / u64::from(config.sectors_per_request);
    assert!(slots > 0, "the drive is smaller than one request");
    let mut random = Random::new(config.seed);
    let mut disk = HardDisk::new(model, split_mix(config.seed ^ 0xD15C))
        .with_scheduler(config.scheduler)
        .with_queue_depth(config.queue_depth);
    let mut next_id = 0u64;
    let mut issue = |disk: &mut HardDisk, now_ns: Nanos, random: &mut Random| {
        let lbn = random.below(slots) * u64::from(config.sectors_per_request);
        disk.arrive(now_ns, DiskRequest { id: next_id, op: config.op, lbn, sector_count: config.sectors_per_request });
        next_id += 1;
    };
    let initial = (config.queue_depth as u64).min(config.request_count);
    for _ in 0..initial {
        issue(&mut disk, 0, &mut random);
    }
    let mut issued = initial;
    let (mut completed, mut response_sum_ns, mut last_ns) = (0u64, 0u128, 0);
    let mut completions = Vec::with_capacity(config.queue_depth);
    while let Some(time_ns) = disk.next_event_ns() {
        completions.clear();
        disk.advance(time_ns, &mut completions);
        for completion in &completions {
            completed += 1;
            response_sum_ns += u128::from(completion.response_ns());
            last_ns = completion.completion_ns;
        }
        for _ in 0..completions.len() {
            if issued < config.request_count {
                issue(&mut disk, time_ns, &mut random);
                issued += 1;
            }
        }
    }
    let elapsed_ns = last_ns.max(1);
    ClosedLoopResult {
        completed,
        elapsed_ns,
        iops: completed as f64 / (elapsed_ns as f64 / 1.0e9),
        mean_response_ms: response_sum_ns as f64 / completed.max(1) as f64 / 1.0e6,
    }
}
