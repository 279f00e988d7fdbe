//! `reproduce hylog-proximal`: the `proximal-hot` layout (HyLog's hot/cold
//! knowledge applied to proximal I/O's flash staging area) against the
//! proximal layout, on the SRARW rig of `proximal-srarw`: the same array, fill,
//! staging area (1 %) and reads, with the aging's updates skewed by Knuth's
//! 80/20 rule over every block of every extent (the hottest blocks scattered
//! over the extents). A uniform aging of both layouts is the control.
//!
//! Per run: disk I/Os per user update over the whole aging (every member-disk
//! request: destage writes, parity reads and writes), user updates per second
//! of array time, blocks destaged and blocks a destage left staged as hot, and
//! serial reads after aging against fresh.
//!
//! Beside the runs, the arithmetic bound of any retention policy: with the
//! staging area holding `C` blocks and a destage every time it fills, keeping
//! the `K` hottest blocks staged for good leaves `C − K` places for the rest,
//! and the blocks destaged per update are `(C − K) / U(K)`, where `U(K)` is the
//! updates that touch `C − K` distinct blocks outside the hottest `K`
//! ([`retention_bound`]). The best `K` is what a policy that knew every
//! block's probability could reach.
//!
//! Writes `hylog_proximal.csv`, `hylog_proximal.svg` and `report.md`. The JSON
//! headline is `{"proximal": {"disk_ios_per_update", "aged_to_fresh"},
//! "proximal_hot": {...}}` for the 80/20 aging, with more keys beside.

use std::fmt::Write as _;

use proxima_engine::Layout;
use proxima_workload::srarw::UpdateSkew;
use serde::{Deserialize, Serialize};

use crate::experiment::{Experiment, RunSettings};
use crate::progress::Progress;
use crate::report::cost::WallCost;
use crate::report::markdown::{verdict, Artifact, Rendered};
use crate::report::plot::GroupedBarChart;
use crate::report::table::Table;
use crate::rig::measure::ratio;
use crate::seed000_proximal::layout::{report_header, LayoutParams, LayoutSettings, DEFAULT_MODEL, DEFINITIONS};
use crate::seed000_proximal::table3::{aged_reads_of, simulated_work, AgedReads};
use crate::LabError;

/// The experiment's name on the command line.
pub const NAME: &str = "hylog-proximal";

/// The `hylog-proximal` experiment.
#[derive(Debug, Clone, Copy)]
pub struct HylogProximal;

/// The staging area, percent of capacity.
pub const STAGING_PERCENT: f64 = 1.0;

/// The issue's target: `proximal-hot` needs this many times fewer disk I/Os
/// per update than proximal under 80/20 updates.
pub const DISK_IO_REDUCTION_TARGET: f64 = 1.5;

/// The issue's target for serial reads after aging, against fresh.
pub const AGED_TO_FRESH_TARGET: f64 = 0.97;

/// Which updates age a run.
#[derive(Debug, Clone, Copy)]
enum Updates {
    /// Knuth's 80/20 rule over every block of every extent.
    EightyTwenty,
    /// The paper's uniform updates (the control).
    Uniform,
}

impl Updates {
    fn name(self) -> &'static str {
        match self {
            Updates::EightyTwenty => "knuth-80-20",
            Updates::Uniform => "uniform",
        }
    }

    fn skew(self) -> UpdateSkew {
        match self {
            Updates::EightyTwenty => UpdateSkew::eighty_twenty(),
            Updates::Uniform => UpdateSkew::Uniform,
        }
    }
}

/// The runs, in the order of the rows.
const RUNS: [(Updates, Layout); 4] = [
    (Updates::EightyTwenty, Layout::Proximal),
    (Updates::EightyTwenty, Layout::ProximalHot),
    (Updates::Uniform, Layout::Proximal),
    (Updates::Uniform, Layout::ProximalHot),
];

/// One layout's headline figures under the 80/20 aging.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct LayoutFigures {
    /// Member-disk requests per user update over the aging.
    pub disk_ios_per_update: f64,
    /// Serial-read bandwidth after aging over fresh.
    pub aged_to_fresh: f64,
    /// User updates per second of array busy time.
    pub random_update_iops: f64,
    /// Blocks destaged per user update.
    pub destaged_blocks_per_update: f64,
}

/// The JSON headline.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Headline {
    /// The proximal layout, 80/20 updates.
    pub proximal: LayoutFigures,
    /// The proximal-hot layout, 80/20 updates.
    pub proximal_hot: LayoutFigures,
    /// Proximal's disk I/Os per update over proximal-hot's.
    pub disk_io_reduction: f64,
    /// The most any retention policy could reduce the blocks destaged per
    /// update by ([`retention_bound`]).
    pub retention_bound_reduction: f64,
}

/// The measured rows, in the order of [`RUNS`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rows {
    /// One run per entry of [`RUNS`].
    pub runs: Vec<AgedReads>,
    /// Blocks destages left staged as hot, per run.
    pub retained_hot_blocks: Vec<u64>,
    /// Blocks destaged, per run.
    pub destaged_blocks: Vec<u64>,
    /// The staging area in blocks.
    pub staging_blocks: u64,
    /// Blocks the updates address (every block of every extent).
    pub block_count: u64,
}

impl Experiment for HylogProximal {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str =
        "HyLog's hot/cold split on proximal I/O: proximal-hot against proximal under 80/20 updates";
    const DEFAULT_MODEL: &'static str = DEFAULT_MODEL;
    type Params = LayoutParams;
    type Settings = LayoutSettings;
    type Rows = Rows;
    type Headline = Headline;

    fn settings(run: &RunSettings, params: &LayoutParams) -> Result<LayoutSettings, LabError> {
        LayoutSettings::new(run, params)
    }

    fn measure(settings: &LayoutSettings, progress: &mut dyn Progress) -> Result<Rows, LabError> {
        let specs = RUNS
            .iter()
            .map(|&(updates, layout)| {
                let mut spec = settings.run_spec(layout, STAGING_PERCENT);
                spec.update_skew = updates.skew();
                spec
            })
            .collect();
        let runs = aged_reads_of(specs, settings.jobs, progress)?;
        let first = runs.first().expect("four runs");
        Ok(Rows {
            retained_hot_blocks: runs.iter().map(|run| run.aging.retained_hot_blocks).collect(),
            destaged_blocks: runs.iter().map(|run| run.aging.destaged_blocks).collect(),
            staging_blocks: first.staging_blocks,
            block_count: first.extent_count * proxima_workload::srarw::EXTENT_BLOCKS,
            runs,
        })
    }

    fn render(settings: &LayoutSettings, rows: &Rows, cost: &WallCost) -> Rendered<Headline> {
        let figures: Vec<LayoutFigures> = rows.runs.iter().map(figures_of).collect();
        let theta = Updates::EightyTwenty.skew().theta();
        let bound = retention_bound(theta, rows.block_count, rows.staging_blocks);
        let headline = Headline {
            proximal: figures[0],
            proximal_hot: figures[1],
            disk_io_reduction: ratio(figures[0].disk_ios_per_update, figures[1].disk_ios_per_update),
            retention_bound_reduction: bound.reduction(),
        };
        let files = vec![
            ("hylog_proximal.csv", Artifact::Csv(table(rows, &figures))),
            ("hylog_proximal.svg", Artifact::BarChart(chart(&figures, settings))),
        ];
        let summary = render_summary(settings, &headline, &figures, &bound, &cost.render(&simulated_work(&rows.runs)));
        let report = render_report(settings, rows, &summary, &figures, &bound);
        Rendered { files, report, summary, headline }
    }

    fn describe(params: &LayoutParams) -> String {
        params.describe()
    }
}

fn figures_of(run: &AgedReads) -> LayoutFigures {
    let updates = run.aging.update_count as f64;
    LayoutFigures {
        disk_ios_per_update: ratio(run.aging.all_io.disk_io_count() as f64, updates),
        aged_to_fresh: ratio(run.reads.aged.mb_s_per_disk(), run.reads.fresh.mb_s_per_disk()),
        random_update_iops: run.aging.random_update_iops(),
        destaged_blocks_per_update: ratio(run.aging.destaged_blocks as f64, updates),
    }
}

/// The best a retention policy can do: [`retention_bound`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetentionBound {
    /// Blocks destaged per update retaining nothing (the proximal layout).
    pub retaining_nothing: f64,
    /// The best number of hottest blocks to keep staged for good.
    pub best_retained: u64,
    /// Blocks destaged per update keeping them.
    pub best: f64,
}

impl RetentionBound {
    /// How many times fewer blocks the best retention destages.
    pub fn reduction(&self) -> f64 {
        ratio(self.retaining_nothing, self.best)
    }
}

/// Blocks destaged per update when `staging_blocks` hold the updates of
/// Knuth's self-similar skew `theta` over `block_count` blocks, destaged each
/// time the area fills, with the `K` hottest blocks kept staged for good, for
/// the best `K` in steps of a twentieth of the area (and `K = 0`).
///
/// A block of probability `p` is touched by `U` updates with probability
/// `1 − e^{−pU}`; a cycle ends when the blocks outside the hottest `K` touched
/// reach `C − K`. The ranks are summed in buckets of geometrically growing
/// width (the probabilities fall smoothly with the rank), so the bound costs a
/// few thousand terms whatever the block count.
pub fn retention_bound(theta: f64, block_count: u64, staging_blocks: u64) -> RetentionBound {
    let n = block_count as f64;
    // Buckets of ranks [start, end), each with its per-block probability.
    let mut buckets: Vec<(f64, f64, f64)> = Vec::new();
    let mut start = 0.0_f64;
    while start < n {
        let end = (start + (start * 0.01).max(1.0)).min(n);
        let share = (end / n).powf(theta) - (start / n).powf(theta);
        buckets.push((start, end, share / (end - start)));
        start = end;
    }
    let touched_outside = |kept: f64, updates: f64| -> f64 {
        buckets
            .iter()
            .filter(|&&(_, end, _)| end > kept)
            .map(|&(start, end, p)| (end - start.max(kept)) * (1.0 - (-p * updates).exp()))
            .sum()
    };
    let destaged_per_update = |kept: u64| -> f64 {
        let room = (staging_blocks - kept) as f64;
        let (mut low, mut high) = (1.0_f64, 1e15_f64);
        for _ in 0..100 {
            let middle = (low * high).sqrt();
            if touched_outside(kept as f64, middle) < room {
                low = middle;
            } else {
                high = middle;
            }
        }
        room / low
    };
    let retaining_nothing = destaged_per_update(0);
    let (best_retained, best) = (1..20)
        .map(|twentieths| staging_blocks * twentieths / 20)
        .map(|kept| (kept, destaged_per_update(kept)))
        .fold((0, retaining_nothing), |best, candidate| if candidate.1 < best.1 { candidate } else { best });
    RetentionBound { retaining_nothing, best_retained, best }
}

fn table(rows: &Rows, figures: &[LayoutFigures]) -> Table {
    let mut table = Table::new(&[
        "updates",
        "layout",
        "disk_ios_per_update",
        "destaged_blocks_per_update",
        "retained_hot_blocks",
        "destage_batches",
        "random_update_iops",
        "fresh_mb_s_per_disk",
        "aged_mb_s_per_disk",
        "aged_to_fresh",
        "aged_runs_per_request",
    ]);
    for (index, ((updates, layout), run)) in RUNS.iter().zip(&rows.runs).enumerate() {
        let figures = &figures[index];
        table.push_row(vec![
            updates.name().to_string(),
            layout.name().to_string(),
            format!("{:.3}", figures.disk_ios_per_update),
            format!("{:.3}", figures.destaged_blocks_per_update),
            rows.retained_hot_blocks[index].to_string(),
            run.aging.batches.batch_count.to_string(),
            format!("{:.1}", figures.random_update_iops),
            format!("{:.2}", run.reads.fresh.mb_s_per_disk()),
            format!("{:.2}", run.reads.aged.mb_s_per_disk()),
            format!("{:.3}", figures.aged_to_fresh),
            format!("{:.2}", run.reads.aged.runs_per_request()),
        ]);
    }
    table
}

fn chart(figures: &[LayoutFigures], settings: &LayoutSettings) -> GroupedBarChart {
    GroupedBarChart {
        title: format!("Disk I/Os per user update, 1 % staging ({})", settings.shape.model.name()),
        x_label: "updates".into(),
        y_label: "member-disk I/Os per update".into(),
        categories: vec!["knuth-80-20".into(), "uniform".into()],
        series: vec![
            ("proximal".into(), vec![figures[0].disk_ios_per_update, figures[2].disk_ios_per_update]),
            ("proximal-hot".into(), vec![figures[1].disk_ios_per_update, figures[3].disk_ios_per_update]),
        ],
    }
}

fn render_summary(
    settings: &LayoutSettings,
    headline: &Headline,
    figures: &[LayoutFigures],
    bound: &RetentionBound,
    cost_line: &str,
) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{NAME} on {} (scale {}, seed {}): {STAGING_PERCENT} % staging",
        settings.shape.model.name(),
        settings.scale,
        settings.seed
    );
    let _ = writeln!(
        text,
        "{:<12} {:<13} {:>14} {:>17} {:>12} {:>11}",
        "updates", "layout", "disk I/Os/upd", "destaged blk/upd", "updates/s", "aged/fresh"
    );
    for ((updates, layout), figures) in RUNS.iter().zip(figures) {
        let _ = writeln!(
            text,
            "{:<12} {:<13} {:>14.3} {:>17.3} {:>12.1} {:>11.3}",
            updates.name(),
            layout.name(),
            figures.disk_ios_per_update,
            figures.destaged_blocks_per_update,
            figures.random_update_iops,
            figures.aged_to_fresh
        );
    }
    let _ = writeln!(
        text,
        "80/20: proximal-hot needs {:.3}× fewer disk I/Os per update (target ≥ {DISK_IO_REDUCTION_TARGET}: {}); \
         aged/fresh {:.3} (target ≥ {AGED_TO_FRESH_TARGET}: {}); no retention policy destages fewer than \
         {:.3} blocks per update against {:.3} retaining nothing ({:.3}×, keeping {} blocks)",
        headline.disk_io_reduction,
        verdict(headline.disk_io_reduction >= DISK_IO_REDUCTION_TARGET),
        headline.proximal_hot.aged_to_fresh,
        verdict(headline.proximal_hot.aged_to_fresh >= AGED_TO_FRESH_TARGET),
        bound.best,
        bound.retaining_nothing,
        bound.reduction(),
        bound.best_retained,
    );
    let _ = writeln!(text, "{cost_line}");
    text
}

fn render_report(
    settings: &LayoutSettings,
    rows: &Rows,
    summary: &str,
    figures: &[LayoutFigures],
    bound: &RetentionBound,
) -> String {
    let extent_count = rows.runs.first().map_or(0, |run| run.extent_count);
    let command = settings.command_line(NAME);
    let mut text =
        report_header("Proximal-hot: HyLog's hot/cold split on proximal I/O", settings, &command, extent_count);
    let _ = writeln!(
        text,
        "Each run on a fresh volume of the same array: filled to 89 % with 16 MiB extents written serially, every \
         extent read (fresh), 2000 random 4 KiB updates per extent on average, every extent read again (aged), \
         with a {STAGING_PERCENT} % staging area ({} blocks) over {} blocks of extents. `knuth-80-20`: every \
         update goes to one block of all the extents' blocks drawn by Knuth's self-similar rule (the hottest \
         fraction h of the blocks takes h^θ of the updates, θ = ln 0.8 / ln 0.2), the hottest blocks \
         scattered over the extents; `uniform`: the paper's updates. `proximal-hot` leaves the blocks written \
         at least twice in its last two measurement intervals staged at each destage, at most half the area \
         (docs/layouts.md).\n",
        rows.staging_blocks, rows.block_count
    );
    let _ = writeln!(text, "## Summary (as printed)\n\n```text\n{summary}```\n");
    let _ = writeln!(text, "## Results\n\n{}", table(rows, figures).to_markdown());
    let _ = writeln!(text, "![Disk I/Os per update](hylog_proximal.svg)\n");
    let _ = writeln!(
        text,
        "## What retention can gain\n\nRetention saves the destage of a block that would be written again \
         before the next destage; under this skew most updates already find their block staged. With the \
         staging area of these runs, destaging each time it fills, the blocks destaged per update are {:.3} \
         retaining nothing and, for the best choice of the hottest blocks kept staged for good ({} blocks), \
         {:.3}: {:.3}× fewer at best, whatever the policy (computed from the skew, `retention_bound`). The \
         issue's target of {DISK_IO_REDUCTION_TARGET}× fewer disk I/Os per update lies beyond it, since \
         every destaged block costs the same RAID-4 writes under both layouts.\n",
        bound.retaining_nothing,
        bound.best_retained,
        bound.best,
        bound.reduction()
    );
    let _ = writeln!(text, "## Definitions\n\n{DEFINITIONS}");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retaining_nothing_matches_a_direct_count_and_the_bound_gains_under_skew_only() {
        let theta = 0.8_f64.ln() / 0.2_f64.ln();
        let bound = retention_bound(theta, 1_000_000, 10_000);
        // A direct simulation of the same process (a 10,000-block area
        // destaged whenever it fills under two million 80/20 draws over a
        // million blocks) destaged 0.635 blocks per update retaining nothing;
        // the same formula evaluated per block, without buckets, gives 0.479
        // keeping the hottest 9,000.
        assert!((bound.retaining_nothing - 0.64).abs() < 0.01, "{bound:?}");
        assert!((bound.best - 0.48).abs() < 0.01, "{bound:?}");
        assert!(bound.best_retained >= 5_000, "{bound:?}");
        let uniform = retention_bound(1.0, 1_000_000, 10_000);
        assert!(uniform.reduction() < 1.01, "nothing to gain without skew: {uniform:?}");
    }
}
