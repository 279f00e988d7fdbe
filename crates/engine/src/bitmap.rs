//! Bitmaps: one bit per block of a device, in 4 KiB pages.
//!
//! [`Bitmap`] is the in-memory form: reference-counted pages, absent pages being
//! all zero, so the safe copy of the last CP and a snapshot's snapmap share every
//! page the active map has not changed since. [`PersistentBitmap`] adds the
//! on-flash fixed-shape tree (pages under index nodes) with per-page dirty flags.

use std::sync::Arc;

use crate::codec::{
    decode_header, get_u32, get_u64, new_block, put_u32, put_u64, seal_block, stored_crc, BlockKind, Header,
    TreePointer, BITMAP_INDEX_CAPACITY, BITS_PER_PAGE, HEADER_SIZE, WORDS_PER_PAGE,
};
use crate::error::{corrupt, Result};
use crate::tree::NodeReader;

type Page = [u64; WORDS_PER_PAGE];

/// A bitmap of `bit_count` bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bitmap {
    bit_count: u64,
    pages: Vec<Option<Arc<Page>>>,
}

fn locate(bit: u64) -> (usize, usize, u64) {
    let page = (bit / BITS_PER_PAGE) as usize;
    let within = bit % BITS_PER_PAGE;
    (page, (within / 64) as usize, 1u64 << (within % 64))
}

impl Bitmap {
    /// An all-zero bitmap.
    pub fn new(bit_count: u64) -> Self {
        Self { bit_count, pages: vec![None; bit_count.div_ceil(BITS_PER_PAGE) as usize] }
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    block: u64,
    crc: u32,
    dirty: bool,
    /// A new location was chosen in the CP in progress.
    assigned: bool,
}

const FRESH: Slot = Slot { block: 0, crc: 0, dirty: true, assigned: false };

/// Identifies a block of a persistent bitmap: level 0 is a page, level ≥ 1 an
/// index node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitmapBlock {
    /// 0 for a page.
    pub level: usize,
    /// Index within the level.
    pub index: usize,
}

/// A bitmap with its on-flash tree.
#[derive(Debug, Clone)]
pub struct PersistentBitmap {
    bits: Bitmap,
    /// `slots[0]` are the pages, `slots[l]` the index nodes of level `l`; the last
    /// level has one block, the root.
    slots: Vec<Vec<Slot>>,
}

fn shape(page_count: usize) -> Vec<usize> {
    let mut counts = vec![page_count.max(1)];
    while *counts.last().expect("nonempty") > 1 {
        counts.push(counts.last().expect("nonempty").div_ceil(BITMAP_INDEX_CAPACITY));
    }
    counts
}

impl PersistentBitmap {
    /// An all-zero bitmap never written.
    pub fn new(bit_count: u64) -> Self {
        let bits = Bitmap::new(bit_count);
        let slots = shape(bits.page_count()).into_iter().map(|count| vec![FRESH; count]).collect();
        Self { bits, slots }
    }

    /// The bits.
    pub fn bits(&self) -> &Bitmap {
        &self.bits
    }

    /// Bit `bit`.
    pub fn get(&self, bit: u64) -> bool {
        self.bits.get(bit)
    }

    /// Sets bit `bit` to `value`, marking its page dirty if it changed.
    pub fn put(&mut self, bit: u64, value: bool) -> bool {
        let changed = self.bits.put(bit, value);
        if changed {
            self.slots[0][(bit / BITS_PER_PAGE) as usize].dirty = true;
        }
        changed
    }

    /// Replaces the bits wholesale (restore, summary rebuild); every page is
    /// rewritten and the old blocks are forgotten, not released.
    pub fn replace_forgetting_blocks(&mut self, bits: Bitmap) {
        assert_eq!(bits.bit_count(), self.bits.bit_count(), "same device");
        *self = Self::new(bits.bit_count());
        self.bits = bits;
    }

    /// Blocks of the on-flash tree (pages and index nodes): the most a CP can
    /// write for this bitmap.
    pub fn tree_block_count(&self) -> u64 {
        self.slots.iter().map(|level| level.len() as u64).sum()
    }

    /// Every flash block of the tree.
    pub fn blocks(&self) -> Vec<u64> {
        self.slots.iter().flatten().map(|slot| slot.block).filter(|&block| block != 0).collect()
    }

    /// Dirty blocks that have no new location yet in this CP. An index node is
    /// dirty when one of its children moved.
    pub fn needing_location(&self) -> Vec<BitmapBlock> {
        let mut result = Vec::new();
        for (level, slots) in self.slots.iter().enumerate() {
            for (index, slot) in slots.iter().enumerate() {
                if slot.dirty && !slot.assigned {
                    result.push(BitmapBlock { level, index });
                }
            }
        }
        result
    }

    /// Gives `which` its new location; returns the old one (0 if none).
    pub fn assign(&mut self, which: BitmapBlock, block: u64) -> u64 {
        let slot = &mut self.slots[which.level][which.index];
        assert!(slot.dirty && !slot.assigned, "a block is assigned once per CP");
        let old = slot.block;
        slot.block = block;
        slot.assigned = true;
        if which.level + 1 < self.slots.len() {
            self.slots[which.level + 1][which.index / BITMAP_INDEX_CAPACITY].dirty = true;
        }
        old
    }

    /// Encodes every assigned block (pages, then index levels upward), clears
    /// the dirty flags and returns the blocks to write and the new root.
    pub fn encode_assigned(&mut self, volume_id: u64, generation: u64) -> (Vec<(u64, Vec<u8>)>, TreePointer) {
        let mut writes = Vec::new();
        for level in 0..self.slots.len() {
            for index in 0..self.slots[level].len() {
                let slot = self.slots[level][index];
                if !slot.assigned {
                    assert!(!slot.dirty, "every dirty block was assigned a location");
                    continue;
                }
                let mut block = self.encode_block(level, index, volume_id, generation);
                let crc = seal_block(&mut block);
                writes.push((slot.block, block));
                self.slots[level][index] = Slot { block: slot.block, crc, dirty: false, assigned: false };
            }
        }
        (writes, self.pointer())
    }

    fn encode_block(&self, level: usize, index: usize, volume_id: u64, generation: u64) -> Vec<u8> {
        let child_count = if level == 0 {
            0
        } else {
            let children = self.slots[level - 1].len();
            (children - index * BITMAP_INDEX_CAPACITY).min(BITMAP_INDEX_CAPACITY)
        };
        let mut block = new_block(&Header {
            kind: if level == 0 { BlockKind::BitmapPage } else { BlockKind::BitmapIndexNode },
            level: level as u8,
            entry_count: child_count as u16,
            volume_id,
            owner: 0,
            generation,
            key: if level == 0 { index as u64 } else { (index * BITMAP_INDEX_CAPACITY) as u64 },
        });
        if level == 0 {
            for word in 0..WORDS_PER_PAGE {
                put_u64(&mut block, HEADER_SIZE + word * 8, self.bits.word(index, word));
            }
        } else {
            for child in 0..child_count {
                let slot = self.slots[level - 1][index * BITMAP_INDEX_CAPACITY + child];
                assert!(slot.block != 0 && !slot.dirty, "children are encoded before parents");
                put_u64(&mut block, HEADER_SIZE + child * 12, slot.block);
                put_u32(&mut block, HEADER_SIZE + child * 12 + 8, slot.crc);
            }
        }
        block
    }

    /// The root pointer as of the last persist or load.
    pub fn pointer(&self) -> TreePointer {
        let root = self.slots.last().expect("levels")[0];
        TreePointer { block: root.block, crc: root.crc, height: (self.slots.len() - 1) as u8 }
    }

    /// Loads a bitmap of `bit_count` bits, verifying every block.
    pub fn load(pointer: TreePointer, bit_count: u64, reader: &mut dyn NodeReader) -> Result<Self> {
        let mut bitmap = Self::new(bit_count);
        let height = bitmap.slots.len() - 1;
        if usize::from(pointer.height) != height {
            return Err(corrupt(
                pointer.block,
                "bitmap root",
                format!("height {} where {height} fits {bit_count} bits", pointer.height),
            ));
        }
        bitmap.load_block(reader, pointer.block, pointer.crc, height, 0)?;
        Ok(bitmap)
    }

    fn load_block(
        &mut self,
        reader: &mut dyn NodeReader,
        block: u64,
        crc: u32,
        level: usize,
        index: usize,
    ) -> Result<()> {
        let kind = if level == 0 { BlockKind::BitmapPage } else { BlockKind::BitmapIndexNode };
        let what = kind.name();
        let data = reader.read_block(block)?;
        if stored_crc(&data) != crc {
            return Err(corrupt(block, what, format!("checksum does not match the parent pointer's {crc:#010x}")));
        }
        let header = decode_header(&data).map_err(|detail| corrupt(block, what, detail))?;
        let expected_key = if level == 0 { index } else { index * BITMAP_INDEX_CAPACITY } as u64;
        let problem = if header.kind != kind {
            Some(format!("holds a {}", header.kind.name()))
        } else if header.volume_id != reader.volume_id() {
            Some(format!("belongs to volume {:#x}", header.volume_id))
        } else if usize::from(header.level) != level || header.key != expected_key {
            Some(format!("level {} key {} where {level} and {expected_key} were expected", header.level, header.key))
        } else {
            None
        };
        if let Some(detail) = problem {
            return Err(corrupt(block, what, detail));
        }
        self.slots[level][index] = Slot { block, crc, dirty: false, assigned: false };
        if level == 0 {
            return self.load_page(&data, block, index);
        }
        let children = self.slots[level - 1].len();
        let child_count = (children - index * BITMAP_INDEX_CAPACITY).min(BITMAP_INDEX_CAPACITY);
        if usize::from(header.entry_count) != child_count {
            return Err(corrupt(
                block,
                what,
                format!("{} children where {child_count} were expected", header.entry_count),
            ));
        }
        for child in 0..child_count {
            let child_block = get_u64(&data, HEADER_SIZE + child * 12);
            let child_crc = get_u32(&data, HEADER_SIZE + child * 12 + 8);
            self.load_block(reader, child_block, child_crc, level - 1, index * BITMAP_INDEX_CAPACITY + child)?;
        }
        Ok(())
    }

    fn load_page(&mut self, data: &[u8], block: u64, index: usize) -> Result<()> {
        let first_bit = index as u64 * BITS_PER_PAGE;
        for word in 0..WORDS_PER_PAGE {
            let value = get_u64(data, HEADER_SIZE + word * 8);
            let word_first_bit = first_bit + word as u64 * 64;
            let valid_bits = self.bits.bit_count().saturating_sub(word_first_bit).min(64);
            let valid_mask = if valid_bits == 64 { u64::MAX } else { (1u64 << valid_bits) - 1 };
            if value & !valid_mask != 0 {
                return Err(corrupt(block, "bitmap page", "bits set beyond the end of the device"));
            }
            self.bits.set_word(index, word, value);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::tests::MemoryStore;
    use crate::tree::NodeStore;

    fn persist(bitmap: &mut PersistentBitmap, store: &mut MemoryStore) -> TreePointer {
        for which in bitmap.needing_location() {
            let block = store.allocate().unwrap();
            bitmap.assign(which, block);
        }
        // Index nodes dirtied by their children's moves.
        while !bitmap.needing_location().is_empty() {
            for which in bitmap.needing_location() {
                let block = store.allocate().unwrap();
                bitmap.assign(which, block);
            }
        }
        let (writes, pointer) = bitmap.encode_assigned(5, 1);
        for (block, data) in writes {
            store.stage_write(block, data);
        }
        pointer
    }

    #[test]
    fn a_multi_level_bitmap_round_trips_and_rewrites_only_changed_pages() {
        let bit_count = BITS_PER_PAGE * (BITMAP_INDEX_CAPACITY as u64 + 3) - 17;
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
