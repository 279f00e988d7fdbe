//! Allocation ranges: the data device cut into ranges of
//! `allocation_range_blocks` (1 MiB nearline, 512 KiB enterprise), the unit in
//! which the proximal and in-place layouts place large writes and destage
//! groups. The pure policy of destage's two phases (grouping an extent's
//! staged runs by logical window, choosing a range, the hint inside it) and
//! the rolling search for an empty range, shared by the layouts that place in
//! ranges.

use super::LayoutParameters;
use crate::space::SpaceMap;

/// A run of staged blocks of one extent (consecutive logical blocks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct StagedRun {
    /// First logical block.
    pub logical_block: u64,
    /// Number of blocks.
    pub block_count: u64,
}

/// A destage group: the staged runs of one extent within one logical
/// allocation-range window, placed together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestageGroup {
    /// The runs, in logical order.
    pub runs: Vec<StagedRun>,
}

impl DestageGroup {
    /// Blocks of the group.
    pub fn block_count(&self) -> u64 {
        self.runs.iter().map(|run| run.block_count).sum()
    }

    /// First logical block.
    pub fn first_logical_block(&self) -> u64 {
        self.runs[0].logical_block
    }

    /// One past the last logical block.
    pub fn end_logical_block(&self) -> u64 {
        let last = self.runs.last().expect("a group has runs");
        last.logical_block + last.block_count
    }
}

/// Phase one of destage: sorts one extent's staged runs by logical offset and
/// groups those that fall in the same logical window of `window_blocks` (an
/// allocation range's worth of the extent). A run crossing a window boundary
/// is split.
pub fn group_staged_runs(mut runs: Vec<StagedRun>, window_blocks: u64) -> Vec<DestageGroup> {
    assert!(window_blocks > 0, "a window holds at least one block");
    runs.sort_unstable();
    let mut groups: Vec<DestageGroup> = Vec::new();
    let mut current_window = u64::MAX;
    for run in runs {
        let mut logical = run.logical_block;
        let end = run.logical_block + run.block_count;
        while logical < end {
            let window = logical / window_blocks;
            let piece_end = end.min((window + 1) * window_blocks);
            let piece = StagedRun { logical_block: logical, block_count: piece_end - logical };
            if window == current_window {
                groups.last_mut().expect("current window has a group").runs.push(piece);
            } else {
                groups.push(DestageGroup { runs: vec![piece] });
                current_window = window;
            }
            logical = piece_end;
        }
    }
    groups
}

/// The allocation range a destage group goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeChoice {
    /// The range holding the group's logical neighbours.
    Neighbour(u64),
    /// Another range with room, the nearest to the neighbours' within the span.
    Nearby(u64),
    /// No range within the span has room (or the group has no placed
    /// neighbour): a new, empty range.
    New,
}

/// Phase two of destage for one group: the neighbours' range if it has room for
/// `block_count` blocks, else the nearest range within `proximal_span_ranges`
/// (each way, ties to the lower) with room, else a new range.
/// `free_blocks(range)` says how many blocks of a range are allocatable.
pub fn choose_destage_range(
    parameters: &LayoutParameters,
    neighbour_range: Option<u64>,
    block_count: u64,
    range_count: u64,
    free_blocks: &mut dyn FnMut(u64) -> u64,
) -> RangeChoice {
    let Some(home) = neighbour_range else { return RangeChoice::New };
    if free_blocks(home) >= block_count {
        return RangeChoice::Neighbour(home);
    }
    for distance in 1..=parameters.proximal_span_ranges {
        let below = home.checked_sub(distance);
        let above = Some(home + distance).filter(|&range| range < range_count);
        if below.is_none() && above.is_none() {
            break;
        }
        for candidate in [below, above].into_iter().flatten() {
            if free_blocks(candidate) >= block_count {
                return RangeChoice::Nearby(candidate);
            }
        }
    }
    RangeChoice::New
}

/// Where, inside its chosen range, a staged run should start: at the block
/// the logical offset would occupy if the neighbour's run continued, clamped
/// into the range. `neighbour` is `(logical block, data block)` of a placed
/// neighbour in the same extent. Without one, where the logical offset puts
/// it in the range (the offset modulo the range's size), so that the places
/// of the window's blocks still to come stay free and each of them continues
/// its neighbours' run when it arrives: an extent filled in random order ends
/// up in logical order.
pub fn hint_in_range(neighbour: Option<(u64, u64)>, logical_block: u64, range_start: u64, range_end: u64) -> u64 {
    assert!(range_start < range_end, "a range holds at least one block");
    let Some((neighbour_logical, neighbour_block)) = neighbour else {
        return range_start + logical_block % (range_end - range_start);
    };
    let hint = if logical_block >= neighbour_logical {
        neighbour_block.saturating_add(logical_block - neighbour_logical)
    } else {
        neighbour_block.saturating_sub(neighbour_logical - logical_block)
    };
    hint.clamp(range_start, range_end - 1)
}

/// Staged blocks of one extent within one logical allocation-range window: a
/// destage group before its runs are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagedWindow {
    /// The extent.
    pub extent_id: u64,
    /// The window: logical blocks `[window * window_blocks, (window + 1) * window_blocks)`.
    pub window: u64,
    /// Staged blocks in it.
    pub block_count: u64,
}

/// The density rule of a bounded destage: the densest windows first (most
/// staged blocks, so each destage I/O retires the most updates; ties to the
/// lower extent, then the lower window), until they hold at least
/// `max_blocks` blocks — at least one window. Returns the chosen windows in
/// extent, then window, order.
pub fn densest_windows(mut windows: Vec<StagedWindow>, max_blocks: u64) -> Vec<StagedWindow> {
    windows.sort_unstable_by_key(|window| (std::cmp::Reverse(window.block_count), window.extent_id, window.window));
    let mut chosen = Vec::new();
    let mut blocks = 0;
    for window in windows {
        if blocks >= max_blocks && !chosen.is_empty() {
            break;
        }
        blocks += window.block_count;
        chosen.push(window);
    }
    chosen.sort_unstable_by_key(|window| (window.extent_id, window.window));
    chosen
}

/// The rolling search for an allocation range with every block allocatable
/// (where a large write or a destage group without room near its neighbours
/// starts a new run, and where a new extent's first writes get their
/// reservation).
///
/// Ranges reserved for an extent's first writes are passed over while an
/// unreserved empty range is left; after that (space pressure) a reserved one
/// is taken, and its extent's reservation is released by the caller.
#[derive(Debug, Clone, Default)]
pub(crate) struct FreshRangeSearch {
    /// Where the next search starts.
    cursor: u64,
    /// A search found no empty range; only a durable CP (which makes freed
    /// blocks allocatable) can change that.
    exhausted: bool,
    /// A search found no empty range outside the reservations; a CP or a
    /// released reservation can change that.
    unreserved_exhausted: bool,
}

/// An empty range the search found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FreshRange {
    /// The range.
    pub(crate) range: u64,
    /// The extent whose reservation holds it, taken under space pressure:
    /// the caller releases that reservation.
    pub(crate) reserved_for: Option<u64>,
}

impl FreshRangeSearch {
    /// The next range of `range_blocks` blocks with every block allocatable in
    /// `space`, from the cursor (wrapping once): one outside the reservations
    /// (`owner` names the extent a range is reserved for) while any is left,
    /// else a reserved one.
    pub(crate) fn next(
        &mut self,
        space: &SpaceMap,
        range_blocks: u64,
        owner: impl Fn(u64) -> Option<u64>,
    ) -> Option<FreshRange> {
        assert!(range_blocks > 0, "a range holds at least one block");
        if self.exhausted {
            return None;
        }
        if !self.unreserved_exhausted {
            if let Some(range) = self.scan(space, range_blocks, |range| owner(range).is_none()) {
                return Some(FreshRange { range, reserved_for: None });
            }
            self.unreserved_exhausted = true;
        }
        match self.scan(space, range_blocks, |_| true) {
            Some(range) => Some(FreshRange { range, reserved_for: owner(range) }),
            None => {
                self.exhausted = true;
                None
            }
        }
    }

    /// The first empty range from the cursor (wrapping once) that `accept`s;
    /// moves the cursor past it.
    fn scan(&mut self, space: &SpaceMap, range_blocks: u64, accept: impl Fn(u64) -> bool) -> Option<u64> {
        let range_count = space.block_count().div_ceil(range_blocks);
        let range = (0..range_count)
            .map(|step| (self.cursor + step) % range_count)
            .find(|&range| is_empty_range(space, range, range_blocks) && accept(range))?;
        self.cursor = (range + 1) % range_count;
        Some(range)
    }

    /// The first of `run_ranges` consecutive ranges with every block
    /// allocatable and none reserved (`owner` names the extent a range is
    /// reserved for), from the cursor (wrapping once; a run does not wrap),
    /// moving the cursor past the run: the region a new extent's first writes
    /// are reserved, window by window. `None` if no run is that long.
    pub(crate) fn next_run(
        &mut self,
        space: &SpaceMap,
        range_blocks: u64,
        run_ranges: u64,
        owner: impl Fn(u64) -> Option<u64>,
    ) -> Option<u64> {
        assert!(range_blocks > 0, "a range holds at least one block");
        assert!(run_ranges > 0, "a run holds at least one range");
        if self.exhausted || self.unreserved_exhausted {
            return None;
        }
        // Whole ranges only: a run never includes the device's partial last one.
        let range_count = space.block_count() / range_blocks;
        let mut step = 0;
        while step < range_count {
            let first = (self.cursor + step) % range_count;
            if first + run_ranges > range_count {
                // A run does not wrap: continue from range 0.
                step += range_count - first;
                continue;
            }
            let taken = (first..first + run_ranges)
                .find(|&range| !is_empty_range(space, range, range_blocks) || owner(range).is_some());
            match taken {
                None => {
                    self.cursor = (first + run_ranges) % range_count;
                    return Some(first);
                }
                Some(taken) => step += taken - first + 1,
            }
        }
        None
    }

    /// A CP made the blocks freed before it allocatable: ranges may be empty again.
    pub(crate) fn blocks_were_freed(&mut self) {
        self.exhausted = false;
        self.unreserved_exhausted = false;
    }

    /// A reservation was released: its empty ranges are for anyone now.
    pub(crate) fn reservation_released(&mut self) {
        self.unreserved_exhausted = false;
    }
}

/// Whether allocation range `range` is whole (not the device's partial last
/// one) and has every block allocatable.
fn is_empty_range(space: &SpaceMap, range: u64, range_blocks: u64) -> bool {
    let start = range * range_blocks;
    let end = start + range_blocks;
    end <= space.block_count() && space.allocatable_in(start, end) == range_blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::in_memory;
    use crate::layouts::test_support::parameters;

    #[test]
    fn staged_runs_are_sorted_and_grouped_by_logical_window() {
        let run = |logical_block, block_count| StagedRun { logical_block, block_count };
        let groups = group_staged_runs(vec![run(300, 2), run(5, 1), run(250, 10), run(1, 1)], 256);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].runs, vec![run(1, 1), run(5, 1), run(250, 6)]);
        assert_eq!(groups[1].runs, vec![run(256, 4), run(300, 2)]);
        assert_eq!(groups[0].block_count(), 8);
        assert_eq!((groups[1].first_logical_block(), groups[1].end_logical_block()), (256, 302));
    }

    #[test]
    fn destage_prefers_the_neighbours_range_then_the_nearest_with_room_then_a_new_one() {
        let proximal = LayoutParameters { proximal_span_ranges: 3, ..parameters() };
        let free = [0u64, 5, 0, 2, 9, 0, 0, 0, 0, 50];
        let mut lookup = |range: u64| free[in_memory(range)];
        assert_eq!(choose_destage_range(&proximal, Some(4), 9, 10, &mut lookup), RangeChoice::Neighbour(4));
        assert_eq!(choose_destage_range(&proximal, Some(3), 4, 10, &mut lookup), RangeChoice::Nearby(4));
        // Equal distance: the lower range wins.
        assert_eq!(choose_destage_range(&proximal, Some(2), 5, 10, &mut lookup), RangeChoice::Nearby(1));
        // Range 9 has room but lies beyond the span of 3 from range 5.
        assert_eq!(choose_destage_range(&proximal, Some(5), 20, 10, &mut lookup), RangeChoice::New);
        assert_eq!(choose_destage_range(&proximal, None, 1, 10, &mut lookup), RangeChoice::New);
        // The span is clipped at both ends of the device.
        assert_eq!(choose_destage_range(&proximal, Some(9), 60, 10, &mut lookup), RangeChoice::New);
    }

    #[test]
    fn the_hint_continues_the_neighbours_run_inside_the_range() {
        assert_eq!(hint_in_range(Some((10, 1010)), 12, 1000, 1256), 1012);
        assert_eq!(hint_in_range(Some((10, 1010)), 5, 1000, 1256), 1005);
        assert_eq!(hint_in_range(Some((10, 1010)), 900, 1000, 1256), 1255);
        assert_eq!(hint_in_range(Some((10, 3)), 0, 0, 256), 0);
        // No neighbour: the offset's place in the range.
        assert_eq!(hint_in_range(None, 7, 512, 768), 519);
        assert_eq!(hint_in_range(None, 256 + 7, 512, 768), 519);
        assert_eq!(hint_in_range(None, 7, 0, 4), 3);
    }

    #[test]
    fn the_fresh_range_search_rolls_on_and_stops_until_blocks_are_freed() {
        use crate::bitmap::PersistentBitmap;
        use crate::error::DeviceRole;
        // Four ranges of 64 blocks and a partial fifth, which never counts.
        let mut space = SpaceMap::new(DeviceRole::Data, PersistentBitmap::new(300), PersistentBitmap::new(300), 0);
        assert_eq!(space.allocate_within(70, 64, 128, 1), Some((70, 1)));
        let mut search = FreshRangeSearch::default();
        let mut next = |space: &SpaceMap| search.next(space, 64, |_| None).map(|fresh| fresh.range);
        assert_eq!(next(&space), Some(0));
        assert_eq!(next(&space), Some(2));
        assert_eq!(next(&space), Some(3));
        assert_eq!(next(&space), Some(0));
        for start in [0, 128, 192] {
            assert_eq!(space.allocate_within(start, start, start + 64, 1), Some((start, 1)));
        }
        assert_eq!(next(&space), None);
        assert!(search.exhausted);
        search.blocks_were_freed();
        assert_eq!(search.next(&space, 64, |_| None), None);
    }

    #[test]
    fn a_run_of_empty_ranges_is_found_from_the_cursor_and_skipped_afterwards() {
        use crate::bitmap::PersistentBitmap;
        use crate::error::DeviceRole;
        // Eight ranges of 16 blocks; range 2 holds a block.
        let mut space = SpaceMap::new(DeviceRole::Data, PersistentBitmap::new(128), PersistentBitmap::new(128), 0);
        assert_eq!(space.allocate_within(40, 32, 48, 1), Some((40, 1)));
        let mut search = FreshRangeSearch::default();
        assert_eq!(search.next_run(&space, 16, 2, |_| None), Some(0));
        assert_eq!(search.next_run(&space, 16, 3, |_| None), Some(3), "range 2 is not empty");
        assert_eq!(
            search.next(&space, 16, |_| None).map(|fresh| fresh.range),
            Some(6),
            "single ranges come after the runs"
        );
        // Wrapping: the run from range 0 is broken by range 2 again.
        assert_eq!(search.next_run(&space, 16, 3, |_| None), Some(3));
        assert_eq!(search.next_run(&space, 16, 6, |_| None), None, "no six empty ranges in a row");
    }

    #[test]
    fn reserved_ranges_are_passed_over_until_only_they_are_left() {
        use crate::bitmap::PersistentBitmap;
        use crate::error::DeviceRole;
        // Eight ranges of 16 blocks; ranges 1 to 4 are reserved for extent 7,
        // range 6 holds a block.
        let mut space = SpaceMap::new(DeviceRole::Data, PersistentBitmap::new(128), PersistentBitmap::new(128), 0);
        assert_eq!(space.allocate_within(96, 96, 112, 1), Some((96, 1)));
        let owner = |range: u64| (1..5).contains(&range).then_some(7);
        let mut search = FreshRangeSearch::default();
        assert_eq!(search.next_run(&space, 16, 2, owner), None, "no two unreserved empty ranges in a row");
        // Each range found is used (a block allocated in it), as its caller does.
        let take = |search: &mut FreshRangeSearch, space: &mut SpaceMap| {
            let fresh = search.next(space, 16, owner)?;
            let start = fresh.range * 16;
            assert_eq!(space.allocate_within(start, start, start + 16, 1), Some((start, 1)));
            Some(fresh)
        };
        assert_eq!(take(&mut search, &mut space), Some(FreshRange { range: 0, reserved_for: None }));
        assert_eq!(take(&mut search, &mut space), Some(FreshRange { range: 5, reserved_for: None }));
        assert_eq!(take(&mut search, &mut space), Some(FreshRange { range: 7, reserved_for: None }));
        // Only reserved ranges are empty now: they are taken, naming their extent.
        assert_eq!(take(&mut search, &mut space), Some(FreshRange { range: 1, reserved_for: Some(7) }));
        assert!(search.unreserved_exhausted);
        assert_eq!(search.next_run(&space, 16, 1, owner), None, "a new reservation never comes out of another");
        // Once the reservation is released, its ranges are ordinary empty ranges.
        search.reservation_released();
        assert_eq!(search.next(&space, 16, |_| None), Some(FreshRange { range: 2, reserved_for: None }));
        assert_eq!(search.next_run(&space, 16, 2, |_| None), Some(3));
    }

    #[test]
    fn a_bounded_destage_takes_the_densest_windows_first() {
        let window = |extent_id, window, block_count| StagedWindow { extent_id, window, block_count };
        let windows = vec![window(1, 0, 3), window(1, 4, 40), window(2, 1, 40), window(2, 7, 12), window(3, 2, 1)];
        assert_eq!(densest_windows(windows.clone(), 50), vec![window(1, 4, 40), window(2, 1, 40)]);
        assert_eq!(densest_windows(windows.clone(), 80), vec![window(1, 4, 40), window(2, 1, 40)]);
        assert_eq!(densest_windows(windows.clone(), 81).len(), 3);
        // At least one window, however small the budget.
        assert_eq!(densest_windows(windows.clone(), 0), vec![window(1, 4, 40)]);
        assert_eq!(densest_windows(windows, u64::MAX).len(), 5);
        assert!(densest_windows(Vec::new(), 10).is_empty());
    }
}
