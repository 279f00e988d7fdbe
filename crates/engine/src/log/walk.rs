//! A read-only walk of the log chain after a CP, shared by replay and fsck.
//!
//! Each log block is read from both copies of its slot. A copy is *of this
//! log* when it verifies and carries this epoch's volume id, generation, mount
//! count and the expected sequence number. One such copy is enough; the other
//! may be damaged (reported, and repaired by the CP that follows replay).
//! Where neither copy is of this log the chain ends: cleanly when neither
//! even claims to be (the slot was reserved but never written), torn when one
//! carries this block's header but fails its checksum (a write the crash cut
//! short, or damage to the last flush window's block; both are reported).

use std::collections::HashSet;

use proxima_device::{BlockDevice, IoRequest};

use crate::codec::{decode_log_block, get_u16, get_u32, get_u64, BlockKind, LogBlock, LogSlot, MAGIC, VERSION};
use crate::error::{corrupt, DeviceRole, Result};
use crate::io::device_error;

/// What a log block of this epoch carries in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogIdentity {
    pub volume_id: u64,
    pub generation: u64,
    pub mount_count: u64,
}

/// One block of the chain.
#[derive(Debug, Clone)]
pub(crate) struct WalkedBlock {
    pub sequence: u64,
    pub slot: LogSlot,
    pub block: LogBlock,
    /// The copy that failed (unreadable, damaged, or never written), if one did.
    pub damaged_copy: Option<u64>,
}

/// Why the chain ends where it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ChainEnd {
    /// The next slot holds no block of this log: reserved, never written.
    Clean,
    /// A copy in the next slot carries that block's header but fails its
    /// checksum: a torn write, or damage to the last flush window.
    Torn {
        /// The sequence number of the torn block.
        sequence: u64,
    },
}

/// The chain as read.
#[derive(Debug, Clone)]
pub(crate) struct LogWalk {
    pub blocks: Vec<WalkedBlock>,
    pub end: ChainEnd,
}

impl LogWalk {
    /// The last log block acknowledged as durable, by the flushed-through
    /// marks of the blocks read: everything up to it (and the data its
    /// records name) was made durable by a completed flush.
    pub fn acknowledged_through(&self) -> Option<u64> {
        self.blocks.iter().filter_map(|walked| walked.block.flushed_through).max()
    }
}

enum Copy {
    Ours(LogBlock, Vec<u8>),
    Torn,
    Foreign,
}

/// Walks the chain from `head`.
pub(crate) fn walk_log<F: BlockDevice>(
    flash: &mut F,
    identity: LogIdentity,
    head: LogSlot,
    flash_block_count: u64,
) -> Result<LogWalk> {
    let mut blocks = Vec::new();
    let mut slot = head;
    let mut visited = HashSet::new();
    for sequence in 0.. {
        check_slot(slot, flash_block_count, &mut visited)?;
        let copies = read_copies(flash, slot)?;
        let [primary, mirror] = copies.map(|copy| classify(copy, identity, sequence));
        let (block, damaged_copy) = match (primary, mirror) {
            (Copy::Ours(first, first_bytes), Copy::Ours(_, second_bytes)) => {
                if first_bytes != second_bytes {
                    return Err(corrupt(slot.primary, "log record block", "its two copies differ"));
                }
                (first, None)
            }
            (Copy::Ours(block, _), _) => (block, Some(slot.mirror)),
            (_, Copy::Ours(block, _)) => (block, Some(slot.primary)),
            (first, second) => {
                let torn = matches!(first, Copy::Torn) || matches!(second, Copy::Torn);
                let end = if torn { ChainEnd::Torn { sequence } } else { ChainEnd::Clean };
                return Ok(LogWalk { blocks, end });
            }
        };
        let next = block.next;
        blocks.push(WalkedBlock { sequence, slot, block, damaged_copy });
        slot = next;
    }
    unreachable!("the walk returns at the end of the chain")
}

fn check_slot(slot: LogSlot, flash_block_count: u64, visited: &mut HashSet<u64>) -> Result<()> {
    for block in slot.blocks() {
        if block < 2 || block >= flash_block_count {
            return Err(corrupt(block, "log slot", "names a block off the flash pool"));
        }
        if !visited.insert(block) {
            return Err(corrupt(block, "log slot", "the log chain comes back to a block it passed"));
        }
    }
    Ok(())
}

/// Reads both copies; a copy that cannot be read is `None`.
fn read_copies<F: BlockDevice>(flash: &mut F, slot: LogSlot) -> Result<[Option<Vec<u8>>; 2]> {
    let requests = slot.blocks().map(|block| IoRequest::read(block, 1)).to_vec();
    let completions = flash.execute(requests).map_err(device_error(DeviceRole::Flash))?;
    let mut copies = completions.into_iter().map(|completion| completion.result.ok());
    Ok([copies.next().flatten(), copies.next().flatten()])
}

fn classify(bytes: Option<Vec<u8>>, identity: LogIdentity, sequence: u64) -> Copy {
    let Some(bytes) = bytes else { return Copy::Torn };
    let claims = claims_to_be(&bytes, identity, sequence);
    match decode_log_block(&bytes) {
        Ok(block) if claims => Copy::Ours(block, bytes),
        Ok(_) => Copy::Foreign,
        Err(_) if claims => Copy::Torn,
        Err(_) => Copy::Foreign,
    }
}

/// Whether the header fields (read without verifying the checksum) name this
/// log block.
fn claims_to_be(bytes: &[u8], identity: LogIdentity, sequence: u64) -> bool {
    bytes.len() >= 48
        && get_u32(bytes, 0) == MAGIC
        && get_u16(bytes, 4) == VERSION
        && get_u16(bytes, 6) == BlockKind::LogBlock as u16
        && get_u64(bytes, 16) == identity.volume_id
        && get_u64(bytes, 24) == identity.mount_count
        && get_u64(bytes, 32) == identity.generation
        && get_u64(bytes, 40) == sequence
}
