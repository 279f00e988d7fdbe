//! [`MemoryBackend`]: sparse in-memory exports for tests and as a protocol ceiling.
//!
//! Each export is a map from 4 KiB page index to page, sharded so that concurrent
//! connections rarely contend. A missing page is a hole (reads as zeroes); a
//! [`Page::Zero`] is allocated but known to be zero (left by `write_zeroes` with
//! `NO_HOLE`); a [`Page::Data`] holds bytes. Nothing is cached per connection and
//! every write is visible to every reader once it returns, so flush is a no-op and
//! the exports can honour `NBD_FLAG_CAN_MULTI_CONN`.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::backend::{push_status_extent, AllocationState, Backend, BackendError, Export, ExportInfo};
use crate::backend::{StatusExtent, ZeroOptions};

/// Bytes per page of a memory export.
pub const MEMORY_PAGE_BYTES: u64 = 4096;
/// [`MEMORY_PAGE_BYTES`] as a length in memory.
const PAGE_BYTES: usize = 4096;
const _: () = assert!(MEMORY_PAGE_BYTES == PAGE_BYTES as u64);
const SHARD_COUNT: usize = 64;

/// A set of in-memory exports.
#[derive(Debug, Default)]
pub struct MemoryBackend {
    exports: Vec<Arc<MemoryExport>>,
}

impl MemoryBackend {
    /// A backend with no exports.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an export of `size_bytes` (a multiple of 512) that reads as zeroes.
    ///
    /// Panics if the name is taken or the size is not a multiple of 512: both are
    /// mistakes of the caller setting up the backend, not client input.
    pub fn add_export(&mut self, name: &str, size_bytes: u64, read_only: bool) -> Arc<MemoryExport> {
        assert!(size_bytes.is_multiple_of(512), "memory export {name}: size {size_bytes} is not a multiple of 512");
        assert!(self.exports.iter().all(|export| export.info.name != name), "memory export {name} exists already");
        let export = Arc::new(MemoryExport {
            info: ExportInfo {
                name: name.to_owned(),
                size_bytes,
                read_only,
                description: Some("in-memory export".to_owned()),
                can_multi_conn: true,
                rotational: false,
            },
            shards: (0..SHARD_COUNT).map(|_| RwLock::new(HashMap::new())).collect(),
        });
        self.exports.push(Arc::clone(&export));
        export
    }

    /// Builder form of [`MemoryBackend::add_export`].
    pub fn with_export(mut self, name: &str, size_bytes: u64, read_only: bool) -> Self {
        self.add_export(name, size_bytes, read_only);
        self
    }

    /// The export of that name.
    pub fn export(&self, name: &str) -> Option<Arc<MemoryExport>> {
        self.exports.iter().find(|export| export.info.name == name).cloned()
    }
}

impl Backend for MemoryBackend {
    type Export = Arc<MemoryExport>;

    fn list_exports(&self) -> Vec<ExportInfo> {
        self.exports.iter().map(|export| export.info.clone()).collect()
    }

    fn open_export(&self, name: &str) -> Option<Self::Export> {
        if name.is_empty() {
            return self.exports.first().cloned();
        }
        self.export(name)
    }
}

/// One page of a memory export.
#[derive(Debug)]
enum Page {
    /// Allocated, all zeroes.
    Zero,
    /// Allocated with contents.
    Data(Box<[u8]>),
}

type Shard = RwLock<HashMap<u64, Page>>;

/// One in-memory export.
#[derive(Debug)]
pub struct MemoryExport {
    info: ExportInfo,
    shards: Vec<Shard>,
}

impl MemoryExport {
    fn shard(&self, page_index: u64) -> &Shard {
        &self.shards[usize::try_from(page_index % SHARD_COUNT as u64).expect("a shard index is below SHARD_COUNT")]
    }

    // A panic elsewhere must not make the export unusable for other connections:
    // every page update is a single assignment or copy, so a poisoned shard still
    // holds consistent pages.
    fn read_shard(&self, page_index: u64) -> RwLockReadGuard<'_, HashMap<u64, Page>> {
        self.shard(page_index).read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_shard(&self, page_index: u64) -> RwLockWriteGuard<'_, HashMap<u64, Page>> {
        self.shard(page_index).write().unwrap_or_else(PoisonError::into_inner)
    }

    fn assert_in_range(&self, offset_bytes: u64, length_bytes: u64) {
        let end = offset_bytes.checked_add(length_bytes);
        assert!(
            end.is_some_and(|end| end <= self.info.size_bytes),
            "memory export {}: range {offset_bytes}+{length_bytes} beyond size {} (the session validates ranges)",
            self.info.name,
            self.info.size_bytes
        );
    }

    /// Stores bytes regardless of the read-only flag: how tests fill a read-only
    /// export before serving it.
    pub fn load(&self, offset_bytes: u64, data: &[u8]) {
        self.assert_in_range(offset_bytes, data.len() as u64);
        for_each_page_piece(offset_bytes, data.len() as u64, |piece| {
            let source = &data[piece.buffer_range()];
            let mut shard = self.write_shard(piece.page_index);
            let page = shard.entry(piece.page_index).or_insert(Page::Zero);
            if matches!(page, Page::Zero) {
                *page = Page::Data(vec![0u8; PAGE_BYTES].into_boxed_slice());
            }
            if let Page::Data(bytes) = page {
                bytes[piece.page_range()].copy_from_slice(source);
            }
        });
    }

    /// Number of allocated pages (data or zero), for tests of hole tracking.
    pub fn allocated_page_count(&self) -> usize {
        (0..SHARD_COUNT as u64).map(|shard| self.read_shard(shard).len()).sum()
    }

    fn page_state(&self, page_index: u64) -> AllocationState {
        match self.read_shard(page_index).get(&page_index) {
            None => AllocationState::Hole,
            Some(Page::Zero) => AllocationState::Zero,
            Some(Page::Data(_)) => AllocationState::Data,
        }
    }

    /// Zeroes a piece of a page; `keep_allocated` decides whether a whole-page
    /// zeroing leaves an allocated zero page or a hole.
    fn zero_page_piece(&self, piece: PagePiece, keep_allocated: bool) {
        let page_index = piece.page_index;
        let mut shard = self.write_shard(page_index);
        let whole_page = piece.is_whole_page();
        match shard.get_mut(&page_index) {
            Some(Page::Data(bytes)) if !whole_page => bytes[piece.page_range()].fill(0),
            Some(page) if keep_allocated => *page = Page::Zero,
            Some(_) if whole_page => {
                shard.remove(&page_index);
            }
            Some(Page::Zero) => {}
            Some(Page::Data(_)) => unreachable!("partial data pages are handled above"),
            None if keep_allocated => {
                // A hole reads as zeroes already, so marking the whole page as an
                // allocated zero page keeps its contents.
                shard.insert(page_index, Page::Zero);
            }
            None => {}
        }
    }
}

/// The part of a byte range that lies in one page.
#[derive(Debug, Clone, Copy)]
struct PagePiece {
    page_index: u64,
    /// Where the piece starts in its page.
    in_page: usize,
    /// Bytes of the range before this piece.
    done: u64,
    /// Bytes of the piece: 1 to a page.
    length: usize,
}

impl PagePiece {
    fn is_whole_page(&self) -> bool {
        self.length == PAGE_BYTES
    }

    fn length_bytes(&self) -> u64 {
        u64::try_from(self.length).expect("a page piece is at most a page")
    }

    /// The piece's bytes within its page.
    fn page_range(&self) -> std::ops::Range<usize> {
        self.in_page..self.in_page + self.length
    }

    /// The piece's bytes within a buffer holding the whole range.
    fn buffer_range(&self) -> std::ops::Range<usize> {
        let start = usize::try_from(self.done).expect("a piece of a buffer's range lies within the buffer");
        start..start + self.length
    }
}

/// Calls `visit` for each page a byte range touches, in order.
fn for_each_page_piece(offset_bytes: u64, length_bytes: u64, mut visit: impl FnMut(PagePiece)) {
    let mut done = 0;
    while done < length_bytes {
        let position = offset_bytes + done;
        let in_page = usize::try_from(position % MEMORY_PAGE_BYTES).expect("an offset in a page is below a page");
        let remaining = usize::try_from(length_bytes - done).unwrap_or(usize::MAX);
        let piece = PagePiece {
            page_index: position / MEMORY_PAGE_BYTES,
            in_page,
            done,
            length: (PAGE_BYTES - in_page).min(remaining),
        };
        visit(piece);
        done += piece.length_bytes();
    }
}

impl Export for MemoryExport {
    fn info(&self) -> &ExportInfo {
        &self.info
    }

    fn read(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), BackendError> {
        self.assert_in_range(offset_bytes, buffer.len() as u64);
        for_each_page_piece(offset_bytes, buffer.len() as u64, |piece| {
            let target = &mut buffer[piece.buffer_range()];
            match self.read_shard(piece.page_index).get(&piece.page_index) {
                Some(Page::Data(bytes)) => target.copy_from_slice(&bytes[piece.page_range()]),
                Some(Page::Zero) | None => target.fill(0),
            }
        });
        Ok(())
    }

    fn write(&self, offset_bytes: u64, data: &[u8], _fua: bool) -> Result<(), BackendError> {
        self.info.debug_assert_writable();
        if self.info.read_only {
            return Err(BackendError::ReadOnly { export: self.info.name.clone() });
        }
        // Memory is as durable as this export gets: FUA needs nothing more.
        self.load(offset_bytes, data);
        Ok(())
    }

    fn flush(&self) -> Result<(), BackendError> {
        Ok(())
    }

    fn trim(&self, offset_bytes: u64, length_bytes: u64, _fua: bool) -> Result<(), BackendError> {
        self.info.debug_assert_writable();
        if self.info.read_only {
            return Err(BackendError::ReadOnly { export: self.info.name.clone() });
        }
        self.assert_in_range(offset_bytes, length_bytes);
        // Only whole pages are discarded; trim is advisory, so partial pages keep
        // their bytes.
        for_each_page_piece(offset_bytes, length_bytes, |piece| {
            if piece.is_whole_page() {
                self.write_shard(piece.page_index).remove(&piece.page_index);
            }
        });
        Ok(())
    }

    fn write_zeroes(&self, offset_bytes: u64, length_bytes: u64, options: ZeroOptions) -> Result<(), BackendError> {
        self.info.debug_assert_writable();
        if self.info.read_only {
            return Err(BackendError::ReadOnly { export: self.info.name.clone() });
        }
        self.assert_in_range(offset_bytes, length_bytes);
        // Zeroing memory pages never moves client data, so it is always "fast":
        // FAST_ZERO requests are served, not refused.
        for_each_page_piece(offset_bytes, length_bytes, |piece| self.zero_page_piece(piece, options.no_hole));
        Ok(())
    }

    fn block_status(&self, offset_bytes: u64, length_bytes: u64) -> Result<Vec<StatusExtent>, BackendError> {
        self.assert_in_range(offset_bytes, length_bytes);
        let mut extents = Vec::new();
        for_each_page_piece(offset_bytes, length_bytes, |piece| {
            push_status_extent(&mut extents, piece.length_bytes(), self.page_state(piece.page_index));
        });
        Ok(extents)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::assert_read_only_refuses;

    fn export(size_bytes: u64) -> Arc<MemoryExport> {
        MemoryBackend::new().add_export("m", size_bytes, false)
    }

    #[test]
    fn unwritten_export_reads_zeroes_and_is_one_hole() {
        let export = export(1 << 20);
        let mut buffer = vec![1u8; 8192];
        export.read(4096, &mut buffer).unwrap();
        assert!(buffer.iter().all(|&byte| byte == 0));
        assert_eq!(
            export.block_status(0, 1 << 20).unwrap(),
            vec![StatusExtent { length_bytes: 1 << 20, state: AllocationState::Hole }]
        );
    }

    #[test]
    fn unaligned_write_spanning_pages_reads_back() {
        let export = export(1 << 20);
        let data: Vec<u8> = (0..10_000u32).map(|value| (value % 251) as u8).collect();
        export.write(3584, &data, false).unwrap();
        let mut buffer = vec![0u8; data.len()];
        export.read(3584, &mut buffer).unwrap();
        assert_eq!(buffer, data);
        assert_eq!(export.allocated_page_count(), 4);
    }

    #[test]
    fn trim_makes_whole_pages_holes_and_keeps_partial_pages() {
        let export = export(1 << 20);
        export.write(0, &vec![9u8; 16384], false).unwrap();
        export.trim(2048, 8192, false).unwrap();
        // Page 0 and page 2 are only partly trimmed; page 1 becomes a hole.
        assert_eq!(
            export.block_status(0, 16384).unwrap(),
            vec![
                StatusExtent { length_bytes: 4096, state: AllocationState::Data },
                StatusExtent { length_bytes: 4096, state: AllocationState::Hole },
                StatusExtent { length_bytes: 8192, state: AllocationState::Data },
            ]
        );
    }

    #[test]
    fn write_zeroes_with_no_hole_keeps_pages_allocated() {
        let export = export(1 << 20);
        export.write(0, &vec![9u8; 12288], false).unwrap();
        export.write_zeroes(0, 8192, ZeroOptions { no_hole: true, ..ZeroOptions::default() }).unwrap();
        export.write_zeroes(16384, 4096, ZeroOptions { no_hole: true, ..ZeroOptions::default() }).unwrap();
        assert_eq!(
            export.block_status(0, 20480).unwrap(),
            vec![
                StatusExtent { length_bytes: 8192, state: AllocationState::Zero },
                StatusExtent { length_bytes: 4096, state: AllocationState::Data },
                StatusExtent { length_bytes: 4096, state: AllocationState::Hole },
                StatusExtent { length_bytes: 4096, state: AllocationState::Zero },
            ]
        );
        let mut buffer = vec![1u8; 8192];
        export.read(0, &mut buffer).unwrap();
        assert!(buffer.iter().all(|&byte| byte == 0));
    }

    #[test]
    fn write_zeroes_without_no_hole_punches_whole_pages_and_zeroes_partial_ones() {
        let export = export(1 << 20);
        export.write(0, &vec![9u8; 12288], false).unwrap();
        export.write_zeroes(512, 8192, ZeroOptions::default()).unwrap();
        let mut buffer = vec![1u8; 12288];
        export.read(0, &mut buffer).unwrap();
        assert!(buffer[..512].iter().all(|&byte| byte == 9));
        assert!(buffer[512..8704].iter().all(|&byte| byte == 0));
        assert!(buffer[8704..].iter().all(|&byte| byte == 9));
        assert_eq!(export.page_state(1), AllocationState::Hole);
    }

    #[test]
    fn read_only_export_refuses_writes_but_loads() {
        let export = MemoryBackend::new().add_export("ro", 8192, true);
        assert_read_only_refuses(|| export.write(0, &[1; 512], false));
        assert_read_only_refuses(|| export.trim(0, 512, false));
        export.load(0, &[7; 512]);
        let mut buffer = [0u8; 512];
        export.read(0, &mut buffer).unwrap();
        assert_eq!(buffer, [7; 512]);
    }

    #[test]
    fn empty_name_opens_the_first_export() {
        let backend = MemoryBackend::new().with_export("a", 4096, false).with_export("b", 8192, false);
        assert_eq!(backend.open_export("").unwrap().info().name, "a");
        assert_eq!(backend.open_export("b").unwrap().info().size_bytes, 8192);
        assert!(backend.open_export("c").is_none());
    }
}
