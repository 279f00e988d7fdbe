//! Experiments: each reproduced table or figure, with CSV, plots and markdown reports.
//!
//! - [`birthday`]: the analytical model of missed revolutions in a strand.
//! - [`table`] and [`plot`]: the CSV tables and SVG plots experiments write.
//! - [`progress`]: how a long experiment reports its progress to whoever runs it.
//! - [`placement`]: where a strand's requests go (track-approximate, proximal,
//!   semi-sequential, random) and their issue order.
//! - [`strands`]: strands on a simulated disk: response time, cost in OPs, extra
//!   revolutions.
//! - [`closed_loop`]: closed-loop random I/O, and the OP it defines.
//! - [`proximal_disk`]: the `proximal-disk` experiment (the paper's Figures 1–2
//!   and Appendix A).
//! - [`testbed`]: the simulated RAID-4 and flash device of the layout experiments.
//! - [`measure`]: per-batch and per-disk figures of those experiments.
//! - [`srarw`]: the serial-read-after-random-write workload on a volume over the
//!   testbed (fill, age, read), at any scale.
//! - [`layout_experiments`]: what the layout experiments share (settings, the
//!   paper's figures, run cost, definitions).
//! - [`parallel`]: their independent simulations run on several threads.
//! - [`proximal_table2`]: the `proximal-table2` experiment (the paper's Table 2).
//! - [`proximal_table3`]: the `proximal-table3` experiment (Table 3: serial reads
//!   after random writes, proximal and write-anywhere).
//! - [`proximal_srarw`]: the `proximal-srarw` experiment (proximal against
//!   in-place and write-anywhere: throughput, reads, cost per IOPS).
//!
//! [`EXPERIMENTS`] lists every experiment `proxima reproduce` can run; adding one is
//! one line there.

pub mod birthday;
pub mod closed_loop;
pub mod layout_experiments;
pub mod measure;
pub mod parallel;
pub mod placement;
pub mod plot;
pub mod progress;
pub mod proximal_disk;
pub mod proximal_srarw;
pub mod proximal_table2;
pub mod proximal_table3;
pub mod srarw;
pub mod strands;
pub mod table;
pub mod testbed;

use std::path::PathBuf;

use thiserror::Error;

use crate::progress::Progress;

/// Settings shared by every reproduced experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct ReproduceOptions {
    /// Directory that receives the CSV files, plots and `report.md`.
    pub out_dir: PathBuf,
    /// Seed of every simulation in the run.
    pub seed: u64,
    /// Disk model: a built-in name or a DiskSim `.parv` path.
    pub model: String,
    /// Strands simulated per point of a figure.
    pub strand_count: u32,
    /// Fraction of the paper's full size to simulate, for experiments that scale
    /// (`None`: the experiment's default).
    pub scale: Option<f64>,
    /// Independent simulations run at once (1: one after another). The results
    /// are the same; peak memory is the sum of the simulations in flight.
    pub jobs: usize,
}

/// What an experiment produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ExperimentOutcome {
    /// A short human-readable table of the headline figures.
    pub summary: String,
    /// The headline figures as one JSON object.
    pub headline: serde_json::Value,
    /// The markdown report written.
    pub report_path: PathBuf,
}

/// A reproducible experiment.
#[derive(Debug, Clone, Copy)]
pub struct Experiment {
    /// Its name on the command line.
    pub name: &'static str,
    /// One line saying what it regenerates.
    pub description: &'static str,
    /// Strands per point in a default run (a couple of minutes at most in release).
    pub default_strand_count: u32,
    /// The drive model when none is given.
    pub default_model: &'static str,
    /// The scale when none is given (`None`: the experiment does not scale).
    pub default_scale: Option<f64>,
    /// Runs it.
    pub run: fn(&ReproduceOptions, &mut dyn Progress) -> Result<ExperimentOutcome, LabError>,
}

/// Every experiment `proxima reproduce` knows.
pub const EXPERIMENTS: &[Experiment] = &[
    Experiment {
        name: proximal_disk::NAME,
        description: "proximal I/O paper, Section 2 and Appendix A: Figures 1-2, issue order, birthday model",
        default_strand_count: 1000,
        default_model: "cheetah15k5",
        default_scale: None,
        run: proximal_disk::run,
    },
    Experiment {
        name: proximal_table2::NAME,
        description: "proximal I/O paper, Table 2: random updates destaged from 1-10 % staging areas on RAID-4",
        default_strand_count: 0,
        default_model: layout_experiments::DEFAULT_MODEL,
        default_scale: Some(layout_experiments::DEFAULT_SCALE),
        run: proximal_table2::run,
    },
    Experiment {
        name: proximal_table3::NAME,
        description: "proximal I/O paper, Table 3: serial reads after random writes, proximal and write-anywhere",
        default_strand_count: 0,
        default_model: layout_experiments::DEFAULT_MODEL,
        default_scale: Some(layout_experiments::DEFAULT_SCALE),
        run: proximal_table3::run,
    },
    Experiment {
        name: proximal_srarw::NAME,
        description: "proximal I/O paper, Sections 5.3-5.4: proximal vs in-place vs write-anywhere, cost per IOPS",
        default_strand_count: 0,
        default_model: layout_experiments::DEFAULT_MODEL,
        default_scale: Some(layout_experiments::DEFAULT_SCALE),
        run: proximal_srarw::run,
    },
];

/// The experiment named `name`.
pub fn find_experiment(name: &str) -> Option<&'static Experiment> {
    EXPERIMENTS.iter().find(|experiment| experiment.name == name)
}

/// Why an experiment could not run or could not write its results.
#[derive(Debug, Error)]
pub enum LabError {
    /// A parameter of the experiment is out of range.
    #[error("invalid {parameter}: {message}")]
    InvalidParameter {
        /// The parameter, as the command line names it.
        parameter: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// An output directory could not be created.
    #[error("cannot create directory {path}: {source}")]
    CreateDirectory {
        /// The directory.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// An output file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The disk model could not be loaded.
    #[error("disk model: {source}")]
    Model {
        /// The loader's reason, naming the file, line and parameter.
        source: proxima_disk::LoadError,
    },
    /// A simulated device refused the testbed's configuration or a request.
    #[error("simulated device: {message}")]
    Device {
        /// The device's reason, naming the device and block.
        message: String,
    },
    /// The engine refused an operation of the workload.
    #[error("engine: {message}")]
    Engine {
        /// The engine's reason.
        message: String,
    },
    /// A plot could not be drawn.
    #[error("cannot draw the plot {path}: {message}")]
    Plot {
        /// The SVG file.
        path: PathBuf,
        /// The plotting library's reason.
        message: String,
    },
}
