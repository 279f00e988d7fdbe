//! Statistics wrapper: counts requests, blocks and bytes per operation, flushes and
//! errors, and the device's busy time, from the completions that pass through it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{BatchTicket, BlockDevice, DeviceError, DeviceInfo, IoCompletion, IoOp, IoRequest};

/// Counters of one kind of operation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationStats {
    /// Requests completed (successfully or not).
    pub request_count: u64,
    /// Requests that completed with an error.
    pub error_count: u64,
    /// Blocks addressed by successful requests.
    pub block_count: u64,
    /// Bytes addressed by successful requests.
    pub bytes: u64,
    /// Sum of the response times (completion − submission) of all requests.
    pub response_ns_total: u64,
}

impl OperationStats {
    fn record(&mut self, block_count: u32, block_size_bytes: u32, completion: &IoCompletion) {
        self.request_count += 1;
        self.response_ns_total += completion.response_ns();
        if completion.result.is_ok() {
            self.block_count += u64::from(block_count);
            self.bytes += u64::from(block_count) * u64::from(block_size_bytes);
        } else {
            self.error_count += 1;
        }
    }

    /// Mean response time in nanoseconds (0 when nothing completed).
    pub fn response_ns_mean(&self) -> u64 {
        self.response_ns_total.checked_div(self.request_count).unwrap_or(0)
    }
}

/// A snapshot of a device's statistics, for reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceStats {
    /// The device's name.
    pub device: String,
    /// Reads.
    pub reads: OperationStats,
    /// Writes (FUA writes included).
    pub writes: OperationStats,
    /// Writes submitted with force-unit-access.
    pub fua_write_count: u64,
    /// Trims.
    pub trims: OperationStats,
    /// Successful flushes.
    pub flush_count: u64,
    /// Failed flushes.
    pub flush_error_count: u64,
    /// Batches waited for.
    pub batch_count: u64,
    /// Time during which at least one request was outstanding (submitted, not yet
    /// completed), in device-clock nanoseconds.
    pub busy_ns: u64,
    /// Submission time of the first request seen, if any.
    pub first_submitted_ns: Option<u64>,
    /// Latest completion time seen, if any.
    pub last_completed_ns: Option<u64>,
}

impl DeviceStats {
    /// Reads, writes and trims completed.
    pub fn request_count(&self) -> u64 {
        self.reads.request_count + self.writes.request_count + self.trims.request_count
    }

    /// Busy time over the span from the first submission to the last completion
    /// (0 when nothing completed).
    pub fn utilisation(&self) -> f64 {
        match (self.first_submitted_ns, self.last_completed_ns) {
            (Some(first), Some(last)) if last > first => self.busy_ns as f64 / (last - first) as f64,
            _ => 0.0,
        }
    }
}

/// Counts what passes through it to `D`; otherwise transparent (tickets are `D`'s).
#[derive(Debug)]
pub struct StatsDevice<D> {
    inner: D,
    stats: DeviceStats,
    /// Operation and block count of each request of each outstanding batch.
    outstanding: BTreeMap<BatchTicket, Vec<(IoOp, u32, bool)>>,
    /// End of the last busy interval accounted; intervals before it are not counted twice.
    busy_until_ns: u64,
    /// The inner device's block size.
    block_size_bytes: u32,
}

impl<D: BlockDevice> StatsDevice<D> {
    /// Wraps `inner` with zeroed counters.
    pub fn new(inner: D) -> Self {
        let info = inner.info();
        let stats = DeviceStats { device: info.name, ..DeviceStats::default() };
        Self { inner, stats, outstanding: BTreeMap::new(), busy_until_ns: 0, block_size_bytes: info.block_size_bytes }
    }

    /// The counters so far.
    pub fn stats(&self) -> DeviceStats {
        self.stats.clone()
    }

    /// Returns the counters so far and zeroes them.
    pub fn take_stats(&mut self) -> DeviceStats {
        let fresh = DeviceStats { device: self.stats.device.clone(), ..DeviceStats::default() };
        std::mem::replace(&mut self.stats, fresh)
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably (I/O issued directly to it is not counted).
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// Unwraps the device.
    pub fn into_inner(self) -> D {
        self.inner
    }

    /// Adds the union of the batch's outstanding intervals to the busy time.
    ///
    /// Exact when batches are waited for in the order their intervals occur (the
    /// usual case); a batch whose intervals all end before an already accounted
    /// interval contributes nothing, so busy time is never counted twice.
    fn account_busy(&mut self, completions: &[IoCompletion]) {
        let mut intervals: Vec<(u64, u64)> =
            completions.iter().map(|completion| (completion.submitted_ns, completion.completed_ns)).collect();
        intervals.sort_unstable();
        for (start_ns, end_ns) in intervals {
            let counted_from_ns = start_ns.max(self.busy_until_ns);
            if end_ns > counted_from_ns {
                self.stats.busy_ns += end_ns - counted_from_ns;
            }
            self.busy_until_ns = self.busy_until_ns.max(end_ns);
        }
    }
}

impl<D: BlockDevice> BlockDevice for StatsDevice<D> {
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }

    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        let shape = batch.iter().map(|request| (request.op, request.block_count, request.fua)).collect();
        let ticket = self.inner.submit(batch)?;
        self.outstanding.insert(ticket, shape);
        Ok(ticket)
    }

    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        let completions = self.inner.wait(ticket)?;
        let shape = self.outstanding.remove(&ticket).expect("the inner device accepted a ticket we never saw");
        assert_eq!(shape.len(), completions.len(), "one completion per request");
        let block_size_bytes = self.block_size_bytes;
        for (&(op, block_count, fua), completion) in shape.iter().zip(&completions) {
            let counters = match op {
                IoOp::Read => &mut self.stats.reads,
                IoOp::Write | IoOp::WriteZeroes => &mut self.stats.writes,
                IoOp::Trim => &mut self.stats.trims,
            };
            counters.record(block_count, block_size_bytes, completion);
            if op == IoOp::Write && fua {
                self.stats.fua_write_count += 1;
            }
            let first = self.stats.first_submitted_ns.get_or_insert(completion.submitted_ns);
            *first = (*first).min(completion.submitted_ns);
            let last = self.stats.last_completed_ns.get_or_insert(completion.completed_ns);
            *last = (*last).max(completion.completed_ns);
        }
        self.stats.batch_count += 1;
        self.account_busy(&completions);
        Ok(completions)
    }

    /// The inner device's handle: its write-backs are not counted as flushes.
    fn write_back_handle(&self) -> Result<Option<Box<dyn crate::WriteBack>>, DeviceError> {
        self.inner.write_back_handle()
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        let outcome = self.inner.flush();
        match outcome {
            Ok(()) => self.stats.flush_count += 1,
            Err(_) => self.stats.flush_error_count += 1,
        }
        outcome
    }

    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }

    crate::forward_redundancy!(inner);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryDevice;

    #[test]
    fn counts_operations_blocks_and_errors() {
        let mut device = StatsDevice::new(MemoryDevice::new(4096, 16).named("disk0"));
        device.write_blocks(0, &[1; 8192]).unwrap();
        device.read_blocks(0, 2).unwrap();
        device.read_blocks(1, 1).unwrap();
        let batch =
            vec![IoRequest::trim(4, 3), IoRequest::write(0, 1, vec![0; 4096]).with_fua(), IoRequest::read(15, 4)];
        device.execute(batch).unwrap();
        device.flush().unwrap();
        let stats = device.stats();
        assert_eq!(stats.device, "disk0");
        assert_eq!(stats.reads.request_count, 3);
        assert_eq!(stats.reads.error_count, 1);
        assert_eq!(stats.reads.block_count, 3);
        assert_eq!(stats.writes.request_count, 2);
        assert_eq!(stats.writes.bytes, 3 * 4096);
        assert_eq!(stats.fua_write_count, 1);
        assert_eq!(stats.trims.block_count, 3);
        assert_eq!(stats.flush_count, 1);
        assert_eq!(stats.batch_count, 4);
        assert_eq!(stats.request_count(), 6);
        let json = serde_json::to_string(&stats).unwrap();
        assert_eq!(serde_json::from_str::<DeviceStats>(&json).unwrap(), stats);
        assert_eq!(device.take_stats(), stats);
        assert_eq!(device.stats().request_count(), 0);
    }

    #[test]
    fn busy_time_is_the_union_of_outstanding_intervals() {
        let mut device = StatsDevice::new(MemoryDevice::new(512, 4));
        let completion =
            |submitted_ns, completed_ns| IoCompletion { result: Ok(Vec::new()), submitted_ns, completed_ns };
        // Two overlapping requests and one disjoint: [0, 10) ∪ [5, 20) ∪ [30, 40) = 30.
        device.account_busy(&[completion(0, 10), completion(5, 20), completion(30, 40)]);
        assert_eq!(device.stats().busy_ns, 30);
        // A later batch overlapping the accounted time adds only the new part.
        device.account_busy(&[completion(35, 50)]);
        assert_eq!(device.stats().busy_ns, 40);
    }
}
