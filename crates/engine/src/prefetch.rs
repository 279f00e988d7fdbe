//! Many-stream sequential prefetch as a pure policy: which reads are served
//! from memory, which wait for a prefetch, which pass straight through, and
//! which prefetch I/O the disk gets next. No I/O happens here; the caller
//! (the laboratory's simulated host, later the engine's read path) performs
//! what it is told and reports back.
//!
//! # Model
//!
//! - **Classifier.** Per extent, every read is matched against the streams
//!   whose last read ended within [`PrefetchSettings::sequential_tolerance_bytes`]
//!   of the read's start. A read matching nothing starts a *candidate*; a
//!   candidate whose next read continues it becomes *sequential*
//!   ([`SEQUENTIAL_READS_TO_PREFETCH`] reads in a row). Reads of candidates
//!   and unmatched (random) reads pass straight through.
//! - **Window.** A sequential stream holds the bytes `[window_start,
//!   issued_end)` of its extent: ready (`< ready_end`) or in flight. A read
//!   inside the ready part is a hit and releases everything below its end; a
//!   read inside the window but not yet ready waits for its prefetch; a read
//!   just past the window waits for the stream's next turn; anything else
//!   (a straddle, a read longer than R, a jump back) passes through.
//! - **Dispatch set (D).** Streams that want data queue in FIFO order for one
//!   of D dispatch slots. A stream in a slot issues N prefetches of R bytes
//!   at its window's end, one after another, then the next slot's stream
//!   issues (round robin over the set, a whole turn at a time, so the disk
//!   sees each stream's N requests back to back). A stream leaves the set
//!   when its N prefetches have completed; its data stay *staged* (the
//!   buffered set) until read or timed out. It asks for its next turn when
//!   its unread data fall to half a turn, or when a reader waits on it.
//! - **Origins.** Where each sequential stream's first read began is kept
//!   (the newest [`ORIGINS_MAX`] of every extent together). A stream's prefetch
//!   stops at the next origin ahead of it, and the stream asks for no turn
//!   there until its reader reads on past it: readers of neighbouring
//!   regions of one extent (files packed side by side, clients each given a
//!   part) stop where the next one began, and what a prefetch read beyond it
//!   would be read again by the stream already there, or not at all.
//! - **Memory (M).** Every byte of the window and every byte of an in-flight
//!   prefetch the stream no longer wants counts against M; a prefetch is
//!   issued only if its bytes fit. `M ≥ D·R·N` is checked at construction, so
//!   the whole dispatch set's turn always fits once staged data are read.
//! - **Staleness.** A stream whose reader has not read for
//!   [`PrefetchSettings::stale_after_ns`] and has no read waiting is dropped
//!   with its staged data ([`Prefetcher::collect_stale`]).
//!
//! # Invariants
//!
//! - Memory held never exceeds M (asserted whenever it grows).
//! - Every read is answered exactly once: a hit, a pass-through, or a wait
//!   answered by a later [`Prefetcher::on_complete`] from memory.
//! - A stream with a waiting read is never collected, and holds a queue place,
//!   a dispatch slot, or an in-flight prefetch covering the read: it is
//!   answered once the caller completes what it was told to issue and readers
//!   of other streams read (or time out) what they were given.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use thiserror::Error;

/// Reads in a row, each continuing the previous one, after which a stream is
/// prefetched (the first read of a run of two starts a candidate, the second
/// confirms it).
pub const SEQUENTIAL_READS_TO_PREFETCH: u32 = 2;

/// The transfer of one read-ahead is at least this many times the positioning
/// it pays ([`PrefetchSettings::for_device`]): the disk then spends at least
/// 10/11 ≈ 91 % of its time transferring, whatever the number of streams.
pub const TRANSFER_TO_POSITIONING_RATIO: u64 = 10;

/// Read-ahead sizes are whole multiples of this.
pub const READAHEAD_GRANULE_BYTES: u64 = 1 << 20;

/// Streams in the dispatch set by default: two, so the disk always has the
/// next stream's request queued while it serves one.
pub const DEFAULT_DISPATCH_STREAMS: usize = 2;

/// Prefetches a stream issues per turn by default.
pub const DEFAULT_REQUESTS_PER_TURN: u32 = 1;

/// The default memory budget, in dispatch-set turns (`D·R·N`): one turn in
/// flight while the previous one is still being read.
pub const DEFAULT_MEMORY_TURNS: u64 = 2;

/// A new stream's first prefetches are this many times the read that
/// confirmed it, at least [`PrefetchSettings::initial_readahead_bytes`] (and
/// at most R); each turn doubles them up to R, as Linux's read-ahead window
/// grows.
pub const INITIAL_READAHEAD_READS: u64 = 4;
/// Default least size of a new stream's first prefetches.
pub const DEFAULT_INITIAL_READAHEAD_BYTES: u64 = 128 << 10;

/// Candidates (reads not yet known to be sequential) tracked per extent; a
/// new one past this drops the oldest.
pub const CANDIDATES_PER_EXTENT_MAX: usize = 64;

/// Origins of sequential streams kept, of every extent together (a bound on
/// memory however many extents a server reads over its life); a new one past
/// this forgets the oldest.
pub const ORIGINS_MAX: usize = 65_536;

/// Default idle time after which a stream is dropped, ns.
pub const DEFAULT_STALE_AFTER_NS: u64 = 10_000_000_000;

/// Default idle time after which a stream's staged data may be dropped to
/// make room for a prefetch a waiting read needs, ns.
pub const DEFAULT_EVICT_IDLE_AFTER_NS: u64 = 100_000_000;

/// Default gap or overlap between a read and its stream's last end that still
/// counts as continuing it.
pub const DEFAULT_SEQUENTIAL_TOLERANCE_BYTES: u64 = 64 << 10;

/// The scheduler's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefetchSettings {
    /// D: streams issuing prefetches at once.
    pub dispatch_streams: usize,
    /// R: bytes of one prefetch I/O.
    pub readahead_bytes: u64,
    /// N: prefetches a stream issues per turn in the dispatch set.
    pub requests_per_turn: u32,
    /// M: bytes the staged and in-flight prefetches may hold together.
    pub memory_bytes_max: u64,
    /// A stream not read for this long (and with no read waiting) is dropped.
    pub stale_after_ns: u64,
    /// When memory is full and a read waits, a stream not read for this long
    /// (with no read waiting and no prefetch in flight) is dropped with its
    /// staged data to make room: readers that went away do not hold up those
    /// still reading for up to `stale_after_ns`.
    pub evict_idle_after_ns: u64,
    /// A read starting this close to a sequential stream's last end
    /// continues it (a candidate's must start exactly there).
    pub sequential_tolerance_bytes: u64,
    /// The least size of a new stream's first prefetches, which double each
    /// turn up to R: a stream found by chance among random reads costs
    /// little. R or more: every prefetch is R.
    pub initial_readahead_bytes: u64,
}

/// Why settings were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PrefetchSettingsError {
    /// D, R or N is zero.
    #[error("the dispatch set, the read-ahead and the requests per turn must be at least 1")]
    Zero,
    /// `D·R·N` does not fit in 64 bits.
    #[error("the dispatch set's memory D·R·N overflows")]
    Overflow,
    /// M is smaller than the dispatch set's turn.
    #[error("memory {memory_bytes_max} bytes is below D·R·N = {turn_bytes} bytes")]
    MemoryBelowTurn {
        /// M as given.
        memory_bytes_max: u64,
        /// D·R·N.
        turn_bytes: u64,
    },
}

impl PrefetchSettings {
    /// Settings for a device transferring `transfer_bytes_per_s` that pays
    /// `positioning_ns` (seek and rotation) before each request.
    ///
    /// R is the smallest whole number of MiB whose transfer takes at least
    /// [`TRANSFER_TO_POSITIONING_RATIO`] times the positioning: every prefetch
    /// pays one positioning however many streams share the disk, so the disk
    /// keeps at least 10/11 of its media rate. D, N and the timeouts are the
    /// defaults above; M is [`DEFAULT_MEMORY_TURNS`] turns of the dispatch set.
    pub fn for_device(transfer_bytes_per_s: u64, positioning_ns: u64) -> PrefetchSettings {
        let wanted_bytes =
            u128::from(transfer_bytes_per_s) * u128::from(positioning_ns) * u128::from(TRANSFER_TO_POSITIONING_RATIO)
                / 1_000_000_000;
        let wanted_bytes = u64::try_from(wanted_bytes).unwrap_or(u64::MAX);
        let readahead_bytes = wanted_bytes.div_ceil(READAHEAD_GRANULE_BYTES).max(1) * READAHEAD_GRANULE_BYTES;
        PrefetchSettings::with_readahead(readahead_bytes)
    }

    /// The default settings with a read-ahead of `readahead_bytes`.
    pub fn with_readahead(readahead_bytes: u64) -> PrefetchSettings {
        let turn_bytes = DEFAULT_DISPATCH_STREAMS as u64 * readahead_bytes * u64::from(DEFAULT_REQUESTS_PER_TURN);
        PrefetchSettings {
            dispatch_streams: DEFAULT_DISPATCH_STREAMS,
            readahead_bytes,
            requests_per_turn: DEFAULT_REQUESTS_PER_TURN,
            memory_bytes_max: turn_bytes.saturating_mul(DEFAULT_MEMORY_TURNS),
            stale_after_ns: DEFAULT_STALE_AFTER_NS,
            evict_idle_after_ns: DEFAULT_EVICT_IDLE_AFTER_NS,
            sequential_tolerance_bytes: DEFAULT_SEQUENTIAL_TOLERANCE_BYTES,
            initial_readahead_bytes: DEFAULT_INITIAL_READAHEAD_BYTES,
        }
    }

    /// D·R·N: the bytes the dispatch set's turn holds.
    pub fn turn_bytes(&self) -> Result<u64, PrefetchSettingsError> {
        (self.dispatch_streams as u64)
            .checked_mul(self.readahead_bytes)
            .and_then(|bytes| bytes.checked_mul(u64::from(self.requests_per_turn)))
            .ok_or(PrefetchSettingsError::Overflow)
    }

    /// Checks D, R, N ≥ 1 and M ≥ D·R·N.
    pub fn validate(&self) -> Result<(), PrefetchSettingsError> {
        if self.dispatch_streams == 0 || self.readahead_bytes == 0 || self.requests_per_turn == 0 {
            return Err(PrefetchSettingsError::Zero);
        }
        let turn_bytes = self.turn_bytes()?;
        if self.memory_bytes_max < turn_bytes {
            return Err(PrefetchSettingsError::MemoryBelowTurn { memory_bytes_max: self.memory_bytes_max, turn_bytes });
        }
        Ok(())
    }
}

/// Identifies a stream the classifier found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

/// Identifies a read that waits for a prefetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReadTicket(pub u64);

/// One read a client asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtentRead {
    /// The extent read (the caller's number for it).
    pub extent: u64,
    /// The extent's length: prefetches stop there.
    pub extent_bytes: u64,
    /// First byte read.
    pub offset_bytes: u64,
    /// Bytes read (at least 1).
    pub length_bytes: u64,
}

impl ExtentRead {
    fn end_bytes(&self) -> u64 {
        self.offset_bytes + self.length_bytes
    }
}

/// How a read is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadDecision {
    /// Served from memory now.
    Hit,
    /// Served from memory when a prefetch completes: [`Prefetcher::on_complete`]
    /// returns the ticket then.
    Wait(ReadTicket),
    /// Read from the device by the caller; nothing is kept.
    Miss,
    /// Read from the device by the caller; this read confirmed a sequential
    /// stream, which prefetching now follows.
    MissStartingStream(StreamId),
}

/// A prefetch the caller issues to the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PrefetchIo {
    /// Identifies the I/O in [`Prefetcher::on_complete`].
    pub io_id: u64,
    /// The stream it is for.
    pub stream: StreamId,
    /// The extent read.
    pub extent: u64,
    /// First byte.
    pub offset_bytes: u64,
    /// Bytes (R, or less at the extent's end).
    pub length_bytes: u64,
}

/// What the prefetcher has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrefetchStats {
    /// Reads served from memory at once.
    pub hits: u64,
    /// Reads that waited for a prefetch.
    pub waits: u64,
    /// Reads passed through to the device.
    pub misses: u64,
    /// Streams confirmed sequential.
    pub streams_started: u64,
    /// Streams dropped as stale.
    pub streams_collected: u64,
    /// Streams dropped idle to make room for a waiting read.
    pub streams_evicted: u64,
    /// Prefetch I/Os issued.
    pub prefetches: u64,
    /// Bytes prefetched.
    pub prefetched_bytes: u64,
    /// Bytes served from memory (hits and answered waits).
    pub served_bytes: u64,
    /// The most memory held at once.
    pub memory_bytes_peak: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// Not waiting for a turn.
    Idle,
    /// In the FIFO of streams waiting for a dispatch slot.
    Queued,
    /// In the dispatch set.
    Dispatched,
}

#[derive(Debug, Clone, Copy)]
struct InFlight {
    io_id: u64,
    offset_bytes: u64,
    end_bytes: u64,
    done: bool,
}

#[derive(Debug, Clone, Copy)]
struct PendingRead {
    ticket: ReadTicket,
    offset_bytes: u64,
    end_bytes: u64,
}

#[derive(Debug)]
struct Stream {
    extent: u64,
    extent_bytes: u64,
    /// Reads in a row continuing each other (saturating).
    run_reads: u32,
    /// Where the last read ended: the classifier's key.
    cursor_bytes: u64,
    /// Where the stream's first read began.
    origin_bytes: u64,
    last_read_ns: u64,
    sequential: bool,
    window_start_bytes: u64,
    ready_end_bytes: u64,
    issued_end_bytes: u64,
    /// Bytes of this stream's prefetches: starting small and doubling each
    /// turn up to R, so a stream found by chance costs little.
    readahead_bytes: u64,
    /// Prefetches not yet folded into the ready part, by offset.
    in_flight: Vec<InFlight>,
    /// Reads waiting, in arrival order.
    pending: VecDeque<PendingRead>,
    turn: Turn,
}

impl Stream {
    fn unread_bytes(&self) -> u64 {
        self.issued_end_bytes - self.window_start_bytes
    }

    /// Bytes of prefetches still in flight that lie in `[start, end)`.
    fn in_flight_bytes_within(&self, start: u64, end: u64) -> u64 {
        self.in_flight
            .iter()
            .filter(|io| !io.done)
            .map(|io| io.end_bytes.min(end).saturating_sub(io.offset_bytes.max(start)))
            .sum()
    }

    /// Whether a read waits for bytes beyond what the stream has issued.
    fn reader_waits_past(&self) -> bool {
        self.pending.back().is_some_and(|pending| pending.end_bytes > self.issued_end_bytes)
    }

    /// Memory this stream holds: its window, and in-flight bytes below it.
    fn held_bytes(&self) -> u64 {
        self.unread_bytes() + self.in_flight_bytes_within(0, self.window_start_bytes)
    }
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    stream: StreamId,
    /// Prefetches issued in this turn.
    issued: u32,
    /// Of those, not yet completed.
    in_flight: u32,
    /// The turn issues nothing more (N issued, or the extent's end reached).
    issuing_done: bool,
}

/// The many-stream prefetch scheduler (see the module documentation).
#[derive(Debug)]
pub struct Prefetcher {
    settings: PrefetchSettings,
    streams: HashMap<StreamId, Stream>,
    /// Per extent, candidates in the order they started (some may since
    /// have become sequential or been dropped: skipped when met).
    candidates: HashMap<u64, VecDeque<StreamId>>,
    /// `(extent, cursor, stream)`: streams by where their next read starts.
    by_cursor: BTreeSet<(u64, u64, StreamId)>,
    /// `(extent, origin)` → sequential streams that began there (kept).
    origins: BTreeMap<(u64, u64), u32>,
    /// The origins kept, `(extent, origin)`, oldest first.
    origin_order: VecDeque<(u64, u64)>,
    want_turn: VecDeque<StreamId>,
    dispatch_set: Vec<Slot>,
    /// The slot whose stream issues next.
    dispatch_cursor: usize,
    /// In-flight prefetches of dropped streams: bytes to free on completion.
    orphans: HashMap<u64, u64>,
    /// Which stream each in-flight prefetch belongs to.
    io_streams: HashMap<u64, StreamId>,
    memory_bytes: u64,
    next_stream: u64,
    next_ticket: u64,
    next_io: u64,
    stats: PrefetchStats,
}

impl Prefetcher {
    /// A scheduler with no streams; refuses settings with `M < D·R·N`.
    pub fn new(settings: PrefetchSettings) -> Result<Prefetcher, PrefetchSettingsError> {
        settings.validate()?;
        Ok(Prefetcher {
            settings,
            streams: HashMap::new(),
            candidates: HashMap::new(),
            by_cursor: BTreeSet::new(),
            origins: BTreeMap::new(),
            origin_order: VecDeque::new(),
            want_turn: VecDeque::new(),
            dispatch_set: Vec::new(),
            dispatch_cursor: 0,
            orphans: HashMap::new(),
            io_streams: HashMap::new(),
            memory_bytes: 0,
            next_stream: 0,
            next_ticket: 0,
            next_io: 0,
            stats: PrefetchStats::default(),
        })
    }

    /// The settings.
    pub fn settings(&self) -> &PrefetchSettings {
        &self.settings
    }

    /// Bytes held now by staged data and in-flight prefetches.
    pub fn memory_bytes(&self) -> u64 {
        self.memory_bytes
    }

    /// Counts so far.
    pub fn stats(&self) -> PrefetchStats {
        self.stats
    }

    /// Streams tracked (candidates and sequential).
    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }

    /// Decides how `read`, arriving at `now_ns`, is answered.
    ///
    /// # Panics
    /// If the read is empty.
    pub fn on_read(&mut self, read: ExtentRead, now_ns: u64) -> ReadDecision {
        assert!(read.length_bytes > 0, "an empty read");
        let decision = match self.find_stream(&read) {
            None => {
                self.start_candidate(&read, now_ns);
                ReadDecision::Miss
            }
            Some(id) => {
                let decision = self.continue_stream(id, &read, now_ns);
                // Reading may have brought the stream's unread data to its refill mark.
                self.ask_for_turn_if_needed(id);
                decision
            }
        };
        match decision {
            ReadDecision::Hit => self.stats.hits += 1,
            ReadDecision::Wait(_) => self.stats.waits += 1,
            ReadDecision::Miss | ReadDecision::MissStartingStream(_) => self.stats.misses += 1,
        }
        decision
    }

    /// The next prefetch to issue, if a stream in the dispatch set has one
    /// left in its turn and its bytes fit in memory. Call it until `None`
    /// after every other call.
    pub fn next_dispatch(&mut self, now_ns: u64) -> Option<PrefetchIo> {
        self.fill_dispatch_set();
        let slot_count = self.dispatch_set.len();
        for step in 0..slot_count {
            let index = (self.dispatch_cursor + step) % slot_count;
            let slot = self.dispatch_set[index];
            if slot.issuing_done {
                continue;
            }
            let stream = &self.streams[&slot.stream];
            let length_bytes = if stops_at_origin(&self.origins, stream) {
                0
            } else {
                // Never short of a waiting read's end: one prefetch of at
                // most R brings all of it, so D·R·N still answers it.
                let waited_end = stream.pending.back().map_or(0, |pending| pending.end_bytes);
                let clip_after = stream.issued_end_bytes.max(waited_end.saturating_sub(1));
                let end = stream.extent_bytes.min(self.next_origin(stream.extent, clip_after));
                stream.readahead_bytes.min(end.saturating_sub(stream.issued_end_bytes))
            };
            if length_bytes == 0 {
                // The extent's end, or another stream's origin its reader has
                // not read past: the turn is over with what was issued.
                self.end_turn_early(index);
                return self.next_dispatch(now_ns);
            }
            if self.memory_bytes + length_bytes > self.settings.memory_bytes_max {
                if self.evict_idle_stream(now_ns) {
                    return self.next_dispatch(now_ns);
                }
                return None;
            }
            return Some(self.issue(index, length_bytes));
        }
        None
    }

    /// Records that `io` completed at `now_ns`; returns the waiting reads it
    /// answered (served from memory), in arrival order per stream.
    ///
    /// # Panics
    /// If `io` was not issued by this prefetcher or completed before.
    pub fn on_complete(&mut self, io: &PrefetchIo, _now_ns: u64) -> Vec<ReadTicket> {
        if let Some(orphan_bytes) = self.orphans.remove(&io.io_id) {
            self.release_memory(orphan_bytes);
            return Vec::new();
        }
        let stream_id = self.io_streams.remove(&io.io_id).expect("a prefetch completes once");
        let stream = self.streams.get_mut(&stream_id).expect("a prefetch's stream is tracked");
        let position = stream.in_flight.iter().position(|entry| entry.io_id == io.io_id).expect("in flight");
        let entry = &mut stream.in_flight[position];
        entry.done = true;
        let below_window = entry.end_bytes.min(stream.window_start_bytes).saturating_sub(entry.offset_bytes);
        fold_ready(stream);
        self.release_memory(below_window);
        if let Some(index) = self.dispatch_set.iter().position(|slot| slot.stream == stream_id) {
            let slot = &mut self.dispatch_set[index];
            slot.in_flight -= 1;
            if slot.issuing_done && slot.in_flight == 0 {
                self.leave_dispatch_set(index);
            }
        }
        let served = self.serve_pending(stream_id);
        self.ask_for_turn_if_needed(stream_id);
        served
    }

    /// The bytes of its extent that `stream` holds (its window: ready or in
    /// flight), or `None` once the stream is dropped. A caller keeping the
    /// data of completed prefetches may let go of whatever lies outside it.
    pub fn held_range(&self, stream: StreamId) -> Option<std::ops::Range<u64>> {
        self.streams.get(&stream).map(|stream| stream.window_start_bytes..stream.issued_end_bytes)
    }

    /// Drops streams not read since `now_ns - stale_after_ns` with no read
    /// waiting, and their staged data; returns how many.
    pub fn collect_stale(&mut self, now_ns: u64) -> usize {
        let stale: Vec<StreamId> = self
            .streams
            .iter()
            .filter(|(_, stream)| {
                stream.pending.is_empty() && now_ns.saturating_sub(stream.last_read_ns) >= self.settings.stale_after_ns
            })
            .map(|(&id, _)| id)
            .collect();
        for &id in &stale {
            self.drop_stream(id);
        }
        self.stats.streams_collected += stale.len() as u64;
        stale.len()
    }

    /// Checks every invariant the bookkeeping keeps (for tests; linear in
    /// the streams).
    ///
    /// # Panics
    /// If one does not hold.
    pub fn check_invariants(&self) {
        let held: u64 = self.streams.values().map(Stream::held_bytes).sum::<u64>() + self.orphans.values().sum::<u64>();
        assert_eq!(held, self.memory_bytes, "memory accounting");
        assert!(self.memory_bytes <= self.settings.memory_bytes_max, "memory above M");
        assert!(self.dispatch_set.len() <= self.settings.dispatch_streams, "dispatch set above D");
        for (id, stream) in &self.streams {
            assert!(stream.window_start_bytes <= stream.ready_end_bytes);
            assert!(stream.ready_end_bytes <= stream.issued_end_bytes);
            assert!(stream.issued_end_bytes <= stream.extent_bytes.max(stream.window_start_bytes));
            assert!(self.by_cursor.contains(&(stream.extent, stream.cursor_bytes, *id)), "cursor index");
            let queued = self.want_turn.iter().filter(|&&queued| queued == *id).count();
            let slotted = self.dispatch_set.iter().filter(|slot| slot.stream == *id).count();
            match stream.turn {
                Turn::Idle => assert!(queued == 0 && slotted == 0),
                Turn::Queued => assert!(queued == 1 && slotted == 0),
                Turn::Dispatched => assert!(queued == 0 && slotted == 1),
            }
            for pending in &stream.pending {
                assert!(pending.offset_bytes >= stream.window_start_bytes, "a waiting read's bytes are held");
                assert!(
                    pending.end_bytes <= stream.issued_end_bytes || stream.turn != Turn::Idle,
                    "a waiting read is covered"
                );
            }
        }
        assert_eq!(self.by_cursor.len(), self.streams.len());
    }

    /// The stream `read` continues: a sequential stream whose cursor is
    /// within the tolerance, or a candidate whose cursor is exactly where the
    /// read starts (so that random reads over a small region, which land
    /// near one of many candidates' cursors, are not taken for streams).
    fn find_stream(&self, read: &ExtentRead) -> Option<StreamId> {
        let tolerance = self.settings.sequential_tolerance_bytes;
        let low = read.offset_bytes.saturating_sub(tolerance);
        let high = read.offset_bytes.saturating_add(tolerance);
        self.by_cursor
            .range((read.extent, low, StreamId(0))..=(read.extent, high, StreamId(u64::MAX)))
            .filter(|(_, cursor, id)| *cursor == read.offset_bytes || self.streams[id].sequential)
            .min_by_key(|(_, cursor, _)| cursor.abs_diff(read.offset_bytes))
            .map(|&(_, _, id)| id)
    }

    fn start_candidate(&mut self, read: &ExtentRead, now_ns: u64) {
        let id = StreamId(self.next_stream);
        self.next_stream += 1;
        let end = read.end_bytes();
        self.streams.insert(
            id,
            Stream {
                extent: read.extent,
                extent_bytes: read.extent_bytes,
                run_reads: 1,
                cursor_bytes: end,
                origin_bytes: read.offset_bytes,
                last_read_ns: now_ns,
                sequential: false,
                window_start_bytes: end,
                ready_end_bytes: end,
                issued_end_bytes: end,
                readahead_bytes: 0,
                in_flight: Vec::new(),
                pending: VecDeque::new(),
                turn: Turn::Idle,
            },
        );
        self.by_cursor.insert((read.extent, end, id));
        // Bound the candidates per extent: the oldest still a candidate goes.
        let candidates = self.candidates.entry(read.extent).or_default();
        candidates.push_back(id);
        while candidates.len() > CANDIDATES_PER_EXTENT_MAX {
            let oldest = candidates.pop_front().expect("longer than the bound");
            if self.streams.get(&oldest).is_some_and(|stream| !stream.sequential && stream.pending.is_empty()) {
                self.drop_stream(oldest);
                break;
            }
        }
    }

    fn continue_stream(&mut self, id: StreamId, read: &ExtentRead, now_ns: u64) -> ReadDecision {
        let settings = self.settings;
        let (extent, old_cursor) = {
            let stream = self.streams.get_mut(&id).expect("found");
            stream.last_read_ns = now_ns;
            stream.extent_bytes = stream.extent_bytes.max(read.extent_bytes);
            stream.run_reads = stream.run_reads.saturating_add(1);
            (stream.extent, std::mem::replace(&mut stream.cursor_bytes, read.end_bytes()))
        };
        self.by_cursor.remove(&(extent, old_cursor, id));
        self.by_cursor.insert((extent, read.end_bytes(), id));
        let stream = &self.streams[&id];
        if !stream.sequential {
            if stream.run_reads < SEQUENTIAL_READS_TO_PREFETCH {
                return ReadDecision::Miss;
            }
            self.begin_prefetching(id, read.end_bytes(), read.length_bytes);
            self.stats.streams_started += 1;
            return ReadDecision::MissStartingStream(id);
        }
        let (start, end) = (read.offset_bytes, read.end_bytes());
        let has_pending = !stream.pending.is_empty();
        if start < stream.window_start_bytes
            || read.length_bytes > settings.readahead_bytes
            || end > stream.extent_bytes
        {
            self.release_through(id, end);
            return ReadDecision::Miss;
        }
        if end <= stream.ready_end_bytes && !has_pending {
            self.release_through(id, end);
            self.stats.served_bytes += read.length_bytes;
            return ReadDecision::Hit;
        }
        if end <= stream.issued_end_bytes {
            return self.wait(id, start, end, has_pending);
        }
        if start < stream.issued_end_bytes || (has_pending && start != stream.issued_end_bytes) {
            // A straddle: half of it is not coming from one turn.
            self.release_through(id, end);
            return ReadDecision::Miss;
        }
        // Just past the window: the stream's next turn brings it.
        let ticket = self.wait(id, start, end, has_pending);
        self.ask_for_turn_if_needed(id);
        ticket
    }

    fn wait(&mut self, id: StreamId, start: u64, end: u64, has_pending: bool) -> ReadDecision {
        if !has_pending {
            self.release_through(id, start);
        }
        let ticket = ReadTicket(self.next_ticket);
        self.next_ticket += 1;
        let stream = self.streams.get_mut(&id).expect("found");
        stream.pending.push_back(PendingRead { ticket, offset_bytes: start, end_bytes: end });
        ReadDecision::Wait(ticket)
    }

    fn begin_prefetching(&mut self, id: StreamId, position_bytes: u64, read_bytes: u64) {
        let first_readahead_bytes = (INITIAL_READAHEAD_READS * read_bytes)
            .max(self.settings.initial_readahead_bytes)
            .min(self.settings.readahead_bytes);
        let stream = self.streams.get_mut(&id).expect("found");
        assert!(stream.in_flight.is_empty() && stream.unread_bytes() == 0, "a candidate holds nothing");
        let (extent, origin) = (stream.extent, stream.origin_bytes);
        stream.sequential = true;
        stream.readahead_bytes = first_readahead_bytes;
        stream.window_start_bytes = position_bytes;
        stream.ready_end_bytes = position_bytes;
        stream.issued_end_bytes = position_bytes;
        self.remember_origin(extent, origin);
        self.ask_for_turn_if_needed(id);
    }

    /// Keeps `origin` as where a sequential stream of `extent` began,
    /// forgetting the oldest kept past [`ORIGINS_MAX`].
    fn remember_origin(&mut self, extent: u64, origin: u64) {
        *self.origins.entry((extent, origin)).or_default() += 1;
        self.origin_order.push_back((extent, origin));
        if self.origin_order.len() > ORIGINS_MAX {
            let oldest = self.origin_order.pop_front().expect("longer than the bound");
            let count = self.origins.get_mut(&oldest).expect("kept in order");
            *count -= 1;
            if *count == 0 {
                self.origins.remove(&oldest);
            }
        }
    }

    /// The first origin of `extent` after `position`, or the end of the
    /// address space.
    fn next_origin(&self, extent: u64, position_bytes: u64) -> u64 {
        self.origins
            .range((extent, position_bytes.saturating_add(1))..=(extent, u64::MAX))
            .next()
            .map_or(u64::MAX, |(&(_, origin), _)| origin)
    }

    /// Releases the stream's bytes below `position` (never a waiting read's);
    /// a position past the window empties it there.
    fn release_through(&mut self, id: StreamId, position_bytes: u64) {
        let stream = self.streams.get_mut(&id).expect("found");
        let limit = stream.pending.front().map_or(position_bytes, |pending| pending.offset_bytes.min(position_bytes));
        if limit <= stream.window_start_bytes {
            return;
        }
        let released_end = limit.min(stream.issued_end_bytes);
        let window_start = stream.window_start_bytes;
        let still_in_flight = stream.in_flight_bytes_within(window_start, released_end);
        let freed = released_end - window_start - still_in_flight;
        stream.window_start_bytes = limit;
        stream.ready_end_bytes = stream.ready_end_bytes.max(limit);
        stream.issued_end_bytes = stream.issued_end_bytes.max(limit);
        stream.in_flight.retain(|io| !(io.done && io.end_bytes <= limit));
        fold_ready(stream);
        self.release_memory(freed);
    }

    fn ask_for_turn_if_needed(&mut self, id: StreamId) {
        let requests_per_turn = u64::from(self.settings.requests_per_turn);
        let stream = self.streams.get_mut(&id).expect("found");
        let refill_bytes = stream.readahead_bytes * requests_per_turn / 2;
        let wants = stream.sequential
            && stream.turn == Turn::Idle
            && stream.issued_end_bytes < stream.extent_bytes
            && (stream.reader_waits_past()
                || (stream.unread_bytes() <= refill_bytes && !stops_at_origin(&self.origins, stream)));
        if wants {
            stream.turn = Turn::Queued;
            self.want_turn.push_back(id);
        }
    }

    fn fill_dispatch_set(&mut self) {
        while self.dispatch_set.len() < self.settings.dispatch_streams {
            let Some(id) = self.want_turn.pop_front() else { break };
            let stream = self.streams.get_mut(&id).expect("a queued stream is tracked");
            stream.turn = Turn::Dispatched;
            self.dispatch_set.push(Slot { stream: id, issued: 0, in_flight: 0, issuing_done: false });
        }
    }

    fn issue(&mut self, slot_index: usize, length_bytes: u64) -> PrefetchIo {
        let slot = &mut self.dispatch_set[slot_index];
        slot.issued += 1;
        slot.in_flight += 1;
        slot.issuing_done = slot.issued == self.settings.requests_per_turn;
        let turn_issued = slot.issuing_done;
        let stream_id = slot.stream;
        // A stream issues its whole turn back to back, then the next one.
        self.dispatch_cursor = if turn_issued { slot_index + 1 } else { slot_index };
        let stream = self.streams.get_mut(&stream_id).expect("a dispatched stream is tracked");
        if turn_issued {
            // The next turn reads twice as far ahead, up to R.
            stream.readahead_bytes = (2 * stream.readahead_bytes).min(self.settings.readahead_bytes);
        }
        let io_id = self.next_io;
        self.next_io += 1;
        let offset_bytes = stream.issued_end_bytes;
        stream.issued_end_bytes += length_bytes;
        stream.in_flight.push(InFlight { io_id, offset_bytes, end_bytes: offset_bytes + length_bytes, done: false });
        self.io_streams.insert(io_id, stream_id);
        self.memory_bytes += length_bytes;
        assert!(self.memory_bytes <= self.settings.memory_bytes_max, "prefetch memory above M");
        self.stats.memory_bytes_peak = self.stats.memory_bytes_peak.max(self.memory_bytes);
        self.stats.prefetches += 1;
        self.stats.prefetched_bytes += length_bytes;
        PrefetchIo { io_id, stream: stream_id, extent: stream.extent, offset_bytes, length_bytes }
    }

    /// The stream in `slot_index` reached its extent's end: it stops issuing,
    /// and leaves once what it issued has completed.
    fn end_turn_early(&mut self, slot_index: usize) {
        let slot = &mut self.dispatch_set[slot_index];
        slot.issuing_done = true;
        if slot.in_flight == 0 {
            let id = slot.stream;
            self.leave_dispatch_set(slot_index);
            self.ask_for_turn_if_needed(id);
        }
    }

    fn leave_dispatch_set(&mut self, slot_index: usize) {
        let slot = self.dispatch_set.remove(slot_index);
        if self.dispatch_cursor > slot_index {
            self.dispatch_cursor -= 1;
        }
        if self.dispatch_cursor >= self.dispatch_set.len() {
            self.dispatch_cursor = 0;
        }
        if let Some(stream) = self.streams.get_mut(&slot.stream) {
            stream.turn = Turn::Idle;
        }
    }

    fn serve_pending(&mut self, id: StreamId) -> Vec<ReadTicket> {
        let mut served = Vec::new();
        loop {
            let stream = self.streams.get_mut(&id).expect("found");
            let Some(&front) = stream.pending.front() else { break };
            if front.end_bytes > stream.ready_end_bytes {
                break;
            }
            stream.pending.pop_front();
            served.push(front.ticket);
            self.stats.served_bytes += front.end_bytes - front.offset_bytes;
            self.release_through(id, front.end_bytes);
        }
        served
    }

    fn drop_stream(&mut self, id: StreamId) {
        let stream = self.streams.remove(&id).expect("found");
        assert!(stream.pending.is_empty(), "a stream with a waiting read is never dropped");
        self.by_cursor.remove(&(stream.extent, stream.cursor_bytes, id));
        match stream.turn {
            Turn::Idle => {}
            Turn::Queued => self.want_turn.retain(|&queued| queued != id),
            Turn::Dispatched => {
                let index = self.dispatch_set.iter().position(|slot| slot.stream == id).expect("slotted");
                self.leave_dispatch_set(index);
            }
        }
        let mut kept = 0;
        for io in stream.in_flight.iter().filter(|io| !io.done) {
            let bytes = io.end_bytes - io.offset_bytes;
            self.io_streams.remove(&io.io_id);
            self.orphans.insert(io.io_id, bytes);
            kept += bytes;
        }
        self.release_memory(stream.held_bytes() - kept);
    }

    /// Memory is full: when a read waits, drops the stream idle longest (at
    /// least `evict_idle_after_ns`) that holds staged data, has no read
    /// waiting and no prefetch in flight; returns whether one was dropped.
    fn evict_idle_stream(&mut self, now_ns: u64) -> bool {
        if self.streams.values().all(|stream| stream.pending.is_empty()) {
            return false;
        }
        let idle_after = self.settings.evict_idle_after_ns;
        let victim = self
            .streams
            .iter()
            .filter(|(_, stream)| {
                stream.pending.is_empty()
                    && stream.turn != Turn::Dispatched
                    && stream.in_flight.iter().all(|io| io.done)
                    && stream.held_bytes() > 0
                    && now_ns.saturating_sub(stream.last_read_ns) >= idle_after
            })
            .min_by_key(|(&id, stream)| (stream.last_read_ns, id))
            .map(|(&id, _)| id);
        let Some(victim) = victim else { return false };
        self.drop_stream(victim);
        self.stats.streams_evicted += 1;
        true
    }

    fn release_memory(&mut self, bytes: u64) {
        assert!(bytes <= self.memory_bytes, "releasing more than is held");
        self.memory_bytes -= bytes;
    }
}

/// Whether `stream` has prefetched up to another stream's origin (its own
/// lies behind its window) and no read of its own waits beyond it: it
/// prefetches no further for now.
fn stops_at_origin(origins: &BTreeMap<(u64, u64), u32>, stream: &Stream) -> bool {
    !stream.reader_waits_past() && origins.contains_key(&(stream.extent, stream.issued_end_bytes))
}

/// Folds completed prefetches that continue the ready part into it.
fn fold_ready(stream: &mut Stream) {
    stream.in_flight.sort_by_key(|io| io.offset_bytes);
    let mut ready_end = stream.ready_end_bytes;
    stream.in_flight.retain(|io| {
        if io.done && io.offset_bytes <= ready_end {
            ready_end = ready_end.max(io.end_bytes);
            false
        } else {
            !(io.done && io.end_bytes <= ready_end)
        }
    });
    stream.ready_end_bytes = ready_end.max(stream.window_start_bytes);
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashSet};

    use proptest::prelude::*;

    use super::*;

    const MIB: u64 = 1 << 20;
    const KIB: u64 = 1 << 10;
    const EXTENT_BYTES: u64 = 1 << 40;

    fn settings(
        dispatch_streams: usize,
        readahead_bytes: u64,
        requests_per_turn: u32,
        memory_bytes_max: u64,
    ) -> PrefetchSettings {
        PrefetchSettings {
            dispatch_streams,
            readahead_bytes,
            requests_per_turn,
            memory_bytes_max,
            stale_after_ns: 1_000,
            evict_idle_after_ns: 100,
            sequential_tolerance_bytes: 4 * KIB,
            initial_readahead_bytes: readahead_bytes,
        }
    }

    fn read(extent: u64, offset_bytes: u64, length_bytes: u64) -> ExtentRead {
        ExtentRead { extent, extent_bytes: EXTENT_BYTES, offset_bytes, length_bytes }
    }

    fn dispatch_all(prefetcher: &mut Prefetcher) -> Vec<PrefetchIo> {
        std::iter::from_fn(|| prefetcher.next_dispatch(0)).collect()
    }

    /// Starts a stream on `extent` with two 128 KiB reads from 0.
    fn start_stream(prefetcher: &mut Prefetcher, extent: u64) -> StreamId {
        start_stream_at(prefetcher, extent, 0, 128 * KIB, 0)
    }

    /// Starts a stream on `extent` at `now_ns` with two reads of
    /// `read_bytes` from `offset_bytes`.
    fn start_stream_at(
        prefetcher: &mut Prefetcher,
        extent: u64,
        offset_bytes: u64,
        read_bytes: u64,
        now_ns: u64,
    ) -> StreamId {
        assert_eq!(prefetcher.on_read(read(extent, offset_bytes, read_bytes), now_ns), ReadDecision::Miss);
        match prefetcher.on_read(read(extent, offset_bytes + read_bytes, read_bytes), now_ns) {
            ReadDecision::MissStartingStream(id) => id,
            other => panic!("the second read starts the stream, got {other:?}"),
        }
    }

    #[test]
    fn a_prefetch_stops_where_another_stream_began_until_its_reader_reads_on() {
        let mut prefetcher = Prefetcher::new(settings(2, 4 * MIB, 1, 16 * MIB)).unwrap();
        // A second reader's region begins at 6 MiB.
        let neighbour = 6 * MIB;
        start_stream_at(&mut prefetcher, 0, neighbour, 128 * KIB, 0);
        let first = start_stream(&mut prefetcher, 0);
        let ios: Vec<PrefetchIo> = dispatch_all(&mut prefetcher).into_iter().filter(|io| io.stream == first).collect();
        assert_eq!(ios.len(), 1);
        assert_eq!((ios[0].offset_bytes, ios[0].length_bytes), (256 * KIB, 4 * MIB));
        prefetcher.on_complete(&ios[0], 0);
        // Reading most of it asks for the next turn, which stops at 6 MiB.
        assert_eq!(prefetcher.on_read(read(0, 256 * KIB, 3 * MIB), 0), ReadDecision::Hit);
        let next: Vec<PrefetchIo> = dispatch_all(&mut prefetcher).into_iter().filter(|io| io.stream == first).collect();
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].offset_bytes + next[0].length_bytes, neighbour, "clipped at the neighbour's origin");
        prefetcher.on_complete(&next[0], 0);
        // Read up to the origin: no turn beyond it is asked for.
        let held = prefetcher.held_range(first).unwrap();
        assert_eq!(prefetcher.on_read(read(0, held.start, held.end - held.start), 0), ReadDecision::Hit);
        assert!(dispatch_all(&mut prefetcher).iter().all(|io| io.stream != first));
        // The reader reads on past it: its stream prefetches from there.
        assert!(matches!(prefetcher.on_read(read(0, neighbour, 128 * KIB), 0), ReadDecision::Wait(_)));
        let past: Vec<PrefetchIo> = dispatch_all(&mut prefetcher).into_iter().filter(|io| io.stream == first).collect();
        assert_eq!(past.len(), 1);
        assert_eq!((past[0].offset_bytes, past[0].length_bytes), (neighbour, 4 * MIB));
        assert_eq!(prefetcher.on_complete(&past[0], 0).len(), 1, "the waiting read is answered");
        prefetcher.check_invariants();
    }

    #[test]
    fn origins_are_bounded_over_every_extent_together() {
        let mut prefetcher = Prefetcher::new(settings(2, 4 * MIB, 1, 16 * MIB)).unwrap();
        // One origin on each of ORIGINS_MAX + 1 extents: the first is forgotten.
        for extent in 0..=ORIGINS_MAX as u64 {
            prefetcher.remember_origin(extent, MIB);
        }
        assert_eq!(prefetcher.origins.len(), ORIGINS_MAX);
        assert_eq!(prefetcher.next_origin(0, 0), u64::MAX, "the oldest extent's origin went");
        assert_eq!(prefetcher.next_origin(1, 0), MIB);
        // An origin kept twice stays while one of its two remains.
        prefetcher.remember_origin(1, MIB);
        prefetcher.remember_origin(ORIGINS_MAX as u64 + 1, MIB);
        assert_eq!(prefetcher.next_origin(1, 0), MIB, "the newer of the two is kept");
    }

    #[test]
    fn a_read_waiting_across_an_origin_gets_one_whole_prefetch() {
        // M holds one R: a read waiting across another stream's origin must
        // come from one prefetch, not one stopped at the origin and a second
        // that no longer fits.
        let mut prefetcher = Prefetcher::new(settings(1, 64 * KIB, 1, 64 * KIB)).unwrap();
        start_stream_at(&mut prefetcher, 0, 200 * KIB, 4 * KIB, 0);
        for io in dispatch_all(&mut prefetcher) {
            prefetcher.on_complete(&io, 0);
        }
        // The neighbour goes away; where it began is remembered.
        prefetcher.collect_stale(1_000);
        assert_eq!(prefetcher.memory_bytes(), 0);
        start_stream_at(&mut prefetcher, 0, 0, 64 * KIB, 1_000);
        let first = dispatch_all(&mut prefetcher);
        assert_eq!(first.len(), 1);
        prefetcher.on_complete(&first[0], 1_000);
        assert_eq!(prefetcher.on_read(read(0, 128 * KIB, 64 * KIB), 1_000), ReadDecision::Hit);
        let ReadDecision::Wait(ticket) = prefetcher.on_read(read(0, 192 * KIB, 64 * KIB), 1_000) else {
            panic!("a read just past the window waits for the next turn");
        };
        let next = dispatch_all(&mut prefetcher);
        assert_eq!(next.len(), 1);
        assert_eq!((next[0].offset_bytes, next[0].length_bytes), (192 * KIB, 64 * KIB), "not stopped at the origin");
        assert_eq!(prefetcher.on_complete(&next[0], 1_000), vec![ticket]);
        prefetcher.check_invariants();
    }

    #[test]
    fn settings_below_one_turn_of_the_dispatch_set_are_refused() {
        let error = Prefetcher::new(settings(4, 8 * MIB, 2, 63 * MIB)).unwrap_err();
        assert_eq!(error, PrefetchSettingsError::MemoryBelowTurn { memory_bytes_max: 63 * MIB, turn_bytes: 64 * MIB });
        assert_eq!(Prefetcher::new(settings(0, MIB, 1, MIB)).unwrap_err(), PrefetchSettingsError::Zero);
        assert_eq!(Prefetcher::new(settings(2, u64::MAX, 2, u64::MAX)).unwrap_err(), PrefetchSettingsError::Overflow);
        assert!(Prefetcher::new(settings(4, 8 * MIB, 2, 64 * MIB)).is_ok());
    }

    #[test]
    fn the_device_rule_transfers_ten_positionings_per_readahead() {
        // 60 MB/s and 12.5 ms: 7.5 MB, rounded up to 8 MiB (the paper's R).
        let device = PrefetchSettings::for_device(60_000_000, 12_500_000);
        assert_eq!(device.readahead_bytes, 8 * MIB);
        let transfer_ns = device.readahead_bytes as f64 / 60e6 * 1e9;
        assert!(transfer_ns >= 10.0 * 12.5e6);
        assert_eq!(device.memory_bytes_max, DEFAULT_MEMORY_TURNS * device.turn_bytes().unwrap());
        device.validate().unwrap();
        // A fast device with no positioning still reads ahead a granule.
        assert_eq!(PrefetchSettings::for_device(1_000_000_000, 0).readahead_bytes, READAHEAD_GRANULE_BYTES);
    }

    #[test]
    fn random_reads_pass_through_and_prefetch_nothing() {
        let mut prefetcher = Prefetcher::new(settings(2, MIB, 1, 2 * MIB)).unwrap();
        for (index, offset) in [7 * MIB, 3 * MIB, 900 * MIB, 40 * MIB, 5 * MIB].into_iter().enumerate() {
            assert_eq!(prefetcher.on_read(read(1, offset, 4 * KIB), index as u64), ReadDecision::Miss);
        }
        assert!(dispatch_all(&mut prefetcher).is_empty());
        assert_eq!(prefetcher.memory_bytes(), 0);
        assert_eq!(prefetcher.stats().streams_started, 0);
        prefetcher.check_invariants();
    }

    #[test]
    fn a_sequential_reader_waits_once_per_readahead_then_hits() {
        let mut prefetcher = Prefetcher::new(settings(1, MIB, 1, 2 * MIB)).unwrap();
        let stream = start_stream(&mut prefetcher, 3);
        let ios = dispatch_all(&mut prefetcher);
        assert_eq!(ios.len(), 1);
        assert_eq!(
            (ios[0].stream, ios[0].extent, ios[0].offset_bytes, ios[0].length_bytes),
            (stream, 3, 256 * KIB, MIB)
        );
        let ReadDecision::Wait(ticket) = prefetcher.on_read(read(3, 256 * KIB, 128 * KIB), 1) else {
            panic!("the read waits for the prefetch in flight")
        };
        assert_eq!(prefetcher.on_complete(&ios[0], 2), vec![ticket]);
        for index in 1..8 {
            assert_eq!(prefetcher.on_read(read(3, 256 * KIB + index * 128 * KIB, 128 * KIB), 3), ReadDecision::Hit);
            prefetcher.check_invariants();
        }
        assert_eq!(prefetcher.memory_bytes(), 0, "everything read is released");
        // Half-way through the first read-ahead the stream asked for its next turn.
        let next = dispatch_all(&mut prefetcher);
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].offset_bytes, 256 * KIB + MIB);
        assert_eq!(prefetcher.stats().served_bytes, MIB);
    }

    #[test]
    fn the_dispatch_set_serves_whole_turns_round_robin() {
        let mut prefetcher = Prefetcher::new(settings(2, MIB, 2, 8 * MIB)).unwrap();
        let streams: Vec<StreamId> = (0..3).map(|extent| start_stream(&mut prefetcher, extent)).collect();
        let first = dispatch_all(&mut prefetcher);
        let order: Vec<StreamId> = first.iter().map(|io| io.stream).collect();
        assert_eq!(order, [streams[0], streams[0], streams[1], streams[1]], "two streams, N back to back each");
        // The third stream gets its turn once the first stream's turn completes.
        assert!(prefetcher.on_complete(&first[0], 1).is_empty());
        assert!(dispatch_all(&mut prefetcher).is_empty(), "the first stream's turn is not over");
        prefetcher.on_complete(&first[1], 1);
        let second = dispatch_all(&mut prefetcher);
        assert_eq!(second.iter().map(|io| io.stream).collect::<Vec<_>>(), [streams[2], streams[2]]);
        prefetcher.check_invariants();
    }

    #[test]
    fn dispatch_stops_at_the_memory_budget_and_resumes_as_data_are_read() {
        let mut prefetcher = Prefetcher::new(settings(1, MIB, 1, MIB)).unwrap();
        start_stream(&mut prefetcher, 0);
        start_stream(&mut prefetcher, 1);
        let first = dispatch_all(&mut prefetcher);
        assert_eq!(first.len(), 1);
        prefetcher.on_complete(&first[0], 1);
        assert_eq!(prefetcher.memory_bytes(), MIB);
        assert!(dispatch_all(&mut prefetcher).is_empty(), "the staged megabyte fills M");
        let extent = first[0].extent;
        for index in 0..4 {
            assert_eq!(
                prefetcher.on_read(read(extent, 256 * KIB + index * 128 * KIB, 128 * KIB), 2),
                ReadDecision::Hit
            );
        }
        assert!(dispatch_all(&mut prefetcher).is_empty(), "half a megabyte is still staged");
        for index in 4..8 {
            assert_eq!(
                prefetcher.on_read(read(extent, 256 * KIB + index * 128 * KIB, 128 * KIB), 2),
                ReadDecision::Hit
            );
        }
        let next = dispatch_all(&mut prefetcher);
        assert_eq!(next.len(), 1);
        assert_ne!(next[0].extent, extent, "the other stream, queued first, goes next");
        prefetcher.check_invariants();
    }

    #[test]
    fn stale_streams_are_dropped_with_their_staged_data() {
        let mut prefetcher = Prefetcher::new(settings(1, MIB, 1, MIB)).unwrap();
        start_stream(&mut prefetcher, 0);
        let ios = dispatch_all(&mut prefetcher);
        prefetcher.on_complete(&ios[0], 10);
        assert_eq!(prefetcher.memory_bytes(), MIB);
        assert_eq!(prefetcher.collect_stale(999), 0, "not idle long enough");
        assert_eq!(prefetcher.collect_stale(1_000), 1);
        assert_eq!(prefetcher.memory_bytes(), 0);
        assert_eq!(prefetcher.stream_count(), 0);
        prefetcher.check_invariants();
    }

    #[test]
    fn a_waiting_read_gets_the_memory_of_a_stream_idle_long_enough() {
        // Memory for one turn: stream 0's staged data fill it.
        let mut prefetcher = Prefetcher::new(settings(1, MIB, 1, MIB)).unwrap();
        start_stream(&mut prefetcher, 0);
        let ios = dispatch_all(&mut prefetcher);
        prefetcher.on_complete(&ios[0], 0);
        // Stream 1's reader, at time 50, waits for its first turn.
        let starts = |offset_bytes| read(1, offset_bytes, 128 * KIB);
        assert_eq!(prefetcher.on_read(starts(0), 50), ReadDecision::Miss);
        assert!(matches!(prefetcher.on_read(starts(128 * KIB), 50), ReadDecision::MissStartingStream(_)));
        let ReadDecision::Wait(ticket) = prefetcher.on_read(starts(256 * KIB), 50) else { panic!("waits") };
        assert_eq!(prefetcher.next_dispatch(99), None, "stream 0 was read 99 ns ago: kept");
        let io = prefetcher.next_dispatch(100).expect("stream 0, idle 100 ns, is dropped for it");
        assert_eq!((io.extent, io.offset_bytes), (1, 256 * KIB));
        assert_eq!(prefetcher.stats().streams_evicted, 1);
        assert_eq!(prefetcher.on_complete(&io, 101), vec![ticket]);
        prefetcher.check_invariants();
    }

    #[test]
    fn a_prefetch_of_a_dropped_stream_frees_its_memory_on_completion() {
        let mut prefetcher = Prefetcher::new(settings(1, MIB, 1, MIB)).unwrap();
        start_stream(&mut prefetcher, 0);
        let ios = dispatch_all(&mut prefetcher);
        assert_eq!(prefetcher.collect_stale(5_000), 1);
        assert_eq!(prefetcher.memory_bytes(), MIB, "the buffer is the device's until it completes");
        assert!(prefetcher.on_complete(&ios[0], 5_001).is_empty());
        assert_eq!(prefetcher.memory_bytes(), 0);
        prefetcher.check_invariants();
    }

    #[test]
    fn prefetches_stop_at_the_extent_end() {
        let mut prefetcher = Prefetcher::new(settings(1, MIB, 2, 2 * MIB)).unwrap();
        let small = |offset_bytes| ExtentRead { extent: 0, extent_bytes: MIB, offset_bytes, length_bytes: 128 * KIB };
        assert_eq!(prefetcher.on_read(small(0), 0), ReadDecision::Miss);
        assert!(matches!(prefetcher.on_read(small(128 * KIB), 0), ReadDecision::MissStartingStream(_)));
        let ios = dispatch_all(&mut prefetcher);
        assert_eq!(ios.len(), 1);
        assert_eq!((ios[0].offset_bytes, ios[0].length_bytes), (256 * KIB, 768 * KIB));
        prefetcher.on_complete(&ios[0], 1);
        assert!(dispatch_all(&mut prefetcher).is_empty());
        prefetcher.check_invariants();
    }

    /// One step of a random interleaving.
    #[derive(Debug, Clone)]
    enum Step {
        /// Reader `reader` issues its next read, of `blocks` 4 KiB blocks (a
        /// jump elsewhere if `jump`).
        Read { reader: usize, blocks: u64, jump: bool },
        /// A random read of the shared extent.
        Random { offset_blocks: u64 },
        /// The `index`-th in-flight prefetch (modulo their number) completes.
        Complete { index: usize },
        /// Time passes and stale streams are collected.
        Tick { ns: u64 },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0..6usize, 1..48u64, prop::bool::weighted(0.05))
                .prop_map(|(reader, blocks, jump)| Step::Read { reader, blocks, jump }),
            1 => (0..100_000u64).prop_map(|offset_blocks| Step::Random { offset_blocks }),
            4 => (0..16usize).prop_map(|index| Step::Complete { index }),
            1 => (0..700u64).prop_map(|ns| Step::Tick { ns }),
        ]
    }

    fn prefetch_settings() -> impl Strategy<Value = PrefetchSettings> {
        (1..4usize, 1..5u64, 1..4u32, 0..3u64).prop_map(|(dispatch_streams, granules, requests_per_turn, spare)| {
            let readahead_bytes = granules * 64 * KIB;
            let turn = dispatch_streams as u64 * readahead_bytes * u64::from(requests_per_turn);
            settings(dispatch_streams, readahead_bytes, requests_per_turn, turn + spare * readahead_bytes)
        })
    }

    /// The host around the prefetcher: readers with one read outstanding,
    /// the prefetches in flight, and every read's answer.
    struct Host {
        prefetcher: Prefetcher,
        now_ns: u64,
        positions: Vec<u64>,
        outstanding: Vec<Option<ReadTicket>>,
        in_flight: Vec<PrefetchIo>,
        waiting: BTreeMap<ReadTicket, usize>,
        answered: HashSet<ReadTicket>,
        bytes_asked: u64,
        bytes_answered: u64,
        waiting_bytes: HashMap<ReadTicket, u64>,
    }

    impl Host {
        /// `readers` sequential readers starting `spacing_bytes` apart.
        fn new(settings: PrefetchSettings, readers: usize, spacing_bytes: u64) -> Host {
            Host {
                prefetcher: Prefetcher::new(settings).unwrap(),
                now_ns: 0,
                positions: (0..readers as u64).map(|reader| reader * spacing_bytes).collect(),
                outstanding: vec![None; readers],
                in_flight: Vec::new(),
                waiting: BTreeMap::new(),
                answered: HashSet::new(),
                bytes_asked: 0,
                bytes_answered: 0,
                waiting_bytes: HashMap::new(),
            }
        }

        fn ask(&mut self, extent_read: ExtentRead, reader: Option<usize>) {
            self.bytes_asked += extent_read.length_bytes;
            match self.prefetcher.on_read(extent_read, self.now_ns) {
                ReadDecision::Hit | ReadDecision::Miss | ReadDecision::MissStartingStream(_) => {
                    self.bytes_answered += extent_read.length_bytes;
                }
                ReadDecision::Wait(ticket) => {
                    let reader = reader.expect("a random read never waits");
                    self.outstanding[reader] = Some(ticket);
                    self.waiting.insert(ticket, reader);
                    self.waiting_bytes.insert(ticket, extent_read.length_bytes);
                }
            }
        }

        fn complete(&mut self, index: usize) {
            let io = self.in_flight.remove(index);
            for ticket in self.prefetcher.on_complete(&io, self.now_ns) {
                assert!(self.answered.insert(ticket), "ticket {ticket:?} answered twice");
                let reader = self.waiting.remove(&ticket).expect("an answered ticket was waiting");
                assert_eq!(self.outstanding[reader], Some(ticket));
                self.outstanding[reader] = None;
                self.bytes_answered += self.waiting_bytes[&ticket];
            }
        }

        fn apply(&mut self, step: &Step) {
            match *step {
                Step::Read { reader, blocks, jump } => {
                    let reader = reader % self.positions.len();
                    if self.outstanding[reader].is_some() {
                        return;
                    }
                    if jump {
                        self.positions[reader] += 77 * MIB;
                    }
                    let length_bytes = blocks * 4 * KIB;
                    let extent_read = read(0, self.positions[reader], length_bytes);
                    self.positions[reader] += length_bytes;
                    self.ask(extent_read, Some(reader));
                }
                Step::Random { offset_blocks } => {
                    self.ask(read(0, 50_000 * MIB + offset_blocks * 4 * KIB, 4 * KIB), None);
                }
                Step::Complete { index } => {
                    if !self.in_flight.is_empty() {
                        self.complete(index % self.in_flight.len());
                    }
                }
                Step::Tick { ns } => {
                    self.now_ns += ns;
                    self.prefetcher.collect_stale(self.now_ns);
                }
            }
            self.dispatch();
            self.prefetcher.check_invariants();
        }

        fn dispatch(&mut self) {
            while let Some(io) = self.prefetcher.next_dispatch(self.now_ns) {
                self.in_flight.push(io);
                self.prefetcher.check_invariants();
            }
        }

        /// Readers stop; completes everything and lets staged data time out
        /// until no read waits.
        fn drain(&mut self) {
            for _round in 0..10_000 {
                if self.waiting.is_empty() {
                    break;
                }
                if self.in_flight.is_empty() {
                    self.now_ns += self.prefetcher.settings().stale_after_ns;
                    self.prefetcher.collect_stale(self.now_ns);
                } else {
                    self.complete(0);
                }
                self.dispatch();
                self.prefetcher.check_invariants();
                assert!(
                    !self.waiting.is_empty() || self.bytes_answered == self.bytes_asked,
                    "every byte asked is answered once"
                );
                if self.in_flight.is_empty() && !self.waiting.is_empty() {
                    // Nothing in flight after a collection: a waiting read
                    // must still be able to get its turn.
                    self.now_ns += self.prefetcher.settings().stale_after_ns;
                    self.prefetcher.collect_stale(self.now_ns);
                    self.dispatch();
                    assert!(!self.in_flight.is_empty(), "a waiting read starves: {:?}", self.waiting);
                }
            }
            assert!(self.waiting.is_empty(), "reads still waiting after the drain");
            assert_eq!(self.bytes_answered, self.bytes_asked);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_interleavings_keep_memory_under_m_and_answer_every_read_once(
            settings in prefetch_settings(),
            readers in 1..6usize,
            // Readers far apart, or close enough to read into each other's
            // parts and meet each other's origins.
            spacing_bytes in prop_oneof![Just(1_000 * MIB), (1..16u64).prop_map(|blocks| blocks * 64 * KIB)],
            steps in prop::collection::vec(step(), 1..400),
        ) {
            let mut host = Host::new(settings, readers, spacing_bytes);
            for step in &steps {
                host.apply(step);
                prop_assert!(host.prefetcher.memory_bytes() <= settings.memory_bytes_max);
            }
            host.drain();
            for _ in 0..host.in_flight.len() {
                host.complete(0);
            }
            host.prefetcher.collect_stale(host.now_ns + settings.stale_after_ns);
            host.prefetcher.check_invariants();
            prop_assert_eq!(host.prefetcher.memory_bytes(), 0, "nothing is held once every stream is gone");
        }
    }
}
