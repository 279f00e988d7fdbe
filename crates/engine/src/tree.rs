//! Copy-on-write B+-trees of 4 KiB nodes keyed by `u64`: extent maps, the extent
//! table and the snapshot table.
//!
//! In memory a tree is its entries (a compact [`ChunkedMap`]) plus, per level, a partition of
//! the key space into nodes: each node covers `[its key, the next node's key)`
//! and records where it lives on flash; the dirty nodes of each level are kept
//! apart, in key order. A mutation marks the leaf covering its key dirty;
//! [`PersistentTree::persist`] rewrites dirty nodes (consecutive dirty nodes are
//! re-split together, which also merges underfull ones) to new blocks, then
//! their parents, up to one root. A persist visits the dirty nodes and their
//! neighbours only, so its cost follows the changes, not the tree's size.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::ops::RangeBounds;

use crate::chunked::ChunkedMap;
use crate::codec::{
    decode_header, decode_index_entries, decode_leaf_entries, leaf_capacity, new_block, seal_block, stored_crc, Header,
    TreeEntry, TreePointer, HEADER_SIZE, INDEX_CAPACITY, INDEX_ENTRY_SIZE,
};
use crate::error::{corrupt, Result};

/// Where persisted nodes go: the consistency point in progress.
pub trait NodeStore {
    /// A fresh flash block for a metadata block.
    fn allocate(&mut self) -> Result<u64>;
    /// The old block of a rewritten node is no longer used by the active tree.
    fn release(&mut self, block: u64);
    /// Queues a sealed block to be written at `block`.
    fn stage_write(&mut self, block: u64, data: Vec<u8>);
    /// The generation being written.
    fn generation(&self) -> u64;
    /// The volume id.
    fn volume_id(&self) -> u64;
}

/// Where nodes are loaded from.
pub trait NodeReader {
    /// Reads one flash block.
    fn read_block(&mut self, block: u64) -> Result<Vec<u8>>;
    /// The volume id every block must carry.
    fn volume_id(&self) -> u64;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NodeSlot {
    /// Flash block (0 = never written).
    block: u64,
    crc: u32,
}

/// The slot of a node not yet written (always dirty).
const UNWRITTEN: NodeSlot = NodeSlot { block: 0, crc: 0 };

/// The entries of a run of nodes in key order, encoded straight into the
/// nodes' blocks when they are written.
#[derive(Debug)]
enum NodeEntries<'a, E> {
    /// A leaf level's entries.
    Leaf(Vec<(u64, &'a E)>),
    /// An index level's children.
    Index(Vec<(u64, NodeSlot)>),
}

impl<E: TreeEntry> NodeEntries<'_, E> {
    fn len(&self) -> usize {
        match self {
            NodeEntries::Leaf(entries) => entries.len(),
            NodeEntries::Index(children) => children.len(),
        }
    }

    fn key(&self, index: usize) -> u64 {
        match self {
            NodeEntries::Leaf(entries) => entries[index].0,
            NodeEntries::Index(children) => children[index].0,
        }
    }

    fn entry_size(&self) -> usize {
        match self {
            NodeEntries::Leaf(_) => E::SIZE,
            NodeEntries::Index(_) => INDEX_ENTRY_SIZE,
        }
    }

    /// Encodes entry `index` into `bytes` (exactly [`Self::entry_size`] long).
    fn encode(&self, index: usize, bytes: &mut [u8]) {
        match self {
            NodeEntries::Leaf(entries) => {
                let (key, entry) = entries[index];
                entry.encode(key, bytes);
            }
            NodeEntries::Index(children) => {
                let (key, slot) = children[index];
                bytes[..8].copy_from_slice(&key.to_le_bytes());
                bytes[8..16].copy_from_slice(&slot.block.to_le_bytes());
                bytes[16..20].copy_from_slice(&slot.crc.to_le_bytes());
            }
        }
    }
}

/// A copy-on-write tree of `E` entries.
#[derive(Debug, Clone)]
pub struct PersistentTree<E> {
    owner: u64,
    entries: ChunkedMap<E>,
    /// `levels[0]` partitions the entries into leaves; `levels[l]` partitions the
    /// nodes of level `l - 1`; the last level holds exactly one node (key 0)
    /// after a persist.
    levels: Vec<BTreeMap<u64, NodeSlot>>,
    /// Per level, the keys of its dirty nodes (each a key of `levels[l]`).
    dirty_nodes: Vec<BTreeSet<u64>>,
    dirty: bool,
}

impl<E: TreeEntry> PersistentTree<E> {
    /// An empty tree whose nodes carry `owner` in their header.
    pub fn new(owner: u64) -> Self {
        Self {
            owner,
            entries: ChunkedMap::new(),
            levels: vec![BTreeMap::from([(0, UNWRITTEN)])],
            dirty_nodes: vec![BTreeSet::from([0])],
            dirty: false,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the tree has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Heap bytes of the entries (exact) and the node partitions (estimated:
    /// a `BTreeMap` slot of 32 bytes plus a third for nodes and slack).
    pub fn memory_bytes(&self) -> usize {
        let slots: usize = self.levels.iter().map(BTreeMap::len).sum();
        let dirty: usize = self.dirty_nodes.iter().map(BTreeSet::len).sum();
        self.entries.memory_bytes() + (slots * (8 + std::mem::size_of::<NodeSlot>()) + dirty * 8) * 4 / 3
    }

    /// An upper bound on the blocks a persist of this tree can write, however
    /// many nodes are dirty: every dirty group of level `l` is rewritten as
    /// `ceil(entries / capacity)` nodes, so a level writes at most its entries
    /// over the capacity plus one per node it has now (each a group), and the
    /// level above indexes at most that many.
    pub fn persist_bound_blocks(&self) -> u64 {
        let mut below = self.entries.len() as u64;
        let mut bound = 0;
        for (level, nodes) in self.levels.iter().enumerate() {
            let written = below.div_ceil(Self::capacity(level) as u64) + nodes.len() as u64;
            bound += written;
            below = written;
        }
        // Levels a persist may add on top, each indexing the one below.
        while below > 1 {
            below = below.div_ceil(INDEX_CAPACITY as u64);
            bound += below;
        }
        bound
    }

    /// Whether a persist would write anything.
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// The entry at `key`.
    pub fn get(&self, key: u64) -> Option<&E> {
        self.entries.get(key)
    }

    /// Entries with keys in `range`, in key order.
    pub fn range<R: RangeBounds<u64>>(&self, range: R) -> impl DoubleEndedIterator<Item = (u64, &E)> + Clone + '_ {
        self.entries.range(range)
    }

    /// All entries in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, &E)> + Clone + '_ {
        self.entries.iter()
    }

    /// Inserts or replaces the entry at `key`.
    pub fn insert(&mut self, key: u64, entry: E) {
        self.mark(key);
        self.entries.insert(key, entry);
    }

    /// Removes the entry at `key`.
    pub fn remove(&mut self, key: u64) -> Option<E> {
        let removed = self.entries.remove(key);
        if removed.is_some() {
            self.mark(key);
        }
        removed
    }

    /// Marks every node dirty and forgets their blocks without releasing them:
    /// the next persist writes the whole tree afresh (used after a restore, when
    /// the old blocks belong to a tree that is no longer the active one).
    pub fn forget_blocks(&mut self) {
        let entries = std::mem::take(&mut self.entries);
        *self = Self::new(self.owner);
        for (key, entry) in entries.iter() {
            self.insert(key, entry.clone());
        }
        self.dirty = true;
    }

    fn mark(&mut self, key: u64) {
        self.mark_node_covering(0, key);
        self.dirty = true;
    }

    /// Marks dirty the node of `level` whose range holds `key`.
    fn mark_node_covering(&mut self, level: usize, key: u64) {
        let (&node, _) = self.levels[level].range(..=key).next_back().expect("a level always covers key 0");
        self.dirty_nodes[level].insert(node);
    }

    /// Every flash block holding a node of this tree.
    pub fn blocks(&self) -> Vec<u64> {
        self.levels.iter().flat_map(|level| level.values().map(|slot| slot.block)).filter(|&block| block != 0).collect()
    }

    /// The root pointer as of the last persist or load.
    pub fn pointer(&self) -> TreePointer {
        if self.entries.is_empty() && !self.dirty {
            return TreePointer::default();
        }
        let top = self.levels.last().expect("at least one level");
        let slot = top.get(&0).copied().unwrap_or(UNWRITTEN);
        TreePointer {
            block: slot.block,
            crc: slot.crc,
            height: u8::try_from(self.levels.len() - 1).expect("a tree of fewer than 256 levels"),
        }
    }

    /// Writes every dirty node to a new block (through `store`) and returns the
    /// new root pointer.
    pub fn persist(&mut self, store: &mut dyn NodeStore) -> Result<TreePointer> {
        if !self.dirty {
            return Ok(self.pointer());
        }
        if self.entries.is_empty() {
            for block in self.blocks() {
                store.release(block);
            }
            *self = Self::new(self.owner);
            return Ok(TreePointer::default());
        }
        let mut level = 0;
        loop {
            let changed_keys = self.persist_level(level, store)?;
            if self.levels[level].len() == 1 {
                // This level has one node: it is the root; drop any level above.
                for upper in self.levels.drain(level + 1..) {
                    upper.values().filter(|slot| slot.block != 0).for_each(|slot| store.release(slot.block));
                }
                self.dirty_nodes.truncate(level + 1);
                break;
            }
            if level + 1 == self.levels.len() {
                self.levels.push(BTreeMap::from([(0, UNWRITTEN)]));
                self.dirty_nodes.push(BTreeSet::from([0]));
            }
            for key in changed_keys {
                self.mark_node_covering(level + 1, key);
            }
            level += 1;
        }
        self.dirty = false;
        // Capacity grown by inserts since the last CP is given back.
        self.entries.trim();
        Ok(self.pointer())
    }

    fn capacity(level: usize) -> usize {
        if level == 0 {
            leaf_capacity(E::SIZE)
        } else {
            INDEX_CAPACITY
        }
    }

    /// The entries of `level` in `[start, end)`: what the nodes written
    /// for that range hold.
    fn node_entries(&self, level: usize, start: u64, end: Option<u64>) -> NodeEntries<'_, E> {
        let range =
            (std::ops::Bound::Included(start), end.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded));
        if level == 0 {
            return NodeEntries::Leaf(self.entries.range(range).collect());
        }
        assert!(self.dirty_nodes[level - 1].range(range).next().is_none(), "children are persisted before parents");
        NodeEntries::Index(
            self.levels[level - 1]
                .range(range)
                .map(|(&key, &slot)| {
                    assert!(slot.block != 0, "children are persisted before parents");
                    (key, slot)
                })
                .collect(),
        )
    }

    fn has_entries(&self, level: usize, start: u64, end: Option<u64>) -> bool {
        let range =
            (std::ops::Bound::Included(start), end.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded));
        if level == 0 {
            self.entries.range(range).next().is_some()
        } else {
            self.levels[level - 1].range(range).next().is_some()
        }
    }

    /// Rewrites the dirty nodes of one level; returns the node keys that
    /// appeared, moved or disappeared (their parents must be rewritten).
    fn persist_level(&mut self, level: usize, store: &mut dyn NodeStore) -> Result<Vec<u64>> {
        self.dirty_successors_of_empty_first_node(level);
        let mut changed_keys = Vec::new();
        // Groups of adjacent dirty nodes, in key order; a group ends at the
        // next clean node (whose key bounds its entries) or at the level's end.
        while let Some(start) = self.dirty_nodes[level].pop_first() {
            let mut group = vec![start];
            let mut end = None;
            for (&key, _) in self.levels[level].range(start + 1..) {
                if !self.dirty_nodes[level].remove(&key) {
                    end = Some(key);
                    break;
                }
                group.push(key);
            }
            for key in group {
                let slot = self.levels[level].remove(&key).expect("a dirty node is a node of its level");
                if slot.block != 0 {
                    store.release(slot.block);
                }
                changed_keys.push(key);
            }
            let written = self.write_nodes(level, start, &self.node_entries(level, start, end), store)?;
            for (key, block, crc) in written {
                self.levels[level].insert(key, NodeSlot { block, crc });
                changed_keys.push(key);
            }
        }
        assert!(self.levels[level].contains_key(&0), "the first node of a level covers key 0");
        Ok(changed_keys)
    }

    /// A dirty first node left without entries cannot simply vanish (key 0 must
    /// stay covered): it is merged with its successor by dirtying that one too.
    fn dirty_successors_of_empty_first_node(&mut self, level: usize) {
        while self.dirty_nodes[level].contains(&0) {
            // Nodes before the first clean one are dirty and form the first group.
            let dirty = &self.dirty_nodes[level];
            let Some(&group_end) = self.levels[level].keys().find(|key| !dirty.contains(key)) else { return };
            if self.has_entries(level, 0, Some(group_end)) {
                return;
            }
            self.dirty_nodes[level].insert(group_end);
        }
    }

    /// Splits `entries` evenly into as few nodes as fit, writes them, and
    /// returns (key, block, crc) per node. The first node keeps `start`.
    fn write_nodes(
        &self,
        level: usize,
        start: u64,
        entries: &NodeEntries<'_, E>,
        store: &mut dyn NodeStore,
    ) -> Result<Vec<(u64, u64, u32)>> {
        let entry_count = entries.len();
        if entry_count == 0 {
            return Ok(Vec::new());
        }
        let capacity = Self::capacity(level);
        let node_count = entry_count.div_ceil(capacity);
        let base = entry_count / node_count;
        let remainder = entry_count % node_count;
        let entry_size = entries.entry_size();
        let mut written = Vec::with_capacity(node_count);
        let mut offset = 0;
        for node in 0..node_count {
            let count = base + usize::from(node < remainder);
            let key = if node == 0 { start } else { entries.key(offset) };
            let mut block = new_block(&Header {
                kind: E::KIND,
                level: u8::try_from(level).expect("a tree of fewer than 256 levels"),
                entry_count: u16::try_from(count).expect("a node's entries fit its block"),
                volume_id: store.volume_id(),
                owner: self.owner,
                generation: store.generation(),
                key,
            });
            let body = &mut block[HEADER_SIZE..HEADER_SIZE + count * entry_size];
            for (index, bytes) in body.chunks_exact_mut(entry_size).enumerate() {
                entries.encode(offset + index, bytes);
            }
            offset += count;
            let crc = seal_block(&mut block);
            let location = store.allocate()?;
            store.stage_write(location, block);
            written.push((key, location, crc));
        }
        Ok(written)
    }

    /// Loads the tree under `pointer`, verifying every node against its parent
    /// pointer (checksum, kind, level, owner, key range, ordering).
    pub fn load(pointer: TreePointer, owner: u64, reader: &mut dyn NodeReader) -> Result<Self> {
        let mut tree = Self::new(owner);
        if pointer.is_empty() {
            return Ok(tree);
        }
        tree.levels = vec![BTreeMap::new(); usize::from(pointer.height) + 1];
        tree.dirty_nodes = vec![BTreeSet::new(); usize::from(pointer.height) + 1];
        let mut visited = HashSet::new();
        tree.load_node(reader, &mut visited, pointer.block, pointer.crc, pointer.height, 0, None)?;
        tree.dirty = false;
        Ok(tree)
    }

    #[allow(clippy::too_many_arguments, reason = "one recursive step carries the parent's expectations")]
    fn load_node(
        &mut self,
        reader: &mut dyn NodeReader,
        visited: &mut HashSet<u64>,
        block: u64,
        crc: u32,
        level: u8,
        key: u64,
        end: Option<u64>,
    ) -> Result<()> {
        let what = E::KIND.name();
        if !visited.insert(block) {
            return Err(corrupt(block, what, "block referenced twice in one tree"));
        }
        let data = reader.read_block(block)?;
        if stored_crc(&data) != crc {
            return Err(corrupt(block, what, format!("checksum does not match the parent pointer's {crc:#010x}")));
        }
        let header = decode_header(&data).map_err(|detail| corrupt(block, what, detail))?;
        let expect = |ok: bool, detail: String| if ok { Ok(()) } else { Err(corrupt(block, what, detail)) };
        expect(header.kind == E::KIND, format!("holds a {}", header.kind.name()))?;
        expect(header.volume_id == reader.volume_id(), format!("belongs to volume {:#x}", header.volume_id))?;
        expect(header.level == level, format!("level {} where {level} was expected", header.level))?;
        expect(header.owner == self.owner, format!("owner {} where {} was expected", header.owner, self.owner))?;
        expect(header.key == key, format!("first key {} where {key} was expected", header.key))?;
        let within = |entry_key: u64| entry_key >= key && end.is_none_or(|end| entry_key < end);
        self.levels[usize::from(level)].insert(key, NodeSlot { block, crc });
        if level == 0 {
            let entries = decode_leaf_entries::<E>(&data, usize::from(header.entry_count))
                .map_err(|detail| corrupt(block, what, detail))?;
            let mut previous = None;
            for (entry_key, entry) in entries {
                expect(within(entry_key), format!("entry key {entry_key} outside the node's range"))?;
                expect(previous.is_none_or(|previous| entry_key > previous), "entries out of order".into())?;
                previous = Some(entry_key);
                self.entries.insert(entry_key, entry);
            }
            return Ok(());
        }
        let children = decode_index_entries(&data, usize::from(header.entry_count))
            .map_err(|detail| corrupt(block, what, detail))?;
        expect(!children.is_empty(), "index node without children".into())?;
        expect(children[0].0 == key, "first child does not start at the node's key".into())?;
        for (position, &(child_key, child_block, child_crc)) in children.iter().enumerate() {
            let child_end = children.get(position + 1).map(|next| next.0).or(end);
            expect(within(child_key), format!("child key {child_key} outside the node's range"))?;
            expect(child_end.is_none_or(|child_end| child_key < child_end), "children out of order".into())?;
            self.load_node(reader, visited, child_block, child_crc, level - 1, child_key, child_end)?;
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::codec::Run;
    use std::collections::HashMap;

    /// An in-memory node store and reader for tree tests.
    #[derive(Default)]
    pub(crate) struct MemoryStore {
        pub blocks: HashMap<u64, Vec<u8>>,
        pub next: u64,
        pub released: Vec<u64>,
    }

    impl NodeStore for MemoryStore {
        fn allocate(&mut self) -> Result<u64> {
            self.next += 1;
            Ok(self.next + 1)
        }
        fn release(&mut self, block: u64) {
            self.released.push(block);
        }
        fn stage_write(&mut self, block: u64, data: Vec<u8>) {
            self.blocks.insert(block, data);
        }
        fn generation(&self) -> u64 {
            1
        }
        fn volume_id(&self) -> u64 {
            5
        }
    }

    impl NodeReader for MemoryStore {
        fn read_block(&mut self, block: u64) -> Result<Vec<u8>> {
            Ok(self.blocks.get(&block).cloned().unwrap_or_else(|| vec![0; crate::codec::BLOCK_SIZE]))
        }
        fn volume_id(&self) -> u64 {
            5
        }
    }

    fn run(location: u64) -> Run {
        Run::new(1, location)
    }

    #[test]
    fn many_entries_persist_and_load_back_through_several_levels() {
        let mut store = MemoryStore::default();
        let mut tree = PersistentTree::<Run>::new(9);
        for key in 0..50_000u64 {
            tree.insert(key * 3, run(key));
        }
        let pointer = tree.persist(&mut store).unwrap();
        assert!(pointer.height >= 2);
        let loaded = PersistentTree::<Run>::load(pointer, 9, &mut store).unwrap();
        assert_eq!(loaded.entries, tree.entries);
        // Change a few entries: only their leaves and ancestors are rewritten.
        let before = store.blocks.len();
        tree.insert(30_000, run(1));
        tree.remove(3);
        let pointer = tree.persist(&mut store).unwrap();
        assert!(store.blocks.len() - before <= 2 * (usize::from(pointer.height) + 1));
        let loaded = PersistentTree::<Run>::load(pointer, 9, &mut store).unwrap();
        assert_eq!(loaded.entries, tree.entries);
        // Remove everything but one entry: the tree shrinks back to one leaf.
        for key in 1..50_000u64 {
            tree.remove(key * 3);
        }
        tree.remove(30_000);
        tree.insert(7, run(7));
        let pointer = tree.persist(&mut store).unwrap();
        assert_eq!(pointer.height, 0);
        let loaded = PersistentTree::<Run>::load(pointer, 9, &mut store).unwrap();
        assert_eq!(loaded.entries.len(), 2);
    }

    #[test]
    fn a_corrupt_node_is_an_error_naming_its_block() {
        let mut store = MemoryStore::default();
        let mut tree = PersistentTree::<Run>::new(1);
        for key in 0..1000u64 {
            tree.insert(key, run(key));
        }
        let pointer = tree.persist(&mut store).unwrap();
        let victim = *store.blocks.keys().find(|&&block| block != pointer.block).unwrap();
        store.blocks.get_mut(&victim).unwrap()[100] ^= 1;
        let error = PersistentTree::<Run>::load(pointer, 1, &mut store).unwrap_err();
        assert!(error.to_string().contains(&format!("block {victim}")), "{error}");
    }

    #[test]
    fn an_emptied_tree_releases_its_blocks() {
        let mut store = MemoryStore::default();
        let mut tree = PersistentTree::<Run>::new(1);
        tree.insert(4, run(4));
        tree.persist(&mut store).unwrap();
        tree.remove(4);
        assert!(tree.persist(&mut store).unwrap().is_empty());
        assert_eq!(store.released.len(), 1);
    }
}
