//! `reproduce proximal-srarw`: the proximal layout against the baselines on the
//! same array and workload (the paper's Sections 5.3 and 5.4): random-update
//! throughput, disk I/Os per revolution, serial-read bandwidth after aging
//! against fresh, and the cost per random IOPS with the paper's prices.
//!
//! Layouts, each on a fresh volume filled, read, aged and read again:
//! - `proximal`: a 1 % staging area, destaged with proximal placement;
//! - `in_place`: a frame array without flash (each update a RAID
//!   read-modify-write in place, at once) — the paper's "basic disk solution",
//!   against which it claims nearly 3× the random-write throughput;
//! - `in_place_cached`: a frame array with the same 1 % flash as its write cache
//!   (overwrites held there and written back in place, per extent, at destage);
//! - `write_anywhere`: no staging, greedy hole plugging.
//!
//! Writes `srarw.csv`, `srarw_throughput.svg`, `srarw_reads.svg` and `report.md`.
//! The JSON headline is `{"layouts": {"proximal": {"random_update_iops",
//! "ios_per_revolution", "aged_to_fresh", "dollars_per_iops"}, "in_place": {...},
//! "write_anywhere": {...}}}`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use proxima_engine::Layout;
use serde::{Deserialize, Serialize};

use crate::experiment::{Experiment, RunSettings};
use crate::progress::Progress;
use crate::report::cost::WallCost;
use crate::report::markdown::{Artifact, Rendered};
use crate::report::plot::GroupedBarChart;
use crate::report::table::Table;
use crate::rig::lab_volume::{AgingFigures, DATA_DISK_COUNT};
use crate::rig::measure::{ratio, BatchSummary};
use crate::rig::testbed::BLOCK_SIZE_BYTES;
use crate::seed000_proximal::layout::{report_header, LayoutParams, LayoutSettings, DEFAULT_MODEL, DEFINITIONS};
use crate::seed000_proximal::paper;
use crate::seed000_proximal::table3::{aged_reads_of, simulated_work, AgedReads, LayoutReads};
use crate::LabError;

/// The experiment's name on the command line.
pub const NAME: &str = "proximal-srarw";

/// The `proximal-srarw` experiment.
#[derive(Debug, Clone, Copy)]
pub struct ProximalSrarw;

/// The staging area (and the frame array's cache), percent of capacity.
pub const STAGING_PERCENT: f64 = 1.0;

/// One compared configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate {
    /// Its name in the rows and the report.
    pub(crate) key: &'static str,
    /// The layout.
    pub(crate) layout: Layout,
    /// Its staging area (or the frame array's cache), percent of capacity.
    pub(crate) staging_percent: f64,
    /// The proximal layout's copy-out of what snapshots read (`proximal-snapshots`).
    pub(crate) proximal_copy_out: bool,
}

/// The compared configurations, in the order of the report.
pub(crate) const CANDIDATES: [Candidate; 4] = [
    Candidate { key: "proximal", layout: Layout::Proximal, staging_percent: STAGING_PERCENT, proximal_copy_out: false },
    Candidate { key: "in_place", layout: Layout::InPlace, staging_percent: 0.0, proximal_copy_out: false },
    Candidate {
        key: "in_place_cached",
        layout: Layout::InPlace,
        staging_percent: STAGING_PERCENT,
        proximal_copy_out: false,
    },
    Candidate { key: "write_anywhere", layout: Layout::WriteAnywhere, staging_percent: 0.0, proximal_copy_out: false },
];

/// The keys the JSON headline carries (the cached frame array is in the report only).
const HEADLINE_KEYS: [&str; 3] = ["proximal", "in_place", "write_anywhere"];

/// A layout's headline figures.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct LayoutFigures {
    /// User updates per second of array busy time.
    pub random_update_iops: f64,
    /// Disk I/Os retired per revolution: once positioned, in destage batches; with
    /// the positioning, for layouts that write each update at once.
    pub ios_per_revolution: f64,
    /// Serial-read bandwidth after aging over fresh.
    pub aged_to_fresh: f64,
    /// Array price (five disks and the flash) over `random_update_iops`.
    pub dollars_per_iops: f64,
}

/// The JSON headline.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Headline {
    /// `proximal`, `in_place` and `write_anywhere` (the cached frame array is
    /// in the report only).
    pub layouts: BTreeMap<String, LayoutFigures>,
}

/// The measured rows: one run per candidate, in the order of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rows {
    /// `proximal`, `in_place`, `in_place_cached`, `write_anywhere`.
    pub runs: Vec<AgedReads>,
}

/// Everything measured for one candidate.
#[derive(Debug, Clone)]
struct Outcome {
    candidate: Candidate,
    figures: LayoutFigures,
    reads: LayoutReads,
    aging: AgingFigures,
    array_dollars: f64,
    flash_gb: f64,
}

impl Outcome {
    /// The per-disk figures: from the destage batches where there are any, else
    /// from every I/O of the aging.
    fn disk_figures(&self) -> &BatchSummary {
        if self.aging.batches.batch_count > 0 {
            &self.aging.batches
        } else {
            &self.aging.all_io
        }
    }

    /// Disk I/Os a drive completes per second of its service time (the paper's
    /// "random IOPS" per disk, from I/Os per revolution and the positioning).
    fn disk_iops_per_disk(&self) -> f64 {
        let disks = self.disk_figures();
        let ios: u64 = disks.disks.iter().map(|disk| disk.io_count).sum();
        let service: u64 = disks.disks.iter().map(|disk| disk.service_ns).sum();
        ratio(ios as f64 * 1e9, service as f64)
    }
}

impl Experiment for ProximalSrarw {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str =
        "proximal I/O paper, Sections 5.3-5.4: proximal vs in-place vs write-anywhere, cost per IOPS";
    const DEFAULT_MODEL: &'static str = DEFAULT_MODEL;
    type Params = LayoutParams;
    type Settings = LayoutSettings;
    type Rows = Rows;
    type Headline = Headline;

    fn settings(run: &RunSettings, params: &LayoutParams) -> Result<LayoutSettings, LabError> {
        LayoutSettings::new(run, params)
    }

    fn measure(settings: &LayoutSettings, progress: &mut dyn Progress) -> Result<Rows, LabError> {
        let specs =
            CANDIDATES.iter().map(|candidate| settings.run_spec(candidate.layout, candidate.staging_percent)).collect();
        Ok(Rows { runs: aged_reads_of(specs, settings.jobs, progress)? })
    }

    fn render(settings: &LayoutSettings, rows: &Rows, cost: &WallCost) -> Rendered<Headline> {
        let extent_count = rows.runs.first().map_or(0, |run| run.extent_count);
        let outcomes = outcomes(settings, &rows.runs);
        let (throughput, reads) = charts(&outcomes, settings);
        let files = vec![
            ("srarw.csv", Artifact::Csv(table(&outcomes))),
            ("srarw_throughput.svg", Artifact::BarChart(throughput)),
            ("srarw_reads.svg", Artifact::BarChart(reads)),
        ];
        let command = settings.command_line(NAME);
        let summary = render_summary(&outcomes, settings, &cost.render(&simulated_work(&rows.runs)));
        let report = render_report(&outcomes, settings, &command, extent_count, &summary);
        let layouts = outcomes
            .iter()
            .filter(|outcome| HEADLINE_KEYS.contains(&outcome.candidate.key))
            .map(|outcome| (outcome.candidate.key.to_string(), outcome.figures))
            .collect();
        Rendered { files, report, summary, headline: Headline { layouts } }
    }

    fn describe(params: &LayoutParams) -> String {
        params.describe()
    }
}

/// Every candidate's figures from its run.
fn outcomes(settings: &LayoutSettings, runs: &[AgedReads]) -> Vec<Outcome> {
    let full_size_array_bytes = settings.shape.model.sector_count()
        * u64::from(settings.shape.model.sector_size_bytes())
        * DATA_DISK_COUNT as u64;
    let mut outcomes = Vec::new();
    for (&candidate, AgedReads { reads, aging, .. }) in CANDIDATES.iter().zip(runs) {
        let flash_gb = full_size_array_bytes as f64 * candidate.staging_percent / 100.0 / 1e9;
        let array_dollars = paper::DISK_DOLLARS * (DATA_DISK_COUNT + 1) as f64 + flash_gb * paper::FLASH_DOLLARS_PER_GB;
        let revolution_ns = settings.revolution_ns();
        let ios_per_revolution = if aging.batches.batch_count > 0 {
            aging.batches.ios_per_revolution(revolution_ns)
        } else {
            aging.all_io.ios_per_revolution_with_positioning(revolution_ns)
        };
        let random_update_iops = aging.random_update_iops();
        let figures = LayoutFigures {
            random_update_iops,
            ios_per_revolution,
            aged_to_fresh: ratio(reads.aged.mb_s_per_disk(), reads.fresh.mb_s_per_disk()),
            dollars_per_iops: ratio(array_dollars, random_update_iops),
        };
        outcomes.push(Outcome { candidate, figures, reads: *reads, aging: aging.clone(), array_dollars, flash_gb });
    }
    outcomes
}

fn table(outcomes: &[Outcome]) -> Table {
    let mut table = Table::new(&[
        "layout",
        "staging_percent",
        "random_update_iops",
        "ios_per_revolution",
        "io_amplification",
        "destage_batches",
        "updates_per_batch",
        "disk_iops_per_disk",
        "fresh_mb_s_per_disk",
        "aged_mb_s_per_disk",
        "aged_to_fresh",
        "aged_runs_per_request",
        "flash_gb_full_size",
        "array_dollars",
        "dollars_per_iops",
    ]);
    for outcome in outcomes {
        let figures = &outcome.figures;
        let disks = outcome.disk_figures();
        table.push_row(vec![
            outcome.candidate.key.to_string(),
            format!("{}", outcome.candidate.staging_percent),
            format!("{:.1}", figures.random_update_iops),
            format!("{:.3}", figures.ios_per_revolution),
            format!("{:.3}", ratio(disks.disk_io_count() as f64, outcome.aging.update_count as f64)),
            outcome.aging.batches.batch_count.to_string(),
            format!("{:.2}", outcome.aging.batches.updates_per_batch()),
            format!("{:.1}", outcome.disk_iops_per_disk()),
            format!("{:.2}", outcome.reads.fresh.mb_s_per_disk()),
            format!("{:.2}", outcome.reads.aged.mb_s_per_disk()),
            format!("{:.3}", figures.aged_to_fresh),
            format!("{:.2}", outcome.reads.aged.runs_per_request()),
            format!("{:.1}", outcome.flash_gb),
            format!("{:.2}", outcome.array_dollars),
            format!("{:.3}", figures.dollars_per_iops),
        ]);
    }
    table
}

fn charts(outcomes: &[Outcome], settings: &LayoutSettings) -> (GroupedBarChart, GroupedBarChart) {
    let categories: Vec<String> = outcomes.iter().map(|outcome| outcome.candidate.key.to_string()).collect();
    let model = settings.shape.model.name();
    let throughput = GroupedBarChart {
        title: format!("Random 4 KiB updates per second of array time ({model})"),
        x_label: "layout".into(),
        y_label: "user updates per second".into(),
        categories: categories.clone(),
        series: vec![(
            "random-update throughput".into(),
            outcomes.iter().map(|outcome| outcome.figures.random_update_iops).collect(),
        )],
    };
    let reads = GroupedBarChart {
        title: format!("Serial reads of whole extents, fresh and aged ({model})"),
        x_label: "layout".into(),
        y_label: "MB/s per data disk".into(),
        categories,
        series: vec![
            ("fresh".into(), outcomes.iter().map(|outcome| outcome.reads.fresh.mb_s_per_disk()).collect()),
            ("aged".into(), outcomes.iter().map(|outcome| outcome.reads.aged.mb_s_per_disk()).collect()),
        ],
    };
    (throughput, reads)
}

fn render_summary(outcomes: &[Outcome], settings: &LayoutSettings, cost_line: &str) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{NAME} on {} (scale {}, seed {}): the same array and workload under each layout",
        settings.shape.model.name(),
        settings.scale,
        settings.seed
    );
    let _ = writeln!(
        text,
        "{:<18} {:>8} {:>16} {:>14} {:>12} {:>12} {:>10}",
        "layout", "staging", "updates/s", "I/Os/rev", "aged/fresh", "$/IOPS", "× in-place"
    );
    let in_place = outcomes
        .iter()
        .find(|outcome| outcome.candidate.key == "in_place")
        .map_or(0.0, |outcome| outcome.figures.random_update_iops);
    for outcome in outcomes {
        let figures = &outcome.figures;
        let _ = writeln!(
            text,
            "{:<18} {:>7}% {:>16.1} {:>14.2} {:>12.3} {:>12.3} {:>10.2}",
            outcome.candidate.key,
            outcome.candidate.staging_percent,
            figures.random_update_iops,
            figures.ios_per_revolution,
            figures.aged_to_fresh,
            figures.dollars_per_iops,
            ratio(figures.random_update_iops, in_place),
        );
    }
    let _ = writeln!(
        text,
        "paper (1 % staging): {} random IOPS per disk, ${} per IOPS; aged/fresh 0.97; write-anywhere as little \
         as {}",
        paper::IOPS_PER_DISK,
        paper::DOLLARS_PER_IOPS,
        paper::WRITE_ANYWHERE_AGED_TO_FRESH_MIN
    );
    let _ = writeln!(text, "{cost_line}");
    text
}

fn render_report(
    outcomes: &[Outcome],
    settings: &LayoutSettings,
    command: &str,
    extent_count: u64,
    summary: &str,
) -> String {
    let mut text = report_header("Proximal I/O against the baselines (SRARW)", settings, command, extent_count);
    let _ = writeln!(
        text,
        "Each layout on a fresh volume of the same array: filled to 89 % with 16 MiB extents written \
         serially, every extent read (fresh), 2000 random 4 KiB updates per extent, every extent read again \
         (aged); the updates and read orders are the same for every layout (same seed). `proximal` stages \
         small writes in a {STAGING_PERCENT} % flash staging area; `in_place` is a frame array without \
         flash, the paper's \"basic disk solution\" (each update a RAID read-modify-write in place); \
         `in_place_cached` a frame array using the same flash as proximal as its write cache (overwrites \
         written back in place, per extent, at destage); `write_anywhere` writes every update at once into \
         the first free blocks after a rolling cursor. `× in-place` is the throughput over `in_place`'s.\n"
    );
    let _ = writeln!(text, "## Summary (as printed)\n\n```text\n{summary}```\n");
    let _ = writeln!(text, "## Results\n\n{}", table(outcomes).to_markdown());
    let _ = writeln!(text, "![Throughput](srarw_throughput.svg)\n\n![Reads](srarw_reads.svg)\n");
    let _ = writeln!(text, "## Cost per random IOPS\n");
    let _ = writeln!(
        text,
        "Prices from the paper: ${} per disk, ${} per GB of flash. The flash is priced at full size (scale 1): \
         the staging area's share of the 4 data disks' capacity ({} %). `dollars_per_iops` is the array's \
         price over its random-update throughput (user updates per second). The paper's own figure, $0.48, is \
         per disk: $130 plus 10 GB of flash over {} \"random IOPS\", the disk I/Os one drive retires per second \
         at 5.3 per revolution plus an average seek. The same per-disk reckoning from our batches \
         (`disk_iops_per_disk`: disk I/Os a drive completes per second of service time, first seek included):\n",
        paper::DISK_DOLLARS,
        paper::FLASH_DOLLARS_PER_GB,
        STAGING_PERCENT,
        paper::IOPS_PER_DISK
    );
    let mut per_disk = Table::new(&["layout", "disk I/Os per second per disk", "$ per disk", "$ per disk IOPS"]);
    for outcome in outcomes {
        let disk_dollars = outcome.array_dollars / (DATA_DISK_COUNT + 1) as f64;
        let iops = outcome.disk_iops_per_disk();
        per_disk.push_row(vec![
            outcome.candidate.key.to_string(),
            format!("{iops:.1}"),
            format!("{disk_dollars:.2}"),
            format!("{:.3}", ratio(disk_dollars, iops)),
        ]);
    }
    let _ = writeln!(text, "{}", per_disk.to_markdown());
    let _ = writeln!(
        text,
        "A block is {BLOCK_SIZE_BYTES} bytes; MB are 10^6 bytes, GB 10^9 bytes.\n\n## Definitions\n\n{DEFINITIONS}"
    );
    text
}
