//! A compact ordered map from `u64` keys to entries: sorted vectors of at most
//! [`CHUNK_CAPACITY`] keys and values (kept in separate vectors, so an entry
//! costs its key and value and no node or padding overhead), found by binary
//! search over the chunks' first keys.
//!
//! Extent maps hold one entry per run; on an aged terabyte there are hundreds
//! of millions, so bytes per entry decide whether a volume fits in memory
//! (docs/engine.md, "Memory"). A `BTreeMap<u64, Run>` costs about 40 bytes per
//! run; this costs 24 plus a few percent once chunks are trimmed.
//!
//! Invariants: no chunk is empty; keys are strictly increasing within a chunk
//! and from each chunk to the next.

use std::ops::{Bound, RangeBounds};

/// Entries per chunk before it splits: an insert shifts at most this many.
pub const CHUNK_CAPACITY: usize = 256;

#[derive(Debug, Clone, Default)]
struct Chunk<E> {
    keys: Vec<u64>,
    values: Vec<E>,
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
        self.chunks.partition_point(|chunk| chunk.keys[0] <= key).saturating_sub(1)
    }

    fn canonical(&self, chunk: usize, index: usize) -> Position {
        if chunk < self.chunks.len() && index == self.chunks[chunk].keys.len() {
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
        let keys = &self.chunks[chunk].keys;
        let index = if inclusive { keys.partition_point(|&k| k < key) } else { keys.partition_point(|&k| k <= key) };
        self.canonical(chunk, index)
    }

    fn end(&self) -> Position {
        Position { chunk: self.chunks.len(), index: 0 }
    }

    /// The entry at `key`.
    pub fn get(&self, key: u64) -> Option<&E> {
        let chunk = self.chunks.get(self.chunk_for(key))?;
        chunk.keys.binary_search(&key).ok().map(|index| &chunk.values[index])
    }

    /// Inserts or replaces the entry at `key`; returns the old one.
    pub fn insert(&mut self, key: u64, value: E) -> Option<E> {
        if self.chunks.is_empty() {
            self.chunks.push(Chunk { keys: vec![key], values: vec![value] });
            self.len = 1;
            return None;
        }
        let chunk_index = self.chunk_for(key);
        let chunk = &mut self.chunks[chunk_index];
        match chunk.keys.binary_search(&key) {
            Ok(index) => Some(std::mem::replace(&mut chunk.values[index], value)),
            Err(index) => {
                if chunk.keys.len() == chunk.keys.capacity() {
                    // Grow by an eighth, not double: a map of millions of runs
                    // stays near full.
                    let extra = (chunk.keys.len() / 8).max(4);
                    chunk.keys.reserve_exact(extra);
                    chunk.values.reserve_exact(extra);
                }
                chunk.keys.insert(index, key);
                chunk.values.insert(index, value);
                self.len += 1;
                if chunk.keys.len() > CHUNK_CAPACITY {
                    let half = chunk.keys.len() / 2;
                    let upper = Chunk { keys: chunk.keys.split_off(half), values: chunk.values.split_off(half) };
                    chunk.keys.shrink_to_fit();
                    chunk.values.shrink_to_fit();
                    self.chunks.insert(chunk_index + 1, upper);
                }
                None
            }
        }
    }

    /// Removes the entry at `key`.
    pub fn remove(&mut self, key: u64) -> Option<E> {
        let chunk_index = self.chunk_for(key);
        let chunk = self.chunks.get_mut(chunk_index)?;
        let index = chunk.keys.binary_search(&key).ok()?;
        chunk.keys.remove(index);
        let value = chunk.values.remove(index);
        self.len -= 1;
        if chunk.keys.is_empty() {
            self.chunks.remove(chunk_index);
        } else {
            self.merge_if_small(chunk_index);
        }
        Some(value)
    }

    /// Merges a quarter-full chunk into its successor when both fit one chunk,
    /// so deletions do not leave many tiny chunks.
    fn merge_if_small(&mut self, chunk_index: usize) {
        let small = self.chunks[chunk_index].keys.len() < CHUNK_CAPACITY / 4;
        let Some(next) = self.chunks.get(chunk_index + 1) else { return };
        if small && self.chunks[chunk_index].keys.len() + next.keys.len() <= CHUNK_CAPACITY {
            let next = self.chunks.remove(chunk_index + 1);
            let chunk = &mut self.chunks[chunk_index];
            chunk.keys.extend(next.keys);
            chunk.values.extend(next.values);
        }
    }

    /// Entries with keys in `range`, in key order.
    pub fn range<R: RangeBounds<u64>>(&self, range: R) -> Range<'_, E> {
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
        let empty = (front.chunk, front.index) >= (back.chunk, back.index);
        Range { map: self, front, back: if empty { front } else { back } }
    }

    /// All entries in key order.
    pub fn iter(&self) -> Range<'_, E> {
        self.range(..)
    }

    /// Gives back spare vector capacity (after a burst of inserts).
    pub fn trim(&mut self) {
        for chunk in &mut self.chunks {
            chunk.keys.shrink_to_fit();
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
                .map(|chunk| chunk.keys.capacity() * 8 + chunk.values.capacity() * std::mem::size_of::<E>())
                .sum::<usize>()
    }
}

/// An iterator over a key range of a [`ChunkedMap`], from both ends.
#[derive(Debug, Clone)]
pub struct Range<'a, E> {
    map: &'a ChunkedMap<E>,
    /// Next entry from the front.
    front: Position,
    /// One past the next entry from the back.
    back: Position,
}

impl<'a, E> Iterator for Range<'a, E> {
    type Item = (&'a u64, &'a E);

    fn next(&mut self) -> Option<Self::Item> {
        if self.front == self.back {
            return None;
        }
        let chunk = &self.map.chunks[self.front.chunk];
        let item = (&chunk.keys[self.front.index], &chunk.values[self.front.index]);
        self.front = self.map.canonical(self.front.chunk, self.front.index + 1);
        Some(item)
    }
}

impl<E> DoubleEndedIterator for Range<'_, E> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front == self.back {
            return None;
        }
        self.back = if self.back.index == 0 {
            let chunk = self.back.chunk - 1;
            Position { chunk, index: self.map.chunks[chunk].keys.len() - 1 }
        } else {
            Position { chunk: self.back.chunk, index: self.back.index - 1 }
        };
        let chunk = &self.map.chunks[self.back.chunk];
        Some((&chunk.keys[self.back.index], &chunk.values[self.back.index]))
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

    fn op() -> impl Strategy<Value = Op> {
        let key = 0..2000u64;
        prop_oneof![
            4 => (key.clone(), any::<u32>()).prop_map(|(key, value)| Op::Insert(key, value)),
            2 => key.clone().prop_map(Op::Remove),
            1 => (key.clone(), key, any::<bool>(), any::<bool>()).prop_map(|(a, b, c, d)| Op::Range(a, b, c, d)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn behaves_like_a_btree_map(ops in proptest::collection::vec(op(), 1..3000)) {
            let mut map = ChunkedMap::new();
            let mut model = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(key, value) => prop_assert_eq!(map.insert(key, value), model.insert(key, value)),
                    Op::Remove(key) => prop_assert_eq!(map.remove(key), model.remove(&key)),
                    Op::Range(a, b, inclusive, backwards) => {
                        let (low, high) = (a.min(b), a.max(b));
                        let ours: Vec<(u64, u32)> = if inclusive {
                            collect(map.range(low..=high), backwards)
                        } else {
                            collect(map.range(low..high), backwards)
                        };
                        let expected: Vec<(u64, u32)> = if inclusive {
                            collect(model.range(low..=high), backwards)
                        } else {
                            collect(model.range(low..high), backwards)
                        };
                        prop_assert_eq!(ours, expected);
                        prop_assert_eq!(map.range(..=low).next_back().map(|(&k, &v)| (k, v)),
                            model.range(..=low).next_back().map(|(&k, &v)| (k, v)));
                        prop_assert_eq!(map.range(low + 1..).next().map(|(&k, &v)| (k, v)),
                            model.range(low + 1..).next().map(|(&k, &v)| (k, v)));
                    }
                }
                prop_assert_eq!(map.len(), model.len());
            }
            let all: Vec<(u64, u32)> = map.iter().map(|(&k, &v)| (k, v)).collect();
            let expected: Vec<(u64, u32)> = model.iter().map(|(&k, &v)| (k, v)).collect();
            prop_assert_eq!(all, expected);
        }
    }

    fn collect<'a>(iter: impl DoubleEndedIterator<Item = (&'a u64, &'a u32)>, backwards: bool) -> Vec<(u64, u32)> {
        let pairs = iter.map(|(&key, &value)| (key, value));
        if backwards {
            let mut reversed: Vec<_> = pairs.rev().collect();
            reversed.reverse();
            reversed
        } else {
            pairs.collect()
        }
    }

    #[test]
    fn a_trimmed_map_of_runs_costs_about_its_keys_and_values() {
        let mut map = ChunkedMap::new();
        for key in 0..100_000u64 {
            map.insert(key * 3, (key, key));
        }
        map.trim();
        let per_entry = map.memory_bytes() as f64 / map.len() as f64;
        assert!(per_entry < 25.0, "{per_entry} bytes per entry");
    }
}
