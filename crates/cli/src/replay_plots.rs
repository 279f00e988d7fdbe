//! `proxima replay --plots DIR`: what a replay looked like, drawn.
//!
//! - `latency_percentiles.svg`: the latency percentile curve, replayed and (when the
//!   trace records response times) recorded. The x axis counts nines
//!   (1 = p90, 2 = p99, 3 = p99.9), so the tail is as wide as the body.
//! - `throughput.svg`: completions per second over the replay's time, and
//!   over the recording's when it has response times, in at most 64 bins.
//! - `latency_percentiles.csv` and `throughput.csv`: the points drawn.
//!
//! Memory is independent of the trace's length: latencies go into
//! histograms with three significant digits, and completions into at most
//! [`TIME_BINS_MAX`] time bins, which double in width whenever the replay
//! outgrows them.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;
use proxima_lab::report::plot::{LineChart, Series};
use proxima_workload::replay::RequestRecord;

/// Most time bins kept; the bins widen by two when a completion falls past them.
pub const TIME_BINS_MAX: usize = 512;
/// Most time bins drawn: wide enough to hold several requests each.
const PLOTTED_BINS_MAX: usize = 64;
/// The narrowest time bin: one millisecond.
const TIME_BIN_NS_MIN: u64 = 1_000_000;
/// Percentile points of the latency curve, in nines (0 = p0 … 4 = p99.99).
const NINES_STEPS: u32 = 80;
const NINES_MAX: f64 = 4.0;

/// Completions counted in time bins of a width that doubles as time runs on.
#[derive(Debug, Clone, PartialEq)]
struct TimeBins {
    bin_ns: u64,
    counts: Vec<u64>,
}

impl TimeBins {
    fn new() -> TimeBins {
        TimeBins { bin_ns: TIME_BIN_NS_MIN, counts: Vec::new() }
    }

    fn add(&mut self, time_ns: u64) {
        while time_ns / self.bin_ns >= TIME_BINS_MAX as u64 {
            self.widen();
        }
        let index = (time_ns / self.bin_ns) as usize;
        if index >= self.counts.len() {
            self.counts.resize(index + 1, 0);
        }
        self.counts[index] += 1;
    }

    /// Doubles the bin width, adding each pair of bins together.
    fn widen(&mut self) {
        self.counts = self.counts.chunks(2).map(|pair| pair.iter().sum()).collect();
        self.bin_ns *= 2;
    }

    /// `(bin middle in seconds, completions per second)` in at most
    /// [`PLOTTED_BINS_MAX`] bins (wider ones if need be) up to `end_ns`, the
    /// last completion. The last bin's rate is over the part of it the
    /// replay reached; when that is under half a bin, it joins the bin
    /// before it, so that no rate is taken over a sliver of time.
    fn rates(&self, end_ns: u64) -> Vec<(f64, f64)> {
        let mut bins = self.clone();
        while bins.counts.len() > PLOTTED_BINS_MAX {
            bins.widen();
        }
        let bin_ns = bins.bin_ns;
        // (start, width, count) of every bin, the last one cut at `end_ns`.
        let mut spans: Vec<(u64, u64, u64)> =
            bins.counts.iter().enumerate().map(|(index, &count)| (index as u64 * bin_ns, bin_ns, count)).collect();
        if let Some(last) = spans.last_mut() {
            last.1 = end_ns.saturating_sub(last.0).clamp(1, bin_ns);
        }
        if spans.len() >= 2 && spans[spans.len() - 1].1 < bin_ns / 2 {
            let (_, width, count) = spans.pop().expect("two spans");
            let previous = spans.last_mut().expect("one span left");
            previous.1 += width;
            previous.2 += count;
        }
        spans
            .into_iter()
            .map(|(start, width, count)| {
                let (start_s, width_s) = (start as f64 / 1e9, width as f64 / 1e9);
                (start_s + width_s / 2.0, count as f64 / width_s)
            })
            .collect()
    }
}

/// The latencies and completion times of one side of the comparison: the
/// replay, or the recording.
#[derive(Debug)]
struct Side {
    name: &'static str,
    latency_ns: Histogram<u64>,
    completions: TimeBins,
    end_ns: u64,
}

impl Side {
    fn new(name: &'static str) -> Side {
        let latency_ns = Histogram::new(3).expect("three significant digits is valid");
        Side { name, latency_ns, completions: TimeBins::new(), end_ns: 0 }
    }

    fn add(&mut self, latency_ns: u64, completion_ns: u64) {
        record_latency(&mut self.latency_ns, latency_ns);
        self.completions.add(completion_ns);
        self.end_ns = self.end_ns.max(completion_ns);
    }

    fn latency_series(&self) -> Series {
        Series { name: self.name.into(), points: percentile_curve(&self.latency_ns) }
    }

    fn throughput_series(&self) -> Series {
        Series { name: self.name.into(), points: self.completions.rates(self.end_ns) }
    }
}

/// A replay's latencies and completions, replayed and recorded, for plotting.
#[derive(Debug)]
pub struct ReplayPlots {
    directory: PathBuf,
    replayed: Side,
    recorded: Side,
}

impl ReplayPlots {
    /// Plots into `directory`, which is created now so that a bad path fails
    /// before the replay rather than after it.
    pub fn new(directory: &Path) -> Result<ReplayPlots, String> {
        fs::create_dir_all(directory).map_err(|error| format!("{}: {error}", directory.display()))?;
        Ok(ReplayPlots {
            directory: directory.to_path_buf(),
            replayed: Side::new("replayed"),
            recorded: Side::new("recorded"),
        })
    }

    /// Counts one completed request (failed ones are not drawn).
    pub fn completed(&mut self, record: &RequestRecord) {
        if record.error.is_some() {
            return;
        }
        self.replayed.add(record.completion_ns.saturating_sub(record.issue_ns), record.completion_ns);
        if let Some(response_ns) = record.recorded_response_ns {
            self.recorded.add(response_ns, record.recorded_issue_ns + response_ns);
        }
    }

    /// Writes the plots and their CSVs; returns the files written. Nothing
    /// is written when no request completed.
    pub fn write(&self) -> Result<Vec<PathBuf>, String> {
        if self.replayed.latency_ns.is_empty() {
            return Ok(Vec::new());
        }
        let sides: Vec<&Side> =
            [&self.replayed, &self.recorded].into_iter().filter(|side| !side.latency_ns.is_empty()).collect();
        let mut written = Vec::new();
        let mut write_chart = |stem: &str, chart: LineChart, x_column: &str, y_column: &str| -> Result<(), String> {
            let svg = self.directory.join(format!("{stem}.svg"));
            chart.write_svg(&svg).map_err(|error| error.to_string())?;
            let csv = self.directory.join(format!("{stem}.csv"));
            write_series_csv(&csv, &chart.series, x_column, y_column)?;
            written.extend([svg, csv]);
            Ok(())
        };
        write_chart(
            "latency_percentiles",
            LineChart {
                title: "Latency by percentile".into(),
                x_label: "percentile, in nines (1 = p90, 2 = p99, 3 = p99.9)".into(),
                y_label: "latency (ms)".into(),
                series: sides.iter().map(|side| side.latency_series()).collect(),
            },
            "nines",
            "latency_ms",
        )?;
        write_chart(
            "throughput",
            LineChart {
                title: "Completions over time".into(),
                x_label: "time since the first request (s)".into(),
                y_label: "IOPS".into(),
                series: sides.iter().map(|side| side.throughput_series()).collect(),
            },
            "time_s",
            "iops",
        )?;
        Ok(written)
    }
}

/// Records a latency, growing the histogram to hold it (clamped only if it
/// cannot grow).
fn record_latency(histogram: &mut Histogram<u64>, latency_ns: u64) {
    let latency_ns = latency_ns.max(1);
    if histogram.record(latency_ns).is_err() {
        histogram.saturating_record(latency_ns);
    }
}

/// `(nines, latency in ms)` from p0 to p99.99 (or as far as the requests
/// reach: a curve over 100 requests stops at p99).
fn percentile_curve(latency_ns: &Histogram<u64>) -> Vec<(f64, f64)> {
    let reachable_nines = (latency_ns.len() as f64).log10().min(NINES_MAX);
    (0..=NINES_STEPS)
        .map(|step| reachable_nines * f64::from(step) / f64::from(NINES_STEPS))
        .map(|nines| {
            let quantile = 1.0 - 10f64.powf(-nines);
            (nines, latency_ns.value_at_quantile(quantile) as f64 / 1e6)
        })
        .collect()
}

fn write_series_csv(path: &Path, series: &[Series], x_column: &str, y_column: &str) -> Result<(), String> {
    let describe = |error: std::io::Error| format!("{}: {error}", path.display());
    let mut text = Vec::new();
    writeln!(text, "series,{x_column},{y_column}").map_err(describe)?;
    for line in series {
        for (x, y) in &line.points {
            writeln!(text, "{},{x},{y}", line.name).map_err(describe)?;
        }
    }
    fs::write(path, text).map_err(describe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_bins_widen_and_keep_every_completion() {
        let mut bins = TimeBins::new();
        for millisecond in 0..2_000u64 {
            bins.add(millisecond * 1_000_000);
        }
        assert!(bins.counts.len() <= TIME_BINS_MAX);
        assert_eq!(bins.bin_ns, 4_000_000, "2,000 ms in 1 ms bins widen twice to fit 512 bins");
        assert_eq!(bins.counts.iter().sum::<u64>(), 2_000);
        let rates = bins.rates(1_999_000_000);
        assert!(rates.len() <= PLOTTED_BINS_MAX);
        let (last, full) = rates.split_last().unwrap();
        assert!(full.iter().all(|&(_, rate)| (rate - 1_000.0).abs() < 1e-6), "a steady 1,000 per second: {rates:?}");
        // The last bin ends at the last completion: one request more than its span holds.
        assert!((last.1 - 1_000.0).abs() < 25.0, "{last:?}");
    }

    #[test]
    fn a_last_bin_barely_begun_joins_the_one_before() {
        let mut bins = TimeBins::new();
        for millisecond in 0..100u64 {
            bins.add(millisecond * 1_000_000);
        }
        // One more completion just into the next bin: its rate would be
        // taken over a nanosecond.
        bins.add(100_000_001);
        let rates = bins.rates(100_000_001);
        let total: f64 = rates.iter().map(|&(_, rate)| rate).sum();
        assert!(rates.iter().all(|&(_, rate)| rate < 2_000.0), "no spike: {rates:?} (sum {total})");
    }

    #[test]
    fn the_percentile_curve_reaches_as_far_as_the_requests_do() {
        let mut latency = Histogram::<u64>::new(3).unwrap();
        for value in 1..=100u64 {
            latency.record(value * 1_000_000).unwrap();
        }
        let curve = percentile_curve(&latency);
        assert_eq!(curve.first().map(|point| point.0), Some(0.0));
        assert!((curve.last().unwrap().0 - 2.0).abs() < 1e-9, "100 requests reach p99");
        assert!(curve.windows(2).all(|pair| pair[0].1 <= pair[1].1), "latency rises with the percentile");
        let median = curve.iter().find(|point| (point.0 - 0.3).abs() < 1e-9).unwrap();
        assert!((median.1 - 50.0).abs() <= 1.0, "{median:?}");
    }
}
