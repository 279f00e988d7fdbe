//! The seam between the NBD server and whatever stores the bytes: the [`Backend`]
//! trait (which exports exist) and the [`Export`] trait (I/O on one export), their
//! typed errors, and how those errors map to NBD error values.
//!
//! Contract between the session and an export: the session validates every request
//! at the edge before calling an export, so an export is only ever called with
//! `offset + length <= size`, offsets and lengths aligned to the advertised minimum
//! block size (512 bytes), and writes only on exports that are not read-only.
//! Exports assert these at the top of each method in debug builds, as nbdkit's
//! backend does ([`ExportInfo::debug_assert_in_range`],
//! [`ExportInfo::debug_assert_aligned`], [`ExportInfo::debug_assert_writable`]);
//! they return errors only for operating failures. (A release build called
//! outside a session still gets [`BackendError::ReadOnly`] for a write to a
//! read-only export.)

use std::sync::Arc;

use thiserror::Error;

use crate::protocol::transmission::{STATE_HOLE, STATE_ZERO};
use crate::protocol::Errno;
use crate::session::MINIMUM_BLOCK_BYTES;

/// What a client sees of an export before it attaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportInfo {
    /// Export name, as given to `NBD_OPT_GO` and listed by `NBD_OPT_LIST`.
    pub name: String,
    /// Size in bytes; a multiple of 512.
    pub size_bytes: u64,
    /// Whether writes, trims and zeroing are refused with `EPERM`.
    pub read_only: bool,
    /// Optional description for humans (`NBD_INFO_DESCRIPTION`).
    pub description: Option<String>,
    /// Whether a flush (or FUA) on one connection makes durable every write that
    /// has completed on any connection to this export, and every completed write is
    /// visible to reads on all connections. Only then may the server advertise
    /// `NBD_FLAG_CAN_MULTI_CONN`. True for backends without a per-connection cache.
    pub can_multi_conn: bool,
    /// Whether the export behaves like a rotational medium (a hint to clients).
    pub rotational: bool,
}

impl ExportInfo {
    /// Asserts in debug builds that `length_bytes` at `offset_bytes` lie within
    /// the export, as the session guarantees every request.
    #[track_caller]
    pub fn debug_assert_in_range(&self, offset_bytes: u64, length_bytes: u64) {
        debug_assert!(
            offset_bytes.checked_add(length_bytes).is_some_and(|end| end <= self.size_bytes),
            "export {}: {length_bytes} bytes at offset {offset_bytes} beyond its {} bytes (the session validates ranges)",
            self.name,
            self.size_bytes
        );
    }

    /// Asserts in debug builds that a request's offset and length are multiples
    /// of the advertised minimum block size, as the session guarantees.
    #[track_caller]
    pub fn debug_assert_aligned(&self, offset_bytes: u64, length_bytes: u64) {
        let minimum = u64::from(MINIMUM_BLOCK_BYTES);
        debug_assert!(
            offset_bytes.is_multiple_of(minimum),
            "export {}: offset {offset_bytes} not aligned to {minimum} bytes (the session validates alignment)",
            self.name
        );
        debug_assert!(
            length_bytes.is_multiple_of(minimum),
            "export {}: length {length_bytes} not aligned to {minimum} bytes (the session validates alignment)",
            self.name
        );
    }

    /// Asserts in debug builds that the export takes writes, as the session
    /// guarantees of every write, trim and zeroing.
    #[track_caller]
    pub fn debug_assert_writable(&self) {
        debug_assert!(!self.read_only, "export {}: a change to a read-only export (the session refuses it)", self.name);
    }
}

/// How `write_zeroes` must behave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ZeroOptions {
    /// `NBD_CMD_FLAG_NO_HOLE`: the range must stay allocated, so later writes to it
    /// cannot fail for lack of space. Without it the export may punch a hole.
    pub no_hole: bool,
    /// `NBD_CMD_FLAG_FAST_ZERO`: zero only if it is faster than writing zero bytes.
    /// An export that cannot zero this range faster than a write (no hole punching,
    /// no zero-range primitive, or `no_hole` forbidding the fast path) must fail at
    /// once with [`BackendError::NotSupported`] and leave the contents unchanged.
    pub fast_zero: bool,
    /// `NBD_CMD_FLAG_FUA`: the zeroes must be durable before returning.
    pub fua: bool,
}

/// Allocation state of a range, as reported by block status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocationState {
    /// Allocated, contents unknown (may hold data).
    Data,
    /// Allocated and known to read as zeroes.
    Zero,
    /// Not allocated; reads as zeroes.
    Hole,
}

impl AllocationState {
    /// The `base:allocation` status flags of this state.
    pub fn status_flags(self) -> u32 {
        match self {
            Self::Data => 0,
            Self::Zero => STATE_ZERO,
            Self::Hole => STATE_HOLE | STATE_ZERO,
        }
    }
}

/// One run of equal allocation state, starting where the previous one ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusExtent {
    /// Length of the run in bytes (nonzero).
    pub length_bytes: u64,
    /// Its state.
    pub state: AllocationState,
}

/// An operating failure of an export, mapped to an NBD error value.
#[derive(Debug, Error)]
pub enum BackendError {
    /// The storage failed (`EIO`).
    #[error("export {export}: I/O error at offset {offset_bytes}: {message}")]
    Io {
        /// Export name.
        export: String,
        /// Byte offset of the failed request.
        offset_bytes: u64,
        /// What failed.
        message: String,
    },
    /// No space to store the data (`ENOSPC`).
    #[error("export {export}: no space left for {length_bytes} bytes at offset {offset_bytes}")]
    NoSpace {
        /// Export name.
        export: String,
        /// Byte offset of the failed request.
        offset_bytes: u64,
        /// Length of the failed request.
        length_bytes: u64,
    },
    /// A write to a read-only export (`EPERM`).
    #[error("export {export} is read-only")]
    ReadOnly {
        /// Export name.
        export: String,
    },
    /// A request the export cannot accept (`EINVAL`).
    #[error("export {export}: invalid request: {reason}")]
    InvalidArgument {
        /// Export name.
        export: String,
        /// Why.
        reason: String,
    },
    /// A request too large for the export to serve (`EOVERFLOW`).
    #[error("export {export}: request too large: {reason}")]
    Overflow {
        /// Export name.
        export: String,
        /// Why.
        reason: String,
    },
    /// The operation is not supported as asked, e.g. a fast zero that cannot be
    /// fast (`ENOTSUP`).
    #[error("export {export}: {operation} not supported: {reason}")]
    NotSupported {
        /// Export name.
        export: String,
        /// The operation.
        operation: &'static str,
        /// Why.
        reason: String,
    },
}

impl BackendError {
    /// The NBD error value sent to the client.
    pub fn errno(&self) -> Errno {
        match self {
            Self::Io { .. } => Errno::Io,
            Self::NoSpace { .. } => Errno::NoSpc,
            Self::ReadOnly { .. } => Errno::Perm,
            Self::InvalidArgument { .. } => Errno::Inval,
            Self::Overflow { .. } => Errno::Overflow,
            Self::NotSupported { .. } => Errno::NotSup,
        }
    }

    /// Maps an OS error: quota and file-size limits count as no space, as the
    /// protocol asks; everything else is an I/O error.
    pub fn from_io(export: &str, offset_bytes: u64, length_bytes: u64, error: &std::io::Error) -> Self {
        match error.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EFBIG) => {
                Self::NoSpace { export: export.to_owned(), offset_bytes, length_bytes }
            }
            _ => Self::Io { export: export.to_owned(), offset_bytes, message: error.to_string() },
        }
    }
}

/// I/O on one export. Implementations are shared by every connection attached to
/// the export and called concurrently from several threads.
pub trait Export: Send + Sync {
    /// What the export is.
    fn info(&self) -> &ExportInfo;

    /// Fills `buffer` with the bytes at `offset_bytes`.
    fn read(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), BackendError>;

    /// Writes `data` at `offset_bytes`; with `fua`, durably before returning.
    fn write(&self, offset_bytes: u64, data: &[u8], fua: bool) -> Result<(), BackendError>;

    /// Makes every completed write durable.
    fn flush(&self) -> Result<(), BackendError>;

    /// Discards a range (advisory: the export may keep some or all of it). Later
    /// reads of the range return unspecified data until it is written again.
    fn trim(&self, offset_bytes: u64, length_bytes: u64, fua: bool) -> Result<(), BackendError>;

    /// Makes a range read as zeroes, following `options` (see [`ZeroOptions`]).
    fn write_zeroes(&self, offset_bytes: u64, length_bytes: u64, options: ZeroOptions) -> Result<(), BackendError>;

    /// Allocation state from `offset_bytes`: consecutive runs, the first starting at
    /// `offset_bytes`. The runs may stop short of `length_bytes` (the client asks
    /// again) or reach beyond it (the session clips them), but at least one is
    /// returned when `length_bytes > 0`.
    fn block_status(&self, offset_bytes: u64, length_bytes: u64) -> Result<Vec<StatusExtent>, BackendError>;
}

impl<T: Export + ?Sized> Export for Arc<T> {
    fn info(&self) -> &ExportInfo {
        (**self).info()
    }
    fn read(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), BackendError> {
        (**self).read(offset_bytes, buffer)
    }
    fn write(&self, offset_bytes: u64, data: &[u8], fua: bool) -> Result<(), BackendError> {
        (**self).write(offset_bytes, data, fua)
    }
    fn flush(&self) -> Result<(), BackendError> {
        (**self).flush()
    }
    fn trim(&self, offset_bytes: u64, length_bytes: u64, fua: bool) -> Result<(), BackendError> {
        (**self).trim(offset_bytes, length_bytes, fua)
    }
    fn write_zeroes(&self, offset_bytes: u64, length_bytes: u64, options: ZeroOptions) -> Result<(), BackendError> {
        (**self).write_zeroes(offset_bytes, length_bytes, options)
    }
    fn block_status(&self, offset_bytes: u64, length_bytes: u64) -> Result<Vec<StatusExtent>, BackendError> {
        (**self).block_status(offset_bytes, length_bytes)
    }
}

/// The set of exports a server serves.
pub trait Backend: Send + Sync {
    /// The handle of one export (owned: the server's workers hold it while
    /// they execute a connection's requests).
    type Export: Export + 'static;

    /// Every export, in the order `NBD_OPT_LIST` reports them.
    fn list_exports(&self) -> Vec<ExportInfo>;

    /// Opens an export by name; `None` if there is none. The empty name is the
    /// default export, which is the first listed unless a backend says otherwise.
    fn open_export(&self, name: &str) -> Option<Self::Export>;

    /// Makes every export durable (called once at shutdown).
    fn flush_all(&self) -> Result<(), BackendError> {
        for info in self.list_exports() {
            if let Some(export) = self.open_export(&info.name) {
                export.flush()?;
            }
        }
        Ok(())
    }
}

impl<B: Backend + ?Sized> Backend for Arc<B> {
    type Export = B::Export;
    fn list_exports(&self) -> Vec<ExportInfo> {
        (**self).list_exports()
    }
    fn open_export(&self, name: &str) -> Option<Self::Export> {
        (**self).open_export(name)
    }
    fn flush_all(&self) -> Result<(), BackendError> {
        (**self).flush_all()
    }
}

/// Appends a run to a list of status extents, merging it with the last run when
/// both have the same state.
pub fn push_status_extent(extents: &mut Vec<StatusExtent>, length_bytes: u64, state: AllocationState) {
    if length_bytes == 0 {
        return;
    }
    match extents.last_mut() {
        Some(last) if last.state == state => last.length_bytes += length_bytes,
        _ => extents.push(StatusExtent { length_bytes, state }),
    }
}

/// Checks that a change to a read-only export, made outside a session, is
/// stopped: by the boundary assertion in debug builds, with
/// [`BackendError::ReadOnly`] in release builds.
#[cfg(test)]
pub(crate) fn assert_read_only_refuses(change: impl FnOnce() -> Result<(), BackendError>) {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(change));
    if cfg!(debug_assertions) {
        assert!(outcome.is_err(), "the boundary assertion stops a change to a read-only export");
    } else {
        assert!(matches!(outcome, Ok(Err(BackendError::ReadOnly { .. }))), "{outcome:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_the_protocol_errnos() {
        let export = "disk".to_owned();
        let cases = [
            (BackendError::Io { export: export.clone(), offset_bytes: 0, message: "x".into() }, Errno::Io),
            (BackendError::NoSpace { export: export.clone(), offset_bytes: 0, length_bytes: 1 }, Errno::NoSpc),
            (BackendError::ReadOnly { export: export.clone() }, Errno::Perm),
            (BackendError::InvalidArgument { export: export.clone(), reason: "x".into() }, Errno::Inval),
            (BackendError::Overflow { export: export.clone(), reason: "x".into() }, Errno::Overflow),
            (BackendError::NotSupported { export, operation: "zero", reason: "x".into() }, Errno::NotSup),
        ];
        for (error, errno) in cases {
            assert_eq!(error.errno(), errno, "{error}");
        }
    }

    #[test]
    fn quota_and_file_size_errors_are_no_space() {
        for code in [libc::ENOSPC, libc::EDQUOT, libc::EFBIG] {
            let error = BackendError::from_io("d", 0, 1, &std::io::Error::from_raw_os_error(code));
            assert_eq!(error.errno(), Errno::NoSpc);
        }
        let error = BackendError::from_io("d", 0, 1, &std::io::Error::from_raw_os_error(libc::EIO));
        assert_eq!(error.errno(), Errno::Io);
    }

    #[test]
    fn status_extents_merge_equal_neighbours() {
        let mut extents = Vec::new();
        push_status_extent(&mut extents, 512, AllocationState::Data);
        push_status_extent(&mut extents, 512, AllocationState::Data);
        push_status_extent(&mut extents, 0, AllocationState::Hole);
        push_status_extent(&mut extents, 1024, AllocationState::Hole);
        assert_eq!(
            extents,
            vec![
                StatusExtent { length_bytes: 1024, state: AllocationState::Data },
                StatusExtent { length_bytes: 1024, state: AllocationState::Hole },
            ]
        );
    }
}
