//! Payload-less operation: on a data device that keeps no bytes, synthetic
//! writes and reads drive exactly the allocation, staging, destage, log and
//! metadata of real ones on a volume without data checksums (the placements
//! match such a run with payload block for block), survive a crash, and pass
//! fsck.

use crate::common;

use common::{assert_clean, NullDevice, Recorder};
use proxima_device::{BlockDevice, MemoryDevice, RaidConfig, RaidDevice};
use proxima_engine::{EngineError, Layout, Location, Volume, VolumeOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const EXTENT_BLOCKS: u64 = 4096;
const EXTENTS: u64 = 6;
const DATA_BLOCKS: u64 = 32_768;

fn payload_less() -> VolumeOptions {
    VolumeOptions { payload: false, staging_capacity_blocks: 300, ..VolumeOptions::default() }
}

/// A payload-less volume whose data device records its batches.
fn recorded_payload_less_volume() -> Volume<Recorder<NullDevice>, MemoryDevice> {
    recorded_volume(payload_less())
}

fn recorded_volume(options: VolumeOptions) -> Volume<Recorder<NullDevice>, MemoryDevice> {
    Volume::format(Recorder::new(NullDevice::new(DATA_BLOCKS)), MemoryDevice::new(4096, 8192), 1, options).unwrap()
}

/// Fills the extents with one synthetic write each, then applies seeded
/// 1-block synthetic updates.
fn age<D: BlockDevice, F: BlockDevice>(volume: &mut Volume<D, F>, updates: u64, seed: u64) {
    for extent in 0..EXTENTS {
        let id = volume.create_extent(&format!("e{extent}"), EXTENT_BLOCKS * 4096).unwrap();
        volume.write_blocks_synthetic(id, 0, EXTENT_BLOCKS, false).unwrap();
    }
    age_existing(volume, updates, seed);
}

/// Seeded 1-block synthetic updates of the extents `age` created.
fn age_existing<D: BlockDevice, F: BlockDevice>(volume: &mut Volume<D, F>, updates: u64, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for _ in 0..updates {
        let id = rng.gen_range(1..=EXTENTS);
        volume.write_blocks_synthetic(id, rng.gen_range(0..EXTENT_BLOCKS), 1, false).unwrap();
    }
}

fn placements<D: BlockDevice, F: BlockDevice>(volume: &Volume<D, F>) -> Vec<Option<Location>> {
    (1..=EXTENTS)
        .flat_map(|id| (0..EXTENT_BLOCKS).map(move |block| (id, block)))
        .map(|(id, block)| volume.block_location(id, block).unwrap())
        .collect()
}

#[test]
fn a_metadata_only_data_device_needs_payload_off() {
    let refused =
        Volume::format(NullDevice::new(DATA_BLOCKS), MemoryDevice::new(4096, 4096), 1, VolumeOptions::default());
    assert!(matches!(refused, Err(EngineError::Unsuitable(_))), "{refused:?}");
}

#[test]
fn synthetic_writes_place_blocks_exactly_as_real_ones() {
    let mut real = Volume::format(
        MemoryDevice::new(4096, DATA_BLOCKS),
        MemoryDevice::new(4096, 8192),
        1,
        // Without data checksums: their tables and records are metadata a
        // payload-less volume cannot have.
        VolumeOptions { payload: true, data_checksums: false, ..payload_less() },
    )
    .unwrap();
    age(&mut real, 2000, 42);
    let mut synthetic =
        Volume::format(NullDevice::new(DATA_BLOCKS), MemoryDevice::new(4096, 8192), 1, payload_less()).unwrap();
    age(&mut synthetic, 2000, 42);
    assert!(synthetic.stats().destage_count > 3);
    assert_eq!(real.stats().destage_count, synthetic.stats().destage_count);
    assert_eq!(placements(&real), placements(&synthetic));
    assert_clean(&mut synthetic);
}

#[test]
fn synthetic_reads_report_runs_and_requests_and_the_volume_recovers_from_a_crash() {
    let mut volume = recorded_payload_less_volume();
    age(&mut volume, 500, 9);
    volume.flush().unwrap();
    let staged = volume.staging_fill().used_blocks;
    assert!(staged > 0);
    let report = volume.read_blocks_synthetic(1, 0, 974).unwrap();
    assert_eq!(report.block_count, 974);
    assert_eq!(report.hole_block_count, 0);
    assert!(report.flash_run_count > 0, "some blocks are staged: {report:?}");
    // Staged blocks split the extent's runs, but their neighbours keep their
    // places around the blocks' old ones: the read reads through them.
    assert!(report.data_request_count < report.data_run_count, "{report:?}");
    let batch = volume.data_device().batches.last().unwrap().clone();
    assert_eq!(batch.len() as u64, report.data_request_count, "one data batch of the read's requests");
    let before = placements(&volume);
    let (data, flash) = volume.into_devices();
    let mut volume = Volume::open(data, flash, payload_less()).unwrap();
    assert_eq!(volume.staging_fill().used_blocks, staged);
    assert_eq!(placements(&volume), before);
    volume.destage().unwrap();
    let report = volume.read_blocks_synthetic(1, 0, EXTENT_BLOCKS).unwrap();
    assert_eq!(report.run_count(), 1, "after destage the extent is sequential again: {report:?}");
    assert_clean(&mut volume);
}

#[test]
fn synthetic_reads_issue_the_data_reads_of_real_ones() {
    // Proximal reads spans as they are; write-anywhere, whose updates move,
    // reads through the gaps between them too.
    for (layout, read_gap_blocks) in [(Layout::Proximal, 0), (Layout::WriteAnywhere, 16)] {
        let synthetic_options = VolumeOptions { layout, read_gap_blocks, ..payload_less() };
        let options = VolumeOptions { payload: true, data_checksums: false, ..synthetic_options.clone() };
        let mut real = Volume::format(
            Recorder::new(MemoryDevice::new(4096, DATA_BLOCKS)),
            MemoryDevice::new(4096, 8192),
            1,
            options,
        )
        .unwrap();
        age(&mut real, 500, 9);
        let mut synthetic = recorded_volume(synthetic_options);
        age(&mut synthetic, 500, 9);
        assert_eq!(placements(&real), placements(&synthetic));
        for (first_block, block_count) in [(0, 974), (974, 974), (100, 3000)] {
            let data_reads = |batches: &[Vec<common::RecordedRequest>]| -> Vec<(u64, u64)> {
                let mut blocks: Vec<(u64, u64)> = batches
                    .iter()
                    .flatten()
                    .filter(|request| request.op == proxima_device::IoOp::Read)
                    .map(|request| (request.block, u64::from(request.block_count)))
                    .collect();
                blocks.sort_unstable();
                blocks
            };
            let before = real.data_device().batches.len();
            let mut buffer = vec![0; usize::try_from(block_count * 4096).unwrap()];
            real.read_into(1, first_block * 4096, &mut buffer).unwrap();
            let real_reads = data_reads(&real.data_device().batches[before..]);
            let before = synthetic.data_device().batches.len();
            let report = synthetic.read_blocks_synthetic(1, first_block, block_count).unwrap();
            let synthetic_reads = data_reads(&synthetic.data_device().batches[before..]);
            let case = format!("{layout:?}, gap {read_gap_blocks}, blocks {first_block}+{block_count}");
            assert_eq!(synthetic_reads, real_reads, "{case}: {report:?}");
            assert_eq!(report.data_request_count, real_reads.len() as u64, "{case}");
            if read_gap_blocks > 0 {
                assert!(report.data_request_count < report.data_run_count, "{case}: gaps read through: {report:?}");
            }
        }
    }
}

#[test]
fn a_snapshot_is_read_without_data_where_its_blocks_are() {
    let mut volume = recorded_payload_less_volume();
    age(&mut volume, 0, 1);
    volume.create_snapshot("fresh").unwrap();
    age_existing(&mut volume, 2000, 3);
    volume.destage().unwrap();
    let snapshot = volume.read_snapshot_blocks_synthetic("fresh", "e1", 0, EXTENT_BLOCKS).unwrap();
    assert_eq!(snapshot.block_count, EXTENT_BLOCKS);
    assert_eq!(snapshot.run_count(), 1, "the snapshot still sees the fresh, sequential extent: {snapshot:?}");
    let batch = volume.data_device().batches.last().unwrap().clone();
    assert_eq!(batch.len() as u64, snapshot.data_request_count, "one data batch of the snapshot's runs");
    let live = volume.read_blocks_synthetic(1, 0, EXTENT_BLOCKS).unwrap();
    assert!(live.run_count() > 1, "the live extent moved where its updates were destaged: {live:?}");
    let empty = volume.read_snapshot_blocks_synthetic("fresh", "e1", 5, 0).unwrap();
    assert_eq!((empty.run_count(), empty.data_request_count), (0, 0), "{empty:?}");
    let empty = volume.read_blocks_synthetic(1, 5, 0).unwrap();
    assert_eq!((empty.run_count(), empty.data_request_count), (0, 0), "{empty:?}");
    let past_end = volume.read_snapshot_blocks_synthetic("fresh", "e1", EXTENT_BLOCKS - 1, 2);
    assert!(matches!(past_end, Err(EngineError::InvalidRange(_))), "{past_end:?}");
    let unknown = volume.read_snapshot_blocks_synthetic("none", "e1", 0, 1);
    assert!(matches!(unknown, Err(EngineError::NoSuchSnapshot(_))), "{unknown:?}");
    assert_clean(&mut volume);
}

#[test]
fn a_payload_less_raid4_of_metadata_only_members_runs_the_same_workload() {
    let members = (0..5).map(|_| NullDevice::new(DATA_BLOCKS / 4)).collect();
    let raid = RaidDevice::new(members, RaidConfig::raid4()).unwrap();
    let mut volume = Volume::format(raid, MemoryDevice::new(4096, 8192), 1, payload_less()).unwrap();
    age(&mut volume, 1000, 5);
    volume.destage().unwrap();
    let stats = volume.data_device().member_stats();
    assert!(stats.iter().all(|member| member.writes.request_count > 0), "every member, parity included, was written");
    for id in 1..=EXTENTS {
        assert_eq!(volume.read_blocks_synthetic(id, 0, EXTENT_BLOCKS).unwrap().run_count(), 1);
    }
    assert_clean(&mut volume);
}
