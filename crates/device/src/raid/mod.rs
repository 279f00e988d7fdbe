//! RAID-4 and RAID-5 as a [`BlockDevice`] over N data members and one parity.
//!
//! Every member is cut into stripe units; the same member block on every member
//! forms a *row*, whose parity block is the XOR of its N data blocks. RAID-4
//! keeps parity on the last member, RAID-5 rotates it. Writes keep parity
//! current by the cheapest method per stripe; reads of a failed member, or of a
//! block that fails to read or to match its zone checksum, are reconstructed
//! from the rest of the row.
//!
//! A batch from above becomes one batch per member, submitted to every member,
//! then waited for on every member, so members work in parallel. When a
//! partial-stripe write needs old data, the batch runs in two phases (reads,
//! then writes), each one batch per member. With members that store no payload
//! (metadata-only simulation) the same I/O is issued without data: parity
//! arithmetic is skipped, reads return nothing.
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | [`RaidDevice`], its configuration, a batch's life: classifying requests, the two phases, answering reads |
//! | `geometry.rs` | pure: stripe, data member and parity member of a block |
//! | `plan.rs` | pure: the member blocks a batch reads and writes, the parity method per row, the parity arithmetic |
//! | `zone_checksums.rs` | zone checksums: physical placement, checksum blocks, verification of what is read |
//! | `member_io.rs` | one coalesced batch per member, physical mapping, waiting and collecting what was read |
//! | `repair.rs` | rebuild, parity verification, reconstructing and rewriting damaged blocks |
//! | `write_intent.rs` | write-intent regions and parity resync after a crash |

mod block_set;
mod geometry;
mod member_io;
mod plan;
mod repair;
mod write_intent;
mod zone_checksums;

use std::collections::BTreeMap;

use self::block_set::{BlockSet, BlockWrites};

use serde::{Deserialize, Serialize};

use self::geometry::Geometry;
use self::member_io::{MemberBatches, ReadResults};
use self::plan::{xor_all, Planner, ReadSource, RowWrite};
use self::zone_checksums::{PhysicalBlock, Zones, CHECKSUM_SLOT_BYTES};
use crate::stats::{DeviceStats, StatsDevice};
use crate::{validate_request, BatchTicket, BlockDevice, DeviceError, DeviceInfo, IoCompletion, IoOp, IoRequest};

pub use self::write_intent::WRITE_INTENT_REGION_BYTES;
pub use self::zone_checksums::{zone_block_checksum, NETAPP_ZONE_DATA_BLOCKS};

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

/// A batch submitted to the array and not yet waited for.
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

/// RAID-4/5 over `members` (data members first, in order, then parity for RAID-4).
#[derive(Debug)]
pub struct RaidDevice<D> {
    members: Vec<StatsDevice<D>>,
    geometry: Geometry,
    /// Zone checksums, if configured.
    zones: Option<Zones>,
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
        let checksum_slots = u64::from(block_size_bytes) / CHECKSUM_SLOT_BYTES as u64;
        if let Some(zone_blocks) = zone_data_blocks {
            if zone_blocks == 0 || zone_blocks > checksum_slots {
                return Err(invalid(format!(
                    "{zone_blocks} data blocks per zone: a {block_size_bytes}-byte checksum block holds 1 to \
                     {checksum_slots}"
                )));
            }
        }
        let physical_blocks = infos.iter().map(|info| info.block_count).min().expect("members");
        let usable_blocks = match zone_data_blocks {
            Some(zone_blocks) => Zones::usable_blocks(zone_blocks, physical_blocks),
            None => physical_blocks,
        };
        let member_blocks = usable_blocks / unit_blocks * unit_blocks;
        if member_blocks == 0 {
            return Err(invalid(format!("members are smaller than one {unit_bytes}-byte stripe unit")));
        }
        let geometry = Geometry::new(config.level, infos.len(), unit_blocks);
        let data_member_count = u64::try_from(geometry.data_member_count()).expect("a member count fits in u64");
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
            geometry,
            zones: zone_data_blocks.map(|zone_blocks| Zones::new(zone_blocks, member_blocks)),
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

    fn block_size(&self) -> usize {
        usize::try_from(self.info.block_size_bytes).expect("a block size fits in memory")
    }

    /// The planner of this array as it stands (which member has failed).
    fn planner(&self) -> Planner {
        Planner {
            geometry: self.geometry,
            failed: self.failed,
            stores_payload: self.info.stores_payload,
            block_size_bytes: self.block_size(),
        }
    }

    /// Where member block `member_block` lies on the member.
    fn physical_block(&self, member_block: u64) -> u64 {
        self.zones.map_or(member_block, |zones| zones.physical_block(member_block))
    }

    /// What physical block `physical` of a member holds: a member block, or the
    /// checksum block of a zone.
    fn physical_content(&self, physical: u64) -> PhysicalBlock {
        self.zones.map_or(PhysicalBlock::Data { member_block: physical }, |zones| zones.physical_content(physical))
    }

    /// How many member blocks lie one after another from physical block
    /// `physical` (a member block) up to `end` or the next checksum block.
    fn member_blocks_from(&self, physical: u64, end: u64) -> u64 {
        self.zones.map_or(end, |zones| end.min(zones.next_checksum_block(physical))) - physical
    }

    /// Classifies the outer requests: reads to sources, writes into `writes`.
    fn classify(&self, batch: Vec<IoRequest>, now_ns: u64, writes: &mut BlockWrites) -> Vec<OuterSlot> {
        let block_size = self.block_size();
        let planner = self.planner();
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
                IoOp::Read => outer.push(OuterSlot::Read(blocks.map(|block| planner.read_source(block)).collect())),
                IoOp::Write | IoOp::WriteZeroes | IoOp::Trim => {
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

    fn answer_read(&self, sources: &[ReadSource], read: &ReadResults, submitted_ns: u64) -> IoCompletion {
        let block_size = self.block_size();
        let mut data = Vec::new();
        let mut completed_ns = submitted_ns;
        let mut lookup = |member: usize, block: u64| -> Result<&[u8], DeviceError> {
            let read = read.get(member, block, block_size).expect("planned read");
            completed_ns = completed_ns.max(read.completed_ns);
            read.data.map_err(Clone::clone)
        };
        let mut assemble = || -> Result<Vec<u8>, DeviceError> {
            for source in sources {
                match *source {
                    ReadSource::Direct { member, member_block } => match lookup(member, member_block) {
                        Ok(block) => data.extend_from_slice(block),
                        Err(error @ DeviceError::Io { .. }) if self.failed.is_none() => {
                            // Recovered from the rest of the row (read by recover_failed_reads).
                            let others = (0..self.members.len())
                                .filter(|&other| other != member)
                                .map(|other| lookup(other, member_block).map_err(|_| error.clone()))
                                .collect::<Result<Vec<_>, _>>()?;
                            data.extend(xor_all(&others).unwrap_or_default());
                        }
                        Err(error) => return Err(error),
                    },
                    ReadSource::Reconstruct { failed, member_block } => {
                        let others = (0..self.members.len())
                            .filter(|&member| member != failed)
                            .map(|member| lookup(member, member_block))
                            .collect::<Result<Vec<_>, _>>()?;
                        data.extend(xor_all(&others).unwrap_or_default());
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
        let mut writes = BlockWrites::new();
        let outer = self.classify(batch, submitted_ns, &mut writes);
        let planner = self.planner();
        let rows = planner.plan_rows(&writes);
        let mut reads = vec![BlockSet::new(); self.members.len()];
        for slot in &outer {
            if let OuterSlot::Read(sources) = slot {
                planner.add_reads(sources, &mut reads);
            }
        }
        let old_data = planner.pre_reads(&rows);
        let checksum_reads = self.checksum_pre_reads(&planner.rows_member_blocks(&rows));
        let writes_in_phase1 = old_data.iter().all(BlockSet::is_empty) && checksum_reads.iter().all(BlockSet::is_empty);
        reads.iter_mut().zip(old_data).for_each(|(member_reads, old)| member_reads.extend(&old));
        let phase1 = if writes_in_phase1 {
            // No old data needed: writes go out with the reads, one batch per member.
            let member_writes = planner.member_writes(&rows, &ReadResults::new())?;
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
            let planned = self.planner().member_writes(&in_flight.rows, &read).and_then(|member_writes| {
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

    /// The members' handles together (a failed member's left out); `None`
    /// when any working member has none.
    fn write_back_handle(&self) -> Result<Option<Box<dyn crate::WriteBack>>, DeviceError> {
        let mut handles = Vec::with_capacity(self.members.len());
        for index in (0..self.members.len()).filter(|&index| Some(index) != self.failed) {
            match self.members[index].write_back_handle()? {
                Some(handle) => handles.push(handle),
                None => return Ok(None),
            }
        }
        Ok(Some(Box::new(crate::WriteBacks(handles))))
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
        (0..=u8::MAX).cycle().take(block_count * BLOCK as usize).map(|byte| byte.wrapping_mul(7) ^ seed).collect()
    }

    fn member_io_counts(stats: &[DeviceStats]) -> Vec<(u64, u64)> {
        stats.iter().map(|stats| (stats.reads.request_count, stats.writes.request_count)).collect()
    }

    #[test]
    fn capacity_is_the_data_members_share_and_rotation_follows_the_level() {
        let raid = array(RaidLevel::Raid5, 4);
        assert_eq!(raid.info().block_count, 3 * 64);
        assert_eq!(raid.geometry, Geometry::new(RaidLevel::Raid5, 4, 4));
        let raid4 = array(RaidLevel::Raid4, 4);
        assert_eq!(raid4.geometry.parity_member(1), 3);
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
    fn a_resync_over_an_unreadable_block_rebuilds_it_instead_of_failing() {
        use crate::{Fault, FaultDevice, FaultPlan, FaultRule};
        // Member 2's block 1 fails two reads (the stripe's and its row's) and
        // member 3's parity block 2 one, in different rows of one stripe.
        let members = (0..4)
            .map(|index| {
                let plan = match index {
                    2 => FaultPlan::new(5).with_rule(FaultRule::on_read_block(1, Fault::IoError).times(2)),
                    3 => FaultPlan::new(5).with_rule(FaultRule::on_read_block(2, Fault::IoError).once()),
                    _ => FaultPlan::new(5),
                };
                FaultDevice::new(MemoryDevice::new(BLOCK, 64), plan)
            })
            .collect();
        let config = RaidConfig::raid4().with_stripe_unit_bytes(4 * u64::from(BLOCK));
        let mut raid = RaidDevice::new(members, config).unwrap();
        raid.write_blocks(0, &data(40, 12)).unwrap();
        raid.resync_parity(0, 12).unwrap();
        assert_eq!(raid.members().nth(2).unwrap().injected().len(), 2);
        assert_eq!(raid.members().nth(3).unwrap().injected().len(), 1);
        // The unreadable data block was rebuilt from its row, the unreadable
        // parity recomputed: every row is consistent and the data is intact.
        assert_eq!(raid.verify_parity().unwrap(), Vec::new());
        assert_eq!(raid.read_blocks(0, 12).unwrap(), data(40, 12));
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
