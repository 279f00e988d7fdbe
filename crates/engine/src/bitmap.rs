//! Bitmaps: one bit per block of a device, in 4 KiB pages.
//!
//! [`Bitmap`] is the in-memory form: reference-counted pages, absent pages being
//! all zero, so the safe copy of the last CP and a snapshot's snapmap share every
//! page the active map has not changed since. [`PersistentBitmap`] adds the
//! on-flash fixed-shape page tree (`pages.rs`) with per-page dirty flags.

use std::sync::Arc;

use crate::codec::{get_u64, put_u64, BlockKind, TreePointer, BITS_PER_PAGE, WORDS_PER_PAGE};
use crate::error::Result;
use crate::io::in_memory;
use crate::pages::{PageContent, PersistentPages};
use crate::tree::NodeReader;

type Page = [u64; WORDS_PER_PAGE];

/// A bitmap of `bit_count` bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bitmap {
    bit_count: u64,
    pages: Vec<Option<Arc<Page>>>,
}

fn locate(bit: u64) -> (usize, usize, u64) {
    let page = in_memory(bit / BITS_PER_PAGE);
    let within = bit % BITS_PER_PAGE;
    (page, in_memory(within / 64), 1u64 << (within % 64))
}

impl Bitmap {
    /// An all-zero bitmap.
    pub fn new(bit_count: u64) -> Self {
        Self { bit_count, pages: vec![None; in_memory(bit_count.div_ceil(BITS_PER_PAGE))] }
    }

    /// Number of bits.
    pub fn bit_count(&self) -> u64 {
        self.bit_count
    }

    /// Number of pages.
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// Bit `bit`.
    pub fn get(&self, bit: u64) -> bool {
        assert!(bit < self.bit_count, "bit {bit} beyond {} bits", self.bit_count);
        let (page, word, mask) = locate(bit);
        self.pages[page].as_ref().is_some_and(|page| page[word] & mask != 0)
    }

    /// Sets bit `bit` to `value`; returns whether it changed.
    pub fn put(&mut self, bit: u64, value: bool) -> bool {
        assert!(bit < self.bit_count, "bit {bit} beyond {} bits", self.bit_count);
        let (page, word, mask) = locate(bit);
        if self.get(bit) == value {
            return false;
        }
        let page = Arc::make_mut(self.pages[page].get_or_insert_with(|| Arc::new([0; WORDS_PER_PAGE])));
        if value {
            page[word] |= mask;
        } else {
            page[word] &= !mask;
        }
        true
    }

    /// Word `word` of page `page` (zero for an absent page).
    pub fn word(&self, page: usize, word: usize) -> u64 {
        self.pages[page].as_ref().map_or(0, |page| page[word])
    }

    /// Whether page `page` is all zero.
    pub fn page_is_zero(&self, page: usize) -> bool {
        self.pages[page].as_ref().is_none_or(|page| page.iter().all(|&word| word == 0))
    }

    /// Whether page `page` is the same as `other`'s (shared or equal).
    pub fn page_equals(&self, other: &Bitmap, page: usize) -> bool {
        match (&self.pages[page], &other.pages[page]) {
            (Some(mine), Some(theirs)) => Arc::ptr_eq(mine, theirs) || mine == theirs,
            _ => self.page_is_zero(page) && other.page_is_zero(page),
        }
    }

    /// Replaces word `word` of page `page`.
    pub fn set_word(&mut self, page: usize, word: usize, value: u64) {
        if self.word(page, word) == value {
            return;
        }
        Arc::make_mut(self.pages[page].get_or_insert_with(|| Arc::new([0; WORDS_PER_PAGE])))[word] = value;
    }

    /// Number of set bits.
    pub fn count_ones(&self) -> u64 {
        self.pages.iter().flatten().map(|page| page.iter().map(|word| u64::from(word.count_ones())).sum::<u64>()).sum()
    }

    /// Bits set in `self`, in ascending order.
    pub fn ones(&self) -> impl Iterator<Item = u64> + '_ {
        self.pages.iter().enumerate().flat_map(|(page_index, page)| {
            page.iter().flat_map(move |page| {
                page.iter().enumerate().flat_map(move |(word_index, &word)| {
                    let base = page_index as u64 * BITS_PER_PAGE + word_index as u64 * 64;
                    (0..64).filter(move |bit| word & (1 << bit) != 0).map(move |bit| base + bit)
                })
            })
        })
    }

    /// `self |= other`.
    pub fn or_with(&mut self, other: &Bitmap) {
        assert_eq!(self.bit_count, other.bit_count, "bitmaps of one device");
        for page in 0..self.pages.len() {
            if other.page_is_zero(page) {
                continue;
            }
            for word in 0..WORDS_PER_PAGE {
                let value = self.word(page, word) | other.word(page, word);
                self.set_word(page, word, value);
            }
        }
    }

    /// `self &= !other`.
    pub fn and_not(&mut self, other: &Bitmap) {
        assert_eq!(self.bit_count, other.bit_count, "bitmaps of one device");
        for page in 0..self.pages.len() {
            if other.page_is_zero(page) || self.page_is_zero(page) {
                continue;
            }
            for word in 0..WORDS_PER_PAGE {
                let value = self.word(page, word) & !other.word(page, word);
                self.set_word(page, word, value);
            }
        }
    }

    /// Clears every page below `end_page`.
    pub fn clear_pages_below(&mut self, end_page: usize) {
        let end_page = end_page.min(self.pages.len());
        self.pages[..end_page].fill(None);
    }

    /// Memory held by the pages, in bytes (shared pages counted once per map).
    pub fn memory_bytes(&self) -> usize {
        self.pages.iter().flatten().count() * std::mem::size_of::<Page>()
            + self.pages.len() * std::mem::size_of::<Option<Arc<Page>>>()
    }
}

impl PageContent for Bitmap {
    const PAGE_KIND: BlockKind = BlockKind::BitmapPage;
    const INDEX_KIND: BlockKind = BlockKind::BitmapIndexNode;

    fn page_count(&self) -> usize {
        self.pages.len()
    }

    fn encode_page(&self, page: usize, body: &mut [u8]) {
        for word in 0..WORDS_PER_PAGE {
            put_u64(body, word * 8, self.word(page, word));
        }
    }

    fn decode_page(&mut self, page: usize, body: &[u8]) -> std::result::Result<(), String> {
        let first_bit = page as u64 * BITS_PER_PAGE;
        for word in 0..WORDS_PER_PAGE {
            let value = get_u64(body, word * 8);
            let word_first_bit = first_bit + word as u64 * 64;
            let valid_bits = self.bit_count.saturating_sub(word_first_bit).min(64);
            let valid_mask = if valid_bits == 64 { u64::MAX } else { (1u64 << valid_bits) - 1 };
            if value & !valid_mask != 0 {
                return Err("bits set beyond the end of the device".into());
            }
            self.set_word(page, word, value);
        }
        Ok(())
    }
}

/// A bitmap with its on-flash tree ([`PersistentPages`]).
#[derive(Debug, Clone)]
pub struct PersistentBitmap {
    pages: PersistentPages<Bitmap>,
}

impl PersistentBitmap {
    /// An all-zero bitmap never written.
    pub fn new(bit_count: u64) -> Self {
        Self { pages: PersistentPages::new(Bitmap::new(bit_count)) }
    }

    /// The bits.
    pub fn bits(&self) -> &Bitmap {
        self.pages.content()
    }

    /// Bit `bit`.
    pub fn get(&self, bit: u64) -> bool {
        self.bits().get(bit)
    }

    /// Sets bit `bit` to `value`, marking its page dirty if it changed.
    pub fn put(&mut self, bit: u64, value: bool) -> bool {
        if self.get(bit) == value {
            return false;
        }
        self.pages.page_mut(in_memory(bit / BITS_PER_PAGE)).put(bit, value)
    }

    /// Replaces the bits wholesale (restore, summary rebuild); every page is
    /// rewritten and the old blocks are forgotten, not released.
    pub fn replace_forgetting_blocks(&mut self, bits: Bitmap) {
        assert_eq!(bits.bit_count(), self.bits().bit_count(), "same device");
        self.pages.replace_forgetting_blocks(bits);
    }

    /// The page tree, for the CP that persists it.
    pub fn pages_mut(&mut self) -> &mut PersistentPages<Bitmap> {
        &mut self.pages
    }

    /// The page tree.
    pub fn pages(&self) -> &PersistentPages<Bitmap> {
        &self.pages
    }

    /// Blocks of the on-flash tree: the most a CP can write for this bitmap.
    pub fn tree_block_count(&self) -> u64 {
        self.pages.tree_block_count()
    }

    /// Every flash block of the tree.
    pub fn blocks(&self) -> Vec<u64> {
        self.pages.blocks()
    }

    /// Loads a bitmap of `bit_count` bits, verifying every block.
    pub fn load(pointer: TreePointer, bit_count: u64, reader: &mut dyn NodeReader) -> Result<Self> {
        Ok(Self { pages: PersistentPages::load(pointer, Bitmap::new(bit_count), reader)? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::tests::MemoryStore;
    use crate::tree::NodeStore;

    fn persist(bitmap: &mut PersistentBitmap, store: &mut MemoryStore) -> TreePointer {
        let pages = bitmap.pages_mut();
        // Index nodes are dirtied by their children's moves: repeat until none is.
        while !pages.needing_location().is_empty() {
            for which in pages.needing_location() {
                let block = store.allocate().unwrap();
                pages.assign(which, block);
            }
        }
        let (writes, pointer) = pages.encode_assigned(5, 1);
        for (block, data) in writes {
            store.stage_write(block, data);
        }
        pointer
    }

    #[test]
    fn a_multi_level_bitmap_round_trips_and_rewrites_only_changed_pages() {
        let bit_count = BITS_PER_PAGE * (crate::codec::PAGE_INDEX_CAPACITY as u64 + 3) - 17;
        let mut bitmap = PersistentBitmap::new(bit_count);
        for bit in (0..bit_count).step_by(9973) {
            bitmap.put(bit, true);
        }
        let mut store = MemoryStore::default();
        let pointer = persist(&mut bitmap, &mut store);
        assert_eq!(pointer.height, 2);
        let loaded = PersistentBitmap::load(pointer, bit_count, &mut store).unwrap();
        assert_eq!(loaded.bits(), bitmap.bits());
        let written_before = store.blocks.len();
        bitmap.put(5, true);
        let pointer = persist(&mut bitmap, &mut store);
        assert_eq!(store.blocks.len() - written_before, 3, "one page, its index node and the root");
        let loaded = PersistentBitmap::load(pointer, bit_count, &mut store).unwrap();
        assert!(loaded.get(5));
        assert_eq!(loaded.bits().count_ones(), bitmap.bits().count_ones());
    }

    #[test]
    fn shared_pages_are_copied_on_write() {
        let mut first = Bitmap::new(100_000);
        first.put(3, true);
        let second = first.clone();
        first.put(4, true);
        assert!(!second.get(4));
        assert!(first.page_equals(&second, 2));
        assert!(!first.page_equals(&second, 0));
        assert_eq!(first.ones().collect::<Vec<_>>(), vec![3, 4]);
    }
}
