//! The copy-out table: where the in-place layout put the versions of frame
//! blocks that snapshots see after it overwrote the frames (docs/layouts.md,
//! "Copy-out of snapshot blocks").
//!
//! One entry per copy: copy block `Y` → (frame block `X`, watermark `W`): the
//! version of `X` that snapshots with ids in `(W', W]` see lives at `Y`, where
//! `W'` is the watermark of `X`'s previous entry (0 if none).
//!
//! Invariants (asserted): a copy block is in one entry; a frame's watermarks
//! strictly increase with its entries; a copy is never a frame of the table.
//! The table decides; the volume does the I/O and keeps the space maps
//! (below the table: the copy on first write, before an overwrite is staged
//! or written in place; the frame's release; restore).

use std::collections::{BTreeMap, HashMap, HashSet};

use proxima_device::BlockDevice;

use crate::codec::{CopyOutRecord, LogRecord, SnapshotState};
use crate::error::{DeviceRole, Result};
use crate::io::{block_bytes, read_pieces, runs_of};
use crate::layouts::LayoutStrategy;
use crate::map::{Location, Segment};
use crate::staging::Payload;
use crate::tree::PersistentTree;
use crate::volume::Volume;

/// The copy-out table: the persistent entries and their index by frame.
#[derive(Debug, Clone)]
pub(crate) struct CopyOuts {
    /// Copy block → entry: the durable form.
    entries: PersistentTree<CopyOutRecord>,
    /// Frame block → `(watermark, copy block)`, watermarks ascending.
    by_frame: BTreeMap<u64, Vec<(u64, u64)>>,
}

impl CopyOuts {
    /// An empty table.
    pub(crate) fn new() -> Self {
        Self { entries: PersistentTree::new(0), by_frame: BTreeMap::new() }
    }

    /// The table held by `entries` (loaded from a CP); an error names the
    /// first entry that breaks the table's invariants.
    pub(crate) fn try_from_tree(entries: PersistentTree<CopyOutRecord>) -> Result<Self, String> {
        let mut by_frame: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
        for (copy, record) in entries.iter() {
            by_frame.entry(record.frame).or_default().push((record.watermark, copy));
        }
        for (frame, copies) in &mut by_frame {
            copies.sort_unstable();
            if let Some(pair) = copies.windows(2).find(|pair| pair[0].0 == pair[1].0) {
                return Err(format!("frame {frame} has two copies for snapshot #{}", pair[0].0));
            }
        }
        if let Some((copy, record)) = entries.iter().find(|(copy, _)| by_frame.contains_key(copy)) {
            return Err(format!("copy block {copy} of frame {} is itself a frame with copies", record.frame));
        }
        Ok(Self { entries, by_frame })
    }

    /// Every frame that snapshot `snapshot_id` reads at a copy, with the
    /// copy, in frame order.
    pub(crate) fn redirects(&self, snapshot_id: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.by_frame.keys().filter_map(move |&frame| {
            let copy = self.resolve(frame, snapshot_id);
            (copy != frame).then_some((frame, copy))
        })
    }

    /// Every copy as `(frame, copy)`, in frame order (each frame's copies by
    /// watermark).
    pub(crate) fn places(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.by_frame.iter().flat_map(|(&frame, copies)| copies.iter().map(move |&(_, copy)| (frame, copy)))
    }

    /// The persistent entries (for the CP that persists them).
    pub(crate) fn tree_mut(&mut self) -> &mut PersistentTree<CopyOutRecord> {
        &mut self.entries
    }

    /// The persistent entries.
    pub(crate) fn tree(&self) -> &PersistentTree<CopyOutRecord> {
        &self.entries
    }

    /// Number of copies.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no copy.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The highest watermark of `frame`'s copies: every snapshot up to it
    /// reads a copy of the frame rather than the frame.
    pub(crate) fn last_watermark(&self, frame: u64) -> Option<u64> {
        self.by_frame.get(&frame).and_then(|copies| copies.last()).map(|&(watermark, _)| watermark)
    }

    /// Whether overwriting `frame` in place must first copy it out, given the
    /// youngest snapshot that holds it (`None`: no snapshot does): only if
    /// that snapshot sees the frame itself, not a copy.
    pub(crate) fn needs_copy(&self, frame: u64, youngest_holder: Option<u64>) -> bool {
        youngest_holder.is_some_and(|holder| self.last_watermark(frame).is_none_or(|watermark| watermark < holder))
    }

    /// Records that the version of `frame` that snapshots up to `watermark`
    /// (above its last watermark) see is now at `copy`.
    pub(crate) fn insert(&mut self, frame: u64, copy: u64, watermark: u64) {
        if let Err(broken) = self.check_insert(frame, copy, watermark) {
            panic!("{broken}");
        }
        self.entries.insert(copy, CopyOutRecord { frame, watermark });
        self.by_frame.entry(frame).or_default().push((watermark, copy));
    }

    /// Whether the entry `copy` → (`frame`, `watermark`) may be added: the
    /// copy holds no other copy and is no frame with copies, the frame is no
    /// copy, and the watermark is above the frame's last.
    pub(crate) fn check_insert(&self, frame: u64, copy: u64, watermark: u64) -> Result<(), String> {
        if frame == copy || watermark == 0 {
            return Err(format!("copy of block {frame} to {copy} for snapshot #{watermark}"));
        }
        if self.entries.get(copy).is_some() || self.by_frame.contains_key(&copy) {
            return Err(format!("copy block {copy} already holds a copy or is a frame with copies"));
        }
        if self.entries.get(frame).is_some() {
            return Err(format!("frame {frame} is itself a copy"));
        }
        match self.last_watermark(frame) {
            Some(last) if last >= watermark => {
                Err(format!("frame {frame}: watermark {watermark} is not above the last one, {last}"))
            }
            _ => Ok(()),
        }
    }

    /// The same entries in a tree that owns no block yet (restore keeps the
    /// live table while adopting a snapshot's metadata blocks).
    pub(crate) fn unpersisted(&self) -> Self {
        let mut entries = PersistentTree::new(0);
        for (copy, record) in self.entries.iter() {
            entries.insert(copy, *record);
        }
        Self { entries, by_frame: self.by_frame.clone() }
    }

    /// Where snapshot `snapshot_id` reads data block `block`: its copy, if
    /// the frame was copied out for that snapshot, else the block itself.
    pub(crate) fn resolve(&self, block: u64, snapshot_id: u64) -> u64 {
        self.by_frame
            .get(&block)
            .and_then(|copies| copies.iter().find(|&&(watermark, _)| watermark >= snapshot_id))
            .map_or(block, |&(_, copy)| copy)
    }

    /// `segments` of snapshot `snapshot_id`, with every data block that was
    /// copied out for it read at its copy (runs split where they change).
    pub(crate) fn translate(&self, segments: Vec<Segment>, snapshot_id: u64) -> Vec<Segment> {
        if self.by_frame.is_empty() {
            return segments;
        }
        let mut translated = Vec::with_capacity(segments.len());
        for segment in segments {
            let Some(Location::Data(first)) = segment.location else {
                translated.push(segment);
                continue;
            };
            let end = first + segment.block_count;
            let mut cursor = first;
            for (&frame, _) in self.by_frame.range(first..end) {
                let copy = self.resolve(frame, snapshot_id);
                if copy == frame {
                    continue;
                }
                push_data(&mut translated, segment.logical_block + (cursor - first), cursor, frame - cursor);
                push_data(&mut translated, segment.logical_block + (frame - first), copy, 1);
                cursor = frame + 1;
            }
            push_data(&mut translated, segment.logical_block + (cursor - first), cursor, end - cursor);
        }
        translated
    }

    /// Drops the copies no remaining snapshot reads (`snapshot_ids`
    /// ascending) and returns their blocks, to be freed.
    pub(crate) fn release_unread(&mut self, snapshot_ids: &[u64]) -> Vec<u64> {
        let mut released = Vec::new();
        self.by_frame.retain(|_, copies| {
            let mut previous = 0;
            copies.retain(|&(watermark, copy)| {
                let read = any_in(snapshot_ids, previous, watermark);
                previous = watermark;
                if !read {
                    released.push(copy);
                }
                read
            });
            !copies.is_empty()
        });
        for &copy in &released {
            self.entries.remove(copy);
        }
        released.sort_unstable();
        released
    }

    /// The copies some snapshot of `snapshot_ids` (ascending) reads, as
    /// `release_unread` would keep them.
    pub(crate) fn read_copies<'a>(&'a self, snapshot_ids: &'a [u64]) -> impl Iterator<Item = u64> + 'a {
        self.by_frame.values().flat_map(move |copies| {
            let previous = std::iter::once(0).chain(copies.iter().map(|&(watermark, _)| watermark));
            copies.iter().zip(previous).filter_map(move |(&(watermark, copy), previous)| {
                any_in(snapshot_ids, previous, watermark).then_some(copy)
            })
        })
    }
}

/// Whether a free block may take a copy: never a frame — not one with
/// copies (a copy is no frame), not one a staged block goes back to.
fn may_hold_copy(table: &CopyOuts, layout: &dyn LayoutStrategy, block: u64) -> bool {
    table.last_watermark(block).is_none() && !layout.is_frame_home(block)
}

/// Whether `ids` (ascending) has one in `(after, up_to]`: the snapshots that
/// read a copy with watermark `up_to` whose frame's previous one is `after`.
fn any_in(ids: &[u64], after: u64, up_to: u64) -> bool {
    ids.get(ids.partition_point(|&id| id <= after)).is_some_and(|&id| id <= up_to)
}

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    /// The youngest live snapshot's id. Snapshots being deleted are never
    /// read again, so no copy is made for them alone.
    pub(crate) fn youngest_live_snapshot_id(&self) -> Option<u64> {
        self.snapshots.iter().rev().find(|(_, record)| record.state == SnapshotState::Live).map(|(id, _)| id)
    }

    /// Data block `block` just left the active tree: if it went to the
    /// summary but every snapshot holding it reads a copy of it, it leaves
    /// the summary too (whoever freed it: a write, replay, restore).
    pub(crate) fn release_frame_if_copied(&mut self, block: u64) {
        if self.copy_outs.last_watermark(block).is_some()
            && self.data_space.in_summary(block)
            && !self.copy_outs.needs_copy(block, self.youngest_live_snapshot_id())
        {
            self.data_space.release_from_summary(block);
        }
    }

    /// Restore to snapshot `snapshot_id` adopted its tree (the younger
    /// snapshots are gone); `copy_crcs` are the live copies' checksums. The
    /// live table stays, less the copies no remaining snapshot reads: the
    /// adopted summary, rebuilt from the snapmaps, is made to hold exactly
    /// its copies (and the adopted checksum table their checksums), and
    /// every restored block whose version is a copy is rewritten from it to
    /// fresh blocks (the durable CP's blocks stay untouched until the CP that
    /// ends the restore).
    pub(crate) fn keep_copy_outs_after_restore(&mut self, snapshot_id: u64, copy_crcs: &[(u64, u32)]) -> Result<()> {
        let remaining: Vec<u64> = self.snapshots.iter().map(|(id, _)| id).collect();
        self.copy_outs.release_unread(&remaining);
        self.copy_outs = self.copy_outs.unpersisted();
        let kept: Vec<u64> = self.copy_outs.tree().iter().map(|(copy, _)| copy).collect();
        for &copy in &kept {
            self.data_space.hold_for_snapshots(copy);
        }
        if let Some(tables) = &mut self.checksums {
            for &(copy, crc) in copy_crcs {
                if kept.binary_search(&copy).is_ok() {
                    tables.data.set(copy, crc);
                }
            }
        }
        let redirects: HashMap<u64, u64> = self.copy_outs.redirects(snapshot_id).collect();
        if redirects.is_empty() {
            return Ok(());
        }
        let mut rewrites = Vec::new();
        for (id, map) in self.extents.maps() {
            for (logical, run) in map.iter() {
                if let Location::Data(first) = Location::from_raw(run.location()) {
                    for offset in 0..run.count() {
                        if let Some(&copy) = redirects.get(&(first + offset)) {
                            rewrites.push((id, logical + offset, first + offset, copy));
                        }
                    }
                }
            }
        }
        for (id, logical, frame, copy) in rewrites {
            let bytes = read_pieces(&mut self.data, DeviceRole::Data, &[(copy, 1)])?;
            let payload = if self.data_stores_payload() { Payload::Bytes(&bytes) } else { Payload::Synthetic(1) };
            // The frame goes to the summary and, read at copies only, out again.
            self.write_in_ranges(id, logical, payload)?;
            debug_assert!(!self.data_space.in_summary(frame), "frame {frame} is read at copies only");
        }
        Ok(())
    }

    /// Copies each `(frame, watermark)` out (live blocks): reads the frames,
    /// writes them to blocks allocated down from the copy-out cursor, in
    /// frame order, and enters the copies in the table. Returns after as many as the data
    /// device has room for, with the `(frame, copy, watermark)` entries made.
    /// The caller logs the entries, durable before it overwrites a frame.
    fn copy_out(&mut self, mut frames: Vec<(u64, u64)>) -> Result<Vec<(u64, u64, u64)>> {
        frames.sort_unstable();
        let mut copies = Vec::with_capacity(frames.len());
        for _ in &frames {
            let (table, layout) = (&self.copy_outs, self.layout.as_ref());
            let accept = |block| may_hold_copy(table, layout, block);
            let Some(copy) = self.data_space.allocate_below(self.copy_out_cursor, accept) else {
                break;
            };
            self.copy_out_cursor = copy.saturating_sub(1);
            copies.push(copy);
        }
        frames.truncate(copies.len());
        // Copies in frame order, so a snapshot read in frame order reads them
        // in ascending order too.
        copies.sort_unstable();
        self.write_copies(&frames, &copies)
    }

    /// Writes the versions of `frames` (`(frame, watermark)`, ascending) to
    /// `copies` (just allocated, one per frame, in its order), enters them in the
    /// table and hands them to the snapshots; returns the `(frame, copy,
    /// watermark)` entries made, for the caller to log.
    fn write_copies(&mut self, frames: &[(u64, u64)], copies: &[u64]) -> Result<Vec<(u64, u64, u64)>> {
        debug_assert_eq!(frames.len(), copies.len());
        if frames.is_empty() {
            return Ok(Vec::new());
        }
        let frame_blocks: Vec<u64> = frames.iter().map(|&(frame, _)| frame).collect();
        let bytes = read_pieces(&mut self.data, DeviceRole::Data, &runs_of(&frame_blocks))?;
        let stores = self.data_stores_payload();
        let mut pieces = Vec::new();
        let mut at = 0;
        for (first, count) in runs_of(copies) {
            let piece = if stores { bytes[block_bytes(at)..block_bytes(at + count)].to_vec() } else { Vec::new() };
            pieces.push((first, count, piece));
            at += count;
        }
        self.write_data_pieces(pieces)?;
        self.log.data_unflushed = true;
        let mut made = Vec::with_capacity(frames.len());
        for (&(frame, watermark), &copy) in frames.iter().zip(copies) {
            made.push((frame, copy, watermark));
            if let Some(checksums) = &mut self.checksums {
                let crc = checksums.data.get(frame);
                checksums.data.set(copy, crc);
            }
            self.enter_copy(frame, copy, watermark);
        }
        self.stats.copied_out_blocks += made.len() as u64;
        Ok(made)
    }

    /// Enters the copy of `frame` at `copy` (just allocated) for the
    /// snapshots up to `watermark`, at run time and in replay alike: only
    /// snapshots hold the copy, and a frame the live tree has already left
    /// (a copy made at destage, after the staged overwrite freed it) leaves
    /// the summary, every snapshot holding it reading the copy now.
    pub(crate) fn enter_copy(&mut self, frame: u64, copy: u64, watermark: u64) {
        self.data_space.hold_for_snapshots(copy);
        self.copy_outs.insert(frame, copy, watermark);
        if self.data_space.in_summary(frame) {
            self.data_space.release_from_summary(frame);
        }
    }

    /// Logs copies made: each one's checksum record, then its entry, ahead
    /// of the records of whatever overwrites the frames.
    fn log_copies(&mut self, made: &[(u64, u64, u64)]) -> Result<()> {
        for &(frame, copy, watermark) in made {
            if let Some(checksums) = &self.checksums {
                let records = LogRecord::checksums(copy, &[checksums.data.get(copy)]);
                self.push_records(records)?;
            }
            self.push_record(LogRecord::CopyOut { frame, copy, watermark })?;
        }
        Ok(())
    }

    /// Before an overwrite of `frames` (live blocks) — in place, or staged
    /// to go back to them — copies out those a live snapshot reads, and logs
    /// each copy (its checksum record, then its entry) ahead of the records
    /// of the overwrite. Returns `(copied, wanted)`: the copies made, of
    /// those needed (fewer when the data device has no room for all).
    pub(crate) fn copy_out_before_overwrite(&mut self, frames: &[u64]) -> Result<(usize, usize)> {
        let needed = self.frames_to_copy(frames.iter().copied());
        let wanted = needed.len();
        if wanted == 0 {
            return Ok((0, 0));
        }
        let made = self.copy_out(needed)?;
        self.log_copies(&made)?;
        Ok((made.len(), wanted))
    }

    /// Of `frames` (live blocks about to be overwritten), those a live
    /// snapshot reads, each with the watermark its copy gets (the youngest
    /// live snapshot), in the order given.
    fn frames_to_copy(&self, frames: impl Iterator<Item = u64>) -> Vec<(u64, u64)> {
        let Some(youngest) = self.youngest_live_snapshot_id() else { return Vec::new() };
        frames.filter(|&frame| self.snapshot_reads_frame(frame, youngest)).map(|frame| (frame, youngest)).collect()
    }

    /// Whether a live snapshot reads `frame` (a live block), with
    /// `youngest` the youngest live snapshot, and no copy serves it yet.
    fn snapshot_reads_frame(&self, frame: u64, youngest: u64) -> bool {
        self.data_space.held_by_snapshot(frame) && self.copy_outs.needs_copy(frame, Some(youngest))
    }

    /// A staged overwrite of extent `id` leaves the older versions of its
    /// blocks at `frames` (`(logical block, data block)`): with the proximal
    /// layout's copy-out, notes those a live snapshot reads (and no clone
    /// shares), to be copied out beside themselves when the blocks are
    /// destaged ([`copy_out_before_destage`](Self::copy_out_before_destage)),
    /// so the new versions can take their places. In memory only: after a
    /// restart the blocks are destaged copy-on-write.
    pub(crate) fn note_copies_for_destage(&mut self, id: u64, frames: &[(u64, u64)]) {
        let Some(youngest) = self.youngest_live_snapshot_id() else { return };
        for &(logical_block, frame) in frames {
            if self.refcount(frame) == 0 && self.snapshot_reads_frame(frame, youngest) {
                self.pending_copies.insert((id, logical_block), (frame, youngest));
            }
        }
    }

    /// Before a destage moves `runs` (`(extent, first logical block, block
    /// count)`), copies out the older versions noted for their blocks that
    /// snapshots still read at their places, each to a free block of its own
    /// allocation range (else of the nearest range with one, within the
    /// proximal span) — the paper's copy-out pipelined with the overwrite:
    /// the disk reads the old version and writes it nearby before it comes
    /// round to write the new one. Each copied place leaves the summary
    /// (every snapshot holding it reads the copy) and becomes allocatable at
    /// the next CP, which the caller commits before placing the blocks, so
    /// the copies and their entries are durable before a place is
    /// overwritten; the destage then puts each block in its own place
    /// (`copied_homes`). Returns the copies made. A noted version no longer
    /// needed (its snapshot deleted, its place taken back) is dropped; one
    /// with no room nearby stays where it is, and its block goes elsewhere.
    pub(crate) fn copy_out_before_destage(&mut self, runs: &[(u64, u64, u64)]) -> Result<usize> {
        if self.pending_copies.is_empty() {
            return Ok(0);
        }
        let live: Vec<u64> =
            self.snapshots.iter().filter(|(_, record)| record.state == SnapshotState::Live).map(|(id, _)| id).collect();
        // Notes whose snapshot is gone are of no use to any destage.
        self.pending_copies.retain(|_, &mut (_, watermark)| live.binary_search(&watermark).is_ok());
        let mut wanted: Vec<(u64, u64)> = Vec::new();
        let mut homes: Vec<((u64, u64), u64)> = Vec::new();
        for &(id, first, count) in runs {
            let noted: Vec<(u64, u64)> =
                self.pending_copies.range((id, first)..(id, first + count)).map(|(key, _)| *key).collect();
            for key in noted {
                let (frame, watermark) = self.pending_copies.remove(&key).expect("just listed");
                // Still the version its snapshot reads: the place left the
                // live tree for the summary and stayed there (it leaves only
                // once every holder, the watermark's snapshot too, is gone).
                if self.data_space.in_summary(frame) && self.copy_outs.needs_copy(frame, Some(watermark)) {
                    wanted.push((frame, watermark));
                    homes.push((key, frame));
                }
            }
        }
        wanted.sort_unstable();
        wanted.dedup_by_key(|&mut (frame, _)| frame);
        let mut frames = Vec::with_capacity(wanted.len());
        let mut copies = Vec::with_capacity(wanted.len());
        for (frame, watermark) in wanted {
            if let Some(copy) = self.allocate_copy_near(frame) {
                frames.push((frame, watermark));
                copies.push(copy);
            }
        }
        let made = self.write_copies(&frames, &copies)?;
        self.log_copies(&made)?;
        // The destage sends each block to the place emptied for it.
        let copied: HashSet<u64> = made.iter().map(|&(frame, _, _)| frame).collect();
        self.copied_homes.extend(homes.into_iter().filter(|(_, frame)| copied.contains(frame)));
        Ok(made.len())
    }

    /// A free block for the copy of `frame`: in its allocation range, at or
    /// after it first, else in the nearest range with one within the
    /// proximal span.
    fn allocate_copy_near(&mut self, frame: u64) -> Option<u64> {
        let range_blocks = self.options.allocation_range_blocks;
        let block_count = self.data_space.block_count();
        let home_range = frame / range_blocks;
        let last_range = (block_count - 1) / range_blocks;
        let span = self.options.proximal_span_ranges;
        let nearest_first = (0..=span).flat_map(|distance| {
            let below = home_range.checked_sub(distance);
            let above = (distance > 0).then(|| home_range + distance).filter(|&range| range <= last_range);
            below.into_iter().chain(above)
        });
        for range in nearest_first {
            let (start, end) = (range * range_blocks, ((range + 1) * range_blocks).min(block_count));
            if self.data_space.allocatable_in(start, end) == 0 {
                continue;
            }
            let hint = frame.clamp(start, end - 1);
            let (table, layout) = (&self.copy_outs, self.layout.as_ref());
            let accept = |block| may_hold_copy(table, layout, block);
            // At or after the hint, else from the range's start.
            let copy = self
                .data_space
                .allocate_run(hint, 1, end - hint, accept)
                .or_else(|| self.data_space.allocate_run(start, 1, hint - start, accept));
            if copy.is_some() {
                return copy;
            }
        }
        None
    }
}

/// Appends a data segment of `count` blocks (none if zero), merging it into the
/// previous one when both continue each other.
fn push_data(segments: &mut Vec<Segment>, logical_block: u64, data_block: u64, count: u64) {
    if count == 0 {
        return;
    }
    if let Some(last) = segments.last_mut() {
        if let Some(Location::Data(last_block)) = last.location {
            if last.logical_block + last.block_count == logical_block && last_block + last.block_count == data_block {
                last.block_count += count;
                return;
            }
        }
    }
    segments.push(Segment { logical_block, block_count: count, location: Some(Location::Data(data_block)) });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(logical_block: u64, block: u64, count: u64) -> Segment {
        Segment { logical_block, block_count: count, location: Some(Location::Data(block)) }
    }

    #[test]
    fn a_frame_is_copied_once_per_generation_of_holders() {
        let mut table = CopyOuts::new();
        assert!(!table.needs_copy(10, None));
        assert!(table.needs_copy(10, Some(3)));
        table.insert(10, 900, 3);
        assert!(!table.needs_copy(10, Some(3)), "snapshots up to 3 read the copy");
        assert!(table.needs_copy(10, Some(5)), "snapshot 5 sees the frame's newer version");
        table.insert(10, 901, 5);
        assert_eq!(table.last_watermark(10), Some(5));
        assert_eq!(table.len(), 2);
    }

    #[test]
    fn each_snapshot_reads_the_copy_of_its_own_version() {
        let mut table = CopyOuts::new();
        table.insert(10, 900, 3);
        table.insert(10, 901, 5);
        assert_eq!(table.resolve(10, 1), 900);
        assert_eq!(table.resolve(10, 3), 900);
        assert_eq!(table.resolve(10, 4), 901);
        assert_eq!(table.resolve(10, 5), 901);
        assert_eq!(table.resolve(10, 6), 10, "a younger snapshot sees the frame");
        assert_eq!(table.resolve(11, 1), 11);
    }

    #[test]
    fn translation_splits_runs_only_where_a_copy_is_read() {
        let mut table = CopyOuts::new();
        table.insert(102, 900, 3);
        table.insert(105, 901, 3);
        let segments = vec![data(0, 100, 8), Segment { logical_block: 8, block_count: 2, location: None }];
        let translated = table.translate(segments.clone(), 2);
        assert_eq!(
            translated,
            vec![
                data(0, 100, 2),
                data(2, 900, 1),
                data(3, 103, 2),
                data(5, 901, 1),
                data(6, 106, 2),
                Segment { logical_block: 8, block_count: 2, location: None },
            ]
        );
        assert_eq!(table.translate(segments.clone(), 4), segments, "snapshot 4 reads the frames");
    }

    #[test]
    fn consecutive_copies_read_as_one_run() {
        let mut table = CopyOuts::new();
        table.insert(100, 900, 1);
        table.insert(101, 901, 1);
        assert_eq!(table.translate(vec![data(0, 100, 2)], 1), vec![data(0, 900, 2)]);
    }

    #[test]
    fn copies_no_remaining_snapshot_reads_are_released() {
        let mut table = CopyOuts::new();
        table.insert(10, 900, 3);
        table.insert(10, 901, 5);
        table.insert(11, 902, 5);
        // Snapshots 2 and 3 read 900; 4 and 5 read 901 and 902.
        assert_eq!(table.read_copies(&[2, 4]).collect::<Vec<_>>(), vec![900, 901, 902]);
        assert_eq!(table.read_copies(&[4]).collect::<Vec<_>>(), vec![901, 902]);
        assert_eq!(table.release_unread(&[2, 4]), Vec::<u64>::new());
        assert_eq!(table.release_unread(&[4]), vec![900]);
        assert_eq!(table.resolve(10, 4), 901);
        assert_eq!(table.release_unread(&[7]), vec![901, 902]);
        assert!(table.is_empty());
        assert_eq!(table.last_watermark(10), None);
    }

    #[test]
    fn an_entry_that_would_break_the_table_is_refused() {
        let mut table = CopyOuts::new();
        table.insert(10, 900, 5);
        assert!(table.check_insert(10, 901, 5).is_err(), "watermarks ascend");
        assert!(table.check_insert(11, 900, 6).is_err(), "a copy holds one version");
        assert!(table.check_insert(900, 902, 6).is_err(), "a copy is no frame");
        assert!(table.check_insert(12, 10, 6).is_err(), "a frame with copies is no copy");
        assert!(table.check_insert(12, 12, 6).is_err());
        assert!(table.check_insert(12, 13, 0).is_err(), "snapshot ids start at 1");
        assert!(table.check_insert(10, 901, 6).is_ok());
        assert_eq!(table.redirects(5).collect::<Vec<_>>(), vec![(10, 900)]);
        assert_eq!(table.redirects(6).count(), 0);
    }

    #[test]
    #[should_panic(expected = "above the last one")]
    fn watermarks_of_a_frame_ascend() {
        let mut table = CopyOuts::new();
        table.insert(10, 900, 5);
        table.insert(10, 901, 5);
    }
}
