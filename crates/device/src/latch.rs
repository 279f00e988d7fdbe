//! Error latch: after a write, trim or flush fails on the device beneath, refuse
//! every further write, trim and flush with [`DeviceError::Latched`], so that the
//! layers above never guess what reached the medium. Reads are still served.
//!
//! Only failures of the device count (`Io`, `NoSpace`): a malformed or
//! out-of-range request never reached the medium and does not latch.

use crate::batches::{SplicedBatch, WrapperBatches};
use crate::{BatchTicket, BlockDevice, DeviceError, DeviceInfo, IoCompletion, IoRequest};

/// Refuses writes after the first write or flush failure of `D`.
#[derive(Debug)]
pub struct LatchDevice<D> {
    inner: D,
    cause: Option<DeviceError>,
    /// Per outstanding batch, whether each request modifies the device.
    batches: WrapperBatches<Vec<bool>>,
}

impl<D: BlockDevice> LatchDevice<D> {
    /// Wraps `inner`, unlatched.
    pub fn new(inner: D) -> Self {
        Self { inner, cause: None, batches: WrapperBatches::default() }
    }

    /// Whether writes are refused.
    pub fn is_latched(&self) -> bool {
        self.cause.is_some()
    }

    /// The failure that latched the device, if any.
    pub fn latch_cause(&self) -> Option<&DeviceError> {
        self.cause.as_ref()
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// Unwraps the device.
    pub fn into_inner(self) -> D {
        self.inner
    }

    fn latched_error(&self) -> DeviceError {
        DeviceError::Latched { device: self.inner.info().name }
    }

    fn observe(&mut self, outcome: &Result<(), DeviceError>) {
        if let Err(error @ (DeviceError::Io { .. } | DeviceError::NoSpace { .. })) = outcome {
            self.cause.get_or_insert_with(|| error.clone());
        }
    }
}

impl<D: BlockDevice> BlockDevice for LatchDevice<D> {
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }

    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        let modifying: Vec<bool> = batch.iter().map(|request| request.op.modifies()).collect();
        let now_ns = self.inner.now_ns();
        let mut forwarded = Vec::with_capacity(batch.len());
        let mut slots = Vec::with_capacity(batch.len());
        for request in batch {
            if self.is_latched() && request.op.modifies() {
                let refused =
                    IoCompletion { result: Err(self.latched_error()), submitted_ns: now_ns, completed_ns: now_ns };
                slots.push(Some(refused));
            } else {
                slots.push(None);
                forwarded.push(request);
            }
        }
        let spliced = SplicedBatch::submit(&mut self.inner, forwarded, slots)?;
        Ok(self.batches.insert(spliced, modifying))
    }

    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        let (spliced, modifying) = self.batches.take(ticket, &self.inner.info().name)?;
        let completions = spliced.join(&mut self.inner)?;
        for (completion, _) in completions.iter().zip(&modifying).filter(|(_, &modifies)| modifies) {
            self.observe(&completion.result.as_ref().map(drop).map_err(Clone::clone));
        }
        Ok(completions)
    }

    /// The inner device's handle: writing back is harmless even once latched.
    fn write_back_handle(&self) -> Result<Option<Box<dyn crate::WriteBack>>, DeviceError> {
        self.inner.write_back_handle()
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        if self.is_latched() {
            return Err(self.latched_error());
        }
        let outcome = self.inner.flush();
        self.observe(&outcome);
        outcome
    }

    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }

    fn read_redundant(&mut self, block: u64) -> Result<Option<Vec<u8>>, DeviceError> {
        self.inner.read_redundant(block)
    }

    fn repair(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        if self.is_latched() {
            return Err(self.latched_error());
        }
        let outcome = self.inner.repair(block, data);
        self.observe(&outcome);
        outcome
    }

    fn write_intent_region_blocks(&self) -> Option<u64> {
        self.inner.write_intent_region_blocks()
    }

    fn resync(&mut self, block: u64, block_count: u64) -> Result<(), DeviceError> {
        if self.is_latched() {
            return Err(self.latched_error());
        }
        let outcome = self.inner.resync(block, block_count);
        self.observe(&outcome);
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::{Fault, FaultDevice, FaultPlan, FaultRule};
    use crate::MemoryDevice;

    #[test]
    fn a_failed_write_latches_writes_and_flushes_but_not_reads() {
        let plan = FaultPlan::new(1).with_rule(FaultRule::on_write_index(1, Fault::IoError));
        let mut device = LatchDevice::new(FaultDevice::new(MemoryDevice::new(4096, 8), plan));
        device.write_blocks(0, &[1; 4096]).unwrap();
        assert!(!device.is_latched());
        assert!(matches!(device.write_blocks(1, &[2; 4096]), Err(DeviceError::Io { .. })));
        assert!(device.is_latched());
        assert!(matches!(device.write_blocks(2, &[3; 4096]), Err(DeviceError::Latched { .. })));
        assert!(matches!(device.trim_blocks(0, 1), Err(DeviceError::Latched { .. })));
        assert!(matches!(device.flush(), Err(DeviceError::Latched { .. })));
        assert_eq!(device.read_blocks(0, 1).unwrap(), vec![1; 4096]);
        let completions = device.execute(vec![IoRequest::read(0, 1), IoRequest::write(3, 1, vec![4; 4096])]).unwrap();
        assert!(completions[0].result.is_ok());
        assert!(matches!(completions[1].result, Err(DeviceError::Latched { .. })));
        assert!(matches!(device.latch_cause(), Some(DeviceError::Io { block: 1, .. })));
    }

    #[test]
    fn malformed_requests_do_not_latch() {
        let mut device = LatchDevice::new(MemoryDevice::new(4096, 8));
        assert!(device.write_blocks(7, &[0; 8192]).is_err());
        assert!(device.execute(vec![IoRequest::write(0, 1, vec![0; 10])]).is_ok());
        assert!(!device.is_latched());
        device.flush().unwrap();
    }

    #[test]
    fn a_failed_flush_latches() {
        let plan = FaultPlan::new(1).with_rule(FaultRule::on_flush_index(0, Fault::IoError));
        let mut device = LatchDevice::new(FaultDevice::new(MemoryDevice::new(4096, 8), plan));
        assert!(matches!(device.flush(), Err(DeviceError::Io { .. })));
        assert!(matches!(device.write_blocks(0, &[0; 4096]), Err(DeviceError::Latched { .. })));
    }
}
