//! `reproduce hylog-table3`: the HyLog paper's Table 3 (001:L319–L340), its
//! validation of Overwrite and LFS against FFS and BSD-LFS under TPC-B, run
//! on the engine's `in-place` and `lfs` layouts over one simulated drive (the
//! DSP 3105 of Table 2 by default), one closed-loop user
//! ([`tpcb_volume`](crate::seed001_hylog::tpcb_volume) has the rig).
//!
//! - **Overwrite**: the `in-place` layout with no write cache: every page
//!   write-back is a random write in place.
//! - **LFS without cleaning**: the `lfs` layout with the cleaner off, measured
//!   while the clean segments beyond the database last.
//! - **LFS with cleaning**: the `lfs` layout after `--rewrites` database sizes
//!   of updates, its cost-age cleaner at its steady state.
//!
//! The segment is Eq 6's for the drive, from its fitted positioning time and
//! bandwidth (128 KiB on the DSP 3105). The published figures are FFS's and
//! BSD-LFS's on the real drive (27.0, 41.0 and 27.0 TPS, the last argued to
//! be 34.4 by Matthews et al.); the paper's own simulator gave 25.7, 43.3 and
//! 39.0. The paper's simulator has no CPU component (disk, layout and buffer
//! pool, L267–L270), and neither has this run unless `--cpu-ms` gives one.
//!
//! Writes `table3.csv`, `table3.svg` and `report.md`. The JSON headline is
//! `{"overwrite_tps", "lfs_no_cleaning_tps", "lfs_cleaning_tps", …}`.

use std::fmt::Write as _;
use std::sync::Arc;

use proxima_disk::DiskModel;
use serde::{Deserialize, Serialize};

use crate::experiment::{Experiment, RunSettings};
use crate::progress::Progress;
use crate::report::cost::{SimulatedWork, WallCost};
use crate::report::markdown::{verdict, Artifact, Rendered};
use crate::report::plot::GroupedBarChart;
use crate::report::table::Table;
use crate::rig::parallel::{run_all, Task};
use crate::rig::testbed::BLOCK_SIZE_BYTES;
use crate::seed001_hylog::cost_model::DiskTiming;
use crate::seed001_hylog::hylog_model::drive_timing_and_segment;
use crate::seed001_hylog::tpcb_volume::{run_tpcb, TpcbLayout, TpcbRun, TpcbRunSpec};
use crate::LabError;

/// The experiment's name on the command line.
pub const NAME: &str = "hylog-table3";

/// The drive of Table 3.
pub const DEFAULT_MODEL: &str = "dsp3105";

/// Random reads per size when the drive's timing is fitted for Eq 6.
const TIMING_REQUEST_COUNT: u32 = 500;

/// The published TPS of each row (FFS, BSD-LFS without cleaning, and BSD-LFS
/// with cleaning as Matthews et al. argue it should be), 001:L336–L340.
pub const PUBLISHED_TPS: [f64; 3] = [27.0, 41.0, 34.4];

/// The paper's own simulator's TPS of each row, on the DEC RZ26.
pub const PAPER_SIMULATED_TPS: [f64; 3] = [25.7, 43.3, 39.0];

/// The issue's tolerance against the published figures (the paper's own
/// differences reach 13.4 %).
pub const TOLERANCE: f64 = 0.15;

/// The `hylog-table3` experiment.
#[derive(Debug, Clone, Copy)]
pub struct HylogTable3;

/// The experiment's flags.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct HylogTable3Params {
    /// The database's share of the drive (disk space utilisation), in (0, 1).
    #[arg(long, default_value_t = 0.5, allow_negative_numbers = true)]
    pub utilization: f64,
    /// Transactions measured per layout.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(100..=100_000_000))]
    pub transactions: u64,
    /// Updates before measuring LFS with cleaning, in database sizes.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub rewrites: u32,
    /// The buffer pool, MiB of 4 KiB pages.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub buffer_pool_mib: u32,
    /// Host time per transaction, milliseconds (the paper's simulator has none).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub cpu_ms: f64,
    /// Independent simulations run at once, one per thread (the figures are the same).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
}

/// The resolved settings.
#[derive(Debug, Clone)]
pub struct HylogTable3Settings {
    run: RunSettings,
    params: HylogTable3Params,
    timing: DiskTiming,
    segment_bytes: u64,
    /// One run per row, in [`TpcbLayout::ALL`] order.
    specs: Vec<TpcbRunSpec>,
}

impl HylogTable3Settings {
    fn command_line(&self) -> String {
        let params = &self.params;
        format!(
            "proxima reproduce {NAME} --utilization {} --transactions {} --rewrites {} --buffer-pool-mib {} \
             --cpu-ms {} --jobs {} --model {} --seed {} --out {}",
            params.utilization,
            params.transactions,
            params.rewrites,
            params.buffer_pool_mib,
            params.cpu_ms,
            params.jobs,
            self.run.model,
            self.run.seed,
            self.run.out_dir.display()
        )
    }
}

/// What a run measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rows {
    /// One run per row of the table.
    pub runs: Vec<TpcbRun>,
    /// The database's pages.
    pub database_pages: u64,
    /// The drive's blocks.
    pub drive_blocks: u64,
}

/// The JSON headline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// Overwrite (FFS's row).
    pub overwrite_tps: f64,
    /// LFS with the cleaner off.
    pub lfs_no_cleaning_tps: f64,
    /// LFS cleaning at its steady state.
    pub lfs_cleaning_tps: f64,
    /// The largest `|ours − published| / published` of the three rows.
    pub largest_difference: f64,
    /// LFS with cleaning: the overall write cost `(user + cleaning read +
    /// cleaning written) / user` in blocks.
    pub lfs_cleaning_write_cost: f64,
    /// LFS with cleaning: the live share of the segments cleaned.
    pub lfs_cleaning_utilization: f64,
    /// The segment, bytes (Eq 6 for the drive).
    pub segment_bytes: u64,
    /// The rows with the host time per transaction that brings them nearest
    /// the published figures ([`fit_host_time`]).
    pub fitted: FittedHostTime,
}

/// The published figures are a real system's, host time included; the
/// simulation's are the drive's alone. One host time per transaction, added
/// to every row's measured time (a single user waits for each transaction's
/// I/O and computes between them, so the two add), is fitted to the three
/// published figures; how close all three come with it tests whether the
/// rows differ from the published ones by the layouts' I/O or by a constant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FittedHostTime {
    /// Host time per transaction, milliseconds, on top of `--cpu-ms`.
    pub host_ms: f64,
    /// Overwrite with it.
    pub overwrite_tps: f64,
    /// LFS without cleaning with it.
    pub lfs_no_cleaning_tps: f64,
    /// LFS with cleaning with it.
    pub lfs_cleaning_tps: f64,
    /// The largest `|fitted − published| / published`.
    pub largest_difference: f64,
}

/// Host times tried by the fit: 0 to 100 ms in steps of 0.01 ms.
const FIT_STEPS: u32 = 10_000;
const FIT_STEP_MS: f64 = 0.01;

/// The host time per transaction, added to each of `transaction_ms` (one per
/// row), that minimises the sum of the squared relative differences from
/// [`PUBLISHED_TPS`], and the rows with it.
pub fn fit_host_time(transaction_ms: [f64; 3]) -> FittedHostTime {
    let rows_with = |host_ms: f64| transaction_ms.map(|ms| 1000.0 / (ms + host_ms));
    let squared_error = |host_ms: f64| -> f64 {
        rows_with(host_ms)
            .iter()
            .zip(PUBLISHED_TPS)
            .map(|(&tps, published)| ((tps - published) / published).powi(2))
            .sum()
    };
    let host_ms = (0..=FIT_STEPS)
        .map(|step| f64::from(step) * FIT_STEP_MS)
        .min_by(|&a, &b| squared_error(a).total_cmp(&squared_error(b)))
        .expect("steps to try");
    let [overwrite_tps, lfs_no_cleaning_tps, lfs_cleaning_tps] = rows_with(host_ms);
    FittedHostTime {
        host_ms,
        overwrite_tps,
        lfs_no_cleaning_tps,
        lfs_cleaning_tps,
        largest_difference: largest_difference([overwrite_tps, lfs_no_cleaning_tps, lfs_cleaning_tps]),
    }
}

fn largest_difference(tps: [f64; 3]) -> f64 {
    tps.iter().zip(PUBLISHED_TPS).map(|(&ours, published)| (ours - published).abs() / published).fold(0.0, f64::max)
}

impl Experiment for HylogTable3 {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str =
        "HyLog paper: Table 3 — TPC-B on one drive, Overwrite and LFS without and with cleaning";
    const DEFAULT_MODEL: &'static str = DEFAULT_MODEL;
    type Params = HylogTable3Params;
    type Settings = HylogTable3Settings;
    type Rows = Rows;
    type Headline = Headline;

    fn settings(run: &RunSettings, params: &HylogTable3Params) -> Result<HylogTable3Settings, LabError> {
        if !(params.cpu_ms >= 0.0 && params.cpu_ms <= 1000.0) {
            let message = format!("--cpu-ms {} is not a time in [0, 1000] ms", params.cpu_ms);
            return Err(LabError::InvalidParameter { parameter: "cpu-ms", message });
        }
        let model = Arc::new(DiskModel::resolve(&run.model, &[]).map_err(|source| LabError::Model { source })?);
        let (timing, segment_bytes) = drive_timing_and_segment(&model, TIMING_REQUEST_COUNT, run.seed)?;
        let pool_frames = u32::try_from(u64::from(params.buffer_pool_mib) * (1 << 20) / BLOCK_SIZE_BYTES)
            .expect("at most 64 GiB of 4 KiB frames");
        let specs: Vec<TpcbRunSpec> = TpcbLayout::ALL
            .iter()
            .map(|&layout| TpcbRunSpec {
                model: Arc::clone(&model),
                layout,
                utilization: params.utilization,
                segment_blocks: (segment_bytes / BLOCK_SIZE_BYTES).max(1),
                pool_frames,
                transactions: params.transactions,
                rewrites: params.rewrites,
                cpu_ns: (params.cpu_ms * 1e6).round() as u64,
                seed: run.seed,
            })
            .collect();
        for spec in &specs {
            spec.check()?;
        }
        Ok(HylogTable3Settings { run: run.clone(), params: params.clone(), timing, segment_bytes, specs })
    }

    fn measure(settings: &HylogTable3Settings, progress: &mut dyn Progress) -> Result<Rows, LabError> {
        // The run with cleaning (the longest, for its warm-up) first, so that
        // it does not run alone at the end; the rows keep the paper's order.
        let tasks: Vec<Task<'_, TpcbRun>> = settings
            .specs
            .iter()
            .rev()
            .map(|spec| -> Task<'_, TpcbRun> { Box::new(move |progress| run_tpcb(spec, progress)) })
            .collect();
        let mut runs = run_all(usize::from(settings.params.jobs), tasks, progress)?;
        runs.reverse();
        let first = &settings.specs[0];
        Ok(Rows { runs, database_pages: first.database_pages(), drive_blocks: first.drive_blocks() })
    }

    fn render(settings: &HylogTable3Settings, rows: &Rows, cost: &WallCost) -> Rendered<Headline> {
        let headline = headline(settings, rows);
        let files =
            vec![("table3.csv", Artifact::Csv(table(rows))), ("table3.svg", Artifact::BarChart(chart(settings, rows)))];
        let work = SimulatedWork {
            updates: rows.runs.iter().map(|run| run.transactions + run.warmup_updates).sum(),
            disk_ios: rows.runs.iter().map(|run| run.disk_reads + run.disk_writes).sum(),
        };
        let summary = summary(settings, rows, &headline, &cost.render(&work));
        let report = report(settings, rows, &headline, &summary);
        Rendered { files, report, summary, headline }
    }

    fn describe(params: &HylogTable3Params) -> String {
        format!(", {} simulation(s) at once", params.jobs)
    }
}

fn headline(settings: &HylogTable3Settings, rows: &Rows) -> Headline {
    let tps: Vec<f64> = rows.runs.iter().map(TpcbRun::tps).collect();
    let cleaning = rows.runs[2].cleaning;
    let transaction_ms = [0, 1, 2].map(|row| rows.runs[row].transaction_ms());
    Headline {
        overwrite_tps: tps[0],
        lfs_no_cleaning_tps: tps[1],
        lfs_cleaning_tps: tps[2],
        largest_difference: largest_difference([tps[0], tps[1], tps[2]]),
        lfs_cleaning_write_cost: cleaning.write_cost,
        lfs_cleaning_utilization: cleaning.cleaning_utilization,
        segment_bytes: settings.segment_bytes,
        fitted: fit_host_time(transaction_ms),
    }
}

fn table(rows: &Rows) -> Table {
    let mut table = Table::new(&[
        "layout",
        "tps",
        "published_tps",
        "difference",
        "paper_simulated_tps",
        "transaction_ms",
        "page_reads",
        "page_writes",
        "disk_reads",
        "disk_writes",
        "blocks_per_disk_write",
        "disk_busy_share",
        "segments_cleaned",
        "cleaning_utilization",
        "write_cost",
    ]);
    for ((run, published), paper) in rows.runs.iter().zip(PUBLISHED_TPS).zip(PAPER_SIMULATED_TPS) {
        table.push_row(vec![
            run.layout.name().to_string(),
            format!("{:.2}", run.tps()),
            format!("{published:.1}"),
            format!("{:+.1} %", 100.0 * (run.tps() - published) / published),
            format!("{paper:.1}"),
            format!("{:.3}", run.transaction_ms()),
            run.page_reads.to_string(),
            run.page_writes.to_string(),
            run.disk_reads.to_string(),
            run.disk_writes.to_string(),
            format!("{:.2}", run.blocks_per_disk_write()),
            format!("{:.3}", run.disk_busy_ns as f64 / run.elapsed_ns.max(1) as f64),
            run.cleaning.segments_cleaned.to_string(),
            format!("{:.3}", run.cleaning.cleaning_utilization),
            format!("{:.3}", run.cleaning.write_cost),
        ]);
    }
    table
}

fn chart(settings: &HylogTable3Settings, rows: &Rows) -> GroupedBarChart {
    GroupedBarChart {
        title: format!("TPC-B on one {} at utilisation {}", settings.run.model, settings.params.utilization),
        x_label: "layout".into(),
        y_label: "transactions per second".into(),
        categories: rows.runs.iter().map(|run| run.layout.name().to_string()).collect(),
        series: vec![
            ("published (FFS, BSD-LFS)".into(), PUBLISHED_TPS.to_vec()),
            ("paper's simulator".into(), PAPER_SIMULATED_TPS.to_vec()),
            ("Proxima".into(), rows.runs.iter().map(TpcbRun::tps).collect()),
        ],
    }
}

fn summary(settings: &HylogTable3Settings, rows: &Rows, headline: &Headline, cost_line: &str) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{NAME} on {} (seed {}): database {} pages ({:.0} MB) at utilisation {}, segment {} KiB, {} MiB pool, \
         {} ms CPU per transaction",
        settings.run.model,
        settings.run.seed,
        rows.database_pages,
        rows.database_pages as f64 * BLOCK_SIZE_BYTES as f64 / 1e6,
        settings.params.utilization,
        settings.segment_bytes / 1024,
        settings.params.buffer_pool_mib,
        settings.params.cpu_ms
    );
    let _ = writeln!(
        text,
        "{:<16} {:>9} {:>10} {:>8} {:>10} {:>12}",
        "layout", "TPS", "published", "diff", "paper sim", "ms per txn"
    );
    for ((run, published), paper) in rows.runs.iter().zip(PUBLISHED_TPS).zip(PAPER_SIMULATED_TPS) {
        let _ = writeln!(
            text,
            "{:<16} {:>9.2} {:>10.1} {:>+7.1}% {:>10.1} {:>12.3}",
            run.layout.name(),
            run.tps(),
            published,
            100.0 * (run.tps() - published) / published,
            paper,
            run.transaction_ms()
        );
    }
    let _ = writeln!(
        text,
        "largest difference from the published figures {:.1} % (target ≤ {:.0} %: {}); LFS cleaning: u_c {:.3}, \
         write cost {:.3}",
        100.0 * headline.largest_difference,
        100.0 * TOLERANCE,
        verdict(headline.largest_difference <= TOLERANCE),
        headline.lfs_cleaning_utilization,
        headline.lfs_cleaning_write_cost
    );
    let fitted = &headline.fitted;
    let _ = writeln!(
        text,
        "with {:.2} ms more host time per transaction (fitted to the published figures): {:.1}, {:.1} and {:.1} TPS, \
         largest difference {:.1} % ({})",
        fitted.host_ms,
        fitted.overwrite_tps,
        fitted.lfs_no_cleaning_tps,
        fitted.lfs_cleaning_tps,
        100.0 * fitted.largest_difference,
        verdict(fitted.largest_difference <= TOLERANCE)
    );
    let _ = writeln!(text, "{cost_line}");
    text
}

fn report(settings: &HylogTable3Settings, rows: &Rows, headline: &Headline, summary: &str) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "# HyLog Table 3: TPC-B on Overwrite and LFS\n");
    let _ = writeln!(text, "```sh\n{}\n```\n", settings.command_line());
    let _ = writeln!(
        text,
        "One closed-loop user on one {} ({} blocks of 4 KiB). Each transaction reads a uniformly random page of \
         the {}-page database and modifies it, through a {} MiB write-back LRU buffer pool: nearly every \
         transaction writes back an earlier page and reads its own. The database is written serially at the \
         front of the drive first. Segment: Eq 6 for the drive's fitted positioning time {:.2} ms and bandwidth \
         {:.2} MB/s, {} KiB; the NV segment buffer holds one segment. LFS with cleaning is measured after {} \
         database sizes of updates, its cost-age cleaner starting below 10 clean segments.\n",
        settings.run.model,
        rows.drive_blocks,
        rows.database_pages,
        settings.params.buffer_pool_mib,
        settings.timing.positioning_ms,
        settings.timing.bandwidth_mb_per_s,
        settings.segment_bytes / 1024,
        settings.params.rewrites
    );
    let _ = writeln!(text, "## Summary (as printed)\n\n```text\n{summary}```\n");
    let _ = writeln!(text, "## Results\n\n{}", table(rows).to_markdown());
    let _ = writeln!(text, "![Table 3](table3.svg)\n");
    let _ = writeln!(
        text,
        "`published_tps`: FFS and BSD-LFS on the DSP 3105 (the paper's reference [21]); LFS with cleaning is \
         the 34.4 Matthews et al. argue for, not the 27.0 measured. `paper_simulated_tps`: the paper's simulator \
         on the DEC RZ26. `disk_busy_share`: the drive's busy time over the measured time.\n"
    );
    let _ = writeln!(
        text,
        "## Host time\n\nThe published figures are FFS and BSD-LFS running TPC-B on a workstation of 1995, its \
         processor's time per transaction included; the simulation has the drive's only (`--cpu-ms` adds a host \
         time). One user waits for each transaction, so a host time adds to every row's time per transaction. \
         The one host time that brings all three rows nearest the published figures (least squares of the \
         relative differences) is {:.2} ms; with it the rows are {:.1}, {:.1} and {:.1} TPS, at most {:.1} % \
         from the published ones. A fitted constant is not evidence of the absolute level; that one constant \
         serves all three rows is evidence of their ratios.",
        headline.fitted.host_ms,
        headline.fitted.overwrite_tps,
        headline.fitted.lfs_no_cleaning_tps,
        headline.fitted.lfs_cleaning_tps,
        100.0 * headline.fitted.largest_difference
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fitted_host_time_recovers_one_added_to_the_published_rows() {
        // Rows whose times are the published figures' less 7 ms each.
        let times = PUBLISHED_TPS.map(|tps| 1000.0 / tps - 7.0);
        let fitted = fit_host_time(times);
        assert!((fitted.host_ms - 7.0).abs() < 0.011, "{fitted:?}");
        assert!(fitted.largest_difference < 1e-3, "{fitted:?}");
        // Rows already slower than the published ones: no host time helps.
        let slow = PUBLISHED_TPS.map(|tps| 1000.0 / tps + 5.0);
        assert_eq!(fit_host_time(slow).host_ms, 0.0);
    }
}
