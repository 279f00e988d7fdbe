//! The RAID-4/5 write hole: a crash while a partial stripe is written can
//! leave a row's parity out of step with its data; a member that fails later
//! is then reconstructed wrongly — flushed data of the *other* blocks of the
//! row, never rewritten, lost. The volume logs the regions it is about to
//! write (write intents, durable before the writes) and the next open
//! recomputes their parity, so a member failing after the restart loses
//! nothing flushed. Without the intents the same crashes do lose data (shown
//! below, so the test is known to see the hole).

use crate::common;

use common::{pattern, BLOCK};
use proxima_device::{seeds_for_test, BlockDevice, CrashDevice, MemoryDevice, RaidConfig, RaidDevice};
use proxima_engine::{EngineError, Volume, VolumeOptions};

const MEMBERS: usize = 5;
const MEMBER_BLOCKS: u64 = 1024;

fn config() -> RaidConfig {
    // 16 KiB units: a stripe of four data units is 16 blocks.
    RaidConfig::raid5().with_stripe_unit_bytes(16 * 1024)
}

fn options(write_intents: bool) -> VolumeOptions {
    // Every write goes straight to the data device.
    VolumeOptions { staging_threshold_bytes: 0, write_intents, ..VolumeOptions::default() }
}

/// Flushes 8 blocks, then writes the next 8 of the same stripe without a
/// flush and crashes, each member keeping or dropping its pending writes by
/// `seed`. Returns the members as the crash left them, and the flash.
fn crash_during_a_partial_stripe_write(seed: u64, write_intents: bool) -> (Vec<MemoryDevice>, MemoryDevice) {
    let members = (0..MEMBERS).map(|_| CrashDevice::new(MemoryDevice::new(4096, MEMBER_BLOCKS))).collect();
    let raid = RaidDevice::new(members, config()).unwrap();
    let mut volume = Volume::format(raid, MemoryDevice::new(4096, 1024), 5, options(write_intents)).unwrap();
    let id = volume.create_extent("e", 64 * BLOCK as u64).unwrap();
    volume.write(id, 0, &pattern(1, 8 * BLOCK), true).unwrap();
    volume.write(id, 8 * BLOCK as u64, &pattern(2, 8 * BLOCK), false).unwrap();
    let (mut raid, flash) = volume.into_devices();
    let members = (0..MEMBERS)
        .map(|member| {
            let device = raid.member_mut(member);
            device.crash(seed.wrapping_mul(31).wrapping_add(member as u64)).unwrap();
            let mut copy = MemoryDevice::new(4096, MEMBER_BLOCKS);
            copy.write_blocks(0, device.inner().contents()).unwrap();
            copy
        })
        .collect();
    (members, flash)
}

/// Restarts after the crash, then fails member `failed` and reads the
/// flushed blocks back.
fn flushed_blocks_after_a_later_failure(
    members: &[MemoryDevice],
    flash: &MemoryDevice,
    failed: usize,
    write_intents: bool,
) -> Result<Vec<u8>, EngineError> {
    let copies = members.iter().map(common::copy_of).collect();
    let raid = RaidDevice::new(copies, config()).unwrap();
    let mut volume = Volume::open(raid, common::copy_of(flash), options(write_intents)).unwrap();
    volume.data_device_mut().fail_member(failed).unwrap();
    let id = volume.extent_id("e").unwrap();
    volume.read(id, 0, 8 * BLOCK as u64)
}

#[test]
fn a_member_failing_after_a_crash_and_restart_loses_no_flushed_data() {
    let rerun = "cargo test --release -p proxima-engine --test integration raid_write_hole_is_resynced::";
    for seed in seeds_for_test(0..24, "PROXIMA_WRITE_HOLE_SEED", rerun) {
        let (members, flash) = crash_during_a_partial_stripe_write(seed, true);
        for failed in 0..MEMBERS {
            let read = flushed_blocks_after_a_later_failure(&members, &flash, failed, true);
            assert_eq!(read.ok(), Some(pattern(1, 8 * BLOCK)), "seed {seed}, member {failed} failed");
        }
    }
}

#[test]
fn without_write_intents_the_same_crashes_lose_flushed_data() {
    let losses = (0..24)
        .flat_map(|seed| {
            let (members, flash) = crash_during_a_partial_stripe_write(seed, false);
            (0..MEMBERS)
                .map(|failed| flushed_blocks_after_a_later_failure(&members, &flash, failed, false))
                .collect::<Vec<_>>()
        })
        .filter(|read| read.as_ref().ok() != Some(&pattern(1, 8 * BLOCK)))
        .count();
    assert!(losses > 0, "the crashes never opened the write hole: the test above proves nothing");
}
