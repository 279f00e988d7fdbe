//! Replay of the log at open: the chain is walked first (`walk.rs`), then its
//! records are applied in order to the state loaded from the CP, exactly as the
//! original operations changed it. Replay writes nothing but the parity
//! resync of write-intent regions.
//!
//! Where the walk's flushed-through marks say a record was acknowledged as
//! durable, staged data that fails its checksum is damage: the mapping is
//! applied all the same (reads of that block fail; the old value would be
//! wrong) and reported. After that point — the last flush window, which a
//! crash may have cut short — the first such record ends replay: nothing of
//! that window after it was acknowledged by a completed flush, unless the
//! window's own flush completed, and that loss is reported, never silent.

use std::collections::{BTreeMap, BTreeSet};

use proxima_device::BlockDevice;
use serde::Serialize;

use super::walk::{walk_log, ChainEnd, LogIdentity};
use crate::codec::{LogRecord, LogSlot, BLOCK_SIZE};
use crate::error::{corrupt, DeviceRole, EngineError, Result};
use crate::io::{device_error, read_pieces};
use crate::map::{self, Location};
use crate::volume::{Logging, Volume};

/// Where and why replay stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LogEnd {
    /// The log ended where the last write left it.
    Clean,
    /// The block after the last one replayed was torn by the crash (or is
    /// damaged): records of the last flush window after it are not applied.
    TornBlock {
        /// Its sequence number.
        sequence: u64,
    },
    /// A staged record of the last flush window names data that does not
    /// match it (torn by the crash, or damaged): replay stopped before it.
    StagedDataMismatch {
        /// The log block holding the record.
        sequence: u64,
        /// The extent.
        extent_id: u64,
        /// The logical block.
        logical_block: u64,
        /// The flash block of the data.
        flash_block: u64,
    },
}

impl From<ChainEnd> for LogEnd {
    fn from(end: ChainEnd) -> Self {
        match end {
            ChainEnd::Clean => LogEnd::Clean,
            ChainEnd::Torn { sequence } => LogEnd::TornBlock { sequence },
        }
    }
}

/// An acknowledged staged block whose data no longer matches its checksum:
/// mapped as recorded, so reads of it fail rather than return an old value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CorruptStagedBlock {
    /// The extent.
    pub extent_id: u64,
    /// The logical block.
    pub logical_block: u64,
    /// The flash block of the data.
    pub flash_block: u64,
}

/// What recovery at open found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RecoveryReport {
    /// Log blocks replayed.
    pub log_blocks: u64,
    /// Records applied.
    pub records_replayed: u64,
    /// Where replay stopped (`None`: the volume was formatted, not opened).
    pub end: Option<LogEnd>,
    /// The last log block acknowledged as durable (by the flushed-through marks).
    pub acknowledged_through: Option<u64>,
    /// Log block copies that could not be used (damaged, unreadable or never
    /// written); their other copy was, and the CP after replay supersedes both.
    pub damaged_log_copies: Vec<u64>,
    /// Acknowledged staged blocks whose data is damaged.
    pub corrupt_staged_blocks: Vec<CorruptStagedBlock>,
    /// Data blocks overwritten in place (the in-place layout without a write
    /// cache) that hold neither their old nor any new value: torn by the
    /// crash, as on a frame array without NVRAM. Reads of them fail.
    pub torn_in_place_blocks: Vec<u64>,
    /// Write-intent regions whose redundancy was made consistent again.
    pub resynced_regions: u64,
    /// Superblock slots that were invalid or a CP behind (a crash between
    /// the two slot writes, or damage): rewritten by the CP at open.
    pub stale_superblock_slots: Vec<u64>,
}

impl RecoveryReport {
    /// Whether recovery may have lost acknowledged writes or found damage:
    /// the log ended inside the last flush window, or data was corrupt.
    pub fn needs_attention(&self) -> bool {
        !self.corrupt_staged_blocks.is_empty()
            || !self.torn_in_place_blocks.is_empty()
            || matches!(self.end, Some(LogEnd::StagedDataMismatch { .. }))
    }
}

/// Replay's working state.
#[derive(Default)]
struct Replay {
    report: RecoveryReport,
    /// Data blocks overwritten in place during the epoch: the checksums they
    /// may match (the value before the first overwrite, then each new one).
    overwrites: BTreeMap<u64, Vec<u32>>,
}

/// What replaying one record did.
enum Replayed {
    Applied,
    /// Replay ends before this record.
    Stop(LogEnd),
}

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    /// Replays the log after the loaded CP, whose first block goes to `head`.
    pub(crate) fn replay_log(&mut self, head: LogSlot) -> Result<RecoveryReport> {
        let identity =
            LogIdentity { volume_id: self.volume_id, generation: self.generation, mount_count: self.mount_count };
        let walk = walk_log(&mut self.flash, identity, head, self.flash_space.block_count())?;
        let acknowledged_through = walk.acknowledged_through();
        let report = RecoveryReport {
            end: Some(walk.end.into()),
            acknowledged_through,
            damaged_log_copies: walk.blocks.iter().filter_map(|walked| walked.damaged_copy).collect(),
            ..RecoveryReport::default()
        };
        let mut replay = Replay { report, overwrites: BTreeMap::new() };
        'blocks: for walked in &walk.blocks {
            if walked.sequence > 0 {
                for block in walked.slot.blocks() {
                    if !self.flash_space.allocate_exact(block) {
                        return Err(corrupt(block, "log record block", "the log chain reaches a block in use"));
                    }
                }
                self.log.epoch_blocks.extend(walked.slot.blocks());
            }
            replay.report.log_blocks += 1;
            let acknowledged = acknowledged_through.is_some_and(|through| walked.sequence <= through);
            for &record in &walked.block.records {
                match self.replay_record(record, walked.sequence, acknowledged, &mut replay)? {
                    Replayed::Applied => replay.report.records_replayed += 1,
                    Replayed::Stop(end) => {
                        replay.report.end = Some(end);
                        break 'blocks;
                    }
                }
            }
        }
        let mut report = replay.report;
        report.torn_in_place_blocks = self.settle_overwrites(replay.overwrites)?;
        self.stats.replayed_records += report.records_replayed;
        let regions: BTreeSet<u64> = walk
            .blocks
            .iter()
            .flat_map(|walked| &walked.block.records)
            .flat_map(|record| match *record {
                LogRecord::WriteIntent { first_region, region_count } => {
                    first_region..first_region.saturating_add(u64::from(region_count))
                }
                _ => 0..0,
            })
            .collect();
        report.resynced_regions = self.resync_regions(&regions)?;
        Ok(report)
    }

    fn replay_record(
        &mut self,
        record: LogRecord,
        sequence: u64,
        acknowledged: bool,
        replay: &mut Replay,
    ) -> Result<Replayed> {
        match record {
            LogRecord::Staged { extent_id, logical_block, flash_block, data_crc } => {
                self.check_replayed_range(extent_id, logical_block, 1)?;
                if flash_block >= self.flash_space.block_count() {
                    return Err(corrupt(flash_block, "staged record", "flash block beyond the device"));
                }
                if !self.staged_data_matches(flash_block, data_crc) {
                    if !acknowledged {
                        let end = LogEnd::StagedDataMismatch { sequence, extent_id, logical_block, flash_block };
                        return Ok(Replayed::Stop(end));
                    }
                    replay.report.corrupt_staged_blocks.push(CorruptStagedBlock {
                        extent_id,
                        logical_block,
                        flash_block,
                    });
                }
                if !self.flash_space.allocate_exact(flash_block) {
                    return Err(corrupt(flash_block, "staged record", "names a flash block already in use"));
                }
                if let Some(checksums) = &mut self.checksums {
                    checksums.flash.set(flash_block, data_crc);
                }
                self.apply_mapping(extent_id, logical_block, 1, Location::Flash(flash_block));
            }
            LogRecord::Direct { extent_id, logical_block, block_count, data_block } => {
                let count = u64::from(block_count);
                self.check_replayed_range(extent_id, logical_block, count)?;
                self.allocate_replayed_data(data_block, count)?;
                self.apply_mapping(extent_id, logical_block, count, Location::Data(data_block));
            }
            LogRecord::Destaged { extent_id, logical_block, block_count, data_block } => {
                let count = u64::from(block_count);
                self.check_replayed_range(extent_id, logical_block, count)?;
                self.allocate_replayed_data(data_block, count)?;
                self.carry_staged_checksums(extent_id, logical_block, count, data_block)?;
                self.apply_mapping(extent_id, logical_block, count, Location::Data(data_block));
            }
            LogRecord::Unmap { extent_id, logical_block, block_count } => {
                let count = u64::from(block_count);
                self.check_replayed_range(extent_id, logical_block, count)?;
                self.unmap_blocks(extent_id, logical_block, count, Logging::Unlogged)?;
            }
            LogRecord::Checksums { first_data_block, count, crcs } => {
                let data_block_count = self.data_space.block_count();
                let Some(checksums) = &mut self.checksums else {
                    return Err(corrupt(self.log.head.primary, "checksum record", "the volume keeps no checksums"));
                };
                if first_data_block + u64::from(count) > data_block_count {
                    return Err(corrupt(first_data_block, "checksum record", "names blocks beyond the data device"));
                }
                for (block, &crc) in (first_data_block..).zip(&crcs[..usize::from(count)]) {
                    // A block in use is being overwritten in place; a free one
                    // is about to be mapped by the direct record that follows.
                    if self.data_space.active().get(block) {
                        let before = checksums.data.get(block);
                        replay.overwrites.entry(block).or_insert_with(|| vec![before]).push(crc);
                    }
                    checksums.data.set(block, crc);
                }
            }
            LogRecord::WriteIntent { .. } => {}
            LogRecord::CopyOut { frame, copy, watermark } => {
                let data_block_count = self.data_space.block_count();
                if frame >= data_block_count || copy >= data_block_count {
                    return Err(corrupt(copy, "copy-out record", "names blocks beyond the data device"));
                }
                self.copy_outs
                    .check_insert(frame, copy, watermark)
                    .map_err(|detail| corrupt(copy, "copy-out record", detail))?;
                if !self.data_space.allocate_exact(copy) {
                    return Err(corrupt(copy, "copy-out record", "names a copy block already in use"));
                }
                self.enter_copy(frame, copy, watermark);
            }
        }
        Ok(Replayed::Applied)
    }

    /// Gives each block overwritten in place during the epoch the checksum it
    /// matches, of those it may hold; returns the blocks that match none (torn).
    fn settle_overwrites(&mut self, overwrites: BTreeMap<u64, Vec<u32>>) -> Result<Vec<u64>> {
        let mut torn = Vec::new();
        for (block, candidates) in overwrites {
            let crc = match read_pieces(&mut self.data, DeviceRole::Data, &[(block, 1)]) {
                Ok(bytes) => Some(crc32c::crc32c(&bytes)),
                Err(_) => None,
            };
            let checksums = self.checksums.as_mut().expect("overwrites are recorded with checksums");
            match crc.filter(|crc| candidates.contains(crc)) {
                Some(crc) => checksums.data.set(block, crc),
                None => torn.push(block),
            }
        }
        Ok(torn)
    }

    /// Whether the staged block at `flash_block` holds data with `data_crc`
    /// (a block that cannot be read does not).
    fn staged_data_matches(&mut self, flash_block: u64, data_crc: u32) -> bool {
        match read_pieces(&mut self.flash, DeviceRole::Flash, &[(flash_block, 1)]) {
            Ok(data) => crc32c::crc32c(&data[..BLOCK_SIZE]) == data_crc,
            Err(_) => false,
        }
    }

    fn allocate_replayed_data(&mut self, data_block: u64, count: u64) -> Result<()> {
        for block in data_block..data_block.saturating_add(count) {
            if !self.data_space.allocate_exact(block) {
                return Err(EngineError::Corrupt {
                    block,
                    what: "direct log record".into(),
                    detail: format!("names data block {block}, already in use or beyond the device"),
                });
            }
        }
        Ok(())
    }

    /// Destage moved blocks `[logical, logical + count)` of an extent from
    /// their staged copies to data blocks from `data_block` on: each takes its
    /// staged copy's checksum.
    fn carry_staged_checksums(&mut self, extent_id: u64, logical: u64, count: u64, data_block: u64) -> Result<()> {
        let Some(checksums) = &mut self.checksums else { return Ok(()) };
        let map = self.extents.find_map(extent_id).expect("range checked");
        for offset in 0..count {
            match map::lookup(map, logical + offset) {
                Some(Location::Flash(flash_block)) => {
                    let crc = checksums.flash.get(flash_block);
                    checksums.data.set(data_block + offset, crc);
                }
                _ => {
                    return Err(corrupt(
                        data_block + offset,
                        "destaged record",
                        format!("block {} of extent {extent_id} was not staged", logical + offset),
                    ))
                }
            }
        }
        Ok(())
    }

    fn check_replayed_range(&self, extent_id: u64, logical_block: u64, count: u64) -> Result<()> {
        let size_blocks = self.extents.record(extent_id).map(|record| record.size_bytes / BLOCK_SIZE as u64);
        match size_blocks {
            Some(size) if logical_block.checked_add(count).is_some_and(|end| end <= size) => Ok(()),
            _ => Err(corrupt(
                self.log.head.primary,
                "log record block",
                format!("record for blocks {logical_block}+{count} of extent {extent_id}, which has no such blocks"),
            )),
        }
    }

    /// Asks the data device to make the redundancy of each write-intent
    /// region consistent with its data again; returns how many it did.
    pub(crate) fn resync_regions(&mut self, regions: &BTreeSet<u64>) -> Result<u64> {
        let Some(region_blocks) = self.data.write_intent_region_blocks() else { return Ok(0) };
        let block_count = self.data_space.block_count();
        for &region in regions {
            let first = region.saturating_mul(region_blocks);
            if first >= block_count {
                return Err(corrupt(first, "write-intent record", "names a region beyond the data device"));
            }
            let count = region_blocks.min(block_count - first);
            self.data.resync(first, count).map_err(device_error(DeviceRole::Data))?;
        }
        Ok(regions.len() as u64)
    }
}
