//! `write_batch` writes like `write` one by one — same contents, in order,
//! each write's own outcome — while staging consecutive small aligned writes
//! as one append: one gathered flash request for the whole group. Durable
//! after a flush and a crash, and after FUA in the batch.

use crate::common;

use common::{assert_clean, pattern, Recorder, BLOCK};
use proxima_device::{IoOp, MemoryDevice};
use proxima_engine::{BatchedWrite, EngineError, Volume, VolumeOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SEED: u64 = 20261121;

fn recorded_volume() -> Volume<MemoryDevice, Recorder<MemoryDevice>> {
    Volume::format(
        MemoryDevice::new(4096, 8192).named("data"),
        Recorder::new(MemoryDevice::new(4096, 2048).named("flash")),
        7,
        VolumeOptions::default(),
    )
    .unwrap()
}

#[test]
fn a_batch_of_small_writes_is_one_append_and_reads_back_like_single_writes() {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut volume = recorded_volume();
    let lun0 = volume.create_extent("lun0", 4 << 20).unwrap();
    let lun1 = volume.create_extent("lun1", 4 << 20).unwrap();
    let mut model = [vec![0u8; 4 << 20], vec![0u8; 4 << 20]];
    let payloads: Vec<(u64, u64, Vec<u8>)> = (0..24u64)
        .map(|index| {
            let extent = index % 2;
            let offset = rng.gen_range(0..1024u64) * BLOCK as u64;
            (extent, offset, pattern(index + 1, BLOCK * (1 + (index % 3) as usize)))
        })
        .collect();
    let writes: Vec<BatchedWrite<'_>> = payloads
        .iter()
        .map(|(extent, offset, bytes)| BatchedWrite {
            extent_id: if *extent == 0 { lun0 } else { lun1 },
            offset_bytes: *offset,
            bytes,
            fua: false,
        })
        .collect();
    let before = volume.flash_device().batches.len();
    let outcomes = volume.write_batch(&writes);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let staged_writes: Vec<u32> = volume.flash_device().batches[before..]
        .iter()
        .flatten()
        .filter(|request| request.op == IoOp::Write && request.block_count > 1)
        .map(|request| request.block_count)
        .collect();
    let total_blocks: u32 = payloads.iter().map(|(_, _, bytes)| (bytes.len() / BLOCK) as u32).sum();
    assert_eq!(staged_writes, vec![total_blocks], "one gathered append for the whole group");
    for (extent, offset, bytes) in &payloads {
        model[*extent as usize][*offset as usize..*offset as usize + bytes.len()].copy_from_slice(bytes);
    }
    volume.flush().unwrap();
    let (data, flash) = volume.into_devices();
    let mut volume = Volume::open(data, flash, VolumeOptions::default()).unwrap();
    for (extent, id) in [(0, lun0), (1, lun1)] {
        assert!(volume.read(id, 0, 4 << 20).unwrap() == model[extent], "extent {extent} after replay");
    }
    assert_clean(&mut volume);
}

#[test]
fn mixed_batches_keep_order_and_report_each_outcome() {
    let mut volume = recorded_volume();
    let id = volume.create_extent("lun0", 4 << 20).unwrap();
    let large = pattern(1, 64 * BLOCK);
    let small = pattern(2, BLOCK);
    let unaligned = pattern(3, 100);
    let later = pattern(4, BLOCK);
    let writes = [
        BatchedWrite { extent_id: id, offset_bytes: 0, bytes: &large, fua: false },
        BatchedWrite { extent_id: id, offset_bytes: 8 * BLOCK as u64, bytes: &small, fua: false },
        BatchedWrite { extent_id: id, offset_bytes: 8 * BLOCK as u64 + 10, bytes: &unaligned, fua: false },
        BatchedWrite { extent_id: id, offset_bytes: 4 << 20, bytes: &small, fua: false },
        BatchedWrite { extent_id: id, offset_bytes: 8 * BLOCK as u64, bytes: &later, fua: true },
        BatchedWrite { extent_id: id, offset_bytes: 9 * BLOCK as u64, bytes: &small, fua: false },
    ];
    let outcomes = volume.write_batch(&writes);
    assert!(outcomes[..3].iter().all(Result::is_ok), "{outcomes:?}");
    assert!(matches!(outcomes[3], Err(EngineError::InvalidRange(_))), "{outcomes:?}");
    assert!(outcomes[4..].iter().all(Result::is_ok), "{outcomes:?}");
    // FUA in the batch: durable without a flush.
    let (data, flash) = volume.into_devices();
    let mut volume = Volume::open(data, flash, VolumeOptions::default()).unwrap();
    let mut expected = large.clone();
    expected[8 * BLOCK..9 * BLOCK].copy_from_slice(&later);
    expected[9 * BLOCK..10 * BLOCK].copy_from_slice(&small);
    assert!(volume.read(id, 0, 64 * BLOCK as u64).unwrap() == expected, "the last write to a block wins");
    assert_clean(&mut volume);
}

#[test]
fn a_batch_of_large_writes_reaches_the_data_device_as_one_gathered_request() {
    let mut volume = Volume::format(
        Recorder::new(MemoryDevice::new(4096, 8192).named("data")),
        MemoryDevice::new(4096, 2048).named("flash"),
        7,
        VolumeOptions::default(),
    )
    .unwrap();
    let id = volume.create_extent("lun0", 4 << 20).unwrap();
    // A sequential stream of 64-block writes (above the staging threshold),
    // then one overlapping the last two: the later write wins where they meet.
    let payloads: Vec<(u64, Vec<u8>)> = (0..4u64)
        .map(|index| (index * 64 * BLOCK as u64, pattern(index + 1, 64 * BLOCK)))
        .chain([(160 * BLOCK as u64, pattern(9, 64 * BLOCK))])
        .collect();
    let writes: Vec<BatchedWrite<'_>> = payloads
        .iter()
        .map(|(offset, bytes)| BatchedWrite { extent_id: id, offset_bytes: *offset, bytes, fua: false })
        .collect();
    let before = volume.data_device().batches.len();
    let outcomes = volume.write_batch(&writes);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let data_writes: Vec<(u64, u32)> = volume.data_device().batches[before..]
        .iter()
        .flatten()
        .filter(|request| request.op == IoOp::Write)
        .map(|request| (request.block, request.block_count))
        .collect();
    assert_eq!(data_writes.len(), 1, "one request for the whole stream: {data_writes:?}");
    assert_eq!(data_writes[0].1, 5 * 64, "every block written");
    let mut expected = vec![0u8; 4 << 20];
    for (offset, bytes) in &payloads {
        expected[*offset as usize..*offset as usize + bytes.len()].copy_from_slice(bytes);
    }
    assert!(volume.read(id, 0, 4 << 20).unwrap() == expected, "read back before a crash");
    volume.flush().unwrap();
    let (data, flash) = volume.into_devices();
    let mut volume = Volume::open(data, flash, VolumeOptions::default()).unwrap();
    assert!(volume.read(id, 0, 4 << 20).unwrap() == expected, "read back after replay");
    // The stream is one physical run, the overlapping write's blocks follow
    // it: three runs (the stream's head, the overlap, the stream's tail).
    assert_eq!(volume.extents()[0].run_count, 3);
    assert_clean(&mut volume);
}
