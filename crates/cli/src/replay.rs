//! `proxima replay TRACE`: replays a block trace on the disk model or a
//! simulated volume of any layout (`--target volume`, virtual time), or
//! against a live NBD export (`--nbd URI`, wall time), and prints a
//! short summary and, as the last line, one JSON object. Exit 2 for a bad
//! trace (the error names file, line and field) or bad options, 1 when the
//! target fails.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use proxima_disk::DiskModel;
use proxima_engine::Layout;
use proxima_workload::nbd_client::NbdUri;
use proxima_workload::replay::mapping::{DeviceMap, MappingOptions, OutOfRange};
use proxima_workload::replay::metrics::ReplayReport;
use proxima_workload::replay::nbd::NbdTarget;
use proxima_workload::replay::{
    replay, DiskTarget, Mode, ReplayObserver, ReplayOptions, RequestRecord, Target, LOOKAHEAD_DEFAULT,
    ORDER_WINDOW_DEFAULT,
};
use proxima_workload::{TraceFormat, TraceReader};
use serde_json::{json, Value};

use crate::replay_plots::ReplayPlots;
use crate::replay_volume::{
    VolumeSpec, VolumeTarget, VolumeTargetError, PROXIMAL_STAGING_PERCENT_DEFAULT, VOLUME_SIZE_BYTES_DEFAULT,
};

/// `proxima replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The trace (gzip-compressed or not).
    trace: PathBuf,
    /// The trace's format; detected from the content when omitted.
    #[arg(long, value_parser = parse_format)]
    format: Option<TraceFormat>,
    /// What to replay on: the disk model alone (default) or a simulated volume through the engine (`--nbd` replays on an export instead).
    #[arg(long, value_enum)]
    target: Option<TargetArg>,
    /// Volume target: the layout (proximal, in-place, write-anywhere, ...) [default: proximal].
    #[arg(long, value_parser = parse_layout)]
    layout: Option<Layout>,
    /// Volume target: the staging area in percent of the array's capacity [default: 1 for proximal, 0 otherwise].
    #[arg(long, value_name = "PERCENT")]
    staging: Option<f64>,
    /// Volume target: the bytes it holds, e.g. 4G (the array is sized so they fill 89 % of it) [default: 4G].
    #[arg(long, value_name = "SIZE", value_parser = parse_volume_size)]
    volume_size: Option<u64>,
    /// Disk model: a built-in name (cheetah15k5, atlas10k, nearline7200, disk2003, disk2008, dsp3105) or a DiskSim `.parv` [default: cheetah15k5].
    #[arg(long)]
    model: Option<String>,
    /// Override one model parameter: 'disk0:PARAMETER=VALUE' (repeatable; disk target).
    #[arg(long = "set", value_name = "COMPONENT:PARAMETER=VALUE")]
    set: Vec<String>,
    /// Seed of the simulated drive (its platter's initial angle) [default: 0].
    #[arg(long)]
    seed: Option<u64>,
    /// Replay against a live NBD export: nbd://HOST[:PORT]/EXPORT or nbd+unix:///EXPORT?socket=PATH.
    #[arg(long, value_name = "URI")]
    nbd: Option<String>,
    /// Timing: recorded times, as fast as possible, recorded times ÷ K, the trace's in-flight counts, or inferred dependencies [default: faithful, or scaled with --scale].
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// The load factor K of scaled mode: request times are divided by K.
    #[arg(long, value_name = "K")]
    scale: Option<f64>,
    /// Most requests in flight, replacing the mode's limit.
    #[arg(long, value_name = "N")]
    in_flight_max: Option<u32>,
    /// Issue requests due within this many microseconds of a batch's first with it (0: off).
    #[arg(long, value_name = "MICROSECONDS", default_value_t = 0.0)]
    bundle_us: f64,
    /// Dependency mode: think times shorter than this mean independent requests [default: 10].
    #[arg(long, value_name = "MICROSECONDS")]
    think_threshold_us: Option<f64>,
    /// Dependency mode: requests read ahead of the oldest unissued one [default: 4096].
    #[arg(long, value_name = "N")]
    lookahead: Option<usize>,
    /// How trace devices (devices, ASUs, LUNs, disks) share the target: `shared` (all address the
    /// whole target) or `split:N` (N equal slices, device d in slice d mod N).
    #[arg(long, value_name = "shared|split:N", default_value = "shared", value_parser = parse_device_map)]
    device_map: DeviceMap,
    /// Replay only this device's requests.
    #[arg(long, value_name = "DEVICE")]
    only_device: Option<u64>,
    /// Round requests out to this block size (a multiple of 512 bytes).
    #[arg(long, value_name = "BYTES", default_value_t = 512)]
    block_bytes: u64,
    /// Requests ending beyond the target (or their slice): wrap them around, skip them, or fail.
    #[arg(long, value_enum, default_value = "wrap")]
    out_of_range: OutOfRangeArg,
    /// Requests held to repair a trace's disorder in time.
    #[arg(long, value_name = "N", default_value_t = ORDER_WINDOW_DEFAULT)]
    order_window: usize,
    /// Write one CSV line per replayed request to this file.
    #[arg(long, value_name = "FILE")]
    per_request: Option<PathBuf>,
    /// Draw the latency percentile curve and the completions over time into this directory (SVG and CSV).
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
}

/// `--target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TargetArg {
    /// The disk model alone, in virtual time.
    Disk,
    /// A simulated volume of a layout through the engine, on the laboratory's RAID-4 and flash, in virtual time.
    Volume,
}

/// `--mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ModeArg {
    /// Each request at its recorded time.
    Faithful,
    /// As fast as possible, in trace order.
    Afap,
    /// At the recorded times divided by --scale.
    Scaled,
    /// As fast as possible, with no more requests in flight than the trace had.
    Load,
    /// hfplayer's dependency-preserving replay.
    Dependency,
}

/// `--out-of-range`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OutOfRangeArg {
    /// Start modulo the target, moved back to fit.
    Wrap,
    /// Skip and count.
    Skip,
    /// Stop with an error naming the line.
    Error,
}

fn parse_format(text: &str) -> Result<TraceFormat, String> {
    TraceFormat::from_name(text).ok_or_else(|| {
        let names: Vec<&str> = TraceFormat::ALL.iter().map(|format| format.name()).collect();
        format!("unknown format `{text}` (formats: {})", names.join(", "))
    })
}

fn parse_layout(text: &str) -> Result<Layout, String> {
    Layout::parse(text).ok_or_else(|| {
        let names: Vec<&str> = Layout::ALL.iter().map(|layout| layout.name()).collect();
        format!("unknown layout `{text}` (layouts: {})", names.join(", "))
    })
}

fn parse_volume_size(text: &str) -> Result<u64, String> {
    proxima_service::size::parse_size(text).map_err(|error| error.to_string())
}

fn parse_device_map(text: &str) -> Result<DeviceMap, String> {
    if text == "shared" {
        return Ok(DeviceMap::Shared);
    }
    text.strip_prefix("split:")
        .and_then(|count| count.parse::<u64>().ok())
        .filter(|&count| count > 0)
        .map(DeviceMap::Split)
        .ok_or_else(|| format!("`{text}` is neither `shared` nor `split:N` with N > 0"))
}

/// Runs `proxima replay`.
pub fn run(args: &ReplayArgs) -> ExitCode {
    let options = match replay_options(args) {
        Ok(options) => options,
        Err(message) => return fail(2, &message),
    };
    let reader = match TraceReader::open(&args.trace, args.format) {
        Ok(reader) => reader,
        Err(error) => return fail(2, &error.to_string()),
    };
    let (mut target, target_json) = match open_target(args) {
        Ok(opened) => opened,
        Err((code, message)) => return fail(code, &message),
    };
    let format = reader.format();
    let file_name = reader.file_name().to_string();
    let mut observer = match Observer::new(
        args.per_request.as_ref(),
        args.plots.as_deref(),
        reader.progress_counter(),
        reader.file_size_bytes(),
    ) {
        Ok(observer) => observer,
        Err(message) => return fail(1, &message),
    };
    let outcome = replay(&file_name, reader, target.as_mut(), &options, &mut observer);
    observer.bar.finish_and_clear();
    let report = match outcome {
        Ok(report) => report,
        Err(error) => return fail(if error.is_bad_input() { 2 } else { 1 }, &error.to_string()),
    };
    let plots = match observer.finish() {
        Ok(plots) => plots,
        Err(message) => return fail(1, &message),
    };
    print_summary(&file_name, format, &options, &report);
    for path in &plots {
        println!("wrote {}", path.display());
    }
    let mut headline = report_json(&report);
    let extra = json!({
        "trace": file_name,
        "format": format.name(),
        "target": target_json,
        "mode": options.mode.name(),
        "scale": match options.mode { Mode::Scaled { factor } => json!(factor), _ => Value::Null },
    });
    headline.as_object_mut().expect("an object").extend(extra.as_object().expect("an object").clone());
    println!("{headline}");
    ExitCode::SUCCESS
}

fn fail(code: u8, message: &str) -> ExitCode {
    eprintln!("proxima replay: {message}");
    ExitCode::from(code)
}

/// The options, checked: each given option must apply.
fn replay_options(args: &ReplayArgs) -> Result<ReplayOptions, String> {
    let mode = match (args.mode, args.scale) {
        (Some(ModeArg::Scaled) | None, Some(factor)) => Mode::Scaled { factor },
        (Some(ModeArg::Scaled), None) => return Err("--mode scaled needs --scale K".into()),
        (Some(other), Some(_)) => return Err(format!("--scale applies to scaled mode, not {other:?}").to_lowercase()),
        (None | Some(ModeArg::Faithful), None) => Mode::Faithful,
        (Some(ModeArg::Afap), None) => Mode::Afap,
        (Some(ModeArg::Load), None) => Mode::Load,
        (Some(ModeArg::Dependency), None) => Mode::Dependency,
    };
    if mode != Mode::Dependency && (args.think_threshold_us.is_some() || args.lookahead.is_some()) {
        return Err("--think-threshold-us and --lookahead apply to dependency mode".into());
    }
    let microseconds = |value: f64, name: &str| -> Result<u64, String> {
        if value.is_finite() && value >= 0.0 {
            Ok((value * 1000.0).round() as u64)
        } else {
            Err(format!("{name} must be a non-negative number of microseconds"))
        }
    };
    let defaults = ReplayOptions::default();
    Ok(ReplayOptions {
        mode,
        mapping: MappingOptions {
            only_device: args.only_device,
            device_map: args.device_map,
            block_bytes: args.block_bytes,
            out_of_range: match args.out_of_range {
                OutOfRangeArg::Wrap => OutOfRange::Wrap,
                OutOfRangeArg::Skip => OutOfRange::Skip,
                OutOfRangeArg::Error => OutOfRange::Error,
            },
        },
        in_flight_max: args.in_flight_max,
        bundle_ns: microseconds(args.bundle_us, "--bundle-us")?,
        think_threshold_ns: match args.think_threshold_us {
            Some(value) => microseconds(value, "--think-threshold-us")?,
            None => defaults.think_threshold_ns,
        },
        order_window: args.order_window,
        lookahead: args.lookahead.unwrap_or(LOOKAHEAD_DEFAULT),
    })
}

/// The target and its description for the JSON line; errors carry an exit code.
fn open_target(args: &ReplayArgs) -> Result<(Box<dyn Target>, Value), (u8, String)> {
    let volume_options_given = args.layout.is_some() || args.staging.is_some() || args.volume_size.is_some();
    if let Some(uri_text) = &args.nbd {
        if args.target.is_some() || args.model.is_some() || args.seed.is_some() || !args.set.is_empty() {
            return Err((2, "--target, --model, --set and --seed apply to the simulated targets, not --nbd".into()));
        }
        if volume_options_given {
            return Err((2, "--layout, --staging and --volume-size apply to --target volume, not --nbd".into()));
        }
        let uri = NbdUri::parse(uri_text).map_err(|error| (2, error.to_string()))?;
        let target = NbdTarget::connect(&uri).map_err(|error| (1, error.to_string()))?;
        let size_bytes = target.export().size_bytes;
        return Ok((Box::new(target), json!({ "kind": "nbd", "uri": uri_text, "size_bytes": size_bytes })));
    }
    let name = args.model.clone().unwrap_or_else(|| "cheetah15k5".to_string());
    let overrides = crate::disk::parse_overrides(&args.set).map_err(|error| (2, error.to_string()))?;
    let model = DiskModel::resolve(&name, &overrides).map_err(|error| (2, error.to_string()))?;
    let seed = args.seed.unwrap_or(0);
    if args.target != Some(TargetArg::Volume) {
        if volume_options_given {
            return Err((
                2,
                "--layout, --staging and --volume-size apply to --target volume, not the disk model".into(),
            ));
        }
        let description = json!({
            "kind": "disk",
            "model": model.name(),
            "seed": seed,
            "size_bytes": model.sector_count() * u64::from(model.sector_size_bytes()),
        });
        return Ok((Box::new(DiskTarget::new(Arc::new(model), seed)), description));
    }
    let layout = args.layout.unwrap_or(Layout::Proximal);
    let default_staging = if layout == Layout::Proximal { PROXIMAL_STAGING_PERCENT_DEFAULT } else { 0.0 };
    let spec = VolumeSpec {
        model: Arc::new(model),
        layout,
        staging_percent: args.staging.unwrap_or(default_staging),
        size_bytes: args.volume_size.unwrap_or(VOLUME_SIZE_BYTES_DEFAULT),
        seed,
    };
    let target = VolumeTarget::build(&spec).map_err(|error| match error {
        VolumeTargetError::Invalid(message) => (2, message),
        VolumeTargetError::Build(message) => (1, message),
    })?;
    let description = json!({
        "kind": "volume",
        "model": spec.model.name(),
        "layout": layout.name(),
        "staging_percent": spec.staging_percent,
        "seed": seed,
        "size_bytes": spec.size_bytes,
    });
    Ok((Box::new(target), description))
}

/// The progress bar, the per-request CSV and the plots.
struct Observer {
    bar: ProgressBar,
    bytes_read: Arc<AtomicU64>,
    csv: Option<(PathBuf, BufWriter<File>)>,
    csv_error: Option<String>,
    plots: Option<ReplayPlots>,
}

impl Observer {
    fn new(
        per_request: Option<&PathBuf>,
        plots: Option<&Path>,
        bytes_read: Arc<AtomicU64>,
        file_bytes: u64,
    ) -> Result<Observer, String> {
        let bar = ProgressBar::with_draw_target(Some(file_bytes), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "replaying [{bar:30}] {bytes}/{total_bytes} of the trace, {msg} {elapsed_precise}",
        )
        .expect("the template is valid")
        .progress_chars("=> ");
        bar.set_style(style);
        let csv = match per_request {
            None => None,
            Some(path) => {
                let file = File::create(path).map_err(|error| format!("{}: {error}", path.display()))?;
                let mut writer = BufWriter::new(file);
                writeln!(
                    writer,
                    "sequence,line,device,operation,offset_bytes,length_bytes,recorded_issue_ns,recorded_response_ns,issue_ns,completion_ns,latency_ns,error"
                )
                .map_err(|error| format!("{}: {error}", path.display()))?;
                Some((path.clone(), writer))
            }
        };
        let plots = plots.map(ReplayPlots::new).transpose()?;
        Ok(Observer { bar, bytes_read, csv, csv_error: None, plots })
    }

    /// Flushes the CSV and writes the plots; returns the plot files written.
    fn finish(&mut self) -> Result<Vec<PathBuf>, String> {
        if let Some((path, writer)) = &mut self.csv {
            if let Err(error) = writer.flush() {
                self.csv_error.get_or_insert(format!("{}: {error}", path.display()));
            }
        }
        if let Some(error) = self.csv_error.take() {
            return Err(error);
        }
        self.plots.as_ref().map_or(Ok(Vec::new()), ReplayPlots::write)
    }
}

impl ReplayObserver for Observer {
    fn completed(&mut self, record: &RequestRecord) {
        if let Some(plots) = &mut self.plots {
            plots.completed(record);
        }
        let Some((path, writer)) = &mut self.csv else { return };
        if self.csv_error.is_some() {
            return;
        }
        let recorded = record.recorded_response_ns.map(|ns| ns.to_string()).unwrap_or_default();
        let written = writeln!(
            writer,
            "{},{},{},{},{},{},{},{recorded},{},{},{},{}",
            record.sequence,
            record.line_number,
            record.device,
            record.operation.name(),
            record.offset_bytes,
            record.length_bytes,
            record.recorded_issue_ns,
            record.issue_ns,
            record.completion_ns,
            record.completion_ns.saturating_sub(record.issue_ns),
            record.error.as_deref().unwrap_or_default()
        );
        if let Err(error) = written {
            self.csv_error = Some(format!("{}: {error}", path.display()));
        }
    }

    fn progress(&mut self, finished: u64) {
        self.bar.set_position(self.bytes_read.load(Ordering::Relaxed));
        self.bar.set_message(format!("{finished} requests"));
    }
}

fn print_summary(file_name: &str, format: TraceFormat, options: &ReplayOptions, report: &ReplayReport) {
    let skipped: u64 = report.skipped.iter().map(|(_, count)| count).sum();
    println!(
        "{file_name} ({format}), {} replay: {} requests ({} failed, {skipped} skipped) in {:.6} s",
        options.mode.name(),
        report.requests,
        report.failed,
        report.execution_time_s
    );
    println!(
        "IOPS {:.1}, {:.2} MB/s, latency mean {:.3} ms p50 {:.3} p99 {:.3} max {:.3}, queue depth {:.2}, reordered {:.4}",
        report.iops,
        report.throughput_mb_s,
        report.mean_latency_ms,
        report.p50_latency_ms,
        report.p99_latency_ms,
        report.max_latency_ms,
        report.mean_queue_depth,
        report.reordered_fraction
    );
    if let Some(recorded) = &report.recorded {
        println!(
            "recorded: {:.6} s, mean latency {:.3} ms; errors: execution time {:+.2} %, mean latency {:+.2} %",
            recorded.execution_time_s,
            recorded.mean_latency_ms,
            recorded.execution_time_error_percent,
            recorded.mean_latency_error_percent
        );
    }
}

fn report_json(report: &ReplayReport) -> Value {
    let skipped: serde_json::Map<String, Value> =
        report.skipped.iter().map(|(reason, count)| (reason.name().to_string(), json!(count))).collect();
    let recorded = report.recorded.map_or(Value::Null, |recorded| {
        json!({
            "execution_time_s": recorded.execution_time_s,
            "mean_latency_ms": recorded.mean_latency_ms,
            "iops": recorded.iops,
            "execution_time_error_percent": recorded.execution_time_error_percent,
            "mean_latency_error_percent": recorded.mean_latency_error_percent,
        })
    });
    json!({
        "requests": report.requests,
        "iops": report.iops,
        "mean_latency_ms": report.mean_latency_ms,
        "p99_latency_ms": report.p99_latency_ms,
        "execution_time_s": report.execution_time_s,
        "reordered_fraction": report.reordered_fraction,
        "failed": report.failed,
        "skipped": skipped,
        "late_records": report.late_records,
        "bytes": report.bytes,
        "throughput_mb_s": report.throughput_mb_s,
        "p50_latency_ms": report.p50_latency_ms,
        "p90_latency_ms": report.p90_latency_ms,
        "p999_latency_ms": report.p999_latency_ms,
        "max_latency_ms": report.max_latency_ms,
        "mean_queue_depth": report.mean_queue_depth,
        "reordered": report.reordered,
        "recorded": recorded,
    })
}
