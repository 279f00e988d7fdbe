//! Payload-less data operations for large simulations: the same allocation,
//! metadata, log and device I/O as real writes and reads, without data bytes
//! for data blocks (metadata blocks still carry theirs).

use proxima_device::{BlockDevice, IoRequest};
use serde::Serialize;

use crate::codec::BLOCK_SIZE;
use crate::error::{DeviceRole, EngineError, Result};
use crate::io::{coalesce, device_error, MAX_REQUEST_BLOCKS};
use crate::map::{self, Location};
use crate::read::{data_reads, data_spans};
use crate::staging::Payload;
use crate::volume::Volume;

/// What a read did on the devices.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReadReport {
    /// Logical blocks read.
    pub block_count: u64,
    /// Blocks that were holes (no I/O).
    pub hole_block_count: u64,
    /// Physical runs on the data device (maximal runs of consecutive blocks).
    pub data_run_count: u64,
    /// Physical runs on the flash device (staged blocks).
    pub flash_run_count: u64,
    /// Requests submitted to the data device: one per span a real read
    /// reads (data runs that keep their logical distance around staged blocks
    /// or holes are one), merged where physically contiguous.
    pub data_request_count: u64,
    /// Requests submitted to the flash device.
    pub flash_request_count: u64,
    /// Data-device clock at submission.
    pub started_ns: u64,
    /// Latest completion over both devices (their clocks are one in a
    /// simulation; `started_ns` if nothing was read).
    pub completed_ns: u64,
}

impl ReadReport {
    /// Physical runs on both devices.
    pub fn run_count(&self) -> u64 {
        self.data_run_count + self.flash_run_count
    }

    /// Response time in nanoseconds.
    pub fn response_ns(&self) -> u64 {
        self.completed_ns - self.started_ns
    }
}

fn read_requests(pieces: &[(u64, u64)]) -> Vec<IoRequest> {
    let mut requests = Vec::new();
    for &(block, count) in pieces {
        let mut done = 0;
        while done < count {
            let this = (count - done).min(MAX_REQUEST_BLOCKS);
            requests.push(IoRequest::read(block + done, this as u32));
            done += this;
        }
    }
    requests
}

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    fn check_block_range(&self, id: u64, first_block: u64, block_count: u64) -> Result<()> {
        let size_blocks = self.extent_size(id)? / BLOCK_SIZE as u64;
        match first_block.checked_add(block_count) {
            Some(end) if end <= size_blocks => Ok(()),
            _ => Err(EngineError::InvalidRange(format!(
                "blocks {first_block}+{block_count} exceed extent #{id} of {size_blocks} blocks"
            ))),
        }
    }

    /// Writes `block_count` blocks from `first_block` of extent `id` without
    /// data: the layout places, stages, destages, logs and issues device I/O
    /// exactly as for [`Volume::write`] of that many blocks. Where a device
    /// keeps payload the blocks are written as zeroes.
    pub fn write_blocks_synthetic(&mut self, id: u64, first_block: u64, block_count: u64, fua: bool) -> Result<()> {
        self.check_block_range(id, first_block, block_count)?;
        self.guarded(|volume| {
            if block_count > 0 {
                volume.write_blocks(id, first_block, Payload::Synthetic(block_count))?;
            }
            volume.finish_update(fua)
        })
    }

    /// Reads `block_count` blocks from `first_block` of extent `id` without
    /// returning data: one batch to the data device (its runs in logical order)
    /// and one to the flash device, submitted together; then reallocates the
    /// span if the volume's read-reallocation settings pick it.
    pub fn read_blocks_synthetic(&mut self, id: u64, first_block: u64, block_count: u64) -> Result<ReadReport> {
        self.read_queue_synthetic(id, &[(first_block, block_count)])
    }

    /// Reads the requests `(first_block, block_count)` of extent `id`, queued
    /// together, without returning data: each request's data-device reads are
    /// those a real read issues ([`data_spans`]: a run split by staged
    /// blocks is read through; [`data_reads`]: spans whose places lie within
    /// the volume's read gap are one request), its staged pieces are read from flash, those
    /// that continue the previous one physically merged into one device
    /// request (as a block layer merges the requests in its queue), in one
    /// batch per device; then each request reallocates the span it read if
    /// the volume's read-reallocation settings pick it.
    pub fn read_queue_synthetic(&mut self, id: u64, requests: &[(u64, u64)]) -> Result<ReadReport> {
        self.check_usable()?;
        for &(first_block, block_count) in requests {
            self.check_block_range(id, first_block, block_count)?;
        }
        let map = self.extents.map(id);
        let segments: Vec<Vec<map::Segment>> =
            requests.iter().map(|&(first_block, block_count)| map::segments(map, first_block, block_count)).collect();
        let block_count = requests.iter().map(|&(_, block_count)| block_count).sum();
        let report = self.read_segments_synthetic(block_count, &segments)?;
        if self.options.read_realloc.enabled {
            for &(first_block, block_count) in requests.iter().filter(|&&(_, block_count)| block_count > 0) {
                self.reallocate_after_read(id, first_block, Payload::Synthetic(block_count))?;
            }
        }
        Ok(report)
    }

    /// Reads `block_count` blocks from `first_block` of extent `extent` as of
    /// snapshot `snapshot`, without returning data, as
    /// [`Volume::read_blocks_synthetic`] reads the live extent.
    pub fn read_snapshot_blocks_synthetic(
        &mut self,
        snapshot: &str,
        extent: &str,
        first_block: u64,
        block_count: u64,
    ) -> Result<ReadReport> {
        let block = BLOCK_SIZE as u64;
        let length_bytes = block_count
            .checked_mul(block)
            .ok_or_else(|| EngineError::InvalidRange(format!("{block_count} blocks exceed {extent}@{snapshot}")))?;
        let offset_bytes = first_block
            .checked_mul(block)
            .ok_or_else(|| EngineError::InvalidRange(format!("block {first_block} exceeds {extent}@{snapshot}")))?;
        let segments = self.snapshot_segments(snapshot, extent, offset_bytes, length_bytes)?;
        self.read_segments_synthetic(block_count, &[segments])
    }

    /// One batch to the data device and one to the flash device for
    /// `segments` (in logical order, holes included).
    fn read_segments_synthetic(&mut self, block_count: u64, requests: &[Vec<map::Segment>]) -> Result<ReadReport> {
        let mut report = ReadReport { block_count, ..ReadReport::default() };
        let mut data_runs = Vec::new();
        let mut data_pieces = Vec::new();
        let mut flash_pieces = Vec::new();
        for segments in requests {
            for segment in segments {
                match segment.location {
                    Some(Location::Data(block)) => coalesce(&mut data_runs, block, segment.block_count),
                    Some(Location::Flash(block)) => coalesce(&mut flash_pieces, block, segment.block_count),
                    None => report.hole_block_count += segment.block_count,
                }
            }
            // The device reads are the real read's, merged where one
            // continues the last (as a block layer merges queued requests).
            for read in data_reads(&mut data_spans(segments), self.options.read_gaps()) {
                coalesce(&mut data_pieces, read.block, read.block_count);
            }
        }
        report.data_run_count = data_runs.len() as u64;
        report.flash_run_count = flash_pieces.len() as u64;
        let data_requests = read_requests(&data_pieces);
        let flash_requests = read_requests(&flash_pieces);
        report.data_request_count = data_requests.len() as u64;
        report.flash_request_count = flash_requests.len() as u64;
        report.started_ns = self.data.now_ns();
        report.completed_ns = report.started_ns;
        let data_ticket = match data_requests.is_empty() {
            true => None,
            false => Some(self.data.submit(data_requests).map_err(device_error(DeviceRole::Data))?),
        };
        let flash_ticket = match flash_requests.is_empty() {
            true => None,
            false => Some(self.flash.submit(flash_requests).map_err(device_error(DeviceRole::Flash))?),
        };
        if let Some(ticket) = data_ticket {
            for completion in self.data.wait(ticket).map_err(device_error(DeviceRole::Data))? {
                completion.result.map_err(device_error(DeviceRole::Data))?;
                report.completed_ns = report.completed_ns.max(completion.completed_ns);
            }
        }
        if let Some(ticket) = flash_ticket {
            for completion in self.flash.wait(ticket).map_err(device_error(DeviceRole::Flash))? {
                completion.result.map_err(device_error(DeviceRole::Flash))?;
                report.completed_ns = report.completed_ns.max(completion.completed_ns);
            }
        }
        Ok(report)
    }
}
