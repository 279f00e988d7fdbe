//! Reading through gaps (`VolumeOptions::read_gap_blocks`): a read that
//! takes the blocks between the places it needs returns exactly what a read
//! without gaps returns, live and as of a snapshot, through `&mut` and shared
//! reads, in fewer data-device requests; and a damaged block inside such a
//! read is still caught and repaired from the array's parity.

use crate::common;

use common::{member_of, pattern, BLOCK};
use proxima_device::{seeds_for_test, BlockDevice, MemoryDevice, RaidConfig, RaidDevice};
use proxima_engine::{Layout, Location, Volume, VolumeOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const EXTENT_BLOCKS: u64 = 1024;
const EXTENT_BYTES: u64 = EXTENT_BLOCKS * BLOCK as u64;

fn options(layout: Layout, read_gap_blocks: u64) -> VolumeOptions {
    VolumeOptions { layout, allocation_range_blocks: 64, read_gap_blocks, ..VolumeOptions::default() }
}

fn raid_of(members: Vec<MemoryDevice>) -> RaidDevice<MemoryDevice> {
    RaidDevice::new(members, RaidConfig::raid5().with_stripe_unit_bytes(64 * 1024)).unwrap()
}

fn raid() -> RaidDevice<MemoryDevice> {
    raid_of((0..5).map(|_| MemoryDevice::new(4096, 2048)).collect())
}

/// A copy of an array of memory members.
fn copy(raid: &RaidDevice<MemoryDevice>) -> RaidDevice<MemoryDevice> {
    raid_of(raid.members().cloned().collect())
}

/// An extent written whole on `data`, snapshot `s`, then 400 random block
/// updates (destaged), which move blocks away from their neighbours: returns
/// the devices and the extent's contents before and after the updates.
fn scattered<D: BlockDevice>(data: D, layout: Layout, seed: u64) -> (D, MemoryDevice, Vec<u8>, Vec<u8>) {
    let mut volume = Volume::format(data, MemoryDevice::new(4096, 4096), 11, options(layout, 0)).unwrap();
    let id = volume.create_extent("e", EXTENT_BYTES).unwrap();
    let before = pattern(seed, EXTENT_BYTES as usize);
    volume.write(id, 0, &before, true).unwrap();
    volume.create_snapshot("s").unwrap();
    let mut after = before.clone();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for update in 0..400u64 {
        let block = rng.gen_range(0..EXTENT_BLOCKS) as usize;
        let bytes = pattern(seed ^ (update + 1) << 20, BLOCK);
        volume.write(id, (block * BLOCK) as u64, &bytes, false).unwrap();
        after[block * BLOCK..(block + 1) * BLOCK].copy_from_slice(&bytes);
    }
    volume.destage().unwrap();
    let (data, flash) = volume.close().unwrap();
    (data, flash, before, after)
}

/// How to run these tests again with the seed in `PROXIMA_READ_GAP_SEED`.
const RERUN: &str = "cargo test --release -p proxima-engine --test integration reads_through_gaps::";

#[test]
fn reads_through_gaps_return_what_reads_without_them_return() {
    for seed in seeds_for_test([1, 2], "PROXIMA_READ_GAP_SEED", RERUN) {
        for layout in [Layout::Proximal, Layout::WriteAnywhere] {
            let (data, flash, before, after) = scattered(MemoryDevice::new(4096, 8192), layout, seed);
            let mut requests = Vec::new();
            for gap in [0, 16] {
                let mut volume = Volume::open(data.clone(), flash.clone(), options(layout, gap)).unwrap();
                let id = volume.extent_id("e").unwrap();
                assert_eq!(volume.read(id, 0, EXTENT_BYTES).unwrap(), after, "{layout:?}, gap {gap}, seed {seed}");
                // Unaligned pieces: partial blocks at both ends.
                let (offset, length) = (3 * BLOCK as u64 + 100, 300 * BLOCK as u64 + 7);
                let piece = &after[offset as usize..(offset + length) as usize];
                assert_eq!(volume.read(id, offset, length).unwrap(), piece, "{layout:?}, gap {gap}, seed {seed}");
                let mut shared = vec![0; length as usize];
                volume.read_shared(id, offset, &mut shared).unwrap();
                assert_eq!(shared, piece, "{layout:?}, gap {gap}, seed {seed}: a shared read");
                assert_eq!(volume.read_snapshot("s", "e", 0, EXTENT_BYTES).unwrap(), before, "{layout:?}, gap {gap}");
                requests.push(volume.read_blocks_synthetic(id, 0, EXTENT_BLOCKS).unwrap().data_request_count);
            }
            assert!(
                requests[1] < requests[0],
                "{layout:?}, seed {seed}: gaps read through save requests: {requests:?}"
            );
        }
    }
}

#[test]
fn a_damaged_block_read_through_a_gap_is_repaired_from_parity() {
    for seed in seeds_for_test([7], "PROXIMA_READ_GAP_SEED", RERUN) {
        damaged_block_is_repaired(seed);
    }
}

fn damaged_block_is_repaired(seed: u64) {
    let (mut data, flash, _, after) = scattered(raid(), Layout::Proximal, seed);
    let volume = Volume::open(copy(&data), flash.clone(), options(Layout::Proximal, 16)).unwrap();
    let id = volume.extent_id("e").unwrap();
    // A block whose neighbour moved: its read joins the moved one's through a gap.
    let moved = (1..EXTENT_BLOCKS)
        .find(|&block| {
            let place = |block| match volume.block_location(id, block).unwrap() {
                Some(Location::Data(place)) => place,
                other => panic!("block {block} is on the data device: {other:?}"),
            };
            place(block) != place(block - 1) + 1
        })
        .expect("updates moved a block");
    let Some(Location::Data(damaged)) = volume.block_location(id, moved - 1).unwrap() else { panic!("a data block") };
    drop(volume);
    let mut block = data.read_blocks(damaged, 1).unwrap();
    block[4000] ^= 0x80;
    // Damage one member's copy only: write through a member, not the array.
    let (member, member_block) = member_of(&mut data, damaged);
    data.member_mut(member).write_blocks(member_block, &block).unwrap();
    let mut volume = Volume::open(data, flash, options(Layout::Proximal, 16)).unwrap();
    assert_eq!(volume.read(id, 0, EXTENT_BYTES).unwrap(), after, "seed {seed}");
    assert_eq!(volume.stats().repaired_blocks, 1, "seed {seed}");
}
