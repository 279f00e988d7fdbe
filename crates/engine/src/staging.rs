//! Executes the layout's write decisions (`layouts/`): the staging area
//! (capacity, room, destage when full), allocation ranges on the data device
//! (fill limits, fresh ranges), hole plugging and in-place overwrites. It asks
//! the volume's [`LayoutStrategy`](crate::layouts::LayoutStrategy) where each
//! write goes and never which layout runs. Destage itself is in `destage.rs`.
//!
//! Invariants kept here: a staged block is written to a freshly allocated
//! flash block with a staged record (extent, logical block, crc32c: the
//! back-pointer that rebuilds the index from the log); the block it replaces is
//! freed through the space map, so it is reused only after the CP that records
//! the new location is durable; staged blocks never exceed the staging
//! capacity.

use proxima_device::BlockDevice;

use crate::codec::{LogRecord, RangeReservation, BLOCK_SIZE};
use crate::destage::{DestageScope, NoDestageObserver, StagingRelease};
use crate::error::{DeviceRole, EngineError, Result};
use crate::io::{
    block_bytes, consecutive_runs, device_error, gathered_runs, in_memory, write_zeroes, MAX_REQUEST_BLOCKS,
};
use crate::layouts::{staging_is_full, Placement, VolumeFacts, WriteContext};
use crate::map::{self, Location};
use crate::room::RoomMade;
use crate::volume::Volume;

/// The blocks a write carries: real bytes, or a count of synthetic blocks
/// (metadata-only simulation: same allocation, metadata and I/O, no data).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Payload<'a> {
    /// Whole blocks of data.
    Bytes(&'a [u8]),
    /// This many blocks without data (written as zeroes where a device keeps
    /// payload).
    Synthetic(u64),
}

impl<'a> Payload<'a> {
    pub fn block_count(&self) -> u64 {
        match self {
            Payload::Bytes(bytes) => (bytes.len() / BLOCK_SIZE) as u64,
            Payload::Synthetic(count) => *count,
        }
    }

    /// Blocks `[first, first + count)` of the payload.
    pub fn slice(&self, first: u64, count: u64) -> Payload<'a> {
        match self {
            Payload::Bytes(bytes) => Payload::Bytes(&bytes[block_bytes(first)..block_bytes(first + count)]),
            Payload::Synthetic(_) => Payload::Synthetic(count),
        }
    }

    /// The bytes to send to a device that does (`stores`) or does not keep
    /// payload.
    pub fn device_bytes(&self, stores: bool) -> Vec<u8> {
        match (self, stores) {
            (_, false) => Vec::new(),
            (Payload::Bytes(bytes), true) => bytes.to_vec(),
            (Payload::Synthetic(count), true) => vec![0; block_bytes(*count)],
        }
    }

    /// The crc32c of block `index`.
    pub fn block_crc(&self, index: u64) -> u32 {
        match self {
            Payload::Bytes(bytes) => crc32c::crc32c(&bytes[block_bytes(index)..block_bytes(index + 1)]),
            Payload::Synthetic(_) => zero_block_crc(),
        }
    }
}

fn zero_block_crc() -> u32 {
    static CRC: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *CRC.get_or_init(|| crc32c::crc32c(&[0; BLOCK_SIZE]))
}

/// A write's placement, and whether every block it writes is mapped already.
struct WritePlan {
    placement: Placement,
    overwrite: bool,
}

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    /// Flash blocks that staging may still allocate before the CP reserve.
    pub(crate) fn staging_available_blocks(&self) -> u64 {
        self.flash_space.allocatable_count().saturating_sub(self.flash_reserve_blocks())
    }

    /// Flash blocks kept for the metadata of the next CP.
    pub(crate) fn flash_reserve_blocks(&self) -> u64 {
        (self.flash_space.block_count() / 8).max(32)
    }

    /// The staging area's capacity in blocks.
    pub(crate) fn staging_capacity_blocks(&self) -> u64 {
        match self.options.staging_capacity_blocks {
            0 => self.flash_space.block_count().saturating_sub(2 * self.flash_reserve_blocks()),
            capacity => capacity,
        }
    }

    /// Whether the data device keeps the bytes written to it.
    pub(crate) fn data_stores_payload(&self) -> bool {
        self.data_payload
    }

    /// Writes whole blocks from `logical` on, as the layout places them.
    pub(crate) fn write_blocks(&mut self, id: u64, logical: u64, payload: Payload<'_>) -> Result<()> {
        let count = payload.block_count();
        let mut plan = self.plan_write(id, logical, count);
        let may_stage = if plan.placement == Placement::Stage { count.min(self.staging_capacity_blocks()) } else { 0 };
        if self.ensure_room_for_update(self.write_bound(&[id], count, may_stage))? == RoomMade::ByDestage {
            // The destage moved blocks the plan looked at.
            plan = self.plan_write(id, logical, count);
        }
        match plan.placement {
            Placement::StageInPieces => self.write_through_cache(id, logical, payload),
            Placement::Stage if self.make_staging_room(count, plan.overwrite)? => {
                self.write_staged(id, logical, payload)
            }
            Placement::Stage | Placement::Ranges => self.write_in_ranges(id, logical, payload),
            Placement::InPlace => self.write_in_place(id, logical, payload),
            Placement::PlugHoles => self.write_plugging_holes(id, logical, payload),
            Placement::LogHead => self.write_at_log_head(id, logical, payload),
        }
    }

    /// Where the layout places a write of `count` blocks from `logical` of
    /// extent `id`, as the map stands.
    fn plan_write(&self, id: u64, logical: u64, count: u64) -> WritePlan {
        let segments = map::segments(self.extents.map(id), logical, count);
        let context = WriteContext {
            block_count: count,
            previous: segments[0].location,
            overwrites_data_blocks: segments.iter().all(|segment| matches!(segment.location, Some(Location::Data(_)))),
            staging_capacity_blocks: self.staging_capacity_blocks(),
        };
        WritePlan {
            placement: self.layout.place_write(&self.options.layout_parameters(), &context),
            overwrite: segments.iter().all(|segment| segment.location.is_some()),
        }
    }

    /// Makes room for `count` staged blocks: destages when the staging area is
    /// full (or fails with [`EngineError::StagingFull`] without auto destage),
    /// commits when blocks awaiting a CP are what is missing. Returns false if
    /// the write cannot be staged at all (larger than the staging area).
    /// `overwrite`: every block written is mapped already (see
    /// [`Volume::destage_for_room`]).
    fn make_staging_room(&mut self, count: u64, overwrite: bool) -> Result<bool> {
        let capacity = self.staging_capacity_blocks();
        if count > capacity {
            return Ok(false);
        }
        if staging_is_full(self.staged_block_count, capacity, count) {
            self.destage_for_room(count, capacity, overwrite)?;
        }
        if count > self.staging_available_blocks() {
            // Staging blocks freed by the last destage wait for a durable CP.
            self.commit()?;
        }
        if count > self.staging_available_blocks() {
            if self.staged_block_count == 0 {
                return Ok(false);
            }
            self.destage_for_room(count, capacity, overwrite)?;
        }
        Ok(count <= self.staging_available_blocks())
    }

    /// Destages to make room for `count` staged blocks.
    ///
    /// When the data device is full — a destage places nothing — the staging
    /// area cannot drain, but an overwrite is still admitted while the flash
    /// has room: each block it stages frees the block it replaces (staged, or
    /// on the data device, where the next destage puts it back). Anything
    /// else is refused with [`EngineError::NoSpace`], and refusing stays cheap:
    /// after a destage that placed nothing, the next is tried only once an
    /// eighth of the staging capacity has been freed since (each attempt
    /// costs two CPs and a scan of the free space).
    fn destage_for_room(&mut self, count: u64, capacity: u64, overwrite: bool) -> Result<()> {
        if !self.options.auto_destage {
            return Err(EngineError::StagingFull {
                staged_blocks: self.staged_block_count,
                capacity_blocks: capacity.min(self.staged_block_count + self.staging_available_blocks()),
                incoming_blocks: count,
            });
        }
        // A bounded step, the densest windows first: the write waits for room
        // for its own blocks, not for the whole staging area to drain.
        let step = DestageScope::Densest { max_blocks: count.max(self.destage_step_blocks()) };
        if self.try_destage(step)? {
            return Ok(());
        }
        if overwrite {
            return Ok(());
        }
        Err(EngineError::NoSpace {
            role: DeviceRole::Data,
            detail: format!(
                "the staging area holds {} of {capacity} blocks and the data device has no room to destage them",
                self.staged_block_count
            ),
        })
    }

    /// Blocks a bounded destage step moves (see
    /// [`VolumeOptions::destage_step_blocks`](crate::VolumeOptions::destage_step_blocks)).
    pub fn destage_step_blocks(&self) -> u64 {
        match self.options.destage_step_blocks {
            0 => (self.staging_capacity_blocks() / 64).max(64),
            blocks => blocks,
        }
    }

    /// Destages `scope` unless the last destage placed nothing and too little
    /// has been freed on the data device since (an eighth of the staging
    /// capacity); returns whether it placed anything.
    pub(crate) fn try_destage(&mut self, scope: DestageScope) -> Result<bool> {
        let retry_after_frees = (self.staging_capacity_blocks() / 8).max(1);
        let may_progress =
            self.destage_stall.is_none_or(|at| self.data_space.free_count() >= at.saturating_add(retry_after_frees));
        if !may_progress {
            return Ok(false);
        }
        match self.destage_unguarded(scope, StagingRelease::AtOnce, &mut NoDestageObserver) {
            Ok(summary) if summary.user_blocks > 0 => {
                self.destage_stall = None;
                Ok(true)
            }
            Ok(_) | Err(EngineError::NoSpace { .. }) => {
                self.destage_stall = Some(self.data_space.free_count());
                Ok(false)
            }
            Err(other) => Err(other),
        }
    }

    /// [`Placement::StageInPieces`]: a write larger than the staging area
    /// passes through it in pieces of its capacity, so no block is ever
    /// overwritten in place before its new value is durable on flash.
    fn write_through_cache(&mut self, id: u64, logical: u64, payload: Payload<'_>) -> Result<()> {
        let count = payload.block_count();
        let piece_blocks = self.staging_capacity_blocks().max(1);
        let mut done = 0;
        while done < count {
            let this = (count - done).min(piece_blocks);
            let piece = payload.slice(done, this);
            if self.make_staging_room(this, true)? {
                self.write_staged(id, logical + done, piece)?;
            } else {
                self.write_in_ranges(id, logical + done, piece)?;
            }
            done += this;
        }
        Ok(())
    }

    /// Allocates `count` flash blocks for staged data, all or none: on
    /// failure the blocks taken are released again (pinned until the next CP,
    /// like any freed block), so a write refused for lack of space leaves the
    /// volume as it was.
    fn allocate_staging_blocks(&mut self, count: u64) -> Result<Vec<u64>> {
        let mut blocks = Vec::with_capacity(in_memory(count));
        for _ in 0..count {
            match self.flash_space.allocate_one("staged data") {
                Ok(block) => blocks.push(block),
                Err(error) => {
                    for &block in &blocks {
                        self.flash_space.free(block);
                    }
                    return Err(error);
                }
            }
        }
        Ok(blocks)
    }

    /// Writes staged blocks to their flash blocks: each run of consecutive
    /// flash blocks (the next-fit cursor makes the staging log an append, so
    /// usually the whole write) is one request from the caller's bytes.
    fn write_staged_payload(&mut self, blocks: &[u64], payload: Payload<'_>) -> Result<()> {
        let Payload::Bytes(bytes) = payload else {
            // Synthetic data is zeroes: written without a buffer.
            let pieces: Vec<(u64, u64)> =
                consecutive_runs(blocks).map(|(index, run)| (blocks[index], run as u64)).collect();
            return write_zeroes(&mut self.flash, DeviceRole::Flash, &pieces);
        };
        for (index, run) in consecutive_runs(blocks) {
            let piece = &bytes[index * BLOCK_SIZE..(index + run) * BLOCK_SIZE];
            self.flash.write_blocks(blocks[index], piece).map_err(device_error(DeviceRole::Flash))?;
        }
        self.staged_cache.insert_blocks(blocks, bytes.chunks(BLOCK_SIZE));
        Ok(())
    }

    fn write_staged(&mut self, id: u64, logical: u64, payload: Payload<'_>) -> Result<()> {
        let count = payload.block_count();
        let blocks = self.allocate_staging_blocks(count)?;
        self.write_staged_payload(&blocks, payload)?;
        self.map_staged_blocks(id, logical, &blocks, payload)?;
        self.stats.staged_blocks_written += count;
        Ok(())
    }

    /// Where the layout places a write of `count` whole blocks at `logical`
    /// of extent `id`, as the map stands (the decision `write_blocks` takes).
    pub(crate) fn placement_of(&self, id: u64, logical: u64, count: u64) -> Placement {
        self.plan_write(id, logical, count).placement
    }

    /// Stages several whole-block writes as one append to the staging log:
    /// their flash blocks are allocated together (consecutive, by next-fit),
    /// written with one gathered request per run of consecutive blocks, then
    /// mapped and logged write by write, in order. Returns `Ok(false)`, having
    /// changed nothing, when the staging area has no room for all of them at
    /// once (the caller writes them one by one).
    pub(crate) fn write_staged_group(&mut self, writes: &[(u64, u64, &[u8])]) -> Result<bool> {
        let total: u64 = writes.iter().map(|&(_, _, bytes)| (bytes.len() / BLOCK_SIZE) as u64).sum();
        let ids: Vec<u64> = writes.iter().map(|&(id, _, _)| id).collect();
        self.ensure_room_for_update(self.write_bound(&ids, total, total))?;
        let overwrite = writes.iter().all(|&(id, logical, bytes)| {
            let count = (bytes.len() / BLOCK_SIZE) as u64;
            map::segments(self.extents.map(id), logical, count).iter().all(|segment| segment.location.is_some())
        });
        if !self.make_staging_room(total, overwrite)? {
            return Ok(false);
        }
        let blocks = self.allocate_staging_blocks(total)?;
        let pieces: Vec<&[u8]> = writes.iter().flat_map(|&(_, _, bytes)| bytes.chunks(BLOCK_SIZE)).collect();
        for (index, run) in consecutive_runs(&blocks) {
            self.flash
                .write_gathered(blocks[index], &pieces[index..index + run])
                .map_err(device_error(DeviceRole::Flash))?;
        }
        self.staged_cache.insert_blocks(&blocks, pieces);
        let mut at = 0;
        for &(id, logical, bytes) in writes {
            let count = bytes.len() / BLOCK_SIZE;
            self.map_staged_blocks(id, logical, &blocks[at..at + count], Payload::Bytes(bytes))?;
            at += count;
        }
        self.stats.staged_blocks_written += total;
        Ok(true)
    }

    /// Maps staged blocks `[logical, logical + blocks.len())` of extent `id`
    /// to their (written) flash blocks and logs a staged record for each;
    /// with a layout that copies out, first copies out the frames they
    /// overwrite that snapshots read (one that finds no room stays where it
    /// is, and its block is destaged next to it); with the proximal layout's
    /// copy-out, notes them to be copied out when the blocks are destaged.
    fn map_staged_blocks(&mut self, id: u64, logical: u64, blocks: &[u64], payload: Payload<'_>) -> Result<()> {
        let copies_out = self.layout.copies_out() || self.options.proximal_copy_out;
        if copies_out && self.youngest_live_snapshot_id().is_some() {
            // `(logical block, data block)` of every block overwritten.
            let frames: Vec<(u64, u64)> = map::segments(self.extents.map(id), logical, blocks.len() as u64)
                .iter()
                .filter_map(|segment| match segment.location {
                    Some(Location::Data(first)) => Some(
                        (0..segment.block_count).map(move |offset| (segment.logical_block + offset, first + offset)),
                    ),
                    _ => None,
                })
                .flatten()
                .collect();
            if self.layout.copies_out() {
                let frame_blocks: Vec<u64> = frames.iter().map(|&(_, frame)| frame).collect();
                self.copy_out_before_overwrite(&frame_blocks)?;
            } else {
                self.note_copies_for_destage(id, &frames);
            }
        }
        for (index, &block) in blocks.iter().enumerate() {
            let logical_block = logical + index as u64;
            let data_crc = payload.block_crc(index as u64);
            let record = LogRecord::Staged { extent_id: id, logical_block, flash_block: block, data_crc };
            if let Some(checksums) = &mut self.checksums {
                checksums.flash.set(block, data_crc);
            }
            let displaced = self.apply_mapping(id, logical_block, 1, Location::Flash(block));
            let previous = displaced.first().map(|&(location, _)| location);
            self.layout.staged(id, logical_block, previous);
            self.end_measurement_interval_after_a_staging_area();
            self.push_record(record)?;
        }
        Ok(())
    }

    /// Counts one staged block; after a staging area's worth, tells the
    /// layout its measurement interval ended.
    fn end_measurement_interval_after_a_staging_area(&mut self) {
        self.staged_in_interval += 1;
        if self.staged_in_interval >= self.staging_capacity_blocks() {
            self.staged_in_interval = 0;
            let facts = VolumeFacts {
                data_blocks_used: self.data_space.used_count(),
                data_blocks: self.data_space.block_count(),
                segment_efficiency: self.options.cleaning.segment_efficiency,
                interval_writes: self.options.measurement_interval_writes,
                fixed_hot_fraction: self.options.hylog_hot_fraction,
            };
            if self.layout.measurement_interval_ended(&facts) {
                self.stats.hot_set_choices += 1;
            }
        }
    }

    /// Writes to fresh data-device blocks in allocation ranges, continuing the
    /// logical predecessor's run when its range has room.
    pub(crate) fn write_in_ranges(&mut self, id: u64, logical: u64, payload: Payload<'_>) -> Result<()> {
        let count = payload.block_count();
        let mut hint = self.block_after_predecessor(id, logical);
        let mut done = 0;
        while done < count {
            let (start, got) = self.allocate_in_ranges(hint, count - done)?;
            self.write_direct_piece(id, logical + done, start, payload.slice(done, got))?;
            done += got;
            hint = Some(start + got);
        }
        self.stats.direct_blocks_written += count;
        Ok(())
    }

    /// The data block after the one logical block `logical - 1` of extent
    /// `id` is on, where a write at `logical` continues its run.
    fn block_after_predecessor(&self, id: u64, logical: u64) -> Option<u64> {
        match logical.checked_sub(1).and_then(|before| map::lookup(self.extents.map(id), before)) {
            Some(Location::Data(block)) => Some(block + 1),
            _ => None,
        }
    }

    /// Writes several whole-block writes the layout places in allocation
    /// ranges as one batch: blocks are allocated write by write, as
    /// [`write_in_ranges`](Self::write_in_ranges) would (a write continuing
    /// the one before it in the batch continues its run), the data of each
    /// run of consecutive blocks goes to the device as one gathered request —
    /// several clients' large writes become few large requests instead of one
    /// device round trip each — and then each write is mapped and logged, in
    /// order. Returns `Ok(false)`, having changed nothing, when the data
    /// device keeps no payload or has too few allocatable blocks to place
    /// them all without a CP (the caller writes them one by one).
    pub(crate) fn write_ranged_group(&mut self, writes: &[(u64, u64, &[u8])]) -> Result<bool> {
        let total: u64 = writes.iter().map(|&(_, _, bytes)| (bytes.len() / BLOCK_SIZE) as u64).sum();
        let ids: Vec<u64> = writes.iter().map(|&(id, _, _)| id).collect();
        self.ensure_room_for_update(self.write_bound(&ids, total, 0))?;
        let placed_in_ranges = |volume: &Self, &(id, logical, bytes): &(u64, u64, &[u8])| {
            volume.placement_of(id, logical, blocks_of(bytes)) == Placement::Ranges
        };
        if !self.data_stores_payload()
            || self.data_space.allocatable_count() < total
            || !writes.iter().all(|write| placed_in_ranges(self, write))
        {
            return Ok(false);
        }
        // `(write, first logical block, first data block, block count)`.
        let mut pieces: Vec<(usize, u64, u64, u64)> = Vec::new();
        for (index, &(id, logical, bytes)) in writes.iter().enumerate() {
            let count = blocks_of(bytes);
            let mut hint = match pieces.last() {
                Some(&(before, last_logical, start, got))
                    if writes[before].0 == id && last_logical + got == logical =>
                {
                    Some(start + got)
                }
                _ => self.block_after_predecessor(id, logical),
            };
            let mut done = 0;
            while done < count {
                // Enough blocks are allocatable: no CP runs here.
                let (start, got) = self.allocate_in_ranges(hint, (count - done).min(MAX_REQUEST_BLOCKS))?;
                pieces.push((index, logical + done, start, got));
                done += got;
                hint = Some(start + got);
            }
        }
        let slice_of = |&(index, first, _, count): &(usize, u64, u64, u64)| {
            let (_, logical, bytes) = writes[index];
            &bytes[block_bytes(first - logical)..block_bytes(first - logical + count)]
        };
        let ranges: Vec<(u64, u64)> = pieces.iter().map(|&(_, _, start, count)| (start, count)).collect();
        self.announce_data_writes(&ranges)?;
        for run in gathered_runs(&ranges) {
            let slices: Vec<&[u8]> = pieces[run.clone()].iter().map(slice_of).collect();
            self.data.write_gathered(ranges[run.start].0, &slices).map_err(device_error(DeviceRole::Data))?;
        }
        self.log.data_unflushed = true;
        for piece in &pieces {
            let &(index, first, start, _) = piece;
            self.map_direct_piece(writes[index].0, first, start, Payload::Bytes(slice_of(piece)))?;
        }
        self.stats.direct_blocks_written += total;
        Ok(true)
    }

    /// Writes to the first holes after the layout's hole cursor.
    fn write_plugging_holes(&mut self, id: u64, logical: u64, payload: Payload<'_>) -> Result<()> {
        let count = payload.block_count();
        let mut done = 0;
        while done < count {
            let (start, got) = self.allocate_data(self.layout.hole_cursor(), count - done)?;
            self.write_direct_piece(id, logical + done, start, payload.slice(done, got))?;
            self.layout.move_hole_cursor((start + got) % self.data_space.block_count());
            done += got;
        }
        self.stats.direct_blocks_written += count;
        Ok(())
    }

    /// Writes to the log head, filling clean segments in order (when none is
    /// left, to the first free blocks: the cleaner fell behind).
    fn write_at_log_head(&mut self, id: u64, logical: u64, payload: Payload<'_>) -> Result<()> {
        let count = payload.block_count();
        let mut done = 0;
        while done < count {
            let (start, got) = match self.allocate_in_log(id, logical + done, count - done) {
                Some(run) => run,
                None => self.allocate_data(0, count - done)?,
            };
            self.write_direct_piece(id, logical + done, start, payload.slice(done, got))?;
            done += got;
        }
        self.stats.direct_blocks_written += count;
        Ok(())
    }

    /// Overwrites data-device blocks where they are (a frame array without a
    /// write cache). A block a snapshot reads is copied out first (the copy
    /// and its entry durable before the block changes); a write that also
    /// covers holes goes to fresh blocks in ranges instead.
    fn write_in_place(&mut self, id: u64, logical: u64, payload: Payload<'_>) -> Result<()> {
        let count = payload.block_count();
        let segments = map::segments(self.extents.map(id), logical, count);
        if segments.iter().any(|segment| !matches!(segment.location, Some(Location::Data(_)))) {
            return self.write_in_ranges(id, logical, payload);
        }
        // A frame a clone shares is never overwritten in place: the write
        // goes to fresh blocks and the frame loses one reference.
        let shared = |segment: &map::Segment| match segment.location {
            Some(Location::Data(block)) => (block..block + segment.block_count).any(|block| self.refcount(block) > 0),
            _ => false,
        };
        if segments.iter().any(shared) {
            return self.write_in_ranges(id, logical, payload);
        }
        let frames: Vec<u64> = segments
            .iter()
            .flat_map(|segment| match segment.location {
                Some(Location::Data(block)) => block..block + segment.block_count,
                _ => unreachable!("checked above"),
            })
            .collect();
        let (copied, wanted) = self.copy_out_before_overwrite(&frames)?;
        if copied < wanted {
            // The copies made are valid and logged; no frame is overwritten.
            return Err(EngineError::NoSpace {
                role: DeviceRole::Data,
                detail: format!("no room to copy out {} of {wanted} blocks snapshots hold", wanted - copied),
            });
        }
        let stores = self.data_stores_payload();
        let mut pieces = Vec::new();
        let mut written = Vec::new();
        for segment in &segments {
            let Some(Location::Data(block)) = segment.location else { unreachable!("checked above") };
            let piece = payload.slice(segment.logical_block - logical, segment.block_count);
            pieces.push((block, segment.block_count, piece.device_bytes(stores)));
            written.push((block, piece));
        }
        // The blocks' new checksums (the map does not change) are durable
        // before the blocks change: after a crash, replay keeps whichever of
        // the old and new checksums each block matches.
        if self.checksums.is_some() {
            for (block, piece) in written {
                self.log_data_checksums(block, piece)?;
            }
        }
        if self.checksums.is_some() || copied > 0 {
            self.flush_pending_records()?;
        }
        self.write_data_pieces(pieces)?;
        self.log.data_unflushed = true;
        self.stats.in_place_blocks_written += count;
        Ok(())
    }

    /// Writes one piece to data blocks `[start, start + count)`, maps it and
    /// logs a direct record.
    pub(crate) fn write_direct_piece(&mut self, id: u64, logical: u64, start: u64, payload: Payload<'_>) -> Result<()> {
        let count = payload.block_count();
        self.announce_data_writes(&[(start, count)])?;
        match payload {
            Payload::Bytes(bytes) if self.data_stores_payload() => {
                // Straight from the caller's bytes, in requests of at most
                // MAX_REQUEST_BLOCKS as the batch path would split them.
                for (index, piece) in bytes.chunks(in_memory(MAX_REQUEST_BLOCKS) * BLOCK_SIZE).enumerate() {
                    let block = start + index as u64 * MAX_REQUEST_BLOCKS;
                    self.data.write_blocks(block, piece).map_err(device_error(DeviceRole::Data))?;
                }
            }
            _ => {
                let bytes = payload.device_bytes(self.data_stores_payload());
                self.write_data_pieces(vec![(start, count, bytes)])?;
            }
        }
        self.log.data_unflushed = true;
        self.map_direct_piece(id, logical, start, payload)
    }

    /// Writes `payload` (blocks `[logical, …)` of extent `id`) to the data
    /// runs `runs` (`(first block, blocks)`, as many blocks in all as the
    /// payload, taken in order) as one batch of requests, then maps and logs
    /// each run as a direct piece.
    pub(crate) fn write_direct_runs(
        &mut self,
        id: u64,
        logical: u64,
        runs: &[(u64, u64)],
        payload: Payload<'_>,
    ) -> Result<()> {
        let stores = self.data_stores_payload();
        let mut pieces = Vec::with_capacity(runs.len());
        let mut offset = 0;
        for &(start, count) in runs {
            pieces.push((start, count, payload.slice(offset, count).device_bytes(stores)));
            offset += count;
        }
        assert_eq!(offset, payload.block_count(), "the runs hold the payload");
        self.write_data_pieces(pieces)?;
        self.log.data_unflushed = true;
        let mut offset = 0;
        for &(start, count) in runs {
            self.map_direct_piece(id, logical + offset, start, payload.slice(offset, count))?;
            offset += count;
        }
        Ok(())
    }

    /// Maps `[logical, logical + count)` of extent `id` to data blocks
    /// `[start, start + count)`, just written with `payload`, and logs their
    /// checksums and the direct record, in that order.
    fn map_direct_piece(&mut self, id: u64, logical: u64, start: u64, payload: Payload<'_>) -> Result<()> {
        let count = payload.block_count();
        self.log_data_checksums(start, payload)?;
        self.apply_mapping(id, logical, count, Location::Data(start));
        self.push_record(LogRecord::Direct {
            extent_id: id,
            logical_block: logical,
            block_count: u32::try_from(count).expect("a direct piece is at most u32::MAX blocks"),
            data_block: start,
        })
    }

    /// Sets the checksums of data blocks `[first, first + n)` just written
    /// with `payload` and logs them — before the record that maps them, so
    /// that a durable mapping implies durable checksums.
    pub(crate) fn log_data_checksums(&mut self, first: u64, payload: Payload<'_>) -> Result<()> {
        let Some(checksums) = &mut self.checksums else { return Ok(()) };
        let crcs: Vec<u32> = (0..payload.block_count()).map(|index| payload.block_crc(index)).collect();
        for (block, &crc) in (first..).zip(&crcs) {
            checksums.data.set(block, crc);
        }
        self.push_records(LogRecord::checksums(first, &crcs))
    }

    /// Before data-device writes to `ranges` (`(first block, count)`): on a
    /// device whose redundancy a crash can leave inconsistent, logs the
    /// write-intent regions not yet logged in this epoch and makes them
    /// durable, so that the next open after a crash resynchronises them.
    pub(crate) fn announce_data_writes(&mut self, ranges: &[(u64, u64)]) -> Result<()> {
        if !self.options.write_intents {
            return Ok(());
        }
        let Some(region_blocks) = self.data.write_intent_region_blocks() else { return Ok(()) };
        assert!(region_blocks > 0, "a write-intent region holds blocks");
        let mut new_regions: Vec<u64> = ranges
            .iter()
            .filter(|&&(_, count)| count > 0)
            .flat_map(|&(first, count)| first / region_blocks..=(first + count - 1) / region_blocks)
            .filter(|region| !self.log.intent_regions.contains(region))
            .collect();
        if new_regions.is_empty() {
            return Ok(());
        }
        new_regions.sort_unstable();
        new_regions.dedup();
        let mut records: Vec<LogRecord> = Vec::new();
        for &region in &new_regions {
            match records.last_mut() {
                Some(LogRecord::WriteIntent { first_region, region_count })
                    if *first_region + u64::from(*region_count) == region && *region_count < u32::MAX =>
                {
                    *region_count += 1
                }
                _ => records.push(LogRecord::WriteIntent { first_region: region, region_count: 1 }),
            }
        }
        self.log.intent_regions.extend(new_regions);
        self.push_records(records)?;
        self.flush_pending_records()
    }

    /// Writes `(first block, block count, bytes)` pieces to the data device in
    /// one batch; bytes are empty when the device keeps no payload.
    pub(crate) fn write_data_pieces(&mut self, pieces: Vec<(u64, u64, Vec<u8>)>) -> Result<()> {
        let ranges: Vec<(u64, u64)> = pieces.iter().map(|&(block, count, _)| (block, count)).collect();
        self.announce_data_writes(&ranges)?;
        let requests = crate::io::write_requests(pieces);
        if requests.is_empty() {
            return Ok(());
        }
        let completions = self.data.execute(requests).map_err(crate::io::device_error(DeviceRole::Data))?;
        for completion in completions {
            completion.result.map_err(crate::io::device_error(DeviceRole::Data))?;
        }
        Ok(())
    }

    /// The range `[start, end)` of allocation range `range`.
    pub(crate) fn range_bounds(&self, range: u64) -> (u64, u64) {
        let range_blocks = self.options.allocation_range_blocks;
        let start = range * range_blocks;
        (start, (start + range_blocks).min(self.data_space.block_count()))
    }

    /// Number of allocation ranges of the data device.
    pub(crate) fn range_count(&self) -> u64 {
        self.data_space.block_count().div_ceil(self.options.allocation_range_blocks)
    }

    /// Allocates up to `count` blocks for a large write: after `hint` if its
    /// range is under its fill limit, else at the start of an empty range,
    /// else anywhere (after a CP if needed).
    fn allocate_in_ranges(&mut self, hint: Option<u64>, count: u64) -> Result<(u64, u64)> {
        let limit = self.options.layout_parameters().range_fill_limit_blocks();
        if let Some(hint) = hint.filter(|&hint| hint < self.data_space.block_count()) {
            let (start, end) = self.range_bounds(hint / self.options.allocation_range_blocks);
            let used = (end - start) - self.data_space.allocatable_in(start, end);
            let allowed = limit.min(end - start).saturating_sub(used);
            if allowed > 0 {
                if let Some(run) = self.data_space.allocate_within(hint, start, end, count.min(allowed)) {
                    return Ok(run);
                }
            }
        }
        if let Some(range) = self.find_fresh_range() {
            let (start, end) = self.range_bounds(range);
            let run = self.data_space.allocate_within(start, start, end, count.min(limit)).expect("an empty range");
            return Ok(run);
        }
        self.allocate_data(hint.unwrap_or(0), count)
    }

    /// The next allocation range with every block allocatable: outside the
    /// extents' reservations while one is left; else a reserved one, whose
    /// extent's reservation is released (space pressure).
    pub(crate) fn find_fresh_range(&mut self) -> Option<u64> {
        let extents = &self.extents;
        let fresh = self
            .fresh_ranges
            .next(&self.data_space, self.options.allocation_range_blocks, |range| extents.reservation_owner(range))?;
        if let Some(owner) = fresh.reserved_for {
            self.release_reservation(owner);
        }
        Some(fresh.range)
    }

    /// The range for window `logical / R` of extent `id` (R blocks per range)
    /// from the extent's reservation: reserved now, as many consecutive empty
    /// ranges as the extent has windows, if it has none yet. `None` when the
    /// window lies past the reservation or no run of empty ranges that long
    /// is left outside the other reservations.
    pub(crate) fn reserved_range_of_window(&mut self, id: u64, logical: u64) -> Option<u64> {
        let range_blocks = self.options.allocation_range_blocks;
        let reservation = match self.extents.reservation(id) {
            Some(reservation) => reservation,
            None => {
                let record = self.extents.record(id).expect("the extent exists");
                let range_count = (record.size_bytes / BLOCK_SIZE as u64).div_ceil(range_blocks).max(1);
                let extents = &self.extents;
                let first_range = self
                    .fresh_ranges
                    .next_run(&self.data_space, range_blocks, range_count, |range| extents.reservation_owner(range))?;
                let reservation = RangeReservation { first_range, range_count };
                self.extents.set_reservation(id, Some(reservation));
                reservation
            }
        };
        let window = logical / range_blocks;
        (window < reservation.range_count).then_some(reservation.first_range + window)
    }

    /// Releases extent `id`'s reservation: its empty ranges are for anyone.
    pub(crate) fn release_reservation(&mut self, id: u64) {
        self.extents.set_reservation(id, None);
        self.fresh_ranges.reservation_released();
    }

    /// Shrinks extent `id`'s reservation to the windows its size has (after a
    /// resize).
    pub(crate) fn trim_reservation(&mut self, id: u64) {
        let range_blocks = self.options.allocation_range_blocks;
        let Some(reservation) = self.extents.reservation(id) else { return };
        let windows = (self.extent_size(id).expect("the extent exists") / BLOCK_SIZE as u64).div_ceil(range_blocks);
        if windows >= reservation.range_count {
            return;
        }
        match windows {
            0 => self.release_reservation(id),
            range_count => {
                self.extents.set_reservation(id, Some(RangeReservation { range_count, ..reservation }));
                self.fresh_ranges.reservation_released();
            }
        }
    }

    /// Free data blocks inside the extents' reservations (kept for their
    /// first writes; part of the allocatable blocks).
    pub(crate) fn reserved_blocks(&self) -> u64 {
        let range_blocks = self.options.allocation_range_blocks;
        let block_count = self.data_space.block_count();
        self.extents
            .reservations()
            .map(|(_, reservation)| {
                let start = (reservation.first_range * range_blocks).min(block_count);
                let end = (reservation.end_range() * range_blocks).min(block_count);
                self.data_space.allocatable_in(start, end)
            })
            .sum()
    }

    /// Allocates up to `count` consecutive data blocks at or after `hint`
    /// anywhere on the device, committing a CP first if only blocks awaiting
    /// one are free.
    pub(crate) fn allocate_data(&mut self, hint: u64, count: u64) -> Result<(u64, u64)> {
        let count = count.min(u64::from(u32::MAX));
        if let Some(run) = self.data_space.allocate_near(hint, count) {
            return Ok(run);
        }
        // Blocks freed since the last CP become allocatable once it commits.
        self.commit()?;
        self.data_space.allocate_near(hint, count).ok_or_else(|| EngineError::NoSpace {
            role: DeviceRole::Data,
            detail: format!("no free block for a write of {count} blocks"),
        })
    }

    /// Points `[logical, logical + count)` of extent `id` at `location`, freeing
    /// what was there; returns what was there (`(location, block count)` per
    /// mapped run, in logical order).
    pub(crate) fn apply_mapping(
        &mut self,
        id: u64,
        logical: u64,
        count: u64,
        location: Location,
    ) -> Vec<(Location, u64)> {
        let map = self.extents.map_mut(id);
        let displaced = map::assign(map, logical, count, location);
        match location {
            Location::Flash(_) => self.staged_block_count += count,
            Location::Data(first) if self.segments.enabled() => self.summarise(id, logical, count, first),
            Location::Data(_) => {}
        }
        for &(old, length) in &displaced {
            self.free_location(old, length);
        }
        displaced
    }
}

/// Whole blocks in `bytes` (a whole number of blocks).
fn blocks_of(bytes: &[u8]) -> u64 {
    (bytes.len() / BLOCK_SIZE) as u64
}
