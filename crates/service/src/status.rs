//! `proxima status`: what a volume holds and how it is laid out, computed from
//! the engine's space accounting, counters and extent maps.
//!
//! **Fragmentation** is defined per the sequential reader: within each extent,
//! walking its mapped blocks in logical order, a block is a *break* when it does
//! not continue the previous mapped block physically (a new run of the map:
//! another device, or a non-adjacent block). The figure is
//! `breaks / (mapped blocks − extents with data)`: 0 when every extent is one
//! contiguous run, 1 when no two logically adjacent blocks are adjacent on
//! disk. Holes do not count as breaks in themselves, but the engine's runs end
//! at holes, so an extent written sparsely shows some fragmentation. The mean
//! run length (mapped blocks per run) is reported beside it.
//!
//! The **layout score** is Smith and Seltzer's (the engine's
//! `proxima_engine::map::layout_score`, summed over the extents): of the mapped
//! blocks whose logical predecessor is mapped, the fraction placed directly
//! after it on the same device. 1 is a perfect sequential layout; holes are
//! not counted against it (the block after a hole is not scored). A volume
//! with no scored block scores 1: nothing in it is out of place.

use proxima_device::BlockDevice;
use proxima_engine::{ExtentInfo, LayoutScore, RecoveryReport, SnapshotInfo, StagingFill};
use serde::Serialize;

use crate::config::VolumeConfig;
use crate::devices::BLOCK_BYTES;
use crate::directory::ServiceVolume;

/// The whole status report (`proxima status --json` prints it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusReport {
    /// Layout of the volume.
    pub layout: String,
    /// RAID level.
    pub raid: String,
    /// Data disks.
    pub data_disk_count: usize,
    /// I/O mode of the files.
    pub io_mode: String,
    /// Data device capacity in bytes (after RAID parity).
    pub capacity_bytes: u64,
    /// Bytes the extents may hold in all (the sum of their sizes): above
    /// `capacity_bytes` when extents were created thin (overcommitted).
    pub committed_bytes: u64,
    /// Data device bytes in use by the active volume.
    pub used_bytes: u64,
    /// Data device bytes held only by snapshots.
    pub held_by_snapshots_bytes: u64,
    /// Data device bytes more than one extent maps (clones), each counted once.
    pub shared_bytes: u64,
    /// Of those, copies the in-place layout made of blocks snapshots hold
    /// before overwriting them in place.
    pub copied_out_bytes: u64,
    /// Data device bytes allocatable now.
    pub free_bytes: u64,
    /// Of those, bytes inside the allocation ranges reserved for extents'
    /// first writes (released to others under space pressure).
    pub reserved_bytes: u64,
    /// Data and flash bytes freed since the last CP (free once it is durable).
    pub awaiting_checkpoint_bytes: u64,
    /// Flash capacity in bytes.
    pub flash_capacity_bytes: u64,
    /// Flash bytes in use (metadata, log and staged data).
    pub flash_used_bytes: u64,
    /// Staging area fill.
    pub staging: StagingStatus,
    /// Generation of the last durable CP (CPs committed over the volume's life).
    pub checkpoint_generation: u64,
    /// CPs committed since this process opened the volume.
    pub checkpoints_since_open: u64,
    /// Destage passes since this process opened the volume.
    pub destages_since_open: u64,
    /// Blocks destaged since this process opened the volume.
    pub destaged_blocks_since_open: u64,
    /// Of those, blocks whose bytes came from memory rather than a read of
    /// flash (the staged-block cache of a volume bypassing the page cache).
    pub destaged_from_memory_blocks_since_open: u64,
    /// Staged blocks destages left staged as hot since this process opened
    /// the volume, summed over the destages (`proximal-hot`; 0 otherwise).
    pub retained_hot_blocks_since_open: u64,
    /// Staged blocks destages wrote back at their frame homes since this
    /// process opened the volume (`in-place` and `hylog`; 0 otherwise).
    pub destaged_home_blocks_since_open: u64,
    /// Fragmentation (see the module documentation), in [0, 1].
    pub fragmentation: f64,
    /// Mapped blocks per map run over all extents.
    pub mean_run_blocks: f64,
    /// Smith–Seltzer layout score over all extents (see the module
    /// documentation), in [0, 1].
    pub layout_score: f64,
    /// The extents.
    pub extents: Vec<ExtentInfo>,
    /// Live snapshots, oldest first.
    pub snapshots: Vec<SnapshotInfo>,
    /// Snapshot deletions whose space is still being reclaimed.
    pub pending_deletions: usize,
    /// Data and staged blocks read that did not match their checksums since
    /// open, and how many of them were repaired from redundancy.
    pub checksum_mismatches_since_open: u64,
    /// Of those, repaired from the data device's redundancy.
    pub repaired_blocks_since_open: u64,
    /// Whether reads reallocate the scattered spans they read.
    pub read_realloc: bool,
    /// Whether destage copies out what snapshots read at the places its
    /// blocks go back to (the proximal layout's copy-out).
    pub copy_out: bool,
    /// Bytes reads rewrote contiguously since open (reallocate-on-read).
    pub reallocated_bytes_since_open: u64,
    /// Bytes reads would have rewritten but found no contiguous room for.
    pub reallocation_skipped_bytes_since_open: u64,
    /// The delete log: `none`, `tlog` or `bflog` (docs/wafl.md).
    pub delete_log: String,
    /// Data blocks waiting in the delete log: freed by the active volume,
    /// allocated until the log punches them into the activemap.
    pub delete_log_blocks: u64,
    /// The rate space is coming back: data blocks the last CP's epoch gave
    /// back to the activemap (freed directly or punched from the delete log).
    pub reclaimed_blocks_last_checkpoint: u64,
    /// What recovery found when the volume was opened.
    pub recovery: RecoveryReport,
    /// Why the volume stopped serving, if it did (reopen it to recover).
    pub failure: Option<String>,
}

/// Staging area fill.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StagingStatus {
    /// Staged blocks.
    pub used_blocks: u64,
    /// Capacity in blocks.
    pub capacity_blocks: u64,
    /// `used / capacity`.
    pub fill_fraction: f64,
}

impl From<StagingFill> for StagingStatus {
    fn from(fill: StagingFill) -> Self {
        let fill_fraction =
            if fill.capacity_blocks == 0 { 0.0 } else { fill.used_blocks as f64 / fill.capacity_blocks as f64 };
        Self { used_blocks: fill.used_blocks, capacity_blocks: fill.capacity_blocks, fill_fraction }
    }
}

/// The fragmentation figure and the mean run length of a set of extents.
pub fn fragmentation(extents: &[ExtentInfo]) -> (f64, f64) {
    let mapped: u64 = extents.iter().map(|extent| extent.mapped_block_count).sum();
    let runs: u64 = extents.iter().map(|extent| extent.run_count).sum();
    let with_data = extents.iter().filter(|extent| extent.mapped_block_count > 0).count() as u64;
    let breaks = runs - with_data;
    let opportunities = mapped - with_data;
    let figure = if opportunities == 0 { 0.0 } else { breaks as f64 / opportunities as f64 };
    let mean_run = if runs == 0 { 0.0 } else { mapped as f64 / runs as f64 };
    (figure, mean_run)
}

/// The Smith–Seltzer layout score of a set of extents: 1 when no block is
/// scored.
pub fn layout_score(extents: &[ExtentInfo]) -> f64 {
    extents.iter().map(|extent| extent.layout_score).sum::<LayoutScore>().fraction().unwrap_or(1.0)
}

/// The status of an open volume.
pub fn status(volume: &ServiceVolume, config: &VolumeConfig) -> StatusReport {
    let space = volume.space();
    let extents = volume.extents();
    let (fragmentation, mean_run_blocks) = fragmentation(&extents);
    let stats = volume.stats();
    StatusReport {
        layout: volume.policy_name().to_owned(),
        raid: config.raid.name().to_owned(),
        data_disk_count: config.data_disks.len(),
        io_mode: config.io_mode.name().to_owned(),
        capacity_bytes: volume.data_device().info().capacity_bytes(),
        committed_bytes: volume.committed_bytes(),
        used_bytes: space.data.used_blocks * BLOCK_BYTES,
        held_by_snapshots_bytes: space.data.snapshot_only_blocks * BLOCK_BYTES,
        shared_bytes: volume.shared_bytes(),
        copied_out_bytes: space.copied_out_blocks * BLOCK_BYTES,
        free_bytes: space.data.allocatable_blocks * BLOCK_BYTES,
        reserved_bytes: space.reserved_blocks * BLOCK_BYTES,
        awaiting_checkpoint_bytes: (space.data.awaiting_checkpoint_blocks + space.flash.awaiting_checkpoint_blocks)
            * BLOCK_BYTES,
        flash_capacity_bytes: space.flash.block_count * BLOCK_BYTES,
        flash_used_bytes: space.flash.used_blocks * BLOCK_BYTES,
        staging: volume.staging_fill().into(),
        checkpoint_generation: volume.generation(),
        checkpoints_since_open: stats.checkpoint_count,
        destages_since_open: stats.destage_count,
        destaged_blocks_since_open: stats.destaged_blocks,
        destaged_from_memory_blocks_since_open: stats.destaged_blocks_from_memory,
        retained_hot_blocks_since_open: stats.retained_hot_blocks,
        destaged_home_blocks_since_open: stats.destaged_home_blocks,
        fragmentation,
        mean_run_blocks,
        layout_score: layout_score(&extents),
        extents,
        snapshots: volume.snapshots(),
        pending_deletions: volume.pending_deletions(),
        checksum_mismatches_since_open: stats.checksum_mismatches,
        repaired_blocks_since_open: stats.repaired_blocks,
        read_realloc: config.read_realloc,
        copy_out: config.copy_out,
        reallocated_bytes_since_open: stats.reallocated_blocks * BLOCK_BYTES,
        reallocation_skipped_bytes_since_open: stats.reallocation_skipped_blocks * BLOCK_BYTES,
        delete_log: volume.delete_log_mode().name().to_owned(),
        delete_log_blocks: volume.delete_log_blocks(),
        reclaimed_blocks_last_checkpoint: volume.delete_log_stats().reclaimed_blocks_last_checkpoint,
        recovery: volume.recovery().clone(),
        failure: volume.failure().map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extent(mapped_block_count: u64, run_count: u64) -> ExtentInfo {
        let layout_score = LayoutScore::default();
        ExtentInfo { id: 1, name: "e".into(), size_bytes: 1 << 30, mapped_block_count, run_count, layout_score }
    }

    fn scored(scored_block_count: u64, contiguous_block_count: u64) -> ExtentInfo {
        ExtentInfo { layout_score: LayoutScore { scored_block_count, contiguous_block_count }, ..extent(0, 0) }
    }

    #[test]
    fn fragmentation_is_zero_for_contiguous_extents_and_one_for_scattered_blocks() {
        assert_eq!(fragmentation(&[extent(1000, 1), extent(0, 0)]), (0.0, 1000.0));
        assert_eq!(fragmentation(&[extent(10, 10)]), (1.0, 1.0));
        let (figure, mean) = fragmentation(&[extent(101, 11)]);
        assert!((figure - 0.1).abs() < 1e-12, "{figure}");
        assert!((mean - 101.0 / 11.0).abs() < 1e-12);
        assert_eq!(fragmentation(&[]), (0.0, 0.0));
    }

    #[test]
    fn the_layout_score_weighs_every_scored_block_alike() {
        assert_eq!(layout_score(&[]), 1.0, "nothing out of place");
        assert_eq!(layout_score(&[scored(99, 99), scored(0, 0)]), 1.0);
        let score = layout_score(&[scored(100, 90), scored(300, 30)]);
        assert!((score - 0.3).abs() < 1e-12, "{score}");
    }
}
