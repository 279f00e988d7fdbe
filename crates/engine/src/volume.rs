//! A volume: extents on a data device and a flash device. This module holds
//! the devices and the control flow: format and open, extent management and
//! the entry points of the data path (write, trim, flush). The state lives in
//! parts with their own modules — `extents.rs`, `snapshot.rs`
//! (`SnapshotCaches`), `space.rs`, `checksums.rs`, `log/`, `layouts/`,
//! `health.rs` — and the work in executors: `staging.rs` (writes),
//! `destage.rs`, `read.rs`, `checkpoint.rs`, `room.rs` (admission).

use std::collections::{BTreeMap, HashMap};

use proxima_device::BlockDevice;
use serde::Serialize;

use crate::bitmap::PersistentBitmap;
use crate::checksums::{Checksums, PersistentChecksums, CHECKSUMS_PER_PAGE};
use crate::cleaning::CleaningSettings;
use crate::codec::{
    ExtentRecord, LogRecord, LogSlot, RootSet, SnapshotRecord, Superblock, BITS_PER_PAGE, BLOCK_SIZE, NAME_CAPACITY,
    SUPERBLOCK_SLOTS,
};
use crate::content::ContentChanges;
use crate::copy_out::CopyOuts;
use crate::delete_log::{DeleteLog, DeleteLogMode};
use crate::error::{DeviceRole, EngineError, Result, Unsuitable};
use crate::extents::Extents;
use crate::health::Health;
use crate::io::{block_bytes, in_memory, FlashReader};
use crate::layouts::ranges::FreshRangeSearch;
use crate::layouts::{Layout, LayoutParameters, LayoutStrategy, Placement};
use crate::log::{LogState, RecoveryReport};
use crate::map::{self, ExtentMap, LayoutScore, Location};
use crate::pages::tree_block_count_for;
use crate::realloc::ReadRealloc;
use crate::refcount::{PersistentRefcounts, REFCOUNTS_PER_PAGE};
use crate::room::MetadataOperation;
use crate::segments::{Segments, DEFAULT_SEGMENT_BLOCKS};
use crate::snapshot::SnapshotCaches;
use crate::space::SpaceMap;
use crate::staged_cache::StagedCache;
use crate::staging::Payload;
use crate::tree::PersistentTree;

const BLOCK_BYTES: u64 = BLOCK_SIZE as u64;
/// Most log records between two CPs (with `records_per_checkpoint` derived):
/// bounds the replay at open, which reads back every staged block it names.
pub const MAX_RECORDS_PER_CHECKPOINT: u64 = 65_536;
/// Smallest flash device a volume accepts, in blocks.
pub const MIN_FLASH_BLOCKS: u64 = 64;

/// Whether a change of the maps is logged (replayed after a crash) or not
/// (made durable by the CP that follows it, or itself a replay).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Logging {
    /// A log record describes it.
    Logged,
    /// The CP the operation ends with records it.
    Unlogged,
}

/// How a volume behaves (not stored on disk: a volume may be reopened with
/// another layout; every layout reads every other's blocks).
#[derive(Debug, Clone, PartialEq)]
pub struct VolumeOptions {
    /// The data layout (docs/layouts.md).
    pub layout: Layout,
    /// Writes smaller than this are staged in the flash log (168 KiB, as in
    /// the paper: 42 blocks). 0 disables staging.
    pub staging_threshold_bytes: u64,
    /// Flash blocks the staging area may hold (0: derive from the flash size,
    /// leaving room for metadata). When the staged blocks would exceed it, the
    /// staging area is destaged (or, without `auto_destage`, the write fails
    /// with [`EngineError::StagingFull`]).
    pub staging_capacity_blocks: u64,
    /// Blocks per allocation range on the data device (256 = 1 MiB for
    /// nearline drives; 128 = 512 KiB for enterprise drives).
    pub allocation_range_blocks: u64,
    /// How many allocation ranges each way destage inspects for room near a
    /// group's neighbours before taking a new range.
    pub proximal_span_ranges: u64,
    /// Fraction of each allocation range a first (large) write leaves free for
    /// later updates, in `[0, 1)`.
    pub range_reserve_fraction: f64,
    /// Destage automatically when the staging area is full. When false, the
    /// caller decides when to destage ([`Volume::destage_observed`]).
    pub auto_destage: bool,
    /// Staged blocks a bounded destage step moves, the densest windows first
    /// ([`Volume::destage_step`]; an automatic destage for a write's room is
    /// one such step). 0: a 64th of the staging capacity, at least 64.
    pub destage_step_blocks: u64,
    /// Whether data blocks carry bytes. When false (metadata-only simulation)
    /// the data device may drop payload; writes of data blocks carry none
    /// (staged blocks are written to flash as zeroes, which a sparse flash
    /// device need not store) and reads of data blocks return zeroes.
    /// Metadata always carries its bytes.
    pub payload: bool,
    /// Trim the flash blocks each durable CP releases (old metadata, log and
    /// destaged blocks), so an SSD or a sparse simulated flash can drop them.
    /// Each released run is one trim request: on a file that is a hole punch
    /// per run, which a busy real volume may prefer to skip.
    pub trim_released_flash: bool,
    /// Data-activemap pages a snapshot deletion scan processes per CP.
    pub scan_pages_per_checkpoint: u64,
    /// How a snapshot deletion scan updates the data summary (docs/wafl.md,
    /// "Snapshot scans").
    pub snapshot_deletion: SnapshotDeletion,
    /// Take a CP on its own after this many log records (0: derive from the
    /// flash reserve and the size of the metadata, see
    /// `checkpoint_if_log_is_long`).
    pub records_per_checkpoint: u64,
    /// Staged writes per measurement interval of a layout that chooses a hot
    /// set from its write counts (`hylog`); 0: as many as the data device
    /// has blocks in use (one pass over the data).
    pub measurement_interval_writes: u64,
    /// The share h of the blocks in use a `hylog` volume keeps hot at the end
    /// of each measurement interval, the most written first; `None`: the h
    /// Eq 8 prices cheapest, as the paper's HyLog chooses it. A fixed h is
    /// the paper's Figure 7 comparison, not a policy.
    pub hylog_hot_fraction: Option<f64>,
    /// Full log blocks of records held in memory while the data device has
    /// unflushed writes, written after one data flush once this many are
    /// full (at least 1; see `log/mod.rs`).
    pub log_blocks_held_while_data_unflushed: usize,
    /// On a data device with redundancy that a crash can leave inconsistent
    /// (RAID-4/5: the write hole), log the regions about to be written before
    /// writing them, and resynchronise them at the next open after a crash.
    /// Off only where something else keeps parity consistent (the
    /// laboratory's model of an array with NVRAM).
    pub write_intents: bool,
    /// Keep a crc32c of every data and staged block and verify every read
    /// against it (docs/format.md, "Checksum tables"). Decided at format
    /// (with `payload`: there is nothing to check without it); an open with
    /// options that disagree with the volume is refused.
    pub data_checksums: bool,
    /// Whether reads rewrite the scattered spans they read contiguously
    /// (docs/read-realloc.md). Off by default.
    pub read_realloc: ReadRealloc,
    /// How data-device frees reach the activemap (docs/wafl.md). Decided at
    /// format and kept in the superblock: an open takes the volume's own.
    pub delete_log: DeleteLogMode,
    /// Blocks per segment of the log-structured layouts (0: 128 blocks =
    /// 512 KiB, Eq 6 for the atlas10k disk; on an array pass a full stripe).
    pub segment_blocks: u64,
    /// The segment cleaner of the log-structured layouts.
    pub cleaning: CleaningSettings,
    /// Proximal layout only: a destaged block whose older version a snapshot
    /// still reads at the block's place first copies that version out
    /// beside it (in its allocation range, or the nearest with room), then
    /// takes the place: the paper's copy-out pipelined with the overwrite
    /// (Section 1). The live data keeps its places and the snapshots'
    /// versions lie near them. Off: the new version goes to free space near
    /// its neighbours, copy-on-write (docs/layouts.md).
    pub proximal_copy_out: bool,
    /// A read reads through gaps of at most this many blocks between the
    /// data-device places it needs, within an allocation range, in one
    /// request, rather than positioning again for each (0: never). On a
    /// disk, half a track: a gap costs its transfer, a request of its own
    /// about half a revolution (docs/layouts.md, "Reading through gaps").
    pub read_gap_blocks: u64,
    /// Staged blocks whose bytes are kept in memory after they are written,
    /// so that destaging them reads nothing back from flash (0: none). Worth
    /// it where no page cache holds the flash's recent writes: a volume
    /// whose devices bypass it (docs/engine.md, "Staged-block cache").
    pub staged_cache_blocks: u64,
}

impl Default for VolumeOptions {
    fn default() -> Self {
        Self {
            layout: Layout::default(),
            staging_threshold_bytes: 168 * 1024,
            staging_capacity_blocks: 0,
            allocation_range_blocks: 256,
            proximal_span_ranges: 100,
            range_reserve_fraction: 0.0,
            auto_destage: true,
            destage_step_blocks: 0,
            payload: true,
            trim_released_flash: true,
            scan_pages_per_checkpoint: 64,
            snapshot_deletion: SnapshotDeletion::Auto,
            records_per_checkpoint: 0,
            measurement_interval_writes: 0,
            hylog_hot_fraction: None,
            log_blocks_held_while_data_unflushed: 16,
            write_intents: true,
            data_checksums: true,
            read_realloc: ReadRealloc::OFF,
            delete_log: DeleteLogMode::None,
            segment_blocks: 0,
            cleaning: CleaningSettings::default(),
            proximal_copy_out: false,
            read_gap_blocks: 0,
            staged_cache_blocks: 0,
        }
    }
}

impl VolumeOptions {
    /// The policy parameters these options give.
    pub fn layout_parameters(&self) -> LayoutParameters {
        LayoutParameters {
            staging_threshold_blocks: self.staging_threshold_bytes.div_ceil(BLOCK_BYTES),
            allocation_range_blocks: self.allocation_range_blocks,
            proximal_span_ranges: self.proximal_span_ranges,
            range_reserve_fraction: self.range_reserve_fraction,
        }
    }

    /// The gaps a read reads through: at most `read_gap_blocks`, within an
    /// allocation range.
    pub(crate) fn read_gaps(&self) -> crate::read::ReadGaps {
        crate::read::ReadGaps { gap_blocks: self.read_gap_blocks, unit_blocks: self.allocation_range_blocks.max(1) }
    }

    /// Blocks per segment (the option, or its default).
    pub fn segment_blocks(&self) -> u64 {
        match self.segment_blocks {
            0 => DEFAULT_SEGMENT_BLOCKS,
            blocks => blocks,
        }
    }

    /// Whether a volume formatted or opened with these options keeps data
    /// checksums.
    fn keeps_checksums(&self) -> bool {
        self.payload && self.data_checksums
    }

    fn validate(&self) -> Result<()> {
        let problem = if self.allocation_range_blocks == 0 {
            "allocation_range_blocks must be at least 1"
        } else if !(0.0..1.0).contains(&self.range_reserve_fraction) {
            "range_reserve_fraction must lie in [0, 1)"
        } else if self.hylog_hot_fraction.is_some_and(|share| !(0.0..=1.0).contains(&share)) {
            "hylog_hot_fraction must lie in [0, 1]"
        } else if self.hylog_hot_fraction.is_some() && self.layout != Layout::Hylog {
            "hylog_hot_fraction applies to the hylog layout only"
        } else if self.proximal_copy_out && self.layout != Layout::Proximal {
            "proximal_copy_out applies to the proximal layout only"
        } else {
            return Ok(());
        };
        Err(EngineError::Unsuitable(Unsuitable::Options(problem)))
    }
}

/// How snapshot deletion scans update the data summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SnapshotDeletion {
    /// By subtraction, switching to addition when the data device runs low
    /// on space or the 010 property may not hold.
    #[default]
    Auto,
    /// By subtraction (by addition anyway while the 010 property may not
    /// hold, where subtraction would be wrong).
    Subtraction,
    /// By addition always.
    Addition,
}

/// Whether an extent may be created or grown so that the extents' sizes add
/// up to more than the data device holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overcommit {
    /// Refuse with [`EngineError::Overcommit`].
    Refuse,
    /// Allow: writes fail with [`EngineError::NoSpace`] once the device fills.
    Allow,
}

/// How full the staging area is, in blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StagingFill {
    /// Staged blocks (flash blocks that are some extent block's home).
    pub used_blocks: u64,
    /// The staging area's capacity.
    pub capacity_blocks: u64,
}

/// Counters since the volume was opened.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EngineStats {
    /// Consistency points committed.
    pub checkpoint_count: u64,
    /// Metadata blocks written by CPs.
    pub checkpoint_blocks_written: u64,
    /// Log record blocks written.
    pub log_blocks_written: u64,
    /// Blocks written to the staging log.
    pub staged_blocks_written: u64,
    /// Blocks written directly to the data device by writes.
    pub direct_blocks_written: u64,
    /// Blocks overwritten in place (in-place layout without a write cache).
    pub in_place_blocks_written: u64,
    /// Frame blocks copied out to the snapshot area before their overwrite
    /// (in-place layout with snapshots).
    pub copied_out_blocks: u64,
    /// Destage passes.
    pub destage_count: u64,
    /// Blocks moved from flash to the data device by destage.
    pub destaged_blocks: u64,
    /// Of those, blocks whose bytes came from the staged-block cache rather
    /// than a read of flash.
    pub destaged_blocks_from_memory: u64,
    /// Staged blocks a destage left in the staging area as hot, summed over
    /// the destages (the `proximal-hot` layout).
    pub retained_hot_blocks: u64,
    /// Hot sets a layout chose at the end of a measurement interval (`hylog`).
    pub hot_set_choices: u64,
    /// Staged blocks a destage wrote back over the data block they had
    /// overwritten, their frame home (in-place and `hylog` layouts).
    pub destaged_home_blocks: u64,
    /// Log records replayed at open.
    pub replayed_records: u64,
    /// Flushes requested.
    pub flush_count: u64,
    /// Blocks read that did not match their checksums.
    pub checksum_mismatches: u64,
    /// Of those, blocks repaired from the device's redundancy.
    pub repaired_blocks: u64,
    /// Blocks reads rewrote contiguously (reallocate-on-read).
    pub reallocated_blocks: u64,
    /// Blocks reads would have rewritten but found no contiguous run for.
    pub reallocation_skipped_blocks: u64,
    /// Data blocks the active tree let go of that reached the activemap
    /// (freed directly, or punched from the delete log).
    pub data_blocks_freed: u64,
    /// Data-activemap blocks (pages and index nodes) written by CPs.
    pub data_activemap_blocks_written: u64,
    /// Delete-log nodes written by CPs.
    pub delete_log_blocks_written: u64,
    /// Metadata blocks written by the largest CP.
    pub largest_checkpoint_blocks: u64,
    /// Segment cleaning passes.
    pub cleaning_passes: u64,
    /// Segments cleaning passes emptied.
    pub segments_cleaned: u64,
    /// Blocks cleaning read (whole victim segments).
    pub cleaning_blocks_read: u64,
    /// Live blocks cleaning moved (written).
    pub cleaning_blocks_written: u64,
    /// Of those, the blocks hole-plugging wrote into other segments' holes
    /// (a random write each, where the rest went to a log head in runs).
    pub cleaning_blocks_plugged: u64,
    /// Of those, the blocks written at another log stream's head, its own
    /// having no clean segment left to open (`wolf`, `hylog`).
    pub cleaning_blocks_at_other_heads: u64,
}

/// One extent as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExtentInfo {
    /// Its id.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// Blocks mapped (the rest are holes).
    pub mapped_block_count: u64,
    /// Runs in its map.
    pub run_count: u64,
    /// Its map's Smith–Seltzer layout score ([`map::layout_score`]).
    pub layout_score: LayoutScore,
}

/// Space accounting of one device, in blocks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceSpace {
    /// Blocks of the device.
    pub block_count: u64,
    /// In use by the active tree.
    pub used_blocks: u64,
    /// Held only by snapshots.
    pub snapshot_only_blocks: u64,
    /// Allocatable now.
    pub allocatable_blocks: u64,
    /// Freed since the last CP; allocatable once the next CP is durable.
    pub awaiting_checkpoint_blocks: u64,
}

/// Space accounting of a volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpaceReport {
    /// The data device.
    pub data: DeviceSpace,
    /// The flash device.
    pub flash: DeviceSpace,
    /// Flash blocks holding staged data.
    pub staged_blocks: u64,
    /// Data blocks holding copies of frame blocks for snapshots (in-place
    /// layout; counted in the data device's used blocks).
    pub copied_out_blocks: u64,
    /// Free data blocks inside the allocation ranges reserved for extents'
    /// first writes (counted in the data device's allocatable blocks).
    pub reserved_blocks: u64,
    /// Generation of the last durable CP.
    pub generation: u64,
}

/// One write of [`Volume::write_batch`].
#[derive(Debug, Clone, Copy)]
pub struct BatchedWrite<'a> {
    /// The extent.
    pub extent_id: u64,
    /// Where in the extent.
    pub offset_bytes: u64,
    /// What.
    pub bytes: &'a [u8],
    /// Durable on return.
    pub fua: bool,
}

/// The groups [`Volume::write_batch`] writes together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GroupKind {
    /// Staged as one append to the staging log.
    Staged,
    /// Placed in allocation ranges, written as gathered runs.
    Ranged,
}

/// A state of allocated or hole for a byte range (block status).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BlockStatus {
    /// First byte.
    pub offset_bytes: u64,
    /// Length in bytes.
    pub length_bytes: u64,
    /// Whether the range is mapped (false: a hole reading as zeroes).
    pub allocated: bool,
}

/// A volume of extents on a data device `D` and a flash device `F`.
///
/// `Volume` holds the devices and the control flow of every operation; the
/// state is in parts that each own one concern (extents, snapshots, space,
/// log, layout, health), and the parts that do no I/O are not generic over
/// the devices.
#[derive(Debug)]
pub struct Volume<D: BlockDevice, F: BlockDevice> {
    // ----- devices and options -----
    pub(crate) data: D,
    pub(crate) flash: F,
    pub(crate) options: VolumeOptions,
    /// Whether data blocks carry bytes: the option and the data device agree
    /// (kept so the data path need not ask the device for its info).
    pub(crate) data_payload: bool,

    // ----- the superblock's fields -----
    pub(crate) volume_id: u64,
    /// Generation of the last durable CP.
    pub(crate) generation: u64,
    pub(crate) mount_count: u64,
    pub(crate) next_snapshot_id: u64,
    /// The roots of the last durable CP.
    pub(crate) roots: RootSet,

    // ----- state parts -----
    /// The active extents and their maps.
    pub(crate) extents: Extents,
    /// When each part of each extent changed its contents (`content.rs`).
    pub(crate) content_changes: ContentChanges,
    /// The snapshot table.
    pub(crate) snapshots: PersistentTree<SnapshotRecord>,
    /// Where the in-place layout (and the proximal layout's destage, with
    /// its copy-out) copied out blocks snapshots hold.
    pub(crate) copy_outs: CopyOuts,
    /// The proximal layout's copy-out: per staged block (`(extent, logical
    /// block)`), the older version's place and the watermark its copy will
    /// get, copied out when the block is destaged (memory only).
    pub(crate) pending_copies: BTreeMap<(u64, u64), (u64, u64)>,
    /// The places the copy-out of the destage under way emptied, per block
    /// (`(extent, logical block)`): each block goes back to its own, not
    /// where a neighbour's run would continue (which, next to an
    /// allocation range's free tail, is not always the same).
    pub(crate) copied_homes: HashMap<(u64, u64), u64>,
    /// Where the next copy-out's search for a free block starts, going down
    /// from the top of the data device (the frame array's snapshot reserve).
    pub(crate) copy_out_cursor: u64,
    /// Loaded snapshot views, the deletion scan, the youngest snapmaps.
    pub(crate) snapshot_caches: SnapshotCaches,
    /// Free space of the data device.
    pub(crate) data_space: SpaceMap,
    /// Free space of the flash device (metadata, log and staging share it).
    pub(crate) flash_space: SpaceMap,
    /// The data device's delete log (empty and off unless the volume keeps one).
    pub(crate) delete_log: DeleteLog,
    /// The data checksum tables (`None`: a volume formatted without payload,
    /// which keeps none).
    pub(crate) checksums: Option<Checksums>,
    /// The refcount file: extra references to data blocks (clones).
    pub(crate) refcounts: PersistentRefcounts,
    /// Snapshots with an id below this one may break the 010 property (0:
    /// none does); see `clone.rs`.
    pub(crate) unordered_below_snapshot_id: u64,
    /// The log since the last CP.
    pub(crate) log: LogState,
    /// The layout's strategy and its private state.
    pub(crate) layout: Box<dyn LayoutStrategy>,
    /// Blocks staged since the layout's measurement interval last ended (in
    /// memory only).
    pub(crate) staged_in_interval: u64,
    /// The search for empty allocation ranges.
    pub(crate) fresh_ranges: FreshRangeSearch,
    /// Where the search for a reallocated piece's run far from its
    /// neighbours starts: after the last such run (in memory only).
    pub(crate) realloc_cursor: u64,
    /// Per reallocation shape (`read::ReallocShape`), `(CP generation,
    /// blocks)`: the last far search found no place of that many blocks, and
    /// none appears before a CP frees blocks, so larger pieces skip the
    /// search until then.
    pub(crate) realloc_far_miss: [Option<(u64, u64)>; 2],
    /// The data device's free count when a reallocation last committed to
    /// have the blocks freed before it back (`None`: never).
    pub(crate) realloc_commit_free_count: Option<u64>,
    /// Blocks whose home is the staging log.
    pub(crate) staged_block_count: u64,
    /// The data device's free count when a destage last placed nothing (the
    /// device was full); `None` since one placed something.
    pub(crate) destage_stall: Option<u64>,
    /// The buffer a destage reads staged blocks into, kept between destages:
    /// a fresh one of a step's size (megabytes) costs a page fault per 4 KiB
    /// as it is filled, which measurably slowed every step.
    pub(crate) destage_read_buffer: Vec<u8>,
    /// Recently staged blocks' bytes (`VolumeOptions::staged_cache_blocks`).
    pub(crate) staged_cache: StagedCache,
    /// Segments of the data device: usage table and log head.
    pub(crate) segments: Segments,
    /// Whether the volume stopped, and what recovery found at open.
    pub(crate) health: Health,
    /// Counters since open.
    pub(crate) stats: EngineStats,
}

pub(crate) fn validate_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "empty"
    } else if name.len() > NAME_CAPACITY {
        "longer than 64 bytes"
    } else if name.contains('@') || name.chars().any(char::is_control) {
        "contains '@' or a control character"
    } else {
        return Ok(());
    };
    Err(EngineError::InvalidName { name: name.to_string(), reason: reason.to_string() })
}

fn check_devices<D: BlockDevice, F: BlockDevice>(data: &D, flash: &F, options: &VolumeOptions) -> Result<()> {
    options.validate()?;
    for (role, info) in [(DeviceRole::Data, data.info()), (DeviceRole::Flash, flash.info())] {
        if info.block_size_bytes as usize != BLOCK_SIZE {
            return Err(EngineError::Unsuitable(Unsuitable::BlockSize {
                role,
                name: info.name,
                block_size_bytes: info.block_size_bytes,
                required_bytes: BLOCK_SIZE,
            }));
        }
        if !info.stores_payload && (role == DeviceRole::Flash || options.payload) {
            return Err(EngineError::Unsuitable(Unsuitable::NoPayload { role, name: info.name }));
        }
    }
    if flash.info().block_count < MIN_FLASH_BLOCKS {
        return Err(EngineError::Unsuitable(Unsuitable::FlashTooSmall {
            block_count: flash.info().block_count,
            minimum_blocks: MIN_FLASH_BLOCKS,
        }));
    }
    Ok(())
}

/// Flash blocks of the metadata whose shape the devices' sizes fix — the
/// free-space maps of both devices, the checksum tables and the refcount
/// file — for `data_block_count` data and `flash_block_count` flash blocks:
/// what formatting writes (every page of a new structure is written once),
/// and what a CP writes at most for them, beside the old copy until it is
/// durable. About 0.15 % of the data device with checksums, 0.05 % without.
/// Counted from the trees' shapes, without building them.
pub fn fixed_metadata_blocks(data_block_count: u64, flash_block_count: u64, options: &VolumeOptions) -> u64 {
    let tree = |blocks: u64, per_page: u64| tree_block_count_for(blocks.div_ceil(per_page));
    // Each device has an activemap and a summary map.
    let bitmaps = 2 * (tree(data_block_count, BITS_PER_PAGE) + tree(flash_block_count, BITS_PER_PAGE));
    let checksums = if options.keeps_checksums() {
        tree(data_block_count, CHECKSUMS_PER_PAGE) + tree(flash_block_count, CHECKSUMS_PER_PAGE)
    } else {
        0
    };
    bitmaps + checksums + tree(data_block_count, REFCOUNTS_PER_PAGE)
}

/// Flash blocks formatting a volume over `data_block_count` data blocks
/// needs on a flash device of `flash_block_count` blocks: the superblocks,
/// the [`fixed_metadata_blocks`] and [`MIN_FLASH_BLOCKS`] for the log.
pub fn format_flash_blocks(data_block_count: u64, flash_block_count: u64, options: &VolumeOptions) -> u64 {
    SUPERBLOCK_SLOTS.len() as u64
        + fixed_metadata_blocks(data_block_count, flash_block_count, options)
        + MIN_FLASH_BLOCKS
}

/// Refuses a flash device smaller than [`format_flash_blocks`] for `data`.
/// Only at format: a volume formatted already has its structures in place.
fn check_flash_holds_metadata<D: BlockDevice, F: BlockDevice>(
    data: &D,
    flash: &F,
    options: &VolumeOptions,
) -> Result<()> {
    let (data_block_count, flash_block_count) = (data.info().block_count, flash.info().block_count);
    let minimum_blocks = format_flash_blocks(data_block_count, flash_block_count, options);
    if flash_block_count < minimum_blocks {
        return Err(EngineError::Unsuitable(Unsuitable::FlashTooSmallForData {
            block_count: flash_block_count,
            minimum_blocks,
            data_block_count,
        }));
    }
    Ok(())
}

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    /// Formats a new, empty volume on the devices and opens it.
    pub fn format(data: D, flash: F, volume_id: u64, options: VolumeOptions) -> Result<Self> {
        check_devices(&data, &flash, &options)?;
        check_flash_holds_metadata(&data, &flash, &options)?;
        let data_block_count = data.info().block_count;
        let flash_block_count = flash.info().block_count;
        let mut flash_active = PersistentBitmap::new(flash_block_count);
        for slot in SUPERBLOCK_SLOTS {
            flash_active.put(slot, true);
        }
        let data_space = SpaceMap::new(
            DeviceRole::Data,
            PersistentBitmap::new(data_block_count),
            PersistentBitmap::new(data_block_count),
            0,
        );
        let flash_space = SpaceMap::new(DeviceRole::Flash, flash_active, PersistentBitmap::new(flash_block_count), 2);
        let mut volume = Self::assemble(data, flash, options, volume_id, data_space, flash_space);
        volume.delete_log = DeleteLog::new(volume.options.delete_log, data_block_count);
        if volume.options.keeps_checksums() {
            volume.checksums = Some(Checksums::new(data_block_count, flash_block_count));
        }
        volume.log = LogState::new(LogSlot::default());
        volume.commit()?;
        Ok(volume)
    }

    fn assemble(
        data: D,
        flash: F,
        options: VolumeOptions,
        volume_id: u64,
        data_space: SpaceMap,
        flash_space: SpaceMap,
    ) -> Self {
        let data_payload = options.payload && data.info().stores_payload;
        let layout = options.layout.strategy();
        let segments = Segments::new(
            PersistentTree::new(0),
            data_space.block_count(),
            options.segment_blocks(),
            layout.writes_segments(),
        );
        let data_block_count = data.info().block_count;
        let staged_cache = StagedCache::new(if data_payload { options.staged_cache_blocks } else { 0 });
        Self {
            staged_cache,
            data_payload,
            data,
            flash,
            options,
            volume_id,
            generation: 0,
            mount_count: 0,
            next_snapshot_id: 1,
            roots: RootSet::default(),
            extents: Extents::new(),
            content_changes: ContentChanges::default(),
            snapshots: PersistentTree::new(0),
            copy_outs: CopyOuts::new(),
            pending_copies: BTreeMap::new(),
            copied_homes: HashMap::new(),
            copy_out_cursor: u64::MAX,
            delete_log: DeleteLog::new(DeleteLogMode::None, data_space.block_count()),
            data_space,
            flash_space,
            log: LogState::new(LogSlot::default()),
            staged_block_count: 0,
            snapshot_caches: SnapshotCaches::default(),
            health: Health::default(),
            stats: EngineStats::default(),
            layout,
            fresh_ranges: FreshRangeSearch::default(),
            realloc_cursor: 0,
            realloc_far_miss: [None; 2],
            realloc_commit_free_count: None,
            checksums: None,
            refcounts: PersistentRefcounts::new(data_block_count),
            unordered_below_snapshot_id: 0,
            destage_stall: None,
            staged_in_interval: 0,
            destage_read_buffer: Vec::new(),
            segments,
        }
    }

    /// Opens a volume: loads the newest valid superblock, replays the log after
    /// it and commits a CP.
    pub fn open(data: D, flash: F, options: VolumeOptions) -> Result<Self> {
        Self::open_checked(data, flash, options, None)
    }

    /// Opens the volume `volume_id` as [`Volume::open`] does, refusing before
    /// anything is replayed or written when the devices hold another.
    pub fn open_as(data: D, flash: F, options: VolumeOptions, volume_id: u64) -> Result<Self> {
        Self::open_checked(data, flash, options, Some(volume_id))
    }

    fn open_checked(data: D, mut flash: F, options: VolumeOptions, volume_id: Option<u64>) -> Result<Self> {
        check_devices(&data, &flash, &options)?;
        let slots = read_superblock_slots(&mut flash)?;
        let superblock = newest_superblock(&slots)?;
        // A slot that is invalid, or a CP behind the other, is rewritten by
        // the CP this open commits.
        let stale_slots: Vec<u64> = SUPERBLOCK_SLOTS
            .iter()
            .zip(&slots)
            .filter(|(_, slot)| slot.as_ref().map_or(true, |slot| slot.generation != superblock.generation))
            .map(|(&slot, _)| slot)
            .collect();
        if let Some(expected) = volume_id.filter(|&expected| expected != superblock.volume_id) {
            return Err(EngineError::Unsuitable(Unsuitable::OtherVolume { found: superblock.volume_id, expected }));
        }
        if superblock.data_block_count != data.info().block_count
            || superblock.flash_block_count != flash.info().block_count
        {
            return Err(EngineError::Unsuitable(Unsuitable::SizesDiffer {
                superblock_data_blocks: superblock.data_block_count,
                superblock_flash_blocks: superblock.flash_block_count,
                data_blocks: data.info().block_count,
                flash_blocks: flash.info().block_count,
            }));
        }
        let mut reader = FlashReader {
            flash: &mut flash,
            volume_id: superblock.volume_id,
            flash_block_count: superblock.flash_block_count,
        };
        let roots = superblock.roots;
        if superblock.has_data_checksums() != options.keeps_checksums() {
            return Err(EngineError::Unsuitable(Unsuitable::ChecksumsDisagree {
                volume_keeps: superblock.has_data_checksums(),
            }));
        }
        let checksums = if superblock.has_data_checksums() {
            Some(Checksums {
                data: PersistentChecksums::load(roots.data_checksums, superblock.data_block_count, &mut reader)?,
                flash: PersistentChecksums::load(roots.flash_checksums, superblock.flash_block_count, &mut reader)?,
            })
        } else {
            None
        };
        let extents = PersistentTree::<ExtentRecord>::load(roots.extent_table, 0, &mut reader)?;
        let snapshots = PersistentTree::<SnapshotRecord>::load(roots.snapshot_table, 0, &mut reader)?;
        let segment_usage = PersistentTree::load(roots.segment_usage, 0, &mut reader)?;
        let copy_outs =
            CopyOuts::try_from_tree(PersistentTree::load(roots.copy_outs, 0, &mut reader)?).map_err(|detail| {
                EngineError::Corrupt { block: roots.copy_outs.block, what: "copy-out table".into(), detail }
            })?;
        let mut maps = HashMap::new();
        for (id, record) in extents.iter() {
            maps.insert(id, ExtentMap::load(record.map, id, &mut reader)?);
        }
        let load = |pointer, count, reader: &mut FlashReader<'_, F>| PersistentBitmap::load(pointer, count, reader);
        let data_space = SpaceMap::new(
            DeviceRole::Data,
            load(roots.data_active, superblock.data_block_count, &mut reader)?,
            load(roots.data_summary, superblock.data_block_count, &mut reader)?,
            0,
        );
        let flash_space = SpaceMap::new(
            DeviceRole::Flash,
            load(roots.flash_active, superblock.flash_block_count, &mut reader)?,
            load(roots.flash_summary, superblock.flash_block_count, &mut reader)?,
            2,
        );
        let delete_log = DeleteLog::load(
            DeleteLogMode::from_flags(superblock.flags),
            superblock.delete_log,
            superblock.data_block_count,
            &mut reader,
        )?;
        let mut volume = Self::assemble(data, flash, options, superblock.volume_id, data_space, flash_space);
        volume.delete_log = delete_log;
        volume.generation = superblock.generation;
        volume.mount_count = superblock.mount_count;
        volume.next_snapshot_id = superblock.next_snapshot_id;
        volume.roots = roots;
        volume.extents = Extents::loaded(extents, maps, superblock.next_extent_id);
        volume.snapshots = snapshots;
        volume.copy_outs = copy_outs;
        volume.segments = Segments::new(
            segment_usage,
            superblock.data_block_count,
            volume.options.segment_blocks(),
            volume.layout.writes_segments(),
        );
        volume.checksums = checksums;
        volume.refcounts = PersistentRefcounts::load(
            roots.refcounts,
            superblock.data_block_count,
            &mut FlashReader {
                flash: &mut volume.flash,
                volume_id: superblock.volume_id,
                flash_block_count: superblock.flash_block_count,
            },
        )?;
        volume.unordered_below_snapshot_id = superblock.unordered_below_snapshot_id;
        volume.staged_block_count = volume.count_staged_blocks();
        volume.refresh_youngest()?;
        // A deletion scan in progress decides, for pages it has passed, whether
        // a block freed by a replayed record is still held: load its state now.
        volume.scan_step(0)?;
        volume.log = LogState::new(superblock.log_head);
        let mut recovery = volume.replay_log(superblock.log_head)?;
        recovery.stale_superblock_slots = stale_slots;
        volume.health = Health::recovered(recovery);
        volume.mount_count += 1;
        volume.commit()?;
        Ok(volume)
    }

    fn count_staged_blocks(&self) -> u64 {
        self.extents
            .maps()
            .map(|(_, map)| map)
            .flat_map(|map| map.iter())
            .filter(|(_, run)| matches!(Location::from_raw(run.location()), Location::Flash(_)))
            .map(|(_, run)| run.count())
            .sum()
    }

    /// Commits and hands back the devices.
    pub fn close(mut self) -> Result<(D, F)> {
        self.commit()?;
        Ok((self.data, self.flash))
    }

    /// Hands back the devices without committing (what a crash leaves).
    pub fn into_devices(self) -> (D, F) {
        (self.data, self.flash)
    }

    /// The data device.
    pub fn data_device(&self) -> &D {
        &self.data
    }

    /// The flash device.
    pub fn flash_device(&self) -> &F {
        &self.flash
    }

    /// The data device, for experiments (moving disk heads, taking per-member
    /// statistics). Writing to it behind the volume's back corrupts it.
    pub fn data_device_mut(&mut self) -> &mut D {
        &mut self.data
    }

    /// The flash device, for experiments. Writing to it behind the volume's
    /// back corrupts it.
    pub fn flash_device_mut(&mut self) -> &mut F {
        &mut self.flash
    }

    /// The options the volume was opened with.
    pub fn options(&self) -> &VolumeOptions {
        &self.options
    }

    /// How full the staging area is.
    pub fn staging_fill(&self) -> StagingFill {
        StagingFill { used_blocks: self.staged_block_count, capacity_blocks: self.staging_capacity_blocks() }
    }

    /// Counters since open.
    pub fn stats(&self) -> &EngineStats {
        &self.stats
    }

    /// The share of the blocks in use the layout last chose hot (`hylog`
    /// once a measurement interval has ended; `None` otherwise).
    pub fn hot_fraction(&self) -> Option<f64> {
        self.layout.hot_fraction()
    }

    /// The volume id.
    pub fn volume_id(&self) -> u64 {
        self.volume_id
    }

    /// Generation of the last durable CP.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// What recovery found when the volume was opened (empty after format).
    pub fn recovery(&self) -> &RecoveryReport {
        self.health.recovery()
    }

    /// Whether the volume keeps data checksums (every volume formatted with
    /// payload does).
    pub fn has_data_checksums(&self) -> bool {
        self.checksums.is_some()
    }

    /// The layout's name.
    pub fn policy_name(&self) -> &str {
        self.layout.kind().name()
    }

    pub(crate) fn check_usable(&self) -> Result<()> {
        self.health.check_usable()
    }

    /// Runs `operation`; a failure of it stops the volume (the in-memory state
    /// may no longer match what is on disk), and so does a panic, which then
    /// continues to unwind: nothing is committed after it, every later call
    /// fails with [`EngineError::Failed`], and reopening recovers from the
    /// last durable CP.
    pub(crate) fn guarded<T>(&mut self, operation: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.check_usable()?;
        let result = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| operation(&mut *self))) {
            Ok(result) => result,
            Err(panic) => {
                self.health.stop(format!("an operation panicked: {}", panic_message(panic.as_ref())));
                std::panic::resume_unwind(panic)
            }
        };
        if let Err(error) = &result {
            if stops_the_volume(error) {
                self.health.stop(error.to_string());
            }
        }
        result
    }

    /// Why the volume stopped accepting operations, if it did.
    pub fn failure(&self) -> Option<&str> {
        self.health.failure()
    }

    // ----- extents -----

    /// Creates an empty extent of `size_bytes` (a multiple of 4096) and
    /// commits, refusing to commit more than the data device holds.
    pub fn create_extent(&mut self, name: &str, size_bytes: u64) -> Result<u64> {
        self.create_extent_with(name, size_bytes, Overcommit::Refuse)
    }

    /// Creates an empty extent of `size_bytes` (a multiple of 4096) and
    /// commits. Extents are thin: blocks are allocated as they are written,
    /// so the sizes of all extents may add up to more than the data device
    /// holds only when `overcommit` allows it (writes then fail with
    /// [`EngineError::NoSpace`] when the device fills).
    pub fn create_extent_with(&mut self, name: &str, size_bytes: u64, overcommit: Overcommit) -> Result<u64> {
        validate_name(name)?;
        check_size(size_bytes)?;
        if self.extents.id_of(name).is_some() {
            return Err(EngineError::ExtentExists(name.to_string()));
        }
        self.check_commitment(0, size_bytes, overcommit)?;
        self.guarded(|volume| {
            volume.ensure_room_for_metadata_operation(MetadataOperation::CreateExtent)?;
            let id = volume.extents.create(ExtentRecord {
                name: name.to_string(),
                size_bytes,
                map: Default::default(),
                created_generation: volume.generation + 1,
                reservation: None,
            });
            volume.commit()?;
            Ok(id)
        })
    }

    /// Deletes an extent, freeing its blocks, and commits.
    pub fn delete_extent(&mut self, name: &str) -> Result<()> {
        let id = self.extent_id(name)?;
        self.content_changes.extent_changed(id);
        self.guarded(|volume| {
            volume.ensure_room_for_metadata_operation(MetadataOperation::DeleteExtent { id })?;
            volume.flush_pending_records()?;
            let mut map = volume.extents.remove(id);
            volume.fresh_ranges.reservation_released();
            let end = map.iter().next_back().map_or(0, |(key, run)| key + run.count());
            for (location, count) in map::punch(&mut map, 0, end) {
                volume.free_location(location, count);
            }
            for block in map.blocks() {
                volume.flash_space.free(block);
            }
            volume.commit()
        })
    }

    /// Changes an extent's size; shrinking unmaps the blocks past the new end.
    /// Growing refuses to commit more than the data device holds.
    pub fn resize_extent(&mut self, name: &str, size_bytes: u64) -> Result<()> {
        self.resize_extent_with(name, size_bytes, Overcommit::Refuse)
    }

    /// Changes an extent's size, growing it past what the data device holds
    /// only when `overcommit` allows (see [`Volume::create_extent_with`]).
    pub fn resize_extent_with(&mut self, name: &str, size_bytes: u64, overcommit: Overcommit) -> Result<()> {
        check_size(size_bytes)?;
        let id = self.extent_id(name)?;
        let current = self.extent_size(id)?;
        self.check_commitment(current, size_bytes, overcommit)?;
        self.content_changes.extent_changed(id);
        self.guarded(|volume| {
            volume.ensure_room_for_metadata_operation(MetadataOperation::ResizeExtent { id })?;
            volume.flush_pending_records()?;
            let mut record = volume.extents.record(id).expect("listed").clone();
            if size_bytes < record.size_bytes {
                let first = size_bytes / BLOCK_BYTES;
                let count = record.size_bytes / BLOCK_BYTES - first;
                volume.unmap_blocks(id, first, count, Logging::Unlogged)?;
            }
            record.size_bytes = size_bytes;
            volume.extents.set_record(id, record);
            volume.trim_reservation(id);
            volume.commit()
        })
    }

    /// Bytes the extents may hold in all (the sum of their sizes).
    pub fn committed_bytes(&self) -> u64 {
        self.extents.records().map(|(_, record)| record.size_bytes).sum()
    }

    /// Bytes the data device holds.
    pub fn physical_bytes(&self) -> u64 {
        self.data_space.block_count() * BLOCK_BYTES
    }

    /// Refuses an extent going from `old_bytes` to `new_bytes` when that
    /// would commit more than the data device holds, unless allowed.
    pub(crate) fn check_commitment(&self, old_bytes: u64, new_bytes: u64, overcommit: Overcommit) -> Result<()> {
        let committed = self.committed_bytes() - old_bytes;
        let physical = self.physical_bytes();
        if overcommit == Overcommit::Refuse && new_bytes > old_bytes && committed + new_bytes > physical {
            return Err(EngineError::Overcommit {
                committed_bytes: committed,
                requested_bytes: new_bytes,
                physical_bytes: physical,
            });
        }
        Ok(())
    }

    /// The id of the extent named `name`.
    pub fn extent_id(&self, name: &str) -> Result<u64> {
        self.extents.id_of(name).ok_or_else(|| EngineError::NoSuchExtent(name.to_string()))
    }

    /// Every extent, by id.
    pub fn extents(&self) -> Vec<ExtentInfo> {
        self.extents
            .records()
            .map(|(id, record)| {
                let map = self.extents.map(id);
                ExtentInfo {
                    id,
                    name: record.name.clone(),
                    size_bytes: record.size_bytes,
                    mapped_block_count: map::mapped_block_count(map),
                    run_count: map.len() as u64,
                    layout_score: map::layout_score(map),
                }
            })
            .collect()
    }

    /// Where logical block `logical_block` of extent `id` lives now (`None`: a hole).
    pub fn block_location(&self, id: u64, logical_block: u64) -> Result<Option<Location>> {
        let map = self.extents.find_map(id).ok_or_else(|| EngineError::NoSuchExtent(format!("#{id}")))?;
        Ok(map::lookup(map, logical_block))
    }

    /// Every copy snapshots read instead of a data block, as `(block,
    /// copy)` in block order (docs/layouts.md, "Copy-out of snapshot blocks").
    pub fn copy_out_places(&self) -> Vec<(u64, u64)> {
        self.copy_outs.places().collect()
    }

    /// Size in bytes of extent `id`.
    pub fn extent_size(&self, id: u64) -> Result<u64> {
        self.extents
            .record(id)
            .map(|record| record.size_bytes)
            .ok_or_else(|| EngineError::NoSuchExtent(format!("#{id}")))
    }

    pub(crate) fn check_range(&self, id: u64, offset_bytes: u64, length_bytes: u64) -> Result<()> {
        let size = self.extent_size(id)?;
        match offset_bytes.checked_add(length_bytes) {
            Some(end) if end <= size => Ok(()),
            _ => Err(EngineError::InvalidRange(format!(
                "{length_bytes} bytes at offset {offset_bytes} exceed extent #{id} of {size} bytes"
            ))),
        }
    }

    // ----- writes -----

    /// Writes `bytes` at `offset_bytes` of extent `id`. With `fua`, the write is
    /// durable when this returns; otherwise at the next [`Volume::flush`].
    pub fn write(&mut self, id: u64, offset_bytes: u64, bytes: &[u8], fua: bool) -> Result<()> {
        self.check_range(id, offset_bytes, bytes.len() as u64)?;
        self.content_changes.changed(id, offset_bytes, bytes.len() as u64);
        self.guarded(|volume| {
            let first = offset_bytes / BLOCK_BYTES;
            let aligned = offset_bytes.is_multiple_of(BLOCK_BYTES) && (bytes.len() as u64).is_multiple_of(BLOCK_BYTES);
            if aligned && !bytes.is_empty() {
                // Whole blocks: written from the caller's bytes, no merge buffer.
                volume.write_blocks(id, first, Payload::Bytes(bytes))?;
            } else if !bytes.is_empty() {
                let end = (offset_bytes + bytes.len() as u64).div_ceil(BLOCK_BYTES);
                let mut buffer = volume.partial_block_buffer(id, offset_bytes, bytes.len() as u64, first, end)?;
                let skip = in_memory(offset_bytes - first * BLOCK_BYTES);
                buffer[skip..skip + bytes.len()].copy_from_slice(bytes);
                volume.write_blocks(id, first, Payload::Bytes(&buffer))?;
            }
            volume.finish_update(fua)
        })
    }

    /// Writes several requests, as [`Volume::write`] each, in order, and
    /// returns each one's outcome. Consecutive writes that the layout stages
    /// (block-aligned, below the staging threshold) are staged together: their
    /// flash blocks are allocated at once and written with one gathered
    /// request per run, so many small random writes — of one connection or of
    /// several — become one append to the staging log, and their log records
    /// share log blocks. Consecutive large writes the layout places in
    /// allocation ranges are allocated together and their data written with
    /// one gathered request per run of consecutive blocks, so several
    /// clients' large writes reach the device as few large requests. With FUA
    /// on any of them, the batch is made durable once, after all of them.
    pub fn write_batch(&mut self, writes: &[BatchedWrite<'_>]) -> Vec<Result<()>> {
        for write in writes {
            self.content_changes.changed(write.extent_id, write.offset_bytes, write.bytes.len() as u64);
        }
        let mut outcomes: Vec<Option<Result<()>>> = writes.iter().map(|_| None).collect();
        let mut index = 0;
        while index < writes.len() {
            let kind = self.group_kind(&writes[index]);
            let group_end = index
                + 1
                + writes[index + 1..]
                    .iter()
                    .take_while(|&write| kind.is_some() && self.group_kind(write) == kind)
                    .count();
            if let (Some(kind), 2..) = (kind, group_end - index) {
                let group: Vec<(u64, u64, &[u8])> = writes[index..group_end]
                    .iter()
                    .map(|write| (write.extent_id, write.offset_bytes / BLOCK_BYTES, write.bytes))
                    .collect();
                let written = self.guarded(|volume| match kind {
                    GroupKind::Staged => volume.write_staged_group(&group),
                    GroupKind::Ranged => volume.write_ranged_group(&group),
                });
                match written {
                    Ok(true) => {
                        for outcome in &mut outcomes[index..group_end] {
                            *outcome = Some(Ok(()));
                        }
                        index = group_end;
                        continue;
                    }
                    // No room for all at once, or refused before any change:
                    // write them one by one below.
                    Ok(false) | Err(EngineError::NoSpace { .. }) => {}
                    Err(error) => {
                        // The volume stopped; each write reports it.
                        outcomes[index] = Some(Err(error));
                        index += 1;
                        continue;
                    }
                }
            }
            let write = &writes[index];
            outcomes[index] = Some(self.write(write.extent_id, write.offset_bytes, write.bytes, false));
            index += 1;
        }
        let fua = writes.iter().zip(&outcomes).any(|(write, outcome)| write.fua && matches!(outcome, Some(Ok(()))));
        let finish = self.guarded(|volume| volume.finish_update(fua));
        outcomes
            .into_iter()
            .zip(writes)
            .map(|(outcome, write)| {
                let outcome = outcome.expect("every write has an outcome");
                match (&outcome, &finish) {
                    (Ok(()), Err(error)) if write.fua => Err(EngineError::Failed(error.to_string())),
                    _ => outcome,
                }
            })
            .collect()
    }

    /// Which group a write of a batch may join, as the map stands: a valid,
    /// block-aligned write the layout stages, or one it places in ranges;
    /// `None` for any other (written alone).
    fn group_kind(&self, write: &BatchedWrite<'_>) -> Option<GroupKind> {
        let length = write.bytes.len() as u64;
        let groupable = self.check_usable().is_ok()
            && self.check_range(write.extent_id, write.offset_bytes, length).is_ok()
            && length > 0
            && write.offset_bytes.is_multiple_of(BLOCK_BYTES)
            && length.is_multiple_of(BLOCK_BYTES);
        if !groupable {
            return None;
        }
        match self.placement_of(write.extent_id, write.offset_bytes / BLOCK_BYTES, length / BLOCK_BYTES) {
            Placement::Stage if length / BLOCK_BYTES <= self.staging_capacity_blocks() => Some(GroupKind::Staged),
            Placement::Ranges => Some(GroupKind::Ranged),
            _ => None,
        }
    }

    /// Makes `[offset, offset + length)` read as zeroes. Whole blocks become
    /// holes; partial blocks at the edges are rewritten with zeroes.
    pub fn trim(&mut self, id: u64, offset_bytes: u64, length_bytes: u64, fua: bool) -> Result<()> {
        self.check_range(id, offset_bytes, length_bytes)?;
        self.content_changes.changed(id, offset_bytes, length_bytes);
        self.guarded(|volume| {
            if length_bytes > 0 {
                volume.zero_range(id, offset_bytes, length_bytes)?;
            }
            volume.finish_update(fua)
        })
    }

    /// Same as [`Volume::trim`]: zeroed whole blocks become holes.
    pub fn write_zeroes(&mut self, id: u64, offset_bytes: u64, length_bytes: u64, fua: bool) -> Result<()> {
        self.trim(id, offset_bytes, length_bytes, fua)
    }

    pub(crate) fn finish_update(&mut self, fua: bool) -> Result<()> {
        if fua {
            self.flush_pending_records()?;
        }
        self.maybe_background_work()
    }

    fn zero_range(&mut self, id: u64, offset_bytes: u64, length_bytes: u64) -> Result<()> {
        let end_bytes = offset_bytes + length_bytes;
        let whole_first = offset_bytes.div_ceil(BLOCK_BYTES);
        let whole_end = end_bytes / BLOCK_BYTES;
        if whole_first >= whole_end {
            // Within one block or across one boundary with no whole block.
            return self.zero_partial(id, offset_bytes, length_bytes);
        }
        if offset_bytes < whole_first * BLOCK_BYTES {
            self.zero_partial(id, offset_bytes, whole_first * BLOCK_BYTES - offset_bytes)?;
        }
        self.unmap_blocks(id, whole_first, whole_end - whole_first, Logging::Logged)?;
        if end_bytes > whole_end * BLOCK_BYTES {
            self.zero_partial(id, whole_end * BLOCK_BYTES, end_bytes - whole_end * BLOCK_BYTES)?;
        }
        Ok(())
    }

    fn zero_partial(&mut self, id: u64, offset_bytes: u64, length_bytes: u64) -> Result<()> {
        let first = offset_bytes / BLOCK_BYTES;
        let end = (offset_bytes + length_bytes).div_ceil(BLOCK_BYTES);
        let all_holes = map::segments(self.extents.map(id), first, end - first).iter().all(|s| s.location.is_none());
        if all_holes {
            return Ok(());
        }
        let mut buffer = self.partial_block_buffer(id, offset_bytes, length_bytes, first, end)?;
        let skip = in_memory(offset_bytes - first * BLOCK_BYTES);
        buffer[skip..skip + in_memory(length_bytes)].fill(0);
        self.write_blocks(id, first, Payload::Bytes(&buffer))
    }

    /// A buffer of blocks `[first, end)` holding the current contents of the
    /// first and last block where the byte range only partly covers them.
    fn partial_block_buffer(&mut self, id: u64, offset: u64, length: u64, first: u64, end: u64) -> Result<Vec<u8>> {
        let mut buffer = vec![0; block_bytes(end - first)];
        let head_partial = !offset.is_multiple_of(BLOCK_BYTES) || length < BLOCK_BYTES;
        let tail_partial = !(offset + length).is_multiple_of(BLOCK_BYTES);
        if head_partial {
            let block = self.read_segments(&map::segments(self.extents.map(id), first, 1))?;
            buffer[..BLOCK_SIZE].copy_from_slice(&block);
        }
        if tail_partial && (end - 1 > first || !head_partial) {
            let block = self.read_segments(&map::segments(self.extents.map(id), end - 1, 1))?;
            let at = buffer.len() - BLOCK_SIZE;
            buffer[at..].copy_from_slice(&block);
        }
        Ok(buffer)
    }

    /// Unmaps whole blocks, logging it or not (unlogged: a shrink, recorded by
    /// the CP that commits the new size, and replay, which reads the record).
    pub(crate) fn unmap_blocks(&mut self, id: u64, first: u64, count: u64, logging: Logging) -> Result<()> {
        if logging == Logging::Logged {
            self.ensure_room_for_update(self.unmap_bound(&[id], &unmap_records(id, first, count)))?;
        }
        let map = self.extents.map_mut(id);
        let displaced = map::punch(map, first, count);
        if displaced.is_empty() {
            return Ok(());
        }
        for (location, length) in displaced {
            self.free_location(location, length);
        }
        if logging == Logging::Logged {
            self.push_records(unmap_records(id, first, count))?;
        }
        Ok(())
    }

    /// Frees `count` blocks from `location` on behalf of the active tree.
    pub(crate) fn free_location(&mut self, location: Location, count: u64) {
        for offset in 0..count {
            match location.offset(offset) {
                Location::Data(block) => self.release_data_reference(block),
                Location::Flash(block) => {
                    self.flash_space.free(block);
                    self.staged_block_count -= 1;
                }
            }
        }
    }

    /// Makes every acknowledged write durable.
    pub fn flush(&mut self) -> Result<()> {
        self.stats.flush_count += 1;
        self.guarded(|volume| volume.flush_pending_records())
    }

    fn maybe_background_work(&mut self) -> Result<()> {
        self.checkpoint_if_log_is_long()?;
        self.clean_if_needed()
    }

    /// Commits when the log holds as many records as a CP should cover.
    ///
    /// With `records_per_checkpoint` set, after that many records. Derived (0),
    /// a CP is due only when the next one might no longer fit in the flash
    /// reserve, or the log reaches [`MAX_RECORDS_PER_CHECKPOINT`] (bounding
    /// replay at open). The next CP writes at most `min(Σ per record, bound)`
    /// metadata blocks: what each record can dirty (`metadata_blocks_bound`:
    /// a map leaf and its ancestors, bitmap and checksum pages), and `bound`
    /// is what rewriting every tree, bitmap and checksum table of the volume
    /// could take ([`Volume::checkpoint_bound_blocks`]).
    /// The log's own blocks come out of the same reserve. So a volume whose
    /// metadata is small (a few hundred blocks for a 256 MiB extent aged by
    /// random writes) commits rarely, and one with much metadata as often as
    /// before. Any CP frequency is crash-safe: a CP only moves the replay start,
    /// and what the log holds is replayed; the rule protects space, not data.
    pub(crate) fn checkpoint_if_log_is_long(&mut self) -> Result<()> {
        let records = self.log.records_since_checkpoint;
        let due = match self.options.records_per_checkpoint {
            0 => records >= MAX_RECORDS_PER_CHECKPOINT || self.checkpoint_would_crowd_the_reserve(),
            limit => records >= limit,
        };
        if due {
            return self.commit();
        }
        Ok(())
    }

    /// Whether the metadata the next CP may write, plus this epoch's log
    /// blocks, reaches the flash reserve.
    fn checkpoint_would_crowd_the_reserve(&mut self) -> bool {
        let reserve = self.flash_reserve_blocks();
        let log_blocks = self.log.epoch_blocks.len() as u64 + 4 + self.segment_table_bound_blocks();
        let by_records = self.log.records_bound_blocks;
        if by_records + log_blocks < reserve {
            return false;
        }
        by_records.min(self.structural_checkpoint_bound()) + log_blocks >= reserve
    }

    /// An upper bound on the metadata blocks one CP can write, however much
    /// is dirty: every extent map, the extent and snapshot tables, the four
    /// bitmaps and the checksum tables rewritten whole.
    pub fn checkpoint_bound_blocks(&self) -> u64 {
        let maps: u64 = self.extents.maps().map(|(_, map)| map).map(ExtentMap::persist_bound_blocks).sum();
        maps + self.checkpoint_bound_beyond_maps()
    }

    /// [`Volume::checkpoint_bound_blocks`] from the maps' cached bounds: the
    /// same figure, at the cost of the maps changed since it was last asked.
    pub(crate) fn checkpoint_bound_blocks_cached(&mut self) -> u64 {
        self.extents.maps_persist_bound() + self.checkpoint_bound_beyond_maps()
    }

    /// The part of [`Volume::checkpoint_bound_blocks`] that is not the extent maps.
    fn checkpoint_bound_beyond_maps(&self) -> u64 {
        let tables = self.extents.table().persist_bound_blocks()
            + self.snapshots.persist_bound_blocks()
            + self.copy_outs.tree().persist_bound_blocks();
        let bitmaps: u64 = self.data_space.tree_block_count() + self.flash_space.tree_block_count();
        let checksums = self.checksums.as_ref().map_or(0, Checksums::tree_block_count);
        let segment_usage = self.segments.table().persist_bound_blocks();
        let refcounts = self.refcounts.pages().tree_block_count();
        tables + bitmaps + checksums + self.delete_log.persist_bound_blocks() + segment_usage + refcounts
    }

    /// Space accounting.
    pub fn space(&self) -> SpaceReport {
        let device = |space: &SpaceMap| DeviceSpace {
            block_count: space.block_count(),
            used_blocks: space.used_count(),
            snapshot_only_blocks: space.snapshot_only_count(),
            allocatable_blocks: space.allocatable_count(),
            awaiting_checkpoint_blocks: space.pinned().count_ones(),
        };
        SpaceReport {
            data: device(&self.data_space),
            flash: device(&self.flash_space),
            staged_blocks: self.staged_block_count,
            copied_out_blocks: self.copy_outs.len() as u64,
            reserved_blocks: self.reserved_blocks(),
            generation: self.generation,
        }
    }

    /// Flash blocks the active tree or a snapshot uses (activemap ∪ summary).
    pub fn flash_blocks_in_use(&self) -> Vec<u64> {
        (0..self.flash_space.block_count())
            .filter(|&block| self.flash_space.active().get(block) || self.flash_space.summary().get(block))
            .collect()
    }

    /// Bytes of memory held by the free-space bitmaps (pages shared with the
    /// safe copies and snapshots counted once per map).
    pub fn bitmap_memory_bytes(&self) -> usize {
        self.data_space.memory_bytes() + self.flash_space.memory_bytes()
    }

    /// Bytes of memory held by the data checksum tables.
    pub fn checksum_memory_bytes(&self) -> usize {
        self.checksums.as_ref().map_or(0, Checksums::memory_bytes)
    }

    /// Bytes of memory held by extent maps (entries and node partitions).
    pub fn map_memory_bytes(&self) -> usize {
        self.extents.maps().map(|(_, map)| map).map(ExtentMap::memory_bytes).sum()
    }
}

/// The unmap records of `count` blocks from `first` (one per `u32::MAX` blocks).
fn unmap_records(id: u64, first: u64, count: u64) -> Vec<LogRecord> {
    (0..count)
        .step_by(u32::MAX as usize)
        .map(|done| LogRecord::Unmap {
            extent_id: id,
            logical_block: first + done,
            block_count: u32::try_from((count - done).min(u64::from(u32::MAX))).expect("at most u32::MAX"),
        })
        .collect()
}

fn check_size(size_bytes: u64) -> Result<()> {
    if !size_bytes.is_multiple_of(BLOCK_BYTES) {
        return Err(EngineError::InvalidRange(format!("size {size_bytes} is not a multiple of {BLOCK_SIZE} bytes")));
    }
    Ok(())
}

/// Errors after which the in-memory state may differ from the disk. Running
/// out of space is not one: every allocation that can fail for lack of space
/// in a request's path either takes all it needs before changing anything
/// (staged blocks, a destage batch's blocks, which are released again on
/// failure) or ends a piece that is already complete (a large write's next
/// range); inside a CP or a log block write it is
/// [`EngineError::NoSpaceForMetadata`], which stops the volume.
fn stops_the_volume(error: &EngineError) -> bool {
    !matches!(
        error,
        EngineError::NoSuchExtent(_)
            | EngineError::ExtentExists(_)
            | EngineError::NoSuchSnapshot(_)
            | EngineError::SnapshotExists(_)
            | EngineError::InvalidName { .. }
            | EngineError::InvalidRange(_)
            | EngineError::StagingFull { .. }
            | EngineError::NoSpace { .. }
            | EngineError::ChecksumMismatch { .. }
            | EngineError::Overcommit { .. }
    )
}

/// The message a panic carried.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

/// Reads both superblock slots, each on its own (a slot that cannot be read
/// is invalid, and the other may still be).
pub(crate) fn read_superblock_slots<F: BlockDevice>(
    flash: &mut F,
) -> Result<[std::result::Result<Superblock, String>; 2]> {
    let requests = SUPERBLOCK_SLOTS.iter().map(|&slot| proxima_device::IoRequest::read(slot, 1)).collect();
    let completions = flash.execute(requests).map_err(crate::io::device_error(DeviceRole::Flash))?;
    let mut slots = completions.into_iter().map(|completion| match completion.result {
        Ok(bytes) => Superblock::decode(&bytes),
        Err(error) => Err(format!("unreadable: {error}")),
    });
    Ok([slots.next().expect("slot A"), slots.next().expect("slot B")])
}

/// The valid slot with the highest generation.
fn newest_superblock(slots: &[std::result::Result<Superblock, String>; 2]) -> Result<Superblock> {
    match slots {
        [Ok(a), Ok(b)] => Ok(if b.generation > a.generation { *b } else { *a }),
        [Ok(a), Err(_)] => Ok(*a),
        [Err(_), Ok(b)] => Ok(*b),
        [Err(slot_a), Err(slot_b)] => Err(EngineError::NoSuperblock { slot_a: slot_a.clone(), slot_b: slot_b.clone() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape arithmetic counts what the structures themselves hold.
    #[test]
    fn fixed_metadata_blocks_are_the_built_structures_tree_blocks() {
        for (data, flash) in [(1, 64), (2048, 512), (100_003, 7_001), (1 << 22, 1 << 18), (3 << 24, 5 << 16)] {
            let built = 2
                * (PersistentBitmap::new(data).tree_block_count() + PersistentBitmap::new(flash).tree_block_count())
                + PersistentRefcounts::new(data).pages().tree_block_count();
            let checksums = Checksums::new(data, flash).tree_block_count();
            let with = VolumeOptions::default();
            assert!(with.keeps_checksums());
            assert_eq!(fixed_metadata_blocks(data, flash, &with), built + checksums, "{data} data, {flash} flash");
            let without = VolumeOptions { payload: false, ..VolumeOptions::default() };
            assert_eq!(fixed_metadata_blocks(data, flash, &without), built, "{data} data, {flash} flash");
        }
    }
}
