//! Delete logging: where a data block the active tree lets go of goes.
//!
//! Without a log (`none`) it is freed at once: its activemap bit is cleared
//! and it is pinned until the next CP is durable. With a log (`tlog`,
//! `bflog`) it is appended to the log, which *owns* it — its activemap bit
//! stays set — until the log's own work *punches* it, in sorted bunches,
//! into the activemap through the same free. So random frees become local,
//! sequential activemap updates spread over many CPs (docs/wafl.md).
//!
//! This module owns the one place a freed data block is handed over
//! ([`Volume::let_go_of_data_block`]) and the one place it is punched
//! ([`Volume::punch_data_block`]); the policies (`tlog.rs`, `bflog.rs`) are
//! pure and talk to the persistent tree through a [`LogSink`].
//!
//! Invariants: a logged block is set in the activemap and used by no extent;
//! no block is logged twice; the log's entries are exactly its persistent
//! tree's, which a CP writes with the other metadata (docs/format.md,
//! "Delete log"), so the log is restored on open and checked by fsck.

mod bflog;
mod tlog;

use proxima_device::BlockDevice;
use serde::Serialize;

use crate::codec::{
    leaf_capacity, DeleteLogEntry, TreeEntry, TreePointer, BITS_PER_PAGE, SUPERBLOCK_FLAG_DELETE_LOG_BATCHED,
    SUPERBLOCK_FLAG_DELETE_LOG_TREE,
};
use crate::error::Result;
use crate::tree::{NodeReader, NodeStore, PersistentTree};
use crate::volume::Volume;

use bflog::{BatchedFreeLog, BatchedSizes};
use tlog::{TreeLog, TreeSizes};

/// The key of a batched free log's header entry.
const HEADER_KEY: u64 = 0;
/// Log entries one 4 KiB log block holds.
pub const ENTRIES_PER_LOG_BLOCK: u64 = leaf_capacity(DeleteLogEntry::SIZE) as u64;
/// A tree log's size: the blocks it may hold, per million blocks of the
/// device (1.5 %).
const TREE_LOG_ENTRIES_PER_MILLION: u64 = 15_000;
/// A batched free log's size (all three logs), per million (0.5 %).
const BATCHED_LOG_ENTRIES_PER_MILLION: u64 = 5_000;
/// Activemap pages a tree-log leaf aims to cover (the paper's 4 to 6).
const TREE_LEAF_PAGES: u64 = 5;
/// Smallest log, in blocks it may hold, whatever the device's size.
const MIN_LOG_ENTRIES: u64 = 64;
/// Log blocks a batched free log sorts together (one chunk).
const CHUNK_LOG_BLOCKS: u64 = 4;

/// How a volume's data-device frees reach the activemap. Chosen when the
/// volume is formatted and kept in its superblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeleteLogMode {
    /// Frees clear their activemap bits at once.
    #[default]
    None,
    /// A tree log (TLog).
    #[serde(rename = "tlog")]
    Tree,
    /// A batched free log (BFLog).
    #[serde(rename = "bflog")]
    Batched,
}

impl DeleteLogMode {
    /// Every mode, in the order reports list them.
    pub const ALL: [DeleteLogMode; 3] = [DeleteLogMode::None, DeleteLogMode::Tree, DeleteLogMode::Batched];

    /// The name the command line and reports use.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Tree => "tlog",
            Self::Batched => "bflog",
        }
    }

    /// The mode named `text`.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mode| mode.name() == text)
    }

    /// The superblock flags of this mode.
    pub(crate) fn flags(self) -> u32 {
        match self {
            Self::None => 0,
            Self::Tree => SUPERBLOCK_FLAG_DELETE_LOG_TREE,
            Self::Batched => SUPERBLOCK_FLAG_DELETE_LOG_BATCHED,
        }
    }

    /// The mode superblock flags name.
    pub(crate) fn from_flags(flags: u32) -> Self {
        if flags & SUPERBLOCK_FLAG_DELETE_LOG_TREE != 0 {
            Self::Tree
        } else if flags & SUPERBLOCK_FLAG_DELETE_LOG_BATCHED != 0 {
            Self::Batched
        } else {
            Self::None
        }
    }

    /// Blocks the log may hold on a device of `block_count` blocks: the
    /// paper's size (1.5 % for TLog, 0.5 % for BFLog) read as the share of
    /// the volume that may wait in the log (docs/wafl.md, "Size").
    pub fn capacity_entries(self, block_count: u64) -> u64 {
        let per_million = match self {
            Self::None => return 0,
            Self::Tree => TREE_LOG_ENTRIES_PER_MILLION,
            Self::Batched => BATCHED_LOG_ENTRIES_PER_MILLION,
        };
        (block_count * per_million / 1_000_000).max(MIN_LOG_ENTRIES)
    }

    /// Log leaves (4 KiB flash blocks) the log's entries fill when it is full.
    pub fn size_blocks(self, block_count: u64) -> u64 {
        self.capacity_entries(block_count).div_ceil(ENTRIES_PER_LOG_BLOCK)
    }
}

fn tree_sizes(block_count: u64) -> TreeSizes {
    let pages = block_count.div_ceil(BITS_PER_PAGE).max(1);
    let leaf_count = (pages / TREE_LEAF_PAGES).max(1).next_power_of_two();
    let node_count = 2 * leaf_count - 1;
    let node_capacity = (DeleteLogMode::Tree.capacity_entries(block_count) / node_count).max(16);
    TreeSizes { block_count: block_count.max(1), leaf_count, node_capacity }
}

fn batched_sizes(block_count: u64) -> BatchedSizes {
    let capacity_entries = DeleteLogMode::Batched.capacity_entries(block_count);
    // The active log rotates at a quarter: the three logs together, with the
    // next batch filling while one sorts and merges and one is punched, stay
    // within the capacity in steady state.
    let rotate_entries = (capacity_entries / 4).max(1);
    BatchedSizes {
        capacity_entries,
        rotate_entries,
        chunk_entries: (CHUNK_LOG_BLOCKS * ENTRIES_PER_LOG_BLOCK).min(rotate_entries),
        bunch_entries: ENTRIES_PER_LOG_BLOCK.min(rotate_entries),
    }
}

/// Where a policy's changes go: the persistent tree, and the blocks punched.
pub(crate) trait LogSink {
    /// Sets the entry at `key`.
    fn put(&mut self, key: u64, block: u64);
    /// Removes the entry at `key`.
    fn remove(&mut self, key: u64);
    /// `block` leaves the log for the activemap.
    fn punch(&mut self, block: u64);
}

struct TreeSink<'a> {
    tree: &'a mut PersistentTree<DeleteLogEntry>,
    punched: &'a mut Vec<u64>,
}

impl LogSink for TreeSink<'_> {
    fn put(&mut self, key: u64, block: u64) {
        self.tree.insert(key, DeleteLogEntry { block });
    }

    fn remove(&mut self, key: u64) {
        self.tree.remove(key);
    }

    fn punch(&mut self, block: u64) {
        self.punched.push(block);
    }
}

#[derive(Debug, Clone)]
enum Policy {
    Off,
    Tree(TreeLog),
    Batched(BatchedFreeLog),
}

/// Counters of a delete log since the volume was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DeleteLogStats {
    /// Blocks appended to the log.
    pub appended_blocks: u64,
    /// Blocks punched from the log into the activemap.
    pub punched_blocks: u64,
    /// Data blocks that reached the activemap during the last CP's epoch
    /// (freed directly or punched): the rate space is coming back.
    pub reclaimed_blocks_last_checkpoint: u64,
}

/// The delete log of the data device and its persistent tree.
#[derive(Debug, Clone)]
pub(crate) struct DeleteLog {
    mode: DeleteLogMode,
    policy: Policy,
    tree: PersistentTree<DeleteLogEntry>,
    stats: DeleteLogStats,
    reclaimed_this_epoch: u64,
    appended_this_epoch: u64,
}

impl DeleteLog {
    /// An empty log of `mode` over a device of `block_count` blocks.
    pub(crate) fn new(mode: DeleteLogMode, block_count: u64) -> Self {
        let tree = PersistentTree::new(0);
        let policy = match mode {
            DeleteLogMode::None => Policy::Off,
            DeleteLogMode::Tree => Policy::Tree(TreeLog::new(tree_sizes(block_count))),
            DeleteLogMode::Batched => Policy::Batched(BatchedFreeLog::new(batched_sizes(block_count))),
        };
        Self { mode, policy, tree, stats: DeleteLogStats::default(), reclaimed_this_epoch: 0, appended_this_epoch: 0 }
    }

    /// Loads the log under `pointer`, checking its structure.
    pub(crate) fn load(
        mode: DeleteLogMode,
        pointer: TreePointer,
        block_count: u64,
        reader: &mut dyn NodeReader,
    ) -> Result<Self> {
        let tree = PersistentTree::<DeleteLogEntry>::load(pointer, 0, reader)?;
        let entries: Vec<(u64, u64)> = tree.iter().map(|(key, entry)| (key, entry.block)).collect();
        let policy = policy_from_entries(mode, block_count, &entries)
            .map_err(|detail| crate::error::corrupt(pointer.block, "delete log", detail))?;
        Ok(Self {
            mode,
            policy,
            tree,
            stats: DeleteLogStats::default(),
            reclaimed_this_epoch: 0,
            appended_this_epoch: 0,
        })
    }

    /// The mode.
    pub(crate) fn mode(&self) -> DeleteLogMode {
        self.mode
    }

    /// Blocks waiting in the log.
    pub(crate) fn len(&self) -> u64 {
        match &self.policy {
            Policy::Off => 0,
            Policy::Tree(log) => log.len(),
            Policy::Batched(log) => log.len(),
        }
    }

    /// Counters since open.
    pub(crate) fn stats(&self) -> DeleteLogStats {
        self.stats
    }

    /// Logs `block`; returns the blocks the work it paid for punched (`None`:
    /// no log, free it directly).
    fn append(&mut self, block: u64) -> Option<Vec<u64>> {
        let mut punched = Vec::new();
        let mut sink = TreeSink { tree: &mut self.tree, punched: &mut punched };
        match &mut self.policy {
            Policy::Off => return None,
            Policy::Tree(log) => log.append(block, &mut sink),
            Policy::Batched(log) => log.append(block, &mut sink),
        }
        self.stats.appended_blocks += 1;
        self.appended_this_epoch += 1;
        self.count_punched(punched.len());
        Some(punched)
    }

    /// Punches every block; returns them.
    fn drain(&mut self) -> Vec<u64> {
        let mut punched = Vec::new();
        let mut sink = TreeSink { tree: &mut self.tree, punched: &mut punched };
        match &mut self.policy {
            Policy::Off => {}
            Policy::Tree(log) => log.idle_work(u64::MAX, &mut sink),
            Policy::Batched(log) => log.drain(&mut sink),
        }
        self.count_punched(punched.len());
        punched
    }

    /// Idle work of up to `entries` blocks; returns the blocks punched.
    fn idle_work(&mut self, entries: u64) -> Vec<u64> {
        let mut punched = Vec::new();
        let mut sink = TreeSink { tree: &mut self.tree, punched: &mut punched };
        match &mut self.policy {
            Policy::Off => {}
            Policy::Tree(log) => log.idle_work(entries, &mut sink),
            Policy::Batched(log) => log.idle_work(entries, &mut sink),
        }
        self.count_punched(punched.len());
        punched
    }

    fn count_punched(&mut self, count: usize) {
        self.stats.punched_blocks += count as u64;
    }

    /// Blocks the log's idle work takes on in one CP: one log block's worth.
    fn idle_entries_per_checkpoint(&self) -> u64 {
        ENTRIES_PER_LOG_BLOCK
    }

    /// Writes the dirty log nodes and returns the root; ends the epoch's counts.
    pub(crate) fn persist(&mut self, store: &mut dyn NodeStore) -> Result<TreePointer> {
        self.stats.reclaimed_blocks_last_checkpoint = self.reclaimed_this_epoch;
        self.reclaimed_this_epoch = 0;
        self.appended_this_epoch = 0;
        self.tree.persist(store)
    }

    /// Flash blocks kept for what the log may write in the next CP beyond
    /// what the records it pays for bound: every node rewritten (with room
    /// for an epoch's growth) and every data-activemap block its punches
    /// may dirty.
    pub(crate) fn reserve_blocks(&self, data_activemap_blocks: u64) -> u64 {
        if self.mode == DeleteLogMode::None {
            return 0;
        }
        2 * self.tree.persist_bound_blocks() + data_activemap_blocks + 8
    }

    /// An upper bound on the blocks a persist of the log writes.
    pub(crate) fn persist_bound_blocks(&self) -> u64 {
        if self.mode == DeleteLogMode::None {
            return 0;
        }
        self.tree.persist_bound_blocks()
    }

    /// The log after a restore adopted a snapshot's tree: empty (a snapshot
    /// is taken of a drained log), its old nodes forgotten (the adopted
    /// flash activemap does not hold them; the safe copies protect them
    /// until the CP).
    pub(crate) fn reset_after_restore(&mut self, block_count: u64) {
        let stats = self.stats;
        *self = Self::new(self.mode, block_count);
        self.stats = stats;
    }
}

/// Rebuilds a policy from persisted entries; fsck uses it to check a log.
fn policy_from_entries(
    mode: DeleteLogMode,
    block_count: u64,
    entries: &[(u64, u64)],
) -> std::result::Result<Policy, String> {
    if let Some(&(_, block)) = entries
        .iter()
        .find(|&&(key, block)| !(mode == DeleteLogMode::Batched && key == HEADER_KEY) && block >= block_count)
    {
        return Err(format!("logs block {block}, beyond the data device"));
    }
    let logged = match mode {
        DeleteLogMode::Batched => entries.len().saturating_sub(1),
        _ => entries.len(),
    } as u64;
    let capacity = mode.capacity_entries(block_count);
    // Appends past the capacity force work at once, so a CP never sees more
    // than one over it.
    if logged > capacity + 1 {
        return Err(format!("holds {logged} blocks, over its capacity of {capacity}"));
    }
    Ok(match mode {
        DeleteLogMode::None if entries.is_empty() => Policy::Off,
        DeleteLogMode::None => return Err("a volume without a delete log has log entries".into()),
        DeleteLogMode::Tree => Policy::Tree(TreeLog::from_entries(tree_sizes(block_count), entries)?),
        DeleteLogMode::Batched => Policy::Batched(BatchedFreeLog::from_entries(batched_sizes(block_count), entries)?),
    })
}

/// What fsck learns of a persisted delete log: its data blocks and nodes.
pub(crate) struct CheckedLog {
    /// The data blocks it holds, one per entry (duplicates kept for the
    /// caller to find).
    pub blocks: Vec<u64>,
    /// Flash blocks of its nodes.
    pub node_blocks: Vec<u64>,
}

/// Loads and checks the delete log under `pointer` for fsck.
pub(crate) fn check_persisted(
    mode: DeleteLogMode,
    pointer: TreePointer,
    block_count: u64,
    reader: &mut dyn NodeReader,
) -> std::result::Result<CheckedLog, String> {
    let tree = PersistentTree::<DeleteLogEntry>::load(pointer, 0, reader).map_err(|error| error.to_string())?;
    let entries: Vec<(u64, u64)> = tree.iter().map(|(key, entry)| (key, entry.block)).collect();
    policy_from_entries(mode, block_count, &entries)?;
    let blocks = entries
        .iter()
        .filter(|&&(key, _)| !(mode == DeleteLogMode::Batched && key == HEADER_KEY))
        .map(|&(_, block)| block)
        .collect();
    Ok(CheckedLog { blocks, node_blocks: tree.blocks() })
}

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    /// The active tree lets go of data block `block`: it goes to the delete
    /// log, or straight to the activemap without one. A block the layout
    /// keeps as a frame home (the in-place layout's frame array, which
    /// writes its next version back there) is never logged.
    pub(crate) fn let_go_of_data_block(&mut self, block: u64) {
        if self.layout.is_frame_home(block) {
            return self.punch_data_block(block);
        }
        match self.delete_log.append(block) {
            None => self.punch_data_block(block),
            Some(punched) => punched.into_iter().for_each(|block| self.punch_data_block(block)),
        }
    }

    /// `block` leaves the active tree's ownership for the activemap: freed
    /// (or moved to the summary, if a snapshot holds it).
    fn punch_data_block(&mut self, block: u64) {
        debug_assert_eq!(self.refcounts.get(block), 0, "a block let go of is shared by no extent");
        self.stats.data_blocks_freed += 1;
        self.delete_log.reclaimed_this_epoch += 1;
        self.data_space.free(block);
        // A frame whose holders all read copies is held by none.
        self.release_frame_if_copied(block);
    }

    /// The delete log's work at the start of a CP: an idle log (no block
    /// appended since the last CP) punches up to a log block's worth.
    pub(crate) fn delete_log_checkpoint_work(&mut self) {
        if self.delete_log.appended_this_epoch == 0 && self.delete_log.len() > 0 {
            let entries = self.delete_log.idle_entries_per_checkpoint();
            self.delete_log.idle_work(entries).into_iter().for_each(|block| self.punch_data_block(block));
        }
    }

    /// Background reclamation: the delete log does the work `blocks` frees
    /// would have paid for (BFLog: that many blocks sorted, merged and
    /// punched; TLog: nodes pushed down or punched whole until that many
    /// blocks moved), without the frees. Returns the blocks punched; their
    /// space is allocatable once the next CP is durable.
    pub fn reclaim_delete_log(&mut self, blocks: u64) -> Result<u64> {
        self.guarded(|volume| {
            let punched = volume.delete_log.idle_work(blocks);
            let count = punched.len() as u64;
            punched.into_iter().for_each(|block| volume.punch_data_block(block));
            Ok(count)
        })
    }

    /// Punches every block of the delete log (before a snapshot is taken, so
    /// that a snapshot's activemap is exactly what its tree uses).
    pub(crate) fn drain_delete_log(&mut self) {
        let punched = self.delete_log.drain();
        punched.into_iter().for_each(|block| self.punch_data_block(block));
    }

    /// The volume's delete-log mode.
    pub fn delete_log_mode(&self) -> DeleteLogMode {
        self.delete_log.mode()
    }

    /// Data blocks waiting in the delete log (allocated until punched).
    pub fn delete_log_blocks(&self) -> u64 {
        self.delete_log.len()
    }

    /// The delete log's counters since open.
    pub fn delete_log_stats(&self) -> DeleteLogStats {
        self.delete_log.stats()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A sink that keeps the entries as a map and the punched blocks in order.
    #[derive(Debug, Default)]
    pub(crate) struct RecordingSink {
        pub entries: BTreeMap<u64, u64>,
        pub punched: Vec<u64>,
    }

    impl LogSink for RecordingSink {
        fn put(&mut self, key: u64, block: u64) {
            self.entries.insert(key, block);
        }

        fn remove(&mut self, key: u64) {
            assert!(self.entries.remove(&key).is_some(), "removes an entry that exists: {key:#x}");
        }

        fn punch(&mut self, block: u64) {
            self.punched.push(block);
        }
    }

    #[test]
    fn sizes_follow_the_paper() {
        let block_count = 1 << 28; // 1 TiB of 4 KiB blocks
        assert_eq!(DeleteLogMode::Tree.capacity_entries(block_count), block_count * 15 / 1000);
        assert_eq!(DeleteLogMode::Batched.capacity_entries(block_count), block_count * 5 / 1000);
        assert_eq!(DeleteLogMode::Batched.capacity_entries(1024), 64, "the smallest log");
        let tree = tree_sizes(block_count);
        let leaf_pages = block_count.div_ceil(BITS_PER_PAGE) / tree.leaf_count;
        assert!((4..=6).contains(&leaf_pages), "a leaf covers {leaf_pages} activemap pages");
        assert_eq!(DeleteLogMode::parse("bflog"), Some(DeleteLogMode::Batched));
        for mode in DeleteLogMode::ALL {
            assert_eq!(DeleteLogMode::from_flags(mode.flags()), mode);
        }
    }
}
