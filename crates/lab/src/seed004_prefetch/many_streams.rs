//! `reproduce many-streams`: many concurrent sequential streams per disk on
//! the simulated 7200 RPM drive, straight to the drive (the baseline: the
//! drive's cache, queue and scheduler) against the engine's D/R/N/M
//! prefetcher on the host, over streams per disk, read-ahead sizes and 1 or
//! 8 independent disks; and the drive-cache cliff (baseline throughput over
//! request size × streams).
//!
//! Every run is a [`streams`](crate::seed004_prefetch::streams) simulation;
//! an 8-disk point is 8 drives with their own streams and seeds (nothing is
//! shared between them: the controller is not modelled), reported per disk.
//! The read-ahead the device rule sizes ([`PrefetchSettings::for_device`]
//! from the drive's mean media rate and mean positioning) is always among the
//! read-ahead sizes run: it is the "R sized" of the targets.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use proxima_disk::{DiskModel, DiskOp, Nanos};
use proxima_engine::prefetch::{
    PrefetchSettings, DEFAULT_DISPATCH_STREAMS, DEFAULT_MEMORY_TURNS, DEFAULT_REQUESTS_PER_TURN,
};
use serde::{Deserialize, Serialize};

use crate::experiment::{Experiment, RunSettings};
use crate::progress::Progress;
use crate::report::cost::WallCost;
use crate::report::markdown::{Artifact, Rendered};
use crate::report::plot::{LineChart, Series};
use crate::report::table::Table;
use crate::rig::parallel::{run_all, Task};
use crate::seed004_prefetch::paper;
use crate::seed004_prefetch::streams::{media_mb_s_at, run_streams, HostScheduler, StreamsConfig, StreamsOutcome};
use crate::LabError;

/// The experiment's name on the command line.
pub const NAME: &str = "many-streams";

/// The drive: the laboratory's 1 TB 7200 RPM drive.
pub const DEFAULT_MODEL: &str = "nearline7200";

/// Default virtual seconds per run: at 256 streams and an 8 MiB read-ahead
/// every stream still gets several turns.
pub const DEFAULT_SECONDS: f64 = 300.0;

const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;

/// Request sizes of the cache cliff, KiB.
pub const CLIFF_REQUEST_KIB: [u64; 5] = [64, 128, 256, 512, 1024];
/// Streams of the cache cliff.
pub const CLIFF_STREAMS: [u32; 10] = [1, 2, 4, 8, 12, 16, 20, 24, 32, 64];

/// Points over the drive sampled for its mean media rate.
const MEDIA_RATE_SAMPLES: u64 = 64;

/// The `many-streams` experiment.
#[derive(Debug, Clone, Copy)]
pub struct ManyStreams;

/// The flags of `many-streams`.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct ManyStreamsParams {
    /// Streams per disk, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1u32, 8, 10, 32, 100, 128, 256])]
    pub streams: Vec<u32>,
    /// Read-ahead sizes R of the prefetcher, MiB, comma separated (the size
    /// the device rule gives is always added).
    #[arg(long = "readahead-mib", value_delimiter = ',', default_values_t = [1u64, 2, 4, 8])]
    pub readahead_mib: Vec<u64>,
    /// Disk counts, comma separated (each disk runs its own streams).
    #[arg(long, value_delimiter = ',', default_values_t = [1u32, 8])]
    pub disks: Vec<u32>,
    /// Virtual seconds per run (the first tenth is a warm-up).
    #[arg(long, default_value_t = DEFAULT_SECONDS)]
    pub seconds: f64,
    /// Size of each stream's reads, KiB.
    #[arg(long = "request-kib", default_value_t = 128)]
    pub request_kib: u64,
    /// Think time of a reader between a read's completion and its next read, ms.
    #[arg(long = "think-ms", default_value_t = 0.0)]
    pub think_ms: f64,
    /// D: streams in the prefetcher's dispatch set.
    #[arg(long = "dispatch-streams", default_value_t = DEFAULT_DISPATCH_STREAMS)]
    pub dispatch_streams: usize,
    /// N: prefetches per stream per turn.
    #[arg(long = "requests-per-turn", default_value_t = DEFAULT_REQUESTS_PER_TURN)]
    pub requests_per_turn: u32,
    /// M per disk, MiB [default: 2·D·R·N for each R]; refused below D·R·N.
    #[arg(long = "memory-mib")]
    pub memory_mib: Option<u64>,
    /// Independent simulations run at once, one per thread (the figures are the same).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
}

impl Default for ManyStreamsParams {
    fn default() -> ManyStreamsParams {
        ManyStreamsParams {
            streams: vec![1, 8, 10, 32, 100, 128, 256],
            readahead_mib: vec![1, 2, 4, 8],
            disks: vec![1, 8],
            seconds: DEFAULT_SECONDS,
            request_kib: 128,
            think_ms: 0.0,
            dispatch_streams: DEFAULT_DISPATCH_STREAMS,
            requests_per_turn: DEFAULT_REQUESTS_PER_TURN,
            memory_mib: None,
            jobs: 1,
        }
    }
}

/// The settings of a `many-streams` run.
#[derive(Debug, Clone)]
pub struct ManyStreamsSettings {
    /// The drive.
    pub model: Arc<DiskModel>,
    /// The model as given on the command line.
    pub model_name: String,
    /// The flags.
    pub params: ManyStreamsParams,
    /// Read-ahead sizes run, bytes, ascending (the sized one included).
    pub readahead_bytes: Vec<u64>,
    /// The read-ahead the device rule gives, bytes.
    pub sized_readahead_bytes: u64,
    /// The drive's mean media rate, bytes/s.
    pub media_bytes_per_s: u64,
    /// The drive's mean positioning (a third-stroke seek and half a revolution), ns.
    pub positioning_ns: Nanos,
    /// Seed of every simulation.
    pub seed: u64,
    /// Where the files go.
    pub out_dir: PathBuf,
}

impl ManyStreamsSettings {
    /// The prefetcher's settings with read-ahead `readahead_bytes`.
    pub fn prefetch(&self, readahead_bytes: u64) -> PrefetchSettings {
        let mut settings = PrefetchSettings::with_readahead(readahead_bytes);
        settings.dispatch_streams = self.params.dispatch_streams;
        settings.requests_per_turn = self.params.requests_per_turn;
        let turn = self.params.dispatch_streams as u64 * readahead_bytes * u64::from(self.params.requests_per_turn);
        settings.memory_bytes_max = self.params.memory_mib.map_or(turn * DEFAULT_MEMORY_TURNS, |mib| mib * MIB);
        // The paper's scheduler: every prefetch is R from a stream's first turn.
        settings.initial_readahead_bytes = readahead_bytes;
        settings
    }

    fn command_line(&self) -> String {
        let list = |values: Vec<String>| values.join(",");
        let params = &self.params;
        let mut command = format!(
            "proxima reproduce {NAME} --streams {} --readahead-mib {} --disks {} --seconds {} --request-kib {} \
             --think-ms {} --dispatch-streams {} --requests-per-turn {}",
            list(params.streams.iter().map(ToString::to_string).collect()),
            list(params.readahead_mib.iter().map(ToString::to_string).collect()),
            list(params.disks.iter().map(ToString::to_string).collect()),
            params.seconds,
            params.request_kib,
            params.think_ms,
            params.dispatch_streams,
            params.requests_per_turn
        );
        if let Some(memory_mib) = params.memory_mib {
            let _ = write!(command, " --memory-mib {memory_mib}");
        }
        let _ = write!(command, " --model {} --seed {} --out {}", self.model_name, self.seed, self.out_dir.display());
        command
    }
}

/// The host scheduler of a sweep row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchedulerKind {
    /// Reads straight to the drive.
    Baseline,
    /// The engine's prefetcher.
    Prefetch,
}

/// One point of the sweep: a scheduler at some streams per disk on some disks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    /// Disks, each with its own streams.
    pub disks: u32,
    /// Streams per disk.
    pub streams_per_disk: u32,
    /// The host scheduler.
    pub scheduler: SchedulerKind,
    /// R, KiB (prefetch only).
    pub readahead_kib: Option<u64>,
    /// D (prefetch only).
    pub dispatch_streams: Option<usize>,
    /// N (prefetch only).
    pub requests_per_turn: Option<u32>,
    /// Each disk's run, in disk order.
    pub per_disk: Vec<StreamsOutcome>,
}

impl SweepRow {
    /// Throughput per disk, the disks' mean, MB/s.
    pub fn mb_s_per_disk(&self) -> f64 {
        self.per_disk.iter().map(|outcome| outcome.mb_s).sum::<f64>() / self.per_disk.len() as f64
    }

    /// The slowest stream's mean response over the fastest's, across every disk.
    pub fn response_time_spread(&self) -> Option<f64> {
        let merged = StreamsOutcome {
            stream_mean_response_ms: self
                .per_disk
                .iter()
                .flat_map(|outcome| outcome.stream_mean_response_ms.iter().copied())
                .collect(),
            ..self.per_disk[0].clone()
        };
        merged.response_time_spread()
    }

    /// The memory budget M per disk, bytes.
    pub fn memory_budget_bytes(&self) -> u64 {
        self.per_disk[0].memory_budget_bytes
    }

    /// The most memory any disk's prefetcher held, bytes.
    pub fn memory_peak_bytes(&self) -> u64 {
        self.per_disk.iter().map(|outcome| outcome.memory_peak_bytes).max().unwrap_or(0)
    }

    /// D·R·N, bytes (prefetch only).
    pub fn turn_bytes(&self) -> Option<u64> {
        Some(self.dispatch_streams? as u64 * self.readahead_kib? * KIB * u64::from(self.requests_per_turn?))
    }
}

/// One point of the cache cliff (baseline, one disk).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CliffRow {
    /// Request size, KiB.
    pub request_kib: u64,
    /// Streams.
    pub streams: u32,
    /// The run.
    pub outcome: StreamsOutcome,
}

/// Everything `many-streams` measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rows {
    /// The sweep, by disks, streams, then baseline and each R.
    pub sweep: Vec<SweepRow>,
    /// The cache cliff, by request size then streams.
    pub cliff: Vec<CliffRow>,
}

/// One row of the printed JSON (the contract's keys and a few more).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadlineRow {
    /// Disks.
    pub disks: u32,
    /// Streams per disk.
    pub streams_per_disk: u32,
    /// `baseline` or `prefetch`.
    pub scheduler: SchedulerKind,
    /// Throughput per disk, MB/s.
    pub mb_s_per_disk: f64,
    /// The prefetcher's memory budget M per disk, MiB (0 for the baseline).
    pub memory_mib: f64,
    /// The most memory a disk's prefetcher held, MiB.
    pub memory_peak_mib: f64,
    /// Slowest stream's mean response over the fastest's (null if a stream
    /// completed nothing).
    pub response_time_spread: Option<f64>,
    /// R, KiB (prefetch only).
    pub readahead_kib: Option<u64>,
    /// D (prefetch only).
    pub dispatch_streams: Option<usize>,
    /// N (prefetch only).
    pub requests_per_turn: Option<u32>,
    /// The streams' read size, KiB.
    pub request_kib: u64,
}

/// The headline: one row per sweep point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// The sweep's points.
    pub rows: Vec<HeadlineRow>,
}

impl Experiment for ManyStreams {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str =
        "many-stream prefetch talk: sequential streams per disk, baseline vs the D/R/N/M prefetcher, cache cliff";
    const DEFAULT_MODEL: &'static str = DEFAULT_MODEL;
    type Params = ManyStreamsParams;
    type Settings = ManyStreamsSettings;
    type Rows = Rows;
    type Headline = Headline;

    fn settings(run: &RunSettings, params: &ManyStreamsParams) -> Result<ManyStreamsSettings, LabError> {
        let model = DiskModel::resolve(&run.model, &[]).map_err(|source| LabError::Model { source })?;
        check_params(params)?;
        let media_bytes_per_s = mean_media_bytes_per_s(&model);
        let positioning_ns = model.seek_ns(model.cylinder_count() / 3, DiskOp::Read) + model.revolution_ns() / 2;
        let sized_readahead_bytes = PrefetchSettings::for_device(media_bytes_per_s, positioning_ns).readahead_bytes;
        let mut readahead_bytes: Vec<u64> = params.readahead_mib.iter().map(|mib| mib * MIB).collect();
        readahead_bytes.push(sized_readahead_bytes);
        readahead_bytes.sort_unstable();
        readahead_bytes.dedup();
        let settings = ManyStreamsSettings {
            model: Arc::new(model),
            model_name: run.model.clone(),
            params: params.clone(),
            readahead_bytes,
            sized_readahead_bytes,
            media_bytes_per_s,
            positioning_ns,
            seed: run.seed,
            out_dir: run.out_dir.clone(),
        };
        for &readahead_bytes in &settings.readahead_bytes {
            settings.prefetch(readahead_bytes).validate().map_err(|error| LabError::InvalidParameter {
                parameter: "memory-mib",
                message: format!("--memory-mib with R = {} MiB: {error}", readahead_bytes / MIB),
            })?;
        }
        Ok(settings)
    }

    fn measure(settings: &ManyStreamsSettings, progress: &mut dyn Progress) -> Result<Rows, LabError> {
        let mut points = Vec::new();
        for &disks in &settings.params.disks {
            for &streams in &settings.params.streams {
                points.push((disks, streams, HostScheduler::Baseline));
                for &readahead_bytes in &settings.readahead_bytes {
                    points.push((disks, streams, HostScheduler::Prefetch(settings.prefetch(readahead_bytes))));
                }
            }
        }
        let request_bytes = settings.params.request_kib * KIB;
        let mut tasks: Vec<Task<'_, StreamsOutcome>> = Vec::new();
        for &(disks, streams, scheduler) in &points {
            for disk in 0..disks {
                tasks.push(task(settings, streams, request_bytes, scheduler, disk));
            }
        }
        for &request_kib in &CLIFF_REQUEST_KIB {
            for &streams in &CLIFF_STREAMS {
                tasks.push(task(settings, streams, request_kib * KIB, HostScheduler::Baseline, 0));
            }
        }
        let mut outcomes = run_all(settings.jobs(), tasks, progress)?.into_iter();
        let mut sweep = Vec::new();
        for (disks, streams, scheduler) in points {
            let per_disk: Vec<StreamsOutcome> = outcomes.by_ref().take(disks as usize).collect();
            let prefetch = match scheduler {
                HostScheduler::Baseline => None,
                HostScheduler::Prefetch(prefetch) => Some(prefetch),
            };
            sweep.push(SweepRow {
                disks,
                streams_per_disk: streams,
                scheduler: if prefetch.is_some() { SchedulerKind::Prefetch } else { SchedulerKind::Baseline },
                readahead_kib: prefetch.map(|prefetch| prefetch.readahead_bytes / KIB),
                dispatch_streams: prefetch.map(|prefetch| prefetch.dispatch_streams),
                requests_per_turn: prefetch.map(|prefetch| prefetch.requests_per_turn),
                per_disk,
            });
        }
        let mut cliff = Vec::new();
        for &request_kib in &CLIFF_REQUEST_KIB {
            for &streams in &CLIFF_STREAMS {
                let outcome = outcomes.next().expect("one outcome per task");
                cliff.push(CliffRow { request_kib, streams, outcome });
            }
        }
        Ok(Rows { sweep, cliff })
    }

    fn render(settings: &ManyStreamsSettings, rows: &Rows, cost: &WallCost) -> Rendered<Headline> {
        let headline =
            Headline { rows: rows.sweep.iter().map(|row| headline_row(row, settings.params.request_kib)).collect() };
        let checks = Checks::gather(settings, rows);
        let report = render_report(settings, rows, &checks, cost);
        let summary = render_summary(settings, rows, &checks);
        let files = vec![
            ("throughput.csv", Artifact::Csv(sweep_table(rows))),
            ("throughput.svg", Artifact::LineChart(throughput_chart(settings, rows))),
            ("cache_cliff.csv", Artifact::Csv(cliff_table(rows))),
            ("cache_cliff.svg", Artifact::LineChart(cliff_chart(settings, rows))),
        ];
        Rendered { files, report, summary, headline }
    }

    fn describe(params: &ManyStreamsParams) -> String {
        format!(", {} simulation(s) at once", params.jobs)
    }
}

impl ManyStreamsSettings {
    fn jobs(&self) -> usize {
        usize::from(self.params.jobs)
    }
}

fn check_params(params: &ManyStreamsParams) -> Result<(), LabError> {
    let invalid = |parameter: &'static str, message: &str| {
        Err(LabError::InvalidParameter { parameter, message: message.to_string() })
    };
    if params.streams.is_empty() || params.streams.contains(&0) {
        return invalid("streams", "give at least one stream count, each at least 1");
    }
    if params.readahead_mib.contains(&0) {
        return invalid("readahead-mib", "each read-ahead is at least 1 MiB");
    }
    if params.disks.is_empty() || params.disks.contains(&0) {
        return invalid("disks", "give at least one disk count, each at least 1");
    }
    if !(params.seconds.is_finite() && params.seconds > 0.0) {
        return invalid("seconds", "a positive number of virtual seconds");
    }
    if params.request_kib == 0 || !params.request_kib.is_multiple_of(4) {
        return invalid("request-kib", "a positive multiple of 4 KiB");
    }
    if !(params.think_ms.is_finite() && params.think_ms >= 0.0) {
        return invalid("think-ms", "a think time of 0 ms or more");
    }
    if params.dispatch_streams == 0 || params.requests_per_turn == 0 {
        return invalid("dispatch-streams", "D and N are at least 1");
    }
    Ok(())
}

fn task<'a>(
    settings: &'a ManyStreamsSettings,
    streams: u32,
    request_bytes: u64,
    scheduler: HostScheduler,
    disk: u32,
) -> Task<'a, StreamsOutcome> {
    Box::new(move |progress: &mut dyn Progress| {
        progress.start_phase(&format!("{streams} streams, disk {disk}"), 1);
        let config = StreamsConfig {
            model: Arc::clone(&settings.model),
            streams,
            request_bytes,
            scheduler,
            duration_ns: (settings.params.seconds * 1e9) as Nanos,
            think_ns: (settings.params.think_ms * 1e6) as Nanos,
            seed: settings.seed ^ u64::from(disk).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        };
        let outcome = run_streams(&config)?;
        progress.advance(1);
        Ok(outcome)
    })
}

/// The drive's media rate averaged over evenly spaced LBNs, bytes/s.
fn mean_media_bytes_per_s(model: &DiskModel) -> u64 {
    let step = model.sector_count() / MEDIA_RATE_SAMPLES;
    let total: f64 = (0..MEDIA_RATE_SAMPLES).map(|index| media_mb_s_at(model, index * step)).sum();
    (total / MEDIA_RATE_SAMPLES as f64 * 1e6) as u64
}

fn headline_row(row: &SweepRow, request_kib: u64) -> HeadlineRow {
    HeadlineRow {
        disks: row.disks,
        streams_per_disk: row.streams_per_disk,
        scheduler: row.scheduler,
        mb_s_per_disk: round(row.mb_s_per_disk(), 3),
        memory_mib: round(row.memory_budget_bytes() as f64 / MIB as f64, 3),
        memory_peak_mib: round(row.memory_peak_bytes() as f64 / MIB as f64, 3),
        response_time_spread: row.response_time_spread().map(|spread| round(spread, 3)),
        readahead_kib: row.readahead_kib,
        dispatch_streams: row.dispatch_streams,
        requests_per_turn: row.requests_per_turn,
        request_kib,
    }
}

fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

/// The targets, each measured and judged.
struct Checks {
    lines: Vec<(String, String, String, bool)>,
}

impl Checks {
    fn gather(settings: &ManyStreamsSettings, rows: &Rows) -> Checks {
        let mut lines = Vec::new();
        let disks = settings.params.disks[0];
        let find = |streams: u32, readahead_kib: Option<u64>| {
            rows.sweep
                .iter()
                .find(|row| row.disks == disks && row.streams_per_disk == streams && row.readahead_kib == readahead_kib)
        };
        let sized_kib = Some(settings.sized_readahead_bytes / KIB);
        if let Some(row) = find(1, None) {
            let media = row.per_disk[0].media_mb_s;
            let ratio = row.mb_s_per_disk() / media;
            lines.push((
                "baseline, 1 stream: ≥ 90 % of the media rate".into(),
                "60 MB/s (the disk's rate)".to_string(),
                format!("{:.1} MB/s = {:.0} % of {media:.1} MB/s", row.mb_s_per_disk(), ratio * 100.0),
                ratio >= 0.9,
            ));
        }
        for streams in [100, 256] {
            if let Some(row) = find(streams, None) {
                let mb_s = row.mb_s_per_disk();
                let low = paper::MANY_STREAMS_MB_S_LOW * 0.7;
                let high = paper::MANY_STREAMS_MB_S_HIGH * 1.3;
                lines.push((
                    format!("baseline, {streams} streams per disk: 10–15 MB/s ± 30 %"),
                    "10–15 MB/s (256 streams)".into(),
                    format!("{mb_s:.1} MB/s"),
                    (low..=high).contains(&mb_s),
                ));
            }
        }
        if let (Some(baseline), Some(prefetch)) = (find(100, None), find(100, sized_kib)) {
            let gain = prefetch.mb_s_per_disk() / baseline.mb_s_per_disk();
            lines.push((
                "prefetch at 100 streams per disk ≥ 3× the baseline (R sized)".into(),
                format!("up to {}×", paper::PREFETCH_GAIN_AT_100),
                format!("{gain:.2}× ({:.1} against {:.1} MB/s)", prefetch.mb_s_per_disk(), baseline.mb_s_per_disk()),
                gain >= 3.0,
            ));
        }
        if let (Some(few), Some(many)) = (find(10, sized_kib), find(256, sized_kib)) {
            let drop = 1.0 - many.mb_s_per_disk() / few.mb_s_per_disk();
            lines.push((
                "≤ 10 % drop from 10 to 256 streams per disk (R sized)".into(),
                "insensitive to the number of streams".into(),
                format!("{:.1} % ({:.1} → {:.1} MB/s)", drop * 100.0, few.mb_s_per_disk(), many.mb_s_per_disk()),
                drop <= 0.10,
            ));
        }
        let prefetch_rows: Vec<&SweepRow> = rows.sweep.iter().filter(|row| row.turn_bytes().is_some()).collect();
        let budget_kept = prefetch_rows.iter().all(|row| {
            let turn = row.turn_bytes().expect("prefetch");
            row.memory_budget_bytes() >= turn && row.memory_peak_bytes() <= row.memory_budget_bytes()
        });
        lines.push((
            "M ≥ D·R·N in every run, and memory held ≤ M".into(),
            "M ≥ D·R·N".into(),
            format!("{} prefetch runs checked", prefetch_rows.len()),
            budget_kept,
        ));
        let spreads: Vec<Option<f64>> = prefetch_rows
            .iter()
            .filter(|row| row.readahead_kib == sized_kib)
            .map(|row| row.response_time_spread())
            .collect();
        let worst = spreads.iter().map(|spread| spread.unwrap_or(f64::INFINITY)).fold(0.0, f64::max);
        lines.push((
            "per-stream response times within 2× (prefetch, R sized, every stream count)".into(),
            "even across streams under round robin".into(),
            format!("worst spread {worst:.2}"),
            worst <= 2.0,
        ));
        Checks { lines }
    }
}

fn sweep_table(rows: &Rows) -> Table {
    let mut table = Table::new(&[
        "disks",
        "streams_per_disk",
        "scheduler",
        "readahead_kib",
        "dispatch_streams",
        "requests_per_turn",
        "mb_s_per_disk",
        "memory_budget_mib",
        "memory_peak_mib",
        "response_time_spread",
        "mean_response_ms",
        "disk_requests_per_disk",
        "memory_read_fraction",
    ]);
    let option = |value: Option<String>| value.unwrap_or_default();
    for row in rows.sweep.iter() {
        let disk_requests: u64 = row.per_disk.iter().map(|outcome| outcome.disk_requests).sum();
        let reads: u64 = row.per_disk.iter().map(|outcome| outcome.reads).sum();
        let memory_reads: u64 = row.per_disk.iter().map(|outcome| outcome.memory_reads).sum();
        let mean_response: Vec<f64> = row.per_disk.iter().filter_map(StreamsOutcome::mean_response_ms).collect();
        table.push_row(vec![
            row.disks.to_string(),
            row.streams_per_disk.to_string(),
            scheduler_label(row.scheduler).into(),
            option(row.readahead_kib.map(|kib| kib.to_string())),
            option(row.dispatch_streams.map(|d| d.to_string())),
            option(row.requests_per_turn.map(|n| n.to_string())),
            format!("{:.2}", row.mb_s_per_disk()),
            format!("{:.1}", row.memory_budget_bytes() as f64 / MIB as f64),
            format!("{:.1}", row.memory_peak_bytes() as f64 / MIB as f64),
            option(row.response_time_spread().map(|spread| format!("{spread:.3}"))),
            format!("{:.2}", mean_response.iter().sum::<f64>() / mean_response.len().max(1) as f64),
            format!("{:.1}", disk_requests as f64 / row.disks as f64),
            format!("{:.3}", memory_reads as f64 / reads.max(1) as f64),
        ]);
    }
    table
}

fn cliff_table(rows: &Rows) -> Table {
    let mut table = Table::new(&["request_kib", "streams", "streams_x_request_kib", "mb_s", "response_time_spread"]);
    for row in &rows.cliff {
        table.push_row(vec![
            row.request_kib.to_string(),
            row.streams.to_string(),
            (row.request_kib * u64::from(row.streams)).to_string(),
            format!("{:.2}", row.outcome.mb_s),
            row.outcome.response_time_spread().map(|spread| format!("{spread:.3}")).unwrap_or_default(),
        ]);
    }
    table
}

fn scheduler_label(scheduler: SchedulerKind) -> &'static str {
    match scheduler {
        SchedulerKind::Baseline => "baseline",
        SchedulerKind::Prefetch => "prefetch",
    }
}

fn throughput_chart(settings: &ManyStreamsSettings, rows: &Rows) -> LineChart {
    let mut series = Vec::new();
    for &disks in &settings.params.disks {
        let mut kinds: Vec<Option<u64>> = vec![None];
        kinds.extend(settings.readahead_bytes.iter().map(|bytes| Some(bytes / KIB)));
        for readahead_kib in kinds {
            let points = rows
                .sweep
                .iter()
                .filter(|row| row.disks == disks && row.readahead_kib == readahead_kib)
                .map(|row| (f64::from(row.streams_per_disk), row.mb_s_per_disk()))
                .collect();
            let name = match readahead_kib {
                None => format!("baseline, {disks} disk(s)"),
                Some(kib) => format!("prefetch R = {} MiB, {disks} disk(s)", kib / 1024),
            };
            series.push(Series { name, points });
        }
    }
    LineChart {
        title: format!("Throughput per disk against streams per disk ({})", settings.model.name()),
        x_label: "streams per disk".into(),
        y_label: "MB/s per disk".into(),
        series,
    }
}

fn cliff_chart(settings: &ManyStreamsSettings, rows: &Rows) -> LineChart {
    let series = CLIFF_REQUEST_KIB
        .iter()
        .map(|&request_kib| Series {
            name: format!("{request_kib} KiB requests"),
            points: rows
                .cliff
                .iter()
                .filter(|row| row.request_kib == request_kib)
                .map(|row| (f64::from(row.streams), row.outcome.mb_s))
                .collect(),
        })
        .collect();
    let cache = settings.model.cache();
    LineChart {
        title: format!(
            "Baseline against streams: the drive's cache ({} segments of {} KiB)",
            cache.segment_count,
            u64::from(cache.segment_size_sectors) * 512 / KIB
        ),
        x_label: "streams".into(),
        y_label: "MB/s".into(),
        series,
    }
}

fn render_summary(settings: &ManyStreamsSettings, rows: &Rows, checks: &Checks) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{NAME} on {} (seed {}, {} virtual s per run, R sized {} MiB): MB/s per disk",
        settings.model.name(),
        settings.seed,
        settings.params.seconds,
        settings.sized_readahead_bytes / MIB
    );
    let _ = writeln!(
        text,
        "{:>6} {:>8} {:>10} {:>12} {:>10} {:>8}",
        "disks", "streams", "scheduler", "R MiB", "MB/s", "spread"
    );
    for row in &rows.sweep {
        let _ = writeln!(
            text,
            "{:>6} {:>8} {:>10} {:>12} {:>10.1} {:>8}",
            row.disks,
            row.streams_per_disk,
            scheduler_label(row.scheduler),
            row.readahead_kib.map_or("—".into(), |kib| format!("{:.0}", kib as f64 / 1024.0)),
            row.mb_s_per_disk(),
            row.response_time_spread().map_or("—".into(), |spread| format!("{spread:.2}"))
        );
    }
    for (target, _, ours, met) in &checks.lines {
        let _ = writeln!(text, "{}: {target}: {ours}", if *met { "met" } else { "MISSED" });
    }
    text
}

fn render_report(settings: &ManyStreamsSettings, rows: &Rows, checks: &Checks, cost: &WallCost) -> String {
    let mut text = String::new();
    let cache = settings.model.cache();
    let _ = writeln!(text, "# {NAME}: many sequential streams per disk, with and without host prefetch\n");
    let _ = writeln!(text, "Command: `{}`\n", settings.command_line());
    let _ = writeln!(
        text,
        "Drive: `{}` ({} RPM, mean media rate {:.1} MB/s, mean positioning {:.1} ms; cache {} segments of {} KiB, \
         queue {}, its own scheduler). Each stream reads its own contiguous file (files spread evenly over the \
         drive) with {} KiB reads, one outstanding, think time {} ms; {} virtual seconds per run, the first tenth \
         a warm-up. MB/s are 10⁶ bytes per second received by the readers. The prefetcher: D = {}, N = {}, M = {} \
         per disk; the device rule (transfer of R ≥ 10 × positioning) sizes R = {} MiB. Disks do not share \
         anything (the controller is not modelled), so an 8-disk point is 8 drives' own runs, reported per disk.\n",
        settings.model.name(),
        settings.model.rpm(),
        settings.media_bytes_per_s as f64 / 1e6,
        settings.positioning_ns as f64 / 1e6,
        cache.segment_count,
        u64::from(cache.segment_size_sectors) * 512 / KIB,
        settings.model.max_queue_length(),
        settings.params.request_kib,
        settings.params.think_ms,
        settings.params.seconds,
        settings.params.dispatch_streams,
        settings.params.requests_per_turn,
        settings.params.memory_mib.map_or("2·D·R·N".into(), |mib| format!("{mib} MiB")),
        settings.sized_readahead_bytes / MIB,
    );
    let _ = writeln!(text, "## Targets\n");
    let _ = writeln!(text, "| target | paper | ours | |\n| --- | --- | --- | --- |");
    for (target, paper, ours, met) in &checks.lines {
        let _ = writeln!(text, "| {target} | {paper} | {ours} | {} |", if *met { "met" } else { "**missed**" });
    }
    let _ = writeln!(
        text,
        "\nThe paper's memory: R = {} MiB for 100 streams needs M ≈ {} MB when every stream is dispatched (D = S). \
         Here D = {} streams are dispatched and the rest wait staged, so M is D·R·N-bound, not S-bound.\n",
        paper::READAHEAD_MIB,
        paper::MEMORY_MB_AT_8_MIB,
        settings.params.dispatch_streams
    );
    let _ = writeln!(text, "## Throughput per disk\n\n![throughput](throughput.svg)\n");
    let _ = writeln!(text, "{}", sweep_table(rows).to_markdown());
    let _ = writeln!(
        text,
        "## The drive-cache cliff (baseline, one disk)\n\nThe drive holds {} segments of {} KiB ({} KiB). \
         Throughput against streams for each request size:\n\n![cache cliff](cache_cliff.svg)\n",
        cache.segment_count,
        u64::from(cache.segment_size_sectors) * 512 / KIB,
        u64::from(cache.segment_count) * u64::from(cache.segment_size_sectors) * 512 / KIB
    );
    let _ = writeln!(text, "{}", cliff_table(rows).to_markdown());
    let _ = writeln!(
        text,
        "The drive model reads ahead after a read miss only until the next command starts (DiskSim's rule), and \
         with `Buffer continuous read` 4 it reads nothing ahead when the following track does not fit in the \
         segment; with a queue of requests from other streams, and with one stream whose next request arrives \
         as the previous completes, its cache therefore holds little beyond the request. Where no cliff shows \
         above, that is why: the drive's cache never carries a stream from one request to its next.\n"
    );
    let _ = writeln!(text, "Measured in {:.1} s of wall time.", cost.wall_seconds);
    text
}
