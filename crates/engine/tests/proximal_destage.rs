//! The proximal destage on the engine: one batch per extent, issued as one
//! strand in ascending block order; staged blocks return to the allocation
//! range of their logical neighbours (into the holes their older versions
//! left), or to the nearest range with room when a snapshot keeps those holes;
//! large writes fill allocation ranges up to the reserve fraction.

use crate::common;

use common::{assert_clean, pattern, Recorder, BLOCK};
use proxima_device::{IoOp, MemoryDevice};
use proxima_engine::{DestageBatchReport, DestageObserver, Location, Volume, VolumeOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const EXTENT_BLOCKS: u64 = 1024;
const EXTENTS: u64 = 4;

type RecordedVolume = Volume<Recorder<MemoryDevice>, MemoryDevice>;

fn filled_volume(options: VolumeOptions) -> RecordedVolume {
    let mut volume =
        Volume::format(Recorder::new(MemoryDevice::new(4096, 16_384)), MemoryDevice::new(4096, 4096), 5, options)
            .unwrap();
    for extent in 0..EXTENTS {
        let id = volume.create_extent(&format!("e{extent}"), EXTENT_BLOCKS * BLOCK as u64).unwrap();
        for piece in 0..EXTENT_BLOCKS / 256 {
            let bytes = pattern(extent * 1000 + piece, 256 * BLOCK);
            volume.write(id, piece * 256 * BLOCK as u64, &bytes, false).unwrap();
        }
    }
    volume.commit().unwrap();
    volume
}

fn data_location(volume: &RecordedVolume, id: u64, block: u64) -> u64 {
    match volume.block_location(id, block).unwrap() {
        Some(Location::Data(data_block)) => data_block,
        other => panic!("block {block} of extent {id} is at {other:?}"),
    }
}

/// Stages `count` random 1-block updates per extent (seeded); returns them.
fn stage_updates(volume: &mut RecordedVolume, count: u64, seed: u64) -> Vec<(u64, u64, u64)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut updates = Vec::new();
    for _ in 0..count * EXTENTS {
        let id = rng.gen_range(1..=EXTENTS);
        let block = rng.gen_range(0..EXTENT_BLOCKS);
        let tag = rng.gen();
        volume.write(id, block * BLOCK as u64, &pattern(tag, BLOCK), false).unwrap();
        updates.push((id, block, tag));
    }
    updates
}

#[derive(Default)]
struct Batches {
    reports: Vec<DestageBatchReport>,
    before: usize,
}

impl DestageObserver<Recorder<MemoryDevice>> for Batches {
    fn before_batch(&mut self, data: &mut Recorder<MemoryDevice>) {
        self.before += 1;
        data.batches.clear();
    }

    fn after_batch(&mut self, data: &mut Recorder<MemoryDevice>, batch: &DestageBatchReport) {
        // The batch is exactly one submission to the data device: a strand of
        // writes in ascending block order, adjacent blocks coalesced.
        assert_eq!(data.batches.len(), 1, "one data-device batch per extent");
        let strand = &data.batches[0];
        assert!(strand.iter().all(|request| request.op == IoOp::Write));
        assert!(strand.windows(2).all(|pair| pair[0].block + u64::from(pair[0].block_count) < pair[1].block));
        assert_eq!(strand.len() as u64, batch.data_request_count);
        assert_eq!(strand.iter().map(|request| u64::from(request.block_count)).sum::<u64>(), batch.user_blocks);
        self.reports.push(batch.clone());
    }
}

#[test]
fn large_writes_lay_extents_out_sequentially_in_allocation_ranges() {
    let volume = filled_volume(VolumeOptions::default());
    for id in 1..=EXTENTS {
        let first = data_location(&volume, id, 0);
        assert_eq!(first % 256, 0, "an extent starts a range");
        for block in 0..EXTENT_BLOCKS {
            assert_eq!(data_location(&volume, id, block), first + block);
        }
    }
}

#[test]
fn the_reserve_fraction_leaves_room_in_every_range_at_first_write() {
    let options = VolumeOptions { range_reserve_fraction: 0.25, ..VolumeOptions::default() };
    let volume = filled_volume(options);
    for id in 1..=EXTENTS {
        let mut per_range = std::collections::BTreeMap::new();
        for block in 0..EXTENT_BLOCKS {
            *per_range.entry(data_location(&volume, id, block) / 256).or_insert(0u64) += 1;
        }
        assert!(per_range.values().all(|&count| count <= 192), "{per_range:?}");
        assert_eq!(per_range.len() as u64, EXTENT_BLOCKS.div_ceil(192));
    }
}

#[test]
fn destage_writes_one_ascending_strand_per_extent_and_returns_blocks_to_their_holes() {
    let mut volume = filled_volume(VolumeOptions::default());
    let homes: Vec<Vec<u64>> =
        (1..=EXTENTS).map(|id| (0..EXTENT_BLOCKS).map(|block| data_location(&volume, id, block)).collect()).collect();
    let updates = stage_updates(&mut volume, 60, 7);
    let staged = volume.staging_fill().used_blocks;
    assert!(staged > 0);
    let mut batches = Batches::default();
    let summary = volume.destage_observed(&mut batches).unwrap();
    assert_eq!(summary.user_blocks, staged);
    assert_eq!(summary.batch_count, EXTENTS);
    assert_eq!(batches.before, EXTENTS as usize);
    let order: Vec<u64> = batches.reports.iter().map(|report| report.extent_id).collect();
    assert_eq!(order, (1..=EXTENTS).collect::<Vec<_>>(), "extents in order");
    assert_eq!(volume.staging_fill().used_blocks, 0);
    // With no snapshot, the holes the staged writes left are free again after
    // the destage's first CP: every block goes home, extents stay sequential.
    for id in 1..=EXTENTS {
        for block in 0..EXTENT_BLOCKS {
            assert_eq!(data_location(&volume, id, block), homes[id as usize - 1][block as usize]);
        }
        let report = volume.read_blocks_synthetic(id, 0, EXTENT_BLOCKS).unwrap();
        assert_eq!(report.run_count(), 1);
    }
    let mut expected = std::collections::HashMap::new();
    for (id, block, tag) in updates {
        expected.insert((id, block), tag);
    }
    for ((id, block), tag) in expected {
        assert!(volume.read(id, block * BLOCK as u64, BLOCK as u64).unwrap() == pattern(tag, BLOCK));
    }
    assert_clean(&mut volume);
}

#[test]
fn with_the_holes_held_by_a_snapshot_blocks_go_to_the_reserve_of_their_neighbours_range() {
    let options = VolumeOptions { range_reserve_fraction: 0.25, ..VolumeOptions::default() };
    let mut volume = filled_volume(options);
    let homes: Vec<Vec<u64>> =
        (1..=EXTENTS).map(|id| (0..EXTENT_BLOCKS).map(|block| data_location(&volume, id, block)).collect()).collect();
    volume.create_snapshot("before").unwrap();
    let updates = stage_updates(&mut volume, 20, 3);
    volume.destage().unwrap();
    let fresh_ranges_start = homes.iter().flatten().max().unwrap() / 256 + 1;
    for &(id, block, _) in &updates {
        let home_range = homes[id as usize - 1][block as usize] / 256;
        let range = data_location(&volume, id, block) / 256;
        // The old block is held: the update lands in the free quarter of the
        // range holding its logical neighbours (one of the two ranges a
        // 256-block logical window spans), never in a new range.
        assert!(range.abs_diff(home_range) <= 1, "extent {id} block {block}: range {range}, home {home_range}");
        assert!(range < fresh_ranges_start);
    }
    // The snapshot still reads the old data.
    let before = volume.read_snapshot("before", "e0", 0, EXTENT_BLOCKS * BLOCK as u64).unwrap();
    let mut expected = Vec::new();
    for piece in 0..EXTENT_BLOCKS / 256 {
        expected.extend(pattern(piece, 256 * BLOCK));
    }
    assert!(before == expected, "the snapshot lost data");
    assert_clean(&mut volume);
}

#[test]
fn a_full_neighbour_range_sends_the_group_to_the_nearest_range_with_room_within_the_span() {
    let options = VolumeOptions { proximal_span_ranges: 8, ..VolumeOptions::default() };
    let mut volume = filled_volume(options);
    volume.create_snapshot("before").unwrap();
    let id = EXTENTS;
    let home_range = data_location(&volume, id, 300) / 256;
    volume.write(id, 300 * BLOCK as u64, &pattern(9, BLOCK), false).unwrap();
    volume.destage().unwrap();
    let range = data_location(&volume, id, 300) / 256;
    // Every range of the filled extents is full and the snapshot keeps the
    // hole: the first range with room is the one right after the extents.
    assert_ne!(range, home_range);
    assert_eq!(range, EXTENTS * EXTENT_BLOCKS / 256, "home range {home_range}");
    assert!(range.abs_diff(home_range) <= 8);
    assert_clean(&mut volume);
}
