//! The segment cleaner: executes the policy's choice (`cleaning.rs`) for the
//! layouts that write segments. A pass reads each victim segment whole (one
//! request), writes the live blocks the active tree maps there to new places
//! (the log head, or other segments' holes), points the maps at them with
//! logged direct records, and ends with a CP, after which the victims are
//! clean.
//!
//! Crash argument (docs/format.md, "Cleaning"): the new copies go to blocks
//! the durable state has free; each piece's checksums and direct record are
//! logged after its copy is written (a log block is written only after the
//! data device is flushed), so a durable record implies a durable copy; the
//! old blocks are freed through the space map, so they are reused only after
//! the CP that records the new places is durable. A crash at any write of a
//! pass leaves every block at its old place or its new one, both holding the
//! same bytes. Allocation and mapping of a chunk happen with no CP between
//! them (room for the chunk's metadata is made first), so no CP ever records
//! an allocated block no map names.
//!
//! Segments holding blocks a snapshot holds are never victims (moving such a
//! block would keep both versions).

use std::collections::BTreeSet;

use proxima_device::BlockDevice;
use serde::Serialize;

use crate::cleaning::{choose_victims, Candidate, CleaningChoice, CleaningMethod};
use crate::codec::LogRecord;
use crate::error::{DeviceRole, EngineError, Result};
use crate::io::{block_bytes, read_pieces};
use crate::map::{self, Location};
use crate::segment_summary::SummaryRun;
use crate::segments::HeadWriter;
use crate::volume::Volume;

/// What one cleaning pass did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CleaningReport {
    /// The policy's choice (`None`: nothing was cleaned).
    pub choice: Option<CleaningChoice>,
    /// Blocks read (whole victim segments that held live blocks).
    pub blocks_read: u64,
    /// Live blocks moved.
    pub blocks_written: u64,
    /// Of those, the blocks written into other segments' holes.
    pub blocks_plugged: u64,
    /// Of those, the blocks written at another log stream's head.
    pub blocks_at_other_heads: u64,
    /// Victims emptied: clean when the pass ended, or emptied and then filled
    /// again by the pass's own copies (after a CP the pass took to make room
    /// for its metadata, an emptied victim is a clean segment like any other).
    pub segments_cleaned: u64,
}

/// Where the cleaner put a run of live blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Destination {
    /// Into another segment's hole (hole-plugging).
    Hole,
    /// At the cleaner's own log head.
    OwnHead,
    /// In the room another stream's head had left.
    OtherHead,
}

/// Live blocks of a victim the active tree maps: a logical run of an extent
/// at consecutive data blocks inside one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LivePiece {
    extent_id: u64,
    logical_block: u64,
    block_count: u64,
    data_block: u64,
    segment: u64,
}

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    /// Whether the layout writes segments and fewer are clean than the
    /// cleaner's start threshold. Asked after every write: the segments are
    /// counted again only after a block was taken since the last count
    /// (`segments.rs`, `Segments::clean_at_least`).
    pub fn cleaning_needed(&mut self) -> bool {
        let threshold = self.options.cleaning.start_below_clean_segments;
        self.segments.enabled() && !self.segments.clean_at_least(&self.data_space, threshold)
    }

    /// Clean segments of the data device (the log head excluded); 0 for a
    /// layout that does not write segments.
    pub fn clean_segment_count(&self) -> u64 {
        if self.segments.enabled() {
            self.segments.clean_count(&self.data_space)
        } else {
            0
        }
    }

    /// One cleaning pass if [`cleaning_needed`](Self::cleaning_needed): the
    /// background step a server takes between client requests.
    pub fn clean_step(&mut self) -> Result<CleaningReport> {
        self.guarded(|volume| {
            if !volume.cleaning_needed() {
                return Ok(CleaningReport::default());
            }
            volume.clean_pass()
        })
    }

    /// Cleans while needed, when the cleaner runs automatically: passes until
    /// enough segments are clean or a pass frees nothing. Background work:
    /// a pass refused for lack of flash room for its metadata (before it
    /// changed anything of the chunk it was moving) ends the cleaning
    /// quietly, and the update that triggered it has succeeded all the same;
    /// the next update tries again.
    pub(crate) fn clean_if_needed(&mut self) -> Result<()> {
        if !self.options.cleaning.automatic {
            return Ok(());
        }
        while self.cleaning_needed() {
            match self.clean_pass() {
                Ok(report) if report.segments_cleaned > 0 => {}
                Ok(_) | Err(EngineError::NoSpace { .. }) => break,
                Err(other) => return Err(other),
            }
        }
        Ok(())
    }

    /// The segments the cleaner may choose: neither clean nor the log head,
    /// nothing held by snapshots, at least one free block.
    fn cleaning_candidates(&self) -> Vec<Candidate> {
        let segment_blocks = self.segments.segment_blocks();
        self.segments
            .usage(&self.data_space)
            .into_iter()
            .filter(|usage| usage.live_blocks < segment_blocks)
            .filter(|usage| !self.segments.is_head(usage.segment))
            .filter(|usage| {
                let (start, end) = self.segments.bounds(usage.segment);
                self.data_space.summary_in(start, end) == 0 && !self.segments.is_clean(&self.data_space, usage.segment)
            })
            .map(|usage| Candidate { usage, partition: 0 })
            .collect()
    }

    /// One pass: choose, move, commit.
    pub(crate) fn clean_pass(&mut self) -> Result<CleaningReport> {
        let mut report = CleaningReport::default();
        let candidates = self.cleaning_candidates();
        let segment_blocks = self.segments.segment_blocks();
        let room_blocks = self.segments.clean_count_now(&self.data_space) * segment_blocks
            + self.segments.heads_room(&self.data_space);
        let clock = self.segments.clock();
        let Some(choice) = choose_victims(&self.options.cleaning, &candidates, segment_blocks, clock, room_blocks)
        else {
            return Ok(report);
        };
        let pieces = self.live_pieces(&choice.victims);
        // Chunks of about a segment of live blocks: each chunk's room is made
        // before its blocks are allocated, and it is mapped before the next.
        let mut chunk: Vec<LivePiece> = Vec::new();
        let mut chunk_blocks = 0;
        // Segments the copies went to.
        let mut destinations = BTreeSet::new();
        for victim in &choice.victims {
            let of_victim: Vec<LivePiece> = pieces.iter().copied().filter(|piece| piece.segment == *victim).collect();
            chunk_blocks += of_victim.iter().map(|piece| piece.block_count).sum::<u64>();
            chunk.extend(of_victim);
            if chunk_blocks >= segment_blocks {
                self.move_chunk(&std::mem::take(&mut chunk), &choice, &mut report, &mut destinations)?;
                chunk_blocks = 0;
            }
        }
        if !chunk.is_empty() {
            self.move_chunk(&chunk, &choice, &mut report, &mut destinations)?;
        }
        // The victims' old blocks are allocatable once this CP is durable.
        self.commit()?;
        // Copies go to clean segments or to non-victims' holes only, so a
        // victim they went to had been emptied first.
        report.segments_cleaned = choice
            .victims
            .iter()
            .filter(|&&segment| self.segments.is_clean(&self.data_space, segment) || destinations.contains(&segment))
            .count() as u64;
        self.stats.cleaning_passes += 1;
        self.stats.segments_cleaned += report.segments_cleaned;
        self.stats.cleaning_blocks_read += report.blocks_read;
        self.stats.cleaning_blocks_written += report.blocks_written;
        self.stats.cleaning_blocks_plugged += report.blocks_plugged;
        self.stats.cleaning_blocks_at_other_heads += report.blocks_at_other_heads;
        report.choice = Some(choice);
        Ok(report)
    }

    /// The runs of the victims' blocks the active tree maps, in data-block
    /// order; a victim with a block a snapshot holds contributes none.
    fn live_pieces(&self, victims: &[u64]) -> Vec<LivePiece> {
        let mut pieces =
            self.live_pieces_from_summaries(victims).unwrap_or_else(|| self.live_pieces_by_walking_maps(victims));
        let held: Vec<u64> = pieces
            .iter()
            .filter(|piece| (0..piece.block_count).any(|i| self.data_space.held_by_snapshot(piece.data_block + i)))
            .map(|piece| piece.segment)
            .collect();
        pieces.retain(|piece| !held.contains(&piece.segment));
        pieces.sort_unstable_by_key(|piece| piece.data_block);
        pieces
    }

    /// The victims' live runs from their segment summaries, if every victim
    /// has one whose confirmed blocks are all the blocks it has in use and
    /// no block is shared between extents (see `segment_summary.rs`).
    fn live_pieces_from_summaries(&self, victims: &[u64]) -> Option<Vec<LivePiece>> {
        if self.refcounts.shared_block_count() > 0 {
            return None;
        }
        let mut pieces = Vec::new();
        for &segment in victims {
            let runs = self.confirmed_runs(segment)?;
            let (start, end) = self.segments.bounds(segment);
            let live: u64 = runs.iter().map(|run| run.block_count).sum();
            if live != self.data_space.in_use_in(start, end) {
                return None;
            }
            pieces.extend(runs.into_iter().map(|run| LivePiece {
                extent_id: run.extent_id,
                logical_block: run.logical_block,
                block_count: run.block_count,
                data_block: run.data_block,
                segment,
            }));
        }
        Some(pieces)
    }

    /// The runs of `segment`'s summary its extents still map there, each
    /// block once, in data-block order, adjacent runs of one extent joined;
    /// `None` without a summary.
    fn confirmed_runs(&self, segment: u64) -> Option<Vec<SummaryRun>> {
        let mut confirmed = Vec::new();
        for run in self.segments.summaries.runs(segment)? {
            let Some(map) = self.extents.find_map(run.extent_id) else { continue };
            for piece in map::segments(map, run.logical_block, run.block_count) {
                let data_block = run.data_block + (piece.logical_block - run.logical_block);
                if piece.location == Some(Location::Data(data_block)) {
                    confirmed.push(SummaryRun {
                        logical_block: piece.logical_block,
                        data_block,
                        block_count: piece.block_count,
                        ..*run
                    });
                }
            }
        }
        confirmed.sort_unstable_by_key(|run| run.data_block);
        let mut joined: Vec<SummaryRun> = Vec::with_capacity(confirmed.len());
        for run in confirmed {
            // Without shared blocks a data block confirmed twice is the
            // same extent block both times: the overlap is dropped.
            let covered = joined.last().map_or(0, |last| last.data_block + last.block_count);
            if run.data_block + run.block_count <= covered {
                continue;
            }
            let skip = covered.saturating_sub(run.data_block);
            let run = SummaryRun {
                logical_block: run.logical_block + skip,
                data_block: run.data_block + skip,
                block_count: run.block_count - skip,
                ..run
            };
            match joined.last_mut() {
                Some(last)
                    if last.extent_id == run.extent_id
                        && last.data_block + last.block_count == run.data_block
                        && last.logical_block + last.block_count == run.logical_block =>
                {
                    last.block_count += run.block_count;
                }
                _ => joined.push(run),
            }
        }
        Some(joined)
    }

    /// Notes blocks `[first, first + count)` of the data device, now mapped
    /// from block `logical` of extent `id`, in their segments' summaries; a
    /// summary grown past four entries per block is cut to its live runs.
    pub(crate) fn summarise(&mut self, id: u64, logical: u64, count: u64, first: u64) {
        let segment_blocks = self.segments.segment_blocks();
        let mut done = 0;
        while done < count {
            let data_block = first + done;
            let block_count = (segment_blocks - data_block % segment_blocks).min(count - done);
            if let Some(segment) = self.segments.segment_of(data_block) {
                let run = SummaryRun { extent_id: id, logical_block: logical + done, data_block, block_count };
                self.segments.summaries.record(segment, run);
                let length = self.segments.summaries.runs(segment).map_or(0, <[SummaryRun]>::len) as u64;
                if length > 4 * segment_blocks {
                    let live = self.confirmed_runs(segment).unwrap_or_default();
                    self.segments.summaries.replace(segment, live);
                }
            }
            done += block_count;
        }
    }

    /// The victims' live runs found by walking every extent map.
    fn live_pieces_by_walking_maps(&self, victims: &[u64]) -> Vec<LivePiece> {
        let segment_blocks = self.segments.segment_blocks();
        let mut is_victim = vec![false; usize::try_from(self.segments.segment_count()).expect("in memory")];
        for &victim in victims {
            is_victim[usize::try_from(victim).expect("in memory")] = true;
        }
        let mut pieces = Vec::new();
        for (extent_id, map) in self.extents.maps() {
            for (logical_block, run) in map.iter() {
                let Location::Data(first) = Location::from_raw(run.location()) else { continue };
                let mut offset = 0;
                while offset < run.count() {
                    let block = first + offset;
                    let in_segment = (segment_blocks - block % segment_blocks).min(run.count() - offset);
                    if let Some(segment) = self.segments.segment_of(block) {
                        if is_victim[usize::try_from(segment).expect("in memory")] {
                            pieces.push(LivePiece {
                                extent_id,
                                logical_block: logical_block + offset,
                                block_count: in_segment,
                                data_block: block,
                                segment,
                            });
                        }
                    }
                    offset += in_segment;
                }
            }
        }
        pieces
    }

    /// Moves one chunk of live pieces: room for its metadata, its victims
    /// read, new places allocated, the copies written as one batch, then
    /// each piece's checksums and direct record logged and its map updated.
    fn move_chunk(
        &mut self,
        chunk: &[LivePiece],
        choice: &CleaningChoice,
        report: &mut CleaningReport,
        destinations: &mut BTreeSet<u64>,
    ) -> Result<()> {
        if chunk.is_empty() {
            return Ok(());
        }
        let mut ids: Vec<u64> = chunk.iter().map(|piece| piece.extent_id).collect();
        ids.sort_unstable();
        ids.dedup();
        let total: u64 = chunk.iter().map(|piece| piece.block_count).sum();
        self.ensure_room_for_update(self.write_bound(&ids, total, 0))?;
        // Each victim read whole, one request per segment.
        let mut victims: Vec<u64> = chunk.iter().map(|piece| piece.segment).collect();
        victims.dedup();
        let reads: Vec<(u64, u64)> = victims
            .iter()
            .map(|&segment| {
                let (start, end) = self.segments.bounds(segment);
                (start, end - start)
            })
            .collect();
        let bytes = read_pieces(&mut self.data, DeviceRole::Data, &reads)?;
        report.blocks_read += reads.iter().map(|&(_, count)| count).sum::<u64>();
        let segment_blocks = self.segments.segment_blocks();
        // Where a victim's bytes begin in `bytes`.
        let segment_offset = |segment: u64| -> u64 {
            reads.iter().take_while(|&&(start, _)| start != segment * segment_blocks).map(|&(_, count)| count).sum()
        };
        // New places, piece by piece (split where an allocation is short).
        let mut plug_targets = match choice.method {
            CleaningMethod::PlugHoles => self.plug_targets(&choice.victims),
            CleaningMethod::Copy => Vec::new(),
        };
        let mut moves: Vec<(LivePiece, u64)> = Vec::new();
        // Once no destination is left (no plug target, no clean segment),
        // none appears before the pass ends: the pieces after stay put
        // without another search of every segment each.
        let mut out_of_room = false;
        for piece in chunk {
            let mut done = 0;
            while done < piece.block_count && !out_of_room {
                let want = piece.block_count - done;
                let Some((start, got, into)) = self.cleaning_destination(&mut plug_targets, piece.segment, want) else {
                    out_of_room = true;
                    break;
                };
                match into {
                    Destination::Hole => report.blocks_plugged += got,
                    Destination::OtherHead => report.blocks_at_other_heads += got,
                    Destination::OwnHead => {}
                }
                let part = LivePiece {
                    logical_block: piece.logical_block + done,
                    block_count: got,
                    data_block: piece.data_block + done,
                    ..*piece
                };
                moves.push((part, start));
                destinations.extend(self.segments.segment_of(start));
                done += got;
            }
        }
        let stores = self.data_stores_payload() && !bytes.is_empty();
        let mut writes: Vec<(u64, u64, Vec<u8>)> = Vec::new();
        let mut sorted = moves.clone();
        sorted.sort_unstable_by_key(|&(_, destination)| destination);
        for (piece, destination) in &sorted {
            let data = if stores {
                let at = segment_offset(piece.segment) + piece.data_block - piece.segment * segment_blocks;
                bytes[block_bytes(at)..block_bytes(at + piece.block_count)].to_vec()
            } else {
                Vec::new()
            };
            match writes.last_mut() {
                Some((block, count, existing)) if *block + *count == *destination => {
                    *count += piece.block_count;
                    existing.extend_from_slice(&data);
                }
                _ => writes.push((*destination, piece.block_count, data)),
            }
        }
        self.write_data_pieces(writes)?;
        self.log.data_unflushed = true;
        for (piece, destination) in moves {
            self.log_moved_checksums(piece.data_block, destination, piece.block_count)?;
            self.apply_mapping(piece.extent_id, piece.logical_block, piece.block_count, Location::Data(destination));
            self.push_record(LogRecord::Direct {
                extent_id: piece.extent_id,
                logical_block: piece.logical_block,
                block_count: u32::try_from(piece.block_count).expect("a piece lies in one segment"),
                data_block: destination,
            })?;
            report.blocks_written += piece.block_count;
        }
        Ok(())
    }

    /// Where up to `count` live blocks of `victim` go: the holes of the
    /// plugging targets left (fullest first), else the cleaner's log head,
    /// else the room another stream's head has left. `None` when none has
    /// room.
    fn cleaning_destination(
        &mut self,
        plug_targets: &mut Vec<u64>,
        victim: u64,
        count: u64,
    ) -> Option<(u64, u64, Destination)> {
        while let Some(&target) = plug_targets.last() {
            let (start, end) = self.segments.bounds(target);
            if let Some((first, got)) = self.data_space.allocate_within(start, start, end, count) {
                return Some((first, got, Destination::Hole));
            }
            plug_targets.pop();
        }
        let writer = HeadWriter::Cleaner { age: self.segments.age(victim) };
        let stream = self.layout.cleaning_stream();
        if let Some((first, got)) = self.segments.allocate_at_stream_head(&mut self.data_space, stream, count, writer) {
            return Some((first, got, Destination::OwnHead));
        }
        let (first, got) = self.segments.allocate_at_other_head(&mut self.data_space, stream, count, writer)?;
        Some((first, got, Destination::OtherHead))
    }

    /// The segments hole-plugging fills, the fullest last (taken first):
    /// those with a block in use and a free block, neither a victim of this
    /// pass nor the log head.
    fn plug_targets(&self, victims: &[u64]) -> Vec<u64> {
        let mut targets: Vec<(u64, u64)> = self
            .segments
            .usage(&self.data_space)
            .into_iter()
            .filter(|usage| usage.live_blocks > 0 && !victims.contains(&usage.segment))
            .filter(|usage| !self.segments.is_head(usage.segment))
            .filter(|usage| {
                let (start, end) = self.segments.bounds(usage.segment);
                self.data_space.allocatable_in(start, end) > 0
            })
            .map(|usage| (usage.live_blocks, usage.segment))
            .collect();
        // Ascending by live blocks, ties to the higher segment first, so the
        // last is the fullest and, among equals, the lowest.
        targets.sort_unstable_by_key(|&(live, segment)| (live, std::cmp::Reverse(segment)));
        targets.into_iter().map(|(_, segment)| segment).collect()
    }

    /// The checksums of blocks moved from `from` to `to` go with them (the
    /// bytes were copied, not recomputed) and are logged before the record
    /// that maps them.
    fn log_moved_checksums(&mut self, from: u64, to: u64, count: u64) -> Result<()> {
        let Some(checksums) = &self.checksums else { return Ok(()) };
        let crcs: Vec<u32> = (0..count).map(|offset| checksums.data.get(from + offset)).collect();
        if let Some(checksums) = &mut self.checksums {
            for (block, &crc) in (to..).zip(&crcs) {
                checksums.data.set(block, crc);
            }
        }
        self.push_records(LogRecord::checksums(to, &crcs))
    }
}

#[cfg(test)]
mod tests {
    use proxima_device::{seeds_for_test, MemoryDevice};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use crate::cleaning::{CleaningPolicy, CleaningSettings};
    use crate::layouts::Layout;
    use crate::volume::{Volume, VolumeOptions};

    /// A WOLF volume of 32-block segments staging two of them, cleaning
    /// passes of four segments at most.
    fn wolf_options(cleaning: CleaningSettings) -> VolumeOptions {
        VolumeOptions {
            layout: Layout::Wolf,
            segment_blocks: 32,
            staging_capacity_blocks: 64,
            destage_step_blocks: 32,
            cleaning: CleaningSettings { pass_blocks_max: 128, ..cleaning },
            ..VolumeOptions::default()
        }
    }

    /// The summaries' live runs of every segment holding data, where they
    /// answer, are the map walk's; they answer for most segments of a volume
    /// written since open, and for none after a reopen.
    #[test]
    fn segment_summaries_find_what_walking_the_maps_finds() {
        let rerun = "cargo test --release -p proxima-engine --lib segment_summaries";
        for seed in seeds_for_test([1], "PROXIMA_SUMMARY_SEED", rerun) {
            let options = wolf_options(CleaningSettings { start_below_clean_segments: 6, ..Default::default() });
            let (data, flash) = (MemoryDevice::new(4096, 2048), MemoryDevice::new(4096, 512));
            let mut volume = Volume::format(data, flash, seed, options.clone()).unwrap();
            let ids = [1200, 300].map(|blocks| volume.create_extent(&format!("e{blocks}"), blocks * 4096).unwrap());
            volume.write(ids[0], 0, &vec![7; 1200 * 4096], false).unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut compared = 0;
            for update in 0..4000u64 {
                let (id, blocks) = if rng.gen_bool(0.8) { (ids[0], 1200) } else { (ids[1], 300) };
                let block = rng.gen_range(0..blocks);
                volume.write(id, block * 4096, &[update.to_le_bytes()[0]; 4096], false).unwrap();
                if update % 500 == 0 {
                    compared += compare_every_segment(&volume, seed);
                }
            }
            let segments = volume.segments.segment_count();
            assert!(compared > segments, "seed {seed}: the summaries answered {compared} times");
            let (data, flash) = volume.close().unwrap();
            let volume = Volume::open(data, flash, options).unwrap();
            let victims: Vec<u64> = (0..segments).collect();
            assert!(volume.live_pieces_from_summaries(&victims).is_none(), "nothing is summarised after a reopen");
        }
    }

    /// WOLF keeps a hot and a cold log head open. Near full, the cleaner's
    /// (cold) head fills when no clean segment is left while the hot head
    /// still has room: the cleaner moves live blocks into that room, and a
    /// greedy cleaner plugs holes only when no head has room at all.
    #[test]
    fn near_full_wolf_cleans_into_the_other_head_before_plugging_holes() {
        let rerun = "cargo test --release -p proxima-engine --lib near_full_wolf";
        for seed in seeds_for_test([3], "PROXIMA_WOLF_SEED", rerun) {
            let options = wolf_options(CleaningSettings {
                automatic: false,
                policy: CleaningPolicy::Greedy,
                start_below_clean_segments: 2,
                ..Default::default()
            });
            let (data, flash) = (MemoryDevice::new(4096, 2048), MemoryDevice::new(4096, 512));
            let mut volume = Volume::format(data, flash, seed, options.clone()).unwrap();
            let blocks = 2048 * 9 / 10;
            let id = volume.create_extent("e", blocks * 4096).unwrap();
            let mut contents = vec![0u8; usize::try_from(blocks * 4096).expect("in memory")];
            volume.write(id, 0, &contents, false).unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let (mut plugged, mut into_other_head) = (0, 0);
            for update in 0..8000u64 {
                let block = if rng.gen_bool(0.9) { rng.gen_range(0..blocks / 10) } else { rng.gen_range(0..blocks) };
                let at = usize::try_from(block * 4096).expect("in memory");
                contents[at..at + 4096].fill(update.to_le_bytes()[0]);
                volume.write(id, block * 4096, &contents[at..at + 4096], false).unwrap();
                while volume.cleaning_needed() {
                    let clean = volume.segments.clean_count_now(&volume.data_space);
                    let room =
                        clean * volume.segments.segment_blocks() + volume.segments.heads_room(&volume.data_space);
                    let report = volume.clean_pass().unwrap();
                    assert!(report.blocks_plugged == 0 || room == 0, "seed {seed}: plugged with {room} blocks of room");
                    plugged += report.blocks_plugged;
                    into_other_head += report.blocks_at_other_heads;
                    if report.segments_cleaned == 0 {
                        break;
                    }
                }
            }
            println!("seed {seed}: {into_other_head} blocks moved to another head, {plugged} plugged");
            assert!(into_other_head > 0, "seed {seed}: the cleaner's head filled with another head's room left");
            assert_eq!(volume.read(id, 0, contents.len() as u64).unwrap(), contents, "seed {seed}");
            assert!(volume.fsck().unwrap().is_clean(), "seed {seed}");
            let (data, flash) = volume.close().unwrap();
            let mut reopened = Volume::open(data, flash, options).unwrap();
            assert_eq!(reopened.read(id, 0, contents.len() as u64).unwrap(), contents, "seed {seed}: after reopen");
        }
    }

    /// Compares the summaries with the walk segment by segment; returns how
    /// many segments the summaries answered for.
    fn compare_every_segment(volume: &Volume<MemoryDevice, MemoryDevice>, seed: u64) -> u64 {
        let mut answered = 0;
        for segment in 0..volume.segments.segment_count() {
            let Some(mut summarised) = volume.live_pieces_from_summaries(&[segment]) else { continue };
            answered += 1;
            let mut walked = volume.live_pieces_by_walking_maps(&[segment]);
            let blocks = |pieces: &mut Vec<super::LivePiece>| {
                pieces.sort_unstable_by_key(|piece| piece.data_block);
                pieces
                    .iter()
                    .flat_map(|piece| {
                        (0..piece.block_count)
                            .map(move |i| (piece.extent_id, piece.logical_block + i, piece.data_block + i))
                    })
                    .collect::<Vec<_>>()
            };
            assert_eq!(blocks(&mut summarised), blocks(&mut walked), "seed {seed}: segment {segment}");
        }
        answered
    }
}
