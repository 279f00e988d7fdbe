//! Layouts: where new blocks go. Each layout is a strategy in its own file,
//! owning its private state; the executors (`staging.rs` for writes,
//! `destage.rs` for destage) gather the facts, ask the strategy and execute the
//! answer, and never ask which layout runs (docs/layouts.md).
//!
//! - [`proximal`]: small writes staged on flash, destaged next to their
//!   logical neighbours (the default).
//! - [`proximal_hot`]: the proximal layout keeping hot blocks in the
//!   staging area through destages (HyLog's hot/cold split on proximal).
//! - [`in_place`]: a frame array — a block keeps the place of its first write;
//!   flash is its NV write cache.
//! - [`lfs`]: every write buffered in the staging log, destaged as whole
//!   segments at the log head; a cleaner empties partly dead segments.
//! - [`wolf`]: `lfs` with the buffered blocks sorted by update frequency
//!   into a hot and a cold log stream, each filling its own segments.
//! - [`hylog`]: HyLog's hybrid: the hot blocks log-structured, the cold ones
//!   overwritten in place, the hot share chosen by the write-cost model.
//! - [`frame_homes`]: where staged overwrites go back to (in-place, HyLog).
//! - [`write_anywhere`]: no staging; new blocks plug the holes left by freed
//!   older versions, next-fit over the device.
//! - [`ranges`]: the pure allocation-range policy the layouts that place in
//!   ranges share (destage grouping, range choice, hints), and the search for
//!   an empty range.
//!
//! Every decision here is deterministic and touches no device, so each layout
//! is tested without I/O. Adding a layout is adding a file here and a line in
//! [`Layout`]'s registry ([`Layout::strategy`], [`Layout::name`],
//! [`Layout::parse`]).

pub mod frame_homes;
pub mod hylog;
pub mod in_place;
pub mod lfs;
pub mod proximal;
pub mod proximal_hot;
pub mod ranges;
pub mod wolf;
pub mod write_anywhere;

use std::cmp::Ordering;
use std::fmt;

use crate::map::Location;

pub use ranges::{
    choose_destage_range, densest_windows, group_staged_runs, hint_in_range, DestageGroup, RangeChoice, StagedRun,
    StagedWindow,
};

/// A data layout: which strategy places a volume's blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
pub enum Layout {
    /// [`proximal::Proximal`].
    #[default]
    Proximal,
    /// [`in_place::InPlace`].
    InPlace,
    /// [`write_anywhere::WriteAnywhere`].
    WriteAnywhere,
    /// [`lfs::Lfs`].
    Lfs,
    /// [`wolf::Wolf`].
    Wolf,
    /// [`proximal_hot::ProximalHot`].
    ProximalHot,
    /// [`hylog::Hylog`].
    Hylog,
}

impl Layout {
    /// Every layout, in the order reports list them.
    pub const ALL: [Layout; 7] = [
        Layout::Proximal,
        Layout::InPlace,
        Layout::WriteAnywhere,
        Layout::Lfs,
        Layout::Wolf,
        Layout::ProximalHot,
        Layout::Hylog,
    ];

    /// The name used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Proximal => "proximal",
            Layout::InPlace => "in-place",
            Layout::WriteAnywhere => "write-anywhere",
            Layout::Lfs => "lfs",
            Layout::Wolf => "wolf",
            Layout::ProximalHot => "proximal-hot",
            Layout::Hylog => "hylog",
        }
    }

    /// Parses a name as printed by [`Layout::name`] (also with `_`).
    pub fn parse(name: &str) -> Option<Self> {
        let name = name.replace('_', "-");
        Self::ALL.into_iter().find(|layout| layout.name() == name)
    }

    /// A fresh strategy of this layout: the one place a layout kind is chosen.
    pub fn strategy(self) -> Box<dyn LayoutStrategy> {
        match self {
            Layout::Proximal => Box::new(proximal::Proximal),
            Layout::InPlace => Box::<in_place::InPlace>::default(),
            Layout::WriteAnywhere => Box::<write_anywhere::WriteAnywhere>::default(),
            Layout::Lfs => Box::new(lfs::Lfs),
            Layout::Wolf => Box::<wolf::Wolf>::default(),
            Layout::ProximalHot => Box::<proximal_hot::ProximalHot>::default(),
            Layout::Hylog => Box::<hylog::Hylog>::default(),
        }
    }

    /// Every layout's name, for messages: `proximal, in-place, …, or wolf`.
    pub fn names_listed() -> String {
        let names: Vec<&str> = Self::ALL.iter().map(|layout| layout.name()).collect();
        match names.split_last() {
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

/// A layout's decisions, and the private state they depend on.
///
/// The decisions are pure functions of the arguments and that state; the
/// notifications (`staged`, `destaged`, `move_hole_cursor`) are how the
/// executors keep the state current.
pub trait LayoutStrategy: fmt::Debug + Send + Sync {
    /// Which layout this is.
    fn kind(&self) -> Layout;

    /// Where a write goes.
    fn place_write(&self, parameters: &LayoutParameters, write: &WriteContext) -> Placement;

    /// How destage places this layout's staged blocks.
    fn destage_rule(&self) -> DestageRule {
        DestageRule::NearNeighbours
    }

    /// [`DestageRule::FrameHomes`]: the data block that block `logical_block`
    /// of extent `extent_id` overwrote when it was staged, if known.
    fn frame_home(&self, extent_id: u64, logical_block: u64) -> Option<u64> {
        let _ = (extent_id, logical_block);
        None
    }

    /// Whether the layout writes whole segments at a log head
    /// ([`DestageRule::LogHead`]), keeping the segment usage table and
    /// cleaning segments.
    fn writes_segments(&self) -> bool {
        false
    }

    /// [`DestageRule::LogHead`]: the log stream (below
    /// [`LOG_STREAMS`](crate::segments::LOG_STREAMS)) whose head block
    /// `logical_block` of extent `extent_id` is written at; each stream fills
    /// its own segments.
    fn log_stream(&self, extent_id: u64, logical_block: u64) -> usize {
        let _ = (extent_id, logical_block);
        0
    }

    /// [`DestageRule::LogHead`]: the log stream the segment cleaner writes
    /// the blocks it moves to.
    fn cleaning_stream(&self) -> usize {
        0
    }

    /// Whether the layout keeps the versions snapshots hold by copying a
    /// frame block out before overwriting it in place (a frame array), rather
    /// than writing the new version elsewhere (docs/layouts.md, "Copy-out of
    /// snapshot blocks").
    fn copies_out(&self) -> bool {
        false
    }

    /// [`DestageRule::FrameHomes`]: whether `block` is the frame home of a
    /// staged block (free until its destage, but kept for it).
    fn is_frame_home(&self, block: u64) -> bool {
        let _ = block;
        false
    }

    /// [`Placement::PlugHoles`]: where the search for the next hole starts.
    fn hole_cursor(&self) -> u64 {
        0
    }

    /// [`Placement::PlugHoles`]: the holes before `next_block` are taken.
    fn move_hole_cursor(&mut self, next_block: u64) {
        let _ = next_block;
    }

    /// Block `logical_block` of extent `extent_id` was staged; `previous` is
    /// where it lived before.
    fn staged(&mut self, extent_id: u64, logical_block: u64, previous: Option<Location>) {
        let _ = (extent_id, logical_block, previous);
    }

    /// Blocks `[logical_block, logical_block + block_count)` of extent
    /// `extent_id` were destaged to the data device.
    fn destaged(&mut self, extent_id: u64, logical_block: u64, block_count: u64) {
        let _ = (extent_id, logical_block, block_count);
    }

    /// A staging area's worth of blocks was staged since the last call:
    /// where a layout may end its measurement interval (`proximal-hot` ends
    /// one at each call, `hylog` when it has counted
    /// [`VolumeFacts::interval_writes`]); `facts` are the volume's now.
    /// Returns whether the layout chose a hot set anew.
    fn measurement_interval_ended(&mut self, facts: &VolumeFacts) -> bool {
        let _ = facts;
        false
    }

    /// The blocks a destage should leave in the staging area, hottest first,
    /// at most `limit` ([`retained_share_max`](Self::retained_share_max) of
    /// the area), as `(extent, logical block)`; the executor keeps those
    /// still staged.
    fn hot_blocks(&self, limit: usize) -> Vec<(u64, u64)> {
        let _ = limit;
        Vec::new()
    }

    /// The largest share of the staging area a destage leaves to
    /// [`hot_blocks`](Self::hot_blocks) (0: every staged block is destaged).
    fn retained_share_max(&self) -> f64 {
        0.0
    }

    /// The share h of the blocks in use the layout last chose hot, if it
    /// chooses a hot set and has chosen one.
    fn hot_fraction(&self) -> Option<f64> {
        None
    }
}

/// What a layout may weigh when a measurement interval ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VolumeFacts {
    /// Data-device blocks in use.
    pub data_blocks_used: u64,
    /// Data-device blocks.
    pub data_blocks: u64,
    /// The segment-vs-page efficiency A (Eq 1) the volume's cleaner prices
    /// page writes with.
    pub segment_efficiency: f64,
    /// Staged writes per measurement interval (0: as many as blocks in use;
    /// `VolumeOptions::measurement_interval_writes`).
    pub interval_writes: u64,
    /// A hot share chosen by the caller instead of by Eq 8
    /// (`VolumeOptions::hylog_hot_fraction`).
    pub fixed_hot_fraction: Option<f64>,
}

impl VolumeFacts {
    /// Staged writes that make a measurement interval.
    pub fn writes_per_interval(&self) -> u64 {
        if self.interval_writes > 0 {
            self.interval_writes
        } else {
            self.data_blocks_used.max(1)
        }
    }

    /// The disk space utilisation u.
    pub fn utilization(&self) -> f64 {
        if self.data_blocks == 0 {
            0.0
        } else {
            self.data_blocks_used as f64 / self.data_blocks as f64
        }
    }
}

/// The parameters the layouts depend on (from the volume options).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayoutParameters {
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
        // In [0, allocation_range_blocks]: a whole number of blocks, exact in an f64.
        #[expect(clippy::cast_possible_truncation, reason = "a whole number between 0 and the range size")]
        let reserve_blocks = reserve as u64;
        (self.allocation_range_blocks - reserve_blocks).max(1)
    }
}

/// What a layout knows about a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteContext {
    /// Number of blocks written.
    pub block_count: u64,
    /// Where the first block written lives now, if mapped.
    pub previous: Option<Location>,
    /// Whether every block written is mapped on the data device now (an
    /// overwrite of a frame array's blocks).
    pub overwrites_data_blocks: bool,
    /// The staging area's capacity in blocks.
    pub staging_capacity_blocks: u64,
}

impl WriteContext {
    /// Whether the write is small enough to stage under `parameters`.
    pub fn is_small(&self, parameters: &LayoutParameters) -> bool {
        self.block_count < parameters.staging_threshold_blocks
    }
}

/// Where a write goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Each block to the flash staging log (to allocation ranges if the
    /// staging area cannot take it at all).
    Stage,
    /// Through the flash staging log in pieces of at most the staging
    /// capacity: a write larger than the staging area that must still never
    /// overwrite a block in place before its new value is durable on flash.
    StageInPieces,
    /// To fresh data-device blocks in allocation ranges, after the logical
    /// predecessor when its range has room.
    Ranges,
    /// Over the blocks' current data-device locations (frame array without a
    /// write cache).
    InPlace,
    /// To the first holes after the layout's hole cursor.
    PlugHoles,
    /// Straight to the log head, filling clean segments in order (a large
    /// write of a log-structured layout: it is a segment write already).
    LogHead,
}

/// How destage places a layout's staged blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DestageRule {
    /// The two phases of proximal destage: groups to the allocation range of
    /// their logical neighbours (or the nearest with room, or a new one), each
    /// run where its neighbour's run would continue.
    NearNeighbours,
    /// Block by block, each back at its frame home (else near its logical
    /// neighbour): a frame array's write-back.
    FrameHomes,
    /// At the log head: the next blocks of the current segment, then of the
    /// next clean segment (log-structured layouts).
    LogHead,
    /// HyLog's split: a block with a frame home
    /// ([`LayoutStrategy::frame_home`], which a hot block does not have) goes
    /// back to it; the others go to the head of their log stream
    /// ([`LayoutStrategy::log_stream`]).
    ColdHomesElseLog,
}

/// Orders `(block, writes)` hottest first and equal counts in block order,
/// so a choice by heat (`proximal-hot`'s kept blocks, `hylog`'s hot set) is
/// the same on every run.
pub(crate) fn hottest_first<B: Ord, C: Ord>((block_a, count_a): &(B, C), (block_b, count_b): &(B, C)) -> Ordering {
    count_b.cmp(count_a).then(block_a.cmp(block_b))
}

/// Whether the staging area must be destaged before `incoming_blocks` more can
/// be staged.
pub fn staging_is_full(staged_blocks: u64, capacity_blocks: u64, incoming_blocks: u64) -> bool {
    staged_blocks + incoming_blocks > capacity_blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_names_round_trip() {
        for layout in Layout::ALL {
            assert_eq!(Layout::parse(layout.name()), Some(layout));
            assert_eq!(layout.strategy().kind(), layout);
        }
        assert_eq!(Layout::parse("in_place"), Some(Layout::InPlace));
        assert_eq!(Layout::parse("lfs"), Some(Layout::Lfs));
        assert_eq!(Layout::parse("log"), None);
        assert_eq!(Layout::names_listed(), "proximal, in-place, write-anywhere, lfs, wolf, proximal-hot or hylog");
    }

    #[test]
    fn the_reserve_fraction_limits_first_fills() {
        let mut reserved = test_support::parameters();
        assert_eq!(reserved.range_fill_limit_blocks(), 256);
        reserved.range_reserve_fraction = 0.1;
        assert_eq!(reserved.range_fill_limit_blocks(), 231);
        reserved.range_reserve_fraction = 1.0;
        assert_eq!(reserved.range_fill_limit_blocks(), 1);
    }

    #[test]
    fn the_staging_area_is_full_when_the_incoming_blocks_do_not_fit() {
        assert!(!staging_is_full(90, 100, 10));
        assert!(staging_is_full(91, 100, 10));
    }
}

/// What the layouts' unit tests share.
#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    /// The default parameters of a nearline volume.
    pub(crate) fn parameters() -> LayoutParameters {
        LayoutParameters {
            staging_threshold_blocks: 42,
            allocation_range_blocks: 256,
            proximal_span_ranges: 100,
            range_reserve_fraction: 0.0,
        }
    }

    /// A volume of 1,000 data blocks, 800 in use, A = 32.8.
    pub(crate) fn facts() -> VolumeFacts {
        VolumeFacts {
            data_blocks_used: 800,
            data_blocks: 1000,
            segment_efficiency: 32.8,
            interval_writes: 0,
            fixed_hot_fraction: None,
        }
    }

    /// A write of `block_count` blocks; `overwrites`: of data-device blocks.
    pub(crate) fn write(block_count: u64, overwrites: bool) -> WriteContext {
        WriteContext {
            block_count,
            previous: overwrites.then_some(Location::Data(7)),
            overwrites_data_blocks: overwrites,
            staging_capacity_blocks: 1000,
        }
    }
}
