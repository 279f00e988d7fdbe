//! An extent filled in random order — a VM image, a database file being
//! created — ends up laid out in logical order once destaged: a window's first
//! blocks go where the logical offset puts them in a fresh allocation range,
//! leaving the places of the blocks still to come free, and every later block
//! continues its neighbours' run. Measured as the mean physical run.

use crate::common;

use common::{assert_clean, pattern, BLOCK};
use proxima_device::{seeds_for_test, MemoryDevice};
use proxima_engine::{Overcommit, Volume, VolumeOptions};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Blocks of the extent: 64 allocation ranges of 256 blocks.
const EXTENT_BLOCKS: u64 = 64 * 256;

fn fill_in_random_order(seed: u64) -> (Volume<MemoryDevice, MemoryDevice>, u64) {
    // A staging area of an eighth of the extent: several destages, each of a
    // scattered eighth of the blocks.
    let options = VolumeOptions { staging_capacity_blocks: EXTENT_BLOCKS / 8, ..VolumeOptions::default() };
    let mut volume =
        Volume::format(MemoryDevice::new(4096, 4 * EXTENT_BLOCKS), MemoryDevice::new(4096, 8192), 21, options)
            .expect("format");
    let id = volume.create_extent("image", EXTENT_BLOCKS * BLOCK as u64).unwrap();
    let mut order: Vec<u64> = (0..EXTENT_BLOCKS).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    for &block in &order {
        volume.write(id, block * BLOCK as u64, &pattern(block, BLOCK), false).unwrap();
    }
    volume.destage().unwrap();
    (volume, id)
}

#[test]
fn an_extent_written_once_in_random_order_is_read_back_in_long_runs() {
    let rerun = "cargo test --release -p proxima-engine --test integration random_first_writes_end_up_sequential::";
    for seed in seeds_for_test([1, 2], "PROXIMA_FIRST_WRITES_SEED", rerun) {
        let (mut volume, id) = fill_in_random_order(seed);
        let extent = volume.extents().into_iter().find(|extent| extent.id == id).unwrap();
        assert_eq!(extent.mapped_block_count, EXTENT_BLOCKS);
        let mean_run_blocks = extent.mapped_block_count / extent.run_count;
        assert!(
            mean_run_blocks >= 64,
            "seed {seed}: mean physical run {mean_run_blocks} blocks ({} runs)",
            extent.run_count
        );
        for block in (0..EXTENT_BLOCKS).step_by(97) {
            assert_eq!(volume.read(id, block * BLOCK as u64, BLOCK as u64).unwrap(), pattern(block, BLOCK));
        }
        assert_clean(&mut volume);
    }
}

/// Free blocks kept in the extents' reservations.
fn reserved_blocks(volume: &Volume<MemoryDevice, MemoryDevice>) -> u64 {
    volume.space().reserved_blocks
}

#[test]
fn a_reservation_outlives_a_reopen_and_keeps_other_writes_out() {
    // "a" gets its first blocks destaged (reserving ranges for all of it),
    // the volume is closed and reopened (the search for empty ranges starts
    // afresh), "b" is written sequentially in large writes (each taking an
    // empty range), then the rest of "a" in random order: "b" kept out of
    // "a"'s reservation, so both are laid out in long runs.
    let rerun = "cargo test --release -p proxima-engine --test integration random_first_writes_end_up_sequential::a_reservation";
    for seed in seeds_for_test([3], "PROXIMA_RESERVATION_SEED", rerun) {
        reservation_outlives_a_reopen(seed);
    }
}

fn reservation_outlives_a_reopen(seed: u64) {
    let options = VolumeOptions { staging_capacity_blocks: EXTENT_BLOCKS / 4, ..VolumeOptions::default() };
    let mut volume =
        Volume::format(MemoryDevice::new(4096, 4 * EXTENT_BLOCKS), MemoryDevice::new(4096, 8192), 22, options.clone())
            .expect("format");
    let a = volume.create_extent("a", EXTENT_BLOCKS * BLOCK as u64).unwrap();
    let b = volume.create_extent("b", EXTENT_BLOCKS * BLOCK as u64).unwrap();
    // "a"'s first writes touch only its last eighth: most of its reservation
    // is empty ranges, which a search for empty ranges would otherwise take.
    let mut order: Vec<u64> = (0..EXTENT_BLOCKS).collect();
    let (rest, first) = order.split_at_mut(EXTENT_BLOCKS as usize * 7 / 8);
    let mut random = ChaCha8Rng::seed_from_u64(seed);
    first.shuffle(&mut random);
    rest.shuffle(&mut random);
    let (rest, first) = (&*rest, &*first);
    let write_a = |volume: &mut Volume<MemoryDevice, MemoryDevice>, blocks: &[u64]| {
        for &block in blocks {
            volume.write(a, block * BLOCK as u64, &pattern(block, BLOCK), false).unwrap();
        }
        volume.destage().unwrap();
    };
    write_a(&mut volume, first);
    assert_eq!(reserved_blocks(&volume), EXTENT_BLOCKS - first.len() as u64, "a's ranges, less what it wrote");
    let (data, flash) = volume.close().unwrap();
    let mut volume = Volume::open(data, flash, options).unwrap();
    assert_eq!(reserved_blocks(&volume), EXTENT_BLOCKS - first.len() as u64, "the reservation is in a's record");
    let piece_blocks = 256;
    for first_block in (0..EXTENT_BLOCKS).step_by(piece_blocks) {
        let bytes = pattern(EXTENT_BLOCKS + first_block, piece_blocks * BLOCK);
        volume.write(b, first_block * BLOCK as u64, &bytes, false).unwrap();
    }
    write_a(&mut volume, rest);
    assert_eq!(reserved_blocks(&volume), 0, "every reserved block is written at the end");
    for id in [a, b] {
        let extent = volume.extents().into_iter().find(|extent| extent.id == id).unwrap();
        assert_eq!(extent.mapped_block_count, EXTENT_BLOCKS);
        let mean_run_blocks = extent.mapped_block_count / extent.run_count;
        assert!(mean_run_blocks >= 64, "seed {seed}, extent #{id}: mean physical run {mean_run_blocks} blocks");
    }
    for block in (0..EXTENT_BLOCKS).step_by(89) {
        assert_eq!(volume.read(a, block * BLOCK as u64, BLOCK as u64).unwrap(), pattern(block, BLOCK));
    }
    assert_clean(&mut volume);
}

#[test]
fn reservations_give_way_when_only_reserved_ranges_are_left() {
    // Extent "a" reserves as many ranges as it has windows but writes one
    // block; "b" then needs fresh ranges for large writes beyond what is
    // unreserved: it takes the reserved ones, releasing "a"'s reservation,
    // and every write succeeds.
    let options = VolumeOptions { staging_capacity_blocks: 1024, ..VolumeOptions::default() };
    let data_blocks = 2 * EXTENT_BLOCKS;
    let mut volume = Volume::format(MemoryDevice::new(4096, data_blocks), MemoryDevice::new(4096, 8192), 23, options)
        .expect("format");
    let a = volume.create_extent("a", EXTENT_BLOCKS * BLOCK as u64).unwrap();
    volume.write(a, 0, &pattern(1, BLOCK), false).unwrap();
    volume.destage().unwrap();
    let reserved = reserved_blocks(&volume);
    assert_eq!(reserved, EXTENT_BLOCKS - 1, "a's reservation: its whole size, less the block written");
    // A thin "b" larger than what is left outside the reservation.
    let b_blocks = data_blocks - EXTENT_BLOCKS / 2;
    let b = volume.create_extent_with("b", b_blocks * BLOCK as u64, Overcommit::Allow).unwrap();
    let piece_blocks = 256;
    for first in (0..b_blocks).step_by(piece_blocks) {
        let count = (b_blocks - first).min(piece_blocks as u64);
        volume.write(b, first * BLOCK as u64, &pattern(first, count as usize * BLOCK), false).unwrap();
    }
    volume.destage().unwrap();
    assert_eq!(reserved_blocks(&volume), 0, "the reservation was released under pressure");
    assert_eq!(volume.read(a, 0, BLOCK as u64).unwrap(), pattern(1, BLOCK));
    assert_eq!(volume.read(b, 0, BLOCK as u64).unwrap()[..BLOCK], pattern(0, piece_blocks * BLOCK)[..BLOCK]);
    assert_clean(&mut volume);
}
