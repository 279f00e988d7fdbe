//! The array's I/O to its members: one batch per member, each member's
//! requests in ascending block order with adjacent blocks coalesced into one
//! request, submitted to every member before any is waited for, so that members
//! work in parallel. Member blocks are mapped to physical blocks here (zone
//! checksums), and every member block read is verified against its checksum.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use super::zone_checksums::PhysicalBlock;
use super::RaidDevice;
use crate::{BatchTicket, BlockDevice, DeviceError, IoOp, IoRequest};

/// Data and completion time of member blocks read in a batch (keyed by member and
/// member block), and the zone checksum blocks read (keyed by member and zone).
#[derive(Debug, Default)]
pub(super) struct ReadResults {
    pub(super) blocks: BTreeMap<(usize, u64), BlockRead>,
    pub(super) checksums: BTreeMap<(usize, u64), Result<Vec<u8>, DeviceError>>,
}

impl ReadResults {
    pub(super) fn new() -> Self {
        Self::default()
    }

    pub(super) fn get(&self, key: &(usize, u64)) -> Option<&BlockRead> {
        self.blocks.get(key)
    }

    pub(super) fn contains_key(&self, key: &(usize, u64)) -> bool {
        self.blocks.contains_key(key)
    }
}

/// A member block's data (or error) and the time its read completed.
pub(super) type BlockRead = (Result<Vec<u8>, DeviceError>, u64);

/// Per member, blocks to write (member block or zone → data).
pub(super) type MemberWrites = Vec<BTreeMap<u64, Vec<u8>>>;

/// Per member, the batch submitted to it (if any) and the runs it holds.
pub(super) type MemberBatches = Vec<Option<(BatchTicket, Vec<MemberRun>)>>;

/// One member request: its first block, block count, and whether it reads.
#[derive(Debug, Clone, Copy)]
pub(super) struct MemberRun {
    block: u64,
    block_count: u32,
    is_read: bool,
}

impl<D: BlockDevice> RaidDevice<D> {
    /// Submits one batch per member: the member blocks to read (with their zones'
    /// checksum blocks) and the zones' checksum blocks to read, then the member
    /// blocks and checksum blocks to write, each coalesced into runs of adjacent
    /// physical blocks in ascending order.
    pub(super) fn submit_to_members(
        &mut self,
        reads: &[BTreeSet<u64>],
        writes: &[BTreeMap<u64, Vec<u8>>],
        checksum_reads: &[BTreeSet<u64>],
        checksum_writes: &[BTreeMap<u64, Vec<u8>>],
    ) -> Result<MemberBatches, DeviceError> {
        let mut submitted = Vec::with_capacity(self.members.len());
        for member in 0..self.members.len() {
            let mut physical_reads: BTreeSet<u64> = BTreeSet::new();
            let mut physical_writes: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
            for &block in reads.get(member).into_iter().flatten() {
                physical_reads.insert(self.physical_block(block));
                if let Some(zones) = self.zones {
                    physical_reads.insert(zones.checksum_block(zones.zone_of(block)));
                }
            }
            for (&block, data) in writes.get(member).into_iter().flatten() {
                physical_writes.insert(self.physical_block(block), data.clone());
            }
            if let Some(zones) = self.zones {
                for &zone in checksum_reads.get(member).into_iter().flatten() {
                    physical_reads.insert(zones.checksum_block(zone));
                }
                for (&zone, data) in checksum_writes.get(member).into_iter().flatten() {
                    physical_writes.insert(zones.checksum_block(zone), data.clone());
                }
            }
            let mut requests = read_runs(&physical_reads);
            requests.extend(write_runs(&physical_writes));
            requests.sort_by_key(|request| (request.block, request.op == IoOp::Write));
            if requests.is_empty() {
                submitted.push(None);
                continue;
            }
            let runs = requests
                .iter()
                .map(|request| MemberRun {
                    block: request.block,
                    block_count: request.block_count,
                    is_read: request.op == IoOp::Read,
                })
                .collect();
            submitted.push(Some((self.members[member].submit(requests)?, runs)));
        }
        Ok(submitted)
    }

    /// Waits for every member's batch; returns the blocks read and the latest
    /// completion of the writes, or the first write error.
    pub(super) fn wait_members(
        &mut self,
        submitted: MemberBatches,
        read: &mut ReadResults,
    ) -> Result<(u64, Result<(), DeviceError>), DeviceError> {
        let block_size = self.block_size();
        let mut writes_done_ns = 0;
        let mut write_outcome = Ok(());
        for (member, entry) in submitted.into_iter().enumerate() {
            let Some((ticket, runs)) = entry else { continue };
            let completions = self.members[member].wait(ticket)?;
            let mut blocks_read = Vec::new();
            for (run, completion) in runs.into_iter().zip(completions) {
                if !run.is_read {
                    writes_done_ns = writes_done_ns.max(completion.completed_ns);
                    if let Err(error) = completion.result {
                        if let (Err(error), Ok(())) = (self.fail_member_on_error(member, error), &write_outcome) {
                            write_outcome = Err(error);
                        }
                    }
                    continue;
                }
                let physical_blocks = run.block..run.block + u64::from(run.block_count);
                for (index, physical) in physical_blocks.enumerate() {
                    let result = completion.result.as_ref().map_err(Clone::clone).map(|data| {
                        let start = index * block_size;
                        data.get(start..start + block_size).map(<[u8]>::to_vec).unwrap_or_default()
                    });
                    match self.physical_content(physical) {
                        PhysicalBlock::Data { member_block } => {
                            blocks_read.push(member_block);
                            read.blocks.insert((member, member_block), (result, completion.completed_ns));
                        }
                        PhysicalBlock::Checksum { zone } => {
                            read.checksums.insert((member, zone), result);
                        }
                    }
                }
            }
            self.verify_read(member, &blocks_read, read);
        }
        Ok((writes_done_ns, write_outcome))
    }

    /// Reads `blocks` of every member but `skip` (one batch per member, checksums
    /// verified) and returns, per member block, each member's data (`None` for `skip`).
    pub(super) fn read_member_rows(
        &mut self,
        blocks: Range<u64>,
        skip: Option<usize>,
    ) -> Result<Vec<Vec<Option<Vec<u8>>>>, DeviceError> {
        let reads: Vec<BTreeSet<u64>> = (0..self.members.len())
            .map(|member| if Some(member) == skip { BTreeSet::new() } else { blocks.clone().collect() })
            .collect();
        let submitted = self.submit_to_members(&reads, &[], &[], &[])?;
        let mut read = ReadResults::new();
        self.wait_members(submitted, &mut read)?.1?;
        blocks
            .map(|member_block| {
                (0..self.members.len())
                    .map(|member| {
                        if Some(member) == skip {
                            return Ok(None);
                        }
                        let (result, _) = read.get(&(member, member_block)).expect("planned read");
                        result.clone().map(Some)
                    })
                    .collect()
            })
            .collect()
    }

    /// Reads the row of `member_block` on every member, one result per member:
    /// a block that does not read is its own error, not the row's.
    pub(super) fn read_member_row(
        &mut self,
        member_block: u64,
    ) -> Result<Vec<Result<Vec<u8>, DeviceError>>, DeviceError> {
        let reads: Vec<BTreeSet<u64>> = (0..self.members.len()).map(|_| BTreeSet::from([member_block])).collect();
        let submitted = self.submit_to_members(&reads, &[], &[], &[])?;
        let mut read = ReadResults::new();
        self.wait_members(submitted, &mut read)?.1?;
        Ok((0..self.members.len())
            .map(|member| read.get(&(member, member_block)).expect("planned read").0.clone())
            .collect())
    }

    /// Writes member blocks directly (parity untouched), reading the checksum
    /// blocks of the zones they do not cover first.
    pub(super) fn write_member_blocks(&mut self, writes: &MemberWrites) -> Result<(), DeviceError> {
        let blocks: Vec<BTreeSet<u64>> = writes.iter().map(|blocks| blocks.keys().copied().collect()).collect();
        let checksum_reads = self.checksum_pre_reads(&blocks);
        let mut read = ReadResults::new();
        if checksum_reads.iter().any(|zones| !zones.is_empty()) {
            let submitted = self.submit_to_members(&[], &[], &checksum_reads, &[])?;
            self.wait_members(submitted, &mut read)?.1?;
        }
        let checksums = self.checksum_writes(writes, &read)?;
        let submitted = self.submit_to_members(&[], writes, &[], &checksums)?;
        self.wait_members(submitted, &mut read)?.1
    }
}

/// Reads of `blocks`, adjacent blocks coalesced into one request, in ascending order.
fn read_runs(blocks: &BTreeSet<u64>) -> Vec<IoRequest> {
    let mut runs: Vec<IoRequest> = Vec::new();
    for &block in blocks {
        match runs.last_mut() {
            Some(run) if run.end_block() == block && run.block_count < u32::MAX => run.block_count += 1,
            _ => runs.push(IoRequest::read(block, 1)),
        }
    }
    runs
}

/// Writes of `blocks`, adjacent blocks coalesced into one request, in ascending order.
fn write_runs(blocks: &BTreeMap<u64, Vec<u8>>) -> Vec<IoRequest> {
    let mut runs: Vec<IoRequest> = Vec::new();
    for (&block, data) in blocks {
        match runs.last_mut() {
            Some(run) if run.end_block() == block && run.block_count < u32::MAX => {
                run.block_count += 1;
                run.data.extend_from_slice(data);
            }
            _ => runs.push(IoRequest::write(block, 1, data.clone())),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjacent_blocks_are_coalesced_into_one_request() {
        let reads = read_runs(&BTreeSet::from([3, 4, 5, 7, 9, 10]));
        let spans: Vec<(u64, u32)> = reads.iter().map(|request| (request.block, request.block_count)).collect();
        assert_eq!(spans, vec![(3, 3), (7, 1), (9, 2)]);
        assert!(reads.iter().all(|request| request.op == IoOp::Read));
        let writes = write_runs(&BTreeMap::from([(0, vec![1, 1]), (1, vec![2, 2]), (5, vec![3, 3])]));
        let spans: Vec<(u64, u32, &[u8])> =
            writes.iter().map(|request| (request.block, request.block_count, request.data.as_slice())).collect();
        assert_eq!(spans, vec![(0, 2, &[1, 1, 2, 2][..]), (5, 1, &[3, 3][..])]);
    }
}
