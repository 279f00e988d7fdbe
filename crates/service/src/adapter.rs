//! The NBD backend over an engine volume: every extent is a writable export of
//! its own name, and every extent of every live snapshot a read-only export
//! `EXTENT@SNAPSHOT`.
//!
//! All exports share one volume behind one mutex. Each request runs whole under
//! the lock and is replied to only after the engine call returns, so:
//! - a write completed (replied to) on any connection is in the volume's state
//!   before any later request on any connection sees the volume, and
//! - `Volume::flush` makes durable every write the volume has accepted,
//!   whichever connection sent it.
//!
//! A FLUSH on one connection therefore covers the writes completed on all of
//! them, which is what `NBD_FLAG_CAN_MULTI_CONN` promises: every export
//! advertises it. (A future adapter that let requests run outside the lock, or
//! kept per-connection state, would have to re-establish this.)

use std::sync::{Arc, Mutex, MutexGuard};

use proxima_device::DeviceError;
use proxima_engine::EngineError;
use proxima_nbd::backend::push_status_extent;
use proxima_nbd::{AllocationState, Backend, BackendError, Export, ExportInfo, StatusExtent, ZeroOptions};
use tracing::warn;

use crate::directory::ServiceVolume;

/// Largest piece in which zeroes are written when a hole is not allowed.
const ZERO_PIECE_BYTES: u64 = 1 << 20;

/// A volume shared by the server's connections (and its control socket).
pub type SharedVolume = Arc<Mutex<ServiceVolume>>;

/// The [`Backend`] serving a volume's extents and snapshots.
#[derive(Debug, Clone)]
pub struct VolumeBackend {
    volume: SharedVolume,
}

impl VolumeBackend {
    /// A backend over `volume`.
    pub fn new(volume: SharedVolume) -> Self {
        Self { volume }
    }

    /// The shared volume.
    pub fn volume(&self) -> &SharedVolume {
        &self.volume
    }
}

/// Locks the volume. A panic inside an engine call poisons the mutex; the
/// volume's memory may then disagree with its devices, so every later request
/// fails instead of guessing.
fn lock<'a>(volume: &'a SharedVolume, export: &str) -> Result<MutexGuard<'a, ServiceVolume>, BackendError> {
    volume.lock().map_err(|_| BackendError::Io {
        export: export.to_owned(),
        offset_bytes: 0,
        message: "the volume stopped after an internal failure; restart the server".to_owned(),
    })
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
        Some(VolumeExport { volume: Arc::clone(&self.volume), info, target })
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
    info: ExportInfo,
    target: Target,
}

/// Maps an engine error to the NBD error the client sees.
fn backend_error(export: &str, offset_bytes: u64, length_bytes: u64, error: EngineError) -> BackendError {
    match error {
        EngineError::NoSpace { .. } | EngineError::Device { source: DeviceError::NoSpace { .. }, .. } => {
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
            let mut volume = lock(&self.volume, &self.info.name)?;
            volume
                .write(id, offset_bytes + done, &zeroes[..piece as usize], false)
                .map_err(self.fail(offset_bytes, length_bytes))?;
            done += piece;
        }
        if fua {
            lock(&self.volume, &self.info.name)?.flush().map_err(self.fail(offset_bytes, length_bytes))?;
        }
        Ok(())
    }
}

impl Export for VolumeExport {
    fn info(&self) -> &ExportInfo {
        &self.info
    }

    fn read(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), BackendError> {
        let length_bytes = buffer.len() as u64;
        let mut volume = lock(&self.volume, &self.info.name)?;
        let bytes = match &self.target {
            Target::Extent { id } => volume.read(*id, offset_bytes, length_bytes),
            Target::Snapshot { snapshot, extent } => volume.read_snapshot(snapshot, extent, offset_bytes, length_bytes),
        }
        .map_err(self.fail(offset_bytes, length_bytes))?;
        drop(volume);
        buffer.copy_from_slice(&bytes);
        Ok(())
    }

    fn write(&self, offset_bytes: u64, data: &[u8], fua: bool) -> Result<(), BackendError> {
        let id = self.extent_id()?;
        let mut volume = lock(&self.volume, &self.info.name)?;
        volume.write(id, offset_bytes, data, fua).map_err(self.fail(offset_bytes, data.len() as u64))
    }

    fn flush(&self) -> Result<(), BackendError> {
        let mut volume = lock(&self.volume, &self.info.name)?;
        volume.flush().map_err(self.fail(0, 0))
    }

    fn trim(&self, offset_bytes: u64, length_bytes: u64, fua: bool) -> Result<(), BackendError> {
        let id = self.extent_id()?;
        let mut volume = lock(&self.volume, &self.info.name)?;
        volume.trim(id, offset_bytes, length_bytes, fua).map_err(self.fail(offset_bytes, length_bytes))
    }

    fn write_zeroes(&self, offset_bytes: u64, length_bytes: u64, options: ZeroOptions) -> Result<(), BackendError> {
        let id = self.extent_id()?;
        if !options.no_hole {
            // Whole blocks become holes (reading as zeroes); partial edge blocks
            // are rewritten with zeroes. Always fast.
            let mut volume = lock(&self.volume, &self.info.name)?;
            return volume
                .write_zeroes(id, offset_bytes, length_bytes, options.fua)
                .map_err(self.fail(offset_bytes, length_bytes));
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
        let Target::Extent { id } = &self.target else {
            // The engine answers allocation for the active extents only; a
            // snapshot's ranges are reported as data, which is always correct.
            return Ok(vec![StatusExtent { length_bytes, state: AllocationState::Data }]);
        };
        let volume = lock(&self.volume, &self.info.name)?;
        let statuses =
            volume.block_status(*id, offset_bytes, length_bytes).map_err(self.fail(offset_bytes, length_bytes))?;
        drop(volume);
        let mut extents = Vec::with_capacity(statuses.len());
        for status in statuses {
            let state = if status.allocated { AllocationState::Data } else { AllocationState::Hole };
            push_status_extent(&mut extents, status.length_bytes, state);
        }
        Ok(extents)
    }
}
