//! Devices that answer every request at once and record it, for experiments
//! in which the engine decides and a separate simulation times: many users
//! share one volume, each waiting only for the I/O of its own requests, which
//! a volume issuing its I/O synchronously cannot show on a clock of its own.
//!
//! Every [`RecordingDevice`] made by one [`IoRecorder`] appends to the same
//! list of *rounds*: the requests submitted between two waits form a round,
//! and the next submission after a wait opens the next one. A round's requests
//! were in flight together; a later round was issued only once the engine had
//! waited for an earlier one, so a timing simulation replays the rounds in
//! order, each once the previous one has completed.
//!
//! Reads answer zeroes (or nothing, on a device that stores no payload), so
//! only a volume that never reads back what it wrote (a metadata-only volume
//! between mounts) may run on these devices. Trims and flushes record nothing:
//! the simulated drives have no discard, and a write completes once timed.

use std::cell::RefCell;
use std::rc::Rc;

use proxima_device::{
    validate_request, BatchTicket, BlockDevice, CompletedBatches, DeviceError, DeviceInfo, IoCompletion, IoOp,
    IoRequest,
};

/// One request a recording device was asked to serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordedIo {
    /// The device, as numbered by [`IoRecorder::device`].
    pub device: usize,
    /// Read, write or write of zeroes.
    pub op: IoOp,
    /// First block.
    pub block: u64,
    /// Blocks addressed.
    pub block_count: u32,
}

#[derive(Debug, Default)]
struct Rounds {
    rounds: Vec<Vec<RecordedIo>>,
    /// Whether the last round takes further submissions (no wait since).
    open: bool,
    now_ns: u64,
}

/// The rounds several recording devices share.
#[derive(Debug, Clone, Default)]
pub struct IoRecorder {
    shared: Rc<RefCell<Rounds>>,
}

impl IoRecorder {
    /// A recorder with no rounds, its clock at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// A device numbered `index` in the recorded requests.
    pub fn device(&self, index: usize, info: DeviceInfo) -> RecordingDevice {
        RecordingDevice { recorder: self.clone(), index, info, batches: CompletedBatches::default() }
    }

    /// Sets the time the devices report (submission and completion alike).
    pub fn set_now_ns(&self, now_ns: u64) {
        self.shared.borrow_mut().now_ns = now_ns;
    }

    /// The rounds recorded since the last call, oldest first.
    pub fn take_rounds(&self) -> Vec<Vec<RecordedIo>> {
        let mut shared = self.shared.borrow_mut();
        shared.open = false;
        std::mem::take(&mut shared.rounds)
    }

    fn record(&self, io: RecordedIo) {
        let mut shared = self.shared.borrow_mut();
        if !shared.open {
            shared.rounds.push(Vec::new());
            shared.open = true;
        }
        shared.rounds.last_mut().expect("a round is open").push(io);
    }

    fn close_round(&self) {
        self.shared.borrow_mut().open = false;
    }

    fn now_ns(&self) -> u64 {
        self.shared.borrow().now_ns
    }
}

/// A device that records each request in its [`IoRecorder`] and completes it
/// at once.
#[derive(Debug)]
pub struct RecordingDevice {
    recorder: IoRecorder,
    index: usize,
    info: DeviceInfo,
    batches: CompletedBatches,
}

impl RecordingDevice {
    fn answer(&self, request: &IoRequest) -> Result<Vec<u8>, DeviceError> {
        validate_request(&self.info, request)?;
        match request.op {
            IoOp::Read | IoOp::Write | IoOp::WriteZeroes => self.recorder.record(RecordedIo {
                device: self.index,
                op: request.op,
                block: request.block,
                block_count: request.block_count,
            }),
            IoOp::Trim => {}
        }
        let read_bytes = u64::from(request.block_count) * u64::from(self.info.block_size_bytes);
        Ok(match request.op {
            IoOp::Read if self.info.stores_payload => {
                vec![0; usize::try_from(read_bytes).expect("a request's bytes fit in memory")]
            }
            _ => Vec::new(),
        })
    }
}

impl BlockDevice for RecordingDevice {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        let now_ns = self.recorder.now_ns();
        let completions = batch
            .iter()
            .map(|request| IoCompletion { result: self.answer(request), submitted_ns: now_ns, completed_ns: now_ns })
            .collect();
        Ok(self.batches.insert(completions))
    }

    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        let completions = self.batches.take(ticket, &self.info.name)?;
        self.recorder.close_round();
        Ok(completions)
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        Ok(())
    }

    fn now_ns(&self) -> u64 {
        self.recorder.now_ns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, stores_payload: bool) -> DeviceInfo {
        DeviceInfo {
            name: name.into(),
            block_size_bytes: 4096,
            block_count: 100,
            atomic_write_bytes: 4096,
            stores_payload,
        }
    }

    #[test]
    fn requests_submitted_before_a_wait_share_a_round() {
        let recorder = IoRecorder::new();
        let mut disk = recorder.device(0, info("disk", false));
        let mut flash = recorder.device(1, info("flash", true));
        recorder.set_now_ns(7);
        let a = disk.submit(vec![IoRequest::read(3, 2)]).unwrap();
        let b = flash.submit(vec![IoRequest::write(5, 1, vec![1; 4096]), IoRequest::trim(9, 1)]).unwrap();
        let read = disk.wait(a).unwrap();
        assert_eq!(read[0].result, Ok(Vec::new()), "no payload: nothing read");
        assert_eq!((read[0].submitted_ns, read[0].completed_ns), (7, 7));
        flash.wait(b).unwrap();
        let after = disk.submit(vec![IoRequest::write_zeroes(1, 4)]).unwrap();
        disk.wait(after).unwrap();
        let flash_read = flash.execute(vec![IoRequest::read(5, 1)]).unwrap();
        assert_eq!(flash_read[0].result, Ok(vec![0; 4096]), "a payload device reads zeroes");
        let rounds = recorder.take_rounds();
        let ops: Vec<Vec<(usize, IoOp, u64)>> =
            rounds.iter().map(|round| round.iter().map(|io| (io.device, io.op, io.block)).collect()).collect();
        assert_eq!(
            ops,
            vec![
                vec![(0, IoOp::Read, 3), (1, IoOp::Write, 5)],
                vec![(0, IoOp::WriteZeroes, 1)],
                vec![(1, IoOp::Read, 5)]
            ],
            "the trim is not recorded"
        );
        assert!(recorder.take_rounds().is_empty());
    }

    #[test]
    fn invalid_requests_are_refused_and_not_recorded() {
        let recorder = IoRecorder::new();
        let mut disk = recorder.device(0, info("disk", false));
        let completions = disk.execute(vec![IoRequest::read(99, 2), IoRequest::read(0, 1)]).unwrap();
        assert!(matches!(completions[0].result, Err(DeviceError::OutOfRange { .. })));
        assert_eq!(
            recorder.take_rounds(),
            vec![vec![RecordedIo { device: 0, op: IoOp::Read, block: 0, block_count: 1 }]]
        );
        assert!(matches!(disk.wait(BatchTicket(42)), Err(DeviceError::UnknownTicket { .. })));
    }
}
