//! Random sequences of extent, write, trim, flush, CP, destage, snapshot
//! (create, read, delete, restore), clone (of an extent or of an extent as of
//! a snapshot), crash and reopen operations, checked against
//! a simple in-memory model after every step, with fsck at the end.
//!
//! Each delete-log setting runs it (TLog and BFLog under proximal and
//! write-anywhere, beside the default without a log).
//!
//! Every layout runs it (proximal with the default and with a tiny staging area
//! that destages during writes, in-place with and without its write cache,
//! write-anywhere), and proximal also on RAID-4 and on a degraded RAID-5 of
//! memory members.
//!
//! CI runs `PROXIMA_MODEL_CASES` cases (default 1000) for the default
//! configuration and a third of that for each other, from the fixed seed and
//! from one fresh seed per run (printed with the command that reruns it;
//! `PROXIMA_MODEL_SEED` runs one seed alone). The long run is
//! `PROXIMA_MODEL_CASES=50000 cargo test --release -p proxima-engine --test integration model_based::`.
//! A failing case prints its seed and shrunk operation list.

use crate::common;

use std::collections::{BTreeMap, HashMap, HashSet};

use common::{pattern, BLOCK};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use proxima_device::{seeds_for_test, BlockDevice, MemoryDevice, RaidConfig, RaidDevice};
use proxima_engine::{
    BatchedWrite, CleaningPolicy, CleaningSettings, CloneSource, DeleteLogMode, DestagePlan, DeviceRole, EngineError,
    Layout, Overcommit, ReadRealloc, Volume, VolumeOptions,
};

const EXTENT_NAMES: [&str; 3] = ["a", "b", "c"];
const SNAPSHOT_NAMES: [&str; 3] = ["s0", "s1", "s2"];
const MAX_EXTENT_BLOCKS: u64 = 96;
/// Three activemap pages, so snapshot deletion scans take several CPs.
const DATA_BLOCKS: u64 = 3 * 32_384;

#[derive(Debug, Clone)]
enum Op {
    Create {
        slot: usize,
        blocks: u64,
    },
    Delete {
        slot: usize,
    },
    Resize {
        slot: usize,
        blocks: u64,
    },
    Write {
        slot: usize,
        offset: u64,
        length: u64,
        tag: u64,
        fua: bool,
    },
    /// `(slot, offset, length, tag)` writes through `write_batch`; small
    /// aligned ones are staged as one group, large ones written as one.
    WriteBatch {
        writes: Vec<(usize, u64, u64, u64)>,
        fua: bool,
    },
    Trim {
        slot: usize,
        offset: u64,
        length: u64,
    },
    Read {
        slot: usize,
        offset: u64,
        length: u64,
    },
    Flush,
    Commit,
    Destage,
    DestageStep {
        max_blocks: u64,
        /// Move a piece of the harness's destage plan (planning a new one
        /// when it is used up), as the service's destager does, rather than
        /// a whole step; the plan outlives the operations in between.
        planned: bool,
    },
    SnapshotCreate {
        slot: usize,
    },
    SnapshotDelete {
        slot: usize,
    },
    SnapshotCheck {
        slot: usize,
    },
    RestoreVolume {
        slot: usize,
    },
    RestoreExtent {
        snapshot: usize,
        slot: usize,
    },
    /// Background reclamation: the delete log punches up to this many blocks.
    Reclaim {
        max_blocks: u64,
    },
    /// Clones extent `source` (as of snapshot `snapshot` if given) as
    /// extent `destination`.
    Clone {
        source: usize,
        snapshot: Option<usize>,
        destination: usize,
    },
    Crash,
    Reopen,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let slot = 0..EXTENT_NAMES.len();
    let snap = 0..SNAPSHOT_NAMES.len();
    let span = 0..(MAX_EXTENT_BLOCKS * BLOCK as u64);
    prop_oneof![
        3 => (slot.clone(), 1..=MAX_EXTENT_BLOCKS).prop_map(|(slot, blocks)| Op::Create { slot, blocks }),
        1 => slot.clone().prop_map(|slot| Op::Delete { slot }),
        1 => (slot.clone(), 1..=MAX_EXTENT_BLOCKS).prop_map(|(slot, blocks)| Op::Resize { slot, blocks }),
        12 => (slot.clone(), span.clone(), prop_oneof![1..8192u64, 4096..65536u64, 160_000..300_000u64], any::<u64>(), any::<bool>())
            .prop_map(|(slot, offset, length, tag, fua)| Op::Write { slot, offset, length, tag, fua }),
        4 => (
            proptest::collection::vec(
                (slot.clone(), 0..MAX_EXTENT_BLOCKS, prop_oneof![4 => 1..4u64, 1 => 1..60u64, 1 => 42..=64u64], any::<u64>())
                    .prop_map(|(slot, block, blocks, tag)| (slot, block * BLOCK as u64, blocks * BLOCK as u64, tag)),
                1..12,
            ),
            any::<bool>()
        )
            .prop_map(|(writes, fua)| Op::WriteBatch { writes, fua }),
        3 => (slot.clone(), span.clone(), 1..100_000u64).prop_map(|(slot, offset, length)| Op::Trim { slot, offset, length }),
        3 => (slot.clone(), span, 1..200_000u64).prop_map(|(slot, offset, length)| Op::Read { slot, offset, length }),
        3 => Just(Op::Flush),
        1 => Just(Op::Commit),
        1 => Just(Op::Destage),
        2 => (1..24u64, any::<bool>()).prop_map(|(max_blocks, planned)| Op::DestageStep { max_blocks, planned }),
        2 => snap.clone().prop_map(|slot| Op::SnapshotCreate { slot }),
        1 => snap.clone().prop_map(|slot| Op::SnapshotDelete { slot }),
        2 => snap.clone().prop_map(|slot| Op::SnapshotCheck { slot }),
        1 => snap.clone().prop_map(|slot| Op::RestoreVolume { slot }),
        1 => (snap.clone(), slot.clone()).prop_map(|(snapshot, slot)| Op::RestoreExtent { snapshot, slot }),
        2 => (slot.clone(), proptest::option::of(snap), slot)
            .prop_map(|(source, snapshot, destination)| Op::Clone { source, snapshot, destination }),
        2 => Just(Op::Crash),
        1 => Just(Op::Reopen),
        1 => (1..600u64).prop_map(|max_blocks| Op::Reclaim { max_blocks }),
    ]
}

type Contents = BTreeMap<String, Vec<u8>>;

/// The model: extent contents, snapshot contents, and for crash checking, every
/// value each block had since the last durability point.
#[derive(Debug, Default)]
struct Model {
    extents: Contents,
    /// Snapshots in creation order.
    snapshots: Vec<(String, Contents)>,
    history: HashMap<(String, u64), HashSet<u32>>,
}

impl Model {
    fn durable_point(&mut self) {
        self.history.clear();
    }

    fn remember_blocks(&mut self, name: &str, first: u64, end: u64) {
        let content = &self.extents[name];
        for block in first..end {
            let bytes = &content[(block as usize) * BLOCK..(block as usize + 1) * BLOCK];
            self.history.entry((name.to_string(), block)).or_default().insert(crc32c::crc32c(bytes));
        }
    }

    /// Replaces an extent's contents (and size), remembering old and new.
    fn update_whole(&mut self, name: &str, bytes: Vec<u8>) {
        let old_blocks = (self.extents[name].len() / BLOCK) as u64;
        self.remember_blocks(name, 0, old_blocks);
        self.extents.insert(name.to_string(), bytes);
        self.remember_blocks(name, 0, (self.extents[name].len() / BLOCK) as u64);
    }

    fn update(&mut self, name: &str, offset: usize, bytes: &[u8]) {
        let first = (offset / BLOCK) as u64;
        let end = (offset + bytes.len()).div_ceil(BLOCK) as u64;
        self.remember_blocks(name, first, end);
        self.extents.get_mut(name).expect("exists")[offset..offset + bytes.len()].copy_from_slice(bytes);
        self.remember_blocks(name, first, end);
    }
}

struct Harness<D: BlockDevice> {
    volume: Option<Volume<D, MemoryDevice>>,
    model: Model,
    options: VolumeOptions,
    /// A destage step's plan, moved a piece at a time by `DestageStep`
    /// operations with `planned`, whatever happens in between.
    plan: DestagePlan,
}

fn options() -> VolumeOptions {
    VolumeOptions { scan_pages_per_checkpoint: 1, ..VolumeOptions::default() }
}

impl<D: BlockDevice> Harness<D> {
    fn new(data: D, options: VolumeOptions) -> Self {
        let volume = Volume::format(data, MemoryDevice::new(4096, 256), 77, options.clone()).expect("format");
        Self { volume: Some(volume), model: Model::default(), options, plan: DestagePlan::default() }
    }

    fn volume(&mut self) -> &mut Volume<D, MemoryDevice> {
        self.volume.as_mut().expect("open")
    }

    fn clamp(&self, slot: usize, offset: u64, length: u64) -> Option<(String, u64, u64)> {
        let name = EXTENT_NAMES[slot];
        let size = self.model.extents.get(name)?.len() as u64;
        let offset = offset % size;
        Some((name.to_string(), offset, length.min(size - offset)))
    }

    /// Writes through `write_batch`, in order; each must succeed.
    fn write_batch(&mut self, writes: &[(usize, u64, u64, u64)], fua: bool) -> Result<(), TestCaseError> {
        let mut planned = Vec::new();
        for &(slot, offset, length, tag) in writes {
            let Some((name, offset, length)) = self.clamp(slot, offset, length) else { continue };
            let id = self.volume().extent_id(&name).unwrap();
            planned.push((name, id, offset, pattern(tag, length as usize)));
        }
        let batch: Vec<BatchedWrite<'_>> = planned
            .iter()
            .map(|(_, id, offset, bytes)| BatchedWrite { extent_id: *id, offset_bytes: *offset, bytes, fua })
            .collect();
        let outcomes = self.volume().write_batch(&batch);
        prop_assert!(outcomes.iter().all(|outcome| outcome.is_ok() || flash_full(outcome)), "{:?}", outcomes);
        for ((name, _, offset, bytes), outcome) in planned.iter().zip(&outcomes) {
            if outcome.is_ok() {
                self.model.update(name, *offset as usize, bytes);
            }
        }
        if fua && !planned.is_empty() {
            self.model.durable_point();
        }
        Ok(())
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        if let Op::WriteBatch { writes, fua } = op {
            return self.write_batch(writes, *fua);
        }
        match *op {
            Op::Create { slot, blocks } => {
                let name = EXTENT_NAMES[slot];
                let result = self.volume().create_extent(name, blocks * BLOCK as u64);
                if flash_full(&result) {
                    return Ok(());
                }
                prop_assert_eq!(result.is_ok(), !self.model.extents.contains_key(name));
                if result.is_ok() {
                    self.model.extents.insert(name.to_string(), vec![0; blocks as usize * BLOCK]);
                    self.model.durable_point();
                }
            }
            Op::Delete { slot } => {
                let name = EXTENT_NAMES[slot];
                let result = self.volume().delete_extent(name);
                if flash_full(&result) {
                    return Ok(());
                }
                prop_assert_eq!(result.is_ok(), self.model.extents.remove(name).is_some());
                if result.is_ok() {
                    self.model.durable_point();
                }
            }
            Op::Resize { slot, blocks } => {
                let name = EXTENT_NAMES[slot];
                let result = self.volume().resize_extent(name, blocks * BLOCK as u64);
                if flash_full(&result) {
                    return Ok(());
                }
                prop_assert_eq!(result.is_ok(), self.model.extents.contains_key(name));
                if let Some(content) = self.model.extents.get_mut(name) {
                    content.resize(blocks as usize * BLOCK, 0);
                    self.model.durable_point();
                }
            }
            Op::Write { slot, offset, length, tag, fua } => {
                let Some((name, offset, length)) = self.clamp(slot, offset, length) else { return Ok(()) };
                let bytes = pattern(tag, length as usize);
                let id = self.volume().extent_id(&name).unwrap();
                let result = self.volume().write(id, offset, &bytes, fua);
                if flash_full(&result) {
                    return Ok(());
                }
                result.unwrap();
                self.model.update(&name, offset as usize, &bytes);
                if fua {
                    self.model.durable_point();
                }
            }
            Op::Trim { slot, offset, length } => {
                let Some((name, offset, length)) = self.clamp(slot, offset, length) else { return Ok(()) };
                let id = self.volume().extent_id(&name).unwrap();
                let result = self.volume().trim(id, offset, length, false);
                if flash_full(&result) {
                    // The partial blocks at the edges, then the whole blocks
                    // between: each part done or not.
                    return self.adopt_refused_update(&name, offset, &vec![0; length as usize]);
                }
                result.unwrap();
                self.model.update(&name, offset as usize, &vec![0; length as usize]);
            }
            Op::Read { slot, offset, length } => {
                let Some((name, offset, length)) = self.clamp(slot, offset, length) else { return Ok(()) };
                let id = self.volume().extent_id(&name).unwrap();
                let read = self.volume().read(id, offset, length).unwrap();
                let expected = &self.model.extents[&name][offset as usize..(offset + length) as usize];
                prop_assert!(read == expected, "read of {} at {} for {} differs", name, offset, length);
            }
            Op::Flush => {
                self.volume().flush().unwrap();
                self.model.durable_point();
            }
            Op::Commit => {
                self.volume().commit().unwrap();
                self.model.durable_point();
            }
            Op::Destage => {
                // Refused when no batch's metadata fits beside what snapshots
                // hold (nothing moved then); the reads that follow check
                // every block either way.
                let result = self.volume().destage();
                if !flash_full(&result) {
                    result.unwrap();
                }
            }
            Op::Reclaim { max_blocks } => {
                // Punching changes no extent's contents: the reads and the
                // final fsck check it. A volume without a log has none to punch.
                let waiting = self.volume().delete_log_blocks();
                let punched = self.volume().reclaim_delete_log(max_blocks).unwrap();
                prop_assert!(punched <= waiting, "punched {} of {} waiting", punched, waiting);
                prop_assert_eq!(self.volume().delete_log_blocks(), waiting - punched);
            }
            Op::DestageStep { max_blocks, planned } => {
                // A step moves the densest windows, at least one, and leaves
                // the rest staged; a planned piece moves what of its runs is
                // still staged as planned. The reads that follow check every
                // block.
                let staged = self.volume().staging_fill().used_blocks;
                let result = if planned {
                    if self.plan.is_empty() {
                        self.plan = self.volume().plan_destage_step(max_blocks * 3);
                    }
                    let mut plan = std::mem::take(&mut self.plan);
                    let result = self.volume().destage_planned(&mut plan, max_blocks);
                    self.plan = plan;
                    result
                } else {
                    self.volume().destage_step(max_blocks)
                };
                if !flash_full(&result) {
                    let step = result.unwrap();
                    prop_assert!(step.user_blocks <= staged, "a step moves staged blocks only");
                    prop_assert!(
                        step.user_blocks > 0 || staged == 0 || planned,
                        "a step with staged blocks moves some"
                    );
                    prop_assert_eq!(self.volume().staging_fill().used_blocks, staged - step.user_blocks);
                }
            }
            Op::SnapshotCreate { slot } => self.snapshot_create(SNAPSHOT_NAMES[slot])?,
            Op::SnapshotDelete { slot } => {
                let name = SNAPSHOT_NAMES[slot];
                let result = self.volume().delete_snapshot(name);
                let position = self.model.snapshots.iter().position(|(existing, _)| existing == name);
                prop_assert_eq!(result.is_ok(), position.is_some());
                if let Some(position) = position {
                    self.model.snapshots.remove(position);
                    self.model.durable_point();
                }
            }
            Op::SnapshotCheck { slot } => self.snapshot_check(SNAPSHOT_NAMES[slot])?,
            Op::RestoreVolume { slot } => {
                let name = SNAPSHOT_NAMES[slot];
                let result = self.volume().restore_volume(name);
                if flash_full(&result) {
                    return Ok(());
                }
                let position = self.model.snapshots.iter().position(|(existing, _)| existing == name);
                prop_assert_eq!(result.is_ok(), position.is_some(), "{:?}", result.err());
                if let Some(position) = position {
                    self.model.snapshots.truncate(position + 1);
                    self.model.extents = self.model.snapshots[position].1.clone();
                    self.model.durable_point();
                }
            }
            Op::RestoreExtent { snapshot, slot } => {
                self.restore_extent(SNAPSHOT_NAMES[snapshot], EXTENT_NAMES[slot])?
            }
            Op::Clone { source, snapshot, destination } => self.clone_extent(
                EXTENT_NAMES[source],
                snapshot.map(|slot| SNAPSHOT_NAMES[slot]),
                EXTENT_NAMES[destination],
            )?,
            Op::WriteBatch { .. } => unreachable!("applied above"),
            Op::Crash => self.crash()?,
            Op::Reopen => {
                let (data, flash) = self.volume.take().unwrap().close().unwrap();
                self.volume = Some(Volume::open(data, flash, self.options.clone()).unwrap());
                self.model.durable_point();
                self.check_all()?;
            }
        }
        Ok(())
    }

    fn snapshot_create(&mut self, name: &str) -> Result<(), TestCaseError> {
        let result = self.volume().create_snapshot(name);
        if flash_full(&result) {
            return Ok(());
        }
        let exists = self.model.snapshots.iter().any(|(existing, _)| existing == name);
        prop_assert_eq!(result.is_ok(), !exists);
        if !exists {
            let contents = self.model.extents.clone();
            self.model.snapshots.push((name.to_string(), contents));
            self.model.durable_point();
        }
        Ok(())
    }

    fn snapshot_check(&mut self, name: &str) -> Result<(), TestCaseError> {
        let Some((_, contents)) = self.model.snapshots.iter().find(|(existing, _)| existing == name).cloned() else {
            prop_assert!(self.volume().snapshot_extents(name).is_err());
            return Ok(());
        };
        let listed = self.volume().snapshot_extents(name).unwrap();
        prop_assert_eq!(listed.len(), contents.len());
        for (extent, bytes) in &contents {
            let read = self.volume().read_snapshot(name, extent, 0, bytes.len() as u64).unwrap();
            prop_assert!(&read == bytes, "snapshot {} extent {} differs", name, extent);
        }
        Ok(())
    }

    fn clone_extent(&mut self, source: &str, snapshot: Option<&str>, destination: &str) -> Result<(), TestCaseError> {
        let clone_source = match snapshot {
            Some(snapshot) => CloneSource::Snapshot(source, snapshot),
            None => CloneSource::Extent(source),
        };
        let result = self.volume().clone_extent(clone_source, destination, Overcommit::Allow);
        if flash_full(&result) {
            return Ok(());
        }
        let contents = match snapshot {
            Some(snapshot) => self
                .model
                .snapshots
                .iter()
                .find(|(existing, _)| existing == snapshot)
                .and_then(|(_, contents)| contents.get(source)),
            None => self.model.extents.get(source),
        }
        .cloned();
        let expected = contents.is_some() && !self.model.extents.contains_key(destination);
        prop_assert_eq!(result.is_ok(), expected, "{:?}", result.err());
        if let (Ok(_), Some(bytes)) = (result, contents) {
            self.model.extents.insert(destination.to_string(), bytes);
            self.model.durable_point();
            self.check_all()?;
        }
        Ok(())
    }

    fn restore_extent(&mut self, snapshot: &str, extent: &str) -> Result<(), TestCaseError> {
        let result = self.volume().restore_extent(snapshot, extent);
        if flash_full(&result) {
            // Refused part way: each block holds its old value or the
            // snapshot's, and the size either.
            return self.adopt_partial_restore(snapshot, extent);
        }
        let source = self
            .model
            .snapshots
            .iter()
            .find(|(existing, _)| existing == snapshot)
            .and_then(|(_, contents)| contents.get(extent))
            .cloned();
        prop_assert_eq!(result.is_ok(), source.is_some(), "{:?}", result.err());
        if let Some(bytes) = source {
            self.model.extents.insert(extent.to_string(), bytes);
            self.model.durable_point();
        }
        Ok(())
    }

    /// Drops the volume without a CP; what was not written to the log is lost.
    fn crash(&mut self) -> Result<(), TestCaseError> {
        let (data, flash) = self.volume.take().unwrap().into_devices();
        let mut volume = Volume::open(data, flash, self.options.clone()).unwrap();
        for (name, content) in self.model.extents.iter_mut() {
            let id = volume.extent_id(name).unwrap();
            let recovered = volume.read(id, 0, content.len() as u64).unwrap();
            for block in 0..content.len() / BLOCK {
                let range = block * BLOCK..(block + 1) * BLOCK;
                let crc = crc32c::crc32c(&recovered[range.clone()]);
                match self.model.history.get(&(name.clone(), block as u64)) {
                    Some(values) => {
                        prop_assert!(values.contains(&crc), "{} block {} holds a value it never had", name, block)
                    }
                    None => prop_assert!(
                        recovered[range.clone()] == content[range.clone()],
                        "{} block {} lost durable data",
                        name,
                        block
                    ),
                }
            }
            *content = recovered;
        }
        self.volume = Some(volume);
        self.model.durable_point();
        Ok(())
    }

    /// After an update refused for lack of flash room part way (a trim's
    /// edges written, its middle refused): each block holds its old value or
    /// the new one; the model takes what the volume holds.
    fn adopt_refused_update(&mut self, name: &str, offset: u64, bytes: &[u8]) -> Result<(), TestCaseError> {
        let old = self.model.extents[name].clone();
        let mut new = old.clone();
        new[offset as usize..offset as usize + bytes.len()].copy_from_slice(bytes);
        self.adopt_either(name, &old, &new)
    }

    fn adopt_partial_restore(&mut self, snapshot: &str, extent: &str) -> Result<(), TestCaseError> {
        let source =
            self.model.snapshots.iter().find(|(existing, _)| existing == snapshot).and_then(|(_, c)| c.get(extent));
        let source = source.cloned().expect("restore refused for room, not for a missing source");
        match self.model.extents.get(extent).cloned() {
            Some(old) => self.adopt_either(extent, &old, &source),
            // Created afresh (all zeroes), then refused while copying.
            None if self.volume().extent_id(extent).is_ok() => {
                self.model.extents.insert(extent.to_string(), Vec::new());
                self.adopt_either(extent, &[], &source)
            }
            // Creating it was refused.
            None => Ok(()),
        }
    }

    /// The model takes the volume's contents of `name`, each block of which
    /// must equal `old` or `new` there (past either's end: zeroes).
    fn adopt_either(&mut self, name: &str, old: &[u8], new: &[u8]) -> Result<(), TestCaseError> {
        let id = self.volume().extent_id(name).unwrap();
        let size = self.volume().extent_size(id).unwrap();
        let read = self.volume().read(id, 0, size).unwrap();
        let block_of = |bytes: &[u8], block: usize| {
            let mut out = vec![0u8; BLOCK];
            let start = (block * BLOCK).min(bytes.len());
            let end = ((block + 1) * BLOCK).min(bytes.len());
            out[..end - start].copy_from_slice(&bytes[start..end]);
            out
        };
        for block in 0..read.len() / BLOCK {
            let held = &read[block * BLOCK..(block + 1) * BLOCK];
            prop_assert!(held == block_of(old, block) || held == block_of(new, block), "{} block {}", name, block);
        }
        self.model.update_whole(name, read);
        Ok(())
    }

    fn check_all(&mut self) -> Result<(), TestCaseError> {
        let extents = self.model.extents.clone();
        prop_assert_eq!(self.volume().extents().len(), extents.len());
        for (name, bytes) in &extents {
            let id = self.volume().extent_id(name).unwrap();
            let read = self.volume().read(id, 0, bytes.len() as u64).unwrap();
            prop_assert!(&read == bytes, "extent {} differs", name);
        }
        Ok(())
    }
}

thread_local! {
    // Per test thread: the configurations run in parallel.
    static OPERATIONS_RUN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static CASES_RUN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static REFUSED_FOR_ROOM: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn run_case<D: BlockDevice>(data: D, options: VolumeOptions, ops: &[Op]) -> Result<(), TestCaseError> {
    CASES_RUN.with(|cases| cases.set(cases.get() + 1));
    OPERATIONS_RUN.with(|operations| operations.set(operations.get() + ops.len() as u64));
    let mut harness = Harness::new(data, options);
    for op in ops {
        harness.apply(op)?;
    }
    harness.check_all()?;
    let volume = harness.volume();
    let report = volume.fsck().unwrap();
    prop_assert!(report.is_clean(), "fsck: {:#?}", report.findings);
    volume.finish_deletions().unwrap();
    let report = volume.fsck().unwrap();
    prop_assert!(report.is_clean(), "fsck after deletions: {:#?}", report.findings);
    let space = volume.space();
    prop_assert_eq!(
        space.data.used_blocks
            + space.data.snapshot_only_blocks
            + space.data.allocatable_blocks
            + space.data.awaiting_checkpoint_blocks,
        space.data.block_count
    );
    Ok(())
}

fn cases_from_environment(divisor: u32) -> u32 {
    let cases: u32 = std::env::var("PROXIMA_MODEL_CASES").ok().and_then(|value| value.parse().ok()).unwrap_or(1000);
    (cases / divisor).max(1)
}

/// Runs the model-based test on data devices made by `data` with `options`.
fn run_configuration<D: BlockDevice>(name: &str, cases: u32, data: impl Fn() -> D, options: VolumeOptions) {
    let rerun = "cargo test --release -p proxima-engine --test integration model_based::";
    for seed in seeds_for_test([20_261_121], "PROXIMA_MODEL_SEED", rerun) {
        run_configuration_seeded(name, cases, &data, &options, seed);
    }
}

fn run_configuration_seeded<D: BlockDevice>(
    name: &str,
    cases: u32,
    data: &impl Fn() -> D,
    options: &VolumeOptions,
    seed: u64,
) {
    println!("model-based test ({name}): {cases} cases, seed {seed} (PROXIMA_MODEL_CASES, PROXIMA_MODEL_SEED)");
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes));
    let cases_before = CASES_RUN.with(std::cell::Cell::get);
    let operations_before = OPERATIONS_RUN.with(std::cell::Cell::get);
    let refused_before = REFUSED_FOR_ROOM.with(std::cell::Cell::get);
    let result =
        runner.run(&proptest::collection::vec(op_strategy(), 1..60), |ops| run_case(data(), options.clone(), &ops));
    if let Err(error) = result {
        panic!("{name}, seed {seed}: {error}");
    }
    let cases_run = CASES_RUN.with(std::cell::Cell::get) - cases_before;
    let operations = OPERATIONS_RUN.with(std::cell::Cell::get) - operations_before;
    let refused = REFUSED_FOR_ROOM.with(std::cell::Cell::get) - refused_before;
    println!("{name}: {cases_run} cases, {operations} operations checked, {refused} refused for lack of flash room");
    assert!(cases_run >= u64::from(cases), "every case ran");
}

fn memory_data() -> MemoryDevice {
    MemoryDevice::new(4096, DATA_BLOCKS)
}

#[test]
fn the_volume_behaves_like_the_model() {
    run_configuration("proximal", cases_from_environment(1), memory_data, options());
}

#[test]
fn a_tiny_staging_area_destaging_during_writes_behaves_like_the_model() {
    let options = VolumeOptions {
        staging_capacity_blocks: 24,
        allocation_range_blocks: 16,
        proximal_span_ranges: 4,
        range_reserve_fraction: 0.25,
        // Half the staging area's bytes kept in memory: destages take some
        // runs from it and read the others.
        staged_cache_blocks: 12,
        ..options()
    };
    run_configuration("proximal, 24-block staging", cases_from_environment(3), memory_data, options);
}

#[test]
fn the_proximal_copy_out_behaves_like_the_model() {
    // Destages copy out what snapshots read at the places their blocks go
    // back to, between any snapshot, clone, restore, deletion and crash.
    let options = VolumeOptions {
        staging_capacity_blocks: 24,
        allocation_range_blocks: 16,
        proximal_span_ranges: 4,
        range_reserve_fraction: 0.25,
        proximal_copy_out: true,
        // Reads take the blocks between places a few apart in one request.
        read_gap_blocks: 4,
        ..options()
    };
    run_configuration("proximal, copy-out", cases_from_environment(3), memory_data, options);
}

#[test]
fn the_in_place_layout_behaves_like_the_model() {
    let cached = VolumeOptions { layout: Layout::InPlace, staging_capacity_blocks: 40, ..options() };
    run_configuration("in-place", cases_from_environment(3), memory_data, cached);
    let uncached = VolumeOptions { layout: Layout::InPlace, staging_threshold_bytes: 0, ..options() };
    run_configuration("in-place without a write cache", cases_from_environment(3), memory_data, uncached);
}

#[test]
fn each_delete_log_behaves_like_the_model() {
    for mode in [DeleteLogMode::Tree, DeleteLogMode::Batched] {
        let proximal = VolumeOptions { delete_log: mode, ..options() };
        run_configuration(&format!("proximal, {}", mode.name()), cases_from_environment(3), memory_data, proximal);
        let anywhere = VolumeOptions { delete_log: mode, layout: Layout::WriteAnywhere, ..options() };
        let name = format!("write-anywhere, {}", mode.name());
        run_configuration(&name, cases_from_environment(6), memory_data, anywhere);
    }
}

#[test]
fn the_write_anywhere_layout_behaves_like_the_model() {
    // Reads take the blocks between places a few apart in one request.
    let options = VolumeOptions { layout: Layout::WriteAnywhere, read_gap_blocks: 8, ..options() };
    run_configuration("write-anywhere", cases_from_environment(3), memory_data, options);
}

#[test]
fn the_proximal_hot_layout_behaves_like_the_model() {
    // A small staging area: measurement intervals end and destages leave
    // hot blocks staged within a case.
    let options = VolumeOptions {
        layout: Layout::ProximalHot,
        staging_capacity_blocks: 24,
        destage_step_blocks: 8,
        // Hot blocks stay staged through destages, their bytes in memory.
        staged_cache_blocks: 24,
        ..options()
    };
    run_configuration("proximal-hot", cases_from_environment(3), memory_data, options);
}

#[test]
fn the_log_structured_layout_and_its_cleaner_behave_like_the_model() {
    let configurations = [
        (Layout::Lfs, CleaningPolicy::CostBenefit),
        (Layout::Lfs, CleaningPolicy::Adaptive),
        (Layout::Wolf, CleaningPolicy::Greedy),
        (Layout::Hylog, CleaningPolicy::Adaptive),
    ];
    for (layout, policy) in configurations {
        let options = VolumeOptions {
            layout,
            segment_blocks: 16,
            staging_capacity_blocks: 40,
            destage_step_blocks: 16,
            cleaning: CleaningSettings {
                policy,
                start_below_clean_segments: u64::MAX,
                pass_blocks_max: 64,
                ..CleaningSettings::default()
            },
            // hylog chooses hot sets within a case.
            measurement_interval_writes: 16,
            ..options()
        };
        // The cleaner runs after every update, as long as it finds a segment
        // it can empty.
        let name = format!("{}, {} cleaning", layout.name(), policy.name());
        run_configuration(&name, cases_from_environment(3), memory_data, options);
    }
}

#[test]
fn reallocating_reads_behave_like_the_model() {
    // Spans in two runs or more are moved, snapshot blocks too: every read
    // of a scattered span rewrites it, between any other operations.
    let realloc = ReadRealloc { runs_min: 2, snapshot_blocks: true, ..ReadRealloc::ON };
    let anywhere = VolumeOptions { layout: Layout::WriteAnywhere, read_realloc: realloc, ..options() };
    run_configuration("write-anywhere, reallocating reads", cases_from_environment(3), memory_data, anywhere.clone());
    // Reads that take gaps through, pieces gathered where no run is free.
    let gathering = VolumeOptions { read_gap_blocks: 8, allocation_range_blocks: 32, ..anywhere };
    run_configuration(
        "write-anywhere, reallocating reads through gaps",
        cases_from_environment(3),
        memory_data,
        gathering,
    );
    let uncached = VolumeOptions {
        layout: Layout::InPlace,
        staging_threshold_bytes: 0,
        read_realloc: ReadRealloc { runs_min: 2, ..ReadRealloc::ON },
        ..options()
    };
    run_configuration("in-place, reallocating reads", cases_from_environment(3), memory_data, uncached.clone());
    // Frames that snapshots read, at their place or at a copy, move too.
    let moving_frames = VolumeOptions { read_realloc: realloc, ..uncached };
    run_configuration("in-place, reallocating snapshot frames", cases_from_environment(3), memory_data, moving_frames);
}

fn raid(config: RaidConfig, failed_member: Option<usize>) -> RaidDevice<MemoryDevice> {
    // Four data members and parity, 64 KiB stripe units: DATA_BLOCKS in all.
    let members = (0..5).map(|_| MemoryDevice::new(4096, DATA_BLOCKS / 4)).collect();
    let mut raid = RaidDevice::new(members, config.with_stripe_unit_bytes(64 * 1024)).expect("raid");
    if let Some(member) = failed_member {
        raid.fail_member(member).expect("fail one member");
    }
    raid
}

#[test]
fn the_volume_on_raid4_and_on_a_degraded_raid5_behaves_like_the_model() {
    let small_staging = VolumeOptions { staging_capacity_blocks: 32, allocation_range_blocks: 16, ..options() };
    run_configuration(
        "proximal on RAID-4",
        cases_from_environment(4),
        || raid(RaidConfig::raid4(), None),
        small_staging.clone(),
    );
    run_configuration(
        "proximal on RAID-5 with member 2 failed",
        cases_from_environment(4),
        || raid(RaidConfig::raid5(), Some(2)),
        small_staging,
    );
    let in_place = VolumeOptions { layout: Layout::InPlace, staging_threshold_bytes: 0, ..options() };
    run_configuration(
        "in-place without a cache on RAID-4 with member 0 failed",
        cases_from_environment(4),
        || raid(RaidConfig::raid4(), Some(0)),
        in_place,
    );
}

/// Refused for lack of flash room (snapshots hold the metadata): a refusal
/// the model allows for any update or metadata operation.
fn flash_full<T>(result: &Result<T, EngineError>) -> bool {
    let refused = matches!(result, Err(EngineError::NoSpace { role: DeviceRole::Flash, .. }));
    if refused {
        REFUSED_FOR_ROOM.with(|refused| refused.set(refused.get() + 1));
    }
    refused
}

/// Cases the generator once found failing, kept as they shrank.
#[test]
fn recorded_cases_pass() {
    // Seed 90210: three snapshots hold most of a 256-block flash; a later
    // one-byte write's CP found no flash block for its bitmap pages.
    let cases: [&[Op]; 1] = [&[
        Op::Create { slot: 0, blocks: 69 },
        Op::Create { slot: 1, blocks: 5 },
        Op::Create { slot: 2, blocks: 68 },
        Op::WriteBatch {
            writes: vec![
                (0, 118784, 4096, 0),
                (1, 20480, 12288, 0),
                (0, 282624, 28672, 0),
                (1, 12288, 4096, 0),
                (2, 139264, 139264, 0),
                (0, 110592, 73728, 0),
                (0, 28672, 28672, 0),
            ],
            fua: false,
        },
        Op::Write { slot: 0, offset: 160795, length: 56294, tag: 0, fua: false },
        Op::Resize { slot: 2, blocks: 73 },
        Op::Write { slot: 2, offset: 7829, length: 4460, tag: 0, fua: false },
        Op::SnapshotCreate { slot: 2 },
        Op::Resize { slot: 0, blocks: 4 },
        Op::Write { slot: 2, offset: 131072, length: 20481, tag: 0, fua: false },
        Op::WriteBatch { writes: vec![(0, 0, 4096, 0), (1, 0, 8192, 0)], fua: false },
        Op::WriteBatch { writes: vec![(0, 0, 4096, 0)], fua: false },
        Op::SnapshotCreate { slot: 1 },
        Op::Write { slot: 0, offset: 81920, length: 8193, tag: 0, fua: false },
        Op::SnapshotCreate { slot: 0 },
        Op::Write { slot: 1, offset: 20480, length: 1, tag: 0, fua: false },
        Op::Write { slot: 0, offset: 0, length: 1, tag: 0, fua: false },
        Op::Flush,
    ]];
    for ops in cases {
        run_case(memory_data(), options(), ops).unwrap();
    }
}

/// Cases on the in-place layout without a cache the generator once found
/// failing, kept as they shrank.
#[test]
fn recorded_in_place_cases_pass() {
    let uncached = VolumeOptions {
        layout: Layout::InPlace,
        staging_threshold_bytes: 0,
        read_realloc: ReadRealloc { runs_min: 2, ..ReadRealloc::ON },
        ..options()
    };
    // Seed 123770150781505: a clone of a deleted extent from a snapshot
    // writes over the frames the snapshot holds.
    let cases: [&[Op]; 1] = [&[
        Op::Create { slot: 1, blocks: 3 },
        Op::Write { slot: 1, offset: 4096, length: 4097, tag: 0, fua: false },
        Op::SnapshotCreate { slot: 0 },
        Op::WriteBatch { writes: vec![(1, 8192, 4096, 0)], fua: false },
        Op::Delete { slot: 1 },
        Op::SnapshotCreate { slot: 1 },
        Op::Clone { source: 1, snapshot: Some(0), destination: 2 },
        Op::WriteBatch { writes: vec![(2, 0, 12288, 0)], fua: false },
    ]];
    for ops in cases {
        run_case(memory_data(), uncached.clone(), ops).unwrap();
    }
}
