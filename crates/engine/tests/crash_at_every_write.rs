//! Crash at every write boundary of seeded workloads (across both devices, in
//! their global order), with unflushed writes dropped or kept by seed and the
//! write in flight torn; fsck the crash image offline (what a crash leaves —
//! superblock slots one CP apart, a torn log tail — is a note, never a
//! finding), recover, run fsck, and compare with the model: no acknowledged
//! write lost, no block holding a value it never had. Every fifth recovered
//! volume then carries on with more random operations, is closed and
//! reopened, and must hold exactly what they left (a crash in the middle of
//! one operation, then any other). Recovery
//! itself is crashed at every boundary for a subset of points.
//!
//! Each delete-log setting runs it too (TLog and BFLog beside the default
//! without a log), so crashes fall between a free's append, the log's
//! sorting, merging and punching, and the CP that persists them.
//! The operations include clones (an extent `z` made of `x` or `y`, which
//! share their blocks until writes diverge, and deleted again).
//!
//! Every crash-safe layout runs it: proximal (default, and with a staging area
//! of 16 blocks so destages run inside writes and crash points fall inside
//! them, whole or in bounded steps of 4 blocks), in-place with its write
//! cache, and write-anywhere. (In-place without
//! a write cache overwrites blocks in place, so a torn write destroys the old
//! value, as on a frame array without NVRAM; it is not crash-tested here.)
//!
//! `PROXIMA_CRASH_SEEDS` sets the number of workloads (default 8 for the
//! default layout, a quarter of that for each other), seeds 0.. of them, and
//! each run adds one fresh seed (printed with the command that reruns it;
//! `PROXIMA_CRASH_SEED` runs one seed alone).

use crate::common;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;

use common::{copy_of, pattern, BLOCK};
use proxima_device::{
    seeds_for_test, BatchTicket, BlockDevice, CrashDevice, CrashPoint, DeviceError, DeviceInfo, IoCompletion, IoOp,
    IoRequest, MemoryDevice, PendingWrites, Tear,
};
use proxima_engine::{
    fsck_devices, BatchedWrite, CleaningPolicy, CleaningSettings, CloneSource, DeleteLogMode, DeleteLogStats,
    DestagePlan, FsckScope, Layout, Overcommit, ReadRealloc, Volume, VolumeOptions,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const DATA_BLOCKS: u64 = 1024;
const FLASH_BLOCKS: u64 = 192;
const EXTENT_BLOCKS: u64 = 48;
const EXTENTS: [&str; 2] = ["x", "y"];
/// The extent clone operations make of `x` or `y` (and delete again).
const CLONE: &str = "z";
/// Every extent a workload may have.
const ALL_EXTENTS: [&str; 3] = ["x", "y", CLONE];

/// Which device a global write went to.
type GlobalOrder = Rc<RefCell<Vec<usize>>>;

/// Records, across devices, the order in which writes complete.
#[derive(Debug)]
struct Ordered<D> {
    inner: D,
    device_index: usize,
    order: GlobalOrder,
    kinds: BTreeMap<BatchTicket, Vec<bool>>,
}

impl<D: BlockDevice> BlockDevice for Ordered<D> {
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }
    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        let writes: Vec<bool> = batch.iter().map(|request| request.op != IoOp::Read).collect();
        let ticket = self.inner.submit(batch)?;
        self.kinds.insert(ticket, writes);
        Ok(ticket)
    }
    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        let completions = self.inner.wait(ticket)?;
        let writes = self.kinds.remove(&ticket).unwrap_or_default();
        for (completion, is_write) in completions.iter().zip(writes) {
            if is_write && completion.result.is_ok() {
                self.order.borrow_mut().push(self.device_index);
            }
        }
        Ok(completions)
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.inner.flush()
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
}

/// The model's view after one operation: per extent, the crc of every block.
#[derive(Debug, Clone)]
struct ModelPoint {
    /// Global writes completed when the operation started.
    writes_at_start: u64,
    /// Global writes completed when it returned.
    writes_at_end: u64,
    /// Everything before is durable once this operation returned.
    durable: bool,
    block_crcs: BTreeMap<&'static str, Vec<u32>>,
}

fn crcs(contents: &BTreeMap<&'static str, Vec<u8>>) -> BTreeMap<&'static str, Vec<u32>> {
    contents.iter().map(|(&name, bytes)| (name, bytes.chunks(BLOCK).map(crc32c::crc32c).collect())).collect()
}

struct Recording {
    base: (MemoryDevice, MemoryDevice),
    devices: (CrashDevice<MemoryDevice>, CrashDevice<MemoryDevice>),
    order: Vec<usize>,
    points: Vec<ModelPoint>,
    /// Blocks reads reallocated during the workload.
    reallocated_blocks: u64,
    /// Blocks the delete log took and punched during the workload.
    delete_log: DeleteLogStats,
    /// Live blocks segment cleaning moved during the workload.
    cleaned_blocks: u64,
    /// Of those, the blocks it wrote into the room another log head had left.
    cleaned_blocks_at_other_heads: u64,
    /// Staged blocks destages left staged as hot.
    retained_hot_blocks: u64,
    /// Log blocks the workload wrote.
    log_blocks_written: u64,
    /// Hot sets the layout chose (`hylog`).
    hot_set_choices: u64,
    /// Blocks copied out for snapshots.
    copied_out_blocks: u64,
    /// Destaged blocks whose bytes came from the staged-block cache.
    destaged_blocks_from_memory: u64,
}

/// Which operations a recorded workload draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mix {
    /// Every operation a user can cause ([`run_operation`]).
    Everything,
    /// Small writes straight to the data device (a volume that stages
    /// nothing), each with its direct and checksum records, and a rare
    /// flush: several log blocks of records pile up while the data device
    /// has unflushed writes.
    DirectWritesAndFlushes,
    /// On a data device the extents nearly fill, the base snapshot deleted
    /// first: single-block overwrites, nine in ten to a tenth of the blocks,
    /// with flushes, trims, CPs, destage steps and reads now and then
    /// ([`run_near_full_operation`]). A log-structured layout's cleaner then runs out of
    /// clean segments for its own log head and writes into the room another
    /// head has left.
    NearFullOverwrites,
}

impl Mix {
    /// Operations a workload of this mix runs.
    fn operation_count(self) -> usize {
        match self {
            Mix::Everything => 40,
            Mix::DirectWritesAndFlushes => 160,
            Mix::NearFullOverwrites => 240,
        }
    }

    /// Blocks of the data device: the two extents fill 6/7 of it in the
    /// near-full mix.
    fn data_blocks(self) -> u64 {
        match self {
            Mix::Everything | Mix::DirectWritesAndFlushes => DATA_BLOCKS,
            Mix::NearFullOverwrites => EXTENT_BLOCKS * EXTENTS.len() as u64 * 7 / 6,
        }
    }
}

fn options() -> VolumeOptions {
    VolumeOptions { scan_pages_per_checkpoint: 1, ..VolumeOptions::default() }
}

/// Runs a seeded workload on a fresh volume and records everything.
fn record_workload(seed: u64, options: &VolumeOptions) -> Recording {
    record_workload_of(seed, options, Mix::Everything)
}

/// [`record_workload`] drawing its operations from `mix`.
fn record_workload_of(seed: u64, options: &VolumeOptions, mix: Mix) -> Recording {
    let mut volume = Volume::format(
        MemoryDevice::new(4096, mix.data_blocks()),
        MemoryDevice::new(4096, FLASH_BLOCKS),
        seed,
        options.clone(),
    )
    .unwrap();
    let mut contents = BTreeMap::new();
    for name in EXTENTS {
        let id = volume.create_extent(name, EXTENT_BLOCKS * BLOCK as u64).unwrap();
        let initial = pattern(seed ^ id, (EXTENT_BLOCKS as usize) * BLOCK);
        volume.write(id, 0, &initial, false).unwrap();
        contents.insert(name, initial);
    }
    volume.create_snapshot("base").unwrap();
    let (data, flash) = volume.close().unwrap();
    let base = (copy_of(&data), copy_of(&flash));
    let order: GlobalOrder = Rc::default();
    let wrap = |device, device_index| Ordered {
        inner: CrashDevice::new(device),
        device_index,
        order: order.clone(),
        kinds: BTreeMap::new(),
    };
    let mut volume = Volume::open(wrap(data, 0), wrap(flash, 1), options.clone()).unwrap();
    let mut points =
        vec![ModelPoint { writes_at_start: 0, writes_at_end: 0, durable: true, block_crcs: crcs(&contents) }];
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut plan = DestagePlan::default();
    if mix == Mix::NearFullOverwrites {
        // Its blocks would leave no room to overwrite in: deleted, and CPs
        // run its scans to the end, so the state is durable.
        volume.delete_snapshot("base").unwrap();
        while volume.pending_deletions() > 0 {
            volume.commit().unwrap();
        }
        volume.commit().unwrap();
        let writes = order.borrow().len() as u64;
        points.push(ModelPoint {
            writes_at_start: 0,
            writes_at_end: writes,
            durable: true,
            block_crcs: crcs(&contents),
        });
    }
    for _ in 0..mix.operation_count() {
        let writes_at_start = order.borrow().len() as u64;
        let mut passed = Vec::new();
        let durable = match mix {
            Mix::Everything => run_operation(&mut volume, &mut rng, &mut contents, &mut plan, &mut passed),
            Mix::DirectWritesAndFlushes => run_direct_write_or_flush(&mut volume, &mut rng, &mut contents),
            Mix::NearFullOverwrites => run_near_full_operation(&mut volume, &mut rng, &mut contents),
        };
        let writes_at_end = order.borrow().len() as u64;
        // A crash inside the operation may leave any state it passed through.
        for block_crcs in passed {
            points.push(ModelPoint { writes_at_start, writes_at_end, durable: false, block_crcs });
        }
        points.push(ModelPoint { writes_at_start, writes_at_end, durable, block_crcs: crcs(&contents) });
    }
    let reallocated_blocks = volume.stats().reallocated_blocks;
    let delete_log = volume.delete_log_stats();
    let cleaned_blocks = volume.stats().cleaning_blocks_written;
    let cleaned_blocks_at_other_heads = volume.stats().cleaning_blocks_at_other_heads;
    let retained_hot_blocks = volume.stats().retained_hot_blocks;
    let log_blocks_written = volume.stats().log_blocks_written;
    let hot_set_choices = volume.stats().hot_set_choices;
    let copied_out_blocks = volume.stats().copied_out_blocks;
    let destaged_blocks_from_memory = volume.stats().destaged_blocks_from_memory;
    let (data, flash) = volume.into_devices();
    let order = order.borrow().clone();
    Recording {
        base,
        devices: (data.inner, flash.inner),
        order,
        points,
        reallocated_blocks,
        delete_log,
        cleaned_blocks,
        cleaned_blocks_at_other_heads,
        retained_hot_blocks,
        log_blocks_written,
        hot_set_choices,
        copied_out_blocks,
        destaged_blocks_from_memory,
    }
}

/// A write of 1 to 4 blocks 49 times in 50, else a flush; returns whether it
/// made everything before it durable.
fn run_direct_write_or_flush<D: BlockDevice, F: BlockDevice>(
    volume: &mut Volume<D, F>,
    rng: &mut ChaCha8Rng,
    contents: &mut BTreeMap<&'static str, Vec<u8>>,
) -> bool {
    write_or_flush(volume, rng, contents, |rng| {
        let length = rng.gen_range(1..=4) * BLOCK as u64;
        (rng.gen_range(0..=EXTENT_BLOCKS * BLOCK as u64 - length), length)
    })
}

/// On a near-full volume: mostly a one-block overwrite, nine in ten to the
/// first tenth of an extent, 49 times in 50, else a flush; now and then a
/// trim of a few blocks, a CP, a background destage step, or a read checked
/// against the model. Returns whether it made everything before it durable.
fn run_near_full_operation<D: BlockDevice, F: BlockDevice>(
    volume: &mut Volume<D, F>,
    rng: &mut ChaCha8Rng,
    contents: &mut BTreeMap<&'static str, Vec<u8>>,
) -> bool {
    let skewed_block = |rng: &mut ChaCha8Rng| {
        let hot_blocks = (EXTENT_BLOCKS / 10).max(1);
        if rng.gen_bool(0.9) {
            rng.gen_range(0..hot_blocks)
        } else {
            rng.gen_range(0..EXTENT_BLOCKS)
        }
    };
    let name = EXTENTS[rng.gen_range(0..EXTENTS.len())];
    let id = volume.extent_id(name).unwrap();
    match rng.gen_range(0..100) {
        0..=2 => {
            let first = skewed_block(rng);
            let count = rng.gen_range(1..=4).min(EXTENT_BLOCKS - first);
            let (offset, length) = (first * BLOCK as u64, count * BLOCK as u64);
            volume.trim(id, offset, length, false).unwrap();
            contents.get_mut(name).unwrap()[offset as usize..(offset + length) as usize].fill(0);
            false
        }
        3..=5 => {
            volume.commit().unwrap();
            true
        }
        6..=8 => {
            volume.destage_step(rng.gen_range(1..8)).unwrap();
            false
        }
        9 => {
            let read = volume.read(id, 0, EXTENT_BLOCKS * BLOCK as u64).unwrap();
            assert!(read == contents[name], "a read matches the model");
            false
        }
        _ => write_or_flush(volume, rng, contents, |rng| (skewed_block(rng) * BLOCK as u64, BLOCK as u64)),
    }
}

/// A write of one of the extents, at the `(offset, length)` in bytes that
/// `range` draws, 49 times in 50, else a flush; returns whether it made
/// everything before it durable.
fn write_or_flush<D: BlockDevice, F: BlockDevice>(
    volume: &mut Volume<D, F>,
    rng: &mut ChaCha8Rng,
    contents: &mut BTreeMap<&'static str, Vec<u8>>,
    range: impl FnOnce(&mut ChaCha8Rng) -> (u64, u64),
) -> bool {
    if rng.gen_bool(0.02) {
        volume.flush().unwrap();
        return true;
    }
    let name = EXTENTS[rng.gen_range(0..EXTENTS.len())];
    let id = volume.extent_id(name).unwrap();
    let (offset, length) = range(rng);
    let bytes = pattern(rng.gen(), length as usize);
    volume.write(id, offset, &bytes, false).unwrap();
    contents.get_mut(name).unwrap()[offset as usize..(offset + length) as usize].copy_from_slice(&bytes);
    false
}

/// One random operation; returns whether it made everything before it
/// durable. An operation made of several (a batch of writes) adds the block
/// checksums of the states it passed through before its last to `passed`.
fn run_operation<D: BlockDevice, F: BlockDevice>(
    volume: &mut Volume<D, F>,
    rng: &mut ChaCha8Rng,
    contents: &mut BTreeMap<&'static str, Vec<u8>>,
    plan: &mut DestagePlan,
    passed: &mut Vec<BTreeMap<&'static str, Vec<u32>>>,
) -> bool {
    let present: Vec<&'static str> = ALL_EXTENTS.into_iter().filter(|name| contents.contains_key(name)).collect();
    let name = present[rng.gen_range(0..present.len())];
    let id = volume.extent_id(name).unwrap();
    let size = EXTENT_BLOCKS * BLOCK as u64;
    // A small write (unaligned at times, staged) or, with probability
    // `large`, a large one (past the staging threshold: to the data
    // device), as `(offset, length)` in bytes.
    let random_write = |rng: &mut ChaCha8Rng, large: f64| {
        let length =
            if rng.gen_bool(large) { rng.gen_range(42..48) * BLOCK as u64 } else { rng.gen_range(1..3 * BLOCK as u64) };
        (rng.gen_range(0..size - length), length as usize)
    };
    match rng.gen_range(0..100) {
        0..=44 => {
            let (offset, length) = random_write(rng, 0.2);
            let bytes = pattern(rng.gen(), length);
            let fua = rng.gen_bool(0.2);
            volume.write(id, offset, &bytes, fua).unwrap();
            contents.get_mut(name).unwrap()[offset as usize..offset as usize + bytes.len()].copy_from_slice(&bytes);
            fua
        }
        45..=54 => {
            // Several writes of one extent through `write_batch`, as the
            // service sends them: small aligned ones staged as one group,
            // consecutive large ones written as gathered runs; more large
            // and block-aligned ones than single writes have, so that both
            // kinds of group form.
            let writes: Vec<(u64, Vec<u8>)> = (0..rng.gen_range(2..=4))
                .map(|_| {
                    let (offset, length) = random_write(rng, 0.5);
                    let aligned = rng.gen_bool(0.7);
                    let offset = if aligned { offset / BLOCK as u64 * BLOCK as u64 } else { offset };
                    let length = if aligned { length.div_ceil(BLOCK) * BLOCK } else { length };
                    (offset, pattern(rng.gen(), length))
                })
                .collect();
            let fua = rng.gen_bool(0.2);
            let batch: Vec<BatchedWrite<'_>> = writes
                .iter()
                .map(|(offset, bytes)| BatchedWrite { extent_id: id, offset_bytes: *offset, bytes, fua })
                .collect();
            for outcome in volume.write_batch(&batch) {
                outcome.unwrap();
            }
            for (index, (offset, bytes)) in writes.iter().enumerate() {
                if index > 0 {
                    passed.push(crcs(contents));
                }
                contents.get_mut(name).unwrap()[*offset as usize..*offset as usize + bytes.len()]
                    .copy_from_slice(bytes);
            }
            fua
        }
        55..=64 => {
            let length = rng.gen_range(1..10 * BLOCK as u64);
            let offset = rng.gen_range(0..size - length);
            volume.trim(id, offset, length, false).unwrap();
            contents.get_mut(name).unwrap()[offset as usize..(offset + length) as usize].fill(0);
            false
        }
        65..=69 => {
            // With reallocate-on-read, a read of a scattered span writes it
            // again: crashes fall inside that rewrite too.
            let length = rng.gen_range(4..32) * BLOCK as u64;
            let offset = rng.gen_range(0..=size - length);
            let read = volume.read(id, offset, length).unwrap();
            assert!(read == contents[name][offset as usize..(offset + length) as usize], "a read matches the model");
            false
        }
        70..=79 => {
            volume.flush().unwrap();
            true
        }
        80..=87 => {
            volume.commit().unwrap();
            true
        }
        88..=90 => {
            volume.destage().unwrap();
            false
        }
        91..=93 => {
            // A background destager's step: its staging space is released by
            // the next CP, so crashes fall between a step and that CP too.
            // Half of them move a piece of a step's plan, which outlives
            // the operations between its pieces, as the service's destager's.
            let max_blocks = rng.gen_range(1..8);
            if rng.gen_bool(0.5) {
                if plan.is_empty() {
                    *plan = volume.plan_destage_step(max_blocks * 3);
                }
                volume.destage_planned(plan, max_blocks).unwrap();
            } else {
                volume.destage_step(max_blocks).unwrap();
            }
            false
        }
        94..=96 => {
            let name = format!("s{}", rng.gen_range(0..3));
            let existed = volume.snapshots().iter().any(|snapshot| snapshot.name == name);
            if existed {
                volume.delete_snapshot(&name).unwrap();
            } else {
                volume.create_snapshot(&name).unwrap();
            }
            true
        }
        97 => {
            volume.delete_snapshot("base").ok();
            volume.commit().unwrap();
            true
        }
        _ => {
            // A clone of x or y as z, or z deleted again.
            if contents.remove(CLONE).is_some() {
                volume.delete_extent(CLONE).unwrap();
            } else {
                let source = EXTENTS[rng.gen_range(0..EXTENTS.len())];
                volume.clone_extent(CloneSource::Extent(source), CLONE, Overcommit::Refuse).unwrap();
                contents.insert(CLONE, contents[source].clone());
            }
            true
        }
    }
}

/// The device boundaries of a global crash point `global` (writes completed).
fn boundaries(order: &[usize], global: u64) -> [u64; 2] {
    let mut counts = [0; 2];
    for &device in &order[..global as usize] {
        counts[device] += 1;
    }
    counts
}

/// Checks a recovered volume against the model at global point `global`.
fn check_recovered<D: BlockDevice, F: BlockDevice>(
    volume: &mut Volume<D, F>,
    points: &[ModelPoint],
    global: u64,
) -> Result<(), String> {
    let report = volume.fsck().map_err(|error| format!("fsck failed: {error}"))?;
    if !report.is_clean() {
        return Err(format!("fsck findings: {:#?}", report.findings));
    }
    // The last operation acknowledged as durable before the crash, and every
    // operation that had started by then.
    let last_durable = points.iter().rposition(|point| point.durable && point.writes_at_end <= global).unwrap_or(0);
    let candidates: Vec<&ModelPoint> = points[last_durable..]
        .iter()
        .take_while(|point| point.writes_at_start <= global || point.writes_at_end <= global)
        .collect();
    for name in ALL_EXTENTS {
        // The clone exists in the candidates that made it and not in those
        // that deleted it (or came before it).
        let holders: Vec<&&ModelPoint> =
            candidates.iter().filter(|point| point.block_crcs.contains_key(name)).collect();
        let Ok(id) = volume.extent_id(name) else {
            if holders.len() == candidates.len() {
                return Err(format!("extent {name} is missing"));
            }
            continue;
        };
        if holders.is_empty() {
            return Err(format!("extent {name} exists, but no operation since the last acknowledged one left it"));
        }
        let bytes = volume.read(id, 0, EXTENT_BLOCKS * BLOCK as u64).map_err(|error| error.to_string())?;
        for (block, chunk) in bytes.chunks(BLOCK).enumerate() {
            let crc = crc32c::crc32c(chunk);
            let allowed: HashSet<u32> = holders.iter().map(|point| point.block_crcs[name][block]).collect();
            if !allowed.contains(&crc) {
                return Err(format!(
                    "extent {name} block {block}: a value no operation since the last acknowledged one ({last_durable}) left"
                ));
            }
        }
    }
    Ok(())
}

/// Every how many crash points the recovered volume carries on with more
/// operations.
const CONTINUE_EVERY: u64 = 5;

/// A crash in the middle of one operation, then any other: the recovered
/// volume runs more random operations (writes, trims, flushes, CPs, destages,
/// snapshot creation and deletion), is closed and reopened, and must hold
/// exactly what they left, with fsck clean.
fn continue_after_recovery(
    mut volume: Volume<MemoryDevice, MemoryDevice>,
    seed: u64,
    options: &VolumeOptions,
    mix: Mix,
) -> Result<(), String> {
    let mut contents = BTreeMap::new();
    for name in ALL_EXTENTS {
        let Ok(id) = volume.extent_id(name) else { continue };
        contents.insert(name, volume.read(id, 0, EXTENT_BLOCKS * BLOCK as u64).map_err(|error| error.to_string())?);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut plan = DestagePlan::default();
    for _ in 0..12 {
        match mix {
            // A near-full volume has no room for snapshots and clones.
            Mix::NearFullOverwrites => run_near_full_operation(&mut volume, &mut rng, &mut contents),
            Mix::Everything | Mix::DirectWritesAndFlushes => {
                run_operation(&mut volume, &mut rng, &mut contents, &mut plan, &mut Vec::new())
            }
        };
    }
    let (data, flash) = volume.close().map_err(|error| format!("close: {error}"))?;
    let mut volume = Volume::open(data, flash, options.clone()).map_err(|error| format!("reopen: {error}"))?;
    for (name, expected) in &contents {
        let id = volume.extent_id(name).map_err(|error| error.to_string())?;
        if &volume.read(id, 0, expected.len() as u64).map_err(|error| error.to_string())? != expected {
            return Err(format!("extent {name} differs from what the operations after recovery left"));
        }
    }
    let report = volume.fsck().map_err(|error| format!("fsck failed: {error}"))?;
    if report.is_clean() {
        Ok(())
    } else {
        Err(format!("fsck findings: {:#?}", report.findings))
    }
}

/// Offline fsck of a crash image before recovery: whatever a crash leaves —
/// superblock slots one CP apart, a torn log tail — is a note, never a finding.
fn offline_fsck_is_clean(data: &mut MemoryDevice, flash: &mut MemoryDevice) -> Result<(), String> {
    let report = fsck_devices(data, flash, FsckScope::MetadataAndData).map_err(|error| error.to_string())?;
    if report.is_clean() {
        Ok(())
    } else {
        Err(format!("findings: {:#?}", report.findings))
    }
}

fn crash_images(
    recording: &Recording,
    global: u64,
    variant: u64,
    data_tears: DataTears,
) -> (MemoryDevice, MemoryDevice) {
    let [data_boundary, flash_boundary] = boundaries(&recording.order, global);
    let in_flight = recording.order.get(global as usize).copied();
    let point = |boundary: u64, device: usize| {
        let tears = device == 1 || data_tears == DataTears::Sectors;
        let tear = (tears && in_flight == Some(device)).then_some(Tear::Seeded { seed: global ^ variant });
        let pending =
            if variant == 0 { PendingWrites::DropAll } else { PendingWrites::KeepSeeded { seed: variant ^ global } };
        CrashPoint { boundary, pending, tear }
    };
    let mut data = copy_of(&recording.base.0);
    let mut flash = copy_of(&recording.base.1);
    recording.devices.0.crash_image(point(data_boundary, 0)).apply_to(&mut data).unwrap();
    recording.devices.1.crash_image(point(flash_boundary, 1)).apply_to(&mut flash).unwrap();
    (data, flash)
}

/// Crashes the recovery of `(data, flash)` at every one of its write
/// boundaries and checks that a second recovery still matches the model.
fn crash_recovery(
    data: MemoryDevice,
    flash: MemoryDevice,
    points: &[ModelPoint],
    global: u64,
    options: &VolumeOptions,
) -> Result<u64, String> {
    let base = (copy_of(&data), copy_of(&flash));
    let volume =
        Volume::open(CrashDevice::new(data), CrashDevice::new(flash), options.clone()).map_err(|e| e.to_string())?;
    let (data, flash) = volume.into_devices();
    // Recovery writes only flash (the CP); crash it at each boundary.
    let mut exercised = 0;
    for boundary in 0..=flash.write_count() {
        let mut flash_copy = copy_of(&base.1);
        flash.crash_image(CrashPoint::torn_at(boundary, boundary)).apply_to(&mut flash_copy).unwrap();
        let mut data_copy = copy_of(&base.0);
        data.crash_image(CrashPoint::clean_at(data.write_count())).apply_to(&mut data_copy).unwrap();
        let mut volume = Volume::open(data_copy, flash_copy, options.clone())
            .map_err(|error| format!("reopen after a crash during recovery at {boundary}: {error}"))?;
        check_recovered(&mut volume, points, global)?;
        exercised += 1;
    }
    Ok(exercised)
}

fn seeds_from_environment(divisor: u64) -> u64 {
    let seeds: u64 = std::env::var("PROXIMA_CRASH_SEEDS").ok().and_then(|value| value.parse().ok()).unwrap_or(8);
    (seeds / divisor).max(1)
}

/// How a data-device write in flight at the crash is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DataTears {
    /// Torn at sector granularity, like every flash write.
    Sectors,
    /// Written whole or not at all: a frame array without a write cache
    /// overwrites in place and cannot survive a torn block (docs/layouts.md),
    /// so its crash points assume block-atomic data writes.
    WholeBlocks,
}

fn crash_every_point(name: &str, seeds: u64, options: &VolumeOptions) {
    crash_every_point_with(name, seeds, options, DataTears::Sectors);
}

fn crash_every_point_with(name: &str, seeds: u64, options: &VolumeOptions, data_tears: DataTears) {
    crash_every_point_of(name, seeds, options, data_tears, Mix::Everything);
}

fn crash_every_point_of(name: &str, seeds: u64, options: &VolumeOptions, data_tears: DataTears, mix: Mix) {
    let mut crash_points = 0;
    let mut recovery_crash_points = 0;
    let mut continued = 0;
    let rerun = "cargo test --release -p proxima-engine --test integration crash_at_every_write::";
    let seeds = seeds_for_test(0..seeds, "PROXIMA_CRASH_SEED", rerun);
    for &seed in &seeds {
        let recording = record_workload_of(seed, options, mix);
        let total = recording.order.len() as u64;
        for global in 0..=total {
            for variant in [0, 1 + seed] {
                let (data, flash) = crash_images(&recording, global, variant, data_tears);
                if global % 23 == 0 && variant == 0 {
                    recovery_crash_points += crash_recovery(data, flash, &recording.points, global, options)
                        .unwrap_or_else(|error| panic!("{name}: seed {seed}, point {global}: {error}"));
                    crash_points += 1;
                    continue;
                }
                let (mut data, mut flash) = (data, flash);
                offline_fsck_is_clean(&mut data, &mut flash).unwrap_or_else(|error| {
                    panic!("{name}: seed {seed}, point {global}, variant {variant}: offline fsck: {error}")
                });
                let mut volume = Volume::open(data, flash, options.clone()).unwrap_or_else(|error| {
                    panic!("{name}: seed {seed}, point {global}, variant {variant}: open: {error}")
                });
                check_recovered(&mut volume, &recording.points, global)
                    .unwrap_or_else(|error| panic!("{name}: seed {seed}, point {global}, variant {variant}: {error}"));
                if global % CONTINUE_EVERY == 0 {
                    continue_after_recovery(volume, seed ^ global, options, mix).unwrap_or_else(|error| {
                        panic!("{name}: seed {seed}, point {global}, variant {variant}, after recovery: {error}")
                    });
                    continued += 1;
                }
                crash_points += 1;
            }
        }
    }
    println!(
        "{name}: {} workloads: {crash_points} crash points recovered ({continued} of them carried on with more \
         operations), {recovery_crash_points} crashes during recovery",
        seeds.len()
    );
    assert!(crash_points > 0);
}

#[test]
fn every_crash_point_recovers_to_an_acknowledged_state() {
    crash_every_point("proximal", seeds_from_environment(1), &options());
}

#[test]
fn crashes_during_destage_recover_to_an_acknowledged_state() {
    let options = VolumeOptions { staging_capacity_blocks: 16, allocation_range_blocks: 32, ..options() };
    crash_every_point("proximal, 16-block staging", seeds_from_environment(4), &options);
    // Bounded steps of 4 blocks over 8-block windows: a full staging area is
    // drained a few windows at a time, so crashes fall inside partial steps.
    // Half the staging area's bytes are kept in memory: some destaged runs
    // are written from there, the others read from flash.
    let stepped =
        VolumeOptions { destage_step_blocks: 4, allocation_range_blocks: 8, staged_cache_blocks: 8, ..options };
    let recording = record_workload(0, &stepped);
    assert!(recording.destaged_blocks_from_memory > 0, "the workload destages blocks kept in memory");
    crash_every_point("proximal, 16-block staging, 4-block steps", seeds_from_environment(4), &stepped);
}

#[test]
fn crashes_during_the_proximal_copy_out_recover() {
    // Destages (whole, and planned steps moved in pieces) copy the versions
    // the base snapshot reads out beside their places before taking them
    // back: crashes fall between the copies, their records, the CP after
    // them and the destage.
    let options = VolumeOptions {
        staging_capacity_blocks: 16,
        allocation_range_blocks: 32,
        range_reserve_fraction: 0.25,
        proximal_copy_out: true,
        ..options()
    };
    assert!(record_workload(0, &options).copied_out_blocks > 0, "the workload's destages copy out");
    crash_every_point("proximal, copy-out", seeds_from_environment(4), &options);
}

#[test]
fn every_crash_point_of_the_baseline_layouts_recovers() {
    let in_place = VolumeOptions { layout: Layout::InPlace, staging_capacity_blocks: 16, ..options() };
    crash_every_point("in-place", seeds_from_environment(4), &in_place);
    // Without the cache the copy-out of a snapshot's block must be durable
    // before the frame is overwritten: crashes fall between the copy, its
    // log record and the overwrite.
    let uncached = VolumeOptions { layout: Layout::InPlace, staging_threshold_bytes: 0, ..options() };
    crash_every_point_with("in-place without a cache", seeds_from_environment(4), &uncached, DataTears::WholeBlocks);
    let anywhere = VolumeOptions { layout: Layout::WriteAnywhere, ..options() };
    crash_every_point("write-anywhere", seeds_from_environment(4), &anywhere);
}

#[test]
fn crashes_while_log_blocks_are_held_for_the_data_flush_recover() {
    // Two log blocks held while data is unflushed, and writes that all go to
    // the data device: crashes fall in a held batch's data flush, between
    // its blocks, and in the flushes that write fewer.
    let options = VolumeOptions {
        staging_threshold_bytes: 0,
        log_blocks_held_while_data_unflushed: 2,
        records_per_checkpoint: 2000,
        ..options()
    };
    let recording = record_workload_of(0, &options, Mix::DirectWritesAndFlushes);
    assert!(recording.log_blocks_written >= 4, "the workload writes held batches: {}", recording.log_blocks_written);
    let name = "direct writes, 2 log blocks held";
    crash_every_point_of(name, seeds_from_environment(4), &options, DataTears::Sectors, Mix::DirectWritesAndFlushes);
}

#[test]
fn every_crash_point_of_the_proximal_hot_layout_recovers() {
    // Crashes fall in destages that leave hot blocks staged, in the CPs
    // after them and in later overwrites of those blocks on flash.
    let options = VolumeOptions { layout: Layout::ProximalHot, staging_capacity_blocks: 16, ..options() };
    assert!(record_workload(0, &options).retained_hot_blocks > 0, "the workload's destages keep hot blocks");
    crash_every_point("proximal-hot", seeds_from_environment(4), &options);
}

/// A log-structured layout with 8-block segments and a cleaner that runs
/// after nearly every operation (it starts below 120 clean segments of 128):
/// crashes fall inside segment writes, cleaning passes and their CPs.
fn log_structured_options(layout: Layout, policy: CleaningPolicy) -> VolumeOptions {
    VolumeOptions {
        layout,
        segment_blocks: 8,
        staging_capacity_blocks: 16,
        destage_step_blocks: 8,
        cleaning: CleaningSettings {
            policy,
            start_below_clean_segments: 120,
            pass_blocks_max: 16,
            ..CleaningSettings::default()
        },
        ..options()
    }
}

// The log-structured layouts in two tests, so that the harness runs them side by side.
#[test]
fn every_crash_point_of_lfs_and_its_cleaners_recovers() {
    crash_every_point_of_log_structured(&[
        (Layout::Lfs, CleaningPolicy::Greedy),
        (Layout::Lfs, CleaningPolicy::HolePlugging),
    ]);
}

#[test]
fn crashes_while_a_near_full_wolf_cleans_into_the_other_head_recover() {
    // Greedy cleaning of a volume the extents fill to 6/7, started while
    // fewer than 2 segments are clean: the cleaner's own head runs out of
    // clean segments and it writes into the room the other head has left.
    let cleaning = CleaningSettings {
        policy: CleaningPolicy::Greedy,
        start_below_clean_segments: 2,
        pass_blocks_max: 16,
        ..CleaningSettings::default()
    };
    let options = VolumeOptions { cleaning, ..log_structured_options(Layout::Wolf, CleaningPolicy::Greedy) };
    let recording = record_workload_of(0, &options, Mix::NearFullOverwrites);
    assert!(
        recording.cleaned_blocks_at_other_heads > 0,
        "the cleaner wrote into another head's room: {} of {} cleaned blocks",
        recording.cleaned_blocks_at_other_heads,
        recording.cleaned_blocks
    );
    println!(
        "seed 0: {} of {} cleaned blocks went to the other head",
        recording.cleaned_blocks_at_other_heads, recording.cleaned_blocks
    );
    let name = "wolf near full, greedy cleaning";
    crash_every_point_of(name, seeds_from_environment(4), &options, DataTears::Sectors, Mix::NearFullOverwrites);
}

#[test]
fn every_crash_point_of_wolf_hylog_and_their_cleaners_recovers() {
    crash_every_point_of_log_structured(&[
        (Layout::Wolf, CleaningPolicy::CostBenefit),
        (Layout::Hylog, CleaningPolicy::Adaptive),
    ]);
}

fn crash_every_point_of_log_structured(configurations: &[(Layout, CleaningPolicy)]) {
    for &(layout, policy) in configurations {
        // Short measurement intervals: hylog chooses hot sets within the
        // workload, so crashes fall in destages that split hot from cold.
        let options = VolumeOptions { measurement_interval_writes: 8, ..log_structured_options(layout, policy) };
        let recording = record_workload(0, &options);
        assert!(recording.cleaned_blocks > 0, "{layout:?}, {policy:?}: the workload cleans segments");
        if layout == Layout::Hylog {
            assert!(recording.hot_set_choices > 0, "hylog chose hot sets in the workload");
        }
        let name = format!("{}, {} cleaning", layout.name(), policy.name());
        crash_every_point(&name, seeds_from_environment(4), &options);
    }
}

#[test]
fn crashes_during_reallocation_on_read_recover() {
    let realloc = ReadRealloc { runs_min: 2, ..ReadRealloc::ON };
    let anywhere = VolumeOptions { layout: Layout::WriteAnywhere, read_realloc: realloc, ..options() };
    assert!(record_workload(0, &anywhere).reallocated_blocks > 0, "the workload's reads reallocate");
    crash_every_point("write-anywhere, reallocating reads", seeds_from_environment(4), &anywhere);
    // Reads that take gaps through: a piece with no free run goes to blocks
    // one read takes in one request, written as several runs at once.
    let gathering = VolumeOptions { read_gap_blocks: 8, allocation_range_blocks: 32, ..anywhere.clone() };
    crash_every_point("write-anywhere, reallocating reads through gaps", seeds_from_environment(4), &gathering);
    let proximal = VolumeOptions { staging_capacity_blocks: 16, read_realloc: realloc, ..options() };
    crash_every_point("proximal, reallocating reads", seeds_from_environment(4), &proximal);
}

#[test]
fn every_crash_point_recovers_with_each_delete_log() {
    for mode in [DeleteLogMode::Tree, DeleteLogMode::Batched] {
        let options = VolumeOptions { delete_log: mode, staging_capacity_blocks: 16, ..options() };
        let stats = record_workload(0, &options).delete_log;
        assert!(stats.appended_blocks > 0 && stats.punched_blocks > 0, "{mode:?}: the log works: {stats:?}");
        crash_every_point(&format!("proximal, {}", mode.name()), seeds_from_environment(4), &options);
    }
}
