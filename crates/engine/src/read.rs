//! The read path: filling a caller's buffer from an extent's map (holes as
//! zeroes, data and staged blocks straight from the devices), with every
//! data and staged block checked against its checksum; and the execution of
//! reallocate-on-read (the decision is `realloc.rs`): a scattered span a read
//! just read is written again, contiguously, from the read's own bytes.
//!
//! A block that does not match is never returned: it is read again from the
//! device's redundancy (a RAID array reconstructs it), repaired when that
//! copy matches, and otherwise the read fails with
//! [`EngineError::ChecksumMismatch`]. Shared reads (`&self`, several at once
//! under a server's read lock) cannot repair: they fail the same way, and the
//! caller retries with [`Volume::read_into`].

use proxima_device::BlockDevice;

use crate::checksums::Checksums;
use crate::codec::BLOCK_SIZE;
use crate::error::{DeviceRole, EngineError, Result, Unsuitable};
use crate::io::{block_bytes, device_error, in_memory, runs_of, MAX_REQUEST_BLOCKS};
use crate::map::{self, ExtentMap, Location, Segment};
use crate::realloc::{self, ReallocPiece};
use crate::staging::Payload;
use crate::volume::{BlockStatus, EngineStats, Volume};

const BLOCK_BYTES: u64 = BLOCK_SIZE as u64;

/// Where a read gets its blocks and how it verifies them.
pub(crate) trait BlockSource {
    /// Reads whole blocks from `location` into `destination`.
    fn read(&mut self, location: Location, destination: &mut [u8]) -> Result<()>;

    /// Checks whole blocks just read from `location` against their checksums,
    /// replacing any that does not match with a verified redundant copy, or
    /// failing.
    fn verify(&mut self, location: Location, blocks: &mut [u8]) -> Result<()>;
}

/// The first block of `blocks` (read from `location`) that does not match its
/// checksum, by index, with the block's device and number.
fn first_mismatch(checksums: &Checksums, location: Location, blocks: &[u8]) -> Option<(usize, DeviceRole, u64)> {
    let (role, first, table) = match location {
        Location::Data(block) => (DeviceRole::Data, block, &checksums.data),
        Location::Flash(block) => (DeviceRole::Flash, block, &checksums.flash),
    };
    blocks
        .chunks(BLOCK_SIZE)
        .enumerate()
        .find(|&(index, bytes)| crc32c::crc32c(bytes) != table.get(first + index as u64))
        .map(|(index, _)| (index, role, first + index as u64))
}

/// Reads through `&mut` devices: repairs from redundancy.
pub(crate) struct ExclusiveSource<'a, D, F> {
    pub data: &'a mut D,
    pub flash: &'a mut F,
    pub checksums: Option<&'a Checksums>,
    pub stats: &'a mut EngineStats,
}

impl<D: BlockDevice, F: BlockDevice> BlockSource for ExclusiveSource<'_, D, F> {
    fn read(&mut self, location: Location, destination: &mut [u8]) -> Result<()> {
        match location {
            Location::Data(block) => self.data.read_into(block, destination).map_err(device_error(DeviceRole::Data)),
            Location::Flash(block) => self.flash.read_into(block, destination).map_err(device_error(DeviceRole::Flash)),
        }
    }

    fn verify(&mut self, location: Location, blocks: &mut [u8]) -> Result<()> {
        let Some(checksums) = self.checksums else { return Ok(()) };
        let mut from = 0;
        while let Some((index, role, block)) =
            first_mismatch(checksums, location.offset(from as u64), &blocks[from * BLOCK_SIZE..])
        {
            let index = from + index;
            self.stats.checksum_mismatches += 1;
            let expected = match role {
                DeviceRole::Data => checksums.data.get(block),
                DeviceRole::Flash => checksums.flash.get(block),
            };
            let device: &mut dyn RedundantCopies = match role {
                DeviceRole::Data => self.data,
                DeviceRole::Flash => self.flash,
            };
            let copy = device.redundant_copy(block).map_err(device_error(role))?;
            let Some(copy) = copy.filter(|copy| crc32c::crc32c(copy) == expected) else {
                return Err(EngineError::ChecksumMismatch { role, block });
            };
            // The copy is good whether or not writing it back succeeds; a
            // failed repair leaves the next read to reconstruct it again.
            if device.repair_copy(block, &copy).is_ok() {
                self.stats.repaired_blocks += 1;
            }
            blocks[index * BLOCK_SIZE..(index + 1) * BLOCK_SIZE].copy_from_slice(&copy);
            from = index + 1;
        }
        Ok(())
    }
}

/// The redundancy half of a device, object-safe, for the repair path.
trait RedundantCopies {
    fn redundant_copy(&mut self, block: u64) -> std::result::Result<Option<Vec<u8>>, proxima_device::DeviceError>;
    fn repair_copy(&mut self, block: u64, data: &[u8]) -> std::result::Result<(), proxima_device::DeviceError>;
}

impl<D: BlockDevice> RedundantCopies for D {
    fn redundant_copy(&mut self, block: u64) -> std::result::Result<Option<Vec<u8>>, proxima_device::DeviceError> {
        self.read_redundant(block)
    }
    fn repair_copy(&mut self, block: u64, data: &[u8]) -> std::result::Result<(), proxima_device::DeviceError> {
        self.repair(block, data)
    }
}

/// Reads through shared devices: verifies, cannot repair.
pub(crate) struct SharedSource<'a, D, F> {
    pub data: &'a D,
    pub flash: &'a F,
    pub checksums: Option<&'a Checksums>,
}

impl<D: BlockDevice, F: BlockDevice> BlockSource for SharedSource<'_, D, F> {
    fn read(&mut self, location: Location, destination: &mut [u8]) -> Result<()> {
        match location {
            Location::Data(block) => {
                self.data.read_into_shared(block, destination).map_err(device_error(DeviceRole::Data))
            }
            Location::Flash(block) => {
                self.flash.read_into_shared(block, destination).map_err(device_error(DeviceRole::Flash))
            }
        }
    }

    fn verify(&mut self, location: Location, blocks: &mut [u8]) -> Result<()> {
        let Some(checksums) = self.checksums else { return Ok(()) };
        match first_mismatch(checksums, location, blocks) {
            Some((_, role, block)) => Err(EngineError::ChecksumMismatch { role, block }),
            None => Ok(()),
        }
    }
}

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    /// Reads `length_bytes` at `offset_bytes` of extent `id`.
    pub fn read(&mut self, id: u64, offset_bytes: u64, length_bytes: u64) -> Result<Vec<u8>> {
        self.check_range(id, offset_bytes, length_bytes)?;
        let mut buffer = vec![0; usize::try_from(length_bytes).expect("a read fits in memory")];
        self.read_into(id, offset_bytes, &mut buffer)?;
        Ok(buffer)
    }

    /// Reads `buffer.len()` bytes at `offset_bytes` of extent `id` into
    /// `buffer`: whole blocks straight from the devices into it, holes zeroed,
    /// no intermediate buffer; every block verified (and repaired from
    /// redundancy where it can be).
    pub fn read_into(&mut self, id: u64, offset_bytes: u64, buffer: &mut [u8]) -> Result<()> {
        self.check_usable()?;
        self.check_range(id, offset_bytes, buffer.len() as u64)?;
        let segments = request_segments(self.extents.map(id), offset_bytes, buffer.len() as u64);
        let data_payload = self.data_payload;
        let gaps = self.options.read_gaps();
        fill_from_segments(&segments, offset_bytes, buffer, data_payload, gaps, &mut self.exclusive_source())?;
        if !self.options.read_realloc.enabled {
            return Ok(());
        }
        // The whole blocks the buffer covers can be written again from it.
        let first = offset_bytes.div_ceil(BLOCK_BYTES);
        let end = (offset_bytes + buffer.len() as u64) / BLOCK_BYTES;
        if first >= end {
            return Ok(());
        }
        let whole =
            &buffer[in_memory((first * BLOCK_BYTES) - offset_bytes)..][..in_memory((end - first) * BLOCK_BYTES)];
        let payload = if data_payload { Payload::Bytes(whole) } else { Payload::Synthetic(end - first) };
        self.reallocate_after_read(id, first, payload)
    }

    /// Whether a read of `[offset, offset + length)` of extent `id` would
    /// reallocate what it reads: a server that reads under a shared lock
    /// takes the exclusive path ([`Volume::read_into`]) for such a read.
    pub fn read_would_reallocate(&self, id: u64, offset_bytes: u64, length_bytes: u64) -> bool {
        let settings = &self.options.read_realloc;
        let first = offset_bytes.div_ceil(BLOCK_BYTES);
        let end = offset_bytes.saturating_add(length_bytes) / BLOCK_BYTES;
        settings.enabled
            && first < end
            && self.check_range(id, offset_bytes, length_bytes).is_ok()
            && realloc::read_request_count(
                &map::segments(self.extents.map(id), first, end - first),
                self.options.read_gaps(),
            ) >= settings.runs_min
    }

    /// Rewrites, from `payload` (the blocks from `first_block` just read),
    /// the pieces of that span the read-reallocation settings pick, each as
    /// one contiguous run, or gathered where reads take gaps through
    /// (docs/read-realloc.md). A piece with no such place near its
    /// neighbours, or without room in the log, stays where it is.
    pub(crate) fn reallocate_after_read(&mut self, id: u64, first_block: u64, payload: Payload<'_>) -> Result<()> {
        let segments = map::segments(self.extents.map(id), first_block, payload.block_count());
        let gaps = self.options.read_gaps();
        let pieces = realloc::pieces_to_reallocate(&segments, &self.options.read_realloc, gaps, |block| {
            self.data_space.held_by_snapshot(block)
        });
        if pieces.is_empty() {
            return Ok(());
        }
        self.guarded(|volume| {
            for piece in pieces {
                let piece_payload = payload.slice(piece.logical_block - first_block, piece.block_count);
                match volume.reallocate_piece(id, piece, piece_payload) {
                    Err(EngineError::NoSpace { .. }) => volume.stats.reallocation_skipped_blocks += piece.block_count,
                    outcome => outcome?,
                }
            }
            volume.finish_update(false)
        })
    }

    /// Writes `piece` of extent `id` (its blocks on the data device, as the
    /// read found them) to a fresh contiguous run, else, where reads take
    /// gaps through, to blocks one read takes in one request.
    fn reallocate_piece(&mut self, id: u64, piece: ReallocPiece, payload: Payload<'_>) -> Result<()> {
        let count = piece.block_count;
        // Gathered blocks may be as many runs as blocks, each with a direct
        // record and a checksum record.
        let gathers = self.options.read_gap_blocks > 0;
        let records_blocks = if gathers { 2 * count } else { count };
        self.ensure_room_for_update(self.write_bound(&[id], records_blocks, 0))?;
        // Making room commits or destages, which moves staged blocks only;
        // the piece is still checked to be where the read found it.
        let segments = map::segments(self.extents.map(id), piece.logical_block, count);
        if !segments.iter().all(|segment| matches!(segment.location, Some(Location::Data(_)))) {
            return Ok(());
        }
        let mut placed = self.place_reallocation(id, piece, gathers);
        // The blocks earlier pieces left are free only after a CP: when a
        // piece finds no place and blocks were let go since the last such
        // CP, one is taken (as a write-anywhere file system's regular CPs
        // would) and the piece tries again.
        let free_count = self.data_space.free_count();
        if placed.is_none() && self.realloc_commit_free_count.is_none_or(|at| at < free_count) {
            self.realloc_commit_free_count = Some(free_count);
            self.commit()?;
            placed = self.place_reallocation(id, piece, gathers);
        }
        match placed.as_deref() {
            // One run: written straight from the caller's bytes.
            Some(&[(start, _)]) => self.write_direct_piece(id, piece.logical_block, start, payload)?,
            Some(runs) => self.write_direct_runs(id, piece.logical_block, runs, payload)?,
            None => {
                self.stats.reallocation_skipped_blocks += count;
                return Ok(());
            }
        }
        self.stats.reallocated_blocks += count;
        Ok(())
    }

    /// Where `piece` of extent `id` goes, as the physical runs `(first block,
    /// blocks)` it takes in logical order: one contiguous run, else (where
    /// `gathers`) a gathered set; `None` when neither is free.
    fn place_reallocation(&mut self, id: u64, piece: ReallocPiece, gathers: bool) -> Option<Vec<(u64, u64)>> {
        self.search_reallocation(id, piece, ReallocShape::Run)
            .or_else(|| gathers.then(|| self.search_reallocation(id, piece, ReallocShape::Gathered)).flatten())
    }

    /// Blocks of `shape` for `piece`: right after its logical predecessor on
    /// the data device (else after its own first block), within the span
    /// destage searches near a neighbour; else the first on the device after
    /// the last such far placement (wrapping), so that the pieces of one
    /// serial reader, each placed after the one before, fill one free region.
    /// A far search that finds nothing is not repeated for pieces as large
    /// until a CP frees blocks. Never a frame home a staged block goes back
    /// to.
    fn search_reallocation(&mut self, id: u64, piece: ReallocPiece, shape: ReallocShape) -> Option<Vec<(u64, u64)>> {
        let count = piece.block_count;
        let hint = self.reallocation_hint(id, piece);
        let near_blocks = self.options.proximal_span_ranges.max(1) * self.options.allocation_range_blocks;
        if let Some(runs) = self.allocate_reallocation(shape, hint, count, near_blocks) {
            return Some(runs);
        }
        let missed = self.realloc_far_miss[shape as usize];
        if missed.is_some_and(|(generation, missed)| generation == self.generation && count >= missed) {
            return None;
        }
        let (cursor, block_count) = (self.realloc_cursor, self.data_space.block_count());
        let found = self
            .allocate_reallocation(shape, cursor, count, block_count - cursor)
            .or_else(|| self.allocate_reallocation(shape, 0, count, cursor));
        match &found {
            Some(runs) => {
                let &(start, run) = runs.last().expect("a placement has a run");
                self.realloc_cursor = (start + run) % block_count;
            }
            None => self.realloc_far_miss[shape as usize] = Some((self.generation, count)),
        }
        found
    }

    /// Allocates `count` blocks of `shape`, the first in `[from, from +
    /// search_blocks)`, as their physical runs: a contiguous run, or a set
    /// one read takes in one request, reading the gaps between them through
    /// — no more other blocks between them in all than
    /// `VolumeOptions::read_gap_blocks` (what a read takes through rather
    /// than position again: the set costs at most one positioning's worth of
    /// transfer more than a contiguous run), inside one allocation range. So
    /// a write-anywhere file system writes a CP's blocks into the free blocks
    /// of an area, not only into free runs.
    fn allocate_reallocation(
        &mut self,
        shape: ReallocShape,
        from: u64,
        count: u64,
        search_blocks: u64,
    ) -> Option<Vec<(u64, u64)>> {
        let layout = &self.layout;
        let accept = |block: u64| !layout.is_frame_home(block);
        match shape {
            ReallocShape::Run => {
                self.data_space.allocate_run(from, count, search_blocks, accept).map(|start| vec![(start, count)])
            }
            ReallocShape::Gathered => {
                let gaps = self.options.read_gaps();
                let blocks = self.data_space.allocate_gathered(
                    from,
                    count,
                    (gaps.gap_blocks, gaps.unit_blocks),
                    search_blocks,
                    accept,
                )?;
                Some(runs_of(&blocks))
            }
        }
    }

    /// Where a reallocated piece of extent `id` goes: right after its
    /// logical predecessor on the data device, else after its own first
    /// block.
    fn reallocation_hint(&self, id: u64, piece: ReallocPiece) -> u64 {
        let map = self.extents.map(id);
        let predecessor = piece.logical_block.checked_sub(1).and_then(|block| map::lookup(map, block));
        match (predecessor, map::lookup(map, piece.logical_block)) {
            (Some(Location::Data(block)), _) | (_, Some(Location::Data(block))) => block + 1,
            _ => unreachable!("a piece's blocks are on the data device"),
        }
    }

    /// The read source of this volume's devices, repairing from redundancy.
    pub(crate) fn exclusive_source(&mut self) -> ExclusiveSource<'_, D, F> {
        ExclusiveSource {
            data: &mut self.data,
            flash: &mut self.flash,
            checksums: self.checksums.as_ref(),
            stats: &mut self.stats,
        }
    }

    /// Whether both devices serve reads through a shared reference, so that
    /// [`Volume::read_shared`] works.
    pub fn supports_shared_reads(&self) -> bool {
        self.data.supports_shared_reads() && self.flash.supports_shared_reads()
    }

    /// Reads as [`Volume::read_into`] through `&self`, so that a server may run
    /// reads of several connections at once under a read lock. Copy-on-write
    /// makes this safe: a block the map points at is never overwritten while
    /// the map points at it, and a block it stops pointing at is reused only
    /// after a CP, which needs `&mut self` — so no block is reused while a
    /// shared read holds `&self`. Fails with [`EngineError::Unsuitable`] when
    /// [`Volume::supports_shared_reads`] is false, and with
    /// [`EngineError::ChecksumMismatch`] on a damaged block, which
    /// [`Volume::read_into`] may repair.
    pub fn read_shared(&self, id: u64, offset_bytes: u64, buffer: &mut [u8]) -> Result<()> {
        self.check_usable()?;
        self.check_range(id, offset_bytes, buffer.len() as u64)?;
        if !self.supports_shared_reads() {
            return Err(EngineError::Unsuitable(Unsuitable::NoSharedReads));
        }
        let segments = request_segments(self.extents.map(id), offset_bytes, buffer.len() as u64);
        let mut source = SharedSource { data: &self.data, flash: &self.flash, checksums: self.checksums.as_ref() };
        let gaps = self.options.read_gaps();
        fill_from_segments(&segments, offset_bytes, buffer, self.data_payload, gaps, &mut source)
    }

    /// Reads the blocks of `segments` (contiguous; holes as zeroes),
    /// concatenated and verified.
    pub(crate) fn read_segments(&mut self, segments: &[Segment]) -> Result<Vec<u8>> {
        let Some(first) = segments.first() else { return Ok(Vec::new()) };
        let total: u64 = segments.iter().map(|segment| segment.block_count).sum();
        let mut out = vec![0; usize::try_from(total * BLOCK_BYTES).expect("a read fits in memory")];
        let offset_bytes = first.logical_block * BLOCK_BYTES;
        let data_payload = self.data_payload;
        let gaps = self.options.read_gaps();
        fill_from_segments(segments, offset_bytes, &mut out, data_payload, gaps, &mut self.exclusive_source())?;
        Ok(out)
    }

    /// Which byte ranges of `[offset, offset + length)` are mapped and which are
    /// holes, at block granularity (clipped to the request).
    pub fn block_status(&self, id: u64, offset_bytes: u64, length_bytes: u64) -> Result<Vec<BlockStatus>> {
        self.check_range(id, offset_bytes, length_bytes)?;
        Ok(map_block_status(self.extents.map(id), offset_bytes, length_bytes))
    }
}

/// The segments of the blocks that bytes `[offset_bytes, offset_bytes +
/// length_bytes)` touch (none for an empty range).
pub(crate) fn request_segments(map: &ExtentMap, offset_bytes: u64, length_bytes: u64) -> Vec<Segment> {
    if length_bytes == 0 {
        return Vec::new();
    }
    let first = offset_bytes / BLOCK_BYTES;
    let end = (offset_bytes + length_bytes).div_ceil(BLOCK_BYTES);
    map::segments(map, first, end - first)
}

/// The bytes `[low, high)` of the request a segment covers, if any.
fn segment_bytes(segment: &Segment, offset_bytes: u64, request_end: u64) -> Option<(u64, u64)> {
    let low = (segment.logical_block * BLOCK_BYTES).max(offset_bytes);
    let high = ((segment.logical_block + segment.block_count) * BLOCK_BYTES).min(request_end);
    (low < high).then_some((low, high))
}

/// Fills `buffer` with the bytes from `offset_bytes` on of the logical range
/// `segments` cover: holes (and data blocks of a data device without payload,
/// when `data_payload` is false) as zeroes, mapped blocks through `source`,
/// each verified.
///
/// Data-device segments that keep their logical distance on the device — an
/// extent laid out in one run whose random updates are staged on flash, or
/// were trimmed — are read as one span ([`data_spans`]), blocks between them
/// included, and the staged blocks and holes in between are then written
/// over it: one data request instead of one per piece (after random-write
/// aging a 1 MiB read has dozens of such pieces). Spans a gap apart that
/// `gaps` reads through are read together as one run ([`data_reads`]) into a
/// window, each span copied from it to its place. Only the spans' mapped
/// blocks are verified. Whole blocks of a lone span are read straight
/// into `buffer`, in requests of at most [`MAX_REQUEST_BLOCKS`]; a partly
/// covered block at either end goes through one block on the stack, verified
/// there.
pub(crate) fn fill_from_segments(
    segments: &[Segment],
    offset_bytes: u64,
    buffer: &mut [u8],
    data_payload: bool,
    gaps: ReadGaps,
    source: &mut impl BlockSource,
) -> Result<()> {
    if data_payload {
        let mut spans = data_spans(segments);
        for read in data_reads(&mut spans, gaps) {
            let served = &spans[read.spans];
            if let [span] = served {
                fill_span(segments, span, offset_bytes, buffer, source)?;
                continue;
            }
            let mut window = WindowSource::read(source, read.block, read.block_count)?;
            for span in served {
                fill_span(segments, span, offset_bytes, buffer, &mut window)?;
            }
        }
    }
    let request_end = offset_bytes + buffer.len() as u64;
    for segment in segments {
        match segment.location {
            Some(Location::Flash(_)) => {
                read_segment_bytes(segment, offset_bytes, buffer, source)?;
                verify_whole_blocks(segment, offset_bytes, buffer, source)?;
            }
            Some(Location::Data(_)) if data_payload => {}
            _ => {
                if let Some((low, high)) = segment_bytes(segment, offset_bytes, request_end) {
                    buffer[in_memory(low - offset_bytes)..in_memory(high - offset_bytes)].fill(0);
                }
            }
        }
    }
    Ok(())
}

/// Reads `span` into its place in `buffer` and verifies its data segments.
fn fill_span(
    segments: &[Segment],
    span: &DataSpan,
    offset_bytes: u64,
    buffer: &mut [u8],
    source: &mut impl BlockSource,
) -> Result<()> {
    read_segment_bytes(&span.segment, offset_bytes, buffer, source)?;
    for segment in &segments[span.segments.clone()] {
        if let Some(Location::Data(_)) = segment.location {
            verify_whole_blocks(segment, offset_bytes, buffer, source)?;
        }
    }
    Ok(())
}

/// Data-device blocks read in one run, served to the spans the run covers;
/// verification goes to the source the window was read from.
struct WindowSource<'a, S> {
    first_block: u64,
    blocks: Vec<u8>,
    source: &'a mut S,
}

impl<'a, S: BlockSource> WindowSource<'a, S> {
    /// Reads `block_count` data-device blocks from `first_block`, in requests
    /// of at most [`MAX_REQUEST_BLOCKS`].
    fn read(source: &'a mut S, first_block: u64, block_count: u64) -> Result<Self> {
        let mut blocks = vec![0; block_bytes(block_count)];
        for (index, chunk) in blocks.chunks_mut(block_bytes(MAX_REQUEST_BLOCKS)).enumerate() {
            source.read(Location::Data(first_block + index as u64 * MAX_REQUEST_BLOCKS), chunk)?;
        }
        Ok(WindowSource { first_block, blocks, source })
    }
}

impl<S: BlockSource> BlockSource for WindowSource<'_, S> {
    fn read(&mut self, location: Location, destination: &mut [u8]) -> Result<()> {
        let Location::Data(block) = location else {
            return self.source.read(location, destination);
        };
        let from = block_bytes(block - self.first_block);
        destination.copy_from_slice(&self.blocks[from..from + destination.len()]);
        Ok(())
    }

    fn verify(&mut self, location: Location, blocks: &mut [u8]) -> Result<()> {
        self.source.verify(location, blocks)
    }
}

/// One data-device read of a request: the data segments
/// `segments[segments]`, read as the single physical run `segment`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DataSpan {
    /// The segments of the request the span covers (its data segments, and
    /// the staged blocks and holes between them).
    pub(crate) segments: std::ops::Range<usize>,
    /// The span: from the first data segment's logical block and place, as
    /// long as the covered segments.
    pub(crate) segment: Segment,
}

/// The data-device reads of one request's `segments` (in logical order): a
/// data segment starts a span, and each later data segment that lies where
/// the span's run would put it (its physical distance from the span's first
/// block equals its logical distance) joins it; staged blocks and holes in
/// between are read through (their places are read and discarded; the
/// caller writes their contents over them). The first data segment that
/// does not keep the distance starts the next span. So a run that a few
/// staged blocks split is one disk request, as its neighbours' places
/// around the staged blocks' old ones are.
pub(crate) fn data_spans(segments: &[Segment]) -> Vec<DataSpan> {
    let data_block = |segment: &Segment| match segment.location {
        Some(Location::Data(block)) => Some(block),
        _ => None,
    };
    let mut spans = Vec::new();
    let mut index = 0;
    while index < segments.len() {
        let Some(first_block) = data_block(&segments[index]) else {
            index += 1;
            continue;
        };
        let logical_start = segments[index].logical_block;
        let mut last = index;
        for (later, segment) in segments.iter().enumerate().skip(index + 1) {
            if let Some(block) = data_block(segment) {
                if block.checked_sub(first_block) != Some(segment.logical_block - logical_start) {
                    break;
                }
                last = later;
            }
        }
        let logical_end = segments[last].logical_block + segments[last].block_count;
        spans.push(DataSpan {
            segments: index..last + 1,
            segment: Segment {
                logical_block: logical_start,
                block_count: logical_end - logical_start,
                location: Some(Location::Data(first_block)),
            },
        });
        index = last + 1;
    }
    spans
}

/// The shape of the blocks a reallocated piece takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReallocShape {
    /// One contiguous run.
    Run = 0,
    /// Blocks one read takes in one request through the gaps between them.
    Gathered = 1,
}

/// One data-device request of a read: the run `[block, block + block_count)`
/// and the spans it serves (indices into the spans [`data_reads`] ordered),
/// blocks between them read through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DataRead {
    pub(crate) block: u64,
    pub(crate) block_count: u64,
    pub(crate) spans: std::ops::Range<usize>,
}

/// How a read treats the gaps between the data-device places it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadGaps {
    /// Gaps of at most this many blocks are read through (0: none).
    pub(crate) gap_blocks: u64,
    /// Only gaps within one aligned unit of this many blocks are read
    /// through (the allocation range: a RAID stripe unit in the paper's
    /// arrays, so a gap never reaches onto another disk).
    pub(crate) unit_blocks: u64,
}

impl ReadGaps {
    /// Whether a request ending before block `end` takes a piece starting at
    /// block `start`: one that continues or overlaps it, or one a gap away
    /// whose gap `[end, start)` lies within one unit.
    fn reads_through(self, end: u64, start: u64) -> bool {
        let gap_in_one_unit = end / self.unit_blocks == start / self.unit_blocks;
        self.gap_blocks > 0 && (start <= end || (start <= end + self.gap_blocks && gap_in_one_unit))
    }
}

/// The data-device requests that read `spans`: with no gap read through,
/// one per span, in the spans' order; otherwise the spans put in the order
/// of their places, each joining the request before it when the gap between
/// them is one `gaps` reads through, the blocks between read and discarded.
/// A gap read through costs its transfer; a request of its own costs a
/// positioning, which on a disk is about half a revolution: a gap of up to
/// half a track on the same disk is cheaper read through (docs/layouts.md,
/// "Reading through gaps").
pub(crate) fn data_reads(spans: &mut [DataSpan], gaps: ReadGaps) -> Vec<DataRead> {
    let place = |span: &DataSpan| match span.segment.location {
        Some(Location::Data(block)) => block,
        _ => unreachable!("a span is on the data device"),
    };
    if gaps.gap_blocks > 0 {
        spans.sort_by_key(place);
    }
    let mut reads: Vec<DataRead> = Vec::new();
    for (index, span) in spans.iter().enumerate() {
        let (block, block_count) = (place(span), span.segment.block_count);
        match reads.last_mut() {
            Some(read) if gaps.reads_through(read.block + read.block_count, block) => {
                read.block_count = read.block_count.max(block + block_count - read.block);
                read.spans.end = index + 1;
            }
            _ => reads.push(DataRead { block, block_count, spans: index..index + 1 }),
        }
    }
    reads
}

/// Verifies the blocks of a mapped segment that lie wholly inside the
/// request, where they were read into `buffer` (partly covered blocks were
/// verified as they were read).
fn verify_whole_blocks(
    segment: &Segment,
    offset_bytes: u64,
    buffer: &mut [u8],
    source: &mut impl BlockSource,
) -> Result<()> {
    let location = segment.location.expect("a mapped segment");
    let Some((low, high)) = segment_bytes(segment, offset_bytes, offset_bytes + buffer.len() as u64) else {
        return Ok(());
    };
    let first_whole = low.div_ceil(BLOCK_BYTES);
    let end_whole = high / BLOCK_BYTES;
    if first_whole >= end_whole {
        return Ok(());
    }
    let from = in_memory(first_whole * BLOCK_BYTES - offset_bytes);
    let to = in_memory(end_whole * BLOCK_BYTES - offset_bytes);
    source.verify(location.offset(first_whole - segment.logical_block), &mut buffer[from..to])
}

/// Reads the part of a mapped segment that falls in the request into its
/// place in `buffer`.
fn read_segment_bytes(
    segment: &Segment,
    offset_bytes: u64,
    buffer: &mut [u8],
    source: &mut impl BlockSource,
) -> Result<()> {
    let location = segment.location.expect("a mapped segment");
    let Some((low, high)) = segment_bytes(segment, offset_bytes, offset_bytes + buffer.len() as u64) else {
        return Ok(());
    };
    let mut at = low;
    while at < high {
        let block_location = location.offset(at / BLOCK_BYTES - segment.logical_block);
        let within_block = in_memory(at % BLOCK_BYTES);
        let destination_at = in_memory(at - offset_bytes);
        if within_block == 0 && high - at >= BLOCK_BYTES {
            let whole_blocks = ((high - at) / BLOCK_BYTES).min(MAX_REQUEST_BLOCKS);
            let length = block_bytes(whole_blocks);
            source.read(block_location, &mut buffer[destination_at..destination_at + length])?;
            at += length as u64;
        } else {
            let mut block = [0u8; BLOCK_SIZE];
            source.read(block_location, &mut block)?;
            source.verify(block_location, &mut block)?;
            let length = (BLOCK_SIZE - within_block).min(in_memory(high - at));
            buffer[destination_at..destination_at + length]
                .copy_from_slice(&block[within_block..within_block + length]);
            at += length as u64;
        }
    }
    Ok(())
}

/// Block status of `[offset, offset + length)` of an extent's map: runs of
/// mapped and hole blocks, clipped to the request.
pub(crate) fn map_block_status(map: &ExtentMap, offset_bytes: u64, length_bytes: u64) -> Vec<BlockStatus> {
    let request_end = offset_bytes + length_bytes;
    let mut statuses: Vec<BlockStatus> = Vec::new();
    for segment in request_segments(map, offset_bytes, length_bytes) {
        let Some((start, stop)) = segment_bytes(&segment, offset_bytes, request_end) else { continue };
        let allocated = segment.location.is_some();
        match statuses.last_mut() {
            Some(last) if last.allocated == allocated => last.length_bytes += stop - start,
            _ => statuses.push(BlockStatus { offset_bytes: start, length_bytes: stop - start, allocated }),
        }
    }
    statuses
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(logical_block: u64, block_count: u64, place: u64) -> Segment {
        Segment { logical_block, block_count, location: Some(Location::Data(place)) }
    }

    fn staged(logical_block: u64, block_count: u64) -> Segment {
        Segment { logical_block, block_count, location: Some(Location::Flash(9_000 + logical_block)) }
    }

    fn runs(reads: &[DataRead]) -> Vec<(u64, u64)> {
        reads.iter().map(|read| (read.block, read.block_count)).collect()
    }

    /// A frame at 100.. with blocks 2 and 5 moved to 120 and 110, block 7 staged.
    fn scattered() -> Vec<Segment> {
        vec![
            data(0, 2, 100),
            data(2, 1, 120),
            data(3, 2, 103),
            data(5, 1, 110),
            data(6, 1, 106),
            staged(7, 1),
            data(8, 2, 108),
        ]
    }

    #[test]
    fn without_gaps_each_span_is_a_request_in_logical_order() {
        let gaps = ReadGaps { gap_blocks: 0, unit_blocks: 64 };
        let reads = data_reads(&mut data_spans(&scattered()), gaps);
        // The staged block is read through; each moved block breaks the run.
        assert_eq!(runs(&reads), vec![(100, 2), (120, 1), (103, 2), (110, 1), (106, 4)]);
        assert!(reads.iter().all(|read| read.spans.len() == 1));
    }

    #[test]
    fn gaps_within_the_limit_are_read_through_in_the_order_of_places() {
        let mut spans = data_spans(&scattered());
        let reads = data_reads(&mut spans, ReadGaps { gap_blocks: 10, unit_blocks: 64 });
        assert_eq!(runs(&reads), vec![(100, 21)]);
        assert_eq!(reads[0].spans, 0..spans.len());
        let places: Vec<u64> = spans
            .iter()
            .map(|span| match span.segment.location {
                Some(Location::Data(block)) => block,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(places, vec![100, 103, 106, 110, 120]);
        // With a limit of 3 the gaps of one block are read through, not the
        // nine blocks before 120.
        let reads = data_reads(&mut data_spans(&scattered()), ReadGaps { gap_blocks: 3, unit_blocks: 64 });
        assert_eq!(runs(&reads), vec![(100, 11), (120, 1)]);
    }

    #[test]
    fn a_gap_across_a_unit_boundary_is_not_read_through() {
        // Units of 8 blocks: 96..104 is unit 12, 104..112 unit 13. The gap
        // 102..105 crosses into unit 13; 104..105 lies within it.
        let segments = vec![data(0, 2, 100), data(2, 1, 105)];
        let reads = data_reads(&mut data_spans(&segments), ReadGaps { gap_blocks: 10, unit_blocks: 8 });
        assert_eq!(runs(&reads), vec![(100, 2), (105, 1)]);
        let segments = vec![data(0, 2, 100), data(2, 2, 102), data(4, 1, 105)];
        let reads = data_reads(&mut data_spans(&segments), ReadGaps { gap_blocks: 10, unit_blocks: 8 });
        assert_eq!(runs(&reads), vec![(100, 6)]);
        // A piece that continues the request joins it across the boundary;
        // a gap after it, within its unit, is read through.
        let segments = vec![data(0, 4, 100), data(4, 1, 110), data(5, 4, 104)];
        let reads = data_reads(&mut data_spans(&segments), ReadGaps { gap_blocks: 10, unit_blocks: 8 });
        assert_eq!(runs(&reads), vec![(100, 11)]);
    }
}
