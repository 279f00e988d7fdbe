//! `proxima sweep SPEC`: runs every cell of a parameter grid (a `proxima
//! replay` or `proxima reproduce` per cell, each its own process), on this
//! machine's cores or as Ray tasks (`--ray ADDRESS`), and collects one table
//! (CSV and Arrow IPC) and plots.
//!
//! **Resuming.** Each cell's result is stored in `OUT/cells/KEY.json` the
//! moment it finishes (written aside and renamed, so a stored result is
//! whole). A run stores nothing else before its end, so a sweep stopped at any
//! point and run again runs exactly the cells without a stored result; the
//! table and plots are rebuilt from every stored result, in grid order, so
//! they do not depend on which run ran what, nor on where.
//!
//! Last line of standard output: `{"cells", "ran", "skipped", "failed",
//! "table", "arrow", "plots"}`. Exit 0, 1 when a cell failed (the others
//! still run and are stored), 2 for a bad SPEC or options.

mod execute;
mod plots;
mod ray;
mod spec;
mod table;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};

use execute::{run_local, CellRun};
use spec::{Cell, Spec, SweepCommand};
use table::Table;

/// `proxima sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The sweep's specification (TOML): the command, the options every cell takes, the grid.
    spec: PathBuf,
    /// Where the cells' results, the table and the plots go [default: out/sweep-NAME, NAME the SPEC's file stem].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Cells run at once on this machine [default: the number of cores].
    #[arg(long)]
    jobs: Option<usize>,
    /// Run each cell as a Ray task on the cluster at this address (as `ray.init` takes it: HOST:PORT, ray://HOST:PORT, auto).
    #[arg(long, value_name = "ADDRESS")]
    ray: Option<String>,
    /// With --ray: the Python that has Ray [default: $PROXIMA_RAY_VENV/bin/python, or ~/.cache/proxima/ray-venv/bin/python, as tools/ray/setup.sh installs it].
    #[arg(long, value_name = "PATH")]
    ray_python: Option<PathBuf>,
}

/// Runs `proxima sweep`.
pub fn run(args: &SweepArgs) -> ExitCode {
    let started = Instant::now();
    if args.ray.is_some() && args.jobs.is_some() {
        return fail(2, "--jobs applies to a local run, not --ray (the cluster decides how many run at once)");
    }
    if args.ray.is_none() && args.ray_python.is_some() {
        return fail(2, "--ray-python applies with --ray");
    }
    if args.jobs == Some(0) {
        return fail(2, "--jobs must be at least 1");
    }
    let spec = match Spec::load(&args.spec) {
        Ok(spec) => spec,
        Err(error) => return fail(2, &error.to_string()),
    };
    let out = args.out.clone().unwrap_or_else(|| default_out(&args.spec));
    let store = match Store::open(&out) {
        Ok(store) => store,
        Err(message) => return fail(1, &message),
    };
    let cells = spec.cells();
    let mut results: Vec<Option<Value>> = cells.iter().map(|cell| store.load(cell)).collect();
    let missing: Vec<&Cell> =
        cells.iter().zip(&results).filter(|(_, result)| result.is_none()).map(|(c, _)| c).collect();
    let skipped = cells.len() - missing.len();
    let binary = match std::env::current_exe() {
        Ok(binary) => binary,
        Err(error) => return fail(1, &format!("cannot find the proxima binary: {error}")),
    };
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let where_run = match &args.ray {
        Some(address) => format!("Ray at {address}"),
        None => format!("{jobs} local workers"),
    };
    println!(
        "sweep {}: {} cells, {} stored, {} to run on {where_run}",
        args.spec.display(),
        cells.len(),
        skipped,
        missing.len()
    );
    let bar = progress_bar(cells.len(), skipped);
    let requests: Vec<(usize, Vec<String>)> =
        missing.iter().map(|cell| (cell.index, command_args(&spec, cell, &store))).collect();
    let mut failures = Vec::new();
    let mut finished = |index: usize, run: CellRun| {
        let cell = &cells[index];
        match run.result() {
            Ok(result) => match store.save(cell, &result) {
                Ok(()) => results[index] = Some(result),
                Err(message) => failures.push(message),
            },
            Err(message) => failures.push(format!("cell {} ({}): {message}", cell.key, describe(cell))),
        }
        bar.inc(1);
    };
    let outcome = match &args.ray {
        None => {
            run_local(&binary, requests, jobs, &mut finished);
            Ok(())
        }
        Some(address) => {
            ray::run_ray(address, args.ray_python.as_deref(), &binary, store.folder(), requests, &mut finished)
        }
    };
    bar.finish_and_clear();
    if let Err(message) = outcome {
        failures.push(message);
    }
    let ran = missing.len();
    let failed = cells.iter().zip(&results).filter(|(_, result)| result.is_none()).count();
    for failure in &failures {
        eprintln!("proxima sweep: {failure}");
    }
    let written = match write_outputs(&spec, &cells, &results, store.folder()) {
        Ok(written) => written,
        Err(message) => return fail(1, &message),
    };
    println!("ran {ran} cells ({failed} without a result), skipped {skipped} stored ones");
    println!("table: {} and {}", written.csv.display(), written.arrow.display());
    println!("wall {:.3} s", started.elapsed().as_secs_f64());
    let plots: Vec<String> = written.plots.iter().map(|path| path.display().to_string()).collect();
    let headline = json!({
        "cells": cells.len(),
        "ran": ran,
        "skipped": skipped,
        "failed": failed,
        "table": written.csv.display().to_string(),
        "arrow": written.arrow.display().to_string(),
        "plots": plots,
    });
    println!("{headline}");
    if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn fail(code: u8, message: &str) -> ExitCode {
    eprintln!("proxima sweep: {message}");
    ExitCode::from(code)
}

/// `out/sweep-NAME`, NAME the SPEC's file stem.
fn default_out(spec: &Path) -> PathBuf {
    let stem = spec.file_stem().map_or("sweep".into(), |stem| stem.to_string_lossy().into_owned());
    Path::new("out").join(format!("sweep-{stem}"))
}

/// "name=value, ..." of a cell's parameters.
fn describe(cell: &Cell) -> String {
    let parts: Vec<String> =
        cell.parameters.iter().map(|(name, value)| format!("{name}={}", spec::text_of(value))).collect();
    parts.join(", ")
}

/// The cell's `proxima` arguments; an experiment writes into the cell's own folder.
fn command_args(spec: &Spec, cell: &Cell, store: &Store) -> Vec<String> {
    let mut args = cell.args.clone();
    if let SweepCommand::Reproduce { .. } = spec.command {
        args.push("--out".into());
        args.push(store.folder().join("cells").join(&cell.key).display().to_string());
    }
    args
}

fn progress_bar(cells: usize, skipped: usize) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(cells as u64), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("sweeping [{bar:30}] {pos}/{len} cells {elapsed_precise} (eta {eta})")
        .expect("the template is valid")
        .progress_chars("=> ");
    bar.set_style(style);
    bar.set_position(skipped as u64);
    bar
}

/// What the run wrote besides the cells.
struct Written {
    csv: PathBuf,
    arrow: PathBuf,
    plots: Vec<PathBuf>,
}

/// The table of every stored result, in grid order, and its plots.
fn write_outputs(spec: &Spec, cells: &[Cell], results: &[Option<Value>], folder: &Path) -> Result<Written, String> {
    let rows = cells
        .iter()
        .zip(results)
        .filter_map(|(cell, result)| Some((cell.key.as_str(), &cell.parameters[..], result.as_ref()?)));
    let table = Table::from_rows(rows);
    let csv = folder.join("sweep.csv");
    table.write_csv(&csv).map_err(|error| format!("{}: {error}", csv.display()))?;
    let arrow = folder.join("sweep.arrow");
    table.write_arrow(&arrow).map_err(|error| format!("{}: {error}", arrow.display()))?;
    let metrics = spec
        .plots
        .clone()
        .unwrap_or_else(|| plots::default_metrics(&table, spec.axes.len(), spec.command == SweepCommand::Replay));
    let done: Vec<Cell> =
        cells.iter().zip(results).filter(|(_, result)| result.is_some()).map(|(cell, _)| cell.clone()).collect();
    let plots = plots::write_plots(&folder.join("plots"), &spec.axes, &done, &table, &metrics)?;
    Ok(Written { csv, arrow, plots })
}

/// The sweep's folder and its stored cell results.
struct Store {
    folder: PathBuf,
}

impl Store {
    fn open(folder: &Path) -> Result<Store, String> {
        std::fs::create_dir_all(folder.join("cells")).map_err(|error| format!("{}: {error}", folder.display()))?;
        Ok(Store { folder: folder.to_path_buf() })
    }

    fn folder(&self) -> &Path {
        &self.folder
    }

    fn path(&self, cell: &Cell) -> PathBuf {
        self.folder.join("cells").join(format!("{}.json", cell.key))
    }

    /// The cell's stored result, if one was stored for the same arguments.
    fn load(&self, cell: &Cell) -> Option<Value> {
        let text = std::fs::read_to_string(self.path(cell)).ok()?;
        let stored: Value = serde_json::from_str(&text).ok()?;
        let same_args = stored["args"].as_array().is_some_and(|args| {
            args.len() == cell.args.len() && args.iter().zip(&cell.args).all(|(stored, arg)| stored == arg)
        });
        same_args.then(|| stored["result"].clone())
    }

    /// Stores the cell's result whole: written aside, then renamed.
    fn save(&self, cell: &Cell, result: &Value) -> Result<(), String> {
        let parameters: serde_json::Map<String, Value> = cell.parameters.iter().cloned().collect();
        let record = json!({ "key": cell.key, "parameters": parameters, "args": cell.args, "result": result });
        let path = self.path(cell);
        let aside = path.with_extension("json.partial");
        std::fs::write(&aside, format!("{record}\n"))
            .and_then(|()| std::fs::rename(&aside, &path))
            .map_err(|error| format!("{}: {error}", path.display()))
    }
}
