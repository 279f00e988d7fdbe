//! The bytes of recently staged blocks, kept in memory so that a destage
//! need not read them back from flash (docs/engine.md, "Staged-block cache").
//!
//! Keyed by flash block. An entry is inserted after its staged write
//! succeeded and holds exactly the bytes that write put there. The entry
//! stays right for as long as anything maps the block: a staged flash block
//! is written once (copy-on-write), only the staging paths write user data
//! to flash, and a block that metadata or a later staged write reuses was
//! freed first, so nothing maps it until a staging write — which replaces the
//! entry — maps it again. Bounded: past its capacity the oldest entries go
//! first (the staging log's own order), and a destaged block's entry is
//! dropped at once.

use std::collections::{HashMap, VecDeque};

use crate::codec::BLOCK_SIZE;

/// Staged blocks' bytes, at most `capacity_blocks` of them.
#[derive(Debug, Default)]
pub(crate) struct StagedCache {
    capacity_blocks: usize,
    /// Flash block → (insertion number, bytes).
    entries: HashMap<u64, (u64, Box<[u8]>)>,
    /// `(flash block, insertion number)` in insertion order; an item whose
    /// number no longer matches its entry is stale and skipped.
    order: VecDeque<(u64, u64)>,
    inserted: u64,
}

impl StagedCache {
    pub(crate) fn new(capacity_blocks: u64) -> Self {
        Self { capacity_blocks: usize::try_from(capacity_blocks).unwrap_or(usize::MAX), ..Self::default() }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.capacity_blocks > 0
    }

    /// Records that each of `pieces` (one block's bytes each) was written to
    /// the flash block of `blocks` at the same position.
    pub(crate) fn insert_blocks<'a>(&mut self, blocks: &[u64], pieces: impl IntoIterator<Item = &'a [u8]>) {
        if !self.enabled() {
            return;
        }
        for (&block, data) in blocks.iter().zip(pieces) {
            debug_assert_eq!(data.len(), BLOCK_SIZE);
            self.inserted += 1;
            self.entries.insert(block, (self.inserted, data.into()));
            self.order.push_back((block, self.inserted));
        }
        self.evict_beyond_capacity();
    }

    /// Drops the entries of `[block, block + count)`.
    pub(crate) fn remove_run(&mut self, block: u64, count: u64) {
        if self.entries.is_empty() {
            return;
        }
        for flash_block in block..block + count {
            self.entries.remove(&flash_block);
        }
        self.compact_order();
    }

    /// Copies the bytes of `[block, block + count)` into `destination` and
    /// returns true if every block is held; else returns false, having
    /// written some of `destination` or none.
    pub(crate) fn copy_run(&self, block: u64, count: u64, destination: &mut [u8]) -> bool {
        if self.entries.is_empty() {
            return false;
        }
        for (flash_block, target) in (block..block + count).zip(destination.chunks_exact_mut(BLOCK_SIZE)) {
            let Some((_, bytes)) = self.entries.get(&flash_block) else { return false };
            target.copy_from_slice(bytes);
        }
        true
    }

    /// Blocks held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn evict_beyond_capacity(&mut self) {
        while self.entries.len() > self.capacity_blocks {
            let Some((block, number)) = self.order.pop_front() else { break };
            if self.entries.get(&block).is_some_and(|&(held, _)| held == number) {
                self.entries.remove(&block);
            }
        }
        self.compact_order();
    }

    /// Keeps the order queue within twice the entries (stale items from
    /// removed or replaced entries are dropped).
    fn compact_order(&mut self) {
        if self.order.len() > 2 * self.entries.len().max(64) {
            let entries = &self.entries;
            self.order.retain(|(block, number)| entries.get(block).is_some_and(|&(held, _)| held == *number));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks_of(values: &[u8]) -> Vec<u8> {
        values.iter().flat_map(|&value| [value; BLOCK_SIZE]).collect()
    }

    #[test]
    fn a_disabled_cache_holds_nothing() {
        let mut cache = StagedCache::new(0);
        cache.insert_blocks(&[1, 2], blocks_of(&[1, 2]).chunks(BLOCK_SIZE));
        assert_eq!(cache.len(), 0);
        assert!(!cache.copy_run(1, 2, &mut vec![0; 2 * BLOCK_SIZE]));
    }

    #[test]
    fn a_run_is_served_only_when_every_block_is_held() {
        let mut cache = StagedCache::new(8);
        cache.insert_blocks(&[10, 11, 13], blocks_of(&[1, 2, 3]).chunks(BLOCK_SIZE));
        let mut out = vec![0; 2 * BLOCK_SIZE];
        assert!(cache.copy_run(10, 2, &mut out));
        assert_eq!(out, blocks_of(&[1, 2]));
        assert!(!cache.copy_run(11, 3, &mut vec![0; 3 * BLOCK_SIZE]), "block 12 is not held");
        cache.remove_run(10, 1);
        assert!(!cache.copy_run(10, 2, &mut out));
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn a_rewritten_block_holds_its_latest_bytes_and_the_oldest_go_first() {
        let mut cache = StagedCache::new(3);
        cache.insert_blocks(&[1, 2, 3], blocks_of(&[1, 2, 3]).chunks(BLOCK_SIZE));
        cache.insert_blocks(&[1], blocks_of(&[9]).chunks(BLOCK_SIZE));
        let mut one = vec![0; BLOCK_SIZE];
        assert!(cache.copy_run(1, 1, &mut one));
        assert_eq!(one, blocks_of(&[9]));
        cache.insert_blocks(&[4], blocks_of(&[4]).chunks(BLOCK_SIZE));
        assert_eq!(cache.len(), 3);
        assert!(!cache.copy_run(2, 1, &mut one), "the oldest entry left first");
        assert!(cache.copy_run(1, 1, &mut one), "block 1's rewrite is younger than blocks 2 and 3");
        assert!(cache.copy_run(3, 2, &mut vec![0; 2 * BLOCK_SIZE]));
    }

    #[test]
    fn the_order_queue_stays_bounded_under_churn() {
        let mut cache = StagedCache::new(16);
        for round in 0..10_000u64 {
            let block = round % 40;
            cache.insert_blocks(&[block], blocks_of(&[(round % 251) as u8]).chunks(BLOCK_SIZE));
            if round % 3 == 0 {
                cache.remove_run(block, 1);
            }
        }
        assert!(cache.len() <= 16);
        assert!(cache.order.len() <= 2 * 64 + 1, "{} queued", cache.order.len());
    }
}
