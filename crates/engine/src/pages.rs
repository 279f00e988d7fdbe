//! Fixed-shape trees of pages on flash: the persistent form of every array the
//! engine keeps one entry per device block of (the bitmaps, the checksum
//! tables).
//!
//! The content is `page_count` pages of one 4 KiB block each (level 0, key =
//! page index) under index nodes of at most [`PAGE_INDEX_CAPACITY`] children
//! (level ≥ 1, key = first page index covered), up to one root. The shape is a
//! function of the page count alone, so a CP rewrites exactly the dirty pages
//! and their ancestors. Each page and index kind is its own [`BlockKind`], so a
//! pointer into the wrong array is caught at load.

use crate::codec::{
    decode_header, get_u32, get_u64, new_block, put_u32, put_u64, seal_block, stored_crc, BlockKind, Header,
    TreePointer, BODY_SIZE, HEADER_SIZE, PAGE_INDEX_CAPACITY, PAGE_INDEX_ENTRY_SIZE,
};
use crate::error::{corrupt, Result};
use crate::io::in_memory;
use crate::tree::NodeReader;

/// What a persistent page tree holds: its pages' contents and encoding.
pub trait PageContent {
    /// Kind of a page block.
    const PAGE_KIND: BlockKind;
    /// Kind of an index node above the pages.
    const INDEX_KIND: BlockKind;

    /// Number of pages.
    fn page_count(&self) -> usize;

    /// Writes page `page` into `body` (the block after its header, zeroed).
    fn encode_page(&self, page: usize, body: &mut [u8]);

    /// Reads page `page` from `body`; describes what is wrong with it.
    fn decode_page(&mut self, page: usize, body: &[u8]) -> std::result::Result<(), String>;
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

/// Identifies a block of a page tree: level 0 is a page, level ≥ 1 an index
/// node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageBlock {
    /// 0 for a page.
    pub level: usize,
    /// Index within the level.
    pub index: usize,
}

/// Pages with their on-flash tree and per-block dirty flags.
#[derive(Debug, Clone)]
pub struct PersistentPages<C> {
    content: C,
    /// `slots[0]` are the pages, `slots[l]` the index nodes of level `l`; the last
    /// level has one block, the root.
    slots: Vec<Vec<Slot>>,
    /// The indices of each level's dirty blocks, in the order they became
    /// dirty: a CP visits these, not every slot (a 1 TiB data device has
    /// about 400,000 pages of checksums, refcounts and maps).
    dirty: Vec<Vec<usize>>,
}

fn shape(page_count: usize) -> Vec<usize> {
    let mut counts = vec![page_count.max(1)];
    while *counts.last().expect("nonempty") > 1 {
        counts.push(counts.last().expect("nonempty").div_ceil(PAGE_INDEX_CAPACITY));
    }
    counts
}

/// Blocks of the tree over `page_count` pages (pages and index nodes): what
/// [`PersistentPages::tree_block_count`] gives, without building the tree.
pub(crate) fn tree_block_count_for(page_count: u64) -> u64 {
    shape(in_memory(page_count)).into_iter().map(|count| count as u64).sum()
}

impl<C: PageContent> PersistentPages<C> {
    /// `content` never written: every block dirty.
    pub fn new(content: C) -> Self {
        let shape = shape(content.page_count());
        let slots = shape.iter().map(|&count| vec![FRESH; count]).collect();
        let dirty = shape.iter().map(|&count| (0..count).collect()).collect();
        Self { content, slots, dirty }
    }

    /// Marks block `index` of `level` dirty.
    fn mark_dirty(&mut self, level: usize, index: usize) {
        let slot = &mut self.slots[level][index];
        if !slot.dirty {
            slot.dirty = true;
            self.dirty[level].push(index);
        }
    }

    /// The content.
    pub fn content(&self) -> &C {
        &self.content
    }

    /// The content, to change page `page` of it: the page is marked dirty.
    pub fn page_mut(&mut self, page: usize) -> &mut C {
        self.mark_dirty(0, page);
        &mut self.content
    }

    /// Replaces the content wholesale: every block is rewritten at the next
    /// persist and the old blocks are forgotten, not released.
    pub fn replace_forgetting_blocks(&mut self, content: C) {
        *self = Self::new(content);
    }

    /// Blocks of the on-flash tree (pages and index nodes): the most a CP can
    /// write for it.
    pub fn tree_block_count(&self) -> u64 {
        self.slots.iter().map(|level| level.len() as u64).sum()
    }

    /// Every flash block of the tree.
    pub fn blocks(&self) -> Vec<u64> {
        self.slots.iter().flatten().map(|slot| slot.block).filter(|&block| block != 0).collect()
    }

    /// Dirty blocks that have no new location yet in this CP. An index node is
    /// dirty when one of its children moved.
    pub fn needing_location(&self) -> Vec<PageBlock> {
        let mut result = Vec::new();
        for (level, indices) in self.dirty.iter().enumerate() {
            let start = result.len();
            let slots = &self.slots[level];
            result.extend(
                indices.iter().filter(|&&index| !slots[index].assigned).map(|&index| PageBlock { level, index }),
            );
            // In block order, level by level, as a walk of every slot gives them.
            result[start..].sort_unstable_by_key(|which| which.index);
        }
        result
    }

    /// Gives `which` its new location; returns the old one (0 if none).
    pub fn assign(&mut self, which: PageBlock, block: u64) -> u64 {
        let slot = &mut self.slots[which.level][which.index];
        assert!(slot.dirty, "only a dirty block moves");
        assert!(!slot.assigned, "a block is assigned once per CP");
        let old = slot.block;
        slot.block = block;
        slot.assigned = true;
        if which.level + 1 < self.slots.len() {
            self.mark_dirty(which.level + 1, which.index / PAGE_INDEX_CAPACITY);
        }
        old
    }

    /// Encodes every assigned block (pages, then index levels upward), clears
    /// the dirty flags and returns the blocks to write and the new root.
    pub fn encode_assigned(&mut self, volume_id: u64, generation: u64) -> (Vec<(u64, Vec<u8>)>, TreePointer) {
        let mut writes = Vec::new();
        for level in 0..self.slots.len() {
            let mut indices = std::mem::take(&mut self.dirty[level]);
            indices.sort_unstable();
            for index in indices {
                let slot = self.slots[level][index];
                assert!(slot.assigned, "every dirty block was assigned a location");
                let mut block = self.encode_block(level, index, volume_id, generation);
                let crc = seal_block(&mut block);
                writes.push((slot.block, block));
                self.slots[level][index] = Slot { block: slot.block, crc, dirty: false, assigned: false };
            }
        }
        (writes, self.pointer())
    }

    fn child_count(&self, level: usize, index: usize) -> usize {
        let children = self.slots[level - 1].len();
        (children - index * PAGE_INDEX_CAPACITY).min(PAGE_INDEX_CAPACITY)
    }

    fn header(&self, level: usize, index: usize, volume_id: u64, generation: u64) -> Header {
        let (kind, entry_count, key) = if level == 0 {
            (C::PAGE_KIND, 0, index)
        } else {
            (C::INDEX_KIND, self.child_count(level, index), index * PAGE_INDEX_CAPACITY)
        };
        Header {
            kind,
            level: u8::try_from(level).expect("a page tree is a few levels high"),
            entry_count: u16::try_from(entry_count).expect("an index node's children fit its count"),
            volume_id,
            owner: 0,
            generation,
            key: key as u64,
        }
    }

    fn encode_block(&self, level: usize, index: usize, volume_id: u64, generation: u64) -> Vec<u8> {
        let mut block = new_block(&self.header(level, index, volume_id, generation));
        if level == 0 {
            self.content.encode_page(index, &mut block[HEADER_SIZE..]);
            return block;
        }
        for child in 0..self.child_count(level, index) {
            let slot = self.slots[level - 1][index * PAGE_INDEX_CAPACITY + child];
            assert!(slot.block != 0, "children are placed before their parents");
            assert!(!slot.dirty, "children are encoded before their parents");
            let offset = HEADER_SIZE + child * PAGE_INDEX_ENTRY_SIZE;
            put_u64(&mut block, offset, slot.block);
            put_u32(&mut block, offset + 8, slot.crc);
        }
        block
    }

    /// The root pointer as of the last persist or load.
    pub fn pointer(&self) -> TreePointer {
        let root = self.slots.last().expect("levels")[0];
        TreePointer {
            block: root.block,
            crc: root.crc,
            height: u8::try_from(self.slots.len() - 1).expect("a page tree is a few levels high"),
        }
    }

    /// Loads the tree `pointer` names into `content` (of the right page count),
    /// verifying every block.
    pub fn load(pointer: TreePointer, content: C, reader: &mut dyn NodeReader) -> Result<Self> {
        let mut pages = Self::new(content);
        let height = pages.slots.len() - 1;
        if usize::from(pointer.height) != height {
            return Err(corrupt(
                pointer.block,
                C::INDEX_KIND.name(),
                format!("root of height {} where {height} fits {} pages", pointer.height, pages.content.page_count()),
            ));
        }
        pages.load_block(reader, pointer.block, pointer.crc, height, 0)?;
        // Every block was loaded clean.
        pages.dirty.iter_mut().for_each(Vec::clear);
        Ok(pages)
    }

    fn load_block(
        &mut self,
        reader: &mut dyn NodeReader,
        block: u64,
        crc: u32,
        level: usize,
        index: usize,
    ) -> Result<()> {
        let expected = self.header(level, index, reader.volume_id(), 0);
        let what = expected.kind.name();
        let data = reader.read_block(block)?;
        if stored_crc(&data) != crc {
            return Err(corrupt(block, what, format!("checksum does not match the parent pointer's {crc:#010x}")));
        }
        let header = decode_header(&data).map_err(|detail| corrupt(block, what, detail))?;
        let problem = if header.kind != expected.kind {
            Some(format!("holds a {}", header.kind.name()))
        } else if header.volume_id != expected.volume_id {
            Some(format!("belongs to volume {:#x}", header.volume_id))
        } else if header.level != expected.level || header.key != expected.key {
            Some(format!(
                "level {} key {} where {} and {} were expected",
                header.level, header.key, expected.level, expected.key
            ))
        } else if header.entry_count != expected.entry_count {
            Some(format!("{} children where {} were expected", header.entry_count, expected.entry_count))
        } else {
            None
        };
        if let Some(detail) = problem {
            return Err(corrupt(block, what, detail));
        }
        self.slots[level][index] = Slot { block, crc, dirty: false, assigned: false };
        if level == 0 {
            return self
                .content
                .decode_page(index, &data[HEADER_SIZE..])
                .map_err(|detail| corrupt(block, what, detail));
        }
        for child in 0..self.child_count(level, index) {
            let offset = HEADER_SIZE + child * PAGE_INDEX_ENTRY_SIZE;
            let child_block = get_u64(&data, offset);
            let child_crc = get_u32(&data, offset + 8);
            self.load_block(reader, child_block, child_crc, level - 1, index * PAGE_INDEX_CAPACITY + child)?;
        }
        Ok(())
    }
}

const _: () = assert!(PAGE_INDEX_CAPACITY * PAGE_INDEX_ENTRY_SIZE <= BODY_SIZE);
