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
use rand_chacha::ChaCha8Rng;

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

/// The application's state while it runs.
struct Run<'a> {
    disk: HardDisk,
    config: &'a ApplicationConfig,
    sectors_per_block: u64,
    generators: Vec<SyntheticWorkload>,
    think: ChaCha8Rng,
    /// Threads whose think time ends at a time: (time, thread).
    timers: BinaryHeap<Reverse<(Nanos, usize)>>,
    /// Requests in flight by id (= issue order): their thread and request.
    outstanding: BTreeMap<u64, (usize, TraceRequest)>,
    /// Completed requests not yet captured because an earlier one is in flight.
    finished: BTreeMap<u64, TraceRequest>,
    issued: u64,
    captured: u64,
    completed: u64,
    latency_sum_ns: u128,
    last_completion_ns: Nanos,
}

impl Run<'_> {
    /// Handles the drive's completions at `time_ns`, captures what is in
    /// order, and starts the threads' think times.
    fn complete(&mut self, time_ns: Nanos, capture: &mut dyn FnMut(TraceRequest)) {
        let mut completions = Vec::new();
        self.disk.advance(time_ns, &mut completions);
        for done in &completions {
            let (thread, request) = self.outstanding.remove(&done.id).expect("completions name issued requests");
            let response_ns = done.completion_ns - done.arrival_ns;
            self.completed += 1;
            self.latency_sum_ns += u128::from(response_ns);
            self.last_completion_ns = done.completion_ns;
            self.finished.insert(done.id, TraceRequest { response_ns: Some(response_ns), ..request });
            let pause = self.think.gen_range(self.config.think_ns_min..=self.config.think_ns_max);
            self.timers.push(Reverse((done.completion_ns + pause, thread)));
        }
        while let Some(entry) = self.finished.first_entry().filter(|entry| *entry.key() == self.captured) {
            capture(entry.remove());
            self.captured += 1;
        }
    }

    /// `thread`'s think time ended at `time_ns`: it issues its next request.
    fn issue(&mut self, time_ns: Nanos, thread: usize) {
        if self.issued == self.config.request_count {
            return;
        }
        let request = self.generators[thread].next().expect("generators are endless");
        let op = if request.operation == Operation::Read { DiskOp::Read } else { DiskOp::Write };
        let lbn = request.block * self.sectors_per_block;
        let sector_count = u32::try_from(request.block_count * self.sectors_per_block).expect("small requests");
        self.disk.arrive(time_ns, DiskRequest { id: self.issued, op, lbn, sector_count });
        let trace_request = TraceRequest {
            line_number: self.issued + 1,
            issue_ns: time_ns,
            device: 0,
            operation: request.operation,
            offset_bytes: request.block * APPLICATION_BLOCK_BYTES,
            length_bytes: request.block_count * APPLICATION_BLOCK_BYTES,
            response_ns: None,
        };
        self.outstanding.insert(self.issued, (thread, trace_request));
        self.issued += 1;
    }
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
    let mut run = Run {
        disk: HardDisk::new(model, config.disk_seed),
        config,
        sectors_per_block,
        generators: (0..config.thread_count)
            .map(|thread| {
                SyntheticWorkload::new(SyntheticSpec { seed: workload.seed.wrapping_add(thread as u64), ..*workload })
            })
            .collect(),
        think: seeded_stream(config.seed, 11),
        timers: (0..config.thread_count).map(|thread| Reverse((0, thread))).collect(),
        outstanding: BTreeMap::new(),
        finished: BTreeMap::new(),
        issued: 0,
        captured: 0,
        completed: 0,
        latency_sum_ns: 0,
        last_completion_ns: 0,
    };
    loop {
        let next_timer = run.timers.peek().map(|Reverse((time, _))| *time);
        match (run.disk.next_event_ns(), next_timer) {
            // Completions first, also when a think time ends at the same instant.
            (Some(completion), timer) if timer.is_none_or(|timer| completion <= timer) => {
                run.complete(completion, capture);
            }
            (_, Some(time)) => {
                let Reverse((_, thread)) = run.timers.pop().expect("peeked");
                run.issue(time, thread);
            }
            (_, None) => break,
        }
    }
    assert_eq!(run.completed, config.request_count, "every request completes");
    let execution_ns = run.last_completion_ns.max(1);
    ApplicationResult {
        completed: run.completed,
        execution_ns,
        iops: run.completed as f64 * 1e9 / execution_ns as f64,
        mean_latency_ms: run.latency_sum_ns as f64 / run.completed as f64 / 1e6,
    }
}
