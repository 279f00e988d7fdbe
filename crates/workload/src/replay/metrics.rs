//! What a replay measures, and the report it ends with.
//!
//! - Execution time: from the first issue to the last completion; IOPS and
//!   throughput over it.
//! - Latency (issue to completion): exact mean, percentiles from a histogram
//!   with three significant digits (memory independent of the trace's length).
//! - Mean queue depth: the time-average of requests in flight, which is the sum
//!   of latencies over the execution time (Little's law holds exactly here).
//! - Reordering, RFC 4737 Type-P-Reordered: requests reach the target in some
//!   order; one whose trace sequence number is below the next expected one
//!   (one past the largest seen) is reordered.
//! - Against the recording, when the trace has response times for every
//!   replayed request: its execution time and mean latency, and the replay's
//!   relative errors against them.

use hdrhistogram::Histogram;

use super::mapping::SkipReason;

/// Figures of the recording, over the requests replayed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecordedComparison {
    /// Recorded execution time (first issue to last completion), seconds.
    pub execution_time_s: f64,
    /// Recorded mean latency, milliseconds.
    pub mean_latency_ms: f64,
    /// Recorded IOPS over its execution time.
    pub iops: f64,
    /// (replayed − recorded) / recorded execution time, percent.
    pub execution_time_error_percent: f64,
    /// (replayed − recorded) / recorded mean latency, percent.
    pub mean_latency_error_percent: f64,
}

/// The outcome of a replay.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayReport {
    /// Requests completed without error.
    pub requests: u64,
    /// Requests the target answered with an error.
    pub failed: u64,
    /// Requests not replayed, by reason.
    pub skipped: Vec<(SkipReason, u64)>,
    /// Requests further out of time order than the window could repair.
    pub late_records: u64,
    /// Bytes read and written.
    pub bytes: u64,
    /// First issue to last completion, seconds.
    pub execution_time_s: f64,
    /// Completed requests per second.
    pub iops: f64,
    /// Megabytes (10^6 bytes) per second.
    pub throughput_mb_s: f64,
    /// Mean latency, milliseconds.
    pub mean_latency_ms: f64,
    /// Median latency, milliseconds.
    pub p50_latency_ms: f64,
    /// 90th percentile latency, milliseconds.
    pub p90_latency_ms: f64,
    /// 99th percentile latency, milliseconds.
    pub p99_latency_ms: f64,
    /// 99.9th percentile latency, milliseconds.
    pub p999_latency_ms: f64,
    /// Longest latency, milliseconds.
    pub max_latency_ms: f64,
    /// Time-averaged requests in flight.
    pub mean_queue_depth: f64,
    /// Requests that reached the target out of trace order.
    pub reordered: u64,
    /// `reordered` over the requests issued.
    pub reordered_fraction: f64,
    /// The recording's figures, when it has response times.
    pub recorded: Option<RecordedComparison>,
}

/// Accumulates a replay's figures.
#[derive(Debug)]
pub struct Metrics {
    issued: u64,
    completed: u64,
    failed: u64,
    bytes: u64,
    first_issue_ns: Option<u64>,
    last_completion_ns: u64,
    latency_ns: Histogram<u64>,
    latency_sum_ns: u128,
    next_expected_sequence: u64,
    reordered: u64,
    skipped: Vec<(SkipReason, u64)>,
    recorded_first_issue_ns: Option<u64>,
    recorded_last_completion_ns: u64,
    recorded_latency_sum_ns: u128,
    /// Completed requests the recording has no response time for.
    recorded_missing: u64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            issued: 0,
            completed: 0,
            failed: 0,
            bytes: 0,
            first_issue_ns: None,
            last_completion_ns: 0,
            latency_ns: Histogram::new(3).expect("three significant digits is valid"),
            latency_sum_ns: 0,
            next_expected_sequence: 0,
            reordered: 0,
            skipped: SkipReason::ALL.iter().map(|&reason| (reason, 0)).collect(),
            recorded_first_issue_ns: None,
            recorded_last_completion_ns: 0,
            recorded_latency_sum_ns: 0,
            recorded_missing: 0,
        }
    }
}

/// One completed request, as the metrics need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completed {
    /// Bytes moved.
    pub length_bytes: u64,
    /// When it was issued (replay clock).
    pub issue_ns: u64,
    /// When it completed (replay clock).
    pub completion_ns: u64,
    /// Whether the target answered with an error.
    pub failed: bool,
    /// Its recorded issue time, relative to the trace's origin.
    pub recorded_issue_ns: u64,
    /// Its recorded response time, if any.
    pub recorded_response_ns: Option<u64>,
}

impl Metrics {
    /// Counts a request not replayed.
    pub fn skip(&mut self, reason: SkipReason) {
        let entry = self.skipped.iter_mut().find(|(known, _)| *known == reason).expect("every reason is listed");
        entry.1 += 1;
    }

    /// Counts a request reaching the target (in this order).
    pub fn issue(&mut self, sequence: u64, issue_ns: u64) {
        self.issued += 1;
        self.first_issue_ns = Some(self.first_issue_ns.map_or(issue_ns, |first| first.min(issue_ns)));
        if sequence < self.next_expected_sequence {
            self.reordered += 1;
        } else {
            self.next_expected_sequence = sequence + 1;
        }
    }

    /// Counts a completion.
    pub fn complete(&mut self, completed: &Completed) {
        self.last_completion_ns = self.last_completion_ns.max(completed.completion_ns);
        if completed.failed {
            self.failed += 1;
            return;
        }
        self.completed += 1;
        self.bytes += completed.length_bytes;
        let latency = completed.completion_ns.saturating_sub(completed.issue_ns);
        self.latency_sum_ns += u128::from(latency);
        if self.latency_ns.record(latency).is_err() {
            self.latency_ns.saturating_record(latency);
        }
        match completed.recorded_response_ns {
            Some(response) => {
                let first = self.recorded_first_issue_ns.get_or_insert(completed.recorded_issue_ns);
                *first = (*first).min(completed.recorded_issue_ns);
                let recorded_completion = completed.recorded_issue_ns.saturating_add(response);
                self.recorded_last_completion_ns = self.recorded_last_completion_ns.max(recorded_completion);
                self.recorded_latency_sum_ns += u128::from(response);
            }
            None => self.recorded_missing += 1,
        }
    }

    /// Requests issued so far.
    pub fn issued(&self) -> u64 {
        self.issued
    }

    /// Requests completed (with or without error) so far.
    pub fn finished(&self) -> u64 {
        self.completed + self.failed
    }

    /// The report, with `late_records` from the time ordering.
    pub fn report(&self, late_records: u64) -> ReplayReport {
        let execution_ns = self.first_issue_ns.map_or(0, |first| self.last_completion_ns.saturating_sub(first));
        let execution_s = execution_ns as f64 / 1e9;
        let per_second = |count: f64| if execution_ns == 0 { 0.0 } else { count / execution_s };
        let completed = self.completed.max(1) as f64;
        let percentile_ms = |quantile: f64| self.latency_ns.value_at_quantile(quantile) as f64 / 1e6;
        let mean_latency_ms = self.latency_sum_ns as f64 / completed / 1e6;
        ReplayReport {
            requests: self.completed,
            failed: self.failed,
            skipped: self.skipped.clone(),
            late_records,
            bytes: self.bytes,
            execution_time_s: execution_s,
            iops: per_second(self.completed as f64),
            throughput_mb_s: per_second(self.bytes as f64 / 1e6),
            mean_latency_ms,
            p50_latency_ms: percentile_ms(0.5),
            p90_latency_ms: percentile_ms(0.9),
            p99_latency_ms: percentile_ms(0.99),
            p999_latency_ms: percentile_ms(0.999),
            max_latency_ms: self.latency_ns.max() as f64 / 1e6,
            mean_queue_depth: if execution_ns == 0 { 0.0 } else { self.latency_sum_ns as f64 / execution_ns as f64 },
            reordered: self.reordered,
            reordered_fraction: if self.issued == 0 { 0.0 } else { self.reordered as f64 / self.issued as f64 },
            recorded: self.recorded_comparison(execution_s, mean_latency_ms),
        }
    }

    fn recorded_comparison(&self, execution_s: f64, mean_latency_ms: f64) -> Option<RecordedComparison> {
        let first = self.recorded_first_issue_ns?;
        if self.recorded_missing > 0 || self.completed == 0 {
            return None;
        }
        let recorded_execution_s = self.recorded_last_completion_ns.saturating_sub(first) as f64 / 1e9;
        let recorded_latency_ms = self.recorded_latency_sum_ns as f64 / self.completed as f64 / 1e6;
        let error = |replayed: f64, recorded: f64| {
            if recorded == 0.0 {
                0.0
            } else {
                (replayed - recorded) / recorded * 100.0
            }
        };
        Some(RecordedComparison {
            execution_time_s: recorded_execution_s,
            mean_latency_ms: recorded_latency_ms,
            iops: if recorded_execution_s > 0.0 { self.completed as f64 / recorded_execution_s } else { 0.0 },
            execution_time_error_percent: error(execution_s, recorded_execution_s),
            mean_latency_error_percent: error(mean_latency_ms, recorded_latency_ms),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_p_reordered_counts_late_arrivals() {
        let mut metrics = Metrics::default();
        for sequence in [0, 2, 1, 3, 5, 4, 6] {
            metrics.issue(sequence, 0);
        }
        let report = metrics.report(0);
        assert_eq!(report.reordered, 2, "1 after 2, 4 after 5");
        assert!((report.reordered_fraction - 2.0 / 7.0).abs() < 1e-12);
    }

    #[test]
    fn queue_depth_is_latency_over_time() {
        let mut metrics = Metrics::default();
        for (issue, completion) in [(0, 100), (0, 100), (50, 150)] {
            metrics.issue(0, issue);
            let completed = Completed {
                length_bytes: 512,
                issue_ns: issue,
                completion_ns: completion,
                failed: false,
                recorded_issue_ns: issue,
                recorded_response_ns: Some(completion - issue),
            };
            metrics.complete(&completed);
        }
        let report = metrics.report(0);
        assert!((report.mean_queue_depth - 2.0).abs() < 1e-12, "300 ns of latency over 150 ns");
        let recorded = report.recorded.unwrap();
        assert_eq!(recorded.execution_time_error_percent, 0.0);
        assert_eq!(recorded.mean_latency_error_percent, 0.0);
    }
}
