//! Fault injection on every metadata block in use, of every kind: a bit flip,
//! a zeroed block or junk read back from it is detected — a clear corruption
//! error at open, at a read, or as an fsck finding — never returned as data,
//! and never taken for a crash that rolls back committed data. A corrupt
//! superblock slot is survived through the other slot.

use crate::common;

use std::collections::BTreeMap;

use common::{pattern, BLOCK};
use proxima_device::{BlockDevice, Fault, FaultDevice, FaultPlan, FaultRule, MemoryDevice};
use proxima_engine::codec::{decode_header, BlockKind};
use proxima_engine::{EngineError, FindingKind, Volume, VolumeOptions};

const EXTENT_BLOCKS: u64 = 800;

/// A volume with a multi-level map, staged and direct data, two snapshots and
/// a pending snapshot deletion; returns its devices and expected contents.
/// Expected contents by (snapshot name, "" for the active tree; extent name).
type Expected = BTreeMap<(String, String), Vec<u8>>;

fn build() -> (MemoryDevice, MemoryDevice, Expected, u64, Vec<u64>) {
    let mut volume =
        Volume::format(MemoryDevice::new(4096, 8192), MemoryDevice::new(4096, 2048), 9, VolumeOptions::default())
            .unwrap();
    let id = volume.create_extent("lun", EXTENT_BLOCKS * BLOCK as u64).unwrap();
    let mut contents = vec![0u8; (EXTENT_BLOCKS as usize) * BLOCK];
    let mut write = |volume: &mut Volume<MemoryDevice, MemoryDevice>, block: u64, count: u64, tag: u64| {
        let bytes = pattern(tag, (count as usize) * BLOCK);
        volume.write(id, block * BLOCK as u64, &bytes, false).unwrap();
        contents[(block as usize) * BLOCK..((block + count) as usize) * BLOCK].copy_from_slice(&bytes);
    };
    write(&mut volume, 0, 100, 1);
    volume.create_snapshot("old").unwrap();
    for block in (0..EXTENT_BLOCKS).step_by(2) {
        write(&mut volume, block, 1, block + 7);
    }
    volume.destage().unwrap();
    for block in (1..EXTENT_BLOCKS).step_by(7) {
        write(&mut volume, block, 1, block + 9);
    }
    volume.create_snapshot("new").unwrap();
    volume.create_snapshot("doomed").unwrap();
    write(&mut volume, 300, 60, 3);
    volume.delete_snapshot("doomed").unwrap();
    let mut expected = BTreeMap::new();
    for snapshot in ["old", "new"] {
        let bytes = volume.read_snapshot(snapshot, "lun", 0, EXTENT_BLOCKS * BLOCK as u64).unwrap();
        expected.insert((snapshot.to_string(), "lun".to_string()), bytes);
    }
    expected.insert((String::new(), "lun".to_string()), contents);
    assert!(volume.fsck().unwrap().is_clean());
    let generation = volume.generation();
    let in_use = volume.flash_blocks_in_use();
    let (data, flash) = volume.into_devices();
    (data, flash, expected, generation, in_use)
}

fn copy_of(device: &MemoryDevice) -> MemoryDevice {
    let mut copy = MemoryDevice::new(4096, device.info().block_count);
    copy.write_blocks(0, device.contents()).unwrap();
    copy
}

/// Opens with `fault` on flash block `block` and reads everything; returns
/// whether the corruption was reported.
fn detected(
    data: &MemoryDevice,
    flash: &MemoryDevice,
    block: u64,
    fault: Fault,
    expected: &Expected,
    generation: u64,
) -> bool {
    let plan = FaultPlan::new(block).with_rule(FaultRule::on_read_block(block, fault));
    let faulty = FaultDevice::new(copy_of(flash), plan);
    let mut volume = match Volume::open(copy_of(data), faulty, VolumeOptions::default()) {
        Err(EngineError::Corrupt { .. } | EngineError::NoSuperblock { .. }) => return true,
        Err(other) => panic!("block {block}: open failed with an error that is not corruption: {other}"),
        Ok(volume) => volume,
    };
    assert!(volume.generation() > generation, "block {block}: open rolled back to generation {}", volume.generation());
    let mut reported = false;
    for ((snapshot, extent), bytes) in expected {
        let result = if snapshot.is_empty() {
            let id = volume.extent_id(extent).unwrap();
            volume.read(id, 0, bytes.len() as u64)
        } else {
            volume.read_snapshot(snapshot, extent, 0, bytes.len() as u64)
        };
        match result {
            Ok(read) => assert!(&read == bytes, "block {block}: wrong data returned for {extent}@{snapshot}"),
            Err(EngineError::Corrupt { .. }) => reported = true,
            Err(other) => panic!("block {block}: read failed with an error that is not corruption: {other}"),
        }
    }
    let (mut data_device, mut flash_device) = volume.into_devices();
    match proxima_engine::fsck_devices(&mut data_device, &mut flash_device, proxima_engine::FsckScope::MetadataAndData)
    {
        Ok(report) => {
            reported |= report
                .findings
                .iter()
                .any(|finding| matches!(finding.kind, FindingKind::CorruptMetadata | FindingKind::SuperblockSlot))
        }
        Err(EngineError::Corrupt { .. } | EngineError::NoSuperblock { .. }) => reported = true,
        Err(other) => panic!("block {block}: fsck failed with an error that is not corruption: {other}"),
    }
    reported
}

#[test]
fn every_corrupt_metadata_block_is_detected() {
    let (data, flash, expected, generation, in_use) = build();
    let mut by_kind: BTreeMap<&str, u64> = BTreeMap::new();
    let mut checked = 0;
    for block in 0..flash.info().block_count {
        let bytes = &flash.contents()[(block as usize) * BLOCK..(block as usize + 1) * BLOCK];
        let Ok(header) = decode_header(bytes) else { continue };
        if header.kind == BlockKind::LogBlock || (block > 1 && !in_use.contains(&block)) {
            continue;
        }
        for fault in [Fault::FlipBits { bit_count: 1 }, Fault::Zeroed, Fault::Junk] {
            let reported = detected(&data, &flash, block, fault, &expected, generation);
            let is_superblock = header.kind == BlockKind::Superblock;
            assert!(reported || is_superblock, "block {block} ({}): {fault:?} went unnoticed", header.kind.name());
        }
        *by_kind.entry(header.kind.name()).or_default() += 1;
        checked += 1;
    }
    println!("corrupted {checked} metadata blocks three ways each: {by_kind:?}");
    for kind in ["superblock", "map node", "extent-table node", "snapshot-table node", "bitmap page"] {
        assert!(by_kind.contains_key(kind), "no {kind} was exercised");
    }
}

#[test]
fn a_corrupt_log_block_never_yields_wrong_data() {
    let mut volume =
        Volume::format(MemoryDevice::new(4096, 1024), MemoryDevice::new(4096, 256), 3, VolumeOptions::default())
            .unwrap();
    let id = volume.create_extent("lun", 16 * BLOCK as u64).unwrap();
    volume.write(id, 0, &pattern(1, BLOCK), false).unwrap();
    volume.commit().unwrap();
    volume.write(id, 0, &pattern(2, BLOCK), true).unwrap();
    let (data, flash) = volume.into_devices();
    let log_blocks: Vec<u64> = (0..flash.info().block_count)
        .filter(|&block| {
            let bytes = &flash.contents()[(block as usize) * BLOCK..(block as usize + 1) * BLOCK];
            decode_header(bytes).is_ok_and(|header| header.kind == BlockKind::LogBlock)
        })
        .collect();
    assert!(!log_blocks.is_empty());
    for block in log_blocks {
        let plan = FaultPlan::new(block).with_rule(FaultRule::on_read_block(block, Fault::FlipBits { bit_count: 3 }));
        let mut volume =
            Volume::open(copy_of(&data), FaultDevice::new(copy_of(&flash), plan), VolumeOptions::default()).unwrap();
        let read = volume.read(id, 0, BLOCK as u64).unwrap();
        assert!(read == pattern(1, BLOCK) || read == pattern(2, BLOCK), "log block {block}: wrong data");
    }
}
