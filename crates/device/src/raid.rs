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
}

/// The default stripe unit: 1 MiB.
pub const DEFAULT_STRIPE_UNIT_BYTES: u64 = 1 << 20;

impl RaidConfig {
    /// RAID-4 with a 1 MiB stripe unit.
    pub fn raid4() -> Self {
        Self { level: RaidLevel::Raid4, stripe_unit_bytes: DEFAULT_STRIPE_UNIT_BYTES }
    }

    /// RAID-5 with a 1 MiB stripe unit.
    pub fn raid5() -> Self {
        Self { level: RaidLevel::Raid5, stripe_unit_bytes: DEFAULT_STRIPE_UNIT_BYTES }
    }

    /// The same configuration with another stripe unit.
    pub fn with_stripe_unit_bytes(mut self, stripe_unit_bytes: u64) -> Self {
        self.stripe_unit_bytes = stripe_unit_bytes;
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

/// Data and completion time of member blocks read in a batch.
type ReadResults = BTreeMap<(usize, u64), (Result<Vec<u8>, DeviceError>, u64)>;

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
        let member_blocks =
            infos.iter().map(|info| info.block_count).min().expect("members") / unit_blocks * unit_blocks;
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
        Ok(Self { members, config, unit_blocks, info, failed: None, in_flight: BTreeMap::new(), next_ticket: 0 })
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
        let member_blocks = self.info.block_count / (self.members.len() as u64 - 1);
        let replacement_info = replacement.info();
        if replacement_info.block_size_bytes != self.info.block_size_bytes
            || replacement_info.block_count < member_blocks
        {
            return Err(
                self.invalid(format!("replacement {} is smaller or differently blocked", replacement_info.name))
            );
        }
        let started_ns = self.now_ns();
        self.members[failed] = StatsDevice::new(replacement);
        let chunk_blocks = self.unit_blocks.min(u64::from(u32::MAX));
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
        let survivors: Vec<usize> = (0..self.members.len()).filter(|&member| member != failed).collect();
        let tickets = survivors
            .iter()
            .map(|&member| self.members[member].submit(vec![IoRequest::read(block, block_count)]))
            .collect::<Result<Vec<_>, _>>()?;
        let mut xor: Option<Vec<u8>> = None;
        for (&member, ticket) in survivors.iter().zip(tickets) {
            let data = single_result(self.members[member].wait(ticket)?)?;
            xor_into(&mut xor, &data);
        }
        let data = if self.info.stores_payload { xor.unwrap_or_default() } else { Vec::new() };
        let completions = self.members[failed].execute(vec![IoRequest::write(block, block_count, data)])?;
        single_result(completions).map(drop)
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
        let member_blocks = self.info.block_count / (self.members.len() as u64 - 1);
        let block_size = self.info.block_size_bytes as usize;
        let mut mismatches = Vec::new();
        for stripe in 0..member_blocks / self.unit_blocks {
            let first = stripe * self.unit_blocks;
            let mut xor: Option<Vec<u8>> = None;
            for member in 0..self.members.len() {
                let data = self.members[member].read_blocks(first, self.unit_blocks as u32)?;
                xor_into(&mut xor, &data);
            }
            let xor = xor.expect("at least two members");
            for (offset, row) in xor.chunks(block_size).enumerate() {
                if row.iter().any(|&byte| byte != 0) {
                    let parity_member = self.parity_member(stripe);
                    mismatches.push(ParityMismatch { member_block: first + offset as u64, parity_member });
                }
            }
        }
        Ok(mismatches)
    }

    fn invalid(&self, detail: String) -> DeviceError {
        DeviceError::Invalid { device: self.info.name.clone(), detail }
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

    /// Submits one batch per member: the blocks to read, then those to write, each
    /// coalesced into runs of adjacent blocks in ascending order.
    fn submit_to_members(
        &mut self,
        reads: &[BTreeSet<u64>],
        writes: &[BTreeMap<u64, Vec<u8>>],
    ) -> Result<MemberBatches, DeviceError> {
        let mut submitted = Vec::with_capacity(self.members.len());
        for member in 0..self.members.len() {
            let mut requests = read_runs(reads.get(member));
            requests.extend(write_runs(writes.get(member)));
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
            for (run, completion) in runs.into_iter().zip(completions) {
                if !run.is_read {
                    writes_done_ns = writes_done_ns.max(completion.completed_ns);
                    if let (Err(error), Ok(())) = (completion.result, &write_outcome) {
                        write_outcome = Err(error);
                    }
                    continue;
                }
                for offset in 0..u64::from(run.block_count) {
                    let result = completion.result.as_ref().map_err(Clone::clone).map(|data| {
                        let start = offset as usize * block_size;
                        data.get(start..start + block_size).map(<[u8]>::to_vec).unwrap_or_default()
                    });
                    read.insert((member, run.block + offset), (result, completion.completed_ns));
                }
            }
        }
        Ok((writes_done_ns, write_outcome))
    }

    /// With every member present, a member block that failed to read with an I/O
    /// error is reconstructed from its row: reads the rest of the row from the
    /// other members (one more batch per member).
    fn recover_failed_reads(&mut self, outer: &[OuterSlot], read: &mut ReadResults) -> Result<(), DeviceError> {
        if self.failed.is_some() {
            return Ok(());
        }
        let mut needed = vec![BTreeSet::new(); self.members.len()];
        for slot in outer {
            let OuterSlot::Read(sources) = slot else { continue };
            for source in sources {
                let ReadSource::Direct { member, member_block } = *source else { continue };
                if !matches!(read.get(&(member, member_block)), Some((Err(DeviceError::Io { .. }), _))) {
                    continue;
                }
                for other in (0..self.members.len()).filter(|&other| other != member) {
                    if !read.contains_key(&(other, member_block)) {
                        needed[other].insert(member_block);
                    }
                }
            }
        }
        if needed.iter().all(BTreeSet::is_empty) {
            return Ok(());
        }
        let submitted = self.submit_to_members(&needed, &[])?;
        self.wait_members(submitted, read).map(drop)
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
        let writes_in_phase1 = old_data.iter().all(BTreeSet::is_empty);
        reads.iter_mut().zip(old_data).for_each(|(member_reads, old)| member_reads.extend(old));
        let phase1 = if writes_in_phase1 {
            // No old data needed: writes go out with the reads, one batch per member.
            let member_writes = self.member_writes(&rows, &ReadResults::new())?;
            self.submit_to_members(&reads, &member_writes)?
        } else {
            self.submit_to_members(&reads, &[])?
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
            match self.member_writes(&in_flight.rows, &read) {
                Ok(member_writes) => {
                    let submitted = self.submit_to_members(&[], &member_writes)?;
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
        let failed = self.failed;
        for (index, member) in self.members.iter_mut().enumerate() {
            if Some(index) != failed {
                member.flush()?;
            }
        }
        Ok(())
    }

    fn now_ns(&self) -> u64 {
        self.members.iter().map(BlockDevice::now_ns).max().unwrap_or(0)
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

fn single_result(mut completions: Vec<IoCompletion>) -> Result<Vec<u8>, DeviceError> {
    assert_eq!(completions.len(), 1, "one request, one completion");
    completions.pop().expect("one completion").result
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
        let config = RaidConfig { level, stripe_unit_bytes: 4 * u64::from(BLOCK) };
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
        let config = RaidConfig { level: RaidLevel::Raid4, stripe_unit_bytes: 4 * u64::from(BLOCK) };
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
