//! Proxima as a block store: a volume lives in a directory (a configuration
//! file naming its data disks and flash device), is managed by extent and
//! snapshot operations, and is served over NBD, each extent an export and each
//! snapshot's extents read-only exports `EXTENT@SNAPSHOT`.
//!
//! - [`config`]: the versioned configuration file.
//! - [`devices`]: files and block devices (page cache or `O_DIRECT`), RAID.
//! - [`directory`]: creating and opening a volume directory, its lock.
//! - [`adapter`]: the NBD [`proxima_nbd::Backend`] over an engine volume.
//! - [`read_ahead`]: many-stream read-ahead on the exports' read path.
//! - [`operations`]: extent, snapshot, status and fsck operations, run locally
//!   or inside a running server through its control socket.
//! - [`status`]: the status report and the fragmentation figure.
//! - [`serve`]: the server of `proxima serve`.
//! - [`size`]: sizes with K/M/G/T suffixes.

#![warn(clippy::cast_possible_truncation)]

pub mod adapter;
pub mod config;
pub mod devices;
pub mod directory;
pub mod error;
pub mod operations;
pub mod read_ahead;
pub mod serve;
pub mod size;
pub mod status;

pub use adapter::{SharedVolume, VolumeBackend, VolumeExport};
pub use config::{RaidChoice, VolumeConfig, CONFIG_FILE_NAME};
pub use devices::{open_file, DataDevice, IoMode, TrimPolicy};
pub use directory::{create_volume, open_volume, CreateSpec, OpenVolume, ServiceVolume, VolumeLock};
pub use error::{Result, ServiceError};
pub use operations::{execute, run_request, Request, Venue};
pub use read_ahead::{ReadAheadChoice, ReadAheadOverrides, ReadAheadStats};
pub use serve::{serve, ServeOptions, ServeReady, ServeSummary};
pub use size::{format_size, parse_size, SizeError};
pub use status::StatusReport;
