//! A closed-loop application run directly on a simulated drive, captured as a
//! trace: the "application" of hfplayer's scaled-replay evaluation.
//!
//! `thread_count` threads each loop: issue one request, wait for it, think for
//! a uniformly random time in `[think_ns_min, think_ns_max]`, issue the next.
//! Each thread draws its requests from its own generator (the workload's seed
//! plus the thread's index), so a TPC-B thread writes back the page it read.
//! Every thread starts at time 0. The run is in virtual time on a fresh
//! [`HardDisk`] seeded by `disk_seed`, with the model's queue and scheduler,
//! exactly as [`replay`](crate::replay)'s disk target builds it, so replaying
//! the capture on the same model reproduces it.
//!
//! When a think time ends at the instant the drive completes a request, the
//! completion is handled first — the replay's rule too.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;

use proxima_disk::{DiskModel, DiskOp, DiskRequest, HardDisk, Nanos};
use rand::Rng;

use crate::request::{Operation, TraceRequest};
use crate::synthetic::{seeded_stream, SyntheticSpec, SyntheticWorkload};

/// Bytes per block of the applications' workloads.
pub const APPLICATION_BLOCK_BYTES: u64 = 4096;

/// How the application runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ApplicationConfig {
    /// Threads, each with one request outstanding at most.
    pub thread_count: usize,
    /// Shortest think time between a completion and the thread's next request.
    pub think_ns_min: Nanos,
    /// Longest think time.
    pub think_ns_max: Nanos,
    /// Requests to complete in all.
    pub request_count: u64,
    /// Seed of the think times.
    pub seed: u64,
    /// Seed of the drive (its platter's initial angle).
    pub disk_seed: u64,
}

/// What the application measured, in virtual time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ApplicationResult {
    /// Requests completed.
    pub completed: u64,
    /// From the first issue (time 0) to the last completion.
    pub execution_ns: Nanos,
    /// Requests per second of execution time.
    pub iops: f64,
    /// Mean response time, in milliseconds.
    pub mean_latency_ms: f64,
}

/// A request in flight: its thread and issue order.
#[derive(Debug, Clone, Copy)]
struct Outstanding {
    thread: usize,
    sequence: u64,
    request: TraceRequest,
}

/// Runs the application on a fresh drive of `model`; `capture` receives every
/// request, with its response time, in issue order.
pub fn run_application(
    model: Arc<DiskModel>,
    workload: &SyntheticSpec,
    config: &ApplicationConfig,
    capture: &mut dyn FnMut(TraceRequest),
) -> ApplicationResult {
    assert!(config.thread_count > 0 && config.request_count > 0, "at least one thread and one request");
    assert!(config.think_ns_min <= config.think_ns_max, "think time range");
    let sectors_per_block = APPLICATION_BLOCK_BYTES / u64::from(model.sector_size_bytes());
    assert!(workload.block_count * sectors_per_block <= model.sector_count(), "the workload fits on the drive");
    let mut disk = HardDisk::new(model, config.disk_seed);
    let mut generators: Vec<SyntheticWorkload> = (0..config.thread_count)
        .map(|thread| {
            SyntheticWorkload::new(SyntheticSpec { seed: workload.seed.wrapping_add(thread as u64), ..*workload })
        })
        .collect();
    let mut think = seeded_stream(config.seed, 11);
    // Threads whose think time ends at a time: (time, thread).
    let mut timers: BinaryHeap<Reverse<(Nanos, usize)>> = (0..config.thread_count).map(|t| Reverse((0, t))).collect();
    let mut outstanding: BTreeMap<u64, Outstanding> = BTreeMap::new();
    // Completed requests not yet captured because an earlier one is in flight.
    let mut finished: BTreeMap<u64, TraceRequest> = BTreeMap::new();
    let (mut issued, mut captured, mut completed, mut latency_sum_ns, mut last_ns) = (0u64, 0u64, 0u64, 0u128, 0);
    let mut completions = Vec::new();
    loop {
        let next_timer = timers.peek().map(|Reverse((time, _))| *time);
        let next_completion = disk.next_event_ns();
        match (next_completion, next_timer) {
            (Some(completion), timer) if timer.is_none_or(|timer| completion <= timer) => {
                completions.clear();
                disk.advance(completion, &mut completions);
                for done in &completions {
                    let entry = outstanding.remove(&done.id).expect("completions name issued requests");
                    let response_ns = done.completion_ns - done.arrival_ns;
                    completed += 1;
                    latency_sum_ns += u128::from(response_ns);
                    last_ns = done.completion_ns;
                    finished.insert(entry.sequence, TraceRequest { response_ns: Some(response_ns), ..entry.request });
                    let pause = think.gen_range(config.think_ns_min..=config.think_ns_max);
                    timers.push(Reverse((done.completion_ns + pause, entry.thread)));
                }
                while let Some(entry) = finished.first_entry().filter(|entry| *entry.key() == captured) {
                    capture(entry.remove());
                    captured += 1;
                }
            }
            (_, Some(time)) => {
                let Reverse((_, thread)) = timers.pop().expect("peeked");
                if issued == config.request_count {
                    continue;
                }
                let request = generators[thread].next().expect("generators are endless");
                let operation = if request.operation == Operation::Read { DiskOp::Read } else { DiskOp::Write };
                let lbn = request.block * sectors_per_block;
                let sector_count = u32::try_from(request.block_count * sectors_per_block).expect("small requests");
                disk.arrive(time, DiskRequest { id: issued, op: operation, lbn, sector_count });
                let trace_request = TraceRequest {
                    line_number: issued + 1,
                    issue_ns: time,
                    device: 0,
                    operation: request.operation,
                    offset_bytes: request.block * APPLICATION_BLOCK_BYTES,
                    length_bytes: request.block_count * APPLICATION_BLOCK_BYTES,
                    response_ns: None,
                };
                outstanding.insert(issued, Outstanding { thread, sequence: issued, request: trace_request });
                issued += 1;
            }
            (None, None) => break,
            (Some(_), None) => unreachable!("handled by the first arm"),
        }
    }
    assert_eq!(completed, config.request_count, "every request completes");
    let execution_ns = last_ns.max(1);
    ApplicationResult {
        completed,
        execution_ns,
        iops: completed as f64 * 1e9 / execution_ns as f64,
        mean_latency_ms: latency_sum_ns as f64 / completed as f64 / 1e6,
    }
}
