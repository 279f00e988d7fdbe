//! Bounded destage steps: a step moves about its budget of staged blocks, the
//! densest allocation-range windows first, and leaves the rest staged; a write
//! that finds the staging area full waits for one such step, not for the whole
//! staging area; nothing is lost either way, across a reopen.

use crate::common;

use common::{assert_clean, pattern, BLOCK};
use proxima_device::MemoryDevice;
use proxima_engine::{Location, Volume, VolumeOptions};

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
