//! Device access for the engine: reading and writing whole blocks with errors
//! mapped to [`EngineError`], and the node reader and store the trees and
//! bitmaps use.

use proxima_device::{BlockDevice, IoRequest};

use crate::codec::BLOCK_SIZE;
use crate::error::{corrupt, DeviceRole, EngineError, Result};
use crate::space::SpaceMap;
use crate::tree::{NodeReader, NodeStore};

/// Largest number of blocks in one device request (16 MiB: a RAID layer or a
/// disk splits further; a serial read of up to 974 blocks stays one request).
pub(crate) const MAX_REQUEST_BLOCKS: u64 = 4096;

/// A `u64` the engine computed as an index or length into memory that exists
/// (a buffer, a vector of pages): it fits in a `usize`.
pub(crate) fn in_memory(value: u64) -> usize {
    usize::try_from(value).expect("an index into memory fits in usize")
}

/// The bytes of `blocks` whole blocks, as a length in memory.
pub(crate) fn block_bytes(blocks: u64) -> usize {
    in_memory(blocks) * BLOCK_SIZE
}

pub(crate) fn device_error(role: DeviceRole) -> impl Fn(proxima_device::DeviceError) -> EngineError {
    move |source| EngineError::Device { role, source }
}

/// Reads `(first block, block count)` pieces of one device in one batch and
/// returns their bytes concatenated.
pub(crate) fn read_pieces<D: BlockDevice>(device: &mut D, role: DeviceRole, pieces: &[(u64, u64)]) -> Result<Vec<u8>> {
    let mut requests = Vec::new();
    for &(block, count) in pieces {
        let mut done = 0;
        while done < count {
            let this = (count - done).min(MAX_REQUEST_BLOCKS);
            requests.push(IoRequest::read(block + done, this as u32));
            done += this;
        }
    }
    let completions = device.execute(requests).map_err(device_error(role))?;
    let total: usize = completions.iter().map(|completion| completion.result.as_ref().map_or(0, Vec::len)).sum();
    let mut bytes = Vec::with_capacity(total);
    for completion in completions {
        let data = completion.result.map_err(device_error(role))?;
        bytes.extend_from_slice(&data);
    }
    Ok(bytes)
}

/// Appends the run `(block, count)` to `pieces`, merging it into the last one
/// when it continues it physically.
pub(crate) fn coalesce(pieces: &mut Vec<(u64, u64)>, block: u64, count: u64) {
    match pieces.last_mut() {
        Some((start, length)) if *start + *length == block => *length += count,
        _ => pieces.push((block, count)),
    }
}

/// Consecutive blocks of `blocks` (ascending) as `(first, count)` runs.
pub(crate) fn runs_of(blocks: &[u64]) -> Vec<(u64, u64)> {
    let mut runs = Vec::new();
    for &block in blocks {
        coalesce(&mut runs, block, 1);
    }
    runs
}

/// Writes `(first block, bytes)` pieces to one device in one batch.
pub(crate) fn write_pieces<D: BlockDevice>(
    device: &mut D,
    role: DeviceRole,
    pieces: Vec<(u64, Vec<u8>)>,
) -> Result<()> {
    let pieces = pieces
        .into_iter()
        .map(|(block, data)| {
            assert_eq!(data.len() % BLOCK_SIZE, 0, "whole blocks");
            (block, (data.len() / BLOCK_SIZE) as u64, data)
        })
        .collect();
    execute_all(device, role, write_requests(pieces))
}

/// Writes zeroes to `(first block, block count)` pieces of one device in one
/// batch, without data buffers.
pub(crate) fn write_zeroes<D: BlockDevice>(device: &mut D, role: DeviceRole, pieces: &[(u64, u64)]) -> Result<()> {
    let mut requests = Vec::new();
    for &(block, count) in pieces {
        let mut done = 0;
        while done < count {
            let this = (count - done).min(MAX_REQUEST_BLOCKS);
            requests.push(IoRequest::write_zeroes(block + done, this as u32));
            done += this;
        }
    }
    execute_all(device, role, requests)
}

/// The runs of consecutive blocks in `blocks`, as (index of the run's first
/// block, blocks in the run), in order.
pub(crate) fn consecutive_runs(blocks: &[u64]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut index = 0;
    std::iter::from_fn(move || {
        let start = index;
        let first = *blocks.get(start)?;
        index += 1;
        while blocks.get(index) == Some(&(first + (index - start) as u64)) {
            index += 1;
        }
        Some((start, index - start))
    })
}

/// The runs of `(first block, block count)` pieces that continue each other
/// on the device, as index ranges into `pieces`, each run at most
/// [`MAX_REQUEST_BLOCKS`] long (a piece longer than that is a run alone).
pub(crate) fn gathered_runs(pieces: &[(u64, u64)]) -> Vec<std::ops::Range<usize>> {
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    let mut run_end_block = 0;
    let mut run_blocks = 0;
    for (index, &(first, count)) in pieces.iter().enumerate() {
        match runs.last_mut() {
            Some(run) if first == run_end_block && run_blocks + count <= MAX_REQUEST_BLOCKS => {
                run.end = index + 1;
                run_blocks += count;
            }
            _ => {
                runs.push(index..index + 1);
                run_blocks = count;
            }
        }
        run_end_block = first + count;
    }
    runs
}

/// Executes `requests` on one device in one batch, failing on the first error.
pub(crate) fn execute_all<D: BlockDevice>(device: &mut D, role: DeviceRole, requests: Vec<IoRequest>) -> Result<()> {
    if requests.is_empty() {
        return Ok(());
    }
    for completion in device.execute(requests).map_err(device_error(role))? {
        completion.result.map_err(device_error(role))?;
    }
    Ok(())
}

/// Requests writing `(first block, block count, bytes)` pieces (bytes empty
/// for a device without payload), split at [`MAX_REQUEST_BLOCKS`].
pub(crate) fn write_requests(pieces: Vec<(u64, u64, Vec<u8>)>) -> Vec<IoRequest> {
    let mut requests = Vec::new();
    for (block, count, data) in pieces {
        assert!(data.is_empty() || data.len() as u64 == count * BLOCK_SIZE as u64, "whole blocks or none");
        if count <= MAX_REQUEST_BLOCKS {
            // One request: hand the bytes over rather than copy them.
            requests.push(IoRequest::write(
                block,
                u32::try_from(count).expect("pieces are split to MAX_REQUEST_BLOCKS"),
                data,
            ));
            continue;
        }
        let mut done = 0;
        while done < count {
            let this = (count - done).min(MAX_REQUEST_BLOCKS);
            let bytes =
                if data.is_empty() { Vec::new() } else { data[block_bytes(done)..block_bytes(done + this)].to_vec() };
            requests.push(IoRequest::write(block + done, this as u32, bytes));
            done += this;
        }
    }
    requests
}

/// Reads metadata blocks from the flash device, refusing addresses outside the
/// allocatable pool.
#[derive(Debug)]
pub(crate) struct FlashReader<'a, F> {
    pub flash: &'a mut F,
    pub volume_id: u64,
    pub flash_block_count: u64,
}

impl<F: BlockDevice> NodeReader for FlashReader<'_, F> {
    fn read_block(&mut self, block: u64) -> Result<Vec<u8>> {
        if block < 2 || block >= self.flash_block_count {
            return Err(corrupt(block, "metadata pointer", "points outside the flash pool"));
        }
        read_pieces(self.flash, DeviceRole::Flash, &[(block, 1)])
    }

    fn volume_id(&self) -> u64 {
        self.volume_id
    }
}

/// The node store of a consistency point: allocates from the flash space map
/// and collects the blocks to write.
#[derive(Debug)]
pub(crate) struct CheckpointStore<'a> {
    pub flash_space: &'a mut SpaceMap,
    pub writes: &'a mut Vec<(u64, Vec<u8>)>,
    pub generation: u64,
    pub volume_id: u64,
}

impl NodeStore for CheckpointStore<'_> {
    fn allocate(&mut self) -> Result<u64> {
        self.flash_space.allocate_one("metadata of a consistency point")
    }

    fn release(&mut self, block: u64) {
        self.flash_space.free(block);
    }

    fn stage_write(&mut self, block: u64, data: Vec<u8>) {
        self.writes.push((block, data));
    }

    fn generation(&self) -> u64 {
        self.generation
    }

    fn volume_id(&self) -> u64 {
        self.volume_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathered_runs_join_pieces_that_continue_each_other_up_to_the_request_limit() {
        let half = MAX_REQUEST_BLOCKS / 2;
        let pieces = [
            (10, 4),
            (14, 2),
            // A gap: a new run.
            (20, 1),
            // Continuing, until the next would pass the request limit.
            (21, half),
            (21 + half, half - 1),
            (20 + MAX_REQUEST_BLOCKS, 1),
            // Longer than the limit: alone.
            (100_000, MAX_REQUEST_BLOCKS + 1),
        ];
        assert_eq!(gathered_runs(&pieces), vec![0..2, 2..5, 5..6, 6..7]);
        assert!(gathered_runs(&[]).is_empty());
    }
}
