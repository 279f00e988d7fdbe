//! The wrappers stacked as the engine's tests use them: statistics over an error
//! latch over fault injection over crash recording over memory. An injected write
//! error latches the stack, the statistics count it, and the crash recording holds
//! only what completed.

use proxima_device::{
    BlockDevice, CrashDevice, CrashPoint, DeviceError, Fault, FaultDevice, FaultPlan, FaultRule, LatchDevice,
    MemoryDevice, StatsDevice,
};

type Stack = StatsDevice<LatchDevice<FaultDevice<CrashDevice<MemoryDevice>>>>;

fn stack(plan: FaultPlan) -> Stack {
    StatsDevice::new(LatchDevice::new(FaultDevice::new(CrashDevice::new(MemoryDevice::new(4096, 16)), plan)))
}

#[test]
fn an_injected_write_error_latches_and_is_counted_and_not_recorded() {
    let mut device = stack(FaultPlan::new(9).with_rule(FaultRule::on_write_index(2, Fault::IoError)));
    device.write_blocks(0, &[1; 4096]).unwrap();
    device.flush().unwrap();
    device.write_blocks(1, &[2; 4096]).unwrap();
    assert!(matches!(device.write_blocks(2, &[3; 4096]), Err(DeviceError::Io { block: 2, .. })));
    assert!(matches!(device.write_blocks(3, &[4; 4096]), Err(DeviceError::Latched { .. })));
    assert!(matches!(device.flush(), Err(DeviceError::Latched { .. })));
    assert_eq!(device.read_blocks(1, 1).unwrap(), vec![2; 4096], "reads still served");

    let stats = device.stats();
    assert_eq!((stats.writes.request_count, stats.writes.error_count), (4, 2));
    assert_eq!((stats.flush_count, stats.flush_error_count), (1, 1));

    let crash = device.inner().inner().inner();
    assert_eq!(crash.write_count(), 2, "only completed writes are recorded");
    let image = crash.crash_image(CrashPoint::clean_at(2));
    assert_eq!(image.blocks[&0], vec![1; 4096], "flushed write survives");
    assert_eq!(image.blocks[&1], vec![0; 4096], "unflushed write is dropped");
}

#[test]
fn silent_corruption_passes_through_every_layer_as_success() {
    let plan = FaultPlan::new(4).with_rule(FaultRule::on_read_block(5, Fault::Zeroed).once());
    let mut device = stack(plan);
    device.write_blocks(4, &[7; 8192]).unwrap();
    let data = device.read_blocks(4, 2).unwrap();
    assert_eq!(&data[..4096], &[7; 4096][..]);
    assert_eq!(&data[4096..], &[0; 4096][..], "block 5 reads as zeroes, and the read succeeds");
    assert_eq!(device.stats().reads.error_count, 0);
    assert_eq!(device.inner().inner().injected().len(), 1);
    assert!(!device.inner().is_latched());
}
