//! `proximal-hot`: the proximal layout with HyLog's hot/cold knowledge. A
//! destage leaves the hot blocks in the flash staging area and moves only the
//! cold ones, so a block updated again and again is overwritten on flash and
//! costs the disks nothing until it cools (docs/layouts.md, "Proximal-hot").
//!
//! Placement and destage are the proximal layout's. What this layout adds:
//!
//! - **Measurement.** As HyLog does, a write counter per block, kept for
//!   fixed measurement intervals; the executor ends an interval after each
//!   staging area's worth of staged writes
//!   ([`LayoutStrategy::measurement_interval_ended`]). A block's heat is its
//!   writes in the current interval and the one before.
//! - **Choice.** A block written at least [`HOT_WRITES_MIN`] times over those
//!   two intervals is hot; the hottest, at most [`RETAINED_SHARE_MAX`] of the
//!   staging area, are kept ([`LayoutStrategy::hot_blocks`]: the executor
//!   keeps those of them still staged), so a destage always frees at least
//!   the other half.
//!
//! The counters live in memory only, as HyLog's do: after a restart every
//! block is cold until it is written again, which costs placement quality,
//! never data.

use std::collections::HashMap;

use super::proximal::Proximal;
use super::{hottest_first, Layout, LayoutParameters, LayoutStrategy, Placement, VolumeFacts, WriteContext};
use crate::map::Location;

/// Writes over the current and the previous measurement interval that make a
/// block hot: one write is no evidence that a block will be written again.
pub const HOT_WRITES_MIN: u32 = 2;

/// The largest share of the staging area hot blocks keep through a destage.
pub const RETAINED_SHARE_MAX: f64 = 0.5;

/// A block's writes in the current and the previous measurement interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct IntervalWrites {
    previous: u32,
    current: u32,
}

impl IntervalWrites {
    fn heat(self) -> u32 {
        self.previous.saturating_add(self.current)
    }
}

/// The proximal-hot layout.
#[derive(Debug, Clone, Default)]
pub struct ProximalHot {
    /// `(extent, logical block)` → its writes, for every block written in the
    /// current or the previous interval.
    writes: HashMap<(u64, u64), IntervalWrites>,
}

impl LayoutStrategy for ProximalHot {
    fn kind(&self) -> Layout {
        Layout::ProximalHot
    }

    fn place_write(&self, parameters: &LayoutParameters, write: &WriteContext) -> Placement {
        Proximal.place_write(parameters, write)
    }

    fn staged(&mut self, extent_id: u64, logical_block: u64, _previous: Option<Location>) {
        let writes = self.writes.entry((extent_id, logical_block)).or_default();
        writes.current = writes.current.saturating_add(1);
    }

    fn measurement_interval_ended(&mut self, _facts: &VolumeFacts) -> bool {
        self.writes.retain(|_, writes| {
            *writes = IntervalWrites { previous: writes.current, current: 0 };
            writes.previous > 0
        });
        // Heat is read at each destage; no set is chosen here.
        false
    }

    fn hot_blocks(&self, limit: usize) -> Vec<(u64, u64)> {
        let mut hot: Vec<((u64, u64), u32)> = self
            .writes
            .iter()
            .map(|(&block, &writes)| (block, writes.heat()))
            .filter(|&(_, heat)| heat >= HOT_WRITES_MIN)
            .collect();
        // Only the first `limit` are sorted.
        if hot.len() > limit {
            hot.select_nth_unstable_by(limit, hottest_first);
            hot.truncate(limit);
        }
        hot.sort_unstable_by(hottest_first);
        hot.into_iter().map(|(block, _)| block).collect()
    }

    fn retained_share_max(&self) -> f64 {
        RETAINED_SHARE_MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layouts::test_support::facts;
    use crate::layouts::test_support::{parameters, write};
    use crate::layouts::DestageRule;

    #[test]
    fn places_and_destages_as_the_proximal_layout() {
        let hot = ProximalHot::default();
        for blocks in [1, 41, 42, 500] {
            let context = write(blocks, true);
            assert_eq!(hot.place_write(&parameters(), &context), Proximal.place_write(&parameters(), &context));
        }
        assert_eq!(hot.destage_rule(), DestageRule::NearNeighbours);
    }

    #[test]
    fn blocks_written_twice_over_two_intervals_are_hot_hottest_first() {
        let mut layout = ProximalHot::default();
        for _ in 0..3 {
            layout.staged(1, 7, None);
        }
        layout.staged(1, 8, None);
        layout.staged(2, 0, None);
        layout.staged(2, 0, None);
        assert_eq!(layout.hot_blocks(10), vec![(1, 7), (2, 0)], "block 8 was written once");
        assert_eq!(layout.hot_blocks(1), vec![(1, 7)], "the hottest first");
        layout.measurement_interval_ended(&facts());
        layout.staged(1, 8, None);
        assert_eq!(layout.hot_blocks(10), vec![(1, 7), (1, 8), (2, 0)], "the previous interval still counts");
        assert_eq!(layout.hot_blocks(2), vec![(1, 7), (1, 8)], "equal heat in block order");
        layout.measurement_interval_ended(&facts());
        assert_eq!(layout.hot_blocks(10), Vec::<(u64, u64)>::new(), "two intervals without a write: cold");
        assert!(layout.writes.len() == 1, "only block 8, written in the last interval, is still counted");
        layout.measurement_interval_ended(&facts());
        assert!(layout.writes.is_empty(), "blocks not written for two intervals are forgotten");
    }

    #[test]
    fn keeps_at_most_half_the_staging_area() {
        assert_eq!(ProximalHot::default().retained_share_max(), 0.5);
        assert_eq!(Proximal.retained_share_max(), 0.0, "the proximal layout retains nothing");
    }
}
