//! `reproduce proximal-disk`: the disk-level results of the proximal I/O paper
//! (Section 2 and Appendix A) on a simulated drive.
//!
//! - Figure 1: per-request cost in OPs against strand size 1…16 for the
//!   track-approximate (1024-LBN span), proximal (100,000-LBN span),
//!   semi-sequential and fully random placements, strands issued to an idle drive
//!   with every request outstanding.
//! - Figure 2: strands of 8 (proximal) with 1…8 requests outstanding, issued to an
//!   idle drive and to a busy one (queued behind a random read, the "non-empty
//!   queue" the paper found the scheduler needs).
//! - The issue order: ascending LBN against a random permutation.
//! - Appendix A: the distribution of extra revolutions for strands of 2…16, simulated
//!   and from the birthday models (the paper's formula with B = 6, 7 and the literal
//!   `SPT / H`; the effective bins and the sweep model derived from the drive's clash
//!   windows, see [`crate::seed000_proximal::birthday`]), with the total variation distance of each.
//!   No parameter is fitted to the simulation.
//!
//! Each figure is written as CSV and SVG; `report.md` puts the paper's values
//! beside ours with the seed and the command.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use proxima_disk::{DiskModel, DiskOp};
use serde::{Deserialize, Serialize};

use crate::experiment::{Experiment, RunSettings};
use crate::progress::Progress;
use crate::report::cost::WallCost;
use crate::report::markdown::{Artifact, Rendered};
use crate::report::plot::{GroupedBarChart, LineChart, Series};
use crate::report::table::Table;
use crate::seed000_proximal::birthday::{
    bin_count_for_track_switch, clash_windows_for_span, distribution_mean, distribution_mode, effective_bin_count,
    extra_revolution_distribution, mean_switching_ns_for_span, sweep_extra_revolution_distributions,
    total_variation_distance,
};
use crate::seed000_proximal::closed_loop::measure_op_ms;
use crate::seed000_proximal::paper;
use crate::seed000_proximal::placement::{
    block_sectors, IssueOrder, Placement, PROXIMAL_SPAN_LBN, TRACK_APPROXIMATE_SPAN_LBN,
};
use crate::seed000_proximal::strands::{run_strands, StrandConfig, StrandResult, StrandStart};
use crate::LabError;

/// The experiment's name on the command line.
pub const NAME: &str = "proximal-disk";

/// Largest strand of Figure 1.
const FIGURE_1_STRAND_SIZE_MAX: u32 = 16;
/// Strand size of Figure 2, the issue-order comparison, and the paper's headline.
const HEADLINE_STRAND_SIZE: u32 = 8;
/// Queue depths of the issue-order comparison.
const ORDER_QUEUE_DEPTHS: [u32; 4] = [1, 2, 4, 8];
/// Strand sizes whose extra revolutions are compared with the birthday models.
const APPENDIX_STRAND_SIZES: std::ops::RangeInclusive<u32> = 2..=16;
/// Span positions over the disk whose clash windows the derived models average.
pub const SPAN_POSITIONS: u32 = 8;
/// Grid of the sweep model's convolution (cells per revolution).
pub const SWEEP_CELLS_PER_REVOLUTION: u32 = 512;

/// The drive model when none is given: the paper's Cheetah 15K.5.
pub const DEFAULT_MODEL: &str = "cheetah15k5";

/// Strands per point in a default run (a couple of minutes at most in release).
pub const DEFAULT_STRAND_COUNT: u32 = 1000;

/// The `proximal-disk` experiment.
#[derive(Debug, Clone, Copy)]
pub struct ProximalDisk;

/// The flags of `proximal-disk`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct DiskParams {
    /// Strands simulated per point of a figure.
    #[arg(long, default_value_t = DEFAULT_STRAND_COUNT)]
    pub count: u32,
}

impl Default for DiskParams {
    fn default() -> DiskParams {
        DiskParams { count: DEFAULT_STRAND_COUNT }
    }
}

/// The settings of a `proximal-disk` run.
#[derive(Debug, Clone)]
pub struct DiskSettings {
    /// The drive.
    pub model: Arc<DiskModel>,
    /// The model as given on the command line.
    pub model_name: String,
    /// Seed of every simulation.
    pub seed: u64,
    /// Strands simulated per point of a figure.
    pub strand_count: u32,
    /// Where the files go.
    pub out_dir: PathBuf,
}

/// Everything `proximal-disk` measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rows {
    /// One OP: the mean random 4 KiB read at queue depth 1, ms.
    pub op_ms: f64,
    /// Figure 1.
    pub figure_1: FigureOne,
    /// Figure 2.
    pub figure_2: FigureTwo,
    /// The issue order.
    pub order: IssueOrderEffect,
    /// Appendix A.
    pub appendix: AppendixA,
}

impl Experiment for ProximalDisk {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str =
        "proximal I/O paper, Section 2 and Appendix A: Figures 1-2, issue order, birthday model";
    const DEFAULT_MODEL: &'static str = DEFAULT_MODEL;
    type Params = DiskParams;
    type Settings = DiskSettings;
    type Rows = Rows;
    type Headline = Headline;

    fn settings(run: &RunSettings, params: &DiskParams) -> Result<DiskSettings, LabError> {
        let model = DiskModel::resolve(&run.model, &[]).map_err(|source| LabError::Model { source })?;
        if params.count == 0 {
            return Err(LabError::InvalidParameter {
                parameter: "count",
                message: "simulate at least one strand".into(),
            });
        }
        Ok(DiskSettings {
            model: Arc::new(model),
            model_name: run.model.clone(),
            seed: run.seed,
            strand_count: params.count,
            out_dir: run.out_dir.clone(),
        })
    }

    fn measure(settings: &DiskSettings, progress: &mut dyn Progress) -> Result<Rows, LabError> {
        progress.start_phase("one OP (random 4 KiB reads at queue depth 1)", 1);
        let op_ms = measure_op_ms(&settings.model, settings.seed)?;
        progress.advance(1);
        let runner = Runner { model: &settings.model, op_ms, seed: settings.seed, strand_count: settings.strand_count };
        Ok(Rows {
            op_ms,
            figure_1: figure_1(&runner, progress)?,
            figure_2: figure_2(&runner, progress)?,
            order: issue_order(&runner, progress)?,
            appendix: appendix_a(&runner, progress)?,
        })
    }

    fn render(settings: &DiskSettings, rows: &Rows, _cost: &WallCost) -> Rendered<Headline> {
        let model = &settings.model;
        let tables = Tables::new(rows);
        let headline = Headline::gather(settings, rows);
        let report = render_report(settings, &headline, rows, &tables);
        let summary = render_summary(&headline);
        let Tables { figure_1, figure_2, order, appendix, appendix_distance, appendix_distribution } = tables;
        let files = vec![
            ("figure1.csv", Artifact::Csv(figure_1)),
            ("figure1.svg", Artifact::LineChart(figure_1_chart(model, &rows.figure_1))),
            ("figure2.csv", Artifact::Csv(figure_2)),
            ("figure2.svg", Artifact::LineChart(figure_2_chart(model, &rows.figure_2))),
            ("issue_order.csv", Artifact::Csv(order)),
            ("issue_order.svg", Artifact::BarChart(issue_order_chart(model, &rows.order))),
            ("appendix_a.csv", Artifact::Csv(appendix)),
            ("appendix_a_total_variation.csv", Artifact::Csv(appendix_distance)),
            ("appendix_a_distribution.csv", Artifact::Csv(appendix_distribution)),
            ("appendix_a.svg", Artifact::BarChart(appendix_chart(model, &rows.appendix))),
        ];
        Rendered { files, report, summary, headline }
    }
}

/// The tables of the figures, written as CSV and quoted in the report.
struct Tables {
    figure_1: Table,
    figure_2: Table,
    order: Table,
    appendix: Table,
    appendix_distance: Table,
    appendix_distribution: Table,
}

impl Tables {
    fn new(rows: &Rows) -> Tables {
        let (appendix, appendix_distance, appendix_distribution) = appendix_tables(&rows.appendix.rows);
        Tables {
            figure_1: figure_1_table(&rows.figure_1),
            figure_2: figure_2_table(&rows.figure_2),
            order: issue_order_table(&rows.order),
            appendix,
            appendix_distance,
            appendix_distribution,
        }
    }
}

/// Shared settings of every strand run in this experiment.
struct Runner<'a> {
    model: &'a Arc<DiskModel>,
    op_ms: f64,
    seed: u64,
    strand_count: u32,
}

impl Runner<'_> {
    fn strands(
        &self,
        placement: Placement,
        strand_size: u32,
        queue_depth: u32,
        order: IssueOrder,
        start: StrandStart,
        progress: &mut dyn Progress,
    ) -> Result<StrandResult, LabError> {
        let config = StrandConfig {
            placement,
            strand_size,
            strand_count: self.strand_count,
            op: DiskOp::Read,
            queue_depth,
            order,
            start,
            seed: self.seed,
        };
        run_strands(self.model, &config, self.op_ms, progress)
    }
}

/// The four placements of Figure 1, in the paper's order.
fn figure_1_placements() -> [Placement; 4] {
    [
        Placement::Span { span_lbn: TRACK_APPROXIMATE_SPAN_LBN },
        Placement::Span { span_lbn: PROXIMAL_SPAN_LBN },
        Placement::SemiSequential,
        Placement::Random,
    ]
}

/// Figure 1: strands of every placement and size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FigureOne {
    /// `results[p][k - 1]`: placement `p` of Figure 1 at strand size `k`.
    pub results: Vec<Vec<StrandResult>>,
}

impl FigureOne {
    fn cost_at(&self, placement_index: usize, strand_size: u32) -> f64 {
        let size_index = usize::try_from(strand_size - 1).expect("a strand size fits in usize");
        self.results[placement_index][size_index].per_request_op
    }
}

fn figure_1(runner: &Runner<'_>, progress: &mut dyn Progress) -> Result<FigureOne, LabError> {
    let placements = figure_1_placements();
    let total = placements.len() as u64 * u64::from(FIGURE_1_STRAND_SIZE_MAX) * u64::from(runner.strand_count);
    progress.start_phase("Figure 1 (placements × strand sizes)", total);
    let mut results = Vec::new();
    for placement in placements {
        let mut row = Vec::new();
        for strand_size in 1..=FIGURE_1_STRAND_SIZE_MAX {
            let result = runner.strands(
                placement,
                strand_size,
                strand_size,
                IssueOrder::Ascending,
                StrandStart::Idle,
                progress,
            )?;
            row.push(result);
        }
        results.push(row);
    }
    Ok(FigureOne { results })
}

fn figure_1_table(figure: &FigureOne) -> Table {
    let mut table = Table::new(&[
        "placement",
        "strand_size",
        "strand_ms",
        "per_request_ms",
        "per_request_op",
        "extra_revolutions_mean",
    ]);
    for (placement, results) in figure_1_placements().into_iter().zip(&figure.results) {
        for result in results {
            table.push_row(vec![
                placement.label(),
                result.strand_size.to_string(),
                format!("{:.4}", result.strand_ms),
                format!("{:.4}", result.per_request_ms),
                format!("{:.4}", result.per_request_op),
                format!("{:.4}", result.extra_revolutions_mean),
            ]);
        }
    }
    table
}

fn figure_1_chart(model: &DiskModel, figure: &FigureOne) -> LineChart {
    let series = figure_1_placements()
        .into_iter()
        .zip(&figure.results)
        .map(|(placement, results)| {
            let points =
                results.iter().enumerate().map(|(index, result)| ((index + 1) as f64, result.per_request_op)).collect();
            Series { name: placement.label(), points }
        })
        .collect();
    LineChart {
        title: format!("Figure 1: per-request cost of a strand ({})", model.name()),
        x_label: "requests per strand (all outstanding)".into(),
        y_label: "per-request cost (OP)".into(),
        series,
    }
}

/// Figure 2: strands of 8 at queue depths 1…8.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FigureTwo {
    /// At queue depths 1…8, idle drive.
    pub idle: Vec<StrandResult>,
    /// At queue depths 1…8, busy drive.
    pub busy: Vec<StrandResult>,
}

impl FigureTwo {
    fn reduction_percent(results: &[StrandResult]) -> f64 {
        100.0 * (1.0 - results[results.len() - 1].per_request_ms / results[0].per_request_ms)
    }
}

fn figure_2(runner: &Runner<'_>, progress: &mut dyn Progress) -> Result<FigureTwo, LabError> {
    let total = 2 * u64::from(HEADLINE_STRAND_SIZE) * u64::from(runner.strand_count);
    progress.start_phase("Figure 2 (queue depth 1…8)", total);
    let mut idle = Vec::new();
    let mut busy = Vec::new();
    for start in [StrandStart::Idle, StrandStart::Busy] {
        for queue_depth in 1..=HEADLINE_STRAND_SIZE {
            let placement = Placement::Span { span_lbn: PROXIMAL_SPAN_LBN };
            let result =
                runner.strands(placement, HEADLINE_STRAND_SIZE, queue_depth, IssueOrder::Ascending, start, progress)?;
            match start {
                StrandStart::Idle => idle.push(result),
                StrandStart::Busy => busy.push(result),
            }
        }
    }
    Ok(FigureTwo { idle, busy })
}

fn figure_2_table(figure: &FigureTwo) -> Table {
    let mut table = Table::new(&["start", "queue_depth", "strand_ms", "per_request_ms", "per_request_op"]);
    for (start, results) in [(StrandStart::Idle, &figure.idle), (StrandStart::Busy, &figure.busy)] {
        for (index, result) in results.iter().enumerate() {
            table.push_row(vec![
                start.label().to_string(),
                (index + 1).to_string(),
                format!("{:.4}", result.strand_ms),
                format!("{:.4}", result.per_request_ms),
                format!("{:.4}", result.per_request_op),
            ]);
        }
    }
    table
}

fn figure_2_chart(model: &DiskModel, figure: &FigureTwo) -> LineChart {
    let to_points = |results: &[StrandResult]| {
        results.iter().enumerate().map(|(index, result)| ((index + 1) as f64, result.per_request_ms)).collect()
    };
    LineChart {
        title: format!("Figure 2: strands of 8 within 100,000 LBNs ({})", model.name()),
        x_label: "requests outstanding at the drive".into(),
        y_label: "per-request time (ms)".into(),
        series: vec![
            Series { name: "issued to an idle drive".into(), points: to_points(&figure.idle) },
            Series { name: "issued to a busy drive".into(), points: to_points(&figure.busy) },
        ],
    }
}

/// The issue order: ascending LBN against a random order, busy drive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IssueOrderEffect {
    /// `(queue depth, ascending per-request OP, random per-request OP)`.
    pub rows: Vec<(u32, f64, f64)>,
}

fn issue_order(runner: &Runner<'_>, progress: &mut dyn Progress) -> Result<IssueOrderEffect, LabError> {
    let total = 2 * ORDER_QUEUE_DEPTHS.len() as u64 * u64::from(runner.strand_count);
    progress.start_phase("issue order (ascending vs random)", total);
    let mut rows = Vec::new();
    let placement = Placement::Span { span_lbn: PROXIMAL_SPAN_LBN };
    for queue_depth in ORDER_QUEUE_DEPTHS {
        let mut cost = |order| -> Result<f64, LabError> {
            let result =
                runner.strands(placement, HEADLINE_STRAND_SIZE, queue_depth, order, StrandStart::Busy, progress)?;
            Ok(result.per_request_op)
        };
        let ascending = cost(IssueOrder::Ascending)?;
        let random = cost(IssueOrder::Random)?;
        rows.push((queue_depth, ascending, random));
    }
    Ok(IssueOrderEffect { rows })
}

fn issue_order_table(order: &IssueOrderEffect) -> Table {
    let mut table = Table::new(&["queue_depth", "ascending_per_request_op", "random_per_request_op"]);
    for (queue_depth, ascending, random) in &order.rows {
        table.push_row(vec![queue_depth.to_string(), format!("{ascending:.4}"), format!("{random:.4}")]);
    }
    table
}

fn issue_order_chart(model: &DiskModel, order: &IssueOrderEffect) -> GroupedBarChart {
    let rows = &order.rows;
    GroupedBarChart {
        title: format!("Issue order: strands of 8 within 100,000 LBNs ({})", model.name()),
        x_label: "requests outstanding at the drive".into(),
        y_label: "per-request cost (OP)".into(),
        categories: rows.iter().map(|(queue_depth, _, _)| queue_depth.to_string()).collect(),
        series: vec![
            ("ascending LBN".into(), rows.iter().map(|row| row.1).collect()),
            ("random order".into(), rows.iter().map(|row| row.2).collect()),
        ],
    }
}

/// The models of Appendix A set beside the simulation, in column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AppendixModel {
    /// The paper's formula with `B = 6` bins.
    PaperSixBins,
    /// The paper's formula with `B = 7` bins (its "H ≈ 7" read as the bin count).
    PaperSevenBins,
    /// The paper's formula with the literal `B = SPT / H = T_rev / t_seek(1 cylinder)`.
    GeometryBins,
    /// The paper's formula with the derived effective bins `B = 1 / (2 E[w])`.
    EffectiveBins,
    /// The sweep model over the derived clash-window distribution.
    Sweep,
}

impl AppendixModel {
    const ALL: [AppendixModel; 5] = [
        AppendixModel::PaperSixBins,
        AppendixModel::PaperSevenBins,
        AppendixModel::GeometryBins,
        AppendixModel::EffectiveBins,
        AppendixModel::Sweep,
    ];

    /// The model's suffix in CSV columns and JSON keys.
    fn key(self) -> &'static str {
        match self {
            AppendixModel::PaperSixBins => "paper_b6",
            AppendixModel::PaperSevenBins => "paper_b7",
            AppendixModel::GeometryBins => "geometry_bins",
            AppendixModel::EffectiveBins => "effective_bins",
            AppendixModel::Sweep => "sweep",
        }
    }

    /// A human label with the model's parameters.
    fn label(self, geometry_bins: f64, effective_bins: f64) -> String {
        match self {
            AppendixModel::PaperSixBins => "paper, B = 6".into(),
            AppendixModel::PaperSevenBins => "paper, B = 7".into(),
            AppendixModel::GeometryBins => format!("paper, B = SPT/H = {geometry_bins:.2}"),
            AppendixModel::EffectiveBins => format!("paper, effective B = {effective_bins:.2}"),
            AppendixModel::Sweep => "sweep model".into(),
        }
    }
}

/// One strand size of Appendix A: the simulated distribution of extra
/// revolutions and each model's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppendixRow {
    /// Requests per strand.
    pub strand_size: u32,
    /// Fraction of simulated strands with `e` extra revolutions, `e = 0, 1, …`.
    pub simulated: Vec<f64>,
    /// One distribution per model, in the order of the CSV columns.
    pub models: Vec<Vec<f64>>,
}

impl AppendixRow {
    fn model(&self, which: AppendixModel) -> &[f64] {
        let index = AppendixModel::ALL.iter().position(|model| *model == which).expect("every model has a column");
        &self.models[index]
    }

    fn distance(&self, which: AppendixModel) -> f64 {
        total_variation_distance(&self.simulated, self.model(which))
    }
}

/// Appendix A: extra revolutions, simulated and modelled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppendixA {
    /// `B = T_rev / t_seek(1 cylinder)`, the paper's `SPT / H` read literally.
    pub geometry_bins: f64,
    /// `B = 1 / (2 E[w])` from the derived clash windows.
    pub effective_bins: f64,
    /// `E[w]`, the mean clash window, in milliseconds.
    pub mean_window_ms: f64,
    /// The mean switching time between two requests of the span, in milliseconds.
    pub mean_switch_ms: f64,
    /// One row per strand size.
    pub rows: Vec<AppendixRow>,
}

impl AppendixA {
    fn row(&self, strand_size: u32) -> Option<&AppendixRow> {
        self.rows.iter().find(|row| row.strand_size == strand_size)
    }
}

fn appendix_a(runner: &Runner<'_>, progress: &mut dyn Progress) -> Result<AppendixA, LabError> {
    let model = runner.model;
    let geometry_bins = bin_count_for_track_switch(model.revolution_ns(), model.seek_ns(1, DiskOp::Read).max(1));
    let windows = clash_windows_for_span(model, PROXIMAL_SPAN_LBN, block_sectors(model), SPAN_POSITIONS, DiskOp::Read);
    let effective_bins = effective_bin_count(&windows);
    let strand_size_max = *APPENDIX_STRAND_SIZES.end();
    let sweep = sweep_extra_revolution_distributions(&windows, strand_size_max, SWEEP_CELLS_PER_REVOLUTION);
    let revolution_ms = model.revolution_ns() as f64 / 1e6;
    let mean_window_ms = revolution_ms / (2.0 * effective_bins);
    let mean_switch_ms = mean_switching_ns_for_span(model, PROXIMAL_SPAN_LBN, SPAN_POSITIONS, DiskOp::Read) / 1e6;
    let total: u64 = APPENDIX_STRAND_SIZES.map(|size| u64::from(size) * u64::from(runner.strand_count)).sum();
    progress.start_phase("Appendix A (extra revolutions)", total);
    let mut rows = Vec::new();
    for strand_size in APPENDIX_STRAND_SIZES {
        let placement = Placement::Span { span_lbn: PROXIMAL_SPAN_LBN };
        let result =
            runner.strands(placement, strand_size, strand_size, IssueOrder::Ascending, StrandStart::Idle, progress)?;
        let models = AppendixModel::ALL
            .iter()
            .map(|which| match which {
                AppendixModel::PaperSixBins => extra_revolution_distribution(strand_size, 6.0),
                AppendixModel::PaperSevenBins => extra_revolution_distribution(strand_size, 7.0),
                AppendixModel::GeometryBins => extra_revolution_distribution(strand_size, geometry_bins),
                AppendixModel::EffectiveBins => extra_revolution_distribution(strand_size, effective_bins.max(1.0)),
                AppendixModel::Sweep => {
                    sweep[usize::try_from(strand_size - 1).expect("a strand size fits in usize")].clone()
                }
            })
            .collect();
        rows.push(AppendixRow { strand_size, simulated: result.extra_revolutions_distribution, models });
    }
    Ok(AppendixA { geometry_bins, effective_bins, mean_window_ms, mean_switch_ms, rows })
}

/// `appendix_a.csv` (per strand size: no extra revolution, mode and mean for the
/// simulation and every model), `appendix_a_total_variation.csv` and
/// `appendix_a_distribution.csv`.
fn appendix_tables(rows: &[AppendixRow]) -> (Table, Table, Table) {
    let mut summary_columns = vec!["strand_size".to_string()];
    for statistic in ["p_no_extra", "mode", "mean"] {
        summary_columns.push(format!("{statistic}_simulated"));
        summary_columns.extend(AppendixModel::ALL.iter().map(|which| format!("{statistic}_{}", which.key())));
    }
    let mut distance_columns = vec!["strand_size".to_string()];
    distance_columns.extend(AppendixModel::ALL.iter().map(|which| format!("total_variation_{}", which.key())));
    let mut distribution_columns = vec!["strand_size".to_string(), "extra_revolutions".into(), "simulated".into()];
    distribution_columns.extend(AppendixModel::ALL.iter().map(|which| which.key().to_string()));
    let table_of = |columns: &[String]| Table::new(&columns.iter().map(String::as_str).collect::<Vec<_>>());
    let mut summary = table_of(&summary_columns);
    let mut distance = table_of(&distance_columns);
    let mut distribution = table_of(&distribution_columns);
    let first = |values: &[f64]| values.first().copied().unwrap_or(0.0);
    for row in rows {
        let all: Vec<&[f64]> =
            std::iter::once(row.simulated.as_slice()).chain(row.models.iter().map(Vec::as_slice)).collect();
        let mut cells = vec![row.strand_size.to_string()];
        cells.extend(all.iter().map(|values| format!("{:.4}", first(values))));
        cells.extend(all.iter().map(|values| distribution_mode(values).to_string()));
        cells.extend(all.iter().map(|values| format!("{:.3}", distribution_mean(values))));
        summary.push_row(cells);
        let mut cells = vec![row.strand_size.to_string()];
        cells.extend(AppendixModel::ALL.iter().map(|which| format!("{:.4}", row.distance(*which))));
        distance.push_row(cells);
        let length = all.iter().map(|values| values.len()).max().unwrap_or(0);
        for extra in 0..length {
            let mut cells = vec![row.strand_size.to_string(), extra.to_string()];
            cells.extend(all.iter().map(|values| format!("{:.4}", values.get(extra).copied().unwrap_or(0.0))));
            distribution.push_row(cells);
        }
    }
    (summary, distance, distribution)
}

/// The bar chart of the strand of 8: simulated beside the paper's model with the
/// literal geometric bins and the two derived models.
fn appendix_chart(model: &DiskModel, appendix: &AppendixA) -> GroupedBarChart {
    let AppendixA { rows, geometry_bins, effective_bins, .. } = appendix;
    let (geometry_bins, effective_bins) = (*geometry_bins, *effective_bins);
    let row = rows.iter().find(|row| row.strand_size == HEADLINE_STRAND_SIZE).unwrap_or(&rows[0]);
    let shown = [AppendixModel::GeometryBins, AppendixModel::EffectiveBins, AppendixModel::Sweep];
    let length = row.simulated.len().max(row.model(AppendixModel::GeometryBins).len()).min(8);
    let take =
        |distribution: &[f64]| (0..length).map(|extra| distribution.get(extra).copied().unwrap_or(0.0)).collect();
    let mut series = vec![("simulated".to_string(), take(&row.simulated))];
    series.extend(shown.iter().map(|which| (which.label(geometry_bins, effective_bins), take(row.model(*which)))));
    GroupedBarChart {
        title: format!("Appendix A: extra revolutions, strand of {} ({})", row.strand_size, model.name()),
        x_label: "extra revolutions".into(),
        y_label: "probability".into(),
        categories: (0..length).map(|extra| extra.to_string()).collect(),
        series,
    }
}

/// The figures printed as the JSON line and quoted in the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs, reason = "each field is the figure its name says; the report defines them")]
pub struct Headline {
    pub experiment: String,
    pub model: String,
    pub seed: u64,
    pub strands_per_point: u32,
    pub out_dir: String,
    pub op_ms: f64,
    pub track_approximate_8_op: f64,
    pub proximal_8_op: f64,
    pub semi_sequential_8_op: f64,
    pub random_8_op: f64,
    pub queue_depth_reduction_percent_busy: f64,
    pub queue_depth_reduction_percent_idle: f64,
    pub ascending_8_op: f64,
    pub random_order_8_op: f64,
    pub ascending_qd1_op: f64,
    pub random_order_qd1_op: f64,
    pub birthday_bins_geometry: f64,
    pub birthday_bins_effective: f64,
    pub mean_switch_ms: f64,
    pub mean_clash_window_ms: f64,
    pub no_extra_revolution_d6_paper_b6: f64,
    pub no_extra_revolution_d6_paper_b7: f64,
    pub no_extra_revolution_d6_geometry_bins: f64,
    pub no_extra_revolution_d6_effective_bins: f64,
    pub no_extra_revolution_d6_sweep: f64,
    pub no_extra_revolution_d6_simulated: f64,
    pub most_likely_extra_revolutions_d8_paper_b7: usize,
    pub most_likely_extra_revolutions_d8_geometry_bins: usize,
    pub most_likely_extra_revolutions_d8_effective_bins: usize,
    pub most_likely_extra_revolutions_d8_sweep: usize,
    pub most_likely_extra_revolutions_d8_simulated: usize,
    pub total_variation_d6_geometry_bins: f64,
    pub total_variation_d6_effective_bins: f64,
    pub total_variation_d6_sweep: f64,
    pub total_variation_d8_geometry_bins: f64,
    pub total_variation_d8_effective_bins: f64,
    pub total_variation_d8_sweep: f64,
    pub total_variation_max_sweep: f64,
}

impl Headline {
    fn gather(settings: &DiskSettings, rows: &Rows) -> Headline {
        let Rows { op_ms, figure_1, figure_2, order, appendix } = rows;
        let op_ms = *op_ms;
        let empty = AppendixRow { strand_size: 0, simulated: vec![], models: vec![vec![]; AppendixModel::ALL.len()] };
        let d6 = appendix.row(6).unwrap_or(&empty);
        let d8 = appendix.row(HEADLINE_STRAND_SIZE).unwrap_or(&empty);
        let first = |distribution: &[f64]| distribution.first().copied().unwrap_or(0.0);
        let order_at =
            |queue_depth: u32| order.rows.iter().find(|row| row.0 == queue_depth).copied().unwrap_or((0, 0.0, 0.0));
        Headline {
            experiment: NAME.to_string(),
            model: settings.model.name().to_string(),
            seed: settings.seed,
            strands_per_point: settings.strand_count,
            out_dir: settings.out_dir.display().to_string(),
            op_ms,
            track_approximate_8_op: figure_1.cost_at(0, HEADLINE_STRAND_SIZE),
            proximal_8_op: figure_1.cost_at(1, HEADLINE_STRAND_SIZE),
            semi_sequential_8_op: figure_1.cost_at(2, HEADLINE_STRAND_SIZE),
            random_8_op: figure_1.cost_at(3, HEADLINE_STRAND_SIZE),
            queue_depth_reduction_percent_busy: FigureTwo::reduction_percent(&figure_2.busy),
            queue_depth_reduction_percent_idle: FigureTwo::reduction_percent(&figure_2.idle),
            ascending_8_op: order_at(HEADLINE_STRAND_SIZE).1,
            random_order_8_op: order_at(HEADLINE_STRAND_SIZE).2,
            ascending_qd1_op: order_at(1).1,
            random_order_qd1_op: order_at(1).2,
            birthday_bins_geometry: appendix.geometry_bins,
            birthday_bins_effective: appendix.effective_bins,
            mean_switch_ms: appendix.mean_switch_ms,
            mean_clash_window_ms: appendix.mean_window_ms,
            no_extra_revolution_d6_paper_b6: first(d6.model(AppendixModel::PaperSixBins)),
            no_extra_revolution_d6_paper_b7: first(d6.model(AppendixModel::PaperSevenBins)),
            no_extra_revolution_d6_geometry_bins: first(d6.model(AppendixModel::GeometryBins)),
            no_extra_revolution_d6_effective_bins: first(d6.model(AppendixModel::EffectiveBins)),
            no_extra_revolution_d6_sweep: first(d6.model(AppendixModel::Sweep)),
            no_extra_revolution_d6_simulated: first(&d6.simulated),
            most_likely_extra_revolutions_d8_paper_b7: distribution_mode(d8.model(AppendixModel::PaperSevenBins)),
            most_likely_extra_revolutions_d8_geometry_bins: distribution_mode(d8.model(AppendixModel::GeometryBins)),
            most_likely_extra_revolutions_d8_effective_bins: distribution_mode(d8.model(AppendixModel::EffectiveBins)),
            most_likely_extra_revolutions_d8_sweep: distribution_mode(d8.model(AppendixModel::Sweep)),
            most_likely_extra_revolutions_d8_simulated: distribution_mode(&d8.simulated),
            total_variation_d6_geometry_bins: d6.distance(AppendixModel::GeometryBins),
            total_variation_d6_effective_bins: d6.distance(AppendixModel::EffectiveBins),
            total_variation_d6_sweep: d6.distance(AppendixModel::Sweep),
            total_variation_d8_geometry_bins: d8.distance(AppendixModel::GeometryBins),
            total_variation_d8_effective_bins: d8.distance(AppendixModel::EffectiveBins),
            total_variation_d8_sweep: d8.distance(AppendixModel::Sweep),
            total_variation_max_sweep: appendix
                .rows
                .iter()
                .map(|row| row.distance(AppendixModel::Sweep))
                .fold(0.0, f64::max),
        }
    }
}

/// The command that reproduces this run.
fn command_line(settings: &DiskSettings) -> String {
    format!(
        "proxima reproduce {NAME} --model {} --seed {} --count {} --out {}",
        settings.model_name,
        settings.seed,
        settings.strand_count,
        settings.out_dir.display()
    )
}

/// A short table for the terminal.
fn render_summary(headline: &Headline) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "proximal-disk on {} (seed {}, {} strands per point)",
        headline.model, headline.seed, headline.strands_per_point
    );
    let _ = writeln!(text, "{:<52} {:>10} {:>10}", "figure", "paper", "ours");
    let mut line = |what: &str, paper: String, ours: String| {
        let _ = writeln!(text, "{what:<52} {paper:>10} {ours:>10}");
    };
    line(
        "1 OP (random 4 KiB read, queue depth 1), ms",
        format!("{:.1}", paper::OP_MS),
        format!("{:.2}", headline.op_ms),
    );
    line(
        "Fig. 1 proximal, strand of 8, OP/request",
        format!("{:.2}", paper::PROXIMAL_8_OP),
        format!("{:.3}", headline.proximal_8_op),
    );
    line(
        "Fig. 1 track-approximate, strand of 8, OP/request",
        "≈ 0.39".into(),
        format!("{:.3}", headline.track_approximate_8_op),
    );
    line(
        "Fig. 1 semi-sequential, strand of 8, OP/request",
        format!("{:.2}", paper::SEMI_SEQUENTIAL_8_OP),
        format!("{:.3}", headline.semi_sequential_8_op),
    );
    line("Fig. 1 random, strand of 8, OP/request", "-".into(), format!("{:.3}", headline.random_8_op));
    line(
        "Fig. 2 queue depth 8 vs 1 (busy drive), % lower",
        format!("{:.0}", paper::QUEUE_DEPTH_REDUCTION_PERCENT),
        format!("{:.1}", headline.queue_depth_reduction_percent_busy),
    );
    line(
        "Fig. 2 queue depth 8 vs 1 (idle drive), % lower",
        "-".into(),
        format!("{:.1}", headline.queue_depth_reduction_percent_idle),
    );
    line(
        "Issue order at depth 1, ascending / random, OP",
        "-".into(),
        format!("{:.3}/{:.3}", headline.ascending_qd1_op, headline.random_order_qd1_op),
    );
    line(
        "App. A P(no extra rev.), D = 6: paper B = 6 / 7",
        format!("{:.2}", paper::NO_EXTRA_REVOLUTION_D6),
        format!("{:.3}/{:.3}", headline.no_extra_revolution_d6_paper_b6, headline.no_extra_revolution_d6_paper_b7),
    );
    line(
        "App. A P(no extra rev.), D = 6: sweep / simulated",
        "-".into(),
        format!("{:.3}/{:.3}", headline.no_extra_revolution_d6_sweep, headline.no_extra_revolution_d6_simulated),
    );
    line(
        "App. A likeliest extra revs, D = 8: B=7/sweep/sim.",
        paper::MOST_LIKELY_EXTRA_REVOLUTIONS_D8.to_string(),
        format!(
            "{}/{}/{}",
            headline.most_likely_extra_revolutions_d8_paper_b7,
            headline.most_likely_extra_revolutions_d8_sweep,
            headline.most_likely_extra_revolutions_d8_simulated
        ),
    );
    line(
        "App. A TV at D = 8: SPT/H bins / effective B / sweep",
        "-".into(),
        format!(
            "{:.2}/{:.2}/{:.2}",
            headline.total_variation_d8_geometry_bins,
            headline.total_variation_d8_effective_bins,
            headline.total_variation_d8_sweep
        ),
    );
    text
}

fn render_report(settings: &DiskSettings, headline: &Headline, rows: &Rows, tables: &Tables) -> String {
    let model = &settings.model;
    let figure_1 = &rows.figure_1;
    let mut text = String::new();
    let _ = writeln!(text, "# Proximal I/O on a simulated disk: {}\n", model.name());
    let _ = writeln!(
        text,
        "Reproduces Section 2 (Figures 1 and 2, the issue order) and Appendix A of the proximal I/O paper \
         on the simulated drive `{}` ({} sectors, {:.0} RPM, revolution {:.3} ms). All times are virtual and \
         exact for the seed.\n",
        model.name(),
        model.sector_count(),
        model.rpm(),
        model.revolution_ns() as f64 / 1e6
    );
    let _ = writeln!(text, "Command: `{}`  ", command_line(settings));
    let _ = writeln!(text, "Seed: {}; {} strands per point; reads of 4 KiB.\n", settings.seed, settings.strand_count);
    let _ = writeln!(text, "## Headline\n\n```text\n{}```\n", render_summary(headline));
    let _ = writeln!(
        text,
        "1 OP is the mean of {} uniformly random 4 KiB reads at queue depth 1 on the same model and seed: \
         {:.3} ms here, {:.1} ms on the paper's drive.\n",
        crate::seed000_proximal::closed_loop::OP_REQUEST_COUNT,
        headline.op_ms,
        paper::OP_MS
    );
    let _ = writeln!(text, "## Figure 1: per-request cost against strand size\n");
    let _ = writeln!(
        text,
        "Strands issued to an idle drive whose heads were first put at a random position, every request \
         outstanding (the drive queues up to {} and keeps the rest at the host), ascending LBN order. \
         Paper (strand of 8): proximal {:.2} OP, track-approximate about the same, semi-sequential {:.2} OP.\n",
        model.max_queue_length(),
        paper::PROXIMAL_8_OP,
        paper::SEMI_SEQUENTIAL_8_OP
    );
    let _ = writeln!(text, "![Figure 1](figure1.svg)\n");
    let mut compact = Table::new(&["strand size", "track-approximate", "proximal", "semi-sequential", "random"]);
    for strand_size in 1..=FIGURE_1_STRAND_SIZE_MAX {
        let mut row = vec![strand_size.to_string()];
        row.extend((0..4).map(|placement| format!("{:.3}", figure_1.cost_at(placement, strand_size))));
        compact.push_row(row);
    }
    let _ = writeln!(text, "Per-request cost in OP (full data in `figure1.csv`):\n\n{}", compact.to_markdown());
    let _ = writeln!(text, "## Figure 2: queue depth\n");
    let _ = writeln!(
        text,
        "Strands of 8 within 100,000 LBNs with 1…8 requests outstanding at the drive; the rest wait at the \
         host and are sent as others complete. On an idle drive the first request starts the moment it \
         arrives, so the scheduler only orders the rest; on a busy drive (the strand queued behind one \
         random read, timed from that read's completion) it chooses the first too. Paper: {:.0} % lower \
         per-request time at depth 8 than at depth 1.\n",
        paper::QUEUE_DEPTH_REDUCTION_PERCENT
    );
    let _ = writeln!(text, "![Figure 2](figure2.svg)\n\n{}", tables.figure_2.to_markdown());
    let _ = writeln!(
        text,
        "Depth 8 against depth 1: {:.1} % lower on a busy drive, {:.1} % on an idle one.\n",
        headline.queue_depth_reduction_percent_busy, headline.queue_depth_reduction_percent_idle
    );
    let _ = writeln!(text, "## Issue order\n");
    let _ = writeln!(
        text,
        "Strands of 8 within 100,000 LBNs on a busy drive, issued in ascending LBN order or in a random \
         order. The paper found real drives schedule well only with ascending order (a firmware \
         limitation); the simulated drive's scheduler sees every queued request alike, so the order \
         matters only through the host's FIFO when fewer requests are outstanding than the strand holds.\n"
    );
    let _ = writeln!(text, "![Issue order](issue_order.svg)\n\n{}", tables.order.to_markdown());
    render_appendix(&mut text, model, &rows.appendix, tables);
    let _ = writeln!(
        text,
        "## Files\n\n`figure1.csv`, `figure2.csv`, `issue_order.csv`, `appendix_a.csv`, \
         `appendix_a_total_variation.csv`, `appendix_a_distribution.csv` and one SVG per figure, \
         regenerated by the command above."
    );
    text
}

/// The Appendix A section of the report: the paper's model, the derived ones and
/// the simulation side by side.
fn render_appendix(text: &mut String, model: &DiskModel, appendix: &AppendixA, tables: &Tables) {
    let _ = writeln!(text, "## Appendix A: extra revolutions and the birthday model\n");
    let _ = writeln!(
        text,
        "Simulated: proximal strands (100,000 LBNs, all outstanding, idle drive); a strand's extra \
         revolutions are the whole revolutions between the completion of its first request and that of \
         its last, `⌊(t_last − t_first) / T_rev⌋`: the `k − 1` of a strand that needs `k` revolutions once \
         the heads are on it, which is what the birthday model's `k` requests in one bin mean.\n"
    );
    let _ = writeln!(
        text,
        "Models, none fitted to the simulation (docs/proximal-disk.md gives the derivations):\n\n\
         - *paper, B = 6* and *paper, B = 7*: the paper's formula `Q_k(D, B)` with the bin count its \
           \"H ≈ 7\" most plausibly stands for. P(no extra revolution at D = 6) is {:.4} for B = 6 and \
           {:.4} for B = 7; the paper's ≈ 0.02 is the B = 6 value rounded (a switch of 0.6–0.7 ms in a \
           4 ms revolution gives 6.x bins, taken whole). Read literally, H ≈ 7 sectors would give \
           hundreds of bins and almost never an extra revolution.\n\
         - *paper, B = SPT/H*: the formula with the literal bin count from this drive, \
           `T_rev / t_seek(1 cylinder)` = {:.3} / {:.4} ms = {:.2}.\n\
         - *paper, effective B*: the formula with `B = 1 / (2 E[w])` = {:.2}, where the clash window `w` \
           is the transfer of one request plus the switching time to the other's track (mean switch \
           {:.3} ms, mean window {:.3} ms over the span's distribution of cylinder distances, from the \
           model's mapping and seek curve at {} span positions), and the factor 2 is the two-sided \
           clash of a random service order.\n\
         - *sweep model*: the scheduler's sweep over the same window distribution: with `m` requests \
           left the next start is `min_j (w_j + U_j)`, `U_j` uniform, and the extra revolutions are the \
           whole revolutions in the sum of the `D − 1` steps, computed by convolution on a grid of {} \
           cells per revolution.\n",
        extra_revolution_distribution(6, 6.0)[0],
        extra_revolution_distribution(6, 7.0)[0],
        model.revolution_ns() as f64 / 1e6,
        model.seek_ns(1, DiskOp::Read) as f64 / 1e6,
        appendix.geometry_bins,
        appendix.effective_bins,
        appendix.mean_switch_ms,
        appendix.mean_window_ms,
        SPAN_POSITIONS,
        SWEEP_CELLS_PER_REVOLUTION,
    );
    let _ = writeln!(text, "![Appendix A](appendix_a.svg)\n");
    let _ = writeln!(
        text,
        "Total variation distance between the simulated distribution of extra revolutions and each \
         model's (`appendix_a_total_variation.csv`):\n\n{}",
        tables.appendix_distance.to_markdown()
    );
    let _ = writeln!(
        text,
        "Probability of no extra revolution, most likely and mean number of extra revolutions \
         (`appendix_a.csv`):\n\n{}",
        tables.appendix.to_markdown()
    );
    let _ = writeln!(text, "Full distributions in `appendix_a_distribution.csv`.\n");
}
