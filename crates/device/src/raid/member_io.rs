//! The array's I/O to its members: one batch per member, each member's
//! requests in ascending block order with adjacent blocks coalesced into one
//! request, submitted to every member before any is waited for, so that members
//! work in parallel. Member blocks are mapped to physical blocks here (zone
//! checksums), and every member block read is verified against its checksum.

use std::collections::BTreeMap;

use super::block_set::{BlockSet, BlockWrites};
use std::ops::Range;

use super::zone_checksums::PhysicalBlock;
use super::RaidDevice;
use crate::{BatchTicket, BlockDevice, DeviceError, IoOp, IoRequest};

/// The member blocks read in a batch, kept as the runs they were read in (a
/// run per member request, not an entry per block), and the zone checksum
/// blocks read (keyed by member and zone).
#[derive(Debug, Default)]
pub(super) struct ReadResults {
    /// Per member (by index), runs of member blocks read, sorted by first
    /// member block.
    runs: Vec<Vec<(u64, ReadRun)>>,
    /// Member blocks whose read failed after their run completed: a zone
    /// checksum mismatch. Consulted before the runs.
    failed: BTreeMap<(usize, u64), DeviceError>,
    pub(super) checksums: BTreeMap<(usize, u64), Result<Vec<u8>, DeviceError>>,
}

/// Consecutive member blocks of one member read by one request: their bytes
/// (empty without payload) or the request's error, and when it completed.
#[derive(Debug)]
struct ReadRun {
    block_count: u64,
    data: Result<Vec<u8>, DeviceError>,
    completed_ns: u64,
}

/// One member block read: its bytes (empty without payload) or its error,
/// and when its read completed.
#[derive(Debug, Clone, Copy)]
pub(super) struct BlockRead<'a> {
    pub(super) data: Result<&'a [u8], &'a DeviceError>,
    pub(super) completed_ns: u64,
}

impl BlockRead<'_> {
    /// The block's bytes, owned.
    pub(super) fn to_owned(self) -> Result<Vec<u8>, DeviceError> {
        self.data.map(<[u8]>::to_vec).map_err(Clone::clone)
    }
}

impl ReadResults {
    pub(super) fn new() -> Self {
        Self::default()
    }

    /// Records `block_count` member blocks of `member` from `first_block` on,
    /// read by one request.
    pub(super) fn insert_run(
        &mut self,
        member: usize,
        first_block: u64,
        block_count: u64,
        data: Result<Vec<u8>, DeviceError>,
        completed_ns: u64,
    ) {
        if self.runs.len() <= member {
            self.runs.resize_with(member + 1, Vec::new);
        }
        let runs = &mut self.runs[member];
        let run = ReadRun { block_count, data, completed_ns };
        // Runs arrive in ascending order within a batch: the search is at the end.
        match runs.binary_search_by_key(&first_block, |&(first, _)| first) {
            Ok(index) => runs[index].1 = run,
            Err(index) => runs.insert(index, (first_block, run)),
        }
    }

    /// Member block `block` of `member`, if it was read (`block_size_bytes`
    /// per block of a run's bytes).
    pub(super) fn get(&self, member: usize, block: u64, block_size_bytes: usize) -> Option<BlockRead<'_>> {
        let (first, run) = self.run_holding(member, block)?;
        let data = match self.failed.get(&(member, block)) {
            Some(error) => Err(error),
            None => run.data.as_ref().map(|bytes| {
                let index = usize::try_from(block - first).expect("a run's blocks fit in memory");
                bytes.get(index * block_size_bytes..(index + 1) * block_size_bytes).unwrap_or_default()
            }),
        };
        Some(BlockRead { data, completed_ns: run.completed_ns })
    }

    /// Whether member block `block` of `member` was read.
    pub(super) fn contains(&self, member: usize, block: u64) -> bool {
        self.run_holding(member, block).is_some()
    }

    /// Whether member block `block` of `member` was read and failed with an
    /// I/O error (its own, its request's, or its checksum's).
    pub(super) fn failed_with_io_error(&self, member: usize, block: u64) -> bool {
        let error = match self.failed.get(&(member, block)) {
            Some(error) => Some(error),
            None => self.run_holding(member, block).and_then(|(_, run)| run.data.as_ref().err()),
        };
        matches!(error, Some(DeviceError::Io { .. }))
    }

    /// The run holding member block `block` of `member`, with its first block.
    fn run_holding(&self, member: usize, block: u64) -> Option<(u64, &ReadRun)> {
        let runs = self.runs.get(member)?;
        let index = runs.partition_point(|&(first, _)| first <= block).checked_sub(1)?;
        let (first, run) = &runs[index];
        (block < first + run.block_count).then_some((*first, run))
    }

    /// Marks member block `block` of `member`, which was read, as failed.
    pub(super) fn fail_block(&mut self, member: usize, block: u64, error: DeviceError) {
        debug_assert!(self.contains(member, block), "only a block read can fail its check");
        self.failed.insert((member, block), error);
    }
}

/// Per member, blocks to write (member block or zone → data).
pub(super) type MemberWrites = Vec<BlockWrites>;

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
        reads: &[BlockSet],
        writes: &[BlockWrites],
        checksum_reads: &[BlockSet],
        checksum_writes: &[BlockWrites],
    ) -> Result<MemberBatches, DeviceError> {
        let mut submitted = Vec::with_capacity(self.members.len());
        for member in 0..self.members.len() {
            // Physical blocks, sorted and without repeats before coalescing (a
            // zone's checksum block is read once for all its blocks read).
            let mut physical_reads: Vec<u64> = Vec::new();
            let mut physical_writes: Vec<(u64, &[u8])> = Vec::new();
            for block in reads.get(member).into_iter().flatten() {
                physical_reads.push(self.physical_block(block));
                if let Some(zones) = self.zones {
                    physical_reads.push(zones.checksum_block(zones.zone_of(block)));
                }
            }
            for (&block, data) in writes.get(member).into_iter().flatten() {
                physical_writes.push((self.physical_block(block), data));
            }
            if let Some(zones) = self.zones {
                for zone in checksum_reads.get(member).into_iter().flatten() {
                    physical_reads.push(zones.checksum_block(zone));
                }
                for (&zone, data) in checksum_writes.get(member).into_iter().flatten() {
                    physical_writes.push((zones.checksum_block(zone), data));
                }
            }
            physical_reads.sort_unstable();
            physical_reads.dedup();
            // Member blocks and checksum blocks are distinct physical blocks.
            physical_writes.sort_unstable_by_key(|&(block, _)| block);
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
            let mut blocks_read: Vec<Range<u64>> = Vec::new();
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
                // The request's physical blocks, cut into runs of member blocks
                // at the checksum blocks between them.
                let mut physical = run.block;
                let end = run.block + u64::from(run.block_count);
                while physical < end {
                    let offset = usize::try_from(physical - run.block).expect("a request's blocks fit in memory");
                    match self.physical_content(physical) {
                        PhysicalBlock::Checksum { zone } => {
                            let result = completion.result.as_ref().map_err(Clone::clone).map(|data| {
                                data.get(offset * block_size..(offset + 1) * block_size)
                                    .map(<[u8]>::to_vec)
                                    .unwrap_or_default()
                            });
                            read.checksums.insert((member, zone), result);
                            physical += 1;
                        }
                        PhysicalBlock::Data { member_block } => {
                            let count = self.member_blocks_from(physical, end);
                            let length = usize::try_from(count).expect("a request's blocks fit in memory");
                            let result = completion.result.as_ref().map_err(Clone::clone).map(|data| {
                                data.get(offset * block_size..(offset + length) * block_size)
                                    .map(<[u8]>::to_vec)
                                    .unwrap_or_default()
                            });
                            blocks_read.push(member_block..member_block + count);
                            read.insert_run(member, member_block, count, result, completion.completed_ns);
                            physical += count;
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
        let reads: Vec<BlockSet> = (0..self.members.len())
            .map(|member| if Some(member) == skip { BlockSet::new() } else { blocks.clone().collect() })
            .collect();
        let submitted = self.submit_to_members(&reads, &[], &[], &[])?;
        let mut read = ReadResults::new();
        self.wait_members(submitted, &mut read)?.1?;
        let block_size = self.block_size();
        blocks
            .map(|member_block| {
                (0..self.members.len())
                    .map(|member| {
                        if Some(member) == skip {
                            return Ok(None);
                        }
                        read.get(member, member_block, block_size).expect("planned read").to_owned().map(Some)
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
        let reads: Vec<BlockSet> = (0..self.members.len()).map(|_| BlockSet::from([member_block])).collect();
        let submitted = self.submit_to_members(&reads, &[], &[], &[])?;
        let mut read = ReadResults::new();
        self.wait_members(submitted, &mut read)?.1?;
        Ok((0..self.members.len())
            .map(|member| read.get(member, member_block, self.block_size()).expect("planned read").to_owned())
            .collect())
    }

    /// Writes member blocks directly (parity untouched), reading the checksum
    /// blocks of the zones they do not cover first.
    pub(super) fn write_member_blocks(&mut self, writes: &MemberWrites) -> Result<(), DeviceError> {
        let blocks: Vec<BlockSet> = writes.iter().map(|blocks| blocks.keys().collect()).collect();
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

/// Reads of `blocks` (ascending, no repeats), adjacent blocks coalesced into
/// one request.
fn read_runs(blocks: &[u64]) -> Vec<IoRequest> {
    let mut runs: Vec<IoRequest> = Vec::new();
    for &block in blocks {
        match runs.last_mut() {
            Some(run) if run.end_block() == block && run.block_count < u32::MAX => run.block_count += 1,
            _ => runs.push(IoRequest::read(block, 1)),
        }
    }
    runs
}

/// Writes of `blocks` (ascending, no repeats), adjacent blocks coalesced into
/// one request.
fn write_runs(blocks: &[(u64, &[u8])]) -> Vec<IoRequest> {
    let mut runs: Vec<IoRequest> = Vec::new();
    for &(block, data) in blocks {
        match runs.last_mut() {
            Some(run) if run.end_block() == block && run.block_count < u32::MAX => {
                run.block_count += 1;
                run.data.extend_from_slice(data);
            }
            _ => runs.push(IoRequest::write(block, 1, data.to_vec())),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjacent_blocks_are_coalesced_into_one_request() {
        let reads = read_runs(&[3, 4, 5, 7, 9, 10]);
        let spans: Vec<(u64, u32)> = reads.iter().map(|request| (request.block, request.block_count)).collect();
        assert_eq!(spans, vec![(3, 3), (7, 1), (9, 2)]);
        assert!(reads.iter().all(|request| request.op == IoOp::Read));
        let writes = write_runs(&[(0, &[1, 1][..]), (1, &[2, 2]), (5, &[3, 3])]);
        let spans: Vec<(u64, u32, &[u8])> =
            writes.iter().map(|request| (request.block, request.block_count, request.data.as_slice())).collect();
        assert_eq!(spans, vec![(0, 2, &[1, 1, 2, 2][..]), (5, 1, &[3, 3][..])]);
    }
}
