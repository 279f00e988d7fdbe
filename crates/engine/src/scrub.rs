//! Scrubbing: every data and staged block a live tree uses is read and
//! checked against its checksum — repaired from the data device's redundancy
//! where it can be, listed where it cannot — and then the device's redundancy
//! itself is made consistent with the (now verified) data: a RAID array's
//! parity, which no read checks and which would reconstruct a failed member
//! wrongly if it were damaged.

use proxima_device::BlockDevice;
use serde::Serialize;

use crate::codec::BLOCK_SIZE;
use crate::error::{DeviceRole, EngineError, Result, Unsuitable};
use crate::io::device_error;
use crate::map::Location;
use crate::read::BlockSource;
use crate::volume::Volume;

/// Blocks read per request while scrubbing.
const SCRUB_RUN_BLOCKS_MAX: u64 = 256;

/// What a scrub found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ScrubReport {
    /// Data-device blocks checked.
    pub data_blocks_checked: u64,
    /// Staged (flash) blocks checked.
    pub staged_blocks_checked: u64,
    /// Blocks that did not match and were repaired from redundancy.
    pub repaired_blocks: u64,
    /// Blocks that did not match and could not be repaired: reads of them fail.
    pub damaged_blocks: Vec<(DeviceRole, u64)>,
    /// Whether the data device's redundancy was resynchronised.
    pub redundancy_resynced: bool,
}

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    /// Scrubs the volume (see the module documentation). Needs data checksums;
    /// a volume without them has nothing to check against.
    pub fn scrub(&mut self) -> Result<ScrubReport> {
        self.check_usable()?;
        if self.checksums.is_none() {
            return Err(EngineError::Unsuitable(Unsuitable::NoChecksums));
        }
        let mut report = ScrubReport::default();
        let data_blocks: Vec<u64> = {
            let mut in_use = self.data_space.active().bits().clone();
            in_use.or_with(self.data_space.summary().bits());
            in_use.ones().collect()
        };
        let mut staged_blocks = self.staged_blocks_of_live_trees()?;
        staged_blocks.sort_unstable();
        staged_blocks.dedup();
        report.data_blocks_checked = data_blocks.len() as u64;
        report.staged_blocks_checked = staged_blocks.len() as u64;
        let repaired_before = self.stats.repaired_blocks;
        self.scrub_blocks(&data_blocks, Location::Data, &mut report)?;
        self.scrub_blocks(&staged_blocks, Location::Flash, &mut report)?;
        report.repaired_blocks = self.stats.repaired_blocks - repaired_before;
        if let Some(region_blocks) = self.data.write_intent_region_blocks() {
            let block_count = self.data_space.block_count();
            let mut first = 0;
            while first < block_count {
                let count = region_blocks.min(block_count - first);
                self.data.resync(first, count).map_err(device_error(DeviceRole::Data))?;
                first += count;
            }
            report.redundancy_resynced = true;
        }
        Ok(report)
    }

    /// Reads `blocks` (sorted) in runs, verifying each; a block that neither
    /// matches nor can be repaired is listed, and the scrub goes on.
    fn scrub_blocks(&mut self, blocks: &[u64], at: fn(u64) -> Location, report: &mut ScrubReport) -> Result<()> {
        let mut index = 0;
        while index < blocks.len() {
            let mut end = index + 1;
            while end < blocks.len()
                && blocks[end] == blocks[end - 1] + 1
                && ((end - index) as u64) < SCRUB_RUN_BLOCKS_MAX
            {
                end += 1;
            }
            let mut buffer = vec![0u8; (end - index) * BLOCK_SIZE];
            let mut source = self.exclusive_source();
            source.read(at(blocks[index]), &mut buffer)?;
            for (offset, block_bytes) in buffer.chunks_mut(BLOCK_SIZE).enumerate() {
                match source.verify(at(blocks[index + offset]), block_bytes) {
                    Ok(()) => {}
                    Err(EngineError::ChecksumMismatch { role, block }) => report.damaged_blocks.push((role, block)),
                    Err(other) => return Err(other),
                }
            }
            index = end;
        }
        Ok(())
    }
}
