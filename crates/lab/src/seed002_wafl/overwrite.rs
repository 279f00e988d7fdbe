//! `reproduce wafl-overwrite`: the paper's random-overwrite test (Fig. 2,
//! seed 002 L136–L138). An aged volume (see [`super::rig`]) takes
//! `--writes` random 8 KiB overwrites, a CP after every
//! `--writes-per-checkpoint`; each overwrite frees the two blocks it
//! replaces, at random places. Reported per delete log: client IOPS over
//! the volume's virtual time (data writes and CPs), metadata blocks the CPs
//! wrote per user block written, and the CP duration distribution (mean,
//! p99, max).
//!
//! Writes `wafl_overwrite.csv`, `wafl_overwrite.svg` and `report.md`. The JSON
//! headline is `{"rows": [{"delete_log", "iops", "metadata_blocks_per_user_block",
//! "p99_cp_ms"}]}`.

use std::fmt::Write as _;

use proxima_engine::DeleteLogMode;
use serde::{Deserialize, Serialize};

use super::delete::check_fill_and_aging;
use super::rig::{percentile, WaflSpec, WaflVolume, OVERWRITE_BLOCKS};
use crate::experiment::{Experiment, RunSettings};
use crate::progress::Progress;
use crate::report::cost::{SimulatedWork, WallCost};
use crate::report::markdown::{verdict, Artifact, Rendered};
use crate::report::plot::GroupedBarChart;
use crate::report::table::Table;
use crate::rig::lab_volume::ArrayShape;
use crate::rig::measure::ratio;
use crate::rig::parallel::{run_all, Task};
use crate::rig::testbed::take_member_logs;
use crate::LabError;

/// The experiment's name on the command line.
pub const NAME: &str = "wafl-overwrite";

/// The `wafl-overwrite` experiment.
#[derive(Debug, Clone, Copy)]
pub struct WaflOverwrite;

/// The experiment's flags.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct OverwriteParams {
    /// Fraction of each drive the array uses.
    #[arg(long, default_value_t = 0.001)]
    pub scale: f64,
    /// Share of the array the extents fill.
    #[arg(long, default_value_t = 0.85)]
    pub fill: f64,
    /// Random 8 KiB overwrites per 8 KiB piece of data that age the volume first.
    #[arg(long, default_value_t = 1.0)]
    pub aging_writes_per_piece: f64,
    /// Measured random 8 KiB overwrites.
    #[arg(long, default_value_t = 40_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub writes: u64,
    /// Overwrites between two CPs.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub writes_per_checkpoint: u64,
    /// Independent simulations run at once, one per thread.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
}

/// The resolved settings.
#[derive(Debug, Clone)]
pub struct OverwriteSettings {
    shape: ArrayShape,
    model_name: String,
    params: OverwriteParams,
    seed: u64,
    out_dir: std::path::PathBuf,
    window_blocks_per_disk: u64,
}

impl OverwriteSettings {
    fn command_line(&self) -> String {
        format!(
            "proxima reproduce {NAME} --scale {} --fill {} --aging-writes-per-piece {} --writes {} \
             --writes-per-checkpoint {} --model {} --seed {} --out {}",
            self.params.scale,
            self.params.fill,
            self.params.aging_writes_per_piece,
            self.params.writes,
            self.params.writes_per_checkpoint,
            self.model_name,
            self.seed,
            self.out_dir.display()
        )
    }
}

/// One run's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverwriteRow {
    /// `none`, `tlog` or `bflog`.
    pub delete_log: String,
    /// Overwrites per second of virtual time.
    pub iops: f64,
    /// Metadata blocks CPs wrote per 4 KiB user block written.
    pub metadata_blocks_per_user_block: f64,
    /// Data-activemap blocks CPs wrote per user block written.
    pub activemap_blocks_per_user_block: f64,
    /// Delete-log nodes CPs wrote per user block written.
    pub delete_log_blocks_per_user_block: f64,
    /// Mean CP duration, ms.
    pub mean_cp_ms: f64,
    /// 99th-percentile CP duration, ms.
    pub p99_cp_ms: f64,
    /// Longest CP, ms.
    pub max_cp_ms: f64,
    /// Blocks waiting in the delete log at the end.
    pub delete_log_blocks_at_end: u64,
}

/// The measured rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rows {
    /// One per delete log.
    pub rows: Vec<OverwriteRow>,
    /// Overwrites that aged the volume first.
    pub aging_writes: u64,
    /// The array's capacity, blocks.
    pub capacity_blocks: u64,
    /// Simulated work, for the cost line.
    pub simulated: SimulatedWork,
}

/// The JSON headline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// One row per delete log.
    pub rows: Vec<HeadlineRow>,
}

/// A headline row: the contract's keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadlineRow {
    /// `none`, `tlog` or `bflog`.
    pub delete_log: String,
    /// Client IOPS.
    pub iops: f64,
    /// Metadata blocks per user block.
    pub metadata_blocks_per_user_block: f64,
    /// 99th-percentile CP duration, ms.
    pub p99_cp_ms: f64,
}

impl Experiment for WaflOverwrite {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str =
        "WAFL delete logging (FAST'17 Fig. 2): random 8 KiB overwrites of an aged volume, IOPS and metadata per block";
    const DEFAULT_MODEL: &'static str = "nearline7200";
    type Params = OverwriteParams;
    type Settings = OverwriteSettings;
    type Rows = Rows;
    type Headline = Headline;

    fn settings(run: &RunSettings, params: &OverwriteParams) -> Result<OverwriteSettings, LabError> {
        let shape = ArrayShape::for_model(&run.model)?;
        let window_blocks_per_disk = shape.window_blocks_per_disk(params.scale)?;
        check_fill_and_aging(params.fill, params.aging_writes_per_piece)?;
        Ok(OverwriteSettings {
            shape,
            model_name: run.model.clone(),
            params: params.clone(),
            seed: run.seed,
            out_dir: run.out_dir.clone(),
            window_blocks_per_disk,
        })
    }

    fn measure(settings: &OverwriteSettings, progress: &mut dyn Progress) -> Result<Rows, LabError> {
        let tasks = DeleteLogMode::ALL
            .into_iter()
            .map(|mode| -> Task<'_, (OverwriteRow, u64, u64)> {
                Box::new(move |progress: &mut dyn Progress| run_one(settings, mode, progress))
            })
            .collect();
        let outcomes = run_all(usize::from(settings.params.jobs), tasks, progress)?;
        let mut rows =
            Rows { rows: Vec::new(), aging_writes: 0, capacity_blocks: 0, simulated: SimulatedWork::default() };
        for (row, aging_writes, capacity_blocks) in outcomes {
            rows.aging_writes = aging_writes;
            rows.capacity_blocks = capacity_blocks;
            rows.simulated.updates += aging_writes + settings.params.writes;
            rows.rows.push(row);
        }
        Ok(rows)
    }

    fn render(settings: &OverwriteSettings, rows: &Rows, cost: &WallCost) -> Rendered<Headline> {
        let files = vec![
            ("wafl_overwrite.csv", Artifact::Csv(table(&rows.rows))),
            ("wafl_overwrite.svg", Artifact::BarChart(chart(&rows.rows, settings))),
        ];
        let summary = summary(&rows.rows, &cost.render(&rows.simulated));
        let report = report(settings, rows, &summary);
        let headline = Headline {
            rows: rows
                .rows
                .iter()
                .map(|row| HeadlineRow {
                    delete_log: row.delete_log.clone(),
                    iops: row.iops,
                    metadata_blocks_per_user_block: row.metadata_blocks_per_user_block,
                    p99_cp_ms: row.p99_cp_ms,
                })
                .collect(),
        };
        Rendered { files, report, summary, headline }
    }

    fn describe(params: &OverwriteParams) -> String {
        format!(", {} simulation(s) at once", params.jobs)
    }
}

fn run_one(
    settings: &OverwriteSettings,
    mode: DeleteLogMode,
    progress: &mut dyn Progress,
) -> Result<(OverwriteRow, u64, u64), LabError> {
    let label = mode.name();
    let spec = WaflSpec {
        shape: settings.shape.clone(),
        window_blocks_per_disk: settings.window_blocks_per_disk,
        fill: settings.params.fill,
        aging_writes_per_piece: settings.params.aging_writes_per_piece,
        delete_log: mode,
        seed: settings.seed,
    };
    let mut wafl = WaflVolume::create(&spec, label, progress)?;
    let writes = settings.params.writes;
    let per_checkpoint = settings.params.writes_per_checkpoint;
    let before = wafl.volume.stats().clone();
    let started = wafl.now_ns();
    let mut checkpoint_ms = Vec::new();
    progress.start_phase(&format!("overwriting ({label})"), writes);
    for index in 0..writes {
        wafl.overwrite_one()?;
        let last = index + 1 == writes;
        if (index + 1).is_multiple_of(per_checkpoint) || last {
            take_member_logs(wafl.volume.data_device_mut());
            checkpoint_ms.push(wafl.timed_commit()? as f64 / 1e6);
            progress.advance(if last { writes - index / per_checkpoint * per_checkpoint } else { per_checkpoint });
        }
    }
    let elapsed_ns = wafl.now_ns() - started;
    let after = wafl.volume.stats().clone();
    let user_blocks = (writes * OVERWRITE_BLOCKS) as f64;
    let row = OverwriteRow {
        delete_log: mode.name().to_owned(),
        iops: ratio(writes as f64 * 1e9, elapsed_ns as f64),
        metadata_blocks_per_user_block: ratio(
            (after.checkpoint_blocks_written - before.checkpoint_blocks_written) as f64,
            user_blocks,
        ),
        activemap_blocks_per_user_block: ratio(
            (after.data_activemap_blocks_written - before.data_activemap_blocks_written) as f64,
            user_blocks,
        ),
        delete_log_blocks_per_user_block: ratio(
            (after.delete_log_blocks_written - before.delete_log_blocks_written) as f64,
            user_blocks,
        ),
        mean_cp_ms: ratio(checkpoint_ms.iter().sum::<f64>(), checkpoint_ms.len() as f64),
        p99_cp_ms: percentile(&checkpoint_ms, 99.0),
        max_cp_ms: checkpoint_ms.iter().copied().fold(0.0, f64::max),
        delete_log_blocks_at_end: wafl.volume.delete_log_blocks(),
    };
    let capacity_blocks = wafl.volume.space().data.block_count;
    Ok((row, wafl.aging_writes, capacity_blocks))
}

fn table(rows: &[OverwriteRow]) -> Table {
    let mut table = Table::new(&[
        "delete_log",
        "iops",
        "metadata_blocks_per_user_block",
        "activemap_blocks_per_user_block",
        "delete_log_blocks_per_user_block",
        "mean_cp_ms",
        "p99_cp_ms",
        "max_cp_ms",
        "delete_log_blocks_at_end",
    ]);
    for row in rows {
        table.push_row(vec![
            row.delete_log.clone(),
            format!("{:.1}", row.iops),
            format!("{:.4}", row.metadata_blocks_per_user_block),
            format!("{:.4}", row.activemap_blocks_per_user_block),
            format!("{:.4}", row.delete_log_blocks_per_user_block),
            format!("{:.3}", row.mean_cp_ms),
            format!("{:.3}", row.p99_cp_ms),
            format!("{:.3}", row.max_cp_ms),
            row.delete_log_blocks_at_end.to_string(),
        ]);
    }
    table
}

fn chart(rows: &[OverwriteRow], settings: &OverwriteSettings) -> GroupedBarChart {
    GroupedBarChart {
        title: format!("Metadata per user block, random 8 KiB overwrites ({})", settings.shape.model.name()),
        x_label: "delete log".into(),
        y_label: "metadata blocks per user block".into(),
        categories: rows.iter().map(|row| row.delete_log.clone()).collect(),
        series: vec![
            ("all metadata".into(), rows.iter().map(|row| row.metadata_blocks_per_user_block).collect()),
            ("data activemap".into(), rows.iter().map(|row| row.activemap_blocks_per_user_block).collect()),
        ],
    }
}

fn summary(rows: &[OverwriteRow], cost: &str) -> String {
    let mut text = format!(
        "{:<8} {:>10} {:>16} {:>16} {:>10} {:>10}\n",
        "log", "IOPS", "metadata/block", "activemap/block", "p99 CP", "max CP"
    );
    for row in rows {
        let _ = writeln!(
            text,
            "{:<8} {:>10.1} {:>16.4} {:>16.4} {:>10.3} {:>10.3}",
            row.delete_log,
            row.iops,
            row.metadata_blocks_per_user_block,
            row.activemap_blocks_per_user_block,
            row.p99_cp_ms,
            row.max_cp_ms
        );
    }
    text.push_str(cost);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// `(metadata reduction with BFLog, IOPS gain with BFLog)` against no log.
pub fn target_figures(rows: &[OverwriteRow]) -> (f64, f64) {
    let find = |mode: DeleteLogMode| rows.iter().find(|row| row.delete_log == mode.name());
    let metadata = |mode| find(mode).map_or(0.0, |row: &OverwriteRow| row.metadata_blocks_per_user_block);
    let iops = |mode| find(mode).map_or(0.0, |row: &OverwriteRow| row.iops);
    (
        1.0 - ratio(metadata(DeleteLogMode::Batched), metadata(DeleteLogMode::None)),
        ratio(iops(DeleteLogMode::Batched), iops(DeleteLogMode::None)) - 1.0,
    )
}

fn report(settings: &OverwriteSettings, rows: &Rows, summary: &str) -> String {
    let mut text = String::from("# WAFL random overwrites (seed 002, FAST'17 Fig. 2)\n\n");
    let _ = writeln!(text, "Command: `{}`  ", settings.command_line());
    let _ = writeln!(
        text,
        "Array: 4+1 RAID-4 of {} ({} blocks), metadata on its simulated flash, write-anywhere layout, filled to \
         {} % with 16 MiB extents and aged by {} random 8 KiB overwrites; then {} measured overwrites, a CP \
         every {}, one at a time.\n",
        settings.shape.model.name(),
        rows.capacity_blocks,
        settings.params.fill * 100.0,
        rows.aging_writes,
        settings.params.writes,
        settings.params.writes_per_checkpoint
    );
    text.push_str(
        "*Metadata blocks* are every block the CPs wrote (maps, tables, bitmaps, checksums, delete-log nodes, \
         superblocks); IOPS count the volume's virtual time, data writes and CPs.\n\n",
    );
    text.push_str("| delete log | IOPS | metadata blocks/user block | activemap blocks/user block | log blocks/user block | mean CP ms | p99 CP ms | max CP ms |\n");
    text.push_str("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for row in &rows.rows {
        let _ = writeln!(
            text,
            "| {} | {:.1} | {:.4} | {:.4} | {:.4} | {:.3} | {:.3} | {:.3} |",
            row.delete_log,
            row.iops,
            row.metadata_blocks_per_user_block,
            row.activemap_blocks_per_user_block,
            row.delete_log_blocks_per_user_block,
            row.mean_cp_ms,
            row.p99_cp_ms,
            row.max_cp_ms
        );
    }
    let (metadata_drop, iops_gain) = target_figures(&rows.rows);
    text.push_str("\n## Against the paper\n\n");
    let _ = writeln!(
        text,
        "- metadata blocks per user block fall ≥ 65 % with BFLog (paper: 65 %): {:.1} % — {}",
        metadata_drop * 100.0,
        verdict(metadata_drop >= 0.65)
    );
    let _ = writeln!(
        text,
        "- client IOPS rise ≥ 17 % with BFLog on the aged volume (paper: +17 %): {:+.1} % — {}\n",
        iops_gain * 100.0,
        verdict(iops_gain >= 0.17)
    );
    text.push_str("```text\n");
    text.push_str(summary);
    text.push_str("```\n");
    text
}
