//! The engine's overall write cost under a synthetic update workload: the
//! hook through which HyLog's experiments measure a real volume (Fig 2, the
//! cross-check against an independent segment simulator, Fig 5).
//!
//! A volume of `data_blocks` is formatted with the given layout and cleaner
//! on memory devices (written with synthetic blocks: zeroes), one extent of `utilization ×
//! data_blocks` blocks is written whole, then single-block updates drawn from
//! the pattern are applied: `warmup_passes` times the extent's size to reach
//! the steady state, then `measured_passes` times, over which the counters
//! are taken. Write cost, in blocks moved per user block written to the data
//! device, is Rosenblum's `(user + cleaning read + cleaning written) / user`;
//! the cleaning utilisation u_c is the live share of the segments cleaned
//! (empty victims included, as Eq 2 counts them).
//!
//! Deterministic: the same settings give the same figures.

use proxima_device::MemoryDevice;
use proxima_engine::{CleaningPolicy, CleaningSettings, EngineStats, Layout, Volume, VolumeOptions};
use proxima_workload::synthetic::{Pattern, SyntheticSpec, SyntheticWorkload};
use serde::{Deserialize, Serialize};

use crate::progress::Progress;
use crate::LabError;

/// Updates between progress reports.
const PROGRESS_STEP: u64 = 4096;

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WriteCostSettings {
    /// The layout (one that writes segments, for a cleaning cost).
    pub layout: Layout,
    /// The cleaner's policy.
    pub policy: CleaningPolicy,
    /// Disk space utilisation u: the extent's share of the data device.
    pub utilization: f64,
    /// Which blocks the updates hit.
    pub pattern: Pattern,
    /// Blocks of the data device.
    pub data_blocks: u64,
    /// Blocks per segment.
    pub segment_blocks: u64,
    /// Victim segments per cleaning pass at most.
    pub pass_segments: u64,
    /// Updates before measuring, in extent sizes.
    pub warmup_passes: f64,
    /// Updates measured, in extent sizes.
    pub measured_passes: f64,
    /// Seed of the update stream.
    pub seed: u64,
}

impl Default for WriteCostSettings {
    fn default() -> Self {
        Self {
            layout: Layout::Lfs,
            policy: CleaningPolicy::Greedy,
            utilization: 0.8,
            pattern: Pattern::Uniform,
            data_blocks: 65_536,
            segment_blocks: 64,
            pass_segments: 2,
            warmup_passes: 4.0,
            measured_passes: 4.0,
            seed: 1,
        }
    }
}

/// The counters over the measured updates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WriteCostMeasurement {
    /// User blocks written to the data device (destaged or written directly).
    pub user_blocks: u64,
    /// Blocks cleaning read.
    pub cleaning_blocks_read: u64,
    /// Blocks cleaning wrote.
    pub cleaning_blocks_written: u64,
    /// Segments cleaning emptied.
    pub segments_cleaned: u64,
    /// `(user + read + written) / user`.
    pub write_cost: f64,
    /// Live share of the segments cleaned.
    pub cleaning_utilization: f64,
}

impl WriteCostSettings {
    /// Blocks of the updated extent: `utilization × data_blocks`, rounded down.
    pub fn extent_blocks(&self) -> u64 {
        // A whole number of blocks below the device size.
        #[expect(clippy::cast_possible_truncation, reason = "a fraction of the device's blocks")]
        let blocks = (self.data_blocks as f64 * self.utilization) as u64;
        blocks
    }

    /// Updates of the warm-up and of the measurement.
    pub fn update_counts(&self) -> (u64, u64) {
        let extent_blocks = self.extent_blocks() as f64;
        #[expect(clippy::cast_possible_truncation, reason = "counts of updates")]
        let counts = ((extent_blocks * self.warmup_passes) as u64, (extent_blocks * self.measured_passes) as u64);
        counts
    }

    /// The blocks the updates hit, in order: single blocks of the extent
    /// drawn from the pattern, the hot ones scattered over it.
    pub fn updates(&self) -> impl Iterator<Item = u64> {
        SyntheticWorkload::new(SyntheticSpec {
            pattern: self.pattern,
            block_count: self.extent_blocks(),
            request_blocks: 1,
            read_fraction: 0.0,
            scatter: true,
            seed: self.seed,
        })
        .map(|request| request.block)
    }
}

/// Runs the workload and measures (see the module documentation), reporting
/// the updates applied to `progress`.
pub fn measure_write_cost(
    settings: &WriteCostSettings,
    progress: &mut dyn Progress,
) -> Result<WriteCostMeasurement, LabError> {
    if !(settings.utilization > 0.0 && settings.utilization < 1.0) {
        return Err(LabError::InvalidParameter {
            parameter: "utilization",
            message: format!("{} is not in (0, 1)", settings.utilization),
        });
    }
    let options = VolumeOptions {
        layout: settings.layout,
        data_checksums: false,
        segment_blocks: settings.segment_blocks,
        staging_capacity_blocks: 2 * settings.segment_blocks,
        destage_step_blocks: settings.segment_blocks,
        cleaning: CleaningSettings {
            policy: settings.policy,
            pass_blocks_max: settings.pass_segments * settings.segment_blocks,
            ..CleaningSettings::default()
        },
        ..VolumeOptions::default()
    };
    let data = MemoryDevice::new(4096, settings.data_blocks);
    let flash = MemoryDevice::new(4096, (settings.data_blocks / 4).max(4096));
    let mut volume = Volume::format(data, flash, settings.seed, options)?;
    let extent_blocks = settings.extent_blocks();
    let id = volume.create_extent("updated", extent_blocks * 4096)?;
    volume.write_blocks_synthetic(id, 0, extent_blocks, false)?;
    let (warmup, measured) = settings.update_counts();
    progress.start_phase(
        &format!("{} {} at u = {}", settings.layout.name(), settings.policy.name(), settings.utilization),
        warmup + measured,
    );
    let mut updates = settings.updates();
    let mut update = |volume: &mut Volume<MemoryDevice, MemoryDevice>, count: u64| -> Result<(), LabError> {
        for done in 1..=count {
            let block = updates.next().expect("a synthetic workload never ends");
            volume.write_blocks_synthetic(id, block, 1, false)?;
            if done % PROGRESS_STEP == 0 {
                progress.advance(PROGRESS_STEP);
            }
        }
        progress.advance(count % PROGRESS_STEP);
        Ok(())
    };
    update(&mut volume, warmup)?;
    let before = volume.stats().clone();
    update(&mut volume, measured)?;
    Ok(write_cost_between(&before, volume.stats(), settings.segment_blocks))
}

/// The overall write cost and cleaning utilisation of what a volume did
/// between two readings of its counters.
pub fn write_cost_between(before: &EngineStats, after: &EngineStats, segment_blocks: u64) -> WriteCostMeasurement {
    // Blocks destaged from the segment buffer, and large writes sent to the
    // log head directly.
    let user_blocks =
        (after.destaged_blocks + after.direct_blocks_written) - (before.destaged_blocks + before.direct_blocks_written);
    WriteCostMeasurement::from_counts(
        user_blocks,
        after.cleaning_blocks_read - before.cleaning_blocks_read,
        after.cleaning_blocks_written - before.cleaning_blocks_written,
        after.segments_cleaned - before.segments_cleaned,
        segment_blocks,
    )
}

impl WriteCostMeasurement {
    /// The measurement of these counts, in segments of `segment_blocks`.
    fn from_counts(
        user_blocks: u64,
        cleaning_blocks_read: u64,
        cleaning_blocks_written: u64,
        segments_cleaned: u64,
        segment_blocks: u64,
    ) -> Self {
        let moved = (user_blocks + cleaning_blocks_read + cleaning_blocks_written) as f64;
        Self {
            user_blocks,
            cleaning_blocks_read,
            cleaning_blocks_written,
            segments_cleaned,
            write_cost: moved / user_blocks.max(1) as f64,
            cleaning_utilization: cleaning_blocks_written as f64 / (segments_cleaned.max(1) * segment_blocks) as f64,
        }
    }

    /// Several measurements as one: their counts summed.
    pub fn pooled(measurements: &[Self], segment_blocks: u64) -> Self {
        let sum = |count: fn(&Self) -> u64| measurements.iter().map(count).sum::<u64>();
        Self::from_counts(
            sum(|m| m.user_blocks),
            sum(|m| m.cleaning_blocks_read),
            sum(|m| m.cleaning_blocks_written),
            sum(|m| m.segments_cleaned),
            segment_blocks,
        )
    }
}
