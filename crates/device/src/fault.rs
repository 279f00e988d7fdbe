//! Fault injection: a wrapper that makes chosen requests fail (EIO, ENOSPC) or
//! return silently corrupted data (zeroed, junk, flipped bits), as described by a
//! seeded, deterministic [`FaultPlan`].
//!
//! A plan is a list of rules, each naming an operation (read, write or flush), a
//! trigger (the n-th request of that operation, a named block, or a probability
//! per block) and a fault, and optionally how many times it may fire. Rules are
//! evaluated in order at submission; error faults (`IoError`, `NoSpace`) stop the
//! request before it reaches the device beneath (nothing is written), data faults
//! (`Zeroed`, `Junk`, `FlipBits`) corrupt the affected blocks of a read that
//! otherwise succeeds. Every fault that fires is recorded in
//! [`FaultDevice::injected`], so a test can check that each one was detected.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::batches::{SplicedBatch, WrapperBatches};
use crate::{BatchTicket, BlockDevice, DeviceError, DeviceInfo, IoCompletion, IoOp, IoRequest};

/// The operation a fault rule applies to. Trims are never faulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FaultOp {
    /// Reads.
    Read,
    /// Writes.
    Write,
    /// Flushes.
    Flush,
}

/// What happens when a rule fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fault {
    /// The request fails with [`DeviceError::Io`] (EIO); a write is not performed.
    IoError,
    /// The write or flush fails with [`DeviceError::NoSpace`] (ENOSPC).
    NoSpace,
    /// The read succeeds but the affected blocks read as zeroes.
    Zeroed,
    /// The read succeeds but the affected blocks read as seeded random bytes.
    Junk,
    /// The read succeeds but `bit_count` distinct bits of each affected block are
    /// inverted.
    FlipBits {
        /// Bits inverted per affected block (at least 1).
        bit_count: u32,
    },
}

impl Fault {
    fn is_error(self) -> bool {
        matches!(self, Fault::IoError | Fault::NoSpace)
    }
}

/// When a rule fires.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum FaultTrigger {
    /// The request of the rule's operation with this index, counting from 0 since
    /// the device was wrapped; all its blocks are affected.
    RequestIndex(u64),
    /// Any request of the rule's operation addressing this block; only that block
    /// is affected.
    Block(u64),
    /// Each block of each request of the rule's operation independently, with this
    /// probability.
    Probability(f64),
}

/// One line of a [`FaultPlan`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultRule {
    /// The operation affected.
    pub op: FaultOp,
    /// When the rule fires.
    pub trigger: FaultTrigger,
    /// What it does.
    pub fault: Fault,
    /// How many more times it may fire (`None`: without limit).
    pub remaining: Option<u64>,
}

impl FaultRule {
    /// A rule; panics on combinations that cannot happen (a data fault on a write,
    /// ENOSPC on a read, a block trigger on a flush), which are bugs in a test.
    pub fn new(op: FaultOp, trigger: FaultTrigger, fault: Fault) -> Self {
        match (op, fault) {
            (FaultOp::Read, Fault::NoSpace) => panic!("ENOSPC cannot be injected on a read"),
            (FaultOp::Write | FaultOp::Flush, fault) if !fault.is_error() => {
                panic!("{fault:?} corrupts read data and applies to reads only")
            }
            _ => {}
        }
        assert!(
            !(op == FaultOp::Flush && matches!(trigger, FaultTrigger::Block(_))),
            "a flush addresses no block: use a request index or a probability"
        );
        if let FaultTrigger::Probability(probability) = trigger {
            assert!((0.0..=1.0).contains(&probability), "probability {probability} is not within 0..=1");
        }
        if let Fault::FlipBits { bit_count } = fault {
            assert!(bit_count >= 1, "flipping zero bits is no fault");
        }
        Self { op, trigger, fault, remaining: None }
    }

    /// The `index`-th read (from 0) fails or is corrupted.
    pub fn on_read_index(index: u64, fault: Fault) -> Self {
        Self::new(FaultOp::Read, FaultTrigger::RequestIndex(index), fault)
    }

    /// The `index`-th write (from 0) fails.
    pub fn on_write_index(index: u64, fault: Fault) -> Self {
        Self::new(FaultOp::Write, FaultTrigger::RequestIndex(index), fault)
    }

    /// The `index`-th flush (from 0) fails.
    pub fn on_flush_index(index: u64, fault: Fault) -> Self {
        Self::new(FaultOp::Flush, FaultTrigger::RequestIndex(index), fault)
    }

    /// Every read of `block` fails or is corrupted (see [`FaultRule::once`]).
    pub fn on_read_block(block: u64, fault: Fault) -> Self {
        Self::new(FaultOp::Read, FaultTrigger::Block(block), fault)
    }

    /// Every write to `block` fails (see [`FaultRule::once`]).
    pub fn on_write_block(block: u64, fault: Fault) -> Self {
        Self::new(FaultOp::Write, FaultTrigger::Block(block), fault)
    }

    /// Each block read fails or is corrupted with `probability`.
    pub fn read_probability(probability: f64, fault: Fault) -> Self {
        Self::new(FaultOp::Read, FaultTrigger::Probability(probability), fault)
    }

    /// Each block written fails with `probability`.
    pub fn write_probability(probability: f64, fault: Fault) -> Self {
        Self::new(FaultOp::Write, FaultTrigger::Probability(probability), fault)
    }

    /// The rule fires at most once ("corrupt the next read of block 17").
    pub fn once(self) -> Self {
        self.times(1)
    }

    /// The rule fires at most `count` times.
    pub fn times(mut self, count: u64) -> Self {
        self.remaining = Some(count);
        self
    }

    /// The blocks of `block..end_block` this rule affects for the request with
    /// `index`; draws from `rng` only for probability triggers.
    fn affected_blocks(&self, index: u64, block: u64, end_block: u64, rng: &mut ChaCha8Rng) -> Vec<u64> {
        match self.trigger {
            FaultTrigger::RequestIndex(target) if target == index => (block..end_block).collect(),
            FaultTrigger::RequestIndex(_) => Vec::new(),
            FaultTrigger::Block(target) if (block..end_block).contains(&target) => vec![target],
            FaultTrigger::Block(_) => Vec::new(),
            FaultTrigger::Probability(probability) => {
                (block..end_block).filter(|_| rng.gen_bool(probability)).collect()
            }
        }
    }
}

/// A seeded list of fault rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultPlan {
    /// Seeds probability triggers, junk and bit positions.
    pub seed: u64,
    /// Evaluated in order; the first error fault that fires decides a request.
    pub rules: Vec<FaultRule>,
}

impl FaultPlan {
    /// A plan with no rules.
    pub fn new(seed: u64) -> Self {
        Self { seed, rules: Vec::new() }
    }

    /// The plan with `rule` appended.
    pub fn with_rule(mut self, rule: FaultRule) -> Self {
        self.rules.push(rule);
        self
    }
}

/// A fault that fired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InjectedFault {
    /// The operation faulted.
    pub op: FaultOp,
    /// Index of the request among those of its operation.
    pub request_index: u64,
    /// The block affected (0 for a flush).
    pub block: u64,
    /// The fault.
    pub fault: Fault,
}

/// Data faults to apply to one forwarded read when it completes.
type Corruptions = Vec<(u64, Fault)>;

/// Injects the faults of a [`FaultPlan`] into the requests passing to `D`.
#[derive(Debug)]
pub struct FaultDevice<D> {
    inner: D,
    plan: FaultPlan,
    rng: ChaCha8Rng,
    read_count: u64,
    write_count: u64,
    flush_count: u64,
    injected: Vec<InjectedFault>,
    /// Per outstanding batch: for each request, its first block and the corruptions
    /// to apply to its data.
    batches: WrapperBatches<Vec<(u64, Corruptions)>>,
}

impl<D: BlockDevice> FaultDevice<D> {
    /// Wraps `inner` with `plan`.
    pub fn new(inner: D, plan: FaultPlan) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(plan.seed);
        Self {
            inner,
            plan,
            rng,
            read_count: 0,
            write_count: 0,
            flush_count: 0,
            injected: Vec::new(),
            batches: WrapperBatches::default(),
        }
    }

    /// Appends a rule to the plan in force.
    pub fn add_rule(&mut self, rule: FaultRule) {
        self.plan.rules.push(rule);
    }

    /// Removes every rule (faults already injected stay recorded).
    pub fn clear_rules(&mut self) {
        self.plan.rules.clear();
    }

    /// The plan in force, with the remaining counts of its rules.
    pub fn plan(&self) -> &FaultPlan {
        &self.plan
    }

    /// Every fault injected so far, in order.
    pub fn injected(&self) -> &[InjectedFault] {
        &self.injected
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably (I/O issued directly to it is not faulted).
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// Unwraps the device.
    pub fn into_inner(self) -> D {
        self.inner
    }

    fn next_index(&mut self, op: FaultOp) -> u64 {
        let counter = match op {
            FaultOp::Read => &mut self.read_count,
            FaultOp::Write => &mut self.write_count,
            FaultOp::Flush => &mut self.flush_count,
        };
        *counter += 1;
        *counter - 1
    }

    /// Fires the rules for one request; returns the faults with the blocks they affect.
    fn fire(&mut self, op: FaultOp, block: u64, end_block: u64) -> (u64, Vec<(u64, Fault)>) {
        let index = self.next_index(op);
        let mut fired = Vec::new();
        for rule in self.plan.rules.iter_mut().filter(|rule| rule.op == op && rule.remaining != Some(0)) {
            let blocks = rule.affected_blocks(index, block, end_block, &mut self.rng);
            if blocks.is_empty() {
                continue;
            }
            if let Some(remaining) = rule.remaining.as_mut() {
                *remaining -= 1;
            }
            fired.extend(blocks.into_iter().map(|affected| (affected, rule.fault)));
            if rule.fault.is_error() {
                break;
            }
        }
        for &(affected, fault) in &fired {
            self.injected.push(InjectedFault { op, request_index: index, block: affected, fault });
        }
        (index, fired)
    }

    fn error_for(&self, block: u64, fault: Fault, what: &str) -> DeviceError {
        let device = self.inner.info().name;
        match fault {
            Fault::NoSpace => DeviceError::NoSpace { device },
            _ => DeviceError::Io { device, block, detail: format!("injected {what} error") },
        }
    }

    fn corrupt(&mut self, data: &mut [u8], first_block: u64, corruptions: &[(u64, Fault)]) {
        let block_size = self.inner.info().block_size_bytes as usize;
        for &(block, fault) in corruptions {
            let index = usize::try_from(block - first_block).expect("a block of a request lies within its buffer");
            let start = index * block_size;
            let Some(bytes) = data.get_mut(start..start + block_size) else {
                continue; // metadata-only devices return no payload to corrupt
            };
            match fault {
                Fault::Zeroed => bytes.fill(0),
                Fault::Junk => self.rng.fill(bytes),
                Fault::FlipBits { bit_count } => {
                    let bit_total = block_size * 8;
                    let bit_count = (bit_count as usize).min(bit_total);
                    for bit in rand::seq::index::sample(&mut self.rng, bit_total, bit_count) {
                        bytes[bit / 8] ^= 1 << (bit % 8);
                    }
                }
                Fault::IoError | Fault::NoSpace => unreachable!("error faults never reach the device"),
            }
        }
    }
}

impl<D: BlockDevice> BlockDevice for FaultDevice<D> {
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }

    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        let now_ns = self.inner.now_ns();
        let mut forwarded = Vec::with_capacity(batch.len());
        let mut slots = Vec::with_capacity(batch.len());
        let mut context = Vec::with_capacity(batch.len());
        for request in batch {
            let op = match request.op {
                IoOp::Read => FaultOp::Read,
                IoOp::Write | IoOp::WriteZeroes => FaultOp::Write,
                IoOp::Trim => {
                    slots.push(None);
                    context.push((request.block, Vec::new()));
                    forwarded.push(request);
                    continue;
                }
            };
            let end_block = request.block.saturating_add(u64::from(request.block_count));
            let (_, fired) = self.fire(op, request.block, end_block);
            match fired.iter().find(|(_, fault)| fault.is_error()) {
                Some(&(block, fault)) => {
                    let error = self.error_for(block, fault, if op == FaultOp::Read { "read" } else { "write" });
                    slots.push(Some(IoCompletion { result: Err(error), submitted_ns: now_ns, completed_ns: now_ns }));
                }
                None => {
                    slots.push(None);
                    context.push((request.block, fired));
                    forwarded.push(request);
                }
            }
        }
        let spliced = SplicedBatch::submit(&mut self.inner, forwarded, slots)?;
        Ok(self.batches.insert(spliced, context))
    }

    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        let (spliced, context) = self.batches.take(ticket, &self.inner.info().name)?;
        let forwarded_mask = spliced.forwarded_mask();
        let mut completions = spliced.join(&mut self.inner)?;
        let forwarded = completions.iter_mut().zip(forwarded_mask).filter(|(_, forwarded)| *forwarded);
        for ((completion, _), (first_block, corruptions)) in forwarded.zip(context) {
            if let Ok(data) = completion.result.as_mut() {
                self.corrupt(data, first_block, &corruptions);
            }
        }
        Ok(completions)
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        let (_, fired) = self.fire(FaultOp::Flush, 0, 1);
        if let Some(&(_, fault)) = fired.first() {
            return Err(self.error_for(0, fault, "flush"));
        }
        self.inner.flush()
    }

    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }

    crate::forward_redundancy!(inner);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryDevice;

    fn device_with(plan: FaultPlan) -> FaultDevice<MemoryDevice> {
        let mut memory = MemoryDevice::new(4096, 32);
        let data: Vec<u8> = (0..32 * 4096).map(|index| (index % 253) as u8 + 1).collect();
        memory.write_blocks(0, &data).unwrap();
        FaultDevice::new(memory, plan)
    }

    fn differing_bits(left: &[u8], right: &[u8]) -> u32 {
        left.iter().zip(right).map(|(a, b)| (a ^ b).count_ones()).sum()
    }

    #[test]
    fn corrupts_the_next_read_of_a_named_block_only_once() {
        let plan = FaultPlan::new(7).with_rule(FaultRule::on_read_block(17, Fault::FlipBits { bit_count: 3 }).once());
        let mut device = device_with(plan);
        let clean = device.inner_mut().read_blocks(16, 3).unwrap();
        let first = device.read_blocks(16, 3).unwrap();
        assert_eq!(first[..4096], clean[..4096]);
        assert_eq!(differing_bits(&first[4096..8192], &clean[4096..8192]), 3);
        assert_eq!(first[8192..], clean[8192..]);
        assert_eq!(device.read_blocks(16, 3).unwrap(), clean, "fires once");
        assert_eq!(device.injected().len(), 1);
        assert_eq!(device.injected()[0].block, 17);
    }

    #[test]
    fn zeroed_and_junk_reads_succeed_with_wrong_data() {
        let plan = FaultPlan::new(3)
            .with_rule(FaultRule::on_read_index(0, Fault::Zeroed))
            .with_rule(FaultRule::on_read_index(1, Fault::Junk));
        let mut device = device_with(plan);
        let clean = device.inner_mut().read_blocks(4, 2).unwrap();
        assert_eq!(device.read_blocks(4, 2).unwrap(), vec![0; 8192]);
        let junk = device.read_blocks(4, 2).unwrap();
        assert_ne!(junk, clean);
        assert_ne!(junk, vec![0; 8192]);
        assert_eq!(device.read_blocks(4, 2).unwrap(), clean);
    }

    #[test]
    fn write_errors_do_not_reach_the_device() {
        let plan = FaultPlan::new(3)
            .with_rule(FaultRule::on_write_block(5, Fault::IoError).once())
            .with_rule(FaultRule::on_write_index(2, Fault::NoSpace));
        let mut device = device_with(plan);
        let before = device.inner_mut().read_blocks(5, 1).unwrap();
        let error = device.write_blocks(4, &[9; 8192]).unwrap_err();
        assert!(matches!(error, DeviceError::Io { block: 5, .. }), "{error}");
        assert_eq!(device.read_blocks(5, 1).unwrap(), before, "nothing written");
        device.write_blocks(4, &[9; 8192]).unwrap();
        assert!(matches!(device.write_blocks(0, &[1; 4096]), Err(DeviceError::NoSpace { .. })));
        device.write_blocks(0, &[1; 4096]).unwrap();
    }

    #[test]
    fn probabilistic_faults_are_deterministic_from_the_seed() {
        let run = |seed| {
            let plan = FaultPlan::new(seed).with_rule(FaultRule::read_probability(0.1, Fault::IoError));
            let mut device = device_with(plan);
            let batch: Vec<IoRequest> = (0..32).map(|block| IoRequest::read(block, 1)).collect();
            let completions = device.execute(batch).unwrap();
            completions.iter().map(|completion| completion.result.is_err()).collect::<Vec<bool>>()
        };
        assert_eq!(run(11), run(11));
        assert!(run(11).iter().any(|&failed| failed), "some of 32 reads fail at 10 %");
        assert!(run(11).iter().any(|&failed| !failed));
    }

    #[test]
    #[should_panic(expected = "applies to reads only")]
    fn a_data_fault_on_a_write_is_a_bug_in_the_plan() {
        let _ = FaultRule::on_write_index(0, Fault::Zeroed);
    }
}
