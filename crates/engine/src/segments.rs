//! Segments of the data device, for the layouts that write whole segments
//! (`lfs`): the segment usage table, the log head and the search for clean
//! segments (docs/layouts.md, "LFS"; docs/format.md, "Segment usage table").
//!
//! The data device is cut into segments of `segment_blocks` blocks from block
//! 0 (a last partial segment is never a log head). A segment is *clean* when
//! every block of it is allocatable: nothing uses it and nothing freed in it
//! waits for a CP. The log head is the segment that segment writes fill, in
//! ascending block order; when it is full the next clean segment after it
//! becomes the head.
//!
//! The usage table holds, per segment, its live blocks (set in the data
//! activemap or summary) and its age (the segment clock when it was last
//! written: the clock counts user blocks written to segments). Live counts
//! are not kept by hand: they are counted from the space map whenever asked
//! (exact at every moment), and written into the persistent table at every CP
//! from the same maps the CP persists, so the durable table always matches
//! the durable bitmaps (fsck checks it). Ages are the table's own state.
//!
//! Invariants: the head segment was clean when it became the head, and only
//! blocks at or after the head's fill point are allocated from it; exactly
//! the segments with a live block have an entry in the persistent table (the
//! age of an empty segment is not kept: it is set again when the segment is
//! next written), so the table stays as small as the data.

use crate::codec::SegmentUsageRecord;
use crate::segment_summary::SegmentSummaries;
use crate::space::SpaceMap;
use crate::tree::PersistentTree;

/// Default segment size: 128 blocks (512 KiB), Eq 6 of the HyLog model
/// (`S = 4·T_pos·B`, rounded to a power of two) for the atlas10k disk
/// (8.6 ms, 20.4 MB/s). On an array the caller passes a full stripe.
pub const DEFAULT_SEGMENT_BLOCKS: u64 = 128;

/// Log heads a layout may write to at once: WOLF's hot and cold segments.
pub const LOG_STREAMS: usize = 2;

/// One segment as the cleaner sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentUsage {
    /// Segment number (its first block is `segment × segment_blocks`).
    pub segment: u64,
    /// Blocks in use (activemap or summary).
    pub live_blocks: u64,
    /// The segment clock when it was last written (0: never).
    pub age: u64,
}

/// Who writes at the log head: user data (advancing the segment clock) or
/// the cleaner (keeping the age of the data it moves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadWriter {
    /// Destaged user blocks.
    User,
    /// Blocks the cleaner moves, last written at this age.
    Cleaner {
        /// The age the moved data carries.
        age: u64,
    },
}

/// The segments of the data device: usage table, log head, clean search.
#[derive(Debug, Clone)]
pub(crate) struct Segments {
    /// Whether the layout writes segments (otherwise the table is kept empty).
    enabled: bool,
    segment_blocks: u64,
    device_blocks: u64,
    /// Age of each segment (0: never written).
    ages: Vec<u64>,
    /// User blocks written to segments so far (restored as the largest age).
    clock: u64,
    /// The durable form.
    table: PersistentTree<SegmentUsageRecord>,
    /// Per log stream, the head segment and the next block to fill in it.
    heads: [Option<(u64, u64)>; LOG_STREAMS],
    /// Where the search for the next clean segment starts.
    clean_cursor: u64,
    /// The last count of clean segments ([`Segments::clean_at_least`]).
    clean_memo: Option<CleanCount>,
    /// Whether a CP has refreshed the table since open (until then every
    /// entry is looked at: the loaded table may have been another layout's).
    refreshed_since_open: bool,
    /// What each segment written since open holds (in memory).
    pub(crate) summaries: SegmentSummaries,
}

/// A count of clean segments and what it was counted at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CleanCount {
    /// The space map's shrink count then.
    shrinks: u64,
    /// Its change count then.
    changes: u64,
    /// The head segments then.
    heads: [Option<u64>; LOG_STREAMS],
    count: u64,
}

impl Segments {
    /// The segments of a device of `device_blocks`, from a loaded (or new)
    /// table. With `enabled` false every entry is dropped (the next CP
    /// persists an empty table), so a table is never left stale by a layout
    /// that does not keep it.
    pub(crate) fn new(
        mut table: PersistentTree<SegmentUsageRecord>,
        device_blocks: u64,
        segment_blocks: u64,
        enabled: bool,
    ) -> Self {
        assert!(segment_blocks > 0, "a segment holds blocks");
        let segment_count = device_blocks / segment_blocks;
        let mut ages = vec![0; usize::try_from(segment_count).expect("segments fit in memory")];
        let keys: Vec<(u64, SegmentUsageRecord)> = table.iter().map(|(key, record)| (key, *record)).collect();
        for (first, record) in keys {
            let matches = u64::from(record.block_count) == segment_blocks && first % segment_blocks == 0;
            if enabled && matches && first / segment_blocks < segment_count {
                ages[usize::try_from(first / segment_blocks).expect("in memory")] = record.age;
            } else {
                // Another layout's or another segment size's table: rebuilt.
                table.remove(first);
            }
        }
        let clock = ages.iter().copied().max().unwrap_or(0);
        Self {
            enabled,
            segment_blocks,
            device_blocks,
            ages,
            clock,
            table,
            heads: [None; LOG_STREAMS],
            clean_cursor: 0,
            clean_memo: None,
            refreshed_since_open: false,
            summaries: SegmentSummaries::default(),
        }
    }

    /// Whether the layout writes segments.
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// Blocks per segment.
    pub(crate) fn segment_blocks(&self) -> u64 {
        self.segment_blocks
    }

    /// Whole segments on the device.
    pub(crate) fn segment_count(&self) -> u64 {
        self.ages.len() as u64
    }

    /// `[start, end)` of `segment`.
    pub(crate) fn bounds(&self, segment: u64) -> (u64, u64) {
        let start = segment * self.segment_blocks;
        (start, (start + self.segment_blocks).min(self.device_blocks))
    }

    /// The segment holding `block` (`None`: the last partial segment).
    pub(crate) fn segment_of(&self, block: u64) -> Option<u64> {
        let segment = block / self.segment_blocks;
        (segment < self.segment_count()).then_some(segment)
    }

    /// The segment clock now.
    pub(crate) fn clock(&self) -> u64 {
        self.clock
    }

    /// The head segment of log stream 0, if one is open.
    #[cfg(test)]
    pub(crate) fn head_segment(&self) -> Option<u64> {
        self.heads[0].map(|(segment, _)| segment)
    }

    /// Whether `segment` is the head of a log stream.
    pub(crate) fn is_head(&self, segment: u64) -> bool {
        self.heads.iter().flatten().any(|&(head, _)| head == segment)
    }

    /// Whether every block of `segment` is allocatable.
    pub(crate) fn is_clean(&self, space: &SpaceMap, segment: u64) -> bool {
        let (start, end) = self.bounds(segment);
        space.allocatable_in(start, end) == end - start
    }

    /// Allocatable blocks left in log stream `stream`'s head segment after
    /// its next block (0 without a head).
    pub(crate) fn head_room(&self, space: &SpaceMap, stream: usize) -> u64 {
        self.heads[stream].map_or(0, |(segment, next)| {
            let (_, end) = self.bounds(segment);
            if next < end {
                space.allocatable_in(next, end)
            } else {
                0
            }
        })
    }

    /// Allocatable blocks left in every log stream's head segment.
    pub(crate) fn heads_room(&self, space: &SpaceMap) -> u64 {
        (0..LOG_STREAMS).map(|stream| self.head_room(space, stream)).sum()
    }

    /// Clean segments, the head excluded.
    pub(crate) fn clean_count(&self, space: &SpaceMap) -> u64 {
        (0..self.segment_count()).filter(|&segment| !self.is_head(segment) && self.is_clean(space, segment)).count()
            as u64
    }

    /// Whether at least `wanted` segments are clean, the head excluded. A
    /// count made at the space map's current shrink count with the same
    /// heads is a lower bound (only a shrinking of the allocatable blocks can
    /// lower it, frees raise it): a write asks after every update, and the
    /// whole device is counted again only after a block was taken or space
    /// came back below `wanted`.
    pub(crate) fn clean_at_least(&mut self, space: &SpaceMap, wanted: u64) -> bool {
        let heads = self.head_segments();
        let lower_bound = self.clean_memo.filter(|memo| memo.heads == heads && memo.shrinks == space.shrink_count());
        if lower_bound.is_some_and(|memo| memo.count >= wanted) {
            return true;
        }
        self.clean_count_now(space) >= wanted
    }

    /// [`clean_count`](Self::clean_count), from the last count while neither
    /// the allocatable blocks nor the heads have changed since.
    pub(crate) fn clean_count_now(&mut self, space: &SpaceMap) -> u64 {
        let heads = self.head_segments();
        if let Some(memo) = self.clean_memo.filter(|memo| memo.heads == heads && memo.changes == space.change_count()) {
            return memo.count;
        }
        let count = self.clean_count(space);
        self.clean_memo =
            Some(CleanCount { shrinks: space.shrink_count(), changes: space.change_count(), heads, count });
        count
    }

    fn head_segments(&self) -> [Option<u64>; LOG_STREAMS] {
        self.heads.map(|head| head.map(|(segment, _)| segment))
    }

    /// Every segment's usage now.
    pub(crate) fn usage(&self, space: &SpaceMap) -> Vec<SegmentUsage> {
        (0..self.segment_count()).map(|segment| self.usage_of(space, segment)).collect()
    }

    /// `segment`'s usage now.
    fn usage_of(&self, space: &SpaceMap, segment: u64) -> SegmentUsage {
        let (start, end) = self.bounds(segment);
        SegmentUsage { segment, live_blocks: space.in_use_in(start, end), age: self.age(segment) }
    }

    /// The age of `segment`.
    pub(crate) fn age(&self, segment: u64) -> u64 {
        self.ages[usize::try_from(segment).expect("in memory")]
    }

    /// Allocates up to `count` blocks at the log head for `writer`, opening
    /// the next clean segment when the head is full; `None` when no clean
    /// segment is left.
    #[cfg(test)]
    pub(crate) fn allocate_at_head(
        &mut self,
        space: &mut SpaceMap,
        count: u64,
        writer: HeadWriter,
    ) -> Option<(u64, u64)> {
        self.allocate_at_stream_head(space, 0, count, writer)
    }

    /// [`allocate_at_head`](Self::allocate_at_head) at the head of log
    /// stream `stream` (each stream fills its own segments).
    pub(crate) fn allocate_at_stream_head(
        &mut self,
        space: &mut SpaceMap,
        stream: usize,
        count: u64,
        writer: HeadWriter,
    ) -> Option<(u64, u64)> {
        assert!(count > 0, "allocate at least one block");
        loop {
            if let Some(run) = self.allocate_in_open_head(space, stream, count, writer) {
                return Some(run);
            }
            let segment = self.next_clean(space)?;
            let (start, _) = self.bounds(segment);
            self.heads[stream] = Some((segment, start));
            self.note_written(segment, 0, writer, true);
        }
    }

    /// Allocates up to `count` blocks in the room the open head of a log
    /// stream other than `stream` has left, never opening a segment; `None`
    /// when none has room. Where the cleaner goes once its own stream has no
    /// clean segment left to open: a run at a head is one sequential write,
    /// where plugging holes would be a random write per block.
    pub(crate) fn allocate_at_other_head(
        &mut self,
        space: &mut SpaceMap,
        stream: usize,
        count: u64,
        writer: HeadWriter,
    ) -> Option<(u64, u64)> {
        (0..LOG_STREAMS)
            .filter(|&other| other != stream)
            .find_map(|other| self.allocate_in_open_head(space, other, count, writer))
    }

    /// Allocates up to `count` blocks after the next block of stream
    /// `stream`'s head segment, never opening one; `None` when it has no room.
    fn allocate_in_open_head(
        &mut self,
        space: &mut SpaceMap,
        stream: usize,
        count: u64,
        writer: HeadWriter,
    ) -> Option<(u64, u64)> {
        let (segment, next) = self.heads[stream]?;
        let (start, end) = self.bounds(segment);
        if next >= end {
            return None;
        }
        let (first, got) = space.allocate_within(next, start, end, count)?;
        self.heads[stream] = Some((segment, first + got));
        self.note_written(segment, got, writer, false);
        Some((first, got))
    }

    fn note_written(&mut self, segment: u64, blocks: u64, writer: HeadWriter, opened: bool) {
        let index = usize::try_from(segment).expect("in memory");
        let age = match writer {
            HeadWriter::User => {
                self.clock += blocks;
                self.clock
            }
            HeadWriter::Cleaner { age } => age,
        };
        self.ages[index] = if opened { age } else { self.ages[index].max(age) };
    }

    /// The next clean segment after the cursor (wrapping), the head excluded.
    fn next_clean(&mut self, space: &SpaceMap) -> Option<u64> {
        let count = self.segment_count();
        (0..count)
            .map(|offset| (self.clean_cursor + offset) % count)
            .find(|&segment| !self.is_head(segment) && self.is_clean(space, segment))
            .inspect(|&segment| {
                self.clean_cursor = (segment + 1) % count;
                self.summaries.opened(segment);
            })
    }

    /// Brings the persistent table up to date with `space` (called by a CP,
    /// after the last change to the data bitmaps it persists). Only segments
    /// with a block whose bit changed since the last durable CP are looked
    /// at: a live count moves only with a bit, and an age only with a write
    /// at a head, which takes a block (a head opened and not yet written is
    /// clean and has no entry). Every segment is looked at by the first CP
    /// after open, and after the maps were replaced (a restore). So a CP
    /// costs what changed, not the device's size.
    pub(crate) fn refresh(&mut self, space: &SpaceMap) {
        if !self.enabled {
            return;
        }
        let segment_count = self.segment_count();
        let changed: Vec<u64> = match space.blocks_changed_since_durable() {
            Some(blocks) if self.refreshed_since_open => {
                let mut segments: Vec<u64> = blocks
                    .map(|block| block / self.segment_blocks)
                    .filter(|&segment| segment < segment_count)
                    .collect();
                segments.sort_unstable();
                segments.dedup();
                segments
            }
            _ => (0..segment_count).collect(),
        };
        self.refreshed_since_open = true;
        let segment_blocks = u32::try_from(self.segment_blocks).expect("a segment holds at most u32::MAX blocks");
        let usages: Vec<SegmentUsage> = changed.into_iter().map(|segment| self.usage_of(space, segment)).collect();
        for usage in usages {
            let first = usage.segment * self.segment_blocks;
            let wanted = (usage.live_blocks > 0).then(|| SegmentUsageRecord {
                block_count: segment_blocks,
                live_blocks: u32::try_from(usage.live_blocks).expect("at most the segment's blocks"),
                age: usage.age,
            });
            match (self.table.get(first).copied(), wanted) {
                (current, Some(record)) if current != Some(record) => self.table.insert(first, record),
                (Some(_), None) => {
                    self.table.remove(first);
                }
                _ => {}
            }
        }
    }

    /// The persistent table.
    pub(crate) fn table_mut(&mut self) -> &mut PersistentTree<SegmentUsageRecord> {
        &mut self.table
    }

    /// The persistent table.
    pub(crate) fn table(&self) -> &PersistentTree<SegmentUsageRecord> {
        &self.table
    }
}

/// The usage table's entries checked against the data maps of the same CP:
/// each entry names a whole segment of the device whose live count is the
/// number of blocks set in `in_use` there, every segment (of the table's
/// size) with a block in use has an entry, and all entries have one size.
/// Returns the problems found.
pub fn check_usage_table(
    table: &PersistentTree<SegmentUsageRecord>,
    device_blocks: u64,
    in_use: impl Fn(u64, u64) -> u64,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut size = None;
    for (first, record) in table.iter() {
        let blocks = u64::from(record.block_count);
        if *size.get_or_insert(blocks) != blocks {
            problems.push(format!("segment at block {first} has {blocks} blocks, others {}", size.unwrap_or(0)));
            continue;
        }
        if first % blocks != 0 || first + blocks > device_blocks {
            problems.push(format!("segment at block {first} of {blocks} blocks is not a whole segment of the device"));
            continue;
        }
        let counted = in_use(first, first + blocks);
        if counted != u64::from(record.live_blocks) {
            problems.push(format!(
                "segment at block {first}: the table says {} live blocks, the maps {counted}",
                record.live_blocks
            ));
        }
    }
    if let Some(blocks) = size {
        for segment in 0..device_blocks / blocks {
            let first = segment * blocks;
            if table.get(first).is_none() && in_use(first, first + blocks) > 0 {
                problems.push(format!("segment at block {first} has blocks in use and no entry"));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bitmap::PersistentBitmap;
    use crate::error::DeviceRole;

    fn space(blocks: u64) -> SpaceMap {
        SpaceMap::new(DeviceRole::Data, PersistentBitmap::new(blocks), PersistentBitmap::new(blocks), 0)
    }

    #[test]
    fn the_head_fills_clean_segments_in_order_and_skips_used_ones() {
        let mut space = space(64);
        let mut segments = Segments::new(PersistentTree::new(0), 64, 16, true);
        assert_eq!(segments.segment_count(), 4);
        // Segment 1 holds a block: the head skips it.
        assert_eq!(space.allocate_within(20, 16, 32, 1), Some((20, 1)));
        assert_eq!(segments.allocate_at_head(&mut space, 10, HeadWriter::User), Some((0, 10)));
        assert_eq!(segments.allocate_at_head(&mut space, 10, HeadWriter::User), Some((10, 6)));
        assert_eq!(segments.allocate_at_head(&mut space, 4, HeadWriter::User), Some((32, 4)));
        assert_eq!(segments.head_segment(), Some(2));
        assert_eq!(segments.clock(), 20);
        assert_eq!(segments.age(0), 16);
        assert_eq!(segments.age(2), 20);
        assert_eq!(segments.clean_count(&space), 1, "segment 3 only: 1 is used, 2 is the head");
    }

    #[test]
    fn the_clean_count_is_asked_again_only_after_blocks_were_taken() {
        let mut space = space(64);
        let mut segments = Segments::new(PersistentTree::new(0), 64, 16, true);
        assert!(segments.clean_at_least(&space, 4) && !segments.clean_at_least(&space, 5));
        // A block taken in segment 1, another by the head in segment 0.
        assert_eq!(space.allocate_within(20, 16, 32, 1), Some((20, 1)));
        assert!(!segments.clean_at_least(&space, 4), "the taken block was seen");
        segments.allocate_at_head(&mut space, 1, HeadWriter::User);
        assert!(segments.clean_at_least(&space, 2) && !segments.clean_at_least(&space, 3));
        // Freed blocks count once they are allocatable again.
        space.free(20);
        space.checkpoint_durable();
        assert!(segments.clean_at_least(&space, 3));
    }

    #[test]
    fn the_cleaner_keeps_the_age_of_the_data_it_moves() {
        let mut space = space(32);
        let mut segments = Segments::new(PersistentTree::new(0), 32, 16, true);
        segments.allocate_at_head(&mut space, 16, HeadWriter::User);
        assert_eq!(segments.allocate_at_head(&mut space, 3, HeadWriter::Cleaner { age: 5 }), Some((16, 3)));
        assert_eq!(segments.age(1), 5);
        assert_eq!(segments.clock(), 16);
    }

    #[test]
    fn another_streams_head_lends_its_room_and_opens_nothing() {
        let mut space = space(48);
        let mut segments = Segments::new(PersistentTree::new(0), 48, 16, true);
        // Stream 0's head holds 4 blocks of segment 0, stream 1 fills segment 1.
        assert_eq!(segments.allocate_at_stream_head(&mut space, 0, 4, HeadWriter::User), Some((0, 4)));
        assert_eq!(segments.allocate_at_stream_head(&mut space, 1, 16, HeadWriter::User), Some((16, 16)));
        assert_eq!(segments.heads_room(&space), 12);
        // Stream 0's head lends its room; stream 1 then opens the last clean
        // segment, and no segment is opened for the other head.
        let cleaner = HeadWriter::Cleaner { age: 3 };
        assert_eq!(segments.allocate_at_other_head(&mut space, 1, 16, cleaner), Some((4, 12)));
        assert_eq!(segments.allocate_at_other_head(&mut space, 1, 1, cleaner), None);
        assert_eq!(segments.allocate_at_stream_head(&mut space, 1, 16, cleaner), Some((32, 16)));
        assert_eq!(segments.allocate_at_stream_head(&mut space, 1, 1, cleaner), None, "no clean segment left");
        assert_eq!(segments.heads_room(&space), 0);
        assert_eq!(segments.age(0), 4, "the segment keeps the younger age");
    }

    #[test]
    fn the_table_follows_the_maps_and_restores_ages() {
        let mut space = space(48);
        let mut segments = Segments::new(PersistentTree::new(0), 48, 16, true);
        assert_eq!(segments.allocate_at_head(&mut space, 20, HeadWriter::User), Some((0, 16)), "one segment at a time");
        assert_eq!(segments.allocate_at_head(&mut space, 4, HeadWriter::User), Some((16, 4)));
        segments.refresh(&space);
        let table = segments.table().clone();
        assert_eq!(table.len(), 2);
        assert_eq!(table.get(16).map(|record| record.live_blocks), Some(4));
        assert!(check_usage_table(&table, 48, |start, end| space.in_use_in(start, end)).is_empty());
        let restored = Segments::new(table.clone(), 48, 16, true);
        assert_eq!((restored.age(0), restored.age(1), restored.clock()), (16, 20, 20));
        // A segment emptied leaves the table.
        for block in 16..20 {
            space.free(block);
        }
        segments.refresh(&space);
        assert_eq!(segments.table().len(), 1);
        // Another segment size drops the table; so does a layout without segments.
        assert!(Segments::new(table.clone(), 48, 8, true).table().is_empty());
        assert!(Segments::new(table, 48, 16, false).table().is_empty());
    }

    /// Random head writes, foreign allocations, frees, CPs, restores to the
    /// maps of an earlier CP and reopens (with the table as it was, or
    /// dropped as another layout's is): after every CP the table is what a
    /// count of every segment gives.
    #[test]
    fn refreshing_only_what_changed_keeps_the_table_exact() {
        use rand::{Rng, SeedableRng};
        let rerun = "cargo test --release -p proxima-engine --lib refreshing_only_what_changed";
        for seed in proxima_device::seeds_for_test([11], "PROXIMA_REFRESH_SEED", rerun) {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut space = space(512);
            let mut segments = Segments::new(PersistentTree::new(0), 512, 8, true);
            let mut saved = None;
            for step in 0..3000 {
                match rng.gen_range(0..14) {
                    0..=5 => {
                        let stream = rng.gen_range(0..LOG_STREAMS);
                        segments.allocate_at_stream_head(&mut space, stream, rng.gen_range(1..4), HeadWriter::User);
                    }
                    6 => {
                        space.allocate_near(rng.gen_range(0..512), 2);
                    }
                    7 | 8 => {
                        let block = rng.gen_range(0..512);
                        if space.in_use_in(block, block + 1) == 1 {
                            space.free(block);
                        }
                    }
                    // A restore adopts the maps of an earlier CP.
                    9 => {
                        if let Some((active, summary)) = saved.clone() {
                            space.rebase(active, summary);
                        }
                    }
                    // A reopen, the table kept or dropped.
                    10 => {
                        let table = if rng.gen_bool(0.5) { segments.table().clone() } else { PersistentTree::new(0) };
                        segments = Segments::new(table, 512, 8, true);
                    }
                    // A CP: the table is refreshed, then the maps are durable.
                    _ => {
                        segments.refresh(&space);
                        let problems =
                            check_usage_table(segments.table(), 512, |start, end| space.in_use_in(start, end));
                        assert!(problems.is_empty(), "seed {seed}, step {step}: {problems:?}");
                        for (first, record) in segments.table().iter() {
                            assert_eq!(record.age, segments.age(first / 8), "seed {seed}, step {step}: at {first}");
                        }
                        space.checkpoint_durable();
                        if rng.gen_bool(0.2) {
                            let (active, summary) = space.maps_mut();
                            saved = Some((active.clone(), summary.bits().clone()));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_stale_entry_is_found() {
        let mut space = space(32);
        let mut segments = Segments::new(PersistentTree::new(0), 32, 16, true);
        segments.allocate_at_head(&mut space, 5, HeadWriter::User);
        segments.refresh(&space);
        space.allocate_within(20, 16, 32, 1);
        let problems = check_usage_table(segments.table(), 32, |start, end| space.in_use_in(start, end));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("no entry"));
    }
}
