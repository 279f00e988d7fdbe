//! `reproduce wafl-delete`: the paper's delete-throughput test (Fig. 3,
//! seed 002 L140–L146). A volume is filled with 16 MiB extents (and, aged,
//! overwritten at random 8 KiB pieces); then four of every five extents are
//! deleted, as WAFL deletes a file: the extent shrinks from its end by
//! `--frees-per-checkpoint` blocks per CP (the hidden file freed
//! incrementally), then goes. With a delete log, the volume then reclaims
//! what the log still holds, the same number of blocks' worth of log work
//! per CP. The figure is blocks returned to the activemap per second of the
//! volume's (virtual) time, and the longest CP; beside it the activemap
//! blocks each freed block cost, and each CP.
//!
//! Runs: none, tlog and bflog, each unaged and aged.
//!
//! Writes `wafl_delete.csv`, `wafl_delete.svg` and `report.md`. The JSON
//! headline is `{"rows": [{"delete_log", "aged", "blocks_freed_per_second",
//! "worst_cp_ms"}]}`.

use std::fmt::Write as _;

use proxima_engine::DeleteLogMode;
use proxima_workload::srarw::EXTENT_BLOCKS;
use serde::{Deserialize, Serialize};

use super::rig::{WaflSpec, WaflVolume};
use crate::experiment::{Experiment, RunSettings};
use crate::progress::Progress;
use crate::report::cost::{SimulatedWork, WallCost};
use crate::report::markdown::{verdict, Artifact, Rendered};
use crate::report::plot::GroupedBarChart;
use crate::report::table::Table;
use crate::rig::lab_volume::ArrayShape;
use crate::rig::measure::ratio;
use crate::rig::parallel::{run_all, Task};
use crate::rig::testbed::BLOCK_SIZE_BYTES;
use crate::LabError;

/// The experiment's name on the command line.
pub const NAME: &str = "wafl-delete";

/// The `wafl-delete` experiment.
#[derive(Debug, Clone, Copy)]
pub struct WaflDelete;

/// One extent in this many is kept; the others are deleted.
const KEEP_EVERY: usize = 5;

/// The experiment's flags.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct DeleteParams {
    /// Fraction of each drive the array uses.
    #[arg(long, default_value_t = 0.001)]
    pub scale: f64,
    /// Share of the array the extents fill.
    #[arg(long, default_value_t = 0.85)]
    pub fill: f64,
    /// Random 8 KiB overwrites per 8 KiB piece of data that age a volume.
    #[arg(long, default_value_t = 1.0)]
    pub aging_writes_per_piece: f64,
    /// Blocks the background delete frees (or the log's idle work handles) per CP.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub frees_per_checkpoint: u64,
    /// Independent simulations run at once, one per thread.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
}

/// The resolved settings.
#[derive(Debug, Clone)]
pub struct DeleteSettings {
    shape: ArrayShape,
    model_name: String,
    params: DeleteParams,
    seed: u64,
    out_dir: std::path::PathBuf,
    window_blocks_per_disk: u64,
}

impl DeleteSettings {
    fn command_line(&self) -> String {
        format!(
            "proxima reproduce {NAME} --scale {} --fill {} --aging-writes-per-piece {} --frees-per-checkpoint {} \
             --model {} --seed {} --out {}",
            self.params.scale,
            self.params.fill,
            self.params.aging_writes_per_piece,
            self.params.frees_per_checkpoint,
            self.model_name,
            self.seed,
            self.out_dir.display()
        )
    }
}

/// One run's figures (the headline's row, and more).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeleteRow {
    /// `none`, `tlog` or `bflog`.
    pub delete_log: String,
    /// Whether the volume was aged before the delete.
    pub aged: bool,
    /// Blocks returned to the activemap per second of virtual time.
    pub blocks_freed_per_second: f64,
    /// The longest CP of the delete, ms.
    pub worst_cp_ms: f64,
    /// Blocks returned to the activemap.
    pub freed_blocks: u64,
    /// CPs the delete took.
    pub checkpoints: u64,
    /// Data-activemap blocks written per block freed.
    pub activemap_blocks_per_freed_block: f64,
    /// Data-activemap blocks written per CP.
    pub activemap_blocks_per_checkpoint: f64,
    /// Metadata blocks (every kind, delete-log nodes included) written per block freed.
    pub metadata_blocks_per_freed_block: f64,
    /// Delete-log nodes written per block freed.
    pub delete_log_blocks_per_freed_block: f64,
}

/// The measured rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rows {
    /// Every run, in run order.
    pub rows: Vec<DeleteRow>,
    /// Extents filled and deleted, and the array's capacity in blocks.
    pub extent_count: u64,
    /// Extents deleted.
    pub deleted_extent_count: u64,
    /// The array's capacity, blocks.
    pub capacity_blocks: u64,
    /// Overwrites that aged each aged volume.
    pub aging_writes: u64,
    /// Simulated work, for the cost line.
    pub simulated: SimulatedWork,
}

/// The JSON headline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// One row per run.
    pub rows: Vec<HeadlineRow>,
}

/// A headline row: the contract's keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadlineRow {
    /// `none`, `tlog` or `bflog`.
    pub delete_log: String,
    /// Whether the volume was aged.
    pub aged: bool,
    /// Blocks freed per second.
    pub blocks_freed_per_second: f64,
    /// The longest CP, ms.
    pub worst_cp_ms: f64,
}

impl Experiment for WaflDelete {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str =
        "WAFL delete logging (FAST'17 Fig. 3): blocks freed per second after deleting most of a volume, unaged and aged";
    const DEFAULT_MODEL: &'static str = "nearline7200";
    type Params = DeleteParams;
    type Settings = DeleteSettings;
    type Rows = Rows;
    type Headline = Headline;

    fn settings(run: &RunSettings, params: &DeleteParams) -> Result<DeleteSettings, LabError> {
        let shape = ArrayShape::for_model(&run.model)?;
        let window_blocks_per_disk = shape.window_blocks_per_disk(params.scale)?;
        check_fill_and_aging(params.fill, params.aging_writes_per_piece)?;
        Ok(DeleteSettings {
            shape,
            model_name: run.model.clone(),
            params: params.clone(),
            seed: run.seed,
            out_dir: run.out_dir.clone(),
            window_blocks_per_disk,
        })
    }

    fn measure(settings: &DeleteSettings, progress: &mut dyn Progress) -> Result<Rows, LabError> {
        let runs: Vec<(DeleteLogMode, bool)> =
            DeleteLogMode::ALL.iter().flat_map(|&mode| [(mode, false), (mode, true)]).collect();
        let tasks = runs
            .into_iter()
            .map(|(mode, aged)| -> Task<'_, RunOutcome> {
                Box::new(move |progress: &mut dyn Progress| run_one(settings, mode, aged, progress))
            })
            .collect();
        let outcomes = run_all(usize::from(settings.params.jobs), tasks, progress)?;
        let mut rows = Rows {
            rows: Vec::new(),
            extent_count: 0,
            deleted_extent_count: 0,
            capacity_blocks: 0,
            aging_writes: 0,
            simulated: SimulatedWork::default(),
        };
        for outcome in outcomes {
            rows.extent_count = outcome.extent_count;
            rows.deleted_extent_count = outcome.deleted_extent_count;
            rows.capacity_blocks = outcome.capacity_blocks;
            rows.aging_writes = rows.aging_writes.max(outcome.aging_writes);
            rows.simulated.updates += outcome.aging_writes;
            rows.rows.push(outcome.row);
        }
        Ok(rows)
    }

    fn render(settings: &DeleteSettings, rows: &Rows, cost: &WallCost) -> Rendered<Headline> {
        let files = vec![
            ("wafl_delete.csv", Artifact::Csv(table(&rows.rows))),
            ("wafl_delete.svg", Artifact::BarChart(chart(&rows.rows, settings))),
        ];
        let summary = summary(&rows.rows, &cost.render(&rows.simulated));
        let report = report(settings, rows, &summary);
        let headline = Headline {
            rows: rows
                .rows
                .iter()
                .map(|row| HeadlineRow {
                    delete_log: row.delete_log.clone(),
                    aged: row.aged,
                    blocks_freed_per_second: row.blocks_freed_per_second,
                    worst_cp_ms: row.worst_cp_ms,
                })
                .collect(),
        };
        Rendered { files, report, summary, headline }
    }

    fn describe(params: &DeleteParams) -> String {
        format!(", {} simulation(s) at once", params.jobs)
    }
}

/// Checks the shared flags of both WAFL experiments.
pub(crate) fn check_fill_and_aging(fill: f64, aging_writes_per_piece: f64) -> Result<(), LabError> {
    if !(fill > 0.0 && fill <= 0.95) {
        let message = format!("{fill} is not in (0, 0.95]");
        return Err(LabError::InvalidParameter { parameter: "fill", message });
    }
    if !(0.0..=20.0).contains(&aging_writes_per_piece) {
        let message = format!("{aging_writes_per_piece} is not in [0, 20]");
        return Err(LabError::InvalidParameter { parameter: "aging-writes-per-piece", message });
    }
    Ok(())
}

struct RunOutcome {
    row: DeleteRow,
    extent_count: u64,
    deleted_extent_count: u64,
    capacity_blocks: u64,
    aging_writes: u64,
}

fn run_label(mode: DeleteLogMode, aged: bool) -> String {
    format!("{}, {}", mode.name(), if aged { "aged" } else { "unaged" })
}

fn run_one(
    settings: &DeleteSettings,
    mode: DeleteLogMode,
    aged: bool,
    progress: &mut dyn Progress,
) -> Result<RunOutcome, LabError> {
    let label = run_label(mode, aged);
    let spec = WaflSpec {
        shape: settings.shape.clone(),
        window_blocks_per_disk: settings.window_blocks_per_disk,
        fill: settings.params.fill,
        aging_writes_per_piece: if aged { settings.params.aging_writes_per_piece } else { 0.0 },
        delete_log: mode,
        seed: settings.seed,
    };
    let mut wafl = WaflVolume::create(&spec, &label, progress)?;
    let step_blocks = settings.params.frees_per_checkpoint;
    let doomed: Vec<String> = wafl
        .extents
        .iter()
        .enumerate()
        .filter(|(index, _)| index % KEEP_EVERY != KEEP_EVERY - 1)
        .map(|(_, (_, name))| name.clone())
        .collect();
    let before = wafl.volume.stats().clone();
    let mut durations_ns: Vec<u64> = Vec::new();
    progress.start_phase(&format!("deleting ({label})"), doomed.len() as u64);
    for name in &doomed {
        let mut size_blocks = EXTENT_BLOCKS;
        while size_blocks > 0 {
            size_blocks = size_blocks.saturating_sub(step_blocks);
            let started = wafl.now_ns();
            if size_blocks > 0 {
                wafl.volume.resize_extent(name, size_blocks * BLOCK_SIZE_BYTES)?;
            } else {
                wafl.volume.delete_extent(name)?;
            }
            durations_ns.push(wafl.now_ns() - started);
        }
        progress.advance(1);
    }
    // The otherwise idle volume reclaims what its delete log still holds.
    while wafl.volume.delete_log_blocks() > 0 {
        let started = wafl.now_ns();
        wafl.volume.reclaim_delete_log(step_blocks)?;
        wafl.volume.commit()?;
        durations_ns.push(wafl.now_ns() - started);
    }
    let after = wafl.volume.stats().clone();
    let freed = after.data_blocks_freed - before.data_blocks_freed;
    let checkpoints = after.checkpoint_count - before.checkpoint_count;
    let elapsed_ns: u64 = durations_ns.iter().sum();
    let per_freed = |value: u64| ratio(value as f64, freed as f64);
    let activemap = after.data_activemap_blocks_written - before.data_activemap_blocks_written;
    let row = DeleteRow {
        delete_log: mode.name().to_owned(),
        aged,
        blocks_freed_per_second: ratio(freed as f64 * 1e9, elapsed_ns as f64),
        worst_cp_ms: durations_ns.iter().copied().max().unwrap_or(0) as f64 / 1e6,
        freed_blocks: freed,
        checkpoints,
        activemap_blocks_per_freed_block: per_freed(activemap),
        activemap_blocks_per_checkpoint: ratio(activemap as f64, checkpoints as f64),
        metadata_blocks_per_freed_block: per_freed(after.checkpoint_blocks_written - before.checkpoint_blocks_written),
        delete_log_blocks_per_freed_block: per_freed(
            after.delete_log_blocks_written - before.delete_log_blocks_written,
        ),
    };
    let capacity_blocks = wafl.volume.space().data.block_count;
    Ok(RunOutcome {
        row,
        extent_count: wafl.extents.len() as u64,
        deleted_extent_count: doomed.len() as u64,
        capacity_blocks,
        aging_writes: wafl.aging_writes,
    })
}

fn table(rows: &[DeleteRow]) -> Table {
    let mut table = Table::new(&[
        "delete_log",
        "aged",
        "blocks_freed_per_second",
        "worst_cp_ms",
        "freed_blocks",
        "checkpoints",
        "activemap_blocks_per_freed_block",
        "activemap_blocks_per_checkpoint",
        "metadata_blocks_per_freed_block",
        "delete_log_blocks_per_freed_block",
    ]);
    for row in rows {
        table.push_row(vec![
            row.delete_log.clone(),
            row.aged.to_string(),
            format!("{:.0}", row.blocks_freed_per_second),
            format!("{:.3}", row.worst_cp_ms),
            row.freed_blocks.to_string(),
            row.checkpoints.to_string(),
            format!("{:.4}", row.activemap_blocks_per_freed_block),
            format!("{:.2}", row.activemap_blocks_per_checkpoint),
            format!("{:.4}", row.metadata_blocks_per_freed_block),
            format!("{:.4}", row.delete_log_blocks_per_freed_block),
        ]);
    }
    table
}

fn chart(rows: &[DeleteRow], settings: &DeleteSettings) -> GroupedBarChart {
    let categories: Vec<String> = DeleteLogMode::ALL.iter().map(|mode| mode.name().to_owned()).collect();
    let series = [false, true]
        .into_iter()
        .map(|aged| {
            let values = DeleteLogMode::ALL
                .iter()
                .map(|mode| find(rows, mode.name(), aged).map_or(0.0, |row| row.blocks_freed_per_second))
                .collect();
            ((if aged { "aged" } else { "unaged" }).to_owned(), values)
        })
        .collect();
    GroupedBarChart {
        title: format!("Delete throughput ({}, 4+1 RAID-4, metadata on flash)", settings.shape.model.name()),
        x_label: "delete log".into(),
        y_label: "blocks freed per second".into(),
        categories,
        series,
    }
}

fn find<'a>(rows: &'a [DeleteRow], mode: &str, aged: bool) -> Option<&'a DeleteRow> {
    rows.iter().find(|row| row.delete_log == mode && row.aged == aged)
}

fn summary(rows: &[DeleteRow], cost: &str) -> String {
    let mut text = format!(
        "{:<16} {:>14} {:>12} {:>16} {:>16}\n",
        "run", "freed/s", "worst CP ms", "activemap/freed", "metadata/freed"
    );
    for row in rows {
        let _ = writeln!(
            text,
            "{:<16} {:>14.0} {:>12.3} {:>16.4} {:>16.4}",
            format!("{}, {}", row.delete_log, if row.aged { "aged" } else { "unaged" }),
            row.blocks_freed_per_second,
            row.worst_cp_ms,
            row.activemap_blocks_per_freed_block,
            row.metadata_blocks_per_freed_block
        );
    }
    text.push_str(cost);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// The targets' figures: `(aging cost without a log, BFLog aged against
/// unaged, BFLog unaged over none unaged)`.
pub fn target_figures(rows: &[DeleteRow]) -> (f64, f64, f64) {
    let rate = |mode: DeleteLogMode, aged| find(rows, mode.name(), aged).map_or(0.0, |row| row.blocks_freed_per_second);
    let aging_cost = 1.0 - ratio(rate(DeleteLogMode::None, true), rate(DeleteLogMode::None, false));
    let bflog_gap = 1.0 - ratio(rate(DeleteLogMode::Batched, true), rate(DeleteLogMode::Batched, false));
    let bflog_gain = ratio(rate(DeleteLogMode::Batched, false), rate(DeleteLogMode::None, false));
    (aging_cost, bflog_gap, bflog_gain)
}

fn report(settings: &DeleteSettings, rows: &Rows, summary: &str) -> String {
    let mut text = String::from("# WAFL delete throughput (seed 002, FAST'17 Fig. 3)\n\n");
    let _ = writeln!(text, "Command: `{}`  ", settings.command_line());
    let _ = writeln!(
        text,
        "Array: 4+1 RAID-4 of {} ({} blocks), metadata on its simulated flash, write-anywhere layout. {} extents \
         of 16 MiB ({} % of the array); {} of them deleted, {} blocks per CP; aged runs first overwrite {} random \
         8 KiB pieces.\n",
        settings.shape.model.name(),
        rows.capacity_blocks,
        rows.extent_count,
        settings.params.fill * 100.0,
        rows.deleted_extent_count,
        settings.params.frees_per_checkpoint,
        rows.aging_writes
    );
    text.push_str(
        "*Freed* is a block returned to the activemap (freed directly, or punched from the delete log); the \
         time is the volume's virtual time from the first shrink to the CP that empties the log.\n\n",
    );
    text.push_str("| delete log | aged | blocks freed/s | worst CP ms | activemap blocks/freed | activemap blocks/CP | metadata blocks/freed | log blocks/freed |\n");
    text.push_str("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for row in &rows.rows {
        let _ = writeln!(
            text,
            "| {} | {} | {:.0} | {:.3} | {:.4} | {:.2} | {:.4} | {:.4} |",
            row.delete_log,
            row.aged,
            row.blocks_freed_per_second,
            row.worst_cp_ms,
            row.activemap_blocks_per_freed_block,
            row.activemap_blocks_per_checkpoint,
            row.metadata_blocks_per_freed_block,
            row.delete_log_blocks_per_freed_block
        );
    }
    let (aging_cost, bflog_gap, bflog_gain) = target_figures(&rows.rows);
    let rate =
        |mode: DeleteLogMode, aged| find(&rows.rows, mode.name(), aged).map_or(0.0, |row| row.blocks_freed_per_second);
    let tlog_between = |aged| {
        let (none, tlog, bflog) =
            (rate(DeleteLogMode::None, aged), rate(DeleteLogMode::Tree, aged), rate(DeleteLogMode::Batched, aged));
        tlog >= none.min(bflog) && tlog <= none.max(bflog)
    };
    text.push_str("\n## Against the paper\n\n");
    let _ = writeln!(
        text,
        "- without a log, aging costs ≥ 40 % of delete throughput (paper: 40 % on SSD): {:.1} % — {}",
        aging_cost * 100.0,
        verdict(aging_cost >= 0.40)
    );
    let _ = writeln!(
        text,
        "- with BFLog, the aged volume within 6 % of the unaged one (paper: 6 %): {:.1} % — {}",
        bflog_gap * 100.0,
        verdict(bflog_gap <= 0.06)
    );
    let _ = writeln!(
        text,
        "- BFLog unaged ≥ 1.06× no log unaged (paper: +6 %): {bflog_gain:.2}× — {}",
        verdict(bflog_gain >= 1.06)
    );
    let _ = writeln!(
        text,
        "- TLog between no log and BFLog, unaged and aged: {}",
        verdict(tlog_between(false) && tlog_between(true))
    );
    let worst = |mode: DeleteLogMode, aged| find(&rows.rows, mode.name(), aged).map_or(0.0, |row| row.worst_cp_ms);
    let _ = writeln!(
        text,
        "- worst CP, aged: TLog {:.3} ms beside BFLog {:.3} ms (no log {:.3} ms)\n",
        worst(DeleteLogMode::Tree, true),
        worst(DeleteLogMode::Batched, true),
        worst(DeleteLogMode::None, true)
    );
    text.push_str("```text\n");
    text.push_str(summary);
    text.push_str("```\n");
    text
}
