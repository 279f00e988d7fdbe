//! Room on flash for the next consistency point.
//!
//! A CP writes every dirty metadata block to a new flash block before the old
//! one is released, and a snapshot keeps the old copy for as long as it lives.
//! A CP that finds no room cannot commit, and the volume stops. So nothing
//! that dirties metadata is admitted unless the CP after it is sure to fit:
//!
//! - an *update* (a write, a staged group, a trim) is admitted when the bound
//!   on the next CP with the update in it, the blocks it may stage and the
//!   deletion reserve fit in the allocatable flash. Otherwise a CP is
//!   committed first (it releases what was freed since the last one) and, if
//!   the update still does not fit, staged blocks are destaged (their flash
//!   is freed by the CP after the destage); failing that, it is refused with
//!   [`EngineError::NoSpace`] before anything changes. Refusing again is cheap: with nothing logged
//!   since, no CP is tried;
//! - a *metadata operation* (extent create, resize or delete, snapshot
//!   create, volume restore) is admitted when the CP that ends it — what is
//!   pending, the trees it changes and the flash bitmaps; for a restore, every
//!   tree, bitmap and checksum table — fits beside the deletion reserve,
//!   committing what is pending first if that makes room;
//! - deleting a snapshot, and destaging, may use the *deletion reserve*: room
//!   for the CPs of a snapshot deletion, so a volume whose flash is full of
//!   metadata that snapshots hold is always freed by deleting snapshots.
//!   Deleting an extent may not: while snapshots hold its blocks it frees
//!   nothing.
//!
//! The bound on the next CP is the smaller of two: the sum of what each record
//! logged since the last CP can dirty (`log::metadata_blocks_bound`), and the
//! structure's own bound (every tree, bitmap and checksum table rewritten
//! whole), refreshed every few records.

use proxima_device::BlockDevice;

use crate::checksums::CHECKSUMS_PER_PAGE;
use crate::codec::{leaf_capacity, LogRecord, CHECKSUMS_PER_RECORD, LOG_RECORD_CAPACITY};
use crate::destage::DestageScope;
use crate::error::{DeviceRole, EngineError, Result};
use crate::log::metadata_blocks_bound;
use crate::volume::Volume;

/// Records between refreshes of the structural CP bound (a walk over the
/// extents).
const BOUND_REFRESH_RECORDS: u64 = 64;
/// An upper bound on the metadata blocks one written block's records can
/// dirty: a staged or direct record (six, and three for checksum pages) and
/// its share of a checksum record (three for five blocks).
const UPDATE_BOUND_PER_BLOCK: u64 = 10;
/// Index nodes above the summary pages one deletion CP scans.
const DELETION_SCAN_INDEX_BLOCKS: u64 = 3;
/// Map entries of one leaf.
const MAP_LEAF_ENTRIES: u64 = leaf_capacity(20) as u64;

/// What an update may add to the next CP: two upper bounds on the metadata
/// blocks it can dirty, either of which holds, and what else it may take.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UpdateBound<'a> {
    /// The sum of its records' bounds (`log::metadata_blocks_bound`).
    records_bound: u64,
    /// The structural bound (computed only when the first does not settle
    /// it): the maps of these extents, grown by `new_entries` each, the four
    /// bitmaps, and `checksum_pages`.
    extents: &'a [u64],
    new_entries: u64,
    checksum_pages: u64,
    /// How many records it may log.
    records: u64,
    /// How many flash blocks it may stage.
    staged_blocks: u64,
}

/// How an update's room was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RoomMade {
    /// There was room.
    Already,
    /// A CP released blocks freed since the last one (maps unchanged).
    ByCheckpoint,
    /// A destage moved staged blocks to the data device (maps changed).
    ByDestage,
}

/// A metadata operation that commits a CP of its own.
#[derive(Debug, Clone, Copy)]
pub(crate) enum MetadataOperation {
    CreateSnapshot,
    CreateExtent,
    ResizeExtent {
        id: u64,
    },
    DeleteExtent {
        id: u64,
    },
    RestoreVolume,
    /// A clone of an extent of `run_count` runs sharing `shared_blocks` data blocks.
    CloneExtent {
        run_count: u64,
        shared_blocks: u64,
    },
}

impl MetadataOperation {
    fn name(self) -> &'static str {
        match self {
            MetadataOperation::CreateSnapshot => "a new snapshot",
            MetadataOperation::CreateExtent => "a new extent",
            MetadataOperation::ResizeExtent { .. } => "resizing the extent",
            MetadataOperation::DeleteExtent { .. } => "deleting the extent (delete snapshots first)",
            MetadataOperation::RestoreVolume => "restoring the volume",
            MetadataOperation::CloneExtent { .. } => "a clone",
        }
    }
}

/// How much growth of a map by `entries` entries can add to its persist bound.
fn map_growth_blocks(entries: u64) -> u64 {
    2 * (entries.div_ceil(MAP_LEAF_ENTRIES) + 1) + 4
}

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    /// The bound of writes of `blocks` blocks in all to the extents `ids`, up
    /// to `staged_blocks` of them staged.
    pub(crate) fn write_bound<'a>(&self, ids: &'a [u64], blocks: u64, staged_blocks: u64) -> UpdateBound<'a> {
        self.write_bound_displacing(ids, blocks, staged_blocks, blocks)
    }

    /// [`Volume::write_bound`] for writes that let go of at most
    /// `displaced_data_blocks` mapped data blocks (a destage displaces
    /// staged blocks only).
    fn write_bound_displacing<'a>(
        &self,
        ids: &'a [u64],
        blocks: u64,
        staged_blocks: u64,
        displaced_data_blocks: u64,
    ) -> UpdateBound<'a> {
        let checksum_pages = if self.checksums.is_some() {
            // Data and flash tables: the pages the blocks span, and the
            // index nodes above them.
            2 * (blocks.div_ceil(CHECKSUMS_PER_PAGE) + 1 + 2)
        } else {
            0
        };
        let refcount_pages = self.refcount_pages_bound(displaced_data_blocks);
        UpdateBound {
            records_bound: UPDATE_BOUND_PER_BLOCK * blocks + 3 + refcount_pages,
            extents: ids,
            new_entries: blocks + 2,
            checksum_pages: checksum_pages + refcount_pages,
            // A staged or direct record per block at most, and the checksum
            // records of direct writes.
            records: blocks + blocks.div_ceil(CHECKSUMS_PER_RECORD as u64) + 4,
            staged_blocks,
        }
    }

    /// The refcount-file blocks that letting go of `blocks` mapped data blocks
    /// can dirty: none while no block is shared, else a page per block (the
    /// blocks may lie anywhere) and the index nodes above, at most the whole
    /// tree.
    fn refcount_pages_bound(&self, blocks: u64) -> u64 {
        if self.refcounts.shared_block_count() == 0 {
            return 0;
        }
        let tree = self.refcounts.pages().tree_block_count();
        (2 * blocks + 4).min(tree)
    }

    /// The bound of unmapping from extent `ids[0]` with `records`.
    pub(crate) fn unmap_bound<'a>(&self, ids: &'a [u64; 1], records: &[LogRecord]) -> UpdateBound<'a> {
        let checksums = self.checksums.is_some();
        let unmapped: u64 = records
            .iter()
            .map(|record| match record {
                LogRecord::Unmap { block_count, .. } => u64::from(*block_count),
                _ => 0,
            })
            .sum();
        let refcount_pages = self.refcount_pages_bound(unmapped);
        UpdateBound {
            records_bound: records.iter().map(|record| metadata_blocks_bound(record, checksums)).sum::<u64>()
                + refcount_pages,
            extents: ids,
            new_entries: 2,
            checksum_pages: refcount_pages,
            records: records.len() as u64,
            staged_blocks: 0,
        }
    }

    /// The structural bound of `update`.
    fn structure_bound(&self, update: &UpdateBound<'_>) -> u64 {
        let mut ids = update.extents.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let maps: u64 = ids
            .iter()
            .map(|id| {
                self.extents.find_map(*id).map_or(0, |map| map.persist_bound_blocks())
                    + map_growth_blocks(update.new_entries)
            })
            .sum();
        let bitmaps: u64 = self.data_space.tree_block_count() + self.flash_space.tree_block_count();
        maps + bitmaps + update.checksum_pages
    }

    /// Admits an update: the next CP with it is sure to fit (see the module
    /// documentation), committing or destaging first if that makes room (and
    /// saying which); else refuses it before anything changes.
    pub(crate) fn ensure_room_for_update(&mut self, update: UpdateBound<'_>) -> Result<RoomMade> {
        if self.update_fits(update) {
            return Ok(RoomMade::Already);
        }
        if self.log.records_since_checkpoint > 0 {
            self.commit()?;
            if self.update_fits(update) {
                return Ok(RoomMade::ByCheckpoint);
            }
        }
        // Staged blocks are flash the destage gives back. A destage leaves
        // a layout's hot blocks staged unless nothing else is: a second one
        // moves them too.
        for _ in 0..2 {
            if self.staged_block_count == 0
                || !self.options.auto_destage
                || !self.try_destage(DestageScope::Everything)?
            {
                break;
            }
            if self.update_fits(update) {
                return Ok(RoomMade::ByDestage);
            }
        }
        Err(self.flash_full("this write's metadata"))
    }

    /// Admits a metadata operation: the CP that ends it, with what is
    /// pending, fits beside the deletion reserve — committing first if that
    /// makes room; else refuses it before anything changes.
    pub(crate) fn ensure_room_for_metadata_operation(&mut self, operation: MetadataOperation) -> Result<()> {
        let fits = |volume: &mut Self| {
            let needed = volume.pending_checkpoint_bound()
                + volume.metadata_operation_bound(operation)
                + volume.deletion_reserve_blocks();
            needed <= volume.flash_space.allocatable_count()
        };
        if fits(self) {
            return Ok(());
        }
        if self.log.records_since_checkpoint > 0 {
            self.commit()?;
            if fits(self) {
                return Ok(());
            }
        }
        Err(self.flash_full(operation.name()))
    }

    /// An upper bound on what `operation` adds to the CP that ends it: the
    /// trees it changes and the flash bitmaps (which every CP rewrites).
    fn metadata_operation_bound(&self, operation: MetadataOperation) -> u64 {
        let flash_bitmaps = self.flash_space.tree_block_count();
        let data_bitmaps = self.data_space.tree_block_count();
        let extent_table = self.extents.table().persist_bound_blocks();
        let changed = match operation {
            MetadataOperation::CreateSnapshot => self.snapshots.persist_bound_blocks(),
            MetadataOperation::CreateExtent => extent_table + 1,
            MetadataOperation::ResizeExtent { id } | MetadataOperation::DeleteExtent { id } => {
                let map = self.extents.find_map(id);
                let mapped = map.map_or(0, crate::map::mapped_block_count);
                extent_table
                    + map.map_or(0, |map| map.persist_bound_blocks())
                    + data_bitmaps
                    + self.refcount_pages_bound(mapped)
            }
            MetadataOperation::RestoreVolume => self.checkpoint_bound_blocks(),
            // The clone's map, the refcount pages its blocks span (and their
            // index nodes), the data bitmaps (blocks a snapshot clone takes
            // back from the summary).
            MetadataOperation::CloneExtent { run_count, shared_blocks } => {
                extent_table
                    + map_growth_blocks(run_count)
                    + (2 * shared_blocks.div_ceil(crate::refcount::REFCOUNTS_PER_PAGE) + 4)
                        .min(self.refcounts.pages().tree_block_count())
                    + data_bitmaps
            }
        };
        changed + flash_bitmaps + 4
    }

    /// Whether a destage batch of `blocks` blocks fits: it may use the
    /// deletion reserve, since the CP after it frees its staged blocks.
    pub(crate) fn destage_batch_fits(&mut self, id: u64, blocks: u64) -> bool {
        let room = self.flash_space.allocatable_count();
        self.checkpoint_fits(self.write_bound_displacing(&[id], blocks, 0, 0), room)
    }

    /// Flash blocks kept for the CP of a snapshot deletion: the data summary
    /// pages one CP's scan clears, the flash bitmaps, both tables, the log
    /// head and slack. (The copies the CP before wrote are released once this
    /// one is durable, so one CP's worth is enough for each in turn.)
    pub(crate) fn deletion_reserve_blocks(&self) -> u64 {
        let data_summary = self.data_space.summary().tree_block_count();
        let scanned = (self.options.scan_pages_per_checkpoint.max(1) + DELETION_SCAN_INDEX_BLOCKS).min(data_summary);
        let flash_bitmaps = self.flash_space.tree_block_count();
        let tables = self.extents.table().persist_bound_blocks() + self.snapshots.persist_bound_blocks();
        let delete_log = self.delete_log.reserve_blocks(self.data_space.active().tree_block_count());
        scanned + flash_bitmaps + tables + delete_log + 8
    }

    fn update_fits(&mut self, update: UpdateBound<'_>) -> bool {
        let room =
            self.flash_space.allocatable_count().saturating_sub(self.deletion_reserve_blocks() + update.staged_blocks);
        self.checkpoint_fits(update, room)
    }

    /// Whether the next CP, and the log until it, fit in `room` flash blocks
    /// with `update` done.
    fn checkpoint_fits(&mut self, update: UpdateBound<'_>, room: u64) -> bool {
        // The segment usage table's live counts change with any update: its
        // whole rewrite is kept aside (nothing without a segment layout).
        let room = room.saturating_sub(self.segment_table_bound_blocks());
        let log_blocks = self.log_blocks_with(update.records);
        let pending = self.log.records_bound_blocks;
        if pending + update.records_bound + log_blocks <= room {
            // The cheap bound settles it.
            return true;
        }
        let pending = pending.min(self.structural_checkpoint_bound());
        pending + update.records_bound.min(self.structure_bound(&update)) + log_blocks <= room
    }

    /// An upper bound on the flash blocks the next CP needs for what is
    /// pending, and the log until it.
    fn pending_checkpoint_bound(&mut self) -> u64 {
        self.log.records_bound_blocks.min(self.structural_checkpoint_bound())
            + self.log_blocks_with(0)
            + self.segment_table_bound_blocks()
    }

    /// What rewriting the segment usage table can take at the next CP (0
    /// when the layout keeps none).
    pub(crate) fn segment_table_bound_blocks(&self) -> u64 {
        if self.segments.enabled() {
            self.segments.table().persist_bound_blocks() + 2
        } else {
            0
        }
    }

    /// The flash blocks this epoch's log holds and will hold with `records`
    /// more records (both copies of each block), and the next log head.
    fn log_blocks_with(&self, records: u64) -> u64 {
        let unwritten = self.log.pending.len() as u64 + records;
        self.log.epoch_blocks.len() as u64 + 2 * unwritten.div_ceil(LOG_RECORD_CAPACITY as u64) + 4
    }

    /// The structural bound on the next CP ([`Volume::checkpoint_bound_blocks`]),
    /// recomputed every [`BOUND_REFRESH_RECORDS`] records, with the records'
    /// own bounds added since.
    pub(crate) fn structural_checkpoint_bound(&mut self) -> u64 {
        let records = self.log.records_since_checkpoint;
        let by_records = self.log.records_bound_blocks;
        if self.log.metadata_bound_at_records.is_none_or(|at| records >= at + BOUND_REFRESH_RECORDS) {
            self.log.metadata_bound = self.checkpoint_bound_blocks_cached();
            self.log.metadata_bound_at_records = Some(records);
            self.log.records_bound_at_refresh = by_records;
        }
        self.log.metadata_bound + (by_records - self.log.records_bound_at_refresh)
    }

    pub(crate) fn flash_full(&self, what: &str) -> EngineError {
        let space = self.space();
        let remedy = if space.flash.snapshot_only_blocks > 0 {
            format!("{} are held only by snapshots: deleting snapshots frees them", space.flash.snapshot_only_blocks)
        } else {
            "the flash is too small for this volume's metadata and staging".to_owned()
        };
        EngineError::NoSpace {
            role: DeviceRole::Flash,
            detail: format!(
                "no flash room for {what}: {} of {} flash blocks are allocatable; {remedy}",
                space.flash.allocatable_blocks, space.flash.block_count
            ),
        }
    }
}
