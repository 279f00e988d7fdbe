//! `proxima disk ...`: the simulated hard disk's commands. `validate` replays a
//! DiskSim validate trace against a model and reports the demerit;
//! `validate-all` does so for every drive folder of a directory beside
//! DiskSim's own figures (known drives: `proxima_disk::validate::DISKSIM_REFERENCES`); `bench`
//! measures the simulator's own speed. The experiments (`strands`,
//! `closed-loop`) live in `disk_lab.rs` and share [`ModelArgs`] for
//! `--model NAME|FILE.parv` and repeated `--set 'disk0:PARAMETER=VALUE'`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, Subcommand};
use proxima_disk::closed_loop::{self, ClosedLoopConfig};
use proxima_disk::validate::{disksim_reference, drive_folders, parse_trace, replay, shipped_models_directory, Replay};
use proxima_disk::{DiskModel, DiskOp, LoadError, Override, Scheduler};

/// `proxima disk`.
#[derive(Debug, Args)]
pub struct DiskArgs {
    #[command(subcommand)]
    command: DiskCommand,
}

/// The `proxima disk` subcommands.
#[derive(Debug, Subcommand)]
enum DiskCommand {
    /// Replay a DiskSim "validate" trace closed-loop and report the RMS demerit.
    Validate(ValidateArgs),
    /// Validate every drive folder of DIR (default: the shipped models) against DiskSim's figures.
    ValidateAll(ValidateAllArgs),
    /// Measure simulated requests per wall-clock second (4 KiB random).
    Bench(BenchArgs),
    /// Strands of 4 KiB requests issued at once: response time, cost in OPs, extra revolutions.
    Strands(crate::disk_lab::StrandsArgs),
    /// Keep Q uniformly random requests outstanding: IOPS and mean response time.
    ClosedLoop(crate::disk_lab::ClosedLoopArgs),
}

/// The model a command runs: a built-in name or a `.parv` path, plus overrides.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// Built-in model (cheetah15k5, atlas10k, nearline7200, disk2003, disk2008, dsp3105) or a DiskSim `.parv` file.
    #[arg(long, default_value = "cheetah15k5")]
    pub model: String,
    /// Override one parameter, as DiskSim's command line: 'disk0:PARAMETER=VALUE' (repeatable).
    #[arg(long = "set", value_name = "COMPONENT:PARAMETER=VALUE")]
    pub set: Vec<String>,
}

impl ModelArgs {
    /// Parses the overrides and loads the model.
    pub fn load(&self) -> Result<Arc<DiskModel>, LoadError> {
        let overrides = parse_overrides(&self.set)?;
        DiskModel::resolve(&self.model, &overrides).map(Arc::new)
    }
}

/// Parses repeated `--set` values.
pub fn parse_overrides(texts: &[String]) -> Result<Vec<Override>, LoadError> {
    texts.iter().map(|text| Override::parse(text)).collect()
}

#[derive(Debug, Args)]
struct ValidateArgs {
    /// The DiskSim parameter file (`.parv`) or a built-in model name.
    #[arg(long)]
    parv: String,
    /// The validate trace: `R|W Hit|Miss blkno nblks measured_us next_interarrival_us` per line.
    #[arg(long)]
    trace: PathBuf,
    /// Override one parameter: 'disk0:PARAMETER=VALUE' (repeatable).
    #[arg(long = "set", value_name = "COMPONENT:PARAMETER=VALUE")]
    set: Vec<String>,
    /// Write each request's simulated and measured time (ms) as CSV.
    #[arg(long)]
    per_request: Option<PathBuf>,
    /// Seed for the platter's initial angle.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

#[derive(Debug, Args)]
struct ValidateAllArgs {
    /// A folder holding one folder per drive, each with a `.parv` and a validate `.trace`
    /// (default: the models shipped in the source tree, `crates/disk/models`).
    directory: Option<PathBuf>,
    /// Seed for the platters' initial angles.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

#[derive(Debug, Args)]
struct BenchArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Requests per measurement.
    #[arg(long, default_value_t = 1_000_000)]
    requests: u64,
    /// Seed for the request addresses.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Runs `proxima disk ...`.
pub fn run(args: DiskArgs) -> ExitCode {
    match args.command {
        DiskCommand::Validate(validate) => run_validate(&validate),
        DiskCommand::ValidateAll(validate_all) => run_validate_all(&validate_all),
        DiskCommand::Bench(bench) => run_bench(&bench),
        DiskCommand::Strands(strands) => crate::disk_lab::run_strands_command(&strands),
        DiskCommand::ClosedLoop(closed_loop) => crate::disk_lab::run_closed_loop_command(&closed_loop),
    }
}

fn bad_input(error: impl std::fmt::Display) -> ExitCode {
    eprintln!("proxima disk: {error}");
    ExitCode::from(2)
}

fn run_validate(args: &ValidateArgs) -> ExitCode {
    let model_args = ModelArgs { model: args.parv.clone(), set: args.set.clone() };
    let model = match model_args.load() {
        Ok(model) => model,
        Err(error) => return bad_input(error),
    };
    let text = match std::fs::read_to_string(&args.trace) {
        Ok(text) => text,
        Err(error) => return bad_input(format!("{}: {error}", args.trace.display())),
    };
    let trace_name = args.trace.display().to_string();
    let records = match parse_trace(&trace_name, &text) {
        Ok(records) => records,
        Err(error) => return bad_input(error),
    };
    let result = match replay(Arc::clone(&model), &records, args.seed) {
        Ok(result) => result,
        Err(error) => return bad_input(error),
    };
    if let Some(path) = &args.per_request {
        let mut csv = String::from("request,simulated_ms,measured_ms\n");
        for (index, (simulated, measured)) in result.simulated_ms.iter().zip(&result.measured_ms).enumerate() {
            csv.push_str(&format!("{index},{simulated:.6},{measured:.6}\n"));
        }
        if let Err(error) = std::fs::write(path, csv) {
            eprintln!("proxima disk validate: {}: {error}", path.display());
            return ExitCode::from(1);
        }
    }
    println!("model {} ({} sectors), trace {trace_name}, seed {}", model.name(), model.sector_count(), args.seed);
    println!(
        "requests {}: mean simulated {:.3} ms, mean measured {:.3} ms, RMS demerit {:.3} ms",
        records.len(),
        result.mean_simulated_ms(),
        result.mean_measured_ms(),
        result.rms_ms()
    );
    let json = serde_json::json!({
        "model": model.name(),
        "trace": trace_name,
        "seed": args.seed,
        "requests": records.len(),
        "mean_simulated_ms": result.mean_simulated_ms(),
        "mean_measured_ms": result.mean_measured_ms(),
        "rms_ms": result.rms_ms(),
    });
    println!("{json}");
    ExitCode::SUCCESS
}

/// Loads one drive folder (with DiskSim's overrides for it, if known) and
/// replays its trace.
fn validate_drive(drive: &proxima_disk::validate::DriveFiles, seed: u64) -> Result<Replay, LoadError> {
    let texts: Vec<String> = disksim_reference(&drive.name)
        .map(|reference| reference.overrides.iter().map(|text| text.to_string()).collect())
        .unwrap_or_default();
    let model = Arc::new(DiskModel::load(&drive.parv, &parse_overrides(&texts)?)?);
    let trace_name = drive.trace.display().to_string();
    let text = std::fs::read_to_string(&drive.trace)
        .map_err(|error| LoadError::Io { file: trace_name.clone(), message: error.to_string() })?;
    replay(model, &parse_trace(&trace_name, &text)?, seed)
}

fn run_validate_all(args: &ValidateAllArgs) -> ExitCode {
    let directory = args.directory.clone().unwrap_or_else(shipped_models_directory);
    let drives = match drive_folders(&directory) {
        Ok(drives) if drives.is_empty() => {
            return bad_input(format!("{}: no drive folder with a .parv and a .trace", directory.display()))
        }
        Ok(drives) => drives,
        Err(error) => return bad_input(error),
    };
    println!(
        "{:<14} {:>9} {:>9} {:>6} {:>11} {:>11} {:>11} {:>7}",
        "drive", "rms_ms", "disksim", "ratio", "mean_ms", "measured", "disksim", "error"
    );
    let mut rows = Vec::new();
    let mut failed = false;
    for drive in &drives {
        let reference = disksim_reference(&drive.name);
        let result = match validate_drive(drive, args.seed) {
            Ok(result) => result,
            Err(error) => {
                eprintln!("proxima disk validate-all: {}: {error}", drive.name);
                failed = true;
                rows.push(serde_json::json!({ "drive": drive.name, "error": error.to_string() }));
                continue;
            }
        };
        let (rms, simulated, measured) = (result.rms_ms(), result.mean_simulated_ms(), result.mean_measured_ms());
        let error_percent = 100.0 * (simulated - measured) / measured;
        let show = |value: Option<f64>, digits: usize| value.map_or("-".to_string(), |v| format!("{v:.digits$}"));
        println!(
            "{:<14} {:>9.4} {:>9} {:>6} {:>11.3} {:>11.3} {:>11} {:>6.2}%",
            drive.name,
            rms,
            show(reference.map(|r| r.rms_ms), 3),
            show(reference.map(|r| rms / r.rms_ms), 2),
            simulated,
            measured,
            show(reference.map(|r| r.mean_ms), 3),
            error_percent
        );
        rows.push(serde_json::json!({
            "drive": drive.name,
            "requests": result.simulated_ms.len(),
            "rms_ms": rms,
            "disksim_rms_ms": reference.map(|r| r.rms_ms),
            "ratio": reference.map(|r| rms / r.rms_ms),
            "mean_simulated_ms": simulated,
            "mean_measured_ms": measured,
            "disksim_mean_ms": reference.map(|r| r.mean_ms),
            "mean_error_percent": error_percent,
        }));
    }
    println!(
        "{}",
        serde_json::json!({ "directory": directory.display().to_string(), "seed": args.seed, "drives": rows })
    );
    if failed {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

/// Requests per wall second for one closed-loop configuration.
fn measure(model: &Arc<DiskModel>, scheduler: Scheduler, queue_depth: usize, args: &BenchArgs) -> f64 {
    let config = ClosedLoopConfig {
        queue_depth,
        scheduler,
        op: DiskOp::Read,
        sectors_per_request: 8,
        request_count: args.requests,
        seed: args.seed,
    };
    let started = Instant::now();
    let result = closed_loop::run(Arc::clone(model), &config);
    let seconds = started.elapsed().as_secs_f64().max(1e-9);
    eprintln!(
        "{scheduler:?} queue depth {queue_depth}: {} requests in {seconds:.3} s wall, {:.1} simulated IOPS",
        result.completed, result.iops
    );
    result.completed as f64 / seconds
}

fn run_bench(args: &BenchArgs) -> ExitCode {
    if args.requests == 0 {
        return bad_input("--requests must be positive");
    }
    let model = match args.model.load() {
        Ok(model) => model,
        Err(error) => return bad_input(error),
    };
    let fcfs = measure(&model, Scheduler::Fcfs, 1, args);
    let sptf = measure(&model, Scheduler::Sptf, 8, args);
    let json = serde_json::json!({
        "model": model.name(),
        "requests": args.requests,
        "seed": args.seed,
        "fcfs_qd1_requests_per_second": fcfs,
        "sptf_qd8_requests_per_second": sptf,
    });
    println!("{json}");
    ExitCode::SUCCESS
}
