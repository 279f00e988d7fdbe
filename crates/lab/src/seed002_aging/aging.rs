//! `reproduce aging`: block-level aging under each layout, the layout scores
//! and the serial-read cost they predict, and the drive's natural transfer
//! size.
//!
//! The testbed is a 4+1 RAID-4 of simulated drives (no zone checksums, so a
//! sequential extent is one contiguous stream on each member) holding
//! `--extents` extents of `--extent-mib` MiB, half the array's capacity.
//! Two workloads age them, in rounds:
//!
//! - **Interleaved appenders** (the paper's *intrafile* benchmark): in round
//!   `r` of `R`, each extent is created and its first `(1 − r/R)` written in
//!   one write, extent after extent; the rest is appended in
//!   `--chunk-kib` chunks, one per extent in turn. Round 0 is a sequential
//!   fill; round `R` is all appends. Each round runs on a fresh volume, as
//!   the paper recreates its files each round.
//! - **Random overwrites**: the extents are filled sequentially (round 0),
//!   then each round overwrites `--overwrite-fraction` of the data in chunks
//!   at uniformly random chunk-aligned places, on the same volume, so the
//!   aging accumulates.
//!
//! After each round, staged blocks are destaged and the volume flushed; the
//! drives' caches are emptied and their heads moved to random places; then every extent is read serially, in
//! extent order, in `--read-kib` requests (128 KiB: Linux's default
//! read-ahead window, through which the paper's grep reads), one at a time. A round's
//! row has the read's seconds per GiB (virtual time), the dynamic layout
//! score of the members' request stream during the read
//! ([`DynamicLayoutScore`]) and the static layout score of the extents' maps
//! (`proxima_engine::map::layout_score`).
//!
//! Layouts: in-place without a cache (each write goes to its place at once),
//! write-anywhere, and proximal with a `--staging` % staging area. The
//! headline correlation is Pearson's r between the dynamic layout score and
//! the seconds per GiB over every row (both workloads, every layout and
//! round); per-workload and static-score correlations are reported beside it.
//!
//! Writes `aging.csv`, `aging_score_vs_read.svg`, `aging_read_by_round.svg`,
//! `natural_transfer_size.csv`, `natural_transfer_size.svg` and `report.md`.
//! The JSON headline is `{"correlation", "rows": [{"workload", "layout",
//! "round", "layout_score", "static_layout_score", "serial_read_s_per_gib",
//! ...}], ...}`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use proxima_device::BlockDevice;
use proxima_engine::{Layout, LayoutScore, ReadRealloc, Volume, VolumeOptions};
use proxima_workload::synthetic::{seeded_stream, Pattern, SyntheticSpec, SyntheticWorkload};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::experiment::{Experiment, RunSettings};
use crate::progress::Progress;
use crate::report::cost::{SimulatedWork, WallCost};
use crate::report::markdown::{verdict, Artifact, Rendered};
use crate::report::plot::{LineChart, Series};
use crate::report::table::Table;
use crate::rig::lab_volume::{
    flash_block_count, ArrayShape, DATA_DISK_COUNT, DRIVE_QUEUE_DEPTH, PROXIMAL_SPAN_RANGES, STAGING_THRESHOLD_BYTES,
};
use crate::rig::parallel::{run_all, Task};
use crate::rig::testbed::{
    empty_caches, randomise_arms, take_member_logs, Array, FlashDisk, TestbedConfig, BLOCK_SIZE_BYTES,
};
use crate::seed002_aging::layout_score::{pearson, DynamicLayoutScore};
use crate::seed002_aging::natural_transfer::{natural_transfer_size_kib, peak_mb_s, transfer_curve, TransferPoint};
use crate::LabError;

/// The experiment's name on the command line.
pub const NAME: &str = "aging";

/// The `aging` experiment.
#[derive(Debug, Clone, Copy)]
pub struct Aging;

/// Share of the array's capacity the extents fill.
const FILL_FRACTION: f64 = 0.5;
/// The layouts compared, in report order.
const LAYOUTS: [Layout; 3] = [Layout::InPlace, Layout::WriteAnywhere, Layout::Proximal];
/// The paper's correlation on its clearest HDD case (intrafile, seed 002 L1039).
const PAPER_CORRELATION: f64 = -0.93;
/// The target: r at most this.
const TARGET_CORRELATION: f64 = -0.8;
/// The paper's natural transfer size for its HDD and SSD (L982–L984), KiB.
const PAPER_NATURAL_TRANSFER_KIB: f64 = 4096.0;
/// Writes per progress report.
const WRITES_PER_PROGRESS: u64 = 1024;

/// The two aging workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Extents grown in chunks round-robin.
    InterleavedAppenders,
    /// Chunks overwritten at random places.
    RandomOverwrites,
}

impl Workload {
    /// Both, in report order.
    pub const ALL: [Workload; 2] = [Workload::InterleavedAppenders, Workload::RandomOverwrites];

    /// Its name in rows and reports.
    pub fn name(self) -> &'static str {
        match self {
            Workload::InterleavedAppenders => "interleaved-appenders",
            Workload::RandomOverwrites => "random-overwrites",
        }
    }
}

/// The experiment's flags.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct AgingParams {
    /// Extents aged together (the paper's 10 files).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..=1024))]
    pub extents: u32,
    /// Size of each extent, MiB.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub extent_mib: u32,
    /// Size of each append and overwrite, KiB: a multiple of 4 that divides
    /// the extent (the paper's 4 KiB).
    #[arg(long, default_value_t = 4)]
    pub chunk_kib: u32,
    /// Aging rounds after the fresh round 0.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Share of the data each random-overwrite round overwrites.
    #[arg(long, default_value_t = 0.1)]
    pub overwrite_fraction: f64,
    /// The proximal layout's staging area, percent of the array's capacity.
    #[arg(long, default_value_t = 1.0)]
    pub staging: f64,
    /// Size of the serial read's requests, KiB: a multiple of 4 (Linux's
    /// default read-ahead window, through which the paper's grep reads).
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(4..=65536))]
    pub read_kib: u32,
    /// Independent simulations run at once, one per thread.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
}

/// The resolved settings.
#[derive(Debug, Clone)]
pub struct AgingSettings {
    shape: ArrayShape,
    model_name: String,
    params: AgingParams,
    seed: u64,
    out_dir: PathBuf,
    extent_blocks: u64,
    chunk_blocks: u64,
    window_blocks_per_disk: u64,
    capacity_blocks: u64,
    /// The proximal layout's staging area, blocks.
    staging_blocks: u64,
}

impl AgingSettings {
    fn command_line(&self) -> String {
        let params = &self.params;
        format!(
            "proxima reproduce {NAME} --extents {} --extent-mib {} --chunk-kib {} --rounds {} --overwrite-fraction {} \
             --staging {} --read-kib {} --model {} --seed {} --out {}",
            params.extents,
            params.extent_mib,
            params.chunk_kib,
            params.rounds,
            params.overwrite_fraction,
            params.staging,
            params.read_kib,
            self.model_name,
            self.seed,
            self.out_dir.display()
        )
    }

    fn data_blocks(&self) -> u64 {
        u64::from(self.params.extents) * self.extent_blocks
    }

    /// The serial read's requests of one extent, `(first block, block count)`.
    fn read_requests(&self) -> impl Iterator<Item = (u64, u64)> {
        let (extent_blocks, request_blocks) =
            (self.extent_blocks, u64::from(self.params.read_kib) * 1024 / BLOCK_SIZE_BYTES);
        (0..extent_blocks)
            .step_by(request_blocks as usize)
            .map(move |first_block| (first_block, request_blocks.min(extent_blocks - first_block)))
    }
}

/// One round of one workload under one layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgingRow {
    /// `interleaved-appenders` or `random-overwrites`.
    pub workload: String,
    /// The layout's name.
    pub layout: String,
    /// 0 (fresh) to `--rounds`.
    pub round: u32,
    /// The dynamic layout score of the serial read's member requests.
    pub layout_score: f64,
    /// The static (Smith–Seltzer) layout score of the extents' maps.
    pub static_layout_score: f64,
    /// Seconds of the serial read per GiB read (virtual time).
    pub serial_read_s_per_gib: f64,
    /// Requests the data drives served for the read.
    pub member_reads: u64,
    /// Their mean size, KiB.
    pub mean_member_read_kib: f64,
}

/// The measured rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rows {
    /// Every round of every workload and layout.
    pub aging: Vec<AgingRow>,
    /// The drive's effective bandwidth against read size.
    pub transfer: Vec<TransferPoint>,
    /// Simulated work, for the cost line.
    pub simulated: SimulatedWork,
}

/// The JSON headline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// Pearson's r between the dynamic layout score and the serial-read
    /// seconds per GiB over every row (`null` if either does not vary).
    pub correlation: Option<f64>,
    /// The same, per workload.
    pub correlation_by_workload: BTreeMap<String, Option<f64>>,
    /// Pearson's r between the static layout score and the seconds per GiB.
    pub static_correlation: Option<f64>,
    /// Read size reaching 50 % of the drive's peak bandwidth, KiB.
    pub natural_transfer_size_50_kib: Option<f64>,
    /// Read size reaching 90 % of the drive's peak bandwidth, KiB.
    pub natural_transfer_size_90_kib: Option<f64>,
    /// The drive's peak effective bandwidth, MB/s.
    pub peak_mb_s: f64,
    /// Every round of every workload and layout.
    pub rows: Vec<AgingRow>,
}

impl Experiment for Aging {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str =
        "aging: interleaved appends and random overwrites under each layout; layout score against serial-read cost";
    const DEFAULT_MODEL: &'static str = "nearline7200";
    type Params = AgingParams;
    type Settings = AgingSettings;
    type Rows = Rows;
    type Headline = Headline;

    fn settings(run: &RunSettings, params: &AgingParams) -> Result<AgingSettings, LabError> {
        let shape = ArrayShape::for_model(&run.model)?;
        let block_kib = BLOCK_SIZE_BYTES / 1024;
        let extent_blocks = u64::from(params.extent_mib) * 1024 / block_kib;
        let chunk_kib = u64::from(params.chunk_kib);
        if chunk_kib == 0
            || !chunk_kib.is_multiple_of(block_kib)
            || !extent_blocks.is_multiple_of(chunk_kib / block_kib)
        {
            let message =
                format!("{chunk_kib} KiB is not a multiple of 4 KiB dividing the {} MiB extent", params.extent_mib);
            return Err(LabError::InvalidParameter { parameter: "chunk-kib", message });
        }
        if !(params.overwrite_fraction > 0.0 && params.overwrite_fraction <= 10.0) {
            let message = format!("{} is not in (0, 10]", params.overwrite_fraction);
            return Err(LabError::InvalidParameter { parameter: "overwrite-fraction", message });
        }
        if !u64::from(params.read_kib).is_multiple_of(block_kib) {
            let message = format!("{} KiB is not a multiple of 4 KiB", params.read_kib);
            return Err(LabError::InvalidParameter { parameter: "read-kib", message });
        }
        if !(0.0..=50.0).contains(&params.staging) {
            let message = format!("{} % is not in [0, 50]", params.staging);
            return Err(LabError::InvalidParameter { parameter: "staging", message });
        }
        let chunk_blocks = chunk_kib / block_kib;
        let unit_blocks = shape.stripe_unit_bytes / BLOCK_SIZE_BYTES;
        let data_blocks = u64::from(params.extents) * extent_blocks;
        let capacity_wanted = (data_blocks as f64 / FILL_FRACTION).ceil() as u64;
        let window_blocks_per_disk =
            capacity_wanted.div_ceil(DATA_DISK_COUNT as u64).div_ceil(unit_blocks) * unit_blocks;
        let drive_blocks = shape.model.sector_count() / (BLOCK_SIZE_BYTES / 512);
        if window_blocks_per_disk > drive_blocks {
            let message = format!(
                "{} extents of {} MiB need {} MiB of each drive, which holds {} MiB",
                params.extents,
                params.extent_mib,
                window_blocks_per_disk * block_kib / 1024,
                drive_blocks * block_kib / 1024
            );
            return Err(LabError::InvalidParameter { parameter: "extents", message });
        }
        let capacity_blocks = window_blocks_per_disk * DATA_DISK_COUNT as u64;
        let staging_blocks = (capacity_blocks as f64 * params.staging / 100.0) as u64;
        if params.staging > 0.0 && staging_blocks < chunk_blocks {
            let message = format!("{} % of the array is {staging_blocks} blocks, less than one chunk", params.staging);
            return Err(LabError::InvalidParameter { parameter: "staging", message });
        }
        Ok(AgingSettings {
            shape,
            model_name: run.model.clone(),
            params: params.clone(),
            seed: run.seed,
            out_dir: run.out_dir.clone(),
            extent_blocks,
            chunk_blocks,
            window_blocks_per_disk,
            capacity_blocks,
            staging_blocks,
        })
    }

    fn measure(settings: &AgingSettings, progress: &mut dyn Progress) -> Result<Rows, LabError> {
        let mut tasks: Vec<Task<'_, TaskOutcome>> = Vec::new();
        tasks.push(Box::new(move |progress: &mut dyn Progress| {
            progress.start_phase("natural transfer size", 1);
            let curve = transfer_curve(&settings.shape.model, settings.seed);
            progress.advance(1);
            Ok(TaskOutcome::Transfer(curve))
        }));
        for layout in LAYOUTS {
            for round in 0..=settings.params.rounds {
                tasks.push(Box::new(move |progress: &mut dyn Progress| {
                    appenders_round(settings, layout, round, progress).map(TaskOutcome::Aging)
                }));
            }
            tasks.push(Box::new(move |progress: &mut dyn Progress| {
                overwrite_rounds(settings, layout, progress).map(TaskOutcome::Aging)
            }));
        }
        let mut rows = Rows { aging: Vec::new(), transfer: Vec::new(), simulated: SimulatedWork::default() };
        for outcome in run_all(usize::from(settings.params.jobs), tasks, progress)? {
            match outcome {
                TaskOutcome::Transfer(curve) => rows.transfer = curve,
                TaskOutcome::Aging(run) => {
                    rows.aging.extend(run.rows);
                    rows.simulated.updates += run.writes;
                    rows.simulated.disk_ios += run.disk_ios;
                }
            }
        }
        let order = |row: &AgingRow| {
            let workload = Workload::ALL.iter().position(|workload| workload.name() == row.workload);
            let layout = LAYOUTS.iter().position(|layout| layout.name() == row.layout);
            (workload, layout, row.round)
        };
        rows.aging.sort_by_key(order);
        Ok(rows)
    }

    fn render(settings: &AgingSettings, rows: &Rows, cost: &WallCost) -> Rendered<Headline> {
        let headline = headline(rows);
        let files = vec![
            ("aging.csv", Artifact::Csv(aging_table(&rows.aging))),
            ("aging_score_vs_read.svg", Artifact::LineChart(score_chart(&rows.aging, settings))),
            ("aging_read_by_round.svg", Artifact::LineChart(round_chart(&rows.aging, settings))),
            ("natural_transfer_size.csv", Artifact::Csv(transfer_table(&rows.transfer))),
            ("natural_transfer_size.svg", Artifact::LineChart(transfer_chart(&rows.transfer, settings))),
        ];
        let summary = summary(&headline, &cost.render(&rows.simulated));
        let report = report(settings, rows, &headline, &summary);
        Rendered { files, report, summary, headline }
    }

    fn describe(params: &AgingParams) -> String {
        format!(", {} simulation(s) at once", params.jobs)
    }
}

/// What one task measured.
enum TaskOutcome {
    Transfer(Vec<TransferPoint>),
    Aging(RunOutcome),
}

/// The rows of one volume's rounds and what simulating them took.
struct RunOutcome {
    rows: Vec<AgingRow>,
    writes: u64,
    disk_ios: u64,
}

/// A formatted volume on a fresh testbed, and the places of its read passes'
/// heads.
struct AgedVolume {
    volume: Volume<Array, FlashDisk>,
    extent_ids: Vec<u64>,
    arms: ChaCha8Rng,
    disk_ios: u64,
}

impl AgedVolume {
    fn new(settings: &AgingSettings, layout: Layout) -> Result<AgedVolume, LabError> {
        let staging_blocks = if layout == Layout::Proximal { settings.staging_blocks } else { 0 };
        let extent_count = u64::from(settings.params.extents);
        let map_equivalents = settings.data_blocks().div_ceil(proxima_workload::srarw::EXTENT_BLOCKS);
        let config = TestbedConfig {
            model: Arc::clone(&settings.shape.model),
            data_disk_count: DATA_DISK_COUNT,
            stripe_unit_bytes: settings.shape.stripe_unit_bytes,
            window_blocks_per_disk: settings.window_blocks_per_disk,
            zone_data_blocks: None,
            drive_queue_depth: DRIVE_QUEUE_DEPTH,
            flash_block_count: flash_block_count(
                staging_blocks,
                extent_count.max(map_equivalents),
                settings.capacity_blocks,
                0,
            ),
            flash_keeps_metadata: false,
            seed: settings.seed,
        };
        let testbed = config.build()?;
        let options = VolumeOptions {
            layout,
            // In place without a cache; proximal stages as the paper does.
            staging_threshold_bytes: if staging_blocks > 0 { STAGING_THRESHOLD_BYTES } else { 0 },
            staging_capacity_blocks: staging_blocks.max(1),
            allocation_range_blocks: settings.shape.allocation_range_blocks,
            proximal_span_ranges: PROXIMAL_SPAN_RANGES,
            payload: false,
            write_intents: false,
            read_realloc: ReadRealloc::OFF,
            ..VolumeOptions::default()
        };
        let volume = Volume::format(testbed.array, testbed.flash, 1, options)?;
        Ok(AgedVolume { volume, extent_ids: Vec::new(), arms: seeded_stream(settings.seed, 2), disk_ios: 0 })
    }

    fn create_extents(&mut self, settings: &AgingSettings) -> Result<(), LabError> {
        for index in 0..settings.params.extents {
            let id = self.volume.create_extent(&format!("extent{index}"), settings.extent_blocks * BLOCK_SIZE_BYTES)?;
            self.extent_ids.push(id);
        }
        Ok(())
    }

    fn write(&mut self, extent_index: usize, first_block: u64, block_count: u64) -> Result<(), LabError> {
        self.volume.write_blocks_synthetic(self.extent_ids[extent_index], first_block, block_count, false)?;
        self.drain_logs();
        Ok(())
    }

    fn drain_logs(&mut self) {
        let logs = take_member_logs(self.volume.data_device_mut());
        self.disk_ios += logs.iter().map(|log| log.len() as u64).sum::<u64>();
    }

    /// Destages, flushes and reads every extent serially; the round's row.
    fn measure_round(
        &mut self,
        settings: &AgingSettings,
        workload: Workload,
        layout: Layout,
        round: u32,
    ) -> Result<AgingRow, LabError> {
        self.volume.destage()?;
        self.volume.flush()?;
        self.drain_logs();
        // Cold, as after a remount: nothing the writes left in the drives'
        // caches serves the read, and the heads start anywhere.
        empty_caches(self.volume.data_device_mut(), &settings.shape.model)?;
        randomise_arms(self.volume.data_device_mut(), &mut self.arms);
        let started_ns = self.volume.data_device().now_ns();
        let mut streams = vec![Vec::new(); DATA_DISK_COUNT + 1];
        for &id in &self.extent_ids {
            for (first_block, block_count) in settings.read_requests() {
                self.volume.read_blocks_synthetic(id, first_block, block_count)?;
                for (stream, log) in streams.iter_mut().zip(take_member_logs(self.volume.data_device_mut())) {
                    stream.extend(log);
                }
            }
        }
        let elapsed_ns = self.volume.data_device().now_ns() - started_ns;
        let member_reads: u64 = streams.iter().map(|stream| stream.len() as u64).sum();
        let member_read_blocks: u64 = streams.iter().flatten().map(|io| u64::from(io.block_count)).sum();
        self.disk_ios += member_reads;
        let gib_read = (settings.data_blocks() * BLOCK_SIZE_BYTES) as f64 / (1u64 << 30) as f64;
        let static_score: LayoutScore = self.volume.extents().iter().map(|extent| extent.layout_score).sum();
        Ok(AgingRow {
            workload: workload.name().to_owned(),
            layout: layout.name().to_owned(),
            round,
            layout_score: DynamicLayoutScore::of_member_logs(&streams).fraction().unwrap_or(1.0),
            static_layout_score: static_score.fraction().unwrap_or(1.0),
            serial_read_s_per_gib: elapsed_ns as f64 / 1e9 / gib_read,
            member_reads,
            mean_member_read_kib: member_read_blocks as f64 * (BLOCK_SIZE_BYTES / 1024) as f64
                / member_reads.max(1) as f64,
        })
    }
}

/// Round `round` of the interleaved appenders under `layout`, on a fresh volume.
fn appenders_round(
    settings: &AgingSettings,
    layout: Layout,
    round: u32,
    progress: &mut dyn Progress,
) -> Result<RunOutcome, LabError> {
    let mut aged = AgedVolume::new(settings, layout)?;
    aged.create_extents(settings)?;
    let chunk = settings.chunk_blocks;
    let appended_chunks = settings.extent_blocks / chunk * u64::from(round) / u64::from(settings.params.rounds);
    let initial_blocks = settings.extent_blocks - appended_chunks * chunk;
    let extents = aged.extent_ids.len();
    let label = format!("{}, {}, round {round}", Workload::InterleavedAppenders.name(), layout.name());
    progress.start_phase(&format!("writing ({label})"), appended_chunks + 1);
    let mut writes = 0;
    if initial_blocks > 0 {
        for index in 0..extents {
            aged.write(index, 0, initial_blocks)?;
            writes += 1;
        }
    }
    progress.advance(1);
    for offset in (initial_blocks..settings.extent_blocks).step_by(chunk as usize) {
        for index in 0..extents {
            aged.write(index, offset, chunk)?;
            writes += 1;
        }
        progress.advance(1);
    }
    let row = aged.measure_round(settings, Workload::InterleavedAppenders, layout, round)?;
    Ok(RunOutcome { rows: vec![row], writes, disk_ios: aged.disk_ios })
}

/// Every round of the random overwrites under `layout`, on one volume.
fn overwrite_rounds(
    settings: &AgingSettings,
    layout: Layout,
    progress: &mut dyn Progress,
) -> Result<RunOutcome, LabError> {
    let mut aged = AgedVolume::new(settings, layout)?;
    aged.create_extents(settings)?;
    for index in 0..aged.extent_ids.len() {
        aged.write(index, 0, settings.extent_blocks)?;
    }
    let mut writes = aged.extent_ids.len() as u64;
    let mut rows = vec![aged.measure_round(settings, Workload::RandomOverwrites, layout, 0)?];
    let chunk = settings.chunk_blocks;
    let per_round = ((settings.data_blocks() / chunk) as f64 * settings.params.overwrite_fraction).round() as u64;
    let mut places = SyntheticWorkload::new(SyntheticSpec {
        pattern: Pattern::Uniform,
        block_count: settings.data_blocks(),
        request_blocks: chunk,
        read_fraction: 0.0,
        scatter: false,
        seed: settings.seed,
    });
    for round in 1..=settings.params.rounds {
        let label = format!("{}, {}, round {round}", Workload::RandomOverwrites.name(), layout.name());
        progress.start_phase(&format!("writing ({label})"), per_round);
        for written in 0..per_round {
            let place = places.next().expect("the workload is endless");
            let extent_index = (place.block / settings.extent_blocks) as usize;
            aged.write(extent_index, place.block % settings.extent_blocks, place.block_count)?;
            if (written + 1).is_multiple_of(WRITES_PER_PROGRESS) {
                progress.advance(WRITES_PER_PROGRESS);
            }
        }
        progress.advance(per_round % WRITES_PER_PROGRESS);
        writes += per_round;
        rows.push(aged.measure_round(settings, Workload::RandomOverwrites, layout, round)?);
    }
    Ok(RunOutcome { rows, writes, disk_ios: aged.disk_ios })
}

fn correlation_of(rows: &[&AgingRow], score: impl Fn(&AgingRow) -> f64) -> Option<f64> {
    let points: Vec<(f64, f64)> = rows.iter().map(|row| (score(row), row.serial_read_s_per_gib)).collect();
    pearson(&points)
}

fn headline(rows: &Rows) -> Headline {
    let all: Vec<&AgingRow> = rows.aging.iter().collect();
    let correlation_by_workload = Workload::ALL
        .iter()
        .map(|workload| {
            let of_workload: Vec<&AgingRow> =
                all.iter().copied().filter(|row| row.workload == workload.name()).collect();
            (workload.name().to_owned(), correlation_of(&of_workload, |row| row.layout_score))
        })
        .collect();
    Headline {
        correlation: correlation_of(&all, |row| row.layout_score),
        correlation_by_workload,
        static_correlation: correlation_of(&all, |row| row.static_layout_score),
        natural_transfer_size_50_kib: natural_transfer_size_kib(&rows.transfer, 0.5),
        natural_transfer_size_90_kib: natural_transfer_size_kib(&rows.transfer, 0.9),
        peak_mb_s: peak_mb_s(&rows.transfer),
        rows: rows.aging.clone(),
    }
}

fn aging_table(rows: &[AgingRow]) -> Table {
    let mut table = Table::new(&[
        "workload",
        "layout",
        "round",
        "layout_score",
        "static_layout_score",
        "serial_read_s_per_gib",
        "member_reads",
        "mean_member_read_kib",
    ]);
    for row in rows {
        table.push_row(vec![
            row.workload.clone(),
            row.layout.clone(),
            row.round.to_string(),
            format!("{:.4}", row.layout_score),
            format!("{:.4}", row.static_layout_score),
            format!("{:.3}", row.serial_read_s_per_gib),
            row.member_reads.to_string(),
            format!("{:.1}", row.mean_member_read_kib),
        ]);
    }
    table
}

fn transfer_table(curve: &[TransferPoint]) -> Table {
    let peak = peak_mb_s(curve);
    let mut table = Table::new(&["read_kib", "mb_s", "fraction_of_peak", "reads"]);
    for point in curve {
        table.push_row(vec![
            point.read_kib.to_string(),
            format!("{:.2}", point.mb_s),
            format!("{:.3}", point.mb_s / peak),
            point.read_count.to_string(),
        ]);
    }
    table
}

/// One series per workload and layout, its points in round order.
fn series_of(rows: &[AgingRow], point: impl Fn(&AgingRow) -> (f64, f64)) -> Vec<Series> {
    let mut series = Vec::new();
    for workload in Workload::ALL {
        for layout in LAYOUTS {
            let points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|row| row.workload == workload.name() && row.layout == layout.name())
                .map(&point)
                .collect();
            if !points.is_empty() {
                series.push(Series { name: format!("{}, {}", workload.name(), layout.name()), points });
            }
        }
    }
    series
}

fn score_chart(rows: &[AgingRow], settings: &AgingSettings) -> LineChart {
    LineChart {
        title: format!("Serial read against dynamic layout score ({}, 4+1 RAID-4)", settings.shape.model.name()),
        x_label: "dynamic layout score (contiguous member requests / requests)".into(),
        y_label: "serial read, s per GiB".into(),
        series: series_of(rows, |row| (row.layout_score, row.serial_read_s_per_gib)),
    }
}

fn round_chart(rows: &[AgingRow], settings: &AgingSettings) -> LineChart {
    LineChart {
        title: format!("Serial read after each aging round ({}, 4+1 RAID-4)", settings.shape.model.name()),
        x_label: "aging round".into(),
        y_label: "serial read, s per GiB".into(),
        series: series_of(rows, |row| (f64::from(row.round), row.serial_read_s_per_gib)),
    }
}

fn transfer_chart(curve: &[TransferPoint], settings: &AgingSettings) -> LineChart {
    let points = curve.iter().map(|point| ((point.read_kib as f64).log2(), point.mb_s)).collect();
    LineChart {
        title: format!("Effective bandwidth of random reads ({})", settings.shape.model.name()),
        x_label: "read size, log2 KiB (2 = 4 KiB, 10 = 1 MiB, 18 = 256 MiB)".into(),
        y_label: "MB/s".into(),
        series: vec![Series { name: "random reads, queue depth 1".into(), points }],
    }
}

fn format_correlation(value: Option<f64>) -> String {
    value.map_or_else(|| "undefined".to_owned(), |r| format!("{r:.3}"))
}

fn format_kib(value: Option<f64>) -> String {
    value.map_or_else(|| "—".to_owned(), |kib| format!("{kib:.0} KiB"))
}

fn summary(headline: &Headline, cost: &str) -> String {
    let mut text =
        format!("{:<22} {:<15} {:>5} {:>9} {:>9} {:>9}\n", "workload", "layout", "round", "dynamic", "static", "s/GiB");
    for row in &headline.rows {
        let _ = writeln!(
            text,
            "{:<22} {:<15} {:>5} {:>9.4} {:>9.4} {:>9.3}",
            row.workload, row.layout, row.round, row.layout_score, row.static_layout_score, row.serial_read_s_per_gib
        );
    }
    let _ = writeln!(
        text,
        "correlation (dynamic score, s/GiB): {}; natural transfer size: {} (50 %), {} (90 %)",
        format_correlation(headline.correlation),
        format_kib(headline.natural_transfer_size_50_kib),
        format_kib(headline.natural_transfer_size_90_kib)
    );
    text.push_str(cost);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

fn report(settings: &AgingSettings, rows: &Rows, headline: &Headline, summary: &str) -> String {
    let params = &settings.params;
    let mut text = String::from("# Aging and the layout score (seed 002)\n\n");
    let _ = writeln!(text, "Command: `{}`  ", settings.command_line());
    let _ = writeln!(
        text,
        "Array: 4+1 RAID-4 of {} ({} MiB stripe units, {} MiB of each drive), {} extents of {} MiB ({} % of \
         the array), chunks of {} KiB, {} aging rounds; random overwrites: {} of the data per round. Layouts: \
         in-place without a cache, write-anywhere, proximal with a {} % staging area.\n",
        settings.shape.model.name(),
        settings.shape.stripe_unit_bytes >> 20,
        (settings.window_blocks_per_disk * BLOCK_SIZE_BYTES) >> 20,
        params.extents,
        params.extent_mib,
        FILL_FRACTION * 100.0,
        params.chunk_kib,
        params.rounds,
        params.overwrite_fraction,
        params.staging
    );
    text.push_str(
        "Definitions: the *dynamic layout score* is the fraction of the data drives' requests during the \
         serial read that start where the previous request on the same drive ended (each drive's first \
         request not scored); the *static layout score* is Smith and Seltzer's, over the extents' maps: the \
         fraction of blocks whose logical predecessor is mapped that lie directly after it. The serial read \
         reads every extent in order, in requests of the read size one at a time, after the drives' caches are emptied and the heads are moved to random \
         places; seconds per GiB are virtual time.\n\n",
    );
    text.push_str("## Against the paper\n\n");
    text.push_str("| figure | paper | measured | target | |\n| --- | ---: | ---: | --- | --- |\n");
    let met = headline.correlation.is_some_and(|r| r <= TARGET_CORRELATION);
    let _ = writeln!(
        text,
        "| r(dynamic score, s/GiB), every row | {PAPER_CORRELATION} (intrafile, HDD) | {} | ≤ {TARGET_CORRELATION} | {} |",
        format_correlation(headline.correlation),
        verdict(met)
    );
    for (workload, correlation) in &headline.correlation_by_workload {
        let _ =
            writeln!(text, "| r(dynamic score, s/GiB), {workload} | — | {} | — | |", format_correlation(*correlation));
    }
    let _ = writeln!(
        text,
        "| r(static score, s/GiB), every row | — | {} | — | |",
        format_correlation(headline.static_correlation)
    );
    let _ = writeln!(
        text,
        "| natural transfer size, 50 % of peak | ≈ {PAPER_NATURAL_TRANSFER_KIB} KiB (their HDD and SSD) | {} | — | |",
        format_kib(headline.natural_transfer_size_50_kib)
    );
    let _ = writeln!(
        text,
        "| natural transfer size, 90 % of peak | — | {} | — | |",
        format_kib(headline.natural_transfer_size_90_kib)
    );
    let _ = writeln!(text, "| peak effective bandwidth | — | {:.1} MB/s | — | |\n", headline.peak_mb_s);
    text.push_str("## Rounds\n\n");
    text.push_str(&aging_table(&rows.aging).to_markdown());
    text.push_str("\n## Natural transfer size\n\n");
    text.push_str(&transfer_table(&rows.transfer).to_markdown());
    text.push_str("\n```\n");
    text.push_str(summary);
    text.push_str("```\n");
    text
}
