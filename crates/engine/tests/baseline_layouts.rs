//! The baseline layouts in the same engine: in-place (a frame array; with its
//! flash write cache, and without one) and write-anywhere (greedy hole
//! plugging), each against the behaviour that defines it.

use crate::common;

use std::collections::BTreeMap;

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
    let mut volume = filled(options.clone(), 2, 8192);
    let frames = locations(&volume, 1);
    volume.write(1, 5 * BLOCK as u64, &pattern(55, BLOCK), false).unwrap();
    assert_eq!(volume.stats().in_place_blocks_written, 1);
    assert_eq!(volume.staging_fill().used_blocks, 0);
    assert_eq!(locations(&volume, 1), frames);
    // A snapshot holds the frame: its block is copied out, then overwritten.
    volume.create_snapshot("s").unwrap();
    volume.write(1, 6 * BLOCK as u64, &pattern(66, BLOCK), false).unwrap();
    volume.write(1, 6 * BLOCK as u64, &pattern(67, BLOCK), false).unwrap();
    assert_eq!(volume.stats().in_place_blocks_written, 3);
    assert_eq!(volume.stats().copied_out_blocks, 1, "copied once for the snapshot, not per overwrite");
    assert_eq!(locations(&volume, 1), frames, "the live extent stays in its frames");
    let original = pattern(0, 256 * BLOCK)[6 * BLOCK..7 * BLOCK].to_vec();
    assert!(volume.read_snapshot("s", "e0", 6 * BLOCK as u64, BLOCK as u64).unwrap() == original);
    assert!(volume.read(1, 6 * BLOCK as u64, BLOCK as u64).unwrap() == pattern(67, BLOCK));
    assert_clean(&mut volume);
    // The copy is durable: after a restart without a CP the snapshot still
    // reads it, and a second snapshot gets a copy of its own.
    let (data, flash) = volume.into_devices();
    let mut volume = Volume::open(data, flash, options).unwrap();
    assert!(volume.read_snapshot("s", "e0", 6 * BLOCK as u64, BLOCK as u64).unwrap() == original);
    volume.create_snapshot("t").unwrap();
    volume.write(1, 6 * BLOCK as u64, &pattern(68, BLOCK), false).unwrap();
    assert_eq!(volume.space().copied_out_blocks, 2);
    assert!(volume.read_snapshot("t", "e0", 6 * BLOCK as u64, BLOCK as u64).unwrap() == pattern(67, BLOCK));
    assert!(volume.read_snapshot("s", "e0", 6 * BLOCK as u64, BLOCK as u64).unwrap() == original);
    assert_clean(&mut volume);
    // Restoring the older snapshot brings its version back as the live one.
    volume.restore_volume("s").unwrap();
    assert!(volume.read(1, 6 * BLOCK as u64, BLOCK as u64).unwrap() == original);
    assert!(volume.read(1, 5 * BLOCK as u64, BLOCK as u64).unwrap() == pattern(55, BLOCK));
    assert_clean(&mut volume);
    // Deleting the last snapshot frees every copy.
    volume.delete_snapshot("s").unwrap();
    volume.finish_deletions().unwrap();
    assert_eq!(volume.space().copied_out_blocks, 0);
    assert_clean(&mut volume);
}

#[test]
fn in_place_with_its_write_cache_copies_out_on_first_write_and_keeps_every_block_in_its_frame() {
    let options = VolumeOptions { layout: Layout::InPlace, staging_capacity_blocks: 64, ..VolumeOptions::default() };
    let mut volume = filled(options.clone(), 2, 16_384);
    let frames: Vec<_> = (1..=2).map(|id| locations(&volume, id)).collect();
    let before: Vec<Vec<u8>> = (1..=2).map(|id| volume.read(id, 0, EXTENT_BLOCKS * BLOCK as u64).unwrap()).collect();
    volume.create_snapshot("old").unwrap();
    let last = update(&mut volume, 2, 200, 3);
    volume.destage().unwrap();
    for id in 1..=2 {
        assert_eq!(locations(&volume, id), frames[id as usize - 1], "extent {id} left its frame");
        let old = volume.read_snapshot("old", &format!("e{}", id - 1), 0, EXTENT_BLOCKS * BLOCK as u64).unwrap();
        assert!(old == before[id as usize - 1], "snapshot of extent {id} changed");
    }
    let distinct = last.len() as u64;
    assert_eq!(volume.stats().copied_out_blocks, distinct, "one copy per distinct block overwritten");
    check(&mut volume, &last);
    assert_clean(&mut volume);
    // Copies of a restarted volume stay; deleting the snapshot frees them.
    let (data, flash) = volume.into_devices();
    let mut volume = Volume::open(data, flash, options).unwrap();
    assert_eq!(volume.space().copied_out_blocks, distinct);
    volume.delete_snapshot("old").unwrap();
    volume.finish_deletions().unwrap();
    volume.commit().unwrap();
    assert_eq!(volume.space().copied_out_blocks, 0);
    check(&mut volume, &last);
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

/// 3000 updates: every other one to one of 8 hot blocks of extent 1
/// (`hot`), the others to random blocks of extent 2, through a 64-block
/// staging area (about 24 staging areas' worth). Returns the last tag of each
/// block written.
fn hot_and_cold_updates(volume: &mut Volume<MemoryDevice, MemoryDevice>, hot: &[u64]) -> BTreeMap<(u64, u64), u64> {
    let mut last = BTreeMap::new();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for update in 0..3000u64 {
        let (id, block) =
            if update % 2 == 0 { (1, hot[rng.gen_range(0..hot.len())]) } else { (2, rng.gen_range(0..EXTENT_BLOCKS)) };
        volume.write(id, block * BLOCK as u64, &pattern(update, BLOCK), false).unwrap();
        last.insert((id, block), update);
    }
    last
}

#[test]
fn proximal_hot_keeps_hot_blocks_staged_through_destages_and_moves_the_cold_ones() {
    let hot: Vec<u64> = (0..8).map(|index| index * 97).collect();
    let options = |layout| VolumeOptions { layout, staging_capacity_blocks: 64, ..VolumeOptions::default() };
    let mut proximal = filled(options(Layout::Proximal), 2, 16_384);
    hot_and_cold_updates(&mut proximal, &hot);
    proximal.destage().unwrap();
    let mut volume = filled(options(Layout::ProximalHot), 2, 16_384);
    let fresh = locations(&volume, 2);
    let last = hot_and_cold_updates(&mut volume, &hot);
    let destages = volume.stats().destage_count;
    assert!(destages >= 20, "the 64-block staging area destaged as it filled: {destages} times");
    volume.destage().unwrap();
    for &block in &hot {
        assert!(
            matches!(volume.block_location(1, block).unwrap(), Some(Location::Flash(_))),
            "hot block {block} stays staged through the destage"
        );
    }
    // Besides them, only the few random blocks of extent 2 hit twice lately.
    let staged = volume.staging_fill().used_blocks;
    assert!((8..=16).contains(&staged), "{staged} blocks stayed staged");
    let (kept_hot, destaged_all) = (volume.stats().destaged_blocks, proximal.stats().destaged_blocks);
    assert!(
        kept_hot + 100 < destaged_all,
        "the hot blocks cost the disk little: {kept_hot} blocks destaged against the proximal layout's {destaged_all}"
    );
    for (block, location) in locations(&volume, 2).into_iter().enumerate() {
        assert!(
            location == fresh[block] || matches!(location, Some(Location::Flash(_))),
            "block {block} of extent 2 neither went back to its hole nor stayed staged"
        );
    }
    check(&mut volume, &last);
    assert_clean(&mut volume);
}

#[test]
fn proximal_hot_retains_at_most_half_the_staging_area() {
    let options =
        VolumeOptions { layout: Layout::ProximalHot, staging_capacity_blocks: 64, ..VolumeOptions::default() };
    let mut volume = filled(options, 1, 8192);
    // 200 blocks, each written twice in a row: all hot, far more than half
    // the staging area.
    for round in 0..5u64 {
        for block in 0..200u64 {
            for write in 0..2u64 {
                volume
                    .write(
                        1,
                        (round * 200 + block) * BLOCK as u64 % (EXTENT_BLOCKS * BLOCK as u64),
                        &pattern(write, BLOCK),
                        false,
                    )
                    .unwrap();
            }
        }
    }
    volume.destage().unwrap();
    let staged = volume.staging_fill().used_blocks;
    assert!(staged <= 32, "{staged} blocks stayed staged, more than half of 64");
    assert_clean(&mut volume);
}
