//! The fault matrix, in the spirit of CORDS (seed 002, "Redundancy Does Not
//! Imply Fault Tolerance"): a fixed workload, then, for every block the engine
//! reads or writes — superblock slots, CP roots, map and table nodes, bitmap and
//! checksum pages, log blocks, staged data, data blocks, parity, device labels —
//! each fault once:
//!
//! - at rest, after the workload and a crash: the block zeroed, filled with
//!   junk, or one bit flipped;
//! - an I/O error on its first read while the volume recovers and is read back;
//! - an I/O error, or ENOSPC, on its first write during the workload.
//!
//! Each cell records what happened: `refused` (an error reached the caller, or
//! fsck reported the damage), `repaired` (everything read back right, and the
//! damage was noticed and mended), `unaffected` (everything read back right and
//! nothing needed mending: the block was no longer used), or a failure:
//! `wrong data` (a read returned a value the block never had), `lost write` (a
//! read returned an older value than the last acknowledged one). The test
//! fails on any failure cell, and on RAID on any single-block fault that is
//! not repaired or unaffected. The matrix it prints is in docs/integrity.md.
//!
//! Devices are stacked as the service stacks them: each memory device is
//! labelled ([`LabeledDevice`]), several data devices form a RAID-5 array.

use crate::common;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::rc::Rc;

use common::{pattern, BLOCK};
use proxima_device::{
    BatchTicket, BlockDevice, DeviceError, DeviceInfo, DeviceLabel, Fault, FaultDevice, FaultPlan, FaultRule,
    IoCompletion, IoOp, IoRequest, LabelRole, LabeledDevice, MemoryDevice, RaidConfig, RaidDevice,
};
use proxima_engine::{Overcommit, Volume, VolumeOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const VOLUME_ID: u64 = 0xfa17;
/// Large enough that the workload's last log survives to the crash (a small
/// flash commits after every few records).
const FLASH_BLOCKS: u64 = 1024;
const SINGLE_DATA_BLOCKS: u64 = 1024;
const RAID_MEMBERS: u32 = 5;
const RAID_MEMBER_BLOCKS: u64 = 256;
const EXTENT_A_BLOCKS: u64 = 64;
const EXTENT_B_BLOCKS: u64 = 256;

/// Which physical device of a stack: a data device (member index) or flash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Physical {
    Data(u32),
    Flash,
}

impl fmt::Display for Physical {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Physical::Data(member) => write!(formatter, "data{member}"),
            Physical::Flash => write!(formatter, "flash"),
        }
    }
}

/// Every (device, block, operation) a run touched.
type Touched = Rc<RefCell<BTreeSet<(Physical, u64, bool)>>>;

/// Records the blocks read (`false`) and written (`true`) beneath the label.
#[derive(Debug)]
struct Touch<D> {
    inner: D,
    device: Physical,
    touched: Touched,
}

impl<D: BlockDevice> BlockDevice for Touch<D> {
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }
    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        for request in &batch {
            if request.op != IoOp::Trim {
                for block in request.block..request.end_block() {
                    self.touched.borrow_mut().insert((self.device, block, request.op == IoOp::Write));
                }
            }
        }
        self.inner.submit(batch)
    }
    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        self.inner.wait(ticket)
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.inner.flush()
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
}

type Stacked = LabeledDevice<FaultDevice<Touch<MemoryDevice>>>;

/// The physical devices of a volume, as memory.
struct Devices {
    data: Vec<MemoryDevice>,
    flash: MemoryDevice,
}

fn copy(device: &MemoryDevice) -> MemoryDevice {
    common::copy_of(device)
}

impl Devices {
    fn blank(data_count: u32, data_blocks: u64) -> Self {
        Self {
            data: (0..data_count).map(|_| MemoryDevice::new(4096, data_blocks + 1)).collect(),
            flash: MemoryDevice::new(4096, FLASH_BLOCKS + 1),
        }
    }

    fn device_mut(&mut self, which: Physical) -> &mut MemoryDevice {
        match which {
            Physical::Data(member) => &mut self.data[member as usize],
            Physical::Flash => &mut self.flash,
        }
    }
}

fn label(which: Physical, member_count: u32) -> DeviceLabel {
    match which {
        Physical::Data(member) => DeviceLabel {
            volume_id: VOLUME_ID,
            role: LabelRole::Data,
            member_index: member,
            member_count,
            generation: 1,
        },
        Physical::Flash => DeviceLabel {
            volume_id: VOLUME_ID,
            role: LabelRole::Flash,
            member_index: 0,
            member_count: 1,
            generation: 1,
        },
    }
}

/// How the data devices are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Single,
    Raid5,
}

impl Shape {
    fn blank(self) -> Devices {
        match self {
            Shape::Single => Devices::blank(1, SINGLE_DATA_BLOCKS),
            Shape::Raid5 => Devices::blank(RAID_MEMBERS, RAID_MEMBER_BLOCKS),
        }
    }

    fn member_count(self) -> u32 {
        match self {
            Shape::Single => 1,
            Shape::Raid5 => RAID_MEMBERS,
        }
    }
}

/// A fault armed on one physical device.
#[derive(Debug, Clone)]
struct Armed {
    device: Physical,
    rule: FaultRule,
}

/// Stacks `devices` (labels written when `create`), with `armed` injected.
fn stack(
    shape: Shape,
    devices: Devices,
    armed: Option<&Armed>,
    touched: &Touched,
    create: bool,
) -> Result<(Box<dyn DataDevice>, Stacked), String> {
    let wrap = |device: MemoryDevice, which: Physical| -> Result<Stacked, String> {
        let mut plan = FaultPlan::new(7);
        if let Some(armed) = armed.filter(|armed| armed.device == which) {
            plan = plan.with_rule(armed.rule.clone());
        }
        let touch = Touch { inner: device, device: which, touched: touched.clone() };
        let faulty = FaultDevice::new(touch, plan);
        let expected = label(which, shape.member_count());
        let labelled =
            if create { LabeledDevice::create(faulty, expected) } else { LabeledDevice::open(faulty, expected) };
        labelled.map_err(|error| error.to_string())
    };
    let flash = wrap(devices.flash, Physical::Flash)?;
    let mut members = Vec::new();
    for (index, device) in devices.data.into_iter().enumerate() {
        members.push(wrap(device, Physical::Data(u32::try_from(index).expect("a few members")))?);
    }
    let data: Box<dyn DataDevice> = match shape {
        Shape::Single => Box::new(members.pop().expect("one data device")),
        Shape::Raid5 => Box::new(
            RaidDevice::new(members, RaidConfig::raid5().with_stripe_unit_bytes(16 * 1024))
                .map_err(|error| error.to_string())?,
        ),
    };
    Ok((data, flash))
}

/// A data device that can give back its physical memory devices, and check
/// its redundancy.
trait DataDevice: BlockDevice {
    fn into_memory(self: Box<Self>) -> Vec<MemoryDevice>;
    fn redundancy_consistent(&mut self) -> bool;
}

fn memory_of(device: Stacked) -> MemoryDevice {
    device.into_inner().into_inner().inner
}

impl DataDevice for Stacked {
    fn into_memory(self: Box<Self>) -> Vec<MemoryDevice> {
        vec![memory_of(*self)]
    }
    fn redundancy_consistent(&mut self) -> bool {
        true
    }
}

impl DataDevice for RaidDevice<Stacked> {
    fn into_memory(self: Box<Self>) -> Vec<MemoryDevice> {
        (*self).into_members().into_iter().map(memory_of).collect()
    }
    fn redundancy_consistent(&mut self) -> bool {
        self.verify_parity().is_ok_and(|mismatches| mismatches.is_empty())
    }
}

fn options() -> VolumeOptions {
    VolumeOptions { scan_pages_per_checkpoint: 1, ..VolumeOptions::default() }
}

/// What the workload left: every extent's values, for the blocks written
/// since the last durable point also each value they held since.
#[derive(Debug, Clone, Default)]
struct Model {
    current: BTreeMap<&'static str, Vec<u8>>,
    /// Values a block may hold after a crash (empty: only its current value).
    pending: BTreeMap<(&'static str, u64), HashSet<u32>>,
    /// Every value a block ever held.
    ever: BTreeMap<(&'static str, u64), HashSet<u32>>,
    snapshot: Option<BTreeMap<&'static str, Vec<u8>>>,
    /// The error that stopped the workload, if one did.
    workload_error: Option<String>,
}

impl Model {
    fn durable(&mut self) {
        self.pending.clear();
    }

    fn block_crc(&self, extent: &'static str, block: u64) -> u32 {
        let bytes = &self.current[extent][(block as usize) * BLOCK..(block as usize + 1) * BLOCK];
        crc32c::crc32c(bytes)
    }

    fn write(&mut self, extent: &'static str, first: u64, bytes: &[u8]) {
        let count = (bytes.len() / BLOCK) as u64;
        for block in first..first + count {
            let old = self.block_crc(extent, block);
            self.pending.entry((extent, block)).or_default().insert(old);
        }
        let start = (first as usize) * BLOCK;
        self.current.get_mut(extent).expect("extent")[start..start + bytes.len()].copy_from_slice(bytes);
        for block in first..first + count {
            let new = self.block_crc(extent, block);
            self.pending.entry((extent, block)).or_default().insert(new);
            self.ever.entry((extent, block)).or_default().insert(new);
        }
    }

    /// Values block `block` of `extent` may hold after a crash.
    fn allowed(&self, extent: &'static str, block: u64) -> HashSet<u32> {
        self.pending.get(&(extent, block)).cloned().unwrap_or_else(|| HashSet::from([self.block_crc(extent, block)]))
    }
}

/// Runs the fixed workload until an operation fails (a fault fired).
fn workload<D: BlockDevice, F: BlockDevice>(volume: &mut Volume<D, F>, model: &mut Model) -> Result<(), String> {
    let error = |error: proxima_engine::EngineError| error.to_string();
    let mut rng = ChaCha8Rng::seed_from_u64(2589);
    for (name, blocks) in [("a", EXTENT_A_BLOCKS), ("b", EXTENT_B_BLOCKS)] {
        volume.create_extent_with(name, blocks * BLOCK as u64, Overcommit::Allow).map_err(error)?;
        model.current.insert(name, vec![0; blocks as usize * BLOCK]);
        for block in 0..blocks {
            model.ever.entry((name, block)).or_default().insert(crc32c::crc32c(&[0; BLOCK]));
        }
        model.durable();
    }
    let (a, b) = (volume.extent_id("a").map_err(error)?, volume.extent_id("b").map_err(error)?);
    let mut tag = 0u64;
    let mut small_write = |volume: &mut Volume<D, F>, model: &mut Model, name, id, extent_blocks| {
        tag += 1;
        let block = rng.gen_range(0..extent_blocks);
        let bytes = pattern(tag, BLOCK);
        model.write(name, block, &bytes);
        volume.write(id, block * BLOCK as u64, &bytes, false).map_err(error)
    };
    for _ in 0..24 {
        small_write(volume, model, "a", a, EXTENT_A_BLOCKS)?;
    }
    volume.flush().map_err(error)?;
    model.durable();
    let large = pattern(900, 192 * BLOCK);
    model.write("b", 0, &large);
    volume.write(b, 0, &large, true).map_err(error)?;
    model.durable();
    volume.create_snapshot("s1").map_err(error)?;
    model.snapshot = Some(model.current.clone());
    model.durable();
    for _ in 0..8 {
        small_write(volume, model, "a", a, EXTENT_A_BLOCKS)?;
    }
    volume.flush().map_err(error)?;
    model.durable();
    volume.destage().map_err(error)?;
    for _ in 0..8 {
        small_write(volume, model, "b", b, EXTENT_B_BLOCKS)?;
    }
    volume.flush().map_err(error)?;
    model.durable();
    model.write("b", 100, &vec![0; 20 * BLOCK]);
    volume.trim(b, 100 * BLOCK as u64, 20 * BLOCK as u64, true).map_err(error)?;
    model.durable();
    for _ in 0..4 {
        small_write(volume, model, "a", a, EXTENT_A_BLOCKS)?;
    }
    Ok(())
}

/// What a cell came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Unaffected,
    Repaired,
    Refused,
    WrongData,
    LostWrite,
}

impl Outcome {
    fn is_failure(self) -> bool {
        matches!(self, Outcome::WrongData | Outcome::LostWrite)
    }
}

/// What the recovery and reads after a workload saw.
#[derive(Debug, Default)]
struct Verdict {
    wrong: Vec<String>,
    lost: Vec<String>,
    refused: Vec<String>,
    repaired: bool,
}

impl Verdict {
    fn outcome(&self) -> Outcome {
        if !self.wrong.is_empty() {
            Outcome::WrongData
        } else if !self.lost.is_empty() {
            Outcome::LostWrite
        } else if !self.refused.is_empty() {
            Outcome::Refused
        } else if self.repaired {
            Outcome::Repaired
        } else {
            Outcome::Unaffected
        }
    }

    /// Checks a block read back against the model.
    fn check(&mut self, what: String, read: Result<Vec<u8>, String>, allowed: &HashSet<u32>, ever: &HashSet<u32>) {
        match read {
            Err(error) => self.refused.push(format!("{what}: {error}")),
            Ok(bytes) => {
                let crc = crc32c::crc32c(&bytes);
                if allowed.contains(&crc) {
                } else if ever.contains(&crc) {
                    self.lost.push(what);
                } else {
                    self.wrong.push(what);
                }
            }
        }
    }
}

/// Reopens the volume on `devices` (with `armed` injected), reads every
/// block of every extent and of the snapshot, runs fsck and, with RAID, a
/// scrub; judges what came back against `model`.
fn recover_and_check(shape: Shape, devices: Devices, armed: Option<&Armed>, model: &Model) -> Verdict {
    let mut verdict = Verdict::default();
    if let Some(error) = &model.workload_error {
        verdict.refused.push(format!("workload: {error}"));
    }
    let touched = Touched::default();
    let (data, flash) = match stack(shape, devices, armed, &touched, false) {
        Ok(stacked) => stacked,
        Err(error) => {
            verdict.refused.push(format!("labels: {error}"));
            return verdict;
        }
    };
    let mut volume = match Volume::open_as(data, flash, options(), VOLUME_ID) {
        Ok(volume) => volume,
        Err(error) => {
            verdict.refused.push(format!("open: {error}"));
            return verdict;
        }
    };
    let recovery = volume.recovery().clone();
    verdict.repaired |= !recovery.damaged_log_copies.is_empty() || !recovery.stale_superblock_slots.is_empty();
    if recovery.needs_attention() {
        verdict.refused.push(format!("recovery: {recovery:?}"));
    }
    for (&name, contents) in &model.current {
        let Ok(id) = volume.extent_id(name) else {
            verdict.lost.push(format!("extent {name} is gone"));
            continue;
        };
        for block in 0..(contents.len() / BLOCK) as u64 {
            let read = volume.read(id, block * BLOCK as u64, BLOCK as u64).map_err(|error| error.to_string());
            let ever = model.ever.get(&(name, block)).cloned().unwrap_or_default();
            verdict.check(format!("{name}[{block}]"), read, &model.allowed(name, block), &ever);
        }
    }
    if let Some(snapshot) = &model.snapshot {
        for (&name, contents) in snapshot {
            for block in 0..(contents.len() / BLOCK) as u64 {
                let expected = crc32c::crc32c(&contents[(block as usize) * BLOCK..(block as usize + 1) * BLOCK]);
                let read = volume
                    .read_snapshot("s1", name, block * BLOCK as u64, BLOCK as u64)
                    .map_err(|error| error.to_string());
                let ever = model.ever.get(&(name, block)).cloned().unwrap_or_default();
                verdict.check(format!("{name}@s1[{block}]"), read, &HashSet::from([expected]), &ever);
            }
        }
    }
    verdict.repaired |= volume.stats().repaired_blocks > 0;
    match volume.fsck() {
        Ok(report) if report.is_clean() => {}
        Ok(report) => verdict.refused.push(format!("fsck: {:?}", report.findings)),
        Err(error) => verdict.refused.push(format!("fsck: {error}")),
    }
    if shape == Shape::Raid5 && verdict.refused.is_empty() {
        match volume.scrub() {
            Ok(report) => {
                verdict.repaired |= report.repaired_blocks > 0;
                if !report.damaged_blocks.is_empty() {
                    verdict.refused.push(format!("scrub: {:?}", report.damaged_blocks));
                }
            }
            Err(error) => verdict.refused.push(format!("scrub: {error}")),
        }
        if !volume.data_device_mut().redundancy_consistent() {
            verdict.wrong.push("parity disagrees with the data after a scrub".into());
        }
    }
    verdict
}

/// A clean run: the devices after the workload and a crash, the model, and
/// the blocks the workload wrote and the recovery read.
struct Baseline {
    devices: Devices,
    model: Model,
    written: BTreeSet<(Physical, u64)>,
    read_at_recovery: BTreeSet<(Physical, u64)>,
}

/// Runs the workload; `None` when the fault stopped the format itself (the
/// devices are gone with it, and nothing was ever acknowledged).
fn run_workload(shape: Shape, armed: Option<&Armed>) -> Option<(Devices, Model, Touched)> {
    let touched = Touched::default();
    let (data, flash) = stack(shape, shape.blank(), None, &touched, true).expect("labels on blank devices");
    // The labels are written; faults arm for the volume's own I/O.
    let devices = Devices { data: data.into_memory(), flash: memory_of(flash) };
    let (data, flash) = stack(shape, devices, armed, &touched, false).expect("freshly labelled");
    let mut model = Model::default();
    let mut volume = Volume::format(data, flash, VOLUME_ID, options()).ok()?;
    // A fault stops the workload where a client would see an error.
    let outcome = workload(&mut volume, &mut model);
    model.workload_error = outcome.err();
    let (data, flash) = volume.into_devices();
    Some((Devices { data: data.into_memory(), flash: memory_of(flash) }, model, touched))
}

fn baseline(shape: Shape) -> Baseline {
    let (devices, model, touched) = run_workload(shape, None).expect("a clean run");
    let written =
        touched.borrow().iter().filter(|(_, _, write)| *write).map(|&(device, block, _)| (device, block)).collect();
    let verdict_touched = Touched::default();
    let (data, flash) = stack(shape, clone_devices(&devices), None, &verdict_touched, false).expect("labels");
    let mut volume = Volume::open_as(data, flash, options(), VOLUME_ID).expect("a clean recovery");
    for (&name, contents) in &model.current {
        let id = volume.extent_id(name).unwrap();
        volume.read(id, 0, contents.len() as u64).unwrap();
    }
    drop(volume);
    let read_at_recovery = verdict_touched
        .borrow()
        .iter()
        .filter(|(_, _, write)| !*write)
        .map(|&(device, block, _)| (device, block))
        .collect();
    Baseline { devices, model, written, read_at_recovery }
}

fn clone_devices(devices: &Devices) -> Devices {
    Devices { data: devices.data.iter().map(copy).collect(), flash: copy(&devices.flash) }
}

/// The fault kinds of the matrix, in its column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Zeros,
    Junk,
    BitFlip,
    ReadError,
    WriteError,
    NoSpace,
}

const KINDS: [Kind; 6] = [Kind::Zeros, Kind::Junk, Kind::BitFlip, Kind::ReadError, Kind::WriteError, Kind::NoSpace];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Zeros => "zeros",
            Kind::Junk => "junk",
            Kind::BitFlip => "bit flip",
            Kind::ReadError => "EIO read",
            Kind::WriteError => "EIO write",
            Kind::NoSpace => "ENOSPC",
        }
    }
}

/// Corrupts block `block` (physical, label included) of a copy of the devices.
fn corrupted(devices: &Devices, device: Physical, block: u64, kind: Kind) -> Devices {
    let mut copy = clone_devices(devices);
    let target = copy.device_mut(device);
    let mut bytes = target.read_blocks(block, 1).unwrap();
    match kind {
        Kind::Zeros => bytes.fill(0),
        Kind::Junk => {
            let mut rng = ChaCha8Rng::seed_from_u64(block);
            rng.fill(&mut bytes[..]);
        }
        Kind::BitFlip => bytes[(block as usize * 131) % BLOCK] ^= 1 << (block % 8),
        _ => unreachable!("corruption at rest"),
    }
    target.write_blocks(block, &bytes).unwrap();
    copy
}

/// Per (what a block holds, fault kind), the count of each outcome.
type Matrix = BTreeMap<(String, Kind), BTreeMap<Outcome, u64>>;

/// Runs every cell for `shape`; returns the matrix and the failures.
fn run_matrix(shape: Shape) -> (Matrix, Vec<String>) {
    let baseline = baseline(shape);
    let flash_kinds = flash_kinds(&baseline.devices);
    let mut matrix = Matrix::new();
    let mut failures = Vec::new();
    let mut record = |device: Physical, block: u64, kind: Kind, verdict: Verdict| {
        let outcome = verdict.outcome();
        let what = classify(shape, device, block, &flash_kinds);
        *matrix.entry((what.clone(), kind)).or_default().entry(outcome).or_default() += 1;
        let not_repaired_on_raid =
            shape == Shape::Raid5 && matches!(device, Physical::Data(_)) && block > 0 && outcome == Outcome::Refused;
        if outcome.is_failure() || not_repaired_on_raid {
            failures.push(format!(
                "{shape:?} {device} block {block} ({what}), {}: {outcome:?}: {:?}",
                kind.name(),
                verdict
            ));
        }
    };
    for &(device, block) in &baseline.written {
        for kind in [Kind::Zeros, Kind::Junk, Kind::BitFlip] {
            let devices = corrupted(&baseline.devices, device, block, kind);
            record(device, block, kind, recover_and_check(shape, devices, None, &baseline.model));
        }
    }
    for &(device, block) in &baseline.read_at_recovery {
        let armed = Armed { device, rule: FaultRule::on_read_block(block, Fault::IoError).once() };
        let verdict = recover_and_check(shape, clone_devices(&baseline.devices), Some(&armed), &baseline.model);
        record(device, block, Kind::ReadError, verdict);
    }
    for &(device, block) in baseline.written.iter().filter(|(_, block)| *block > 0) {
        for (kind, fault) in [(Kind::WriteError, Fault::IoError), (Kind::NoSpace, Fault::NoSpace)] {
            let armed = Armed { device, rule: FaultRule::on_write_block(block, fault).once() };
            let verdict = match run_workload(shape, Some(&armed)) {
                Some((devices, model, _)) => recover_and_check(shape, devices, None, &model),
                None => Verdict { refused: vec!["format failed".into()], ..Verdict::default() },
            };
            record(device, block, kind, verdict);
        }
    }
    (matrix, failures)
}

/// What a physical block holds, for the matrix's rows: from its contents in
/// the baseline (a metadata block's kind, a log block, staged data) or its
/// place (a label; data and parity on the data devices).
fn classify(shape: Shape, device: Physical, block: u64, flash_kinds: &BTreeMap<u64, String>) -> String {
    if block == 0 {
        return "device label".into();
    }
    match device {
        Physical::Data(_) if shape == Shape::Raid5 => "data or parity (RAID member)".into(),
        Physical::Data(_) => "data block".into(),
        Physical::Flash if block <= 2 => "superblock slot".into(),
        Physical::Flash => flash_kinds.get(&block).cloned().unwrap_or_else(|| "staged data, or free".into()),
    }
}

/// Flash block → what the baseline holds there: a metadata block's kind, a
/// log block, or zeroes (trimmed).
fn flash_kinds(devices: &Devices) -> BTreeMap<u64, String> {
    let contents = devices.flash.contents();
    let mut kinds = BTreeMap::new();
    for (index, bytes) in contents.chunks(BLOCK).enumerate().skip(1) {
        if bytes.iter().all(|&byte| byte == 0) {
            kinds.insert(index as u64, "free (trimmed)".to_string());
        } else if let Ok(header) = proxima_engine::codec::decode_header(bytes) {
            let name = match header.kind {
                proxima_engine::codec::BlockKind::LogBlock => "log block".to_string(),
                kind => kind.name().to_string(),
            };
            kinds.insert(index as u64, name);
        }
    }
    kinds
}

fn print_matrix(shape: Shape, matrix: &Matrix) {
    println!("\nfault matrix, {shape:?} (cells: blocks per outcome)");
    let rows: BTreeSet<&String> = matrix.keys().map(|(what, _)| what).collect();
    print!("| {:<30} |", "block");
    for kind in KINDS {
        print!(" {:<22} |", kind.name());
    }
    println!();
    print!("| {:-<30} |", "");
    for _ in KINDS {
        print!(" {:-<22} |", "");
    }
    println!();
    for what in rows {
        print!("| {what:<30} |");
        for kind in KINDS {
            let cell = matrix.get(&(what.clone(), kind)).map_or_else(String::new, |outcomes| {
                outcomes
                    .iter()
                    .map(|(outcome, count)| format!("{} {count}", short(*outcome)))
                    .collect::<Vec<_>>()
                    .join(", ")
            });
            print!(" {cell:<22} |");
        }
        println!();
    }
}

fn short(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Unaffected => "unaffected",
        Outcome::Repaired => "repaired",
        Outcome::Refused => "refused",
        Outcome::WrongData => "WRONG DATA",
        Outcome::LostWrite => "LOST WRITE",
    }
}

fn check_shape(shape: Shape) {
    let (matrix, failures) = run_matrix(shape);
    print_matrix(shape, &matrix);
    let cells: u64 = matrix.values().flat_map(BTreeMap::values).sum();
    println!("{cells} cells");
    assert!(cells > 500, "the matrix covers the workload's blocks: {cells} cells");
    assert!(failures.is_empty(), "{} failing cells:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn no_single_fault_on_one_disk_returns_wrong_data_or_loses_an_acknowledged_write() {
    check_shape(Shape::Single);
}

#[test]
fn every_single_fault_on_a_raid5_data_device_is_repaired() {
    check_shape(Shape::Raid5);
}
