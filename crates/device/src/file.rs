//! A device on a regular file or a block device: positional I/O, either with
//! O_DIRECT where the file system allows it (buffered with `fdatasync` where it
//! does not), or through the page cache by choice ([`FileIo::Buffered`], what
//! nbdkit's file plugin does).
//!
//! Batches are executed synchronously at `submit`; `wait` hands back the
//! completions. With O_DIRECT, a batch of several reads and writes is spread
//! over a few threads, so that that many requests are in flight at once (the
//! contract lets a batch's requests complete in any order): each request
//! waits for the device, and a destage of thousands of scattered blocks
//! issued one at a time waited for each in turn. Buffered requests copy to or
//! from the page cache and gain little; they, and a batch with a trim, run in
//! order on the caller's thread, a run of writes to consecutive blocks as one
//! `pwritev`. Reads into a caller's buffer
//! ([`BlockDevice::read_into`], also through `&self`) and writes from a borrowed
//! slice ([`BlockDevice::write_blocks`]) go straight to `pread`/`pwrite` without
//! an intermediate buffer (with O_DIRECT, only when the caller's buffer is
//! aligned). Trim punches a hole in a regular file, issues `BLKDISCARD` on a
//! block device, and falls back to writing zeroes where neither is supported
//! ([`FileDevice::trim_method`] says which is in use) — or is ignored, as the
//! contract allows, with [`TrimPolicy::Ignore`].

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use crate::batches::CompletedBatches;
use crate::{
    validate_request, validate_span, BatchTicket, BlockDevice, DeviceError, DeviceInfo, IoCompletion, IoOp, IoRequest,
};

/// Alignment of the buffers handed to O_DIRECT I/O: 4 KiB satisfies every logical
/// sector size in use (512 and 4096 bytes).
const DIRECT_ALIGNMENT_BYTES: usize = 4096;

/// The block size [`FileDevice::open`] assumes.
pub const DEFAULT_BLOCK_SIZE_BYTES: u32 = 4096;

/// Threads a batch's reads and writes are spread over at most: the requests
/// in flight at once, a queue depth an SSD serves in parallel.
const BATCH_THREADS: usize = 16;

/// Requests per thread, at least, when a batch is spread: fewer, and starting
/// threads costs more than the overlap gains.
const BATCH_REQUESTS_PER_THREAD: usize = 4;

/// `BLKDISCARD` from `<linux/fs.h>`: `_IO(0x12, 119)`.
const BLKDISCARD: libc::c_ulong = 0x1277;

/// What the path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file; its length is the device size.
    Regular,
    /// A block device; its size is found by seeking to its end.
    BlockDevice,
}

/// How [`BlockDevice`] trims are carried out on this file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrimMethod {
    /// `fallocate(PUNCH_HOLE | KEEP_SIZE)`: the range reads back as zeroes.
    PunchHole,
    /// `ioctl(BLKDISCARD)`: the range reads back as whatever the device returns.
    Discard,
    /// The range is overwritten with zeroes (neither of the above is supported).
    WriteZeroes,
}

/// How a [`FileDevice`] reaches the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FileIo {
    /// O_DIRECT, bypassing the page cache, where the file system accepts it;
    /// buffered where it refuses it (tmpfs, some FUSE file systems).
    #[default]
    Direct,
    /// Through the page cache with `pread`/`pwrite`; a flush is `fdatasync`
    /// (`fsync` on a block device).
    Buffered,
}

/// What a [`FileDevice`] does with a trim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrimPolicy {
    /// Carry it out ([`TrimMethod`]): the range reads back as zeroes on a
    /// regular file.
    #[default]
    Forward,
    /// Nothing: the blocks keep their old contents, as the [`BlockDevice`]
    /// contract allows. For a file whose trims are frequent and worthless, such
    /// as a staging log on ext4, where each punched hole costs a journal
    /// transaction only for the log to allocate the space again.
    Ignore,
}

/// How [`FileDevice::open_with_options`] opens a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileOptions {
    /// Direct or buffered I/O.
    pub io: FileIo,
    /// What trims do.
    pub trims: TrimPolicy,
    /// The block size (a power of two of at least 512 bytes).
    pub block_size_bytes: u32,
    /// Hold the file or block device exclusively while open: an exclusive
    /// `flock` (released by the kernel when the process dies, even by
    /// SIGKILL), and, on a block device, `O_EXCL` (refused while it is
    /// mounted or another program holds it so). A second open — from this
    /// process or another — is refused with [`DeviceError::InUse`].
    pub exclusive: bool,
}

impl Default for FileOptions {
    fn default() -> Self {
        Self {
            io: FileIo::Direct,
            trims: TrimPolicy::Forward,
            block_size_bytes: DEFAULT_BLOCK_SIZE_BYTES,
            exclusive: true,
        }
    }
}

impl FileOptions {
    /// Buffered I/O with trims carried out and 4 KiB blocks.
    pub fn buffered() -> Self {
        Self { io: FileIo::Buffered, ..Self::default() }
    }

    /// The same options with trims handled as `trims` says.
    pub fn with_trims(mut self, trims: TrimPolicy) -> Self {
        self.trims = trims;
        self
    }
}

/// A regular file or block device used as a [`BlockDevice`].
#[derive(Debug)]
pub struct FileDevice {
    info: DeviceInfo,
    path: PathBuf,
    file: File,
    kind: FileKind,
    direct: bool,
    trim_method: TrimMethod,
    trims: TrimPolicy,
    batches: CompletedBatches,
    opened: Instant,
}

impl FileDevice {
    /// Creates a new regular file of `block_count` blocks of `block_size_bytes` (it
    /// must not exist yet) and opens it.
    pub fn create(path: &Path, block_size_bytes: u32, block_count: u64) -> Result<Self, DeviceError> {
        check_block_size(path, block_size_bytes)?;
        let length_bytes = block_count.checked_mul(u64::from(block_size_bytes)).ok_or_else(|| {
            invalid(path, format!("{block_count} blocks of {block_size_bytes} bytes overflow a file length"))
        })?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|error| os_error(path, 0, "create", &error))?;
        file.set_len(length_bytes).map_err(|error| os_error(path, 0, "set length", &error))?;
        file.sync_all().map_err(|error| os_error(path, 0, "fsync after create", &error))?;
        drop(file);
        Self::open_with_block_size(path, block_size_bytes)
    }

    /// Opens an existing file or block device with 4 KiB blocks.
    pub fn open(path: &Path) -> Result<Self, DeviceError> {
        Self::open_with_block_size(path, DEFAULT_BLOCK_SIZE_BYTES)
    }

    /// Opens an existing file or block device whose size is a whole number of
    /// `block_size_bytes` blocks.
    pub fn open_with_block_size(path: &Path, block_size_bytes: u32) -> Result<Self, DeviceError> {
        Self::open_with_options(path, FileOptions { block_size_bytes, ..FileOptions::default() })
    }

    /// Opens an existing file or block device with 4 KiB blocks through the
    /// page cache, trims carried out.
    pub fn open_buffered(path: &Path) -> Result<Self, DeviceError> {
        Self::open_with_options(path, FileOptions::buffered())
    }

    /// Opens an existing file or block device whose size is a whole, non-zero
    /// number of blocks, as `options` say.
    pub fn open_with_options(path: &Path, options: FileOptions) -> Result<Self, DeviceError> {
        let block_size_bytes = options.block_size_bytes;
        check_block_size(path, block_size_bytes)?;
        let is_block_device = std::fs::metadata(path).is_ok_and(|metadata| metadata.file_type().is_block_device());
        let extra_flags = if options.exclusive && is_block_device { libc::O_EXCL } else { 0 };
        let (file, direct) = match options.io {
            FileIo::Direct => open_preferring_direct(path, extra_flags)?,
            FileIo::Buffered => (open_buffered(path, extra_flags)?, false),
        };
        if options.exclusive {
            lock_exclusively(&file, path)?;
        }
        let metadata = file.metadata().map_err(|error| os_error(path, 0, "stat", &error))?;
        let kind = if metadata.file_type().is_block_device() { FileKind::BlockDevice } else { FileKind::Regular };
        if kind == FileKind::Regular && !metadata.file_type().is_file() {
            return Err(invalid(path, "neither a regular file nor a block device".into()));
        }
        let length_bytes = match kind {
            FileKind::Regular => metadata.len(),
            FileKind::BlockDevice => {
                (&file).seek(SeekFrom::End(0)).map_err(|error| os_error(path, 0, "seek", &error))?
            }
        };
        if length_bytes % u64::from(block_size_bytes) != 0 || length_bytes == 0 {
            return Err(invalid(
                path,
                format!("size {length_bytes} bytes is not a whole, non-zero number of {block_size_bytes}-byte blocks"),
            ));
        }
        let trim_method = match kind {
            FileKind::Regular => TrimMethod::PunchHole,
            FileKind::BlockDevice => TrimMethod::Discard,
        };
        Ok(Self {
            info: DeviceInfo {
                name: path.display().to_string(),
                block_size_bytes,
                block_count: length_bytes / u64::from(block_size_bytes),
                // The sector: what a power loss can leave whole or not at all.
                atomic_write_bytes: block_size_bytes.min(512),
                stores_payload: true,
            },
            path: path.to_path_buf(),
            file,
            kind,
            direct,
            trim_method,
            trims: options.trims,
            batches: CompletedBatches::default(),
            opened: Instant::now(),
        })
    }

    /// Whether I/O currently bypasses the page cache (O_DIRECT).
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// What the path names.
    pub fn kind(&self) -> FileKind {
        self.kind
    }

    /// How trims are currently carried out.
    pub fn trim_method(&self) -> TrimMethod {
        self.trim_method
    }

    /// The path this device was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn perform(&mut self, request: &IoRequest) -> Result<Vec<u8>, DeviceError> {
        validate_request(&self.info, request)?;
        if request.op == IoOp::Trim {
            let offset_bytes = request.block * u64::from(self.info.block_size_bytes);
            let length_bytes = request.block_count as usize * self.info.block_size_bytes as usize;
            return self.trim(request.block, offset_bytes, length_bytes).map(|()| Vec::new());
        }
        self.with_direct_fallback(request.block, op_name(request.op), |device| device.read_or_write(request))
    }

    /// Performs `batch` in order on this thread. Buffered, a run of writes to
    /// consecutive blocks is one `pwritev` (a CP's metadata blocks, allocated
    /// one after another, are a few calls rather than one per block); a run
    /// the call fails is performed again request by request, so that each
    /// completion carries its own outcome.
    fn perform_in_order(&mut self, batch: &[IoRequest]) -> Vec<IoCompletion> {
        let mut completions = Vec::with_capacity(batch.len());
        let mut next = 0;
        while next < batch.len() {
            let run = if self.direct { 1 } else { self.gatherable_run(&batch[next..]) };
            let submitted_ns = self.now_ns();
            if run > 1 {
                let pieces: Vec<&[u8]> =
                    batch[next..next + run].iter().map(|request| request.data.as_slice()).collect();
                let offset_bytes = batch[next].block * u64::from(self.info.block_size_bytes);
                if write_all_vectored_at(&self.file, &pieces, offset_bytes).is_ok() {
                    let completed_ns = self.now_ns();
                    completions.extend((0..run).map(|_| IoCompletion {
                        result: Ok(Vec::new()),
                        submitted_ns,
                        completed_ns,
                    }));
                    next += run;
                    continue;
                }
            }
            for request in &batch[next..next + run] {
                let submitted_ns = self.now_ns();
                let result = self.perform(request);
                completions.push(IoCompletion { result, submitted_ns, completed_ns: self.now_ns() });
            }
            next += run;
        }
        completions
    }

    /// How many requests from the start of `requests` one `pwritev` can
    /// perform: valid plain writes (not FUA), each starting where the one
    /// before ends; at least one.
    fn gatherable_run(&self, requests: &[IoRequest]) -> usize {
        let gatherable = |request: &IoRequest| {
            request.op == IoOp::Write && !request.fua && validate_request(&self.info, request).is_ok()
        };
        let mut run = 0;
        while run < requests.len().min(MAX_GATHERED_PIECES)
            && gatherable(&requests[run])
            && (run == 0 || requests[run].block == requests[run - 1].end_block())
        {
            run += 1;
        }
        run.max(1)
    }

    /// Performs the reads and writes of `batch` on `threads` threads, each
    /// taking the next request not yet taken. A request O_DIRECT refuses is
    /// performed again afterwards on this thread (`perform` reopens the file
    /// buffered).
    fn perform_spread(&mut self, batch: &[IoRequest], threads: usize) -> Vec<IoCompletion> {
        let submitted_ns = self.now_ns();
        let device = &*self;
        let outcomes =
            spread(batch.iter().collect(), threads, |request| (device.perform_read_or_write(request), device.now_ns()));
        outcomes
            .into_iter()
            .zip(batch)
            .map(|((outcome, completed_ns), request)| match outcome {
                SpreadOutcome::Done(result) => IoCompletion { result, submitted_ns, completed_ns },
                SpreadOutcome::RefusedDirect => {
                    let result = self.perform(request);
                    IoCompletion { result, submitted_ns, completed_ns: self.now_ns() }
                }
            })
            .collect()
    }

    /// A read or write through `&self` (a FUA write is synced).
    fn perform_read_or_write(&self, request: &IoRequest) -> SpreadOutcome<Vec<u8>> {
        if let Err(error) = validate_request(&self.info, request) {
            return SpreadOutcome::Done(Err(error));
        }
        self.spread_outcome(request.block, op_name(request.op), self.read_or_write(request))
    }

    /// What an I/O of a spread batch came to: done, or refused by O_DIRECT
    /// (to be performed again once the file is reopened buffered).
    fn spread_outcome<T>(&self, block: u64, what: &str, outcome: std::io::Result<T>) -> SpreadOutcome<T> {
        match outcome {
            Ok(value) => SpreadOutcome::Done(Ok(value)),
            Err(error) if self.direct && error.raw_os_error() == Some(libc::EINVAL) => SpreadOutcome::RefusedDirect,
            Err(error) => SpreadOutcome::Done(Err(os_error(&self.path, block, what, &error))),
        }
    }

    /// A validated read or write (a FUA write is synced), with the operating
    /// system's error as it came.
    fn read_or_write(&self, request: &IoRequest) -> std::io::Result<Vec<u8>> {
        let offset_bytes = request.block * u64::from(self.info.block_size_bytes);
        match request.op {
            IoOp::Read => {
                self.read_at(offset_bytes, request.block_count as usize * self.info.block_size_bytes as usize)
            }
            IoOp::Write | IoOp::WriteZeroes => {
                if request.op == IoOp::Write {
                    self.write_at(offset_bytes, &request.data)?;
                } else {
                    let length_bytes = request.block_count as usize * self.info.block_size_bytes as usize;
                    self.write_at(offset_bytes, &vec![0; length_bytes])?;
                }
                if request.fua {
                    self.sync_file()?;
                }
                Ok(Vec::new())
            }
            IoOp::Trim => unreachable!("trims are performed by `trim`"),
        }
    }

    /// Runs `io`; if O_DIRECT I/O is refused with EINVAL (some file systems accept
    /// the flag at open and refuse the I/O), reopens buffered and retries once.
    fn with_direct_fallback(
        &mut self,
        block: u64,
        what: &str,
        io: impl Fn(&Self) -> std::io::Result<Vec<u8>>,
    ) -> Result<Vec<u8>, DeviceError> {
        match io(self) {
            Ok(data) => Ok(data),
            Err(error) if self.direct && error.raw_os_error() == Some(libc::EINVAL) => {
                clear_direct(&self.file, &self.path)?;
                self.direct = false;
                io(self).map_err(|error| os_error(&self.path, block, what, &error))
            }
            Err(error) => Err(os_error(&self.path, block, what, &error)),
        }
    }

    fn read_at(&self, offset_bytes: u64, length_bytes: usize) -> std::io::Result<Vec<u8>> {
        let mut data = vec![0; length_bytes];
        self.read_at_into(offset_bytes, &mut data)?;
        Ok(data)
    }

    /// Reads into `buffer`: in place when buffered or when the buffer suits
    /// O_DIRECT, else through an aligned bounce buffer.
    fn read_at_into(&self, offset_bytes: u64, buffer: &mut [u8]) -> std::io::Result<()> {
        if !self.direct || is_direct_aligned(buffer) {
            return self.file.read_exact_at(buffer, offset_bytes);
        }
        let mut bounce = AlignedBuffer::zeroed(buffer.len());
        self.file.read_exact_at(bounce.as_mut_slice(), offset_bytes)?;
        buffer.copy_from_slice(bounce.as_slice());
        Ok(())
    }

    fn write_at(&self, offset_bytes: u64, data: &[u8]) -> std::io::Result<()> {
        if !self.direct || is_direct_aligned(data) {
            return self.file.write_all_at(data, offset_bytes);
        }
        self.file.write_all_at(AlignedBuffer::joined(&[data]).as_slice(), offset_bytes)
    }

    fn trim(&mut self, block: u64, offset_bytes: u64, length_bytes: usize) -> Result<(), DeviceError> {
        if self.trims == TrimPolicy::Ignore {
            // The contract lets a trimmed block read back as anything.
            return Ok(());
        }
        let outcome = match self.trim_method {
            TrimMethod::PunchHole => punch_hole(&self.file, offset_bytes, length_bytes),
            TrimMethod::Discard => discard(&self.file, offset_bytes, length_bytes),
            TrimMethod::WriteZeroes => return self.write_zeroes(block, offset_bytes, length_bytes),
        };
        match outcome {
            Ok(()) => Ok(()),
            Err(error) if is_unsupported(&error) => {
                self.trim_method = TrimMethod::WriteZeroes;
                self.write_zeroes(block, offset_bytes, length_bytes)
            }
            Err(error) => Err(os_error(&self.path, block, "trim", &error)),
        }
    }

    fn write_zeroes(&mut self, block: u64, offset_bytes: u64, length_bytes: usize) -> Result<(), DeviceError> {
        let zeroes = vec![0; length_bytes];
        self.with_direct_fallback(block, "write zeroes", |device| {
            device.write_at(offset_bytes, &zeroes).map(|()| Vec::new())
        })
        .map(drop)
    }

    fn sync(&self, block: u64) -> Result<(), DeviceError> {
        self.sync_file().map_err(|error| os_error(&self.path, block, "flush", &error))
    }

    fn sync_file(&self) -> std::io::Result<()> {
        sync_file(&self.file, self.kind)
    }
}

/// A [`FileDevice`]'s write-back handle: its own descriptor of the same file.
#[derive(Debug)]
struct FileWriteBack {
    file: File,
    kind: FileKind,
    path: PathBuf,
}

impl crate::WriteBack for FileWriteBack {
    fn write_back(&self) -> Result<(), DeviceError> {
        sync_file(&self.file, self.kind).map_err(|error| os_error(&self.path, 0, "flush", &error))
    }
}

/// Makes `file`'s written data durable. A block device has no file metadata
/// to spare, and fsync is what flushes its volatile write cache; for a
/// regular file fdatasync skips timestamps.
fn sync_file(file: &File, kind: FileKind) -> std::io::Result<()> {
    match kind {
        FileKind::Regular => file.sync_data(),
        FileKind::BlockDevice => file.sync_all(),
    }
}

impl BlockDevice for FileDevice {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        let spreads = self.direct && batch.iter().all(|request| request.op != IoOp::Trim);
        let threads = if spreads { spread_threads(batch.len()) } else { 1 };
        let completions =
            if threads > 1 { self.perform_spread(&batch, threads) } else { self.perform_in_order(&batch) };
        Ok(self.batches.insert(completions))
    }

    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        self.batches.take(ticket, &self.info.name)
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        self.sync(0)
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn read_into(&mut self, block: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        validate_span(&self.info, block, buffer.len())?;
        let offset_bytes = block * u64::from(self.info.block_size_bytes);
        match self.read_at_into(offset_bytes, buffer) {
            Ok(()) => Ok(()),
            Err(error) if self.direct && error.raw_os_error() == Some(libc::EINVAL) => {
                // Refused O_DIRECT I/O: reopen buffered, as `perform` does.
                clear_direct(&self.file, &self.path)?;
                self.direct = false;
                self.read_at_into(offset_bytes, buffer).map_err(|error| os_error(&self.path, block, "read", &error))
            }
            Err(error) => Err(os_error(&self.path, block, "read", &error)),
        }
    }

    /// With O_DIRECT and enough reads, spread over threads as a batch is.
    fn read_many_into(&mut self, reads: &mut [(u64, &mut [u8])]) -> Result<(), DeviceError> {
        let threads = if self.direct { spread_threads(reads.len()) } else { 1 };
        if threads == 1 {
            return reads.iter_mut().try_for_each(|(block, buffer)| self.read_into(*block, buffer));
        }
        let device = &*self;
        let outcomes = spread(reads.iter_mut().collect(), threads, |(block, buffer)| {
            let outcome = validate_span(&device.info, *block, buffer.len()).map(|_| {
                let offset_bytes = *block * u64::from(device.info.block_size_bytes);
                device.read_at_into(offset_bytes, buffer)
            });
            match outcome {
                Ok(read) => device.spread_outcome(*block, "read", read),
                Err(error) => SpreadOutcome::Done(Err(error)),
            }
        });
        for (index, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                SpreadOutcome::Done(result) => result?,
                SpreadOutcome::RefusedDirect => {
                    let (block, buffer) = &mut reads[index];
                    self.read_into(*block, buffer)?;
                }
            }
        }
        Ok(())
    }

    fn write_blocks(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        validate_span(&self.info, block, data.len())?;
        let offset_bytes = block * u64::from(self.info.block_size_bytes);
        self.with_direct_fallback(block, "write", |device| device.write_at(offset_bytes, data).map(|()| Vec::new()))
            .map(drop)
    }

    /// One `pwritev` when buffered, or with O_DIRECT when every piece is
    /// aligned for it; else the pieces are joined into one aligned buffer and
    /// written as one request.
    fn write_gathered(&mut self, block: u64, pieces: &[&[u8]]) -> Result<(), DeviceError> {
        let length_bytes: usize = pieces.iter().map(|piece| piece.len()).sum();
        validate_span(&self.info, block, length_bytes)?;
        let block_size = self.info.block_size_bytes as usize;
        if pieces.iter().any(|piece| !piece.len().is_multiple_of(block_size)) {
            return Err(invalid(&self.path, "a gathered write's pieces must be whole blocks".into()));
        }
        if let [single] = pieces {
            return self.write_blocks(block, single);
        }
        let vectored = !self.direct || pieces.iter().all(|piece| is_direct_aligned(piece));
        if pieces.len() > MAX_GATHERED_PIECES || !vectored {
            return self.write_blocks(block, AlignedBuffer::joined(pieces).as_slice());
        }
        let offset_bytes = block * block_size as u64;
        write_all_vectored_at(&self.file, pieces, offset_bytes)
            .map_err(|error| os_error(&self.path, block, "write", &error))
    }

    fn write_back_handle(&self) -> Result<Option<Box<dyn crate::WriteBack>>, DeviceError> {
        let file = self.file.try_clone().map_err(|error| os_error(&self.path, 0, "flush", &error))?;
        Ok(Some(Box::new(FileWriteBack { file, kind: self.kind, path: self.path.clone() })))
    }

    fn supports_shared_reads(&self) -> bool {
        true
    }

    /// Reads through `&self`: `pread` needs no exclusive access. (An O_DIRECT
    /// refusal cannot reopen the file here; it is reported as an error, and
    /// the first read through `&mut self` — a volume's open reads its
    /// superblock that way — has already settled the mode.)
    fn read_into_shared(&self, block: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        validate_span(&self.info, block, buffer.len())?;
        let offset_bytes = block * u64::from(self.info.block_size_bytes);
        self.read_at_into(offset_bytes, buffer).map_err(|error| os_error(&self.path, block, "read", &error))
    }
}

/// The name of an operation in an error message.
fn op_name(op: IoOp) -> &'static str {
    match op {
        IoOp::Read => "read",
        IoOp::Write => "write",
        IoOp::Trim => "trim",
        IoOp::WriteZeroes => "write zeroes",
    }
}

/// What a request of a spread batch came to.
#[derive(Debug)]
enum SpreadOutcome<T> {
    Done(Result<T, DeviceError>),
    /// O_DIRECT I/O refused with EINVAL: performed again once the file is
    /// reopened buffered.
    RefusedDirect,
}

/// Threads to spread `request_count` requests over: one (run in order here)
/// for too few to gain from overlap.
fn spread_threads(request_count: usize) -> usize {
    (request_count / BATCH_REQUESTS_PER_THREAD).clamp(1, BATCH_THREADS)
}

/// Runs `work` on every item from `threads` threads, each taking the next
/// item not yet taken; returns the results in the items' order.
fn spread<T: Send, R: Send>(items: Vec<T>, threads: usize, work: impl Fn(T) -> R + Sync) -> Vec<R> {
    let queue = Mutex::new(items.into_iter().enumerate());
    let mut results: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let next = queue.lock().expect("no worker panics holding the queue").next();
                        let Some((index, item)) = next else { return done };
                        done.push((index, work(item)));
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|worker| worker.join().expect("a batch thread does not panic")).collect()
    });
    results.sort_unstable_by_key(|&(index, _)| index);
    results.into_iter().map(|(_, result)| result).collect()
}

/// Most pieces one `pwritev` takes here (well under `IOV_MAX`, 1024 on Linux).
const MAX_GATHERED_PIECES: usize = 512;

/// Writes `pieces` one after the other at `offset_bytes` with `pwritev`,
/// continuing after a short write.
fn write_all_vectored_at(file: &File, pieces: &[&[u8]], offset_bytes: u64) -> std::io::Result<()> {
    let mut slices: Vec<&[u8]> = pieces.to_vec();
    let mut offset = offset_bytes;
    while !slices.is_empty() {
        let iovecs: Vec<libc::iovec> = slices
            .iter()
            .map(|slice| libc::iovec { iov_base: slice.as_ptr() as *mut libc::c_void, iov_len: slice.len() })
            .collect();
        let at = libc::off_t::try_from(offset).map_err(|_| std::io::Error::from_raw_os_error(libc::EFBIG))?;
        let iovec_count = libc::c_int::try_from(iovecs.len()).expect("at most MAX_GATHERED_PIECES pieces");
        // SAFETY: every iovec points into a slice borrowed for this call, alive
        // and unaliased by writes until it returns; pwritev only reads them.
        let written = unsafe { libc::pwritev(file.as_raw_fd(), iovecs.as_ptr(), iovec_count, at) };
        if written < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        if written == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::WriteZero));
        }
        let mut remaining = written as usize;
        offset += remaining as u64;
        while remaining > 0 {
            if remaining >= slices[0].len() {
                remaining -= slices[0].len();
                slices.remove(0);
            } else {
                slices[0] = &slices[0][remaining..];
                remaining = 0;
            }
        }
    }
    Ok(())
}

/// Whether `bytes` may be handed to O_DIRECT I/O as it is.
fn is_direct_aligned(bytes: &[u8]) -> bool {
    (bytes.as_ptr() as usize).is_multiple_of(DIRECT_ALIGNMENT_BYTES)
        && bytes.len().is_multiple_of(DIRECT_ALIGNMENT_BYTES)
}

/// A zeroed buffer whose start is aligned for O_DIRECT, carved out of a slightly
/// larger `Vec` so that no unsafe allocation is needed.
struct AlignedBuffer {
    storage: Vec<u8>,
    start: usize,
    length: usize,
}

impl AlignedBuffer {
    /// `pieces` one after the other; only the bytes before the aligned start
    /// are zeroed, not the payload's.
    fn joined(pieces: &[&[u8]]) -> Self {
        let length = pieces.iter().map(|piece| piece.len()).sum();
        let mut storage: Vec<u8> = Vec::with_capacity(length + DIRECT_ALIGNMENT_BYTES);
        let start = storage.as_ptr().align_offset(DIRECT_ALIGNMENT_BYTES);
        assert!(start < DIRECT_ALIGNMENT_BYTES, "a byte buffer can always be aligned within one alignment unit");
        storage.resize(start, 0);
        for piece in pieces {
            storage.extend_from_slice(piece);
        }
        // Within the capacity reserved, so the storage never moved.
        debug_assert_eq!(storage.as_ptr().align_offset(DIRECT_ALIGNMENT_BYTES), start);
        Self { storage, start, length }
    }

    fn zeroed(length: usize) -> Self {
        let storage = vec![0; length + DIRECT_ALIGNMENT_BYTES];
        let start = storage.as_ptr().align_offset(DIRECT_ALIGNMENT_BYTES);
        assert!(start < DIRECT_ALIGNMENT_BYTES, "a byte buffer can always be aligned within one alignment unit");
        Self { storage, start, length }
    }

    fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.length]
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.length]
    }
}

fn open_preferring_direct(path: &Path, extra_flags: i32) -> Result<(File, bool), DeviceError> {
    let direct = OpenOptions::new().read(true).write(true).custom_flags(libc::O_DIRECT | extra_flags).open(path);
    match direct {
        Ok(file) => Ok((file, true)),
        // tmpfs and some FUSE file systems refuse O_DIRECT at open.
        Err(error) if error.raw_os_error() == Some(libc::EINVAL) => Ok((open_buffered(path, extra_flags)?, false)),
        Err(error) => Err(open_error(path, &error)),
    }
}

fn open_buffered(path: &Path, extra_flags: i32) -> Result<File, DeviceError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(extra_flags)
        .open(path)
        .map_err(|error| open_error(path, &error))
}

fn open_error(path: &Path, error: &std::io::Error) -> DeviceError {
    match error.raw_os_error() {
        Some(libc::EBUSY) => DeviceError::InUse {
            device: path.display().to_string(),
            detail: "the block device is mounted or held exclusively by another program".into(),
        },
        _ => os_error(path, 0, "open", error),
    }
}

/// Turns O_DIRECT off on an open file: the same descriptor, and the lock it
/// holds, go on buffered.
fn clear_direct(file: &File, path: &Path) -> Result<(), DeviceError> {
    let fd = file.as_raw_fd();
    // SAFETY: fcntl with F_GETFL/F_SETFL takes a valid descriptor and integers.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_DIRECT) } < 0 {
        return Err(os_error(path, 0, "turn O_DIRECT off", &std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Takes an exclusive `flock` on `file` without waiting.
fn lock_exclusively(file: &File, path: &Path) -> Result<(), DeviceError> {
    // SAFETY: flock takes a valid open descriptor and flags; it touches no memory of ours.
    let status = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if status == 0 {
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Err(DeviceError::InUse {
            device: path.display().to_string(),
            detail: "another open of it holds it (another volume, or a server of this one)".into(),
        }),
        _ => Err(os_error(path, 0, "flock", &error)),
    }
}

fn punch_hole(file: &File, offset_bytes: u64, length_bytes: usize) -> std::io::Result<()> {
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    let offset = libc::off_t::try_from(offset_bytes).map_err(|_| std::io::Error::from_raw_os_error(libc::EFBIG))?;
    let length = libc::off_t::try_from(length_bytes).map_err(|_| std::io::Error::from_raw_os_error(libc::EFBIG))?;
    // SAFETY: fallocate takes a valid open descriptor and plain integers; it does
    // not touch memory of ours.
    let status = unsafe { libc::fallocate(file.as_raw_fd(), mode, offset, length) };
    if status == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn discard(file: &File, offset_bytes: u64, length_bytes: usize) -> std::io::Result<()> {
    let range: [u64; 2] = [offset_bytes, length_bytes as u64];
    // SAFETY: BLKDISCARD reads two u64 (start, length) from the pointer, which
    // points at `range`, alive for the duration of the call.
    let status = unsafe { libc::ioctl(file.as_raw_fd(), BLKDISCARD as _, range.as_ptr()) };
    if status == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn is_unsupported(error: &std::io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOTTY | libc::ENOSYS | libc::EINVAL))
}

fn check_block_size(path: &Path, block_size_bytes: u32) -> Result<(), DeviceError> {
    if block_size_bytes.is_power_of_two() && block_size_bytes >= 512 {
        Ok(())
    } else {
        Err(invalid(path, format!("block size {block_size_bytes} is not a power of two of at least 512 bytes")))
    }
}

fn invalid(path: &Path, detail: String) -> DeviceError {
    DeviceError::Invalid { device: path.display().to_string(), detail }
}

/// Maps an operating-system error to a [`DeviceError`] naming the path and block.
fn os_error(path: &Path, block: u64, what: &str, error: &std::io::Error) -> DeviceError {
    let device = path.display().to_string();
    match error.raw_os_error() {
        Some(libc::ENOSPC | libc::EDQUOT) => DeviceError::NoSpace { device },
        _ => DeviceError::Io { device, block, detail: format!("{what}: {error}") },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(seed: u8, length: usize) -> Vec<u8> {
        (0..=u8::MAX).cycle().take(length).map(|byte| byte.wrapping_mul(31).wrapping_add(seed)).collect()
    }

    #[test]
    fn create_write_read_reopen() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("device.img");
        let mut device = FileDevice::create(&path, 4096, 64).unwrap();
        assert_eq!(device.info().block_count, 64);
        assert_eq!(device.kind(), FileKind::Regular);
        let data = pattern(3, 3 * 4096);
        device.write_blocks(10, &data).unwrap();
        device.flush().unwrap();
        assert_eq!(device.read_blocks(10, 3).unwrap(), data);
        drop(device);
        let mut reopened = FileDevice::open(&path).unwrap();
        assert_eq!(reopened.read_blocks(10, 3).unwrap(), data);
        assert_eq!(reopened.read_blocks(0, 1).unwrap(), vec![0; 4096]);
    }

    #[test]
    fn create_refuses_an_existing_file_and_open_a_missing_one() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("device.img");
        FileDevice::create(&path, 4096, 4).unwrap();
        let exists = FileDevice::create(&path, 4096, 4).unwrap_err();
        assert!(exists.to_string().contains("device.img"), "{exists}");
        let missing = FileDevice::open(&directory.path().join("missing")).unwrap_err();
        assert!(matches!(missing, DeviceError::Io { .. }), "{missing}");
        assert!(missing.to_string().contains("missing"), "{missing}");
    }

    #[test]
    fn open_refuses_a_size_that_is_not_whole_blocks() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("odd.img");
        std::fs::write(&path, vec![0; 5000]).unwrap();
        assert!(matches!(FileDevice::open(&path), Err(DeviceError::Invalid { .. })));
        assert!(matches!(FileDevice::open_with_block_size(&path, 1000), Err(DeviceError::Invalid { .. })));
    }

    #[test]
    fn trim_reads_back_zeroes_and_keeps_the_size() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("device.img");
        let mut device = FileDevice::create(&path, 4096, 16).unwrap();
        device.write_blocks(0, &pattern(9, 16 * 4096)).unwrap();
        device.trim_blocks(4, 8).unwrap();
        let contents = device.read_blocks(0, 16).unwrap();
        assert_eq!(&contents[4 * 4096..12 * 4096], &vec![0; 8 * 4096][..]);
        assert_eq!(&contents[..4 * 4096], &pattern(9, 16 * 4096)[..4 * 4096]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 16 * 4096);
    }

    #[test]
    fn fua_write_and_mixed_batch_complete_in_order() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("device.img");
        let mut device = FileDevice::create(&path, 512, 32).unwrap();
        let batch = vec![
            IoRequest::write(1, 2, pattern(1, 1024)).with_fua(),
            IoRequest::read(1, 2),
            IoRequest::read(31, 2),
            IoRequest::trim(1, 1),
            IoRequest::read(1, 1),
        ];
        let completions = device.execute(batch).unwrap();
        assert_eq!(completions[1].result.as_ref().unwrap(), &pattern(1, 1024));
        assert!(matches!(completions[2].result, Err(DeviceError::OutOfRange { .. })));
        assert_eq!(completions[4].result.as_ref().unwrap(), &vec![0; 512]);
        assert!(completions.iter().all(|completion| completion.completed_ns >= completion.submitted_ns));
    }

    #[test]
    fn a_direct_batch_spread_over_threads_answers_each_request_in_its_place() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("device.img");
        let mut device = FileDevice::create(&path, 4096, 256).unwrap();
        assert!(device.is_direct(), "the test directory's file system takes O_DIRECT");
        let writes: Vec<IoRequest> =
            (0..64u8).map(|seed| IoRequest::write(u64::from(seed) * 3, 1, pattern(seed, 4096))).collect();
        assert!(spread_threads(writes.len()) > 1, "spread");
        let completions = device.execute(writes).unwrap();
        assert!(completions.iter().all(|completion| completion.result.is_ok()));
        // Reads, one beyond the end among them, and a FUA write of another block.
        let mut batch: Vec<IoRequest> = (0..64u64).map(|seed| IoRequest::read(seed * 3, 1)).collect();
        batch.insert(10, IoRequest::read(255, 2));
        batch.push(IoRequest::write(200, 1, pattern(99, 4096)).with_fua());
        let completions = device.execute(batch).unwrap();
        assert!(matches!(completions[10].result, Err(DeviceError::OutOfRange { .. })));
        let reads = completions[..10].iter().chain(&completions[11..65]);
        for (seed, completion) in (0..64u8).zip(reads) {
            assert_eq!(completion.result.as_ref().unwrap(), &pattern(seed, 4096), "block {}", u64::from(seed) * 3);
        }
        assert!(completions.iter().all(|completion| completion.completed_ns >= completion.submitted_ns));
        assert_eq!(device.read_blocks(200, 1).unwrap(), pattern(99, 4096));
        // The same blocks read into the caller's buffers, spread too.
        let mut buffers = vec![vec![0u8; 4096]; 64];
        let mut reads: Vec<(u64, &mut [u8])> =
            (0..).step_by(3).zip(buffers.iter_mut()).map(|(block, buffer)| (block, buffer.as_mut_slice())).collect();
        device.read_many_into(&mut reads).unwrap();
        for (seed, buffer) in (0..64u8).zip(&buffers) {
            assert_eq!(buffer, &pattern(seed, 4096), "block {}", u64::from(seed) * 3);
        }
        let mut beyond = [0u8; 8192];
        let error = device.read_many_into(&mut [(0, &mut [0u8; 4096][..]), (255, &mut beyond[..])]).unwrap_err();
        assert!(matches!(error, DeviceError::OutOfRange { .. }));
    }

    #[test]
    fn works_on_tmpfs_with_or_without_direct_io() {
        let shm = Path::new("/dev/shm");
        assert!(shm.is_dir(), "Linux mounts a tmpfs at /dev/shm");
        let directory = tempfile::tempdir_in(shm).unwrap();
        let path = directory.path().join("device.img");
        let mut device = FileDevice::create(&path, 4096, 8).unwrap();
        // tmpfs refused O_DIRECT before Linux 6.6 and accepts it since: either way
        // the device must work.
        device.write_blocks(2, &pattern(5, 4096)).unwrap();
        device.flush().unwrap();
        assert_eq!(device.read_blocks(2, 1).unwrap(), pattern(5, 4096));
    }

    fn buffered_file(directory: &Path, name: &str, length_bytes: u64) -> PathBuf {
        let path = directory.join(name);
        File::create(&path).unwrap().set_len(length_bytes).unwrap();
        path
    }

    /// A 16-block file device named `name` in `directory`, buffered or direct.
    fn device_in_mode(directory: &Path, name: &str, io: FileIo) -> FileDevice {
        let path = buffered_file(directory, &format!("{name}-{io:?}"), 16 * 4096);
        FileDevice::open_with_options(&path, FileOptions { io, ..FileOptions::default() }).unwrap()
    }

    #[test]
    fn buffered_device_reads_back_writes_and_trims_to_zeroes() {
        let directory = tempfile::tempdir().unwrap();
        let path = buffered_file(directory.path(), "disk", 16 * 4096);
        let mut device = FileDevice::open_buffered(&path).unwrap();
        assert!(!device.is_direct());
        assert_eq!(device.info().block_count, 16);
        let data = pattern(4, 2 * 4096);
        device.write_blocks(3, &data).unwrap();
        assert_eq!(device.read_blocks(3, 2).unwrap(), data);
        device.trim_blocks(4, 1).unwrap();
        assert_eq!(device.read_blocks(4, 1).unwrap(), vec![0; 4096]);
        device.flush().unwrap();
    }

    #[test]
    fn buffered_device_refuses_bad_sizes_and_requests() {
        let directory = tempfile::tempdir().unwrap();
        let odd = buffered_file(directory.path(), "odd", 4096 + 1);
        assert!(matches!(FileDevice::open_buffered(&odd), Err(DeviceError::Invalid { .. })));
        let missing = directory.path().join("missing");
        let error = FileDevice::open_buffered(&missing).unwrap_err();
        assert!(error.to_string().contains("missing"), "{error}");
        let path = buffered_file(directory.path(), "disk", 4 * 4096);
        let mut device = FileDevice::open_buffered(&path).unwrap();
        assert!(matches!(device.read_blocks(3, 2), Err(DeviceError::OutOfRange { .. })));
        let mut buffer = vec![0; 2 * 4096];
        assert!(matches!(device.read_into(3, &mut buffer), Err(DeviceError::OutOfRange { .. })));
        assert!(matches!(device.read_into_shared(3, &mut buffer), Err(DeviceError::OutOfRange { .. })));
        assert!(matches!(device.read_into(0, &mut buffer[..100]), Err(DeviceError::Invalid { .. })));
        assert!(matches!(device.write_blocks(3, &buffer), Err(DeviceError::OutOfRange { .. })));
    }

    #[test]
    fn ignored_trims_keep_the_contents() {
        let directory = tempfile::tempdir().unwrap();
        let path = buffered_file(directory.path(), "flash", 8 * 4096);
        let mut device =
            FileDevice::open_with_options(&path, FileOptions::buffered().with_trims(TrimPolicy::Ignore)).unwrap();
        device.write_blocks(2, &pattern(7, 4096)).unwrap();
        device.trim_blocks(2, 1).unwrap();
        assert_eq!(device.read_blocks(2, 1).unwrap(), pattern(7, 4096));
    }

    #[test]
    fn reads_into_caller_buffers_in_either_mode() {
        let directory = tempfile::tempdir().unwrap();
        for io in [FileIo::Buffered, FileIo::Direct] {
            let mut device = device_in_mode(directory.path(), "read", io);
            let data = pattern(11, 3 * 4096);
            device.write_blocks(5, &data).unwrap();
            // An unaligned buffer works too (through a bounce buffer with O_DIRECT).
            let mut storage = vec![0u8; 3 * 4096 + 1];
            device.read_into(5, &mut storage[1..]).unwrap();
            assert_eq!(&storage[1..], &data[..]);
            assert!(device.supports_shared_reads());
            let mut shared = vec![0u8; 4096];
            device.read_into_shared(6, &mut shared).unwrap();
            assert_eq!(&shared[..], &data[4096..2 * 4096]);
        }
    }

    #[test]
    fn gathered_writes_land_in_order_in_either_mode() {
        let directory = tempfile::tempdir().unwrap();
        for io in [FileIo::Buffered, FileIo::Direct] {
            let mut device = device_in_mode(directory.path(), "gather", io);
            let (first, second, third) = (pattern(1, 4096), pattern(2, 2 * 4096), pattern(3, 4096));
            device.write_gathered(3, &[&first, &second, &third]).unwrap();
            assert_eq!(device.read_blocks(3, 4).unwrap(), [first, second, third].concat());
            assert!(matches!(
                device.write_gathered(14, &[&[0; 4096], &[0; 8192]]),
                Err(DeviceError::OutOfRange { .. })
            ));
            assert!(matches!(device.write_gathered(0, &[&[0; 100]]), Err(DeviceError::Invalid { .. })));
        }
    }

    #[test]
    fn a_batch_of_consecutive_writes_answers_each_request_in_either_mode() {
        let directory = tempfile::tempdir().unwrap();
        for io in [FileIo::Buffered, FileIo::Direct] {
            let mut device = device_in_mode(directory.path(), "batch", io);
            // Blocks 2, 3-4, 5 run on; 9 stands apart; 15-16 is out of range
            // and 6 follows 5 but with a malformed buffer: each fails alone.
            let batch = vec![
                IoRequest::write(2, 1, pattern(1, 4096)),
                IoRequest::write(3, 2, pattern(2, 2 * 4096)),
                IoRequest::write(5, 1, pattern(3, 4096)),
                IoRequest::write(6, 1, vec![0; 100]),
                IoRequest::write(9, 1, pattern(4, 4096)),
                IoRequest::write(15, 2, pattern(5, 2 * 4096)),
            ];
            let completions = device.execute(batch).unwrap();
            let outcomes: Vec<bool> = completions.iter().map(|completion| completion.result.is_ok()).collect();
            assert_eq!(outcomes, [true, true, true, false, true, false], "{io:?}");
            assert!(matches!(completions[5].result, Err(DeviceError::OutOfRange { .. })));
            let expected = [pattern(1, 4096), pattern(2, 2 * 4096), pattern(3, 4096)].concat();
            assert_eq!(device.read_blocks(2, 4).unwrap(), expected);
            assert_eq!(device.read_blocks(6, 1).unwrap(), vec![0; 4096]);
            assert_eq!(device.read_blocks(9, 1).unwrap(), pattern(4, 4096));
        }
    }

    #[test]
    fn aligned_buffers_are_aligned() {
        for length in [512, 4096, 12288] {
            let buffer = AlignedBuffer::zeroed(length);
            assert_eq!(buffer.as_slice().as_ptr() as usize % DIRECT_ALIGNMENT_BYTES, 0);
            assert_eq!(buffer.as_slice().len(), length);
        }
        let pieces = [pattern(1, 4096), pattern(2, 3 * 4096), pattern(3, 512)];
        let slices: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
        let joined = AlignedBuffer::joined(&slices);
        assert_eq!(joined.as_slice().as_ptr() as usize % DIRECT_ALIGNMENT_BYTES, 0);
        assert_eq!(joined.as_slice(), pieces.concat(), "the pieces in order");
    }
}
