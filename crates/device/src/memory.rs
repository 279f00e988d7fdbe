//! A device in memory: the reference implementation of the [`BlockDevice`]
//! contract, used by tests and as the base under wrappers.

use std::time::Instant;

use crate::batches::CompletedBatches;
use crate::{
    validate_request, validate_span, BatchTicket, BlockDevice, DeviceError, DeviceInfo, IoCompletion, IoOp, IoRequest,
};

/// Blocks kept in a `Vec`; every write is immediately durable. A clone is an
/// independent copy (crash tests restore crash images onto clones).
#[derive(Debug, Clone)]
pub struct MemoryDevice {
    info: DeviceInfo,
    data: Vec<u8>,
    batches: CompletedBatches,
    opened: Instant,
}

impl MemoryDevice {
    /// A zero-filled device of `block_count` blocks of `block_size_bytes`.
    pub fn new(block_size_bytes: u32, block_count: u64) -> Self {
        assert!(block_size_bytes.is_power_of_two(), "block size must be a power of two");
        let length = usize::try_from(block_count * u64::from(block_size_bytes)).expect("device fits in memory");
        Self {
            info: DeviceInfo {
                name: "memory".into(),
                block_size_bytes,
                block_count,
                atomic_write_bytes: block_size_bytes.min(512),
                stores_payload: true,
            },
            data: vec![0; length],
            batches: CompletedBatches::default(),
            opened: Instant::now(),
        }
    }

    /// The same device with another name in errors and reports.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.info.name = name.into();
        self
    }

    /// The whole contents, for tests.
    pub fn contents(&self) -> &[u8] {
        &self.data
    }

    /// Where block `block` starts in `data` (a validated block: the device's
    /// blocks are all in memory, so its offset fits `usize`).
    fn byte_offset(&self, block: u64) -> usize {
        let block = usize::try_from(block).expect("a block of an in-memory device is addressable");
        block * self.info.block_size_bytes as usize
    }

    fn byte_range(&self, request: &IoRequest) -> std::ops::Range<usize> {
        let start = self.byte_offset(request.block);
        start..start + request.block_count as usize * self.info.block_size_bytes as usize
    }

    fn perform(&mut self, request: IoRequest) -> Result<Vec<u8>, DeviceError> {
        validate_request(&self.info, &request)?;
        let range = self.byte_range(&request);
        match request.op {
            IoOp::Read => Ok(self.data[range].to_vec()),
            IoOp::Write => {
                self.data[range].copy_from_slice(&request.data);
                Ok(Vec::new())
            }
            IoOp::Trim | IoOp::WriteZeroes => {
                self.data[range].fill(0);
                Ok(Vec::new())
            }
        }
    }
}

impl BlockDevice for MemoryDevice {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        let completions = batch
            .into_iter()
            .map(|request| {
                let submitted_ns = self.now_ns();
                let result = self.perform(request);
                IoCompletion { result, submitted_ns, completed_ns: self.now_ns() }
            })
            .collect();
        Ok(self.batches.insert(completions))
    }

    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        self.batches.take(ticket, &self.info.name)
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        Ok(())
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn read_into(&mut self, block: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        self.read_into_shared(block, buffer)
    }

    fn write_blocks(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        validate_span(&self.info, block, data.len())?;
        let start = self.byte_offset(block);
        self.data[start..start + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn supports_shared_reads(&self) -> bool {
        true
    }

    fn read_into_shared(&self, block: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        validate_span(&self.info, block, buffer.len())?;
        let start = self.byte_offset(block);
        buffer.copy_from_slice(&self.data[start..start + buffer.len()]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_then_read_returns_the_data() {
        let mut device = MemoryDevice::new(4096, 16);
        let data: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
        device.write_blocks(3, &data).unwrap();
        assert_eq!(device.read_blocks(3, 2).unwrap(), data);
        assert_eq!(device.read_blocks(2, 1).unwrap(), vec![0; 4096]);
    }

    #[test]
    fn out_of_range_and_malformed_requests_are_refused() {
        let mut device = MemoryDevice::new(4096, 16);
        assert!(matches!(device.read_blocks(15, 2), Err(DeviceError::OutOfRange { .. })));
        assert!(matches!(device.read_blocks(u64::MAX, 2), Err(DeviceError::OutOfRange { .. })));
        assert!(matches!(device.read_blocks(0, 0), Err(DeviceError::Invalid { .. })));
        assert!(matches!(device.write_blocks(0, &[1; 100]), Err(DeviceError::Invalid { .. })));
        let completions = device.execute(vec![IoRequest::write(0, 2, vec![0; 4096])]).unwrap();
        assert!(matches!(completions[0].result, Err(DeviceError::Invalid { .. })));
    }

    #[test]
    fn batches_complete_in_submission_order() {
        let mut device = MemoryDevice::new(512, 8);
        let first = device.submit(vec![IoRequest::write(1, 1, vec![7; 512]), IoRequest::read(1, 1)]).unwrap();
        let second = device.submit(vec![IoRequest::trim(1, 1)]).unwrap();
        let completions = device.wait(first).unwrap();
        assert_eq!(completions[1].result.as_ref().unwrap(), &vec![7; 512]);
        device.wait(second).unwrap();
        assert!(device.wait(second).is_err(), "a ticket is waited for once");
        assert_eq!(device.read_blocks(1, 1).unwrap(), vec![0; 512]);
    }
}
