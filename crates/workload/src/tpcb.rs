//! TPC-B as the HyLog paper and Matthews et al. simulate it: uniformly random
//! page updates through a write-back LRU buffer pool. Each transaction reads
//! a uniformly random page of the database and modifies it; the pool writes a
//! dirty page back when its frame is taken. With a pool much smaller than the
//! database nearly every transaction misses, so it costs one random page read
//! and the write of an earlier transaction's page: the "page read and page
//! write" per transaction of the paper's Table 7 (seed 001, L476–L484).
//!
//! The generator keeps no time: the caller runs each transaction's I/Os, in
//! order, before asking for the next (a closed loop).

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::buffer_pool::{BufferPool, PageIo};
use crate::request::Operation;
use crate::synthetic::seeded_stream;

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TpcbSpec {
    /// Pages in the database.
    pub page_count: u64,
    /// Frames of the buffer pool (at least one).
    pub pool_frames: u32,
    /// The seed.
    pub seed: u64,
}

/// Physical I/Os issued so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TpcbCounts {
    /// Transactions started.
    pub transactions: u64,
    /// Pages read.
    pub reads: u64,
    /// Pages written back.
    pub writes: u64,
}

/// The generator of a [`TpcbSpec`].
#[derive(Debug, Clone)]
pub struct TpcbWorkload {
    spec: TpcbSpec,
    pool: BufferPool,
    rng: ChaCha8Rng,
    counts: TpcbCounts,
}

impl TpcbWorkload {
    /// A generator with an empty pool; its pages come from stream 0 of the
    /// seed ([`seeded_stream`]), so a caller drawing other pages from the same
    /// seed takes another stream.
    ///
    /// # Panics
    /// With no page or no frame: programming errors of the caller.
    pub fn new(spec: TpcbSpec) -> TpcbWorkload {
        assert!(spec.page_count > 0 && spec.pool_frames > 0, "pages and frames");
        TpcbWorkload {
            pool: BufferPool::new(spec.pool_frames, spec.page_count),
            rng: seeded_stream(spec.seed, 0),
            spec,
            counts: TpcbCounts::default(),
        }
    }

    /// The spec.
    pub fn spec(&self) -> &TpcbSpec {
        &self.spec
    }

    /// Counts so far.
    pub fn counts(&self) -> TpcbCounts {
        self.counts
    }

    /// The physical I/Os of the next transaction, in the order they are
    /// issued (a write-back before the read whose frame it frees); none when
    /// the page is in the pool.
    pub fn next_transaction(&mut self) -> Vec<PageIo> {
        let page = self.rng.gen_range(0..self.spec.page_count);
        let mut ios = Vec::with_capacity(2);
        self.pool.access(page, true, &mut ios);
        self.counts.transactions += 1;
        for io in &ios {
            match io.operation {
                Operation::Read => self.counts.reads += 1,
                _ => self.counts.writes += 1,
            }
        }
        ios
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warm_pool_much_smaller_than_the_database_costs_a_read_and_a_write_per_transaction() {
        for seed in 0..8 {
            warm_pool_costs_a_read_and_a_write(seed);
        }
    }

    fn warm_pool_costs_a_read_and_a_write(seed: u64) {
        let spec = TpcbSpec { page_count: 1_000_000, pool_frames: 64, seed };
        let mut workload = TpcbWorkload::new(spec);
        // Filling the pool: reads only (a page drawn twice is a hit: none).
        while workload.counts().reads < 64 {
            let ios = workload.next_transaction();
            assert!(ios.len() <= 1 && ios.iter().all(|io| io.operation == Operation::Read), "{ios:?}");
        }
        let before = workload.counts();
        for _ in 0..10_000 {
            let ios = workload.next_transaction();
            assert!(ios.iter().all(|io| io.page < spec.page_count));
            if let [write, read] = ios.as_slice() {
                assert_eq!((write.operation, read.operation), (Operation::Write, Operation::Read));
                assert_ne!(write.page, read.page, "the page written back is an earlier one");
            }
        }
        let after = workload.counts();
        let (reads, writes) = (after.reads - before.reads, after.writes - before.writes);
        assert_eq!(reads, writes, "every miss after the pool filled evicts a dirty page");
        // Hits: about 64 in a million per transaction.
        assert!(reads >= 9_990, "{reads} misses in 10,000 transactions");
        assert_eq!(after.transactions - before.transactions, 10_000);
    }

    #[test]
    fn a_pool_holding_the_database_reads_each_page_once_and_writes_nothing() {
        let spec = TpcbSpec { page_count: 50, pool_frames: 50, seed: 1 };
        let mut workload = TpcbWorkload::new(spec);
        for _ in 0..5_000 {
            workload.next_transaction();
        }
        let counts = workload.counts();
        assert_eq!((counts.reads, counts.writes), (50, 0));
    }

    #[test]
    fn the_seed_fixes_the_pages() {
        let spec = TpcbSpec { page_count: 10_000, pool_frames: 16, seed: 9 };
        let run = |spec| {
            let mut workload = TpcbWorkload::new(spec);
            (0..200).flat_map(|_| workload.next_transaction()).collect::<Vec<_>>()
        };
        assert_eq!(run(spec), run(spec));
        assert_ne!(run(spec), run(TpcbSpec { seed: 10, ..spec }));
    }
}
