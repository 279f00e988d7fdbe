//! The block-device seam.
//!
//! Everything Proxima stores goes through [`BlockDevice`]: the engine never knows
//! whether a device is a file, memory, or a simulated disk in virtual time. The
//! contract is split-phase so that a layout can hand a whole strand to a device (or
//! to several devices of a RAID group at once) and then learn each completion:
//!
//! 1. [`BlockDevice::submit`] queues a batch and returns a [`BatchTicket`]; it does
//!    not wait. Requests within a batch may be serviced in any order.
//! 2. [`BlockDevice::wait`] blocks until every request of that batch has completed
//!    and returns one [`IoCompletion`] per request, in submission order.
//!
//! Devices that run in virtual time share one clock; waiting on one device lets
//! every device on that clock progress, so batches submitted to several devices
//! before waiting are serviced in parallel, as real disks would.
//!
//! Durability: a completed write is *written*, not *durable*. Only a successful
//! [`BlockDevice::flush`], or a write submitted with `fua`, makes data durable.

#![warn(clippy::cast_possible_truncation)]

mod batches;
mod crash;
mod fault;
mod file;
mod label;
mod latch;
mod memory;
mod raid;
mod seeds;
mod simulated;
mod stats;
mod stripe;

pub use batches::CompletedBatches;
pub use crash::{CrashDevice, CrashImage, CrashPoint, CrashReport, PendingWrites, Tear, TornWrite};
pub use fault::{Fault, FaultDevice, FaultOp, FaultPlan, FaultRule, FaultTrigger, InjectedFault};
pub use file::{FileDevice, FileIo, FileKind, FileOptions, TrimMethod, TrimPolicy, DEFAULT_BLOCK_SIZE_BYTES};
pub use label::{read_label, DeviceLabel, LabelError, LabelRole, LabeledDevice, LABEL_BLOCKS};
pub use latch::LatchDevice;
pub use memory::MemoryDevice;
pub use raid::{
    zone_block_checksum, ChecksumMismatch, ParityMismatch, RaidConfig, RaidDevice, RaidLevel, RebuildReport,
    DEFAULT_STRIPE_UNIT_BYTES, NETAPP_ZONE_DATA_BLOCKS, WRITE_INTENT_REGION_BYTES,
};
pub use seeds::seeds_for_test;
pub use simulated::{SimulatedDevice, SimulatedOptions, SimulationHandle};
pub use stats::{DeviceStats, OperationStats, StatsDevice};
pub use stripe::StripeDevice;

use thiserror::Error;

/// What a device is: its addressing unit, size, and whether it stores data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Human-readable name for errors and reports (a path, "memory", "disk0").
    pub name: String,
    /// Size of one addressable block in bytes (a power of two, usually 4096).
    pub block_size_bytes: u32,
    /// Number of addressable blocks.
    pub block_count: u64,
    /// Unit the device writes atomically; a torn write tears at this granularity.
    pub atomic_write_bytes: u32,
    /// False for a simulated device in metadata-only mode: writes are timed but
    /// their bytes dropped, and reads return zeroes.
    pub stores_payload: bool,
}

impl DeviceInfo {
    /// Capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.block_count * u64::from(self.block_size_bytes)
    }
}

/// The operation of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoOp {
    /// Read `block_count` blocks into the request's buffer.
    Read,
    /// Write the request's buffer to `block_count` blocks.
    Write,
    /// Discard `block_count` blocks; later reads of them return unspecified data.
    Trim,
    /// Write zeroes to `block_count` blocks, without a data buffer: later
    /// reads of them return zeroes. Timed and durable as a write.
    WriteZeroes,
}

impl IoOp {
    /// Whether the operation changes what the device holds.
    pub fn modifies(self) -> bool {
        self != IoOp::Read
    }
}

/// One request of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoRequest {
    /// What to do.
    pub op: IoOp,
    /// First block addressed.
    pub block: u64,
    /// Number of blocks addressed (at least 1).
    pub block_count: u32,
    /// For a write, the data (`block_count * block_size_bytes` bytes, or empty on
    /// a device that does not store payload). Empty for a write of zeroes and
    /// a trim. For a read, ignored on submission.
    pub data: Vec<u8>,
    /// Force unit access: the write is durable when it completes.
    pub fua: bool,
}

impl IoRequest {
    /// A read of `block_count` blocks starting at `block`.
    pub fn read(block: u64, block_count: u32) -> Self {
        Self { op: IoOp::Read, block, block_count, data: Vec::new(), fua: false }
    }

    /// A write of `data` (a whole number of blocks) starting at `block`.
    pub fn write(block: u64, block_count: u32, data: Vec<u8>) -> Self {
        Self { op: IoOp::Write, block, block_count, data, fua: false }
    }

    /// A trim of `block_count` blocks starting at `block`.
    pub fn trim(block: u64, block_count: u32) -> Self {
        Self { op: IoOp::Trim, block, block_count, data: Vec::new(), fua: false }
    }

    /// A write of zeroes to `block_count` blocks starting at `block`.
    pub fn write_zeroes(block: u64, block_count: u32) -> Self {
        Self { op: IoOp::WriteZeroes, block, block_count, data: Vec::new(), fua: false }
    }

    /// The same request with force-unit-access set.
    pub fn with_fua(mut self) -> Self {
        self.fua = true;
        self
    }

    /// One past the last block addressed.
    pub fn end_block(&self) -> u64 {
        self.block + u64::from(self.block_count)
    }
}

/// The outcome of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoCompletion {
    /// For a successful read, the data read (empty on a device that does not store
    /// payload); for other operations, empty.
    pub result: Result<Vec<u8>, DeviceError>,
    /// When the request was submitted, in the device clock's nanoseconds.
    pub submitted_ns: u64,
    /// When the request completed, in the device clock's nanoseconds.
    pub completed_ns: u64,
}

impl IoCompletion {
    /// Response time of the request in nanoseconds.
    pub fn response_ns(&self) -> u64 {
        self.completed_ns - self.submitted_ns
    }
}

/// Identifies a submitted batch until it is waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BatchTicket(pub u64);

/// Expected operating errors of a device.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DeviceError {
    /// The medium or the operating system reported an I/O error.
    #[error("{device}: I/O error at block {block}: {detail}")]
    Io {
        /// The device.
        device: String,
        /// The block the error is reported at: the faulty block when known, else the request's first.
        block: u64,
        /// What was reported.
        detail: String,
    },
    /// The request addresses blocks past the end of the device.
    #[error("{device}: blocks {block}..{end_block} are beyond the device's {block_count} blocks")]
    OutOfRange {
        /// The device.
        device: String,
        /// The request's first block.
        block: u64,
        /// The block after the request's last.
        end_block: u64,
        /// The device's size in blocks.
        block_count: u64,
    },
    /// The request is malformed (zero length, wrong buffer size, ...).
    #[error("{device}: invalid request: {detail}")]
    Invalid {
        /// The device.
        device: String,
        /// What is wrong with the request.
        detail: String,
    },
    /// The device (or the file system under it) is out of space.
    #[error("{device}: no space left on device")]
    NoSpace {
        /// The device.
        device: String,
    },
    /// An earlier write or flush failed; the device refuses further writes.
    #[error("{device}: writes refused after an earlier write or flush failure")]
    Latched {
        /// The device.
        device: String,
    },
    /// The device is held by another user: a lock, a mount, or an exclusive open.
    #[error("{device}: in use: {detail}")]
    InUse {
        /// The device.
        device: String,
        /// Who holds it, as far as is known.
        detail: String,
    },
    /// The ticket does not name a pending batch of this device.
    #[error("{device}: unknown batch ticket {ticket}")]
    UnknownTicket {
        /// The device.
        device: String,
        /// The ticket given.
        ticket: u64,
    },
}

/// A handle that writes a device's completed writes back to stable storage
/// without access to the device itself, so that a server can start the
/// write-back of what a background task wrote while it holds no lock, and the
/// [`BlockDevice::flush`] it then makes under its lock finds little left to
/// do. Durability still comes from `flush`; this only moves the work. A file
/// device's handle holds the file open, and with it the file's lock, until
/// it is dropped.
pub trait WriteBack: Send + Sync + std::fmt::Debug {
    /// Writes back everything written through the device so far.
    fn write_back(&self) -> Result<(), DeviceError>;
}

/// Several devices' write-backs, one after another.
#[derive(Debug, Default)]
pub struct WriteBacks(pub Vec<Box<dyn WriteBack>>);

impl WriteBack for WriteBacks {
    fn write_back(&self) -> Result<(), DeviceError> {
        self.0.iter().try_for_each(|handle| handle.write_back())
    }
}

/// A device that stores blocks: a file, memory, or a simulated disk.
///
/// Implementations validate every request at submission (range, length, buffer
/// size) and report problems per request, never by panicking.
pub trait BlockDevice {
    /// What this device is.
    fn info(&self) -> DeviceInfo;

    /// Queues `batch` for service and returns a ticket for [`BlockDevice::wait`].
    /// Requests of one batch may complete in any order.
    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError>;

    /// Waits for every request of the batch and returns their completions in
    /// submission order.
    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError>;

    /// Makes every completed write durable.
    fn flush(&mut self) -> Result<(), DeviceError>;

    /// A handle that writes this device's completed writes back without
    /// access to the device ([`WriteBack`]), where the device has such a
    /// path (files do; memory and simulated devices have nothing to write
    /// back and answer `None`).
    fn write_back_handle(&self) -> Result<Option<Box<dyn WriteBack>>, DeviceError> {
        Ok(None)
    }

    /// The device clock in nanoseconds: virtual time for a simulated device,
    /// monotonic wall time since the device was opened otherwise.
    fn now_ns(&self) -> u64;

    /// Submits `batch` and waits for it.
    fn execute(&mut self, batch: Vec<IoRequest>) -> Result<Vec<IoCompletion>, DeviceError> {
        let ticket = self.submit(batch)?;
        self.wait(ticket)
    }

    /// Reads `block_count` blocks at `block`.
    fn read_blocks(&mut self, block: u64, block_count: u32) -> Result<Vec<u8>, DeviceError> {
        single(self.execute(vec![IoRequest::read(block, block_count)])?)
    }

    /// Writes `data` (a whole number of blocks) at `block`.
    fn write_blocks(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        let block_count = block_count_of(&self.info(), data.len())?;
        single(self.execute(vec![IoRequest::write(block, block_count, data.to_vec())])?).map(drop)
    }

    /// Discards `block_count` blocks at `block`.
    fn trim_blocks(&mut self, block: u64, block_count: u32) -> Result<(), DeviceError> {
        single(self.execute(vec![IoRequest::trim(block, block_count)])?).map(drop)
    }

    /// Reads `buffer.len()` bytes (a whole, non-zero number of blocks) at
    /// `block` into `buffer`; a device that does not store payload fills it
    /// with zeroes. The default executes a read request and copies its data;
    /// devices that can read in place override it, so a caller's buffer is
    /// filled without an intermediate allocation.
    fn read_into(&mut self, block: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        let block_count = block_count_of(&self.info(), buffer.len())?;
        let data = single(self.execute(vec![IoRequest::read(block, block_count)])?)?;
        copy_read_data(&data, buffer);
        Ok(())
    }

    /// Reads each `(block, buffer)` of `reads` as [`read_into`](Self::read_into)
    /// does, stopping at the first error. The default reads them one after
    /// the other; a device that can have several in flight at once overrides
    /// it.
    fn read_many_into(&mut self, reads: &mut [(u64, &mut [u8])]) -> Result<(), DeviceError> {
        reads.iter_mut().try_for_each(|(block, buffer)| self.read_into(*block, buffer))
    }

    /// Writes `pieces` (each a whole number of blocks), one after the other,
    /// from `block` on: a gathered write, as one request. The default copies
    /// them into one request; a file device issues one `pwritev`.
    fn write_gathered(&mut self, block: u64, pieces: &[&[u8]]) -> Result<(), DeviceError> {
        match pieces {
            [single] => self.write_blocks(block, single),
            _ => self.write_blocks(block, &pieces.concat()),
        }
    }

    /// Whether [`BlockDevice::read_into_shared`] works: reads through a shared
    /// reference, which several threads may issue at once while no request
    /// goes through `&mut self`.
    fn supports_shared_reads(&self) -> bool {
        false
    }

    /// Reads as [`BlockDevice::read_into`] through a shared reference. Devices
    /// whose [`BlockDevice::supports_shared_reads`] is false refuse with
    /// [`DeviceError::Invalid`].
    fn read_into_shared(&self, block: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        let _ = (block, buffer);
        Err(DeviceError::Invalid {
            device: self.info().name,
            detail: "this device does not serve reads through a shared reference".into(),
        })
    }

    /// Redundancy: block `block` read again from the device's redundancy
    /// rather than from the copy a plain read returns (a RAID array
    /// reconstructs it from the rest of its row). `None` when the device has
    /// no other copy. The caller verifies it; a plain read may have returned
    /// damaged data that the device itself cannot recognise.
    fn read_redundant(&mut self, block: u64) -> Result<Option<Vec<u8>>, DeviceError> {
        let _ = block;
        Ok(None)
    }

    /// Redundancy: writes `data` over the damaged copy of block `block`, data
    /// that [`BlockDevice::read_redundant`] returned and the caller verified
    /// (a RAID array writes the member block only: its parity already agrees).
    fn repair(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        let _ = (block, data);
        Err(DeviceError::Invalid { device: self.info().name, detail: "this device keeps no redundancy".into() })
    }

    /// Redundancy: the size in blocks of the regions whose redundancy a crash
    /// during writes may leave inconsistent with their data (a RAID array's
    /// stripes, grouped), or `None` when a crash cannot. A writer records
    /// durably which regions it is about to write and, after a crash, has
    /// them resynchronised ([`BlockDevice::resync`]).
    fn write_intent_region_blocks(&self) -> Option<u64> {
        None
    }

    /// Redundancy: makes the redundancy of blocks `[block, block +
    /// block_count)` consistent with their data again (a RAID array
    /// recomputes their rows' parity).
    fn resync(&mut self, block: u64, block_count: u64) -> Result<(), DeviceError> {
        let _ = (block, block_count);
        Ok(())
    }
}

/// Implements the redundancy methods of [`BlockDevice`] for a wrapper by
/// handing them to the device it wraps (`self.$field`).
#[macro_export]
macro_rules! forward_redundancy {
    ($field:ident) => {
        fn read_redundant(&mut self, block: u64) -> Result<Option<Vec<u8>>, $crate::DeviceError> {
            self.$field.read_redundant(block)
        }
        fn repair(&mut self, block: u64, data: &[u8]) -> Result<(), $crate::DeviceError> {
            self.$field.repair(block, data)
        }
        fn write_intent_region_blocks(&self) -> Option<u64> {
            self.$field.write_intent_region_blocks()
        }
        fn resync(&mut self, block: u64, block_count: u64) -> Result<(), $crate::DeviceError> {
            self.$field.resync(block, block_count)
        }
    };
}

/// Copies a read's data into a caller's buffer (zeroes where the device
/// returned no payload).
fn copy_read_data(data: &[u8], buffer: &mut [u8]) {
    if data.is_empty() {
        buffer.fill(0);
    } else {
        buffer.copy_from_slice(data);
    }
}

impl<D: BlockDevice + ?Sized> BlockDevice for Box<D> {
    fn info(&self) -> DeviceInfo {
        (**self).info()
    }
    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        (**self).submit(batch)
    }
    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        (**self).wait(ticket)
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        (**self).flush()
    }
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
    fn read_into(&mut self, block: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        (**self).read_into(block, buffer)
    }
    fn read_many_into(&mut self, reads: &mut [(u64, &mut [u8])]) -> Result<(), DeviceError> {
        (**self).read_many_into(reads)
    }
    fn write_blocks(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        (**self).write_blocks(block, data)
    }
    fn write_gathered(&mut self, block: u64, pieces: &[&[u8]]) -> Result<(), DeviceError> {
        (**self).write_gathered(block, pieces)
    }
    fn supports_shared_reads(&self) -> bool {
        (**self).supports_shared_reads()
    }
    fn read_into_shared(&self, block: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        (**self).read_into_shared(block, buffer)
    }
    fn write_back_handle(&self) -> Result<Option<Box<dyn WriteBack>>, DeviceError> {
        (**self).write_back_handle()
    }
    fn read_redundant(&mut self, block: u64) -> Result<Option<Vec<u8>>, DeviceError> {
        (**self).read_redundant(block)
    }
    fn repair(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        (**self).repair(block, data)
    }
    fn write_intent_region_blocks(&self) -> Option<u64> {
        (**self).write_intent_region_blocks()
    }
    fn resync(&mut self, block: u64, block_count: u64) -> Result<(), DeviceError> {
        (**self).resync(block, block_count)
    }
}

fn single(mut completions: Vec<IoCompletion>) -> Result<Vec<u8>, DeviceError> {
    assert_eq!(completions.len(), 1, "one request, one completion");
    completions.pop().expect("one completion").result
}

fn block_count_of(info: &DeviceInfo, length_bytes: usize) -> Result<u32, DeviceError> {
    let block_size = info.block_size_bytes as usize;
    if length_bytes == 0 || !length_bytes.is_multiple_of(block_size) {
        return Err(DeviceError::Invalid {
            device: info.name.clone(),
            detail: format!("{length_bytes} bytes is not a whole, non-zero number of {block_size}-byte blocks"),
        });
    }
    u32::try_from(length_bytes / block_size).map_err(|_| DeviceError::Invalid {
        device: info.name.clone(),
        detail: format!("{length_bytes} bytes is too large for one request"),
    })
}

/// Checks that `length_bytes` at `block` is a whole, non-zero number of blocks
/// inside the device, and returns the block count: the validation of
/// [`BlockDevice::read_into`] and [`BlockDevice::write_blocks`] overrides.
pub fn validate_span(info: &DeviceInfo, block: u64, length_bytes: usize) -> Result<u32, DeviceError> {
    let block_count = block_count_of(info, length_bytes)?;
    validate_request(info, &IoRequest::read(block, block_count))?;
    Ok(block_count)
}

/// Checks a request against a device's geometry: the shared validation every
/// implementation performs at submission.
pub fn validate_request(info: &DeviceInfo, request: &IoRequest) -> Result<(), DeviceError> {
    let invalid = |detail: String| DeviceError::Invalid { device: info.name.clone(), detail };
    if request.block_count == 0 {
        return Err(invalid("zero-length request".into()));
    }
    let end_block = request.block.checked_add(u64::from(request.block_count));
    match end_block {
        Some(end_block) if end_block <= info.block_count => {}
        _ => {
            return Err(DeviceError::OutOfRange {
                device: info.name.clone(),
                block: request.block,
                end_block: end_block.unwrap_or(u64::MAX),
                block_count: info.block_count,
            })
        }
    }
    let expected_bytes = u64::from(request.block_count) * u64::from(info.block_size_bytes);
    match request.op {
        IoOp::Write if info.stores_payload && request.data.len() as u64 != expected_bytes => Err(invalid(format!(
            "write of {} blocks carries {} bytes, expected {expected_bytes}",
            request.block_count,
            request.data.len()
        ))),
        IoOp::Write
            if !info.stores_payload && !request.data.is_empty() && request.data.len() as u64 != expected_bytes =>
        {
            Err(invalid(format!("write carries {} bytes, expected 0 or {expected_bytes}", request.data.len())))
        }
        IoOp::WriteZeroes | IoOp::Trim if !request.data.is_empty() => {
            Err(invalid(format!("a {:?} carries {} bytes, expected none", request.op, request.data.len())))
        }
        _ => Ok(()),
    }
}
