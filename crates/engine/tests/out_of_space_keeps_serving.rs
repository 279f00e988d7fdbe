//! Running out of space refuses the request that needed the space and keeps
//! the volume serving: what was written before reads back, fsck is clean,
//! and once space is freed (a trim, then a CP) writes succeed again. Both
//! ways in: a large write straight to the data device, and small staged writes
//! whose destage finds no room on the data device.

use crate::common;

use common::{assert_clean, memory_volume, pattern, BLOCK};
use proxima_device::MemoryDevice;
use proxima_engine::{DeviceRole, EngineError, Layout, NoDestageObserver, Overcommit, Volume, VolumeOptions};

const MIB: usize = 1 << 20;

#[test]
fn a_large_write_past_the_end_of_the_data_device_is_refused_and_the_volume_serves_on() {
    // 8 MiB of data blocks under a 64 MiB thin extent.
    let mut volume = memory_volume(2048, 512);
    let id = volume.create_extent_with("thin", 64 * MIB as u64, Overcommit::Allow).unwrap();
    volume.write(id, 0, &pattern(1, MIB), false).unwrap();
    let error = volume.write(id, MIB as u64, &pattern(2, 16 * MIB), false).unwrap_err();
    assert!(matches!(error, EngineError::NoSpace { .. }), "{error}");
    // Refused again, not stopped: the same error, not `Failed`.
    let again = volume.write(id, 20 * MIB as u64, &pattern(3, MIB), false).unwrap_err();
    assert!(matches!(again, EngineError::NoSpace { .. }), "{again}");
    assert_eq!(volume.read(id, 0, MIB as u64).unwrap(), pattern(1, MIB));
    volume.flush().unwrap();
    assert_clean(&mut volume);

    volume.trim(id, 0, 64 * MIB as u64, false).unwrap();
    volume.commit().unwrap();
    volume.write(id, 32 * MIB as u64, &pattern(4, 4 * MIB), true).unwrap();
    assert_eq!(volume.read(id, 32 * MIB as u64, 4 * MIB as u64).unwrap(), pattern(4, 4 * MIB));
    assert_eq!(volume.read(id, 0, BLOCK as u64).unwrap(), vec![0; BLOCK]);
    assert_clean(&mut volume);
}

#[test]
fn staged_writes_whose_destage_finds_no_room_are_refused_and_the_volume_serves_on() {
    // 1 MiB of data blocks, so the staging area (flash) outgrows it.
    let mut volume = memory_volume(256, 1024);
    let id = volume.create_extent_with("thin", 16 * MIB as u64, Overcommit::Allow).unwrap();
    let mut written = Vec::new();
    let mut refused = None;
    for index in 0..2048u64 {
        let offset = index * 2 * BLOCK as u64;
        match volume.write(id, offset, &pattern(index, BLOCK), false) {
            Ok(()) => written.push(index),
            Err(error) => {
                refused = Some(error);
                break;
            }
        }
    }
    let refused = refused.expect("the data device fills");
    assert!(matches!(refused, EngineError::NoSpace { .. }), "{refused}");
    for &index in &written {
        let offset = index * 2 * BLOCK as u64;
        assert_eq!(volume.read(id, offset, BLOCK as u64).unwrap(), pattern(index, BLOCK), "block {index}");
    }
    volume.flush().unwrap();
    assert_clean(&mut volume);

    volume.trim(id, 0, 16 * MIB as u64, false).unwrap();
    volume.commit().unwrap();
    volume.write(id, 0, &pattern(9, 8 * BLOCK), true).unwrap();
    volume.destage().unwrap();
    assert_eq!(volume.read(id, 0, 8 * BLOCK as u64).unwrap(), pattern(9, 8 * BLOCK));
    assert_clean(&mut volume);
}

#[test]
fn overwrites_keep_working_on_a_full_volume_and_refusing_new_blocks_is_cheap() {
    // 1 MiB of data blocks under a 16 MiB thin extent: the staging area
    // (flash) fills with blocks the data device has no room for.
    let mut volume = memory_volume(256, 1024);
    let id = volume.create_extent_with("thin", 16 * MIB as u64, Overcommit::Allow).unwrap();
    let mut written = Vec::new();
    for index in 0..4096u64 {
        match volume.write(id, index * BLOCK as u64, &pattern(index, BLOCK), false) {
            Ok(()) => written.push(index),
            Err(EngineError::NoSpace { .. }) => break,
            Err(other) => panic!("{other}"),
        }
    }
    assert!(written.len() > 256, "staging holds more than the data device");
    // Overwrites of blocks already written, staged or on the data device,
    // are accepted: each frees as much as it takes.
    let overwritten: Vec<u64> = written.iter().copied().step_by(written.len() / 30).take(30).collect();
    for &index in &overwritten {
        volume.write(id, index * BLOCK as u64, &pattern(10_000 + index, BLOCK), false).unwrap();
    }
    // New blocks are refused, without a CP (and a destage attempt) each.
    let checkpoints = volume.stats().checkpoint_count;
    let fresh = *written.last().unwrap() + 1;
    for index in fresh..fresh + 30 {
        let refused = volume.write(id, index * BLOCK as u64, &pattern(index, BLOCK), false).unwrap_err();
        assert!(matches!(refused, EngineError::NoSpace { .. }), "{refused}");
    }
    assert!(volume.stats().checkpoint_count <= checkpoints + 2, "refusals committed CPs");
    for &index in &written {
        let expected =
            if overwritten.contains(&index) { pattern(10_000 + index, BLOCK) } else { pattern(index, BLOCK) };
        assert_eq!(volume.read(id, index * BLOCK as u64, BLOCK as u64).unwrap(), expected, "block {index}");
    }
    volume.flush().unwrap();
    assert_clean(&mut volume);
}

#[test]
fn a_flash_full_of_metadata_snapshots_hold_refuses_updates_and_snapshot_deletion_frees_it() {
    // A small flash: every snapshot holds a copy of the metadata the writes
    // after it rewrite, until the flash has no room for the next CP.
    let mut volume = memory_volume(3 * 32_384, 256);
    let id = volume.create_extent("lun", 2048 * BLOCK as u64).unwrap();
    let mut expected = vec![0u8; 2048 * BLOCK];
    let mut snapshots = 0;
    let mut refusal = None;
    'fill: for round in 0..64u64 {
        for index in 0..16u64 {
            let block = (round * 131 + index * 127) % 2048;
            let bytes = pattern(round * 16 + index, BLOCK);
            match volume.write(id, block * BLOCK as u64, &bytes, false) {
                Ok(()) => expected[(block as usize) * BLOCK..(block as usize + 1) * BLOCK].copy_from_slice(&bytes),
                Err(error) => {
                    refusal = Some(error);
                    break 'fill;
                }
            }
        }
        match volume.create_snapshot(&format!("s{round}")) {
            Ok(_) => snapshots += 1,
            Err(error) => {
                refusal = Some(error);
                break 'fill;
            }
        }
    }
    let refusal = refusal.expect("the flash fills");
    assert!(matches!(refusal, EngineError::NoSpace { role: DeviceRole::Flash, .. }), "{refusal}");
    assert!(snapshots >= 1);
    assert!(volume.space().flash.snapshot_only_blocks > 0, "{:?}", volume.space());
    // Refused, not stopped: reads, flushes, fsck (a CP) and a second refusal.
    assert_eq!(volume.read(id, 0, expected.len() as u64).unwrap(), expected);
    volume.flush().unwrap();
    assert_clean(&mut volume);
    assert!(volume.failure().is_none());
    // Deleting the snapshots frees their metadata; writes go on.
    for snapshot in volume.snapshots() {
        volume.delete_snapshot(&snapshot.name).unwrap();
    }
    volume.finish_deletions().unwrap();
    for index in 0..64u64 {
        let bytes = pattern(90_000 + index, BLOCK);
        volume.write(id, index * 32 * BLOCK as u64, &bytes, false).unwrap();
        expected[(index as usize) * 32 * BLOCK..((index as usize) * 32 + 1) * BLOCK].copy_from_slice(&bytes);
    }
    volume.create_snapshot("after").unwrap();
    assert_eq!(volume.read(id, 0, expected.len() as u64).unwrap(), expected);
    assert_clean(&mut volume);
}

#[test]
fn a_destage_batch_too_large_for_the_flash_room_goes_in_parts() {
    // The in-place layout with its write cache on a 256-block flash. After a
    // snapshot, an overwrite of 41 blocks is staged and copied out; the bound
    // on the CP after one batch of all of them exceeds the flash left, so a
    // destage (the one making room for the write, and the one asked for
    // after it) goes in parts, each CP releasing the staged flash of the part
    // before. One batch only, it moved nothing and the destage failed.
    let options = VolumeOptions { layout: Layout::InPlace, staging_capacity_blocks: 40, ..VolumeOptions::default() };
    let mut volume =
        Volume::format(MemoryDevice::new(4096, 3 * 32_384), MemoryDevice::new(4096, 256), 77, options).expect("format");
    let id = volume.create_extent("lun", 55 * BLOCK as u64).unwrap();
    let first = pattern(1, 54 * BLOCK + 1);
    volume.write(id, 0, &first, false).unwrap();
    volume.create_snapshot("before").unwrap();
    let second = pattern(2, 40 * BLOCK + 1);
    volume.write(id, 0, &second, false).unwrap();
    let staged = volume.staging_fill().used_blocks;
    assert!(staged > 0, "the overwrite is staged");
    volume.destage_observed(&mut NoDestageObserver).unwrap();
    assert_eq!(volume.staging_fill().used_blocks, 0);
    let mut expected = first.clone();
    expected.resize(55 * BLOCK, 0);
    expected[..second.len()].copy_from_slice(&second);
    assert_eq!(volume.read(id, 0, expected.len() as u64).unwrap(), expected);
    assert_clean(&mut volume);
}

#[test]
fn a_flash_device_too_small_for_the_data_devices_metadata_is_refused_at_format() {
    // 1 GiB of data blocks: their checksums, refcounts and maps take about
    // 1.6 MiB of flash, written whole by the format's CP.
    let data_blocks = 1 << 18;
    let format = |flash_blocks| {
        Volume::format(
            MemoryDevice::new(4096, data_blocks),
            MemoryDevice::new(4096, flash_blocks),
            1,
            VolumeOptions::default(),
        )
    };
    let too_small = proxima_engine::fixed_metadata_blocks(data_blocks, 512, &VolumeOptions::default());
    assert!(too_small > 350, "{too_small} blocks for 1 GiB of data");
    let Err(error) = format(too_small) else { panic!("a flash of {too_small} blocks formatted") };
    let message = error.to_string();
    let EngineError::Unsuitable(proxima_engine::Unsuitable::FlashTooSmallForData { minimum_blocks, .. }) = error else {
        panic!("{message}");
    };
    assert!(minimum_blocks > too_small, "{message}");
    assert!(message.contains(&format!("at least {minimum_blocks}")), "{message}");
    // The flash the message names is enough: the volume formats and serves.
    let Ok(mut volume) = format(minimum_blocks) else { panic!("a flash of {minimum_blocks} blocks is refused") };
    let id = volume.create_extent("lun", MIB as u64).unwrap();
    volume.write(id, 0, &pattern(5, BLOCK), false).unwrap();
    volume.commit().unwrap();
    assert_eq!(volume.read(id, 0, BLOCK as u64).unwrap(), pattern(5, BLOCK));
    assert_clean(&mut volume);
}
