//! RAID-4 and RAID-5 as a [`BlockDevice`] over N data members and one parity.
//!
//! # Layout
//!
//! Every member is cut into stripe units of `stripe_unit_blocks`. Stripe `s`
//! holds unit `s` of every member: N data units, then parity. A logical block `L`
//! lies in stripe `s = L / (N·unit)`, data unit `d = (L mod N·unit) / unit`, at
//! offset `o = L mod unit`, i.e. member block `s·unit + o` of the member holding
//! data unit `d`. The same member block on every member forms a *row*; the parity
//! block of a row is the XOR of its N data blocks. RAID-4 keeps parity on the last
//! member; RAID-5 rotates it left-symmetrically (parity of stripe `s` on member
//! `N − (s mod (N+1))`, data unit `d` on member `(parity + 1 + d) mod (N+1)`).
//!
//! # Writes
//!
//! The writes of one batch are grouped by stripe, so several blocks of one stripe
//! share one parity update. A stripe whose every data block is written is a
//! *full-stripe write*: parity is computed from the new data, nothing is read. For
//! a partial stripe the cheaper of two methods (counted in blocks read) is used:
//! *read-modify-write* reads the old data being replaced and the old parity
//! (parity ^= old ^ new); *reconstruct-write* reads the data blocks of the affected
//! rows that are not being written. With a failed member, the method that does not
//! need to read it is used, row by row. Trims are carried out as writes of zeroes,
//! so that parity stays consistent with what reads return.
//!
//! # Batches
//!
//! A batch from above becomes one batch per member, each member's requests in
//! ascending block order, adjacent blocks coalesced into one request: submitted to
//! every member, then waited for on every member, so members work in parallel.
//! When a partial-stripe write needs old data, the batch runs in two phases (reads,
//! then writes), each one batch per member.
//!
//! With members that store no payload (metadata-only simulation) the same I/O is
//! issued without data: parity arithmetic is skipped, reads return nothing.
//!
//! # Zone checksums
//!
//! Optionally ([`RaidConfig::with_zone_checksums`]) every member is cut into
//! *zones* of N data blocks followed by one checksum block holding each data
//! block's crc32c (4 bytes per slot, little-endian, in block order; a block of
//! zeroes has checksum 0, so a blank member is consistent). Member block `m` then
//! lies at physical block `(m / N)·(N+1) + m mod N`, and its checksum in slot
//! `m mod N` of physical block `(m / N)·(N+1) + N`. Parity rows are formed over
//! member blocks, so checksum blocks are per member and outside parity (the parity
//! member's checksum blocks cover its parity blocks).
//!
//! Every member block read is read together with its zone's checksum block and
//! verified; a mismatch is a detected error like a member read error: the block
//! is reconstructed from the rest of its row and written back, with its checksum.
//! Every member block written updates its zone's checksum block, which is read
//! first unless the batch writes the whole zone. A small update thus costs, on a
//! data member and on the parity member each, a read and a write of the block and
//! of its checksum block — usually adjacent on the disk, often one request each.
//! Without payload the checksum blocks are read and written without data.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::stats::{DeviceStats, StatsDevice};
use crate::{validate_request, BatchTicket, BlockDevice, DeviceError, DeviceInfo, IoCompletion, IoOp, IoRequest};

/// Where parity lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RaidLevel {
    /// A dedicated parity member (the last).
    Raid4,
    /// Parity rotated over all members, left-symmetric.
    Raid5,
}

/// The shape of an array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaidConfig {
    /// RAID-4 or RAID-5.
    pub level: RaidLevel,
    /// Stripe unit in bytes (a whole number of blocks; 1 MiB by default).
    pub stripe_unit_bytes: u64,
    /// Zone checksums: data blocks per checksum block on each member (none by default).
    #[serde(default)]
    pub zone_data_blocks: Option<u32>,
}

/// Data blocks per checksum block in NetApp's zone checksum layout (63 data blocks
/// and their checksum block make a zone of 64).
pub const NETAPP_ZONE_DATA_BLOCKS: u32 = 63;

/// Bytes of one block's checksum in a checksum block.
const CHECKSUM_SLOT_BYTES: usize = 4;

/// The checksum kept for a block: its crc32c, or 0 for a block of zeroes (what a
/// blank member holds everywhere, checksum blocks included).
pub fn zone_block_checksum(data: &[u8]) -> u32 {
    if data.iter().all(|&byte| byte == 0) {
        0
    } else {
        crc32c::crc32c(data)
    }
}

/// Bytes of a write-intent region (rounded up to whole stripes): a writer logs
/// the regions it is about to write, and after a crash the array recomputes
/// their parity. Larger regions log less often and resync more; 64 MiB is what
/// Linux md's write-intent bitmap uses on large arrays.
pub const WRITE_INTENT_REGION_BYTES: u64 = 64 << 20;

/// The default stripe unit: 1 MiB.
pub const DEFAULT_STRIPE_UNIT_BYTES: u64 = 1 << 20;

impl RaidConfig {
    /// RAID-4 with a 1 MiB stripe unit.
    pub fn raid4() -> Self {
        Self { level: RaidLevel::Raid4, stripe_unit_bytes: DEFAULT_STRIPE_UNIT_BYTES, zone_data_blocks: None }
    }

    /// RAID-5 with a 1 MiB stripe unit.
    pub fn raid5() -> Self {
        Self { level: RaidLevel::Raid5, stripe_unit_bytes: DEFAULT_STRIPE_UNIT_BYTES, zone_data_blocks: None }
    }

    /// The same configuration with another stripe unit.
    pub fn with_stripe_unit_bytes(mut self, stripe_unit_bytes: u64) -> Self {
        self.stripe_unit_bytes = stripe_unit_bytes;
        self
    }

    /// The same configuration with zone checksums: one checksum block after every
    /// `data_blocks_per_zone` data blocks on each member ([`NETAPP_ZONE_DATA_BLOCKS`]
    /// as in NetApp's arrays).
    pub fn with_zone_checksums(mut self, data_blocks_per_zone: u32) -> Self {
        self.zone_data_blocks = Some(data_blocks_per_zone);
        self
    }
}

/// What a rebuild did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebuildReport {
    /// The member rebuilt.
    pub member: usize,
    /// Blocks written to the replacement.
    pub block_count: u64,
    /// Device-clock time the rebuild took.
    pub elapsed_ns: u64,
}

/// A parity block that does not match its row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParityMismatch {
    /// The member block of the row.
    pub member_block: u64,
    /// The member holding that row's parity.
    pub parity_member: usize,
}

/// A data block whose zone checksum does not match its contents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChecksumMismatch {
    /// The member holding the block.
    pub member: usize,
    /// The member block (before zone mapping).
    pub member_block: u64,
}

/// The location of a logical block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Location {
    stripe: u64,
    data_index: usize,
    member: usize,
    member_block: u64,
}

/// One row of a stripe touched by the writes of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RowWrite {
    member_block: u64,
    parity_member: usize,
    /// Member → new data of the data blocks written in this row.
    written: BTreeMap<usize, Vec<u8>>,
    /// The data members of the row (N of them).
    data_members: Vec<usize>,
    method: RowMethod,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowMethod {
    /// Every data block of the row is written: parity from new data alone.
    Full,
    /// parity ^= old ^ new for each written block: reads old data and old parity.
    ReadModifyWrite,
    /// parity = XOR of new and unwritten old data: reads the unwritten data.
    ReconstructWrite,
    /// The parity member has failed: only data is written.
    NoParity,
}

/// How an outer request is answered.
#[derive(Debug)]
enum OuterSlot {
    /// Answered at submission (invalid request).
    Done(IoCompletion),
    /// A read: per block, the member block to return, or the row to reconstruct.
    Read(Vec<ReadSource>),
    /// A write or trim: completes when the batch's writes complete.
    Write,
}

#[derive(Debug, Clone, Copy)]
enum ReadSource {
    Direct { member: usize, member_block: u64 },
    Reconstruct { failed: usize, member_block: u64 },
}

/// Data and completion time of member blocks read in a batch (keyed by member and
/// member block), and the zone checksum blocks read (keyed by member and zone).
#[derive(Debug, Default)]
struct ReadResults {
    blocks: BTreeMap<(usize, u64), BlockRead>,
    checksums: BTreeMap<(usize, u64), Result<Vec<u8>, DeviceError>>,
}

impl ReadResults {
    fn new() -> Self {
        Self::default()
    }

    fn get(&self, key: &(usize, u64)) -> Option<&BlockRead> {
        self.blocks.get(key)
    }

    fn contains_key(&self, key: &(usize, u64)) -> bool {
        self.blocks.contains_key(key)
    }
}

/// A member block's data (or error) and the time its read completed.
type BlockRead = (Result<Vec<u8>, DeviceError>, u64);

/// Per member, blocks to write (member block or zone → data).
type MemberWrites = Vec<BTreeMap<u64, Vec<u8>>>;

/// What a physical block of a member holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PhysicalBlock {
    Data { member_block: u64 },
    Checksum { zone: u64 },
}

/// Per member, the batch submitted to it (if any) and the runs it holds.
type MemberBatches = Vec<Option<(BatchTicket, Vec<MemberRun>)>>;

#[derive(Debug)]
struct InFlight {
    submitted_ns: u64,
    outer: Vec<OuterSlot>,
    rows: Vec<RowWrite>,
    /// Per member, the phase-1 batch and the blocks of each of its requests.
    phase1: MemberBatches,
    /// Whether the writes went out with phase 1 (no old data was needed).
    writes_in_phase1: bool,
}

/// One member request: its first block, block count, and whether it reads.
#[derive(Debug, Clone, Copy)]
struct MemberRun {
    block: u64,
    block_count: u32,
    is_read: bool,
}

/// RAID-4/5 over `members` (data members first, in order, then parity for RAID-4).
#[derive(Debug)]
pub struct RaidDevice<D> {
    members: Vec<StatsDevice<D>>,
    config: RaidConfig,
    unit_blocks: u64,
    /// Zone checksums: data blocks per zone.
    zone_data_blocks: Option<u64>,
    /// Member blocks in use on each member (a whole number of stripe units).
    member_blocks: u64,
    info: DeviceInfo,
    failed: Option<usize>,
    in_flight: BTreeMap<u64, InFlight>,
    next_ticket: u64,
}

impl<D: BlockDevice> RaidDevice<D> {
    /// An array over `members` (at least 2: N ≥ 1 data members and one parity).
    /// Every member must have the same block size; the array uses the smallest
    /// member's capacity, rounded down to whole stripe units.
    pub fn new(members: Vec<D>, config: RaidConfig) -> Result<Self, DeviceError> {
        let infos: Vec<DeviceInfo> = members.iter().map(BlockDevice::info).collect();
        let name = format!("raid{}[{}]", if config.level == RaidLevel::Raid4 { 4 } else { 5 }, infos.len());
        let invalid = |detail: String| DeviceError::Invalid { device: name.clone(), detail };
        if infos.len() < 2 {
            return Err(invalid(format!("{} members; at least 2 are needed", infos.len())));
        }
        let block_size_bytes = infos[0].block_size_bytes;
        if let Some(other) = infos.iter().find(|info| info.block_size_bytes != block_size_bytes) {
            return Err(invalid(format!(
                "{} has {}-byte blocks, not {block_size_bytes}",
                other.name, other.block_size_bytes
            )));
        }
        if infos.iter().any(|info| info.stores_payload != infos[0].stores_payload) {
            return Err(invalid("some members store payload and others do not".into()));
        }
        let unit_bytes = config.stripe_unit_bytes;
        if unit_bytes == 0 || !unit_bytes.is_multiple_of(u64::from(block_size_bytes)) {
            return Err(invalid(format!("stripe unit {unit_bytes} bytes is not a whole number of blocks")));
        }
        let unit_blocks = unit_bytes / u64::from(block_size_bytes);
        let zone_data_blocks = config.zone_data_blocks.map(u64::from);
        if let Some(zone_blocks) = zone_data_blocks {
            if zone_blocks == 0 || zone_blocks as usize * CHECKSUM_SLOT_BYTES > block_size_bytes as usize {
                return Err(invalid(format!(
                    "{zone_blocks} data blocks per zone: a {block_size_bytes}-byte checksum block holds 1 to {}",
                    block_size_bytes as usize / CHECKSUM_SLOT_BYTES
                )));
            }
        }
        let physical_blocks = infos.iter().map(|info| info.block_count).min().expect("members");
        let usable_blocks = match zone_data_blocks {
            Some(zone_blocks) => physical_blocks / (zone_blocks + 1) * zone_blocks,
            None => physical_blocks,
        };
        let member_blocks = usable_blocks / unit_blocks * unit_blocks;
        if member_blocks == 0 {
            return Err(invalid(format!("members are smaller than one {unit_bytes}-byte stripe unit")));
        }
        let data_member_count = infos.len() as u64 - 1;
        let info = DeviceInfo {
            name,
            block_size_bytes,
            block_count: member_blocks * data_member_count,
            atomic_write_bytes: infos.iter().map(|info| info.atomic_write_bytes).min().expect("members"),
            stores_payload: infos.iter().all(|info| info.stores_payload),
        };
        let members = members.into_iter().map(StatsDevice::new).collect();
        Ok(Self {
            members,
            config,
            unit_blocks,
            zone_data_blocks,
            member_blocks,
            info,
            failed: None,
            in_flight: BTreeMap::new(),
            next_ticket: 0,
        })
    }

    /// Number of members (data and parity).
    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    /// The failed member, if any.
    pub fn failed_member(&self) -> Option<usize> {
        self.failed
    }

    /// Statistics of each member since the last [`RaidDevice::take_member_stats`].
    pub fn member_stats(&self) -> Vec<DeviceStats> {
        self.members.iter().map(StatsDevice::stats).collect()
    }

    /// Statistics of each member, zeroing them (call around a batch to measure it).
    pub fn take_member_stats(&mut self) -> Vec<DeviceStats> {
        self.members.iter_mut().map(StatsDevice::take_stats).collect()
    }

    /// The member devices.
    pub fn members(&self) -> impl Iterator<Item = &D> {
        self.members.iter().map(StatsDevice::inner)
    }

    /// The member devices, giving up the array.
    pub fn into_members(self) -> Vec<D> {
        self.members.into_iter().map(StatsDevice::into_inner).collect()
    }

    /// Member `index`, mutably (I/O issued directly to it bypasses parity).
    pub fn member_mut(&mut self, index: usize) -> &mut D {
        self.members[index].inner_mut()
    }

    /// Marks member `index` failed: it is no longer read or written; its blocks are
    /// reconstructed from the others. Only one member may be failed at a time.
    pub fn fail_member(&mut self, index: usize) -> Result<(), DeviceError> {
        if index >= self.members.len() {
            return Err(self.invalid(format!("member {index} does not exist ({} members)", self.members.len())));
        }
        match self.failed {
            Some(failed) if failed != index => {
                Err(self.invalid(format!("member {failed} has already failed; a second failure loses data")))
            }
            _ => {
                self.failed = Some(index);
                Ok(())
            }
        }
    }

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
        let zone_blocks = self.zone_data_blocks.unwrap_or(1);
        let chunk_blocks = self.unit_blocks.div_ceil(zone_blocks) * zone_blocks;
        let mut block = 0;
        while block < member_blocks {
            let block_count = chunk_blocks.min(member_blocks - block) as u32;
            self.rebuild_chunk(failed, block, block_count)?;
            block += u64::from(block_count);
        }
        self.failed = None;
        Ok(RebuildReport { member: failed, block_count: member_blocks, elapsed_ns: self.now_ns() - started_ns })
    }

    fn rebuild_chunk(&mut self, failed: usize, block: u64, block_count: u32) -> Result<(), DeviceError> {
        let blocks = block..block + u64::from(block_count);
        let rows = self.read_member_rows(blocks.clone(), Some(failed))?;
        let mut writes: MemberWrites = vec![BTreeMap::new(); self.members.len()];
        for (member_block, row) in blocks.zip(rows) {
            let mut xor: Option<Vec<u8>> = None;
            row.iter().flatten().for_each(|data| xor_into(&mut xor, data));
            let data = if self.info.stores_payload { xor.unwrap_or_default() } else { Vec::new() };
            writes[failed].insert(member_block, data);
        }
        let checksums = self.checksum_writes(&writes, &ReadResults::new())?;
        let submitted = self.submit_to_members(&[], &writes, &[], &checksums)?;
        let mut read = ReadResults::new();
        self.wait_members(submitted, &mut read)?.1
    }

    /// Reads `blocks` of every member but `skip` (one batch per member, checksums
    /// verified) and returns, per member block, each member's data (`None` for `skip`).
    fn read_member_rows(
        &mut self,
        blocks: std::ops::Range<u64>,
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

    /// Reads every block of every member directly and returns the data blocks whose
    /// zone checksum does not match (empty when consistent, or without zone
    /// checksums). Needs payload; skips a failed member.
    pub fn verify_zone_checksums(&mut self) -> Result<Vec<ChecksumMismatch>, DeviceError> {
        if !self.info.stores_payload {
            return Err(self.invalid("members store no payload: checksums cannot be verified".into()));
        }
        let Some(zone_blocks) = self.zone_data_blocks else { return Ok(Vec::new()) };
        let block_size = self.info.block_size_bytes as usize;
        let zone_count = self.member_blocks.div_ceil(zone_blocks);
        let mut mismatches = Vec::new();
        for member in (0..self.members.len()).filter(|&member| Some(member) != self.failed) {
            for zone in 0..zone_count {
                let zone_bytes = self.members[member].read_blocks(zone * (zone_blocks + 1), zone_blocks as u32 + 1)?;
                let (data, checksum_block) = zone_bytes.split_at(zone_blocks as usize * block_size);
                for (slot, block) in data.chunks(block_size).enumerate() {
                    let member_block = zone * zone_blocks + slot as u64;
                    if member_block < self.member_blocks
                        && checksum_slot(checksum_block, slot) != zone_block_checksum(block)
                    {
                        mismatches.push(ChecksumMismatch { member, member_block });
                    }
                }
            }
        }
        Ok(mismatches)
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
        let mut mismatches = Vec::new();
        for stripe in 0..self.member_blocks / self.unit_blocks {
            let first = stripe * self.unit_blocks;
            let rows = self.read_member_rows(first..first + self.unit_blocks, None)?;
            for (offset, row) in rows.into_iter().enumerate() {
                let mut xor: Option<Vec<u8>> = None;
                row.iter().flatten().for_each(|data| xor_into(&mut xor, data));
                if xor.expect("at least two members").iter().any(|&byte| byte != 0) {
                    let parity_member = self.parity_member(stripe);
                    mismatches.push(ParityMismatch { member_block: first + offset as u64, parity_member });
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
        let location = self.locate(block);
        let rows = self.read_member_rows(location.member_block..location.member_block + 1, Some(location.member))?;
        let mut xor = None;
        rows[0].iter().flatten().for_each(|data| xor_into(&mut xor, data));
        Ok(xor)
    }

    /// Writes `data` over logical block `block`'s own copy, leaving parity as
    /// it is (`data` agrees with it: a reconstruction), with its zone checksum.
    pub fn rewrite_member_block(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        validate_request(&self.info, &IoRequest::write(block, 1, data.to_vec()))?;
        let location = self.locate(block);
        if self.failed == Some(location.member) {
            return Err(
                self.invalid(format!("member {} has failed: block {block} has no copy to repair", location.member))
            );
        }
        let mut writes: MemberWrites = vec![BTreeMap::new(); self.members.len()];
        writes[location.member].insert(location.member_block, data.to_vec());
        self.write_member_blocks(&writes)
    }

    /// Writes member blocks directly (parity untouched), reading the checksum
    /// blocks of the zones they do not cover first.
    fn write_member_blocks(&mut self, writes: &MemberWrites) -> Result<(), DeviceError> {
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

    /// Recomputes the parity of every row that holds logical blocks `[block,
    /// block + block_count)` from the row's data: what a crash during writes
    /// may have left inconsistent (the RAID write hole). With a failed member
    /// nothing can be recomputed; the rows are left as they are.
    pub fn resync_parity(&mut self, block: u64, block_count: u64) -> Result<(), DeviceError> {
        let request_blocks = u32::try_from(block_count.min(u64::from(u32::MAX))).unwrap_or(u32::MAX);
        validate_request(&self.info, &IoRequest::read(block, request_blocks.max(1)))?;
        if self.failed.is_some() || block_count == 0 {
            return Ok(());
        }
        let stripe_blocks = self.unit_blocks * self.data_member_count();
        let first_stripe = block / stripe_blocks;
        let end_stripe = (block + block_count).div_ceil(stripe_blocks);
        for stripe in first_stripe..end_stripe {
            // A stripe's rows are its unit's member blocks on every member.
            let first_row = stripe * self.unit_blocks;
            let parity_member = self.parity_member(stripe);
            let rows = self.read_member_rows(first_row..first_row + self.unit_blocks, Some(parity_member))?;
            let mut writes: MemberWrites = vec![BTreeMap::new(); self.members.len()];
            for (member_block, row) in (first_row..).zip(rows) {
                let mut xor = None;
                row.iter().flatten().for_each(|data| xor_into(&mut xor, data));
                let parity = if self.info.stores_payload { xor.unwrap_or_default() } else { Vec::new() };
                writes[parity_member].insert(member_block, parity);
            }
            self.write_member_blocks(&writes)?;
        }
        Ok(())
    }

    /// Blocks of one write-intent region: whole stripes, at least
    /// [`WRITE_INTENT_REGION_BYTES`].
    pub fn write_intent_region_blocks(&self) -> u64 {
        let stripe_blocks = self.unit_blocks * self.data_member_count();
        let region_stripes =
            (WRITE_INTENT_REGION_BYTES / u64::from(self.info.block_size_bytes)).div_ceil(stripe_blocks);
        stripe_blocks * region_stripes.max(1)
    }

    /// A member failed a write or a flush: with every other member present it
    /// is failed (as an array takes a disk out), and the array goes on
    /// degraded — the rows it was written in stay reconstructable from the
    /// others, which took their share of the write. Otherwise the error stands.
    /// The failure is not recorded on the members: after a restart the member
    /// is back, and its stale blocks are caught by their checksums above.
    fn fail_member_on_error(&mut self, member: usize, error: DeviceError) -> Result<(), DeviceError> {
        if matches!(error, DeviceError::Invalid { .. } | DeviceError::OutOfRange { .. }) {
            return Err(error);
        }
        match self.failed {
            None => {
                tracing::warn!(member, %error, "a RAID member failed a write; the array runs degraded");
                self.failed = Some(member);
                Ok(())
            }
            Some(failed) if failed == member => Ok(()),
            Some(_) => Err(error),
        }
    }

    fn invalid(&self, detail: String) -> DeviceError {
        DeviceError::Invalid { device: self.info.name.clone(), detail }
    }

    /// Where member block `member_block` lies on the member.
    fn physical_block(&self, member_block: u64) -> u64 {
        match self.zone_data_blocks {
            Some(zone_blocks) => member_block / zone_blocks * (zone_blocks + 1) + member_block % zone_blocks,
            None => member_block,
        }
    }

    /// What physical block `physical` of a member holds: a member block, or the
    /// checksum block of a zone.
    fn physical_content(&self, physical: u64) -> PhysicalBlock {
        match self.zone_data_blocks {
            Some(zone_blocks) if physical % (zone_blocks + 1) == zone_blocks => {
                PhysicalBlock::Checksum { zone: physical / (zone_blocks + 1) }
            }
            Some(zone_blocks) => PhysicalBlock::Data {
                member_block: physical / (zone_blocks + 1) * zone_blocks + physical % (zone_blocks + 1),
            },
            None => PhysicalBlock::Data { member_block: physical },
        }
    }

    /// Whether `blocks` (of one zone) are all the zone's member blocks in use.
    fn covers_zone(&self, zone: u64, blocks: usize) -> bool {
        let zone_blocks = self.zone_data_blocks.expect("zone checksums");
        let in_use = self.member_blocks.min((zone + 1) * zone_blocks) - zone * zone_blocks;
        blocks as u64 == in_use
    }

    /// Per member, the zones whose checksum block must be read before `writes`
    /// (member block → data) can be written: those the writes do not cover.
    fn checksum_pre_reads(&self, writes: &[BTreeSet<u64>]) -> Vec<BTreeSet<u64>> {
        let Some(zone_blocks) = self.zone_data_blocks else { return Vec::new() };
        writes
            .iter()
            .map(|blocks| {
                let mut per_zone: BTreeMap<u64, usize> = BTreeMap::new();
                blocks.iter().for_each(|block| *per_zone.entry(block / zone_blocks).or_default() += 1);
                per_zone
                    .into_iter()
                    .filter(|&(zone, count)| !self.covers_zone(zone, count))
                    .map(|(zone, _)| zone)
                    .collect()
            })
            .collect()
    }

    /// Per member, the new checksum blocks (zone → data) for `writes`: the old
    /// checksum block read in `read` (or zeroes for a covered zone) with the
    /// written blocks' slots replaced.
    fn checksum_writes(
        &self,
        writes: &[BTreeMap<u64, Vec<u8>>],
        read: &ReadResults,
    ) -> Result<MemberWrites, DeviceError> {
        let Some(zone_blocks) = self.zone_data_blocks else { return Ok(Vec::new()) };
        let block_size = self.info.block_size_bytes as usize;
        let mut checksum_writes: MemberWrites = vec![BTreeMap::new(); self.members.len()];
        for (member, blocks) in writes.iter().enumerate() {
            let mut per_zone: BTreeMap<u64, Vec<(u64, &Vec<u8>)>> = BTreeMap::new();
            blocks
                .iter()
                .for_each(|(&block, data)| per_zone.entry(block / zone_blocks).or_default().push((block, data)));
            for (zone, zone_writes) in per_zone {
                if !self.info.stores_payload {
                    checksum_writes[member].insert(zone, Vec::new());
                    continue;
                }
                let mut checksum_block = if self.covers_zone(zone, zone_writes.len()) {
                    vec![0; block_size]
                } else {
                    match read.checksums.get(&(member, zone)) {
                        Some(Ok(data)) => data.clone(),
                        Some(Err(error)) => return Err(error.clone()),
                        None => unreachable!("checksum block of member {member} zone {zone} was read first"),
                    }
                };
                for (block, data) in zone_writes {
                    let slot = (block % zone_blocks) as usize * CHECKSUM_SLOT_BYTES;
                    checksum_block[slot..slot + CHECKSUM_SLOT_BYTES]
                        .copy_from_slice(&zone_block_checksum(data).to_le_bytes());
                }
                checksum_writes[member].insert(zone, checksum_block);
            }
        }
        Ok(checksum_writes)
    }

    fn data_member_count(&self) -> u64 {
        self.members.len() as u64 - 1
    }

    fn parity_member(&self, stripe: u64) -> usize {
        let member_count = self.members.len() as u64;
        match self.config.level {
            RaidLevel::Raid4 => self.members.len() - 1,
            RaidLevel::Raid5 => (member_count - 1 - stripe % member_count) as usize,
        }
    }

    fn data_member(&self, stripe: u64, data_index: usize) -> usize {
        match self.config.level {
            RaidLevel::Raid4 => data_index,
            RaidLevel::Raid5 => (self.parity_member(stripe) + 1 + data_index) % self.members.len(),
        }
    }

    fn locate(&self, block: u64) -> Location {
        let stripe_blocks = self.unit_blocks * self.data_member_count();
        let stripe = block / stripe_blocks;
        let within = block % stripe_blocks;
        let data_index = (within / self.unit_blocks) as usize;
        let member_block = stripe * self.unit_blocks + within % self.unit_blocks;
        Location { stripe, data_index, member: self.data_member(stripe, data_index), member_block }
    }

    /// Plans the writes of a batch: the rows touched, each with its method.
    fn plan_rows(&self, writes: &BTreeMap<u64, Vec<u8>>) -> Vec<RowWrite> {
        let mut rows: BTreeMap<u64, RowWrite> = BTreeMap::new();
        for (&block, data) in writes {
            let location = self.locate(block);
            let row = rows.entry(location.member_block).or_insert_with(|| RowWrite {
                member_block: location.member_block,
                parity_member: self.parity_member(location.stripe),
                written: BTreeMap::new(),
                data_members: (0..self.data_member_count() as usize)
                    .map(|index| self.data_member(location.stripe, index))
                    .collect(),
                method: RowMethod::Full,
            });
            row.written.insert(location.member, data.clone());
        }
        let mut rows: Vec<RowWrite> = rows.into_values().collect();
        self.choose_methods(&mut rows);
        rows
    }

    /// Chooses, per stripe, read-modify-write or reconstruct-write by the blocks
    /// each would read, then overrides per row where a failed member forces it.
    fn choose_methods(&self, rows: &mut [RowWrite]) {
        let data_count = self.data_member_count() as usize;
        let mut start = 0;
        while start < rows.len() {
            let stripe = rows[start].member_block / self.unit_blocks;
            let end =
                start + rows[start..].iter().take_while(|row| row.member_block / self.unit_blocks == stripe).count();
            let stripe_rows = &mut rows[start..end];
            let rmw_reads: usize = stripe_rows.iter().map(|row| row.written.len() + 1).sum();
            let rcw_reads: usize = stripe_rows.iter().map(|row| data_count - row.written.len()).sum();
            let preferred =
                if rcw_reads < rmw_reads { RowMethod::ReconstructWrite } else { RowMethod::ReadModifyWrite };
            for row in stripe_rows.iter_mut() {
                row.method = self.row_method(row, preferred, data_count);
            }
            start = end;
        }
    }

    fn row_method(&self, row: &RowWrite, preferred: RowMethod, data_count: usize) -> RowMethod {
        if Some(row.parity_member) == self.failed {
            return RowMethod::NoParity;
        }
        if row.written.len() == data_count {
            return RowMethod::Full;
        }
        match self.failed {
            // The failed member's new data is known: only reconstruct-write avoids reading it.
            Some(failed) if row.written.contains_key(&failed) => RowMethod::ReconstructWrite,
            // The failed member is not written: reconstruct-write would have to read it.
            Some(failed) if row.data_members.contains(&failed) => RowMethod::ReadModifyWrite,
            _ => preferred,
        }
    }

    /// The member blocks each row's method reads before writing.
    fn pre_reads(&self, rows: &[RowWrite], reads: &mut [BTreeSet<u64>]) {
        for row in rows {
            match row.method {
                RowMethod::Full | RowMethod::NoParity => {}
                RowMethod::ReadModifyWrite => {
                    for &member in row.written.keys().chain(std::iter::once(&row.parity_member)) {
                        reads[member].insert(row.member_block);
                    }
                }
                RowMethod::ReconstructWrite => {
                    for &member in row.data_members.iter().filter(|member| !row.written.contains_key(member)) {
                        reads[member].insert(row.member_block);
                    }
                }
            }
        }
    }

    /// Computes the member writes of `rows` from the blocks read in phase 1.
    fn member_writes(&self, rows: &[RowWrite], read: &ReadResults) -> Result<Vec<BTreeMap<u64, Vec<u8>>>, DeviceError> {
        let mut writes = vec![BTreeMap::new(); self.members.len()];
        let payload = self.info.stores_payload;
        let old = |member: usize, block: u64| -> Result<&Vec<u8>, DeviceError> {
            match read.get(&(member, block)) {
                Some((Ok(data), _)) => Ok(data),
                Some((Err(error), _)) => Err(error.clone()),
                None => unreachable!("pre-read of member {member} block {block} was planned"),
            }
        };
        for row in rows {
            let mut parity: Option<Vec<u8>> = None;
            match row.method {
                RowMethod::NoParity => {}
                RowMethod::Full => row.written.values().for_each(|data| xor_into(&mut parity, data)),
                RowMethod::ReadModifyWrite => {
                    xor_into(&mut parity, old(row.parity_member, row.member_block)?);
                    for (&member, data) in &row.written {
                        xor_into(&mut parity, old(member, row.member_block)?);
                        xor_into(&mut parity, data);
                    }
                }
                RowMethod::ReconstructWrite => {
                    for &member in &row.data_members {
                        match row.written.get(&member) {
                            Some(data) => xor_into(&mut parity, data),
                            None => xor_into(&mut parity, old(member, row.member_block)?),
                        }
                    }
                }
            }
            for (&member, data) in &row.written {
                if Some(member) != self.failed {
                    writes[member].insert(row.member_block, data.clone());
                }
            }
            if row.method != RowMethod::NoParity {
                let parity = if payload { parity.unwrap_or_default() } else { Vec::new() };
                writes[row.parity_member].insert(row.member_block, parity);
            }
        }
        Ok(writes)
    }

    /// Classifies the outer requests: reads to sources, writes into `writes`.
    fn classify(&self, batch: Vec<IoRequest>, now_ns: u64, writes: &mut BTreeMap<u64, Vec<u8>>) -> Vec<OuterSlot> {
        let block_size = self.info.block_size_bytes as usize;
        let mut outer = Vec::with_capacity(batch.len());
        for request in batch {
            if let Err(error) = validate_request(&self.info, &request) {
                outer.push(OuterSlot::Done(IoCompletion {
                    result: Err(error),
                    submitted_ns: now_ns,
                    completed_ns: now_ns,
                }));
                continue;
            }
            let blocks = request.block..request.end_block();
            match request.op {
                IoOp::Read => outer.push(OuterSlot::Read(blocks.map(|block| self.read_source(block)).collect())),
                IoOp::Write | IoOp::Trim => {
                    for (index, block) in blocks.enumerate() {
                        let data = match (request.op, self.info.stores_payload) {
                            (_, false) => Vec::new(),
                            (IoOp::Write, true) => request.data[index * block_size..(index + 1) * block_size].to_vec(),
                            _ => vec![0; block_size],
                        };
                        writes.insert(block, data);
                    }
                    outer.push(OuterSlot::Write);
                }
            }
        }
        outer
    }

    fn read_source(&self, block: u64) -> ReadSource {
        let location = self.locate(block);
        if Some(location.member) == self.failed {
            ReadSource::Reconstruct { failed: location.member, member_block: location.member_block }
        } else {
            ReadSource::Direct { member: location.member, member_block: location.member_block }
        }
    }

    /// Submits one batch per member: the member blocks to read (with their zones'
    /// checksum blocks) and the zones' checksum blocks to read, then the member
    /// blocks and checksum blocks to write, each coalesced into runs of adjacent
    /// physical blocks in ascending order.
    fn submit_to_members(
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
                if let Some(zone_blocks) = self.zone_data_blocks {
                    physical_reads.insert(checksum_block_of_zone(block / zone_blocks, zone_blocks));
                }
            }
            for (&block, data) in writes.get(member).into_iter().flatten() {
                physical_writes.insert(self.physical_block(block), data.clone());
            }
            if let Some(zone_blocks) = self.zone_data_blocks {
                for &zone in checksum_reads.get(member).into_iter().flatten() {
                    physical_reads.insert(checksum_block_of_zone(zone, zone_blocks));
                }
                for (&zone, data) in checksum_writes.get(member).into_iter().flatten() {
                    physical_writes.insert(checksum_block_of_zone(zone, zone_blocks), data.clone());
                }
            }
            let mut requests = read_runs(Some(&physical_reads));
            requests.extend(write_runs(Some(&physical_writes)));
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
    fn wait_members(
        &mut self,
        submitted: MemberBatches,
        read: &mut ReadResults,
    ) -> Result<(u64, Result<(), DeviceError>), DeviceError> {
        let block_size = self.info.block_size_bytes as usize;
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
                for offset in 0..u64::from(run.block_count) {
                    let result = completion.result.as_ref().map_err(Clone::clone).map(|data| {
                        let start = offset as usize * block_size;
                        data.get(start..start + block_size).map(<[u8]>::to_vec).unwrap_or_default()
                    });
                    match self.physical_content(run.block + offset) {
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

    /// Checks each member block of `blocks` read from `member` against its zone's
    /// checksum; one that does not match becomes an I/O error (so that it is
    /// recovered from its row), as does one whose checksum block could not be read.
    fn verify_read(&self, member: usize, blocks: &[u64], read: &mut ReadResults) {
        let Some(zone_blocks) = self.zone_data_blocks else { return };
        if !self.info.stores_payload {
            return;
        }
        for &member_block in blocks {
            let zone = member_block / zone_blocks;
            let verdict = match read.checksums.get(&(member, zone)) {
                Some(Ok(checksum_block)) => match read.blocks.get(&(member, member_block)) {
                    Some((Ok(data), _)) => {
                        let stored = checksum_slot(checksum_block, (member_block % zone_blocks) as usize);
                        let computed = zone_block_checksum(data);
                        (stored != computed)
                            .then(|| format!("zone checksum mismatch: stored {stored:#010x}, data {computed:#010x}"))
                    }
                    _ => None,
                },
                Some(Err(error)) => Some(format!("checksum block unreadable: {error}")),
                None => unreachable!("checksum block of member {member} zone {zone} is read with its data"),
            };
            if let Some(detail) = verdict {
                let device = self.members[member].info().name;
                let entry = read.blocks.get_mut(&(member, member_block)).expect("block read");
                entry.0 = Err(DeviceError::Io { device, block: member_block, detail });
            }
        }
    }

    /// With every member present, a member block that failed to read with an I/O
    /// error is reconstructed from its row: reads the rest of the row from the
    /// other members (one more batch per member).
    fn recover_failed_reads(&mut self, outer: &[OuterSlot], read: &mut ReadResults) -> Result<(), DeviceError> {
        if self.failed.is_some() {
            return Ok(());
        }
        let mut needed = vec![BTreeSet::new(); self.members.len()];
        for (member, member_block) in failed_direct_reads(outer, read) {
            for other in (0..self.members.len()).filter(|&other| other != member) {
                if !read.contains_key(&(other, member_block)) {
                    needed[other].insert(member_block);
                }
            }
        }
        if needed.iter().all(BTreeSet::is_empty) {
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
        if self.zone_data_blocks.is_none() || !self.info.stores_payload {
            return Ok(());
        }
        let mut writes: MemberWrites = vec![BTreeMap::new(); self.members.len()];
        for (member, member_block) in failed_direct_reads(outer, read) {
            let mut xor = None;
            let mut complete = true;
            for other in (0..self.members.len()).filter(|&other| other != member) {
                match read.get(&(other, member_block)) {
                    Some((Ok(data), _)) => xor_into(&mut xor, data),
                    _ => complete = false,
                }
            }
            if let (true, Some(data)) = (complete, xor) {
                writes[member].insert(member_block, data);
            }
        }
        if writes.iter().all(BTreeMap::is_empty) {
            return Ok(());
        }
        let Ok(checksums) = self.checksum_writes(&writes, read) else { return Ok(()) };
        let submitted = self.submit_to_members(&[], &writes, &[], &checksums)?;
        self.wait_members(submitted, &mut ReadResults::new()).map(drop)
    }

    /// Per member, the member blocks the rows write (data and parity).
    fn rows_member_blocks(&self, rows: &[RowWrite]) -> Vec<BTreeSet<u64>> {
        let mut blocks = vec![BTreeSet::new(); self.members.len()];
        for row in rows {
            for &member in row.written.keys().filter(|&&member| Some(member) != self.failed) {
                blocks[member].insert(row.member_block);
            }
            if row.method != RowMethod::NoParity {
                blocks[row.parity_member].insert(row.member_block);
            }
        }
        blocks
    }

    fn answer_read(&self, sources: &[ReadSource], read: &ReadResults, submitted_ns: u64) -> IoCompletion {
        let mut data = Vec::new();
        let mut completed_ns = submitted_ns;
        let mut lookup = |member: usize, block: u64| -> Result<Vec<u8>, DeviceError> {
            let (result, done_ns) = read.get(&(member, block)).expect("planned read");
            completed_ns = completed_ns.max(*done_ns);
            result.clone()
        };
        let mut assemble = || -> Result<Vec<u8>, DeviceError> {
            for source in sources {
                match *source {
                    ReadSource::Direct { member, member_block } => match lookup(member, member_block) {
                        Ok(block) => data.extend(block),
                        Err(error @ DeviceError::Io { .. }) if self.failed.is_none() => {
                            // Recovered from the rest of the row (read by recover_failed_reads).
                            let mut xor = None;
                            for other in (0..self.members.len()).filter(|&other| other != member) {
                                xor_into(&mut xor, &lookup(other, member_block).map_err(|_| error.clone())?);
                            }
                            data.extend(xor.unwrap_or_default());
                        }
                        Err(error) => return Err(error),
                    },
                    ReadSource::Reconstruct { failed, member_block } => {
                        let mut xor = None;
                        for member in (0..self.members.len()).filter(|&member| member != failed) {
                            xor_into(&mut xor, &lookup(member, member_block)?);
                        }
                        data.extend(xor.unwrap_or_default());
                    }
                }
            }
            Ok(std::mem::take(&mut data))
        };
        let result = assemble();
        IoCompletion { result, submitted_ns, completed_ns }
    }
}

impl<D: BlockDevice> BlockDevice for RaidDevice<D> {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        let submitted_ns = self.now_ns();
        let mut writes = BTreeMap::new();
        let outer = self.classify(batch, submitted_ns, &mut writes);
        let rows = self.plan_rows(&writes);
        let mut reads = vec![BTreeSet::new(); self.members.len()];
        for slot in &outer {
            let OuterSlot::Read(sources) = slot else { continue };
            for source in sources {
                match *source {
                    ReadSource::Direct { member, member_block } => {
                        reads[member].insert(member_block);
                    }
                    ReadSource::Reconstruct { failed, member_block } => {
                        for member in (0..self.members.len()).filter(|&member| member != failed) {
                            reads[member].insert(member_block);
                        }
                    }
                }
            }
        }
        let mut old_data = vec![BTreeSet::new(); self.members.len()];
        self.pre_reads(&rows, &mut old_data);
        let checksum_reads = self.checksum_pre_reads(&self.rows_member_blocks(&rows));
        let writes_in_phase1 = old_data.iter().all(BTreeSet::is_empty) && checksum_reads.iter().all(BTreeSet::is_empty);
        reads.iter_mut().zip(old_data).for_each(|(member_reads, old)| member_reads.extend(old));
        let phase1 = if writes_in_phase1 {
            // No old data needed: writes go out with the reads, one batch per member.
            let member_writes = self.member_writes(&rows, &ReadResults::new())?;
            let checksums = self.checksum_writes(&member_writes, &ReadResults::new())?;
            self.submit_to_members(&reads, &member_writes, &[], &checksums)?
        } else {
            self.submit_to_members(&reads, &[], &checksum_reads, &[])?
        };
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.in_flight.insert(ticket, InFlight { submitted_ns, outer, rows, phase1, writes_in_phase1 });
        Ok(BatchTicket(ticket))
    }

    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        let in_flight = self
            .in_flight
            .remove(&ticket.0)
            .ok_or_else(|| DeviceError::UnknownTicket { device: self.info.name.clone(), ticket: ticket.0 })?;
        let mut read = ReadResults::new();
        let (mut writes_done_ns, mut write_outcome) = self.wait_members(in_flight.phase1, &mut read)?;
        if !in_flight.writes_in_phase1 {
            let planned = self.member_writes(&in_flight.rows, &read).and_then(|member_writes| {
                let checksums = self.checksum_writes(&member_writes, &read)?;
                Ok((member_writes, checksums))
            });
            match planned {
                Ok((member_writes, checksums)) => {
                    let submitted = self.submit_to_members(&[], &member_writes, &[], &checksums)?;
                    (writes_done_ns, write_outcome) = self.wait_members(submitted, &mut read)?;
                }
                Err(error) => write_outcome = Err(error),
            }
        }
        self.recover_failed_reads(&in_flight.outer, &mut read)?;
        let submitted_ns = in_flight.submitted_ns;
        let completions = in_flight
            .outer
            .into_iter()
            .map(|slot| match slot {
                OuterSlot::Done(completion) => completion,
                OuterSlot::Read(sources) => self.answer_read(&sources, &read, submitted_ns),
                OuterSlot::Write => IoCompletion {
                    result: write_outcome.clone().map(|()| Vec::new()),
                    submitted_ns,
                    completed_ns: writes_done_ns.max(submitted_ns),
                },
            })
            .collect();
        Ok(completions)
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        for index in 0..self.members.len() {
            if Some(index) != self.failed {
                if let Err(error) = self.members[index].flush() {
                    self.fail_member_on_error(index, error)?;
                }
            }
        }
        Ok(())
    }

    fn now_ns(&self) -> u64 {
        self.members.iter().map(BlockDevice::now_ns).max().unwrap_or(0)
    }

    fn read_redundant(&mut self, block: u64) -> Result<Option<Vec<u8>>, DeviceError> {
        self.reconstruct_block(block)
    }

    fn repair(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.rewrite_member_block(block, data)
    }

    fn write_intent_region_blocks(&self) -> Option<u64> {
        Some(RaidDevice::write_intent_region_blocks(self))
    }

    fn resync(&mut self, block: u64, block_count: u64) -> Result<(), DeviceError> {
        self.resync_parity(block, block_count)
    }
}

fn xor_into(accumulator: &mut Option<Vec<u8>>, data: &[u8]) {
    match accumulator {
        None => *accumulator = Some(data.to_vec()),
        Some(bytes) => {
            assert_eq!(bytes.len(), data.len(), "XOR of blocks of one size");
            bytes.iter_mut().zip(data).for_each(|(byte, other)| *byte ^= other);
        }
    }
}

/// The physical block holding the checksums of zone `zone`.
fn checksum_block_of_zone(zone: u64, zone_blocks: u64) -> u64 {
    zone * (zone_blocks + 1) + zone_blocks
}

/// The checksum stored in slot `slot` of a checksum block.
fn checksum_slot(checksum_block: &[u8], slot: usize) -> u32 {
    let start = slot * CHECKSUM_SLOT_BYTES;
    u32::from_le_bytes(checksum_block[start..start + CHECKSUM_SLOT_BYTES].try_into().expect("4-byte slot"))
}

/// The member blocks that the batch read directly and that failed with an I/O
/// error: `(member, member block)`, in the batch's order.
fn failed_direct_reads<'a>(outer: &'a [OuterSlot], read: &'a ReadResults) -> impl Iterator<Item = (usize, u64)> + 'a {
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
        .filter(|key| matches!(read.get(key), Some((Err(DeviceError::Io { .. }), _))))
}

fn read_runs(blocks: Option<&BTreeSet<u64>>) -> Vec<IoRequest> {
    let mut runs: Vec<IoRequest> = Vec::new();
    for &block in blocks.into_iter().flatten() {
        match runs.last_mut() {
            Some(run) if run.end_block() == block && run.block_count < u32::MAX => run.block_count += 1,
            _ => runs.push(IoRequest::read(block, 1)),
        }
    }
    runs
}

fn write_runs(blocks: Option<&BTreeMap<u64, Vec<u8>>>) -> Vec<IoRequest> {
    let mut runs: Vec<IoRequest> = Vec::new();
    for (&block, data) in blocks.into_iter().flatten() {
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
    use crate::MemoryDevice;

    const BLOCK: u32 = 512;

    fn array(level: RaidLevel, member_count: usize) -> RaidDevice<MemoryDevice> {
        let members =
            (0..member_count).map(|index| MemoryDevice::new(BLOCK, 64).named(format!("disk{index}"))).collect();
        let config = RaidConfig { level, stripe_unit_bytes: 4 * u64::from(BLOCK), zone_data_blocks: None };
        RaidDevice::new(members, config).unwrap()
    }

    fn data(seed: u8, block_count: usize) -> Vec<u8> {
        (0..block_count * BLOCK as usize).map(|index| (index as u8).wrapping_mul(7) ^ seed).collect()
    }

    fn member_io_counts(stats: &[DeviceStats]) -> Vec<(u64, u64)> {
        stats.iter().map(|stats| (stats.reads.request_count, stats.writes.request_count)).collect()
    }

    #[test]
    fn geometry_and_raid5_rotation() {
        let raid = array(RaidLevel::Raid5, 4);
        assert_eq!(raid.info().block_count, 3 * 64);
        assert_eq!((0..4).map(|stripe| raid.parity_member(stripe)).collect::<Vec<_>>(), vec![3, 2, 1, 0]);
        // Stripe 1: parity on 2, data units on 3, 0, 1.
        assert_eq!(raid.locate(12), Location { stripe: 1, data_index: 0, member: 3, member_block: 4 });
        assert_eq!(raid.locate(23), Location { stripe: 1, data_index: 2, member: 1, member_block: 7 });
        let raid4 = array(RaidLevel::Raid4, 4);
        assert_eq!(raid4.locate(23), Location { stripe: 1, data_index: 2, member: 2, member_block: 7 });
        assert_eq!(raid4.parity_member(1), 3);
    }

    #[test]
    fn a_full_stripe_write_reads_nothing() {
        let mut raid = array(RaidLevel::Raid4, 4);
        raid.write_blocks(12, &data(1, 12)).unwrap();
        let counts = member_io_counts(&raid.take_member_stats());
        assert_eq!(counts, vec![(0, 1); 4], "one write per member, no reads");
        assert!(raid.verify_parity().unwrap().is_empty());
        assert_eq!(raid.read_blocks(12, 12).unwrap(), data(1, 12));
    }

    #[test]
    fn a_small_write_uses_read_modify_write_and_a_wide_one_reconstruct_write() {
        let mut raid = array(RaidLevel::Raid4, 5);
        raid.write_blocks(0, &data(1, 16)).unwrap();
        raid.take_member_stats();
        // One block: RMW reads old data and parity (2 blocks) instead of 3 others.
        raid.write_blocks(1, &data(2, 1)).unwrap();
        let counts = member_io_counts(&raid.take_member_stats());
        assert_eq!(counts, vec![(1, 1), (0, 0), (0, 0), (0, 0), (1, 1)]);
        // Rows 0..4 of data members 0, 1, 2: RCW reads member 3 (4 blocks, one
        // request) instead of 12 old data + 4 parity blocks.
        raid.write_blocks(0, &data(3, 12)).unwrap();
        let counts = member_io_counts(&raid.take_member_stats());
        assert_eq!(counts, vec![(0, 1), (0, 1), (0, 1), (1, 0), (0, 1)]);
        assert!(raid.verify_parity().unwrap().is_empty());
        assert_eq!(raid.read_blocks(0, 16).unwrap(), [data(3, 12), data(1, 16)[12 * 512..].to_vec()].concat());
    }

    #[test]
    fn blocks_of_one_stripe_share_one_parity_update() {
        let mut raid = array(RaidLevel::Raid5, 4);
        let batch = vec![
            IoRequest::write(0, 1, data(1, 1)),
            IoRequest::write(4, 1, data(2, 1)),
            IoRequest::write(1, 1, data(3, 1)),
        ];
        raid.execute(batch).unwrap();
        let stats = raid.take_member_stats();
        // Stripe 0 has parity on member 3; rows 0 and 1 are coalesced into one parity write.
        assert_eq!(stats[3].writes.request_count, 1);
        assert_eq!(stats[3].writes.block_count, 2);
        assert!(raid.verify_parity().unwrap().is_empty());
    }

    #[test]
    fn degraded_reads_writes_and_rebuild() {
        for level in [RaidLevel::Raid4, RaidLevel::Raid5] {
            let mut raid = array(level, 4);
            raid.write_blocks(0, &data(1, 48)).unwrap();
            raid.fail_member(1).unwrap();
            assert!(raid.fail_member(2).is_err(), "a second failure is refused");
            assert_eq!(raid.read_blocks(0, 48).unwrap(), data(1, 48), "{level:?}");
            raid.write_blocks(3, &data(2, 7)).unwrap();
            let mut expected = data(1, 48);
            expected[3 * 512..10 * 512].copy_from_slice(&data(2, 7));
            assert_eq!(raid.read_blocks(0, 48).unwrap(), expected);
            let report = raid.rebuild(MemoryDevice::new(BLOCK, 64)).unwrap();
            assert_eq!(report.member, 1);
            assert_eq!(raid.failed_member(), None);
            assert!(raid.verify_parity().unwrap().is_empty());
            assert_eq!(raid.read_blocks(0, 48).unwrap(), expected);
        }
    }

    #[test]
    fn a_member_read_error_is_recovered_from_the_row() {
        use crate::{Fault, FaultDevice, FaultPlan, FaultRule};
        let members = (0..4)
            .map(|index| {
                let plan = match index {
                    1 => FaultPlan::new(5).with_rule(FaultRule::on_read_block(2, Fault::IoError).once()),
                    _ => FaultPlan::new(5),
                };
                FaultDevice::new(MemoryDevice::new(BLOCK, 64), plan)
            })
            .collect();
        let config = RaidConfig::raid4().with_stripe_unit_bytes(4 * u64::from(BLOCK));
        let mut raid = RaidDevice::new(members, config).unwrap();
        raid.write_blocks(0, &data(4, 12)).unwrap();
        raid.take_member_stats();
        // Logical block 6 is member 1's block 2: its read fails and is rebuilt from the row.
        assert_eq!(raid.read_blocks(4, 4).unwrap(), data(4, 12)[4 * 512..8 * 512].to_vec());
        let counts = member_io_counts(&raid.take_member_stats());
        assert_eq!(counts, vec![(1, 0), (1, 0), (1, 0), (1, 0)]);
        assert_eq!(raid.members().nth(1).unwrap().injected().len(), 1);
    }

    #[test]
    fn trims_write_zeroes_and_keep_parity() {
        let mut raid = array(RaidLevel::Raid5, 3);
        raid.write_blocks(0, &data(9, 16)).unwrap();
        raid.trim_blocks(2, 5).unwrap();
        assert!(raid.verify_parity().unwrap().is_empty());
        assert_eq!(raid.read_blocks(2, 5).unwrap(), vec![0; 5 * 512]);
    }

    #[test]
    fn invalid_configurations_are_refused() {
        let one = vec![MemoryDevice::new(BLOCK, 64)];
        assert!(RaidDevice::new(one, RaidConfig::raid4()).is_err());
        let mixed = vec![MemoryDevice::new(512, 64), MemoryDevice::new(4096, 64)];
        assert!(RaidDevice::new(mixed, RaidConfig::raid4()).is_err());
        let small = vec![MemoryDevice::new(BLOCK, 64), MemoryDevice::new(BLOCK, 64)];
        assert!(RaidDevice::new(small, RaidConfig::raid4()).is_err(), "64 blocks < 1 MiB unit");
        let odd = vec![MemoryDevice::new(BLOCK, 64), MemoryDevice::new(BLOCK, 64)];
        assert!(RaidDevice::new(odd, RaidConfig::raid4().with_stripe_unit_bytes(700)).is_err());
    }
}
