//! One simulated hard disk: host-side FIFO, on-disk queue with FCFS / SPTF /
//! C-LOOK, command overheads, seek, head switch, write settle, rotation tracked
//! in absolute time, media and bus transfer (per direction, with the drive's
//! disconnections, reselections and data preparation), and the segmented
//! cache with read-ahead, partial hits and write-back.
//!
//! A request is timed as a whole when the drive starts it (service is not
//! preempted), which makes each decision a pure function of the drive's state
//! and the clock. Read-ahead after a read runs "in the background" until the next
//! command starts and is settled lazily (see `cache`). Write-back data is
//! written behind the write's completion (the heads position while the data
//! cross the bus); the next command waits for it, as DiskSim's fast-write
//! levels 1 and 2 require.
//!
//! The drive decodes each command as it arrives, also while it serves
//! another: a command's overhead runs from its arrival (DiskSim 4.0's
//! `overhead_done`), and the after-read/after-write column is the kind of the
//! last command completed by then. A command chosen from the queue after its
//! overhead has passed goes to work at once, and SPTF estimates it so.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::Arc;

use crate::cache::{Cache, Hit, Prefetch, PrefetchPiece};
use crate::mapping::Located;
use crate::model::DiskModel;
use crate::rotation::{fraction, track_pass, TrackPass};
use crate::sim::SimDevice;
use crate::{DiskCompletion, DiskOp, DiskRequest, Nanos, Scheduler};

#[derive(Debug, Clone, Copy)]
struct Queued {
    request: DiskRequest,
    arrival_ns: Nanos,
    /// Where the first sector lies, computed once on arrival for the schedulers.
    target: Located,
    /// Which column of the overhead tables applies (0 after a read, 1 after a
    /// write): the kind of the last command the drive had completed when this
    /// one arrived, as DiskSim 4.0 chooses it.
    after: usize,
}

#[derive(Debug, Clone, Copy)]
struct InService {
    queued: Queued,
    start_ns: Nanos,
    completion_ns: Nanos,
}

/// Head position: cylinder and surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Head {
    cylinder: u32,
    surface: u32,
}

/// The outcome of moving the heads over a run of LBNs.
#[derive(Debug, Clone, Copy)]
struct MediaAccess {
    /// When the first `mark_sectors` requested sectors (the argument of
    /// `media_access`) are all buffered, in LBN order: after a zero-latency
    /// wrap the range's head is buffered last.
    mark_end_ns: f64,
    /// When the last sector has passed under the head.
    end_ns: f64,
    /// Whole sectors outside the request that passed under the head on the
    /// first track before its first sector was transferred.
    passed_before_first_sectors: u64,
    /// The last track of the access.
    last_track: LastTrack,
}

/// What read-ahead needs to know about the last track an access touched.
#[derive(Debug, Clone, Copy)]
struct LastTrack {
    sectors_per_track: u32,
    /// LBNs of the track after the access's last one.
    lbns_after: u64,
    /// Requested sectors transferred on it.
    requested_sectors: u64,
    /// Of those, the ones picked up last after a zero-latency wrap (0 if none).
    wrapped_sectors: u64,
}

/// Read-ahead held back by the buffer: a segment holds a request's data
/// until they have crossed the bus, so read-ahead may read a segment's worth
/// past the first of them not yet sent. The request's data go at the bus
/// rate, the last at `last_sent_ns`: LBN `first_lbn + i` (a segment past the
/// request's sector `i`) waits for that sector; from `end_lbn` (a segment
/// past the request's end) on, read-ahead waits for the last.
#[derive(Debug, Clone, Copy)]
struct BufferGate {
    first_lbn: u64,
    end_lbn: u64,
    last_sent_ns: f64,
    bus_sector_ns: f64,
}

impl BufferGate {
    /// A gate that holds nothing back.
    fn open() -> BufferGate {
        BufferGate { first_lbn: u64::MAX, end_lbn: u64::MAX, last_sent_ns: f64::NEG_INFINITY, bus_sector_ns: 0.0 }
    }

    /// From when read-ahead may read `lbn`.
    fn available_ns(&self, lbn: u64) -> f64 {
        if lbn < self.first_lbn {
            f64::NEG_INFINITY
        } else if lbn < self.end_lbn {
            self.last_sent_ns - (self.end_lbn - 1 - lbn) as f64 * self.bus_sector_ns
        } else {
            self.last_sent_ns
        }
    }

    /// The first LBN of `piece` that its head would reach before the gate
    /// lets it read it, if any.
    fn first_held(&self, piece: &PrefetchPiece) -> Option<u64> {
        let reached_ns = |lbn: u64| piece.start_ns + (lbn - piece.first_lbn) as f64 * piece.sector_ns;
        let early = |lbn: u64| reached_ns(lbn) < self.available_ns(lbn);
        // The bus-paced part: the margin changes linearly along the piece.
        let (start, end) = (piece.first_lbn.max(self.first_lbn), piece.end_lbn.min(self.end_lbn));
        if start < end {
            if early(start) {
                return Some(start);
            }
            let margin_ns = reached_ns(start) - self.available_ns(start);
            let closing_ns = self.bus_sector_ns - piece.sector_ns;
            if closing_ns > 0.0 {
                let lbn = start + (margin_ns / closing_ns).floor() as u64 + 1;
                if lbn < end && early(lbn) {
                    return Some(lbn);
                }
            }
        }
        let start = piece.first_lbn.max(self.end_lbn);
        (start < piece.end_lbn && early(start)).then_some(start)
    }
}

/// Write data crossing the bus while the write is under way: sector `i` of the
/// request is buffered at `first_ns + i * sector_ns`, and the head writes a
/// sector only once it is buffered.
#[derive(Debug, Clone, Copy)]
struct DataStream {
    first_ns: f64,
    sector_ns: f64,
}

/// A simulated hard disk running a [`DiskModel`].
#[derive(Debug)]
pub struct HardDisk {
    model: Arc<DiskModel>,
    scheduler: Scheduler,
    queue_depth: usize,
    host_queue: VecDeque<Queued>,
    disk_queue: Vec<Queued>,
    in_service: Option<InService>,
    head: Head,
    /// The kind of the last command completed (reported to the host).
    last_completed_op: DiskOp,
    /// Platter angle at time zero, in revolutions; drawn from the seed.
    initial_angle: f64,
    /// The mechanism is busy (flushing write-back data) until then.
    mechanism_free_ns: f64,
    /// One past the last LBN of the previous command when it was a write
    /// (`None` after a read or before any command): `Extra write disconnect`
    /// applies to a write that follows a write without continuing it.
    last_write_end_lbn: Option<u64>,
    last_arrival_ns: Nanos,
    cache: Cache,
    /// The segment reserved for write data (`Use separate write segment`).
    write_segment: Option<Cache>,
    /// One past the last LBN of the track under the heads, when known (0
    /// otherwise): read-ahead that stops before it has not moved the heads.
    head_track_end_lbn: u64,
    /// Where recently located LBNs lie.
    located: LocateMemo,
}

/// A small direct-mapped memo of [`DiskModel::locate`]: the same LBNs are
/// located again and again (a RAID read-modify-write reads a block, then
/// writes it; parity and checksum blocks are shared by their rows; a
/// sequential stream's read-ahead walks the same track boundaries for each
/// of its requests), and locating through a zone table costs far more than a
/// lookup. The model is immutable, so a remembered location is always right.
/// Cells, so that the drive's `&self` queries use it too.
#[derive(Debug, Clone)]
struct LocateMemo {
    entries: Box<[Cell<Option<Remembered>>; LOCATE_MEMO_ENTRIES]>,
}

/// An LBN and where it lies.
type Remembered = (u64, Located);

/// Entries of a [`LocateMemo`] (a power of two).
const LOCATE_MEMO_ENTRIES: usize = 256;

impl LocateMemo {
    fn new() -> LocateMemo {
        LocateMemo { entries: Box::new(std::array::from_fn(|_| Cell::new(None))) }
    }

    /// Where `lbn` lies on `model`.
    fn locate(&self, model: &DiskModel, lbn: u64) -> Option<Located> {
        // Requests start on block boundaries: spread blocks over the entries.
        let slot = &self.entries[((lbn >> 3) ^ (lbn >> 11)) as usize % LOCATE_MEMO_ENTRIES];
        match slot.get() {
            Some((remembered, located)) if remembered == lbn => Some(located),
            _ => {
                let located = model.locate(lbn)?;
                slot.set(Some((lbn, located)));
                Some(located)
            }
        }
    }
}

impl HardDisk {
    /// A drive at rest: heads on cylinder 0, platter at a seed-chosen angle, empty
    /// cache, the model's scheduler and queue length.
    pub fn new(model: Arc<DiskModel>, seed: u64) -> HardDisk {
        let initial_angle = (split_mix(seed) >> 11) as f64 / (1u64 << 53) as f64;
        let separate_write_segment = model.cache.separate_write_segment && model.cache.segment_count > 1;
        HardDisk {
            scheduler: model.scheduler(),
            queue_depth: model.max_queue_length().max(1),
            cache: Cache::new(model.cache.segment_count, u64::from(model.cache.segment_size_sectors.max(1))),
            write_segment: separate_write_segment
                .then(|| Cache::new(1, u64::from(model.cache.segment_size_sectors.max(1)))),
            head_track_end_lbn: 0,
            located: LocateMemo::new(),
            model,
            host_queue: VecDeque::new(),
            disk_queue: Vec::new(),
            in_service: None,
            head: Head { cylinder: 0, surface: 0 },
            last_completed_op: DiskOp::Read,
            initial_angle,
            mechanism_free_ns: 0.0,
            last_write_end_lbn: None,
            last_arrival_ns: 0,
        }
    }

    /// Where `lbn` lies on this drive's model (`None` beyond its capacity).
    fn locate(&self, lbn: u64) -> Option<Located> {
        self.located.locate(&self.model, lbn)
    }

    /// Uses `scheduler` instead of the model's.
    pub fn with_scheduler(mut self, scheduler: Scheduler) -> HardDisk {
        self.scheduler = scheduler;
        self
    }

    /// Sets the on-disk queue length (requests the drive holds, the one in
    /// service included), overriding the model's `Max queue length`.
    pub fn with_queue_depth(mut self, queue_depth: usize) -> HardDisk {
        self.queue_depth = queue_depth.max(1);
        self
    }

    /// The model this drive runs.
    pub fn model(&self) -> &Arc<DiskModel> {
        &self.model
    }

    /// Delivers a request at `now_ns`. The request must lie within the drive.
    pub fn arrive(&mut self, now_ns: Nanos, request: DiskRequest) {
        assert!(request.sector_count > 0, "request {} has no sectors", request.id);
        assert!(
            request
                .lbn
                .checked_add(u64::from(request.sector_count))
                .is_some_and(|end| end <= self.model.sector_count()),
            "request {} [{}, +{}) lies beyond the drive's {} sectors",
            request.id,
            request.lbn,
            request.sector_count,
            self.model.sector_count()
        );
        assert!(now_ns >= self.last_arrival_ns, "arrivals must come in time order");
        self.last_arrival_ns = now_ns;
        let target = self.locate(request.lbn).expect("request checked against the capacity");
        let after = usize::from(self.last_completed_op == DiskOp::Write);
        self.host_queue.push_back(Queued { request, arrival_ns: now_ns, target, after });
        self.fill_disk_queue();
        if self.in_service.is_none() {
            self.start_next(now_ns);
        }
    }

    /// When the drive next completes a request.
    pub fn next_event_ns(&self) -> Option<Nanos> {
        self.in_service.map(|in_service| in_service.completion_ns)
    }

    /// Runs the drive up to `until_ns`, appending completions in time order.
    pub fn advance(&mut self, until_ns: Nanos, completions: &mut Vec<DiskCompletion>) {
        while let Some(in_service) = self.in_service.filter(|in_service| in_service.completion_ns <= until_ns) {
            self.in_service = None;
            let request = in_service.queued.request;
            self.last_completed_op = request.op;
            completions.push(DiskCompletion {
                id: request.id,
                op: request.op,
                lbn: request.lbn,
                sector_count: request.sector_count,
                arrival_ns: in_service.queued.arrival_ns,
                start_ns: in_service.start_ns,
                completion_ns: in_service.completion_ns,
            });
            self.fill_disk_queue();
            self.start_next(in_service.completion_ns);
        }
    }

    /// True when no request is queued or in service.
    pub fn is_idle(&self) -> bool {
        self.in_service.is_none() && self.disk_queue.is_empty() && self.host_queue.is_empty()
    }

    /// Places the arm on `lbn`'s track without I/O (to randomise the head before a
    /// batch); any read-ahead stops.
    pub fn move_heads_to(&mut self, now_ns: Nanos, lbn: u64) {
        if let Some(located) = self.locate(lbn) {
            self.head = Head { cylinder: located.cylinder, surface: located.surface };
        }
        self.head_track_end_lbn = 0;
        let _ = self.cache.stop_prefetch(now_ns as f64, false);
    }

    fn fill_disk_queue(&mut self) {
        let in_service = usize::from(self.in_service.is_some());
        while self.disk_queue.len() + in_service < self.queue_depth {
            let Some(queued) = self.host_queue.pop_front() else { break };
            self.disk_queue.push(queued);
        }
    }

    fn start_next(&mut self, now_ns: Nanos) {
        if self.disk_queue.is_empty() {
            return;
        }
        let start_ns = now_ns.max(self.mechanism_free_ns.ceil() as Nanos);
        let index = self.choose(start_ns);
        let queued = self.disk_queue.remove(index);
        let completion = self.service(start_ns as f64, &queued);
        let completion_ns = (completion.round() as Nanos).max(start_ns);
        self.in_service = Some(InService { queued, start_ns, completion_ns });
        self.fill_disk_queue();
    }

    /// Picks the index in the disk queue to serve next (ties go to the earliest arrival).
    fn choose(&self, now_ns: Nanos) -> usize {
        match self.scheduler {
            Scheduler::Fcfs => 0,
            Scheduler::Sptf => {
                let mut best = (f64::INFINITY, 0);
                for (index, queued) in self.disk_queue.iter().enumerate() {
                    let cost = self.positioning_estimate_ns(now_ns as f64, queued);
                    if cost < best.0 {
                        best = (cost, index);
                    }
                }
                best.1
            }
            Scheduler::CLook => {
                let cylinder_of = |queued: &Queued| queued.target.cylinder;
                let ahead = self
                    .disk_queue
                    .iter()
                    .enumerate()
                    .filter(|(_, queued)| cylinder_of(queued) >= self.head.cylinder)
                    .min_by_key(|(index, queued)| (cylinder_of(queued), *index));
                let wrapped =
                    self.disk_queue.iter().enumerate().min_by_key(|(index, queued)| (cylinder_of(queued), *index));
                ahead.or(wrapped).map_or(0, |(index, _)| index)
            }
        }
    }

    /// SPTF's cost: time until the first sector is under the head (zero for a
    /// cache hit), including what is left of the command overhead.
    fn positioning_estimate_ns(&self, now_ns: f64, queued: &Queued) -> f64 {
        let request = &queued.request;
        if request.op == DiskOp::Read && self.model.cache.enabled && self.cache_peek(now_ns, request) {
            return 0.0;
        }
        let target = queued.target;
        let ready = now_ns.max(self.command_done_ns(queued)) + self.move_time_ns(self.head, &target, request.op);
        // With zero latency the first transfer may start at once but the track
        // then takes a whole revolution: the cost is the time lost beyond the
        // transfer itself.
        let on_track = u64::from(request.sector_count).min(target.lbns_left_on_track);
        let pass = self.track_pass(ready, &target, on_track, self.zero_latency(request.op));
        let sector_ns = self.model.revolution_ns_exact / f64::from(target.sectors_per_track);
        ready - now_ns + (pass.total_sectors() - on_track as f64) * sector_ns
    }

    /// Whether accesses of this kind are zero-latency (`Immediate buffer read`
    /// / `Immediate buffer write`). Without a platter angle (`averageRotation`)
    /// there is nothing to land inside.
    fn zero_latency(&self, op: DiskOp) -> bool {
        let cache = &self.model.cache;
        let immediate = match op {
            DiskOp::Read => cache.immediate_read,
            DiskOp::Write => cache.immediate_write,
        };
        immediate && !self.model.average_rotation
    }

    fn cache_peek(&self, now_ns: f64, request: &DiskRequest) -> bool {
        let count = u64::from(request.sector_count);
        self.cache.contains(request.lbn, count, now_ns, self.model.cache.almost_read_hits)
            || self.write_segment.as_ref().is_some_and(|segment| segment.contains(request.lbn, count, now_ns, false))
    }

    /// Whether writes are reported once buffered (`Fast write level`).
    fn writes_back(&self) -> bool {
        let cache = &self.model.cache;
        cache.enabled && cache.fast_write_level > 0
    }

    /// When `queued`'s command overhead from `table` (one of the model's
    /// after-read/after-write pairs) is over. The drive decodes a command as
    /// it arrives, also while it serves others (DiskSim 4.0 sets a request's
    /// `overhead_done` on arrival), so a command that waited in the queue
    /// goes to work at once when it is chosen.
    fn overhead_done_ns(queued: &Queued, table: [f64; 2]) -> f64 {
        queued.arrival_ns as f64 + table[queued.after]
    }

    /// When `queued`'s command is decoded and the heads may move for it: the
    /// miss overhead for a read (a hit's overhead is charged where its data
    /// go), for a write the hit overhead when the drive writes back and the
    /// miss overhead when it writes through.
    fn command_done_ns(&self, queued: &Queued) -> f64 {
        let overheads = &self.model.overheads;
        let table = match queued.request.op {
            DiskOp::Read => overheads.read_miss_ns,
            DiskOp::Write if self.writes_back() => overheads.write_hit_ns,
            DiskOp::Write => overheads.write_miss_ns,
        };
        Self::overhead_done_ns(queued, table)
    }

    /// Times `request` starting at `start_ns`; returns its completion time and
    /// updates the heads, the cache and the mechanism's busy time.
    fn service(&mut self, start_ns: f64, queued: &Queued) -> f64 {
        let request = queued.request;
        let model = Arc::clone(&self.model);
        let count = u64::from(request.sector_count);
        let previous_write_end_lbn = std::mem::replace(
            &mut self.last_write_end_lbn,
            (request.op == DiskOp::Write).then_some(request.lbn + count),
        );
        if let Some(access_ns) = model.constant_access_ns {
            return start_ns + access_ns + count as f64 * model.bus_sector_ns(request.op);
        }
        match request.op {
            DiskOp::Read => self.serve_read(start_ns, queued),
            DiskOp::Write if self.writes_back() => self.serve_write_back(start_ns, queued),
            DiskOp::Write => {
                // The drive disconnects before taking a write's data only when
                // the write follows a write it does not continue (the HP
                // C2247A's trace marks exactly those writes as triple
                // disconnects, and DiskSim 4.0 does the same).
                let extra_disconnect = previous_write_end_lbn.is_some_and(|end_lbn| end_lbn != request.lbn);
                self.serve_write_through(start_ns, queued, extra_disconnect)
            }
        }
    }

    /// A read: a cache hit is sent at once; a miss disconnects, positions,
    /// reads (and reads ahead), and reconnects to send the data.
    fn serve_read(&mut self, start_ns: f64, queued: &Queued) -> f64 {
        let request = queued.request;
        let first = queued.target;
        let model = Arc::clone(&self.model);
        let overheads = &model.overheads;
        let count = u64::from(request.sector_count);
        let bus_ns = model.bus_read_sector_ns;
        let cache = model.cache;
        if cache.enabled {
            // Up to a segment past the read's start first: the read's own data
            // (its completion is not known yet).
            let segment = u64::from(cache.segment_size_sectors.max(1));
            self.extend_running_read_ahead(&request, start_ns, request.lbn + segment, BufferGate::open());
            let read_hit = self.cache.lookup(request.lbn, count, start_ns, cache.almost_read_hits);
            if let Some(hit) = read_hit.filter(|_| cache.read_ahead_on_idle_hit) {
                self.read_ahead_after_hit(&request, start_ns, &hit);
            }
            let hit = read_hit
                .or_else(|| {
                    self.write_segment.as_mut().and_then(|segment| segment.lookup(request.lbn, count, start_ns, false))
                })
                .map(|hit| hit.ready_ns)
                .or_else(|| {
                    // `Immed transfer partial hit`: the buffered head of the
                    // request goes at once while read-ahead brings the rest.
                    cache
                        .immediate_partial_hits
                        .then(|| self.cache.stretch_running_prefetch(request.lbn, count, start_ns))
                        .flatten()
                });
            if let Some(ready_ns) = hit {
                let data_start =
                    start_ns.max(Self::overhead_done_ns(queued, overheads.read_hit_ns)) + overheads.data_preparation_ns;
                let sent = (data_start + count as f64 * bus_ns).max(ready_ns + bus_ns);
                let completion_ns = sent + overheads.read_completion_ns;
                let gate = self.buffer_gate(&request, completion_ns);
                self.extend_running_read_ahead(&request, start_ns, u64::MAX, gate);
                return completion_ns;
            }
        }
        if cache.enabled
            && cache.immediate_partial_hits
            && self.cache.cached_prefix_end(request.lbn, count, start_ns).is_some()
        {
            return self.serve_partial_hit(start_ns, queued);
        }
        let read_ahead_wait_ns = self.stop_read_ahead(start_ns);
        let command_end_ns = start_ns.max(self.command_done_ns(queued));
        let positioning_ns = command_end_ns + read_ahead_wait_ns;
        let mark_sectors = self.read_water_mark_sectors(count);
        let access = self.media_access(
            positioning_ns,
            positioning_ns,
            request.lbn,
            count,
            DiskOp::Read,
            first,
            None,
            mark_sectors,
        );
        let released_ns = command_end_ns + overheads.read_disconnect_ns[queued.after];
        let completion_ns = self.read_transfer_end_ns(&access, count, released_ns) + overheads.read_completion_ns;
        if cache.enabled {
            let free = if cache.read_any_free_blocks {
                let room = u64::from(cache.segment_size_sectors).saturating_sub(count);
                access.passed_before_first_sectors.min(first.lbns_before_on_track).min(room)
            } else {
                0
            };
            let gate = self.buffer_gate(&request, completion_ns);
            let (buffered_end_lbn, prefetch) = self.read_ahead(&request, &access, gate);
            self.cache.fill_for_read((request.lbn, count), start_ns, (request.lbn - free, buffered_end_lbn), prefetch);
        }
        completion_ns
    }

    /// `Immed transfer partial hit` with read-ahead stopped: the buffered head
    /// of the request goes at once (a read hit's overheads), the heads read the
    /// rest, and read-ahead follows as after a miss.
    fn serve_partial_hit(&mut self, start_ns: f64, queued: &Queued) -> f64 {
        let request = &queued.request;
        let model = Arc::clone(&self.model);
        let overheads = &model.overheads;
        let count = u64::from(request.sector_count);
        let end_lbn = request.lbn + count;
        let bus_ns = model.bus_read_sector_ns;
        let read_ahead_wait_ns = self.stop_read_ahead(start_ns);
        let hit_overhead_done_ns = start_ns.max(Self::overhead_done_ns(queued, overheads.read_hit_ns));
        let data_start_ns = hit_overhead_done_ns + overheads.data_preparation_ns;
        // Stopping read-ahead may have brought the rest in.
        let Some(prefix_end_lbn) = self.cache.cached_prefix_end(request.lbn, count, start_ns) else {
            return data_start_ns + count as f64 * bus_ns + overheads.read_completion_ns;
        };
        let rest_target = self.locate(prefix_end_lbn).expect("request checked against the capacity on arrival");
        let positioning_ns = hit_overhead_done_ns + read_ahead_wait_ns;
        let access = self.media_access(
            positioning_ns,
            positioning_ns,
            prefix_end_lbn,
            end_lbn - prefix_end_lbn,
            DiskOp::Read,
            rest_target,
            None,
            end_lbn - prefix_end_lbn,
        );
        let sent_ns = (data_start_ns + count as f64 * bus_ns).max(access.end_ns + bus_ns);
        let completion_ns = sent_ns + overheads.read_completion_ns;
        let gate = self.buffer_gate(request, completion_ns);
        let (buffered_end_lbn, prefetch) = self.read_ahead(request, &access, gate);
        self.cache.fill_for_read((request.lbn, count), start_ns, (request.lbn, buffered_end_lbn), prefetch);
        completion_ns
    }

    /// A write-through write. The drive takes the data over the bus (after an
    /// extra disconnect and reconnection when the model has one and
    /// `extra_disconnect` says this write takes it), positions meanwhile,
    /// writes each sector once it is buffered (zero-latency writes once all
    /// are; on a drive with extra disconnects, not before a first batch is),
    /// and reconnects to report completion.
    fn serve_write_through(&mut self, start_ns: f64, queued: &Queued, extra_disconnect: bool) -> f64 {
        let request = queued.request;
        let model = Arc::clone(&self.model);
        let overheads = &model.overheads;
        let count = u64::from(request.sector_count);
        let read_ahead_wait_ns = self.stop_read_ahead(start_ns);
        let extra_write_disconnect = overheads.extra_write_disconnect.filter(|_| extra_disconnect);
        let (command_end_ns, positioning_start_ns, data_start_ns) = match extra_write_disconnect {
            Some(extra) if !model.never_disconnect => {
                let command_end_ns = start_ns.max(Self::overhead_done_ns(queued, [extra.command_ns; 2]));
                let reconnected_ns = command_end_ns
                    + extra.disconnect_ns
                    + extra.inter_disconnect_ns
                    + overheads.reselect_first_ns
                    + overheads.data_preparation_ns;
                (command_end_ns, command_end_ns + extra.seek_delta_ns, reconnected_ns)
            }
            _ => {
                let command_end_ns = start_ns.max(self.command_done_ns(queued));
                (command_end_ns, command_end_ns, command_end_ns + overheads.data_preparation_ns)
            }
        };
        let bus_ns = model.bus_write_sector_ns;
        let data_end_ns = data_start_ns + count as f64 * bus_ns;
        // The minimum seek delay spares only a write that continues a media
        // access still under way; a write-through write starts once the
        // previous request is over, so it always applies.
        let earliest_media_ns = data_start_ns.max(command_end_ns + model.minimum_seek_delay_ns);
        // A drive that disconnects before write data starts writing only once
        // a batch of the data is buffered (DiskSim 4.0's rule for such drives,
        // which the HP C2247A's trace bears out on its sequential writes).
        let earliest_media_ns = match overheads.extra_write_disconnect {
            Some(_) => earliest_media_ns.max(data_start_ns + extra_disconnect_batch_sectors(count) as f64 * bus_ns),
            None => earliest_media_ns,
        };
        let access =
            self.write_media(queued, positioning_start_ns + read_ahead_wait_ns, earliest_media_ns, data_start_ns);
        let reported_ns = if model.never_disconnect {
            access.end_ns.max(data_end_ns)
        } else {
            let (disconnect_ns, reselect_ns) = match extra_write_disconnect {
                Some(extra) => (extra.second_disconnect_ns, overheads.reselect_other_ns),
                None => (overheads.write_disconnect_ns, overheads.reselect_first_ns),
            };
            access.end_ns.max(data_end_ns + disconnect_ns) + reselect_ns
        };
        reported_ns + overheads.write_completion_ns
    }

    /// A write-back write: once its command is decoded the drive takes the
    /// data and reports completion when they are buffered (DiskSim's "write
    /// hit" overheads). The heads position meanwhile and write the data behind
    /// the completion; the next command waits until they have (fast-write
    /// levels 1 and 2 flush dirty data before serving anything else).
    fn serve_write_back(&mut self, start_ns: f64, queued: &Queued) -> f64 {
        let request = queued.request;
        let model = Arc::clone(&self.model);
        let overheads = &model.overheads;
        let count = u64::from(request.sector_count);
        let read_ahead_wait_ns = self.stop_read_ahead(start_ns);
        let command_end_ns = start_ns.max(self.command_done_ns(queued));
        let data_start_ns = command_end_ns + overheads.data_preparation_ns;
        let data_end_ns = data_start_ns + count as f64 * model.bus_write_sector_ns;
        let positioning_ns = command_end_ns + read_ahead_wait_ns;
        let access = self.write_media(queued, positioning_ns, data_start_ns, data_start_ns);
        self.mechanism_free_ns = access.end_ns;
        data_end_ns + overheads.write_completion_ns
    }

    /// Writes `queued`'s sectors to the medium: the heads position from
    /// `positioning_ns` and write nothing before `earliest_ns` nor before its
    /// data, which start crossing the bus at `data_start_ns`. Zero-latency
    /// writes go once all their data are buffered; otherwise the head writes
    /// each sector as soon as it is buffered and comes round.
    fn write_media(
        &mut self,
        queued: &Queued,
        positioning_ns: f64,
        earliest_ns: f64,
        data_start_ns: f64,
    ) -> MediaAccess {
        let (lbn, count) = (queued.request.lbn, u64::from(queued.request.sector_count));
        let bus_ns = self.model.bus_write_sector_ns;
        let (earliest_ns, stream) = if self.zero_latency(DiskOp::Write) {
            (earliest_ns.max(data_start_ns + count as f64 * bus_ns), None)
        } else {
            (earliest_ns, Some(DataStream { first_ns: data_start_ns + bus_ns, sector_ns: bus_ns }))
        };
        let access =
            self.media_access(positioning_ns, earliest_ns, lbn, count, DiskOp::Write, queued.target, stream, count);
        self.keep_written(lbn, count);
        access
    }

    /// How many sectors of a read of `count` must be buffered before the
    /// drive reconnects to send them: the high water mark as DiskSim 4.0
    /// counts it, a fraction of the request (at most a segment) rounded down,
    /// or a fraction of the segment rounded up.
    fn read_water_mark_sectors(&self, count: u64) -> u64 {
        let cache = self.model.cache;
        let segment_sectors = u64::from(cache.segment_size_sectors).max(1);
        let sectors = if cache.water_mark_by_request_size {
            (cache.high_water_mark * count.min(segment_sectors) as f64).floor() as u64
        } else {
            (cache.high_water_mark * segment_sectors as f64).ceil() as u64
        };
        sectors.clamp(1, count.max(1))
    }

    /// When the last byte of a read miss has crossed the bus. The drive
    /// reconnects once the high water mark of data is buffered (`access` was
    /// asked for that mark, and the bus was released after the command), then
    /// sends at the bus rate, never ahead of the medium: holding the bus, the
    /// last sector follows the media end at once; otherwise the last batch
    /// does.
    fn read_transfer_end_ns(&self, access: &MediaAccess, count: u64, released_ns: f64) -> f64 {
        let model = &self.model;
        let bus_ns = model.bus_read_sector_ns;
        let overheads = &model.overheads;
        let water_mark_sectors = self.read_water_mark_sectors(count);
        let buffered_ns = access.mark_end_ns;
        let reconnect_ns = if model.never_disconnect {
            buffered_ns + overheads.data_preparation_ns
        } else {
            buffered_ns.max(released_ns) + overheads.reselect_first_ns + overheads.data_preparation_ns
        };
        let tail_sectors = if model.hold_bus_for_reads || model.never_disconnect { 1 } else { water_mark_sectors };
        (reconnect_ns + count as f64 * bus_ns).max(access.end_ns + tail_sectors as f64 * bus_ns)
    }

    fn keep_written(&mut self, lbn: u64, count: u64) {
        if self.model.cache.enabled && self.model.cache.read_hits_on_write_data {
            match &mut self.write_segment {
                Some(segment) => {
                    self.cache.invalidate(lbn, lbn + count);
                    segment.insert_written(lbn, lbn + count);
                }
                None => self.cache.insert_written(lbn, lbn + count),
            }
        } else {
            self.cache.invalidate(lbn, lbn + count);
            if let Some(segment) = &mut self.write_segment {
                segment.invalidate(lbn, lbn + count);
            }
        }
    }

    /// Read-ahead after a read miss, per `Buffer continuous read` and the
    /// read-ahead limits: the end of the data buffered when the access ends
    /// (past the request when a zero-latency wrap swept the rest of the last
    /// track) and the read-ahead still running, if any.
    fn read_ahead(&self, request: &DiskRequest, access: &MediaAccess, gate: BufferGate) -> (u64, Option<Prefetch>) {
        let cache = self.model.cache;
        let end = request.lbn + u64::from(request.sector_count);
        if cache.continuous_read == 0 {
            return (end, None);
        }
        let last = access.last_track;
        let left_on_track = last.lbns_after;
        let spt = u64::from(last.sectors_per_track);
        let limit_lbn = self.read_ahead_limit(request, left_on_track);
        if limit_lbn <= end {
            return (end, None);
        }
        if last.wrapped_sectors == 0 {
            return (end, Some(self.read_ahead_schedule(end, limit_lbn, access.end_ns, gate)));
        }
        // The wrap swept the rest of the track, so it is buffered already; the
        // next sector comes once the head has gone from the landing point round
        // past the end of the track.
        let sector_ns = self.model.revolution_ns_exact / spt as f64;
        let swept = left_on_track.min(limit_lbn - end);
        let track_end_ns =
            access.end_ns + (last.requested_sectors - last.wrapped_sectors + left_on_track) as f64 * sector_ns;
        let prefetch =
            (end + swept < limit_lbn).then(|| self.read_ahead_schedule(end + swept, limit_lbn, track_end_ns, gate));
        (end + swept, prefetch)
    }

    /// Read-ahead of `[from_lbn, limit_lbn)` by heads over their current
    /// track at `after_ns`, held back by `gate`; see
    /// [`HardDisk::read_ahead_pieces`].
    fn read_ahead_schedule(&self, from_lbn: u64, limit_lbn: u64, after_ns: f64, gate: BufferGate) -> Prefetch {
        Prefetch::new(self.read_ahead_pieces(from_lbn, limit_lbn, self.head, after_ns, gate))
    }

    /// Read-ahead of `[from_lbn, limit_lbn)` by heads over `head`'s track at
    /// `after_ns`, track by track: the wait for each track's first sector (a
    /// head switch or seek first when it is another track) and its sectors
    /// one after another. Where the buffer gate holds it back, the head
    /// waits for the gate's sector to come round once the gate is open.
    fn read_ahead_pieces(
        &self,
        from_lbn: u64,
        limit_lbn: u64,
        head: Head,
        after_ns: f64,
        gate: BufferGate,
    ) -> Vec<PrefetchPiece> {
        let revolution_ns = self.model.revolution_ns_exact;
        let (mut lbn, mut head, mut time_ns) = (from_lbn, head, after_ns);
        let mut pieces = Vec::new();
        while lbn < limit_lbn {
            let at = self.locate(lbn).expect("read-ahead stays within the drive");
            let sector_ns = revolution_ns / f64::from(at.sectors_per_track);
            let earliest_ns = time_ns.max(gate.available_ns(lbn));
            let switch_ns = self.move_time_ns(head, &at, DiskOp::Read);
            let arrival_ns = earliest_ns + switch_ns;
            let start_ns = arrival_ns + self.track_pass(arrival_ns, &at, 1, false).wait_sectors * sector_ns;
            let end_lbn = (lbn + at.lbns_left_on_track).min(limit_lbn);
            let mut piece = PrefetchPiece { first_lbn: lbn, end_lbn, switch_ns, arrival_ns, start_ns, sector_ns };
            // Where the buffer is still full, the head passes the sector and
            // reads it when it comes round once there is room.
            if let Some(held_lbn) = gate.first_held(&piece).filter(|&held| held > lbn) {
                piece.end_lbn = held_lbn;
            }
            (lbn, head, time_ns) = (piece.end_lbn, Head { cylinder: at.cylinder, surface: at.surface }, piece.end_ns());
            pieces.push(piece);
        }
        pieces
    }

    /// The gate holding back read-ahead while `request`'s data cross the
    /// bus, the last of them by `completion_ns`.
    fn buffer_gate(&self, request: &DiskRequest, completion_ns: f64) -> BufferGate {
        let segment = u64::from(self.model.cache.segment_size_sectors.max(1));
        let end = request.lbn + u64::from(request.sector_count);
        BufferGate {
            first_lbn: request.lbn + segment,
            end_lbn: end + segment,
            last_sent_ns: completion_ns - self.model.overheads.read_completion_ns,
            bus_sector_ns: self.model.bus_read_sector_ns,
        }
    }

    /// A read arriving while the segment it falls in is still reading ahead:
    /// that read-ahead goes on (if the read is a hit) as far as this read's
    /// own would, and at least to its end, as DiskSim 4.0 raises a running
    /// read-ahead's target for each hit on it.
    /// It goes no further than `cap_lbn` (though always to the read's end),
    /// held back by `gate`.
    fn extend_running_read_ahead(&mut self, request: &DiskRequest, now_ns: f64, cap_lbn: u64, gate: BufferGate) {
        let count = u64::from(request.sector_count);
        let almost_hits = self.model.cache.almost_read_hits;
        let Some((tail, next_segment_lbn)) = self.cache.running_prefetch_tail(request.lbn, count, now_ns, almost_hits)
        else {
            return;
        };
        let end = request.lbn + count;
        let target_lbn =
            self.read_ahead_limit_after(request).unwrap_or(end).max(end).min(next_segment_lbn).min(cap_lbn.max(end));
        if target_lbn <= tail.end_lbn {
            return;
        }
        let Some(last) = self.locate(tail.end_lbn - 1) else { return };
        let head = Head { cylinder: last.cylinder, surface: last.surface };
        let more = self.read_ahead_pieces(tail.end_lbn, target_lbn, head, tail.end_ns(), gate);
        self.cache.extend_prefetch(more, now_ns);
    }

    /// Where read-ahead after `request` would stop, computed from the track
    /// of its last sector (`None` when the drive reads nothing ahead).
    fn read_ahead_limit_after(&self, request: &DiskRequest) -> Option<u64> {
        if self.model.cache.continuous_read == 0 {
            return None;
        }
        let last = self.locate(request.lbn + u64::from(request.sector_count) - 1)?;
        Some(self.read_ahead_limit(request, last.lbns_left_on_track - 1))
    }

    /// Stops read-ahead for a new command at `now_ns`; the heads are then over
    /// the track of the sector it was reading. Returns how long the mechanism
    /// stays busy with it: nothing, or, without `Stop prefetch in sector`,
    /// until the sector under way has passed (it is not kept), or until a
    /// switch to the next track has ended. DiskSim 4.0 adds that time to
    /// what is left of the command overhead before the heads move for the
    /// command (`disk_check_hda`), rather than overlapping the two.
    fn stop_read_ahead(&mut self, now_ns: f64) -> f64 {
        (self.read_ahead_free_ns(now_ns) - now_ns).max(0.0)
    }

    /// When the mechanism is free of read-ahead stopped at `now_ns` (see
    /// [`HardDisk::stop_read_ahead`]).
    fn read_ahead_free_ns(&mut self, now_ns: f64) -> f64 {
        let finish_sector = !self.model.cache.stop_prefetch_in_sector;
        let Some(stop) = self.cache.stop_prefetch(now_ns, finish_sector) else {
            return now_ns;
        };
        if let Some(head_lbn) = stop.head_lbn.filter(|&lbn| lbn >= self.head_track_end_lbn) {
            if let Some(under) = self.locate(head_lbn) {
                self.head = Head { cylinder: under.cylinder, surface: under.surface };
                self.head_track_end_lbn = head_lbn + under.lbns_left_on_track;
            }
        }
        stop.free_ns
    }

    /// Where read-ahead after `request` stops, as DiskSim 4.0 sets its target
    /// (`disk_buffer_get_max_readahead`) and stops it on the way:
    /// - `Buffer continuous read` 4 reads to the end of the track after the
    ///   request's end (see [`HardDisk::next_track_limit`]);
    /// - otherwise `Maximum read-ahead` sectors past the request's end; when
    ///   that is 0, to the end of a segment started at the request (which a
    ///   drive keeping the request's data, `Read-ahead over requested` 0,
    ///   starts at its first sector), or `Minimum read-ahead` past its end
    ///   when the segment has no room for that;
    /// - 1 stops at the end of the request's last track, 2 at the end of its
    ///   last cylinder, on the way to that target.
    ///
    /// The request's last track ends `left_on_track` LBNs after it.
    fn read_ahead_limit(&self, request: &DiskRequest, left_on_track: u64) -> u64 {
        let cache = self.model.cache;
        if cache.continuous_read == 4 {
            return self.next_track_limit(request);
        }
        let count = u64::from(request.sector_count);
        let end = request.lbn + count;
        let segment = u64::from(cache.segment_size_sectors);
        let minimum = u64::from(cache.read_ahead_min_sectors);
        let target = if cache.read_ahead_max_sectors > 0 {
            end + u64::from(cache.read_ahead_max_sectors)
        } else if cache.read_ahead_over_requested {
            end + segment
        } else if count >= segment || segment - count < minimum {
            end + minimum
        } else {
            request.lbn + segment
        };
        let stop = match cache.continuous_read {
            1 => end + left_on_track,
            2 => self.cylinder_end_lbn(end + left_on_track),
            _ => u64::MAX,
        };
        target.min(stop).min(self.model.sector_count())
    }

    /// One past the last LBN of the cylinder of the track ending just before
    /// `track_end_lbn` (its following tracks on the same cylinder included).
    fn cylinder_end_lbn(&self, track_end_lbn: u64) -> u64 {
        let Some(cylinder) = track_end_lbn.checked_sub(1).and_then(|lbn| self.locate(lbn)).map(|at| at.cylinder) else {
            return track_end_lbn;
        };
        let mut end_lbn = track_end_lbn;
        while let Some(next) = self.locate(end_lbn).filter(|next| next.cylinder == cylinder) {
            end_lbn += next.lbns_left_on_track;
        }
        end_lbn
    }

    /// `Buffer continuous read` 4 as DiskSim 4.0 computes its target: the end
    /// of the track holding the sector after the request, and one track more
    /// when the request starts before that track (a stream running across
    /// it); neither the segment's size nor `Maximum read-ahead` bounds it.
    fn next_track_limit(&self, request: &DiskRequest) -> u64 {
        let end = request.lbn + u64::from(request.sector_count);
        let Some(at_end) = self.locate(end) else { return end };
        let track_first_lbn = end - at_end.lbns_before_on_track;
        let track_end_lbn = end + at_end.lbns_left_on_track;
        let limit = if request.lbn < track_first_lbn {
            let spt_at_start = self.locate(request.lbn).map_or(0, |at| u64::from(at.sectors_per_track));
            track_end_lbn + spt_at_start
        } else {
            track_end_lbn
        };
        limit.min(self.model.sector_count())
    }

    /// `Read-ahead on idle hit`: after a read served whole from a segment whose
    /// read-ahead had stopped, the head goes back to the segment's end (the
    /// mechanism is idle, `now_ns`) and reads ahead again from there.
    fn read_ahead_after_hit(&mut self, request: &DiskRequest, now_ns: f64, hit: &Hit) {
        let Some(limit_lbn) = self.read_ahead_limit_after(request) else { return };
        let Some(end_lbn) = self.cache.idle_segment_end(hit, now_ns) else { return };
        let Some(target) = self.locate(end_lbn) else { return };
        if limit_lbn <= end_lbn {
            return;
        }
        let gate = BufferGate::open();
        let prefetch = self.read_ahead_schedule(end_lbn, limit_lbn, now_ns.max(self.mechanism_free_ns), gate);
        self.head = Head { cylinder: target.cylinder, surface: target.surface };
        self.head_track_end_lbn = end_lbn + target.lbns_left_on_track;
        self.cache.resume_prefetch(hit, now_ns, prefetch);
    }

    /// Moves the heads over `[lbn, lbn + count)`: positioning starts at
    /// `start_ns`, and no sector is touched before `earliest_media_ns`. Each
    /// track's part waits for its first sector, or is zero-latency when the
    /// model says so.
    #[allow(clippy::too_many_arguments, reason = "the timing inputs of one access, each used once")]
    fn media_access(
        &mut self,
        start_ns: f64,
        earliest_media_ns: f64,
        lbn: u64,
        count: u64,
        op: DiskOp,
        first: Located,
        stream: Option<DataStream>,
        mark_sectors: u64,
    ) -> MediaAccess {
        let zero_latency = self.zero_latency(op);
        let revolution = self.model.revolution_ns_exact;
        let mut current = first;
        let mut current_lbn = lbn;
        let mut time = (start_ns + self.move_time_ns(self.head, &current, op)).max(earliest_media_ns);
        let mut remaining = count;
        let (mut mark_end_ns, mut passed_before_first_sectors) = (f64::NAN, 0);
        loop {
            let on_track = remaining.min(current.lbns_left_on_track);
            let sector_ns = revolution / f64::from(current.sectors_per_track);
            let pass = self.track_pass(time, &current, on_track, zero_latency);
            let track_end_ns = match stream {
                Some(stream) if pass.wrapped_sectors == 0 => streamed_track_end_ns(
                    time + pass.wait_sectors * sector_ns,
                    sector_ns,
                    revolution,
                    stream,
                    current_lbn - lbn,
                    on_track,
                ),
                _ => time + pass.total_sectors() * sector_ns,
            };
            if current_lbn == lbn {
                passed_before_first_sectors = pass.passed_before_first_sectors(current.sectors_per_track);
            }
            let done_before = current_lbn - lbn;
            if done_before < mark_sectors && mark_sectors <= done_before + on_track {
                // The host sees data in LBN order: after a wrap, the range's
                // head (the first sectors) is buffered last.
                let mark_on_track = mark_sectors - done_before;
                mark_end_ns = if pass.wrapped_sectors == 0 {
                    time + (pass.wait_sectors + mark_on_track as f64) * sector_ns
                } else if mark_on_track <= pass.wrapped_sectors {
                    track_end_ns - (pass.wrapped_sectors - mark_on_track) as f64 * sector_ns
                } else {
                    track_end_ns
                };
            }
            time = track_end_ns;
            remaining -= on_track;
            self.head = Head { cylinder: current.cylinder, surface: current.surface };
            self.head_track_end_lbn = current_lbn + current.lbns_left_on_track;
            if remaining == 0 {
                let last_track = LastTrack {
                    sectors_per_track: current.sectors_per_track,
                    lbns_after: current.lbns_left_on_track - on_track,
                    requested_sectors: on_track,
                    wrapped_sectors: pass.wrapped_sectors,
                };
                return MediaAccess {
                    // A written track's sectors may end later than their pass
                    // (streamed data): the mark is never after the access.
                    mark_end_ns: if mark_end_ns.is_nan() { time } else { mark_end_ns.min(time) },
                    end_ns: time,
                    passed_before_first_sectors,
                    last_track,
                };
            }
            current_lbn += on_track;
            let next = self.locate(current_lbn).expect("request checked against the capacity on arrival");
            time += self.move_time_ns(self.head, &next, op);
            current = next;
        }
    }

    /// How `count` sectors from `target` on its track pass under the head
    /// arriving there at `time_ns`.
    fn track_pass(&self, time_ns: f64, target: &Located, count: u64, zero_latency: bool) -> TrackPass {
        let sectors_per_track = target.sectors_per_track;
        let spt = f64::from(sectors_per_track);
        if self.model.average_rotation {
            return TrackPass {
                wait_sectors: spt / 2.0,
                transfer_sectors: count as f64,
                wrapped_sectors: 0,
                requested_sectors: count,
            };
        }
        let angle = fraction(time_ns / self.model.revolution_ns_exact + self.initial_angle);
        let offset_sectors = fraction(angle - target.angle) * spt;
        // The clock counts whole nanoseconds: a head within one of the first
        // sector's start (either side, as rounding a completion to the clock
        // can leave it) is at the start. Rounding can also carry a hair below
        // a full turn up to it.
        let tick_sectors = spt / self.model.revolution_ns_exact;
        let offset_sectors =
            if offset_sectors >= spt - tick_sectors || offset_sectors < tick_sectors { 0.0 } else { offset_sectors };
        track_pass(offset_sectors, count, sectors_per_track, zero_latency)
    }

    /// Seek (with write settle) or head switch from `from` to `target`'s track.
    fn move_time_ns(&self, from: Head, target: &Located, op: DiskOp) -> f64 {
        let model = &self.model;
        let settle = if op == DiskOp::Write { model.write_settle_ns_exact } else { 0.0 };
        let distance = from.cylinder.abs_diff(target.cylinder);
        // DiskSim accepts a negative write settle (a fitted correction); the
        // move itself never takes negative time.
        if distance > 0 {
            (model.seek_time_ns(distance) + settle).max(0.0)
        } else if from.surface != target.surface {
            (model.head_switch_ns_exact + settle).max(0.0)
        } else {
            0.0
        }
    }
}

impl SimDevice for HardDisk {
    fn arrive(&mut self, now_ns: Nanos, request: DiskRequest) {
        HardDisk::arrive(self, now_ns, request);
    }

    fn next_event_ns(&self) -> Option<Nanos> {
        HardDisk::next_event_ns(self)
    }

    fn advance(&mut self, until_ns: Nanos, completions: &mut Vec<DiskCompletion>) {
        HardDisk::advance(self, until_ns, completions);
    }

    fn is_idle(&self) -> bool {
        HardDisk::is_idle(self)
    }

    fn move_heads_to(&mut self, now_ns: Nanos, lbn: u64) {
        HardDisk::move_heads_to(self, now_ns, lbn);
    }
}

/// When the head has written `count` consecutive sectors of one track, the
/// first of them (sector `first_index` of the request) passing under it at
/// `first_pass_ns`: a sector whose data are not yet buffered when it comes
/// round is written a whole number of revolutions later.
fn streamed_track_end_ns(
    first_pass_ns: f64,
    sector_ns: f64,
    revolution_ns: f64,
    stream: DataStream,
    first_index: u64,
    count: u64,
) -> f64 {
    let ready_ns = |index: u64| stream.first_ns + index as f64 * stream.sector_ns;
    let wait_for = |write_ns: f64, ready: f64| {
        if write_ns < ready {
            write_ns + ((ready - write_ns) / revolution_ns).ceil() * revolution_ns
        } else {
            write_ns
        }
    };
    if stream.sector_ns <= sector_ns {
        // The bus keeps ahead of the head: only the first sector can be late.
        return wait_for(first_pass_ns, ready_ns(first_index)) + count as f64 * sector_ns;
    }
    let mut write_ns = first_pass_ns;
    for index in first_index..first_index + count {
        write_ns = wait_for(write_ns, ready_ns(index)) + sector_ns;
    }
    write_ns
}

/// How many sectors of a write a drive with `Extra write disconnect` buffers
/// before its head starts writing: the whole of a write under 10 sectors, 10
/// of one under 45, else 15 (DiskSim 4.0's `disk_buffer_block_available`).
fn extra_disconnect_batch_sectors(count: u64) -> u64 {
    if count < 45 {
        count.min(10)
    } else {
        15
    }
}

/// SplitMix64: a well-mixed 64-bit value from a seed.
pub(crate) fn split_mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
