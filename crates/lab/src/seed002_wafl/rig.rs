//! The volume the WAFL experiments run on: data on the simulated 4+1 RAID-4
//! of the layout experiments ([`crate::rig::testbed`]), metadata on its
//! simulated flash, the write-anywhere layout (WAFL's: every write goes to the
//! next free blocks, no staging), payload-less, with one delete-log setting.
//!
//! 1. **Fill**: 16 MiB extents written whole until `fill` of the array is used.
//! 2. **Age** (optional): random 8 KiB overwrites of uniformly random pieces
//!    of uniformly random extents, a CP every [`AGING_WRITES_PER_CHECKPOINT`]:
//!    each overwrite frees the piece's old blocks, so an aged extent's blocks
//!    end up scattered over the block-number space (the paper's "aged
//!    files").
//!
//! Every operation's duration is read on the simulation's clock, which the
//! flash and the drives share: a CP's duration is the virtual time of its
//! metadata writes and flushes.

use std::sync::Arc;

use proxima_device::BlockDevice;
use proxima_engine::{DeleteLogMode, Layout, Volume, VolumeOptions};
use proxima_workload::srarw::EXTENT_BLOCKS;
use proxima_workload::synthetic::seeded_stream;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::progress::Progress;
use crate::rig::lab_volume::{flash_block_count, ArrayShape, DATA_DISK_COUNT, DRIVE_QUEUE_DEPTH};
use crate::rig::testbed::{take_member_logs, Array, FlashDisk, TestbedConfig, BLOCK_SIZE_BYTES};
use crate::LabError;

/// The overwrite size of aging and of `wafl-overwrite`: 8 KiB.
pub const OVERWRITE_BLOCKS: u64 = 2;
/// Overwrites between two CPs while aging.
pub const AGING_WRITES_PER_CHECKPOINT: u64 = 1024;
/// Overwrites per progress report.
const WRITES_PER_PROGRESS: u64 = 4096;

/// What one volume is built from.
#[derive(Debug, Clone)]
pub struct WaflSpec {
    /// The array.
    pub shape: ArrayShape,
    /// Blocks of each drive used.
    pub window_blocks_per_disk: u64,
    /// Share of the array the extents fill.
    pub fill: f64,
    /// Random 8 KiB overwrites per 8 KiB piece of data while aging (0: unaged).
    pub aging_writes_per_piece: f64,
    /// The delete log.
    pub delete_log: DeleteLogMode,
    /// Seed of the overwrites.
    pub seed: u64,
}

/// A filled (and possibly aged) volume.
#[derive(Debug)]
pub struct WaflVolume {
    /// The volume.
    pub volume: Volume<Array, FlashDisk>,
    /// The extents, in creation order, with their sizes in blocks.
    pub extents: Vec<(u64, String)>,
    /// Overwrites the aging issued.
    pub aging_writes: u64,
    rng: ChaCha8Rng,
}

impl WaflVolume {
    /// Builds the testbed, formats, fills and ages.
    pub fn create(spec: &WaflSpec, label: &str, progress: &mut dyn Progress) -> Result<WaflVolume, LabError> {
        let mut config = TestbedConfig {
            model: Arc::clone(&spec.shape.model),
            data_disk_count: DATA_DISK_COUNT,
            stripe_unit_bytes: spec.shape.stripe_unit_bytes,
            window_blocks_per_disk: spec.window_blocks_per_disk,
            zone_data_blocks: None,
            drive_queue_depth: DRIVE_QUEUE_DEPTH,
            flash_block_count: 0,
            flash_keeps_metadata: false,
            seed: spec.seed,
        };
        let capacity_blocks = config.array_block_count();
        let extent_count = ((capacity_blocks as f64 * spec.fill) as u64) / EXTENT_BLOCKS;
        if extent_count < 2 {
            let message = format!("the array holds {extent_count} extents of 16 MiB at this scale; 2 are needed");
            return Err(LabError::InvalidParameter { parameter: "scale", message });
        }
        // The layout experiments' metadata room, and the delete log three
        // times over (the log, its copy of the last CP, growth).
        config.flash_block_count =
            flash_block_count(0, extent_count, capacity_blocks, 0) + 3 * spec.delete_log.size_blocks(capacity_blocks);
        let testbed = config.build()?;
        let options = VolumeOptions {
            layout: Layout::WriteAnywhere,
            staging_threshold_bytes: 0,
            allocation_range_blocks: spec.shape.allocation_range_blocks,
            payload: false,
            write_intents: false,
            delete_log: spec.delete_log,
            ..VolumeOptions::default()
        };
        let volume = Volume::format(testbed.array, testbed.flash, 1, options)?;
        let mut wafl = WaflVolume { volume, extents: Vec::new(), aging_writes: 0, rng: seeded_stream(spec.seed, 1) };
        wafl.fill(extent_count, label, progress)?;
        let pieces = extent_count * EXTENT_BLOCKS / OVERWRITE_BLOCKS;
        let aging_writes = (pieces as f64 * spec.aging_writes_per_piece) as u64;
        wafl.age(aging_writes, label, progress)?;
        Ok(wafl)
    }

    fn fill(&mut self, extent_count: u64, label: &str, progress: &mut dyn Progress) -> Result<(), LabError> {
        progress.start_phase(&format!("filling ({label})"), extent_count);
        for index in 0..extent_count {
            let name = format!("extent-{index:05}");
            let id = self.volume.create_extent(&name, EXTENT_BLOCKS * BLOCK_SIZE_BYTES)?;
            self.volume.write_blocks_synthetic(id, 0, EXTENT_BLOCKS, false)?;
            take_member_logs(self.volume.data_device_mut());
            self.extents.push((id, name));
            progress.advance(1);
        }
        self.volume.commit()?;
        Ok(())
    }

    fn age(&mut self, writes: u64, label: &str, progress: &mut dyn Progress) -> Result<(), LabError> {
        progress.start_phase(&format!("aging ({label})"), writes);
        for index in 0..writes {
            self.overwrite_one()?;
            if (index + 1).is_multiple_of(AGING_WRITES_PER_CHECKPOINT) {
                self.volume.commit()?;
                take_member_logs(self.volume.data_device_mut());
            }
            if (index + 1).is_multiple_of(WRITES_PER_PROGRESS) {
                progress.advance(WRITES_PER_PROGRESS);
            }
        }
        // What aging left in the delete log is reclaimed before anything is
        // measured, so every run starts with an empty log.
        while self.volume.delete_log_blocks() > 0 {
            self.volume.reclaim_delete_log(u64::from(u32::MAX))?;
            self.volume.commit()?;
        }
        self.volume.commit()?;
        take_member_logs(self.volume.data_device_mut());
        self.aging_writes = writes;
        Ok(())
    }

    /// One random 8 KiB overwrite of a random extent.
    pub fn overwrite_one(&mut self) -> Result<(), LabError> {
        let extent = self.rng.gen_range(0..self.extents.len());
        let piece = self.rng.gen_range(0..EXTENT_BLOCKS / OVERWRITE_BLOCKS);
        let id = self.extents[extent].0;
        self.volume.write_blocks_synthetic(id, piece * OVERWRITE_BLOCKS, OVERWRITE_BLOCKS, false)?;
        Ok(())
    }

    /// The clock.
    pub fn now_ns(&self) -> u64 {
        self.volume.data_device().now_ns()
    }

    /// Commits; returns the CP's duration.
    pub fn timed_commit(&mut self) -> Result<u64, LabError> {
        let started = self.now_ns();
        self.volume.commit()?;
        take_member_logs(self.volume.data_device_mut());
        Ok(self.now_ns() - started)
    }
}

/// The p-th percentile (0–100) of `values` by the nearest-rank rule (0 when empty).
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_follow_the_nearest_rank_rule() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 99.0), 99.0);
        assert_eq!(percentile(&values, 100.0), 100.0);
        assert_eq!(percentile(&[3.0, 1.0], 50.0), 1.0);
        assert_eq!(percentile(&[], 99.0), 0.0);
    }
}
