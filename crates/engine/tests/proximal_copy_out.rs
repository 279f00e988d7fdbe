//! The proximal layout's copy-out (`VolumeOptions::proximal_copy_out`): a
//! destaged block whose older version a snapshot reads at the block's place
//! copies that version out beside it, then takes the place, so the live data
//! keeps its layout and the snapshots' versions lie in the same allocation
//! ranges.

use crate::common;

use std::collections::BTreeSet;

use common::{assert_clean, pattern, BLOCK};
use proxima_device::{seeds_for_test, MemoryDevice};
use proxima_engine::{Layout, Location, Volume, VolumeOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const EXTENT_BLOCKS: u64 = 1024;
const RANGE_BLOCKS: u64 = 64;

fn options(copy_out: bool) -> VolumeOptions {
    VolumeOptions {
        staging_capacity_blocks: 64,
        allocation_range_blocks: RANGE_BLOCKS,
        // Room in every range for the versions snapshots keep.
        range_reserve_fraction: 0.25,
        proximal_copy_out: copy_out,
        ..VolumeOptions::default()
    }
}

/// Two extents written whole, committed; their contents.
fn filled(options: VolumeOptions) -> (Volume<MemoryDevice, MemoryDevice>, Vec<Vec<u8>>) {
    let mut volume = Volume::format(MemoryDevice::new(4096, 8192), MemoryDevice::new(4096, 4096), 5, options).unwrap();
    let mut contents = Vec::new();
    for extent in 0..2 {
        let id = volume.create_extent(&format!("e{extent}"), EXTENT_BLOCKS * BLOCK as u64).unwrap();
        let bytes = pattern(extent, EXTENT_BLOCKS as usize * BLOCK);
        volume.write(id, 0, &bytes, false).unwrap();
        contents.push(bytes);
    }
    volume.commit().unwrap();
    (volume, contents)
}

fn locations(volume: &Volume<MemoryDevice, MemoryDevice>, id: u64) -> Vec<Option<Location>> {
    (0..EXTENT_BLOCKS).map(|block| volume.block_location(id, block).unwrap()).collect()
}

/// `count` random 1-block updates of both extents, each of a block not
/// updated before in the call (the first overwrite since the last snapshot,
/// which the copy-out is about), applied to `contents`; returns `count`.
fn update(volume: &mut Volume<MemoryDevice, MemoryDevice>, contents: &mut [Vec<u8>], count: u64, seed: u64) -> u64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut updated = BTreeSet::new();
    while (updated.len() as u64) < count {
        let extent = rng.gen_range(0..2usize);
        let block = rng.gen_range(0..EXTENT_BLOCKS) as usize;
        if !updated.insert((extent, block)) {
            continue;
        }
        let bytes = pattern(rng.gen(), BLOCK);
        volume.write(extent as u64 + 1, (block * BLOCK) as u64, &bytes, false).unwrap();
        contents[extent][block * BLOCK..(block + 1) * BLOCK].copy_from_slice(&bytes);
    }
    count
}

fn read_all(volume: &mut Volume<MemoryDevice, MemoryDevice>, snapshot: Option<&str>, extent: usize) -> Vec<u8> {
    let length = EXTENT_BLOCKS * BLOCK as u64;
    match snapshot {
        Some(snapshot) => volume.read_snapshot(snapshot, &format!("e{extent}"), 0, length).unwrap(),
        None => volume.read(extent as u64 + 1, 0, length).unwrap(),
    }
}

#[test]
fn destaged_blocks_take_their_places_back_and_the_snapshot_versions_stay_in_their_ranges() {
    let rerun = "cargo test --release -p proxima-engine --test integration proximal_copy_out::";
    for seed in seeds_for_test([1], "PROXIMA_COPY_OUT_SEED", rerun) {
        two_generations_go_home(seed);
    }
}

/// Two generations of random updates, each under a snapshot taken before
/// it, drawn from `seed`.
fn two_generations_go_home(seed: u64) {
    let (mut volume, mut contents) = filled(options(true));
    let places: Vec<_> = (1..=2).map(|id| locations(&volume, id)).collect();
    let old = contents.clone();
    volume.create_snapshot("old").unwrap();
    let distinct = update(&mut volume, &mut contents, 300, seed);
    volume.destage().unwrap();
    for id in 1..=2 {
        assert_eq!(locations(&volume, id), places[id as usize - 1], "seed {seed}: extent {id} keeps its places");
    }
    assert_eq!(volume.stats().copied_out_blocks, distinct, "one copy per distinct block a snapshot reads");
    for extent in 0..2 {
        assert!(read_all(&mut volume, None, extent) == contents[extent], "live e{extent}");
        assert!(read_all(&mut volume, Some("old"), extent) == old[extent], "snapshot of e{extent}");
    }
    assert_clean(&mut volume);

    // A second generation: the places hold the new versions, which the
    // younger snapshot reads; each snapshot reads its own copies.
    let middle = contents.clone();
    volume.create_snapshot("middle").unwrap();
    let again = update(&mut volume, &mut contents, 300, seed.wrapping_add(1));
    volume.destage().unwrap();
    for id in 1..=2 {
        assert_eq!(locations(&volume, id), places[id as usize - 1], "seed {seed}: extent {id} keeps its places again");
    }
    assert_eq!(volume.stats().copied_out_blocks, distinct + again);
    for extent in 0..2 {
        assert!(read_all(&mut volume, Some("old"), extent) == old[extent]);
        assert!(read_all(&mut volume, Some("middle"), extent) == middle[extent]);
        assert!(read_all(&mut volume, None, extent) == contents[extent]);
    }
    assert_clean(&mut volume);

    // Durable across a restart; deleting the snapshots frees every copy.
    let (data, flash) = volume.into_devices();
    let mut volume = Volume::open(data, flash, options(true)).unwrap();
    assert_eq!(volume.space().copied_out_blocks, distinct + again);
    assert!(read_all(&mut volume, Some("old"), 1) == old[1]);
    for name in ["old", "middle"] {
        volume.delete_snapshot(name).unwrap();
    }
    volume.finish_deletions().unwrap();
    volume.commit().unwrap();
    assert_eq!(volume.space().copied_out_blocks, 0);
    assert!(read_all(&mut volume, None, 0) == contents[0]);
    assert_clean(&mut volume);
}

#[test]
fn each_copy_lies_in_the_allocation_range_of_its_place() {
    let (mut volume, mut contents) = filled(options(true));
    volume.create_snapshot("old").unwrap();
    update(&mut volume, &mut contents, 200, 3);
    volume.destage().unwrap();
    let copies = volume.copy_out_places();
    assert!(!copies.is_empty());
    for (frame, copy) in copies {
        assert_eq!(frame / RANGE_BLOCKS, copy / RANGE_BLOCKS, "the copy of block {frame} is at {copy}");
    }
}

#[test]
fn without_copy_out_updated_blocks_leave_the_places_snapshots_hold() {
    let (mut volume, mut contents) = filled(options(false));
    let places: Vec<_> = (1..=2).map(|id| locations(&volume, id)).collect();
    volume.create_snapshot("old").unwrap();
    update(&mut volume, &mut contents, 300, 1);
    volume.destage().unwrap();
    let moved = (1..=2u64)
        .map(|id| locations(&volume, id).iter().zip(&places[id as usize - 1]).filter(|(now, was)| now != was).count())
        .sum::<usize>();
    assert!(moved > 100, "{moved} blocks moved");
    assert_eq!(volume.stats().copied_out_blocks, 0);
    assert!(read_all(&mut volume, None, 0) == contents[0]);
    assert_clean(&mut volume);
}

#[test]
fn copy_out_is_refused_for_other_layouts() {
    for layout in [Layout::InPlace, Layout::WriteAnywhere, Layout::Lfs] {
        let options = VolumeOptions { layout, ..options(true) };
        let refused = Volume::format(MemoryDevice::new(4096, 8192), MemoryDevice::new(4096, 4096), 5, options);
        let message = refused.expect_err("refused").to_string();
        assert!(message.contains("proximal_copy_out"), "{message}");
    }
}
