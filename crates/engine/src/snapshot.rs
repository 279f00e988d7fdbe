//! Snapshots: creation from a CP, reads as of a snapshot, deletion by
//! subtraction (a restartable scan using the 010 property), and restore of a
//! volume or an extent (docs/format.md, rules 3 and 4).

use std::collections::HashMap;

use proxima_device::BlockDevice;
use serde::Serialize;

use crate::bitmap::{Bitmap, PersistentBitmap};
use crate::checksums::{Checksums, PersistentChecksums};
use crate::codec::{
    CopyOutRecord, ExtentRecord, RootSet, SnapshotRecord, SnapshotState, BITS_PER_PAGE, BLOCK_SIZE, WORDS_PER_PAGE,
};
use crate::error::{metadata_no_space, DeviceRole, EngineError, Result};
use crate::extents::Extents;
use crate::io::{in_memory, FlashReader};
use crate::map::{self, ExtentMap, Segment};
use crate::read::{fill_from_segments, map_block_status, request_segments};
use crate::refcount::PersistentRefcounts;
use crate::room::MetadataOperation;
use crate::space::YoungestScan;
use crate::tree::PersistentTree;
use crate::volume::{validate_name, BlockStatus, ExtentInfo, SnapshotDeletion, Volume};

/// Below a `1 / LOW_SPACE_DIVISOR` of the data device allocatable, deletion
/// scans run by addition.
const LOW_SPACE_DIVISOR: u64 = 16;

/// A snapshot as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SnapshotInfo {
    /// Its id (ids grow with creation time).
    pub id: u64,
    /// Its name.
    pub name: String,
    /// The CP it was taken from.
    pub generation: u64,
}

/// A snapshot's extent table and the maps read so far.
#[derive(Debug, Clone)]
pub(crate) struct SnapshotView {
    extents: PersistentTree<ExtentRecord>,
    maps: HashMap<u64, ExtentMap>,
}

/// Snapmaps of one snapshot: (data activemap, flash activemap).
type Snapmaps = (Bitmap, Bitmap);

/// What the volume keeps in memory about its snapshots (the durable state is
/// the snapshot table): the views of snapshots read so far, the deletion
/// scan in progress, and the youngest snapshot's snapmaps (the on-free
/// rule's input). Every field is a cache of the durable state: dropping it
/// changes nothing but the time the next use takes.
#[derive(Debug, Default)]
pub(crate) struct SnapshotCaches {
    /// Loaded snapshot views by snapshot id.
    views: HashMap<u64, SnapshotView>,
    /// The deletion scan in progress, with the snapmaps it loaded.
    scan: Option<DeletionScan>,
    /// The youngest snapshot's id and snapmaps.
    youngest: Option<(u64, Snapmaps)>,
    /// The ids of the live snapshots and the OR of their data snapmaps.
    live_union: Option<(Vec<u64>, Bitmap)>,
}

impl SnapshotCaches {
    /// Forgets what is cached of snapshot `id` (deleted, or restored over).
    fn forget(&mut self, id: u64) {
        self.views.remove(&id);
    }

    /// Forgets everything (the snapshot table was replaced).
    fn forget_all(&mut self) {
        self.views.clear();
        self.youngest = None;
        self.live_union = None;
    }
}

/// A deletion scan in progress.
#[derive(Debug, Clone)]
pub(crate) struct DeletionScan {
    target_id: u64,
    target: Snapmaps,
    /// Loaded neighbours by id.
    neighbours: HashMap<u64, Snapmaps>,
}

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    fn reader(&mut self) -> FlashReader<'_, F> {
        FlashReader {
            flash: &mut self.flash,
            volume_id: self.volume_id,
            flash_block_count: self.flash_space.block_count(),
        }
    }

    pub(crate) fn load_snapmaps(&mut self, roots: &RootSet) -> Result<Snapmaps> {
        let data_count = self.data_space.block_count();
        let flash_count = self.flash_space.block_count();
        let mut reader = self.reader();
        let data = PersistentBitmap::load(roots.data_active, data_count, &mut reader)?;
        let flash = PersistentBitmap::load(roots.flash_active, flash_count, &mut reader)?;
        Ok((data.bits().clone(), flash.bits().clone()))
    }

    /// Live snapshots, oldest first.
    pub fn snapshots(&self) -> Vec<SnapshotInfo> {
        self.snapshots
            .iter()
            .filter(|(_, record)| record.state == SnapshotState::Live)
            .map(|(id, record)| SnapshotInfo { id, name: record.name.clone(), generation: record.generation })
            .collect()
    }

    fn live_snapshot_id(&self, name: &str) -> Result<u64> {
        self.snapshots
            .iter()
            .find(|(_, record)| record.state == SnapshotState::Live && record.name == name)
            .map(|(id, _)| id)
            .ok_or_else(|| EngineError::NoSuchSnapshot(name.to_string()))
    }

    /// Snapshot deletions whose scan has not finished.
    pub fn pending_deletions(&self) -> usize {
        self.snapshots.iter().filter(|(_, record)| record.state == SnapshotState::Deleting).count()
    }

    /// Takes a snapshot of every extent as of a CP committed now.
    pub fn create_snapshot(&mut self, name: &str) -> Result<u64> {
        validate_name(name)?;
        if self.live_snapshot_id(name).is_ok() {
            return Err(EngineError::SnapshotExists(name.to_string()));
        }
        self.guarded(|volume| {
            volume.ensure_room_for_metadata_operation(MetadataOperation::CreateSnapshot)?;
            // A snapshot's activemap is what its tree uses: the delete log's
            // blocks reach the activemap first (docs/wafl.md).
            volume.drain_delete_log();
            volume.commit()?;
            let id = volume.next_snapshot_id;
            volume.next_snapshot_id += 1;
            let record = SnapshotRecord {
                name: name.to_string(),
                generation: volume.generation,
                state: SnapshotState::Live,
                scan_cursor: 0,
                log_head: volume.log.head,
                roots: volume.roots,
            };
            volume.snapshots.insert(id, record);
            // Right after a CP the active maps are exactly the snapshot's snapmaps.
            let snapmaps = (volume.data_space.active().bits().clone(), volume.flash_space.active().bits().clone());
            volume.snapshot_caches.youngest = Some((id, snapmaps));
            volume.refresh_youngest()?;
            volume.commit()?;
            Ok(id)
        })
    }

    /// Deletes a snapshot: it disappears at once; its blocks are reclaimed by a
    /// background scan over the following CPs.
    pub fn delete_snapshot(&mut self, name: &str) -> Result<()> {
        let id = self.live_snapshot_id(name)?;
        self.guarded(|volume| {
            let mut record = volume.snapshots.get(id).expect("listed").clone();
            record.state = SnapshotState::Deleting;
            record.scan_cursor = 0;
            volume.snapshots.insert(id, record);
            volume.snapshot_caches.forget(id);
            volume.commit()
        })
    }

    /// Runs CPs until every pending snapshot deletion has finished.
    pub fn finish_deletions(&mut self) -> Result<()> {
        while self.pending_deletions() > 0 {
            self.commit()?;
        }
        Ok(())
    }

    /// Whether the 010 property may not hold for some existing snapshot's
    /// data blocks (a clone from a snapshot broke it; see `clone.rs`).
    pub(crate) fn order_may_be_broken(&self) -> bool {
        self.unordered_below_snapshot_id > 0
            && self.snapshots.iter().next().is_some_and(|(id, _)| id < self.unordered_below_snapshot_id)
    }

    /// Whether deletion scans update the data summary by addition (OR of the
    /// live snapshots' snapmaps) rather than by subtraction (the deleted
    /// snapshot's blocks that neither neighbour holds): always while the 010
    /// property may not hold, on which subtraction relies; when the data
    /// device runs low on space (addition reclaims every pending deletion's
    /// blocks in one pass); or when the options say so.
    pub(crate) fn deletion_by_addition(&self) -> bool {
        let low_space = self.data_space.allocatable_count() < self.data_space.block_count() / LOW_SPACE_DIVISOR;
        match self.options.snapshot_deletion {
            _ if self.order_may_be_broken() => true,
            SnapshotDeletion::Addition => true,
            SnapshotDeletion::Subtraction => false,
            SnapshotDeletion::Auto => low_space,
        }
    }

    /// The data blocks some live snapshot reads: the OR of the live
    /// snapshots' data snapmaps, less each snapshot's frames that it reads at
    /// a copy (in-place layout). A frame freed and reused after its copy-out
    /// is still in the old snapshot's snapmap, yet that snapshot does not
    /// hold it. Cached while the set of live snapshots stays the same: a
    /// copy-out made since only leaves a frame in the union that its
    /// watermark then releases ([`Volume::release_frame_if_copied`]), and no
    /// copy a live snapshot reads is dropped.
    fn live_data_union(&mut self) -> Result<Bitmap> {
        let live: Vec<u64> =
            self.snapshots.iter().filter(|(_, record)| record.state == SnapshotState::Live).map(|(id, _)| id).collect();
        if let Some((ids, union)) = &self.snapshot_caches.live_union {
            if *ids == live {
                return Ok(union.clone());
            }
        }
        let mut union = Bitmap::new(self.data_space.block_count());
        for &id in &live {
            let mut held = self.data_snapmap(id)?;
            for (frame, _) in self.copy_outs.redirects(id) {
                held.put(frame, false);
            }
            union.or_with(&held);
        }
        self.snapshot_caches.live_union = Some((live, union.clone()));
        Ok(union)
    }

    /// Blocks on data-activemap page `page` that the summary has, no live
    /// snapshot holds, and that are not copies of frame blocks (which the
    /// copy-out table releases): what a deletion by addition releases.
    fn summary_blocks_no_live_snapshot_holds(&self, page: u64, live: &Bitmap) -> Vec<u64> {
        let page_index = usize::try_from(page).expect("a page index");
        let summary = self.data_space.summary().bits();
        let mut blocks = Vec::new();
        for word in 0..WORDS_PER_PAGE {
            let mut unheld = summary.word(page_index, word) & !live.word(page_index, word);
            while unheld != 0 {
                let bit = u64::from(unheld.trailing_zeros());
                unheld &= unheld - 1;
                let block = page * BITS_PER_PAGE + word as u64 * 64 + bit;
                if self.copy_outs.is_empty() || self.copy_outs.tree().get(block).is_none() {
                    blocks.push(block);
                }
            }
        }
        blocks
    }

    /// Recomputes the youngest existing snapshot's snapmaps for the on-free rule.
    pub(crate) fn refresh_youngest(&mut self) -> Result<()> {
        if self.unordered_below_snapshot_id > 0 && !self.order_may_be_broken() {
            // Every snapshot the clone's break concerned is gone.
            self.unordered_below_snapshot_id = 0;
        }
        self.data_space.live_holders = match self.order_may_be_broken() {
            true => Some(self.live_data_union()?),
            false => None,
        };
        let youngest = self.snapshots.iter().next_back().map(|(id, record)| (id, record.roots));
        let Some((id, roots)) = youngest else {
            self.snapshot_caches.youngest = None;
            self.data_space.youngest = None;
            self.flash_space.youngest = None;
            self.data_space.youngest_scan = None;
            return Ok(());
        };
        if self.snapshot_caches.youngest.as_ref().is_none_or(|(cached, _)| *cached != id) {
            let snapmaps = self.load_snapmaps(&roots)?;
            self.snapshot_caches.youngest = Some((id, snapmaps));
        }
        let (_, (data, flash)) = self.snapshot_caches.youngest.as_ref().expect("just set");
        self.data_space.youngest = Some(data.clone());
        self.flash_space.youngest = Some(flash.clone());
        self.data_space.youngest_scan = None;
        let youngest = self.snapshots.get(id).expect("youngest exists").clone();
        if youngest.state == SnapshotState::Deleting {
            // Whether or not its scan is the one running now (the oldest
            // deletion runs first), its cursor says which pages it passed.
            let mut older = Vec::new();
            for (older_id, scanned_below) in self.holder_chain(self.snapshots.range(..id).rev()) {
                older.push((self.data_snapmap(older_id)?, scanned_below));
            }
            self.data_space.youngest_scan = Some(YoungestScan { cursor_page: youngest.scan_cursor, older });
        }
        Ok(())
    }

    /// Snapshots in the order `snapshots` gives, each with the page below
    /// which its deletion scan has passed (`None`: live), up to and including
    /// the first live one.
    fn holder_chain<'a>(&self, snapshots: impl Iterator<Item = (u64, &'a SnapshotRecord)>) -> Vec<(u64, Option<u64>)> {
        let mut chain = Vec::new();
        for (id, record) in snapshots {
            let live = record.state != SnapshotState::Deleting;
            chain.push((id, if live { None } else { Some(record.scan_cursor) }));
            if live {
                break;
            }
        }
        chain
    }

    /// The data snapmap of snapshot `id`: from the scan's loaded maps or the
    /// youngest cache when there, else read from flash.
    fn data_snapmap(&mut self, id: u64) -> Result<Bitmap> {
        if let Some(scan) = &self.snapshot_caches.scan {
            if scan.target_id == id {
                return Ok(scan.target.0.clone());
            }
            if let Some(maps) = scan.neighbours.get(&id) {
                return Ok(maps.0.clone());
            }
        }
        if let Some((cached, (data, _))) = &self.snapshot_caches.youngest {
            if *cached == id {
                return Ok(data.clone());
            }
        }
        let roots = self.snapshots.get(id).expect("snapshot exists").roots;
        Ok(self.load_snapmaps(&roots)?.0)
    }

    fn ensure_neighbour_loaded(&mut self, id: u64) -> Result<()> {
        if self.snapshot_caches.scan.as_ref().is_some_and(|scan| scan.neighbours.contains_key(&id)) {
            return Ok(());
        }
        let roots = self.snapshots.get(id).expect("neighbour exists").roots;
        let maps = self.load_snapmaps(&roots)?;
        self.snapshot_caches.scan.as_mut().expect("scan in progress").neighbours.insert(id, maps);
        Ok(())
    }

    /// Advances the oldest pending deletion by up to `page_budget` data-activemap
    /// pages; the last step also scans the flash maps and drops the record.
    pub(crate) fn scan_step(&mut self, page_budget: u64) -> Result<()> {
        let target = self
            .snapshots
            .iter()
            .find(|(_, record)| record.state == SnapshotState::Deleting)
            .map(|(id, record)| (id, record.clone()));
        let Some((target_id, mut record)) = target else {
            self.snapshot_caches.scan = None;
            return Ok(());
        };
        if self.snapshot_caches.scan.as_ref().is_none_or(|scan| scan.target_id != target_id) {
            let target = self.load_snapmaps(&record.roots)?;
            self.snapshot_caches.scan = Some(DeletionScan { target_id, target, neighbours: HashMap::new() });
        }
        let older = self.snapshots.range(..target_id).next_back().map(|(id, _)| id);
        let younger = self.snapshots.range(target_id + 1..).next().map(|(id, _)| id);
        // Per page, the neighbours that count are the nearest snapshots that
        // will still account for its blocks: live ones, or deleting ones whose
        // scans have not passed the page (a scan never returns to a page).
        let older_chain = self.holder_chain(self.snapshots.range(..target_id).rev());
        let younger_chain = self.holder_chain(self.snapshots.range(target_id + 1..));
        for &(id, _) in older_chain.iter().chain(&younger_chain) {
            self.ensure_neighbour_loaded(id)?;
        }
        let page_count = self.data_space.block_count().div_ceil(BITS_PER_PAGE);
        let end_page = record.scan_cursor.saturating_add(page_budget).min(page_count);
        let mut releases = Vec::new();
        let live_union = match self.deletion_by_addition() && end_page > record.scan_cursor {
            true => Some(self.live_data_union()?),
            false => None,
        };
        for page in record.scan_cursor..end_page {
            if let Some(live) = &live_union {
                releases.extend(self.summary_blocks_no_live_snapshot_holds(page, live));
                continue;
            }
            let effective = |chain: &[(u64, Option<u64>)]| {
                chain
                    .iter()
                    .find(|(_, scanned_below)| scanned_below.is_none_or(|cursor| page >= cursor))
                    .map(|&(id, _)| id)
            };
            releases.extend(self.exclusive_blocks(
                DeviceRole::Data,
                effective(&older_chain),
                effective(&younger_chain),
                page,
                page + 1,
            ));
        }
        for block in releases {
            self.data_space.release_from_summary(block);
        }
        record.scan_cursor = end_page;
        if end_page < page_count {
            self.snapshots.insert(target_id, record);
            return self.refresh_youngest();
        }
        let flash_pages = self.flash_space.block_count().div_ceil(BITS_PER_PAGE);
        for block in self.exclusive_blocks(DeviceRole::Flash, older, younger, 0, flash_pages) {
            self.flash_space.release_from_summary(block);
        }
        self.snapshots.remove(target_id);
        self.snapshot_caches.forget(target_id);
        self.snapshot_caches.scan = None;
        self.refresh_youngest()?;
        self.release_unread_copies();
        Ok(())
    }

    /// Releases the copies of frame blocks that no remaining snapshot reads
    /// from the summary (only snapshots hold copies).
    fn release_unread_copies(&mut self) {
        if self.copy_outs.is_empty() {
            return;
        }
        let remaining: Vec<u64> = self.snapshots.iter().map(|(id, _)| id).collect();
        for copy in self.copy_outs.release_unread(&remaining) {
            self.data_space.release_from_summary(copy);
        }
    }

    /// Blocks on pages `[first_page, end_page)` that the scanned snapshot holds,
    /// neither neighbour holds (the active tree standing in for a missing younger
    /// one), and the summary still has.
    fn exclusive_blocks(
        &self,
        role: DeviceRole,
        older: Option<u64>,
        younger: Option<u64>,
        first_page: u64,
        end_page: u64,
    ) -> Vec<u64> {
        let scan = self.snapshot_caches.scan.as_ref().expect("scan in progress");
        fn pick(maps: &Snapmaps, role: DeviceRole) -> &Bitmap {
            match role {
                DeviceRole::Data => &maps.0,
                DeviceRole::Flash => &maps.1,
            }
        }
        let target = pick(&scan.target, role);
        let older_map = older.map(|id| pick(&scan.neighbours[&id], role));
        let space = match role {
            DeviceRole::Data => &self.data_space,
            DeviceRole::Flash => &self.flash_space,
        };
        let younger = match younger {
            Some(id) => pick(&scan.neighbours[&id], role),
            None => space.active().bits(),
        };
        // A snapshot that reads a frame block at its copy does not hold the
        // frame's current version (docs/layouts.md, "Copy-out of snapshot
        // blocks"): the older neighbour and the target are asked per block,
        // and only when the table has copies (data blocks alone can be
        // frames); otherwise the word operations decide.
        let copies = role == DeviceRole::Data && !self.copy_outs.is_empty();
        let reads_frame = |id: u64, block: u64| self.copy_outs.resolve(block, id) == block;
        let summary = space.summary().bits();
        let mut blocks = Vec::new();
        for page in in_memory(first_page)..in_memory(end_page) {
            if target.page_is_zero(page) || summary.page_is_zero(page) {
                continue;
            }
            for word in 0..WORDS_PER_PAGE {
                let candidates = target.word(page, word) & !younger.word(page, word) & summary.word(page, word);
                let older_word = older_map.map_or(0, |older| older.word(page, word));
                let mut exclusive = candidates & !older_word;
                let mut older_too = if copies { candidates & older_word } else { 0 };
                let first_block = page as u64 * BITS_PER_PAGE + word as u64 * 64;
                while older_too != 0 {
                    let bit = older_too.trailing_zeros();
                    older_too &= older_too - 1;
                    if older.is_some_and(|id| !reads_frame(id, first_block + u64::from(bit))) {
                        exclusive |= 1 << bit;
                    }
                }
                while exclusive != 0 {
                    let block = first_block + u64::from(exclusive.trailing_zeros());
                    exclusive &= exclusive - 1;
                    if !copies || reads_frame(scan.target_id, block) {
                        blocks.push(block);
                    }
                }
            }
        }
        blocks
    }

    fn snapshot_view(&mut self, snapshot_id: u64) -> Result<&mut SnapshotView> {
        if !self.snapshot_caches.views.contains_key(&snapshot_id) {
            let roots = self.snapshots.get(snapshot_id).expect("live snapshot").roots;
            let extents = PersistentTree::<ExtentRecord>::load(roots.extent_table, 0, &mut self.reader())?;
            self.snapshot_caches.views.insert(snapshot_id, SnapshotView { extents, maps: HashMap::new() });
        }
        Ok(self.snapshot_caches.views.get_mut(&snapshot_id).expect("just inserted"))
    }

    fn snapshot_extent(&mut self, snapshot: &str, extent: &str) -> Result<(u64, u64, ExtentRecord)> {
        let snapshot_id = self.live_snapshot_id(snapshot)?;
        let view = self.snapshot_view(snapshot_id)?;
        let (id, record) = view
            .extents
            .iter()
            .find(|(_, record)| record.name == extent)
            .map(|(id, record)| (id, record.clone()))
            .ok_or_else(|| EngineError::NoSuchExtent(format!("{extent}@{snapshot}")))?;
        if !view.maps.contains_key(&id) {
            let map = ExtentMap::load(
                record.map,
                id,
                &mut FlashReader {
                    flash: &mut self.flash,
                    volume_id: self.volume_id,
                    flash_block_count: self.flash_space.block_count(),
                },
            )?;
            self.snapshot_caches.views.get_mut(&snapshot_id).expect("exists").maps.insert(id, map);
        }
        Ok((snapshot_id, id, record))
    }

    /// The flash blocks holding staged data that the active tree or a live
    /// snapshot maps (with repeats).
    pub(crate) fn staged_blocks_of_live_trees(&mut self) -> Result<Vec<u64>> {
        let staged_of = |map: &ExtentMap| -> Vec<u64> {
            map.iter()
                .filter_map(|(_, run)| match map::Location::from_raw(run.location()) {
                    map::Location::Flash(block) => Some(block..block + run.count()),
                    map::Location::Data(_) => None,
                })
                .flatten()
                .collect()
        };
        let mut blocks: Vec<u64> = self.extents.maps().map(|(_, map)| map).flat_map(staged_of).collect();
        for snapshot in self.snapshots() {
            let names: Vec<String> =
                self.snapshot_view(snapshot.id)?.extents.iter().map(|(_, record)| record.name.clone()).collect();
            for name in names {
                let (snapshot_id, id, _) = self.snapshot_extent(&snapshot.name, &name)?;
                blocks.extend(staged_of(&self.snapshot_caches.views[&snapshot_id].maps[&id]));
            }
        }
        Ok(blocks)
    }

    /// The extents of a snapshot.
    pub fn snapshot_extents(&mut self, snapshot: &str) -> Result<Vec<ExtentInfo>> {
        self.check_usable()?;
        let snapshot_id = self.live_snapshot_id(snapshot)?;
        let names: Vec<String> =
            self.snapshot_view(snapshot_id)?.extents.iter().map(|(_, record)| record.name.clone()).collect();
        let mut infos = Vec::new();
        for name in names {
            let (snapshot_id, id, record) = self.snapshot_extent(snapshot, &name)?;
            let map = &self.snapshot_caches.views[&snapshot_id].maps[&id];
            infos.push(ExtentInfo {
                id,
                name,
                size_bytes: record.size_bytes,
                mapped_block_count: map::mapped_block_count(map),
                run_count: map.len() as u64,
                layout_score: map::layout_score(map),
            });
        }
        Ok(infos)
    }

    /// Reads an extent as of a snapshot.
    pub fn read_snapshot(
        &mut self,
        snapshot: &str,
        extent: &str,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Vec<u8>> {
        let mut buffer = Vec::new();
        let (snapshot_id, id) = self.snapshot_range(snapshot, extent, offset_bytes, length_bytes)?;
        buffer.resize(in_memory(length_bytes), 0);
        self.read_snapshot_range(snapshot_id, id, offset_bytes, &mut buffer)?;
        Ok(buffer)
    }

    /// Reads `buffer.len()` bytes of an extent as of a snapshot into `buffer`.
    pub fn read_snapshot_into(
        &mut self,
        snapshot: &str,
        extent: &str,
        offset_bytes: u64,
        buffer: &mut [u8],
    ) -> Result<()> {
        let (snapshot_id, id) = self.snapshot_range(snapshot, extent, offset_bytes, buffer.len() as u64)?;
        self.read_snapshot_range(snapshot_id, id, offset_bytes, buffer)
    }

    /// Which byte ranges of an extent as of a snapshot are mapped and which
    /// are holes (block status of a snapshot export).
    pub fn snapshot_block_status(
        &mut self,
        snapshot: &str,
        extent: &str,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Vec<BlockStatus>> {
        let (snapshot_id, id) = self.snapshot_range(snapshot, extent, offset_bytes, length_bytes)?;
        Ok(map_block_status(&self.snapshot_caches.views[&snapshot_id].maps[&id], offset_bytes, length_bytes))
    }

    /// Loads a snapshot's extent and checks a byte range of it; returns the
    /// snapshot's and the extent's ids.
    fn snapshot_range(
        &mut self,
        snapshot: &str,
        extent: &str,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<(u64, u64)> {
        self.check_usable()?;
        let (snapshot_id, id, record) = self.snapshot_extent(snapshot, extent)?;
        if offset_bytes.checked_add(length_bytes).is_none_or(|end| end > record.size_bytes) {
            return Err(EngineError::InvalidRange(format!(
                "{length_bytes} bytes at {offset_bytes} exceed {extent}@{snapshot} of {} bytes",
                record.size_bytes
            )));
        }
        Ok((snapshot_id, id))
    }

    /// The segments of the first `size_bytes` of an extent as of a snapshot
    /// as its map has them (not translated to copies of frame blocks).
    pub(crate) fn snapshot_raw_segments(
        &mut self,
        snapshot: &str,
        extent: &str,
        size_bytes: u64,
    ) -> Result<Vec<Segment>> {
        let (snapshot_id, id) = self.snapshot_range(snapshot, extent, 0, size_bytes)?;
        Ok(request_segments(&self.snapshot_caches.views[&snapshot_id].maps[&id], 0, size_bytes))
    }

    /// The segments of a byte range of an extent as of a snapshot.
    pub(crate) fn snapshot_segments(
        &mut self,
        snapshot: &str,
        extent: &str,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Vec<Segment>> {
        let (snapshot_id, id) = self.snapshot_range(snapshot, extent, offset_bytes, length_bytes)?;
        Ok(self.segments_as_of(snapshot_id, id, offset_bytes, length_bytes))
    }

    /// The segments of a byte range of snapshot `snapshot_id`'s extent `id`
    /// (loaded): the one place a snapshot's reads find its blocks.
    fn segments_as_of(&self, snapshot_id: u64, id: u64, offset_bytes: u64, length_bytes: u64) -> Vec<Segment> {
        let map = &self.snapshot_caches.views[&snapshot_id].maps[&id];
        self.copy_outs.translate(request_segments(map, offset_bytes, length_bytes), snapshot_id)
    }

    fn read_snapshot_range(&mut self, snapshot_id: u64, id: u64, offset_bytes: u64, buffer: &mut [u8]) -> Result<()> {
        let segments = self.segments_as_of(snapshot_id, id, offset_bytes, buffer.len() as u64);
        let data_payload = self.data_payload;
        let gaps = self.options.read_gaps();
        fill_from_segments(&segments, offset_bytes, buffer, data_payload, gaps, &mut self.exclusive_source())
    }

    /// Restores one extent's contents (and size) to those of a snapshot by
    /// copying, creating the extent if it no longer exists.
    pub fn restore_extent(&mut self, snapshot: &str, extent: &str) -> Result<()> {
        self.check_usable()?;
        let (snapshot_id, snapshot_extent_id, record) = self.snapshot_extent(snapshot, extent)?;
        let id = match self.extent_id(extent) {
            Ok(id) => {
                self.resize_extent(extent, record.size_bytes)?;
                id
            }
            Err(_) => self.create_extent(extent, record.size_bytes)?,
        };
        let block = BLOCK_SIZE as u64;
        let size_blocks = record.size_bytes / block;
        let segments =
            map::segments(&self.snapshot_caches.views[&snapshot_id].maps[&snapshot_extent_id], 0, size_blocks);
        for segment in segments {
            let offset = segment.logical_block * block;
            let length = segment.block_count * block;
            if segment.location.is_none() {
                self.trim(id, offset, length, false)?;
                continue;
            }
            // Copy in bounded pieces.
            let mut done = 0;
            while done < segment.block_count {
                let count = (segment.block_count - done).min(256);
                let piece = self.segments_as_of(
                    snapshot_id,
                    snapshot_extent_id,
                    (segment.logical_block + done) * block,
                    count * block,
                );
                let data = self.read_segments(&piece)?;
                self.write(id, offset + done * block, &data, false)?;
                done += count;
            }
        }
        self.commit()
    }

    /// Restores the whole volume to a snapshot. Snapshots younger than it are
    /// deleted (keeping the 010 property); the snapshot itself stays.
    pub fn restore_volume(&mut self, snapshot: &str) -> Result<()> {
        let snapshot_id = self.live_snapshot_id(snapshot)?;
        self.content_changes.everything_changed();
        self.guarded(|volume| {
            volume.ensure_room_for_metadata_operation(MetadataOperation::RestoreVolume)?;
            volume.commit()?;
            let record = volume.snapshots.get(snapshot_id).expect("live").clone();
            let younger: Vec<u64> = volume.snapshots.range(snapshot_id + 1..).map(|(id, _)| id).collect();
            for id in younger {
                volume.snapshots.remove(id);
                volume.snapshot_caches.forget(id);
            }
            if volume.snapshot_caches.scan.as_ref().is_some_and(|scan| volume.snapshots.get(scan.target_id).is_none()) {
                volume.snapshot_caches.scan = None;
            }
            volume.adopt_snapshot_tree(snapshot_id, &record)?;
            // The staged overwrites the notes were for are gone.
            volume.pending_copies.clear();
            volume.commit()
        })
    }

    /// Makes the snapshot's tree the active one (see `restore_volume`).
    fn adopt_snapshot_tree(&mut self, snapshot_id: u64, record: &SnapshotRecord) -> Result<()> {
        let roots = record.roots;
        let data_count = self.data_space.block_count();
        let flash_count = self.flash_space.block_count();
        let keeps_checksums = self.checksums.is_some();
        let mut reader = self.reader();
        let extents = PersistentTree::<ExtentRecord>::load(roots.extent_table, 0, &mut reader)?;
        let mut maps = HashMap::new();
        for (id, extent) in extents.iter() {
            maps.insert(id, ExtentMap::load(extent.map, id, &mut reader)?);
        }
        let data_active = PersistentBitmap::load(roots.data_active, data_count, &mut reader)?;
        let flash_active = PersistentBitmap::load(roots.flash_active, flash_count, &mut reader)?;
        let adopted_copy_outs = PersistentTree::<CopyOutRecord>::load(roots.copy_outs, 0, &mut reader)?;
        let refcounts = PersistentRefcounts::load(roots.refcounts, data_count, &mut reader)?;
        // Blocks the snapshot's tree used for structures the active tree
        // rebuilds (its snapshot table, its summaries, its copy-out table)
        // and its log head.
        let snapshot_table = PersistentTree::<SnapshotRecord>::load(roots.snapshot_table, 0, &mut reader)?;
        let data_summary_old = PersistentBitmap::load(roots.data_summary, data_count, &mut reader)?;
        let flash_summary_old = PersistentBitmap::load(roots.flash_summary, flash_count, &mut reader)?;
        let mut orphaned = snapshot_table.blocks();
        orphaned.extend(data_summary_old.blocks());
        orphaned.extend(flash_summary_old.blocks());
        orphaned.extend(record.log_head.blocks());
        orphaned.extend(adopted_copy_outs.blocks());
        // The active tree goes on keeping checksums if it kept them; the
        // snapshot's tables cover every block it and older snapshots use.
        let checksums = match keeps_checksums {
            true => Some(Checksums {
                data: PersistentChecksums::load(roots.data_checksums, data_count, &mut reader)?,
                flash: PersistentChecksums::load(roots.flash_checksums, flash_count, &mut reader)?,
            }),
            false => None,
        };
        // Summaries rebuilt by addition over the remaining snapshots, each
        // counting for what it will still account for: a snapshot being
        // deleted no longer holds the data pages its scan has passed (the scan
        // never returns to them, so a block added there would stay in the
        // summary for ever), and holds its flash blocks until the CP that
        // drops its record.
        let mut data_summary = Bitmap::new(data_count);
        let mut flash_summary = Bitmap::new(flash_count);
        let remaining: Vec<SnapshotRecord> = self.snapshots.iter().map(|(_, record)| record.clone()).collect();
        for snapshot in remaining {
            let (mut data, flash) = self.load_snapmaps(&snapshot.roots)?;
            if snapshot.state == SnapshotState::Deleting {
                data.clear_pages_below(usize::try_from(snapshot.scan_cursor).expect("a page index"));
            }
            data_summary.or_with(&data);
            flash_summary.or_with(&flash);
        }
        // A block the active tree uses is never also in the summary: the
        // on-free rule moves it there when the active tree lets it go.
        data_summary.and_not(data_active.bits());
        flash_summary.and_not(flash_active.bits());
        self.data_space.rebase(data_active, data_summary);
        self.flash_space.rebase(flash_active, flash_summary);
        // The adopted activemap holds no logged block (a snapshot is taken of
        // a drained log); the current log's blocks are in neither adopted map.
        self.delete_log.reset_after_restore(data_count);
        self.extents = Extents::loaded(extents, maps, self.extents.next_id());
        self.fresh_ranges.reservation_released();
        self.refcounts = refcounts;
        self.snapshots.forget_blocks();
        self.snapshot_caches.forget_all();
        self.refresh_youngest()?;
        // The log of the current epoch is empty (just committed); its blocks are
        // not in the adopted activemap and stay protected by the safe copies.
        // The live copies' checksums, which the snapshot's tables lack for
        // copies made after it.
        let copy_crcs: Vec<(u64, u32)> = match &self.checksums {
            Some(tables) => self.copy_outs.tree().iter().map(|(copy, _)| (copy, tables.data.get(copy))).collect(),
            None => Vec::new(),
        };
        self.checksums = checksums;
        self.log = crate::log::LogState::new(self.reserve_log_head().map_err(metadata_no_space)?);
        for block in orphaned {
            self.flash_space.free(block);
        }
        self.staged_block_count = self
            .extents
            .maps()
            .flat_map(|(_, map)| map.iter())
            .filter(|(_, run)| matches!(map::Location::from_raw(run.location()), map::Location::Flash(_)))
            .map(|(_, run)| run.count())
            .sum();
        // Staging-time decisions of the tree left behind no longer apply.
        self.layout = self.options.layout.strategy();
        self.staged_in_interval = 0;
        self.keep_copy_outs_after_restore(snapshot_id, &copy_crcs)
    }
}
