//! The copy-on-write data layout engine: volumes, extents, consistency points,
//! snapshots, free space, layouts, recovery and fsck.
//!
//! A [`Volume`] keeps named extents on a data device and a flash device (any
//! [`proxima_device::BlockDevice`]). The on-disk format is specified in
//! docs/format.md; the design is described in ARCHITECTURE.md ("Engine").

#![warn(clippy::cast_possible_truncation)]

mod bitmap;
mod checkpoint;
mod checksums;
pub mod chunked;
mod cleaner;
pub mod cleaning;
mod clone;
pub mod codec;
pub mod content;
mod copy_out;
mod delete_log;
mod destage;
mod entries;
mod error;
mod extents;
mod free_space_view;
pub mod fsck;
mod health;
mod io;
pub mod layouts;
mod log;
pub mod map;
mod pages;
pub mod prefetch;
pub mod priority;
mod read;
pub mod realloc;
mod refcount;
mod room;
mod scrub;
mod segment_summary;
pub mod segments;
mod snapshot;
mod space;
mod staged_cache;
mod staging;
mod synthetic;
mod tree;
mod volume;
pub mod write_cost;

pub use cleaner::CleaningReport;
pub use cleaning::{CleaningMethod, CleaningPolicy, CleaningSettings};
pub use clone::CloneSource;
pub use delete_log::{DeleteLogMode, DeleteLogStats, ENTRIES_PER_LOG_BLOCK};
pub use destage::{DestageBatchReport, DestageObserver, DestagePlan, DestageScope, DestageSummary, NoDestageObserver};
pub use error::{DeviceRole, EngineError, Result, Unsuitable};
pub use free_space_view::{FreeSpaceView, SnapshotSpaceView};
pub use fsck::{check as fsck_devices, Finding, FindingKind, FsckReport, FsckScope};
pub use layouts::{DestageRule, Layout, LayoutParameters, LayoutStrategy, Placement, WriteContext};
pub use log::{CorruptStagedBlock, LogEnd, RecoveryReport};
pub use map::{LayoutScore, Location};
pub use realloc::ReadRealloc;
pub use scrub::ScrubReport;
pub use snapshot::SnapshotInfo;
pub use synthetic::ReadReport;
pub use volume::{
    fixed_metadata_blocks, format_flash_blocks, BatchedWrite, BlockStatus, DeviceSpace, EngineStats, ExtentInfo,
    Overcommit, SnapshotDeletion, SpaceReport, StagingFill, Volume, VolumeOptions, MAX_RECORDS_PER_CHECKPOINT,
    MIN_FLASH_BLOCKS,
};

use proxima_device::BlockDevice;

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    /// Commits a CP, then checks the durable state on the devices, data
    /// included.
    pub fn fsck(&mut self) -> Result<FsckReport> {
        self.fsck_scope(FsckScope::MetadataAndData)
    }

    /// Commits a CP, then checks the durable state on the devices.
    pub fn fsck_scope(&mut self, scope: FsckScope) -> Result<FsckReport> {
        self.commit()?;
        fsck::check(&mut self.data, &mut self.flash, scope)
    }
}
