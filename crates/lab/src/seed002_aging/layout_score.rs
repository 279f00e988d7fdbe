//! The dynamic layout score of a device's request stream, and the Pearson
//! correlation the experiment reports between it and the read cost.
//!
//! The **dynamic layout score** extends Smith and Seltzer's static score from
//! where blocks lie to how a workload reads them: of a device's requests, in
//! the order they reached the device, the fraction that start where the
//! previous request on the same device ended. A device's first request has
//! no predecessor and is not scored; streams of several devices are scored
//! apart and summed. Like the paper's, the score weighs every request alike
//! and does not tell a short jump from a long one.
//!
//! Both functions are pure: the experiment hands them the member-disk logs
//! of [`crate::rig::testbed`] and its measured rows.

use serde::{Deserialize, Serialize};

use crate::rig::testbed::MemberIo;

/// The dynamic layout score as counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynamicLayoutScore {
    /// Requests with a predecessor on their device.
    pub scored_request_count: u64,
    /// Of those, requests starting at the block after their predecessor's last.
    pub contiguous_request_count: u64,
}

impl DynamicLayoutScore {
    /// The score of one device's requests, each `(first block, block count)`,
    /// in the order the device received them.
    pub fn of_stream(requests: impl IntoIterator<Item = (u64, u64)>) -> DynamicLayoutScore {
        let mut score = DynamicLayoutScore::default();
        let mut previous_end: Option<u64> = None;
        for (block, block_count) in requests {
            if let Some(end) = previous_end {
                score.scored_request_count += 1;
                score.contiguous_request_count += u64::from(block == end);
            }
            previous_end = Some(block + block_count);
        }
        score
    }

    /// The score of every member's requests (`logs[member]`), each member's
    /// taken in the order its requests reached the drive (submission time;
    /// a batch's requests in the order it listed them).
    pub fn of_member_logs(logs: &[Vec<MemberIo>]) -> DynamicLayoutScore {
        logs.iter()
            .map(|log| {
                let mut ordered: Vec<&MemberIo> = log.iter().collect();
                ordered.sort_by_key(|io| io.submitted_ns);
                DynamicLayoutScore::of_stream(ordered.iter().map(|io| (io.block, u64::from(io.block_count))))
            })
            .fold(DynamicLayoutScore::default(), |sum, score| sum + score)
    }

    /// `contiguous / scored`, in [0, 1]; `None` when nothing is scored.
    pub fn fraction(&self) -> Option<f64> {
        (self.scored_request_count > 0).then(|| self.contiguous_request_count as f64 / self.scored_request_count as f64)
    }
}

impl std::ops::Add for DynamicLayoutScore {
    type Output = DynamicLayoutScore;

    fn add(self, other: DynamicLayoutScore) -> DynamicLayoutScore {
        DynamicLayoutScore {
            scored_request_count: self.scored_request_count + other.scored_request_count,
            contiguous_request_count: self.contiguous_request_count + other.contiguous_request_count,
        }
    }
}

/// Pearson's correlation coefficient of `points` (`(x, y)` pairs), in
/// [−1, 1]; `None` with fewer than two points or when either coordinate does
/// not vary.
pub fn pearson(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let count = points.len() as f64;
    let mean_x = points.iter().map(|(x, _)| x).sum::<f64>() / count;
    let mean_y = points.iter().map(|(_, y)| y).sum::<f64>() / count;
    let (mut covariance, mut variance_x, mut variance_y) = (0.0, 0.0, 0.0);
    for (x, y) in points {
        covariance += (x - mean_x) * (y - mean_y);
        variance_x += (x - mean_x) * (x - mean_x);
        variance_y += (y - mean_y) * (y - mean_y);
    }
    (variance_x > 0.0 && variance_y > 0.0).then(|| (covariance / (variance_x * variance_y).sqrt()).clamp(-1.0, 1.0))
}

#[cfg(test)]
mod tests {
    use proxima_device::IoOp;

    use super::*;

    fn io(block: u64, block_count: u32, submitted_ns: u64) -> MemberIo {
        MemberIo { op: IoOp::Read, block, block_count, submitted_ns, completed_ns: submitted_ns + 1 }
    }

    #[test]
    fn a_sequential_stream_scores_one_and_its_first_request_is_not_scored() {
        let score = DynamicLayoutScore::of_stream([(0, 8), (8, 8), (16, 256), (272, 1)]);
        assert_eq!(score, DynamicLayoutScore { scored_request_count: 3, contiguous_request_count: 3 });
        assert_eq!(score.fraction(), Some(1.0));
        assert_eq!(DynamicLayoutScore::of_stream([(5, 1)]).fraction(), None, "one request: nothing scored");
        assert_eq!(DynamicLayoutScore::of_stream([]).fraction(), None);
    }

    #[test]
    fn gaps_overlaps_and_backward_steps_are_not_contiguous() {
        // A gap of one block, a repeat, a step back, then one contiguous.
        let score = DynamicLayoutScore::of_stream([(0, 4), (5, 4), (5, 4), (0, 2), (2, 2)]);
        assert_eq!(score, DynamicLayoutScore { scored_request_count: 4, contiguous_request_count: 1 });
        assert_eq!(score.fraction(), Some(0.25));
    }

    #[test]
    fn members_are_scored_apart_in_submission_order() {
        // Member 0's log lists a later batch first; member 1 continues
        // member 0's blocks, which is no continuation on its own drive.
        let logs = vec![vec![io(8, 8, 20), io(0, 8, 10)], vec![io(16, 8, 30)]];
        let score = DynamicLayoutScore::of_member_logs(&logs);
        assert_eq!(score, DynamicLayoutScore { scored_request_count: 1, contiguous_request_count: 1 });
        let interleaved = vec![vec![io(0, 1, 0), io(2, 1, 1), io(4, 1, 2)], vec![io(1, 1, 0), io(3, 1, 1)]];
        assert_eq!(DynamicLayoutScore::of_member_logs(&interleaved).fraction(), Some(0.0));
    }

    #[test]
    fn pearson_is_one_minus_one_or_undefined_on_exact_lines() {
        let rising = [(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)];
        assert!((pearson(&rising).unwrap() - 1.0).abs() < 1e-12);
        let falling = [(0.0, 10.0), (0.5, 6.0), (1.0, 2.0)];
        assert!((pearson(&falling).unwrap() + 1.0).abs() < 1e-12);
        assert_eq!(pearson(&[(1.0, 2.0)]), None);
        assert_eq!(pearson(&[(1.0, 2.0), (1.0, 3.0)]), None, "x does not vary");
        // A known value: x = 1..5, y = 2, 4, 5, 4, 5 gives r = 0.7746.
        let points = [(1.0, 2.0), (2.0, 4.0), (3.0, 5.0), (4.0, 4.0), (5.0, 5.0)];
        assert!((pearson(&points).unwrap() - 0.774_596_669).abs() < 1e-6);
    }
}
