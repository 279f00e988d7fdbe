//! Sequential streams on one simulated drive, in virtual time: `S` readers,
//! each reading its own contiguous file from its start in fixed-size
//! requests, one request outstanding (a closed loop with an optional think
//! time), either straight to the drive (the baseline: the drive's own cache,
//! queue and scheduler) or through the engine's [`Prefetcher`] on the host
//! (hits served from memory in no disk time; misses and prefetches issued to
//! the drive).
//!
//! Files are spread over the drive: file `i` of `S` starts at the `i`-th of
//! `S` equal slices of its LBNs (rounded down to a MiB), and is the slice
//! long. Figures count the reads that complete after a warm-up (the first
//! [`WARM_UP_FRACTION`] of the run), so the streams' first misses and the
//! classifier's confirmation reads do not weigh on them.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use proxima_disk::{DiskCompletion, DiskModel, DiskOp, DiskRequest, HardDisk, Nanos};
use proxima_engine::prefetch::{ExtentRead, PrefetchIo, PrefetchSettings, Prefetcher, ReadDecision, ReadTicket};
use serde::{Deserialize, Serialize};

use crate::LabError;

/// The share of a run before its figures are counted.
pub const WARM_UP_FRACTION: f64 = 0.1;

/// Bytes per sector of the drives the laboratory runs.
const SECTOR_BYTES: u64 = 512;

/// Files start on MiB boundaries.
const FILE_ALIGNMENT_BYTES: u64 = 1 << 20;

/// How often stale streams are collected, virtual ns.
const COLLECT_EVERY_NS: Nanos = 1_000_000_000;

/// Who schedules the streams' reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HostScheduler {
    /// Every read goes to the drive.
    Baseline,
    /// Reads go through the engine's prefetcher with these settings.
    Prefetch(PrefetchSettings),
}

/// One run of `S` streams on one drive.
#[derive(Debug, Clone)]
pub struct StreamsConfig {
    /// The drive.
    pub model: Arc<DiskModel>,
    /// Streams (files) on the drive.
    pub streams: u32,
    /// Bytes of each read a stream issues.
    pub request_bytes: u64,
    /// The host's scheduler.
    pub scheduler: HostScheduler,
    /// Virtual duration of the run.
    pub duration_ns: Nanos,
    /// Time a reader waits after a read completes before issuing the next.
    pub think_ns: Nanos,
    /// Seed of the drive (its platter's initial angle).
    pub seed: u64,
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamsOutcome {
    /// Bytes the readers received per second after the warm-up, MB/s (10⁶ bytes).
    pub mb_s: f64,
    /// Each stream's mean response time after the warm-up, ms (`None` for a
    /// stream no read of which completed then).
    pub stream_mean_response_ms: Vec<Option<f64>>,
    /// Requests the drive completed after the warm-up.
    pub disk_requests: u64,
    /// Reads served from memory at once or after a wait (prefetch only).
    pub memory_reads: u64,
    /// Reads completed after the warm-up.
    pub reads: u64,
    /// The prefetcher's memory budget M, bytes (0 for the baseline).
    pub memory_budget_bytes: u64,
    /// The most memory the prefetcher held, bytes.
    pub memory_peak_bytes: u64,
    /// The drive's media rate at the files' starts, mean over the files, MB/s.
    pub media_mb_s: f64,
}

impl StreamsOutcome {
    /// The slowest stream's mean response over the fastest's (`None` if a
    /// stream completed nothing or the fastest took no time).
    pub fn response_time_spread(&self) -> Option<f64> {
        let means: Option<Vec<f64>> = self.stream_mean_response_ms.iter().copied().collect();
        let means = means?;
        let slowest = means.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let fastest = means.iter().copied().fold(f64::INFINITY, f64::min);
        (fastest > 0.0).then(|| slowest / fastest)
    }

    /// Mean response time over every stream, ms.
    pub fn mean_response_ms(&self) -> Option<f64> {
        let means: Vec<f64> = self.stream_mean_response_ms.iter().flatten().copied().collect();
        (!means.is_empty()).then(|| means.iter().sum::<f64>() / means.len() as f64)
    }
}

/// The media rate of the track holding `lbn`, MB/s.
pub fn media_mb_s_at(model: &DiskModel, lbn: u64) -> f64 {
    let track = model.track_of(lbn).expect("an LBN of the drive");
    let bytes_per_revolution = f64::from(track.sector_count) * model.sector_size_bytes() as f64;
    bytes_per_revolution / (model.revolution_ns() as f64 / 1e9) / 1e6
}

/// What a drive request stands for.
#[derive(Debug, Clone, Copy)]
enum Purpose {
    /// A stream's own read, passed through.
    Read { stream: usize, arrival_ns: Nanos },
    /// A prefetch.
    Prefetch(PrefetchIo),
}

#[derive(Debug, Default, Clone)]
struct StreamState {
    next_offset_bytes: u64,
    reads: u64,
    bytes: u64,
    response_ns: u128,
}

/// The host and its drive during one run.
struct Host {
    config: StreamsConfig,
    disk: HardDisk,
    prefetcher: Option<Prefetcher>,
    file_bytes: u64,
    streams: Vec<StreamState>,
    /// Readers ready to issue, by time.
    wakeups: BinaryHeap<Reverse<(Nanos, usize)>>,
    purposes: HashMap<u64, Purpose>,
    waiting: HashMap<ReadTicket, (usize, Nanos)>,
    next_request_id: u64,
    warm_up_ns: Nanos,
    disk_requests: u64,
    memory_reads: u64,
}

/// Runs the streams for the configured virtual time.
pub fn run_streams(config: &StreamsConfig) -> Result<StreamsOutcome, LabError> {
    let mut host = Host::new(config.clone())?;
    host.run();
    Ok(host.outcome())
}

impl Host {
    fn new(config: StreamsConfig) -> Result<Host, LabError> {
        if config.streams == 0 || config.request_bytes == 0 || !config.request_bytes.is_multiple_of(SECTOR_BYTES) {
            return Err(LabError::InvalidParameter {
                parameter: "streams",
                message: "at least one stream, reading whole sectors".into(),
            });
        }
        let drive_bytes = config.model.sector_count() * SECTOR_BYTES;
        let file_bytes = drive_bytes / u64::from(config.streams) / FILE_ALIGNMENT_BYTES * FILE_ALIGNMENT_BYTES;
        if file_bytes < config.request_bytes {
            return Err(LabError::InvalidParameter {
                parameter: "streams",
                message: format!("{} streams leave no room for a request on the drive", config.streams),
            });
        }
        let prefetcher =
            match config.scheduler {
                HostScheduler::Baseline => None,
                HostScheduler::Prefetch(settings) => Some(Prefetcher::new(settings).map_err(|error| {
                    LabError::InvalidParameter { parameter: "memory-mib", message: error.to_string() }
                })?),
            };
        let disk = HardDisk::new(Arc::clone(&config.model), config.seed);
        let stream_count = usize::try_from(config.streams).expect("a stream count fits in usize");
        let warm_up_ns = (config.duration_ns as f64 * WARM_UP_FRACTION) as Nanos;
        Ok(Host {
            disk,
            prefetcher,
            file_bytes,
            streams: vec![StreamState::default(); stream_count],
            wakeups: (0..stream_count).map(|stream| Reverse((0, stream))).collect(),
            purposes: HashMap::new(),
            waiting: HashMap::new(),
            next_request_id: 0,
            warm_up_ns,
            disk_requests: 0,
            memory_reads: 0,
            config,
        })
    }

    fn file_first_lbn(&self, stream: usize) -> u64 {
        stream as u64 * self.file_bytes / SECTOR_BYTES
    }

    fn run(&mut self) {
        let mut completions: Vec<DiskCompletion> = Vec::new();
        let mut next_collect_ns = COLLECT_EVERY_NS;
        loop {
            let wakeup = self.wakeups.peek().map(|Reverse((time, _))| *time);
            let disk_event = self.disk.next_event_ns();
            let Some(now) = [wakeup, disk_event].into_iter().flatten().min() else { break };
            if now > self.config.duration_ns {
                break;
            }
            if now >= next_collect_ns {
                if let Some(prefetcher) = self.prefetcher.as_mut() {
                    prefetcher.collect_stale(now);
                }
                next_collect_ns += COLLECT_EVERY_NS;
            }
            if disk_event == Some(now) {
                completions.clear();
                self.disk.advance(now, &mut completions);
                for completion in &completions {
                    self.on_disk_completion(completion);
                }
            } else {
                let Reverse((_, stream)) = self.wakeups.pop().expect("peeked");
                self.issue_read(stream, now);
            }
            self.dispatch(now);
        }
    }

    fn issue_read(&mut self, stream: usize, now: Nanos) {
        let request_bytes = self.config.request_bytes;
        let offset_bytes = self.streams[stream].next_offset_bytes;
        // A reader at its file's end starts the file again.
        let offset_bytes = if offset_bytes + request_bytes > self.file_bytes { 0 } else { offset_bytes };
        self.streams[stream].next_offset_bytes = offset_bytes + request_bytes;
        let Some(prefetcher) = self.prefetcher.as_mut() else {
            self.submit_read(stream, offset_bytes, now);
            return;
        };
        let read = ExtentRead {
            extent: stream as u64,
            extent_bytes: self.file_bytes,
            offset_bytes,
            length_bytes: request_bytes,
        };
        match prefetcher.on_read(read, now) {
            ReadDecision::Hit => {
                self.memory_reads += u64::from(now >= self.warm_up_ns);
                self.complete_read(stream, now, now);
            }
            ReadDecision::Wait(ticket) => {
                self.waiting.insert(ticket, (stream, now));
            }
            ReadDecision::Miss | ReadDecision::MissStartingStream(_) => self.submit_read(stream, offset_bytes, now),
        }
    }

    fn submit_read(&mut self, stream: usize, offset_bytes: u64, now: Nanos) {
        let lbn = self.file_first_lbn(stream) + offset_bytes / SECTOR_BYTES;
        let sectors = self.config.request_bytes / SECTOR_BYTES;
        self.submit(lbn, sectors, Purpose::Read { stream, arrival_ns: now }, now);
    }

    fn submit(&mut self, lbn: u64, sectors: u64, purpose: Purpose, now: Nanos) {
        let id = self.next_request_id;
        self.next_request_id += 1;
        let sector_count = u32::try_from(sectors).expect("a request's sectors fit in u32");
        self.purposes.insert(id, purpose);
        self.disk.arrive(now, DiskRequest { id, op: DiskOp::Read, lbn, sector_count });
    }

    fn dispatch(&mut self, now: Nanos) {
        while let Some(io) = self.prefetcher.as_mut().and_then(|prefetcher| prefetcher.next_dispatch(now)) {
            let stream = usize::try_from(io.extent).expect("an extent is a stream's index");
            let lbn = self.file_first_lbn(stream) + io.offset_bytes / SECTOR_BYTES;
            self.submit(lbn, io.length_bytes.div_ceil(SECTOR_BYTES), Purpose::Prefetch(io), now);
        }
    }

    fn on_disk_completion(&mut self, completion: &DiskCompletion) {
        let now = completion.completion_ns;
        self.disk_requests += u64::from(now >= self.warm_up_ns);
        match self.purposes.remove(&completion.id).expect("every drive request has a purpose") {
            Purpose::Read { stream, arrival_ns } => self.complete_read(stream, arrival_ns, now),
            Purpose::Prefetch(io) => {
                let prefetcher = self.prefetcher.as_mut().expect("prefetches come from the prefetcher");
                for ticket in prefetcher.on_complete(&io, now) {
                    let (stream, arrival_ns) = self.waiting.remove(&ticket).expect("a served read was waiting");
                    self.memory_reads += u64::from(now >= self.warm_up_ns);
                    self.complete_read(stream, arrival_ns, now);
                }
            }
        }
    }

    fn complete_read(&mut self, stream: usize, arrival_ns: Nanos, now: Nanos) {
        if now >= self.warm_up_ns {
            let state = &mut self.streams[stream];
            state.reads += 1;
            state.bytes += self.config.request_bytes;
            state.response_ns += u128::from(now - arrival_ns);
        }
        self.wakeups.push(Reverse((now + self.config.think_ns, stream)));
    }

    fn outcome(&self) -> StreamsOutcome {
        let measured_s = (self.config.duration_ns - self.warm_up_ns) as f64 / 1e9;
        let bytes: u64 = self.streams.iter().map(|state| state.bytes).sum();
        let stream_mean_response_ms = self
            .streams
            .iter()
            .map(|state| (state.reads > 0).then(|| state.response_ns as f64 / state.reads as f64 / 1e6))
            .collect();
        let media_mb_s = (0..self.streams.len())
            .map(|stream| media_mb_s_at(&self.config.model, self.file_first_lbn(stream)))
            .sum::<f64>()
            / self.streams.len() as f64;
        let (memory_budget_bytes, memory_peak_bytes) = self.prefetcher.as_ref().map_or((0, 0), |prefetcher| {
            (prefetcher.settings().memory_bytes_max, prefetcher.stats().memory_bytes_peak)
        });
        StreamsOutcome {
            mb_s: bytes as f64 / measured_s / 1e6,
            stream_mean_response_ms,
            disk_requests: self.disk_requests,
            memory_reads: self.memory_reads,
            reads: self.streams.iter().map(|state| state.reads).sum(),
            memory_budget_bytes,
            memory_peak_bytes,
            media_mb_s,
        }
    }
}
