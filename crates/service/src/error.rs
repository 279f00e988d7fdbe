//! The service's expected errors, each naming the directory, file, parameter or
//! export involved, and whether it is the user's input (exit code 2) or a failed
//! operation (exit code 1).

use std::path::PathBuf;

use proxima_device::{DeviceError, LabelError};
use proxima_engine::EngineError;
use thiserror::Error;

/// Everything the service can fail with.
#[derive(Debug, Error)]
pub enum ServiceError {
    /// The volume directory does not exist.
    #[error("volume directory {0} does not exist")]
    NoDirectory(PathBuf),
    /// The directory holds no volume configuration.
    #[error("{directory} is not a Proxima volume: {file} is missing (create one with `proxima volume create`)")]
    NotAVolume {
        /// The directory.
        directory: PathBuf,
        /// The configuration file expected in it.
        file: PathBuf,
    },
    /// `volume create` on a directory that already holds a volume.
    #[error("{0} already holds a Proxima volume")]
    AlreadyAVolume(PathBuf),
    /// The configuration file is not valid JSON of the expected shape.
    #[error("{file}:{line}:{column}: malformed volume configuration: {message}")]
    MalformedConfig {
        /// The file.
        file: PathBuf,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// The configuration is well formed but says something impossible.
    #[error("{file}: invalid volume configuration: {parameter}: {message}")]
    InvalidConfig {
        /// The file.
        file: PathBuf,
        /// The parameter at fault.
        parameter: String,
        /// What is wrong.
        message: String,
    },
    /// The configuration was written by a newer or unknown format.
    #[error("{file}: format_version {found} is not supported (this proxima reads version {supported})")]
    UnsupportedVersion {
        /// The file.
        file: PathBuf,
        /// The version found.
        found: u32,
        /// The version supported.
        supported: u32,
    },
    /// A bad parameter given to an operation (a size, a name, a flag combination).
    #[error("{parameter}: {message}")]
    InvalidParameter {
        /// The parameter.
        parameter: String,
        /// What is wrong.
        message: String,
    },
    /// A device path could not be prepared.
    #[error("device {path}: {message}")]
    DevicePath {
        /// The path.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A device's label is not the one the configuration expects: another
    /// volume's device, another role or member, or none at all.
    #[error("device {path}: {source}")]
    Label {
        /// The path.
        path: PathBuf,
        /// What the label says.
        source: LabelError,
    },
    /// `volume create` over a device that holds something.
    #[error("device {path} holds {what}; it is not overwritten without --force")]
    HoldsData {
        /// The path.
        path: PathBuf,
        /// What it holds.
        what: String,
    },
    /// A device failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The engine refused or failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A file of the volume directory could not be read or written.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The volume is opened by another process that offers no control socket.
    #[error("volume {directory} is in use by process {holder} (stop it first)")]
    InUse {
        /// The directory.
        directory: PathBuf,
        /// What the lock file says about its holder.
        holder: String,
    },
    /// Talking to a running server failed.
    #[error("control socket {path}: {message}")]
    Control {
        /// The socket.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// The operation needs the volume offline.
    #[error("{operation} needs the volume offline: stop `proxima serve` first")]
    NeedsOffline {
        /// The operation.
        operation: String,
    },
    /// The server failed.
    #[error(transparent)]
    Server(#[from] proxima_nbd::ServerError),
    /// The volume stopped serving after an internal failure and was not
    /// committed.
    #[error("{0}")]
    Stopped(String),
    /// An error reported by a running server over its control socket.
    #[error("{message}")]
    Remote {
        /// Whether the server judged it bad input.
        is_usage: bool,
        /// Its message.
        message: String,
    },
}

impl ServiceError {
    /// Whether the error is bad input from the user (exit code 2) rather than a
    /// failed operation (exit code 1).
    pub fn is_usage(&self) -> bool {
        match self {
            ServiceError::NoDirectory(_)
            | ServiceError::NotAVolume { .. }
            | ServiceError::AlreadyAVolume(_)
            | ServiceError::MalformedConfig { .. }
            | ServiceError::InvalidConfig { .. }
            | ServiceError::UnsupportedVersion { .. }
            | ServiceError::InvalidParameter { .. }
            | ServiceError::HoldsData { .. } => true,
            ServiceError::Label { source, .. } => {
                matches!(source, LabelError::Missing { .. } | LabelError::Mismatch { .. })
            }
            ServiceError::Engine(error) => matches!(
                error,
                EngineError::NoSuchExtent(_)
                    | EngineError::ExtentExists(_)
                    | EngineError::NoSuchSnapshot(_)
                    | EngineError::SnapshotExists(_)
                    | EngineError::InvalidName { .. }
                    | EngineError::InvalidRange(_)
            ),
            ServiceError::Remote { is_usage, .. } => *is_usage,
            ServiceError::Server(proxima_nbd::ServerError::Config { .. }) => true,
            _ => false,
        }
    }

    /// The exit code of a command that failed with this error.
    pub fn exit_code(&self) -> u8 {
        if self.is_usage() {
            2
        } else {
            1
        }
    }
}

/// The service's result type.
pub type Result<T, E = ServiceError> = std::result::Result<T, E>;
