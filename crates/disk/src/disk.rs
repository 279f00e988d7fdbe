//! One simulated hard disk: host-side FIFO, on-disk queue with FCFS / SPTF /
//! C-LOOK, command overheads, seek, head switch, write settle, rotation tracked
//! in absolute time, media and bus transfer, and the segmented cache with
//! read-ahead and write-back.
//!
//! A request is timed as a whole when the drive starts it (service is not
//! preempted), which makes each decision a pure function of the drive's state
//! and the clock. Read-ahead after a read runs "in the background" until the next
//! command starts and is settled lazily (see `cache`). Write-back data is
//! flushed right after the write completes; the next command waits for the
//! flush, as DiskSim's fast-write levels 1 and 2 require.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::cache::{Cache, Prefetch};
use crate::layout::Located;
use crate::model::DiskModel;
use crate::sim::SimDevice;
use crate::{DiskCompletion, DiskOp, DiskRequest, Nanos, Scheduler};

#[derive(Debug, Clone, Copy)]
struct Queued {
    request: DiskRequest,
    arrival_ns: Nanos,
    /// Where the first sector lies, computed once on arrival for the schedulers.
    target: Located,
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
    /// When the first sector starts passing under the head.
    media_start_ns: f64,
    /// When the first sector has passed under the head.
    first_sector_end_ns: f64,
    /// When the last sector has passed under the head.
    end_ns: f64,
    /// Where the heads are afterwards.
    last: Located,
    /// Which LBN `last` describes.
    last_lbn: u64,
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
    last_op: DiskOp,
    /// Platter angle at time zero, in revolutions; drawn from the seed.
    initial_angle: f64,
    /// The mechanism is busy (flushing write-back data) until then.
    mechanism_free_ns: f64,
    last_arrival_ns: Nanos,
    cache: Cache,
}

impl HardDisk {
    /// A drive at rest: heads on cylinder 0, platter at a seed-chosen angle, empty
    /// cache, the model's scheduler and queue length.
    pub fn new(model: Arc<DiskModel>, seed: u64) -> HardDisk {
        let initial_angle = (split_mix(seed) >> 11) as f64 / (1u64 << 53) as f64;
        HardDisk {
            scheduler: model.scheduler(),
            queue_depth: model.max_queue_length().max(1),
            cache: Cache::new(
                model.cache.segment_count,
                model.cache.read_ahead_over_requested.then_some(u64::from(model.cache.segment_size_sectors.max(1))),
            ),
            model,
            host_queue: VecDeque::new(),
            disk_queue: Vec::new(),
            in_service: None,
            head: Head { cylinder: 0, surface: 0 },
            last_op: DiskOp::Read,
            initial_angle,
            mechanism_free_ns: 0.0,
            last_arrival_ns: 0,
        }
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
        let target = self.model.locate(request.lbn).expect("request checked against the capacity");
        self.host_queue.push_back(Queued { request, arrival_ns: now_ns, target });
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
        if let Some(located) = self.model.locate(lbn) {
            self.head = Head { cylinder: located.cylinder, surface: located.surface };
        }
        self.cache.stop_prefetch(now_ns as f64);
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
    /// cache hit), including the command overhead.
    fn positioning_estimate_ns(&self, now_ns: f64, queued: &Queued) -> f64 {
        let request = &queued.request;
        if request.op == DiskOp::Read && self.model.cache.enabled && self.cache_peek(now_ns, request) {
            return 0.0;
        }
        let overhead = self.miss_overhead_ns(request.op);
        let target = queued.target;
        let ready = now_ns + overhead + self.move_time_ns(self.head, &target, request.op);
        ready + self.rotational_wait_ns(ready, target.angle) - now_ns
    }

    fn cache_peek(&self, now_ns: f64, request: &DiskRequest) -> bool {
        self.cache.contains(request.lbn, u64::from(request.sector_count), now_ns, self.model.cache.almost_read_hits)
    }

    fn previous_index(&self) -> usize {
        usize::from(self.last_op == DiskOp::Write)
    }

    fn miss_overhead_ns(&self, op: DiskOp) -> f64 {
        let overheads = &self.model.overheads;
        match op {
            DiskOp::Read => overheads.read_miss_ns[self.previous_index()],
            DiskOp::Write => overheads.write_miss_ns[self.previous_index()],
        }
    }

    /// Times `request` starting at `start_ns`; returns its completion time and
    /// updates the heads, the cache and the mechanism's busy time.
    fn service(&mut self, start_ns: f64, queued: &Queued) -> f64 {
        let request = queued.request;
        let first = queued.target;
        let model = Arc::clone(&self.model);
        let count = u64::from(request.sector_count);
        let bus_ns = model.bus_sector_ns;
        let previous = self.previous_index();
        self.last_op = request.op;
        if let Some(access_ns) = model.constant_access_ns {
            return start_ns + access_ns + count as f64 * bus_ns;
        }
        let cache = model.cache;
        match request.op {
            DiskOp::Read => {
                if cache.enabled {
                    if let Some(ready_ns) = self.cache.lookup(request.lbn, count, start_ns, cache.almost_read_hits) {
                        let overhead = model.overheads.read_hit_ns[previous];
                        let sent = (start_ns + overhead + count as f64 * bus_ns).max(ready_ns + bus_ns);
                        return sent + model.overheads.read_completion_ns;
                    }
                }
                self.cache.stop_prefetch(start_ns);
                let overhead = model.overheads.read_miss_ns[previous];
                let access = self.media_access(
                    start_ns + overhead,
                    start_ns + overhead,
                    request.lbn,
                    count,
                    DiskOp::Read,
                    first,
                );
                if cache.enabled {
                    self.cache.insert(request.lbn, request.lbn + count, self.read_ahead(&request, &access));
                }
                self.read_transfer_end_ns(&access, count) + model.overheads.read_completion_ns
            }
            DiskOp::Write if cache.enabled && cache.fast_write_level > 0 => {
                // A write that finds its data's segment is a hit; a random write is a miss.
                let overheads = if self.cache.contains(request.lbn, 1, start_ns, false) {
                    model.overheads.write_hit_ns
                } else {
                    model.overheads.write_miss_ns
                };
                let overhead = overheads[previous];
                let completion = start_ns + overhead + count as f64 * bus_ns + model.overheads.write_completion_ns;
                self.cache.stop_prefetch(start_ns);
                let access = self.media_access(completion, completion, request.lbn, count, DiskOp::Write, first);
                self.mechanism_free_ns = access.end_ns;
                self.keep_written(request.lbn, count);
                completion
            }
            DiskOp::Write => {
                self.cache.stop_prefetch(start_ns);
                let overhead = model.overheads.write_miss_ns[previous];
                let data_start = start_ns + overhead;
                // Write-through: positioning overlaps the host transfer, and the
                // medium is written once the request's data are all buffered.
                let access = self.media_access(
                    data_start,
                    data_start + count as f64 * bus_ns,
                    request.lbn,
                    count,
                    DiskOp::Write,
                    first,
                );
                self.keep_written(request.lbn, count);
                let last_data_ns = data_start + count as f64 * bus_ns;
                access.end_ns.max(last_data_ns) + model.overheads.write_completion_ns
            }
        }
    }

    /// When the last byte of a read miss has crossed the bus. The drive
    /// reconnects once the high water mark of data is buffered, then sends at the
    /// bus rate, never ahead of the medium (the last batch follows the media end).
    fn read_transfer_end_ns(&self, access: &MediaAccess, count: u64) -> f64 {
        let bus_ns = self.model.bus_sector_ns;
        if bus_ns == 0.0 {
            return access.end_ns;
        }
        let cache = self.model.cache;
        let basis = if cache.water_mark_by_request_size { count } else { u64::from(cache.segment_size_sectors).max(1) };
        let water_mark_sectors = ((cache.high_water_mark * basis as f64).ceil() as u64).clamp(1, count);
        let sector_ns = access.first_sector_end_ns - access.media_start_ns;
        let media_ns = access.end_ns - access.media_start_ns;
        let reconnect_ns = if count <= 1 {
            access.end_ns
        } else {
            access.first_sector_end_ns + (media_ns - sector_ns) * (water_mark_sectors - 1) as f64 / (count - 1) as f64
        };
        (reconnect_ns + count as f64 * bus_ns).max(access.end_ns + water_mark_sectors as f64 * bus_ns)
    }

    fn keep_written(&mut self, lbn: u64, count: u64) {
        if self.model.cache.enabled && self.model.cache.read_hits_on_write_data {
            self.cache.insert(lbn, lbn + count, None);
        } else {
            self.cache.invalidate(lbn, lbn + count);
        }
    }

    /// Read-ahead after a read miss, per `Buffer continuous read` and the
    /// read-ahead limits; `None` when the drive does not prefetch.
    fn read_ahead(&self, request: &DiskRequest, access: &MediaAccess) -> Option<Prefetch> {
        let cache = self.model.cache;
        if cache.continuous_read == 0 || cache.read_ahead_max_sectors == 0 {
            return None;
        }
        let end = request.lbn + u64::from(request.sector_count);
        let left_on_track =
            access.last.lbns_left_on_track - (end - 1 - access.last_lbn).min(access.last.lbns_left_on_track - 1) - 1;
        let spt = u64::from(access.last.sectors_per_track);
        // Read-ahead fills the rest of the segment, or all of it when it may
        // overwrite the data just returned.
        let segment_room = if cache.read_ahead_over_requested {
            u64::from(cache.segment_size_sectors)
        } else {
            u64::from(cache.segment_size_sectors.saturating_sub(request.sector_count))
        };
        let by_kind = match cache.continuous_read {
            1 => left_on_track,
            2 => {
                left_on_track
                    + spt
                        * u64::from(
                            self.model.surface_count() - 1 - access.last.surface.min(self.model.surface_count() - 1),
                        )
            }
            3 => segment_room,
            _ => left_on_track + spt,
        };
        let amount = by_kind.min(u64::from(cache.read_ahead_max_sectors)).min(segment_room);
        let limit_lbn = (end + amount).min(self.model.sector_count());
        (limit_lbn > end).then(|| Prefetch {
            origin_ns: access.end_ns,
            sector_ns: self.model.revolution_ns_exact / spt as f64,
            limit_lbn,
        })
    }

    /// Moves the heads over `[lbn, lbn + count)`: positioning starts at
    /// `start_ns`, and no sector is touched before `earliest_media_ns`.
    #[allow(
        clippy::too_many_arguments,
        reason = "the timing inputs of one access; bundling them would only rename them"
    )]
    fn media_access(
        &mut self,
        start_ns: f64,
        earliest_media_ns: f64,
        lbn: u64,
        count: u64,
        op: DiskOp,
        first: Located,
    ) -> MediaAccess {
        let model = Arc::clone(&self.model);
        let revolution = model.revolution_ns_exact;
        let mut current = first;
        let mut current_lbn = lbn;
        let mut time = start_ns + self.move_time_ns(self.head, &current, op);
        time = time.max(earliest_media_ns);
        time += self.rotational_wait_ns(time, current.angle);
        let media_start_ns = time;
        let first_sector_end_ns = time + revolution / f64::from(current.sectors_per_track);
        let mut remaining = count;
        loop {
            let on_track = remaining.min(current.lbns_left_on_track);
            time += on_track as f64 * revolution / f64::from(current.sectors_per_track);
            remaining -= on_track;
            self.head = Head { cylinder: current.cylinder, surface: current.surface };
            if remaining == 0 {
                break;
            }
            current_lbn += on_track;
            let next = model.locate(current_lbn).expect("request checked against the capacity on arrival");
            time += self.move_time_ns(self.head, &next, op);
            time += self.rotational_wait_ns(time, next.angle);
            current = next;
        }
        let last_lbn = lbn + count - 1;
        let last = if current_lbn == last_lbn { current } else { model.locate(last_lbn).unwrap_or(current) };
        MediaAccess { media_start_ns, first_sector_end_ns, end_ns: time, last, last_lbn }
    }

    /// Seek (with write settle) or head switch from `from` to `target`'s track.
    fn move_time_ns(&self, from: Head, target: &Located, op: DiskOp) -> f64 {
        let model = &self.model;
        let settle = if op == DiskOp::Write { model.write_settle_ns_exact } else { 0.0 };
        let distance = from.cylinder.abs_diff(target.cylinder);
        if distance > 0 {
            model.seek.time_ns(distance) + settle
        } else if from.surface != target.surface {
            model.head_switch_ns_exact + settle
        } else {
            0.0
        }
    }

    /// Time from `time_ns` until angle `target_angle` passes under the head.
    fn rotational_wait_ns(&self, time_ns: f64, target_angle: f64) -> f64 {
        let revolution = self.model.revolution_ns_exact;
        if self.model.average_rotation {
            return revolution / 2.0;
        }
        let angle = (time_ns / revolution + self.initial_angle).rem_euclid(1.0);
        (target_angle - angle).rem_euclid(1.0) * revolution
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

/// SplitMix64: a well-mixed 64-bit value from a seed.
pub(crate) fn split_mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
