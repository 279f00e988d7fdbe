//! Segment cleaning policies: which segments a cleaning pass empties, and how
//! it moves their live blocks. Pure: the choice is a function of the segment
//! usage table (live blocks and age per segment) and the settings; the volume
//! executes it (`cleaner.rs`).
//!
//! - [`CleaningPolicy::Greedy`]: the segments with the most free space (what
//!   the cleaning utilisation u_c of the write-cost model is defined on).
//! - [`CleaningPolicy::CostBenefit`]: Rosenblum's cost-benefit (Matthews'
//!   cost-age): the highest `(1 − u)·age / (1 + u)`, `u` the segment's
//!   utilisation and `age` the segment clock since it was last written.
//! - [`CleaningPolicy::HolePlugging`]: the greedy victims, their live blocks
//!   written into the holes of other segments instead of whole new segments.
//! - [`CleaningPolicy::Adaptive`]: per partition (HyLog's hot and cold),
//!   cost-age and hole-plugging each scored by the model's write cost of
//!   their victims (Eq 4 `2/(1 − u_c)` and Eq 5 `2 + u_c·A`), the lowest run.
//!
//! A pass processes at most `pass_blocks_max` blocks of victim segments (the
//! paper's 20 MB), at least one segment; cleaning starts when fewer than
//! `start_below_clean_segments` segments are clean (the paper's 10).

use serde::Serialize;

use crate::segments::SegmentUsage;

/// How segments are chosen and emptied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum CleaningPolicy {
    /// The emptiest segments, copied to the log head.
    Greedy,
    /// Cost-benefit (cost-age), copied to the log head.
    #[default]
    CostBenefit,
    /// The emptiest segments, their live blocks plugged into other segments' holes.
    HolePlugging,
    /// The cheaper of cost-age and hole-plugging, per partition.
    Adaptive,
}

impl CleaningPolicy {
    /// Every policy, in report order.
    pub const ALL: [CleaningPolicy; 4] =
        [CleaningPolicy::Greedy, CleaningPolicy::CostBenefit, CleaningPolicy::HolePlugging, CleaningPolicy::Adaptive];

    /// The name used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CleaningPolicy::Greedy => "greedy",
            CleaningPolicy::CostBenefit => "cost-age",
            CleaningPolicy::HolePlugging => "hole-plugging",
            CleaningPolicy::Adaptive => "adaptive",
        }
    }

    /// Parses a name as printed by [`CleaningPolicy::name`].
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|policy| policy.name() == name.replace('_', "-"))
    }
}

/// When and how much the cleaner cleans (volume options).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CleaningSettings {
    /// The policy.
    pub policy: CleaningPolicy,
    /// Clean when fewer segments than this are clean (the paper's 10).
    pub start_below_clean_segments: u64,
    /// Blocks of victim segments one pass processes at most (20 MB).
    pub pass_blocks_max: u64,
    /// The segment-vs-page efficiency A (Eq 1) the adaptive policy prices
    /// hole-plugging with: a page write costs A/n of a segment write. 32.8
    /// is a 512 KiB segment on the atlas10k disk.
    pub segment_efficiency: f64,
    /// Whether writes clean when needed (false: only the caller's
    /// [`Volume::clean_step`](crate::Volume::clean_step) does).
    pub automatic: bool,
}

impl Default for CleaningSettings {
    fn default() -> Self {
        Self {
            policy: CleaningPolicy::default(),
            start_below_clean_segments: 10,
            pass_blocks_max: 20_000_000 / 4096,
            segment_efficiency: 32.8,
            automatic: true,
        }
    }
}

/// How a pass moves the victims' live blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CleaningMethod {
    /// Written whole to clean segments at the log head.
    Copy,
    /// Written into free blocks of other segments.
    PlugHoles,
}

/// A segment the cleaner may choose, and the partition it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Its usage.
    pub usage: SegmentUsage,
    /// Its partition (0 for a layout with one; HyLog: 0 hot, 1 cold).
    pub partition: u8,
}

/// What one pass does.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CleaningChoice {
    /// Segments to empty, in the order chosen.
    pub victims: Vec<u64>,
    /// How their live blocks move.
    pub method: CleaningMethod,
    /// The model's write cost of the choice (Eq 4 or Eq 5).
    pub cost: f64,
}

/// The segments a pass empties under `settings`, from `candidates` (segments
/// with at least one free block, neither clean nor the log head);
/// `segment_blocks` is the segment size and `now` the segment clock. `None`
/// when no candidate has a free block.
///
/// A copying pass takes victims, in its policy's order, only while their
/// live blocks fit in `room_blocks` (the clean segments' blocks and what the
/// cleaner's log head has left), at least one: the victims become clean only
/// when the pass commits, so live blocks beyond the room would find no clean
/// segment, stay where they are, and leave their victims to be read again by
/// the next pass. With no room at all a copying pass could move nothing and
/// would read its victim again and again: it plugs holes instead, as F2FS's
/// slack-space recycling writes into dirty segments when no free section is
/// left. Hole-plugging writes into other segments' holes and is bounded by
/// the pass size only.
pub fn choose_victims(
    settings: &CleaningSettings,
    candidates: &[Candidate],
    segment_blocks: u64,
    now: u64,
    room_blocks: u64,
) -> Option<CleaningChoice> {
    let useful: Vec<Candidate> =
        candidates.iter().copied().filter(|candidate| candidate.usage.live_blocks < segment_blocks).collect();
    if useful.is_empty() {
        return None;
    }
    let budget = (settings.pass_blocks_max / segment_blocks).max(1);
    let pick = |order: Order, method: CleaningMethod, pool: &[Candidate]| {
        let mut live_taken = 0;
        let victims: Vec<SegmentUsage> = ordered(pool, order, segment_blocks, now)
            .into_iter()
            .take(usize::try_from(budget).unwrap_or(usize::MAX))
            .enumerate()
            .take_while(|(index, usage)| {
                live_taken += usage.live_blocks;
                *index == 0 || method == CleaningMethod::PlugHoles || live_taken <= room_blocks
            })
            .map(|(_, usage)| usage)
            .collect();
        let cleaning_utilization = mean_utilization(&victims, segment_blocks);
        let cost = match method {
            CleaningMethod::Copy => lfs_cleaning_cost(cleaning_utilization),
            CleaningMethod::PlugHoles => plugging_cost(cleaning_utilization, settings.segment_efficiency),
        };
        CleaningChoice { victims: victims.iter().map(|usage| usage.segment).collect(), method, cost }
    };
    if room_blocks == 0 {
        return Some(pick(Order::MostFree, CleaningMethod::PlugHoles, &useful));
    }
    Some(match settings.policy {
        CleaningPolicy::Greedy => pick(Order::MostFree, CleaningMethod::Copy, &useful),
        CleaningPolicy::CostBenefit => pick(Order::CostBenefit, CleaningMethod::Copy, &useful),
        CleaningPolicy::HolePlugging => pick(Order::MostFree, CleaningMethod::PlugHoles, &useful),
        CleaningPolicy::Adaptive => {
            let mut partitions: Vec<u8> = useful.iter().map(|candidate| candidate.partition).collect();
            partitions.sort_unstable();
            partitions.dedup();
            partitions
                .into_iter()
                .flat_map(|partition| {
                    let pool: Vec<Candidate> =
                        useful.iter().copied().filter(|candidate| candidate.partition == partition).collect();
                    [
                        pick(Order::CostBenefit, CleaningMethod::Copy, &pool),
                        pick(Order::MostFree, CleaningMethod::PlugHoles, &pool),
                    ]
                })
                .min_by(|a, b| a.cost.total_cmp(&b.cost))
                .expect("at least one partition")
        }
    })
}

#[derive(Debug, Clone, Copy)]
enum Order {
    MostFree,
    CostBenefit,
}

/// The candidates in the order a policy takes them (ties: lower segment first).
fn ordered(pool: &[Candidate], order: Order, segment_blocks: u64, now: u64) -> Vec<SegmentUsage> {
    let mut usages: Vec<SegmentUsage> = pool.iter().map(|candidate| candidate.usage).collect();
    match order {
        Order::MostFree => usages.sort_by_key(|usage| (usage.live_blocks, usage.segment)),
        Order::CostBenefit => usages.sort_by(|a, b| {
            cost_benefit(b, segment_blocks, now)
                .total_cmp(&cost_benefit(a, segment_blocks, now))
                .then(a.segment.cmp(&b.segment))
        }),
    }
    usages
}

/// Rosenblum's cost-benefit score `(1 − u)·age / (1 + u)`: the free space a
/// cleaning gains, weighted by how long it is likely to stay free, over the
/// cost of reading the segment and writing its live blocks. The age is the
/// segment clock since it was written, plus one (a segment just written still
/// scores by its free space).
pub fn cost_benefit(usage: &SegmentUsage, segment_blocks: u64, now: u64) -> f64 {
    let utilization = usage.live_blocks as f64 / segment_blocks as f64;
    let age = now.saturating_sub(usage.age) as f64 + 1.0;
    (1.0 - utilization) * age / (1.0 + utilization)
}

fn mean_utilization(victims: &[SegmentUsage], segment_blocks: u64) -> f64 {
    let live: u64 = victims.iter().map(|usage| usage.live_blocks).sum();
    live as f64 / (victims.len() as u64 * segment_blocks) as f64
}

/// Eq 4: the scaled write cost of LFS-cleaning at cleaning utilisation `u_c`,
/// `2/(1 − u_c)` (a segment read and `u_c` of a segment written per `1 − u_c`
/// of a segment freed, plus the user's segment write).
pub fn lfs_cleaning_cost(cleaning_utilization: f64) -> f64 {
    2.0 / (1.0 - cleaning_utilization).max(f64::MIN_POSITIVE)
}

/// Eq 5: the scaled write cost of hole-plugging, `2 + u_c·A` (a segment read
/// and `n·u_c` page writes per segment reclaimed, plus the user's segment
/// write), A the segment-vs-page efficiency.
pub fn plugging_cost(cleaning_utilization: f64, segment_efficiency: f64) -> f64 {
    2.0 + cleaning_utilization * segment_efficiency
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(segment: u64, live_blocks: u64, age: u64, partition: u8) -> Candidate {
        Candidate { usage: SegmentUsage { segment, live_blocks, age }, partition }
    }

    fn settings(policy: CleaningPolicy, pass_segments: u64) -> CleaningSettings {
        CleaningSettings { policy, pass_blocks_max: pass_segments * 100, ..CleaningSettings::default() }
    }

    #[test]
    fn greedy_takes_the_emptiest_segments_within_the_pass() {
        let candidates =
            [candidate(0, 90, 1, 0), candidate(1, 10, 50, 0), candidate(2, 40, 2, 0), candidate(3, 100, 0, 0)];
        let choice = choose_victims(&settings(CleaningPolicy::Greedy, 2), &candidates, 100, 60, u64::MAX).unwrap();
        assert_eq!(choice.victims, vec![1, 2]);
        assert_eq!(choice.method, CleaningMethod::Copy);
        assert!((choice.cost - 2.0 / (1.0 - 0.25)).abs() < 1e-12);
    }

    #[test]
    fn a_copying_pass_takes_no_more_live_blocks_than_the_room_and_plugs_holes_without_any() {
        let candidates =
            [candidate(0, 30, 1, 0), candidate(1, 10, 1, 0), candidate(2, 20, 1, 0), candidate(3, 40, 1, 0)];
        let greedy = settings(CleaningPolicy::Greedy, 4);
        // Greedy order: 1 (10), 2 (20), 0 (30), 3 (40); 60 blocks of room take the first three.
        assert_eq!(choose_victims(&greedy, &candidates, 100, 5, 60).unwrap().victims, vec![1, 2, 0]);
        assert_eq!(choose_victims(&greedy, &candidates, 100, 5, 59).unwrap().victims, vec![1, 2]);
        assert_eq!(choose_victims(&greedy, &candidates, 100, 5, 5).unwrap().victims, vec![1], "one at least");
        // No room at all: copying could move nothing, so the pass plugs holes.
        let stuck = choose_victims(&greedy, &candidates, 100, 5, 0).unwrap();
        assert_eq!((stuck.method, stuck.victims.len()), (CleaningMethod::PlugHoles, 4));
        // Hole-plugging fills other segments' holes: the pass size alone bounds it.
        let plugging = settings(CleaningPolicy::HolePlugging, 4);
        assert_eq!(choose_victims(&plugging, &candidates, 100, 5, 0).unwrap().victims.len(), 4);
    }

    #[test]
    fn cost_benefit_prefers_old_segments_over_slightly_emptier_young_ones() {
        // Segment 0: 70 % full, written long ago; segment 1: 60 % full, just written.
        let candidates = [candidate(0, 70, 10, 0), candidate(1, 60, 990, 0)];
        let choice =
            choose_victims(&settings(CleaningPolicy::CostBenefit, 1), &candidates, 100, 1000, u64::MAX).unwrap();
        assert_eq!(choice.victims, vec![0]);
        let greedy = choose_victims(&settings(CleaningPolicy::Greedy, 1), &candidates, 100, 1000, u64::MAX).unwrap();
        assert_eq!(greedy.victims, vec![1]);
    }

    #[test]
    fn full_segments_are_never_chosen_and_nothing_to_clean_is_none() {
        let candidates = [candidate(0, 100, 1, 0)];
        assert_eq!(choose_victims(&settings(CleaningPolicy::Greedy, 4), &candidates, 100, 5, u64::MAX), None);
        assert_eq!(choose_victims(&settings(CleaningPolicy::Adaptive, 4), &[], 100, 5, u64::MAX), None);
    }

    #[test]
    fn hole_plugging_uses_the_greedy_victims() {
        let candidates = [candidate(0, 80, 1, 0), candidate(1, 20, 1, 0)];
        let choice = choose_victims(&settings(CleaningPolicy::HolePlugging, 1), &candidates, 100, 5, u64::MAX).unwrap();
        assert_eq!((choice.victims.clone(), choice.method), (vec![1], CleaningMethod::PlugHoles));
        assert!((choice.cost - (2.0 + 0.2 * 32.8)).abs() < 1e-12);
    }

    #[test]
    fn adaptive_takes_the_cheapest_of_four_options() {
        // Hot partition: segments nearly full (u_c 0.95 → copy costs 40,
        // plugging 2 + 0.95·A = 33.2). Cold partition: 50 % (copy 4, plugging 18.4).
        let candidates = [candidate(0, 95, 1, 0), candidate(1, 50, 1, 1)];
        let choice = choose_victims(&settings(CleaningPolicy::Adaptive, 1), &candidates, 100, 5, u64::MAX).unwrap();
        assert_eq!((choice.victims.clone(), choice.method), (vec![1], CleaningMethod::Copy));
        // With only the nearly full partition, plugging is cheaper than copying.
        let hot_only =
            choose_victims(&settings(CleaningPolicy::Adaptive, 1), &candidates[..1], 100, 5, u64::MAX).unwrap();
        assert_eq!(hot_only.method, CleaningMethod::PlugHoles);
    }

    #[test]
    fn the_costs_are_the_model_equations() {
        assert!((lfs_cleaning_cost(0.902) - 20.408).abs() < 1e-3);
        assert!((plugging_cost(0.939, 32.8) - 32.799).abs() < 1e-2);
        // Eqs 4 and 5 cross at u_c* = 1 − 2/A.
        let crossover = 1.0 - 2.0 / 32.8;
        assert!((lfs_cleaning_cost(crossover) - plugging_cost(crossover, 32.8)).abs() < 1e-9);
    }

    #[test]
    fn policy_names_round_trip() {
        for policy in CleaningPolicy::ALL {
            assert_eq!(CleaningPolicy::parse(policy.name()), Some(policy));
        }
    }
}
