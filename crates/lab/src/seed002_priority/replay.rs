//! Client requests beside destage on the simulated RAID-4, in virtual time,
//! each member drive fronted by the engine's foreground-first
//! [`PriorityScheduler`].
//!
//! - **Foreground.** Closed-loop clients, each with one request outstanding
//!   and a think time between a completion and its next request: a random
//!   4 KiB read of a data member (the drive read the volume makes for a block
//!   it no longer stages), or a random 4 KiB write, which the volume stages
//!   on flash (a flash write, and one more block for destage to move).
//! - **Background.** The engine's own destage I/O, captured from a lab volume
//!   ([`crate::rig::lab_volume::LabVolume::capture_destage`]) and replayed in
//!   order, over and over: requests the engine submitted at the same instant
//!   form a round, and a round starts once the previous one has completed,
//!   as the engine waited for it. A batch done moves its user blocks out of
//!   the backlog.
//! - **Pacing.** With a fixed limit the destage always has work (a backlog
//!   that never empties, the paper's background writer without think time).
//!   With pacing, the backlog starts at the staging area's high-water mark,
//!   grows with each staged write and shrinks with each destaged batch; the
//!   limit follows [`background_limit_for_backlog`], and the destage waits
//!   while the backlog holds less than its next batch.
//!
//! Figures count what completes after a warm-up ([`WARM_UP_FRACTION`]).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;

use hdrhistogram::Histogram;
use proxima_device::IoOp;
use proxima_disk::{DiskCompletion, DiskModel, DiskOp, DiskRequest, FlashDevice, HardDisk, Nanos, SimDevice};
use proxima_engine::priority::{
    background_limit_for_backlog, IoClass, PriorityScheduler, PrioritySettings, BACKLOG_HIGH_WATER_PERCENT,
};
use proxima_workload::synthetic::seeded_stream;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::rig::lab_volume::CapturedBatch;
use crate::rig::testbed::{staging_flash_params, BLOCK_SIZE_BYTES};

/// The share of a run before its figures are counted.
pub const WARM_UP_FRACTION: f64 = 0.1;

/// Sectors per 4 KiB block.
const SECTORS_PER_BLOCK: u64 = BLOCK_SIZE_BYTES / 512;

/// How the background is limited in one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BackgroundPolicy {
    /// No background work: the idle array.
    None,
    /// Everything straight to the drives in arrival order, no host priority.
    Fifo,
    /// Foreground first, at most this many background requests outstanding
    /// per drive, the backlog never empty.
    Fixed(usize),
    /// Foreground first, the limit paced by the backlog between a base and a
    /// most, over a staging area of `capacity_blocks`.
    Paced {
        /// The limit below high water.
        base_limit: usize,
        /// The limit at a full staging area.
        max_limit: usize,
        /// The staging area's blocks.
        capacity_blocks: u64,
    },
}

/// One run of clients beside destage.
#[derive(Debug, Clone)]
pub struct ReplayConfig {
    /// The drive of every member.
    pub model: Arc<DiskModel>,
    /// Members of the array, parity (the last) included.
    pub member_count: usize,
    /// The first block of each member's window on its drive.
    pub window_first_block: u64,
    /// Blocks of each member's window the clients read.
    pub window_blocks: u64,
    /// Requests each drive holds.
    pub drive_queue_depth: usize,
    /// Closed-loop clients.
    pub clients: u32,
    /// Share of client requests that are reads.
    pub read_fraction: f64,
    /// A client's time between a completion and its next request.
    pub think_ns: Nanos,
    /// Virtual duration.
    pub duration_ns: Nanos,
    /// The background.
    pub policy: BackgroundPolicy,
    /// Seed of the drives and the clients.
    pub seed: u64,
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayOutcome {
    /// Client requests completed after the warm-up.
    pub foreground_requests: u64,
    /// Client bytes per second, MB/s.
    pub foreground_mb_s: f64,
    /// Mean client response time, ms.
    pub foreground_mean_ms: f64,
    /// 99th percentile of client response times, ms.
    pub foreground_p99_ms: f64,
    /// Mean client read response time, ms.
    pub foreground_read_mean_ms: f64,
    /// 99th percentile of client read response times, ms.
    pub foreground_read_p99_ms: f64,
    /// Largest client response time, ms.
    pub foreground_max_ms: f64,
    /// User blocks destaged per second.
    pub destaged_blocks_per_s: f64,
    /// Blocks staged by client writes per second.
    pub staged_blocks_per_s: f64,
    /// Member-disk bytes the destage moved per second, MB/s.
    pub background_device_mb_s: f64,
    /// Background requests dispatched because they had starved.
    pub starved_dispatches: u64,
    /// The largest backlog seen as a share of the staging area (paced runs).
    pub backlog_fraction_max: f64,
    /// How much the backlog grew over the run's second half, blocks (paced
    /// runs).
    pub backlog_growth_blocks: i64,
    /// The backlog at the run's end, blocks (paced runs).
    pub backlog_end_blocks: u64,
}

/// What a drive request is for.
#[derive(Debug, Clone, Copy)]
enum Purpose {
    /// A client's read.
    Read { client: usize, arrival_ns: Nanos },
    /// A client's staged write (on the flash device).
    Write { client: usize, arrival_ns: Nanos },
    /// A request of the background's current round.
    Background { sectors: u32 },
}

/// A captured destage as the replay issues it: each batch's rounds of
/// requests the engine submitted at the same instant (each round waits for
/// the one before), in drive sectors, and the user blocks each batch moved.
/// Built once and shared by every run of an experiment.
#[derive(Debug, Clone)]
pub struct DestageRounds {
    /// Per batch, per round, `(member, request)`.
    batches: Vec<Vec<Vec<(usize, DiskRequest)>>>,
    user_blocks: Vec<u64>,
}

impl DestageRounds {
    /// Groups `capture`'s member requests into rounds by submission instant;
    /// member blocks are relative to windows starting at `window_first_block`.
    ///
    /// # Panics
    /// If the capture wrote nothing to the array: a bug in the caller.
    pub fn from_capture(capture: &[CapturedBatch], window_first_block: u64) -> DestageRounds {
        let mut batches = Vec::new();
        let mut user_blocks = Vec::new();
        for batch in capture {
            let mut by_time: std::collections::BTreeMap<Nanos, Vec<(usize, DiskRequest)>> = Default::default();
            for (member, ios) in batch.member_ios.iter().enumerate() {
                for io in ios {
                    let op = if io.op == IoOp::Read { DiskOp::Read } else { DiskOp::Write };
                    let request = DiskRequest {
                        id: 0,
                        op,
                        lbn: (window_first_block + io.block) * SECTORS_PER_BLOCK,
                        sector_count: u32::try_from(u64::from(io.block_count) * SECTORS_PER_BLOCK)
                            .expect("a request's sectors fit in u32"),
                    };
                    by_time.entry(io.submitted_ns).or_default().push((member, request));
                }
            }
            if !by_time.is_empty() {
                batches.push(by_time.into_values().collect());
                user_blocks.push(batch.user_blocks);
            }
        }
        assert!(!batches.is_empty(), "the captured destage wrote to the array");
        DestageRounds { batches, user_blocks }
    }

    /// Rounds in all.
    pub fn round_count(&self) -> u64 {
        self.batches.iter().map(|rounds| rounds.len() as u64).sum()
    }

    /// Member requests in all.
    pub fn request_count(&self) -> u64 {
        self.batches.iter().flatten().map(|round| round.len() as u64).sum()
    }

    /// User blocks in all.
    pub fn user_blocks(&self) -> u64 {
        self.user_blocks.iter().sum()
    }
}

/// Where a run's replay of the destage stands.
struct Destage<'a> {
    rounds: &'a DestageRounds,
    batch: usize,
    round: usize,
    /// Requests of the current round not yet completed.
    round_left: usize,
    /// Requests of the current round not yet admitted, per member.
    unadmitted: Vec<VecDeque<DiskRequest>>,
}

impl Destage<'_> {
    fn next_batch_blocks(&self) -> u64 {
        self.rounds.user_blocks[self.batch]
    }
}

/// Client response times: a histogram (three significant digits, as the
/// replayer's) and their sum, for the mean.
#[derive(Debug)]
struct Latencies {
    histogram: Histogram<u64>,
    sum_ns: u128,
}

impl Latencies {
    fn new() -> Latencies {
        Latencies { histogram: Histogram::new(3).expect("three significant digits is valid"), sum_ns: 0 }
    }

    fn record(&mut self, latency_ns: Nanos) {
        // The histogram grows to hold any value; past u64's range it saturates.
        if self.histogram.record(latency_ns).is_err() {
            self.histogram.saturating_record(latency_ns);
        }
        self.sum_ns += u128::from(latency_ns);
    }

    fn count(&self) -> u64 {
        self.histogram.len()
    }

    fn mean_ms(&self) -> f64 {
        if self.count() == 0 {
            return 0.0;
        }
        self.sum_ns as f64 / self.count() as f64 / 1e6
    }

    fn quantile_ms(&self, quantile: f64) -> f64 {
        self.histogram.value_at_quantile(quantile) as f64 / 1e6
    }

    fn max_ms(&self) -> f64 {
        self.histogram.max() as f64 / 1e6
    }
}

/// The array, its schedulers, the flash and the clients.
struct Host<'a> {
    config: &'a ReplayConfig,
    drives: Vec<HardDisk>,
    schedulers: Vec<PriorityScheduler<u64>>,
    /// Requests of the FIFO policy waiting for room in a drive's queue.
    fifo: Vec<std::collections::VecDeque<u64>>,
    fifo_outstanding: Vec<usize>,
    requests: HashMap<u64, (usize, DiskRequest)>,
    flash: FlashDevice,
    purposes: HashMap<u64, Purpose>,
    wakeups: BinaryHeap<Reverse<(Nanos, usize)>>,
    rng: ChaCha8Rng,
    next_id: u64,
    destage: Option<Destage<'a>>,
    destage_active: bool,
    backlog_blocks: u64,
    warm_up_ns: Nanos,
    latencies: Latencies,
    read_latencies: Latencies,
    foreground_bytes: u64,
    destaged_blocks: u64,
    staged_blocks: u64,
    background_sectors: u64,
    starved_dispatches: u64,
    backlog_fraction_max: f64,
    /// The backlog half way through the run.
    backlog_at_half: Option<u64>,
}

/// Runs `config` with the background replaying `rounds`.
pub fn run_replay(config: &ReplayConfig, rounds: &DestageRounds) -> ReplayOutcome {
    let mut host = Host::new(config, rounds);
    host.run();
    host.outcome()
}

impl<'a> Host<'a> {
    fn new(config: &'a ReplayConfig, rounds: &'a DestageRounds) -> Host<'a> {
        let drives = (0..config.member_count)
            .map(|member| {
                let seed = config.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(member as u64);
                HardDisk::new(Arc::clone(&config.model), seed).with_queue_depth(config.drive_queue_depth)
            })
            .collect();
        let limit = match config.policy {
            BackgroundPolicy::Fixed(limit) => limit,
            BackgroundPolicy::Paced { base_limit, .. } => base_limit,
            BackgroundPolicy::None | BackgroundPolicy::Fifo => 1,
        };
        let settings = PrioritySettings {
            background_limit: limit.max(1),
            ..PrioritySettings::for_device_depth(config.drive_queue_depth)
        };
        let destage = match config.policy {
            BackgroundPolicy::None => None,
            _ => Some(Destage {
                rounds,
                batch: 0,
                round: 0,
                round_left: 0,
                unadmitted: vec![VecDeque::new(); config.member_count],
            }),
        };
        let backlog_blocks = match config.policy {
            BackgroundPolicy::Paced { capacity_blocks, .. } => capacity_blocks * BACKLOG_HIGH_WATER_PERCENT / 100,
            _ => u64::MAX,
        };
        let clients = usize::try_from(config.clients).expect("clients fit in usize");
        Host {
            config,
            drives,
            schedulers: vec![PriorityScheduler::new(settings); config.member_count],
            fifo: vec![Default::default(); config.member_count],
            fifo_outstanding: vec![0; config.member_count],
            requests: HashMap::new(),
            flash: FlashDevice::new(staging_flash_params(config.window_blocks)),
            purposes: HashMap::new(),
            wakeups: (0..clients).map(|client| Reverse((0, client))).collect(),
            rng: seeded_stream(config.seed, 7),
            next_id: 0,
            destage,
            destage_active: false,
            backlog_blocks,
            warm_up_ns: (config.duration_ns as f64 * WARM_UP_FRACTION) as Nanos,
            latencies: Latencies::new(),
            read_latencies: Latencies::new(),
            foreground_bytes: 0,
            destaged_blocks: 0,
            staged_blocks: 0,
            background_sectors: 0,
            starved_dispatches: 0,
            backlog_fraction_max: 0.0,
            backlog_at_half: None,
        }
    }

    fn run(&mut self) {
        let mut completions = Vec::new();
        loop {
            self.start_round_if_ready();
            let wakeup = self.wakeups.peek().map(|Reverse((time, _))| *time);
            let drive_event = self.drives.iter().filter_map(HardDisk::next_event_ns).min();
            let flash_event = self.flash.next_event_ns();
            let Some(now) = [wakeup, drive_event, flash_event].into_iter().flatten().min() else { break };
            if now > self.config.duration_ns {
                break;
            }
            if now >= self.config.duration_ns / 2 && self.backlog_at_half.is_none() {
                self.backlog_at_half = Some(self.backlog_blocks);
            }
            completions.clear();
            if flash_event == Some(now) {
                self.flash.advance(now, &mut completions);
            }
            for drive in &mut self.drives {
                if drive.next_event_ns() == Some(now) {
                    drive.advance(now, &mut completions);
                }
            }
            for completion in std::mem::take(&mut completions) {
                self.on_completion(&completion);
            }
            while self.wakeups.peek().is_some_and(|Reverse((time, _))| *time == now) {
                let Reverse((_, client)) = self.wakeups.pop().expect("peeked");
                self.issue(client, now);
            }
            self.start_round_if_ready();
            self.dispatch_all(now);
        }
    }

    fn issue(&mut self, client: usize, now: Nanos) {
        let id = self.take_id();
        if self.rng.gen_bool(self.config.read_fraction) {
            let data_members = self.config.member_count - 1;
            let member = self.rng.gen_range(0..data_members);
            let block = self.rng.gen_range(0..self.config.window_blocks);
            let request = DiskRequest {
                id,
                op: DiskOp::Read,
                lbn: (self.config.window_first_block + block) * SECTORS_PER_BLOCK,
                sector_count: SECTORS_PER_BLOCK as u32,
            };
            self.purposes.insert(id, Purpose::Read { client, arrival_ns: now });
            self.enqueue(member, request, IoClass::Foreground, now);
        } else {
            let block = self.rng.gen_range(0..self.config.window_blocks);
            let request = DiskRequest {
                id,
                op: DiskOp::Write,
                lbn: block * SECTORS_PER_BLOCK,
                sector_count: SECTORS_PER_BLOCK as u32,
            };
            self.purposes.insert(id, Purpose::Write { client, arrival_ns: now });
            self.flash.arrive(now, request);
        }
    }

    fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn enqueue(&mut self, member: usize, request: DiskRequest, class: IoClass, now: Nanos) {
        self.requests.insert(request.id, (member, request));
        if self.config.policy == BackgroundPolicy::Fifo {
            self.fifo[member].push_back(request.id);
            return;
        }
        self.schedulers[member].admit(request.id, class, now).expect("admission is checked before enqueueing");
    }

    /// Starts the destage's next round when the last one is done and the
    /// backlog holds the next batch.
    fn start_round_if_ready(&mut self) {
        let Some(destage) = self.destage.as_mut() else { return };
        if self.destage_active {
            return;
        }
        if destage.round == 0 && self.backlog_blocks < destage.next_batch_blocks() {
            return;
        }
        let round = &destage.rounds.batches[destage.batch][destage.round];
        destage.round_left = round.len();
        for &(member, request) in round {
            destage.unadmitted[member].push_back(request);
        }
        self.destage_active = true;
    }

    fn admit_background(&mut self, now: Nanos) {
        let Some(destage) = self.destage.as_mut() else { return };
        let mut admitted = Vec::new();
        for (member, pending) in destage.unadmitted.iter_mut().enumerate() {
            let fifo = self.config.policy == BackgroundPolicy::Fifo;
            while fifo || self.schedulers[member].has_room(IoClass::Background) {
                let Some(request) = pending.pop_front() else { break };
                admitted.push((member, request));
            }
        }
        for (member, mut request) in admitted {
            request.id = self.take_id();
            self.purposes.insert(request.id, Purpose::Background { sectors: request.sector_count });
            self.enqueue(member, request, IoClass::Background, now);
        }
    }

    fn dispatch_all(&mut self, now: Nanos) {
        self.admit_background(now);
        if let BackgroundPolicy::Paced { base_limit, max_limit, capacity_blocks } = self.config.policy {
            let limit = background_limit_for_backlog(self.backlog_blocks, capacity_blocks, base_limit, max_limit);
            for scheduler in &mut self.schedulers {
                scheduler.set_background_limit(limit);
            }
        }
        for member in 0..self.config.member_count {
            if self.config.policy == BackgroundPolicy::Fifo {
                while self.fifo_outstanding[member] < self.config.drive_queue_depth {
                    let Some(id) = self.fifo[member].pop_front() else { break };
                    self.fifo_outstanding[member] += 1;
                    self.send(member, id, now);
                }
                continue;
            }
            while let Some(dispatch) = self.schedulers[member].next_dispatch(now) {
                self.starved_dispatches += u64::from(dispatch.starved);
                self.send(member, dispatch.id, now);
            }
        }
    }

    fn send(&mut self, member: usize, id: u64, now: Nanos) {
        let (_, request) = self.requests[&id];
        self.drives[member].arrive(now, request);
    }

    fn on_completion(&mut self, completion: &DiskCompletion) {
        let now = completion.completion_ns;
        let counted = now >= self.warm_up_ns;
        if let Some((member, _)) = self.requests.remove(&completion.id) {
            if self.config.policy == BackgroundPolicy::Fifo {
                self.fifo_outstanding[member] -= 1;
            } else {
                self.schedulers[member].on_complete(completion.id);
            }
        }
        match self.purposes.remove(&completion.id).expect("every request has a purpose") {
            Purpose::Read { client, arrival_ns } => {
                if counted {
                    self.read_latencies.record(now - arrival_ns);
                }
                self.complete_client(client, arrival_ns, now);
            }
            Purpose::Write { client, arrival_ns } => {
                self.staged_blocks += u64::from(counted);
                self.backlog_blocks = self.backlog_blocks.saturating_add(1);
                if let BackgroundPolicy::Paced { capacity_blocks, .. } = self.config.policy {
                    let fraction = self.backlog_blocks as f64 / capacity_blocks as f64;
                    self.backlog_fraction_max = self.backlog_fraction_max.max(fraction);
                }
                self.complete_client(client, arrival_ns, now);
            }
            Purpose::Background { sectors } => {
                if counted {
                    self.background_sectors += u64::from(sectors);
                }
                self.complete_background(counted);
            }
        }
    }

    fn complete_client(&mut self, client: usize, arrival_ns: Nanos, now: Nanos) {
        if now >= self.warm_up_ns {
            self.latencies.record(now - arrival_ns);
            self.foreground_bytes += BLOCK_SIZE_BYTES;
        }
        self.wakeups.push(Reverse((now + self.config.think_ns, client)));
    }

    fn complete_background(&mut self, counted: bool) {
        let destage = self.destage.as_mut().expect("background requests come from the destage");
        destage.round_left -= 1;
        if destage.round_left > 0 {
            return;
        }
        self.destage_active = false;
        destage.round += 1;
        if destage.round < destage.rounds.batches[destage.batch].len() {
            return;
        }
        let blocks = destage.rounds.user_blocks[destage.batch];
        destage.round = 0;
        destage.batch = (destage.batch + 1) % destage.rounds.batches.len();
        if counted {
            self.destaged_blocks += blocks;
        }
        if self.backlog_blocks != u64::MAX {
            self.backlog_blocks = self.backlog_blocks.saturating_sub(blocks);
        }
    }

    fn outcome(&self) -> ReplayOutcome {
        let seconds = (self.config.duration_ns - self.warm_up_ns) as f64 / 1e9;
        ReplayOutcome {
            foreground_requests: self.latencies.count(),
            foreground_mb_s: self.foreground_bytes as f64 / seconds / 1e6,
            foreground_mean_ms: self.latencies.mean_ms(),
            foreground_read_mean_ms: self.read_latencies.mean_ms(),
            foreground_p99_ms: self.latencies.quantile_ms(0.99),
            foreground_read_p99_ms: self.read_latencies.quantile_ms(0.99),
            foreground_max_ms: self.latencies.max_ms(),
            destaged_blocks_per_s: self.destaged_blocks as f64 / seconds,
            staged_blocks_per_s: self.staged_blocks as f64 / seconds,
            background_device_mb_s: (self.background_sectors * 512) as f64 / seconds / 1e6,
            starved_dispatches: self.starved_dispatches,
            backlog_fraction_max: self.backlog_fraction_max,
            backlog_growth_blocks: match (self.config.policy, self.backlog_at_half) {
                (BackgroundPolicy::Paced { .. }, Some(half)) => self.backlog_blocks as i64 - half as i64,
                _ => 0,
            },
            backlog_end_blocks: match self.config.policy {
                BackgroundPolicy::Paced { .. } => self.backlog_blocks,
                _ => 0,
            },
        }
    }
}
