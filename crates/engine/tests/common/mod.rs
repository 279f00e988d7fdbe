//! Helpers shared by the engine's scenario tests.
#![allow(dead_code, reason = "each test file uses a different subset")]

use proxima_device::{BlockDevice, MemoryDevice};
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
