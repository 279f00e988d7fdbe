//! `reproduce proximal-snapshots`: what keeping snapshots costs each layout of
//! `proximal-srarw` while the SRARW workload ages it, and how fast the live
//! data and the oldest kept snapshot read serially afterwards (the proximal
//! I/O paper's Sections 1 and 6 on copy-on-write and snapshots).
//!
//! Every layout of [`srarw`](crate::seed000_proximal::srarw) (`proximal`,
//! `in_place`, `in_place_cached`, `write_anywhere`) runs the workload of
//! [`proxima_workload::srarw`] on the laboratory's volume
//! ([`LabVolume`]): filled, every extent read (fresh), aged by 2000 random
//! 4 KiB updates per extent, every extent read again (live, aged) — and, when
//! snapshots were taken, every extent of the oldest snapshot still kept
//! (snapshot, aged), with [`proxima_engine::Volume::read_snapshot_blocks_synthetic`].
//!
//! **The snapshot schedule.** A snapshot of the whole volume is taken every
//! `N` random updates per extent (every `N × extents` updates of the volume,
//! the first before the first update, so it holds the fresh layout); right
//! after each, the oldest snapshots beyond the last `K` are deleted and their
//! deletion scans run to the end, within the aging, whose figures include
//! whatever disk I/O that causes. `N` is a fraction of the aging's 2000 updates
//! per extent, which is the same at every `--scale` (a smaller scale has fewer
//! extents, not fewer updates per extent), so the number of snapshots over the
//! aging and the share of an extent's blocks updated between two of them do
//! not depend on the scale:
//!
//! - `none`: no snapshot (`proximal-srarw`'s workload, on the same array as
//!   the other intervals: see the reserve below);
//! - `rare`, the "hourly-like" interval: `N` = 500, a quarter of the aging, 4
//!   snapshots;
//! - `frequent`: `N` = 50, a fortieth of the aging, 40 snapshots.
//!
//! `K` is `--keep`, 3 by default: the rare schedule then deletes one snapshot
//! and keeps the one taken after 500 updates per extent, 1500 updates per
//! extent behind the live data (about 31 % of an extent's blocks differ:
//! 1 − e^(−1500/4096)); the frequent one deletes 37 and keeps one 150 updates
//! per extent behind (about 3.6 % differ).
//!
//! **The snapshot reserve.** A kept snapshot holds the versions later updates
//! replaced, at most one block per update, so the kept snapshots hold at most
//! `K × N` blocks per extent (at most the aging's 2000): 1500 for the rare
//! interval with `K` = 3. `proximal-srarw`'s fill (89 % of the array) leaves
//! about 506 free blocks per extent, so every run here — the `none` runs too,
//! so that all compare the same extents and updates — has fewer extents: the
//! extents and that reserve together fill 89 %. `--reserve` says where the
//! reserve lies: `ranges` (the default) leaves its share of every allocation
//! range free at first write, which the paper proposes for "future updates
//! and write-anywhere-style snapshots" (Section 4) and which keeps room for new
//! versions near the old ones; `end` fills each range and leaves the reserve
//! as empty ranges after the extents. `--range-reserve N` keeps only `N`
//! blocks per extent of it in the ranges and the rest after the extents, for
//! the trade the paper names: room for new versions near the old ones
//! against "a corresponding fraction of serial bandwidth".
//!
//! For the `none` rows the snapshot figures are absent: `null` in the JSON
//! headline, an empty cell in the CSV, `—` in the report's tables, no bar in
//! the reads plot.
//!
//! Writes `snapshots.csv`, `snapshots_ios_per_update.svg`,
//! `snapshots_throughput.svg`, `snapshots_reads.svg` and `report.md`. The JSON
//! headline is `{"rows": [{"layout", "interval", "snapshot_every",
//! "snapshots_taken", "random_update_iops", "disk_ios_per_update",
//! "live_aged_to_fresh", "snapshot_aged_to_fresh"}]}`, one row per layout and
//! interval; `snapshot_every` is `N` (`null` for `none`).

use std::fmt::Write as _;

use proxima_workload::srarw::{EXTENT_BLOCKS, FILL_FRACTION, UPDATES_PER_EXTENT};
use serde::{Deserialize, Serialize};

use crate::experiment::{Experiment, RunSettings};
use crate::progress::Progress;
use crate::report::cost::{SimulatedWork, WallCost};
use crate::report::markdown::{Artifact, Rendered};
use crate::report::plot::GroupedBarChart;
use crate::report::table::Table;
use crate::rig::lab_volume::{BetweenUpdates, LabVolume, ReadFigures, RunSpec};
use crate::rig::measure::ratio;
use crate::rig::parallel::{run_all, Task};
use crate::seed000_proximal::layout::{
    report_header_filling, LayoutParams, LayoutSettings, DEFAULT_MODEL, DEFINITIONS,
};
use crate::seed000_proximal::paper;
use crate::seed000_proximal::srarw::{Candidate, CANDIDATES};

use crate::seed000_proximal::table3::{fresh_and_aged_reads, read_age_and_read, AgedReads};
use crate::LabError;

/// The experiment's name on the command line.
pub const NAME: &str = "proximal-snapshots";

/// The `proximal-snapshots` experiment.
#[derive(Debug, Clone, Copy)]
pub struct ProximalSnapshots;

/// Snapshots kept by default.
pub const DEFAULT_KEEP: u64 = 3;

/// The most snapshots `--keep` accepts.
pub const KEEP_MAX: u64 = 100;

/// The flags of `proximal-snapshots`.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct SnapshotParams {
    /// The layout experiments' flags.
    #[command(flatten)]
    pub layout: LayoutParams,
    /// Snapshots kept: after each snapshot, the oldest beyond this many are
    /// deleted (their deletion scans run to the end).
    #[arg(long, default_value_t = DEFAULT_KEEP, value_parser = clap::value_parser!(u64).range(1..=KEEP_MAX))]
    pub keep: u64,
    /// Where the space the kept snapshots need is set aside.
    #[arg(long, value_enum, default_value_t = ReservePlacement::Ranges)]
    pub reserve: ReservePlacement,
    /// With `--reserve ranges`: blocks per extent of the reserve left free
    /// inside the allocation ranges at first write, the rest lying as empty
    /// ranges after the extents [default: the whole reserve].
    #[arg(long, value_name = "BLOCKS")]
    pub range_reserve: Option<u64>,
}

impl Default for SnapshotParams {
    fn default() -> SnapshotParams {
        SnapshotParams {
            layout: LayoutParams::default(),
            keep: DEFAULT_KEEP,
            reserve: ReservePlacement::Ranges,
            range_reserve: None,
        }
    }
}

/// Where the snapshot reserve lies on the array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReservePlacement {
    /// In every allocation range: first writes leave the reserve's share of
    /// each range free (the paper's Section 4: "allocating at first fewer
    /// physical blocks than the size of the allocation range").
    Ranges,
    /// After the extents: ranges are filled at first write and the reserve is
    /// left as empty ranges.
    End,
}

impl ReservePlacement {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ReservePlacement::Ranges => "ranges",
            ReservePlacement::End => "end",
        }
    }
}

/// The compared configurations, in the order of the report: those of
/// `proximal-srarw`, and after `proximal` the same layout copying out what
/// snapshots read at the places its destaged blocks go back to.
const SNAPSHOT_CANDIDATES: [Candidate; 5] = [
    CANDIDATES[0],
    Candidate { key: "proximal_copy_out", proximal_copy_out: true, ..CANDIDATES[0] },
    CANDIDATES[1],
    CANDIDATES[2],
    CANDIDATES[3],
];

/// The settings of a run.
#[derive(Debug, Clone)]
pub struct SnapshotSettings {
    /// What the layout experiments share: array, scale, seed, jobs, output.
    pub layout: LayoutSettings,
    /// Snapshots kept.
    pub keep: u64,
    /// Where the snapshot reserve lies.
    pub reserve: ReservePlacement,
    /// `--range-reserve`: blocks per extent of the reserve left free inside
    /// the allocation ranges, if not the whole reserve (with `--reserve
    /// ranges` only, at most the reserve: checked by the settings).
    pub range_reserve: Option<u64>,
}

impl SnapshotSettings {
    /// Blocks per extent of the reserve left free inside the allocation
    /// ranges at first write: `--range-reserve`, or all of it with `--reserve
    /// ranges`, none with `--reserve end`.
    pub fn range_reserve_blocks(&self) -> u64 {
        match self.reserve {
            ReservePlacement::Ranges => self.range_reserve.unwrap_or_else(|| self.reserve_blocks_per_extent()),
            ReservePlacement::End => 0,
        }
    }

    /// The command that regenerates the experiment.
    pub fn command_line(&self) -> String {
        let mut line =
            format!("{} --keep {} --reserve {}", self.layout.command_line(NAME), self.keep, self.reserve.name());
        if let Some(blocks) = self.range_reserve {
            let _ = write!(line, " --range-reserve {blocks}");
        }
        line
    }

    /// The run of `candidate`: its layout and staging area, the extents that
    /// leave room for the snapshot reserve, and the reserve where it lies.
    pub(crate) fn run_spec(&self, candidate: Candidate) -> RunSpec {
        let reserve = self.reserve_blocks_per_extent();
        let in_ranges = self.range_reserve_blocks();
        let range_reserve_fraction = in_ranges as f64 / (EXTENT_BLOCKS + in_ranges) as f64;
        RunSpec {
            snapshot_reserve_blocks_per_extent: reserve,
            range_reserve_fraction,
            proximal_copy_out: candidate.proximal_copy_out,
            ..self.layout.run_spec(candidate.layout, candidate.staging_percent)
        }
    }

    /// Blocks per extent set aside for what the kept snapshots hold: each
    /// update holds at most one block (the version it replaced) for as long
    /// as the snapshot taken before it is kept, and the kept snapshots cover
    /// at most `K` intervals, so `K × N` updates per extent, at most the whole
    /// aging, for the interval that needs most.
    pub fn reserve_blocks_per_extent(&self) -> u64 {
        SnapshotSettings::reserve_for_keeping(self.keep)
    }

    /// The reserve per extent when the last `keep` snapshots are kept.
    pub fn reserve_for_keeping(keep: u64) -> u64 {
        INTERVALS
            .iter()
            .filter_map(|interval| interval.updates_per_extent())
            .map(|every| (keep * every).min(UPDATES_PER_EXTENT))
            .max()
            .unwrap_or(0)
    }

    /// The array's capacity in blocks.
    fn capacity_blocks(&self) -> u64 {
        let shape = &self.layout.shape;
        shape.capacity_blocks(shape.window_blocks_per_disk(self.layout.scale).expect("checked by the settings"))
    }
}

/// How often snapshots are taken during the aging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Interval {
    /// No snapshot.
    None,
    /// The "hourly-like" interval: a quarter of the aging.
    Rare,
    /// A fortieth of the aging.
    Frequent,
}

/// The intervals compared, in the order of the report.
pub const INTERVALS: [Interval; 3] = [Interval::None, Interval::Rare, Interval::Frequent];

impl Interval {
    /// Its name in the rows and the report.
    pub fn key(self) -> &'static str {
        match self {
            Interval::None => "none",
            Interval::Rare => "rare",
            Interval::Frequent => "frequent",
        }
    }

    /// `N`: random updates per extent between two snapshots (`None`: no snapshot).
    pub fn updates_per_extent(self) -> Option<u64> {
        match self {
            Interval::None => None,
            Interval::Rare => Some(UPDATES_PER_EXTENT / 4),
            Interval::Frequent => Some(UPDATES_PER_EXTENT / 40),
        }
    }
}

/// When snapshots are taken and how many are kept, in updates of the volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotPlan {
    /// Updates of the volume between two snapshots (`N` × extents).
    pub every_updates: u64,
    /// Snapshots kept.
    pub keep: u64,
}

impl SnapshotPlan {
    /// Whether a snapshot is taken before update `update_index` (from 0).
    pub fn snapshot_due(&self, update_index: u64) -> bool {
        update_index.is_multiple_of(self.every_updates)
    }

    /// Snapshots taken over an aging of `update_count` updates.
    pub fn taken_count(&self, update_count: u64) -> u64 {
        update_count.div_ceil(self.every_updates)
    }

    /// Snapshots the volume holds at once at most: the kept ones and the one
    /// just taken before the oldest is deleted, or all of them if fewer.
    pub fn at_once_max(&self, update_count: u64) -> u64 {
        (self.keep + 1).min(self.taken_count(update_count))
    }
}

/// Takes and deletes snapshots during the aging, following a [`SnapshotPlan`].
#[derive(Debug)]
struct SnapshotTaker {
    plan: SnapshotPlan,
    taken: Vec<TakenSnapshot>,
    deleted_count: u64,
}

/// A snapshot taken during the aging.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TakenSnapshot {
    /// Its name.
    pub name: String,
    /// Updates of the volume issued before it was taken.
    pub after_updates: u64,
}

impl BetweenUpdates for SnapshotTaker {
    fn before_update(&mut self, volume: &mut LabVolume, update_index: u64, _: u64) -> Result<(), LabError> {
        if !self.plan.snapshot_due(update_index) {
            return Ok(());
        }
        let name = format!("s{}", self.taken.len());
        volume.create_snapshot(&name)?;
        self.taken.push(TakenSnapshot { name, after_updates: update_index });
        let kept = usize::try_from(self.plan.keep).expect("at most KEEP_MAX");
        // Youngest first: the first `kept` stay, the older ones go.
        for older in volume.snapshots().iter().rev().skip(kept) {
            volume.delete_snapshot(&older.name)?;
            self.deleted_count += 1;
        }
        Ok(())
    }
}

/// What the snapshots of one run did, and the reads of the oldest one kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotFigures {
    /// `N`: random updates per extent between two snapshots.
    pub every_updates_per_extent: u64,
    /// Every snapshot taken, in order.
    pub taken: Vec<TakenSnapshot>,
    /// Snapshots deleted (each deletion scan finished).
    pub deleted_count: u64,
    /// The snapshots the volume holds after the aging, oldest first.
    pub kept_names: Vec<String>,
    /// Deletions still scanning after the aging (0: each ran to the end).
    pub pending_deletions: u64,
    /// Updates of the volume issued before the oldest kept snapshot was taken.
    pub oldest_kept_after_updates: u64,
    /// Every extent of the oldest kept snapshot read after the aging.
    pub oldest_kept_reads: ReadFigures,
}

/// One run: a layout under one snapshot interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRun {
    /// The layout's key (`proximal`, `in_place`, `in_place_cached`, `write_anywhere`).
    pub layout_key: String,
    /// The snapshot interval.
    pub interval: Interval,
    /// The live extents' reads, fresh and aged, and the aging.
    pub run: AgedReads,
    /// The snapshots (none for [`Interval::None`]).
    pub snapshots: Option<SnapshotFigures>,
}

/// The measured rows: every layout (in `proximal-srarw`'s order) under every
/// interval (none, rare, frequent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rows {
    /// One run per layout and interval.
    pub runs: Vec<SnapshotRun>,
}

/// One row of the JSON headline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadlineRow {
    /// The layout's key.
    pub layout: String,
    /// `none`, `rare` or `frequent`.
    pub interval: String,
    /// `N`: random updates per extent between two snapshots (`None`: no snapshot).
    pub snapshot_every: Option<u64>,
    /// Snapshots taken during the aging.
    pub snapshots_taken: u64,
    /// User updates per second of array busy time during the aging.
    pub random_update_iops: f64,
    /// Member-disk I/Os (reads and writes, destage and snapshot work included)
    /// per random update.
    pub disk_ios_per_update: f64,
    /// Serial reads of the live extents after aging over fresh.
    pub live_aged_to_fresh: f64,
    /// Serial reads of the oldest kept snapshot's extents after aging over the
    /// fresh live reads (`None` without snapshots).
    pub snapshot_aged_to_fresh: Option<f64>,
}

/// The JSON headline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// One row per layout and interval.
    pub rows: Vec<HeadlineRow>,
}

impl SnapshotRun {
    fn candidate(&self) -> Candidate {
        *SNAPSHOT_CANDIDATES.iter().find(|candidate| candidate.key == self.layout_key).expect("a compared layout")
    }

    /// MB/s per data disk of the oldest kept snapshot's reads after aging.
    fn snapshot_mb_s_per_disk(&self) -> Option<f64> {
        self.snapshots.as_ref().map(|snapshots| snapshots.oldest_kept_reads.mb_s_per_disk())
    }

    fn headline_row(&self) -> HeadlineRow {
        let aging = &self.run.aging;
        let fresh = self.run.reads.fresh.mb_s_per_disk();
        HeadlineRow {
            layout: self.layout_key.clone(),
            interval: self.interval.key().to_string(),
            snapshot_every: self.interval.updates_per_extent(),
            snapshots_taken: self.snapshots.as_ref().map_or(0, |snapshots| snapshots.taken.len() as u64),
            random_update_iops: aging.random_update_iops(),
            disk_ios_per_update: self.disk_ios_per_update(),
            live_aged_to_fresh: ratio(self.run.reads.aged.mb_s_per_disk(), fresh),
            snapshot_aged_to_fresh: self.snapshot_mb_s_per_disk().map(|snapshot| ratio(snapshot, fresh)),
        }
    }

    fn disk_ios_per_update(&self) -> f64 {
        let aging = &self.run.aging;
        ratio((aging.member_read_count + aging.member_write_count) as f64, aging.update_count as f64)
    }

    fn disk_reads_per_update(&self) -> f64 {
        ratio(self.run.aging.member_read_count as f64, self.run.aging.update_count as f64)
    }

    fn disk_writes_per_update(&self) -> f64 {
        ratio(self.run.aging.member_write_count as f64, self.run.aging.update_count as f64)
    }

    fn add_to(&self, simulated: &mut SimulatedWork) {
        self.run.add_to(simulated);
        if let Some(snapshots) = &self.snapshots {
            simulated.disk_ios += snapshots.oldest_kept_reads.member_io_count;
        }
    }
}

impl Experiment for ProximalSnapshots {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str =
        "proximal I/O paper, Sections 1 and 6: snapshots' cost per update and reads of live data and snapshots";
    const DEFAULT_MODEL: &'static str = DEFAULT_MODEL;
    type Params = SnapshotParams;
    type Settings = SnapshotSettings;
    type Rows = Rows;
    type Headline = Headline;

    fn settings(run: &RunSettings, params: &SnapshotParams) -> Result<SnapshotSettings, LabError> {
        if !(1..=KEEP_MAX).contains(&params.keep) {
            let message = format!("{} is not in [1, {KEEP_MAX}]", params.keep);
            return Err(LabError::InvalidParameter { parameter: "keep", message });
        }
        // The reserve leaves fewer extents: the scale must still leave room for two.
        let reserve = SnapshotSettings::reserve_for_keeping(params.keep);
        let layout = LayoutSettings::reserving(run, &params.layout, reserve)?;
        let settings = SnapshotSettings {
            layout,
            keep: params.keep,
            reserve: params.reserve,
            range_reserve: params.range_reserve,
        };
        if let Some(blocks) = params.range_reserve {
            let message = match params.reserve {
                ReservePlacement::End => Some(
                    "--range-reserve applies to `--reserve ranges` only: `--reserve end` leaves no reserve in the \
                     ranges"
                        .to_string(),
                ),
                ReservePlacement::Ranges if blocks > reserve => {
                    Some(format!("--range-reserve {blocks} is more than the reserve's {reserve} blocks per extent"))
                }
                ReservePlacement::Ranges => None,
            };
            if let Some(message) = message {
                return Err(LabError::InvalidParameter { parameter: "range-reserve", message });
            }
        }
        Ok(settings)
    }

    fn measure(settings: &SnapshotSettings, progress: &mut dyn Progress) -> Result<Rows, LabError> {
        let tasks = SNAPSHOT_CANDIDATES
            .iter()
            .flat_map(|&candidate| INTERVALS.map(|interval| (candidate, interval)))
            .map(|(candidate, interval)| -> Task<'_, SnapshotRun> {
                Box::new(move |progress: &mut dyn Progress| run_one(settings, candidate, interval, progress))
            })
            .collect();
        Ok(Rows { runs: run_all(settings.layout.jobs, tasks, progress)? })
    }

    fn render(settings: &SnapshotSettings, rows: &Rows, cost: &WallCost) -> Rendered<Headline> {
        let extent_count = rows.runs.first().map_or(0, |run| run.run.extent_count);
        let files = vec![
            ("snapshots.csv", Artifact::Csv(table(&rows.runs, ""))),
            ("snapshots_ios_per_update.svg", Artifact::BarChart(ios_chart(&rows.runs, settings))),
            ("snapshots_throughput.svg", Artifact::BarChart(throughput_chart(&rows.runs, settings))),
            ("snapshots_reads.svg", Artifact::BarChart(reads_chart(&rows.runs, settings))),
        ];
        let mut simulated = SimulatedWork::default();
        rows.runs.iter().for_each(|run| run.add_to(&mut simulated));
        let summary = render_summary(&rows.runs, settings, &cost.render(&simulated));
        let report = render_report(&rows.runs, settings, extent_count, &summary);
        let headline = Headline { rows: rows.runs.iter().map(SnapshotRun::headline_row).collect() };
        Rendered { files, report, summary, headline }
    }

    fn describe(params: &SnapshotParams) -> String {
        let in_ranges = params.range_reserve.map(|blocks| format!(" ({blocks} blocks per extent in them)"));
        format!(
            "{}, keeping {} snapshot(s), snapshot reserve: {}{}",
            params.layout.describe(),
            params.keep,
            params.reserve.name(),
            in_ranges.unwrap_or_default()
        )
    }
}

/// One layout under one interval: fill, read, age (taking and deleting
/// snapshots on schedule), read the live extents, read the oldest kept snapshot.
fn run_one(
    settings: &SnapshotSettings,
    candidate: Candidate,
    interval: Interval,
    progress: &mut dyn Progress,
) -> Result<SnapshotRun, LabError> {
    let base = settings.run_spec(candidate);
    let Some(every_updates_per_extent) = interval.updates_per_extent() else {
        let run = fresh_and_aged_reads(&base, progress)?;
        return Ok(SnapshotRun { layout_key: candidate.key.to_string(), interval, run, snapshots: None });
    };
    let extent_count = base.extent_count()?;
    let plan = SnapshotPlan { every_updates: every_updates_per_extent * extent_count, keep: settings.keep };
    let update_count = extent_count * UPDATES_PER_EXTENT;
    let spec = RunSpec { snapshots_at_once_max: plan.at_once_max(update_count), ..base };
    let mut volume = LabVolume::create(&spec, progress)?;
    let mut taker = SnapshotTaker { plan, taken: Vec::new(), deleted_count: 0 };
    let run = read_age_and_read(&mut volume, &mut taker, progress)?;
    let kept = volume.snapshots();
    let oldest = kept.first().expect("a schedule takes a snapshot before the first update");
    let oldest_kept_after_updates = taker
        .taken
        .iter()
        .find(|taken| taken.name == oldest.name)
        .expect("every kept snapshot was taken by the schedule")
        .after_updates;
    let oldest_kept_reads = volume.read_every_extent_of_snapshot(&oldest.name, progress)?;
    let snapshots = SnapshotFigures {
        every_updates_per_extent,
        taken: taker.taken,
        deleted_count: taker.deleted_count,
        kept_names: kept.iter().map(|snapshot| snapshot.name.clone()).collect(),
        pending_deletions: volume.pending_deletions() as u64,
        oldest_kept_after_updates,
        oldest_kept_reads,
    };
    Ok(SnapshotRun { layout_key: candidate.key.to_string(), interval, run, snapshots: Some(snapshots) })
}

/// What the tables of the report show for an absent figure.
const ABSENT: &str = "—";

/// `value` with `decimals` decimals, or `—` when absent.
fn optional(value: Option<f64>, decimals: usize) -> String {
    optional_or(value, decimals, ABSENT)
}

/// `value` with `decimals` decimals, or `absent`.
fn optional_or(value: Option<f64>, decimals: usize, absent: &str) -> String {
    value.map_or_else(|| absent.to_string(), |value| format!("{value:.decimals$}"))
}

/// Every run's figures, `absent` where a run has none (the snapshot figures
/// of the `none` rows): empty in the CSV, `—` in the report.
fn table(runs: &[SnapshotRun], absent: &str) -> Table {
    let mut table = Table::new(&[
        "layout",
        "staging_percent",
        "interval",
        "snapshot_every",
        "snapshots_taken",
        "snapshots_deleted",
        "oldest_kept_updates_behind",
        "random_update_iops",
        "disk_ios_per_update",
        "disk_ios_over_none",
        "disk_reads_per_update",
        "disk_writes_per_update",
        "fresh_mb_s_per_disk",
        "live_aged_mb_s_per_disk",
        "live_aged_to_fresh",
        "live_aged_runs_per_request",
        "snapshot_aged_mb_s_per_disk",
        "snapshot_aged_to_fresh",
        "snapshot_aged_runs_per_request",
    ]);
    for run in runs {
        let row = run.headline_row();
        let aging = &run.run.aging;
        let snapshots = run.snapshots.as_ref();
        let updates_behind = snapshots.map(|snapshots| {
            let extents = run.run.extent_count.max(1);
            (aging.update_count - snapshots.oldest_kept_after_updates) as f64 / extents as f64
        });
        table.push_row(vec![
            run.layout_key.clone(),
            format!("{}", run.candidate().staging_percent),
            run.interval.key().to_string(),
            row.snapshot_every.map_or_else(|| absent.to_string(), |every| every.to_string()),
            row.snapshots_taken.to_string(),
            snapshots.map_or(0, |snapshots| snapshots.deleted_count).to_string(),
            optional_or(updates_behind, 0, absent),
            format!("{:.1}", row.random_update_iops),
            format!("{:.3}", row.disk_ios_per_update),
            format!("{:.3}", ios_over_none(runs, run)),
            format!("{:.3}", run.disk_reads_per_update()),
            format!("{:.3}", run.disk_writes_per_update()),
            format!("{:.2}", run.run.reads.fresh.mb_s_per_disk()),
            format!("{:.2}", run.run.reads.aged.mb_s_per_disk()),
            format!("{:.3}", row.live_aged_to_fresh),
            format!("{:.2}", run.run.reads.aged.runs_per_request()),
            optional_or(run.snapshot_mb_s_per_disk(), 2, absent),
            optional_or(row.snapshot_aged_to_fresh, 3, absent),
            optional_or(snapshots.map(|snapshots| snapshots.oldest_kept_reads.runs_per_request()), 2, absent),
        ]);
    }
    table
}

/// The layouts' keys, in order (the charts' categories).
fn layout_keys(runs: &[SnapshotRun]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for run in runs {
        if !keys.contains(&run.layout_key) {
            keys.push(run.layout_key.clone());
        }
    }
    keys
}

/// One series per interval of `figure` of each layout's run (0 where absent:
/// no bar).
fn series_per_interval(
    runs: &[SnapshotRun],
    label: impl Fn(Interval) -> String,
    figure: impl Fn(&SnapshotRun) -> Option<f64>,
) -> Vec<(String, Vec<f64>)> {
    let layouts = layout_keys(runs);
    INTERVALS
        .iter()
        .map(|&interval| {
            let values = layouts
                .iter()
                .map(|layout| {
                    runs.iter()
                        .find(|run| &run.layout_key == layout && run.interval == interval)
                        .and_then(&figure)
                        .unwrap_or(0.0)
                })
                .collect();
            (label(interval), values)
        })
        .collect()
}

/// A series label: the interval and its `N`.
fn interval_label(interval: Interval) -> String {
    match interval.updates_per_extent() {
        Some(every) => format!("{} (every {every} updates per extent)", interval.key()),
        None => "no snapshots".to_string(),
    }
}

fn ios_chart(runs: &[SnapshotRun], settings: &SnapshotSettings) -> GroupedBarChart {
    GroupedBarChart {
        title: format!("Member-disk I/Os per random update ({})", settings.layout.shape.model.name()),
        x_label: "layout".into(),
        y_label: "disk I/Os per update".into(),
        categories: layout_keys(runs),
        series: series_per_interval(runs, interval_label, |run| Some(run.disk_ios_per_update())),
    }
}

fn throughput_chart(runs: &[SnapshotRun], settings: &SnapshotSettings) -> GroupedBarChart {
    GroupedBarChart {
        title: format!("Random 4 KiB updates per second of array time ({})", settings.layout.shape.model.name()),
        x_label: "layout".into(),
        y_label: "user updates per second".into(),
        categories: layout_keys(runs),
        series: series_per_interval(runs, interval_label, |run| Some(run.run.aging.random_update_iops())),
    }
}

fn reads_chart(runs: &[SnapshotRun], settings: &SnapshotSettings) -> GroupedBarChart {
    let mut series = series_per_interval(
        runs,
        |interval| format!("live, {}", interval.key()),
        |run| Some(run.headline_row().live_aged_to_fresh),
    );
    let snapshot = series_per_interval(
        runs,
        |interval| format!("oldest kept snapshot, {}", interval.key()),
        |run| run.headline_row().snapshot_aged_to_fresh,
    );
    series.extend(snapshot.into_iter().filter(|(label, _)| !label.ends_with(Interval::None.key())));
    GroupedBarChart {
        title: format!(
            "Serial reads after aging over fresh, live data and oldest kept snapshot ({})",
            settings.layout.shape.model.name()
        ),
        x_label: "layout".into(),
        y_label: "aged MB/s over fresh MB/s".into(),
        categories: layout_keys(runs),
        series,
    }
}

fn render_summary(runs: &[SnapshotRun], settings: &SnapshotSettings, cost_line: &str) -> String {
    let layout = &settings.layout;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{NAME} on {} (scale {}, seed {}, keep {}, reserve: {}): snapshots during the SRARW aging",
        layout.shape.model.name(),
        layout.scale,
        layout.seed,
        settings.keep,
        settings.reserve.name()
    );
    let _ = writeln!(
        text,
        "{:<18} {:>9} {:>6} {:>6} {:>11} {:>12} {:>7} {:>10} {:>13}",
        "layout", "interval", "every", "taken", "updates/s", "disk I/Os/u", "× none", "live a/f", "snapshot a/f"
    );
    for run in runs {
        let row = run.headline_row();
        let _ = writeln!(
            text,
            "{:<18} {:>9} {:>6} {:>6} {:>11.1} {:>12.2} {:>7.2} {:>10.3} {:>13}",
            row.layout,
            row.interval,
            row.snapshot_every.map_or_else(|| ABSENT.to_string(), |every| every.to_string()),
            row.snapshots_taken,
            row.random_update_iops,
            row.disk_ios_per_update,
            ios_over_none(runs, run),
            row.live_aged_to_fresh,
            optional(row.snapshot_aged_to_fresh, 3),
        );
    }
    let _ = writeln!(
        text,
        "paper: a frame array (RAID-5, NV cache) {} disk I/Os per update, {} with copy-on-write snapshots; \
         proximal about {}; snapshots read about as fast as live data only with proximal placement",
        paper::FRAME_ARRAY_IOS_PER_UPDATE,
        paper::FRAME_ARRAY_SNAPSHOT_IOS_PER_UPDATE,
        paper::PROXIMAL_SNAPSHOT_IOS_PER_UPDATE
    );
    let _ = writeln!(
        text,
        "every: N, random updates per extent between snapshots; × none: disk I/Os per update over the same \
         layout's without snapshots; a/f: aged MB/s over fresh"
    );
    let _ = writeln!(text, "{cost_line}");
    text
}

/// `run`'s disk I/Os per update over those of its layout without snapshots.
fn ios_over_none(runs: &[SnapshotRun], run: &SnapshotRun) -> f64 {
    let none = find(runs, &run.layout_key, Interval::None).map_or(0.0, SnapshotRun::disk_ios_per_update);
    ratio(run.disk_ios_per_update(), none)
}

/// The run of `layout` under `interval`.
fn find<'a>(runs: &'a [SnapshotRun], layout: &str, interval: Interval) -> Option<&'a SnapshotRun> {
    runs.iter().find(|run| run.layout_key == layout && run.interval == interval)
}

/// `none → rare → frequent` of a figure of `layout`'s runs.
fn across_intervals(runs: &[SnapshotRun], layout: &str, figure: impl Fn(&HeadlineRow) -> Option<f64>) -> String {
    INTERVALS
        .iter()
        .map(|&interval| optional(find(runs, layout, interval).and_then(|run| figure(&run.headline_row())), 2))
        .collect::<Vec<_>>()
        .join(" → ")
}

/// `live L, snapshot S` after aging over fresh for `layout` under the rare and
/// frequent intervals.
fn live_and_snapshot(runs: &[SnapshotRun], layout: &str) -> String {
    [Interval::Rare, Interval::Frequent]
        .iter()
        .filter_map(|&interval| find(runs, layout, interval))
        .map(|run| {
            let row = run.headline_row();
            format!(
                "{}: live {:.3}, snapshot {}",
                run.interval.key(),
                row.live_aged_to_fresh,
                optional(row.snapshot_aged_to_fresh, 3)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `layout`'s disk I/Os per update under each interval, and over none.
fn ios_across_intervals(runs: &[SnapshotRun], layout: &str) -> String {
    let ios = across_intervals(runs, layout, |row| Some(row.disk_ios_per_update));
    let over_none = [Interval::Rare, Interval::Frequent]
        .iter()
        .filter_map(|&interval| find(runs, layout, interval))
        .map(|run| format!("{:.2}", ios_over_none(runs, run)))
        .collect::<Vec<_>>()
        .join(", ");
    format!("{ios} (× none: {over_none})")
}

/// The paper's statements and our figures beside them.
fn statements(runs: &[SnapshotRun]) -> Table {
    let ios = |layout: &str| ios_across_intervals(runs, layout);
    let mut table = Table::new(&["the paper", "ours (disk I/Os per update: none → rare → frequent)"]);
    table.push_row(vec![
        format!(
            "\"With RAID5 and non-volatile write caches, they [frame arrays] use four random disk I/Os at the \
             back-end; with copy-on-write snapshots, this number doubles.\" ({} → {})",
            paper::FRAME_ARRAY_IOS_PER_UPDATE,
            paper::FRAME_ARRAY_SNAPSHOT_IOS_PER_UPDATE
        ),
        format!("`in_place`: {}; `in_place_cached`: {}", ios("in_place"), ios("in_place_cached")),
    ]);
    table.push_row(vec![
        format!(
            "\"our approach uses about one disk I/O at the back end for every user-level random update when both \
             RAID and copy-on-write are employed.\" (about {})",
            paper::PROXIMAL_SNAPSHOT_IOS_PER_UPDATE
        ),
        format!("`proximal`: {}; `proximal_copy_out`: {}", ios("proximal"), ios("proximal_copy_out")),
    ]);
    table.push_row(vec![
        "\"we can combine copy-out and RMW operations and leverage proximal I/O; we can pipeline them such that \
         we write out the just-read old version of the data within the effective span of proximal I/O in time \
         before the disk spins around to write the new version of the block.\""
            .to_string(),
        format!(
            "`proximal_copy_out`: {}; reads / writes per update, frequent: {}",
            ios("proximal_copy_out"),
            find(runs, "proximal_copy_out", Interval::Frequent).map_or_else(
                || ABSENT.to_string(),
                |run| format!("{:.2} / {:.2}", run.disk_reads_per_update(), run.disk_writes_per_update())
            )
        ),
    ]);
    table.push_row(vec![
        "\"A write-anywhere file layout, for example, lends itself to keeping snapshots with very little \
         overhead\""
            .to_string(),
        format!("`write_anywhere`: {}", ios("write_anywhere")),
    ]);
    table.push_row(vec![
        "\"Proximal I/O can access both the current data as well as the snapshots with similar efficiency.\""
            .to_string(),
        format!(
            "aged over fresh — `proximal`: {}. `proximal_copy_out`: {}",
            live_and_snapshot(runs, "proximal"),
            live_and_snapshot(runs, "proximal_copy_out")
        ),
    ]);
    table.push_row(vec![
        "\"Systems that do not place logically related data near each other are likely to perform differently \
         depending on which version of the data they access. For example, a sequential table scan on an aged \
         system may be less efficient than one performed against a snapshot made earlier.\""
            .to_string(),
        format!(
            "aged over fresh — `write_anywhere`: {}. `in_place`: {}. `in_place_cached`: {}",
            live_and_snapshot(runs, "write_anywhere"),
            live_and_snapshot(runs, "in_place"),
            live_and_snapshot(runs, "in_place_cached")
        ),
    ]);
    table
}

fn render_report(runs: &[SnapshotRun], settings: &SnapshotSettings, extent_count: u64, summary: &str) -> String {
    let command = settings.command_line();
    let fill_fraction = ratio((extent_count * EXTENT_BLOCKS) as f64, settings.capacity_blocks() as f64);
    let title = "Snapshots during random updates: cost and reads";
    let mut text = report_header_filling(title, &settings.layout, &command, extent_count, fill_fraction);
    let rare = Interval::Rare.updates_per_extent().expect("rare takes snapshots");
    let frequent = Interval::Frequent.updates_per_extent().expect("frequent takes snapshots");
    let _ = writeln!(
        text,
        "Each layout of `proximal-srarw` on a fresh volume of the same array: filled with 16 MiB \
         extents written serially, every extent read (fresh), {UPDATES_PER_EXTENT} random 4 KiB updates per \
         extent, every extent read again (live, aged), and every extent of the oldest snapshot still kept read \
         the same way (snapshot, aged); the updates, arm positions and read orders are the same for every run \
         (same seed). `proximal` stages small writes in a 1 % flash staging area; `proximal_copy_out` is the \
         same, and a destaged block whose older version a snapshot reads at the block's place first copies that \
         version out to a free block of the same allocation range (or the nearest with one), then takes the \
         place back; `in_place` is a frame array \
         without flash (each update written at once to its frame); `in_place_cached` the frame array with the \
         same flash as its write cache; `write_anywhere` writes every update at once into the first free blocks \
         after a rolling cursor.\n"
    );
    let _ = writeln!(
        text,
        "**Snapshots.** A snapshot of the whole volume every N random updates per extent (every N × \
         {extent_count} updates), the first before the first update (it holds the fresh layout); right after \
         each, the oldest beyond the last K = {keep} are deleted and their deletion scans run to the end, within \
         the aging, whose figures include the disk I/O all this causes. N is a fraction of the aging's \
         {UPDATES_PER_EXTENT} updates per extent, which does not change with the scale (a smaller scale has \
         fewer extents), so the number of snapshots and the share of an extent updated between two are the same \
         at every scale: `none` (no snapshot), `rare` — the \"hourly-like\" interval \
         — N = {rare} ({} snapshots), and `frequent`, N = {frequent} ({} snapshots). K is `--keep`.\n",
        UPDATES_PER_EXTENT / rare,
        UPDATES_PER_EXTENT / frequent,
        keep = settings.keep
    );
    let reserve = settings.reserve_blocks_per_extent();
    let _ = writeln!(
        text,
        "**Snapshot reserve.** The kept snapshots hold the versions their successors replaced: each update \
         holds at most one block while the snapshot before it is kept, so with K intervals kept at most K × N \
         blocks per extent (capped at the aging's {UPDATES_PER_EXTENT}), {reserve} for the interval that needs \
         most here. `proximal-srarw`'s fill ({:.0} % of the array) leaves {:.0} free blocks per extent, too few, \
         so every run of this experiment — the `none` rows included, so that the rows compare the same extents \
         and updates — fills the array with fewer extents: the extents and a reserve of {reserve} blocks per \
         extent together fill {:.0} %, and the live data keeps the free space it has in `proximal-srarw`. The \
         `none` rows are therefore `proximal-srarw`'s workload on a less full array, not its figures. {}\n",
        FILL_FRACTION * 100.0,
        EXTENT_BLOCKS as f64 * (1.0 - FILL_FRACTION) / FILL_FRACTION,
        FILL_FRACTION * 100.0,
        match settings.reserve {
            ReservePlacement::Ranges => format!(
                "The reserve lies in every allocation range (`--reserve ranges`): first writes leave {:.1} % of \
                 each range free ({} blocks per extent{}), as the paper proposes \"to provide extra space for \
                 future updates and write-anywhere-style snapshots at the cost of a corresponding fraction of \
                 serial bandwidth\" (Section 4; its prototype did not explore it); write-anywhere, which does not \
                 allocate by ranges, finds it as free space ahead of its cursor.",
                settings.run_spec(CANDIDATES[0]).range_reserve_fraction * 100.0,
                settings.range_reserve_blocks(),
                match settings.range_reserve {
                    None => String::new(),
                    Some(blocks) => format!(
                        ", `--range-reserve`; the other {} lie as empty ranges after the extents",
                        reserve - blocks
                    ),
                }
            ),
            ReservePlacement::End => "The reserve lies after the extents (`--reserve end`): first writes fill \
                 every range, and the reserve is left as empty ranges."
                .to_string(),
        }
    );
    let _ = writeln!(
        text,
        "**Without snapshots there is no snapshot figure**: the `none` rows show `—` for every snapshot \
         column (an empty cell in `snapshots.csv`, `null` in the JSON headline) and have no snapshot bar in \
         the reads plot.\n"
    );
    let _ = writeln!(text, "## Summary (as printed)\n\n```text\n{summary}```\n");
    let _ = writeln!(text, "## The paper's statements beside our figures\n\n{}", statements(runs).to_markdown());
    let _ = writeln!(
        text,
        "The paper's frame array is a RAID-5; this array is a 4+1 RAID-4, whose small write reads and writes \
         the same blocks (old data and parity, then both). With zone checksums each of those four accesses also \
         reads or writes the zone's checksum block (not adjacent to a random block), so a small write in place \
         costs 8 member I/Os here where the paper counts 4: the paper's claim to compare is the doubling, `× \
         none`. What a layout does with a block a snapshot holds is the engine's: the split of \
         `disk_ios_per_update` into reads and writes below, and which version's reads degrade, show it.\n"
    );
    let _ = writeln!(text, "## Results\n\n{}", table(runs, ABSENT).to_markdown());
    let _ = writeln!(
        text,
        "![Disk I/Os per update](snapshots_ios_per_update.svg)\n\n![Throughput](snapshots_throughput.svg)\n\n\
         ![Reads](snapshots_reads.svg)\n"
    );
    let _ = writeln!(
        text,
        "## Definitions\n\n\
         - **Disk I/Os per update**: member-disk requests (reads and writes over the five drives, after the RAID \
         layer coalesced adjacent blocks) of the whole aging — writes at once, destages, the final destage, and \
         whatever taking and deleting snapshots cause — over the random updates; `disk_reads_per_update` and \
         `disk_writes_per_update` split it.\n\
         - **Live aged/fresh**: MB/s per disk reading every live extent after the aging over the same before it.\n\
         - **Snapshot aged/fresh**: MB/s per disk reading every extent of the oldest snapshot still kept, after \
         the aging, over the fresh live reads (the same data on the fresh layout); \
         `oldest_kept_updates_behind` is how many updates per extent the live data is ahead of it.\n\
         {DEFINITIONS}"
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_divide_the_aging_and_grow_rarer_in_order() {
        for interval in [Interval::Rare, Interval::Frequent] {
            let every = interval.updates_per_extent().unwrap();
            assert_eq!(UPDATES_PER_EXTENT % every, 0, "{interval:?} takes a whole number of snapshots");
        }
        assert!(Interval::Rare.updates_per_extent() > Interval::Frequent.updates_per_extent());
        assert_eq!(Interval::None.updates_per_extent(), None);
    }

    #[test]
    fn the_plan_takes_a_snapshot_before_the_first_update_and_every_interval_after() {
        let plan = SnapshotPlan { every_updates: 100, keep: 3 };
        let due: Vec<u64> = (0..1000).filter(|&update| plan.snapshot_due(update)).collect();
        assert_eq!(due, [0, 100, 200, 300, 400, 500, 600, 700, 800, 900]);
        assert_eq!(plan.taken_count(1000), 10);
        assert_eq!(plan.taken_count(1001), 11);
        assert_eq!(plan.at_once_max(1000), 4, "three kept and the one just taken");
        assert_eq!(SnapshotPlan { every_updates: 500, keep: 3 }.at_once_max(1000), 2, "no more than taken");
    }

    #[test]
    fn the_range_reserve_is_the_whole_reserve_by_default_and_at_most_that() {
        let run = RunSettings { out_dir: "unused".into(), seed: 1, model: DEFAULT_MODEL.into() };
        let settings = |reserve, range_reserve| {
            ProximalSnapshots::settings(&run, &SnapshotParams { reserve, range_reserve, ..SnapshotParams::default() })
        };
        let whole = settings(ReservePlacement::Ranges, None).unwrap();
        assert_eq!(whole.range_reserve_blocks(), whole.reserve_blocks_per_extent());
        assert!(!whole.command_line().contains("--range-reserve"), "the default is not spelled out");
        let share = |settings: &SnapshotSettings| settings.run_spec(CANDIDATES[0]).range_reserve_fraction;
        assert_eq!(share(&whole), 1500.0 / (4096.0 + 1500.0));
        let part = settings(ReservePlacement::Ranges, Some(600)).unwrap();
        assert_eq!(share(&part), 600.0 / (4096.0 + 600.0));
        assert!(part.command_line().ends_with("--reserve ranges --range-reserve 600"));
        let extents = |settings: &SnapshotSettings| settings.run_spec(CANDIDATES[0]).extent_count().unwrap();
        assert_eq!(extents(&part), extents(&whole), "the same extents: the rest of the reserve lies after them");
        assert_eq!(share(&settings(ReservePlacement::End, None).unwrap()), 0.0);
        for refused in [settings(ReservePlacement::End, Some(10)), settings(ReservePlacement::Ranges, Some(1501))] {
            assert!(matches!(refused, Err(LabError::InvalidParameter { parameter: "range-reserve", .. })));
        }
    }

    #[test]
    fn too_small_a_scale_names_one_with_room_beside_the_reserve() {
        let run = RunSettings { out_dir: "unused".into(), seed: 1, model: DEFAULT_MODEL.into() };
        let at = |scale| {
            let layout = LayoutParams { scale, ..LayoutParams::default() };
            ProximalSnapshots::settings(&run, &SnapshotParams { layout, ..SnapshotParams::default() })
        };
        let Err(LabError::InvalidParameter { parameter: "scale", message }) = at(0.00001) else {
            panic!("0.00001 of the drive leaves no room for two extents and their reserve");
        };
        let named = crate::rig::lab_volume::scale_named_in(&message);
        let settings = at(named).unwrap_or_else(|error| panic!("{named} fits: {error}"));
        assert!(settings.run_spec(CANDIDATES[0]).extent_count().unwrap() >= 2);
    }

    #[test]
    fn settings_refuse_keeping_no_snapshot() {
        let run = RunSettings { out_dir: "unused".into(), seed: 1, model: DEFAULT_MODEL.into() };
        let params = SnapshotParams { keep: 0, ..SnapshotParams::default() };
        assert!(matches!(
            ProximalSnapshots::settings(&run, &params),
            Err(LabError::InvalidParameter { parameter: "keep", .. })
        ));
    }
}
