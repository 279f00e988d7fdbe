//! A write of zeroes carries no buffer and leaves its blocks reading as
//! zeroes on every device kind: memory, a file, a simulated drive keeping
//! payload, a RAID array (parity and zone checksums kept consistent), and
//! through the crash recorder, where it is durable once flushed like any
//! write; a write of zeroes that carries bytes is refused.

use std::sync::Arc;

use proxima_device::{
    BlockDevice, CrashDevice, CrashPoint, DeviceError, FileDevice, IoRequest, MemoryDevice, RaidConfig, RaidDevice,
    SimulatedDevice, SimulatedOptions, SimulationHandle, StatsDevice,
};
use proxima_disk::{DiskModel, HardDisk, Simulation};

const BLOCK: usize = 4096;

/// Fills blocks 0..8 with ones, writes zeroes over 2..5 and checks the result.
fn zeroes_over_ones(device: &mut dyn BlockDevice) {
    device.write_blocks(0, &[1; 8 * BLOCK]).unwrap();
    device.execute(vec![IoRequest::write_zeroes(2, 3)]).unwrap().remove(0).result.unwrap();
    let data = device.read_blocks(0, 8).unwrap();
    assert_eq!(&data[..2 * BLOCK], &[1; 2 * BLOCK][..]);
    assert_eq!(&data[2 * BLOCK..5 * BLOCK], &[0; 3 * BLOCK][..]);
    assert_eq!(&data[5 * BLOCK..], &[1; 3 * BLOCK][..]);
    let mut carrying = IoRequest::write_zeroes(0, 1);
    carrying.data = vec![0; BLOCK];
    let refused = device.execute(vec![carrying]).unwrap().remove(0).result;
    assert!(matches!(refused, Err(DeviceError::Invalid { .. })), "{refused:?}");
}

#[test]
fn memory_and_file_devices_read_zeroes_back() {
    zeroes_over_ones(&mut MemoryDevice::new(BLOCK as u32, 16));
    let directory = tempfile::tempdir().unwrap();
    zeroes_over_ones(&mut FileDevice::create(&directory.path().join("data"), BLOCK as u32, 16).unwrap());
}

#[test]
fn a_simulated_drive_times_it_as_a_write_and_keeps_zeroes() {
    let handle = SimulationHandle::new(Simulation::new(1));
    let model = Arc::new(DiskModel::builtin("cheetah15k5").unwrap());
    let mut disk =
        SimulatedDevice::hard_disk(&handle, HardDisk::new(model, 3), SimulatedOptions::named("disk")).unwrap();
    zeroes_over_ones(&mut disk);
    let before_ns = handle.now_ns();
    disk.execute(vec![IoRequest::write_zeroes(1000, 1)]).unwrap();
    assert!(handle.now_ns() > before_ns, "the write of zeroes takes the drive's time");
}

#[test]
fn a_raid_array_keeps_parity_and_checksums_consistent() {
    let members = (0..5).map(|_| MemoryDevice::new(BLOCK as u32, 64)).collect();
    let config = RaidConfig::raid4().with_stripe_unit_bytes(2 * BLOCK as u64).with_zone_checksums(3);
    let mut raid = RaidDevice::new(members, config).unwrap();
    zeroes_over_ones(&mut raid);
    assert_eq!(raid.verify_parity().unwrap(), vec![]);
    assert_eq!(raid.verify_zone_checksums().unwrap(), vec![]);
}

#[test]
fn it_is_counted_as_a_write_and_durable_once_flushed() {
    let mut device = StatsDevice::new(CrashDevice::new(MemoryDevice::new(BLOCK as u32, 16)));
    device.write_blocks(0, &[5; 2 * BLOCK]).unwrap();
    device.flush().unwrap();
    device.execute(vec![IoRequest::write_zeroes(0, 1)]).unwrap();
    assert_eq!(device.stats().writes.request_count, 2);
    let crash = device.inner();
    let before_flush = crash.crash_image(CrashPoint::clean_at(crash.write_count()));
    assert_eq!(before_flush.blocks[&0], vec![5; BLOCK], "not yet flushed: the old data may survive");
    device.flush().unwrap();
    let crash = device.inner();
    let flushed = crash.crash_image(CrashPoint::clean_at(crash.write_count()));
    assert_eq!(flushed.blocks[&0], vec![0; BLOCK]);
    assert_eq!(flushed.blocks[&1], vec![5; BLOCK]);
}
