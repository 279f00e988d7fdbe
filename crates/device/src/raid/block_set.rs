//! A set of member blocks (or zones) kept as a sorted vector: the planner's
//! per-member sets are small and mostly filled in ascending order, where a
//! vector beats a tree and allocates once.

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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

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
