//! A compact ordered map from `u64` keys to entries: sorted vectors of at most
//! [`CHUNK_CAPACITY`] entries, found by binary search over the chunks' first
//! keys. A chunk holds its keys as 32-bit offsets from a base and its values in
//! a vector of their own, so an entry costs 4 bytes plus its value and no node
//! or padding overhead.
//!
//! Extent maps hold one entry per run; on an aged terabyte there are hundreds
//! of millions, so bytes per entry decide whether a volume fits in memory
//! (docs/engine.md, "Memory"). A `BTreeMap<u64, Run>` costs about 40 bytes per
//! run; this costs 16 plus a few percent once chunks are trimmed.
//!
//! Invariants: no chunk is empty; within a chunk, offsets are strictly
//! increasing and the first is 0 (the base is the chunk's first key); keys are
//! strictly increasing from each chunk to the next.

use std::ops::{Bound, RangeBounds};

/// Entries per chunk before it splits: an insert shifts at most this many.
pub const CHUNK_CAPACITY: usize = 256;

#[derive(Debug, Clone)]
struct Chunk<E> {
    /// The first key.
    base: u64,
    /// Each key less the base.
    offsets: Vec<u32>,
    values: Vec<E>,
}

impl<E> Chunk<E> {
    fn single(key: u64, value: E) -> Self {
        Chunk { base: key, offsets: vec![0], values: vec![value] }
    }

    fn len(&self) -> usize {
        self.offsets.len()
    }

    fn key(&self, index: usize) -> u64 {
        self.base + u64::from(self.offsets[index])
    }

    fn last_key(&self) -> u64 {
        self.key(self.len() - 1)
    }

    /// `key` as an offset from the base, if it is one.
    fn offset_of(&self, key: u64) -> Option<u32> {
        key.checked_sub(self.base).and_then(|offset| u32::try_from(offset).ok())
    }

    /// Where `key` is (`Ok`) or would go (`Err`), for a key the chunk can hold.
    fn search(&self, key: u64) -> Result<usize, usize> {
        match self.offset_of(key) {
            Some(offset) => self.offsets.binary_search(&offset),
            None if key < self.base => Err(0),
            None => Err(self.len()),
        }
    }

    /// Makes `base` the base (at most the first key, within `u32` of the last).
    fn rebase(&mut self, base: u64) {
        let old = self.base;
        for offset in &mut self.offsets {
            let key = old + u64::from(*offset);
            *offset = u32::try_from(key - base).expect("every key is within reach of the new base");
        }
        self.base = base;
    }

    /// Splits off the entries from `index` on as a chunk of their own.
    fn split_off(&mut self, index: usize) -> Self {
        let mut upper =
            Chunk { base: self.base, offsets: self.offsets.split_off(index), values: self.values.split_off(index) };
        upper.rebase(upper.key(0));
        upper
    }
}

/// An ordered map of `u64` keys in sorted chunks.
#[derive(Debug, Clone)]
pub struct ChunkedMap<E> {
    chunks: Vec<Chunk<E>>,
    len: usize,
}

impl<E> Default for ChunkedMap<E> {
    fn default() -> Self {
        Self { chunks: Vec::new(), len: 0 }
    }
}

impl<E: PartialEq> PartialEq for ChunkedMap<E> {
    /// Equal when the entries are, however they are chunked.
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

/// A position: chunk index and index within it. Canonical positions never
/// point one past a chunk's end (that is the next chunk's index 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Position {
    chunk: usize,
    index: usize,
}

impl<E> ChunkedMap<E> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the map has no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chunk that holds `key` if present: the last whose first key is at
    /// most `key` (or the first chunk).
    fn chunk_for(&self, key: u64) -> usize {
        self.chunks.partition_point(|chunk| chunk.base <= key).saturating_sub(1)
    }

    fn canonical(&self, chunk: usize, index: usize) -> Position {
        if chunk < self.chunks.len() && index == self.chunks[chunk].len() {
            Position { chunk: chunk + 1, index: 0 }
        } else {
            Position { chunk, index }
        }
    }

    /// The first position whose key is `>= key` (`inclusive`) or `> key`.
    fn lower_bound(&self, key: u64, inclusive: bool) -> Position {
        if self.chunks.is_empty() {
            return Position { chunk: 0, index: 0 };
        }
        let chunk = self.chunk_for(key);
        let index = match self.chunks[chunk].search(key) {
            Ok(index) if inclusive => index,
            Ok(index) => index + 1,
            Err(index) => index,
        };
        self.canonical(chunk, index)
    }

    fn end(&self) -> Position {
        Position { chunk: self.chunks.len(), index: 0 }
    }

    /// The entry at `key`.
    pub fn get(&self, key: u64) -> Option<&E> {
        let chunk = self.chunks.get(self.chunk_for(key))?;
        chunk.search(key).ok().map(|index| &chunk.values[index])
    }

    /// Inserts or replaces the entry at `key`; returns the old one.
    pub fn insert(&mut self, key: u64, value: E) -> Option<E> {
        if self.chunks.is_empty() {
            self.chunks.push(Chunk::single(key, value));
            self.len = 1;
            return None;
        }
        let chunk_index = self.chunk_for(key);
        let chunk = &mut self.chunks[chunk_index];
        let index = match chunk.search(key) {
            Ok(index) => return Some(std::mem::replace(&mut chunk.values[index], value)),
            Err(index) => index,
        };
        self.len += 1;
        if key < chunk.base && chunk.last_key() - key <= u64::from(u32::MAX) {
            // A new first key of the first chunk becomes its base.
            chunk.rebase(key);
        }
        let Some(offset) = chunk.offset_of(key) else {
            // Beyond the offsets' reach: the key starts a chunk of its own,
            // before the first chunk or after this one.
            let at = if key < chunk.base { 0 } else { chunk_index + 1 };
            self.chunks.insert(at, Chunk::single(key, value));
            return None;
        };
        if chunk.len() == chunk.offsets.capacity() {
            // Grow by an eighth, not double: a map of millions of runs
            // stays near full.
            let extra = (chunk.len() / 8).max(4);
            chunk.offsets.reserve_exact(extra);
            chunk.values.reserve_exact(extra);
        }
        chunk.offsets.insert(index, offset);
        chunk.values.insert(index, value);
        if chunk.len() > CHUNK_CAPACITY {
            let upper = chunk.split_off(chunk.len() / 2);
            chunk.offsets.shrink_to_fit();
            chunk.values.shrink_to_fit();
            self.chunks.insert(chunk_index + 1, upper);
        }
        None
    }

    /// Removes the entry at `key`.
    pub fn remove(&mut self, key: u64) -> Option<E> {
        let chunk_index = self.chunk_for(key);
        let chunk = self.chunks.get_mut(chunk_index)?;
        let index = chunk.search(key).ok()?;
        chunk.offsets.remove(index);
        let value = chunk.values.remove(index);
        self.len -= 1;
        if chunk.offsets.is_empty() {
            self.chunks.remove(chunk_index);
            return Some(value);
        }
        if index == 0 {
            chunk.rebase(chunk.key(0));
        }
        self.merge_if_small(chunk_index);
        Some(value)
    }

    /// Merges a quarter-full chunk into its successor when both fit one chunk
    /// (and the successor's keys are within reach of the base), so deletions
    /// do not leave many tiny chunks.
    fn merge_if_small(&mut self, chunk_index: usize) {
        let chunk = &self.chunks[chunk_index];
        let small = chunk.len() < CHUNK_CAPACITY / 4;
        let Some(next) = self.chunks.get(chunk_index + 1) else { return };
        let reachable = chunk.offset_of(next.last_key()).is_some();
        if small && reachable && chunk.len() + next.len() <= CHUNK_CAPACITY {
            let mut next = self.chunks.remove(chunk_index + 1);
            let chunk = &mut self.chunks[chunk_index];
            next.rebase(chunk.base);
            chunk.offsets.extend(next.offsets);
            chunk.values.extend(next.values);
        }
    }

    /// Entries with keys in `range`, in key order: a walk over the slices of
    /// the chunks the range spans, from either end.
    pub fn range<R: RangeBounds<u64>>(&self, range: R) -> impl DoubleEndedIterator<Item = (u64, &E)> + Clone + '_ {
        let front = match range.start_bound() {
            Bound::Included(&key) => self.lower_bound(key, true),
            Bound::Excluded(&key) => self.lower_bound(key, false),
            Bound::Unbounded => self.canonical(0, 0),
        };
        let back = match range.end_bound() {
            Bound::Included(&key) => self.lower_bound(key, false),
            Bound::Excluded(&key) => self.lower_bound(key, true),
            Bound::Unbounded => self.end(),
        };
        // Positions are canonical, so the range is empty exactly when the
        // back is not after the front, and a back at index 0 of a chunk
        // takes nothing of it.
        let spanned = if (front.chunk, front.index) < (back.chunk, back.index) {
            front.chunk..(back.chunk + usize::from(back.index > 0)).min(self.chunks.len())
        } else {
            0..0
        };
        let first = spanned.start;
        self.chunks[spanned].iter().enumerate().flat_map(move |(offset, chunk)| {
            let at = first + offset;
            let from = if at == front.chunk { front.index } else { 0 };
            let to = if at == back.chunk { back.index } else { chunk.len() };
            let base = chunk.base;
            chunk.offsets[from..to]
                .iter()
                .zip(&chunk.values[from..to])
                .map(move |(&key, value)| (base + u64::from(key), value))
        })
    }

    /// All entries in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, &E)> + Clone + '_ {
        self.range(..)
    }

    /// Gives back spare vector capacity (after a burst of inserts).
    pub fn trim(&mut self) {
        for chunk in &mut self.chunks {
            chunk.offsets.shrink_to_fit();
            chunk.values.shrink_to_fit();
        }
        self.chunks.shrink_to_fit();
    }

    /// Heap bytes held (vectors' capacities).
    pub fn memory_bytes(&self) -> usize {
        self.chunks.capacity() * std::mem::size_of::<Chunk<E>>()
            + self
                .chunks
                .iter()
                .map(|chunk| chunk.offsets.capacity() * 4 + chunk.values.capacity() * std::mem::size_of::<E>())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u32),
        Remove(u64),
        Range(u64, u64, bool, bool),
    }

    /// Keys close together, or (`spread`) also in clusters 2^30 apart, beyond
    /// the reach of one chunk's 32-bit offsets.
    fn key(spread: bool) -> BoxedStrategy<u64> {
        if spread {
            (0..12u64, 0..200u64).prop_map(|(cluster, key)| (cluster << 30) + key).boxed()
        } else {
            (0..2000u64).boxed()
        }
    }

    fn op(spread: bool) -> impl Strategy<Value = Op> {
        let key = key(spread);
        prop_oneof![
            4 => (key.clone(), any::<u32>()).prop_map(|(key, value)| Op::Insert(key, value)),
            2 => key.clone().prop_map(Op::Remove),
            1 => (key.clone(), key, any::<bool>(), any::<bool>()).prop_map(|(a, b, c, d)| Op::Range(a, b, c, d)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn behaves_like_a_btree_map(ops in proptest::collection::vec(op(false), 1..3000)) {
            check_against_a_btree_map(ops)?;
        }

        #[test]
        fn behaves_like_a_btree_map_with_keys_beyond_one_chunks_reach(
            ops in proptest::collection::vec(op(true), 1..3000)
        ) {
            check_against_a_btree_map(ops)?;
        }
    }

    fn check_against_a_btree_map(ops: Vec<Op>) -> Result<(), TestCaseError> {
        let mut map = ChunkedMap::new();
        let mut model = BTreeMap::new();
        for op in ops {
            match op {
                Op::Insert(key, value) => prop_assert_eq!(map.insert(key, value), model.insert(key, value)),
                Op::Remove(key) => prop_assert_eq!(map.remove(key), model.remove(&key)),
                Op::Range(a, b, inclusive, backwards) => {
                    let (low, high) = (a.min(b), a.max(b));
                    let (ours, expected) = if inclusive {
                        (
                            ordered(map.range(low..=high), backwards),
                            ordered(model.range(low..=high).map(|(&k, v)| (k, v)), backwards),
                        )
                    } else {
                        (
                            ordered(map.range(low..high), backwards),
                            ordered(model.range(low..high).map(|(&k, v)| (k, v)), backwards),
                        )
                    };
                    prop_assert_eq!(ours, expected);
                    prop_assert_eq!(
                        map.range(..=low).next_back().map(|(k, &v)| (k, v)),
                        model.range(..=low).next_back().map(|(&k, &v)| (k, v))
                    );
                    prop_assert_eq!(
                        map.range(low + 1..).next().map(|(k, &v)| (k, v)),
                        model.range(low + 1..).next().map(|(&k, &v)| (k, v))
                    );
                }
            }
            prop_assert_eq!(map.len(), model.len());
        }
        prop_assert_eq!(ordered(map.iter(), false), ordered(model.iter().map(|(&k, v)| (k, v)), false));
        Ok(())
    }

    /// The pairs of a range, in key order, collected from the front or the back.
    fn ordered<V>(pairs: impl DoubleEndedIterator<Item = (u64, V)>, backwards: bool) -> Vec<(u64, V)> {
        if backwards {
            let mut reversed: Vec<_> = pairs.rev().collect();
            reversed.reverse();
            reversed
        } else {
            pairs.collect()
        }
    }

    #[test]
    fn a_trimmed_map_of_runs_costs_about_its_offsets_and_runs() {
        let mut map = ChunkedMap::new();
        // Random order, as an aged extent's runs arrive.
        let mut key = 0u64;
        for _ in 0..100_000 {
            key = (key + 7_919) % 100_003;
            map.insert(key * 3, crate::codec::Run::new(1, key));
        }
        map.trim();
        let per_entry = map.memory_bytes() as f64 / map.len() as f64;
        assert!(per_entry < 17.0, "{per_entry} bytes per entry (4 of offset, 12 of run)");
    }
}
