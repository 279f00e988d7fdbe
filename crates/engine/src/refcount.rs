//! The refcount file: one 16-bit count per data-device block of the
//! references to it beyond the first (docs/format.md, "Refcount file").
//!
//! A block one extent maps has count 0; a clone that shares it makes it 1,
//! and so on. The activemap bit says whether the active tree uses a block at
//! all; the count says how many more times. A free of a block with a nonzero
//! count decrements the count and leaves the activemap alone
//! ([`Volume::release_data_reference`](crate::Volume) is the one place that
//! decides). Snapshots need no counts of their own: a snapshot's snapmap says
//! which blocks it holds, and a restore recounts the references of the tree
//! it adopts.
//!
//! Invariant (checked by fsck): for every data block, the number of times the
//! active extents map it equals `1 + count` if it is mapped at all, and the
//! count is 0 otherwise. The table is CP state: persisted by each CP as a
//! fixed-shape page tree (`pages.rs`) named by the superblock, so a crash
//! returns it to the last CP's counts and replay of the log re-applies the
//! frees after it through the same decrement.

use crate::codec::{BlockKind, TreePointer};
use crate::entries::Entries;
use crate::error::Result;
use crate::pages::{PageContent, PersistentPages};
use crate::tree::NodeReader;

/// Counts in one refcount page (several times fewer blocks than a bitmap
/// page covers: sixteen bits per block instead of one).
pub const REFCOUNTS_PER_PAGE: u64 = Entries::<u16>::PER_PAGE;

/// One extra-reference count per block; pages never written read as zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefcountArray {
    counts: Entries<u16>,
    /// Blocks whose count is nonzero.
    shared_block_count: u64,
}

impl RefcountArray {
    /// A table of `block_count` zero counts.
    pub fn new(block_count: u64) -> Self {
        Self { counts: Entries::new(block_count), shared_block_count: 0 }
    }

    /// The count of `block`.
    pub fn get(&self, block: u64) -> u16 {
        self.counts.get(block)
    }

    fn set(&mut self, block: u64, count: u16) {
        match (self.counts.get(block), count) {
            (0, 1..) => self.shared_block_count += 1,
            (1.., 0) => self.shared_block_count -= 1,
            _ => {}
        }
        self.counts.set(block, count);
    }

    /// Blocks with a nonzero count.
    pub fn shared_block_count(&self) -> u64 {
        self.shared_block_count
    }

    /// The blocks with a nonzero count and their counts, in block order.
    pub fn nonzero(&self) -> impl Iterator<Item = (u64, u16)> + '_ {
        self.counts.nonzero()
    }
}

impl PageContent for RefcountArray {
    const PAGE_KIND: BlockKind = BlockKind::RefcountPage;
    const INDEX_KIND: BlockKind = BlockKind::RefcountIndexNode;

    fn page_count(&self) -> usize {
        self.counts.page_count()
    }

    fn encode_page(&self, page: usize, body: &mut [u8]) {
        self.counts.encode_page(page, body);
    }

    fn decode_page(&mut self, page: usize, body: &[u8]) -> std::result::Result<(), String> {
        // The page was all zero: every count it sets is a shared block more.
        self.shared_block_count += self.counts.decode_page(page, body, "a refcount")?;
        Ok(())
    }
}

/// The refcount file with its on-flash tree.
#[derive(Debug, Clone)]
pub struct PersistentRefcounts {
    pages: PersistentPages<RefcountArray>,
}

impl PersistentRefcounts {
    /// A file of `block_count` zero counts never written.
    pub fn new(block_count: u64) -> Self {
        Self { pages: PersistentPages::new(RefcountArray::new(block_count)) }
    }

    /// Loads the file `pointer` names (an empty pointer: all counts zero).
    pub fn load(pointer: TreePointer, block_count: u64, reader: &mut dyn NodeReader) -> Result<Self> {
        if pointer.is_empty() {
            // A volume formatted before the file existed, or never written.
            return Ok(Self::new(block_count));
        }
        Ok(Self { pages: PersistentPages::load(pointer, RefcountArray::new(block_count), reader)? })
    }

    /// The count of `block`.
    pub fn get(&self, block: u64) -> u16 {
        self.pages.content().get(block)
    }

    /// Whether another reference to `block` can still be counted.
    pub fn can_increment(&self, block: u64) -> bool {
        self.get(block) < u16::MAX
    }

    /// Counts one more reference to `block`.
    pub fn increment(&mut self, block: u64) {
        let count = self.get(block);
        assert!(count < u16::MAX, "refcount of block {block} overflows");
        let (page, _) = Entries::<u16>::locate(block);
        self.pages.page_mut(page).set(block, count + 1);
    }

    /// Counts one reference to `block` fewer.
    pub fn decrement(&mut self, block: u64) {
        let count = self.get(block);
        assert!(count > 0, "refcount of block {block} is already zero");
        let (page, _) = Entries::<u16>::locate(block);
        self.pages.page_mut(page).set(block, count - 1);
    }

    /// Blocks with a nonzero count.
    pub fn shared_block_count(&self) -> u64 {
        self.pages.content().shared_block_count()
    }

    /// The table.
    pub fn content(&self) -> &RefcountArray {
        self.pages.content()
    }

    /// The page tree, for the CP that persists it.
    pub fn pages_mut(&mut self) -> &mut PersistentPages<RefcountArray> {
        &mut self.pages
    }

    /// The page tree.
    pub fn pages(&self) -> &PersistentPages<RefcountArray> {
        &self.pages
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::tests::MemoryStore;
    use crate::tree::NodeStore;

    fn persist(table: &mut PersistentRefcounts, store: &mut MemoryStore) -> TreePointer {
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
    }

    #[test]
    fn counts_round_trip_through_the_page_tree_and_count_shared_blocks() {
        let block_count = REFCOUNTS_PER_PAGE * 3 + 11;
        let mut table = PersistentRefcounts::new(block_count);
        for block in (0..block_count).step_by(101) {
            for _ in 0..(block % 5) {
                table.increment(block);
            }
        }
        let expected = (0..block_count).step_by(101).filter(|block| block % 5 != 0).count() as u64;
        assert_eq!(table.shared_block_count(), expected);
        let mut store = MemoryStore::default();
        let pointer = persist(&mut table, &mut store);
        let loaded = PersistentRefcounts::load(pointer, block_count, &mut store).unwrap();
        assert_eq!(loaded.content(), table.content());
        assert_eq!(loaded.shared_block_count(), expected);
        table.decrement(101);
        assert_eq!(table.get(101), 0);
        assert_eq!(table.shared_block_count(), expected - 1);
        assert_eq!(table.content().nonzero().count() as u64, expected - 1);
    }

    #[test]
    fn an_empty_pointer_loads_all_zero_counts() {
        let mut store = MemoryStore::default();
        let loaded = PersistentRefcounts::load(TreePointer::default(), 1000, &mut store).unwrap();
        assert_eq!(loaded.shared_block_count(), 0);
        assert_eq!(loaded.get(999), 0);
    }
}
