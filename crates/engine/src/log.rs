//! The log between consistency points: records of staged, direct and unmap
//! updates written to a chain of log record blocks on flash, and their replay
//! at open (docs/format.md, "Writes between CPs and log replay").

use proxima_device::BlockDevice;

use crate::codec::{decode_log_block, encode_log_block, BlockKind, Header, LogRecord, BLOCK_SIZE, LOG_RECORD_CAPACITY};
use crate::error::{corrupt, metadata_no_space, DeviceRole, EngineError, Result};
use crate::io::{device_error, read_pieces, write_pieces};
use crate::map::Location;
use crate::volume::Volume;

/// The log of the current epoch (since the last durable CP).
#[derive(Debug, Clone, Default)]
pub(crate) struct LogState {
    /// The reserved block the next log record block goes to.
    pub head: u64,
    /// Sequence number of that block.
    pub sequence: u64,
    /// Records not yet written.
    pub pending: Vec<LogRecord>,
    /// Every flash block this epoch's log holds (written or reserved).
    pub epoch_blocks: Vec<u64>,
    /// The data device has writes not yet flushed.
    pub data_unflushed: bool,
    /// Records since the last CP.
    pub records_since_checkpoint: u64,
    /// The last computed bound on the next CP's metadata blocks.
    pub metadata_bound: u64,
    /// `records_since_checkpoint` when that bound was computed.
    pub metadata_bound_at_records: Option<u64>,
}

impl LogState {
    /// The log of an epoch starting at `head`.
    pub fn new(head: u64) -> Self {
        Self { head, epoch_blocks: if head == 0 { Vec::new() } else { vec![head] }, ..Self::default() }
    }
}

/// Why replay stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayEnd {
    /// A block that is not part of this epoch's log.
    NotPartOfLog(String),
    /// A staged record whose data does not match its checksum.
    StagedDataMismatch {
        /// The flash block of the data.
        flash_block: u64,
    },
}

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    /// Appends a record; a full log block is written at once (without a flush).
    pub(crate) fn push_record(&mut self, record: LogRecord) -> Result<()> {
        self.log.pending.push(record);
        self.log.records_since_checkpoint += 1;
        if self.log.pending.len() == LOG_RECORD_CAPACITY {
            self.write_log_block()?;
        }
        Ok(())
    }

    /// Writes pending records and flushes, making every completed update durable.
    pub(crate) fn flush_pending_records(&mut self) -> Result<()> {
        if !self.log.pending.is_empty() {
            self.write_log_block()?;
        } else if self.log.data_unflushed {
            self.data.flush().map_err(device_error(DeviceRole::Data))?;
            self.log.data_unflushed = false;
        }
        self.flash.flush().map_err(device_error(DeviceRole::Flash))
    }

    /// Writes the pending records to the log head, after the data device is
    /// flushed (so a durable direct record implies durable data).
    fn write_log_block(&mut self) -> Result<()> {
        if self.log.data_unflushed {
            self.data.flush().map_err(device_error(DeviceRole::Data))?;
            self.log.data_unflushed = false;
        }
        let next = self.flash_space.allocate_one("log record block").map_err(metadata_no_space)?;
        self.log.epoch_blocks.push(next);
        let header = self.log_header(self.log.sequence);
        let block = encode_log_block(&header, next, &self.log.pending);
        write_pieces(&mut self.flash, DeviceRole::Flash, vec![(self.log.head, block)])?;
        self.log.head = next;
        self.log.sequence += 1;
        self.log.pending.clear();
        self.stats.log_blocks_written += 1;
        Ok(())
    }

    fn log_header(&self, sequence: u64) -> Header {
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

    /// Replays the log after the loaded CP. Writes nothing.
    pub(crate) fn replay_log(&mut self) -> Result<ReplayEnd> {
        let mut block = self.log.head;
        let mut sequence = 0;
        loop {
            let bytes = read_pieces(&mut self.flash, DeviceRole::Flash, &[(block, 1)])?;
            let expected = self.log_header(sequence);
            let decoded = match decode_log_block(&bytes) {
                Ok(decoded) => decoded,
                Err(detail) => return Ok(ReplayEnd::NotPartOfLog(detail)),
            };
            let header = decoded.header;
            if header.volume_id != expected.volume_id
                || header.generation != expected.generation
                || header.owner != expected.owner
                || header.key != expected.key
            {
                return Ok(ReplayEnd::NotPartOfLog(format!(
                    "block {block}: generation {} mount {} sequence {} is not this epoch's",
                    header.generation, header.owner, header.key
                )));
            }
            if sequence > 0 && !self.flash_space.allocate_exact(block) {
                return Err(corrupt(block, "log record block", "the log chain reaches a block in use"));
            }
            if sequence > 0 {
                self.log.epoch_blocks.push(block);
            }
            for record in decoded.records {
                if let Some(end) = self.replay_record(record)? {
                    return Ok(end);
                }
                self.stats.replayed_records += 1;
            }
            if decoded.next < 2 || decoded.next >= self.flash_space.block_count() {
                return Err(corrupt(
                    block,
                    "log record block",
                    format!("next pointer {} is off the pool", decoded.next),
                ));
            }
            block = decoded.next;
            sequence += 1;
            self.log.head = block;
            self.log.sequence = sequence;
        }
    }

    fn replay_record(&mut self, record: LogRecord) -> Result<Option<ReplayEnd>> {
        match record {
            LogRecord::Staged { extent_id, logical_block, flash_block, data_crc } => {
                self.check_replayed_range(extent_id, logical_block, 1)?;
                if flash_block >= self.flash_space.block_count() {
                    return Err(corrupt(flash_block, "staged record", "flash block beyond the device"));
                }
                let data = read_pieces(&mut self.flash, DeviceRole::Flash, &[(flash_block, 1)])?;
                if crc32c::crc32c(&data[..BLOCK_SIZE]) != data_crc {
                    return Ok(Some(ReplayEnd::StagedDataMismatch { flash_block }));
                }
                if !self.flash_space.allocate_exact(flash_block) {
                    return Err(corrupt(flash_block, "staged record", "names a flash block already in use"));
                }
                self.apply_mapping(extent_id, logical_block, 1, Location::Flash(flash_block));
            }
            LogRecord::Direct { extent_id, logical_block, block_count, data_block } => {
                let count = u64::from(block_count);
                self.check_replayed_range(extent_id, logical_block, count)?;
                for block in data_block..data_block.saturating_add(count) {
                    if !self.data_space.allocate_exact(block) {
                        return Err(EngineError::Corrupt {
                            block,
                            what: "direct log record".into(),
                            detail: format!("names data block {block}, already in use or beyond the device"),
                        });
                    }
                }
                self.apply_mapping(extent_id, logical_block, count, Location::Data(data_block));
            }
            LogRecord::Unmap { extent_id, logical_block, block_count } => {
                let count = u64::from(block_count);
                self.check_replayed_range(extent_id, logical_block, count)?;
                self.unmap_blocks(extent_id, logical_block, count, false)?;
            }
        }
        Ok(None)
    }

    fn check_replayed_range(&self, extent_id: u64, logical_block: u64, count: u64) -> Result<()> {
        let size_blocks = self.extents.get(extent_id).map(|record| record.size_bytes / BLOCK_SIZE as u64);
        match size_blocks {
            Some(size) if logical_block.checked_add(count).is_some_and(|end| end <= size) => Ok(()),
            _ => Err(corrupt(
                self.log.head,
                "log record block",
                format!("record for blocks {logical_block}+{count} of extent {extent_id}, which has no such blocks"),
            )),
        }
    }
}
