//! Read-ahead on the exports' read path: the engine's many-stream prefetch
//! policy ([`Prefetcher`], docs/prefetch.md) decides which reads are
//! sequential and what to read ahead for them; this module does the reading
//! and keeps the data.
//!
//! - A read of an active extent asks the policy first. A random read, or a
//!   read that starts a stream, is read from the volume as it would be
//!   without read-ahead. A read whose bytes the policy holds (a hit) is
//!   copied from memory; a read whose prefetch is under way, or comes with
//!   its stream's next turn, waits for it and is then copied.
//! - Prefetch workers (one per dispatch slot, D) take the policy's next
//!   prefetch, read it from the volume as a client read is read (beside
//!   other readers where the devices allow), and keep its bytes in pieces of
//!   [`PIECE_BYTES`], each with the volume's content clock read under the
//!   same lock.
//! - A piece is let go as soon as the stream that read it no longer holds its
//!   bytes, unless a waiting read still needs it: the memory held is the
//!   policy's M plus at most a piece per stream (a window may start inside a
//!   piece).
//!
//! **Never stale.** A read answered from memory checks, under the volume's
//! read lock, that nothing it read changed since the oldest piece it used
//! was read (`Volume::content_changed_since`, which the engine keeps per
//! 1 MiB region of each extent: every write, trim, resize, deletion or
//! restore counts). If something did, the read drops the extent's stale
//! pieces and reads the volume. Changes take the write lock, so none
//! completes between the check and the reply: a read answered from memory
//! returns what a read of the volume would have returned at the check. A
//! piece missing (a prefetch that failed, a piece dropped as stale) sends the
//! read to the volume too: memory answers only with all of a read's bytes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use proxima_engine::prefetch::{
    ExtentRead, PrefetchIo, PrefetchSettings, Prefetcher, ReadDecision, ReadTicket, StreamId,
};
use proxima_nbd::BackendError;
use serde::Serialize;
use tracing::{debug, warn};

use crate::adapter::{lock_shared, read_active, SharedVolume};
use crate::directory::ServiceVolume;
use crate::error::{Result, ServiceError};

/// Prefetched data are kept in pieces of this size, so a stream's consumed
/// bytes are let go a piece at a time.
pub const PIECE_BYTES: usize = 64 << 10;

/// A rotating disk as the defaults assume it: a 7200 RPM drive's media rate
/// and its mean positioning (8.5 ms seek, half a revolution).
const ROTATIONAL_TRANSFER_BYTES_PER_S: u64 = 150_000_000;
const ROTATIONAL_POSITIONING_NS: u64 = 12_700_000;

/// A solid-state device as the defaults assume it: a SATA SSD's sequential
/// rate and a read's latency.
const SOLID_STATE_TRANSFER_BYTES_PER_S: u64 = 500_000_000;
const SOLID_STATE_POSITIONING_NS: u64 = 100_000;

/// How often the workers drop stale streams.
const COLLECT_EVERY: Duration = Duration::from_secs(1);

/// How long a read waits for its prefetch before reading the volume itself
/// (a prefetch stuck behind a device that stopped answering).
const WAIT_LIMIT: Duration = Duration::from_secs(10);

/// Read-ahead as `proxima serve` is told: off (the default), or on with any
/// of the policy's settings given (the rest derived from the data device).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReadAheadChoice {
    /// Every read goes to the volume.
    #[default]
    Off,
    /// Sequential streams are read ahead.
    On(ReadAheadOverrides),
}

/// Settings given explicitly; `None` derives the setting from the device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadAheadOverrides {
    /// R: bytes of one prefetch.
    pub readahead_bytes: Option<u64>,
    /// D: streams issuing prefetches at once (and prefetch workers).
    pub dispatch_streams: Option<usize>,
    /// N: prefetches per stream per turn.
    pub requests_per_turn: Option<u32>,
    /// M: bytes of prefetched data held at most.
    pub memory_bytes: Option<u64>,
}

impl ReadAheadOverrides {
    /// The policy's settings: R from the data device's class (rotating or
    /// solid-state, [`PrefetchSettings::for_device`]) unless given; D and N
    /// the policy's defaults unless given; M [`DEFAULT_MEMORY_TURNS`] turns
    /// of the dispatch set (`D·R·N`) unless given. Refuses an M below
    /// `D·R·N`, or a zero D, R or N.
    ///
    /// [`DEFAULT_MEMORY_TURNS`]: proxima_engine::prefetch::DEFAULT_MEMORY_TURNS
    pub fn settings(&self, rotational: bool) -> Result<PrefetchSettings> {
        let derived = if rotational {
            PrefetchSettings::for_device(ROTATIONAL_TRANSFER_BYTES_PER_S, ROTATIONAL_POSITIONING_NS)
        } else {
            PrefetchSettings::for_device(SOLID_STATE_TRANSFER_BYTES_PER_S, SOLID_STATE_POSITIONING_NS)
        };
        let mut settings = PrefetchSettings::with_readahead(self.readahead_bytes.unwrap_or(derived.readahead_bytes));
        settings.dispatch_streams = self.dispatch_streams.unwrap_or(settings.dispatch_streams);
        settings.requests_per_turn = self.requests_per_turn.unwrap_or(settings.requests_per_turn);
        let invalid = |message: String| ServiceError::InvalidParameter { parameter: "read-ahead".to_owned(), message };
        let turn_bytes = settings.turn_bytes().map_err(|error| invalid(error.to_string()))?;
        settings.memory_bytes_max = self
            .memory_bytes
            .unwrap_or_else(|| turn_bytes.saturating_mul(proxima_engine::prefetch::DEFAULT_MEMORY_TURNS));
        settings.validate().map_err(|error| invalid(error.to_string()))?;
        Ok(settings)
    }
}

/// Whether the file or block device at `path` sits on a rotating disk, as
/// the kernel reports it (`queue/rotational` of its block device, or of the
/// disk a partition is on). `None` when it cannot tell (a file on a file
/// system without a block device, or no sysfs).
pub fn is_rotational(path: &Path) -> Option<bool> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let metadata = std::fs::metadata(path).ok()?;
    let device = if metadata.file_type().is_block_device() { metadata.rdev() } else { metadata.dev() };
    let (major, minor) = (libc::major(device), libc::minor(device));
    let node = Path::new("/sys/dev/block").join(format!("{major}:{minor}"));
    // A partition's queue is its disk's, one level up.
    [node.join("queue/rotational"), node.join("../queue/rotational")]
        .iter()
        .find_map(|file| std::fs::read_to_string(file).ok())
        .map(|flag| flag.trim() == "1")
}

/// What the read-ahead has done since the server started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ReadAheadStats {
    /// Reads answered from memory.
    pub reads_from_memory: u64,
    /// Bytes answered from memory.
    pub bytes_from_memory: u64,
    /// Reads the policy answered that went to the volume after all: a piece
    /// was stale or missing.
    pub reads_fallen_back: u64,
    /// Prefetches read.
    pub prefetches: u64,
    /// Bytes prefetched.
    pub prefetched_bytes: u64,
    /// Prefetches that failed (their reads went to the volume).
    pub prefetch_errors: u64,
    /// Streams the policy confirmed sequential.
    pub streams_started: u64,
    /// Streams the policy dropped while their reader was idle, to make room
    /// for a read waiting on another stream.
    pub streams_evicted: u64,
    /// The most bytes of pieces held at once.
    pub memory_bytes_peak: u64,
}

/// One piece of a completed prefetch.
#[derive(Debug)]
struct Piece {
    /// The volume's content clock when the bytes were read.
    read_at: u64,
    bytes: Vec<u8>,
}

/// The read-ahead state, under one mutex.
#[derive(Debug)]
struct State {
    prefetcher: Prefetcher,
    /// `(extent, offset, stream)` → piece.
    pieces: BTreeMap<(u64, u64, StreamId), Piece>,
    piece_bytes: u64,
    /// Reads waiting for a prefetch: ticket → (extent, bytes).
    waiting: HashMap<ReadTicket, (u64, Range<u64>)>,
    /// Waiting reads whose prefetch completed.
    answered: HashSet<ReadTicket>,
    next_collection_ns: u64,
    stopping: bool,
    stats: ReadAheadStats,
}

impl State {
    /// Keeps a completed prefetch's pieces (see [`into_pieces`]), if its
    /// stream still holds them.
    fn keep(&mut self, io: &PrefetchIo, pieces: Vec<(u64, Piece)>) {
        if self.prefetcher.held_range(io.stream).is_none() {
            return;
        }
        for (offset, piece) in pieces {
            self.piece_bytes += piece.bytes.len() as u64;
            if let Some(old) = self.pieces.insert((io.extent, offset, io.stream), piece) {
                self.piece_bytes -= old.bytes.len() as u64;
            }
        }
        self.stats.memory_bytes_peak = self.stats.memory_bytes_peak.max(self.piece_bytes);
    }

    /// Lets go of the pieces of `extent` that neither their stream nor a
    /// waiting read holds. It runs under the state's lock after every
    /// prefetch and every waited read, so it visits each piece of the
    /// extent once, finding the waiting reads it overlaps by bisection.
    fn prune(&mut self, extent: u64) {
        let Self { prefetcher, pieces, piece_bytes, waiting, .. } = self;
        let awaited = disjoint_union(
            waiting.values().filter(|(read_extent, _)| *read_extent == extent).map(|(_, read)| read.clone()),
        );
        let unwanted: Vec<(u64, u64, StreamId)> = pieces
            .range((extent, 0, StreamId(0))..=(extent, u64::MAX, StreamId(u64::MAX)))
            .filter(|((_, offset, stream), piece)| {
                let bytes = *offset..*offset + piece.bytes.len() as u64;
                let held = prefetcher.held_range(*stream).is_some_and(|held| overlaps(&held, &bytes));
                !held && !overlaps_any(&awaited, &bytes)
            })
            .map(|(&key, _)| key)
            .collect();
        for key in unwanted {
            let piece = pieces.remove(&key).expect("listed");
            *piece_bytes -= piece.bytes.len() as u64;
        }
    }

    fn prune_all(&mut self) {
        let extents: HashSet<u64> = self.pieces.keys().map(|&(extent, _, _)| extent).collect();
        for extent in extents {
            self.prune(extent);
        }
    }

    /// Copies `[offset, offset + buffer.len())` of `extent` from pieces, and
    /// returns the content clock of the oldest piece used; `None` when the
    /// pieces do not cover the read.
    fn copy(&self, extent: u64, offset: u64, buffer: &mut [u8]) -> Option<u64> {
        let end = offset + buffer.len() as u64;
        let mut position = offset;
        let mut read_at = u64::MAX;
        while position < end {
            let low = position.saturating_sub(PIECE_BYTES as u64 - 1);
            let (&(_, piece_offset, _), piece) = self
                .pieces
                .range((extent, low, StreamId(0))..=(extent, position, StreamId(u64::MAX)))
                .filter(|(&(_, piece_offset, _), piece)| piece_offset + piece.bytes.len() as u64 > position)
                .max_by_key(|(_, piece)| piece.read_at)?;
            read_at = read_at.min(piece.read_at);
            let piece_end = (piece_offset + piece.bytes.len() as u64).min(end);
            let from = usize::try_from(position - piece_offset).expect("within a piece");
            let length = usize::try_from(piece_end - position).expect("within a piece");
            let to = usize::try_from(position - offset).expect("within the read");
            buffer[to..to + length].copy_from_slice(&piece.bytes[from..from + length]);
            position = piece_end;
        }
        Some(read_at)
    }

    /// Drops the pieces of `extent` whose bytes changed since they were read.
    fn drop_stale(&mut self, volume: &ServiceVolume, extent: u64) {
        let stale: Vec<(u64, u64, StreamId)> = self
            .pieces
            .range((extent, 0, StreamId(0))..=(extent, u64::MAX, StreamId(u64::MAX)))
            .filter(|(&(_, offset, _), piece)| {
                volume.content_changed_since(extent, offset, piece.bytes.len() as u64, piece.read_at)
            })
            .map(|(&key, _)| key)
            .collect();
        for key in stale {
            let piece = self.pieces.remove(&key).expect("listed");
            self.piece_bytes -= piece.bytes.len() as u64;
        }
    }
}

fn overlaps(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end
}

/// `ranges` as sorted, disjoint ranges covering the same bytes.
fn disjoint_union(ranges: impl Iterator<Item = Range<u64>>) -> Vec<Range<u64>> {
    let mut sorted: Vec<Range<u64>> = ranges.filter(|range| !range.is_empty()).collect();
    sorted.sort_unstable_by_key(|range| range.start);
    let mut union: Vec<Range<u64>> = Vec::with_capacity(sorted.len());
    for range in sorted {
        match union.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => union.push(range),
        }
    }
    union
}

/// Whether `range` overlaps any of `union` (sorted and disjoint).
fn overlaps_any(union: &[Range<u64>], range: &Range<u64>) -> bool {
    let first_ending_after = union.partition_point(|covered| covered.end <= range.start);
    union.get(first_ending_after).is_some_and(|covered| covered.start < range.end)
}

/// A prefetch's bytes cut into pieces of [`PIECE_BYTES`], keyed by offset,
/// all read at content clock `read_at`; done before the state is locked.
fn into_pieces(offset_bytes: u64, read_at: u64, bytes: &[u8]) -> Vec<(u64, Piece)> {
    bytes
        .chunks(PIECE_BYTES)
        .enumerate()
        .map(|(index, chunk)| (offset_bytes + (index * PIECE_BYTES) as u64, Piece { read_at, bytes: chunk.to_vec() }))
        .collect()
}

/// The read-ahead of one served volume (see the module documentation).
#[derive(Debug)]
pub(crate) struct ReadAhead {
    state: Mutex<State>,
    /// Wakes reads waiting for a prefetch.
    answered: Condvar,
    /// Wakes the workers: the policy may have a prefetch to issue.
    work: Condvar,
    started: Instant,
}

impl ReadAhead {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// What it has done so far.
    pub(crate) fn stats(&self) -> ReadAheadStats {
        let state = self.lock();
        let policy = state.prefetcher.stats();
        ReadAheadStats {
            streams_started: policy.streams_started,
            streams_evicted: policy.streams_evicted,
            ..state.stats
        }
    }

    /// Reads `buffer.len()` bytes at `offset_bytes` of active extent `id`
    /// (an export of `extent_bytes`): from memory when the policy has them
    /// and they are current, else from the volume.
    pub(crate) fn read(
        &self,
        volume: &SharedVolume,
        export: &str,
        (id, extent_bytes): (u64, u64),
        offset_bytes: u64,
        buffer: &mut [u8],
    ) -> std::result::Result<(), BackendError> {
        let length_bytes = buffer.len() as u64;
        let request = ExtentRead { extent: id, extent_bytes, offset_bytes, length_bytes };
        let copied = {
            let mut state = self.lock();
            let decision = state.prefetcher.on_read(request, self.now_ns());
            let copied = match decision {
                ReadDecision::Miss | ReadDecision::MissStartingStream(_) => None,
                ReadDecision::Hit => Some(state.copy(id, offset_bytes, buffer)),
                ReadDecision::Wait(ticket) => {
                    state.waiting.insert(ticket, (id, offset_bytes..offset_bytes + length_bytes));
                    self.work.notify_all();
                    Some(self.wait_and_copy(state, ticket, id, offset_bytes, buffer))
                }
            };
            if !matches!(decision, ReadDecision::Miss) {
                // The read may have made room or asked for the stream's next turn.
                self.work.notify_all();
            }
            copied
        };
        if let Some(copied) = copied {
            if self.current(volume, export, (id, offset_bytes, length_bytes), copied)? {
                return Ok(());
            }
        }
        read_active(volume, export, id, offset_bytes, buffer).map(drop)
    }

    /// Waits for `ticket`'s prefetch (at most [`WAIT_LIMIT`]), then copies
    /// the read from memory; `None` when the wait gave up or the server is
    /// stopping.
    fn wait_and_copy(
        &self,
        mut state: MutexGuard<'_, State>,
        ticket: ReadTicket,
        id: u64,
        offset_bytes: u64,
        buffer: &mut [u8],
    ) -> Option<u64> {
        let deadline = Instant::now() + WAIT_LIMIT;
        // The wait may be long (the stream's turn comes after other streams'):
        // the server's other workers keep answering other clients meanwhile,
        // whose reads from memory would otherwise queue behind it and their
        // streams be taken for idle.
        state = proxima_nbd::pool::blocking(move || {
            while !state.answered.contains(&ticket) && !state.stopping {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    warn!(
                        extent = id,
                        offset_bytes, "a read waited {WAIT_LIMIT:?} for its prefetch; reading the volume"
                    );
                    break;
                }
                state = self.answered.wait_timeout(state, left).unwrap_or_else(PoisonError::into_inner).0;
            }
            state
        });
        let copied = state.answered.remove(&ticket).then(|| state.copy(id, offset_bytes, buffer)).flatten();
        state.waiting.remove(&ticket);
        state.prune(id);
        copied
    }

    /// Whether bytes of `(extent, offset, length)` copied from pieces read
    /// at content clock `copied` (`None`: not copied) are the extent's
    /// current contents; counts the outcome, and drops the extent's stale
    /// pieces when they are not.
    fn current(
        &self,
        volume: &SharedVolume,
        export: &str,
        (id, offset_bytes, length_bytes): (u64, u64, u64),
        copied: Option<u64>,
    ) -> std::result::Result<bool, BackendError> {
        let volume = lock_shared(volume, export)?;
        let mut state = self.lock();
        if copied.is_some_and(|read_at| !volume.content_changed_since(id, offset_bytes, length_bytes, read_at)) {
            state.stats.reads_from_memory += 1;
            state.stats.bytes_from_memory += length_bytes;
            return Ok(true);
        }
        state.stats.reads_fallen_back += 1;
        state.drop_stale(&volume, id);
        Ok(false)
    }
}

/// The read-ahead and its workers; stopped and joined when dropped.
#[derive(Debug)]
pub(crate) struct ReadAheadWorkers {
    read_ahead: Arc<ReadAhead>,
    threads: Vec<JoinHandle<()>>,
}

impl ReadAheadWorkers {
    /// Starts a read-ahead of `settings` over `volume`, with one worker per
    /// dispatch slot.
    pub(crate) fn start(volume: Weak<RwLock<ServiceVolume>>, settings: PrefetchSettings) -> Self {
        let prefetcher = Prefetcher::new(settings).expect("settings validated by ReadAheadOverrides::settings");
        let state = State {
            prefetcher,
            pieces: BTreeMap::new(),
            piece_bytes: 0,
            waiting: HashMap::new(),
            answered: HashSet::new(),
            next_collection_ns: 0,
            stopping: false,
            stats: ReadAheadStats::default(),
        };
        let read_ahead = Arc::new(ReadAhead {
            state: Mutex::new(state),
            answered: Condvar::new(),
            work: Condvar::new(),
            started: Instant::now(),
        });
        let threads = (0..settings.dispatch_streams)
            .filter_map(|index| {
                let read_ahead = Arc::clone(&read_ahead);
                let volume = Weak::clone(&volume);
                let spawned = std::thread::Builder::new()
                    .name(format!("read-ahead-{index}"))
                    .spawn(move || work(&read_ahead, &volume));
                spawned.map_err(|error| warn!("a read-ahead worker cannot start: {error}")).ok()
            })
            .collect();
        Self { read_ahead, threads }
    }

    pub(crate) fn read_ahead(&self) -> &ReadAhead {
        &self.read_ahead
    }
}

impl Drop for ReadAheadWorkers {
    fn drop(&mut self) {
        self.read_ahead.lock().stopping = true;
        self.read_ahead.work.notify_all();
        self.read_ahead.answered.notify_all();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        debug!(stats = ?self.read_ahead.stats(), "read-ahead stopped");
    }
}

/// A worker: issues the policy's prefetches one at a time, and drops stale
/// streams every [`COLLECT_EVERY`].
fn work(read_ahead: &ReadAhead, volume: &Weak<RwLock<ServiceVolume>>) {
    loop {
        let io = {
            let mut state = read_ahead.lock();
            loop {
                if state.stopping {
                    return;
                }
                let now = read_ahead.now_ns();
                if now >= state.next_collection_ns {
                    state.prefetcher.collect_stale(now);
                    state.prune_all();
                    state.next_collection_ns =
                        now.saturating_add(u64::try_from(COLLECT_EVERY.as_nanos()).unwrap_or(u64::MAX));
                }
                if let Some(io) = state.prefetcher.next_dispatch(now) {
                    break io;
                }
                // A waiting read may be blocked by memory that idle streams
                // hold: look again once they may be dropped for it.
                let pause = if state.waiting.is_empty() {
                    COLLECT_EVERY
                } else {
                    Duration::from_nanos(state.prefetcher.settings().evict_idle_after_ns / 2)
                        .max(Duration::from_millis(1))
                };
                state = read_ahead.work.wait_timeout(state, pause).unwrap_or_else(PoisonError::into_inner).0;
            }
        };
        let mut bytes = vec![0u8; usize::try_from(io.length_bytes).expect("a prefetch fits in memory")];
        let outcome = match volume.upgrade() {
            Some(volume) => read_active(&volume, "read-ahead", io.extent, io.offset_bytes, &mut bytes),
            None => return,
        };
        let outcome = outcome.map(|read_at| into_pieces(io.offset_bytes, read_at, &bytes));
        drop(bytes);
        let mut state = read_ahead.lock();
        match outcome {
            Ok(pieces) => {
                state.stats.prefetches += 1;
                state.stats.prefetched_bytes += io.length_bytes;
                state.keep(&io, pieces);
            }
            Err(error) => {
                debug!(extent = io.extent, offset_bytes = io.offset_bytes, "prefetch failed: {error}");
                state.stats.prefetch_errors += 1;
            }
        }
        let now = read_ahead.now_ns();
        for ticket in state.prefetcher.on_complete(&io, now) {
            if state.waiting.contains_key(&ticket) {
                state.answered.insert(ticket);
            }
        }
        state.prune(io.extent);
        drop(state);
        read_ahead.answered.notify_all();
        read_ahead.work.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_reads_merge_into_disjoint_ranges_found_by_bisection() {
        let union = disjoint_union([10..20, 0..5, 15..30, 40..40, 30..35, 50..60].into_iter());
        assert_eq!(union, vec![0..5, 10..35, 50..60]);
        for (range, expected) in [(5..10, false), (4..6, true), (35..50, false), (34..36, true), (59..70, true)] {
            assert_eq!(overlaps_any(&union, &range), expected, "{range:?}");
            let by_scan = [0..5, 10..20, 15..30, 30..35, 50..60].iter().any(|read| overlaps(read, &range));
            assert_eq!(by_scan, expected, "{range:?}");
        }
        assert!(!overlaps_any(&[], &(0..u64::MAX)));
    }

    #[test]
    fn a_prefetch_is_cut_into_pieces_at_its_offsets() {
        let bytes: Vec<u8> = (0..PIECE_BYTES * 2 + 100).map(|index| u8::try_from(index % 251).unwrap()).collect();
        let pieces = into_pieces(4096, 7, &bytes);
        let offsets: Vec<u64> = pieces.iter().map(|(offset, _)| *offset).collect();
        assert_eq!(offsets, vec![4096, 4096 + PIECE_BYTES as u64, 4096 + 2 * PIECE_BYTES as u64]);
        assert!(pieces.iter().all(|(_, piece)| piece.read_at == 7));
        let joined: Vec<u8> = pieces.into_iter().flat_map(|(_, piece)| piece.bytes).collect();
        assert_eq!(joined, bytes);
    }
}
