//! Device labels: block 0 of every device a volume is made of says which
//! volume it belongs to and what it is there (the flash device, or data
//! member *i* of *n*), so that a volume is never opened over another
//! volume's devices, a misconfigured path, or a stale member.
//!
//! [`LabeledDevice`] keeps the label block to itself and presents the blocks
//! after it as blocks `0..`: the engine, RAID and everything above never see
//! it. A label is written once, when the volume is created; it is checked at
//! every open against what the volume's configuration expects.
//!
//! Layout (little-endian, the rest of the block zero):
//!
//! | offset | type | field |
//! | --- | --- | --- |
//! | 0 | 8 bytes | magic `PXLABEL1` |
//! | 8 | u16 | label version, 1 |
//! | 10 | u8 | role: 1 data member, 2 flash |
//! | 11 | u8 | reserved, 0 |
//! | 12 | u32 | crc32c of the block with this field zero |
//! | 16 | u64 | volume id |
//! | 24 | u32 | member index (0 for the flash device) |
//! | 28 | u32 | member count (1 for the flash device) |
//! | 32 | u64 | generation of the volume's set of devices |
//! | 40 | u64 | block count of the device, label included |

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::batches::{SplicedBatch, WrapperBatches};
use crate::{BatchTicket, BlockDevice, DeviceError, DeviceInfo, IoCompletion, IoRequest};

/// Blocks a label takes at the start of a device.
pub const LABEL_BLOCKS: u64 = 1;

const MAGIC: [u8; 8] = *b"PXLABEL1";
const LABEL_VERSION: u16 = 1;

/// What a device is in its volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LabelRole {
    /// A data disk: the only one, or a member of a RAID array.
    Data,
    /// The flash device (staging, metadata, log).
    Flash,
}

impl std::fmt::Display for LabelRole {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            LabelRole::Data => "data device",
            LabelRole::Flash => "flash device",
        })
    }
}

/// A device's label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceLabel {
    /// The volume the device belongs to.
    pub volume_id: u64,
    /// What it is in the volume.
    pub role: LabelRole,
    /// Its index among the data devices (0 for the flash device).
    pub member_index: u32,
    /// How many data devices the volume has (1 for the flash device).
    pub member_count: u32,
    /// The generation of the volume's set of devices: raised when the set
    /// changes (a member replaced), so that a device that left is not taken
    /// back.
    pub generation: u64,
}

/// Why a device's label is not the one expected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LabelError {
    /// The device could not be read or written.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// No label: not a device of any Proxima volume.
    #[error("{device}: no Proxima label (not a device of a volume, or another volume's device was overwritten)")]
    Missing {
        /// The device.
        device: String,
    },
    /// The label block is damaged.
    #[error("{device}: the label is damaged: {detail}")]
    Damaged {
        /// The device.
        device: String,
        /// What is wrong.
        detail: String,
    },
    /// The label names another volume, role, member or generation.
    #[error("{device}: labelled {found}, but {expected} was expected")]
    Mismatch {
        /// The device.
        device: String,
        /// What the label says.
        found: String,
        /// What was expected.
        expected: String,
    },
}

impl DeviceLabel {
    /// The label's block (`block_size_bytes` long).
    pub fn encode(&self, block_size_bytes: u32, device_block_count: u64) -> Vec<u8> {
        let mut block = vec![0; block_size_bytes as usize];
        block[0..8].copy_from_slice(&MAGIC);
        block[8..10].copy_from_slice(&LABEL_VERSION.to_le_bytes());
        block[10] = match self.role {
            LabelRole::Data => 1,
            LabelRole::Flash => 2,
        };
        block[16..24].copy_from_slice(&self.volume_id.to_le_bytes());
        block[24..28].copy_from_slice(&self.member_index.to_le_bytes());
        block[28..32].copy_from_slice(&self.member_count.to_le_bytes());
        block[32..40].copy_from_slice(&self.generation.to_le_bytes());
        block[40..48].copy_from_slice(&device_block_count.to_le_bytes());
        let crc = label_crc(&block);
        block[12..16].copy_from_slice(&crc.to_le_bytes());
        block
    }

    /// Reads a label block: `Ok(None)` when it holds no label at all (no
    /// magic), an error when it holds a damaged one; also returns the block
    /// count it records.
    pub fn decode(block: &[u8]) -> Result<Option<(Self, u64)>, String> {
        if block.len() < 48 || block[0..8] != MAGIC {
            return Ok(None);
        }
        let field_u64 = |at: usize| u64::from_le_bytes(block[at..at + 8].try_into().expect("8 bytes"));
        let field_u32 = |at: usize| u32::from_le_bytes(block[at..at + 4].try_into().expect("4 bytes"));
        if field_u32(12) != label_crc(block) {
            return Err("its checksum does not match".into());
        }
        let version = u16::from_le_bytes([block[8], block[9]]);
        if version != LABEL_VERSION {
            return Err(format!("label version {version} is not {LABEL_VERSION}"));
        }
        let role = match block[10] {
            1 => LabelRole::Data,
            2 => LabelRole::Flash,
            other => return Err(format!("unknown role {other}")),
        };
        let label = Self {
            volume_id: field_u64(16),
            role,
            member_index: field_u32(24),
            member_count: field_u32(28),
            generation: field_u64(32),
        };
        Ok(Some((label, field_u64(40))))
    }

    fn describe(&self) -> String {
        match self.role {
            LabelRole::Data => format!(
                "data device {} of {} of volume {:#x} (generation {})",
                self.member_index, self.member_count, self.volume_id, self.generation
            ),
            LabelRole::Flash => {
                format!("flash device of volume {:#x} (generation {})", self.volume_id, self.generation)
            }
        }
    }
}

fn label_crc(block: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&block[..12]);
    let crc = crc32c::crc32c_append(crc, &[0; 4]);
    crc32c::crc32c_append(crc, &block[16..])
}

/// Reads the label of `device`, if it carries one.
pub fn read_label<D: BlockDevice + ?Sized>(device: &mut D) -> Result<Option<DeviceLabel>, LabelError> {
    let name = device.info().name;
    let block = device.read_blocks(0, 1)?;
    match DeviceLabel::decode(&block) {
        Ok(label) => Ok(label.map(|(label, _)| label)),
        Err(detail) => Err(LabelError::Damaged { device: name, detail }),
    }
}

/// A device whose first block is its label; the blocks after it are this
/// device's blocks `0..`.
#[derive(Debug)]
pub struct LabeledDevice<D> {
    inner: D,
    label: DeviceLabel,
    batches: WrapperBatches<()>,
}

impl<D: BlockDevice> LabeledDevice<D> {
    /// Writes `label` to `inner` (durably) and presents the rest of it.
    pub fn create(mut inner: D, label: DeviceLabel) -> Result<Self, LabelError> {
        let info = inner.info();
        if info.block_count <= LABEL_BLOCKS {
            return Err(LabelError::Device(DeviceError::Invalid {
                device: info.name,
                detail: "too small to hold a label and data".into(),
            }));
        }
        inner.write_blocks(0, &label.encode(info.block_size_bytes, info.block_count))?;
        inner.flush()?;
        Ok(Self { inner, label, batches: WrapperBatches::default() })
    }

    /// Opens a device whose label must be `expected`.
    pub fn open(mut inner: D, expected: DeviceLabel) -> Result<Self, LabelError> {
        let info = inner.info();
        let block = inner.read_blocks(0, 1)?;
        let (found, block_count) = match DeviceLabel::decode(&block) {
            Ok(Some(found)) => found,
            Ok(None) => return Err(LabelError::Missing { device: info.name }),
            Err(detail) => return Err(LabelError::Damaged { device: info.name, detail }),
        };
        if found != expected {
            return Err(LabelError::Mismatch {
                device: info.name,
                found: found.describe(),
                expected: expected.describe(),
            });
        }
        if block_count != info.block_count {
            return Err(LabelError::Mismatch {
                device: info.name,
                found: format!("a device of {} blocks", info.block_count),
                expected: format!("the {block_count} blocks it was labelled with"),
            });
        }
        Ok(Self { inner, label: found, batches: WrapperBatches::default() })
    }

    /// The label.
    pub fn label(&self) -> DeviceLabel {
        self.label
    }

    /// The device beneath.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The device beneath, mutably (its block 0 is the label).
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// The device beneath.
    pub fn into_inner(self) -> D {
        self.inner
    }
}

fn shifted(mut request: IoRequest) -> IoRequest {
    request.block += LABEL_BLOCKS;
    request
}

impl<D: BlockDevice> BlockDevice for LabeledDevice<D> {
    fn info(&self) -> DeviceInfo {
        let mut info = self.inner.info();
        info.block_count -= LABEL_BLOCKS;
        info
    }

    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        // Each request is checked against this device's size, so that none
        // reaches past its end once shifted; a bad one is answered here.
        let info = self.info();
        let now_ns = self.inner.now_ns();
        let mut forwarded = Vec::with_capacity(batch.len());
        let mut slots = Vec::with_capacity(batch.len());
        for request in batch {
            match crate::validate_request(&info, &request) {
                Ok(()) => {
                    slots.push(None);
                    forwarded.push(shifted(request));
                }
                Err(error) => {
                    slots.push(Some(IoCompletion { result: Err(error), submitted_ns: now_ns, completed_ns: now_ns }))
                }
            }
        }
        let spliced = SplicedBatch::submit(&mut self.inner, forwarded, slots)?;
        Ok(self.batches.insert(spliced, ()))
    }

    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        let (spliced, ()) = self.batches.take(ticket, &self.inner.info().name)?;
        spliced.join(&mut self.inner)
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        self.inner.flush()
    }

    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }

    fn read_into(&mut self, block: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        crate::validate_span(&self.info(), block, buffer.len())?;
        self.inner.read_into(block + LABEL_BLOCKS, buffer)
    }

    fn read_many_into(&mut self, reads: &mut [(u64, &mut [u8])]) -> Result<(), DeviceError> {
        let info = self.info();
        let mut shifted = Vec::with_capacity(reads.len());
        for (block, buffer) in reads.iter_mut() {
            crate::validate_span(&info, *block, buffer.len())?;
            shifted.push((*block + LABEL_BLOCKS, &mut **buffer));
        }
        self.inner.read_many_into(&mut shifted)
    }

    fn write_blocks(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        crate::validate_span(&self.info(), block, data.len())?;
        self.inner.write_blocks(block + LABEL_BLOCKS, data)
    }

    fn write_gathered(&mut self, block: u64, pieces: &[&[u8]]) -> Result<(), DeviceError> {
        let length: usize = pieces.iter().map(|piece| piece.len()).sum();
        crate::validate_span(&self.info(), block, length)?;
        self.inner.write_gathered(block + LABEL_BLOCKS, pieces)
    }

    fn supports_shared_reads(&self) -> bool {
        self.inner.supports_shared_reads()
    }

    fn read_into_shared(&self, block: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        crate::validate_span(&self.info(), block, buffer.len())?;
        self.inner.read_into_shared(block + LABEL_BLOCKS, buffer)
    }

    fn write_back_handle(&self) -> Result<Option<Box<dyn crate::WriteBack>>, DeviceError> {
        self.inner.write_back_handle()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryDevice;

    fn label() -> DeviceLabel {
        DeviceLabel { volume_id: 42, role: LabelRole::Data, member_index: 1, member_count: 3, generation: 1 }
    }

    #[test]
    fn a_labelled_device_presents_the_blocks_after_its_label() {
        let mut device = LabeledDevice::create(MemoryDevice::new(4096, 9), label()).unwrap();
        assert_eq!(device.info().block_count, 8);
        device.write_blocks(0, &[7; 4096]).unwrap();
        assert!(device.write_blocks(8, &[7; 4096]).is_err(), "past the end");
        device.write_blocks(7, &[9; 4096]).unwrap();
        let (mut first, mut last) = ([0u8; 4096], [0u8; 4096]);
        device.read_many_into(&mut [(0, &mut first[..]), (7, &mut last[..])]).unwrap();
        assert_eq!((first, last), ([7; 4096], [9; 4096]), "reads of several blocks skip the label too");
        assert!(device.read_many_into(&mut [(8, &mut first[..])]).is_err(), "past the end");
        let inner = device.into_inner();
        assert_eq!(&inner.contents()[4096..8192], &[7; 4096][..]);
        let reopened = LabeledDevice::open(inner, label()).unwrap();
        assert_eq!(reopened.label(), label());
    }

    #[test]
    fn another_volume_role_member_or_generation_is_refused_and_so_is_no_label() {
        let inner = LabeledDevice::create(MemoryDevice::new(4096, 4), label()).unwrap().into_inner();
        for expected in [
            DeviceLabel { volume_id: 43, ..label() },
            DeviceLabel { role: LabelRole::Flash, ..label() },
            DeviceLabel { member_index: 2, ..label() },
            DeviceLabel { generation: 2, ..label() },
        ] {
            let mut copy = MemoryDevice::new(4096, 4);
            copy.write_blocks(0, inner.contents()).unwrap();
            let refused = LabeledDevice::open(copy, expected).unwrap_err();
            assert!(matches!(refused, LabelError::Mismatch { .. }), "{refused}");
        }
        let blank = LabeledDevice::open(MemoryDevice::new(4096, 4), label()).unwrap_err();
        assert!(matches!(blank, LabelError::Missing { .. }), "{blank}");
        let mut damaged = MemoryDevice::new(4096, 4);
        damaged.write_blocks(0, inner.contents()).unwrap();
        let mut block = damaged.read_blocks(0, 1).unwrap();
        block[20] ^= 1;
        damaged.write_blocks(0, &block).unwrap();
        assert!(matches!(LabeledDevice::open(damaged, label()), Err(LabelError::Damaged { .. })));
    }
}
