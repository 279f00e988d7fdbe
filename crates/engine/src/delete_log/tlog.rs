//! The tree log (TLog) as a pure policy: a complete binary tree of nodes,
//! each covering a fixed range of block numbers (a left child the lower
//! half of its parent's range, a right child the upper half). A freed block
//! is inserted at the root; a full node pushes all its blocks down to its
//! children, which may fill and push in turn; a full leaf is punched into
//! the activemap whole. How much one insert moves depends on how full the
//! nodes on its path are: that unbounded cascade is the TLog's known weakness
//! (the largest CP is what the experiments report beside BFLog's).
//!
//! Keys: `node << 32 | slot`, with nodes numbered as a heap (root 1,
//! children `2n` and `2n + 1`); the slots of a node are `0..len`.
//! Invariants: a node holds only blocks of its range, at most
//! `node_capacity` of them, and no block appears twice.

use super::LogSink;

const SLOT_BITS: u32 = 32;

/// Sizes of a tree log over a device of `block_count` blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TreeSizes {
    /// Blocks of the device covered.
    pub block_count: u64,
    /// Leaves (a power of two); nodes are `2 * leaf_count - 1`.
    pub leaf_count: u64,
    /// Blocks one node holds before it pushes down (or, a leaf, is punched).
    pub node_capacity: u64,
}

impl TreeSizes {
    fn node_count(&self) -> u64 {
        2 * self.leaf_count - 1
    }

    fn is_leaf(&self, node: u64) -> bool {
        node >= self.leaf_count
    }

    /// The range `[start, end)` of block numbers node `node` covers: a
    /// leaf covers `ceil(block_count / leaf_count)` blocks, an inner node its
    /// leaves' (so children split their parent's range exactly).
    fn range(&self, node: u64) -> (u64, u64) {
        let depth = 63 - node.leading_zeros();
        let index = node - (1u64 << depth);
        let leaf_span = self.block_count.div_ceil(self.leaf_count);
        let span = leaf_span * (self.leaf_count >> depth);
        ((index * span).min(self.block_count), ((index + 1) * span).min(self.block_count))
    }

    /// The child of inner node `node` whose range holds `block`.
    fn child_for(&self, node: u64, block: u64) -> u64 {
        let left = 2 * node;
        if block < self.range(left).1 {
            left
        } else {
            left + 1
        }
    }
}

/// The nodes and their blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TreeLog {
    sizes: TreeSizes,
    /// `nodes[n]`: the blocks of node `n` in slot order (index 0 unused).
    nodes: Vec<Vec<u64>>,
}

/// The position of node `node` in the node vector.
fn index(node: u64) -> usize {
    usize::try_from(node).expect("a node number fits usize")
}

fn key(node: u64, slot: u64) -> u64 {
    node << SLOT_BITS | slot
}

impl TreeLog {
    /// An empty tree log.
    pub(crate) fn new(sizes: TreeSizes) -> Self {
        assert!(sizes.leaf_count.is_power_of_two() && sizes.node_capacity > 0, "sizes: {sizes:?}");
        let nodes = usize::try_from(sizes.node_count() + 1).expect("a node count fits usize");
        Self { sizes, nodes: vec![Vec::new(); nodes] }
    }

    /// Rebuilds the tree from its persisted entries (in key order).
    pub(crate) fn from_entries(sizes: TreeSizes, entries: &[(u64, u64)]) -> Result<Self, String> {
        let mut log = Self::new(sizes);
        for &(key, block) in entries {
            let node = key >> SLOT_BITS;
            let slot = key & ((1 << SLOT_BITS) - 1);
            if node == 0 || node > sizes.node_count() {
                return Err(format!("entry {key:#x} names node {node} of {}", sizes.node_count()));
            }
            let (start, end) = sizes.range(node);
            if !(start..end).contains(&block) {
                return Err(format!("node {node} covers blocks {start}..{end} but holds block {block}"));
            }
            let held = &mut log.nodes[index(node)];
            if slot != held.len() as u64 {
                return Err(format!("entry {key:#x} leaves a gap in node {node}"));
            }
            if held.len() as u64 >= sizes.node_capacity {
                return Err(format!("node {node} holds more than its {} blocks", sizes.node_capacity));
            }
            held.push(block);
        }
        Ok(log)
    }

    /// Blocks the tree holds.
    pub(crate) fn len(&self) -> u64 {
        self.nodes.iter().map(|node| node.len() as u64).sum()
    }

    /// Inserts a freed block at the root, cascading as nodes fill.
    pub(crate) fn append(&mut self, block: u64, sink: &mut dyn LogSink) {
        assert!(block < self.sizes.block_count, "block {block} beyond the device");
        self.put(1, block, sink);
        let mut full = vec![1u64];
        while let Some(node) = full.pop() {
            if (self.nodes[index(node)].len() as u64) < self.sizes.node_capacity {
                continue;
            }
            full.extend(self.empty_node(node, sink));
        }
    }

    fn put(&mut self, node: u64, block: u64, sink: &mut dyn LogSink) {
        let held = &mut self.nodes[index(node)];
        sink.put(key(node, held.len() as u64), block);
        held.push(block);
    }

    /// Empties `node`: a leaf is punched, an inner node pushes its blocks to
    /// its children. Returns the children that may now be full.
    fn empty_node(&mut self, node: u64, sink: &mut dyn LogSink) -> Vec<u64> {
        let blocks = std::mem::take(&mut self.nodes[index(node)]);
        for slot in 0..blocks.len() as u64 {
            sink.remove(key(node, slot));
        }
        if self.sizes.is_leaf(node) {
            let mut sorted = blocks;
            sorted.sort_unstable();
            sorted.into_iter().for_each(|block| sink.punch(block));
            return Vec::new();
        }
        let mut touched = Vec::new();
        for block in blocks {
            let child = self.sizes.child_for(node, block);
            self.put(child, block, sink);
            if !touched.contains(&child) {
                touched.push(child);
            }
        }
        touched
    }

    /// Work an idle log does: inner nodes are pushed down, then the fullest
    /// leaf is punched, until `entries` blocks were moved or the tree is
    /// empty (a node moves whole, however many it holds).
    pub(crate) fn idle_work(&mut self, entries: u64, sink: &mut dyn LogSink) {
        let mut moved = 0;
        while moved < entries {
            // Inner nodes first, top down, so every block reaches a leaf.
            let Some(node) = (1..=self.sizes.node_count())
                .find(|&node| !self.nodes[index(node)].is_empty() && !self.sizes.is_leaf(node))
                .or_else(|| {
                    (self.sizes.leaf_count..=self.sizes.node_count())
                        .max_by_key(|&node| self.nodes[index(node)].len())
                        .filter(|&node| !self.nodes[index(node)].is_empty())
                })
            else {
                return;
            };
            moved = moved.saturating_add(self.nodes[index(node)].len() as u64);
            let mut full = self.empty_node(node, sink);
            while let Some(child) = full.pop() {
                if (self.nodes[index(child)].len() as u64) >= self.sizes.node_capacity {
                    full.extend(self.empty_node(child, sink));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::RecordingSink;
    use super::*;

    fn sizes() -> TreeSizes {
        TreeSizes { block_count: 10_000, leaf_count: 8, node_capacity: 20 }
    }

    #[test]
    fn children_split_their_parent_s_range() {
        let sizes = sizes();
        assert_eq!(sizes.range(1), (0, 10_000));
        assert_eq!(sizes.range(2), (0, 5000));
        assert_eq!(sizes.range(3), (5000, 10_000));
        for node in 1..sizes.leaf_count {
            for block in [sizes.range(node).0, sizes.range(node).1 - 1] {
                let child = sizes.child_for(node, block);
                let (start, end) = sizes.range(child);
                assert!((start..end).contains(&block), "node {node} block {block} child {child}");
            }
        }
    }

    #[test]
    fn inserts_cascade_and_full_leaves_are_punched_within_their_range() {
        let mut sink = RecordingSink::default();
        let mut log = TreeLog::new(sizes());
        let blocks: Vec<u64> = (0..2000u64).map(|i| (i * 7919) % 10_000).collect();
        for &block in &blocks {
            log.append(block, &mut sink);
            let entries: Vec<(u64, u64)> = sink.entries.iter().map(|(&key, &block)| (key, block)).collect();
            assert_eq!(TreeLog::from_entries(sizes(), &entries).unwrap(), log, "persisted entries rebuild the log");
        }
        assert!(!sink.punched.is_empty());
        // Leaves are punched whole when full: the punched blocks come in runs
        // of one leaf's range, each at least a node's capacity long.
        let leaf_span = 10_000 / 8;
        for run in sink.punched.chunk_by(|a, b| a / leaf_span == b / leaf_span) {
            assert!(run.len() >= 20, "{run:?}");
        }
        log.idle_work(u64::MAX, &mut sink);
        assert_eq!(log.len(), 0);
        let mut punched = sink.punched.clone();
        punched.sort_unstable();
        let mut expected = blocks;
        expected.sort_unstable();
        assert_eq!(punched, expected);
    }
}
