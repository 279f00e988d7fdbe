//! The baseline layouts in the same engine: in-place (a frame array; with its
//! flash write cache, and without one) and write-anywhere (greedy hole
//! plugging), each against the behaviour that defines it.

mod common;

use common::{assert_clean, pattern, BLOCK};
use proxima_device::MemoryDevice;
use proxima_engine::{Layout, Location, Volume, VolumeOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const EXTENT_BLOCKS: u64 = 1024;

fn filled(options: VolumeOptions, extents: u64, data_blocks: u64) -> Volume<MemoryDevice, MemoryDevice> {
    let mut volume =
        Volume::format(MemoryDevice::new(4096, data_blocks), MemoryDevice::new(4096, 4096), 8, options).unwrap();
    for extent in 0..extents {
        let id = volume.create_extent(&format!("e{extent}"), EXTENT_BLOCKS * BLOCK as u64).unwrap();
        for piece in 0..EXTENT_BLOCKS / 256 {
            volume.write(id, piece * 256 * BLOCK as u64, &pattern(extent * 100 + piece, 256 * BLOCK), false).unwrap();
        }
    }
    volume.commit().unwrap();
    volume
}

fn locations(volume: &Volume<MemoryDevice, MemoryDevice>, id: u64) -> Vec<Option<Location>> {
    (0..EXTENT_BLOCKS).map(|block| volume.block_location(id, block).unwrap()).collect()
}

/// Random 1-block updates; returns the last tag written to each block.
fn update(
    volume: &mut Volume<MemoryDevice, MemoryDevice>,
    extents: u64,
    count: u64,
    seed: u64,
) -> std::collections::BTreeMap<(u64, u64), u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut last = std::collections::BTreeMap::new();
    for _ in 0..count {
        let id = rng.gen_range(1..=extents);
        let block = rng.gen_range(0..EXTENT_BLOCKS);
        let tag = rng.gen();
        volume.write(id, block * BLOCK as u64, &pattern(tag, BLOCK), false).unwrap();
        last.insert((id, block), tag);
    }
    last
}

fn check(volume: &mut Volume<MemoryDevice, MemoryDevice>, last: &std::collections::BTreeMap<(u64, u64), u64>) {
    for (&(id, block), &tag) in last {
        assert!(volume.read(id, block * BLOCK as u64, BLOCK as u64).unwrap() == pattern(tag, BLOCK));
    }
}

#[test]
fn in_place_with_its_write_cache_writes_every_block_back_to_its_frame() {
    let options = VolumeOptions { layout: Layout::InPlace, staging_capacity_blocks: 64, ..VolumeOptions::default() };
    let mut volume = filled(options, 4, 16_384);
    let frames: Vec<_> = (1..=4).map(|id| locations(&volume, id)).collect();
    // Even a large overwrite goes through the cache, never to a new place.
    volume.write(1, 0, &pattern(7, 100 * BLOCK), false).unwrap();
    let last = update(&mut volume, 4, 300, 1);
    assert!(volume.stats().destage_count >= 4, "the 64-block cache destaged as it filled");
    volume.destage().unwrap();
    for id in 1..=4 {
        assert_eq!(locations(&volume, id), frames[id as usize - 1], "extent {id} left its frame");
    }
    assert!(volume.read(1, 200 * BLOCK as u64, 1).is_ok());
    check(&mut volume, &last);
    assert_clean(&mut volume);
}

#[test]
fn in_place_without_a_cache_overwrites_in_place_and_copies_out_what_a_snapshot_holds() {
    let options = VolumeOptions { layout: Layout::InPlace, staging_threshold_bytes: 0, ..VolumeOptions::default() };
    let mut volume = filled(options, 2, 8192);
    let frames = locations(&volume, 1);
    volume.write(1, 5 * BLOCK as u64, &pattern(55, BLOCK), false).unwrap();
    assert_eq!(volume.stats().in_place_blocks_written, 1);
    assert_eq!(volume.staging_fill().used_blocks, 0);
    assert_eq!(locations(&volume, 1), frames);
    // A snapshot holds the frame: the overwrite must not destroy its block.
    volume.create_snapshot("s").unwrap();
    volume.write(1, 6 * BLOCK as u64, &pattern(66, BLOCK), false).unwrap();
    assert_eq!(volume.stats().in_place_blocks_written, 1);
    assert_ne!(volume.block_location(1, 6).unwrap(), frames[6]);
    let old = volume.read_snapshot("s", "e0", 6 * BLOCK as u64, BLOCK as u64).unwrap();
    assert!(old == pattern(0, 256 * BLOCK)[6 * BLOCK..7 * BLOCK], "the snapshot's block was overwritten");
    assert!(volume.read(1, 6 * BLOCK as u64, BLOCK as u64).unwrap() == pattern(66, BLOCK));
    assert!(volume.read(1, 5 * BLOCK as u64, BLOCK as u64).unwrap() == pattern(55, BLOCK));
    assert_clean(&mut volume);
}

/// Number of physical runs of every extent, summed.
fn total_runs(volume: &mut Volume<MemoryDevice, MemoryDevice>, extents: u64) -> u64 {
    (1..=extents).map(|id| volume.read_blocks_synthetic(id, 0, EXTENT_BLOCKS).unwrap().run_count()).sum()
}

#[test]
fn write_anywhere_never_stages_and_plugs_the_holes_of_freed_versions() {
    // 7 extents of 1024 blocks on 8192 data blocks: 87.5 % full.
    let options = VolumeOptions { layout: Layout::WriteAnywhere, ..VolumeOptions::default() };
    let mut volume = filled(options, 7, 8192);
    let high_water = (1..=7u64)
        .flat_map(|id| locations(&volume, id))
        .map(|location| match location {
            Some(Location::Data(block)) => block,
            other => panic!("{other:?}"),
        })
        .max()
        .unwrap();
    assert_eq!(high_water, 7 * EXTENT_BLOCKS - 1, "first writes fill the device from the start");
    let mut last = std::collections::BTreeMap::new();
    for round in 0..6 {
        last.extend(update(&mut volume, 7, 500, 10 + round));
        volume.commit().unwrap();
    }
    assert_eq!(volume.stats().staged_blocks_written, 0);
    // 3000 updates on 1024 free blocks: the cursor wrapped and later updates
    // went into holes inside the extents' original space.
    let plugged = last
        .keys()
        .filter(|&&(id, block)| {
            matches!(volume.block_location(id, block).unwrap(), Some(Location::Data(data)) if data <= high_water)
        })
        .count();
    assert!(plugged > last.len() / 2, "{plugged} of {} updated blocks in plugged holes", last.len());
    check(&mut volume, &last);
    assert_clean(&mut volume);
}

#[test]
fn the_same_aging_fragments_write_anywhere_far_more_than_proximal() {
    let mut runs = Vec::new();
    for layout in [Layout::Proximal, Layout::WriteAnywhere] {
        let options = VolumeOptions { layout, staging_capacity_blocks: 256, ..VolumeOptions::default() };
        let mut volume = filled(options, 7, 8192);
        let mut last = std::collections::BTreeMap::new();
        for round in 0..6 {
            last.extend(update(&mut volume, 7, 500, 10 + round));
            volume.commit().unwrap();
        }
        volume.destage().unwrap();
        check(&mut volume, &last);
        runs.push(total_runs(&mut volume, 7));
    }
    assert!(runs[0] <= 7 * 2, "proximal: {} runs", runs[0]);
    assert!(runs[1] > 20 * runs[0], "write-anywhere: {} runs against proximal's {}", runs[1], runs[0]);
}
