//! Opening the devices of a volume: each data disk and the flash device is a
//! file or block device, a `proxima_device::FileDevice` accessed either
//! through the page cache (`fdatasync` on flush, the default and what nbdkit's
//! file plugin does) or with `O_DIRECT`, held exclusively while open, and
//! labelled (`proxima_device::LabeledDevice`: block 0 names the volume and the
//! device's place in it). Several data disks form a RAID-4 or RAID-5 array of
//! labelled members.
//!
//! [`DataDevice`] is an enum rather than a boxed trait object so that the
//! engine's `Volume<D, F>` stays `Send` and monomorphic.

use std::path::Path;

pub use proxima_device::TrimPolicy;
use proxima_device::{
    BatchTicket, BlockDevice, DeviceError, DeviceInfo, FileDevice, FileIo, FileOptions, IoCompletion, IoRequest,
    LabeledDevice, RaidDevice, WriteBack,
};
use serde::{Deserialize, Serialize};

/// Block size of every Proxima device.
pub const BLOCK_BYTES: u64 = 4096;

/// How a file or block device is accessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum IoMode {
    /// Through the page cache; a flush is `fdatasync` (`fsync` on a block device).
    #[default]
    Buffered,
    /// `O_DIRECT`, bypassing the page cache (falls back to buffered where the
    /// file system refuses it).
    Direct,
}

impl IoMode {
    /// The name used in the configuration file and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            IoMode::Buffered => "buffered",
            IoMode::Direct => "direct",
        }
    }

    fn file_io(self) -> FileIo {
        match self {
            IoMode::Buffered => FileIo::Buffered,
            IoMode::Direct => FileIo::Direct,
        }
    }
}

/// Opens an existing file or block device (4 KiB blocks) in `mode`, trims
/// handled as `trims` says. The flash file ignores trims: the engine trims
/// every flash block a CP releases, and on ext4 a hole punched per released
/// block cost a journal transaction (2270 such calls took 2.07 s of a 3 s
/// random-write run) only for the staging log to allocate the space again.
pub fn open_file(path: &Path, mode: IoMode, trims: TrimPolicy) -> Result<FileDevice, DeviceError> {
    FileDevice::open_with_options(path, FileOptions { io: mode.file_io(), trims, ..FileOptions::default() })
}

/// A labelled file or block device: what every device of a volume is.
pub type VolumeDisk = LabeledDevice<FileDevice>;

/// The data device of a volume: one disk, or a RAID-4/5 array of several.
#[derive(Debug)]
pub enum DataDevice {
    /// A single disk.
    Single(VolumeDisk),
    /// An array (data members first, parity last for RAID-4).
    Raid(RaidDevice<VolumeDisk>),
}

impl DataDevice {
    fn device(&self) -> &dyn BlockDevice {
        match self {
            DataDevice::Single(device) => device,
            DataDevice::Raid(device) => device,
        }
    }

    fn device_mut(&mut self) -> &mut dyn BlockDevice {
        match self {
            DataDevice::Single(device) => device,
            DataDevice::Raid(device) => device,
        }
    }
}

impl BlockDevice for DataDevice {
    fn info(&self) -> DeviceInfo {
        self.device().info()
    }
    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        self.device_mut().submit(batch)
    }
    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        self.device_mut().wait(ticket)
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.device_mut().flush()
    }
    fn now_ns(&self) -> u64 {
        self.device().now_ns()
    }
    fn read_into(&mut self, block: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        self.device_mut().read_into(block, buffer)
    }
    fn read_many_into(&mut self, reads: &mut [(u64, &mut [u8])]) -> Result<(), DeviceError> {
        self.device_mut().read_many_into(reads)
    }
    fn write_blocks(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.device_mut().write_blocks(block, data)
    }
    fn write_gathered(&mut self, block: u64, pieces: &[&[u8]]) -> Result<(), DeviceError> {
        self.device_mut().write_gathered(block, pieces)
    }
    fn supports_shared_reads(&self) -> bool {
        self.device().supports_shared_reads()
    }
    fn read_into_shared(&self, block: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        self.device().read_into_shared(block, buffer)
    }
    fn write_back_handle(&self) -> Result<Option<Box<dyn WriteBack>>, DeviceError> {
        self.device().write_back_handle()
    }
    fn read_redundant(&mut self, block: u64) -> Result<Option<Vec<u8>>, DeviceError> {
        self.device_mut().read_redundant(block)
    }
    fn repair(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.device_mut().repair(block, data)
    }
    fn write_intent_region_blocks(&self) -> Option<u64> {
        self.device().write_intent_region_blocks()
    }
    fn resync(&mut self, block: u64, block_count: u64) -> Result<(), DeviceError> {
        self.device_mut().resync(block, block_count)
    }
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::path::PathBuf;

    use super::*;

    fn file_of(directory: &Path, name: &str, length_bytes: u64) -> PathBuf {
        let path = directory.join(name);
        File::create(&path).unwrap().set_len(length_bytes).unwrap();
        path
    }

    #[test]
    fn raid_of_labelled_buffered_files_is_a_data_device() {
        let directory = tempfile::tempdir().unwrap();
        let members: Vec<VolumeDisk> = (0..3)
            .map(|index| {
                let path = file_of(directory.path(), &format!("d{index}"), 65 * BLOCK_BYTES);
                let file = open_file(&path, IoMode::Buffered, TrimPolicy::Forward).unwrap();
                let label = proxima_device::DeviceLabel {
                    volume_id: 1,
                    role: proxima_device::LabelRole::Data,
                    member_index: index,
                    member_count: 3,
                    generation: 1,
                };
                LabeledDevice::create(file, label).unwrap()
            })
            .collect();
        let raid = RaidDevice::new(members, proxima_device::RaidConfig::raid5().with_stripe_unit_bytes(16384)).unwrap();
        let mut device = DataDevice::Raid(raid);
        assert_eq!(device.info().block_count, 128);
        let data = vec![7u8; usize::try_from(5 * BLOCK_BYTES).expect("five blocks fit in memory")];
        device.write_blocks(2, &data).unwrap();
        assert_eq!(device.read_blocks(2, 5).unwrap(), data);
    }
}
