//! Segment summaries: per segment, the extent blocks mapped into it since it
//! was last opened clean, as Sprite LFS's segment summary blocks record
//! them, so that the cleaner finds a victim's live blocks from the victim's
//! own record instead of walking every extent map.
//!
//! In memory only, and a hint: the cleaner checks each entry against the
//! extent's map (an entry a later write displaced no longer matches) and
//! takes a victim's summary only when the live blocks it confirms are all
//! the blocks in use there ([`SpaceMap::in_use_in`]); anything else (a
//! summary lost to a restart, a map replaced by a restore, a block mapped by
//! two extents) falls back to the walk. So a missing entry costs time, never
//! a live block.
//!
//! [`SpaceMap::in_use_in`]: crate::space::SpaceMap::in_use_in

use std::collections::HashMap;

/// Blocks `[data_block, data_block + block_count)` were mapped to blocks
/// `[logical_block, …)` of extent `extent_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SummaryRun {
    pub(crate) extent_id: u64,
    pub(crate) logical_block: u64,
    pub(crate) data_block: u64,
    pub(crate) block_count: u64,
}

/// The summaries of every segment written since open.
#[derive(Debug, Clone, Default)]
pub(crate) struct SegmentSummaries {
    runs: HashMap<u64, Vec<SummaryRun>>,
}

impl SegmentSummaries {
    /// Notes a run mapped into segment `segment` (within it).
    pub(crate) fn record(&mut self, segment: u64, run: SummaryRun) {
        self.runs.entry(segment).or_default().push(run);
    }

    /// The runs noted in `segment` since it was opened clean, if any were.
    pub(crate) fn runs(&self, segment: u64) -> Option<&[SummaryRun]> {
        self.runs.get(&segment).map(Vec::as_slice)
    }

    /// Replaces `segment`'s runs (after dropping the displaced ones).
    pub(crate) fn replace(&mut self, segment: u64, runs: Vec<SummaryRun>) {
        self.runs.insert(segment, runs);
    }

    /// `segment` was opened clean: nothing in it is mapped.
    pub(crate) fn opened(&mut self, segment: u64) {
        self.runs.insert(segment, Vec::new());
    }
}
