//! TPC-B on an engine volume over one simulated drive, in virtual time: the
//! measurement behind `reproduce hylog-table3` (the HyLog paper's Table 3).
//!
//! **Rig.** The data device is the whole `--model` drive (no array, no
//! window), counted by a [`StatsDevice`]; a simulated flash device holds the
//! volume's metadata and, for the log-structured layouts, the NV segment
//! buffer of one segment (the paper's in-memory segment buffer). One extent
//! holds the database, `utilization` × the drive's blocks, written serially
//! once, so it starts packed at the front of the disk as the paper's data
//! does (001:L442–L450).
//!
//! **Workload.** One closed-loop user runs [`TpcbWorkload`]: each transaction
//! reads a uniformly random page and modifies it, through a write-back LRU
//! buffer pool; the pool's I/Os go through the engine one at a time, so a
//! transaction takes the virtual time of its page write-back, its page read
//! (and of any destage or cleaning pass they start), plus `cpu_ns` of host
//! time.
//!
//! **Phases.** The log-structured run with cleaning first applies `rewrites`
//! × the database's pages of single-page updates (writes only: reads do not
//! move data), so that the log has wrapped and the cleaner runs at its steady
//! state. Every run then fills the buffer pool with `pool_frames`
//! transactions, then measures `transactions` more.
//!
//! Deterministic: the same settings give the same figures.

use std::sync::Arc;

use proxima_device::{SimulatedDevice, SimulatedOptions, SimulationHandle, StatsDevice};
use proxima_disk::{DiskModel, FlashDevice, HardDisk, Simulation};
use proxima_engine::{CleaningSettings, EngineStats, Layout, Volume, VolumeOptions};
use proxima_workload::synthetic::seeded_stream;
use proxima_workload::tpcb::{TpcbSpec, TpcbWorkload};
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::progress::Progress;
use crate::rig::lab_volume::flash_block_count;
use crate::rig::testbed::{staging_flash_params, FlashDisk, BLOCK_SIZE_BYTES};
use crate::seed001_hylog::database;
use crate::seed001_hylog::engine_write_cost::{write_cost_between, WriteCostMeasurement};
use crate::LabError;

/// Transactions between progress reports.
const PROGRESS_STEP: u64 = 1024;

/// Requests the drive holds in its queue.
const DRIVE_QUEUE_DEPTH: usize = 8;

/// The seed's stream the warm-up's pages come from ([`TpcbWorkload`] draws
/// the transactions' from stream 0).
const WARMUP_STREAM: u64 = 1;

/// How the database is laid out on the drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TpcbLayout {
    /// Update in place, no write cache (the paper's Overwrite, FFS).
    Overwrite,
    /// Log-structured, the cleaner off: measured while clean segments last.
    LfsWithoutCleaning,
    /// Log-structured, cleaning at its steady state.
    LfsWithCleaning,
}

impl TpcbLayout {
    /// Every run, in the order of the paper's rows.
    pub const ALL: [TpcbLayout; 3] =
        [TpcbLayout::Overwrite, TpcbLayout::LfsWithoutCleaning, TpcbLayout::LfsWithCleaning];

    /// The row's name.
    pub fn name(self) -> &'static str {
        match self {
            TpcbLayout::Overwrite => "overwrite",
            TpcbLayout::LfsWithoutCleaning => "lfs-no-cleaning",
            TpcbLayout::LfsWithCleaning => "lfs-cleaning",
        }
    }

    fn engine_layout(self) -> Layout {
        match self {
            TpcbLayout::Overwrite => Layout::InPlace,
            TpcbLayout::LfsWithoutCleaning | TpcbLayout::LfsWithCleaning => Layout::Lfs,
        }
    }
}

/// One run's settings.
#[derive(Debug, Clone)]
pub struct TpcbRunSpec {
    /// The drive.
    pub model: Arc<DiskModel>,
    /// The layout.
    pub layout: TpcbLayout,
    /// The database's share of the drive's blocks, in (0, 1).
    pub utilization: f64,
    /// Blocks per segment of the log-structured layouts.
    pub segment_blocks: u64,
    /// Frames (pages) of the buffer pool.
    pub pool_frames: u32,
    /// Transactions measured.
    pub transactions: u64,
    /// Updates before measuring the run with cleaning, in database sizes.
    pub rewrites: u32,
    /// Host time per transaction, nanoseconds.
    pub cpu_ns: u64,
    /// Seed of the drive and of the workload.
    pub seed: u64,
}

impl TpcbRunSpec {
    /// Blocks of the drive.
    pub fn drive_blocks(&self) -> u64 {
        self.model.sector_count() / (BLOCK_SIZE_BYTES / 512)
    }

    /// Pages (blocks) of the database.
    pub fn database_pages(&self) -> u64 {
        (self.drive_blocks() as f64 * self.utilization) as u64
    }

    /// Single-page updates of the warm-up (none but for the run with cleaning).
    pub fn warmup_updates(&self) -> u64 {
        match self.layout {
            TpcbLayout::LfsWithCleaning => self.database_pages() * u64::from(self.rewrites),
            _ => 0,
        }
    }

    /// Transactions run: the pool's fill and the measured ones.
    pub fn transactions_run(&self) -> u64 {
        u64::from(self.pool_frames) + self.transactions
    }

    /// Checks that the run can be made: a database, room for the log's
    /// reserve, and for the run without cleaning, room for every page it
    /// writes in the clean segments beyond the database.
    pub fn check(&self) -> Result<(), LabError> {
        let invalid = |parameter: &'static str, message: String| Err(LabError::InvalidParameter { parameter, message });
        if !(self.utilization > 0.0 && self.utilization < 1.0) {
            return invalid("utilization", format!("--utilization {} is not in (0, 1)", self.utilization));
        }
        if self.database_pages() <= u64::from(self.pool_frames) {
            let message = format!(
                "a database of {} pages is no larger than the {}-page pool of --buffer-pool-mib",
                self.database_pages(),
                self.pool_frames
            );
            return invalid("buffer-pool-mib", message);
        }
        let free_segments = (self.drive_blocks() - self.database_pages()) / self.segment_blocks;
        let reserve = CleaningSettings::default().start_below_clean_segments + 2;
        if free_segments < reserve {
            let message = format!(
                "--utilization {} leaves {free_segments} free segments of {} blocks; the cleaner needs {reserve}",
                self.utilization, self.segment_blocks
            );
            return invalid("utilization", message);
        }
        if self.layout == TpcbLayout::LfsWithoutCleaning {
            // Every transaction writes at most one page to the log.
            let room = (free_segments - reserve) * self.segment_blocks;
            if self.transactions_run() > room {
                let message = format!(
                    "--transactions {} (and {} to fill the pool) write more pages than the {room} blocks of \
                     clean segments beyond the database at utilisation {}: LFS would have to clean",
                    self.transactions, self.pool_frames, self.utilization
                );
                return invalid("transactions", message);
            }
        }
        Ok(())
    }
}

/// What one run measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TpcbRun {
    /// The layout.
    pub layout: TpcbLayout,
    /// Transactions measured.
    pub transactions: u64,
    /// Virtual time they took, nanoseconds.
    pub elapsed_ns: u64,
    /// Page reads the pool issued over them.
    pub page_reads: u64,
    /// Page write-backs.
    pub page_writes: u64,
    /// Read requests the drive served.
    pub disk_reads: u64,
    /// Write requests the drive served.
    pub disk_writes: u64,
    /// Blocks the drive wrote.
    pub disk_blocks_written: u64,
    /// Time the drive was busy, nanoseconds.
    pub disk_busy_ns: u64,
    /// The log's cleaning over the measured transactions (zero counts in place).
    pub cleaning: WriteCostMeasurement,
    /// Single-page updates applied before measuring.
    pub warmup_updates: u64,
}

impl TpcbRun {
    /// Transactions per second of virtual time.
    pub fn tps(&self) -> f64 {
        self.transactions as f64 / (self.elapsed_ns.max(1) as f64 / 1e9)
    }

    /// Mean virtual time per transaction, milliseconds.
    pub fn transaction_ms(&self) -> f64 {
        self.elapsed_ns as f64 / self.transactions.max(1) as f64 / 1e6
    }

    /// Blocks per write request of the drive.
    pub fn blocks_per_disk_write(&self) -> f64 {
        self.disk_blocks_written as f64 / self.disk_writes.max(1) as f64
    }
}

type TpcbVolume = Volume<StatsDevice<SimulatedDevice>, FlashDisk>;

/// Builds the drive, the flash device and the volume, and loads the database.
fn build(spec: &TpcbRunSpec) -> Result<(TpcbVolume, SimulationHandle, u64), LabError> {
    let handle = SimulationHandle::new(Simulation::new(spec.seed));
    let device_seed = handle.with_simulation(|simulation| simulation.device_seed(0));
    let disk = HardDisk::new(Arc::clone(&spec.model), device_seed).with_queue_depth(DRIVE_QUEUE_DEPTH);
    let data = SimulatedDevice::hard_disk(&handle, disk, SimulatedOptions::named("disk0").metadata_only())?;
    let logs = spec.layout != TpcbLayout::Overwrite;
    let staging_blocks = if logs { spec.segment_blocks } else { 0 };
    let flash_blocks = flash_block_count(staging_blocks, 1, spec.drive_blocks(), 0);
    let flash = FlashDevice::new(staging_flash_params(flash_blocks));
    let flash = SimulatedDevice::flash(&handle, flash, SimulatedOptions::named("flash").metadata_only())?;
    let options = VolumeOptions {
        layout: spec.layout.engine_layout(),
        // In place: every write goes to the drive, as Overwrite's do.
        staging_threshold_bytes: if logs { VolumeOptions::default().staging_threshold_bytes } else { 0 },
        staging_capacity_blocks: staging_blocks.max(1),
        destage_step_blocks: spec.segment_blocks,
        segment_blocks: spec.segment_blocks,
        cleaning: CleaningSettings {
            automatic: spec.layout == TpcbLayout::LfsWithCleaning,
            ..CleaningSettings::default()
        },
        payload: false,
        data_checksums: false,
        write_intents: false,
        ..VolumeOptions::default()
    };
    let mut volume = Volume::format(StatsDevice::new(data), FlashDisk::new(flash), 1, options)?;
    let pages = spec.database_pages();
    let id = volume.create_extent("database", pages * BLOCK_SIZE_BYTES)?;
    database::load(&mut volume, id, pages)?;
    Ok((volume, handle, id))
}

/// Runs one layout (see the module documentation), reporting transactions
/// (and warm-up updates) to `progress`.
pub fn run_tpcb(spec: &TpcbRunSpec, progress: &mut dyn Progress) -> Result<TpcbRun, LabError> {
    spec.check()?;
    let (mut volume, handle, id) = build(spec)?;
    let pages = spec.database_pages();
    let warmup = spec.warmup_updates();
    progress.start_phase(
        &format!("{} at u = {} on {}", spec.layout.name(), spec.utilization, spec.model.name()),
        warmup + spec.transactions_run(),
    );
    let mut workload =
        TpcbWorkload::new(TpcbSpec { page_count: pages, pool_frames: spec.pool_frames, seed: spec.seed });
    // Warm-up pages from a stream of their own: drawn from the transactions'
    // stream, the pages the first transactions read would be those the
    // warm-up wrote first, side by side in the log.
    let mut updates = seeded_stream(spec.seed, WARMUP_STREAM);
    for done in 1..=warmup {
        let page = updates.gen_range(0..pages);
        volume.write_blocks_synthetic(id, page, 1, false)?;
        if done % PROGRESS_STEP == 0 {
            progress.advance(PROGRESS_STEP);
        }
    }
    progress.advance(warmup % PROGRESS_STEP);
    let mut transact = |volume: &mut TpcbVolume, workload: &mut TpcbWorkload, count: u64| -> Result<(), LabError> {
        for done in 1..=count {
            for io in workload.next_transaction() {
                database::apply(volume, id, &io)?;
            }
            if spec.cpu_ns > 0 {
                let until = handle.now_ns() + spec.cpu_ns;
                handle.with_simulation(|simulation| simulation.advance_to(until));
            }
            if done % PROGRESS_STEP == 0 {
                progress.advance(PROGRESS_STEP);
            }
        }
        progress.advance(count % PROGRESS_STEP);
        Ok(())
    };
    transact(&mut volume, &mut workload, u64::from(spec.pool_frames))?;
    let engine_before: EngineStats = volume.stats().clone();
    let pool_before = workload.counts();
    volume.data_device_mut().take_stats();
    let started_ns = handle.now_ns();
    transact(&mut volume, &mut workload, spec.transactions)?;
    let elapsed_ns = handle.now_ns() - started_ns;
    let disk = volume.data_device_mut().take_stats();
    let pool = workload.counts();
    Ok(TpcbRun {
        layout: spec.layout,
        transactions: spec.transactions,
        elapsed_ns,
        page_reads: pool.reads - pool_before.reads,
        page_writes: pool.writes - pool_before.writes,
        disk_reads: disk.reads.request_count,
        disk_writes: disk.writes.request_count,
        disk_blocks_written: disk.writes.block_count,
        disk_busy_ns: disk.busy_ns,
        cleaning: write_cost_between(&engine_before, volume.stats(), spec.segment_blocks),
        warmup_updates: warmup,
    })
}
