//! `reproduce proximal-table3`: the proximal I/O paper's Table 3 — serial reads
//! of every extent, in random order and in requests of up to 974 blocks, on the
//! layout aged by the random updates of Table 2 (1 % staging area) and on the
//! fresh layout of the same volume before aging; plus the same for the
//! write-anywhere layout (no staging, greedy hole plugging), the paper's
//! Section 5.3 comparison.
//!
//! Writes `table3.csv`, `table3.svg` and `report.md`. The JSON headline is
//! `{"proximal": {"aged_mb_s_per_disk", "fresh_mb_s_per_disk", "aged_to_fresh"},
//! "write_anywhere": {same keys}}`.

use std::fmt::Write as _;

use proxima_engine::Layout;
use serde::{Deserialize, Serialize};

use crate::experiment::{Experiment, RunSettings};
use crate::progress::Progress;
use crate::report::cost::{SimulatedWork, WallCost};
use crate::report::markdown::{Artifact, Rendered};
use crate::report::plot::GroupedBarChart;
use crate::report::table::Table;
use crate::rig::lab_volume::{AgingFigures, BetweenUpdates, LabVolume, NothingBetweenUpdates, ReadFigures, RunSpec};
use crate::rig::measure::ratio;
use crate::rig::parallel::{run_all, Task};
use crate::seed000_proximal::layout::{report_header, LayoutParams, LayoutSettings, DEFAULT_MODEL, DEFINITIONS};
use crate::seed000_proximal::paper;
use crate::LabError;

/// The experiment's name on the command line.
pub const NAME: &str = "proximal-table3";

/// The `proximal-table3` experiment.
#[derive(Debug, Clone, Copy)]
pub struct ProximalTable3;

/// The staging area of the aged proximal layout, percent of capacity.
pub const AGING_STAGING_PERCENT: f64 = 1.0;

/// Serial-read bandwidth of one layout, fresh and aged.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct ReadComparison {
    /// MB/s per data disk after aging.
    pub aged_mb_s_per_disk: f64,
    /// MB/s per data disk on the fresh layout.
    pub fresh_mb_s_per_disk: f64,
    /// Aged over fresh.
    pub aged_to_fresh: f64,
}

impl ReadComparison {
    /// The comparison of two read passes.
    pub fn new(fresh: &ReadFigures, aged: &ReadFigures) -> ReadComparison {
        let fresh_mb_s_per_disk = fresh.mb_s_per_disk();
        let aged_mb_s_per_disk = aged.mb_s_per_disk();
        ReadComparison {
            aged_mb_s_per_disk,
            fresh_mb_s_per_disk,
            aged_to_fresh: ratio(aged_mb_s_per_disk, fresh_mb_s_per_disk),
        }
    }
}

/// The JSON headline.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Headline {
    /// The proximal layout, aged with a 1 % staging area.
    pub proximal: ReadComparison,
    /// The write-anywhere layout.
    pub write_anywhere: ReadComparison,
}

/// A layout's fresh and aged read passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutReads {
    /// The layout.
    #[serde(with = "crate::rig::layout_by_name")]
    pub layout: Layout,
    /// Before aging.
    pub fresh: ReadFigures,
    /// After aging.
    pub aged: ReadFigures,
}

/// One layout's run: its reads, its aging and its number of extents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgedReads {
    /// The fresh and aged read passes.
    pub reads: LayoutReads,
    /// What the aging did.
    pub aging: AgingFigures,
    /// Extents in the volume.
    pub extent_count: u64,
    /// The staging area, in blocks.
    #[serde(default)]
    pub staging_blocks: u64,
}

impl AgedReads {
    /// Adds what this run simulated to `simulated`.
    pub fn add_to(&self, simulated: &mut SimulatedWork) {
        simulated.updates += self.aging.update_count;
        simulated.disk_ios +=
            self.aging.all_io.disk_io_count() + self.reads.fresh.member_io_count + self.reads.aged.member_io_count;
    }
}

/// Fills a volume, reads it, ages it and reads it again.
pub fn fresh_and_aged_reads(spec: &RunSpec, progress: &mut dyn Progress) -> Result<AgedReads, LabError> {
    let mut volume = LabVolume::create(spec, progress)?;
    read_age_and_read(&mut volume, &mut NothingBetweenUpdates, progress)
}

/// Reads a filled volume, ages it with `between` doing its part before each
/// update, and reads it again.
pub(crate) fn read_age_and_read(
    volume: &mut LabVolume,
    between: &mut dyn BetweenUpdates,
    progress: &mut dyn Progress,
) -> Result<AgedReads, LabError> {
    let fresh = volume.read_every_extent(progress)?;
    let aging = volume.age_with(between, progress)?;
    let aged = volume.read_every_extent(progress)?;
    let reads = LayoutReads { layout: volume.spec().layout, fresh, aged };
    Ok(AgedReads { reads, aging, extent_count: volume.extent_count(), staging_blocks: volume.staging_blocks() })
}

/// The runs of `specs`, `jobs` at once, in order.
pub fn aged_reads_of(
    specs: Vec<RunSpec>,
    jobs: usize,
    progress: &mut dyn Progress,
) -> Result<Vec<AgedReads>, LabError> {
    let tasks = specs
        .into_iter()
        .map(|spec| -> Task<'_, AgedReads> {
            Box::new(move |progress: &mut dyn Progress| fresh_and_aged_reads(&spec, progress))
        })
        .collect();
    run_all(jobs, tasks, progress)
}

/// What the runs of `runs` simulated.
pub fn simulated_work<'a>(runs: impl IntoIterator<Item = &'a AgedReads>) -> SimulatedWork {
    let mut simulated = SimulatedWork::default();
    runs.into_iter().for_each(|run| run.add_to(&mut simulated));
    simulated
}

/// The measured rows: the proximal run, then the write-anywhere run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rows {
    /// The proximal layout, aged with a [`AGING_STAGING_PERCENT`] % staging area.
    pub proximal: AgedReads,
    /// The write-anywhere layout.
    pub write_anywhere: AgedReads,
}

impl Experiment for ProximalTable3 {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str =
        "proximal I/O paper, Table 3: serial reads after random writes, proximal and write-anywhere";
    const DEFAULT_MODEL: &'static str = DEFAULT_MODEL;
    type Params = LayoutParams;
    type Settings = LayoutSettings;
    type Rows = Rows;
    type Headline = Headline;

    fn settings(run: &RunSettings, params: &LayoutParams) -> Result<LayoutSettings, LabError> {
        LayoutSettings::new(run, params)
    }

    fn measure(settings: &LayoutSettings, progress: &mut dyn Progress) -> Result<Rows, LabError> {
        let specs = vec![
            settings.run_spec(Layout::Proximal, AGING_STAGING_PERCENT),
            settings.run_spec(Layout::WriteAnywhere, 0.0),
        ];
        let mut runs = aged_reads_of(specs, settings.jobs, progress)?.into_iter();
        let (Some(proximal), Some(write_anywhere)) = (runs.next(), runs.next()) else {
            unreachable!("two specs give two runs");
        };
        Ok(Rows { proximal, write_anywhere })
    }

    fn render(settings: &LayoutSettings, rows: &Rows, cost: &WallCost) -> Rendered<Headline> {
        let (proximal, write_anywhere) = (rows.proximal.reads, rows.write_anywhere.reads);
        let extent_count = rows.proximal.extent_count;
        let layouts = [proximal, write_anywhere];
        let files = vec![
            ("table3.csv", Artifact::Csv(table(&layouts))),
            ("table3.svg", Artifact::BarChart(chart(&layouts, settings))),
        ];
        let headline = Headline {
            proximal: ReadComparison::new(&proximal.fresh, &proximal.aged),
            write_anywhere: ReadComparison::new(&write_anywhere.fresh, &write_anywhere.aged),
        };
        let command = settings.command_line(NAME);
        let simulated = simulated_work([&rows.proximal, &rows.write_anywhere]);
        let summary = render_summary(&layouts, settings, &cost.render(&simulated));
        let report = render_report(&layouts, settings, &command, extent_count, &summary);
        Rendered { files, report, summary, headline }
    }

    fn describe(params: &LayoutParams) -> String {
        params.describe()
    }
}

fn table(layouts: &[LayoutReads]) -> Table {
    let mut table = Table::new(&[
        "layout",
        "state",
        "requests",
        "blocks_per_request",
        "runs_per_request",
        "disks_per_request",
        "ios_per_disk",
        "response_ms",
        "mb_s_per_disk",
    ]);
    for reads in layouts {
        for (state, figures) in [("fresh", &reads.fresh), ("aged", &reads.aged)] {
            table.push_row(vec![
                reads.layout.name().to_string(),
                state.to_string(),
                figures.request_count.to_string(),
                format!("{:.1}", figures.blocks_per_request()),
                format!("{:.2}", figures.runs_per_request()),
                format!("{:.2}", figures.disks_per_request()),
                format!("{:.2}", figures.ios_per_disk()),
                format!("{:.3}", figures.response_ms()),
                format!("{:.2}", figures.mb_s_per_disk()),
            ]);
        }
    }
    table
}

fn chart(layouts: &[LayoutReads], settings: &LayoutSettings) -> GroupedBarChart {
    GroupedBarChart {
        title: format!("Serial reads of whole extents ({})", settings.shape.model.name()),
        x_label: "layout".into(),
        y_label: "MB/s per data disk".into(),
        categories: layouts.iter().map(|reads| reads.layout.name().to_string()).collect(),
        series: vec![
            ("fresh".into(), layouts.iter().map(|reads| reads.fresh.mb_s_per_disk()).collect()),
            ("aged".into(), layouts.iter().map(|reads| reads.aged.mb_s_per_disk()).collect()),
        ],
    }
}

fn render_summary(layouts: &[LayoutReads], settings: &LayoutSettings, cost_line: &str) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{NAME} on {} (scale {}, seed {}): serial reads of every extent, ours (paper)",
        settings.shape.model.name(),
        settings.scale,
        settings.seed
    );
    let _ = writeln!(
        text,
        "{:<16} {:>6} {:>14} {:>14} {:>12} {:>14} {:>16}",
        "layout", "state", "blocks/req", "runs/req", "I/Os/disk", "response ms", "MB/s per disk"
    );
    for reads in layouts {
        let is_proximal = reads.layout == Layout::Proximal;
        for (state, figures, response, bandwidth) in [
            ("fresh", &reads.fresh, paper::FRESH_RESPONSE_MS, paper::FRESH_MB_S_PER_DISK),
            ("aged", &reads.aged, paper::AGED_RESPONSE_MS, paper::AGED_MB_S_PER_DISK),
        ] {
            let with = |ours: String, theirs: f64| if is_proximal { format!("{ours} ({theirs})") } else { ours };
            let aged_only = |ours: String, theirs: f64| {
                if is_proximal && state == "aged" {
                    format!("{ours} ({theirs})")
                } else {
                    ours
                }
            };
            let _ = writeln!(
                text,
                "{:<16} {:>6} {:>14} {:>14} {:>12} {:>14} {:>16}",
                reads.layout.name(),
                state,
                with(format!("{:.1}", figures.blocks_per_request()), paper::READ_BLOCKS_PER_REQUEST),
                aged_only(format!("{:.1}", figures.runs_per_request()), paper::READ_RUNS_PER_REQUEST),
                aged_only(format!("{:.1}", figures.ios_per_disk()), paper::READ_IOS_PER_DISK),
                with(format!("{:.2}", figures.response_ms()), response),
                with(format!("{:.1}", figures.mb_s_per_disk()), bandwidth),
            );
        }
        let comparison = ReadComparison::new(&reads.fresh, &reads.aged);
        let paper_ratio = if is_proximal {
            format!(" (paper {:.2})", paper::AGED_MB_S_PER_DISK / paper::FRESH_MB_S_PER_DISK)
        } else {
            format!(" (paper: as little as {:.2})", paper::WRITE_ANYWHERE_AGED_TO_FRESH_MIN)
        };
        let _ = writeln!(text, "{:<16} aged/fresh {:.3}{paper_ratio}", reads.layout.name(), comparison.aged_to_fresh);
    }
    let _ = writeln!(text, "{cost_line}");
    text
}

fn render_report(
    layouts: &[LayoutReads],
    settings: &LayoutSettings,
    command: &str,
    extent_count: u64,
    summary: &str,
) -> String {
    let mut text = report_header("Table 3: serial reads after random writes", settings, command, extent_count);
    let _ = writeln!(
        text,
        "Workload: the array filled to 89 % with 16 MiB extents written serially; every extent read in random \
         order in requests of up to 974 blocks (974, 974, 974, 974, 200: 819.2 on average, as in the paper), \
         one request at a time, the heads moved to random positions before each extent. Then 2000 random 4 KiB \
         updates per extent — proximal: staged in a {AGING_STAGING_PERCENT} % staging area and destaged \
         whenever it fills; write-anywhere: no staging, each update written at once into the first free \
         blocks after a rolling cursor (greedy hole plugging) — and every extent read again the same way. \
         *Fresh* is the first read pass, *aged* the second.\n"
    );
    let _ = writeln!(text, "## Summary (as printed)\n\n```text\n{summary}```\n");
    let _ = writeln!(text, "## Table 3\n\n{}", table(layouts).to_markdown());
    let _ = writeln!(
        text,
        "Paper (proximal, aged): {} blocks per request, {} runs per request, {} I/Os per disk, {} ms, {} MB/s \
         per disk; fresh: {} ms, {} MB/s per disk: aged within 3 % of fresh. Write-anywhere degrades to as \
         little as {} % of the best case.\n",
        paper::READ_BLOCKS_PER_REQUEST,
        paper::READ_RUNS_PER_REQUEST,
        paper::READ_IOS_PER_DISK,
        paper::AGED_RESPONSE_MS,
        paper::AGED_MB_S_PER_DISK,
        paper::FRESH_RESPONSE_MS,
        paper::FRESH_MB_S_PER_DISK,
        paper::WRITE_ANYWHERE_AGED_TO_FRESH_MIN * 100.0
    );
    let _ = writeln!(text, "![Serial reads](table3.svg)\n");
    let _ = writeln!(
        text,
        "*Runs per request* are the physical runs on the data device the request's blocks map to; *I/Os per \
         disk* the member requests of each drive the request involved (after the RAID layer split the runs \
         per member and coalesced adjacent blocks), averaged over the drives involved.\n"
    );
    let _ = writeln!(text, "## Definitions\n\n{DEFINITIONS}");
    text
}
