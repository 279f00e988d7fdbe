//! `reproduce proximal-table2`: the proximal I/O paper's Table 2 — random 4 KiB
//! updates to a 4+1 RAID-4 filled to 89 % with 16 MiB extents, destaged from
//! staging areas of 1, 2, 5 and 10 % of the capacity, measured per destage batch.
//!
//! Writes `table2.csv` (one row per staging area, every column), `destages.csv`
//! (one row per destage), three SVG plots against the staging area, and
//! `report.md` with the paper's rows beside ours. The JSON headline is
//! `{"rows": [{"staging_percent", "updates_per_batch", "disk_ios_per_batch",
//! "io_amplification", "ios_per_revolution", "batch_response_ms"}, ...]}`.

use std::fmt::Write as _;

use proxima_engine::Layout;
use serde::{Deserialize, Serialize};

use crate::experiment::{Experiment, RunSettings};
use crate::progress::Progress;
use crate::report::cost::{SimulatedWork, WallCost};
use crate::report::markdown::{Artifact, Rendered};
use crate::report::plot::{LineChart, Series};
use crate::report::table::Table;
use crate::rig::lab_volume::{AgingFigures, LabVolume, DATA_DISK_COUNT};
use crate::rig::measure::{BatchSummary, RoleFigures};
use crate::rig::parallel::{run_all, Task};
use crate::seed000_proximal::layout::{report_header, LayoutParams, LayoutSettings, DEFAULT_MODEL, DEFINITIONS};
use crate::seed000_proximal::paper;
use crate::LabError;

/// The experiment's name on the command line.
pub const NAME: &str = "proximal-table2";

/// The `proximal-table2` experiment.
#[derive(Debug, Clone, Copy)]
pub struct ProximalTable2;

/// The staging areas of the paper's rows, in percent of the array's capacity.
pub const STAGING_PERCENTS: [f64; 4] = [1.0, 2.0, 5.0, 10.0];

/// One row of the JSON headline.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HeadlineRow {
    /// Staging area, percent of capacity.
    pub staging_percent: f64,
    /// Mean user updates per batch.
    pub updates_per_batch: f64,
    /// Mean disk I/Os per batch over the five drives.
    pub disk_ios_per_batch: f64,
    /// Disk I/Os per user update.
    pub io_amplification: f64,
    /// Disk I/Os retired per revolution once positioned.
    pub ios_per_revolution: f64,
    /// Mean batch response time, ms.
    pub batch_response_ms: f64,
}

/// The JSON headline.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Headline {
    /// One row per staging area, in the order of [`STAGING_PERCENTS`].
    pub rows: Vec<HeadlineRow>,
}

/// What one staging area's aging measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagingAging {
    /// Staging area, percent of capacity.
    pub staging_percent: f64,
    /// Extents in the volume.
    pub extent_count: u64,
    /// What the aging did on the disks.
    pub aging: AgingFigures,
}

/// The measured rows: one aging per staging area.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rows {
    /// In the order of [`STAGING_PERCENTS`].
    pub agings: Vec<StagingAging>,
}

/// Everything measured for one staging area.
#[derive(Debug, Clone)]
pub struct StagingRow {
    /// The headline figures.
    pub headline: HeadlineRow,
    /// Batches measured.
    pub batch_count: u64,
    /// Destages triggered by a full staging area.
    pub destage_count: u64,
    /// Data disks, pooled.
    pub data: RoleFigures,
    /// The parity disk.
    pub parity: RoleFigures,
    /// User updates per second of array busy time.
    pub random_update_iops: f64,
    /// The per-destage sums, in order.
    pub destages: Vec<BatchSummary>,
}

impl StagingRow {
    /// The row of an aging with this staging area.
    pub fn from_aging(staging_percent: f64, aging: &AgingFigures, revolution_ns: u64) -> StagingRow {
        let batches = &aging.batches;
        StagingRow {
            headline: HeadlineRow {
                staging_percent,
                updates_per_batch: batches.updates_per_batch(),
                disk_ios_per_batch: batches.disk_ios_per_batch(),
                io_amplification: batches.io_amplification(),
                ios_per_revolution: batches.ios_per_revolution(revolution_ns),
                batch_response_ms: batches.batch_response_ms(),
            },
            batch_count: batches.batch_count,
            destage_count: u64::try_from(aging.destages.len()).expect("destages fit in u64"),
            data: batches.role(0..DATA_DISK_COUNT),
            parity: batches.role(DATA_DISK_COUNT..DATA_DISK_COUNT + 1),
            random_update_iops: aging.random_update_iops(),
            destages: aging.destages.clone(),
        }
    }
}

impl Experiment for ProximalTable2 {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str =
        "proximal I/O paper, Table 2: random updates destaged from 1-10 % staging areas on RAID-4";
    const DEFAULT_MODEL: &'static str = DEFAULT_MODEL;
    type Params = LayoutParams;
    type Settings = LayoutSettings;
    type Rows = Rows;
    type Headline = Headline;

    fn settings(run: &RunSettings, params: &LayoutParams) -> Result<LayoutSettings, LabError> {
        LayoutSettings::new(run, params)
    }

    fn measure(settings: &LayoutSettings, progress: &mut dyn Progress) -> Result<Rows, LabError> {
        let tasks = STAGING_PERCENTS
            .iter()
            .map(|&staging_percent| -> Task<'_, StagingAging> {
                let spec = settings.run_spec(Layout::Proximal, staging_percent);
                Box::new(move |progress: &mut dyn Progress| {
                    let mut volume = LabVolume::create(&spec, progress)?;
                    let aging = volume.age(progress)?;
                    Ok(StagingAging { staging_percent, extent_count: volume.extent_count(), aging })
                })
            })
            .collect();
        Ok(Rows { agings: run_all(settings.jobs, tasks, progress)? })
    }

    fn render(settings: &LayoutSettings, measured: &Rows, cost: &WallCost) -> Rendered<Headline> {
        let extent_count = measured.agings.first().map_or(0, |run| run.extent_count);
        let mut simulated = SimulatedWork::default();
        let mut rows = Vec::new();
        for run in &measured.agings {
            simulated.updates += run.aging.update_count;
            simulated.disk_ios += run.aging.all_io.disk_io_count();
            rows.push(StagingRow::from_aging(run.staging_percent, &run.aging, settings.revolution_ns()));
        }
        let mut files =
            vec![("table2.csv", Artifact::Csv(table(&rows))), ("destages.csv", Artifact::Csv(destage_table(&rows)))];
        files.extend(charts(&rows, settings).into_iter().map(|(file, chart)| (file, Artifact::LineChart(chart))));
        let command = settings.command_line(NAME);
        let summary = render_summary(&rows, settings, &cost.render(&simulated));
        let report = render_report(&rows, settings, &command, extent_count, &summary);
        let headline = Headline { rows: rows.iter().map(|row| row.headline.clone()).collect() };
        Rendered { files, report, summary, headline }
    }

    fn describe(params: &LayoutParams) -> String {
        params.describe()
    }
}

fn table(rows: &[StagingRow]) -> Table {
    let mut table = Table::new(&[
        "staging_percent",
        "destages",
        "batches",
        "updates_per_batch",
        "disk_ios_per_batch",
        "io_amplification",
        "ios_per_revolution",
        "batch_response_ms",
        "data_ios_per_batch",
        "data_service_ms",
        "data_utilisation",
        "parity_ios_per_batch",
        "parity_service_ms",
        "parity_utilisation",
        "random_update_iops",
    ]);
    for row in rows {
        let figures = &row.headline;
        table.push_row(vec![
            format!("{}", figures.staging_percent),
            row.destage_count.to_string(),
            row.batch_count.to_string(),
            format!("{:.2}", figures.updates_per_batch),
            format!("{:.2}", figures.disk_ios_per_batch),
            format!("{:.3}", figures.io_amplification),
            format!("{:.3}", figures.ios_per_revolution),
            format!("{:.3}", figures.batch_response_ms),
            format!("{:.2}", row.data.ios_per_batch),
            format!("{:.3}", row.data.service_ms_per_io),
            format!("{:.3}", row.data.utilisation),
            format!("{:.2}", row.parity.ios_per_batch),
            format!("{:.3}", row.parity.service_ms_per_io),
            format!("{:.3}", row.parity.utilisation),
            format!("{:.1}", row.random_update_iops),
        ]);
    }
    table
}

fn destage_table(rows: &[StagingRow]) -> Table {
    let mut table = Table::new(&[
        "staging_percent",
        "destage",
        "batches",
        "updates_per_batch",
        "io_amplification",
        "batch_response_ms",
    ]);
    for row in rows {
        for (index, destage) in row.destages.iter().enumerate() {
            table.push_row(vec![
                format!("{}", row.headline.staging_percent),
                (index + 1).to_string(),
                destage.batch_count.to_string(),
                format!("{:.2}", destage.updates_per_batch()),
                format!("{:.3}", destage.io_amplification()),
                format!("{:.3}", destage.batch_response_ms()),
            ]);
        }
    }
    table
}

/// The paper's (staging %, value) points for a figure.
fn paper_points(at_1: f64, at_10: f64) -> Series {
    Series { name: "paper (Table 2)".into(), points: vec![(1.0, at_1), (10.0, at_10)] }
}

fn charts(rows: &[StagingRow], settings: &LayoutSettings) -> Vec<(&'static str, LineChart)> {
    let model = settings.shape.model.name().to_string();
    // One chart per figure the paper gives at 1 % and 10 % staging: ours against the paper's.
    let chart = |title: &str, y_label: &str, value: fn(&HeadlineRow) -> f64, paper_at_1: f64, paper_at_10: f64| {
        let ours = Series {
            name: format!("ours ({model})"),
            points: rows.iter().map(|row| (row.headline.staging_percent, value(&row.headline))).collect(),
        };
        LineChart {
            title: format!("{title} ({model})"),
            x_label: "staging area (% of capacity)".into(),
            y_label: y_label.into(),
            series: vec![ours, paper_points(paper_at_1, paper_at_10)],
        }
    };
    vec![
        (
            "table2_ios_per_revolution.svg",
            chart(
                "Disk I/Os per revolution",
                "I/Os per revolution",
                |row| row.ios_per_revolution,
                paper::IOS_PER_REVOLUTION_1,
                paper::IOS_PER_REVOLUTION_10,
            ),
        ),
        (
            "table2_updates_per_batch.svg",
            chart(
                "User updates per destage batch",
                "updates per batch",
                |row| row.updates_per_batch,
                paper::UPDATES_PER_BATCH_1,
                paper::UPDATES_PER_BATCH_10,
            ),
        ),
        (
            "table2_io_amplification.svg",
            chart(
                "I/O amplification",
                "disk I/Os per user update",
                |row| row.io_amplification,
                paper::IO_AMPLIFICATION_1,
                paper::IO_AMPLIFICATION_10,
            ),
        ),
    ]
}

/// The paper's value at this staging area, or a dash.
fn paper_cell(staging_percent: f64, at_1: f64, at_10: f64) -> String {
    if staging_percent == 1.0 {
        format!("{at_1}")
    } else if staging_percent == 10.0 {
        format!("{at_10}")
    } else {
        "—".into()
    }
}

fn render_summary(rows: &[StagingRow], settings: &LayoutSettings, cost_line: &str) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{NAME} on {} (scale {}, seed {}): per destage batch, ours (paper)",
        settings.shape.model.name(),
        settings.scale,
        settings.seed
    );
    let _ = writeln!(
        text,
        "{:>9} {:>18} {:>12} {:>16} {:>18} {:>12}",
        "staging", "updates/batch", "I/Os/batch", "amplification", "I/Os/revolution", "response ms"
    );
    for row in rows {
        let figures = &row.headline;
        let percent = figures.staging_percent;
        let with_paper = |ours: String, at_1: f64, at_10: f64| match paper_cell(percent, at_1, at_10).as_str() {
            "—" => ours,
            paper => format!("{ours} ({paper})"),
        };
        let _ = writeln!(
            text,
            "{:>8}% {:>18} {:>12.1} {:>16} {:>18} {:>12.1}",
            percent,
            with_paper(
                format!("{:.1}", figures.updates_per_batch),
                paper::UPDATES_PER_BATCH_1,
                paper::UPDATES_PER_BATCH_10
            ),
            figures.disk_ios_per_batch,
            with_paper(
                format!("{:.2}", figures.io_amplification),
                paper::IO_AMPLIFICATION_1,
                paper::IO_AMPLIFICATION_10
            ),
            with_paper(
                format!("{:.2}", figures.ios_per_revolution),
                paper::IOS_PER_REVOLUTION_1,
                paper::IOS_PER_REVOLUTION_10
            ),
            figures.batch_response_ms,
        );
    }
    let _ = writeln!(text, "{cost_line}");
    text
}

fn render_report(
    rows: &[StagingRow],
    settings: &LayoutSettings,
    command: &str,
    extent_count: u64,
    summary: &str,
) -> String {
    let mut text = report_header("Table 2: random updates destaged with proximal I/O", settings, command, extent_count);
    let _ = writeln!(
        text,
        "Workload: the array filled to 89 % with 16 MiB extents written serially, then on average 2000 random \
         4 KiB updates per extent (uniform over extents and blocks), staged in a flash staging area of 1, 2, 5 \
         or 10 % of the array's capacity (one fresh volume each) and destaged whenever the area is full. Every \
         batch of those destages is measured; what is left staged at the end is destaged unmeasured.\n"
    );
    let _ = writeln!(text, "## Summary (as printed)\n\n```text\n{summary}```\n");
    let mut compact = Table::new(&[
        "staging",
        "updates / batch (paper)",
        "disk I/Os / batch",
        "I/O amplification (paper)",
        "I/Os per revolution (paper)",
        "response ms",
        "data disk: I/Os, ms/I/O, util.",
        "parity disk: I/Os, ms/I/O, util.",
    ]);
    for row in rows {
        let figures = &row.headline;
        let percent = figures.staging_percent;
        compact.push_row(vec![
            format!("{percent} %"),
            format!(
                "{:.1} ({})",
                figures.updates_per_batch,
                paper_cell(percent, paper::UPDATES_PER_BATCH_1, paper::UPDATES_PER_BATCH_10)
            ),
            format!("{:.1}", figures.disk_ios_per_batch),
            format!(
                "{:.2} ({})",
                figures.io_amplification,
                paper_cell(percent, paper::IO_AMPLIFICATION_1, paper::IO_AMPLIFICATION_10)
            ),
            format!(
                "{:.2} ({})",
                figures.ios_per_revolution,
                paper_cell(percent, paper::IOS_PER_REVOLUTION_1, paper::IOS_PER_REVOLUTION_10)
            ),
            format!("{:.1}", figures.batch_response_ms),
            format!("{:.1}, {:.2}, {:.2}", row.data.ios_per_batch, row.data.service_ms_per_io, row.data.utilisation),
            format!(
                "{:.1}, {:.2}, {:.2}",
                row.parity.ios_per_batch, row.parity.service_ms_per_io, row.parity.utilisation
            ),
        ]);
    }
    let _ = writeln!(text, "## Table 2\n\n{}", compact.to_markdown());
    let _ = writeln!(
        text,
        "The paper's text gives the 1 % and 10 % rows; its 2 % and 5 % rows are not in our copy (—). Full \
         figures in `table2.csv`, per destage in `destages.csv`.\n"
    );
    let _ = writeln!(text, "![I/Os per revolution](table2_ios_per_revolution.svg)\n");
    let _ = writeln!(text, "![Updates per batch](table2_updates_per_batch.svg)\n");
    let _ = writeln!(text, "![I/O amplification](table2_io_amplification.svg)\n");
    let _ = writeln!(text, "## Definitions\n\n{DEFINITIONS}");
    text
}
