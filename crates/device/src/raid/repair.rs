//! Restoring what redundancy protects: rebuilding a failed member onto a
//! replacement, verifying parity, reconstructing one block from the rest of its
//! row and rewriting its own copy, and, in the read path, recovering member
//! blocks that failed to read (or failed their checksum) from their rows and
//! writing them back.

use super::block_set::BlockWrites;

use super::block_set::BlockSet;

use super::member_io::{MemberWrites, ReadResults};
use super::plan::{xor_all, ReadSource};
use super::{OuterSlot, ParityMismatch, RaidDevice, RebuildReport};
use crate::stats::StatsDevice;
use crate::{validate_request, BlockDevice, DeviceError, IoRequest};

impl<D: BlockDevice> RaidDevice<D> {
    /// Replaces the failed member with `replacement` and writes onto it, row by row,
    /// the XOR of the surviving members (a stripe unit per batch).
    pub fn rebuild(&mut self, replacement: D) -> Result<RebuildReport, DeviceError> {
        let failed = self.failed.ok_or_else(|| self.invalid("no member has failed".into()))?;
        let member_blocks = self.member_blocks;
        let replacement_info = replacement.info();
        if replacement_info.block_size_bytes != self.info.block_size_bytes
            || replacement_info.block_count < self.physical_block(member_blocks - 1) + 1
        {
            return Err(
                self.invalid(format!("replacement {} is smaller or differently blocked", replacement_info.name))
            );
        }
        let started_ns = self.now_ns();
        self.members[failed] = StatsDevice::new(replacement);
        // Whole zones per chunk, so that no checksum block is read from the replacement.
        let zone_blocks = self.zones.map_or(1, |zones| zones.data_blocks());
        let chunk_blocks = self.geometry.unit_blocks.div_ceil(zone_blocks) * zone_blocks;
        let mut block = 0;
        while block < member_blocks {
            let block_count = chunk_blocks.min(member_blocks - block);
            self.rebuild_chunk(failed, block..block + block_count)?;
            block += block_count;
        }
        self.failed = None;
        Ok(RebuildReport { member: failed, block_count: member_blocks, elapsed_ns: self.now_ns() - started_ns })
    }

    fn rebuild_chunk(&mut self, failed: usize, blocks: std::ops::Range<u64>) -> Result<(), DeviceError> {
        let rows = self.read_member_rows(blocks.clone(), Some(failed))?;
        let mut writes: MemberWrites = vec![BlockWrites::new(); self.members.len()];
        for (member_block, row) in blocks.zip(rows) {
            let xor = xor_all(row.iter().flatten());
            let data = if self.info.stores_payload { xor.unwrap_or_default() } else { Vec::new() };
            writes[failed].insert(member_block, data);
        }
        let checksums = self.checksum_writes(&writes, &ReadResults::new())?;
        let submitted = self.submit_to_members(&[], &writes, &[], &checksums)?;
        let mut read = ReadResults::new();
        self.wait_members(submitted, &mut read)?.1
    }

    /// Reads every row of every member and returns the rows whose parity does not
    /// match (empty when consistent). Needs payload and no failed member.
    pub fn verify_parity(&mut self) -> Result<Vec<ParityMismatch>, DeviceError> {
        if let Some(failed) = self.failed {
            return Err(self.invalid(format!("member {failed} has failed: parity cannot be verified")));
        }
        if !self.info.stores_payload {
            return Err(self.invalid("members store no payload: parity cannot be verified".into()));
        }
        let unit_blocks = self.geometry.unit_blocks;
        let mut mismatches = Vec::new();
        for stripe in 0..self.member_blocks / unit_blocks {
            let first = stripe * unit_blocks;
            let rows = self.read_member_rows(first..first + unit_blocks, None)?;
            for (member_block, row) in (first..).zip(rows) {
                let xor = xor_all(row.iter().flatten()).expect("at least two members");
                if xor.iter().any(|&byte| byte != 0) {
                    let parity_member = self.geometry.parity_member(stripe);
                    mismatches.push(ParityMismatch { member_block, parity_member });
                }
            }
        }
        Ok(mismatches)
    }

    /// Logical block `block` as the other members of its row say it is
    /// (the XOR of their blocks, parity included): what the block holds when
    /// its own copy is damaged. `None` when a member has failed (no second
    /// copy is left) or the members keep no payload.
    pub fn reconstruct_block(&mut self, block: u64) -> Result<Option<Vec<u8>>, DeviceError> {
        validate_request(&self.info, &IoRequest::read(block, 1))?;
        if self.failed.is_some() || !self.info.stores_payload {
            return Ok(None);
        }
        let location = self.geometry.locate(block);
        let rows = self.read_member_rows(location.member_block..location.member_block + 1, Some(location.member))?;
        Ok(xor_all(rows[0].iter().flatten()))
    }

    /// Writes `data` over logical block `block`'s own copy, leaving parity as
    /// it is (`data` agrees with it: a reconstruction), with its zone checksum.
    pub fn rewrite_member_block(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        validate_request(&self.info, &IoRequest::write(block, 1, data.to_vec()))?;
        let location = self.geometry.locate(block);
        if self.failed == Some(location.member) {
            return Err(
                self.invalid(format!("member {} has failed: block {block} has no copy to repair", location.member))
            );
        }
        let mut writes: MemberWrites = vec![BlockWrites::new(); self.members.len()];
        writes[location.member].insert(location.member_block, data.to_vec());
        self.write_member_blocks(&writes)
    }

    /// With every member present, a member block that failed to read with an I/O
    /// error is reconstructed from its row: reads the rest of the row from the
    /// other members (one more batch per member).
    pub(super) fn recover_failed_reads(
        &mut self,
        outer: &[OuterSlot],
        read: &mut ReadResults,
    ) -> Result<(), DeviceError> {
        if self.failed.is_some() {
            return Ok(());
        }
        let mut needed = vec![BlockSet::new(); self.members.len()];
        for (member, member_block) in failed_direct_reads(outer, read) {
            for other in (0..self.members.len()).filter(|&other| other != member) {
                if !read.contains(other, member_block) {
                    needed[other].insert(member_block);
                }
            }
        }
        if needed.iter().all(BlockSet::is_empty) {
            return Ok(());
        }
        let submitted = self.submit_to_members(&needed, &[], &[], &[])?;
        self.wait_members(submitted, read)?.1?;
        self.repair_from_rows(outer, read)
    }

    /// With zone checksums and payload, writes back (with its checksum) every block
    /// that failed to read and was reconstructed from a complete row, so that the
    /// next read finds it whole. A block whose checksum block is unreadable is left
    /// for the next write of its zone.
    fn repair_from_rows(&mut self, outer: &[OuterSlot], read: &ReadResults) -> Result<(), DeviceError> {
        if self.zones.is_none() || !self.info.stores_payload {
            return Ok(());
        }
        let mut writes: MemberWrites = vec![BlockWrites::new(); self.members.len()];
        for (member, member_block) in failed_direct_reads(outer, read) {
            let block_size = self.block_size();
            let others: Option<Vec<&[u8]>> = (0..self.members.len())
                .filter(|&other| other != member)
                .map(|other| read.get(other, member_block, block_size).and_then(|block| block.data.ok()))
                .collect();
            if let Some(data) = others.and_then(xor_all) {
                writes[member].insert(member_block, data);
            }
        }
        if writes.iter().all(BlockWrites::is_empty) {
            return Ok(());
        }
        let Ok(checksums) = self.checksum_writes(&writes, read) else { return Ok(()) };
        let submitted = self.submit_to_members(&[], &writes, &[], &checksums)?;
        self.wait_members(submitted, &mut ReadResults::new()).map(drop)
    }
}

/// The member blocks that the batch read directly and that failed with an I/O
/// error: `(member, member block)`, in the batch's order.
pub(super) fn failed_direct_reads<'a>(
    outer: &'a [OuterSlot],
    read: &'a ReadResults,
) -> impl Iterator<Item = (usize, u64)> + 'a {
    outer
        .iter()
        .filter_map(|slot| match slot {
            OuterSlot::Read(sources) => Some(sources),
            _ => None,
        })
        .flatten()
        .filter_map(|source| match *source {
            ReadSource::Direct { member, member_block } => Some((member, member_block)),
            _ => None,
        })
        .filter(|&(member, member_block)| read.failed_with_io_error(member, member_block))
}
