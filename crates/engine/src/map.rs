//! An extent's block map: logical block → location, held as coalesced runs in a
//! [`PersistentTree`]. A sequentially written extent is a handful of runs; each
//! random overwrite adds at most two.
//!
//! [`layout_score`] measures a map the way Smith and Seltzer scored files: the
//! share of blocks placed directly after their logical predecessor.

use crate::codec::{Run, FLASH_LOCATION_BIT};
use crate::tree::PersistentTree;

/// Where a logical block lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Location {
    /// A data-device block.
    Data(u64),
    /// A flash block (staged data).
    Flash(u64),
}

impl Location {
    /// Decodes the on-disk encoding (bit 63 = flash).
    pub fn from_raw(raw: u64) -> Self {
        if raw & FLASH_LOCATION_BIT != 0 {
            Location::Flash(raw & !FLASH_LOCATION_BIT)
        } else {
            Location::Data(raw)
        }
    }

    /// The on-disk encoding.
    pub fn raw(self) -> u64 {
        match self {
            Location::Data(block) => block,
            Location::Flash(block) => block | FLASH_LOCATION_BIT,
        }
    }

    /// The location `offset` blocks further on the same device.
    pub fn offset(self, offset: u64) -> Self {
        match self {
            Location::Data(block) => Location::Data(block + offset),
            Location::Flash(block) => Location::Flash(block + offset),
        }
    }
}

/// A piece of a logical range: a run of blocks at consecutive locations, or a hole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// First logical block.
    pub logical_block: u64,
    /// Number of blocks.
    pub block_count: u64,
    /// Location of the first block; `None` for a hole.
    pub location: Option<Location>,
}

/// The map of one extent.
pub type ExtentMap = PersistentTree<Run>;

/// The segments covering `[start, start + count)`, holes included, in order.
pub fn segments(map: &ExtentMap, start: u64, count: u64) -> Vec<Segment> {
    if count == 0 {
        // Not even the run holding `start`: a segment of no blocks is none.
        return Vec::new();
    }
    let end = start + count;
    let mut result = Vec::new();
    let mut cursor = start;
    let first = map.range(..=start).next_back().filter(|(key, run)| key + run.count() > start);
    let following = map.range(start + 1..end);
    for (key, run) in first.into_iter().chain(following) {
        if key > cursor {
            result.push(Segment { logical_block: cursor, block_count: key - cursor, location: None });
            cursor = key;
        }
        let run_end = (key + run.count()).min(end);
        let location = Location::from_raw(run.location()).offset(cursor - key);
        result.push(Segment { logical_block: cursor, block_count: run_end - cursor, location: Some(location) });
        cursor = run_end;
    }
    if cursor < end {
        result.push(Segment { logical_block: cursor, block_count: end - cursor, location: None });
    }
    result
}

/// The location of one logical block.
pub fn lookup(map: &ExtentMap, logical_block: u64) -> Option<Location> {
    let (key, run) = map.range(..=logical_block).next_back()?;
    (key + run.count() > logical_block).then(|| Location::from_raw(run.location()).offset(logical_block - key))
}

/// Makes `[start, start + count)` a hole; returns the displaced pieces
/// (location, block count) for the caller to free.
pub fn punch(map: &mut ExtentMap, start: u64, count: u64) -> Vec<(Location, u64)> {
    let end = start + count;
    let mut displaced = Vec::new();
    let first = map.range(..start).next_back().filter(|(key, run)| key + run.count() > start).map(|(key, _)| key);
    let keys: Vec<u64> = first.into_iter().chain(map.range(start..end).map(|(key, _)| key)).collect();
    for key in keys {
        let run = map.remove(key).expect("key listed above");
        let run_end = key + run.count();
        let location = Location::from_raw(run.location());
        if key < start {
            map.insert(key, Run::new(start - key, run.location()));
        }
        if run_end > end {
            map.insert(end, Run::new(run_end - end, location.offset(end - key).raw()));
        }
        let cut_start = key.max(start);
        let cut_end = run_end.min(end);
        displaced.push((location.offset(cut_start - key), cut_end - cut_start));
    }
    displaced
}

/// Maps `[start, start + count)` to consecutive blocks from `location`; returns
/// the displaced pieces. Adjacent runs that continue each other are coalesced.
pub fn assign(map: &mut ExtentMap, start: u64, count: u64, location: Location) -> Vec<(Location, u64)> {
    assert!(count > 0, "an assignment covers at least one block");
    let displaced = punch(map, start, count);
    // The run being placed: it may absorb its neighbours when it continues them.
    let (mut key, mut run_count, mut run_location) = (start, count, location);
    if let Some((left_key, left)) = map.range(..start).next_back() {
        let continues = left_key + left.count() == start
            && Location::from_raw(left.location()).offset(left.count()) == location
            && left.count() + count <= Run::MAX_BLOCKS;
        if continues {
            (key, run_count, run_location) = (left_key, left.count() + count, Location::from_raw(left.location()));
        }
    }
    let end = start + count;
    if let Some(right) = map.get(end).copied() {
        let continues = run_location.offset(run_count) == Location::from_raw(right.location())
            && run_count + right.count() <= Run::MAX_BLOCKS;
        if continues {
            map.remove(end);
            run_count += right.count();
        }
    }
    while run_count > 0 {
        // More than one entry only for assignments longer than a run can hold.
        let piece = run_count.min(Run::MAX_BLOCKS);
        map.insert(key, Run::new(piece, run_location.raw()));
        (key, run_count, run_location) = (key + piece, run_count - piece, run_location.offset(piece));
    }
    displaced
}

/// Number of mapped blocks.
pub fn mapped_block_count(map: &ExtentMap) -> u64 {
    map.iter().map(|(_, run)| run.count()).sum()
}

/// Smith and Seltzer's layout score of one map or, summed, of several, as
/// counts: a mapped block is *scored* when its logical predecessor (the block
/// just before it) is mapped too, and *contiguous* when it lies directly after
/// that predecessor on the same device. The first block of an extent and the
/// first block after a hole have no predecessor and are not scored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LayoutScore {
    /// Mapped blocks whose logical predecessor is mapped.
    pub scored_block_count: u64,
    /// Of those, blocks placed directly after their predecessor.
    pub contiguous_block_count: u64,
}

impl LayoutScore {
    /// `contiguous / scored`, in [0, 1]: 1 when every scored block follows
    /// its predecessor; `None` when no block is scored (nothing, or only
    /// isolated blocks, is mapped).
    pub fn fraction(&self) -> Option<f64> {
        (self.scored_block_count > 0).then(|| self.contiguous_block_count as f64 / self.scored_block_count as f64)
    }
}

impl std::ops::Add for LayoutScore {
    type Output = LayoutScore;

    fn add(self, other: LayoutScore) -> LayoutScore {
        LayoutScore {
            scored_block_count: self.scored_block_count + other.scored_block_count,
            contiguous_block_count: self.contiguous_block_count + other.contiguous_block_count,
        }
    }
}

impl std::iter::Sum for LayoutScore {
    fn sum<I: Iterator<Item = LayoutScore>>(scores: I) -> LayoutScore {
        scores.fold(LayoutScore::default(), std::ops::Add::add)
    }
}

/// The [`LayoutScore`] of `map`. Inside a run every block but the first
/// follows its predecessor; a run's first block follows the previous run's
/// last when the runs are logically adjacent and the locations continue
/// (runs longer than [`Run::MAX_BLOCKS`] are split that way).
pub fn layout_score(map: &ExtentMap) -> LayoutScore {
    let mut score = LayoutScore::default();
    let mut previous: Option<(u64, Location)> = None;
    for (key, run) in map.iter() {
        let location = Location::from_raw(run.location());
        score.scored_block_count += run.count() - 1;
        score.contiguous_block_count += run.count() - 1;
        if let Some((previous_end, previous_next_location)) = previous {
            if previous_end == key {
                score.scored_block_count += 1;
                score.contiguous_block_count += u64::from(previous_next_location == location);
            }
        }
        previous = Some((key + run.count(), location.offset(run.count())));
    }
    score
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_assignments_coalesce_into_one_run() {
        let mut map = ExtentMap::new(1);
        for block in 0..1000 {
            assert!(assign(&mut map, block, 1, Location::Data(5000 + block)).is_empty());
        }
        assert_eq!(map.len(), 1);
        assert_eq!(lookup(&map, 999), Some(Location::Data(5999)));
    }

    #[test]
    fn an_overwrite_in_the_middle_splits_a_run_and_reports_what_it_displaced() {
        let mut map = ExtentMap::new(1);
        assign(&mut map, 0, 100, Location::Data(1000));
        let displaced = assign(&mut map, 10, 5, Location::Flash(7));
        assert_eq!(displaced, vec![(Location::Data(1010), 5)]);
        assert_eq!(map.len(), 3);
        let pieces = segments(&map, 0, 120);
        assert_eq!(pieces.len(), 4);
        assert_eq!(pieces[1], Segment { logical_block: 10, block_count: 5, location: Some(Location::Flash(7)) });
        assert_eq!(pieces[2].location, Some(Location::Data(1015)));
        assert_eq!(pieces[3], Segment { logical_block: 100, block_count: 20, location: None });
        assert_eq!(segments(&map, 50, 0), Vec::new(), "no blocks, no segment, inside a run too");
        let displaced = punch(&mut map, 5, 50);
        assert_eq!(displaced.iter().map(|(_, count)| count).sum::<u64>(), 50);
        assert_eq!(mapped_block_count(&map), 50);
        // Writing back the original blocks coalesces the runs again.
        assign(&mut map, 5, 50, Location::Data(1005));
        assert_eq!(map.len(), 1);
    }

    #[test]
    fn the_layout_score_counts_blocks_that_follow_their_logical_predecessor() {
        let mut map = ExtentMap::new(1);
        assert_eq!(layout_score(&map), LayoutScore::default());
        assert_eq!(layout_score(&map).fraction(), None, "nothing mapped, nothing scored");
        assign(&mut map, 0, 100, Location::Data(1000));
        let sequential = layout_score(&map);
        assert_eq!((sequential.scored_block_count, sequential.contiguous_block_count), (99, 99));
        assert_eq!(sequential.fraction(), Some(1.0));
        // One block moved elsewhere: it and its successor no longer follow.
        assign(&mut map, 10, 1, Location::Data(5000));
        let moved = layout_score(&map);
        assert_eq!((moved.scored_block_count, moved.contiguous_block_count), (99, 97));
        // Staged blocks are on another device: a staged run of two keeps its
        // inner block and breaks its two junctions.
        assign(&mut map, 50, 2, Location::Flash(1051));
        assert_eq!(layout_score(&map).contiguous_block_count, 95);
        // A hole: the block after it has no predecessor and is not scored.
        punch(&mut map, 70, 1);
        let holed = layout_score(&map);
        assert_eq!((holed.scored_block_count, holed.contiguous_block_count), (97, 93));
        assert_eq!(holed + holed, LayoutScore { scored_block_count: 194, contiguous_block_count: 186 });
    }

    #[test]
    fn blocks_interleaved_with_another_extent_score_zero() {
        let mut map = ExtentMap::new(1);
        for block in 0..10 {
            assign(&mut map, block, 1, Location::Data(100 + 2 * block));
        }
        assert_eq!(layout_score(&map).fraction(), Some(0.0));
        assert_eq!(layout_score(&map).scored_block_count, 9);
    }
}
