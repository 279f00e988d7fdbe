//! Consistency points: the in-memory state committed as one atomic transaction
//! (docs/format.md, "Consistency point: steps and crash argument").

use proxima_device::{BlockDevice, IoRequest, WriteBacks};

use crate::codec::{RootSet, Superblock, TreePointer, SUPERBLOCK_FLAG_DATA_CHECKSUMS, SUPERBLOCK_SLOTS};
use crate::error::{metadata_no_space, DeviceRole, Result};
use crate::io::{device_error, write_pieces, CheckpointStore};
use crate::log::LogState;
use crate::pages::{PageContent, PersistentPages};
use crate::space::SpaceMap;
use crate::volume::Volume;

/// Map node blocks a CP buffers before writing them out.
const CHECKPOINT_WRITE_BATCH_BLOCKS: usize = 256;

/// Gives every dirty block of one persistent bitmap of `space` a new flash
/// location (allocated from `flash`, the old one freed); `which_map` 0 is the
/// activemap, 1 the summary. Returns how many blocks were assigned.
fn assign_bitmap_locations(mut space: Option<&mut SpaceMap>, flash: &mut SpaceMap, which_map: usize) -> Result<u64> {
    let mut assigned = 0;
    loop {
        let needing = {
            let target: &SpaceMap = match &space {
                Some(space) => space,
                None => flash,
            };
            if which_map == 0 {
                target.active().pages().needing_location()
            } else {
                target.summary().pages().needing_location()
            }
        };
        if needing.is_empty() {
            return Ok(assigned);
        }
        for which in needing {
            let block = flash.allocate_one("bitmap block of a consistency point")?;
            let old = {
                let target: &mut SpaceMap = match space {
                    Some(ref mut space) => space,
                    None => flash,
                };
                let (active, summary) = target.maps_mut();
                if which_map == 0 {
                    active.pages_mut().assign(which, block)
                } else {
                    summary.pages_mut().assign(which, block)
                }
            };
            if old != 0 {
                flash.free(old);
            }
            assigned += 1;
        }
    }
}

/// Gives every dirty block of a page tree (a checksum table, the refcount
/// file) a new flash location (the old one freed), encodes them into `writes`
/// and returns the tree's new root. Runs before the flash bitmaps are placed,
/// which these allocations dirty.
fn persist_page_tree<C: PageContent>(
    pages: &mut PersistentPages<C>,
    flash: &mut SpaceMap,
    writes: &mut Vec<(u64, Vec<u8>)>,
    volume_id: u64,
    generation: u64,
) -> Result<TreePointer> {
    // An index node is dirtied by its children's moves: repeat until none is.
    loop {
        let needing = pages.needing_location();
        if needing.is_empty() {
            break;
        }
        for which in needing {
            let block = flash.allocate_one("checksum or refcount block of a consistency point")?;
            let old = pages.assign(which, block);
            if old != 0 {
                flash.free(old);
            }
        }
    }
    let (blocks, pointer) = pages.encode_assigned(volume_id, generation);
    writes.extend(blocks);
    Ok(pointer)
}

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    /// Commits a consistency point: everything done so far becomes durable and
    /// the log restarts empty.
    pub fn commit(&mut self) -> Result<()> {
        self.guarded(|volume| volume.commit_unguarded().map_err(metadata_no_space))
    }

    /// A handle that writes back what has been written to both devices
    /// without access to the volume ([`WriteBack`]), or `None` when a device
    /// has no such path. A server calls it without holding its volume, so
    /// that the flush of its next CP, made while it holds the volume, has
    /// little left to write.
    pub fn write_back_handle(&self) -> Result<Option<WriteBacks>> {
        let data = self.data.write_back_handle().map_err(device_error(DeviceRole::Data))?;
        let flash = self.flash.write_back_handle().map_err(device_error(DeviceRole::Flash))?;
        Ok(data.zip(flash).map(|(data, flash)| WriteBacks(vec![data, flash])))
    }

    /// Step 1 of a CP (docs/format.md) flushes the data device only when
    /// something was written to it since its last flush: flushing a clean
    /// device makes nothing more durable, and a staging-only epoch (small
    /// random writes) leaves it clean.
    fn commit_unguarded(&mut self) -> Result<()> {
        self.scan_step(self.options.scan_pages_per_checkpoint)?;
        self.delete_log_checkpoint_work();
        if self.log.data_unflushed {
            self.flush_data_device()?;
        }
        let generation = self.generation + 1;
        // The log of the ending epoch is subsumed by this CP.
        for block in std::mem::take(&mut self.log.epoch_blocks) {
            self.flash_space.free(block);
        }
        let log_head = self.reserve_log_head()?;
        let mut writes = Vec::new();
        let mut written_early = 0;
        let (roots, delete_log) = self.persist_metadata(generation, &mut writes, &mut written_early)?;
        self.data_space.audit()?;
        self.flash_space.audit()?;
        let written = writes.len() as u64 + written_early;
        write_pieces(&mut self.flash, DeviceRole::Flash, writes)?;
        self.flash.flush().map_err(device_error(DeviceRole::Flash))?;
        let superblock = Superblock {
            volume_id: self.volume_id,
            generation,
            data_block_count: self.data_space.block_count(),
            flash_block_count: self.flash_space.block_count(),
            mount_count: self.mount_count,
            next_extent_id: self.extents.next_id(),
            next_snapshot_id: self.next_snapshot_id,
            log_head,
            flags: if self.checksums.is_some() { SUPERBLOCK_FLAG_DATA_CHECKSUMS } else { 0 }
                | self.delete_log.mode().flags(),
            roots,
            delete_log,
            unordered_below_snapshot_id: self.unordered_below_snapshot_id,
        };
        let encoded = superblock.encode();
        for slot in SUPERBLOCK_SLOTS {
            write_pieces(&mut self.flash, DeviceRole::Flash, vec![(slot, encoded.clone())])?;
            self.flash.flush().map_err(device_error(DeviceRole::Flash))?;
        }
        // Durable: blocks freed up to this CP may be reused from now on.
        let released_flash: Vec<u64> =
            if self.options.trim_released_flash { self.flash_space.pinned().ones().collect() } else { Vec::new() };
        self.data_space.checkpoint_durable();
        self.flash_space.checkpoint_durable();
        self.trim_released_flash(&released_flash)?;
        self.generation = generation;
        self.roots = roots;
        self.log = LogState::new(log_head);
        // Blocks freed up to this CP may have emptied whole allocation ranges.
        self.fresh_ranges.blocks_were_freed();
        self.stats.checkpoint_count += 1;
        self.stats.checkpoint_blocks_written += written + 2;
        self.stats.largest_checkpoint_blocks = self.stats.largest_checkpoint_blocks.max(written + 2);
        Ok(())
    }

    /// Tells the flash device that blocks no durable structure uses any more
    /// are garbage (old metadata, log blocks, destaged data), so a device can
    /// drop them: an SSD's TRIM, and a sparse simulated flash's memory.
    fn trim_released_flash(&mut self, released: &[u64]) -> Result<()> {
        let mut requests: Vec<IoRequest> = Vec::new();
        for &block in released {
            match requests.last_mut() {
                Some(last) if last.end_block() == block && last.block_count < u32::MAX => last.block_count += 1,
                _ => requests.push(IoRequest::trim(block, 1)),
            }
        }
        if requests.is_empty() {
            return Ok(());
        }
        let completions = self.flash.execute(requests).map_err(device_error(DeviceRole::Flash))?;
        for completion in completions {
            completion.result.map_err(device_error(DeviceRole::Flash))?;
        }
        Ok(())
    }

    /// Writes (into `writes`) every dirty tree node and bitmap block at new
    /// locations and returns the new root set and delete-log root.
    fn persist_metadata(
        &mut self,
        generation: u64,
        writes: &mut Vec<(u64, Vec<u8>)>,
        written_early: &mut u64,
    ) -> Result<(RootSet, TreePointer)> {
        let volume_id = self.volume_id;
        for id in self.extents.maps_to_persist() {
            let mut store = CheckpointStore { flash_space: &mut self.flash_space, writes, generation, volume_id };
            let pointer = self.extents.map_mut(id).persist(&mut store)?;
            if writes.len() >= CHECKPOINT_WRITE_BATCH_BLOCKS {
                // Bounded memory: a CP after a large destage rewrites every
                // aged map. The blocks are unreachable until the superblock.
                *written_early += writes.len() as u64;
                write_pieces(&mut self.flash, DeviceRole::Flash, std::mem::take(writes))?;
            }
            let mut record = self.extents.record(id).expect("every map has a record").clone();
            if record.map != pointer {
                record.map = pointer;
                self.extents.set_record(id, record);
            }
        }
        self.extents.maps_persisted();
        let mut store = CheckpointStore { flash_space: &mut self.flash_space, writes, generation, volume_id };
        let extent_table = self.extents.table_mut().persist(&mut store)?;
        let snapshot_table = self.snapshots.persist(&mut store)?;
        let copy_outs = self.copy_outs.tree_mut().persist(&mut store)?;
        let before_delete_log = store.writes.len();
        let delete_log = self.delete_log.persist(&mut store)?;
        self.stats.delete_log_blocks_written += (store.writes.len() - before_delete_log) as u64;
        // The data bitmaps no longer change in this CP: the table's live
        // counts are those of the maps it commits with.
        self.segments.refresh(&self.data_space);
        let mut store = CheckpointStore { flash_space: &mut self.flash_space, writes, generation, volume_id };
        let segment_usage = self.segments.table_mut().persist(&mut store)?;
        let (data_checksums, flash_checksums) = match &mut self.checksums {
            Some(checksums) => (
                persist_page_tree(checksums.data.pages_mut(), &mut self.flash_space, writes, volume_id, generation)?,
                persist_page_tree(checksums.flash.pages_mut(), &mut self.flash_space, writes, volume_id, generation)?,
            ),
            None => (TreePointer::default(), TreePointer::default()),
        };
        let refcounts =
            persist_page_tree(self.refcounts.pages_mut(), &mut self.flash_space, writes, volume_id, generation)?;
        for which_map in 0..2 {
            let assigned = assign_bitmap_locations(Some(&mut self.data_space), &mut self.flash_space, which_map)?;
            if which_map == 0 {
                self.stats.data_activemap_blocks_written += assigned;
            }
        }
        // Allocating for the flash bitmaps changes them: repeat until stable.
        loop {
            let active_moved = assign_bitmap_locations(None, &mut self.flash_space, 0)?;
            let summary_moved = assign_bitmap_locations(None, &mut self.flash_space, 1)?;
            if active_moved == 0 && summary_moved == 0 {
                break;
            }
        }
        let mut pointers = Vec::new();
        for space in [&mut self.data_space, &mut self.flash_space] {
            let (active, summary) = space.maps_mut();
            for bitmap in [active, summary] {
                let (blocks, pointer) = bitmap.pages_mut().encode_assigned(volume_id, generation);
                writes.extend(blocks);
                pointers.push(pointer);
            }
        }
        let roots = RootSet {
            extent_table,
            snapshot_table,
            data_active: pointers[0],
            data_summary: pointers[1],
            flash_active: pointers[2],
            flash_summary: pointers[3],
            data_checksums,
            flash_checksums,
            copy_outs,
            segment_usage,
            refcounts,
        };
        Ok((roots, delete_log))
    }
}
