//! Simulated storage devices in virtual time: the discrete-event clock, the
//! hard-disk model, the DiskSim 4.0 parameter loader, and the flash model.
//!
//! Time is an integer count of nanoseconds ([`Nanos`]). A [`Simulation`] owns the
//! clock and any number of [`SimDevice`]s ([`HardDisk`], [`FlashDevice`]); devices
//! never read wall time, so the same seed and the same requests give the same
//! completions, bit for bit.
//!
//! A [`DiskModel`] is an immutable drive description loaded from DiskSim 4.0
//! parameter files (or one of the built-ins); a [`HardDisk`] is one drive's
//! mutable state (arm position, queue, cache) running that model.

mod cache;
pub mod closed_loop;
mod disk;
mod flash;
mod mapping;
mod model;
pub mod params;
mod rotation;
mod seek;
mod sim;
pub mod validate;

pub use disk::HardDisk;
pub use flash::{FlashDevice, FlashParams};
pub use mapping::{PhysicalSector, TrackExtent};
pub use model::{CacheParams, DiskModel, Override};
pub use seek::SeekCurve;
pub use sim::{DeviceIndex, SimDevice, Simulation};

use thiserror::Error;

/// Virtual time and durations, in nanoseconds.
pub type Nanos = u64;

/// The operation of a disk request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiskOp {
    /// Read sectors from the medium (or the drive's cache).
    Read,
    /// Write sectors to the medium (or the drive's cache, with write-back).
    Write,
}

/// One request delivered to a simulated device, addressed in 512-byte sectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskRequest {
    /// Caller's identifier, returned in the completion.
    pub id: u64,
    /// Read or write.
    pub op: DiskOp,
    /// First logical block (sector) addressed.
    pub lbn: u64,
    /// Number of sectors (at least 1).
    pub sector_count: u32,
}

/// The completion of one request, with its times on the simulation clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskCompletion {
    /// The request's identifier.
    pub id: u64,
    /// Read or write.
    pub op: DiskOp,
    /// First logical block addressed.
    pub lbn: u64,
    /// Number of sectors.
    pub sector_count: u32,
    /// When the request arrived at the device.
    pub arrival_ns: Nanos,
    /// When the device started working on it (left the queue).
    pub start_ns: Nanos,
    /// When the device reported it complete.
    pub completion_ns: Nanos,
}

impl DiskCompletion {
    /// Response time: completion minus arrival.
    pub fn response_ns(&self) -> Nanos {
        self.completion_ns - self.arrival_ns
    }
}

/// The on-disk queue's scheduling policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheduler {
    /// First come, first served.
    Fcfs,
    /// Shortest positioning time first: the queued request whose seek plus
    /// rotational latency from the current head position is least.
    Sptf,
    /// Circular LOOK: ascending cylinders, then back to the lowest queued one.
    CLook,
}

impl Scheduler {
    /// Parses `fcfs`, `sptf` or `clook` (case-insensitive).
    pub fn parse(text: &str) -> Option<Scheduler> {
        match text.to_ascii_lowercase().as_str() {
            "fcfs" => Some(Scheduler::Fcfs),
            "sptf" => Some(Scheduler::Sptf),
            "clook" | "c-look" => Some(Scheduler::CLook),
            _ => None,
        }
    }
}

/// Why a model, override or trace could not be loaded.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum LoadError {
    /// A file could not be read.
    #[error("{file}: cannot read: {message}")]
    Io {
        /// The file.
        file: String,
        /// The operating system's reason.
        message: String,
    },
    /// The text is not valid DiskSim parameter syntax.
    #[error("{file}:{line}: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// One-based line.
        line: u32,
        /// What was wrong.
        message: String,
    },
    /// A value has the wrong form or is out of range.
    #[error("{file}:{line}: parameter `{parameter}`: {message}")]
    BadValue {
        /// The file.
        file: String,
        /// One-based line.
        line: u32,
        /// The parameter.
        parameter: String,
        /// What was wrong.
        message: String,
    },
    /// A required parameter is absent.
    #[error("{file}:{line}: block `{block}` lacks required parameter `{parameter}`")]
    MissingParameter {
        /// The file.
        file: String,
        /// Line where the block starts.
        line: u32,
        /// The block's name or type.
        block: String,
        /// The missing parameter.
        parameter: String,
    },
    /// A valid DiskSim feature this simulator does not model.
    #[error("{file}:{line}: parameter `{parameter}`: unsupported value `{value}`: {message}")]
    Unsupported {
        /// The file.
        file: String,
        /// One-based line.
        line: u32,
        /// The parameter.
        parameter: String,
        /// The value given.
        value: String,
        /// What is supported instead.
        message: String,
    },
    /// A structural problem spanning a whole file (no disk, inconsistent layout).
    #[error("{file}: {message}")]
    Model {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A `--set` override is malformed or names nothing.
    #[error("override `{text}`: {message}")]
    BadOverride {
        /// The override as given.
        text: String,
        /// What was wrong.
        message: String,
    },
    /// No built-in model has this name.
    #[error("no built-in disk model `{name}` (built-ins: {known})")]
    UnknownModel {
        /// The name asked for.
        name: String,
        /// The built-in names, comma separated.
        known: String,
    },
}

impl LoadError {
    /// Attaches the parameter name to a syntax error raised inside its value.
    pub(crate) fn with_parameter(self, parameter: &str) -> LoadError {
        match self {
            LoadError::Syntax { file, line, message } => {
                LoadError::Syntax { file, line, message: format!("in parameter `{parameter}`: {message}") }
            }
            other => other,
        }
    }
}
