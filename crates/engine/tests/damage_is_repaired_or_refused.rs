//! Damage to the log, to staged data or to data blocks is never served as
//! data and never loses a flushed write silently.
//!
//! A flipped bit in the second log block used to end replay there: the
//! thousands of flushed writes after it read back stale, and fsck found
//! nothing. A flipped bit in a staged or data block was served as data. Log
//! blocks are now mirrored and carry the last block a completed flush made
//! durable; data and staged blocks have checksums, verified on every read and
//! by fsck, and repaired from a RAID array's parity.

use crate::common;

use common::{copy_of, member_of, pattern, BLOCK};
use proxima_device::{BlockDevice, MemoryDevice, RaidConfig, RaidDevice};
use proxima_engine::codec::{decode_log_block, Superblock, BLOCK_SIZE};
use proxima_engine::{DeviceRole, EngineError, FindingKind, FsckScope, Location, LogEnd, Volume, VolumeOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const EXTENT_BLOCKS: u64 = 2048;

/// No CP of its own during the workload, so the log holds every write.
fn options() -> VolumeOptions {
    VolumeOptions { records_per_checkpoint: u64::MAX, ..VolumeOptions::default() }
}

/// 3000 random 4 KiB writes to a 8 MiB extent with a flush every 100, then a
/// crash (no CP): returns the devices and the extent's contents as flushed.
fn flushed_workload(data: MemoryDevice) -> (MemoryDevice, MemoryDevice, Vec<u8>) {
    let mut volume = Volume::format(data, MemoryDevice::new(4096, 8192), 7, options()).unwrap();
    let id = volume.create_extent("e", EXTENT_BLOCKS * BLOCK as u64).unwrap();
    let mut contents = vec![0u8; (EXTENT_BLOCKS as usize) * BLOCK];
    let mut rng = ChaCha8Rng::seed_from_u64(3000);
    for index in 0..3000u64 {
        let block = rng.gen_range(0..EXTENT_BLOCKS) as usize;
        let bytes = pattern(index + 1, BLOCK);
        volume.write(id, (block * BLOCK) as u64, &bytes, false).unwrap();
        contents[block * BLOCK..(block + 1) * BLOCK].copy_from_slice(&bytes);
        if index % 100 == 99 {
            volume.flush().unwrap();
        }
    }
    let (data, flash) = volume.into_devices();
    (data, flash, contents)
}

/// The flash blocks of the log after the superblock's CP: each block's
/// primary and mirror copy, in chain order.
fn log_slots(flash: &MemoryDevice) -> Vec<(u64, u64)> {
    let block = |index: u64| &flash.contents()[(index as usize) * BLOCK_SIZE..(index as usize + 1) * BLOCK_SIZE];
    let superblock = Superblock::decode(block(0)).unwrap();
    let mut slots = Vec::new();
    let mut slot = superblock.log_head;
    while let Ok(decoded) = decode_log_block(block(slot.primary)) {
        if decoded.header.generation != superblock.generation || decoded.header.key != slots.len() as u64 {
            break;
        }
        slots.push((slot.primary, slot.mirror));
        slot = decoded.next;
    }
    slots
}

fn flip(device: &mut MemoryDevice, block: u64, byte: usize, mask: u8) {
    let mut bytes = device.read_blocks(block, 1).unwrap();
    bytes[byte] ^= mask;
    device.write_blocks(block, &bytes).unwrap();
}

#[test]
fn a_flipped_bit_in_a_log_block_loses_no_flushed_write() {
    let (data, mut flash, contents) = flushed_workload(MemoryDevice::new(4096, 8192));
    let slots = log_slots(&flash);
    assert!(slots.len() > 10, "the workload's log spans many blocks");
    // The generation field of the second log block's first copy.
    flip(&mut flash, slots[1].0, 32, 0x10);
    let report = proxima_engine::fsck_devices(&mut copy_of(&data), &mut copy_of(&flash), FsckScope::Metadata).unwrap();
    assert!(report.findings.iter().any(|finding| finding.kind == FindingKind::LogCopyDamaged), "{report:#?}");
    let mut volume = Volume::open(data, flash, options()).unwrap();
    assert_eq!(volume.recovery().damaged_log_copies, vec![slots[1].0]);
    assert_eq!(volume.read(1, 0, contents.len() as u64).unwrap(), contents, "flushed writes lost");
    let report = volume.fsck().unwrap();
    assert!(report.is_clean(), "the CP at open rewrote the log away: {report:#?}");
}

#[test]
fn a_flipped_bit_in_acknowledged_staged_data_is_reported_not_served() {
    let (data, mut flash, contents) = flushed_workload(MemoryDevice::new(4096, 8192));
    let volume = Volume::open(copy_of(&data), copy_of(&flash), options()).unwrap();
    // A block whose newest value is staged: flip its staged copy.
    let (logical, flash_block) = (0..EXTENT_BLOCKS)
        .find_map(|block| match volume.block_location(1, block).unwrap() {
            Some(Location::Flash(flash_block)) => Some((block, flash_block)),
            _ => None,
        })
        .unwrap();
    drop(volume);
    flip(&mut flash, flash_block, 100, 0x01);
    let mut volume = Volume::open(data, flash, options()).unwrap();
    let recovery = volume.recovery().clone();
    let corrupt_in_log = recovery.corrupt_staged_blocks.iter().any(|block| block.flash_block == flash_block);
    let read = volume.read(1, logical * BLOCK as u64, BLOCK as u64);
    assert!(
        matches!(read, Err(EngineError::ChecksumMismatch { role: DeviceRole::Flash, block }) if block == flash_block),
        "{read:?}"
    );
    // Every other block reads back as flushed.
    for block in (0..EXTENT_BLOCKS).filter(|&block| block != logical) {
        let expected = &contents[(block as usize) * BLOCK..(block as usize + 1) * BLOCK];
        assert_eq!(volume.read(1, block * BLOCK as u64, BLOCK as u64).unwrap(), expected, "block {block}");
    }
    let report = volume.fsck().unwrap();
    assert!(report.findings.iter().any(|finding| finding.kind == FindingKind::DataChecksum), "{report:#?}");
    assert!(corrupt_in_log, "every write was flushed, so its damage is reported: {recovery:?}");
    assert_eq!(recovery.end, Some(LogEnd::Clean));
}

#[test]
fn a_flipped_bit_in_a_data_block_is_refused_without_redundancy_and_repaired_with_it() {
    // One disk: refused, and fsck says so.
    let mut volume =
        Volume::format(MemoryDevice::new(4096, 8192), MemoryDevice::new(4096, 1024), 9, options()).unwrap();
    let id = volume.create_extent("e", 512 * BLOCK as u64).unwrap();
    volume.write(id, 0, &pattern(1, 512 * BLOCK), true).unwrap();
    let Some(Location::Data(block)) = volume.block_location(id, 7).unwrap() else { panic!("a data block") };
    let (mut data, flash) = volume.close().unwrap();
    flip(&mut data, block, 4000, 0x80);
    let mut volume = Volume::open(data, flash, options()).unwrap();
    let read = volume.read(id, 0, 512 * BLOCK as u64);
    assert!(
        matches!(read, Err(EngineError::ChecksumMismatch { role: DeviceRole::Data, block: b }) if b == block),
        "{read:?}"
    );
    let report = volume.fsck().unwrap();
    assert!(report.findings.iter().any(|finding| finding.kind == FindingKind::DataChecksum), "{report:#?}");

    // RAID-5: repaired from parity, and written back.
    let members = (0..5).map(|_| MemoryDevice::new(4096, 2048)).collect();
    let raid = RaidDevice::new(members, RaidConfig::raid5().with_stripe_unit_bytes(64 * 1024)).unwrap();
    let mut volume = Volume::format(raid, MemoryDevice::new(4096, 1024), 9, options()).unwrap();
    let id = volume.create_extent("e", 512 * BLOCK as u64).unwrap();
    volume.write(id, 0, &pattern(1, 512 * BLOCK), true).unwrap();
    let Some(Location::Data(block)) = volume.block_location(id, 7).unwrap() else { panic!("a data block") };
    let (mut raid, flash) = volume.close().unwrap();
    let (member, member_block) = member_of(&mut raid, block);
    flip(raid.member_mut(member), member_block, 4000, 0x80);
    let mut volume = Volume::open(raid, flash, options()).unwrap();
    assert_eq!(volume.read(id, 0, 512 * BLOCK as u64).unwrap(), pattern(1, 512 * BLOCK));
    assert_eq!(volume.stats().repaired_blocks, 1);
    assert!(volume.fsck().unwrap().is_clean(), "repaired on the member");
}
