//! `reproduce foreground-priority`: client requests beside destage on the
//! simulated RAID-4 of the layout experiments (4 data members and parity, a
//! 1 % staging area, the proximal layout), each drive fronted by the engine's
//! foreground-first scheduler ([`proxima_engine::priority`]).
//!
//! The destage is the engine's own: a lab volume is filled, a staging area's
//! worth of random 4 KiB updates is staged, and the member-disk requests of
//! its destage are captured, then replayed round by round beside closed-loop
//! clients ([`super::replay`]). Runs:
//!
//! - the idle array (clients alone): the reference p99;
//! - FIFO, no host priority: every request straight to the drives;
//! - the sweep of the paper's Figure 11: foreground first with at most `k`
//!   background requests outstanding per drive, `k` = 1 … 32, the destage
//!   never short of work;
//! - the default policy: `k` = 1 below the staging area's high-water mark,
//!   rising to 32 as it fills ([`background_limit_for_backlog`]), the destage
//!   working only on what the clients' writes staged.
//!
//! Writes `foreground_priority.csv`, `foreground_priority.svg` and
//! `report.md`. The JSON headline is `{"rows": [{"background_limit",
//! "system_mb_s", "foreground_mean_ms", "foreground_p99_ms"}], "default":
//! {"foreground_p99_ms", "idle_p99_ms", "destage_keeps_up"}}`.
//!
//! [`background_limit_for_backlog`]: proxima_engine::priority::background_limit_for_backlog

use std::fmt::Write as _;
use std::path::PathBuf;

use proxima_engine::priority::DEFAULT_BACKGROUND_LIMIT;
use proxima_engine::Layout;
use proxima_workload::srarw::UpdateSkew;
use serde::{Deserialize, Serialize};

use crate::experiment::{Experiment, RunSettings};
use crate::progress::Progress;
use crate::report::cost::{SimulatedWork, WallCost};
use crate::report::markdown::{verdict, Artifact, Rendered};
use crate::report::plot::{LineChart, Series};
use crate::report::table::Table;
use crate::rig::lab_volume::{ArrayShape, LabVolume, RunSpec, DATA_DISK_COUNT};
use crate::rig::measure::ratio;
use crate::rig::parallel::{run_all, Task};
use crate::rig::testbed::BLOCK_SIZE_BYTES;
use crate::seed002_priority::replay::{run_replay, BackgroundPolicy, DestageRounds, ReplayConfig, ReplayOutcome};
use crate::LabError;

/// The experiment's name on the command line.
pub const NAME: &str = "foreground-priority";

/// Requests each drive holds: deep enough that the sweep's largest limit
/// fits beside the clients.
pub const DRIVE_QUEUE_DEPTH: usize = 32;

/// The staging area, percent of the array (the layout experiments' 1 %).
const STAGING_PERCENT: f64 = 1.0;

/// The default policy's limit when the staging area is full.
const PACED_MAX_LIMIT: usize = 32;

/// The paper's Figure 11 (seed 002, L5943): throughput 223 → 345 MB/s and
/// foreground latency 110 µs → 1771 µs as the limit relaxes.
const PAPER_LATENCY_GROWTH: f64 = 1771.0 / 110.0;

/// The `foreground-priority` experiment.
#[derive(Debug, Clone, Copy)]
pub struct ForegroundPriority;

/// The experiment's flags.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct ForegroundPriorityParams {
    /// Fraction of each drive the array uses.
    #[arg(long, default_value_t = 0.001)]
    pub scale: f64,
    /// Closed-loop clients, one request outstanding each.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub clients: u32,
    /// Percent of client requests that are reads (the rest are writes).
    #[arg(long = "read-percent", default_value_t = 50.0)]
    pub read_percent: f64,
    /// A client's think time between a completion and its next request, ms.
    #[arg(long = "think-ms", default_value_t = 5.0)]
    pub think_ms: f64,
    /// Background limits of the sweep, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2, 4, 8, 16, 32])]
    pub limits: Vec<usize>,
    /// Virtual seconds per run (the first tenth is a warm-up; the destage is
    /// judged on the second half).
    #[arg(long, default_value_t = 120.0)]
    pub seconds: f64,
    /// Independent simulations run at once, one per thread.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
}

/// The resolved settings.
#[derive(Debug, Clone)]
pub struct PrioritySettingsResolved {
    shape: ArrayShape,
    model_name: String,
    params: ForegroundPriorityParams,
    seed: u64,
    out_dir: PathBuf,
}

impl PrioritySettingsResolved {
    fn command_line(&self) -> String {
        let limits: Vec<String> = self.params.limits.iter().map(ToString::to_string).collect();
        format!(
            "proxima reproduce {NAME} --scale {} --clients {} --read-percent {} --think-ms {} --limits {} --seconds {} \
             --model {} --seed {} --out {}",
            self.params.scale,
            self.params.clients,
            self.params.read_percent,
            self.params.think_ms,
            limits.join(","),
            self.params.seconds,
            self.model_name,
            self.seed,
            self.out_dir.display()
        )
    }
}

/// One run: its policy and what it measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyRow {
    /// `idle`, `fifo`, `limit` (the sweep) or `paced` (the default policy).
    pub policy: String,
    /// The fixed limit (sweep rows), or the paced policy's limit below high water.
    pub background_limit: Option<usize>,
    /// Client and destaged user bytes per second, MB/s.
    pub system_mb_s: f64,
    /// What the run measured.
    #[serde(flatten)]
    pub outcome: ReplayOutcome,
}

/// The measured rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rows {
    /// Every run: idle, FIFO, the sweep, the default policy.
    pub runs: Vec<PolicyRow>,
    /// User blocks of the captured destage.
    pub captured_blocks: u64,
    /// Member-disk requests of the captured destage.
    pub captured_requests: u64,
    /// Rounds of requests the engine submitted together (each waits for the
    /// one before).
    pub captured_rounds: u64,
    /// Staging blocks of the volume.
    pub staging_blocks: u64,
    /// What was simulated.
    pub simulated: SimulatedWork,
}

/// A sweep row of the headline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    /// Background requests outstanding per drive at most.
    pub background_limit: usize,
    /// Client and destaged user bytes per second, MB/s.
    pub system_mb_s: f64,
    /// Mean client response time, ms.
    pub foreground_mean_ms: f64,
    /// 99th percentile of client response times, ms.
    pub foreground_p99_ms: f64,
    /// Client MB/s.
    pub foreground_mb_s: f64,
    /// Destaged user blocks per second.
    pub destaged_blocks_per_s: f64,
}

/// The default policy against the idle array.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DefaultPolicy {
    /// Client p99 beside paced destage, ms.
    pub foreground_p99_ms: f64,
    /// Client p99 on the idle array, ms.
    pub idle_p99_ms: f64,
    /// Whether destage moved what the clients staged without the staging
    /// area filling.
    pub destage_keeps_up: bool,
    /// Blocks destaged and staged per second.
    pub destaged_blocks_per_s: f64,
    /// Blocks the clients staged per second.
    pub staged_blocks_per_s: f64,
    /// The fullest the staging area got.
    pub backlog_fraction_max: f64,
    /// How much the backlog grew over the run's second half, blocks.
    pub backlog_growth_blocks: i64,
    /// Client p99 with FIFO (no priority), ms.
    pub fifo_p99_ms: f64,
}

/// The JSON headline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// The Figure 11 sweep.
    pub rows: Vec<SweepRow>,
    /// The default policy.
    pub default: DefaultPolicy,
}

impl Experiment for ForegroundPriority {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str =
        "request-centric priority: client latency and system throughput beside destage, by background limit";
    const DEFAULT_MODEL: &'static str = "nearline7200";
    type Params = ForegroundPriorityParams;
    type Settings = PrioritySettingsResolved;
    type Rows = Rows;
    type Headline = Headline;

    fn settings(run: &RunSettings, params: &ForegroundPriorityParams) -> Result<PrioritySettingsResolved, LabError> {
        let shape = ArrayShape::for_model(&run.model)?;
        shape.window_blocks_per_disk(params.scale)?;
        let invalid = |parameter: &'static str, message: String| Err(LabError::InvalidParameter { parameter, message });
        if !(0.0..=100.0).contains(&params.read_percent) {
            return invalid("read-percent", format!("{} is not in [0, 100]", params.read_percent));
        }
        if !(params.think_ms >= 0.0 && params.think_ms <= 10_000.0) {
            return invalid("think-ms", format!("{} is not in [0, 10000]", params.think_ms));
        }
        if !(params.seconds > 0.0 && params.seconds <= 100_000.0) {
            return invalid("seconds", format!("{} is not in (0, 100000]", params.seconds));
        }
        if params.limits.is_empty() || params.limits.iter().any(|&limit| limit == 0 || limit > DRIVE_QUEUE_DEPTH) {
            return invalid("limits", format!("each limit must be in [1, {DRIVE_QUEUE_DEPTH}]"));
        }
        Ok(PrioritySettingsResolved {
            shape,
            model_name: run.model.clone(),
            params: params.clone(),
            seed: run.seed,
            out_dir: run.out_dir.clone(),
        })
    }

    fn measure(settings: &PrioritySettingsResolved, progress: &mut dyn Progress) -> Result<Rows, LabError> {
        let spec = RunSpec {
            shape: settings.shape.clone(),
            layout: Layout::Proximal,
            staging_percent: STAGING_PERCENT,
            scale: settings.params.scale,
            seed: settings.seed,
            snapshots_at_once_max: 0,
            snapshot_reserve_blocks_per_extent: 0,
            range_reserve_fraction: 0.0,
            update_skew: UpdateSkew::Uniform,
            proximal_copy_out: false,
        };
        let mut volume = LabVolume::create(&spec, progress)?;
        let staging_blocks = volume.staging_blocks();
        let capture = volume.capture_destage(staging_blocks)?;
        let rounds = DestageRounds::from_capture(&capture, volume.window_first_block());
        let window_blocks = settings.shape.window_blocks_per_disk(settings.params.scale)?;
        let base = ReplayConfig {
            model: std::sync::Arc::clone(&settings.shape.model),
            member_count: DATA_DISK_COUNT + 1,
            window_first_block: volume.window_first_block(),
            window_blocks,
            drive_queue_depth: DRIVE_QUEUE_DEPTH,
            clients: settings.params.clients,
            read_fraction: settings.params.read_percent / 100.0,
            think_ns: (settings.params.think_ms * 1e6) as u64,
            duration_ns: (settings.params.seconds * 1e9) as u64,
            policy: BackgroundPolicy::None,
            seed: settings.seed,
        };
        let mut policies = vec![("idle", BackgroundPolicy::None), ("fifo", BackgroundPolicy::Fifo)];
        policies.extend(settings.params.limits.iter().map(|&limit| ("limit", BackgroundPolicy::Fixed(limit))));
        policies.push((
            "paced",
            BackgroundPolicy::Paced {
                base_limit: DEFAULT_BACKGROUND_LIMIT,
                max_limit: PACED_MAX_LIMIT,
                capacity_blocks: staging_blocks,
            },
        ));
        let rounds = &rounds;
        let base = &base;
        let tasks = policies
            .iter()
            .map(|&(name, policy)| -> Task<'_, PolicyRow> {
                Box::new(move |progress: &mut dyn Progress| {
                    progress.start_phase(&format!("{name} ({})", policy_label(policy)), 1);
                    let outcome = run_replay(&ReplayConfig { policy, ..base.clone() }, rounds);
                    progress.advance(1);
                    Ok(policy_row(name, policy, outcome))
                })
            })
            .collect();
        let runs = run_all(usize::from(settings.params.jobs), tasks, progress)?;
        let simulated = SimulatedWork {
            updates: runs.iter().map(|row| row.outcome.foreground_requests).sum(),
            disk_ios: rounds.request_count(),
        };
        Ok(Rows {
            runs,
            captured_blocks: rounds.user_blocks(),
            captured_requests: rounds.request_count(),
            captured_rounds: rounds.round_count(),
            staging_blocks,
            simulated,
        })
    }

    fn render(settings: &PrioritySettingsResolved, rows: &Rows, cost: &WallCost) -> Rendered<Headline> {
        let headline = headline(rows);
        let files = vec![
            ("foreground_priority.csv", Artifact::Csv(table(&rows.runs))),
            ("foreground_priority.svg", Artifact::LineChart(chart(&headline.rows, settings))),
        ];
        let summary = summary(&headline, &cost.render(&rows.simulated));
        let report = report(settings, rows, &headline, &summary);
        Rendered { files, report, summary, headline }
    }

    fn describe(params: &ForegroundPriorityParams) -> String {
        format!(", {} simulation(s) at once", params.jobs)
    }
}

fn policy_label(policy: BackgroundPolicy) -> String {
    match policy {
        BackgroundPolicy::None => "idle array".into(),
        BackgroundPolicy::Fifo => "FIFO".into(),
        BackgroundPolicy::Fixed(limit) => format!("limit {limit}"),
        BackgroundPolicy::Paced { base_limit, max_limit, .. } => format!("paced {base_limit}..{max_limit}"),
    }
}

fn policy_row(name: &str, policy: BackgroundPolicy, outcome: ReplayOutcome) -> PolicyRow {
    let background_limit = match policy {
        BackgroundPolicy::None | BackgroundPolicy::Fifo => None,
        BackgroundPolicy::Fixed(limit) => Some(limit),
        BackgroundPolicy::Paced { base_limit, .. } => Some(base_limit),
    };
    let destaged_mb_s = outcome.destaged_blocks_per_s * BLOCK_SIZE_BYTES as f64 / 1e6;
    PolicyRow {
        policy: name.to_owned(),
        background_limit,
        system_mb_s: outcome.foreground_mb_s + destaged_mb_s,
        outcome,
    }
}

fn run_of<'a>(rows: &'a Rows, policy: &str) -> &'a PolicyRow {
    rows.runs.iter().find(|row| row.policy == policy).expect("every policy ran")
}

fn headline(rows: &Rows) -> Headline {
    let sweep = rows
        .runs
        .iter()
        .filter(|row| row.policy == "limit")
        .map(|row| SweepRow {
            background_limit: row.background_limit.expect("sweep rows have a limit"),
            system_mb_s: row.system_mb_s,
            foreground_mean_ms: row.outcome.foreground_mean_ms,
            foreground_p99_ms: row.outcome.foreground_p99_ms,
            foreground_mb_s: row.outcome.foreground_mb_s,
            destaged_blocks_per_s: row.outcome.destaged_blocks_per_s,
        })
        .collect();
    let paced = &run_of(rows, "paced").outcome;
    Headline {
        rows: sweep,
        default: DefaultPolicy {
            foreground_p99_ms: paced.foreground_p99_ms,
            idle_p99_ms: run_of(rows, "idle").outcome.foreground_p99_ms,
            destage_keeps_up: destage_keeps_up(paced, rows.staging_blocks),
            destaged_blocks_per_s: paced.destaged_blocks_per_s,
            staged_blocks_per_s: paced.staged_blocks_per_s,
            backlog_fraction_max: paced.backlog_fraction_max,
            backlog_growth_blocks: paced.backlog_growth_blocks,
            fifo_p99_ms: run_of(rows, "fifo").outcome.foreground_p99_ms,
        },
    }
}

/// Whether the paced destage keeps up with what the clients stage: the
/// staging area never filled, and at the rate the backlog grew over the
/// run's second half it would not fill within another run as long.
fn destage_keeps_up(paced: &ReplayOutcome, staging_blocks: u64) -> bool {
    let growth_per_run = 2 * paced.backlog_growth_blocks.max(0).unsigned_abs();
    paced.backlog_fraction_max < 1.0 && paced.backlog_end_blocks + growth_per_run < staging_blocks
}

fn table(runs: &[PolicyRow]) -> Table {
    let mut table = Table::new(&[
        "policy",
        "background_limit",
        "system_mb_s",
        "foreground_mb_s",
        "foreground_mean_ms",
        "foreground_p99_ms",
        "foreground_read_mean_ms",
        "foreground_read_p99_ms",
        "foreground_max_ms",
        "destaged_blocks_per_s",
        "staged_blocks_per_s",
        "background_device_mb_s",
        "starved_dispatches",
        "backlog_fraction_max",
    ]);
    for row in runs {
        let outcome = &row.outcome;
        table.push_row(vec![
            row.policy.clone(),
            row.background_limit.map_or_else(String::new, |limit| limit.to_string()),
            format!("{:.2}", row.system_mb_s),
            format!("{:.2}", outcome.foreground_mb_s),
            format!("{:.2}", outcome.foreground_mean_ms),
            format!("{:.2}", outcome.foreground_p99_ms),
            format!("{:.2}", outcome.foreground_read_mean_ms),
            format!("{:.2}", outcome.foreground_read_p99_ms),
            format!("{:.2}", outcome.foreground_max_ms),
            format!("{:.0}", outcome.destaged_blocks_per_s),
            format!("{:.0}", outcome.staged_blocks_per_s),
            format!("{:.2}", outcome.background_device_mb_s),
            outcome.starved_dispatches.to_string(),
            format!("{:.3}", outcome.backlog_fraction_max),
        ]);
    }
    table
}

fn chart(sweep: &[SweepRow], settings: &PrioritySettingsResolved) -> LineChart {
    let series = |name: &str, value: fn(&SweepRow) -> f64| Series {
        name: name.to_owned(),
        points: sweep.iter().map(|row| (row.system_mb_s, value(row))).collect(),
    };
    LineChart {
        title: format!(
            "Client latency against system throughput, background limit 1 → 32 ({}, 4+1 RAID-4)",
            settings.shape.model.name()
        ),
        x_label: "system throughput (MB/s)".into(),
        y_label: "client response time (ms)".into(),
        series: vec![series("mean", |row| row.foreground_mean_ms), series("p99", |row| row.foreground_p99_ms)],
    }
}

/// The growth of a sweep figure from its first row to its last.
fn growth(sweep: &[SweepRow], value: fn(&SweepRow) -> f64) -> f64 {
    match (sweep.first(), sweep.last()) {
        (Some(first), Some(last)) if value(first) > 0.0 => value(last) / value(first),
        _ => 0.0,
    }
}

fn summary(headline: &Headline, cost: &str) -> String {
    let sweep = &headline.rows;
    let default = &headline.default;
    format!(
        "limit {} → {}: system {:.1} → {:.1} MB/s, client mean ×{:.1}, p99 ×{:.1}; default policy p99 {:.1} ms against \
         {:.1} ms idle ({:.2}×), destage {} ({:.0} blocks/s staged, {:.0} destaged)\n{cost}\n",
        sweep.first().map_or(0, |row| row.background_limit),
        sweep.last().map_or(0, |row| row.background_limit),
        sweep.first().map_or(0.0, |row| row.system_mb_s),
        sweep.last().map_or(0.0, |row| row.system_mb_s),
        growth(sweep, |row| row.foreground_mean_ms),
        growth(sweep, |row| row.foreground_p99_ms),
        default.foreground_p99_ms,
        default.idle_p99_ms,
        ratio(default.foreground_p99_ms, default.idle_p99_ms),
        if default.destage_keeps_up { "keeps up" } else { "falls behind" },
        default.staged_blocks_per_s,
        default.destaged_blocks_per_s,
    )
}

fn report(settings: &PrioritySettingsResolved, rows: &Rows, headline: &Headline, summary: &str) -> String {
    let sweep = &headline.rows;
    let default = &headline.default;
    let mut report = String::new();
    let _ = writeln!(report, "# Foreground priority beside destage\n");
    let _ = writeln!(report, "`{}`\n\n{summary}", settings.command_line());
    let _ = writeln!(
        report,
        "The destage replayed is the engine's: {} staged blocks of random 4 KiB updates on a filled proximal \
         volume ({} staging blocks), destaged in {} member-disk requests submitted in {} rounds (the engine waits \
         for each round before the next: {:.1} requests per round, {:.1} per drive). {} clients, {} % reads, {} ms think \
         time; each drive holds {DRIVE_QUEUE_DEPTH} requests.\n",
        rows.captured_blocks,
        rows.staging_blocks,
        rows.captured_requests,
        rows.captured_rounds,
        ratio(rows.captured_requests as f64, rows.captured_rounds as f64),
        ratio(rows.captured_requests as f64, (rows.captured_rounds * (DATA_DISK_COUNT as u64 + 1)) as f64),
        settings.params.clients,
        settings.params.read_percent,
        settings.params.think_ms
    );
    let _ = writeln!(report, "{}", table(&rows.runs).to_markdown());
    let throughput_up = growth(sweep, |row| row.system_mb_s) > 1.0;
    let latency_growth = growth(sweep, |row| row.foreground_mean_ms);
    let p99_ratio = ratio(default.foreground_p99_ms, default.idle_p99_ms);
    let _ = writeln!(report, "| target | paper | ours | |\n| --- | --- | --- | --- |");
    let _ = writeln!(
        report,
        "| throughput rises as the limit relaxes | 223 → 345 MB/s | ×{:.2} | {} |",
        growth(sweep, |row| row.system_mb_s),
        verdict(throughput_up)
    );
    let _ = writeln!(
        report,
        "| client latency rises ≥ 10× | ×{PAPER_LATENCY_GROWTH:.0} (110 µs → 1771 µs) | mean ×{latency_growth:.1}, p99 \
         ×{:.1} | {} |",
        growth(sweep, |row| row.foreground_p99_ms),
        verdict(latency_growth >= 10.0)
    );
    let _ = writeln!(
        report,
        "| default policy: client p99 ≤ 2× idle | — | {:.1} / {:.1} ms = {p99_ratio:.2}× | {} |",
        default.foreground_p99_ms,
        default.idle_p99_ms,
        verdict(p99_ratio <= 2.0)
    );
    let _ = writeln!(
        report,
        "| default policy: destage keeps up | — | {:.0} staged, {:.0} destaged blocks/s; staging at most {:.0} % full, \
         backlog {:+} blocks over the second half | {} |",
        default.staged_blocks_per_s,
        default.destaged_blocks_per_s,
        default.backlog_fraction_max * 100.0,
        default.backlog_growth_blocks,
        verdict(default.destage_keeps_up)
    );
    let _ = writeln!(report, "\nFIFO (no priority) client p99: {:.1} ms.\n", default.fifo_p99_ms);
    let _ = writeln!(report, "![client latency against throughput](foreground_priority.svg)");
    report
}
