//! The rig of the serial-read-after-random-write (SRARW) workload of the
//! proximal I/O paper's Section 5 ([`proxima_workload::srarw`]): a volume over
//! the simulated [`testbed`](crate::rig::testbed), filled, aged and read.
//!
//! 1. **Fill**: 16 MiB extents written serially, one whole-extent write each,
//!    until 89 % of the array's capacity is used — by the extents and, in a
//!    run that keeps snapshots, a reserve of free blocks per extent for what
//!    they hold ([`RunSpec::snapshot_reserve_blocks_per_extent`]).
//! 2. **Age**: 2000 random 4 KiB updates per extent on average, each to a
//!    uniformly random block of a uniformly random extent. With a staging area,
//!    the updates are staged and destaged each time the area fills; every destage
//!    batch (one extent's staged blocks) is measured ([`crate::rig::measure`]), with
//!    the heads moved to random positions before it. Whatever is still staged at
//!    the end is destaged too, unmeasured, so reads find the aged layout on disk.
//!    A frame array without a cache writes each update at once to its fixed
//!    place; the heads are moved to random positions before each such update.
//!    Whatever else the aging does between updates (taking and deleting
//!    snapshots) is a [`BetweenUpdates`]; its disk I/O counts in the aging's
//!    figures.
//! 3. **Read**: every extent, in random order, in requests of up to 974 blocks
//!    (the paper's indirect-block fan-out); the heads are moved to random
//!    positions before each extent, as a full-size array read in random extent
//!    order would find them. The extents as of a snapshot are read the same
//!    way ([`LabVolume::read_every_extent_of_snapshot`]).
//!
//! What is issued (the extents, the updates, the read orders and requests)
//! comes from the workload crate; this module is the rig: the volume, the
//! destage observer, the arm positions and the measurements.
//!
//! **Scale.** `scale` is the fraction of each drive used: the array is built on
//! a centred window of that many blocks of every drive (the drive's geometry,
//! zones and seek curve unchanged), and the number of extents and the staging
//! area shrink with it, so the extent size, the updates per extent and the
//! staging-to-data ratio — hence the updates per batch and the destages per
//! aging — are those of the paper at any scale. What a smaller window changes is
//! the seek distances within it, which the random arm positions before each batch
//! and each extent restore where the paper's figures depend on them.

use std::sync::Arc;

use proxima_device::{BlockDevice, IoOp};
use proxima_disk::DiskModel;
use proxima_engine::{
    DestageBatchReport, DestageObserver, EngineError, Layout, ReadReport, SnapshotInfo, Volume, VolumeOptions,
};
use proxima_workload::srarw::{
    extent_count_for, read_requests, SrarwReadOrders, SrarwUpdates, UpdateSkew, EXTENT_BLOCKS, UPDATES_PER_EXTENT,
};
use proxima_workload::synthetic::seeded_stream;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::progress::Progress;
use crate::rig::measure::{ratio, BatchMeasurement, BatchSummary};
use crate::rig::testbed::{
    member_data_blocks, randomise_arms, take_member_logs, Array, FlashDisk, MemberIo, TestbedConfig, BLOCK_SIZE_BYTES,
};
use crate::LabError;

/// Data members of the array (plus one parity member).
pub const DATA_DISK_COUNT: usize = 4;
/// Requests each drive holds in its queue.
pub const DRIVE_QUEUE_DEPTH: usize = 8;
/// Zone checksums on every member, as the paper's array had them (NetApp's 63
/// data blocks per checksum block).
pub const ZONE_DATA_BLOCKS: Option<u32> = Some(proxima_device::NETAPP_ZONE_DATA_BLOCKS);
/// The write size below which writes are staged: 168 KB, as in the paper.
pub const STAGING_THRESHOLD_BYTES: u64 = 168 * 1024;
/// Allocation ranges each way destage inspects: about 100 on current disks.
pub const PROXIMAL_SPAN_RANGES: u64 = 100;
/// Updates between two drains of the member logs when no destage drains them.
const UPDATES_PER_LOG_DRAIN: u64 = 256;
/// Updates per progress report.
const UPDATES_PER_PROGRESS: u64 = 4096;

/// The drive model and the array's units for it.
#[derive(Debug, Clone)]
pub struct ArrayShape {
    /// The drive model of every member.
    pub model: Arc<DiskModel>,
    /// Allocation range, in blocks.
    pub allocation_range_blocks: u64,
    /// RAID stripe unit, in bytes (the paper makes it the allocation range).
    pub stripe_unit_bytes: u64,
}

impl ArrayShape {
    /// The shape for a drive model: the paper's 512 KiB allocation ranges and
    /// stripe units for enterprise drives (10,000 RPM and faster), 1 MiB for
    /// nearline drives.
    pub fn for_model(name_or_parv_path: &str) -> Result<ArrayShape, LabError> {
        let model = DiskModel::resolve(name_or_parv_path, &[]).map_err(|source| LabError::Model { source })?;
        Ok(ArrayShape::for_disk_model(Arc::new(model)))
    }

    /// The shape for a model already resolved (with overrides, say), by the
    /// rule of [`ArrayShape::for_model`].
    pub fn for_disk_model(model: Arc<DiskModel>) -> ArrayShape {
        let unit_bytes: u64 = if model.rpm() >= 10_000.0 { 512 * 1024 } else { 1 << 20 };
        ArrayShape { model, allocation_range_blocks: unit_bytes / BLOCK_SIZE_BYTES, stripe_unit_bytes: unit_bytes }
    }

    /// The gap a read reads through rather than positioning again
    /// (`VolumeOptions::read_gap_blocks`): half a track of the drive's middle
    /// zone, where the windows lie, in blocks. Reading it through costs half
    /// a revolution at most; a request of its own costs a positioning, about
    /// half a revolution on average.
    pub fn read_gap_blocks(&self) -> u64 {
        let middle = self.model.sector_count() / 2;
        let track = self.model.track_of(middle).expect("the middle sector is on a track");
        let track_bytes = u64::from(track.sector_count) * u64::from(self.model.sector_size_bytes());
        track_bytes / 2 / BLOCK_SIZE_BYTES
    }

    /// Blocks of each drive used at `scale` (whole stripe units, at least enough
    /// for a few extents).
    pub fn window_blocks_per_disk(&self, scale: f64) -> Result<u64, LabError> {
        self.window_with_room(scale, 0)
    }

    /// Blocks of each drive used at `scale`, checked to leave room for two
    /// extents or more with a snapshot reserve of `reserve_blocks_per_extent`
    /// each; the refusal names the smallest scale that does.
    pub fn window_with_room(&self, scale: f64, reserve_blocks_per_extent: u64) -> Result<u64, LabError> {
        if !(scale > 0.0 && scale <= 1.0) {
            return Err(LabError::InvalidParameter {
                parameter: "scale",
                message: format!("{scale} is not in (0, 1]"),
            });
        }
        let window = self.window_at(scale);
        let extents = self.extents_with_reserve(window, reserve_blocks_per_extent);
        if extents < 2 {
            let fits = |scale| self.extents_with_reserve(self.window_at(scale), reserve_blocks_per_extent) >= 2;
            let with_reserve = match reserve_blocks_per_extent {
                0 => String::new(),
                blocks => format!(" with a snapshot reserve of {blocks} blocks per extent"),
            };
            let hint = match smallest_scale(fits) {
                Some(smallest) => format!("--scale {smallest} or more"),
                None => "not even at --scale 1: the drive is too small".to_string(),
            };
            return Err(LabError::InvalidParameter {
                parameter: "scale",
                message: format!(
                    "{scale} leaves room for {extents} {} of 16 MiB{with_reserve}; at least 2 are needed ({hint})",
                    if extents == 1 { "extent" } else { "extents" }
                ),
            });
        }
        Ok(window)
    }

    /// Extents that `window` blocks of each drive hold, each with a snapshot
    /// reserve of `reserve_blocks_per_extent`, at the workload's fill.
    fn extents_with_reserve(&self, window: u64, reserve_blocks_per_extent: u64) -> u64 {
        let shares = EXTENT_BLOCKS + reserve_blocks_per_extent;
        extent_count_for(self.capacity_blocks(window) * EXTENT_BLOCKS / shares)
    }

    /// Blocks of each drive used at `scale` (whole stripe units), unchecked.
    fn window_at(&self, scale: f64) -> u64 {
        let unit_blocks = self.stripe_unit_bytes / BLOCK_SIZE_BYTES;
        let drive_blocks = self.model.sector_count() / (BLOCK_SIZE_BYTES / 512);
        ((scale * drive_blocks as f64) as u64) / unit_blocks * unit_blocks
    }

    /// The array's capacity in blocks with `window` blocks of each drive (less
    /// the zone checksum blocks).
    pub fn capacity_blocks(&self, window: u64) -> u64 {
        let unit_blocks = self.stripe_unit_bytes / BLOCK_SIZE_BYTES;
        member_data_blocks(window, unit_blocks, ZONE_DATA_BLOCKS) * DATA_DISK_COUNT as u64
    }
}

/// One run of the workload: the array, the layout and its staging area.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The array.
    pub shape: ArrayShape,
    /// The layout.
    pub layout: Layout,
    /// The staging area as a percentage of the array's capacity (0: none, and
    /// no write is staged).
    pub staging_percent: f64,
    /// Fraction of each drive used.
    pub scale: f64,
    /// Seed of the drives, the updates, the arm positions and the read order.
    pub seed: u64,
    /// Snapshots the volume holds at once at most, those being deleted
    /// included (0: the run takes none). The flash gets room for what they
    /// hold and keeps the metadata's bytes, which snapshot reads and deletion
    /// scans read back.
    pub snapshots_at_once_max: u64,
    /// Blocks per extent set aside for what snapshots hold (0: none): the
    /// extents and this reserve together fill the workload's fill fraction
    /// ([`RunSpec::extent_count`]), so the live data keeps the free space it
    /// has without snapshots.
    pub snapshot_reserve_blocks_per_extent: u64,
    /// Fraction of each allocation range a first write leaves free for later
    /// updates (the engine's `range_reserve_fraction`; 0 in the paper's runs).
    pub range_reserve_fraction: f64,
    /// Which blocks the aging updates (uniform in the paper's runs).
    pub update_skew: UpdateSkew,
    /// The proximal layout's copy-out of what snapshots read at the places
    /// destaged blocks go back to (`VolumeOptions::proximal_copy_out`).
    pub proximal_copy_out: bool,
}

impl RunSpec {
    /// Extents the run fills: as many as, with the snapshot reserve, fill the
    /// workload's fraction of the array.
    pub fn extent_count(&self) -> Result<u64, LabError> {
        let reserve = self.snapshot_reserve_blocks_per_extent;
        let window = self.shape.window_with_room(self.scale, reserve)?;
        Ok(self.shape.extents_with_reserve(window, reserve))
    }
}

/// The smallest scale of two significant digits at which `fits` holds
/// (`fits` grows with the scale), or `None` when not even the whole drive
/// does. The value is the decimal it prints as.
fn smallest_scale(fits: impl Fn(f64) -> bool) -> Option<f64> {
    if !fits(1.0) {
        return None;
    }
    let (mut low, mut high) = (0.0, 1.0);
    for _ in 0..60 {
        let middle = (low + high) / 2.0;
        if fits(middle) {
            high = middle;
        } else {
            low = middle;
        }
    }
    // Up to two significant digits, as a decimal: the step of the second
    // digit, and the multiples of it from the first that fits.
    let decimals = (1.0 - high.log10().floor()).max(0.0) as usize;
    let step = 10f64.powi(-(decimals as i32));
    let mut rounded = (high / step).ceil();
    loop {
        let scale: f64 = format!("{:.decimals$}", rounded * step).parse().expect("a formatted number parses");
        if scale >= 1.0 || fits(scale) {
            return Some(scale.min(1.0));
        }
        rounded += 1.0;
    }
}

/// The observer that moves the heads before each destage batch and measures it.
struct BatchObserver<'a> {
    arms: &'a mut ChaCha8Rng,
    aging: &'a mut AgingFigures,
    /// The destage in progress is measured (it was triggered by a full area).
    measured: bool,
}

impl DestageObserver<Array> for BatchObserver<'_> {
    fn before_batch(&mut self, data: &mut Array) {
        let stray = take_member_logs(data);
        self.aging.absorb(&stray);
        randomise_arms(data, self.arms);
    }

    fn after_batch(&mut self, data: &mut Array, batch: &DestageBatchReport) {
        let logs = take_member_logs(data);
        self.aging.absorb(&logs);
        if !self.measured {
            return;
        }
        if let Some(measurement) = BatchMeasurement::from_logs(batch.user_blocks, &logs) {
            self.aging.batches.add(&measurement);
            if let Some(last) = self.aging.destages.last_mut() {
                last.add(&measurement);
            }
        }
    }
}

/// One destage batch's member-disk requests ([`LabVolume::capture_destage`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedBatch {
    /// Staged blocks the batch moved to the array.
    pub user_blocks: u64,
    /// Each member's completed requests, by member index.
    pub member_ios: Vec<Vec<MemberIo>>,
}

/// The observer that keeps each destage batch's member requests.
#[derive(Debug, Default)]
struct DestageCapture {
    batches: Vec<CapturedBatch>,
}

impl DestageObserver<Array> for DestageCapture {
    fn after_batch(&mut self, data: &mut Array, batch: &DestageBatchReport) {
        let member_ios = take_member_logs(data);
        self.batches.push(CapturedBatch { user_blocks: batch.user_blocks, member_ios });
    }
}

/// What the aging did on the disks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgingFigures {
    /// User updates issued.
    pub update_count: u64,
    /// Every measured destage batch.
    pub batches: BatchSummary,
    /// The measured batches of each destage, in order.
    pub destages: Vec<BatchSummary>,
    /// Time during which any member had a request outstanding (all I/O of the
    /// aging, the final destage included).
    pub array_busy_ns: u64,
    /// Every member request of the aging, pooled per member as one batch per
    /// log drain (the per-disk figures of layouts that never destage).
    pub all_io: BatchSummary,
    /// Virtual time the aging took, staging writes included.
    pub elapsed_ns: u64,
    /// Member-disk reads of the aging (all of them, the final destage included).
    pub member_read_count: u64,
    /// Member-disk writes of the aging.
    pub member_write_count: u64,
    /// Blocks the engine destaged during the aging, the final destage
    /// included.
    #[serde(default)]
    pub destaged_blocks: u64,
    /// Staged blocks the aging's destages left staged as hot, summed over
    /// the destages (`proximal-hot`).
    #[serde(default)]
    pub retained_hot_blocks: u64,
}

impl AgingFigures {
    fn absorb(&mut self, logs: &[Vec<MemberIo>]) {
        let all: Vec<MemberIo> = logs.iter().flatten().copied().collect();
        self.array_busy_ns += crate::rig::measure::busy_ns(&all);
        self.member_read_count += all.iter().filter(|io| io.op == IoOp::Read).count() as u64;
        self.member_write_count += all.iter().filter(|io| io.op == IoOp::Write).count() as u64;
        if let Some(measurement) = BatchMeasurement::from_logs(0, logs) {
            self.all_io.add(&measurement);
        }
    }

    /// User updates per second of array busy time: the update rate the array
    /// sustains when staging proceeds in parallel with the disks.
    pub fn random_update_iops(&self) -> f64 {
        ratio(self.update_count as f64 * 1e9, self.array_busy_ns as f64)
    }
}

/// What reading every extent did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadFigures {
    /// Read requests.
    pub request_count: u64,
    /// Blocks read.
    pub block_count: u64,
    /// Physical runs on the data device.
    pub run_count: u64,
    /// Member-disk I/Os.
    pub member_io_count: u64,
    /// (request, member) pairs in which the member did at least one I/O.
    pub member_touch_count: u64,
    /// Sum of the requests' response times.
    pub response_ns: u64,
}

impl ReadFigures {
    /// Mean blocks per request.
    pub fn blocks_per_request(&self) -> f64 {
        ratio(self.block_count as f64, self.request_count as f64)
    }

    /// Mean physical runs per request.
    pub fn runs_per_request(&self) -> f64 {
        ratio(self.run_count as f64, self.request_count as f64)
    }

    /// Mean I/Os of each member a request involved.
    pub fn ios_per_disk(&self) -> f64 {
        ratio(self.member_io_count as f64, self.member_touch_count as f64)
    }

    /// Mean members involved per request.
    pub fn disks_per_request(&self) -> f64 {
        ratio(self.member_touch_count as f64, self.request_count as f64)
    }

    /// Mean response time in milliseconds.
    pub fn response_ms(&self) -> f64 {
        ratio(self.response_ns as f64, self.request_count as f64) / 1e6
    }

    /// Bytes read per second of response time, per data disk, in MB/s (10^6 bytes).
    pub fn mb_s_per_disk(&self) -> f64 {
        let bytes = (self.block_count * BLOCK_SIZE_BYTES) as f64;
        ratio(bytes * 1e9 / 1e6, self.response_ns as f64) / DATA_DISK_COUNT as f64
    }
}

/// A volume over the testbed, filled with the workload's extents.
#[derive(Debug)]
pub struct LabVolume {
    volume: Volume<Array, FlashDisk>,
    extent_ids: Vec<u64>,
    spec: RunSpec,
    capacity_blocks: u64,
    staging_blocks: u64,
    /// The first block of each member's window on its drive.
    window_first_block: u64,
    /// The random updates (the workload's stream 1 of the seed).
    updates: SrarwUpdates,
    /// The arm positions (stream 2).
    arms: ChaCha8Rng,
    /// The read orders (stream 3).
    reads: SrarwReadOrders,
}

impl LabVolume {
    /// Builds the testbed, formats a volume with `spec`'s layout and fills it.
    pub fn create(spec: &RunSpec, progress: &mut dyn Progress) -> Result<LabVolume, LabError> {
        let window = spec.shape.window_blocks_per_disk(spec.scale)?;
        if !(0.0..=50.0).contains(&spec.staging_percent) {
            let message = format!("{} % is not in [0, 50]", spec.staging_percent);
            return Err(LabError::InvalidParameter { parameter: "staging", message });
        }
        let capacity_blocks = spec.shape.capacity_blocks(window);
        let extent_count = spec.extent_count()?;
        let staging_blocks = (capacity_blocks as f64 * spec.staging_percent / 100.0) as u64;
        let config = TestbedConfig {
            model: Arc::clone(&spec.shape.model),
            data_disk_count: DATA_DISK_COUNT,
            stripe_unit_bytes: spec.shape.stripe_unit_bytes,
            window_blocks_per_disk: window,
            zone_data_blocks: ZONE_DATA_BLOCKS,
            drive_queue_depth: DRIVE_QUEUE_DEPTH,
            flash_block_count: flash_block_count(
                staging_blocks,
                extent_count,
                capacity_blocks,
                spec.snapshots_at_once_max,
            ),
            flash_keeps_metadata: spec.snapshots_at_once_max > 0,
            seed: spec.seed,
        };
        let window_first_block = config.window_first_block();
        let testbed = config.build()?;
        let options = volume_options(spec, staging_blocks);
        let volume = Volume::format(testbed.array, testbed.flash, 1, options)?;
        let mut lab = LabVolume {
            volume,
            extent_ids: Vec::new(),
            spec: spec.clone(),
            capacity_blocks,
            staging_blocks,
            window_first_block,
            updates: SrarwUpdates::skewed(
                spec.seed,
                usize::try_from(extent_count).expect("extents fit in memory"),
                EXTENT_BLOCKS,
                spec.update_skew,
            ),
            arms: seeded_stream(spec.seed, 2),
            reads: SrarwReadOrders::new(spec.seed),
        };
        lab.fill(extent_count, progress)?;
        Ok(lab)
    }

    /// The run's specification.
    pub fn spec(&self) -> &RunSpec {
        &self.spec
    }

    /// Extents in the volume.
    pub fn extent_count(&self) -> u64 {
        self.extent_ids.len() as u64
    }

    /// The array's capacity in blocks.
    pub fn capacity_blocks(&self) -> u64 {
        self.capacity_blocks
    }

    /// The staging area's capacity in blocks.
    pub fn staging_blocks(&self) -> u64 {
        self.staging_blocks
    }

    /// The first block of each member's window on its drive (member blocks
    /// are relative to it).
    pub fn window_first_block(&self) -> u64 {
        self.window_first_block
    }

    /// The current virtual time.
    pub fn now_ns(&self) -> u64 {
        self.volume.data_device().now_ns()
    }

    fn fill(&mut self, extent_count: u64, progress: &mut dyn Progress) -> Result<(), LabError> {
        progress.start_phase("filling extents", extent_count);
        for index in 0..extent_count {
            let id = self.volume.create_extent(&extent_name(index), EXTENT_BLOCKS * BLOCK_SIZE_BYTES)?;
            self.volume.write_blocks_synthetic(id, 0, EXTENT_BLOCKS, false)?;
            self.extent_ids.push(id);
            take_member_logs(self.volume.data_device_mut());
            progress.advance(1);
        }
        self.volume.flush()?;
        take_member_logs(self.volume.data_device_mut());
        Ok(())
    }

    /// Issues the random updates, destaging whenever the staging area fills.
    pub fn age(&mut self, progress: &mut dyn Progress) -> Result<AgingFigures, LabError> {
        self.age_with(&mut NothingBetweenUpdates, progress)
    }

    /// Issues the random updates as [`LabVolume::age`] does, with what
    /// `between` does before each of them; the disk I/O that causes is part
    /// of the aging's figures.
    pub fn age_with(
        &mut self,
        between: &mut dyn BetweenUpdates,
        progress: &mut dyn Progress,
    ) -> Result<AgingFigures, LabError> {
        let update_count = self.extent_count() * UPDATES_PER_EXTENT;
        progress.start_phase(&format!("aging ({})", self.label()), update_count);
        let mut aging = AgingFigures { update_count, ..AgingFigures::default() };
        let started_ns = self.now_ns();
        let engine_at_start = self.volume.stats().clone();
        take_member_logs(self.volume.data_device_mut());
        for update in 0..update_count {
            between.before_update(self, update, update_count)?;
            let (extent_index, block) = self.updates.next().expect("updates are endless");
            self.update(self.extent_ids[extent_index], block, &mut aging)?;
            if (update + 1) % UPDATES_PER_LOG_DRAIN == 0 {
                let logs = take_member_logs(self.volume.data_device_mut());
                aging.absorb(&logs);
            }
            if (update + 1) % UPDATES_PER_PROGRESS == 0 {
                progress.advance(UPDATES_PER_PROGRESS);
            }
        }
        progress.advance(update_count % UPDATES_PER_PROGRESS);
        let logs = take_member_logs(self.volume.data_device_mut());
        aging.absorb(&logs);
        self.destage(&mut aging, false)?;
        aging.elapsed_ns = self.now_ns() - started_ns;
        let engine = self.volume.stats();
        aging.destaged_blocks = engine.destaged_blocks - engine_at_start.destaged_blocks;
        aging.retained_hot_blocks = engine.retained_hot_blocks - engine_at_start.retained_hot_blocks;
        Ok(aging)
    }

    fn update(&mut self, extent: u64, block: u64, aging: &mut AgingFigures) -> Result<(), LabError> {
        if self.updates_in_place_at_once() {
            // The update goes at once to its fixed home, a random place on the
            // full-size array: the heads start from a random place too.
            let logs = take_member_logs(self.volume.data_device_mut());
            aging.absorb(&logs);
            randomise_arms(self.volume.data_device_mut(), &mut self.arms);
        }
        if self.staging_blocks > 0 {
            let fill = self.volume.staging_fill();
            if fill.used_blocks + 1 > fill.capacity_blocks {
                self.destage(aging, true)?;
            }
        }
        match self.volume.write_blocks_synthetic(extent, block, 1, false) {
            Err(EngineError::StagingFull { .. }) => {
                // Staging space freed by the last destage may still await its CP.
                self.destage(aging, true)?;
                self.volume.write_blocks_synthetic(extent, block, 1, false).map_err(LabError::from)
            }
            other => other.map_err(LabError::from),
        }
    }

    fn destage(&mut self, aging: &mut AgingFigures, measured: bool) -> Result<(), LabError> {
        if self.volume.staging_fill().used_blocks == 0 {
            return Ok(());
        }
        let logs = take_member_logs(self.volume.data_device_mut());
        aging.absorb(&logs);
        if measured {
            aging.destages.push(BatchSummary::default());
        }
        let mut observer = BatchObserver { arms: &mut self.arms, aging, measured };
        self.volume.destage_observed(&mut observer)?;
        Ok(())
    }

    /// Issues `update_count` random updates of the workload (at most what the
    /// staging area holds, so none destages) and destages them, returning the
    /// member-disk requests of each destage batch as the engine issued them:
    /// background work to replay beside client requests.
    pub fn capture_destage(&mut self, update_count: u64) -> Result<Vec<CapturedBatch>, LabError> {
        let fill = self.volume.staging_fill();
        if update_count == 0 || fill.used_blocks + update_count > fill.capacity_blocks {
            let message = format!(
                "{update_count} updates do not fit in the {} free staging blocks",
                fill.capacity_blocks - fill.used_blocks
            );
            return Err(LabError::InvalidParameter { parameter: "staging", message });
        }
        for _ in 0..update_count {
            let (extent_index, block) = self.updates.next().expect("updates are endless");
            self.volume.write_blocks_synthetic(self.extent_ids[extent_index], block, 1, false)?;
        }
        take_member_logs(self.volume.data_device_mut());
        let mut capture = DestageCapture::default();
        self.volume.destage_observed(&mut capture)?;
        Ok(capture.batches)
    }

    /// Whether each update is written at once to its fixed place (a frame array
    /// without a cache). Write-anywhere updates also go at once, but to the holes
    /// after a rolling cursor, near one another at any scale.
    fn updates_in_place_at_once(&self) -> bool {
        self.spec.layout == Layout::InPlace && self.staging_blocks == 0
    }

    /// Reads every extent in random order, in requests of up to 974 blocks.
    pub fn read_every_extent(&mut self, progress: &mut dyn Progress) -> Result<ReadFigures, LabError> {
        let phase = format!("reading every extent ({})", self.label());
        let extent_ids = self.extent_ids.clone();
        self.read_extents(&phase, progress, |volume, index, first_block, block_count| {
            volume.read_blocks_synthetic(extent_ids[index], first_block, block_count)
        })
    }

    /// Reads every extent as of snapshot `snapshot` as [`LabVolume::read_every_extent`]
    /// reads the live extents (the next read order, the same requests).
    pub fn read_every_extent_of_snapshot(
        &mut self,
        snapshot: &str,
        progress: &mut dyn Progress,
    ) -> Result<ReadFigures, LabError> {
        let phase = format!("reading every extent of snapshot {snapshot} ({})", self.label());
        self.read_extents(&phase, progress, |volume, index, first_block, block_count| {
            volume.read_snapshot_blocks_synthetic(snapshot, &extent_name(index as u64), first_block, block_count)
        })
    }

    /// Reads every extent in the next random order, in requests of up to 974
    /// blocks, each request with `read(volume, extent index, first block,
    /// block count)`.
    fn read_extents(
        &mut self,
        phase: &str,
        progress: &mut dyn Progress,
        mut read: impl FnMut(&mut Volume<Array, FlashDisk>, usize, u64, u64) -> Result<ReadReport, EngineError>,
    ) -> Result<ReadFigures, LabError> {
        let mut order: Vec<usize> = (0..self.extent_ids.len()).collect();
        self.reads.shuffle(&mut order);
        progress.start_phase(phase, order.len() as u64);
        let mut figures = ReadFigures::default();
        take_member_logs(self.volume.data_device_mut());
        for index in order {
            randomise_arms(self.volume.data_device_mut(), &mut self.arms);
            for (first_block, block_count) in read_requests(EXTENT_BLOCKS) {
                let report = read(&mut self.volume, index, first_block, block_count)?;
                let logs = take_member_logs(self.volume.data_device_mut());
                figures.request_count += 1;
                figures.block_count += block_count;
                figures.run_count += report.run_count();
                figures.member_io_count += logs.iter().map(|log| log.len() as u64).sum::<u64>();
                figures.member_touch_count += logs.iter().filter(|log| !log.is_empty()).count() as u64;
                figures.response_ns += report.response_ns();
            }
            progress.advance(1);
        }
        Ok(figures)
    }

    /// A short label: layout and staging area.
    pub fn label(&self) -> String {
        label(&self.spec)
    }

    /// Takes a snapshot of every extent, named `name`.
    ///
    /// # Errors
    /// [`LabError::InvalidParameter`] if the run was not made to hold snapshots
    /// ([`RunSpec::snapshots_at_once_max`] is 0); the engine's refusal otherwise.
    pub fn create_snapshot(&mut self, name: &str) -> Result<(), LabError> {
        if self.volume.snapshots().len() as u64 + self.volume.pending_deletions() as u64
            >= self.spec.snapshots_at_once_max
        {
            let message = format!("the run holds at most {} at once", self.spec.snapshots_at_once_max);
            return Err(LabError::InvalidParameter { parameter: "snapshots", message });
        }
        self.volume.create_snapshot(name)?;
        Ok(())
    }

    /// Deletes snapshot `name` and runs its deletion scan to the end.
    pub fn delete_snapshot(&mut self, name: &str) -> Result<(), LabError> {
        self.volume.delete_snapshot(name)?;
        self.volume.finish_deletions()?;
        Ok(())
    }

    /// The volume's snapshots, oldest first.
    pub fn snapshots(&self) -> Vec<SnapshotInfo> {
        self.volume.snapshots()
    }

    /// Snapshot deletions whose scan has not finished.
    pub fn pending_deletions(&self) -> usize {
        self.volume.pending_deletions()
    }
}

/// What an aging does besides its updates (for example take snapshots).
pub trait BetweenUpdates {
    /// Called before update `update_index` (from 0) of `update_count`.
    fn before_update(&mut self, volume: &mut LabVolume, update_index: u64, update_count: u64) -> Result<(), LabError>;
}

/// Nothing between updates: the plain SRARW aging.
#[derive(Debug, Clone, Copy, Default)]
pub struct NothingBetweenUpdates;

impl BetweenUpdates for NothingBetweenUpdates {
    fn before_update(&mut self, _: &mut LabVolume, _: u64, _: u64) -> Result<(), LabError> {
        Ok(())
    }
}

/// The name of the extent created `index`-th.
pub fn extent_name(index: u64) -> String {
    format!("extent{index}")
}

/// `layout, staging S %`.
pub fn label(spec: &RunSpec) -> String {
    if spec.staging_percent > 0.0 {
        format!("{}, staging {} %", spec.layout.name(), spec.staging_percent)
    } else {
        format!("{}, no staging", spec.layout.name())
    }
}

/// The engine's options for a run: the paper's threshold, ranges and span; the
/// caller destages (so that batches can be observed).
fn volume_options(spec: &RunSpec, staging_blocks: u64) -> VolumeOptions {
    let staged = spec.staging_percent > 0.0 && spec.layout != Layout::WriteAnywhere;
    VolumeOptions {
        layout: spec.layout,
        staging_threshold_bytes: if staged { STAGING_THRESHOLD_BYTES } else { 0 },
        staging_capacity_blocks: staging_blocks.max(1),
        allocation_range_blocks: spec.shape.allocation_range_blocks,
        proximal_span_ranges: PROXIMAL_SPAN_RANGES,
        range_reserve_fraction: spec.range_reserve_fraction,
        auto_destage: false,
        payload: false,
        // The paper's array keeps parity consistent through its NVRAM: no
        // write-intent log, whose flushes would add I/O the array does not do.
        write_intents: false,
        // The log-structured layouts write a full stripe at a time.
        segment_blocks: spec.shape.stripe_unit_bytes / BLOCK_SIZE_BYTES * DATA_DISK_COUNT as u64,
        proximal_copy_out: spec.proximal_copy_out,
        read_gap_blocks: spec.shape.read_gap_blocks(),
        ..VolumeOptions::default()
    }
}

/// Flash blocks for the staging area plus the metadata: room for every extent's
/// map fully fragmented (4096 runs) three times over (current, last CP, log),
/// both data bitmaps and their copies, and a fixed reserve; and, for each
/// snapshot held at once, one more of each (a snapshot holds the staged
/// blocks, maps and bitmaps of its CP).
pub fn flash_block_count(staging_blocks: u64, extent_count: u64, capacity_blocks: u64, snapshots: u64) -> u64 {
    let map_blocks_per_extent = 64;
    let bitmap_blocks = capacity_blocks.div_ceil(8 * BLOCK_SIZE_BYTES);
    staging_blocks * (1 + snapshots)
        + extent_count * map_blocks_per_extent * (3 + snapshots)
        + bitmap_blocks * (4 + 2 * snapshots)
        + 65_536
}

/// The scale a refusal of too small a scale names (`--scale S or more`).
#[cfg(test)]
pub(crate) fn scale_named_in(message: &str) -> f64 {
    message
        .split("--scale ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("the message names a scale: {message}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enterprise_drives_get_half_megabyte_units() {
        assert_eq!(ArrayShape::for_model("cheetah15k5").unwrap().allocation_range_blocks, 128);
        let nearline = ArrayShape::for_model("nearline7200").unwrap();
        assert_eq!((nearline.allocation_range_blocks, nearline.stripe_unit_bytes), (256, 1 << 20));
    }

    #[test]
    fn scale_keeps_the_fill_and_refuses_too_small_or_out_of_range() {
        let shape = ArrayShape::for_model("nearline7200").unwrap();
        let window = shape.window_blocks_per_disk(0.001).unwrap();
        assert_eq!(window % 256, 0);
        let capacity = shape.capacity_blocks(window);
        assert_eq!(capacity, window / 64 * 63 / 256 * 256 * DATA_DISK_COUNT as u64, "less the checksum blocks");
        let extents = extent_count_for(capacity);
        let filled = extents * EXTENT_BLOCKS;
        let fill = proxima_workload::srarw::FILL_FRACTION;
        assert!(filled as f64 <= fill * capacity as f64 && (filled + EXTENT_BLOCKS) as f64 > fill * capacity as f64);
        assert!(shape.window_blocks_per_disk(0.0).is_err());
        assert!(shape.window_blocks_per_disk(1.5).is_err());
        assert!(shape.window_blocks_per_disk(1e-6).is_err());
    }

    #[test]
    fn too_small_a_scale_names_the_smallest_that_fits() {
        let shape = ArrayShape::for_model("atlas10k").unwrap();
        let Err(LabError::InvalidParameter { parameter: "scale", message }) = shape.window_blocks_per_disk(0.0005)
        else {
            panic!("0.0005 of a 9 GB drive leaves no room for two extents");
        };
        let named = scale_named_in(&message);
        assert!(shape.window_blocks_per_disk(named).is_ok(), "{named} fits");
        assert!(shape.window_blocks_per_disk(named * 0.9).is_err(), "{named} is within 10 % of the smallest");
        assert_eq!(smallest_scale(|_| false), None);
        assert_eq!(smallest_scale(|scale| scale >= 0.123_456), Some(0.13));
    }
}
