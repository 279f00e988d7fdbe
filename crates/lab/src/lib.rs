//! The laboratory: each reproduced table or figure of a paper, measured on
//! simulated drives in virtual time, with CSV, plots and a markdown report.
//!
//! The crate is arranged by what a module is for:
//!
//! - [`experiment`]: the typed interface every experiment implements (its name,
//!   its own command-line parameters, the rows it measures, the headline it
//!   reports, and how rows become CSV, plots and `report.md`), the one
//!   skeleton that runs an experiment and writes its files, and the
//!   [`Registration`] through which `proxima reproduce` knows it.
//! - [`rig`]: what experiments run on, shared by every seed:
//!   [`rig::testbed`] (the simulated RAID-4 and flash device),
//!   [`rig::lab_volume`] (a volume over the testbed, filled, aged and read by
//!   the serial-read-after-random-write workload of `proxima_workload::srarw`),
//!   [`rig::measure`] (per-batch and per-disk figures) and [`rig::parallel`]
//!   (independent simulations on several threads).
//! - [`report`]: how results are written: [`report::table`] (CSV and markdown
//!   tables), [`report::plot`] (SVG plots), [`report::markdown`] (the files of
//!   an experiment and its report) and [`report::cost`] (a run's wall time and
//!   memory).
//! - One module per seed paper, holding that paper's figures and its
//!   experiments: [`seed000_proximal`] (proximal I/O: `proximal-disk`,
//!   `proximal-table2`, `proximal-table3`, `proximal-srarw`,
//!   `proximal-snapshots`); [`seed001_hylog`] (HyLog: the write-cost model
//!   [`seed001_hylog::cost_model`] and `hylog-model`); [`seed002_priority`] (request-centric I/O
//!   priority: `foreground-priority`); [`seed002_wafl`] (WAFL delete logging:
//!   `wafl-delete`, `wafl-overwrite`); [`seed002_aging`] (file-system aging
//!   and the layout score: `aging`); [`seed003_realloc`] (reallocate-on-read:
//!   `realloc-on-read`); [`seed004_prefetch`] (many-stream prefetch:
//!   `many-streams`).
//! - [`progress`]: how a long experiment reports its progress to whoever runs it.
//!
//! [`EXPERIMENTS`] lists every experiment `proxima reproduce` can run; adding
//! one is a file (or folder) under its seed's module implementing
//! [`Experiment`], and one line there.

pub mod experiment;
pub mod progress;
pub mod report;
pub mod rig;
pub mod seed000_proximal;
pub mod seed001_hylog;
pub mod seed002_aging;
pub mod seed002_priority;
pub mod seed002_wafl;
pub mod seed003_realloc;
pub mod seed004_prefetch;

use std::path::PathBuf;

use thiserror::Error;

pub use crate::experiment::{Experiment, ExperimentOutcome, Registered, Registration, RunSettings};

/// Every experiment `proxima reproduce` knows, in the order its help lists them.
pub const EXPERIMENTS: &[&dyn Registered] = &[
    &Registration::<seed000_proximal::disk::ProximalDisk>::NEW,
    &Registration::<seed000_proximal::table2::ProximalTable2>::NEW,
    &Registration::<seed000_proximal::table3::ProximalTable3>::NEW,
    &Registration::<seed000_proximal::srarw::ProximalSrarw>::NEW,
    &Registration::<seed000_proximal::snapshots::ProximalSnapshots>::NEW,
    &Registration::<seed001_hylog::hylog_model::HylogModel>::NEW,
    &Registration::<seed001_hylog::hylog_cleaning::HylogCleaning>::NEW,
    &Registration::<seed001_hylog::hylog_table3::HylogTable3>::NEW,
    &Registration::<seed001_hylog::hylog_throughput::HylogThroughput>::NEW,
    &Registration::<seed001_hylog::hylog_proximal::HylogProximal>::NEW,
    &Registration::<seed002_priority::foreground_priority::ForegroundPriority>::NEW,
    &Registration::<seed002_aging::aging::Aging>::NEW,
    &Registration::<seed002_wafl::delete::WaflDelete>::NEW,
    &Registration::<seed002_wafl::overwrite::WaflOverwrite>::NEW,
    &Registration::<seed003_realloc::realloc_on_read::ReallocOnRead>::NEW,
    &Registration::<seed004_prefetch::many_streams::ManyStreams>::NEW,
];

/// The experiment named `name`.
pub fn find_experiment(name: &str) -> Option<&'static dyn Registered> {
    EXPERIMENTS.iter().copied().find(|experiment| experiment.name() == name)
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
    #[error("simulated device: {0}")]
    Device(#[from] proxima_device::DeviceError),
    /// The engine refused an operation of the workload.
    #[error("engine: {0}")]
    Engine(#[from] proxima_engine::EngineError),
    /// A plot could not be drawn.
    #[error("cannot draw the plot {path}: {message}")]
    Plot {
        /// The SVG file.
        path: PathBuf,
        /// The plotting library's reason.
        message: String,
    },
}
