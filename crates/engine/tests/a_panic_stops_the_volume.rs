//! A panic inside a volume operation leaves the in-memory state possibly
//! inconsistent with the disk. It used to be used afterwards all the same: a
//! server recovered the poisoned lock and committed a CP of whatever was in
//! memory. Now the volume records the panic: every later operation fails
//! with `Failed`, nothing is committed, and reopening recovers from the last
//! durable CP and its log.

use crate::common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use common::{assert_clean, pattern, BLOCK};
use proxima_device::{BatchTicket, BlockDevice, DeviceError, DeviceInfo, IoCompletion, IoOp, IoRequest, MemoryDevice};
use proxima_engine::{EngineError, Volume, VolumeOptions};

/// A device that panics when it is asked to write once armed.
#[derive(Debug)]
struct PanicOnWrite {
    inner: MemoryDevice,
    armed: bool,
}

impl BlockDevice for PanicOnWrite {
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }
    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        if self.armed && batch.iter().any(|request| request.op == IoOp::Write) {
            panic!("a write while armed");
        }
        self.inner.submit(batch)
    }
    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        self.inner.wait(ticket)
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.inner.flush()
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
}

#[test]
fn after_a_panic_nothing_is_committed_and_reopening_recovers_the_durable_state() {
    let flash = PanicOnWrite { inner: MemoryDevice::new(4096, 1024), armed: false };
    let mut volume = Volume::format(MemoryDevice::new(4096, 4096), flash, 1, VolumeOptions::default()).unwrap();
    let id = volume.create_extent("e", 64 * BLOCK as u64).unwrap();
    volume.write(id, 0, &pattern(1, 8 * BLOCK), true).unwrap();
    let generation = volume.generation();

    volume.flash_device_mut().armed = true;
    let panicked = catch_unwind(AssertUnwindSafe(|| volume.write(id, 0, &pattern(2, BLOCK), true)));
    assert!(panicked.is_err(), "the write panicked");
    volume.flash_device_mut().armed = false;

    assert!(volume.failure().is_some_and(|reason| reason.contains("panicked")), "{:?}", volume.failure());
    for outcome in [
        volume.write(id, 0, &pattern(3, BLOCK), false),
        volume.commit(),
        volume.flush(),
        volume.read(id, 0, BLOCK as u64).map(drop),
        volume.create_snapshot("s").map(drop),
    ] {
        assert!(matches!(outcome, Err(EngineError::Failed(_))), "{outcome:?}");
    }
    assert_eq!(volume.generation(), generation, "no CP after the panic");

    let (data, flash) = volume.into_devices();
    let mut volume = Volume::open(data, flash.inner, VolumeOptions::default()).unwrap();
    assert_eq!(volume.read(id, 0, 8 * BLOCK as u64).unwrap(), pattern(1, 8 * BLOCK));
    assert_clean(&mut volume);
}
