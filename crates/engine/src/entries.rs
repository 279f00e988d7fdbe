//! One fixed-width entry per device block, in pages of one block body each:
//! what the checksum tables (a crc32c per block) and the refcount file (a
//! 16-bit count per block) hold in memory and write to their page trees
//! (`pages.rs`). A page never written reads as zero and takes no memory.

use crate::codec::{get_u16, get_u32, put_u16, put_u32, BODY_SIZE};
use crate::io::in_memory;

/// An entry type: its width in a page body and its little-endian coding.
pub(crate) trait Entry: Copy + Default + PartialEq + std::fmt::Debug {
    /// A page of entries (one block body's worth).
    type Page: AsRef<[Self]> + AsMut<[Self]> + Clone + PartialEq + Eq + std::fmt::Debug;
    /// Bytes of one entry.
    const BYTES: usize;
    /// A page of zero entries.
    fn zero_page() -> Box<Self::Page>;
    /// Writes `self` at `offset` of `body`.
    fn put(self, body: &mut [u8], offset: usize);
    /// Reads the entry at `offset` of `body`.
    fn get(body: &[u8], offset: usize) -> Self;
}

/// `Entry` for an unsigned integer, coded by `put` and `get`.
macro_rules! integer_entry {
    ($integer:ty, $put:ident, $get:ident) => {
        impl Entry for $integer {
            type Page = [$integer; BODY_SIZE / std::mem::size_of::<$integer>()];
            const BYTES: usize = std::mem::size_of::<$integer>();
            fn zero_page() -> Box<Self::Page> {
                Box::new([0; BODY_SIZE / std::mem::size_of::<$integer>()])
            }
            fn put(self, body: &mut [u8], offset: usize) {
                $put(body, offset, self);
            }
            fn get(body: &[u8], offset: usize) -> Self {
                $get(body, offset)
            }
        }
    };
}

integer_entry!(u16, put_u16, get_u16);
integer_entry!(u32, put_u32, get_u32);

/// `block_count` entries of type `E`, zero until set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entries<E: Entry> {
    block_count: u64,
    pages: Vec<Option<Box<E::Page>>>,
}

impl<E: Entry> Entries<E> {
    /// Entries in one page.
    pub(crate) const PER_PAGE: u64 = (BODY_SIZE / E::BYTES) as u64;

    /// `block_count` zero entries.
    pub(crate) fn new(block_count: u64) -> Self {
        Self { block_count, pages: vec![None; in_memory(block_count.div_ceil(Self::PER_PAGE))] }
    }

    /// The page and slot of `block`'s entry.
    pub(crate) fn locate(block: u64) -> (usize, usize) {
        (in_memory(block / Self::PER_PAGE), in_memory(block % Self::PER_PAGE))
    }

    /// The entry of `block`.
    pub(crate) fn get(&self, block: u64) -> E {
        assert!(block < self.block_count, "block {block} beyond {} entries", self.block_count);
        let (page, slot) = Self::locate(block);
        self.pages[page].as_deref().map_or_else(E::default, |page| slots::<E>(page)[slot])
    }

    /// Sets the entry of `block`.
    pub(crate) fn set(&mut self, block: u64, entry: E) {
        assert!(block < self.block_count, "block {block} beyond {} entries", self.block_count);
        let (page, slot) = Self::locate(block);
        slots_mut::<E>(self.pages[page].get_or_insert_with(E::zero_page))[slot] = entry;
    }

    /// The nonzero entries with their blocks, in block order.
    pub(crate) fn nonzero(&self) -> impl Iterator<Item = (u64, E)> + '_ {
        self.pages.iter().enumerate().flat_map(|(page, entries)| {
            entries.iter().flat_map(move |entries| {
                slots::<E>(entries)
                    .iter()
                    .enumerate()
                    .filter(|(_, &entry)| entry != E::default())
                    .map(move |(slot, &entry)| (page as u64 * Self::PER_PAGE + slot as u64, entry))
            })
        })
    }

    /// Heap bytes of the pages.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.pages.iter().flatten().count() * std::mem::size_of::<E::Page>()
            + self.pages.len() * std::mem::size_of::<Option<Box<E::Page>>>()
    }

    /// Pages (written or not).
    pub(crate) fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// Writes page `page` into `body` (zeroed by the caller).
    pub(crate) fn encode_page(&self, page: usize, body: &mut [u8]) {
        if let Some(entries) = &self.pages[page] {
            for (slot, &entry) in slots::<E>(entries).iter().enumerate() {
                entry.put(body, slot * E::BYTES);
            }
        }
    }

    /// Reads page `page` from `body` into this table, whose page must not be
    /// written yet (a load decodes each page once); returns the nonzero
    /// entries it set. `what` names an entry in the complaint about one
    /// beyond the device's end.
    pub(crate) fn decode_page(&mut self, page: usize, body: &[u8], what: &str) -> std::result::Result<u64, String> {
        debug_assert!(self.pages[page].is_none(), "page {page} decoded twice");
        let first = page as u64 * Self::PER_PAGE;
        let mut set = 0;
        for slot in 0..Self::PER_PAGE {
            let entry = E::get(body, in_memory(slot) * E::BYTES);
            if entry == E::default() {
                continue;
            }
            if first + slot >= self.block_count {
                return Err(format!("{what} beyond the end of the device"));
            }
            self.set(first + slot, entry);
            set += 1;
        }
        Ok(set)
    }
}

/// The entries of a page.
fn slots<E: Entry>(page: &E::Page) -> &[E] {
    page.as_ref()
}

/// The entries of a page, to change.
fn slots_mut<E: Entry>(page: &mut E::Page) -> &mut [E] {
    page.as_mut()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_zero_until_set_and_pages_round_trip() {
        let block_count = Entries::<u16>::PER_PAGE * 2 + 3;
        let mut entries = Entries::<u16>::new(block_count);
        assert_eq!(entries.get(block_count - 1), 0);
        let empty = entries.memory_bytes();
        entries.set(block_count - 1, 7);
        entries.set(5, 9);
        assert!(entries.memory_bytes() > empty, "two pages written");
        assert_eq!(entries.nonzero().collect::<Vec<_>>(), [(5, 9), (block_count - 1, 7)]);
        let mut body = vec![0; BODY_SIZE];
        entries.encode_page(2, &mut body);
        let mut decoded = Entries::<u16>::new(block_count);
        assert_eq!(decoded.decode_page(2, &body, "a count"), Ok(1), "one nonzero entry on the page");
        assert_eq!(decoded.get(block_count - 1), 7);
        let error = Entries::<u16>::new(block_count - 1).decode_page(2, &body, "a count").unwrap_err();
        assert_eq!(error, "a count beyond the end of the device");
    }
}
