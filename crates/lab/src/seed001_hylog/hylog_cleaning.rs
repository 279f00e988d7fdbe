//! `reproduce hylog-cleaning`: HyLog's cleaning results (seed 001, §5.1)
//! measured twice, on the engine and on the independent segment simulator.
//!
//! - **Figure 2**: the engine's `lfs` layout with the greedy cleaner under
//!   uniformly random single-block updates: the live share u_c of the
//!   segments it cleans against the disk utilisation u, beside Eq 2 and
//!   beside the segment simulator's u_c on the paper's disk.
//! - **Cross-check** (the paper's TinySim check): the engine's overall write
//!   cost against the independent simulator's, both given the same update
//!   stream and the same geometry (segments, cleaner threshold, pass size),
//!   under uniform and hot-and-cold updates (10 % of the blocks take 90 % of
//!   the writes), greedy cleaning, one log, at u = [`CROSS_CHECK_UTILIZATION`].
//! - **Figure 5**: the segment simulator's overall scaled write cost W' of
//!   cost-age, hole-plugging and the adaptive cleaner (greedy beside them)
//!   under uniformly random updates, on the `--model` disk's Eq 6 segment
//!   and A: from the paper's figures for one of its disks, else from the
//!   positioning time and bandwidth fitted to the simulated drive's random
//!   reads, as `hylog-table3` and `hylog-throughput` fit theirs.
//!
//! Write costs: the engine's is Rosenblum's `(user + cleaning read + cleaning
//! written) / user` in blocks; the simulator's W' counts a segment I/O as n
//! and a plugged page as A. For copying cleaners (greedy) both are
//! `2 / (1 − u_c)` (Eq 4), so the cross-check compares like with like.
//!
//! The engine's volume is small beside the paper's 18 GB disk, so its
//! segments (64 blocks) and passes (two segments) are scaled down: the
//! cleaner's reserve of 10 clean segments and a pass stay a small share of
//! the disk, as the paper's did. The simulator keeps the paper's settings
//! (10 free segments, 20 MB passes).
//!
//! Writes `fig2_cleaning_utilization.csv/.svg`, `cross_check.csv/.svg`,
//! `fig5_cleaning_policies.csv/.svg` and `report.md`. The JSON headline is
//! `{"fig2": [{"u", "uc_simulated", "uc_eq2", …}], "cross_check": {"uniform":
//! {"engine", "independent", …}, "hot_cold": {…}}, "fig5": [{"u",
//! "cost_age", "hole_plugging", "adaptive", "greedy"}], …}`, `uc_simulated`
//! being the engine's.

use std::fmt::Write as _;
use std::sync::Arc;

use proxima_disk::DiskModel;

use proxima_engine::{CleaningPolicy as EngineCleaning, CleaningSettings, Layout};
use proxima_workload::synthetic::Pattern;
use serde::{Deserialize, Serialize};

use crate::experiment::{Experiment, RunSettings};
use crate::progress::Progress;
use crate::report::cost::{SimulatedWork, WallCost};
use crate::report::markdown::{verdict, Artifact, Rendered};
use crate::report::plot::{GroupedBarChart, LineChart, Series};
use crate::report::table::Table;
use crate::rig::parallel::{run_all, Task};
use crate::seed001_hylog::cleaning_figures::{simulate, CleaningRunSpec, Figure5Point, UTILIZATIONS};
use crate::seed001_hylog::cost_model::cleaning_utilization_for;
use crate::seed001_hylog::engine_write_cost::{measure_write_cost, WriteCostMeasurement, WriteCostSettings};
use crate::seed001_hylog::hylog_model::drive_timing_and_segment;
use crate::seed001_hylog::paper;
use crate::seed001_hylog::segment_simulator::{
    CleaningPolicy, SegmentSimulator, Separation, SimulatorConfig, SimulatorReport, PAPER_FREE_SEGMENTS_LOW,
    PAPER_PASS_PAGES,
};
use crate::LabError;

/// The experiment's name on the command line.
pub const NAME: &str = "hylog-cleaning";

/// The utilisation of the cross-check.
pub const CROSS_CHECK_UTILIZATION: f64 = 0.8;

/// The engine's segment, blocks (see the module documentation).
pub const ENGINE_SEGMENT_BLOCKS: u64 = 64;

/// Victim segments per engine cleaning pass.
pub const ENGINE_PASS_SEGMENTS: u64 = 2;

/// Figure 2's tolerance against Eq 2, and the cross-check's between the two
/// write costs (the paper's TinySim agreement).
pub const AGREEMENT_TOLERANCE: f64 = 0.05;

/// Figure 5's: the adaptive cleaner against the better of the other two.
pub const ADAPTIVE_TOLERANCE: f64 = 0.02;

/// The hot-and-cold workload of the cross-check.
pub const HOT_COLD: Pattern = Pattern::HotCold { hot_block_fraction: 0.1, hot_access_fraction: 0.9 };

/// Random reads per size when a drive that is not one of the paper's has its
/// timing fitted.
const TIMING_REQUEST_COUNT: u32 = 500;

/// The simulator's runs at each utilisation, in the order they are read back.
const FIGURE_5_POLICIES: [CleaningPolicy; 4] =
    [CleaningPolicy::Greedy, CleaningPolicy::CostAge, CleaningPolicy::HolePlugging, CleaningPolicy::Adaptive];

/// The `hylog-cleaning` experiment.
#[derive(Debug, Clone, Copy)]
pub struct HylogCleaning;

/// The experiment's flags.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct HylogCleaningParams {
    /// Blocks (4 KiB) of the engine volume's data device, in 64-block segments.
    #[arg(long, default_value_t = 65_536, value_parser = clap::value_parser!(u64).range(4096..=1 << 24))]
    pub engine_blocks: u64,
    /// Segments of the segment simulator's disk (of the `--model` disk's Eq 6 size: from the paper's
    /// figures for its disks, else fitted to the drive's random reads).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(16..=1 << 20))]
    pub segments: u32,
    /// Updates of the warm-up, and again of the measurement, in multiples of the data set.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub rewrites: u32,
    /// Disk utilisations of Figures 2 and 5, comma-separated, ascending, in (0, 1).
    #[arg(long, value_delimiter = ',', default_values_t = UTILIZATIONS.to_vec())]
    pub utilizations: Vec<f64>,
    /// Independent simulations run at once, one per thread (the figures are the same).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
}

/// The resolved settings.
#[derive(Debug, Clone)]
pub struct HylogCleaningSettings {
    run: RunSettings,
    params: HylogCleaningParams,
    /// Where its positioning time and bandwidth come from.
    timing_source: String,
    /// The simulator's disk, of the paper's settings.
    simulator: CleaningRunSpec,
}

impl HylogCleaningSettings {
    fn command_line(&self) -> String {
        let utilizations: Vec<String> = self.params.utilizations.iter().map(f64::to_string).collect();
        format!(
            "proxima reproduce {NAME} --engine-blocks {} --segments {} --rewrites {} --utilizations {} --jobs {} \
             --model {} --seed {} --out {}",
            self.params.engine_blocks,
            self.params.segments,
            self.params.rewrites,
            utilizations.join(","),
            self.params.jobs,
            self.run.model,
            self.run.seed,
            self.run.out_dir.display()
        )
    }

    /// The engine's measurement at `utilization` under `pattern`.
    fn engine(&self, utilization: f64, pattern: Pattern) -> WriteCostSettings {
        WriteCostSettings {
            layout: Layout::Lfs,
            policy: EngineCleaning::Greedy,
            utilization,
            pattern,
            data_blocks: self.params.engine_blocks,
            segment_blocks: ENGINE_SEGMENT_BLOCKS,
            pass_segments: ENGINE_PASS_SEGMENTS,
            warmup_passes: f64::from(self.params.rewrites),
            measured_passes: f64::from(self.params.rewrites),
            seed: self.run.seed,
        }
    }
}

/// One utilisation of Figure 2.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Figure2Row {
    /// Disk utilisation.
    pub u: f64,
    /// The engine's greedy cleaning.
    pub engine: WriteCostMeasurement,
    /// The segment simulator's greedy cleaning on the paper's disk.
    pub independent: SimulatorReport,
}

/// One workload of the cross-check.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CrossCheckRow {
    /// The engine.
    pub engine: WriteCostMeasurement,
    /// The simulator given the engine's geometry and updates.
    pub independent: SimulatorReport,
}

/// What a run measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rows {
    /// Figure 2, one row per utilisation.
    pub fig2: Vec<Figure2Row>,
    /// The cross-check under uniform updates.
    pub cross_check_uniform: CrossCheckRow,
    /// The cross-check under hot-and-cold updates.
    pub cross_check_hot_cold: CrossCheckRow,
    /// Figure 5, one point per utilisation.
    pub fig5: Vec<Figure5Point>,
    /// User updates simulated (engine and simulator).
    pub simulated_work: SimulatedWork,
}

/// One point of Figure 2 in the headline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Figure2Point {
    /// Disk utilisation.
    pub u: f64,
    /// The engine's u_c.
    pub uc_simulated: f64,
    /// Eq 2's u_c.
    pub uc_eq2: f64,
    /// The segment simulator's u_c.
    pub uc_independent: f64,
    /// The engine's write cost.
    pub write_cost_engine: f64,
}

/// Two write costs of one workload.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    /// The engine's.
    pub engine: f64,
    /// The independent simulator's.
    pub independent: f64,
    /// `|engine − independent| / independent`.
    pub difference: f64,
}

impl Agreement {
    fn of(row: &CrossCheckRow) -> Agreement {
        let (engine, independent) = (row.engine.write_cost, row.independent.write_cost);
        Agreement { engine, independent, difference: relative_difference(engine, independent) }
    }
}

/// The cross-check in the headline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CrossCheck {
    /// Uniform updates.
    pub uniform: Agreement,
    /// Hot-and-cold updates.
    pub hot_cold: Agreement,
}

/// The JSON headline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// Figure 2.
    pub fig2: Vec<Figure2Point>,
    /// The cross-check's write costs.
    pub cross_check: CrossCheck,
    /// Figure 5's write costs.
    pub fig5: Vec<Figure5Point>,
    /// The largest `|u_c engine − Eq 2| / Eq 2` of Figure 2.
    pub fig2_largest_difference: f64,
    /// The largest `adaptive / min(cost-age, hole-plugging)` of Figure 5.
    pub fig5_adaptive_over_best_largest: f64,
}

impl Experiment for HylogCleaning {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str = "HyLog paper: cleaning — Fig 2 (engine u_c vs Eq 2), the TinySim cross-check, \
                                       Fig 5 (cleaning policies)";
    const DEFAULT_MODEL: &'static str = paper::DEFAULT_DISK;
    type Params = HylogCleaningParams;
    type Settings = HylogCleaningSettings;
    type Rows = Rows;
    type Headline = Headline;

    fn settings(run: &RunSettings, params: &HylogCleaningParams) -> Result<HylogCleaningSettings, LabError> {
        check_utilizations(&params.utilizations)?;
        let (timing, timing_source) = match paper::disk(&run.model) {
            Some(disk) => (disk.timing, format!("the paper's ({})", disk.source)),
            None => {
                let model = Arc::new(DiskModel::resolve(&run.model, &[]).map_err(|source| LabError::Model { source })?);
                let (timing, _) = drive_timing_and_segment(&model, TIMING_REQUEST_COUNT, run.seed)?;
                let source = format!(
                    "fitted to {TIMING_REQUEST_COUNT} random reads each of 4 KiB and of 1 MiB on the simulated {}: {:.2} ms, \
                     {:.1} MB/s",
                    model.name(),
                    timing.positioning_ms,
                    timing.bandwidth_mb_per_s
                );
                (timing, source)
            }
        };
        let simulator = CleaningRunSpec {
            warmup_rewrites: u64::from(params.rewrites),
            measured_rewrites: u64::from(params.rewrites),
            ..CleaningRunSpec::for_timing(timing, params.segments, run.seed)
        };
        let highest = params.utilizations.iter().copied().fold(CROSS_CHECK_UTILIZATION, f64::max);
        let simulator_pass = u64::from(PAPER_PASS_PAGES / simulator.segment_pages).max(1);
        check_room(
            "segments",
            u64::from(params.segments),
            u64::from(PAPER_FREE_SEGMENTS_LOW) + simulator_pass,
            highest,
        )?;
        check_room(
            "engine-blocks",
            params.engine_blocks / ENGINE_SEGMENT_BLOCKS,
            CleaningSettings::default().start_below_clean_segments + ENGINE_PASS_SEGMENTS,
            highest,
        )?;
        Ok(HylogCleaningSettings { run: run.clone(), params: params.clone(), timing_source, simulator })
    }

    fn measure(settings: &HylogCleaningSettings, progress: &mut dyn Progress) -> Result<Rows, LabError> {
        let utilizations = &settings.params.utilizations;
        let jobs = usize::from(settings.params.jobs);
        // The engine's runs: Figure 2's, then the cross-check's under
        // hot-and-cold updates and, unless Figure 2 has that point, under
        // uniform ones.
        let uniform_in_figure = utilizations.iter().position(|&u| u == CROSS_CHECK_UTILIZATION);
        let mut engine_runs: Vec<WriteCostSettings> =
            utilizations.iter().map(|&u| settings.engine(u, Pattern::Uniform)).collect();
        engine_runs.push(settings.engine(CROSS_CHECK_UTILIZATION, HOT_COLD));
        if uniform_in_figure.is_none() {
            engine_runs.push(settings.engine(CROSS_CHECK_UTILIZATION, Pattern::Uniform));
        }
        // The simulator's: the cross-check's two, then Figure 5's policies
        // at each utilisation (greedy's is Figure 2's).
        let cross_check_runs =
            [Pattern::Uniform, HOT_COLD].map(|pattern| settings.engine(CROSS_CHECK_UTILIZATION, pattern));
        let engine_updates = |run: &WriteCostSettings| {
            let (warmup, measured) = run.update_counts();
            warmup + measured
        };
        let simulated_work = SimulatedWork {
            updates: engine_runs.iter().chain(&cross_check_runs).map(engine_updates).sum::<u64>()
                + utilizations.iter().map(|&u| 4 * simulator_writes(&settings.simulator, u)).sum::<u64>(),
            disk_ios: 0,
        };

        // The costliest runs first (cleaning costs grow steeply with u), so
        // that the last one does not run alone; the rows keep their order.
        let mut by_cost: Vec<usize> = (0..engine_runs.len()).collect();
        by_cost.sort_by(|&a, &b| engine_runs[b].utilization.total_cmp(&engine_runs[a].utilization));
        let engine_tasks: Vec<Task<'_, WriteCostMeasurement>> = by_cost
            .iter()
            .map(|&index| -> Task<'_, WriteCostMeasurement> {
                let run = &engine_runs[index];
                Box::new(move |progress| measure_write_cost(run, progress))
            })
            .collect();
        let mut engine = vec![None; engine_runs.len()];
        for (index, measured) in by_cost.into_iter().zip(run_all(jobs, engine_tasks, progress)?) {
            engine[index] = Some(measured);
        }
        let engine: Vec<WriteCostMeasurement> =
            engine.into_iter().map(|run| run.expect("every run measured")).collect();
        let mut simulator_tasks: Vec<Task<'_, SimulatorReport>> = cross_check_runs
            .iter()
            .map(|run| -> Task<'_, SimulatorReport> {
                Box::new(move |progress| Ok(independent_like_engine(run, progress)))
            })
            .collect();
        for &u in utilizations {
            simulator_tasks.extend(FIGURE_5_POLICIES.map(|policy| simulator_task(settings.simulator, u, policy)));
        }
        let simulator = run_all(jobs, simulator_tasks, progress)?;

        let figure_points = utilizations.len();
        let uniform_engine = engine[uniform_in_figure.unwrap_or(figure_points + 1)];
        let cross_check_uniform = CrossCheckRow { engine: uniform_engine, independent: simulator[0] };
        let cross_check_hot_cold = CrossCheckRow { engine: engine[figure_points], independent: simulator[1] };
        let mut fig2 = Vec::new();
        let mut fig5 = Vec::new();
        for ((&u, &engine), policies) in
            utilizations.iter().zip(&engine).zip(simulator[2..].chunks(FIGURE_5_POLICIES.len()))
        {
            let [greedy, cost_age, hole_plugging, adaptive] = [policies[0], policies[1], policies[2], policies[3]];
            fig2.push(Figure2Row { u, engine, independent: greedy });
            fig5.push(Figure5Point {
                u,
                greedy: greedy.write_cost,
                cost_age: cost_age.write_cost,
                hole_plugging: hole_plugging.write_cost,
                adaptive: adaptive.write_cost,
            });
        }
        Ok(Rows { fig2, cross_check_uniform, cross_check_hot_cold, fig5, simulated_work })
    }

    fn render(settings: &HylogCleaningSettings, rows: &Rows, cost: &WallCost) -> Rendered<Headline> {
        let headline = headline(rows);
        let files = vec![
            ("fig2_cleaning_utilization.csv", Artifact::Csv(figure_2_table(rows))),
            ("fig2_cleaning_utilization.svg", Artifact::LineChart(figure_2_chart(rows))),
            ("cross_check.csv", Artifact::Csv(cross_check_table(rows))),
            ("cross_check.svg", Artifact::BarChart(cross_check_chart(&headline.cross_check))),
            ("fig5_cleaning_policies.csv", Artifact::Csv(figure_5_table(&rows.fig5))),
            ("fig5_cleaning_policies.svg", Artifact::LineChart(figure_5_chart(settings, &rows.fig5))),
        ];
        let summary = summary(settings, &headline, &cost.render(&rows.simulated_work));
        let report = report(settings, rows, &summary);
        Rendered { files, report, summary, headline }
    }

    fn describe(params: &HylogCleaningParams) -> String {
        format!(", {} simulation(s) at once", params.jobs)
    }
}

fn simulator_task(spec: CleaningRunSpec, u: f64, policy: CleaningPolicy) -> Task<'static, SimulatorReport> {
    Box::new(move |progress: &mut dyn Progress| {
        let writes = simulator_writes(&spec, u);
        progress.start_phase(&format!("segment simulator, {} at u = {u}", policy.name()), writes);
        let report = simulate(&spec, u, policy, Pattern::Uniform);
        progress.advance(writes);
        Ok(report)
    })
}

/// User writes of one simulator run (warm-up and measured).
fn simulator_writes(spec: &CleaningRunSpec, u: f64) -> u64 {
    let slots = u64::from(spec.segment_pages) * u64::from(spec.segment_count);
    let pages = (slots as f64 * u).round() as u64;
    pages * (spec.warmup_rewrites + spec.measured_rewrites)
}

/// The independent simulator given the engine's geometry (segments, the
/// data device's blocks, the cleaner's threshold and pass) and the very
/// updates the engine applies: its greedy cleaning's write cost is the
/// engine's `(user + read + written) / user`.
pub fn independent_like_engine(engine: &WriteCostSettings, progress: &mut dyn Progress) -> SimulatorReport {
    let segment_pages = u32::try_from(engine.segment_blocks).expect("a segment of fewer than 2^32 blocks");
    let config = SimulatorConfig {
        segment_pages,
        segment_count: u32::try_from(engine.data_blocks / engine.segment_blocks).expect("fewer than 2^32 segments"),
        live_pages: engine.extent_blocks(),
        policy: CleaningPolicy::Greedy,
        free_segments_low: u32::try_from(CleaningSettings::default().start_below_clean_segments)
            .expect("a small threshold"),
        pass_pages: u32::try_from(engine.pass_segments).expect("a few segments") * segment_pages,
        segment_efficiency: 1.0,
        separation: Separation::None,
    };
    let (warmup, measured) = engine.update_counts();
    progress.start_phase(&format!("segment simulator as the engine, u = {}", engine.utilization), warmup + measured);
    let mut simulator = SegmentSimulator::new(config);
    let report = simulator.run(&mut engine.updates(), warmup, measured);
    progress.advance(warmup + measured);
    report
}

fn check_utilizations(utilizations: &[f64]) -> Result<(), LabError> {
    let invalid = |message: String| Err(LabError::InvalidParameter { parameter: "utilizations", message });
    if utilizations.is_empty() {
        return invalid("--utilizations needs at least one".into());
    }
    if let Some(u) = utilizations.iter().find(|&&u| !(u > 0.0 && u < 1.0)) {
        return invalid(format!("--utilizations: {u} is not in (0, 1)"));
    }
    if utilizations.windows(2).any(|pair| pair[0] >= pair[1]) {
        return invalid("--utilizations must be ascending, each once".into());
    }
    Ok(())
}

/// A disk of `segments` at utilisation `u` must leave room for the cleaner's
/// reserve and a pass (`needed` segments) and one more, or cleaning could
/// never bring the reserve back.
fn check_room(parameter: &'static str, segments: u64, needed: u64, u: f64) -> Result<(), LabError> {
    let free = segments as f64 * (1.0 - u);
    if free >= (needed + 1) as f64 {
        return Ok(());
    }
    Err(LabError::InvalidParameter {
        parameter,
        message: format!(
            "--{parameter}: {segments} segments at u = {u} leave {free:.1} segments free; the cleaner needs more \
             than {needed} (its reserve and one pass)"
        ),
    })
}

fn relative_difference(value: f64, reference: f64) -> f64 {
    if reference == 0.0 {
        0.0
    } else {
        (value - reference).abs() / reference
    }
}

fn headline(rows: &Rows) -> Headline {
    let fig2: Vec<Figure2Point> = rows
        .fig2
        .iter()
        .map(|row| Figure2Point {
            u: row.u,
            uc_simulated: row.engine.cleaning_utilization,
            uc_eq2: cleaning_utilization_for(row.u),
            uc_independent: row.independent.cleaning_utilization,
            write_cost_engine: row.engine.write_cost,
        })
        .collect();
    let fig2_largest_difference =
        fig2.iter().map(|point| relative_difference(point.uc_simulated, point.uc_eq2)).fold(0.0, f64::max);
    let fig5_adaptive_over_best_largest =
        rows.fig5.iter().map(|point| point.adaptive / point.cost_age.min(point.hole_plugging)).fold(0.0, f64::max);
    Headline {
        fig2,
        cross_check: CrossCheck {
            uniform: Agreement::of(&rows.cross_check_uniform),
            hot_cold: Agreement::of(&rows.cross_check_hot_cold),
        },
        fig5: rows.fig5.clone(),
        fig2_largest_difference,
        fig5_adaptive_over_best_largest,
    }
}

fn figure_2_table(rows: &Rows) -> Table {
    let mut table = Table::new(&[
        "u",
        "uc_engine",
        "uc_eq2",
        "difference",
        "uc_independent",
        "write_cost_engine",
        "write_cost_eq4",
        "segments_cleaned_engine",
    ]);
    for row in &rows.fig2 {
        let eq2 = cleaning_utilization_for(row.u);
        table.push_row(vec![
            format!("{:.2}", row.u),
            format!("{:.4}", row.engine.cleaning_utilization),
            format!("{eq2:.4}"),
            format!("{:+.2} %", (row.engine.cleaning_utilization - eq2) / eq2 * 100.0),
            format!("{:.4}", row.independent.cleaning_utilization),
            format!("{:.3}", row.engine.write_cost),
            format!("{:.3}", 2.0 / (1.0 - eq2)),
            row.engine.segments_cleaned.to_string(),
        ]);
    }
    table
}

fn figure_2_chart(rows: &Rows) -> LineChart {
    let series = |name: &str, value: &dyn Fn(&Figure2Row) -> f64| Series {
        name: name.into(),
        points: rows.fig2.iter().map(|row| (row.u, value(row))).collect(),
    };
    LineChart {
        title: "Figure 2: greedy cleaning under uniform random updates".into(),
        x_label: "disk utilisation u".into(),
        y_label: "cleaning utilisation u_c".into(),
        series: vec![
            series("engine (lfs, greedy)", &|row| row.engine.cleaning_utilization),
            series("segment simulator", &|row| row.independent.cleaning_utilization),
            series("Eq 2", &|row| cleaning_utilization_for(row.u)),
        ],
    }
}

fn cross_check_table(rows: &Rows) -> Table {
    let mut table = Table::new(&[
        "workload",
        "engine_write_cost",
        "independent_write_cost",
        "difference",
        "engine_uc",
        "independent_uc",
        "engine_user_blocks",
        "independent_user_writes",
    ]);
    for (name, row) in [("uniform", &rows.cross_check_uniform), ("hot_cold", &rows.cross_check_hot_cold)] {
        let agreement = Agreement::of(row);
        table.push_row(vec![
            name.into(),
            format!("{:.3}", agreement.engine),
            format!("{:.3}", agreement.independent),
            format!("{:.2} %", agreement.difference * 100.0),
            format!("{:.4}", row.engine.cleaning_utilization),
            format!("{:.4}", row.independent.cleaning_utilization),
            row.engine.user_blocks.to_string(),
            row.independent.counts.user_page_writes.to_string(),
        ]);
    }
    table
}

fn cross_check_chart(cross_check: &CrossCheck) -> GroupedBarChart {
    GroupedBarChart {
        title: format!("Overall write cost at u = {CROSS_CHECK_UTILIZATION}, greedy cleaning"),
        x_label: "updates".into(),
        y_label: "blocks moved per user block".into(),
        categories: vec!["uniform".into(), "hot-and-cold (90 % to 10 %)".into()],
        series: vec![
            ("engine".into(), vec![cross_check.uniform.engine, cross_check.hot_cold.engine]),
            ("segment simulator".into(), vec![cross_check.uniform.independent, cross_check.hot_cold.independent]),
        ],
    }
}

fn figure_5_table(points: &[Figure5Point]) -> Table {
    let mut table = Table::new(&["u", "greedy", "cost_age", "hole_plugging", "adaptive", "adaptive_over_best"]);
    for point in points {
        table.push_row(vec![
            format!("{:.2}", point.u),
            format!("{:.3}", point.greedy),
            format!("{:.3}", point.cost_age),
            format!("{:.3}", point.hole_plugging),
            format!("{:.3}", point.adaptive),
            format!("{:.4}", point.adaptive / point.cost_age.min(point.hole_plugging)),
        ]);
    }
    table
}

fn figure_5_chart(settings: &HylogCleaningSettings, points: &[Figure5Point]) -> LineChart {
    let series = |name: &str, value: fn(&Figure5Point) -> f64| Series {
        name: name.into(),
        points: points.iter().map(|point| (point.u, value(point))).collect(),
    };
    LineChart {
        title: format!("Figure 5: cleaning policies, uniform random updates ({})", settings.run.model),
        x_label: "disk utilisation u".into(),
        y_label: "overall write cost W'".into(),
        series: vec![
            series("cost-age", |point| point.cost_age),
            series("hole-plugging", |point| point.hole_plugging),
            series("adaptive", |point| point.adaptive),
            series("greedy", |point| point.greedy),
        ],
    }
}

fn summary(settings: &HylogCleaningSettings, headline: &Headline, cost_line: &str) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{NAME} (seed {}): engine lfs on {} blocks in {ENGINE_SEGMENT_BLOCKS}-block segments; segment simulator \
         on {} segments of {} pages ({}, A = {:.2}); {}× warm-up and {}× measured rewrites",
        settings.run.seed,
        settings.params.engine_blocks,
        settings.simulator.segment_count,
        settings.simulator.segment_pages,
        settings.run.model,
        settings.simulator.segment_efficiency,
        settings.params.rewrites,
        settings.params.rewrites
    );
    let _ = writeln!(text, "{:>5} {:>10} {:>8} {:>12} {:>10}", "u", "uc engine", "uc Eq 2", "uc simulator", "W engine");
    for point in &headline.fig2 {
        let _ = writeln!(
            text,
            "{:>5.2} {:>10.4} {:>8.4} {:>12.4} {:>10.3}",
            point.u, point.uc_simulated, point.uc_eq2, point.uc_independent, point.write_cost_engine
        );
    }
    let _ = writeln!(
        text,
        "Figure 2: largest |engine − Eq 2| {:.2} % (target ≤ {:.0} %: {})",
        headline.fig2_largest_difference * 100.0,
        AGREEMENT_TOLERANCE * 100.0,
        verdict(headline.fig2_largest_difference <= AGREEMENT_TOLERANCE)
    );
    for (name, agreement) in
        [("uniform", headline.cross_check.uniform), ("hot-and-cold", headline.cross_check.hot_cold)]
    {
        let _ = writeln!(
            text,
            "cross-check {name} at u = {CROSS_CHECK_UTILIZATION}: engine {:.3}, simulator {:.3}, {:.2} % apart \
             (target ≤ {:.0} %: {})",
            agreement.engine,
            agreement.independent,
            agreement.difference * 100.0,
            AGREEMENT_TOLERANCE * 100.0,
            verdict(agreement.difference <= AGREEMENT_TOLERANCE)
        );
    }
    let _ = writeln!(
        text,
        "Figure 5: adaptive at most {:.4}× the better of cost-age and hole-plugging (target ≤ {:.2}: {})",
        headline.fig5_adaptive_over_best_largest,
        1.0 + ADAPTIVE_TOLERANCE,
        verdict(headline.fig5_adaptive_over_best_largest <= 1.0 + ADAPTIVE_TOLERANCE)
    );
    let _ = writeln!(text, "{cost_line}");
    text
}

fn report(settings: &HylogCleaningSettings, rows: &Rows, summary: &str) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "# HyLog: segment cleaning on the engine and on an independent simulator\n");
    let _ = writeln!(text, "```sh\n{}\n```\n", settings.command_line());
    let _ = writeln!(text, "## Summary (as printed)\n\n```text\n{summary}```\n");
    let _ = writeln!(
        text,
        "## Figure 2: greedy cleaning under uniform random updates\n\n\
         The paper: \"simulation matches\" Eq 2, u = (u_c − 1) / ln u_c (001:L13–L19). Here the engine's `lfs` \
         layout on memory devices: one extent of u × {} blocks written whole, then single-block updates drawn \
         uniformly, {}× the extent to warm up and {}× measured; u_c is the live share of the segments its greedy \
         cleaner empties. Beside it, the segment simulator on the paper's disk ({}, {} segments of {} pages, 10 \
         free segments, 20 MB passes).\n",
        settings.params.engine_blocks,
        settings.params.rewrites,
        settings.params.rewrites,
        settings.run.model,
        settings.simulator.segment_count,
        settings.simulator.segment_pages
    );
    let _ = writeln!(text, "{}", figure_2_table(rows).to_markdown());
    let _ = writeln!(text, "![Figure 2](fig2_cleaning_utilization.svg)\n");
    let _ = writeln!(
        text,
        "## Cross-check: the engine against an independent simulator\n\n\
         The paper checked its disk-layout component against TinySim, written apart: overall write costs under \
         uniform and hot-and-cold updates (10 % of the pages take 90 % of the writes) \"within 5 %\" in most \
         cases (001:L285–L293). Here the segment simulator (`segment_simulator.rs`, no engine code) is given the \
         engine's geometry ({} segments of {ENGINE_SEGMENT_BLOCKS} blocks, 10 clean segments kept, \
         {ENGINE_PASS_SEGMENTS}-segment passes) and the very update stream the engine applies, at u = \
         {CROSS_CHECK_UTILIZATION}, greedy cleaning, one log. Write cost: blocks moved (user, cleaning read, \
         cleaning written) per user block.\n",
        settings.params.engine_blocks / ENGINE_SEGMENT_BLOCKS
    );
    let _ = writeln!(text, "{}", cross_check_table(rows).to_markdown());
    let _ = writeln!(text, "![Cross-check](cross_check.svg)\n");
    let _ = writeln!(
        text,
        "## Figure 5: cleaning policies under uniform random updates\n\n\
         The paper: cost-age, hole-plugging and the adaptive cleaner \"show trends very similar to those in \
         Figure 6 of\" Matthews et al. (001:L296–L299): copying wins at low utilisation, hole-plugging at high, \
         and the adaptive cleaner follows the better. Overall scaled write cost W' (a segment I/O costs n, a \
         plugged page A = {:.2}) on the segment simulator, {} segments of {} pages (Eq 6's segment for {}, \
         whose timing is {}); greedy beside them for reference.\n",
        settings.simulator.segment_efficiency,
        settings.simulator.segment_count,
        settings.simulator.segment_pages,
        settings.run.model,
        settings.timing_source
    );
    let _ = writeln!(text, "{}", figure_5_table(&rows.fig5).to_markdown());
    let _ = writeln!(text, "![Figure 5](fig5_cleaning_policies.svg)\n");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_utilizations_are_refused() {
        assert!(check_utilizations(&[]).is_err());
        assert!(check_utilizations(&[0.5, 1.0]).is_err());
        assert!(check_utilizations(&[0.7, 0.6]).is_err());
        assert!(check_utilizations(&[0.6, 0.6]).is_err());
        assert!(check_utilizations(&[0.5, 0.95]).is_ok());
    }

    #[test]
    fn a_disk_too_small_for_the_cleaner_is_refused() {
        // 100 segments at 0.9 leave 10 free: not more than a reserve of 10 and a pass.
        assert!(check_room("segments", 100, 11, 0.9).is_err());
        assert!(check_room("segments", 200, 11, 0.9).is_ok());
    }
}
