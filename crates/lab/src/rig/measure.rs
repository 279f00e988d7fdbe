//! The figures of the layout experiments, computed from the requests each member
//! disk completed ([`MemberIo`]), as the proximal I/O paper defines them.
//!
//! - A *batch* is the disk I/O of destaging one extent's staged blocks.
//! - A disk I/O's *service time* is the time between its completion and the
//!   previous completion on the same disk (or its own submission, if later: the
//!   disk was idle in between); the first I/O of a disk in a batch is timed from
//!   its submission, so it includes the seek from the random arm position.
//! - *Disk I/Os per revolution*: the revolution time over the mean service time of
//!   the I/Os after each disk's first one in a batch — how many I/Os a disk retires
//!   per revolution once it is positioned (the paper adds an average seek to this
//!   to price a batch).
//! - *I/O amplification*: disk I/Os (reads and writes over all members) per user
//!   update, as the ratio of the sums over all batches.
//! - *Utilisation* of a disk in a batch: the time it had a request outstanding
//!   over the batch's response time (first submission to last completion on any
//!   member).

use serde::{Deserialize, Serialize};

use crate::rig::testbed::MemberIo;

/// One disk's share of one batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskBatch {
    /// Requests it completed.
    pub io_count: u64,
    /// Sum of their service times.
    pub service_ns: u64,
    /// Requests after its first one in the batch.
    pub positioned_io_count: u64,
    /// Sum of their service times.
    pub positioned_service_ns: u64,
    /// Time with at least one request outstanding.
    pub busy_ns: u64,
}

impl DiskBatch {
    /// Measures one disk's requests (in any order).
    pub fn from_ios(ios: &[MemberIo]) -> DiskBatch {
        let mut sorted: Vec<MemberIo> = ios.to_vec();
        sorted.sort_by_key(|io| (io.completed_ns, io.submitted_ns));
        let mut figures = DiskBatch::default();
        let mut previous_completion: Option<u64> = None;
        for io in &sorted {
            let since = previous_completion.map_or(io.submitted_ns, |previous| previous.max(io.submitted_ns));
            let service_ns = io.completed_ns.saturating_sub(since);
            figures.io_count += 1;
            figures.service_ns += service_ns;
            if previous_completion.is_some() {
                figures.positioned_io_count += 1;
                figures.positioned_service_ns += service_ns;
            }
            previous_completion = Some(io.completed_ns);
        }
        figures.busy_ns = busy_ns(&sorted);
        figures
    }
}

/// Length of the union of the requests' `[submitted, completed]` intervals.
pub fn busy_ns(ios: &[MemberIo]) -> u64 {
    let mut intervals: Vec<(u64, u64)> = ios.iter().map(|io| (io.submitted_ns, io.completed_ns)).collect();
    intervals.sort_unstable();
    let mut total = 0;
    let mut current: Option<(u64, u64)> = None;
    for (start, end) in intervals {
        current = match current {
            Some((open_start, open_end)) if start <= open_end => Some((open_start, open_end.max(end))),
            Some((open_start, open_end)) => {
                total += open_end - open_start;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    total + current.map_or(0, |(start, end)| end - start)
}

/// One batch: its user updates and every member's share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchMeasurement {
    /// User updates (blocks) the batch destaged.
    pub user_updates: u64,
    /// First submission to last completion on any member.
    pub response_ns: u64,
    /// Per member, data members first and parity last.
    pub disks: Vec<DiskBatch>,
}

impl BatchMeasurement {
    /// Measures a batch from every member's requests; `None` when no disk did any
    /// I/O (nothing to measure).
    pub fn from_logs(user_updates: u64, logs: &[Vec<MemberIo>]) -> Option<BatchMeasurement> {
        let all = logs.iter().flatten();
        let first_submission = all.clone().map(|io| io.submitted_ns).min()?;
        let last_completion = all.map(|io| io.completed_ns).max()?;
        Some(BatchMeasurement {
            user_updates,
            response_ns: last_completion - first_submission,
            disks: logs.iter().map(|ios| DiskBatch::from_ios(ios)).collect(),
        })
    }

    /// Disk I/Os over all members.
    pub fn disk_io_count(&self) -> u64 {
        self.disks.iter().map(|disk| disk.io_count).sum()
    }
}

/// Per-role averages of a [`BatchSummary`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RoleFigures {
    /// Mean I/Os per disk of this role per batch.
    pub ios_per_batch: f64,
    /// Mean service time per I/O, in milliseconds.
    pub service_ms_per_io: f64,
    /// Busy time over batch response time.
    pub utilisation: f64,
}

/// Sums over many batches, from which the table rows are drawn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchSummary {
    /// Batches measured.
    pub batch_count: u64,
    /// Sum of user updates.
    pub user_updates: u64,
    /// Sum of response times.
    pub response_ns: u64,
    /// Per member, the sums of its batches.
    pub disks: Vec<DiskBatch>,
}

impl BatchSummary {
    /// Adds one batch.
    pub fn add(&mut self, batch: &BatchMeasurement) {
        if self.disks.len() < batch.disks.len() {
            self.disks.resize(batch.disks.len(), DiskBatch::default());
        }
        self.batch_count += 1;
        self.user_updates += batch.user_updates;
        self.response_ns += batch.response_ns;
        for (sum, disk) in self.disks.iter_mut().zip(&batch.disks) {
            sum.io_count += disk.io_count;
            sum.service_ns += disk.service_ns;
            sum.positioned_io_count += disk.positioned_io_count;
            sum.positioned_service_ns += disk.positioned_service_ns;
            sum.busy_ns += disk.busy_ns;
        }
    }

    fn per_batch(&self, total: u64) -> f64 {
        if self.batch_count == 0 {
            0.0
        } else {
            total as f64 / self.batch_count as f64
        }
    }

    /// Mean user updates per batch.
    pub fn updates_per_batch(&self) -> f64 {
        self.per_batch(self.user_updates)
    }

    /// Mean disk I/Os per batch over all members.
    pub fn disk_ios_per_batch(&self) -> f64 {
        self.per_batch(self.disk_io_count())
    }

    /// Disk I/Os over all members and batches.
    pub fn disk_io_count(&self) -> u64 {
        self.disks.iter().map(|disk| disk.io_count).sum()
    }

    /// Disk I/Os per user update.
    pub fn io_amplification(&self) -> f64 {
        ratio(self.disk_io_count() as f64, self.user_updates as f64)
    }

    /// Mean batch response time in milliseconds.
    pub fn batch_response_ms(&self) -> f64 {
        self.per_batch(self.response_ns) / 1e6
    }

    /// I/Os retired per revolution once positioned, over all members.
    pub fn ios_per_revolution(&self, revolution_ns: u64) -> f64 {
        let count: u64 = self.disks.iter().map(|disk| disk.positioned_io_count).sum();
        let service: u64 = self.disks.iter().map(|disk| disk.positioned_service_ns).sum();
        ratio(count as f64 * revolution_ns as f64, service as f64)
    }

    /// I/Os retired per revolution counting every I/O, positioning included: the
    /// figure for I/O that comes one update at a time rather than in batches.
    pub fn ios_per_revolution_with_positioning(&self, revolution_ns: u64) -> f64 {
        let service: u64 = self.disks.iter().map(|disk| disk.service_ns).sum();
        ratio(self.disk_io_count() as f64 * revolution_ns as f64, service as f64)
    }

    /// Figures of the members in `members` (e.g. the data disks), pooled.
    pub fn role(&self, members: std::ops::Range<usize>) -> RoleFigures {
        let disks = &self.disks[members.start.min(self.disks.len())..members.end.min(self.disks.len())];
        if disks.is_empty() {
            return RoleFigures::default();
        }
        let io_count: u64 = disks.iter().map(|disk| disk.io_count).sum();
        let service_ns: u64 = disks.iter().map(|disk| disk.service_ns).sum();
        let busy_ns: u64 = disks.iter().map(|disk| disk.busy_ns).sum();
        RoleFigures {
            ios_per_batch: self.per_batch(io_count) / disks.len() as f64,
            service_ms_per_io: ratio(service_ns as f64, io_count as f64) / 1e6,
            utilisation: ratio(busy_ns as f64, self.response_ns as f64 * disks.len() as f64),
        }
    }
}

/// `numerator / denominator`, or 0 when the denominator is 0.
pub fn ratio(numerator: f64, denominator: f64) -> f64 {
    if denominator == 0.0 {
        0.0
    } else {
        numerator / denominator
    }
}

#[cfg(test)]
mod tests {
    use proxima_device::IoOp;

    use super::*;

    fn io(submitted_ns: u64, completed_ns: u64) -> MemberIo {
        MemberIo { op: IoOp::Write, block: 0, block_count: 1, submitted_ns, completed_ns }
    }

    #[test]
    fn service_time_is_the_gap_between_completions_or_from_an_idle_submission() {
        // Queued at 0: the first completes at 10 (positioning), the next two at
        // 12 and 15. A fourth arrives at 20 on an idle disk and completes at 26.
        let disk = DiskBatch::from_ios(&[io(0, 12), io(0, 10), io(0, 15), io(20, 26)]);
        assert_eq!(disk.io_count, 4);
        assert_eq!(disk.service_ns, 10 + 2 + 3 + 6);
        assert_eq!((disk.positioned_io_count, disk.positioned_service_ns), (3, 11));
        assert_eq!(disk.busy_ns, 15 + 6);
    }

    #[test]
    fn a_batch_spans_all_members_and_sums_their_ios() {
        let logs = vec![vec![io(5, 9)], vec![], vec![io(4, 8), io(4, 20)]];
        let batch = BatchMeasurement::from_logs(3, &logs).unwrap();
        assert_eq!(batch.response_ns, 16);
        assert_eq!(batch.disk_io_count(), 3);
        assert!(BatchMeasurement::from_logs(3, &[vec![], vec![]]).is_none());
    }

    #[test]
    fn the_summary_pools_batches_as_ratios_of_sums() {
        let mut summary = BatchSummary::default();
        // Two members: data and parity. Revolution: 8 ns.
        summary.add(&BatchMeasurement::from_logs(2, &[vec![io(0, 8), io(0, 10)], vec![io(0, 8)]]).unwrap());
        summary.add(&BatchMeasurement::from_logs(4, &[vec![io(0, 8), io(0, 12), io(0, 14)], vec![]]).unwrap());
        assert_eq!(summary.batch_count, 2);
        assert_eq!(summary.updates_per_batch(), 3.0);
        assert_eq!(summary.disk_ios_per_batch(), 3.0);
        assert_eq!(summary.io_amplification(), 1.0);
        // Positioned I/Os: 2 ns, then 4 and 2 ns: 3 I/Os in 8 ns, 3 per 8-ns revolution.
        assert_eq!(summary.ios_per_revolution(8), 3.0);
        // All six I/Os: 8 + 2 + 8 + 8 + 4 + 2 = 32 ns, 1.5 per revolution.
        assert_eq!(summary.ios_per_revolution_with_positioning(8), 1.5);
        let data = summary.role(0..1);
        assert_eq!(data.ios_per_batch, 2.5);
        assert_eq!(data.service_ms_per_io, 24.0 / 5.0 / 1e6);
        assert_eq!(data.utilisation, 24.0 / 24.0);
        let parity = summary.role(1..2);
        assert_eq!(parity.ios_per_batch, 0.5);
        assert_eq!(parity.utilisation, 8.0 / 24.0);
    }
}
