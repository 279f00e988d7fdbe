//! Sets and maps of member blocks (or zones) kept as sorted vectors: the
//! planner's per-member sets and writes are small and mostly filled in
//! ascending order, where a vector beats a tree and allocates once.

/// Distinct `u64`s in ascending order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct BlockSet(Vec<u64>);

impl BlockSet {
    pub(super) fn new() -> Self {
        Self(Vec::new())
    }

    /// Adds `block` (nothing if present). Appending in ascending order is O(1).
    pub(super) fn insert(&mut self, block: u64) {
        match self.0.last() {
            None => self.0.push(block),
            Some(&last) if last < block => self.0.push(block),
            Some(&last) if last == block => {}
            Some(_) => {
                if let Err(index) = self.0.binary_search(&block) {
                    self.0.insert(index, block);
                }
            }
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The blocks in ascending order.
    pub(super) fn iter(&self) -> std::iter::Copied<std::slice::Iter<'_, u64>> {
        self.0.iter().copied()
    }
}

impl Extend<u64> for BlockSet {
    fn extend<I: IntoIterator<Item = u64>>(&mut self, blocks: I) {
        blocks.into_iter().for_each(|block| self.insert(block));
    }
}

impl FromIterator<u64> for BlockSet {
    fn from_iter<I: IntoIterator<Item = u64>>(blocks: I) -> Self {
        let mut set = Self::new();
        set.extend(blocks);
        set
    }
}

impl<const N: usize> From<[u64; N]> for BlockSet {
    fn from(blocks: [u64; N]) -> Self {
        blocks.into_iter().collect()
    }
}

impl<'a> IntoIterator for &'a BlockSet {
    type Item = u64;
    type IntoIter = std::iter::Copied<std::slice::Iter<'a, u64>>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Blocks and what is written to each, in ascending block order: a map from
/// block to data as a sorted vector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct BlockWrites(Vec<(u64, Vec<u8>)>);

impl BlockWrites {
    pub(super) fn new() -> Self {
        Self(Vec::new())
    }

    /// Writes `data` to `block`, replacing what an earlier insert wrote there.
    /// Appending in ascending order is O(1).
    pub(super) fn insert(&mut self, block: u64, data: Vec<u8>) {
        match self.0.last() {
            Some(&(last, _)) if last >= block => match self.0.binary_search_by_key(&block, |&(block, _)| block) {
                Ok(index) => self.0[index].1 = data,
                Err(index) => self.0.insert(index, (block, data)),
            },
            _ => self.0.push((block, data)),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The data written to `block`, if any.
    pub(super) fn get(&self, block: u64) -> Option<&Vec<u8>> {
        self.0.binary_search_by_key(&block, |&(block, _)| block).ok().map(|index| &self.0[index].1)
    }

    /// The blocks written, in ascending order.
    pub(super) fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.0.iter().map(|&(block, _)| block)
    }

    /// The blocks and their data, in ascending block order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&u64, &Vec<u8>)> + '_ {
        self.0.iter().map(|(block, data)| (block, data))
    }
}

impl<'a> IntoIterator for &'a BlockWrites {
    type Item = (&'a u64, &'a Vec<u8>);
    type IntoIter =
        std::iter::Map<std::slice::Iter<'a, (u64, Vec<u8>)>, fn(&'a (u64, Vec<u8>)) -> (&'a u64, &'a Vec<u8>)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(block, data)| (block, data))
    }
}

impl<const N: usize> From<[(u64, Vec<u8>); N]> for BlockWrites {
    fn from(writes: [(u64, Vec<u8>); N]) -> Self {
        let mut map = Self::new();
        writes.into_iter().for_each(|(block, data)| map.insert(block, data));
        map
    }
}

impl std::ops::Index<&u64> for BlockWrites {
    type Output = Vec<u8>;

    fn index(&self, block: &u64) -> &Vec<u8> {
        self.get(*block).expect("a block written")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn writes_behave_like_an_ordered_map_in_any_insertion_order() {
        let orders: [&[u64]; 4] = [&[1, 2, 3, 9], &[9, 3, 2, 1], &[3, 1, 9, 3, 2, 2, 1], &[]];
        for order in orders {
            let mut writes = BlockWrites::new();
            let mut expected = std::collections::BTreeMap::new();
            for (index, &block) in (0u8..).zip(order) {
                writes.insert(block, vec![index]);
                expected.insert(block, vec![index]);
            }
            let pairs: Vec<(u64, Vec<u8>)> = writes.iter().map(|(&block, data)| (block, data.clone())).collect();
            assert_eq!(pairs, expected.clone().into_iter().collect::<Vec<_>>(), "{order:?}");
            assert_eq!(writes.get(3), expected.get(&3));
        }
    }

    #[test]
    fn behaves_like_an_ordered_set_in_any_insertion_order() {
        let orders: [&[u64]; 4] = [&[1, 2, 3, 9], &[9, 3, 2, 1], &[3, 1, 9, 3, 2, 2, 1], &[]];
        for order in orders {
            let set: BlockSet = order.iter().copied().collect();
            let expected: BTreeSet<u64> = order.iter().copied().collect();
            assert_eq!(set.iter().collect::<Vec<_>>(), expected.into_iter().collect::<Vec<_>>(), "{order:?}");
            assert_eq!(set.is_empty(), order.is_empty());
        }
    }
}
