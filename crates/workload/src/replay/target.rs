//! What a replay runs against: the seam between the scheduler and a device.
//!
//! A [`Target`] keeps its own clock (virtual for the disk model, wall time for
//! an NBD export), accepts batches of requests now, and reports completions
//! while waiting up to a deadline. [`DiskTarget`] is the disk model alone.

use std::sync::Arc;

use proxima_disk::{DiskCompletion, DiskModel, DiskOp, DiskRequest, HardDisk, Nanos};

use super::mapping::{TargetRequest, TargetShape};
use super::ReplayError;
use crate::request::Operation;

/// One completion, on the target's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetCompletion {
    /// The identifier the request was submitted with.
    pub id: u64,
    /// When the target completed it.
    pub completion_ns: u64,
    /// The target's error, if it failed.
    pub error: Option<String>,
}

/// A device a replay drives.
pub trait Target {
    /// Capacity, largest request and the operations it performs.
    fn shape(&self) -> TargetShape;
    /// The target's clock, in nanoseconds from the start of the replay.
    fn now_ns(&mut self) -> u64;
    /// Issues `batch` now, in order; returns the time they were issued.
    fn submit(&mut self, batch: &[(u64, TargetRequest)]) -> Result<u64, ReplayError>;
    /// Waits until at least one request completes or the clock reaches
    /// `deadline_ns` (no deadline: until a completion), appending completions.
    /// Only called with requests in flight or with a deadline.
    fn wait(&mut self, deadline_ns: Option<u64>, completions: &mut Vec<TargetCompletion>) -> Result<(), ReplayError>;
    /// Ends the replay (disconnects); every request has completed.
    fn finish(&mut self) -> Result<(), ReplayError>;
}

/// The disk model alone, in virtual time: one [`HardDisk`] with the model's
/// queue length and scheduler, seeded like every simulated drive.
#[derive(Debug)]
pub struct DiskTarget {
    disk: HardDisk,
    sector_bytes: u64,
    capacity_bytes: u64,
    now_ns: Nanos,
    scratch: Vec<DiskCompletion>,
}

impl DiskTarget {
    /// A fresh drive of `model` seeded by `seed` (its platter's initial angle).
    pub fn new(model: Arc<DiskModel>, seed: u64) -> DiskTarget {
        let sector_bytes = u64::from(model.sector_size_bytes());
        let capacity_bytes = model.sector_count() * sector_bytes;
        DiskTarget { disk: HardDisk::new(model, seed), sector_bytes, capacity_bytes, now_ns: 0, scratch: Vec::new() }
    }

    fn push_completions(&mut self, completions: &mut Vec<TargetCompletion>) {
        completions.extend(self.scratch.drain(..).map(|done| TargetCompletion {
            id: done.id,
            completion_ns: done.completion_ns,
            error: None,
        }));
    }
}

impl Target for DiskTarget {
    fn shape(&self) -> TargetShape {
        TargetShape {
            capacity_bytes: self.capacity_bytes,
            request_bytes_max: u64::from(u32::MAX) * self.sector_bytes,
            trims: false,
            flushes: false,
        }
    }

    fn now_ns(&mut self) -> u64 {
        self.now_ns
    }

    fn submit(&mut self, batch: &[(u64, TargetRequest)]) -> Result<u64, ReplayError> {
        for &(id, request) in batch {
            let op = match request.operation {
                Operation::Read => DiskOp::Read,
                Operation::Write => DiskOp::Write,
                other => unreachable!("the mapping skips {} for the disk model", other.name()),
            };
            assert!(
                request.offset_bytes.is_multiple_of(self.sector_bytes)
                    && request.length_bytes.is_multiple_of(self.sector_bytes),
                "the mapping rounds to whole sectors"
            );
            let sector_count =
                u32::try_from(request.length_bytes / self.sector_bytes).expect("shape limits the length");
            let lbn = request.offset_bytes / self.sector_bytes;
            self.disk.arrive(self.now_ns, DiskRequest { id, op, lbn, sector_count });
        }
        Ok(self.now_ns)
    }

    fn wait(&mut self, deadline_ns: Option<u64>, completions: &mut Vec<TargetCompletion>) -> Result<(), ReplayError> {
        match (self.disk.next_event_ns(), deadline_ns) {
            (Some(event), deadline) if deadline.is_none_or(|deadline| event <= deadline) => {
                self.disk.advance(event, &mut self.scratch);
                self.now_ns = self.now_ns.max(event);
                self.push_completions(completions);
            }
            (_, Some(deadline)) => self.now_ns = self.now_ns.max(deadline),
            (_, None) => unreachable!("waiting with nothing in flight and no deadline"),
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), ReplayError> {
        assert!(self.disk.is_idle(), "every request completed");
        Ok(())
    }
}
