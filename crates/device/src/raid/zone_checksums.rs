//! Zone checksums ([`super::RaidConfig::with_zone_checksums`]): where member
//! blocks and checksum blocks lie on a member, what a checksum block holds, and
//! the array's reading and writing of them.
//!
//! Every member is cut into *zones* of N data blocks followed by one checksum
//! block holding each data block's crc32c (4 bytes per slot, little-endian, in
//! block order; a block of zeroes has checksum 0, so a blank member is
//! consistent). Member block `m` then lies at physical block `(m / N)·(N+1) + m
//! mod N`, and its checksum in slot `m mod N` of physical block `(m / N)·(N+1) +
//! N`. Parity rows are formed over member blocks, so checksum blocks are per
//! member and outside parity (the parity member's checksum blocks cover its
//! parity blocks).
//!
//! Every member block read is read together with its zone's checksum block and
//! verified; a mismatch is a detected error like a member read error: the block
//! is reconstructed from the rest of its row and written back, with its
//! checksum. Every member block written updates its zone's checksum block,
//! which is read first unless the batch writes the whole zone. A small update
//! thus costs, on a data member and on the parity member each, a read and a
//! write of the block and of its checksum block — usually adjacent on the disk,
//! often one request each. Without payload the checksum blocks are read and
//! written without data.
//!
//! [`Zones`] is pure arithmetic; the `RaidDevice` methods at the end read
//! members.

use std::collections::BTreeMap;

use super::block_set::{BlockSet, BlockWrites};
use std::ops::Range;

use super::member_io::{MemberWrites, ReadResults};
use super::{ChecksumMismatch, RaidDevice};
use crate::{BlockDevice, DeviceError};

/// Data blocks per checksum block in NetApp's zone checksum layout (63 data blocks
/// and their checksum block make a zone of 64).
pub const NETAPP_ZONE_DATA_BLOCKS: u32 = 63;

/// Bytes of one block's checksum in a checksum block.
pub(super) const CHECKSUM_SLOT_BYTES: usize = 4;

/// The checksum kept for a block: its crc32c, or 0 for a block of zeroes (what a
/// blank member holds everywhere, checksum blocks included).
pub fn zone_block_checksum(data: &[u8]) -> u32 {
    if data.iter().all(|&byte| byte == 0) {
        0
    } else {
        crc32c::crc32c(data)
    }
}

/// The checksum stored in slot `slot` of a checksum block.
pub(super) fn checksum_slot(checksum_block: &[u8], slot: usize) -> u32 {
    let start = slot * CHECKSUM_SLOT_BYTES;
    u32::from_le_bytes(checksum_block[start..start + CHECKSUM_SLOT_BYTES].try_into().expect("4-byte slot"))
}

/// Stores `checksum` in slot `slot` of a checksum block.
fn set_checksum_slot(checksum_block: &mut [u8], slot: usize, checksum: u32) {
    let start = slot * CHECKSUM_SLOT_BYTES;
    checksum_block[start..start + CHECKSUM_SLOT_BYTES].copy_from_slice(&checksum.to_le_bytes());
}

/// What a physical block of a member holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PhysicalBlock {
    Data { member_block: u64 },
    Checksum { zone: u64 },
}

/// The zone layout of a member: `data_blocks` member blocks, then their
/// checksum block, over `member_blocks` member blocks in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Zones {
    data_blocks: u64,
    member_blocks: u64,
}

impl Zones {
    /// Zones of `data_blocks` data blocks (at least 1) over `member_blocks` member blocks.
    pub(super) fn new(data_blocks: u64, member_blocks: u64) -> Self {
        assert!(data_blocks > 0, "a zone holds at least one data block");
        Self { data_blocks, member_blocks }
    }

    /// Member blocks that fit on `physical_blocks` physical blocks.
    pub(super) fn usable_blocks(data_blocks: u64, physical_blocks: u64) -> u64 {
        physical_blocks / (data_blocks + 1) * data_blocks
    }

    /// Data blocks per zone.
    pub(super) fn data_blocks(&self) -> u64 {
        self.data_blocks
    }

    /// Zones holding the member blocks in use (the last may be partly used).
    pub(super) fn zone_count(&self) -> u64 {
        self.member_blocks.div_ceil(self.data_blocks)
    }

    /// The zone of member block `member_block`.
    pub(super) fn zone_of(&self, member_block: u64) -> u64 {
        member_block / self.data_blocks
    }

    /// The checksum slot of member block `member_block` in its zone's checksum block.
    pub(super) fn slot_of(&self, member_block: u64) -> usize {
        usize::try_from(member_block % self.data_blocks).expect("a slot index fits in a block")
    }

    /// Where member block `member_block` lies on the member.
    pub(super) fn physical_block(&self, member_block: u64) -> u64 {
        self.zone_of(member_block) * (self.data_blocks + 1) + member_block % self.data_blocks
    }

    /// The physical block holding the checksums of zone `zone`.
    pub(super) fn checksum_block(&self, zone: u64) -> u64 {
        zone * (self.data_blocks + 1) + self.data_blocks
    }

    /// The first checksum block at or after physical block `physical`.
    pub(super) fn next_checksum_block(&self, physical: u64) -> u64 {
        self.checksum_block(physical / (self.data_blocks + 1))
    }

    /// What physical block `physical` holds: a member block, or the checksum
    /// block of a zone.
    pub(super) fn physical_content(&self, physical: u64) -> PhysicalBlock {
        let (zone, within) = (physical / (self.data_blocks + 1), physical % (self.data_blocks + 1));
        if within == self.data_blocks {
            PhysicalBlock::Checksum { zone }
        } else {
            PhysicalBlock::Data { member_block: zone * self.data_blocks + within }
        }
    }

    /// Whether `block_count` member blocks (of zone `zone`) are all the zone's
    /// member blocks in use.
    pub(super) fn covers_zone(&self, zone: u64, block_count: usize) -> bool {
        let in_use = self.member_blocks.min((zone + 1) * self.data_blocks) - zone * self.data_blocks;
        u64::try_from(block_count).is_ok_and(|count| count == in_use)
    }

    /// Per member, the zones whose checksum block must be read before `writes`
    /// (member blocks) can be written: those the writes do not cover.
    pub(super) fn pre_reads(&self, writes: &[BlockSet]) -> Vec<BlockSet> {
        writes
            .iter()
            .map(|blocks| {
                // The blocks are in ascending order: each zone's are adjacent.
                let mut zones = BlockSet::new();
                let mut blocks = blocks.iter().peekable();
                while let Some(first) = blocks.next() {
                    let zone = self.zone_of(first);
                    let mut count = 1;
                    while blocks.next_if(|&block| self.zone_of(block) == zone).is_some() {
                        count += 1;
                    }
                    if !self.covers_zone(zone, count) {
                        zones.insert(zone);
                    }
                }
                zones
            })
            .collect()
    }

    /// Per member, the new checksum blocks (zone → data) for `writes` (member
    /// block → data): the old checksum block in `read_checksums` (or zeroes for
    /// a covered zone) with the written blocks' slots replaced; empty blocks
    /// when the members keep no payload.
    pub(super) fn checksum_writes(
        &self,
        writes: &[BlockWrites],
        read_checksums: &BTreeMap<(usize, u64), Result<Vec<u8>, DeviceError>>,
        block_size_bytes: usize,
        stores_payload: bool,
    ) -> Result<MemberWrites, DeviceError> {
        let mut checksum_writes: MemberWrites = vec![BlockWrites::new(); writes.len()];
        for (member, blocks) in writes.iter().enumerate() {
            // The blocks are in ascending order: each zone's are adjacent.
            let mut blocks = blocks.iter().peekable();
            let mut zone_writes: Vec<(u64, &Vec<u8>)> = Vec::new();
            while let Some((&first, data)) = blocks.next() {
                let zone = self.zone_of(first);
                zone_writes.clear();
                zone_writes.push((first, data));
                while let Some((&block, data)) = blocks.next_if(|&(&block, _)| self.zone_of(block) == zone) {
                    zone_writes.push((block, data));
                }
                if !stores_payload {
                    checksum_writes[member].insert(zone, Vec::new());
                    continue;
                }
                let mut checksum_block = if self.covers_zone(zone, zone_writes.len()) {
                    vec![0; block_size_bytes]
                } else {
                    match read_checksums.get(&(member, zone)) {
                        Some(Ok(data)) => data.clone(),
                        Some(Err(error)) => return Err(error.clone()),
                        None => unreachable!("checksum block of member {member} zone {zone} was read first"),
                    }
                };
                for &(block, data) in &zone_writes {
                    set_checksum_slot(&mut checksum_block, self.slot_of(block), zone_block_checksum(data));
                }
                checksum_writes[member].insert(zone, checksum_block);
            }
        }
        Ok(checksum_writes)
    }

    /// Why member block `member_block`'s `data` does not match its zone's
    /// `checksum_block`, or `None` when it matches.
    pub(super) fn mismatch(&self, checksum_block: &[u8], member_block: u64, data: &[u8]) -> Option<String> {
        let stored = checksum_slot(checksum_block, self.slot_of(member_block));
        let computed = zone_block_checksum(data);
        (stored != computed).then(|| format!("zone checksum mismatch: stored {stored:#010x}, data {computed:#010x}"))
    }
}

impl<D: BlockDevice> RaidDevice<D> {
    /// Reads every block of every member directly and returns the data blocks whose
    /// zone checksum does not match (empty when consistent, or without zone
    /// checksums). Needs payload; skips a failed member.
    pub fn verify_zone_checksums(&mut self) -> Result<Vec<ChecksumMismatch>, DeviceError> {
        if !self.info.stores_payload {
            return Err(self.invalid("members store no payload: checksums cannot be verified".into()));
        }
        let Some(zones) = self.zones else { return Ok(Vec::new()) };
        let block_size = self.block_size();
        let zone_data_blocks = usize::try_from(zones.data_blocks()).expect("a zone's slots fit in one block");
        let zone_physical_blocks = u32::try_from(zones.data_blocks() + 1).expect("a zone's slots fit in one block");
        let mut mismatches = Vec::new();
        for member in (0..self.members.len()).filter(|&member| Some(member) != self.failed) {
            for zone in 0..zones.zone_count() {
                let first_physical = zones.physical_block(zone * zones.data_blocks());
                let zone_bytes = self.members[member].read_blocks(first_physical, zone_physical_blocks)?;
                let (data, checksum_block) = zone_bytes.split_at(zone_data_blocks * block_size);
                for (member_block, block) in (zone * zones.data_blocks()..).zip(data.chunks(block_size)) {
                    if member_block < self.member_blocks
                        && zones.mismatch(checksum_block, member_block, block).is_some()
                    {
                        mismatches.push(ChecksumMismatch { member, member_block });
                    }
                }
            }
        }
        Ok(mismatches)
    }

    /// Per member, the zones whose checksum block must be read before `writes`
    /// can be written (none without zone checksums).
    pub(super) fn checksum_pre_reads(&self, writes: &[BlockSet]) -> Vec<BlockSet> {
        self.zones.map_or_else(Vec::new, |zones| zones.pre_reads(writes))
    }

    /// Per member, the new checksum blocks for `writes`, from the checksum
    /// blocks in `read` (none without zone checksums).
    pub(super) fn checksum_writes(
        &self,
        writes: &[BlockWrites],
        read: &ReadResults,
    ) -> Result<MemberWrites, DeviceError> {
        let Some(zones) = self.zones else { return Ok(Vec::new()) };
        zones.checksum_writes(writes, &read.checksums, self.block_size(), self.info.stores_payload)
    }

    /// Checks each member block of `blocks` read from `member` against its zone's
    /// checksum; one that does not match becomes an I/O error (so that it is
    /// recovered from its row), as does one whose checksum block could not be read.
    pub(super) fn verify_read(&self, member: usize, blocks: &[Range<u64>], read: &mut ReadResults) {
        let Some(zones) = self.zones else { return };
        if !self.info.stores_payload {
            return;
        }
        let block_size = self.block_size();
        for member_block in blocks.iter().flat_map(Range::clone) {
            let zone = zones.zone_of(member_block);
            let verdict = match read.checksums.get(&(member, zone)) {
                Some(Ok(checksum_block)) => match read.get(member, member_block, block_size).map(|block| block.data) {
                    Some(Ok(data)) => zones.mismatch(checksum_block, member_block, data),
                    _ => None,
                },
                Some(Err(error)) => Some(format!("checksum block unreadable: {error}")),
                None => unreachable!("checksum block of member {member} zone {zone} is read with its data"),
            };
            if let Some(detail) = verdict {
                let device = self.members[member].info().name;
                read.fail_block(member, member_block, DeviceError::Io { device, block: member_block, detail });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_of_zeroes_has_checksum_zero() {
        assert_eq!(zone_block_checksum(&[0; 512]), 0);
        assert_eq!(zone_block_checksum(&[1; 512]), crc32c::crc32c(&[1; 512]));
    }

    #[test]
    fn member_blocks_and_checksum_blocks_tile_a_member() {
        let zones = Zones::new(3, 10);
        // Physical blocks 0..12: zone 0 is 0, 1, 2 + checksum 3; zone 1 is 4, 5, 6 + checksum 7.
        assert_eq!((0..6).map(|block| zones.physical_block(block)).collect::<Vec<_>>(), vec![0, 1, 2, 4, 5, 6]);
        assert_eq!(zones.checksum_block(1), 7);
        for member_block in 0..10 {
            let physical = zones.physical_block(member_block);
            assert_eq!(zones.physical_content(physical), PhysicalBlock::Data { member_block });
        }
        for zone in 0..zones.zone_count() {
            assert_eq!(zones.physical_content(zones.checksum_block(zone)), PhysicalBlock::Checksum { zone });
        }
        assert_eq!(zones.zone_count(), 4, "the last zone holds one block in use");
        assert_eq!(Zones::usable_blocks(3, 15), 9);
    }

    #[test]
    fn only_writes_covering_a_zone_in_use_skip_reading_its_checksums() {
        let zones = Zones::new(3, 10);
        assert!(zones.covers_zone(0, 3));
        assert!(!zones.covers_zone(0, 2));
        // Zone 3 holds only member block 9.
        assert!(zones.covers_zone(3, 1));
        let writes = vec![BlockSet::from([0, 1, 2, 4]), BlockSet::from([9]), BlockSet::new()];
        assert_eq!(zones.pre_reads(&writes), vec![BlockSet::from([1]), BlockSet::new(), BlockSet::new()]);
    }

    #[test]
    fn checksum_writes_replace_the_written_slots_only() {
        let zones = Zones::new(3, 6);
        let old = [7u8; 512];
        let writes = vec![BlockWrites::from([(4, vec![1u8; 512])])];
        let read = BTreeMap::from([((0, 1), Ok(old.to_vec()))]);
        let written = zones.checksum_writes(&writes, &read, 512, true).unwrap();
        let block = &written[0][&1];
        assert_eq!(checksum_slot(block, 0), checksum_slot(&old, 0));
        assert_eq!(checksum_slot(block, 1), zone_block_checksum(&[1; 512]));
        assert_eq!(checksum_slot(block, 2), checksum_slot(&old, 2));
        assert_eq!(zones.mismatch(block, 4, &[1; 512]), None);
        assert!(zones.mismatch(block, 4, &[2; 512]).is_some());
        // A covered zone starts from zeroes and needs no read.
        let whole = vec![BlockWrites::from([(0, vec![0u8; 512]), (1, vec![0u8; 512]), (2, vec![3u8; 512])])];
        let written = zones.checksum_writes(&whole, &BTreeMap::new(), 512, true).unwrap();
        assert_eq!(checksum_slot(&written[0][&0], 2), zone_block_checksum(&[3; 512]));
        assert_eq!(checksum_slot(&written[0][&0], 0), 0);
        // Without payload the checksum block is written without data.
        let written = zones.checksum_writes(&writes, &BTreeMap::new(), 512, false).unwrap();
        assert!(written[0][&1].is_empty());
    }
}
