//! Bounded destage steps: a step moves about its budget of staged blocks, the
//! densest allocation-range windows first, and leaves the rest staged; a write
//! that finds the staging area full waits for one such step, not for the whole
//! staging area; nothing is lost either way, across a reopen.

use crate::common;

use common::{assert_clean, pattern, Recorder, BLOCK};
use proxima_device::{BlockDevice, IoOp, MemoryDevice};
use proxima_engine::{DestagePlan, Location, PiecePrefetch, Volume, VolumeOptions};

const WINDOW_BLOCKS: u64 = 256;

fn volume_with(options: VolumeOptions) -> Volume<MemoryDevice, MemoryDevice> {
    Volume::format(MemoryDevice::new(4096, 16384), MemoryDevice::new(4096, 4096), 12, options).expect("format")
}

fn is_staged(volume: &Volume<MemoryDevice, MemoryDevice>, id: u64, block: u64) -> bool {
    matches!(volume.block_location(id, block).unwrap(), Some(Location::Flash(_)))
}

#[test]
fn a_step_moves_the_densest_windows_and_leaves_the_sparse_ones_staged() {
    let mut volume = volume_with(VolumeOptions { auto_destage: false, ..VolumeOptions::default() });
    let id = volume.create_extent("e", 8 * WINDOW_BLOCKS * BLOCK as u64).unwrap();
    volume.write(id, 0, &pattern(0, (8 * WINDOW_BLOCKS) as usize * BLOCK), false).unwrap();
    // Window 1: 40 staged blocks; window 5: 30; window 6: 3.
    let dense: Vec<u64> = (0..40).map(|i| WINDOW_BLOCKS + 3 * i).collect();
    let middle: Vec<u64> = (0..30).map(|i| 5 * WINDOW_BLOCKS + 5 * i).collect();
    let sparse: Vec<u64> = vec![6 * WINDOW_BLOCKS, 6 * WINDOW_BLOCKS + 100, 7 * WINDOW_BLOCKS - 1];
    for (seed, &block) in dense.iter().chain(&middle).chain(&sparse).enumerate() {
        volume.write(id, block * BLOCK as u64, &pattern(1000 + seed as u64, BLOCK), false).unwrap();
    }
    assert_eq!(volume.staging_fill().used_blocks, 73);

    let step = volume.destage_step(35).unwrap();
    assert_eq!(step.user_blocks, 40, "the densest window, whole");
    assert_eq!(step.batch_count, 1);
    assert!(dense.iter().all(|&block| !is_staged(&volume, id, block)));
    assert!(middle.iter().chain(&sparse).all(|&block| is_staged(&volume, id, block)));
    assert_eq!(volume.staging_fill().used_blocks, 33);

    let step = volume.destage_step(31).unwrap();
    assert_eq!(step.user_blocks, 33, "windows are taken whole until the budget is met");
    assert_eq!(volume.staging_fill().used_blocks, 0);
    assert_eq!(volume.destage_step(10).unwrap().user_blocks, 0, "nothing left to move");

    for (seed, &block) in dense.iter().chain(&middle).chain(&sparse).enumerate() {
        assert_eq!(volume.read(id, block * BLOCK as u64, BLOCK as u64).unwrap(), pattern(1000 + seed as u64, BLOCK));
    }
    // The blocks went back to the holes their older versions left.
    let fragmentation = volume.extents()[0].run_count;
    assert_eq!(fragmentation, 1, "the extent is one physical run again");
    assert_clean(&mut volume);
}

#[test]
fn a_write_that_finds_the_staging_area_full_waits_for_one_step_only() {
    let options = VolumeOptions {
        staging_capacity_blocks: 512,
        destage_step_blocks: 64,
        records_per_checkpoint: 0,
        ..VolumeOptions::default()
    };
    let mut volume = volume_with(options.clone());
    let id = volume.create_extent("e", 16 * WINDOW_BLOCKS * BLOCK as u64).unwrap();
    volume.write(id, 0, &pattern(0, (16 * WINDOW_BLOCKS) as usize * BLOCK), false).unwrap();
    // 600 single-block updates spread over every window: the 513th finds the
    // staging area full.
    let blocks: Vec<u64> = (0..600u64).map(|i| (i * 37) % (16 * WINDOW_BLOCKS)).collect();
    let mut expected = std::collections::HashMap::new();
    let mut least_after_a_destage = u64::MAX;
    for (seed, &block) in blocks.iter().enumerate() {
        let destages = volume.stats().destage_count;
        volume.write(id, block * BLOCK as u64, &pattern(5000 + seed as u64, BLOCK), false).unwrap();
        expected.insert(block, 5000 + seed as u64);
        let used = volume.staging_fill().used_blocks;
        assert!(used <= 512, "the staging capacity holds");
        if volume.stats().destage_count > destages {
            least_after_a_destage = least_after_a_destage.min(used);
        }
    }
    assert!(volume.stats().destage_count >= 1, "the staging area filled");
    assert!(
        least_after_a_destage >= 512 - 64 - WINDOW_BLOCKS,
        "a write's destage moved about one step, not the whole staging area: {least_after_a_destage} staged after it"
    );
    for (&block, &seed) in &expected {
        assert!(
            volume.read(id, block * BLOCK as u64, BLOCK as u64).unwrap() == pattern(seed, BLOCK),
            "block {block} before reopen"
        );
    }
    volume.flush().unwrap();
    let (data, flash) = volume.into_devices();
    let mut volume = Volume::open(data, flash, options).expect("reopen");
    for (&block, &seed) in &expected {
        assert!(volume.read(id, block * BLOCK as u64, BLOCK as u64).unwrap() == pattern(seed, BLOCK), "block {block}");
    }
    assert_clean(&mut volume);
}

/// A volume with a recorded flash device and `staged` blocks 0, 2, 4, …
/// of one extent staged over a sequential first write, and the plan of a
/// step moving all of them.
fn staged_for_a_piece(staged: u64) -> (Volume<MemoryDevice, Recorder<MemoryDevice>>, u64, DestagePlan) {
    let options = VolumeOptions { auto_destage: false, records_per_checkpoint: 0, ..VolumeOptions::default() };
    let mut volume =
        Volume::format(MemoryDevice::new(4096, 16384), Recorder::new(MemoryDevice::new(4096, 4096)), 12, options)
            .expect("format");
    let id = volume.create_extent("e", 4 * WINDOW_BLOCKS * BLOCK as u64).unwrap();
    volume.write(id, 0, &pattern(0, (4 * WINDOW_BLOCKS) as usize * BLOCK), false).unwrap();
    for index in 0..staged {
        volume.write(id, 2 * index * BLOCK as u64, &pattern(100 + index, BLOCK), false).unwrap();
    }
    volume.commit().unwrap();
    let plan = volume.plan_destage_step(staged);
    (volume, id, plan)
}

/// The next piece of `plan` (32 blocks), read through shared access.
fn read_ahead(volume: &Volume<MemoryDevice, Recorder<MemoryDevice>>, plan: &DestagePlan) -> PiecePrefetch {
    let read = volume.plan_piece_read(plan, 32).expect("a piece to read");
    let flash = volume.flash_device();
    read.read_with(|block, buffer| flash.read_into_shared(block, buffer)).unwrap()
}

/// Blocks `2 × index` for every index of `indexes` read what
/// [`staged_for_a_piece`] staged there.
fn assert_staged_versions_read_back(
    volume: &mut Volume<MemoryDevice, Recorder<MemoryDevice>>,
    id: u64,
    indexes: std::ops::Range<u64>,
) {
    for index in indexes {
        assert_eq!(volume.read(id, 2 * index * BLOCK as u64, BLOCK as u64).unwrap(), pattern(100 + index, BLOCK));
    }
}

fn flash_reads(volume: &Volume<MemoryDevice, Recorder<MemoryDevice>>, since: usize) -> usize {
    volume.flash_device().batches[since..].iter().flatten().filter(|request| request.op == IoOp::Read).count()
}

#[test]
fn a_piece_read_ahead_is_destaged_without_reading_flash_again() {
    let (mut volume, id, mut plan) = staged_for_a_piece(32);
    let prefetch = read_ahead(&volume, &plan);
    assert_eq!(prefetch.block_count(), 32);
    let before = volume.flash_device().batches.len();
    let moved = volume.destage_planned_with(&mut plan, 32, Some(&prefetch)).unwrap();
    assert_eq!(moved.user_blocks, 32);
    assert_eq!(flash_reads(&volume, before), 0, "the staged bytes came from the read-ahead");
    assert_staged_versions_read_back(&mut volume, id, 0..32);
    assert_clean(&mut volume);
}

#[test]
fn what_changed_after_the_read_ahead_is_destaged_as_it_is_now() {
    let (mut volume, id, mut plan) = staged_for_a_piece(32);
    let prefetch = read_ahead(&volume, &plan);
    // Overwritten (staged elsewhere), trimmed, and overwritten twice over:
    // the read-ahead holds none of these versions.
    volume.write(id, 0, &pattern(900, BLOCK), false).unwrap();
    volume.trim(id, 2 * BLOCK as u64, BLOCK as u64, false).unwrap();
    volume.write(id, 4 * BLOCK as u64, &pattern(901, BLOCK), false).unwrap();
    volume.write(id, 4 * BLOCK as u64, &pattern(902, BLOCK), false).unwrap();
    volume.destage_planned_with(&mut plan, 32, Some(&prefetch)).unwrap();
    assert_eq!(volume.read(id, 0, BLOCK as u64).unwrap(), pattern(900, BLOCK));
    assert_eq!(volume.read(id, 2 * BLOCK as u64, BLOCK as u64).unwrap(), vec![0; BLOCK]);
    assert_eq!(volume.read(id, 4 * BLOCK as u64, BLOCK as u64).unwrap(), pattern(902, BLOCK));
    assert_staged_versions_read_back(&mut volume, id, 3..32);
    assert_clean(&mut volume);
}

#[test]
fn a_checkpoint_after_the_read_ahead_sets_it_aside() {
    let (mut volume, id, mut plan) = staged_for_a_piece(32);
    let prefetch = read_ahead(&volume, &plan);
    // After a CP a freed staged block may be reused for another write of
    // the same block: the read-ahead's bytes of it are stale.
    volume.write(id, 0, &pattern(900, BLOCK), false).unwrap();
    volume.commit().unwrap();
    volume.write(id, 0, &pattern(901, BLOCK), false).unwrap();
    let before = volume.flash_device().batches.len();
    volume.destage_planned_with(&mut plan, 32, Some(&prefetch)).unwrap();
    assert!(flash_reads(&volume, before) > 0, "read from flash again");
    assert_eq!(volume.read(id, 0, BLOCK as u64).unwrap(), pattern(901, BLOCK));
    assert_staged_versions_read_back(&mut volume, id, 1..32);
    assert_clean(&mut volume);
}
