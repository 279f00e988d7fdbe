//! The flash staging area: the threshold, the capacity (automatic destage, or a
//! typed refusal without it), the log records that rebuild the index, and the
//! ordering hazards of staged writes: space freed and reused while a staged
//! write to it is pending, and replay over newer data.

use crate::common;

use common::{assert_clean, pattern, BLOCK};
use proxima_device::{BlockDevice, CrashDevice, CrashPoint, MemoryDevice, PendingWrites};
use proxima_engine::{EngineError, Location, Volume, VolumeOptions};

fn volume_with(options: VolumeOptions) -> Volume<MemoryDevice, MemoryDevice> {
    Volume::format(MemoryDevice::new(4096, 8192), MemoryDevice::new(4096, 1024), 11, options).expect("format")
}

fn reopen<D: BlockDevice, F: BlockDevice>(volume: Volume<D, F>, options: VolumeOptions) -> Volume<D, F> {
    let (data, flash) = volume.into_devices();
    Volume::open(data, flash, options).expect("open")
}

#[test]
fn writes_below_the_threshold_are_staged_and_larger_ones_go_to_the_data_device() {
    let mut volume = volume_with(VolumeOptions::default());
    let id = volume.create_extent("e", 1024 * BLOCK as u64).unwrap();
    volume.write(id, 0, &pattern(1, 41 * BLOCK), false).unwrap();
    assert_eq!(volume.staging_fill().used_blocks, 41);
    assert!(matches!(volume.block_location(id, 40).unwrap(), Some(Location::Flash(_))));
    volume.write(id, 100 * BLOCK as u64, &pattern(2, 42 * BLOCK), false).unwrap();
    assert_eq!(volume.staging_fill().used_blocks, 41);
    assert!(matches!(volume.block_location(id, 100).unwrap(), Some(Location::Data(_))));
    assert_eq!(volume.stats().direct_blocks_written, 42);
    // The staged records (extent, logical block, checksum) rebuild the index.
    volume.flush().unwrap();
    let mut volume = reopen(volume, VolumeOptions::default());
    assert_eq!(volume.read(id, 0, 41 * BLOCK as u64).unwrap(), pattern(1, 41 * BLOCK));
    assert_eq!(volume.read(id, 100 * BLOCK as u64, 42 * BLOCK as u64).unwrap(), pattern(2, 42 * BLOCK));
    assert_clean(&mut volume);
}

#[test]
fn a_full_staging_area_is_destaged_before_the_write_that_does_not_fit() {
    let options = VolumeOptions { staging_capacity_blocks: 8, ..VolumeOptions::default() };
    let mut volume = volume_with(options);
    let id = volume.create_extent("e", 256 * BLOCK as u64).unwrap();
    volume.write(id, 0, &pattern(0, 256 * BLOCK), false).unwrap();
    for block in 0..20u64 {
        volume.write(id, block * 7 * BLOCK as u64, &pattern(100 + block, BLOCK), false).unwrap();
        assert!(volume.staging_fill().used_blocks <= 8);
    }
    assert_eq!(volume.stats().destage_count, 2);
    assert_eq!(volume.staging_fill(), proxima_engine::StagingFill { used_blocks: 4, capacity_blocks: 8 });
    for block in 0..20u64 {
        assert_eq!(volume.read(id, block * 7 * BLOCK as u64, BLOCK as u64).unwrap(), pattern(100 + block, BLOCK));
    }
    assert_clean(&mut volume);
}

#[test]
fn without_automatic_destage_a_full_staging_area_refuses_the_write_and_stays_usable() {
    let options = VolumeOptions { staging_capacity_blocks: 4, auto_destage: false, ..VolumeOptions::default() };
    let mut volume = volume_with(options);
    let id = volume.create_extent("e", 64 * BLOCK as u64).unwrap();
    for block in 0..4u64 {
        volume.write(id, block * BLOCK as u64, &pattern(block, BLOCK), false).unwrap();
    }
    let refused = volume.write(id, 10 * BLOCK as u64, &pattern(10, BLOCK), false);
    assert!(
        matches!(refused, Err(EngineError::StagingFull { staged_blocks: 4, capacity_blocks: 4, incoming_blocks: 1 })),
        "{refused:?}"
    );
    assert_eq!(volume.destage().unwrap(), 4);
    volume.write(id, 10 * BLOCK as u64, &pattern(10, BLOCK), false).unwrap();
    for block in (0..4u64).chain([10]) {
        assert_eq!(volume.read(id, block * BLOCK as u64, BLOCK as u64).unwrap(), pattern(block, BLOCK));
    }
    assert_clean(&mut volume);
}

/// No CP unless asked for: the durable state stays the last explicit one.
fn explicit_checkpoints() -> VolumeOptions {
    VolumeOptions { records_per_checkpoint: u64::MAX, ..VolumeOptions::default() }
}

/// Runs `workload` on a volume whose devices record writes, then crashes
/// keeping every unflushed write (the device wrote them all) and reopens.
fn crash_keeping_unflushed_writes(
    prepare: impl FnOnce(&mut Volume<MemoryDevice, MemoryDevice>) -> u64,
    workload: impl FnOnce(&mut Volume<CrashDevice<MemoryDevice>, CrashDevice<MemoryDevice>>, u64),
) -> (Volume<MemoryDevice, MemoryDevice>, u64) {
    let mut volume = volume_with(explicit_checkpoints());
    let id = prepare(&mut volume);
    let (data, flash) = volume.close().unwrap();
    let mut volume =
        Volume::open(CrashDevice::new(data), CrashDevice::new(flash), explicit_checkpoints()).expect("open");
    workload(&mut volume, id);
    let (mut data, mut flash) = volume.into_devices();
    for device in [&mut data, &mut flash] {
        let point = CrashPoint { boundary: device.write_count(), pending: PendingWrites::KeepAll, tear: None };
        device.crash_at(point).unwrap();
    }
    let volume = Volume::open(data.into_inner(), flash.into_inner(), explicit_checkpoints()).expect("recover");
    (volume, id)
}

#[test]
fn a_staging_block_freed_by_an_overwrite_is_not_reused_before_the_next_checkpoint() {
    let (mut volume, id) = crash_keeping_unflushed_writes(
        |volume| {
            let id = volume.create_extent("e", 64 * BLOCK as u64).unwrap();
            volume.write(id, 0, &pattern(1, BLOCK), false).unwrap();
            volume.commit().unwrap();
            id
        },
        |volume, id| {
            // The durable CP maps block 0 to its staging block; overwriting it
            // frees that block, which must not take the next staged write.
            volume.write(id, 0, &pattern(2, BLOCK), false).unwrap();
            for block in 1..40u64 {
                volume.write(id, block * BLOCK as u64, &pattern(100 + block, BLOCK), false).unwrap();
            }
        },
    );
    assert!(volume.read(id, 0, BLOCK as u64).unwrap() == pattern(1, BLOCK), "block 0 lost its durable value");
    assert_clean(&mut volume);
}

#[test]
fn a_data_block_freed_by_a_staged_write_is_not_reused_before_the_next_checkpoint() {
    let freed = std::cell::Cell::new(None);
    let (mut volume, id) = crash_keeping_unflushed_writes(
        |volume| {
            let id = volume.create_extent("e", 256 * BLOCK as u64).unwrap();
            volume.create_extent("other", 2048 * BLOCK as u64).unwrap();
            volume.write(id, 0, &pattern(1, 256 * BLOCK), false).unwrap();
            id
        },
        |volume, id| {
            // Staging over block 5 frees its data block; the large writes that
            // follow must not land on it while the durable CP still maps it.
            let Some(Location::Data(block)) = volume.block_location(id, 5).unwrap() else { panic!("a data block") };
            freed.set(Some(block));
            volume.write(id, 5 * BLOCK as u64, &pattern(2, BLOCK), false).unwrap();
            let other = volume.extent_id("other").unwrap();
            for piece in 0..8u64 {
                volume.write(other, piece * 256 * BLOCK as u64, &pattern(50 + piece, 256 * BLOCK), false).unwrap();
            }
            let reused =
                (0..2048).any(|block| volume.block_location(other, block).unwrap() == freed.get().map(Location::Data));
            assert!(!reused, "the freed block was reused before the next CP");
        },
    );
    // The staged write was not flushed: block 5 may hold either value (its
    // record survives if the log block holding it filled and was written).
    let read = volume.read(id, 0, 256 * BLOCK as u64).unwrap();
    for (block, bytes) in read.chunks(BLOCK).enumerate() {
        let old = pattern(1, 256 * BLOCK)[block * BLOCK..(block + 1) * BLOCK].to_vec();
        let acceptable = bytes == old || (block == 5 && bytes == pattern(2, BLOCK));
        assert!(acceptable, "block {block} of the extent holds a value it never had");
    }
    assert_clean(&mut volume);
}

#[test]
fn replay_applies_records_in_order_so_newer_data_wins() {
    let mut volume = volume_with(VolumeOptions::default());
    let id = volume.create_extent("e", 128 * BLOCK as u64).unwrap();
    // A staged block, then a large direct write over it.
    volume.write(id, 3 * BLOCK as u64, &pattern(1, BLOCK), false).unwrap();
    volume.flush().unwrap();
    volume.write(id, 0, &pattern(2, 64 * BLOCK), false).unwrap();
    // A staged block, destaged, then staged again.
    volume.write(id, 80 * BLOCK as u64, &pattern(3, BLOCK), false).unwrap();
    volume.destage().unwrap();
    volume.write(id, 80 * BLOCK as u64, &pattern(4, BLOCK), false).unwrap();
    // A staged block, then trimmed.
    volume.write(id, 90 * BLOCK as u64, &pattern(5, BLOCK), false).unwrap();
    volume.trim(id, 90 * BLOCK as u64, BLOCK as u64, false).unwrap();
    volume.flush().unwrap();
    let mut volume = reopen(volume, VolumeOptions::default());
    assert!(volume.stats().replayed_records > 0);
    assert_eq!(volume.read(id, 0, 64 * BLOCK as u64).unwrap(), pattern(2, 64 * BLOCK));
    assert_eq!(volume.read(id, 80 * BLOCK as u64, BLOCK as u64).unwrap(), pattern(4, BLOCK));
    assert_eq!(volume.read(id, 90 * BLOCK as u64, BLOCK as u64).unwrap(), vec![0; BLOCK]);
    assert_clean(&mut volume);
}

#[test]
fn a_destage_takes_the_blocks_kept_in_memory_from_there_and_reads_the_others() {
    // Room for 64 staged blocks; the bytes of the 4 most recently staged kept.
    let options = VolumeOptions { staging_capacity_blocks: 64, staged_cache_blocks: 4, ..VolumeOptions::default() };
    let mut volume = volume_with(options.clone());
    let id = volume.create_extent("e", 256 * BLOCK as u64).unwrap();
    volume.write(id, 0, &pattern(0, 256 * BLOCK), false).unwrap();
    for block in 0..10u64 {
        volume.write(id, block * 9 * BLOCK as u64, &pattern(100 + block, BLOCK), false).unwrap();
    }
    volume.destage().unwrap();
    assert_eq!(volume.stats().destaged_blocks, 10);
    assert_eq!(volume.stats().destaged_blocks_from_memory, 4, "the 4 youngest came from memory");
    // Flash blocks freed by the destage are reused by later CPs and staged
    // writes; what is kept in memory follows every rewrite.
    for round in 0..30u64 {
        for block in 0..10u64 {
            let logical = (block * 9 + round % 3) * BLOCK as u64;
            volume.write(id, logical, &pattern(1000 * round + block, BLOCK), false).unwrap();
        }
        if round % 4 == 3 {
            volume.flush().unwrap();
        }
        if round % 5 == 4 {
            volume.destage().unwrap();
        }
    }
    volume.destage().unwrap();
    assert!(volume.stats().destaged_blocks_from_memory > 4);
    for round in 27..30u64 {
        for block in 0..10u64 {
            let logical = (block * 9 + round % 3) * BLOCK as u64;
            assert_eq!(volume.read(id, logical, BLOCK as u64).unwrap(), pattern(1000 * round + block, BLOCK));
        }
    }
    assert_clean(&mut volume);
    // After a reopen nothing is in memory: the destage reads flash.
    volume.write(id, 5 * BLOCK as u64, &pattern(7, BLOCK), false).unwrap();
    volume.flush().unwrap();
    let mut volume = reopen(volume, options);
    volume.destage().unwrap();
    assert_eq!(volume.stats().destaged_blocks_from_memory, 0);
    assert_eq!(volume.read(id, 5 * BLOCK as u64, BLOCK as u64).unwrap(), pattern(7, BLOCK));
    assert_clean(&mut volume);
}
