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

pub mod birthday;
pub mod closed_loop;
pub mod placement;
pub mod plot;
pub mod progress;
pub mod strands;
pub mod table;

use std::path::PathBuf;

use thiserror::Error;

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
    /// A plot could not be drawn.
    #[error("cannot draw the plot {path}: {message}")]
    Plot {
        /// The SVG file.
        path: PathBuf,
        /// The plotting library's reason.
        message: String,
    },
}
