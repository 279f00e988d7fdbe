//! The NBD backend over an engine volume: every extent is a writable export of
//! its own name, and every extent of every live snapshot a read-only export
//! `EXTENT@SNAPSHOT`.
//!
//! All exports share one volume behind one reader-writer lock. Reads of the
//! active extents run under the read lock, several at once, through
//! `Volume::read_shared` (the devices read through `&self`; copy-on-write means
//! no block a read resolved is reused while the read lock is held, since reuse
//! needs a CP and a CP needs the write lock). Everything else — writes, trims,
//! flushes, snapshot reads (which may load a snapshot's map), management — runs
//! whole under the write lock, and each request is replied to only after the
//! engine call returns, so:
//! - a write completed (replied to) on any connection is in the volume's state
//!   before any later request on any connection sees the volume, and
//! - `Volume::flush` makes durable every write the volume has accepted,
//!   whichever connection sent it.
//!
//! A FLUSH on one connection therefore covers the writes completed on all of
//! them, which is what `NBD_FLAG_CAN_MULTI_CONN` promises: every export
//! advertises it. Concurrent FLUSHes are coalesced (group commit): each
//! completed write takes a sequence number under the write lock, a flush
//! records the sequence it made durable, and a FLUSH that finds every write
//! completed before it already durable returns without another `fdatasync`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use proxima_device::DeviceError;
use proxima_engine::EngineError;
use proxima_nbd::backend::push_status_extent;
use proxima_nbd::{AllocationState, Backend, BackendError, Export, ExportInfo, StatusExtent, ZeroOptions};
use tracing::warn;

use crate::directory::ServiceVolume;

/// Largest piece in which zeroes are written when a hole is not allowed.
const ZERO_PIECE_BYTES: u64 = 1 << 20;

/// A volume shared by the server's connections (and its control socket).
pub type SharedVolume = Arc<RwLock<ServiceVolume>>;

/// Write sequence numbers for coalescing flushes (group commit).
#[derive(Debug, Default)]
struct FlushSequence {
    /// Writes (and trims, zeroings) completed, counted under the write lock.
    completed: AtomicU64,
    /// `completed` as of the last successful flush, set under the write lock.
    durable: AtomicU64,
}

/// The [`Backend`] serving a volume's extents and snapshots.
#[derive(Debug, Clone)]
pub struct VolumeBackend {
    volume: SharedVolume,
    flushes: Arc<FlushSequence>,
}

impl VolumeBackend {
    /// A backend over `volume`.
    pub fn new(volume: SharedVolume) -> Self {
        Self { volume, flushes: Arc::default() }
    }

    /// The shared volume.
    pub fn volume(&self) -> &SharedVolume {
        &self.volume
    }
}

fn poisoned(export: &str) -> BackendError {
    BackendError::Io {
        export: export.to_owned(),
        offset_bytes: 0,
        message: "the volume stopped after an internal failure; restart the server".to_owned(),
    }
}

/// Locks the volume for a change. A panic inside an engine call poisons the
/// lock; the volume's memory may then disagree with its devices, so every
/// later request fails instead of guessing.
fn lock<'a>(volume: &'a SharedVolume, export: &str) -> Result<RwLockWriteGuard<'a, ServiceVolume>, BackendError> {
    volume.write().map_err(|_| poisoned(export))
}

/// Locks the volume for a read, shared with other readers.
fn lock_shared<'a>(volume: &'a SharedVolume, export: &str) -> Result<RwLockReadGuard<'a, ServiceVolume>, BackendError> {
    volume.read().map_err(|_| poisoned(export))
}

/// What an export addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// An extent of the active volume, by id (a deleted and recreated extent of
    /// the same name is another extent: I/O to the old one fails).
    Extent { id: u64 },
    /// An extent as of a snapshot.
    Snapshot { snapshot: String, extent: String },
}

fn extent_info(name: &str, size_bytes: u64, layout: &str) -> ExportInfo {
    ExportInfo {
        name: name.to_owned(),
        size_bytes,
        read_only: false,
        description: Some(format!("Proxima extent {name} ({layout} layout)")),
        can_multi_conn: true,
        rotational: false,
    }
}

fn snapshot_info(extent: &str, snapshot: &str, size_bytes: u64) -> ExportInfo {
    ExportInfo {
        name: format!("{extent}@{snapshot}"),
        size_bytes,
        read_only: true,
        description: Some(format!("Proxima extent {extent} as of snapshot {snapshot} (read-only)")),
        can_multi_conn: true,
        rotational: false,
    }
}

impl Backend for VolumeBackend {
    type Export = VolumeExport;

    fn list_exports(&self) -> Vec<ExportInfo> {
        let Ok(mut volume) = lock(&self.volume, "") else { return Vec::new() };
        let layout = volume.policy_name().to_owned();
        let mut infos: Vec<ExportInfo> =
            volume.extents().iter().map(|extent| extent_info(&extent.name, extent.size_bytes, &layout)).collect();
        for snapshot in volume.snapshots() {
            match volume.snapshot_extents(&snapshot.name) {
                Ok(extents) => infos.extend(
                    extents.iter().map(|extent| snapshot_info(&extent.name, &snapshot.name, extent.size_bytes)),
                ),
                Err(error) => warn!(snapshot = %snapshot.name, "cannot list the snapshot's extents: {error}"),
            }
        }
        infos
    }

    fn open_export(&self, name: &str) -> Option<VolumeExport> {
        let mut volume = lock(&self.volume, name).ok()?;
        let (info, target) = match name.split_once('@') {
            None => {
                let layout = volume.policy_name().to_owned();
                let extents = volume.extents();
                let extent = if name.is_empty() {
                    extents.first()?
                } else {
                    extents.iter().find(|extent| extent.name == name)?
                };
                (extent_info(&extent.name, extent.size_bytes, &layout), Target::Extent { id: extent.id })
            }
            Some((extent, snapshot)) => {
                let extents = volume.snapshot_extents(snapshot).ok()?;
                let found = extents.iter().find(|candidate| candidate.name == extent)?;
                (
                    snapshot_info(extent, snapshot, found.size_bytes),
                    Target::Snapshot { snapshot: snapshot.to_owned(), extent: extent.to_owned() },
                )
            }
        };
        drop(volume);
        Some(VolumeExport { volume: Arc::clone(&self.volume), flushes: Arc::clone(&self.flushes), info, target })
    }

    /// Flushes and commits a CP: what a clean shutdown leaves needs no log replay.
    fn flush_all(&self) -> Result<(), BackendError> {
        let mut volume = lock(&self.volume, "")?;
        volume.flush().map_err(|error| backend_error("", 0, 0, error))?;
        volume.commit().map_err(|error| backend_error("", 0, 0, error))
    }
}

/// One export: an extent, or an extent as of a snapshot.
#[derive(Debug)]
pub struct VolumeExport {
    volume: SharedVolume,
    flushes: Arc<FlushSequence>,
    info: ExportInfo,
    target: Target,
}

/// Maps an engine error to the NBD error the client sees.
fn backend_error(export: &str, offset_bytes: u64, length_bytes: u64, error: EngineError) -> BackendError {
    match error {
        EngineError::NoSpace { .. }
        | EngineError::NoSpaceForMetadata { .. }
        | EngineError::Device { source: DeviceError::NoSpace { .. }, .. } => {
            BackendError::NoSpace { export: export.to_owned(), offset_bytes, length_bytes }
        }
        EngineError::InvalidRange(reason) => BackendError::InvalidArgument { export: export.to_owned(), reason },
        other => BackendError::Io { export: export.to_owned(), offset_bytes, message: other.to_string() },
    }
}

impl VolumeExport {
    fn extent_id(&self) -> Result<u64, BackendError> {
        match &self.target {
            Target::Extent { id } => Ok(*id),
            Target::Snapshot { .. } => Err(BackendError::ReadOnly { export: self.info.name.clone() }),
        }
    }

    fn fail(&self, offset_bytes: u64, length_bytes: u64) -> impl FnOnce(EngineError) -> BackendError + '_ {
        move |error| backend_error(&self.info.name, offset_bytes, length_bytes, error)
    }

    fn write_zero_bytes(&self, offset_bytes: u64, length_bytes: u64, fua: bool) -> Result<(), BackendError> {
        let id = self.extent_id()?;
        let zeroes = vec![0u8; length_bytes.min(ZERO_PIECE_BYTES) as usize];
        let mut done = 0;
        while done < length_bytes {
            let piece = (length_bytes - done).min(ZERO_PIECE_BYTES);
            self.change(offset_bytes, length_bytes, |volume| {
                volume.write(id, offset_bytes + done, &zeroes[..piece as usize], false)
            })?;
            done += piece;
        }
        if fua {
            self.flush_covering(offset_bytes, length_bytes)?;
        }
        Ok(())
    }

    /// Runs a change (write, trim, zeroing) under the write lock and counts it
    /// as completed for flush coalescing.
    fn change(
        &self,
        offset_bytes: u64,
        length_bytes: u64,
        operation: impl FnOnce(&mut ServiceVolume) -> Result<(), EngineError>,
    ) -> Result<(), BackendError> {
        let mut volume = lock(&self.volume, &self.info.name)?;
        let outcome = operation(&mut volume);
        // Counted even when it failed: a failed write may have changed part of
        // its range, which a later FLUSH must cover too.
        self.flushes.completed.fetch_add(1, Ordering::SeqCst);
        outcome.map_err(self.fail(offset_bytes, length_bytes))
    }

    /// Makes durable every change completed before this call, unless a flush
    /// that started after them already did.
    fn flush_covering(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), BackendError> {
        let needed = self.flushes.completed.load(Ordering::SeqCst);
        let mut volume = lock(&self.volume, &self.info.name)?;
        if self.flushes.durable.load(Ordering::SeqCst) >= needed {
            return Ok(());
        }
        // Under the write lock no change runs, so everything counted so far is
        // in the volume and becomes durable with this flush.
        let covered = self.flushes.completed.load(Ordering::SeqCst);
        volume.flush().map_err(self.fail(offset_bytes, length_bytes))?;
        self.flushes.durable.fetch_max(covered, Ordering::SeqCst);
        Ok(())
    }
}

impl Export for VolumeExport {
    fn info(&self) -> &ExportInfo {
        &self.info
    }

    fn read(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), BackendError> {
        let length_bytes = buffer.len() as u64;
        match &self.target {
            Target::Extent { id } => {
                let volume = lock_shared(&self.volume, &self.info.name)?;
                if volume.supports_shared_reads() {
                    return volume
                        .read_shared(*id, offset_bytes, buffer)
                        .map_err(self.fail(offset_bytes, length_bytes));
                }
                drop(volume);
                lock(&self.volume, &self.info.name)?.read_into(*id, offset_bytes, buffer)
            }
            Target::Snapshot { snapshot, extent } => {
                lock(&self.volume, &self.info.name)?.read_snapshot_into(snapshot, extent, offset_bytes, buffer)
            }
        }
        .map_err(self.fail(offset_bytes, length_bytes))
    }

    fn write(&self, offset_bytes: u64, data: &[u8], fua: bool) -> Result<(), BackendError> {
        let id = self.extent_id()?;
        self.change(offset_bytes, data.len() as u64, |volume| volume.write(id, offset_bytes, data, fua))
    }

    fn flush(&self) -> Result<(), BackendError> {
        self.flush_covering(0, 0)
    }

    fn trim(&self, offset_bytes: u64, length_bytes: u64, fua: bool) -> Result<(), BackendError> {
        let id = self.extent_id()?;
        self.change(offset_bytes, length_bytes, |volume| volume.trim(id, offset_bytes, length_bytes, fua))
    }

    fn write_zeroes(&self, offset_bytes: u64, length_bytes: u64, options: ZeroOptions) -> Result<(), BackendError> {
        let id = self.extent_id()?;
        if !options.no_hole {
            // Whole blocks become holes (reading as zeroes); partial edge blocks
            // are rewritten with zeroes. Always fast.
            return self.change(offset_bytes, length_bytes, |volume| {
                volume.write_zeroes(id, offset_bytes, length_bytes, options.fua)
            });
        }
        if options.fast_zero {
            // Keeping the range allocated means writing zero blocks: not faster
            // than the client writing them itself.
            return Err(BackendError::NotSupported {
                export: self.info.name.clone(),
                operation: "fast zero",
                reason: "NO_HOLE needs zero blocks written".to_owned(),
            });
        }
        self.write_zero_bytes(offset_bytes, length_bytes, options.fua)
    }

    fn block_status(&self, offset_bytes: u64, length_bytes: u64) -> Result<Vec<StatusExtent>, BackendError> {
        let statuses = match &self.target {
            Target::Extent { id } => {
                lock_shared(&self.volume, &self.info.name)?.block_status(*id, offset_bytes, length_bytes)
            }
            Target::Snapshot { snapshot, extent } => {
                lock(&self.volume, &self.info.name)?.snapshot_block_status(snapshot, extent, offset_bytes, length_bytes)
            }
        }
        .map_err(self.fail(offset_bytes, length_bytes))?;
        let mut extents = Vec::with_capacity(statuses.len());
        for status in statuses {
            let state = if status.allocated { AllocationState::Data } else { AllocationState::Hole };
            push_status_extent(&mut extents, status.length_bytes, state);
        }
        Ok(extents)
    }
}
