//! Layout policies: where new blocks go, as pure decisions over a description of
//! the state. The engine gathers the facts (neighbours' locations, free blocks
//! per allocation range), asks these functions, and executes the answer. Every
//! function here is deterministic and touches no device, so each policy is
//! tested without I/O (docs/layouts.md).
//!
//! Three layouts share the engine: [`Layout::Proximal`] (small writes staged on
//! flash, destaged next to their logical neighbours), [`Layout::InPlace`] (a
//! frame array: a block keeps the place of its first write; flash is its NV
//! write cache) and [`Layout::WriteAnywhere`] (no staging; new blocks plug the
//! holes left by freed older versions, next-fit over the device).

use crate::map::Location;

/// A data layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
pub enum Layout {
    /// Small writes staged in the flash log; destage places each group in the
    /// allocation range of its logical neighbours, or the nearest range with
    /// room within the proximal span, or a new range. Large writes go straight
    /// to allocation ranges.
    #[default]
    Proximal,
    /// A frame array: each block lives at the place of its first write.
    /// Overwrites are held in the flash log (the array's NV write cache) and
    /// written back in place, in ascending LBN per extent, at destage.
    InPlace,
    /// No staging: every write goes to the data device, new blocks plugging the
    /// first holes after a rolling cursor (greedy hole plugging).
    WriteAnywhere,
}

impl Layout {
    /// The name used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Proximal => "proximal",
            Layout::InPlace => "in-place",
            Layout::WriteAnywhere => "write-anywhere",
        }
    }

    /// Parses a name as printed by [`Layout::name`] (also with `_`).
    pub fn parse(name: &str) -> Option<Self> {
        match name.replace('_', "-").as_str() {
            "proximal" => Some(Layout::Proximal),
            "in-place" => Some(Layout::InPlace),
            "write-anywhere" => Some(Layout::WriteAnywhere),
            _ => None,
        }
    }
}

/// The parameters the policies depend on (from the volume options).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayoutParameters {
    /// The layout.
    pub layout: Layout,
    /// Writes of fewer blocks than this are staged (168 KiB: 42 blocks).
    pub staging_threshold_blocks: u64,
    /// Blocks per allocation range (256 = 1 MiB nearline, 128 = 512 KiB enterprise).
    pub allocation_range_blocks: u64,
    /// How far (in ranges, each way) destage looks for a range with room.
    pub proximal_span_ranges: u64,
    /// Fraction of each range a first write leaves free for later updates.
    pub range_reserve_fraction: f64,
}

impl LayoutParameters {
    /// Blocks of a range that large writes may fill (at least one).
    pub fn range_fill_limit_blocks(&self) -> u64 {
        let reserve = (self.allocation_range_blocks as f64 * self.range_reserve_fraction.clamp(0.0, 1.0)).floor();
        (self.allocation_range_blocks - reserve as u64).max(1)
    }
}

/// What the policy knows about a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteContext {
    /// Number of blocks written.
    pub block_count: u64,
    /// Where the first block written lives now, if mapped.
    pub previous: Option<Location>,
    /// Whether every block written is mapped on the data device now (an
    /// overwrite of a frame array's blocks).
    pub overwrites_data_blocks: bool,
}

/// Where a write goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Each block to the flash staging log.
    Stage,
    /// To fresh data-device blocks in allocation ranges, after the logical
    /// predecessor when its range has room.
    Ranges,
    /// Over the blocks' current data-device locations (frame array without a
    /// write cache).
    InPlace,
    /// To the first holes after the rolling hole-plugging cursor.
    PlugHoles,
}

/// Where a write goes, as a pure function of the layout and the write.
pub fn place_write(parameters: &LayoutParameters, context: &WriteContext) -> Placement {
    let small = context.block_count < parameters.staging_threshold_blocks;
    match parameters.layout {
        Layout::Proximal if small => Placement::Stage,
        Layout::Proximal => Placement::Ranges,
        // A frame array's cache holds every overwrite, so a crash never tears a
        // block in place; without a cache (threshold 0) overwrites go in place.
        Layout::InPlace if context.overwrites_data_blocks && parameters.staging_threshold_blocks > 0 => {
            Placement::Stage
        }
        Layout::InPlace if context.overwrites_data_blocks => Placement::InPlace,
        Layout::InPlace if small => Placement::Stage,
        Layout::InPlace => Placement::Ranges,
        Layout::WriteAnywhere => Placement::PlugHoles,
    }
}

/// Whether the staging area must be destaged before `incoming_blocks` more can
/// be staged.
pub fn staging_is_full(staged_blocks: u64, capacity_blocks: u64, incoming_blocks: u64) -> bool {
    staged_blocks + incoming_blocks > capacity_blocks
}

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
/// neighbour in the same extent.
pub fn hint_in_range(neighbour: Option<(u64, u64)>, logical_block: u64, range_start: u64, range_end: u64) -> u64 {
    let Some((neighbour_logical, neighbour_block)) = neighbour else { return range_start };
    let hint = if logical_block >= neighbour_logical {
        neighbour_block.saturating_add(logical_block - neighbour_logical)
    } else {
        neighbour_block.saturating_sub(neighbour_logical - logical_block)
    };
    hint.clamp(range_start, range_end - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parameters(layout: Layout) -> LayoutParameters {
        LayoutParameters {
            layout,
            staging_threshold_blocks: 42,
            allocation_range_blocks: 256,
            proximal_span_ranges: 100,
            range_reserve_fraction: 0.0,
        }
    }

    fn write(block_count: u64, overwrites: bool) -> WriteContext {
        WriteContext {
            block_count,
            previous: overwrites.then_some(Location::Data(7)),
            overwrites_data_blocks: overwrites,
        }
    }

    #[test]
    fn proximal_stages_writes_below_the_threshold_and_ranges_the_rest() {
        let proximal = parameters(Layout::Proximal);
        assert_eq!(place_write(&proximal, &write(1, true)), Placement::Stage);
        assert_eq!(place_write(&proximal, &write(41, false)), Placement::Stage);
        assert_eq!(place_write(&proximal, &write(42, true)), Placement::Ranges);
        let unstaged = LayoutParameters { staging_threshold_blocks: 0, ..proximal };
        assert_eq!(place_write(&unstaged, &write(1, true)), Placement::Ranges);
    }

    #[test]
    fn in_place_caches_every_overwrite_and_writes_in_place_without_a_cache() {
        let in_place = parameters(Layout::InPlace);
        assert_eq!(place_write(&in_place, &write(100, true)), Placement::Stage);
        assert_eq!(place_write(&in_place, &write(100, false)), Placement::Ranges);
        assert_eq!(place_write(&in_place, &write(1, false)), Placement::Stage);
        let uncached = LayoutParameters { staging_threshold_blocks: 0, ..in_place };
        assert_eq!(place_write(&uncached, &write(1, true)), Placement::InPlace);
        assert_eq!(place_write(&uncached, &write(1, false)), Placement::Ranges);
    }

    #[test]
    fn write_anywhere_never_stages() {
        let anywhere = parameters(Layout::WriteAnywhere);
        assert_eq!(place_write(&anywhere, &write(1, true)), Placement::PlugHoles);
        assert_eq!(place_write(&anywhere, &write(500, false)), Placement::PlugHoles);
    }

    #[test]
    fn the_reserve_fraction_limits_first_fills() {
        let mut reserved = parameters(Layout::Proximal);
        assert_eq!(reserved.range_fill_limit_blocks(), 256);
        reserved.range_reserve_fraction = 0.1;
        assert_eq!(reserved.range_fill_limit_blocks(), 231);
        reserved.range_reserve_fraction = 1.0;
        assert_eq!(reserved.range_fill_limit_blocks(), 1);
    }

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
        let proximal = LayoutParameters { proximal_span_ranges: 3, ..parameters(Layout::Proximal) };
        let free = [0u64, 5, 0, 2, 9, 0, 0, 0, 0, 50];
        let mut lookup = |range: u64| free[range as usize];
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
        assert_eq!(hint_in_range(None, 7, 512, 768), 512);
    }

    #[test]
    fn layout_names_round_trip() {
        for layout in [Layout::Proximal, Layout::InPlace, Layout::WriteAnywhere] {
            assert_eq!(Layout::parse(layout.name()), Some(layout));
        }
        assert_eq!(Layout::parse("in_place"), Some(Layout::InPlace));
        assert_eq!(Layout::parse("lfs"), None);
    }
}
