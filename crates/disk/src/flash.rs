//! A simple flash device for the staging area: a fixed per-I/O latency plus the
//! transfer at a per-channel bandwidth, with requests spread over independent
//! channels (each request goes to the channel that frees up first, in arrival
//! order). Requests are addressed in 512-byte sectors like the hard disk's.

use std::collections::VecDeque;

use crate::sim::SimDevice;
use crate::{DiskCompletion, DiskOp, DiskRequest, Nanos};

/// The flash device's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlashParams {
    /// Fixed latency of a read.
    pub read_latency_ns: Nanos,
    /// Fixed latency of a write (program).
    pub write_latency_ns: Nanos,
    /// Transfer bandwidth of one channel.
    pub bandwidth_bytes_per_second: u64,
    /// Independent channels.
    pub channel_count: u32,
    /// Transfers are rounded up to whole pages.
    pub page_size_bytes: u32,
    /// Capacity in 512-byte sectors.
    pub sector_count: u64,
}

#[derive(Debug, Clone, Copy)]
struct Scheduled {
    request: DiskRequest,
    arrival_ns: Nanos,
    start_ns: Nanos,
    completion_ns: Nanos,
}

/// A simulated flash device.
#[derive(Debug)]
pub struct FlashDevice {
    params: FlashParams,
    channel_free_ns: Vec<Nanos>,
    /// Scheduled requests not yet reported, kept sorted by completion time.
    pending: VecDeque<Scheduled>,
}

impl FlashDevice {
    /// A device with all channels idle.
    pub fn new(params: FlashParams) -> FlashDevice {
        assert!(params.channel_count > 0, "a flash device needs at least one channel");
        assert!(params.bandwidth_bytes_per_second > 0, "a flash device needs a positive bandwidth");
        FlashDevice { channel_free_ns: vec![0; params.channel_count as usize], params, pending: VecDeque::new() }
    }

    /// The parameters.
    pub fn params(&self) -> &FlashParams {
        &self.params
    }

    fn service_ns(&self, request: &DiskRequest) -> Nanos {
        let bytes = u64::from(request.sector_count) * 512;
        let page = u64::from(self.params.page_size_bytes.max(1));
        let transferred = bytes.div_ceil(page) * page;
        let transfer_ns =
            (u128::from(transferred) * 1_000_000_000).div_ceil(u128::from(self.params.bandwidth_bytes_per_second));
        let latency = match request.op {
            DiskOp::Read => self.params.read_latency_ns,
            DiskOp::Write => self.params.write_latency_ns,
        };
        latency + u64::try_from(transfer_ns).unwrap_or(u64::MAX / 2)
    }
}

impl SimDevice for FlashDevice {
    fn arrive(&mut self, now_ns: Nanos, request: DiskRequest) {
        assert!(
            request.lbn.checked_add(u64::from(request.sector_count)).is_some_and(|end| end <= self.params.sector_count),
            "flash request {} lies beyond the device",
            request.id
        );
        let (channel, free_ns) = self
            .channel_free_ns
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(index, free)| (free, index))
            .expect("at least one channel");
        let start_ns = now_ns.max(free_ns);
        let completion_ns = start_ns + self.service_ns(&request);
        self.channel_free_ns[channel] = completion_ns;
        let scheduled = Scheduled { request, arrival_ns: now_ns, start_ns, completion_ns };
        let position = self.pending.partition_point(|other| other.completion_ns <= completion_ns);
        self.pending.insert(position, scheduled);
    }

    fn next_event_ns(&self) -> Option<Nanos> {
        self.pending.front().map(|scheduled| scheduled.completion_ns)
    }

    fn advance(&mut self, until_ns: Nanos, completions: &mut Vec<DiskCompletion>) {
        while let Some(scheduled) = self.pending.front().copied().filter(|s| s.completion_ns <= until_ns) {
            self.pending.pop_front();
            let request = scheduled.request;
            completions.push(DiskCompletion {
                id: request.id,
                op: request.op,
                lbn: request.lbn,
                sector_count: request.sector_count,
                arrival_ns: scheduled.arrival_ns,
                start_ns: scheduled.start_ns,
                completion_ns: scheduled.completion_ns,
            });
        }
    }

    fn is_idle(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> FlashParams {
        FlashParams {
            read_latency_ns: 50_000,
            write_latency_ns: 200_000,
            bandwidth_bytes_per_second: 512_000_000,
            channel_count: 2,
            page_size_bytes: 4096,
            sector_count: 1 << 20,
        }
    }

    #[test]
    fn channels_serve_in_parallel_and_queue_beyond() {
        let mut flash = FlashDevice::new(params());
        for id in 0..3 {
            flash.arrive(0, DiskRequest { id, op: DiskOp::Write, lbn: id * 8, sector_count: 8 });
        }
        let mut done = Vec::new();
        flash.advance(u64::MAX, &mut done);
        // 4096 bytes at 512 MB/s = 8000 ns, plus 200 us program latency.
        assert_eq!(done.iter().map(|c| c.completion_ns).collect::<Vec<_>>(), vec![208_000, 208_000, 416_000]);
        assert!(flash.is_idle());
    }

    #[test]
    fn partial_pages_round_up() {
        let mut flash = FlashDevice::new(params());
        flash.arrive(10, DiskRequest { id: 1, op: DiskOp::Read, lbn: 0, sector_count: 1 });
        assert_eq!(flash.next_event_ns(), Some(10 + 50_000 + 8_000));
    }
}
