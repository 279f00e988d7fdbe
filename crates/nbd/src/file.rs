//! [`FileBackend`]: each export is a raw file (or block device) read and written
//! with `pread`/`pwrite`, for benchmarks against nbdkit's file plugin.
//!
//! All connections to an export share one file descriptor and the kernel page
//! cache, and `fdatasync` makes every completed write durable whichever connection
//! made it: the exports honour `NBD_FLAG_CAN_MULTI_CONN`. Trim punches holes;
//! block status comes from `SEEK_DATA`/`SEEK_HOLE`.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::backend::{push_status_extent, AllocationState, Backend, BackendError, Export, ExportInfo};
use crate::backend::{StatusExtent, ZeroOptions};

/// Largest buffer used to write zeroes when the file system cannot zero a range.
const ZERO_BUFFER_BYTES: u64 = 1 << 20;

/// A set of file-backed exports.
#[derive(Debug, Default)]
pub struct FileBackend {
    exports: Vec<Arc<FileExport>>,
}

impl FileBackend {
    /// A backend with no exports.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an export backed by the file at `path`. Its size is the file's length
    /// rounded down to a multiple of 512 bytes (the minimum block size).
    pub fn add_file(&mut self, name: &str, path: &Path, read_only: bool) -> Result<Arc<FileExport>, BackendError> {
        let open_error = |error: std::io::Error| BackendError::Io {
            export: name.to_owned(),
            offset_bytes: 0,
            message: format!("opening {}: {error}", path.display()),
        };
        if self.exports.iter().any(|export| export.info.name == name) {
            return Err(BackendError::InvalidArgument {
                export: name.to_owned(),
                reason: "an export of this name exists already".to_owned(),
            });
        }
        let file = OpenOptions::new().read(true).write(!read_only).open(path).map_err(open_error)?;
        let length_bytes = file_length(&file).map_err(open_error)?;
        let export = Arc::new(FileExport {
            info: ExportInfo {
                name: name.to_owned(),
                size_bytes: length_bytes - length_bytes % 512,
                read_only,
                description: Some(format!("file {}", path.display())),
                can_multi_conn: true,
                rotational: false,
            },
            path: path.to_owned(),
            file,
        });
        self.exports.push(Arc::clone(&export));
        Ok(export)
    }
}

fn file_length(file: &File) -> std::io::Result<u64> {
    let metadata = file.metadata()?;
    if metadata.is_file() {
        return Ok(metadata.len());
    }
    // A block device reports length 0 in its metadata; its end is found by seeking.
    // SAFETY: lseek on a valid, open descriptor has no memory effects.
    let end = unsafe { libc::lseek(file.as_raw_fd(), 0, libc::SEEK_END) };
    if end < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(end as u64)
}

impl Backend for FileBackend {
    type Export = Arc<FileExport>;

    fn list_exports(&self) -> Vec<ExportInfo> {
        self.exports.iter().map(|export| export.info.clone()).collect()
    }

    fn open_export(&self, name: &str) -> Option<Self::Export> {
        if name.is_empty() {
            return self.exports.first().cloned();
        }
        self.exports.iter().find(|export| export.info.name == name).cloned()
    }
}

/// One file-backed export.
#[derive(Debug)]
pub struct FileExport {
    info: ExportInfo,
    path: PathBuf,
    file: File,
}

impl FileExport {
    /// The backing file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io_error(&self, offset_bytes: u64, length_bytes: u64, error: &std::io::Error) -> BackendError {
        BackendError::from_io(&self.info.name, offset_bytes, length_bytes, error)
    }

    fn refuse_if_read_only(&self) -> Result<(), BackendError> {
        if self.info.read_only {
            Err(BackendError::ReadOnly { export: self.info.name.clone() })
        } else {
            Ok(())
        }
    }

    fn sync(&self) -> Result<(), BackendError> {
        self.file.sync_data().map_err(|error| self.io_error(0, 0, &error))
    }

    fn fallocate(&self, mode: libc::c_int, offset_bytes: u64, length_bytes: u64) -> std::io::Result<()> {
        // SAFETY: fallocate on a valid, open descriptor has no memory effects.
        let result = unsafe {
            libc::fallocate(self.file.as_raw_fd(), mode, offset_bytes as libc::off_t, length_bytes as libc::off_t)
        };
        if result == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// `lseek` with `SEEK_DATA` or `SEEK_HOLE`; `None` when there is no further
    /// data (`ENXIO`).
    fn seek(&self, offset_bytes: u64, whence: libc::c_int) -> std::io::Result<Option<u64>> {
        // SAFETY: lseek on a valid, open descriptor has no memory effects. The file
        // position it moves is not used by pread/pwrite.
        let result = unsafe { libc::lseek(self.file.as_raw_fd(), offset_bytes as libc::off_t, whence) };
        if result >= 0 {
            return Ok(Some(result as u64));
        }
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() == Some(libc::ENXIO) {
            Ok(None)
        } else {
            Err(error)
        }
    }

    fn write_zero_bytes(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), BackendError> {
        let buffer =
            vec![0u8; usize::try_from(ZERO_BUFFER_BYTES.min(length_bytes)).expect("the zero buffer fits in memory")];
        let mut done = 0;
        while done < length_bytes {
            let piece = (length_bytes - done).min(buffer.len() as u64);
            self.file
                .write_all_at(
                    &buffer[..usize::try_from(piece).expect("a piece is at most the buffer")],
                    offset_bytes + done,
                )
                .map_err(|error| self.io_error(offset_bytes + done, piece, &error))?;
            done += piece;
        }
        Ok(())
    }
}

fn is_unsupported(error: &std::io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EINVAL))
}

impl Export for FileExport {
    fn info(&self) -> &ExportInfo {
        &self.info
    }

    fn read(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), BackendError> {
        self.info.debug_assert_in_range(offset_bytes, buffer.len() as u64);
        self.file
            .read_exact_at(buffer, offset_bytes)
            .map_err(|error| self.io_error(offset_bytes, buffer.len() as u64, &error))
    }

    fn write(&self, offset_bytes: u64, data: &[u8], fua: bool) -> Result<(), BackendError> {
        self.info.debug_assert_writable();
        self.info.debug_assert_in_range(offset_bytes, data.len() as u64);
        self.refuse_if_read_only()?;
        self.file
            .write_all_at(data, offset_bytes)
            .map_err(|error| self.io_error(offset_bytes, data.len() as u64, &error))?;
        if fua {
            self.sync()?;
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), BackendError> {
        if self.info.read_only {
            return Ok(());
        }
        self.sync()
    }

    fn trim(&self, offset_bytes: u64, length_bytes: u64, fua: bool) -> Result<(), BackendError> {
        self.info.debug_assert_writable();
        self.info.debug_assert_in_range(offset_bytes, length_bytes);
        self.refuse_if_read_only()?;
        match self.fallocate(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, offset_bytes, length_bytes) {
            Ok(()) => {}
            // Trim is advisory: a file system without hole punching keeps the data.
            Err(error) if is_unsupported(&error) => return Ok(()),
            Err(error) => return Err(self.io_error(offset_bytes, length_bytes, &error)),
        }
        if fua {
            self.sync()?;
        }
        Ok(())
    }

    fn write_zeroes(&self, offset_bytes: u64, length_bytes: u64, options: ZeroOptions) -> Result<(), BackendError> {
        self.info.debug_assert_writable();
        self.info.debug_assert_in_range(offset_bytes, length_bytes);
        self.refuse_if_read_only()?;
        // Fast paths: punch a hole (when holes are allowed), else ask the file
        // system to zero the range in place (keeps it allocated).
        let mut modes = Vec::with_capacity(2);
        if !options.no_hole {
            modes.push(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE);
        }
        modes.push(libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE);
        let mut zeroed = false;
        for mode in modes {
            match self.fallocate(mode, offset_bytes, length_bytes) {
                Ok(()) => {
                    zeroed = true;
                    break;
                }
                Err(error) if is_unsupported(&error) => continue,
                Err(error) => return Err(self.io_error(offset_bytes, length_bytes, &error)),
            }
        }
        if !zeroed {
            // Only writing zero bytes is left, which is no faster than the write
            // the client would otherwise send: a fast-zero request must fail now,
            // with the contents untouched.
            if options.fast_zero {
                return Err(BackendError::NotSupported {
                    export: self.info.name.clone(),
                    operation: "fast zero",
                    reason: format!("{} cannot punch holes or zero ranges", self.path.display()),
                });
            }
            self.write_zero_bytes(offset_bytes, length_bytes)?;
        }
        if options.fua {
            self.sync()?;
        }
        Ok(())
    }

    fn block_status(&self, offset_bytes: u64, length_bytes: u64) -> Result<Vec<StatusExtent>, BackendError> {
        self.info.debug_assert_in_range(offset_bytes, length_bytes);
        let end = offset_bytes + length_bytes;
        let mut extents = Vec::new();
        let mut position = offset_bytes;
        while position < end {
            let data_start = match self.seek(position, libc::SEEK_DATA) {
                Ok(start) => start.unwrap_or(end).min(end),
                // No SEEK_DATA here: report everything as data, which is always safe.
                Err(error) if is_unsupported(&error) => {
                    push_status_extent(&mut extents, end - position, AllocationState::Data);
                    break;
                }
                Err(error) => return Err(self.io_error(position, length_bytes, &error)),
            };
            push_status_extent(&mut extents, data_start - position, AllocationState::Hole);
            if data_start >= end {
                break;
            }
            let hole_start = self
                .seek(data_start, libc::SEEK_HOLE)
                .map_err(|error| self.io_error(data_start, length_bytes, &error))?
                .unwrap_or(end)
                .min(end);
            push_status_extent(&mut extents, hole_start - data_start, AllocationState::Data);
            position = hole_start;
        }
        Ok(extents)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::assert_read_only_refuses;

    fn file_export(size_bytes: u64) -> (tempfile::TempDir, Arc<FileExport>) {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("disk.raw");
        File::create(&path).unwrap().set_len(size_bytes).unwrap();
        let export = FileBackend::new().add_file("disk", &path, false).unwrap();
        (directory, export)
    }

    #[test]
    fn writes_read_back_and_size_rounds_down_to_512() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("odd.raw");
        File::create(&path).unwrap().set_len(5000).unwrap();
        let export = FileBackend::new().add_file("odd", &path, false).unwrap();
        assert_eq!(export.info().size_bytes, 4608);
        export.write(512, &[5u8; 1024], true).unwrap();
        let mut buffer = [0u8; 1024];
        export.read(512, &mut buffer).unwrap();
        assert_eq!(buffer, [5u8; 1024]);
    }

    #[test]
    fn trim_and_zeroes_read_back_as_zero_and_status_covers_the_range() {
        let (_directory, export) = file_export(1 << 20);
        export.write(0, &vec![3u8; 1 << 20], false).unwrap();
        export.trim(0, 65536, false).unwrap();
        export.write_zeroes(65536, 65536, ZeroOptions { no_hole: true, ..ZeroOptions::default() }).unwrap();
        let mut buffer = vec![1u8; 65536];
        export.read(65536, &mut buffer).unwrap();
        assert!(buffer.iter().all(|&byte| byte == 0));
        let extents = export.block_status(0, 1 << 20).unwrap();
        assert_eq!(extents.iter().map(|extent| extent.length_bytes).sum::<u64>(), 1 << 20);
        assert_eq!(extents.last().unwrap().state, AllocationState::Data);
    }

    #[test]
    fn read_only_file_refuses_writes() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("ro.raw");
        File::create(&path).unwrap().set_len(4096).unwrap();
        let export = FileBackend::new().add_file("ro", &path, true).unwrap();
        assert_read_only_refuses(|| export.write(0, &[1; 512], false));
    }

    #[test]
    fn missing_file_is_an_error_naming_the_path() {
        let error = FileBackend::new().add_file("x", Path::new("/nonexistent/proxima.raw"), false).unwrap_err();
        assert!(error.to_string().contains("/nonexistent/proxima.raw"), "{error}");
    }
}
