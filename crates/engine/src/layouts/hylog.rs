//! HyLog (Wang and Hu, FAST'04): the hot blocks are written log-structured,
//! the cold ones overwritten in place, and the share of hot blocks is chosen
//! by the write-cost model (docs/layouts.md, "HyLog").
//!
//! - **Writes** are `lfs`'s: small ones buffered in the flash staging log,
//!   large ones straight to a log head.
//! - **Measurement.** A write counter per block for each measurement interval
//!   (at least [`VolumeFacts::writes_per_interval`] staged writes, by default
//!   as many as the volume has blocks in use, ended at a staging area's
//!   worth); counters start again each interval, as the paper's do.
//! - **Choice.** At the end of an interval the blocks written in it are
//!   sorted hottest first. As in the paper a write count is a threshold
//!   (every block written at least that often is hot); each threshold's
//!   split is priced by Eq 8 at the volume's utilisation and segment
//!   efficiency A: w · 2/(1 − u_hc) + (1 − w) · A, the hot blocks taking all
//!   the free space (Eq 7), and the cheapest threshold makes the blocks this
//!   interval wrote at least that often the next interval's hot set; h = 1
//!   (every block in use hot, LFS) is priced too, and makes blocks the
//!   interval did not write hot as well. A threshold's w is measured on
//!   writes that did not choose it ([`best_held_out_hot_count`]): the blocks
//!   are ranked by the previous interval's counts and w is their share of
//!   this interval's writes, for priced on the interval that ranks them
//!   every block written at all takes all the writes (the paper leaves how
//!   w is estimated open; the first interval, with none before it, is priced
//!   on itself). Before the first interval ends nothing is hot.
//! - **Destage** ([`DestageRule::ColdHomesElseLog`]): a cold block goes back
//!   to its frame home (the data block it overwrote when it was staged); a
//!   hot block, and a cold one without a home, goes to the head of its log
//!   stream, hot or cold, each filling its own segments. Blocks the cleaner
//!   moves go to the cold stream.
//!
//! The counters, the hot set and the frame homes live in memory only: after a
//! restart every block is cold and goes to the cold log until it is staged
//! over a data block again, which costs placement, never data.

use std::collections::{HashMap, HashSet};

use super::frame_homes::FrameHomes;
use super::{
    hottest_first, DestageRule, Layout, LayoutParameters, LayoutStrategy, Placement, VolumeFacts, WriteContext,
};
use crate::map::Location;
use crate::write_cost::{
    best_held_out_hot_count, best_hot_count, cleaning_utilization_for, hot_split_cost, lfs_cleaning_cost,
};

/// The log stream of hot blocks.
pub const HOT_STREAM: usize = 0;
/// The log stream of cold blocks without a home (and of the cleaner's moves).
pub const COLD_STREAM: usize = 1;

/// The last choice of the hot set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HotChoice {
    /// Blocks chosen hot.
    pub hot_blocks: u64,
    /// Their share of the blocks in use (h).
    pub hot_fraction: f64,
    /// Eq 8's scaled write cost of the choice.
    pub cost: f64,
}

/// The HyLog layout.
#[derive(Debug, Clone, Default)]
pub struct Hylog {
    /// Writes of each block staged in the current interval.
    interval_writes: HashMap<(u64, u64), u32>,
    /// The counts of the interval before, hottest first (none before the
    /// first ends).
    previous_ranking: Vec<((u64, u64), u32)>,
    /// Staged writes in the current interval.
    writes_in_interval: u64,
    /// The blocks chosen hot at the end of the last interval.
    hot: HashSet<(u64, u64)>,
    /// Every block is hot (h = 1: the layout is LFS until the next choice).
    all_hot: bool,
    /// That choice.
    last_choice: Option<HotChoice>,
    /// Where the cold staged blocks go back to.
    frame_homes: FrameHomes,
}

impl Hylog {
    /// The last choice of the hot set, if an interval has ended.
    pub fn last_choice(&self) -> Option<HotChoice> {
        self.last_choice
    }

    /// Whether block `logical_block` of extent `extent_id` is hot.
    pub fn is_hot(&self, extent_id: u64, logical_block: u64) -> bool {
        self.all_hot || self.hot.contains(&(extent_id, logical_block))
    }

    /// Chooses the hot set from the interval's counts and starts a new one.
    fn choose_hot_set(&mut self, facts: &VolumeFacts) {
        let current = std::mem::take(&mut self.interval_writes);
        let mut written: Vec<((u64, u64), u32)> = current.iter().map(|(&block, &count)| (block, count)).collect();
        written.sort_unstable_by(hottest_first);
        let (hottest, cost) = match facts.fixed_hot_fraction {
            Some(share) => {
                let counts: Vec<u32> = written.iter().map(|&(_, count)| count).collect();
                fixed_hot_count(&counts, facts, share)
            }
            None => self.adaptive_hot_count(&written, &current, facts),
        };
        // h = 1 (a threshold of no writes: every block in use hot, blocks
        // this interval did not write included) is LFS, Eq 8 with w = 1.
        let lfs_cost = lfs_cleaning_cost(cleaning_utilization_for(facts.utilization().clamp(0.0, 0.999)));
        self.all_hot = match facts.fixed_hot_fraction {
            Some(share) => share >= 1.0,
            None => lfs_cost < cost,
        };
        // The hottest `k` are those at or above the chosen threshold (none
        // listed when every block is hot).
        let listed = if self.all_hot { 0 } else { hottest };
        self.hot = written.iter().take(listed).map(|&(block, _)| block).collect();
        let (hot_blocks, cost) =
            if self.all_hot { (facts.data_blocks_used, lfs_cost) } else { (self.hot.len() as u64, cost) };
        self.last_choice = Some(HotChoice {
            hot_blocks,
            hot_fraction: hot_blocks as f64 / facts.data_blocks_used.max(1) as f64,
            cost,
        });
        self.previous_ranking = written;
        self.writes_in_interval = 0;
    }

    /// How many of this interval's blocks (`written`, hottest first; the
    /// same counts by block in `current`) to make hot, and Eq 8's cost. The
    /// write-count threshold is chosen on the previous interval's ranking,
    /// each threshold's w measured on this interval's writes
    /// ([`best_held_out_hot_count`]), and applied to this interval's counts
    /// (intervals have equal lengths, so a count means the same in each).
    /// The first interval has no previous one and is priced on itself.
    fn adaptive_hot_count(
        &self,
        written: &[((u64, u64), u32)],
        current: &HashMap<(u64, u64), u32>,
        facts: &VolumeFacts,
    ) -> (usize, f64) {
        let counts: Vec<u32> = written.iter().map(|&(_, count)| count).collect();
        let (used, utilization, efficiency) = (facts.data_blocks_used, facts.utilization(), facts.segment_efficiency);
        if self.previous_ranking.is_empty() {
            return best_hot_count(&counts, used, utilization, efficiency);
        }
        let ranked = &self.previous_ranking;
        let ranking: Vec<u32> = ranked.iter().map(|&(_, count)| count).collect();
        let later: Vec<u32> = ranked.iter().map(|(block, _)| current.get(block).copied().unwrap_or(0)).collect();
        let later_total: u64 = counts.iter().map(|&count| u64::from(count)).sum();
        let (ranked_hot, cost) = best_held_out_hot_count(&ranking, &later, later_total, used, utilization, efficiency);
        let hottest = match ranked_hot {
            0 => 0,
            count => {
                let threshold = ranking[count - 1];
                counts.partition_point(|&count| count >= threshold)
            }
        };
        (hottest, cost)
    }
}

/// The hottest `share` of the blocks in use (at most those written in the
/// interval), and Eq 8's cost of that split.
fn fixed_hot_count(counts: &[u32], facts: &VolumeFacts, share: f64) -> (usize, f64) {
    let wanted = (share * facts.data_blocks_used as f64).round();
    // Non-negative and at most the blocks in use: exact in an f64.
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "a whole block count")]
    let hottest = (wanted as usize).min(counts.len());
    let cost = hot_split_cost(counts, hottest, facts.data_blocks_used, facts.utilization(), facts.segment_efficiency);
    (hottest, cost)
}

impl LayoutStrategy for Hylog {
    fn kind(&self) -> Layout {
        Layout::Hylog
    }

    fn place_write(&self, parameters: &LayoutParameters, write: &WriteContext) -> Placement {
        super::lfs::Lfs.place_write(parameters, write)
    }

    fn destage_rule(&self) -> DestageRule {
        DestageRule::ColdHomesElseLog
    }

    fn frame_home(&self, extent_id: u64, logical_block: u64) -> Option<u64> {
        if self.is_hot(extent_id, logical_block) {
            None
        } else {
            self.frame_homes.home(extent_id, logical_block)
        }
    }

    fn is_frame_home(&self, block: u64) -> bool {
        self.frame_homes.is_home(block)
    }

    fn writes_segments(&self) -> bool {
        true
    }

    fn log_stream(&self, extent_id: u64, logical_block: u64) -> usize {
        if self.is_hot(extent_id, logical_block) {
            HOT_STREAM
        } else {
            COLD_STREAM
        }
    }

    fn cleaning_stream(&self) -> usize {
        COLD_STREAM
    }

    fn staged(&mut self, extent_id: u64, logical_block: u64, previous: Option<Location>) {
        let count = self.interval_writes.entry((extent_id, logical_block)).or_default();
        *count = count.saturating_add(1);
        self.writes_in_interval += 1;
        self.frame_homes.staged(extent_id, logical_block, previous);
    }

    fn destaged(&mut self, extent_id: u64, logical_block: u64, block_count: u64) {
        self.frame_homes.destaged(extent_id, logical_block, block_count);
    }

    fn hot_fraction(&self) -> Option<f64> {
        self.last_choice.map(|choice| choice.hot_fraction)
    }

    fn measurement_interval_ended(&mut self, facts: &VolumeFacts) -> bool {
        let ended = self.writes_in_interval >= facts.writes_per_interval();
        if ended {
            self.choose_hot_set(facts);
        }
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layouts::test_support::{facts, parameters, write};

    #[test]
    fn writes_as_lfs_does_and_destages_cold_blocks_home() {
        let hylog = Hylog::default();
        assert_eq!(hylog.place_write(&parameters(), &write(1, true)), Placement::Stage);
        assert_eq!(hylog.place_write(&parameters(), &write(42, false)), Placement::LogHead);
        assert_eq!(hylog.destage_rule(), DestageRule::ColdHomesElseLog);
        assert!(hylog.writes_segments());
        assert_eq!(hylog.cleaning_stream(), COLD_STREAM);
    }

    #[test]
    fn the_hottest_blocks_of_an_interval_go_to_the_log_and_the_rest_home() {
        let mut hylog = Hylog::default();
        // An interval of 800 writes (the blocks in use): 20 blocks written
        // 30 times each, 200 others once, each over its data block.
        for round in 0..30 {
            for block in 0..20 {
                let previous = if round == 0 { Location::Data(5000 + block) } else { Location::Flash(block) };
                hylog.staged(1, block, Some(previous));
            }
        }
        for block in 100..200 {
            hylog.staged(1, block, Some(Location::Data(5000 + block)));
        }
        // A nearly full volume: the log's cleaning is dear.
        let full = VolumeFacts { data_blocks: 810, ..facts() };
        assert!(hylog.last_choice().is_none());
        hylog.measurement_interval_ended(&full);
        assert!(hylog.last_choice().is_none(), "800 writes make an interval; 700 do not");
        for block in 300..400 {
            hylog.staged(1, block, Some(Location::Data(5000 + block)));
        }
        hylog.measurement_interval_ended(&full);
        let choice = hylog.last_choice().expect("the interval ended");
        assert!(choice.hot_blocks >= 20, "{choice:?}");
        assert!(hylog.is_hot(1, 0) && hylog.is_hot(1, 19));
        assert_eq!(hylog.log_stream(1, 0), HOT_STREAM);
        assert_eq!(hylog.frame_home(1, 0), None, "a hot block goes to the log");
        assert!(hylog.is_frame_home(5000), "a hot block's home stays reserved until its destage");
        let cold = (100..200).chain(300..400).rev().find(|&block| !hylog.is_hot(1, block)).expect("some stay cold");
        assert_eq!(hylog.frame_home(1, cold), Some(5000 + cold), "a cold block goes home");
        assert_eq!(hylog.log_stream(1, cold), COLD_STREAM);
        hylog.destaged(1, cold, 1);
        assert_eq!(hylog.frame_home(1, cold), None);
        assert!(!hylog.is_frame_home(5000 + cold));
    }

    #[test]
    fn a_fixed_share_makes_that_many_of_the_hottest_blocks_hot() {
        let mut hylog = Hylog::default();
        let fixed =
            VolumeFacts { data_blocks_used: 100, interval_writes: 150, fixed_hot_fraction: Some(0.1), ..facts() };
        // Block b is written 1 + b / 10 times: the highest numbers are hottest.
        for block in 0..100 {
            for _ in 0..=block / 10 {
                hylog.staged(1, block, None);
            }
        }
        assert!(hylog.measurement_interval_ended(&fixed));
        let choice = hylog.last_choice().expect("the interval ended");
        assert_eq!(choice.hot_blocks, 10, "{choice:?}");
        assert!((90..100).all(|block| hylog.is_hot(1, block)) && !hylog.is_hot(1, 89));
        // More than were written: every block written is hot.
        for block in 0..5 {
            hylog.staged(1, block, None);
        }
        let most = VolumeFacts { interval_writes: 5, fixed_hot_fraction: Some(0.5), ..fixed };
        assert!(hylog.measurement_interval_ended(&most));
        assert_eq!(hylog.last_choice().map(|choice| choice.hot_blocks), Some(5));
        assert!(!hylog.is_hot(1, 50), "not written in the interval");
        // h = 1 is LFS: every block in use, written in the interval or not.
        for block in 0..5 {
            hylog.staged(1, block, None);
        }
        let everything = VolumeFacts { fixed_hot_fraction: Some(1.0), ..most };
        assert!(hylog.measurement_interval_ended(&everything));
        assert_eq!(hylog.last_choice().map(|choice| choice.hot_blocks), Some(100));
        assert!(hylog.is_hot(1, 50) && hylog.frame_home(1, 50).is_none());
    }

    #[test]
    fn blocks_written_once_by_chance_are_priced_as_the_cold_blocks_they_are() {
        let mut hylog = Hylog::default();
        let full = VolumeFacts { data_blocks_used: 950, interval_writes: 800, ..facts() };
        // Each interval writes ten hot blocks 40 times each and 400 others
        // once, a different 400 each time.
        let interval = |hylog: &mut Hylog, once: std::ops::Range<u64>| {
            for _ in 0..40 {
                (0..10).for_each(|block| hylog.staged(1, block, None));
            }
            once.for_each(|block| hylog.staged(1, block, None));
            assert!(hylog.measurement_interval_ended(&full));
            hylog.last_choice().expect("the interval ended")
        };
        // The first interval prices itself: every block it wrote looks hot.
        assert_eq!(interval(&mut hylog, 100..500).hot_blocks, 410);
        // The next is priced on the first's ranking: the blocks written
        // once took none of this interval's writes, so only the ten are hot.
        let choice = interval(&mut hylog, 500..900);
        assert_eq!(choice.hot_blocks, 10, "{choice:?}");
        assert!(hylog.is_hot(1, 9) && !hylog.is_hot(1, 500));
        assert!(choice.cost < full.segment_efficiency, "{choice:?}");
    }

    #[test]
    fn the_fuller_the_volume_the_fewer_blocks_are_logged() {
        let mut hylog = Hylog::default();
        let full = VolumeFacts { data_blocks_used: 980, data_blocks: 1000, ..facts() };
        for _ in 0..40 {
            for block in 0..10 {
                hylog.staged(1, block, None);
            }
        }
        for block in 10..600 {
            hylog.staged(1, block, None);
        }
        hylog.measurement_interval_ended(&full);
        let choice = hylog.last_choice().expect("the interval ended");
        // Blocks written equally often are alike: the ten hot blocks, not
        // the ones written once (logging those too would cost more than A).
        assert_eq!(choice.hot_blocks, 10, "{choice:?}");
        assert!(hylog.is_hot(1, 9) && !hylog.is_hot(1, 10));
        assert!(choice.cost < full.segment_efficiency, "cheaper than overwriting everything: {choice:?}");
        let roomy = VolumeFacts { data_blocks_used: 600, data_blocks: 1000, ..facts() };
        for block in 0..600 {
            hylog.staged(1, block, None);
        }
        hylog.measurement_interval_ended(&roomy);
        assert_eq!(hylog.last_choice().map(|choice| choice.hot_blocks), Some(600), "room for all in the log");
    }
}
