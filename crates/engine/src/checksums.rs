//! Data checksums: one crc32c per device block, for every block that holds
//! extent data (data-device blocks, and flash blocks holding staged data).
//!
//! The tables are indexed by physical block, not by extent: copy-on-write
//! never changes a block while any tree uses it, so one entry serves the active
//! tree and every snapshot that shares the block, and extent maps keep their
//! run-length form. An entry is set when its block is written (staged, direct,
//! destaged or, for the cache-less in-place layout, overwritten) and logged
//! with it, so replay restores it; entries of free blocks are stale and never
//! read. A table is persisted by each CP as a fixed-shape page tree
//! (`pages.rs`) named by the root set.
//!
//! Verification compares a block read with its entry; a mismatch is never
//! returned as data.

use crate::codec::{BlockKind, TreePointer};
use crate::entries::Entries;
use crate::error::Result;
use crate::pages::{PageContent, PersistentPages};
use crate::tree::NodeReader;

/// Checksums in one table page.
pub const CHECKSUMS_PER_PAGE: u64 = Entries::<u32>::PER_PAGE;

/// One crc32c per block of a device; pages never written read as zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChecksumArray {
    entries: Entries<u32>,
}

impl ChecksumArray {
    /// A table of `block_count` zero entries.
    pub fn new(block_count: u64) -> Self {
        Self { entries: Entries::new(block_count) }
    }

    /// The entry of `block`.
    pub fn get(&self, block: u64) -> u32 {
        self.entries.get(block)
    }

    /// Heap bytes of the pages.
    pub fn memory_bytes(&self) -> usize {
        self.entries.memory_bytes()
    }
}

impl PageContent for ChecksumArray {
    const PAGE_KIND: BlockKind = BlockKind::ChecksumPage;
    const INDEX_KIND: BlockKind = BlockKind::ChecksumIndexNode;

    fn page_count(&self) -> usize {
        self.entries.page_count()
    }

    fn encode_page(&self, page: usize, body: &mut [u8]) {
        self.entries.encode_page(page, body);
    }

    fn decode_page(&mut self, page: usize, body: &[u8]) -> std::result::Result<(), String> {
        self.entries.decode_page(page, body, "a checksum").map(|_| ())
    }
}

/// A checksum table with its on-flash tree.
#[derive(Debug, Clone)]
pub struct PersistentChecksums {
    pages: PersistentPages<ChecksumArray>,
}

impl PersistentChecksums {
    /// A table of `block_count` entries never written.
    pub fn new(block_count: u64) -> Self {
        Self { pages: PersistentPages::new(ChecksumArray::new(block_count)) }
    }

    /// Loads the table `pointer` names.
    pub fn load(pointer: TreePointer, block_count: u64, reader: &mut dyn NodeReader) -> Result<Self> {
        Ok(Self { pages: PersistentPages::load(pointer, ChecksumArray::new(block_count), reader)? })
    }

    /// The entry of `block`.
    pub fn get(&self, block: u64) -> u32 {
        self.pages.content().get(block)
    }

    /// Sets the entry of `block`, marking its page dirty if it changed.
    pub fn set(&mut self, block: u64, crc: u32) {
        if self.get(block) != crc {
            let (page, _) = Entries::<u32>::locate(block);
            self.pages.page_mut(page).entries.set(block, crc);
        }
    }

    /// The page tree, for the CP that persists it.
    pub fn pages_mut(&mut self) -> &mut PersistentPages<ChecksumArray> {
        &mut self.pages
    }

    /// The page tree.
    pub fn pages(&self) -> &PersistentPages<ChecksumArray> {
        &self.pages
    }

    /// Heap bytes of the entries.
    pub fn memory_bytes(&self) -> usize {
        self.pages.content().memory_bytes()
    }
}

/// The checksum tables of a volume that keeps data checksums.
#[derive(Debug, Clone)]
pub(crate) struct Checksums {
    /// One entry per data-device block.
    pub data: PersistentChecksums,
    /// One entry per flash block (used by staged data only).
    pub flash: PersistentChecksums,
}

impl Checksums {
    /// Tables never written, for devices of these sizes.
    pub fn new(data_block_count: u64, flash_block_count: u64) -> Self {
        Self { data: PersistentChecksums::new(data_block_count), flash: PersistentChecksums::new(flash_block_count) }
    }

    /// Blocks of both on-flash trees: the most a CP can write for them.
    pub fn tree_block_count(&self) -> u64 {
        self.data.pages().tree_block_count() + self.flash.pages().tree_block_count()
    }

    /// Heap bytes of both tables' entries.
    pub fn memory_bytes(&self) -> usize {
        self.data.memory_bytes() + self.flash.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::tests::MemoryStore;
    use crate::tree::NodeStore;

    #[test]
    fn a_table_round_trips_through_its_page_tree_and_rewrites_only_changed_pages() {
        let block_count = CHECKSUMS_PER_PAGE * 400 + 7;
        let mut table = PersistentChecksums::new(block_count);
        for block in (0..block_count).step_by(997) {
            table.set(block, 0x1000_0000 | u32::try_from(block).expect("a small test table"));
        }
        let mut store = MemoryStore::default();
        let persist = |table: &mut PersistentChecksums, store: &mut MemoryStore| {
            let pages = table.pages_mut();
            while !pages.needing_location().is_empty() {
                for which in pages.needing_location() {
                    pages.assign(which, store.allocate().unwrap());
                }
            }
            let (writes, pointer) = pages.encode_assigned(5, 1);
            for (block, data) in writes {
                store.stage_write(block, data);
            }
            pointer
        };
        let pointer = persist(&mut table, &mut store);
        assert_eq!(pointer.height, 2, "401 pages need two index levels");
        let loaded = PersistentChecksums::load(pointer, block_count, &mut store).unwrap();
        assert_eq!(loaded.pages().content(), table.pages().content());
        let written_before = store.blocks.len();
        table.set(5, 77);
        let pointer = persist(&mut table, &mut store);
        assert_eq!(store.blocks.len() - written_before, 3, "one page, its index node and the root");
        assert_eq!(PersistentChecksums::load(pointer, block_count, &mut store).unwrap().get(5), 77);
    }
}
