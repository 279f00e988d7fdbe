//! The copy-on-write data layout engine: volumes, extents, consistency points,
//! snapshots, free space, layout policies, recovery and fsck.
//!
//! A [`Volume`] keeps named extents on a data device and a flash device (any
//! [`proxima_device::BlockDevice`]). The on-disk format is specified in
//! docs/format.md; the design is described in ARCHITECTURE.md ("Engine").

mod bitmap;
mod checkpoint;
mod checksums;
pub mod chunked;
pub mod codec;
mod destage;
mod error;
pub mod fsck;
mod io;
mod layout;
mod log;
pub mod map;
mod pages;
pub mod policy;
mod read;
mod room;
mod scrub;
mod snapshot;
mod space;
mod synthetic;
mod tree;
mod volume;

pub use destage::{DestageBatchReport, DestageObserver, DestageSummary, NoDestageObserver};
pub use error::{DeviceRole, EngineError, Result};
pub use fsck::{check as fsck_devices, Finding, FindingKind, FsckReport, FsckScope};
pub use log::{CorruptStagedBlock, LogEnd, RecoveryReport};
pub use map::Location;
pub use policy::{Layout, LayoutParameters, Placement, WriteContext};
pub use scrub::ScrubReport;
pub use snapshot::SnapshotInfo;
pub use synthetic::ReadReport;
pub use volume::{
    BatchedWrite, BlockStatus, DeviceSpace, EngineStats, ExtentInfo, Overcommit, SpaceReport, StagingFill, Volume,
    VolumeOptions, MAX_RECORDS_PER_CHECKPOINT, MIN_FLASH_BLOCKS,
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
