//! TPC-C users on an engine volume over a simulated disk array, in virtual
//! time: the measurement behind `reproduce hylog-throughput` (the HyLog
//! paper's Figures 6 to 9).
//!
//! **The engine decides, the drives time.** The paper's closed system keeps
//! 20 users' requests in flight on 4 disks at once; the engine issues a
//! request's I/O and waits for it, one request at a time. So the volume runs
//! over [`RecordingDevice`]s that answer at once and record what the engine
//! asked of each member (and of the flash), in rounds ([`crate::rig::recording`]),
//! and this module times those rounds on simulated drives: a user's request
//! runs through the engine when the user issues it, then its rounds go to the
//! drives one after another, each once the previous one completed, and the
//! user issues its next request when the last completes. Meanwhile the other
//! users' rounds share the drives, which order what they hold by LBN
//! (C-LOOK, for the paper's SCAN on the page number, 001:L403–L405). The
//! engine's state moves on when a request is issued, not when its I/O
//! completes: a read issued while a write that moves its page is in flight
//! finds the page where the engine put it. Only timing, never data, depends
//! on that: the volume keeps no payload.
//!
//! **Rig.** `disk_count` drives of the model with their write-back cache off
//! (001:L403), each used from its first block (utilisation is varied "by
//! using only the first part of each disk", 001:L437–L441), as a RAID-0
//! ([`StripeDevice`]) or a RAID-5 ([`RaidDevice`]) with a stripe unit of
//! `stripe_unit_blocks`; the segment of the log-structured layouts is a full
//! stripe. A simulated flash device holds the volume's metadata and the NV
//! segment buffer (two segments: WOLF and HyLog fill a hot and a cold one).
//! One extent holds the database, written serially once, so that it starts
//! packed at the front of the array (001:L442–L450).
//!
//! **Workload.** [`TpccWorkload`]'s users, closed-loop with no think time,
//! through its write-back LRU buffer pool: a buffer hit costs no time; a miss
//! reads the page, first writing back the dirty page it evicts.
//!
//! **Phases.** Untimed, the users run until the pool has written back
//! `rewrites` database sizes of pages, at least the array's free blocks
//! beyond the cleaner's reserve, so that a log has wrapped and cleans at its steady state and HyLog has
//! chosen its hot set (the paper excludes the time until the data
//! spreads over the disk, 001:L442–L450). Timed, the
//! users run for `settle_ns` unmeasured (queues fill) and `measure_ns`
//! measured; throughput is the logical page requests (the trace records of
//! the paper's metric, 001:L451–L452) completed per second.
//!
//! Deterministic: the same spec gives the same figures.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use proxima_device::{BlockDevice, DeviceInfo, IoOp, RaidConfig, RaidDevice, StripeDevice};
use proxima_disk::{
    DeviceIndex, DiskModel, DiskOp, DiskRequest, FlashDevice, HardDisk, Nanos, Scheduler, SimDevice, Simulation,
};
use proxima_engine::{CleaningSettings, EngineStats, Layout, Volume, VolumeOptions};
use proxima_workload::tpcc::{TpccSpec, TpccWorkload};
use serde::{Deserialize, Serialize};

use crate::progress::Progress;
use crate::rig::lab_volume::flash_block_count;
use crate::rig::recording::{IoRecorder, RecordedIo, RecordingDevice};
use crate::rig::testbed::{staging_flash_params, BLOCK_SIZE_BYTES};
use crate::seed001_hylog::cost_model::ArrayLevel;
use crate::seed001_hylog::database;
use crate::seed001_hylog::engine_write_cost::{write_cost_between, WriteCostMeasurement};
use crate::LabError;

/// Sectors per 4 KiB block.
const SECTORS_PER_BLOCK: u64 = BLOCK_SIZE_BYTES / 512;

/// Requests a drive holds and orders (more than the users, so that C-LOOK
/// sees every request a drive has).
const DRIVE_QUEUE_DEPTH: usize = 64;

/// Segments of the NV segment buffer (on flash): one per log stream.
const SEGMENT_BUFFER_SEGMENTS: u64 = LOG_STREAMS;

/// Log streams of WOLF and HyLog (hot and cold), each with a head segment.
const LOG_STREAMS: u64 = 2;

/// Warm-up page write-backs between progress reports.
const PROGRESS_WRITES: u64 = 4096;

/// Virtual time between progress reports of the timed phase, ns.
const PROGRESS_NS: Nanos = 100_000_000;

/// How the database is laid out on the array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThroughputLayout {
    /// Update in place with no write cache (the paper's Overwrite).
    Overwrite,
    /// Log-structured with cost-age cleaning.
    Lfs,
    /// LFS with the reordering write buffer.
    Wolf,
    /// Hot pages logged, cold ones in place.
    Hylog,
}

impl ThroughputLayout {
    /// Every layout, in the paper's order.
    pub const ALL: [ThroughputLayout; 4] =
        [ThroughputLayout::Overwrite, ThroughputLayout::Lfs, ThroughputLayout::Wolf, ThroughputLayout::Hylog];

    /// The layout's name in rows.
    pub fn name(self) -> &'static str {
        match self {
            ThroughputLayout::Overwrite => "overwrite",
            ThroughputLayout::Lfs => "lfs",
            ThroughputLayout::Wolf => "wolf",
            ThroughputLayout::Hylog => "hylog",
        }
    }

    fn engine_layout(self) -> Layout {
        match self {
            ThroughputLayout::Overwrite => Layout::InPlace,
            ThroughputLayout::Lfs => Layout::Lfs,
            ThroughputLayout::Wolf => Layout::Wolf,
            ThroughputLayout::Hylog => Layout::Hylog,
        }
    }

    fn logs(self) -> bool {
        self != ThroughputLayout::Overwrite
    }
}

/// One run's settings.
#[derive(Debug, Clone)]
pub struct ArrayRunSpec {
    /// The drive, its write-back cache off.
    pub model: Arc<DiskModel>,
    /// RAID-0 or RAID-5.
    pub level: ArrayLevel,
    /// Drives of the array (parity included).
    pub disk_count: u32,
    /// The layout.
    pub layout: ThroughputLayout,
    /// For `hylog`: a fixed hot share instead of Eq 8's choice.
    pub hot_fraction: Option<f64>,
    /// The database's share of the array's data blocks, in (0, 1).
    pub utilization: f64,
    /// Blocks per stripe unit.
    pub stripe_unit_blocks: u64,
    /// The segment efficiency A the cleaner and HyLog price with.
    pub segment_efficiency: f64,
    /// The workload (warehouses, pool, users, seed).
    pub tpcc: TpccSpec,
    /// Pages of the database (`TpccWorkload::page_count` of `tpcc`).
    pub database_pages: u64,
    /// Page write-backs before timing, in database sizes.
    pub rewrites: f64,
    /// Virtual time run before measuring, ns.
    pub settle_ns: Nanos,
    /// Virtual time measured, ns.
    pub measure_ns: Nanos,
    /// Seed of the drives.
    pub seed: u64,
}

impl ArrayRunSpec {
    /// Drives that hold data.
    pub fn data_disk_count(&self) -> u64 {
        match self.level {
            ArrayLevel::Raid0 => u64::from(self.disk_count),
            ArrayLevel::Raid5 => u64::from(self.disk_count.saturating_sub(1)),
        }
    }

    /// Blocks per segment: a full stripe.
    pub fn segment_blocks(&self) -> u64 {
        self.stripe_unit_blocks * self.data_disk_count()
    }

    /// Blocks of each drive the array uses: enough whole stripe units for
    /// the database at the utilisation.
    pub fn member_blocks(&self) -> u64 {
        let array_blocks = (self.database_pages as f64 / self.utilization).ceil() as u64;
        let units = array_blocks.div_ceil(self.segment_blocks());
        units * self.stripe_unit_blocks
    }

    /// Data blocks of the array.
    pub fn array_blocks(&self) -> u64 {
        self.member_blocks() * self.data_disk_count()
    }

    /// Whole segments of the array the database leaves free.
    pub fn free_segments(&self) -> u64 {
        (self.array_blocks() - self.database_pages) / self.segment_blocks()
    }

    /// The cleaner starts below this many clean segments: the paper's 10,
    /// or a quarter of the free segments when fewer than 40 are free (a
    /// smaller database than the paper's), and at least 2.
    pub fn cleaning_start_segments(&self) -> u64 {
        CleaningSettings::default().start_below_clean_segments.min(self.free_segments() / 4).max(2)
    }

    /// Free segments a log needs: the cleaner's start threshold, a head per
    /// log stream (hot and cold) and one to clean into.
    pub fn segments_needed(&self) -> u64 {
        self.cleaning_start_segments() + LOG_STREAMS + 1
    }

    /// Whether the array leaves a log the free segments it needs (Overwrite
    /// needs none).
    pub fn leaves_room_to_clean(&self) -> bool {
        !self.layout.logs() || self.free_segments() >= self.segments_needed()
    }

    /// Page write-backs before timing: `rewrites` database sizes, the same
    /// at every utilisation, so that the workload is at the same point of
    /// its run in every row.
    pub fn warmup_page_writes(&self) -> u64 {
        (self.rewrites * self.database_pages as f64).round() as u64
    }

    /// Staged writes per measurement interval of HyLog: half the database's
    /// pages (the paper's 20 minutes, 001:L245–L251, are of that order at
    /// its rates), so that a warm-up of one database size ends two. A fixed
    /// hot share above the share of pages an interval writes makes every
    /// page it wrote hot.
    pub fn hot_interval_writes(&self) -> u64 {
        (self.database_pages / 2).max(1)
    }

    /// The run's label in progress and errors.
    pub fn label(&self) -> String {
        let hot = self.hot_fraction.map(|share| format!(" h = {share}")).unwrap_or_default();
        let level = match self.level {
            ArrayLevel::Raid0 => "RAID-0",
            ArrayLevel::Raid5 => "RAID-5",
        };
        format!(
            "{}{hot} at u = {} on {level} of {} {}",
            self.layout.name(),
            self.utilization,
            self.disk_count,
            self.model.name()
        )
    }

    /// Checks that the run can be made: the array on the drives, room for
    /// the cleaner's reserve, a fixed hot share only for HyLog.
    pub fn check(&self) -> Result<(), LabError> {
        let invalid = |parameter: &'static str, message: String| Err(LabError::InvalidParameter { parameter, message });
        if !(self.utilization > 0.0 && self.utilization < 1.0) {
            return invalid("utilization", format!("utilisation {} is not in (0, 1)", self.utilization));
        }
        let least = match self.level {
            ArrayLevel::Raid0 => 1,
            ArrayLevel::Raid5 => 3,
        };
        if self.disk_count < least {
            return invalid(
                "disks",
                format!("{} drives are too few for the array ({}: {least})", self.disk_count, self.label()),
            );
        }
        let drive_blocks = self.model.sector_count() / SECTORS_PER_BLOCK;
        if self.member_blocks() > drive_blocks {
            let message = format!(
                "{}: the {}-page database needs {} blocks of each drive, which has {drive_blocks}",
                self.label(),
                self.database_pages,
                self.member_blocks()
            );
            return invalid("warehouses", message);
        }
        let free_segments = self.free_segments();
        let reserve = self.segments_needed();
        if !self.leaves_room_to_clean() {
            let message = format!(
                "{}: {free_segments} free segments of {} blocks; the cleaner needs {reserve} (more --warehouses, or \
                 a lower utilisation)",
                self.label(),
                self.segment_blocks()
            );
            return invalid("utilization", message);
        }
        // Writes that leave the cleaner's reserve of clean segments: the
        // cleaner has started by then.
        let until_cleaning = (free_segments - self.cleaning_start_segments()) * self.segment_blocks();
        if self.layout.logs() && self.warmup_page_writes() < until_cleaning {
            let message = format!(
                "{}: {} page write-backs before timing do not fill the {until_cleaning} free blocks beyond the \
                 cleaner's reserve: the log would not have wrapped (raise --rewrites)",
                self.label(),
                self.warmup_page_writes()
            );
            return invalid("rewrites", message);
        }
        if self.hot_fraction.is_some() && self.layout != ThroughputLayout::Hylog {
            return invalid("hot-fractions", format!("{}: a fixed hot share applies to hylog only", self.label()));
        }
        Ok(())
    }
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArrayRun {
    /// The drive's name.
    pub disk: String,
    /// RAID-0 or RAID-5.
    pub level: ArrayLevel,
    /// Drives of the array.
    pub disk_count: u32,
    /// Closed-loop users.
    pub users: u32,
    /// The layout.
    pub layout: ThroughputLayout,
    /// The run's fixed hot share (HyLog's Figure 7 runs).
    pub fixed_hot_fraction: Option<f64>,
    /// The database's share of the array.
    pub utilization: f64,
    /// Logical page requests completed in the measured time.
    pub requests: u64,
    /// The measured time, ns.
    pub measured_ns: Nanos,
    /// Page reads the pool issued in it.
    pub page_reads: u64,
    /// Page write-backs.
    pub page_writes: u64,
    /// Requests the drives completed in it.
    pub disk_requests: u64,
    /// Mean time a drive was busy over the measured time (0–1).
    pub disk_busy_share: f64,
    /// The log's cleaning over the measured time (zero in place).
    pub cleaning: WriteCostMeasurement,
    /// HyLog's hot share at the end of the run.
    pub hot_fraction: Option<f64>,
    /// Page write-backs before timing.
    pub warmup_page_writes: u64,
}

impl ArrayRun {
    /// Logical page requests per second of virtual time.
    pub fn requests_per_second(&self) -> f64 {
        self.requests as f64 / (self.measured_ns.max(1) as f64 / 1e9)
    }

    /// Runs of one spec under different seeds as one run over their summed
    /// measured time: counts summed, so its rates are those of all the
    /// requests over all the time; the drives' busy share and HyLog's last
    /// hot share are means.
    pub fn pooled(runs: &[ArrayRun], segment_blocks: u64) -> ArrayRun {
        let first = runs.first().expect("at least one run to pool").clone();
        let sum = |count: fn(&ArrayRun) -> u64| runs.iter().map(count).sum::<u64>();
        let measured_ns = sum(|run| run.measured_ns);
        let busy = runs.iter().map(|run| run.disk_busy_share * run.measured_ns as f64).sum::<f64>();
        let hot: Vec<f64> = runs.iter().filter_map(|run| run.hot_fraction).collect();
        let cleaning: Vec<WriteCostMeasurement> = runs.iter().map(|run| run.cleaning).collect();
        ArrayRun {
            requests: sum(|run| run.requests),
            measured_ns,
            page_reads: sum(|run| run.page_reads),
            page_writes: sum(|run| run.page_writes),
            disk_requests: sum(|run| run.disk_requests),
            disk_busy_share: busy / measured_ns.max(1) as f64,
            cleaning: WriteCostMeasurement::pooled(&cleaning, segment_blocks),
            hot_fraction: (!hot.is_empty()).then(|| hot.iter().sum::<f64>() / hot.len() as f64),
            warmup_page_writes: sum(|run| run.warmup_page_writes),
            ..first
        }
    }
}

/// Runs one spec (see the module documentation), reporting progress.
pub fn run_array(spec: &ArrayRunSpec, progress: &mut dyn Progress) -> Result<ArrayRun, LabError> {
    spec.check()?;
    let recorder = IoRecorder::new();
    let members: Vec<RecordingDevice> = (0..spec.disk_count as usize)
        .map(|index| {
            let info = DeviceInfo {
                name: format!("disk{index}"),
                block_size_bytes: BLOCK_SIZE_BYTES as u32,
                block_count: spec.member_blocks(),
                atomic_write_bytes: 512,
                stores_payload: false,
            };
            recorder.device(index, info)
        })
        .collect();
    match spec.level {
        ArrayLevel::Raid0 => {
            let array = StripeDevice::new(members, spec.stripe_unit_blocks)?;
            Run::new(spec, array, recorder)?.run(progress)
        }
        ArrayLevel::Raid5 => {
            let config = RaidConfig::raid5().with_stripe_unit_bytes(spec.stripe_unit_blocks * BLOCK_SIZE_BYTES);
            let array = RaidDevice::new(members, config)?;
            Run::new(spec, array, recorder)?.run(progress)
        }
    }
}

/// A user's request in flight: the rounds still to go and the requests of
/// the current one not yet completed.
#[derive(Debug, Default)]
struct UserState {
    rounds: VecDeque<Vec<RecordedIo>>,
    outstanding: usize,
}

/// One run: the volume over recording devices, the drives that time them.
struct Run<'a, D: BlockDevice> {
    spec: &'a ArrayRunSpec,
    volume: Volume<D, RecordingDevice>,
    extent_id: u64,
    recorder: IoRecorder,
    workload: TpccWorkload,
    simulation: Simulation,
    /// The simulation's index of each recorded device.
    devices: Vec<DeviceIndex>,
    users: Vec<UserState>,
    /// The user of each request in flight on the drives.
    owners: HashMap<u64, usize>,
    next_request_id: u64,
    /// Requests completed, counted from the measured time's start.
    completed_requests: u64,
    measuring: bool,
    disk_requests: u64,
    disk_busy_ns: u64,
}

impl<'a, D: BlockDevice> Run<'a, D> {
    fn new(spec: &'a ArrayRunSpec, data: D, recorder: IoRecorder) -> Result<Self, LabError> {
        let segment_blocks = spec.segment_blocks();
        let staging_blocks = if spec.layout.logs() { SEGMENT_BUFFER_SEGMENTS * segment_blocks } else { 0 };
        let flash_blocks = flash_block_count(staging_blocks, 1, spec.array_blocks(), 0);
        let flash_index = spec.disk_count as usize;
        let flash = recorder.device(
            flash_index,
            DeviceInfo {
                name: "flash".into(),
                block_size_bytes: BLOCK_SIZE_BYTES as u32,
                block_count: flash_blocks,
                atomic_write_bytes: BLOCK_SIZE_BYTES as u32,
                stores_payload: true,
            },
        );
        let options = VolumeOptions {
            layout: spec.layout.engine_layout(),
            staging_threshold_bytes: if spec.layout.logs() {
                VolumeOptions::default().staging_threshold_bytes
            } else {
                0
            },
            staging_capacity_blocks: staging_blocks.max(1),
            destage_step_blocks: segment_blocks,
            segment_blocks,
            hylog_hot_fraction: spec.hot_fraction,
            measurement_interval_writes: spec.hot_interval_writes(),
            cleaning: CleaningSettings {
                automatic: spec.layout.logs(),
                start_below_clean_segments: spec.cleaning_start_segments(),
                segment_efficiency: spec.segment_efficiency,
                ..CleaningSettings::default()
            },
            payload: false,
            data_checksums: false,
            write_intents: false,
            ..VolumeOptions::default()
        };
        let mut volume = Volume::format(data, flash, 1, options)?;
        let extent_id = volume.create_extent("database", spec.database_pages * BLOCK_SIZE_BYTES)?;
        database::load(&mut volume, extent_id, spec.database_pages)?;
        recorder.take_rounds();
        let mut simulation = Simulation::new(spec.seed);
        let mut devices = Vec::new();
        for index in 0..spec.disk_count as usize {
            let disk = HardDisk::new(Arc::clone(&spec.model), simulation.device_seed(index))
                .with_scheduler(Scheduler::CLook)
                .with_queue_depth(DRIVE_QUEUE_DEPTH);
            devices.push(simulation.add_device(Box::new(disk) as Box<dyn SimDevice>));
        }
        let flash = FlashDevice::new(staging_flash_params(flash_blocks));
        devices.push(simulation.add_device(Box::new(flash)));
        Ok(Run {
            spec,
            volume,
            extent_id,
            recorder,
            workload: TpccWorkload::new(spec.tpcc),
            simulation,
            devices,
            users: (0..spec.tpcc.users).map(|_| UserState::default()).collect(),
            owners: HashMap::new(),
            next_request_id: 0,
            completed_requests: 0,
            measuring: false,
            disk_requests: 0,
            disk_busy_ns: 0,
        })
    }

    fn run(mut self, progress: &mut dyn Progress) -> Result<ArrayRun, LabError> {
        let spec = self.spec;
        let warmup_writes = spec.warmup_page_writes();
        let timed_units = (spec.settle_ns + spec.measure_ns).div_ceil(PROGRESS_NS);
        progress.start_phase(&spec.label(), warmup_writes.div_ceil(PROGRESS_WRITES) + timed_units);
        self.warm_up(warmup_writes, progress)?;
        let warmup_page_writes = self.workload.counts().physical_writes;

        for user in 0..self.users.len() {
            self.issue_next(user)?;
        }
        let measure_from = spec.settle_ns;
        let measure_until = spec.settle_ns + spec.measure_ns;
        let mut reported_ns = 0;
        let mut at_start: Option<(EngineStats, u64, u64)> = None;
        while self.simulation.now_ns() < measure_until {
            if at_start.is_none() && self.simulation.now_ns() >= measure_from {
                let counts = self.workload.counts();
                at_start = Some((self.volume.stats().clone(), counts.physical_reads, counts.physical_writes));
                self.measuring = true;
            }
            let Some((device, completion)) = self.simulation.next_completion() else {
                return Err(LabError::InvalidParameter {
                    parameter: "users",
                    message: format!("{}: every user is idle", spec.label()),
                });
            };
            if completion.completion_ns > measure_until {
                break;
            }
            if self.measuring && device.0 < spec.disk_count as usize {
                self.disk_requests += 1;
                self.disk_busy_ns += completion.completion_ns - completion.start_ns.max(measure_from);
            }
            let user = self.owners.remove(&completion.id).expect("every request in flight has a user");
            self.users[user].outstanding -= 1;
            if self.users[user].outstanding == 0 && !self.next_round(user) {
                self.request_done();
                self.issue_next(user)?;
            }
            let now_units = self.simulation.now_ns() / PROGRESS_NS;
            if now_units > reported_ns {
                progress.advance(now_units - reported_ns);
                reported_ns = now_units;
            }
        }
        progress.advance(timed_units.saturating_sub(reported_ns));
        let (engine_before, reads_before, writes_before) = at_start.expect("the measured time started");
        let counts = self.workload.counts();
        Ok(ArrayRun {
            disk: spec.model.name().to_string(),
            level: spec.level,
            disk_count: spec.disk_count,
            users: spec.tpcc.users,
            layout: spec.layout,
            fixed_hot_fraction: spec.hot_fraction,
            utilization: spec.utilization,
            requests: self.completed_requests,
            measured_ns: spec.measure_ns,
            page_reads: counts.physical_reads - reads_before,
            page_writes: counts.physical_writes - writes_before,
            disk_requests: self.disk_requests,
            disk_busy_share: self.disk_busy_ns as f64 / (spec.measure_ns as f64 * f64::from(spec.disk_count)),
            cleaning: write_cost_between(&engine_before, self.volume.stats(), spec.segment_blocks()),
            hot_fraction: self.volume.hot_fraction(),
            warmup_page_writes,
        })
    }

    /// Runs the users in turn, untimed, until the pool has written back
    /// `page_writes` pages.
    fn warm_up(&mut self, page_writes: u64, progress: &mut dyn Progress) -> Result<(), LabError> {
        let users = self.users.len();
        let mut reported = 0;
        for step in 0.. {
            let written = self.workload.counts().physical_writes;
            if written >= page_writes {
                break;
            }
            self.apply_next_step(step % users)?;
            self.recorder.take_rounds();
            if written / PROGRESS_WRITES > reported {
                progress.advance(written / PROGRESS_WRITES - reported);
                reported = written / PROGRESS_WRITES;
            }
        }
        progress.advance(page_writes.div_ceil(PROGRESS_WRITES).saturating_sub(reported));
        Ok(())
    }

    /// Takes `user`'s next logical request from the workload and runs its
    /// page I/O through the engine, which records it.
    fn apply_next_step(&mut self, user: usize) -> Result<(), LabError> {
        let step = self.workload.next_step(u32::try_from(user).expect("users fit u32"));
        for io in &step.ios {
            database::apply(&mut self.volume, self.extent_id, io)?;
        }
        Ok(())
    }

    /// Issues `user`'s next requests at the current time until one needs
    /// the drives (buffer hits complete at once).
    fn issue_next(&mut self, user: usize) -> Result<(), LabError> {
        loop {
            self.recorder.set_now_ns(self.simulation.now_ns());
            self.apply_next_step(user)?;
            self.users[user].rounds = self.recorder.take_rounds().into();
            if self.next_round(user) {
                return Ok(());
            }
            self.request_done();
        }
    }

    /// Submits `user`'s next round that has requests; false when none is left.
    fn next_round(&mut self, user: usize) -> bool {
        while let Some(round) = self.users[user].rounds.pop_front() {
            for io in &round {
                let id = self.next_request_id;
                self.next_request_id += 1;
                let op = if io.op == IoOp::Read { DiskOp::Read } else { DiskOp::Write };
                let request = DiskRequest {
                    id,
                    op,
                    lbn: io.block * SECTORS_PER_BLOCK,
                    sector_count: io.block_count * SECTORS_PER_BLOCK as u32,
                };
                self.simulation.submit(self.devices[io.device], request);
                self.owners.insert(id, user);
            }
            if !round.is_empty() {
                self.users[user].outstanding = round.len();
                return true;
            }
        }
        false
    }

    fn request_done(&mut self) {
        if self.measuring {
            self.completed_requests += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(requests: u64, seconds: u64, busy: f64, cleaned: (u64, u64, u64, u64), hot: Option<f64>) -> ArrayRun {
        let (user, read, written, segments) = cleaned;
        ArrayRun {
            disk: "atlas10k".into(),
            level: ArrayLevel::Raid0,
            disk_count: 4,
            users: 20,
            layout: ThroughputLayout::Hylog,
            fixed_hot_fraction: None,
            utilization: 0.9,
            requests,
            measured_ns: seconds * 1_000_000_000,
            page_reads: requests / 2,
            page_writes: requests / 4,
            disk_requests: requests,
            disk_busy_share: busy,
            cleaning: WriteCostMeasurement::pooled(
                &[WriteCostMeasurement {
                    user_blocks: user,
                    cleaning_blocks_read: read,
                    cleaning_blocks_written: written,
                    segments_cleaned: segments,
                    write_cost: 0.0,
                    cleaning_utilization: 0.0,
                }],
                100,
            ),
            hot_fraction: hot,
            warmup_page_writes: 1000,
        }
    }

    #[test]
    fn pooled_runs_are_one_run_over_their_summed_time() {
        let runs = [run(1000, 1, 0.5, (100, 50, 40, 1), Some(0.2)), run(3000, 1, 0.9, (300, 0, 0, 0), None)];
        let pooled = ArrayRun::pooled(&runs, 100);
        assert_eq!(pooled.requests_per_second(), 2000.0, "all requests over all the time");
        assert!((pooled.disk_busy_share - 0.7).abs() < 1e-12);
        assert_eq!(pooled.hot_fraction, Some(0.2), "the mean of the runs that chose");
        assert_eq!((pooled.page_reads, pooled.warmup_page_writes), (2000, 2000));
        // (400 user + 50 read + 40 written) / 400 user blocks; 40 of 100 live.
        assert!((pooled.cleaning.write_cost - 490.0 / 400.0).abs() < 1e-12);
        assert!((pooled.cleaning.cleaning_utilization - 0.4).abs() < 1e-12);
        assert_eq!(ArrayRun::pooled(&runs[..1], 100), runs[0], "one run pools to itself");
    }
}
