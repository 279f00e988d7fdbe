//! RAID-0: striping without redundancy, as a [`BlockDevice`] over N members.
//!
//! The array's blocks are dealt out to the members round-robin in stripe units
//! of `unit_blocks` blocks: array block `b` lies in unit `u = b / unit_blocks`,
//! on member `u % N`, at member block `(u / N) * unit_blocks + b % unit_blocks`.
//! The units at the same offset on every member form a row; the array holds as
//! many whole rows as its smallest member, and leaves the rest of larger
//! members unused.
//!
//! A member's blocks keep the array's order and consecutive rows are adjacent
//! on a member, so the blocks a contiguous array request addresses on one
//! member are contiguous there too: a request becomes at most one request per
//! member. A batch becomes one batch per member, submitted to every member
//! before any is waited for, so that members work in parallel.
//!
//! There is no redundancy: every block lives on one member only, a member's
//! error is the error of every request that touches it, and losing a member
//! loses the array.

use std::collections::BTreeMap;

use crate::{
    validate_request, BatchTicket, BlockDevice, DeviceError, DeviceInfo, IoCompletion, IoOp, IoRequest, WriteBack,
    WriteBacks,
};

/// How an array is striped: over how many members, in units of how many blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    member_count: u64,
    unit_blocks: u64,
}

/// One member's share of an array request: consecutive member blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    member: usize,
    member_block: u64,
    block_count: u32,
}

impl Layout {
    /// How many of the array blocks below `block` lie on `member`: the member
    /// block of `block` if it lies there, else that of the member's next array
    /// block after it.
    fn blocks_below(self, member: u64, block: u64) -> u64 {
        let (unit, offset) = (block / self.unit_blocks, block % self.unit_blocks);
        let (row, position) = (unit / self.member_count, unit % self.member_count);
        let whole_units = row + u64::from(position > member);
        whole_units * self.unit_blocks + if position == member { offset } else { 0 }
    }

    /// The pieces of the blocks `[block, block + block_count)`: one per member
    /// touched, in member order.
    fn pieces(self, block: u64, block_count: u32) -> Vec<Piece> {
        let end = block + u64::from(block_count);
        (0..self.member_count)
            .filter_map(|member| {
                let member_block = self.blocks_below(member, block);
                let count = self.blocks_below(member, end) - member_block;
                (count > 0).then(|| Piece {
                    member: usize::try_from(member).expect("a member index fits in usize"),
                    member_block,
                    block_count: u32::try_from(count).expect("a piece is no longer than its request"),
                })
            })
            .collect()
    }

    /// The blocks `[block, block + block_count)` cut at unit boundaries, in
    /// array order: each run's member and length in blocks.
    fn runs(self, block: u64, block_count: u32) -> impl Iterator<Item = (usize, usize)> {
        let end = block + u64::from(block_count);
        let mut at = block;
        std::iter::from_fn(move || {
            (at < end).then(|| {
                let unit = at / self.unit_blocks;
                let run_end = end.min((unit + 1) * self.unit_blocks);
                let member = usize::try_from(unit % self.member_count).expect("a member index fits in usize");
                let run_blocks = usize::try_from(run_end - at).expect("a run is no longer than its request");
                at = run_end;
                (member, run_blocks)
            })
        })
    }

    fn member_slots(self) -> usize {
        usize::try_from(self.member_count).expect("a member count fits in usize")
    }

    /// Cuts `data`, the bytes of a write of `block_count` blocks at `block`,
    /// into the shares of its `pieces`, in the pieces' order.
    fn scatter(self, block: u64, block_count: u32, data: Vec<u8>, pieces: &[Piece]) -> Vec<Vec<u8>> {
        if pieces.len() == 1 {
            return vec![data];
        }
        let block_size = data.len() / block_count as usize;
        let mut shares = vec![Vec::new(); self.member_slots()];
        for piece in pieces {
            shares[piece.member].reserve_exact(piece.block_count as usize * block_size);
        }
        let mut rest = data.as_slice();
        for (member, run_blocks) in self.runs(block, block_count) {
            let (run, tail) = rest.split_at(run_blocks * block_size);
            shares[member].extend_from_slice(run);
            rest = tail;
        }
        pieces.iter().map(|piece| std::mem::take(&mut shares[piece.member])).collect()
    }

    /// The bytes of a read of `block_count` blocks at `block` in array order,
    /// from what each member read for it (`shares`, by member, in the pieces'
    /// order); `None` when a member read more or fewer bytes than its piece.
    fn gather(
        self,
        block: u64,
        block_count: u32,
        mut shares: Vec<(usize, Vec<u8>)>,
        block_size: usize,
    ) -> Option<Vec<u8>> {
        let length = block_count as usize * block_size;
        if let [(_, share)] = shares.as_mut_slice() {
            return (share.len() == length).then(|| std::mem::take(share));
        }
        let mut rest: Vec<&[u8]> = vec![&[]; self.member_slots()];
        for (member, share) in &shares {
            rest[*member] = share;
        }
        let mut data = Vec::with_capacity(length);
        for (member, run_blocks) in self.runs(block, block_count) {
            let (run, tail) = rest[member].split_at_checked(run_blocks * block_size)?;
            data.extend_from_slice(run);
            rest[member] = tail;
        }
        rest.iter().all(|tail| tail.is_empty()).then_some(data)
    }
}

/// How one request of a batch is answered.
#[derive(Debug)]
enum Slot {
    /// Answered at submission (invalid request).
    Done(IoCompletion),
    /// Sent to the members: per piece, its member and its index in that
    /// member's batch.
    Split { op: IoOp, block: u64, block_count: u32, pieces: Vec<(usize, usize)> },
}

/// A batch submitted to the array and not yet waited for.
#[derive(Debug)]
struct InFlight {
    /// The batch of each member given any request.
    member_tickets: Vec<(usize, BatchTicket)>,
    slots: Vec<Slot>,
}

/// RAID-0 over `members`, in member order, striped in units of `unit_blocks` blocks.
#[derive(Debug)]
pub struct StripeDevice<D: BlockDevice> {
    members: Vec<D>,
    layout: Layout,
    info: DeviceInfo,
    in_flight: BTreeMap<u64, InFlight>,
    next_ticket: u64,
}

impl<D: BlockDevice> StripeDevice<D> {
    /// An array over `members` (at least one), striped in units of
    /// `unit_blocks` blocks. Every member must have the same block size and
    /// store payload alike; the array holds as many whole rows as the smallest
    /// member, which must hold at least one unit.
    pub fn new(members: Vec<D>, unit_blocks: u64) -> Result<Self, DeviceError> {
        let infos: Vec<DeviceInfo> = members.iter().map(BlockDevice::info).collect();
        let name = format!("raid0[{}]", infos.len());
        let invalid = |detail: String| DeviceError::Invalid { device: name.clone(), detail };
        let Some(first) = infos.first() else {
            return Err(invalid("no members; at least 1 is needed".into()));
        };
        if unit_blocks == 0 {
            return Err(invalid("a stripe unit of 0 blocks".into()));
        }
        if let Some(other) = infos.iter().find(|info| info.block_size_bytes != first.block_size_bytes) {
            return Err(invalid(format!(
                "{} has {}-byte blocks, {} has {}-byte blocks",
                first.name, first.block_size_bytes, other.name, other.block_size_bytes
            )));
        }
        if infos.iter().any(|info| info.stores_payload != first.stores_payload) {
            return Err(invalid("some members store payload and others do not".into()));
        }
        let smallest = infos.iter().min_by_key(|info| info.block_count).expect("at least one member");
        let rows = smallest.block_count / unit_blocks;
        if rows == 0 {
            return Err(invalid(format!(
                "{} has {} blocks, fewer than one stripe unit of {unit_blocks}",
                smallest.name, smallest.block_count
            )));
        }
        let member_count = u64::try_from(infos.len()).expect("a member count fits in u64");
        let block_count = (rows * unit_blocks)
            .checked_mul(member_count)
            .ok_or_else(|| invalid("the array would exceed 2^64 blocks".into()))?;
        let info = DeviceInfo {
            name: name.clone(),
            block_size_bytes: first.block_size_bytes,
            block_count,
            atomic_write_bytes: infos.iter().map(|info| info.atomic_write_bytes).min().expect("at least one member"),
            stores_payload: first.stores_payload,
        };
        let layout = Layout { member_count, unit_blocks };
        Ok(Self { members, layout, info, in_flight: BTreeMap::new(), next_ticket: 0 })
    }

    /// The member devices, in stripe order.
    pub fn members(&self) -> &[D] {
        &self.members
    }

    /// The member devices, mutably (I/O issued directly to them bypasses the array).
    pub fn members_mut(&mut self) -> &mut [D] {
        &mut self.members
    }

    /// The member devices, giving up the array.
    pub fn into_members(self) -> Vec<D> {
        self.members
    }

    /// The stripe unit in blocks.
    pub fn unit_blocks(&self) -> u64 {
        self.layout.unit_blocks
    }

    /// Submits each member's batch that has requests. Should a member refuse
    /// its batch, the batches already submitted are waited for and dropped,
    /// and the refusal fails the whole array batch.
    fn submit_to_members(&mut self, batches: Vec<Vec<IoRequest>>) -> Result<Vec<(usize, BatchTicket)>, DeviceError> {
        let mut tickets = Vec::with_capacity(batches.len());
        for (member, batch) in batches.into_iter().enumerate().filter(|(_, batch)| !batch.is_empty()) {
            match self.members[member].submit(batch) {
                Ok(ticket) => tickets.push((member, ticket)),
                Err(error) => {
                    for (member, ticket) in tickets {
                        let _ = self.members[member].wait(ticket);
                    }
                    return Err(error);
                }
            }
        }
        Ok(tickets)
    }

    /// The completion of a request from those of its pieces: the first error,
    /// else the data read in array order (none for other operations), from
    /// the first submission to the last completion.
    fn answer(&self, slot: Slot, answers: &mut [Vec<Option<IoCompletion>>]) -> IoCompletion {
        let (op, block, block_count, pieces) = match slot {
            Slot::Done(completion) => return completion,
            Slot::Split { op, block, block_count, pieces } => (op, block, block_count, pieces),
        };
        let (mut submitted_ns, mut completed_ns) = (u64::MAX, 0);
        let mut first_error = None;
        let mut shares = Vec::with_capacity(pieces.len());
        for (member, index) in pieces {
            let completion = answers[member]
                .get_mut(index)
                .and_then(Option::take)
                .expect("a member answers every request of its batch");
            submitted_ns = submitted_ns.min(completion.submitted_ns);
            completed_ns = completed_ns.max(completion.completed_ns);
            match completion.result {
                Ok(data) => shares.push((member, data)),
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        let block_size = usize::try_from(self.info.block_size_bytes).expect("a block size fits in memory");
        let result = match first_error {
            Some(error) => Err(error),
            None if op != IoOp::Read || !self.info.stores_payload => Ok(Vec::new()),
            None => self.layout.gather(block, block_count, shares, block_size).ok_or_else(|| DeviceError::Io {
                device: self.info.name.clone(),
                block,
                detail: "a member returned a read of the wrong length".into(),
            }),
        };
        IoCompletion { result, submitted_ns, completed_ns }
    }
}

impl<D: BlockDevice> BlockDevice for StripeDevice<D> {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        let now_ns = self.now_ns();
        let mut member_batches: Vec<Vec<IoRequest>> = self.members.iter().map(|_| Vec::new()).collect();
        let mut slots = Vec::with_capacity(batch.len());
        for request in batch {
            if let Err(error) = validate_request(&self.info, &request) {
                slots.push(Slot::Done(IoCompletion { result: Err(error), submitted_ns: now_ns, completed_ns: now_ns }));
                continue;
            }
            let IoRequest { op, block, block_count, data, fua } = request;
            let pieces = self.layout.pieces(block, block_count);
            let shares = match op {
                IoOp::Write if !data.is_empty() => self.layout.scatter(block, block_count, data, &pieces),
                _ => vec![Vec::new(); pieces.len()],
            };
            let mut placed = Vec::with_capacity(pieces.len());
            for (piece, data) in pieces.into_iter().zip(shares) {
                let member_batch = &mut member_batches[piece.member];
                placed.push((piece.member, member_batch.len()));
                let block_count = piece.block_count;
                member_batch.push(IoRequest { op, block: piece.member_block, block_count, data, fua });
            }
            slots.push(Slot::Split { op, block, block_count, pieces: placed });
        }
        let member_tickets = self.submit_to_members(member_batches)?;
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.in_flight.insert(ticket, InFlight { member_tickets, slots });
        Ok(BatchTicket(ticket))
    }

    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        let in_flight = self
            .in_flight
            .remove(&ticket.0)
            .ok_or_else(|| DeviceError::UnknownTicket { device: self.info.name.clone(), ticket: ticket.0 })?;
        // Every member's batch is waited for, even after one fails, so that none is left pending.
        let mut answers: Vec<Vec<Option<IoCompletion>>> = self.members.iter().map(|_| Vec::new()).collect();
        let mut failure = None;
        for (member, member_ticket) in in_flight.member_tickets {
            match self.members[member].wait(member_ticket) {
                Ok(completions) => answers[member] = completions.into_iter().map(Some).collect(),
                Err(error) => {
                    failure.get_or_insert(error);
                }
            }
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(in_flight.slots.into_iter().map(|slot| self.answer(slot, &mut answers)).collect()),
        }
    }

    /// Flushes every member, even after one fails; the first failure is returned.
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.members.iter_mut().map(BlockDevice::flush).fold(Ok(()), Result::and)
    }

    /// The members' handles together; `None` when any member has none.
    fn write_back_handle(&self) -> Result<Option<Box<dyn WriteBack>>, DeviceError> {
        let handles: Option<Vec<_>> =
            self.members.iter().map(BlockDevice::write_back_handle).collect::<Result<_, _>>()?;
        Ok(handles.map(|handles| Box::new(WriteBacks(handles)) as Box<dyn WriteBack>))
    }

    fn now_ns(&self) -> u64 {
        self.members[0].now_ns()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use proxima_disk::{FlashDevice, FlashParams, Simulation};

    use super::*;
    use crate::{DeviceStats, MemoryDevice, SimulatedDevice, SimulatedOptions, SimulationHandle, StatsDevice};

    const BLOCK: u32 = 512;
    const BLOCK_BYTES: usize = BLOCK as usize;

    fn array(member_count: usize, unit_blocks: u64, rows: u64) -> StripeDevice<MemoryDevice> {
        let members = (0..member_count)
            .map(|index| MemoryDevice::new(BLOCK, unit_blocks * rows).named(format!("disk{index}")))
            .collect();
        StripeDevice::new(members, unit_blocks).unwrap()
    }

    /// `block_count` blocks of 4-byte words, each distinct within one `seed`.
    fn pattern(seed: u8, block_count: u32) -> Vec<u8> {
        (0..block_count * BLOCK / 4).flat_map(|word| (u32::from(seed) << 24 | word).to_le_bytes()).collect()
    }

    fn refusal<D: BlockDevice>(members: Vec<D>, unit_blocks: u64) -> String {
        match StripeDevice::new(members, unit_blocks) {
            Err(DeviceError::Invalid { detail, .. }) => detail,
            other => panic!("expected a refusal, got {:?}", other.map(|stripe| stripe.info())),
        }
    }

    fn metadata_only_flash(handle: &SimulationHandle, name: &str) -> SimulatedDevice {
        let params = FlashParams {
            read_latency_ns: 50_000,
            write_latency_ns: 200_000,
            bandwidth_bytes_per_second: 400_000_000,
            channel_count: 1,
            page_size_bytes: 4096,
            sector_count: 1 << 12,
        };
        let options = SimulatedOptions::named(name).metadata_only();
        SimulatedDevice::flash(handle, FlashDevice::new(params), options).unwrap()
    }

    #[test]
    fn every_block_lies_where_the_mapping_says() {
        let mut stripe = array(3, 2, 4);
        assert_eq!(stripe.info().block_count, 24);
        for block in 0..24u8 {
            stripe.write_blocks(u64::from(block), &[block + 1; BLOCK_BYTES]).unwrap();
        }
        for block in 0..24u8 {
            let unit = usize::from(block / 2);
            let (member, member_block) = (unit % 3, unit / 3 * 2 + usize::from(block % 2));
            let bytes = &stripe.members()[member].contents()[member_block * BLOCK_BYTES..][..BLOCK_BYTES];
            assert!(bytes.iter().all(|&byte| byte == block + 1), "block {block}");
        }
        let expected: Vec<u8> = (1..=24u8).flat_map(|byte| [byte; BLOCK_BYTES]).collect();
        assert_eq!(stripe.read_blocks(0, 24).unwrap(), expected);
    }

    #[test]
    fn a_request_becomes_one_contiguous_piece_per_member_touched() {
        for (member_count, unit_blocks) in [(1, 3), (3, 2), (4, 3), (5, 1)] {
            let layout = Layout { member_count, unit_blocks };
            let capacity = member_count * unit_blocks * 3;
            for block in 0..capacity {
                for end in block + 1..=capacity {
                    let mut expected: Vec<Piece> = Vec::new();
                    for array_block in block..end {
                        let unit = array_block / unit_blocks;
                        let member = usize::try_from(unit % member_count).unwrap();
                        let member_block = unit / member_count * unit_blocks + array_block % unit_blocks;
                        match expected.iter_mut().find(|piece| piece.member == member) {
                            Some(piece) => {
                                assert_eq!(piece.member_block + u64::from(piece.block_count), member_block);
                                piece.block_count += 1;
                            }
                            None => expected.push(Piece { member, member_block, block_count: 1 }),
                        }
                    }
                    expected.sort_by_key(|piece| piece.member);
                    let block_count = u32::try_from(end - block).unwrap();
                    assert_eq!(layout.pieces(block, block_count), expected, "{layout:?} [{block}, {end})");
                }
            }
        }
    }

    #[test]
    fn a_write_across_rows_is_one_request_per_member_and_reads_back() {
        let members = (0..4).map(|_| StatsDevice::new(MemoryDevice::new(BLOCK, 32))).collect();
        let mut stripe = StripeDevice::new(members, 4).unwrap();
        let data = pattern(1, 100);
        stripe.write_blocks(3, &data).unwrap();
        let counts = |stripe: &mut StripeDevice<StatsDevice<MemoryDevice>>| -> Vec<(u64, u64)> {
            let stats = stripe.members_mut().iter_mut().map(StatsDevice::take_stats);
            stats.map(|stats| (stats.reads.request_count, stats.writes.request_count)).collect()
        };
        assert_eq!(counts(&mut stripe), vec![(0, 1); 4]);
        assert_eq!(stripe.read_blocks(3, 100).unwrap(), data);
        assert_eq!(counts(&mut stripe), vec![(1, 0); 4]);
        for (index, chunk) in data.chunks(BLOCK_BYTES).enumerate() {
            assert_eq!(stripe.read_blocks(3 + u64::try_from(index).unwrap(), 1).unwrap(), chunk);
        }
        assert_eq!(stripe.read_blocks(0, 3).unwrap(), vec![0; 3 * BLOCK_BYTES]);
        assert_eq!(stripe.read_blocks(103, 25).unwrap(), vec![0; 25 * BLOCK_BYTES]);

        // Trims and zeroes split as writes do; force unit access goes with every piece.
        counts(&mut stripe);
        let batch = vec![
            IoRequest::trim(5, 20),
            IoRequest::write_zeroes(40, 10),
            IoRequest::write(60, 6, pattern(2, 6)).with_fua(),
        ];
        let completions = stripe.execute(batch).unwrap();
        assert!(completions.iter().all(|completion| completion.result == Ok(Vec::new())));
        assert!(completions.iter().all(|completion| completion.submitted_ns <= completion.completed_ns));
        let stats: Vec<_> = stripe.members_mut().iter_mut().map(StatsDevice::take_stats).collect();
        let total = |count: fn(&DeviceStats) -> u64| stats.iter().map(count).sum::<u64>();
        assert_eq!(total(|stats| stats.trims.request_count), 4);
        assert_eq!(total(|stats| stats.writes.request_count), 3 + 2);
        assert_eq!(total(|stats| stats.fua_write_count), 2);
        let mut expected = [vec![0; 3 * BLOCK_BYTES], data, vec![0; 25 * BLOCK_BYTES]].concat();
        expected[5 * BLOCK_BYTES..25 * BLOCK_BYTES].fill(0);
        expected[40 * BLOCK_BYTES..50 * BLOCK_BYTES].fill(0);
        expected[60 * BLOCK_BYTES..66 * BLOCK_BYTES].copy_from_slice(&pattern(2, 6));
        assert_eq!(stripe.read_blocks(0, 128).unwrap(), expected);
    }

    proptest! {
        /// Whatever is read, written, trimmed or zeroed, the array reads as a
        /// flat device of its capacity does, and refuses what that refuses.
        #[test]
        fn the_array_reads_as_a_flat_device(
            member_count in 1..5usize,
            unit_blocks in 1..6u64,
            rows in 1..5u64,
            spare_blocks in 0..4u64,
            steps in proptest::collection::vec((0..4u8, any::<u64>(), any::<u32>(), any::<u8>()), 1..40),
        ) {
            // The first member's spare blocks, short of a unit, are left unused.
            let spare = spare_blocks % unit_blocks;
            let members = (0..member_count)
                .map(|index| MemoryDevice::new(BLOCK, unit_blocks * rows + if index == 0 { spare } else { 0 }))
                .collect();
            let mut stripe = StripeDevice::new(members, unit_blocks).unwrap();
            let capacity = stripe.info().block_count;
            prop_assert_eq!(capacity, unit_blocks * rows * u64::try_from(member_count).unwrap());
            let mut model = MemoryDevice::new(BLOCK, capacity);
            for (kind, start, length, seed) in steps {
                // Some requests run past the end, to be refused alike.
                let block = start % (capacity + 2);
                let block_count = 1 + length % u32::try_from(capacity).unwrap();
                let request = match kind {
                    0 => IoRequest::read(block, block_count),
                    1 => IoRequest::write(block, block_count, pattern(seed, block_count)),
                    2 => IoRequest::trim(block, block_count),
                    _ => IoRequest::write_zeroes(block, block_count).with_fua(),
                };
                let expected = model.execute(vec![request.clone()]).unwrap().remove(0).result;
                let actual = stripe.execute(vec![request.clone()]).unwrap().remove(0).result;
                match (expected, actual) {
                    (Ok(expected), Ok(actual)) => prop_assert_eq!(expected, actual, "{:?}", request.op),
                    (Err(DeviceError::OutOfRange { .. }), Err(DeviceError::OutOfRange { .. })) => {}
                    (expected, actual) => prop_assert!(false, "{:?}: {:?} against {:?}", request.op, actual, expected),
                }
            }
            let whole = u32::try_from(capacity).unwrap();
            prop_assert_eq!(stripe.read_blocks(0, whole).unwrap(), model.contents().to_vec());
        }
    }

    #[test]
    fn refused_requests_fail_alone_and_reach_no_member() {
        let mut stripe = array(3, 2, 4);
        let completions = stripe
            .execute(vec![
                IoRequest::write(0, 6, pattern(1, 6)),
                IoRequest::write(20, 6, pattern(2, 6)),
                IoRequest::write(8, 2, pattern(3, 1)),
                IoRequest::read(4, 0),
                IoRequest::read(22, 2),
            ])
            .unwrap();
        assert_eq!(completions.len(), 5);
        assert_eq!(completions[0].result, Ok(Vec::new()));
        assert!(matches!(
            &completions[1].result,
            Err(DeviceError::OutOfRange { device, block: 20, end_block: 26, block_count: 24 }) if device == "raid0[3]"
        ));
        assert!(matches!(completions[2].result, Err(DeviceError::Invalid { .. })));
        assert!(matches!(completions[3].result, Err(DeviceError::Invalid { .. })));
        assert_eq!(completions[4].result, Ok(vec![0; 2 * BLOCK_BYTES]));
        assert_eq!(stripe.read_blocks(0, 24).unwrap(), [pattern(1, 6), vec![0; 18 * BLOCK_BYTES]].concat());
        assert!(matches!(stripe.wait(BatchTicket(99)), Err(DeviceError::UnknownTicket { ticket: 99, .. })));
    }

    #[test]
    fn members_without_payload_take_requests_without_data() {
        let handle = SimulationHandle::new(Simulation::new(1));
        let members = vec![metadata_only_flash(&handle, "flash0"), metadata_only_flash(&handle, "flash1")];
        let mut stripe = StripeDevice::new(members, 8).unwrap();
        assert!(!stripe.info().stores_payload);
        stripe.execute(vec![IoRequest::write(4, 20, Vec::new())]).unwrap()[0].result.clone().unwrap();
        assert_eq!(stripe.read_blocks(0, 32).unwrap(), Vec::<u8>::new());
        assert!(stripe.now_ns() > 0);
    }

    #[test]
    fn an_array_keeps_whole_rows_of_its_smallest_member_and_refuses_misfits() {
        let members = vec![MemoryDevice::new(BLOCK, 11), MemoryDevice::new(BLOCK, 9), MemoryDevice::new(BLOCK, 10)];
        let mut stripe = StripeDevice::new(members, 2).unwrap();
        let info = DeviceInfo {
            name: "raid0[3]".into(),
            block_size_bytes: BLOCK,
            block_count: 24,
            atomic_write_bytes: 512,
            stores_payload: true,
        };
        assert_eq!((stripe.info(), stripe.unit_blocks()), (info, 2));
        stripe.flush().unwrap();
        assert_eq!(stripe.into_members().len(), 3);

        assert!(refusal(Vec::<MemoryDevice>::new(), 4).contains("no members"));
        assert!(refusal(vec![MemoryDevice::new(BLOCK, 8)], 0).contains("0 blocks"));
        let mixed = vec![MemoryDevice::new(512, 8), MemoryDevice::new(4096, 8)];
        assert!(refusal(mixed, 1).contains("4096-byte blocks"));
        let small = vec![MemoryDevice::new(BLOCK, 8), MemoryDevice::new(BLOCK, 3).named("small")];
        assert!(refusal(small, 4).contains("small has 3 blocks, fewer than one stripe unit of 4"));
        let handle = SimulationHandle::new(Simulation::new(1));
        let payload_mixed: Vec<Box<dyn BlockDevice>> =
            vec![Box::new(MemoryDevice::new(4096, 64)), Box::new(metadata_only_flash(&handle, "flash"))];
        assert!(refusal(payload_mixed, 8).contains("payload"));
    }
}
