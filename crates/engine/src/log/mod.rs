//! The log between consistency points: records of staged, direct, destaged,
//! unmap, checksum and write-intent updates written to a chain of mirrored log
//! record blocks on flash (docs/format.md, "Log record blocks"), and their
//! replay at open (`replay.rs`, over the read-only chain walk of `walk.rs`).
//!
//! Invariants kept here:
//! - every log block is written once, to both blocks of its slot, in one
//!   batch; the slot of the block after it is reserved before it is written;
//! - a log block is written only after the data device is flushed, so a
//!   durable record implies durable data;
//! - `flushed_through` names the last log block a completed flush made
//!   durable, and every block written carries it: replay tells acknowledged
//!   records (corruption there is an error) from the last flush window (a
//!   crash may have torn it).

mod replay;
pub(crate) mod walk;

use std::collections::BTreeSet;

use proxima_device::BlockDevice;

use crate::checksums::CHECKSUMS_PER_PAGE;
use crate::codec::{encode_log_block, BlockKind, Header, LogRecord, LogSlot, BITS_PER_PAGE, LOG_RECORD_CAPACITY};
use crate::error::{metadata_no_space, DeviceRole, Result};
use crate::io::{device_error, write_pieces};
use crate::volume::Volume;

pub use replay::{CorruptStagedBlock, LogEnd, RecoveryReport};

/// The log of the current epoch (since the last durable CP).
#[derive(Debug, Clone, Default)]
pub(crate) struct LogState {
    /// The reserved slot the next log record block goes to.
    pub head: LogSlot,
    /// Sequence number of that block.
    pub sequence: u64,
    /// Records not yet written.
    pub pending: Vec<LogRecord>,
    /// Every flash block this epoch's log holds (both copies; written or reserved).
    pub epoch_blocks: Vec<u64>,
    /// The data device has writes not yet flushed.
    pub data_unflushed: bool,
    /// The last log block a completed flush made durable (`None`: none yet
    /// in this epoch).
    pub flushed_through: Option<u64>,
    /// Records since the last CP.
    pub records_since_checkpoint: u64,
    /// The last computed bound on the next CP's metadata blocks.
    pub metadata_bound: u64,
    /// `records_since_checkpoint` when that bound was computed.
    pub metadata_bound_at_records: Option<u64>,
    /// The sum of the records' own bounds on the metadata blocks they dirty.
    pub records_bound_blocks: u64,
    /// `records_bound_blocks` when the structural bound was computed.
    pub records_bound_at_refresh: u64,
    /// Write-intent regions logged in this epoch.
    pub intent_regions: BTreeSet<u64>,
}

impl LogState {
    /// The log of an epoch starting at `head` (a zero slot: none yet).
    pub fn new(head: LogSlot) -> Self {
        let epoch_blocks = head.blocks().into_iter().filter(|&block| block != 0).collect();
        Self { head, epoch_blocks, ..Self::default() }
    }
}

/// An upper bound on the metadata blocks a record can dirty for the next CP:
/// six for the map leaf it changes with its ancestors and a bitmap page (and
/// its index node) of the blocks it maps and of those it frees; for a run, two
/// more for every further bitmap page it spans; with data checksums, the
/// checksum pages it sets (one more for a run that straddles a page) and an
/// index node.
pub(crate) fn metadata_blocks_bound(record: &LogRecord, checksums: bool) -> u64 {
    let further_bitmap_pages = |count: u32| 2 * (u64::from(count).div_ceil(BITS_PER_PAGE) - 1);
    let checksum_pages = |count: u32| {
        if checksums {
            u64::from(count).div_ceil(CHECKSUMS_PER_PAGE) + 2
        } else {
            0
        }
    };
    match *record {
        LogRecord::Staged { .. } => 6 + checksum_pages(1),
        LogRecord::Direct { block_count, .. } | LogRecord::Destaged { block_count, .. } => {
            6 + further_bitmap_pages(block_count) + checksum_pages(block_count)
        }
        LogRecord::Unmap { block_count, .. } => 6 + further_bitmap_pages(block_count),
        LogRecord::Checksums { count, .. } => checksum_pages(u32::from(count)),
        LogRecord::WriteIntent { .. } => 0,
        // A copy-out-table leaf with its ancestors, and the copy's bitmap
        // page with its index node.
        LogRecord::CopyOut { .. } => 6,
    }
}

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    /// Appends a record; full log blocks are written (without a flush) at
    /// once, or, while the data device has unflushed writes, once
    /// `log_blocks_held_while_data_unflushed` of them are full.
    ///
    /// A log block goes to flash only after the data device is flushed (a
    /// durable direct record implies durable data), and on a buffered data
    /// file that flush writes back every dirty page: one flush per block of
    /// records made a stream of large writes wait for the disk every few
    /// writes. Records held are lost by a crash as an unflushed log block
    /// is; a flush or CP writes them all.
    pub(crate) fn push_record(&mut self, record: LogRecord) -> Result<()> {
        self.log.records_bound_blocks += metadata_blocks_bound(&record, self.checksums.is_some());
        self.log.pending.push(record);
        self.log.records_since_checkpoint += 1;
        let held_blocks =
            if self.log.data_unflushed { self.options.log_blocks_held_while_data_unflushed.max(1) } else { 1 };
        if self.log.pending.len() >= held_blocks * LOG_RECORD_CAPACITY {
            self.write_log_blocks()?;
        }
        Ok(())
    }

    /// Appends several records in order.
    pub(crate) fn push_records(&mut self, records: impl IntoIterator<Item = LogRecord>) -> Result<()> {
        for record in records {
            self.push_record(record)?;
        }
        Ok(())
    }

    /// Writes pending records and flushes, making every completed update durable.
    pub(crate) fn flush_pending_records(&mut self) -> Result<()> {
        if !self.log.pending.is_empty() {
            self.write_log_blocks()?;
        } else if self.log.data_unflushed {
            self.flush_data_device()?;
        }
        self.flash.flush().map_err(device_error(DeviceRole::Flash))?;
        self.log.flushed_through = self.log.sequence.checked_sub(1);
        Ok(())
    }

    pub(crate) fn flush_data_device(&mut self) -> Result<()> {
        self.data.flush().map_err(device_error(DeviceRole::Data))?;
        self.log.data_unflushed = false;
        Ok(())
    }

    /// Writes the pending records, in as many log blocks as they fill, after
    /// the data device is flushed (so a durable direct record implies
    /// durable data).
    fn write_log_blocks(&mut self) -> Result<()> {
        if self.log.data_unflushed {
            self.flush_data_device()?;
        }
        let pending = std::mem::take(&mut self.log.pending);
        for (index, records) in pending.chunks(LOG_RECORD_CAPACITY).enumerate() {
            if let Err(error) = self.write_log_block(records) {
                // What is not written stays pending, as before the attempt.
                self.log.pending = pending[index * LOG_RECORD_CAPACITY..].to_vec();
                return Err(error);
            }
        }
        Ok(())
    }

    /// Writes `records` (at most a block's worth) to both blocks of the head
    /// slot, chaining the next slot.
    fn write_log_block(&mut self, records: &[LogRecord]) -> Result<()> {
        let next = LogSlot {
            primary: self.flash_space.allocate_one("log record block").map_err(metadata_no_space)?,
            mirror: self.flash_space.allocate_one("log record block mirror").map_err(metadata_no_space)?,
        };
        self.log.epoch_blocks.extend(next.blocks());
        let header = self.log_header(self.log.sequence);
        let block = encode_log_block(&header, next, self.log.flushed_through, records);
        let head = self.log.head;
        assert_ne!(head.primary, 0, "the log head is reserved before records are written");
        assert_ne!(head.primary, head.mirror, "the copies of a log block are apart");
        write_pieces(&mut self.flash, DeviceRole::Flash, vec![(head.primary, block.clone()), (head.mirror, block)])?;
        self.log.head = next;
        self.log.sequence += 1;
        self.stats.log_blocks_written += 1;
        Ok(())
    }

    pub(crate) fn log_header(&self, sequence: u64) -> Header {
        Header {
            kind: BlockKind::LogBlock,
            level: 0,
            entry_count: 0,
            volume_id: self.volume_id,
            owner: self.mount_count,
            generation: self.generation,
            key: sequence,
        }
    }

    /// Reserves the slot of the first log block of a new epoch.
    pub(crate) fn reserve_log_head(&mut self) -> Result<LogSlot> {
        Ok(LogSlot {
            primary: self.flash_space.allocate_one("log head")?,
            mirror: self.flash_space.allocate_one("log head mirror")?,
        })
    }
}
