//! An extent filled in random order — a VM image, a database file being
//! created — ends up laid out in logical order once destaged: a window's first
//! blocks go where the logical offset puts them in a fresh allocation range,
//! leaving the places of the blocks still to come free, and every later block
//! continues its neighbours' run. Measured as the mean physical run.

mod common;

use common::{assert_clean, pattern, BLOCK};
use proxima_device::{seeds_for_test, MemoryDevice};
use proxima_engine::{Volume, VolumeOptions};
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
    let rerun = "cargo test --release -p proxima-engine --test random_first_writes_end_up_sequential";
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
