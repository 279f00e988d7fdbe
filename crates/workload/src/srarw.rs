//! The serial-read-after-random-write (SRARW) workload of the proximal I/O
//! paper's Section 5: what a volume is asked to do, independent of what it
//! runs on (the laboratory's rig drives it on a simulated array).
//!
//! 1. **Fill**: [`extent_count_for`] extents of [`EXTENT_BLOCKS`] blocks
//!    (16 MiB), each written serially in one whole-extent write, so that they
//!    fill [`FILL_FRACTION`] of the capacity.
//! 2. **Age**: [`UPDATES_PER_EXTENT`] random one-block updates per extent on
//!    average, each to a uniformly random block of a uniformly random extent
//!    ([`SrarwUpdates`], stream 1 of the seed); or, for experiments beyond the
//!    paper, skewed ([`UpdateSkew`]).
//! 3. **Read**: every extent, in an order drawn from stream 3 of the seed
//!    ([`SrarwReadOrders`]), in requests of at most [`READ_REQUEST_BLOCKS_MAX`]
//!    blocks ([`read_requests`]).
//!
//! Stream 2 of the seed is left to whoever runs the workload (the rig moves
//! the drives' heads with it).

use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::synthetic::{seeded_stream, Pattern, SyntheticSpec, SyntheticWorkload};

/// Blocks of one extent: 16 MiB of 4 KiB blocks.
pub const EXTENT_BLOCKS: u64 = 4096;
/// Random updates per extent (on average).
pub const UPDATES_PER_EXTENT: u64 = 2000;
/// Fraction of the capacity the extents fill.
pub const FILL_FRACTION: f64 = 0.89;
/// Largest read request: the paper's indirect-block fan-out.
pub const READ_REQUEST_BLOCKS_MAX: u64 = 974;

/// Extents that fill [`FILL_FRACTION`] of `capacity_blocks` (rounded down).
pub fn extent_count_for(capacity_blocks: u64) -> u64 {
    // Exact for any capacity a drive has (below 2^53 blocks); the quotient is
    // non-negative and below `capacity_blocks`, so the conversion back cannot
    // truncate anything but the fraction.
    (capacity_blocks as f64 * FILL_FRACTION / EXTENT_BLOCKS as f64) as u64
}

/// The read requests of one extent of `extent_blocks` blocks, in order:
/// `(first block, block count)`, each at most [`READ_REQUEST_BLOCKS_MAX`]
/// blocks (974, 974, 974, 974, 200 for a 16 MiB extent).
pub fn read_requests(extent_blocks: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..extent_blocks)
        .step_by(usize::try_from(READ_REQUEST_BLOCKS_MAX).expect("a small constant"))
        .map(move |first_block| (first_block, READ_REQUEST_BLOCKS_MAX.min(extent_blocks - first_block)))
}

/// Which blocks the aging's updates go to.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum UpdateSkew {
    /// The paper's: a uniformly random block of a uniformly random extent.
    #[default]
    Uniform,
    /// Knuth's self-similar family over every block of every extent: the
    /// hottest fraction `h` of the blocks takes `h^θ` of the updates
    /// ([`Pattern::SelfSimilar`]), the hottest blocks scattered over the
    /// extents.
    SelfSimilar {
        /// θ in (0, 1]; [`Pattern::eighty_twenty`] builds it from a rule.
        theta: f64,
    },
}

impl UpdateSkew {
    /// Knuth's 80/20 rule: 80 % of the updates to 20 % of the blocks, at
    /// every scale.
    pub fn eighty_twenty() -> UpdateSkew {
        match Pattern::eighty_twenty(0.8, 0.2) {
            Pattern::SelfSimilar { theta } => UpdateSkew::SelfSimilar { theta },
            _ => unreachable!("the 80/20 rule is self-similar"),
        }
    }

    /// θ of Knuth's family: 1 for uniform updates (`h^1 = h`).
    pub fn theta(self) -> f64 {
        match self {
            UpdateSkew::Uniform => 1.0,
            UpdateSkew::SelfSimilar { theta } => theta,
        }
    }
}

/// The random updates of the SRARW workload: each a uniformly random block of
/// a uniformly random extent, drawn from stream 1 of the seed; or, skewed,
/// blocks drawn by a [`SyntheticWorkload`] seeded from that stream.
#[derive(Debug, Clone)]
pub struct SrarwUpdates {
    source: UpdateSource,
    extent_count: usize,
    extent_blocks: u64,
}

#[derive(Debug, Clone)]
enum UpdateSource {
    Uniform(ChaCha8Rng),
    Skewed(SyntheticWorkload),
}

impl SrarwUpdates {
    /// Updates over `extent_count` extents of `extent_blocks` blocks.
    pub fn new(seed: u64, extent_count: usize, extent_blocks: u64) -> SrarwUpdates {
        SrarwUpdates::skewed(seed, extent_count, extent_blocks, UpdateSkew::Uniform)
    }

    /// Updates over `extent_count` extents of `extent_blocks` blocks, as
    /// `skew` draws them.
    pub fn skewed(seed: u64, extent_count: usize, extent_blocks: u64, skew: UpdateSkew) -> SrarwUpdates {
        assert!(extent_count > 0 && extent_blocks > 0, "at least one block to update");
        let mut rng = seeded_stream(seed, 1);
        let source = match skew {
            UpdateSkew::Uniform => UpdateSource::Uniform(rng),
            UpdateSkew::SelfSimilar { theta } => UpdateSource::Skewed(SyntheticWorkload::new(SyntheticSpec {
                pattern: Pattern::SelfSimilar { theta },
                block_count: extent_count as u64 * extent_blocks,
                request_blocks: 1,
                read_fraction: 0.0,
                scatter: true,
                seed: rng.gen(),
            })),
        };
        SrarwUpdates { source, extent_count, extent_blocks }
    }
}

impl Iterator for SrarwUpdates {
    /// The extent's index and the block within it.
    type Item = (usize, u64);

    fn next(&mut self) -> Option<(usize, u64)> {
        match &mut self.source {
            UpdateSource::Uniform(rng) => {
                let extent = rng.gen_range(0..self.extent_count);
                let block = rng.gen_range(0..self.extent_blocks);
                Some((extent, block))
            }
            UpdateSource::Skewed(workload) => {
                let block = workload.next().expect("synthetic workloads are endless").block;
                let extent = usize::try_from(block / self.extent_blocks).expect("below the extent count");
                Some((extent, block % self.extent_blocks))
            }
        }
    }
}

/// The orders in which SRARW reads its extents back: each a shuffle drawn
/// from stream 3 of the seed, one after another (a run that reads its extents
/// fresh and again after aging draws two orders from the one stream).
#[derive(Debug, Clone)]
pub struct SrarwReadOrders {
    rng: ChaCha8Rng,
}

impl SrarwReadOrders {
    /// The read orders of `seed`.
    pub fn new(seed: u64) -> SrarwReadOrders {
        SrarwReadOrders { rng: seeded_stream(seed, 3) }
    }

    /// Shuffles `items` into the next read order.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        items.shuffle(&mut self.rng);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eighty_twenty_updates_stay_in_range_and_favour_a_few_blocks() {
        let updates: Vec<(usize, u64)> =
            SrarwUpdates::skewed(3, 5, 4096, UpdateSkew::eighty_twenty()).take(20_000).collect();
        assert!(updates.iter().all(|&(extent, block)| extent < 5 && block < 4096));
        assert_eq!(
            updates,
            SrarwUpdates::skewed(3, 5, 4096, UpdateSkew::eighty_twenty()).take(20_000).collect::<Vec<_>>()
        );
        let mut counts = std::collections::HashMap::new();
        for update in &updates {
            *counts.entry(*update).or_insert(0u64) += 1;
        }
        let mut by_heat: Vec<u64> = counts.into_values().collect();
        by_heat.sort_unstable_by(|a, b| b.cmp(a));
        // The hottest 20 % of the 20,480 blocks take 80 % of the updates (more
        // in a sample, where the blocks drawn most often rank first).
        let hottest: u64 = by_heat.iter().take(4096).sum();
        assert!(hottest as f64 / 20_000.0 >= 0.78, "{hottest} of 20000");
        assert!(by_heat.len() < 12_000, "{} blocks touched: skewed, not uniform", by_heat.len());
    }

    #[test]
    fn srarw_updates_and_read_orders_follow_their_seed() {
        let updates: Vec<(usize, u64)> = SrarwUpdates::new(3, 5, 4096).take(1000).collect();
        assert!(updates.iter().all(|&(extent, block)| extent < 5 && block < 4096));
        assert_eq!(updates, SrarwUpdates::new(3, 5, 4096).take(1000).collect::<Vec<_>>());
        let mut orders = SrarwReadOrders::new(3);
        let (mut first, mut second) = ((0..50).collect::<Vec<u32>>(), (0..50).collect::<Vec<u32>>());
        orders.shuffle(&mut first);
        orders.shuffle(&mut second);
        assert_ne!(first, second, "successive orders continue the stream");
        first.sort_unstable();
        assert_eq!(first, (0..50).collect::<Vec<u32>>(), "a permutation");
    }

    #[test]
    fn an_extent_is_read_in_requests_of_the_fan_out_and_the_rest() {
        let requests: Vec<(u64, u64)> = read_requests(EXTENT_BLOCKS).collect();
        assert_eq!(requests, [(0, 974), (974, 974), (1948, 974), (2922, 974), (3896, 200)]);
        let mean = EXTENT_BLOCKS as f64 / requests.len() as f64;
        assert!((mean - 819.2).abs() < 1e-9, "the paper's 819.2 blocks per request");
        assert_eq!(read_requests(974).collect::<Vec<_>>(), [(0, 974)]);
    }

    #[test]
    fn the_extents_fill_at_most_the_fill_fraction() {
        for capacity in [10_000, 1_000_000, 123_456_789] {
            let filled = extent_count_for(capacity) * EXTENT_BLOCKS;
            assert!(filled as f64 <= FILL_FRACTION * capacity as f64);
            assert!((filled + EXTENT_BLOCKS) as f64 > FILL_FRACTION * capacity as f64);
        }
    }
}
