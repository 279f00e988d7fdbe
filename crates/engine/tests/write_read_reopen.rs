//! Data written, flushed and committed reads back, across reopen, with fsck
//! finding nothing.

use crate::common;

use common::{assert_clean, memory_volume, pattern, BLOCK};
use proxima_engine::{Volume, VolumeOptions};

#[test]
fn small_large_and_partial_writes_read_back_after_reopen() {
    let mut volume = memory_volume(4096, 512);
    let id = volume.create_extent("lun0", 4 << 20).unwrap();
    volume.write(id, 0, &pattern(1, BLOCK), false).unwrap();
    volume.write(id, 10 * BLOCK as u64, &pattern(2, 100 * BLOCK), false).unwrap();
    volume.write(id, 3 * BLOCK as u64 + 100, &pattern(3, 5000), true).unwrap();
    assert_eq!(volume.read(id, 0, BLOCK as u64).unwrap(), pattern(1, BLOCK));
    let mut expected = vec![0u8; 2 * BLOCK];
    expected[100..5100].copy_from_slice(&pattern(3, 5000));
    assert_eq!(volume.read(id, 3 * BLOCK as u64, 2 * BLOCK as u64).unwrap(), expected);
    assert_clean(&mut volume);
    let (data, flash) = volume.close().unwrap();
    let mut volume = Volume::open(data, flash, VolumeOptions::default()).unwrap();
    assert_eq!(volume.read(id, 10 * BLOCK as u64, 100 * BLOCK as u64).unwrap(), pattern(2, 100 * BLOCK));
    assert_eq!(volume.read(id, 3 * BLOCK as u64, 2 * BLOCK as u64).unwrap(), expected);
    volume.trim(id, 10 * BLOCK as u64, 50 * BLOCK as u64, false).unwrap();
    let status = volume.block_status(id, 0, 200 * BLOCK as u64).unwrap();
    let hole_at = |offset: u64| {
        status.iter().any(|s| !s.allocated && s.offset_bytes <= offset && offset < s.offset_bytes + s.length_bytes)
    };
    assert!(hole_at(10 * BLOCK as u64) && hole_at(59 * BLOCK as u64) && !hole_at(60 * BLOCK as u64));
    assert_eq!(volume.read(id, 10 * BLOCK as u64, BLOCK as u64).unwrap(), vec![0; BLOCK]);
    volume.destage().unwrap();
    assert_eq!(volume.read(id, 0, BLOCK as u64).unwrap(), pattern(1, BLOCK));
    assert_clean(&mut volume);
}

#[test]
fn flushed_writes_survive_without_a_checkpoint() {
    let mut volume = memory_volume(4096, 512);
    let id = volume.create_extent("lun0", 1 << 20).unwrap();
    volume.write(id, 0, &pattern(7, BLOCK), false).unwrap();
    volume.write(id, 64 * BLOCK as u64, &pattern(8, 64 * BLOCK), false).unwrap();
    volume.flush().unwrap();
    let (data, flash) = volume.into_devices();
    let mut volume = Volume::open(data, flash, VolumeOptions::default()).unwrap();
    assert!(volume.stats().replayed_records >= 2);
    assert_eq!(volume.read(id, 0, BLOCK as u64).unwrap(), pattern(7, BLOCK));
    assert_eq!(volume.read(id, 64 * BLOCK as u64, 64 * BLOCK as u64).unwrap(), pattern(8, 64 * BLOCK));
    assert_clean(&mut volume);
}

#[test]
fn snapshots_read_old_data_and_deletion_reclaims_space() {
    let mut volume = memory_volume(4096, 1024);
    let id = volume.create_extent("lun0", 1 << 20).unwrap();
    volume.write(id, 0, &pattern(1, 64 * BLOCK), false).unwrap();
    volume.create_snapshot("before").unwrap();
    volume.write(id, 0, &pattern(2, 64 * BLOCK), false).unwrap();
    volume.write(id, 0, &pattern(3, BLOCK), false).unwrap();
    assert_eq!(volume.read_snapshot("before", "lun0", 0, 64 * BLOCK as u64).unwrap(), pattern(1, 64 * BLOCK));
    volume.commit().unwrap();
    assert!(volume.space().data.snapshot_only_blocks >= 64);
    assert_clean(&mut volume);
    volume.delete_snapshot("before").unwrap();
    volume.finish_deletions().unwrap();
    volume.commit().unwrap();
    assert_eq!(volume.space().data.snapshot_only_blocks, 0);
    assert_clean(&mut volume);
    // Block 0 was last written by a small (staged) write.
    assert_eq!(volume.space().data.used_blocks, 63);
    assert_eq!(volume.space().staged_blocks, 1);
}

#[test]
fn restoring_a_volume_brings_back_its_extents() {
    let mut volume = memory_volume(4096, 1024);
    let id = volume.create_extent("a", 1 << 20).unwrap();
    volume.write(id, 0, &pattern(1, 8 * BLOCK), false).unwrap();
    volume.create_snapshot("s1").unwrap();
    volume.write(id, 0, &pattern(2, 8 * BLOCK), false).unwrap();
    volume.create_extent("b", 1 << 20).unwrap();
    volume.create_snapshot("s2").unwrap();
    volume.delete_extent("a").unwrap();
    volume.restore_volume("s1").unwrap();
    let id = volume.extent_id("a").unwrap();
    assert_eq!(volume.read(id, 0, 8 * BLOCK as u64).unwrap(), pattern(1, 8 * BLOCK));
    assert!(volume.extent_id("b").is_err());
    assert_eq!(volume.snapshots().len(), 1);
    assert_clean(&mut volume);
    volume.finish_deletions().unwrap();
    let (data, flash) = volume.close().unwrap();
    let mut volume = Volume::open(data, flash, VolumeOptions::default()).unwrap();
    assert_eq!(volume.read(id, 0, 8 * BLOCK as u64).unwrap(), pattern(1, 8 * BLOCK));
    assert_clean(&mut volume);
}
