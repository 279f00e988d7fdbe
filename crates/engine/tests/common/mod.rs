//! Helpers shared by the engine's scenario tests.

use proxima_device::{BlockDevice, MemoryDevice, RaidDevice};
use proxima_engine::{Volume, VolumeOptions};

/// Bytes of a block.
pub const BLOCK: usize = 4096;

/// A fresh volume on memory devices.
pub fn memory_volume(data_blocks: u64, flash_blocks: u64) -> Volume<MemoryDevice, MemoryDevice> {
    Volume::format(
        MemoryDevice::new(4096, data_blocks).named("data"),
        MemoryDevice::new(4096, flash_blocks).named("flash"),
        0x5eed,
        VolumeOptions::default(),
    )
    .expect("format")
}

/// A copy of a memory device's contents.
pub fn copy_of(device: &MemoryDevice) -> MemoryDevice {
    let info = device.info();
    let mut copy = MemoryDevice::new(info.block_size_bytes, info.block_count).named(info.name.clone());
    copy.write_blocks(0, device.contents()).unwrap();
    copy
}

/// A block of `byte` repeated, tagged with `tag` in its first 8 bytes.
pub fn pattern(tag: u64, length: usize) -> Vec<u8> {
    let mut bytes = vec![(tag % 251) as u8; length];
    let prefix = tag.to_le_bytes();
    let n = prefix.len().min(length);
    bytes[..n].copy_from_slice(&prefix[..n]);
    bytes
}

/// Asserts fsck finds nothing.
pub fn assert_clean<D: BlockDevice, F: BlockDevice>(volume: &mut Volume<D, F>) {
    let report = volume.fsck().expect("fsck runs");
    assert!(report.is_clean(), "fsck findings: {:#?}", report.findings);
}

/// One request as a [`Recorder`] saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordedRequest {
    /// Read, write or trim.
    pub op: proxima_device::IoOp,
    /// First block.
    pub block: u64,
    /// Blocks.
    pub block_count: u32,
}

/// A device wrapper that records every submitted batch.
#[derive(Debug)]
pub struct Recorder<D> {
    /// The device beneath.
    pub inner: D,
    /// Every batch submitted, in order.
    pub batches: Vec<Vec<RecordedRequest>>,
}

impl<D> Recorder<D> {
    /// Wraps `inner`.
    pub fn new(inner: D) -> Self {
        Self { inner, batches: Vec::new() }
    }
}

impl<D: BlockDevice> BlockDevice for Recorder<D> {
    fn info(&self) -> proxima_device::DeviceInfo {
        self.inner.info()
    }
    fn submit(
        &mut self,
        batch: Vec<proxima_device::IoRequest>,
    ) -> Result<proxima_device::BatchTicket, proxima_device::DeviceError> {
        self.batches.push(
            batch
                .iter()
                .map(|request| RecordedRequest {
                    op: request.op,
                    block: request.block,
                    block_count: request.block_count,
                })
                .collect(),
        );
        self.inner.submit(batch)
    }
    fn wait(
        &mut self,
        ticket: proxima_device::BatchTicket,
    ) -> Result<Vec<proxima_device::IoCompletion>, proxima_device::DeviceError> {
        self.inner.wait(ticket)
    }
    fn flush(&mut self) -> Result<(), proxima_device::DeviceError> {
        self.inner.flush()
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
}

/// A device that keeps no payload (metadata-only simulation without a
/// simulator): writes are accepted and dropped, reads return no bytes.
#[derive(Debug)]
pub struct NullDevice {
    info: proxima_device::DeviceInfo,
    completions: Vec<Vec<proxima_device::IoCompletion>>,
}

impl NullDevice {
    /// A device of `block_count` 4 KiB blocks.
    pub fn new(block_count: u64) -> Self {
        let info = proxima_device::DeviceInfo {
            name: "null".into(),
            block_size_bytes: 4096,
            block_count,
            atomic_write_bytes: 512,
            stores_payload: false,
        };
        Self { info, completions: Vec::new() }
    }
}

impl BlockDevice for NullDevice {
    fn info(&self) -> proxima_device::DeviceInfo {
        self.info.clone()
    }
    fn submit(
        &mut self,
        batch: Vec<proxima_device::IoRequest>,
    ) -> Result<proxima_device::BatchTicket, proxima_device::DeviceError> {
        let completions = batch
            .iter()
            .map(|request| proxima_device::IoCompletion {
                result: proxima_device::validate_request(&self.info, request).map(|()| Vec::new()),
                submitted_ns: 0,
                completed_ns: 0,
            })
            .collect();
        self.completions.push(completions);
        Ok(proxima_device::BatchTicket(self.completions.len() as u64 - 1))
    }
    fn wait(
        &mut self,
        ticket: proxima_device::BatchTicket,
    ) -> Result<Vec<proxima_device::IoCompletion>, proxima_device::DeviceError> {
        Ok(std::mem::take(&mut self.completions[ticket.0 as usize]))
    }
    fn flush(&mut self) -> Result<(), proxima_device::DeviceError> {
        Ok(())
    }
    fn now_ns(&self) -> u64 {
        0
    }
}

/// The member and member block holding an array block, found by writing a
/// marker through the array and looking for it (no layout arithmetic here).
pub fn member_of(raid: &mut RaidDevice<MemoryDevice>, block: u64) -> (usize, u64) {
    let original = raid.read_blocks(block, 1).unwrap();
    let mut marked = original.clone();
    marked[..8].copy_from_slice(b"FINDME!!");
    raid.write_blocks(block, &marked).unwrap();
    let mut found = std::collections::BTreeMap::new();
    for member in 0..raid.member_count() {
        let contents = raid.member_mut(member).contents().to_vec();
        for (index, chunk) in contents.chunks(BLOCK).enumerate() {
            if chunk[..8] == *b"FINDME!!" {
                found.insert(member, index as u64);
            }
        }
    }
    raid.write_blocks(block, &original).unwrap();
    assert_eq!(found.len(), 1, "one member holds the block");
    found.into_iter().next().unwrap()
}
