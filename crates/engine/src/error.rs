//! The engine's expected operating errors.

use proxima_device::DeviceError;
use thiserror::Error;

/// `blocks` 4 KiB blocks in MiB, for messages.
fn mib(blocks: u64) -> String {
    format!("{:.1}", blocks as f64 / 256.0)
}

/// `blocks` 4 KiB blocks in GiB, for messages.
fn gib(blocks: u64) -> String {
    format!("{:.1}", blocks as f64 / (256.0 * 1024.0))
}

/// Which device of a volume an error or a block refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum DeviceRole {
    /// The data device: extent data only.
    Data,
    /// The flash device: superblock, metadata, staged data and the log.
    Flash,
}

impl std::fmt::Display for DeviceRole {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            DeviceRole::Data => "data device",
            DeviceRole::Flash => "flash device",
        })
    }
}

/// Why devices or options do not fit a volume or an operation.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Unsuitable {
    /// A volume option is out of range.
    #[error("volume options: {0}")]
    Options(&'static str),
    /// A device's block size is not the engine's.
    #[error("{role} {name} has {block_size_bytes}-byte blocks; volumes need {required_bytes}")]
    BlockSize {
        /// Which device.
        role: DeviceRole,
        /// Its name.
        name: String,
        /// Its block size.
        block_size_bytes: u32,
        /// The engine's block size.
        required_bytes: usize,
    },
    /// A device keeps no payload where the volume needs it.
    #[error("{role} {name} does not store payload (a metadata-only data device needs payload: false)")]
    NoPayload {
        /// Which device.
        role: DeviceRole,
        /// Its name.
        name: String,
    },
    /// The flash device is too small.
    #[error("flash device has {block_count} blocks; at least {minimum_blocks} are needed")]
    FlashTooSmall {
        /// Its blocks.
        block_count: u64,
        /// The least a volume accepts.
        minimum_blocks: u64,
    },
    /// The flash device cannot hold the metadata of a new volume over the
    /// data device ([`fixed_metadata_blocks`](crate::fixed_metadata_blocks)).
    #[error(
        "flash device has {block_count} blocks ({} MiB); a data device of {data_block_count} blocks ({} GiB) needs at \
         least {minimum_blocks} ({} MiB) for its checksums, refcounts and free-space maps and a log",
        mib(*block_count),
        gib(*data_block_count),
        mib(*minimum_blocks)
    )]
    FlashTooSmallForData {
        /// Its blocks.
        block_count: u64,
        /// The least this data device needs.
        minimum_blocks: u64,
        /// The data device's blocks.
        data_block_count: u64,
    },
    /// The flash device holds another volume.
    #[error("the flash device holds volume {found:#x}, not {expected:#x}")]
    OtherVolume {
        /// The volume found.
        found: u64,
        /// The volume asked for.
        expected: u64,
    },
    /// The devices' sizes differ from the superblock's.
    #[error(
        "the superblock describes {superblock_data_blocks} data and {superblock_flash_blocks} flash blocks; \
         the devices have {data_blocks} and {flash_blocks}"
    )]
    SizesDiffer {
        /// Data blocks the superblock describes.
        superblock_data_blocks: u64,
        /// Flash blocks the superblock describes.
        superblock_flash_blocks: u64,
        /// Data blocks of the device.
        data_blocks: u64,
        /// Flash blocks of the device.
        flash_blocks: u64,
    },
    /// The options disagree with the volume about data checksums.
    #[error(
        "the volume {} data checksums; open it with payload and data_checksums both {}",
        if *.volume_keeps { "keeps" } else { "keeps no" },
        if *.volume_keeps { "on" } else { "off (either of them)" }
    )]
    ChecksumsDisagree {
        /// Whether the volume keeps them.
        volume_keeps: bool,
    },
    /// The volume keeps no data checksums (a scrub needs them).
    #[error("the volume keeps no data checksums to scrub against")]
    NoChecksums,
    /// The devices cannot serve a read through a shared reference.
    #[error("the devices do not serve reads through a shared reference")]
    NoSharedReads,
}

/// Everything a volume operation can fail with.
#[derive(Debug, Error)]
pub enum EngineError {
    /// A device request failed.
    #[error("{role}: {source}")]
    Device {
        /// Which device.
        role: DeviceRole,
        /// What the device said.
        #[source]
        source: DeviceError,
    },
    /// A metadata block failed verification: it is never returned as data.
    #[error("corrupt metadata on the flash device at block {block} ({what}): {detail}")]
    Corrupt {
        /// The flash block.
        block: u64,
        /// The kind of block expected there.
        what: String,
        /// Which check failed.
        detail: String,
    },
    /// A data or staged block does not match its checksum and no redundant
    /// copy that does could be found: its contents are never returned.
    #[error("{role} block {block} does not match its checksum (damaged data; no good redundant copy)")]
    ChecksumMismatch {
        /// Which device.
        role: DeviceRole,
        /// The block.
        block: u64,
    },
    /// Neither superblock slot holds a valid superblock.
    #[error("no valid superblock on the flash device: slot A: {slot_a}; slot B: {slot_b}")]
    NoSuperblock {
        /// Why slot A was rejected.
        slot_a: String,
        /// Why slot B was rejected.
        slot_b: String,
    },
    /// The devices, or the options, do not fit the format, the superblock
    /// or the operation.
    #[error("unsuitable devices: {0}")]
    Unsuitable(Unsuitable),
    /// No extent of that name or id.
    #[error("no extent named {0:?}")]
    NoSuchExtent(String),
    /// An extent of that name exists already.
    #[error("an extent named {0:?} exists already")]
    ExtentExists(String),
    /// No snapshot of that name.
    #[error("no snapshot named {0:?}")]
    NoSuchSnapshot(String),
    /// A snapshot of that name exists already.
    #[error("a snapshot named {0:?} exists already")]
    SnapshotExists(String),
    /// A name is empty, too long, or otherwise unusable.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Creating or growing an extent would commit more than the data device
    /// holds, and overcommitment was not allowed.
    #[error(
        "the extents would hold {committed_bytes} + {requested_bytes} bytes on a data device of {physical_bytes}; \
         allow overcommitment to create thin extents beyond capacity"
    )]
    Overcommit {
        /// The other extents' sizes, in all.
        committed_bytes: u64,
        /// The size asked for.
        requested_bytes: u64,
        /// What the data device holds.
        physical_bytes: u64,
    },
    /// An offset, length or size is out of range or misaligned.
    #[error("invalid range: {0}")]
    InvalidRange(String),
    /// A device is out of space even after a consistency point. The request
    /// was refused before it changed anything it could not finish (what it
    /// wrote before is mapped and logged): the volume stays usable.
    #[error("{role} is out of space: {detail}")]
    NoSpace {
        /// Which device.
        role: DeviceRole,
        /// What was being allocated.
        detail: String,
    },
    /// No flash block for metadata (a consistency point's blocks, or a log
    /// record block) although the flash reserve should have held it. The
    /// operation was cut short: the volume stops.
    #[error("flash is out of space for metadata: {detail}")]
    NoSpaceForMetadata {
        /// What was being allocated.
        detail: String,
    },
    /// A consistency point's audit found bitmap changes that its journal of
    /// allocations and frees does not explain; nothing was committed.
    #[error("consistency point refused by the audit: {0}")]
    AuditFailed(String),
    /// A staged write found the staging area full and automatic destage is
    /// off: destage, then retry.
    #[error(
        "the staging area is full: {staged_blocks} of {capacity_blocks} blocks staged, {incoming_blocks} more needed; destage first"
    )]
    StagingFull {
        /// Blocks staged now.
        staged_blocks: u64,
        /// Blocks the staging area can hold.
        capacity_blocks: u64,
        /// Blocks the refused write needed.
        incoming_blocks: u64,
    },
    /// An earlier failure left the in-memory state unusable: reopen the volume.
    #[error("the volume stopped after an earlier failure: {0}")]
    Failed(String),
}

/// The engine's result type.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// Turns an out-of-space error met where the volume cannot stay consistent
/// (inside a CP, or writing a log block) into one that stops it.
pub(crate) fn metadata_no_space(error: EngineError) -> EngineError {
    match error {
        EngineError::NoSpace { detail, .. } => EngineError::NoSpaceForMetadata { detail },
        other => other,
    }
}

pub(crate) fn corrupt(block: u64, what: &str, detail: impl Into<String>) -> EngineError {
    EngineError::Corrupt { block, what: what.to_string(), detail: detail.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checksum_disagreement_says_how_to_open_the_volume() {
        let keeps = EngineError::Unsuitable(Unsuitable::ChecksumsDisagree { volume_keeps: true });
        assert_eq!(
            keeps.to_string(),
            "unsuitable devices: the volume keeps data checksums; open it with payload and data_checksums both on"
        );
        let keeps_none = Unsuitable::ChecksumsDisagree { volume_keeps: false };
        assert_eq!(
            keeps_none.to_string(),
            "the volume keeps no data checksums; open it with payload and data_checksums both off (either of them)"
        );
    }
}
