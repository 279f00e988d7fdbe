//! The free-space rules of snapshots and clones (docs/wafl.md, "Snapshot
//! scans") under random sequences of extent creation and deletion, writes,
//! trims, destages, CPs, snapshot creation, deletion and restore (of the
//! volume and of one extent), clones (of an extent and of an extent as of a
//! snapshot) and crashes, checked after every operation:
//!
//! - Lemma 2: the blocks the volume points to are the OR of the activemap
//!   and the snapmaps (each map is exactly what its tree points to);
//! - Theorem 1: with no deletion pending, the activemap OR the summary is
//!   exactly the blocks the volume points to;
//! - Theorem 2: whatever the scans' state, it holds at least those blocks;
//! - Theorem 3: while a deletion scan runs, no block of a deleted snapshot's
//!   own tree (its snapmaps, tables and maps, on flash) is allocatable;
//! - Lemma 3 (the 010 property): every block's bits over the snapshots in
//!   creation order and the activemap read `0*1*0*` — on flash over every
//!   snapshot, deleted ones included; on the data device over the live ones,
//!   unless a clone from a snapshot broke it, which the volume must then know
//!   (and scan by addition).
//!
//! At the end of each sequence the volume is closed and its deletions are
//! finished twice from the same image, once by subtraction and once by
//! addition: both give the same summary (dbys ≡ dbya), the exact one.
//!
//! CI runs `PROXIMA_SCAN_CASES` sequences (default 1000) from a fixed seed
//! and one fresh seed per run (printed with the command that reruns it;
//! `PROXIMA_SCAN_SEED` runs one seed alone). The long run is
//! `PROXIMA_SCAN_CASES=100000 cargo test --release -p proxima-engine --test integration snapshot_scans::`.

use crate::common;

use std::collections::BTreeSet;

use common::{copy_of, pattern, NullDevice, BLOCK};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use proxima_device::{seeds_for_test, MemoryDevice};
use proxima_engine::{
    CloneSource, DeviceRole, EngineError, FreeSpaceView, Overcommit, SnapshotDeletion, Volume, VolumeOptions,
};

const EXTENTS: [&str; 3] = ["a", "b", "c"];
const SNAPSHOTS: [&str; 3] = ["s0", "s1", "s2"];
/// Five activemap pages, so deletion scans take five CPs at one page per CP
/// and often outlast a sequence.
const DATA_BLOCKS: u64 = 5 * 32_384;
const FLASH_BLOCKS: u64 = 512;
const MAX_EXTENT_BLOCKS: u64 = 64;

#[derive(Debug, Clone)]
enum Op {
    CreateExtent {
        slot: usize,
        blocks: u64,
    },
    DeleteExtent {
        slot: usize,
    },
    /// Blocks `[block, block + blocks)` of an extent (clamped to its size).
    Write {
        slot: usize,
        block: u64,
        blocks: u64,
        tag: u64,
    },
    Trim {
        slot: usize,
        block: u64,
        blocks: u64,
    },
    Destage,
    Commit,
    SnapshotCreate {
        slot: usize,
    },
    SnapshotDelete {
        slot: usize,
    },
    RestoreVolume {
        slot: usize,
    },
    RestoreExtent {
        snapshot: usize,
        slot: usize,
    },
    Clone {
        source: usize,
        snapshot: Option<usize>,
        destination: usize,
    },
    Crash,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let slot = 0..EXTENTS.len();
    let snap = 0..SNAPSHOTS.len();
    prop_oneof![
        3 => (slot.clone(), 1..=MAX_EXTENT_BLOCKS).prop_map(|(slot, blocks)| Op::CreateExtent { slot, blocks }),
        1 => slot.clone().prop_map(|slot| Op::DeleteExtent { slot }),
        10 => (slot.clone(), 0..MAX_EXTENT_BLOCKS, prop_oneof![1..4u64, 40..64u64], any::<u64>())
            .prop_map(|(slot, block, blocks, tag)| Op::Write { slot, block, blocks, tag }),
        2 => (slot.clone(), 0..MAX_EXTENT_BLOCKS, 1..16u64).prop_map(|(slot, block, blocks)| Op::Trim { slot, block, blocks }),
        1 => Just(Op::Destage),
        3 => Just(Op::Commit),
        3 => snap.clone().prop_map(|slot| Op::SnapshotCreate { slot }),
        2 => snap.clone().prop_map(|slot| Op::SnapshotDelete { slot }),
        1 => snap.clone().prop_map(|slot| Op::RestoreVolume { slot }),
        1 => (snap.clone(), slot.clone()).prop_map(|(snapshot, slot)| Op::RestoreExtent { snapshot, slot }),
        4 => (slot.clone(), proptest::option::weighted(0.7, snap), slot)
            .prop_map(|(source, snapshot, destination)| Op::Clone { source, snapshot, destination }),
        1 => Just(Op::Crash),
    ]
}

fn options(snapshot_deletion: SnapshotDeletion) -> VolumeOptions {
    // Metadata only: the rules concern the maps, and a data device that
    // keeps no payload (and so may be swapped for a fresh one) keeps each
    // case cheap.
    VolumeOptions {
        scan_pages_per_checkpoint: 1,
        payload: false,
        data_checksums: false,
        snapshot_deletion,
        ..VolumeOptions::default()
    }
}

/// Refusals the rules allow: the small flash full of snapshots' metadata,
/// names that do not (or already) exist.
fn expected_refusal<T>(result: &Result<T, EngineError>) -> bool {
    matches!(
        result,
        Err(EngineError::NoSpace { role: DeviceRole::Flash, .. }
            | EngineError::NoSuchExtent(_)
            | EngineError::ExtentExists(_)
            | EngineError::NoSuchSnapshot(_)
            | EngineError::SnapshotExists(_))
    )
}

fn allowed<T: std::fmt::Debug>(result: Result<T, EngineError>) -> Result<(), TestCaseError> {
    prop_assert!(result.is_ok() || expected_refusal(&result), "{:?}", result);
    Ok(())
}

fn apply(volume: &mut Option<Volume<NullDevice, MemoryDevice>>, op: &Op) -> Result<(), TestCaseError> {
    let current = volume.as_mut().expect("open");
    match *op {
        Op::CreateExtent { slot, blocks } => allowed(current.create_extent(EXTENTS[slot], blocks * BLOCK as u64))?,
        Op::DeleteExtent { slot } => allowed(current.delete_extent(EXTENTS[slot]))?,
        Op::Write { slot, block, blocks, tag } => {
            let Ok(id) = current.extent_id(EXTENTS[slot]) else { return Ok(()) };
            let size_blocks = current.extent_size(id).unwrap() / BLOCK as u64;
            let block = block % size_blocks;
            let blocks = blocks.min(size_blocks - block);
            let bytes = pattern(tag, (blocks as usize) * BLOCK);
            allowed(current.write(id, block * BLOCK as u64, &bytes, false))?;
        }
        Op::Trim { slot, block, blocks } => {
            let Ok(id) = current.extent_id(EXTENTS[slot]) else { return Ok(()) };
            let size_blocks = current.extent_size(id).unwrap() / BLOCK as u64;
            let block = block % size_blocks;
            let blocks = blocks.min(size_blocks - block);
            allowed(current.trim(id, block * BLOCK as u64, blocks * BLOCK as u64, false))?;
        }
        Op::Destage => allowed(current.destage())?,
        Op::Commit => current.commit().unwrap(),
        Op::SnapshotCreate { slot } => allowed(current.create_snapshot(SNAPSHOTS[slot]))?,
        Op::SnapshotDelete { slot } => allowed(current.delete_snapshot(SNAPSHOTS[slot]))?,
        Op::RestoreVolume { slot } => allowed(current.restore_volume(SNAPSHOTS[slot]))?,
        Op::RestoreExtent { snapshot, slot } => allowed(current.restore_extent(SNAPSHOTS[snapshot], EXTENTS[slot]))?,
        Op::Clone { source, snapshot, destination } => {
            let source = match snapshot {
                Some(snapshot) => CloneSource::Snapshot(EXTENTS[source], SNAPSHOTS[snapshot]),
                None => CloneSource::Extent(EXTENTS[source]),
            };
            allowed(current.clone_extent(source, EXTENTS[destination], Overcommit::Allow))?;
        }
        Op::Crash => {
            let (data, flash) = volume.take().expect("open").into_devices();
            *volume = Some(Volume::open(data, flash, options(SnapshotDeletion::Auto)).unwrap());
        }
    }
    Ok(())
}

/// Whether every block's bits over `sequence` read `0*1*0*`; returns the
/// first block that does not.
fn first_010_violation(sequence: &[&BTreeSet<u64>]) -> Option<u64> {
    let all: BTreeSet<u64> = sequence.iter().flat_map(|set| set.iter().copied()).collect();
    all.into_iter().find(|block| {
        let bits: Vec<bool> = sequence.iter().map(|set| set.contains(block)).collect();
        let first = bits.iter().position(|&bit| bit).expect("set somewhere");
        let last = bits.iter().rposition(|&bit| bit).expect("set somewhere");
        bits[first..=last].iter().any(|&bit| !bit)
    })
}

fn check_rules(view: &FreeSpaceView) -> Result<(), TestCaseError> {
    let live: Vec<_> = view.snapshots.iter().filter(|snapshot| snapshot.live).collect();
    // Lemma 2, tree by tree: each map is exactly what its tree points to, so
    // their OR is what the volume points to.
    prop_assert_eq!(&view.data_active, &view.data_pointed, "the activemap is what the active extents point to");
    for snapshot in &live {
        prop_assert_eq!(&snapshot.data_snapmap, &snapshot.data_pointed, "snapmap of #{}", snapshot.id);
    }
    let mut pointed = view.data_pointed.clone();
    for snapshot in &live {
        pointed.extend(&snapshot.data_pointed);
    }
    let covered: BTreeSet<u64> = view.data_active.union(&view.data_summary).copied().collect();
    // Theorem 2.
    let uncovered: Vec<&u64> = pointed.difference(&covered).take(5).collect();
    prop_assert!(uncovered.is_empty(), "pointed to but in neither the activemap nor the summary: {:?}", uncovered);
    // Theorem 1.
    if live.len() == view.snapshots.len() {
        let excess: Vec<&u64> = covered.difference(&pointed).take(5).collect();
        prop_assert!(excess.is_empty(), "no deletion pending, yet held by nothing: {:?}", excess);
    }
    // Theorem 3, for what the engine keeps of a deleted snapshot until its
    // scan ends: its own tree on flash.
    for snapshot in view.snapshots.iter().filter(|snapshot| !snapshot.live) {
        let reusable: Vec<&u64> = snapshot.flash_snapmap.intersection(&view.flash_allocatable).take(5).collect();
        prop_assert!(
            reusable.is_empty(),
            "flash blocks of deleted #{} allocatable mid-scan: {:?}",
            snapshot.id,
            reusable
        );
    }
    // A block the volume points to is never allocatable.
    let reusable: Vec<&u64> = pointed.intersection(&view.data_allocatable).take(5).collect();
    prop_assert!(reusable.is_empty(), "pointed-to data blocks allocatable: {:?}", reusable);
    // Lemma 3.
    let flash: Vec<&BTreeSet<u64>> =
        view.snapshots.iter().map(|snapshot| &snapshot.flash_snapmap).chain([&view.flash_active]).collect();
    prop_assert_eq!(first_010_violation(&flash), None, "flash 010");
    // A deleted snapshot's data blocks are reusable once its scan passed
    // them (nothing reads them any more): the data sequence is the live ones.
    let data: Vec<&BTreeSet<u64>> =
        live.iter().map(|snapshot| &snapshot.data_snapmap).chain([&view.data_active]).collect();
    if let Some(block) = first_010_violation(&data) {
        prop_assert!(view.order_may_be_broken, "data block {} breaks 010 but the volume does not know", block);
        prop_assert!(view.deletion_by_addition, "010 broken: deletions must scan by addition");
    }
    Ok(())
}

/// Finishes the pending deletions of a closed volume's image with `mode`;
/// returns the view after.
fn finish_with(flash: &MemoryDevice, mode: SnapshotDeletion) -> FreeSpaceView {
    let data = NullDevice::new(DATA_BLOCKS);
    let mut volume = Volume::open(data, copy_of(flash), options(mode)).unwrap();
    volume.finish_deletions().unwrap();
    volume.free_space_view().unwrap()
}

thread_local! {
    static PENDING_AT_END: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static BROKEN_SEEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A prelude that makes the 010 property breakable: `a` written, snapshot
/// `s0`, `a` overwritten (its old blocks now only in the summary), snapshot
/// `s1`; a clone from `a@s0` then brings blocks `s1` lacks back.
fn prelude() -> Vec<Op> {
    let whole = |tag| Op::Write { slot: 0, block: 0, blocks: 48, tag };
    vec![
        Op::CreateExtent { slot: 0, blocks: 48 },
        whole(1),
        Op::Destage,
        Op::SnapshotCreate { slot: 0 },
        whole(2),
        Op::Destage,
        Op::SnapshotCreate { slot: 1 },
    ]
}

fn run_case(with_prelude: bool, ops: &[Op]) -> Result<(), TestCaseError> {
    let ops: Vec<Op> =
        if with_prelude { prelude().into_iter().chain(ops.iter().cloned()).collect() } else { ops.to_vec() };
    let volume = Volume::format(
        NullDevice::new(DATA_BLOCKS),
        MemoryDevice::new(4096, FLASH_BLOCKS),
        9,
        options(SnapshotDeletion::Auto),
    )
    .unwrap();
    let mut volume = Some(volume);
    let mut broken = false;
    for op in &ops {
        apply(&mut volume, op)?;
        let view = volume.as_mut().unwrap().free_space_view().unwrap();
        broken |= view.order_may_be_broken;
        check_rules(&view)?;
    }
    if broken {
        BROKEN_SEEN.with(|count| count.set(count.get() + 1));
    }
    let mut volume = volume.take().unwrap();
    let report = volume.fsck_scope(proxima_engine::FsckScope::Metadata).unwrap();
    prop_assert!(report.is_clean(), "fsck: {:#?}", report.findings);
    let (_, flash) = volume.close().unwrap();
    let pending = Volume::open(NullDevice::new(DATA_BLOCKS), copy_of(&flash), options(SnapshotDeletion::Auto))
        .unwrap()
        .pending_deletions();
    if pending > 0 {
        PENDING_AT_END.with(|count| count.set(count.get() + 1));
    }
    // dbys ≡ dbya, from the same image.
    let by_subtraction = finish_with(&flash, SnapshotDeletion::Subtraction);
    let by_addition = finish_with(&flash, SnapshotDeletion::Addition);
    prop_assert_eq!(&by_subtraction.data_summary, &by_addition.data_summary, "dbys and dbya differ");
    prop_assert_eq!(&by_subtraction.data_active, &by_addition.data_active);
    check_rules(&by_subtraction)?;
    check_rules(&by_addition)?;
    Ok(())
}

#[test]
fn scans_keep_the_free_space_rules_and_subtraction_equals_addition() {
    let cases: u32 = std::env::var("PROXIMA_SCAN_CASES").ok().and_then(|value| value.parse().ok()).unwrap_or(1000);
    let rerun = "cargo test --release -p proxima-engine --test integration snapshot_scans::";
    // The seeds side by side, one thread each (a panic in either fails the test).
    std::thread::scope(|scope| {
        for seed in seeds_for_test([20_261_124], "PROXIMA_SCAN_SEED", rerun) {
            scope.spawn(move || sequences_of_one_seed(seed, cases));
        }
    });
}

fn sequences_of_one_seed(seed: u64, cases: u32) {
    println!("snapshot scans: {cases} sequences, seed {seed} (PROXIMA_SCAN_CASES, PROXIMA_SCAN_SEED)");
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes));
    let pending_before = PENDING_AT_END.with(std::cell::Cell::get);
    let broken_before = BROKEN_SEEN.with(std::cell::Cell::get);
    let sequences = (any::<bool>(), proptest::collection::vec(op_strategy(), 1..40));
    if let Err(error) = runner.run(&sequences, |(with_prelude, ops)| run_case(with_prelude, &ops)) {
        panic!("seed {seed}: {error}");
    }
    let pending = PENDING_AT_END.with(std::cell::Cell::get) - pending_before;
    let broken = BROKEN_SEEN.with(std::cell::Cell::get) - broken_before;
    println!("seed {seed}: {pending} sequences ended with a deletion pending, {broken} broke the 010 property");
    assert!(pending > 0, "seed {seed}: some sequences compare the scans on a pending deletion");
    assert!(broken > 0, "seed {seed}: some sequences break the 010 property");
}
