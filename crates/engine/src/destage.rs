//! Destage: moving staged blocks from the flash log to the data device, one
//! batch per extent, in the two phases of the proximal layout (docs/layouts.md):
//!
//! 1. sort the extent's staged blocks by logical offset and group them by
//!    logical allocation-range window (`layouts::group_staged_runs`);
//! 2. per group, choose a range (`layouts::choose_destage_range`: the
//!    neighbours' range, else the nearest with room within the proximal span,
//!    else a new one) and allocate inside it where each run's logical
//!    neighbour would continue (`layouts::hint_in_range`).
//!
//! That is [`DestageRule::NearNeighbours`]; a layout whose rule is
//! [`DestageRule::FrameHomes`] puts each block back at its frame home instead.
//! A layout whose rule is [`DestageRule::ColdHomesElseLog`] (HyLog) puts a
//! block with a frame home back there and writes the others at their log
//! stream's head. A layout whose rule is [`DestageRule::LogHead`] writes the batch at the
//! log head, filling clean segments in order (`segments.rs`).
//! The layout's strategy says which rule applies; this executor never asks
//! which layout runs.
//!
//! The extent's writes then go to the data device as one batch in ascending
//! block order (one strand; a RAID layer splits it per member, keeping the
//! order), the map is updated and direct records are logged. After every
//! extent is done a CP makes the new locations durable; only then are the
//! staging blocks reusable (they are pinned until that CP, like any block freed
//! between CPs).

use std::collections::BTreeMap;

use proxima_device::{BlockDevice, IoRequest};
use serde::Serialize;

use crate::codec::LogRecord;
use crate::error::{DeviceRole, EngineError, Result};
use crate::io::{block_bytes, device_error, read_pieces, write_requests, MAX_REQUEST_BLOCKS};
use crate::layouts::{
    choose_destage_range, densest_windows, group_staged_runs, hint_in_range, DestageRule, RangeChoice, StagedRun,
    StagedWindow,
};
use crate::map::{self, ExtentMap, Location};
use crate::segments::HeadWriter;
use crate::volume::Volume;

/// One destage batch: the disk I/O of one extent's staged blocks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DestageBatchReport {
    /// The extent.
    pub extent_id: u64,
    /// Staged (user) blocks moved to the data device.
    pub user_blocks: u64,
    /// Destage groups (logical allocation-range windows) of the batch.
    pub group_count: u64,
    /// Physical runs written (maximal runs of consecutive data blocks).
    pub run_count: u64,
    /// Requests submitted to the data device (one batch).
    pub data_request_count: u64,
    /// Requests submitted to the flash device to read the staged data.
    pub flash_request_count: u64,
    /// Data-device clock when the batch was submitted (after `before_batch`
    /// and after the staged data was read from flash).
    pub started_ns: u64,
    /// Data-device clock when its last request completed.
    pub completed_ns: u64,
}

/// Watches a destage batch by batch (experiments: moving disk heads before a
/// batch, taking per-member statistics after it).
pub trait DestageObserver<D> {
    /// Called before each batch is read from flash and written.
    fn before_batch(&mut self, data: &mut D) {
        let _ = data;
    }

    /// Called after each batch's data-device writes completed (before the
    /// next batch starts).
    fn after_batch(&mut self, data: &mut D, batch: &DestageBatchReport) {
        let _ = (data, batch);
    }
}

/// An observer that observes nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoDestageObserver;

impl<D> DestageObserver<D> for NoDestageObserver {}

/// What one destage did, in total.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DestageSummary {
    /// Batches: one per extent with staged blocks, or more where one batch
    /// would not leave room on flash for the CP after it.
    pub batch_count: u64,
    /// Blocks moved.
    pub user_blocks: u64,
    /// Data-device requests.
    pub data_request_count: u64,
}

/// What a destage step chose to move ([`Volume::plan_destage_step`]), moved
/// in pieces by [`Volume::destage_planned`]: staged runs per extent, in
/// extent order and logical order, each as it was staged when chosen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DestagePlan {
    pending: std::collections::VecDeque<(u64, FlashRun)>,
}

impl DestagePlan {
    /// Whether every run of the plan has been taken.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Blocks of the runs not yet taken (some may no longer be staged).
    pub fn remaining_blocks(&self) -> u64 {
        self.pending.iter().map(|(_, run)| run.block_count).sum()
    }
}

/// A placed piece: logical run → data blocks, and where its bytes sit in the
/// batch's staged data.
#[derive(Debug, Clone, Copy)]
struct PlacedPiece {
    logical_block: u64,
    block_count: u64,
    data_block: u64,
    buffer_block: u64,
}

/// A run of an extent's map that lies in the staging log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FlashRun {
    /// First logical block.
    logical_block: u64,
    /// Number of blocks.
    block_count: u64,
    /// The flash block of the first.
    flash_block: u64,
}

impl FlashRun {
    /// The logical run, without its place on flash.
    fn staged(&self) -> StagedRun {
        StagedRun { logical_block: self.logical_block, block_count: self.block_count }
    }

    /// The run cut at the boundaries of logical windows of `window_blocks`:
    /// `(window, piece)` in logical order.
    fn window_pieces(&self, window_blocks: u64) -> impl Iterator<Item = (u64, FlashRun)> + '_ {
        let end = self.logical_block + self.block_count;
        let mut logical = self.logical_block;
        std::iter::from_fn(move || {
            if logical >= end {
                return None;
            }
            let window = logical / window_blocks;
            let piece_end = end.min((window + 1) * window_blocks);
            let piece = FlashRun {
                logical_block: logical,
                block_count: piece_end - logical,
                flash_block: self.flash_block + (logical - self.logical_block),
            };
            logical = piece_end;
            Some((window, piece))
        })
    }
}

/// Which staged blocks a destage moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DestageScope {
    /// Every staged block (the paper's destage of a full staging area).
    Everything,
    /// About `max_blocks` blocks, the densest windows first
    /// ([`crate::layouts::densest_windows`]): a bounded step, so that the
    /// volume is held for a short time and writes wait only for room for
    /// their own blocks.
    Densest {
        /// Blocks to move at least (whole windows; at least one window).
        max_blocks: u64,
    },
}

/// When the staging space a destage empties becomes reusable. The staged
/// blocks are freed in the destage's epoch, so only a durable CP releases
/// them (a crash before it finds them still staged, their data intact).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StagingRelease {
    /// A CP ends the destage: a full destage, or a writer waiting for room.
    AtOnce,
    /// The next CP releases it. Every destage begins with a CP, so a
    /// background destager's steps cost one CP each rather than two, and
    /// the space a step empties is reusable once the next step begins.
    AtNextCheckpoint,
}

/// The staged runs of one map, in logical order.
fn staged_runs(map: &ExtentMap) -> Vec<FlashRun> {
    map.iter()
        .filter_map(|(logical_block, run)| match Location::from_raw(run.location()) {
            Location::Flash(flash_block) => Some(FlashRun { logical_block, block_count: run.count(), flash_block }),
            Location::Data(_) => None,
        })
        .collect()
}

/// The nearest data-device block of the extent before `logical` or at or after
/// `end`, as `(logical block, data block)`: the group's placed neighbour.
fn placed_neighbour(map: &ExtentMap, logical: u64, end: u64, window_blocks: u64) -> Option<(u64, u64)> {
    let before = map.range(..logical).rev().find_map(|(key, run)| match Location::from_raw(run.location()) {
        Location::Data(block) => {
            let last = (key + run.count()).min(logical) - 1;
            Some((last, block + (last - key)))
        }
        Location::Flash(_) => None,
    });
    // The run holding `end` (if it starts before it), then the runs after.
    let holding_end = map.range(..=end).next_back().filter(|(key, run)| key + run.count() > end);
    let after = holding_end.into_iter().chain(map.range(end + 1..)).find_map(|(key, run)| {
        match Location::from_raw(run.location()) {
            Location::Data(block) if key + run.count() > end => {
                let first = key.max(end);
                Some((first, block + (first - key)))
            }
            _ => None,
        }
    });
    match (before, after) {
        (Some(before), _) if logical - before.0 <= window_blocks => Some(before),
        (_, Some(after)) if after.0 - end < window_blocks => Some(after),
        (Some(before), Some(after)) => Some(if logical - before.0 <= after.0 - end { before } else { after }),
        (before, after) => before.or(after),
    }
}

/// Free or foreign flash blocks a destage read reads through rather than
/// start another request.
const FLASH_READ_GAP_BLOCKS: u64 = 16;

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    /// Moves every staged block to the data device (but those the layout
    /// keeps staged as hot, unless nothing else is staged) and commits;
    /// returns the blocks moved.
    pub fn destage(&mut self) -> Result<u64> {
        self.destage_observed(&mut NoDestageObserver).map(|summary| summary.user_blocks)
    }

    /// Moves every staged block the layout does not keep staged as hot to
    /// the data device, one batch per extent (in extent order), telling
    /// `observer` before and after each batch; then
    /// commits a CP, after which the staging space is reusable.
    pub fn destage_observed(&mut self, observer: &mut dyn DestageObserver<D>) -> Result<DestageSummary> {
        self.guarded(|volume| volume.destage_unguarded(DestageScope::Everything, StagingRelease::AtOnce, observer))
    }

    /// One bounded destage step: commits, then moves about `max_blocks` staged
    /// blocks, the densest windows first, one batch per extent. Their staging
    /// space is reusable after the next CP: the next step's, or a
    /// [`commit`](Self::commit). A caller that must not hold the volume for
    /// long (a background destager) repeats it, releasing the volume between
    /// steps, and commits when it stops.
    pub fn destage_step(&mut self, max_blocks: u64) -> Result<DestageSummary> {
        self.guarded(|volume| {
            let scope = DestageScope::Densest { max_blocks };
            volume.destage_unguarded(scope, StagingRelease::AtNextCheckpoint, &mut NoDestageObserver)
        })
    }

    /// Chooses what a destage step of about `max_blocks` moves (the densest
    /// windows first, as [`destage_step`](Self::destage_step) does) without
    /// moving anything, for [`destage_planned`](Self::destage_planned) to
    /// move in pieces. A destager that must hold the volume only briefly
    /// commits (making the space earlier steps freed reusable), plans, and
    /// moves the plan a few milliseconds at a time, releasing the volume
    /// between pieces: choosing once per step spares each piece the walk of
    /// every extent's map.
    pub fn plan_destage_step(&mut self, max_blocks: u64) -> DestagePlan {
        let retained = self.retained_blocks();
        self.stats.retained_hot_blocks += retained.values().map(|blocks| blocks.len() as u64).sum::<u64>();
        let selection = self.destage_selection(DestageScope::Densest { max_blocks }, &retained);
        DestagePlan {
            pending: selection.into_iter().flat_map(|(id, runs)| runs.into_iter().map(move |run| (id, run))).collect(),
        }
    }

    /// Moves the next piece of `plan`: its runs in order until about
    /// `max_blocks` (at least one run, and the rest of the last run's
    /// allocation window), one batch per extent, without a CP first. Of each
    /// run only what is still staged where it was when planned moves: blocks
    /// overwritten, trimmed or destaged since, and extents deleted, are
    /// skipped. Their staging space is reusable after the next CP.
    pub fn destage_planned(&mut self, plan: &mut DestagePlan, max_blocks: u64) -> Result<DestageSummary> {
        self.guarded(|volume| {
            let window_blocks = volume.options.allocation_range_blocks;
            let mut selection: Vec<(u64, Vec<FlashRun>)> = Vec::new();
            let mut taken_blocks = 0;
            let mut last_window = None;
            while let Some(&(id, run)) = plan.pending.front() {
                let window = (id, run.logical_block / window_blocks);
                if taken_blocks >= max_blocks.max(1) && last_window != Some(window) {
                    break;
                }
                plan.pending.pop_front();
                taken_blocks += run.block_count;
                last_window = Some(window);
                let still_staged = volume.still_staged(id, run);
                if still_staged.is_empty() {
                    continue;
                }
                match selection.last_mut() {
                    Some((last_id, runs)) if *last_id == id => runs.extend(still_staged),
                    _ => selection.push((id, still_staged)),
                }
            }
            if selection.is_empty() {
                return Ok(DestageSummary::default());
            }
            if volume.copy_out_before_destaging(&selection)? > 0 {
                // The copies' places are overwritten only after a durable CP.
                volume.commit()?;
            }
            volume.destage_selected(selection, StagingRelease::AtNextCheckpoint, &mut NoDestageObserver)
        })
    }

    /// The parts of `run` (of extent `id`) still staged at the flash blocks
    /// it named, in logical order.
    fn still_staged(&self, id: u64, run: FlashRun) -> Vec<FlashRun> {
        let Some(map) = self.extents.find_map(id) else { return Vec::new() };
        let (start, end) = (run.logical_block, run.logical_block + run.block_count);
        let holding_start = map.range(..=start).next_back().filter(|(key, mapped)| key + mapped.count() > start);
        holding_start
            .into_iter()
            .chain(map.range(start + 1..end))
            .filter_map(|(key, mapped)| {
                let Location::Flash(flash_block) = Location::from_raw(mapped.location()) else { return None };
                let (first, last_end) = (key.max(start), (key + mapped.count()).min(end));
                let first_flash_block = flash_block + (first - key);
                (first < last_end && first_flash_block == run.flash_block + (first - start)).then_some(FlashRun {
                    logical_block: first,
                    block_count: last_end - first,
                    flash_block: first_flash_block,
                })
            })
            .collect()
    }

    /// The staged runs a destage of `scope` moves, per extent in extent order,
    /// each extent's runs in logical order.
    /// The blocks of `retained` (per extent, as
    /// [`retained_blocks`](Self::retained_blocks) gives them) are not moved.
    fn destage_selection(&self, scope: DestageScope, retained: &BTreeMap<u64, Vec<u64>>) -> Vec<(u64, Vec<FlashRun>)> {
        let mut per_extent: Vec<(u64, Vec<FlashRun>)> = self
            .extents
            .maps()
            .map(|(id, map)| {
                let runs = staged_runs(map);
                match retained.get(&id) {
                    Some(blocks) => (id, without_blocks(runs, blocks)),
                    None => (id, runs),
                }
            })
            .filter(|(_, runs)| !runs.is_empty())
            .collect();
        per_extent.sort_unstable_by_key(|&(id, _)| id);
        let DestageScope::Densest { max_blocks } = scope else { return per_extent };
        let window_blocks = self.options.allocation_range_blocks;
        // Each extent's runs cut at window boundaries, `(window, piece)` in
        // logical order: counted per window, then filtered to the chosen ones.
        let per_extent_pieces: Vec<(u64, Vec<(u64, FlashRun)>)> = per_extent
            .iter()
            .map(|(extent_id, runs)| {
                (*extent_id, runs.iter().flat_map(|run| run.window_pieces(window_blocks)).collect())
            })
            .collect();
        let mut windows: Vec<StagedWindow> = Vec::new();
        for (extent_id, pieces) in &per_extent_pieces {
            for &(window, piece) in pieces {
                match windows.last_mut() {
                    Some(last) if last.extent_id == *extent_id && last.window == window => {
                        last.block_count += piece.block_count
                    }
                    _ => windows.push(StagedWindow { extent_id: *extent_id, window, block_count: piece.block_count }),
                }
            }
        }
        let chosen = densest_windows(windows, max_blocks);
        per_extent_pieces
            .into_iter()
            .filter_map(|(extent_id, pieces)| {
                let selected: Vec<FlashRun> = pieces
                    .into_iter()
                    .filter(|(window, _)| {
                        chosen
                            .binary_search_by_key(&(extent_id, *window), |chosen| (chosen.extent_id, chosen.window))
                            .is_ok()
                    })
                    .map(|(_, piece)| piece)
                    .collect();
                (!selected.is_empty()).then_some((extent_id, selected))
            })
            .collect()
    }

    /// The staged blocks a destage leaves in the staging area: of the
    /// layout's hottest blocks, up to its share of the staging capacity,
    /// those that are staged; per extent, in logical order.
    fn retained_blocks(&self) -> BTreeMap<u64, Vec<u64>> {
        let share = self.layout.retained_share_max().clamp(0.0, 1.0);
        // A whole number of blocks in [0, capacity], exact in an f64.
        #[expect(clippy::cast_possible_truncation, reason = "a whole number between 0 and the capacity")]
        let limit = (self.staging_capacity_blocks() as f64 * share).floor() as usize;
        let mut retained: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        if limit == 0 {
            return retained;
        }
        let staged = self.layout.hot_blocks(limit).into_iter().filter(|&(id, logical)| {
            self.extents.find_map(id).is_some_and(|map| matches!(map::lookup(map, logical), Some(Location::Flash(_))))
        });
        for (id, logical) in staged {
            retained.entry(id).or_default().push(logical);
        }
        for blocks in retained.values_mut() {
            blocks.sort_unstable();
        }
        retained
    }

    pub(crate) fn destage_unguarded(
        &mut self,
        scope: DestageScope,
        release: StagingRelease,
        observer: &mut dyn DestageObserver<D>,
    ) -> Result<DestageSummary> {
        let mut retained = self.retained_blocks();
        let mut selection = self.destage_selection(scope, &retained);
        if selection.is_empty() && !retained.is_empty() {
            // Every staged block is hot: a destage still makes room.
            retained.clear();
            selection = self.destage_selection(scope, &retained);
        }
        self.stats.retained_hot_blocks += retained.values().map(|blocks| blocks.len() as u64).sum::<u64>();
        if selection.is_empty() {
            return Ok(DestageSummary::default());
        }
        self.copy_out_before_destaging(&selection)?;
        // Blocks the staged writes freed become allocatable once a CP is
        // durable: commit first, so staged blocks can return to their holes.
        self.commit()?;
        self.destage_selected(selection, release, observer)
    }

    /// With the proximal layout's copy-out, copies out the older versions
    /// snapshots read at the places `selection`'s blocks go back to
    /// ([`copy_out_before_destage`](Self::copy_out_before_destage)); the
    /// caller commits before placing them. Returns the copies made.
    fn copy_out_before_destaging(&mut self, selection: &[(u64, Vec<FlashRun>)]) -> Result<usize> {
        if !self.options.proximal_copy_out {
            return Ok(0);
        }
        let runs: Vec<(u64, u64, u64)> = selection
            .iter()
            .flat_map(|(id, runs)| runs.iter().map(move |run| (*id, run.logical_block, run.block_count)))
            .collect();
        self.copy_out_before_destage(&runs)
    }

    /// Moves `selection` (staged runs per extent, as
    /// [`destage_selection`](Self::destage_selection) gives them), one batch
    /// per extent.
    fn destage_selected(
        &mut self,
        selection: Vec<(u64, Vec<FlashRun>)>,
        release: StagingRelease,
        observer: &mut dyn DestageObserver<D>,
    ) -> Result<DestageSummary> {
        let mut summary = DestageSummary::default();
        let mut out_of_space = None;
        for (id, mut runs) in selection {
            // An extent the data device, or the next CP, has no room for
            // stays staged; the others still go (a full device does not stop
            // every destage). A batch too large for the next CP's room goes
            // in parts that fit, each CP releasing the staged flash of the
            // part before.
            while !runs.is_empty() {
                let staged: u64 = runs.iter().map(|run| run.block_count).sum();
                let fitting = self.destage_blocks_that_fit(id, staged)?;
                if fitting == 0 {
                    out_of_space = Some(self.flash_full("a destage batch's metadata"));
                    break;
                }
                let rest = split_runs_after(&mut runs, fitting);
                let batch = match self.destage_extent(id, &runs, observer) {
                    Ok(batch) => batch,
                    Err(error @ EngineError::NoSpace { .. }) => {
                        out_of_space = Some(error);
                        break;
                    }
                    Err(other) => return Err(other),
                };
                runs = rest;
                // CPs between batches keep the log, and the metadata a CP
                // rewrites, bounded however large the staging area.
                self.checkpoint_if_log_is_long()?;
                summary.batch_count += 1;
                summary.user_blocks += batch.user_blocks;
                summary.data_request_count += batch.data_request_count;
            }
        }
        // Places copied out for blocks this destage did not move are theirs
        // no longer: a later destage finds them by their neighbours.
        self.copied_homes.clear();
        self.stats.destage_count += 1;
        self.stats.destaged_blocks += summary.user_blocks;
        if release == StagingRelease::AtOnce {
            self.commit()?;
        }
        match out_of_space {
            Some(error) if summary.user_blocks == 0 => Err(error),
            _ => Ok(summary),
        }
    }

    /// How many of `staged` blocks of extent `id` one destage batch may
    /// move with room for the CP after it: all of them when they fit, else,
    /// after a CP (which releases what was freed since the last), the most
    /// that fit; 0 when not even one block does.
    fn destage_blocks_that_fit(&mut self, id: u64, staged: u64) -> Result<u64> {
        if self.destage_batch_fits(id, staged) {
            return Ok(staged);
        }
        self.commit()?;
        if self.destage_batch_fits(id, staged) {
            return Ok(staged);
        }
        // The bound grows with the blocks: the largest count that fits.
        let (mut fits, mut does_not) = (0, staged);
        while does_not - fits > 1 {
            let middle = fits + (does_not - fits) / 2;
            if self.destage_batch_fits(id, middle) {
                fits = middle;
            } else {
                does_not = middle;
            }
        }
        Ok(fits)
    }

    /// Destages staged runs of one extent (in logical order) as one batch.
    fn destage_extent(
        &mut self,
        id: u64,
        runs: &[FlashRun],
        observer: &mut dyn DestageObserver<D>,
    ) -> Result<DestageBatchReport> {
        observer.before_batch(&mut self.data);
        let flash_pieces: Vec<(u64, u64)> = runs.iter().map(|run| (run.flash_block, run.block_count)).collect();
        let (staged_bytes, flash_request_count) = if self.data_payload {
            self.read_staged_in_flash_order(runs)?
        } else {
            // Payload-less (the laboratory): one request per staged run, as a
            // simulated flash device times them.
            (read_pieces(&mut self.flash, DeviceRole::Flash, &flash_pieces)?, flash_pieces.len() as u64)
        };
        let staged: Vec<StagedRun> = runs.iter().map(FlashRun::staged).collect();
        let placed = self.place_extent(id, &staged)?;
        let user_blocks: u64 = placed.iter().map(|piece| piece.block_count).sum();
        let group_count = group_staged_runs(staged, self.options.allocation_range_blocks).len() as u64;
        let (requests, run_count) = self.strand_requests(runs, &placed, &staged_bytes);
        let data_request_count = requests.len() as u64;
        let ranges: Vec<(u64, u64)> = placed.iter().map(|piece| (piece.data_block, piece.block_count)).collect();
        self.announce_data_writes(&ranges)?;
        let started_ns = self.data.now_ns();
        let completions = self.data.execute(requests).map_err(device_error(DeviceRole::Data))?;
        let mut completed_ns = started_ns;
        for completion in completions {
            completion.result.map_err(device_error(DeviceRole::Data))?;
            completed_ns = completed_ns.max(completion.completed_ns);
        }
        self.log.data_unflushed = true;
        for run in runs {
            self.staged_cache.remove_run(run.flash_block, run.block_count);
        }
        for piece in &placed {
            self.carry_checksums_to_data(id, piece);
            self.apply_mapping(id, piece.logical_block, piece.block_count, Location::Data(piece.data_block));
            self.layout.destaged(id, piece.logical_block, piece.block_count);
            self.push_record(LogRecord::Destaged {
                extent_id: id,
                logical_block: piece.logical_block,
                block_count: u32::try_from(piece.block_count).expect("a placed piece is at most u32::MAX blocks"),
                data_block: piece.data_block,
            })?;
        }
        let report = DestageBatchReport {
            extent_id: id,
            user_blocks,
            group_count,
            run_count,
            data_request_count,
            flash_request_count,
            started_ns,
            completed_ns,
        };
        observer.after_batch(&mut self.data, &report);
        Ok(report)
    }

    /// Allocates `[logical, logical + count)` of extent `id` back where its
    /// logical neighbours say it belongs — usually the hole its older version
    /// left — if that block is free: where the predecessor's run would
    /// continue, or where the successor's run would begin, whichever is free
    /// and lies in the same allocation range as the neighbour it comes from
    /// (a continuation into the next range means the neighbour ends a run
    /// placed elsewhere, as when large writes arrived out of order). Without
    /// this, a group whose window starts at such a boundary is sent to the
    /// range after the predecessor's, each misplaced block misleads the next
    /// destage, and the extent fragments further with every destage
    /// (measured on a queue-depth-4 fill: 0.10 after 20 000 random writes,
    /// 0.9 after 300 000).
    fn allocate_continuation(&mut self, id: u64, logical: u64, count: u64) -> Option<(u64, u64)> {
        let block_count = self.data_space.block_count();
        let range_blocks = self.options.allocation_range_blocks;
        let map = self.extents.map(id);
        // The nearest data-device blocks before and after, within one range's
        // worth of logical blocks (staged blocks in between are skipped).
        let predecessor = map.range(logical.saturating_sub(range_blocks)..logical).rev().find_map(|(key, run)| {
            match Location::from_raw(run.location()) {
                Location::Data(block) => {
                    let last = key + run.count() - 1;
                    Some((block + (last - key), (block + (last - key)).checked_add(logical - last)?))
                }
                Location::Flash(_) => None,
            }
        });
        let end = logical + count;
        let holding_end = map.range(..=end).next_back().filter(|(key, run)| key + run.count() > end);
        let successor = holding_end.into_iter().chain(map.range(end + 1..end + range_blocks)).find_map(|(key, run)| {
            match Location::from_raw(run.location()) {
                Location::Data(block) if key + run.count() > end => {
                    let first = key.max(end);
                    let first_block = block + (first - key);
                    Some((first_block, first_block.checked_sub(first - logical)?))
                }
                _ => None,
            }
        });
        let candidates = [predecessor, successor].into_iter().flatten().filter(|&(neighbour, candidate)| {
            candidate < block_count && candidate / range_blocks == neighbour / range_blocks
        });
        for (_, candidate) in candidates.collect::<Vec<_>>() {
            if self.data_space.is_allocatable(candidate) {
                let end = candidate.saturating_add(count).min(block_count);
                if let Some(run) = self.data_space.allocate_within(candidate, candidate, end, count) {
                    return Some(run);
                }
            }
        }
        None
    }

    /// Reads an extent's staged runs (in logical order) into one buffer in logical order, issuing the reads in
    /// flash order: the staging log was appended in time order, so runs that
    /// random writes scattered logically lie in long consecutive stretches of
    /// flash, each read with one request (gaps of up to
    /// [`FLASH_READ_GAP_BLOCKS`] read through and dropped). Returns the bytes
    /// and the number of flash requests.
    fn read_staged_in_flash_order(&mut self, runs: &[FlashRun]) -> Result<(Vec<u8>, u64)> {
        let total_blocks: u64 = runs.iter().map(|run| run.block_count).sum();
        let mut staged = vec![0u8; block_bytes(total_blocks)];
        // Runs whose bytes the staged-block cache holds are copied from it;
        // the rest are read.
        let mut positions: Vec<(u64, u64, u64)> = Vec::with_capacity(runs.len());
        let mut buffer_block = 0;
        for run in runs {
            let destination = &mut staged[block_bytes(buffer_block)..block_bytes(buffer_block + run.block_count)];
            if self.staged_cache.copy_run(run.flash_block, run.block_count, destination) {
                self.stats.destaged_blocks_from_memory += run.block_count;
            } else {
                positions.push((run.flash_block, run.block_count, buffer_block));
            }
            buffer_block += run.block_count;
        }
        positions.sort_unstable();
        // Stretches of flash, each one read request: `(first flash block,
        // blocks, the positions it covers)`.
        let mut stretches: Vec<(u64, u64, std::ops::Range<usize>)> = Vec::new();
        let mut index = 0;
        while index < positions.len() {
            let first = positions[index].0;
            let mut end = index + 1;
            let mut stretch_end = first + positions[index].1;
            while end < positions.len()
                && positions[end].0 >= stretch_end
                && positions[end].0 - stretch_end <= FLASH_READ_GAP_BLOCKS
                && positions[end].0 + positions[end].1 - first <= MAX_REQUEST_BLOCKS
            {
                stretch_end = positions[end].0 + positions[end].1;
                end += 1;
            }
            stretches.push((first, stretch_end - first, index..end));
            index = end;
        }
        // Every stretch read into its own part of one buffer, all at once: a
        // device may have them in flight together.
        let mut scratch = std::mem::take(&mut self.destage_read_buffer);
        scratch.resize(block_bytes(stretches.iter().map(|&(_, count, _)| count).sum()), 0);
        let mut reads: Vec<(u64, &mut [u8])> = Vec::with_capacity(stretches.len());
        let mut rest = scratch.as_mut_slice();
        for &(first, count, _) in &stretches {
            let (buffer, after) = rest.split_at_mut(block_bytes(count));
            reads.push((first, buffer));
            rest = after;
        }
        if !reads.is_empty() {
            self.flash.read_many_into(&mut reads).map_err(device_error(DeviceRole::Flash))?;
        }
        let mut stretch_start = 0;
        for (first, count, covered) in &stretches {
            for &(flash_block, run_count, buffer_block) in &positions[covered.clone()] {
                let from = stretch_start + block_bytes(flash_block - first);
                let to = block_bytes(buffer_block);
                let length = block_bytes(run_count);
                staged[to..to + length].copy_from_slice(&scratch[from..from + length]);
            }
            stretch_start += block_bytes(*count);
        }
        self.destage_read_buffer = scratch;
        let request_count = stretches.len() as u64;
        Ok((staged, request_count))
    }

    /// A destaged piece's data blocks take the checksums of the staged copies
    /// they were written from (the bytes were copied, not recomputed: damage
    /// to a staged copy stays detectable in its new home).
    fn carry_checksums_to_data(&mut self, id: u64, piece: &PlacedPiece) {
        let Some(checksums) = &mut self.checksums else { return };
        let map = self.extents.map(id);
        for offset in 0..piece.block_count {
            let Some(Location::Flash(flash_block)) = map::lookup(map, piece.logical_block + offset) else {
                unreachable!("a placed piece covers staged blocks")
            };
            checksums.data.set(piece.data_block + offset, checksums.flash.get(flash_block));
        }
    }

    /// The data-device requests of a batch: placed pieces in ascending block
    /// order, physically adjacent pieces coalesced into one request.
    fn strand_requests(&self, runs: &[FlashRun], placed: &[PlacedPiece], staged_bytes: &[u8]) -> (Vec<IoRequest>, u64) {
        assert!(
            placed.iter().map(|piece| piece.block_count).sum::<u64>()
                <= runs.iter().map(|run| run.block_count).sum::<u64>(),
            "a batch places at most its staged blocks"
        );
        let stores = self.data_stores_payload();
        let mut order: Vec<&PlacedPiece> = placed.iter().collect();
        order.sort_unstable_by_key(|piece| piece.data_block);
        let mut pieces: Vec<(u64, u64, Vec<u8>)> = Vec::new();
        for piece in order {
            let bytes = if stores {
                let start = block_bytes(piece.buffer_block);
                staged_bytes[start..start + block_bytes(piece.block_count)].to_vec()
            } else {
                Vec::new()
            };
            match pieces.last_mut() {
                Some((block, count, data)) if *block + *count == piece.data_block => {
                    *count += piece.block_count;
                    data.extend_from_slice(&bytes);
                }
                _ => pieces.push((piece.data_block, piece.block_count, bytes)),
            }
        }
        let run_count = pieces.len() as u64;
        (write_requests(pieces), run_count)
    }

    /// Allocates data blocks for an extent's staged runs (sorted by logical
    /// block); returns the placed pieces, buffer offsets following `staged`:
    /// all of them, or, when the data device fills, those placed before
    /// (`NoSpace` if none).
    fn place_extent(&mut self, id: u64, staged: &[StagedRun]) -> Result<Vec<PlacedPiece>> {
        let window = self.options.allocation_range_blocks;
        // Staged runs are in logical order; a block's bytes sit at its run's
        // offset in the batch buffer plus its offset in the run.
        let mut run_starts = Vec::with_capacity(staged.len());
        let mut offset = 0;
        for run in staged {
            run_starts.push((run.logical_block, offset));
            offset += run.block_count;
        }
        let buffer_block_of = |logical: u64| -> u64 {
            let index = run_starts.partition_point(|&(start, _)| start <= logical) - 1;
            run_starts[index].1 + (logical - run_starts[index].0)
        };
        let mut placed: Vec<PlacedPiece> = Vec::new();
        for group in group_staged_runs(staged.to_vec(), window) {
            let neighbour =
                placed_neighbour(self.extents.map(id), group.first_logical_block(), group.end_logical_block(), window);
            let range = match (self.layout.destage_rule(), neighbour) {
                (DestageRule::NearNeighbours, Some(_)) => {
                    self.destage_range(neighbour, group.first_logical_block(), group.block_count())
                }
                (DestageRule::NearNeighbours, None) => self.first_range_of_window(id, group.first_logical_block()),
                (DestageRule::FrameHomes | DestageRule::LogHead | DestageRule::ColdHomesElseLog, _) => None,
            };
            for run in &group.runs {
                let run_neighbour =
                    match run.logical_block.checked_sub(1).and_then(|b| map::lookup(self.extents.map(id), b)) {
                        Some(Location::Data(block)) => Some((run.logical_block - 1, block)),
                        _ => neighbour,
                    };
                let mut done = 0;
                while done < run.block_count {
                    let logical = run.logical_block + done;
                    let (start, got) =
                        match self.place_blocks(id, logical, run.block_count - done, range, run_neighbour) {
                            Ok(run) => run,
                            // The data device is full: what is placed goes,
                            // the rest stays staged.
                            Err(EngineError::NoSpace { .. }) if !placed.is_empty() => return Ok(placed),
                            Err(error) => return Err(error),
                        };
                    placed.push(PlacedPiece {
                        logical_block: logical,
                        block_count: got,
                        data_block: start,
                        buffer_block: buffer_block_of(logical),
                    });
                    done += got;
                }
            }
        }
        Ok(placed)
    }

    /// Allocates up to `count` blocks at the head of the log stream the layout
    /// gives block `logical` of extent `id` (the run stops where the stream
    /// changes); `None` when no clean segment is left.
    pub(crate) fn allocate_in_log(&mut self, id: u64, logical: u64, count: u64) -> Option<(u64, u64)> {
        let stream = self.layout.log_stream(id, logical);
        let same =
            (1..count).take_while(|&offset| self.layout.log_stream(id, logical + offset) == stream).count() as u64 + 1;
        self.segments.allocate_at_stream_head(&mut self.data_space, stream, same, HeadWriter::User)
    }

    /// The range for the window of `logical` of extent `id`, which has nothing
    /// on the data device yet: the window's range in the extent's
    /// reservation (made now, as large as the extent, if it has none), so
    /// that the extent is laid out in logical order however its first writes
    /// arrive; every later group continues a neighbour placed there. Past
    /// the reservation, or without a run of empty ranges that large, the
    /// next empty range.
    fn first_range_of_window(&mut self, id: u64, logical: u64) -> Option<u64> {
        self.reserved_range_of_window(id, logical).or_else(|| self.find_fresh_range())
    }

    /// The allocation range a group goes to (`None`: no range has room and no
    /// empty range is left; allocate anywhere near the neighbour).
    fn destage_range(
        &mut self,
        neighbour: Option<(u64, u64)>,
        first_logical_block: u64,
        block_count: u64,
    ) -> Option<u64> {
        let parameters = self.options.layout_parameters();
        let range_blocks = self.options.allocation_range_blocks;
        let range_count = self.range_count();
        let data_space = &self.data_space;
        let block_count_total = data_space.block_count();
        let mut free_blocks = |range: u64| {
            let start = range * range_blocks;
            data_space.allocatable_in(start, (start + range_blocks).min(block_count_total))
        };
        // The range where the group's first block would sit if the neighbour's
        // run continued: a predecessor at the end of the previous range puts
        // the group at the start of the next, not in the predecessor's own.
        let neighbour_range =
            neighbour.map(|_| hint_in_range(neighbour, first_logical_block, 0, block_count_total) / range_blocks);
        match choose_destage_range(&parameters, neighbour_range, block_count, range_count, &mut free_blocks) {
            RangeChoice::Neighbour(range) | RangeChoice::Nearby(range) => Some(range),
            RangeChoice::New => self.find_fresh_range(),
        }
    }

    /// Allocates up to `count` blocks for staged blocks from `logical` on, as
    /// the layout's destage rule says: inside `range` where the neighbour's
    /// run would continue (near the neighbours), or the block's frame home
    /// (frame homes, one block at a time); else near the hint anywhere. Never
    /// commits (blocks already allocated for this batch are not yet mapped).
    fn place_blocks(
        &mut self,
        id: u64,
        logical: u64,
        count: u64,
        range: Option<u64>,
        neighbour: Option<(u64, u64)>,
    ) -> Result<(u64, u64)> {
        let block_count = self.data_space.block_count();
        // The block's frame home, when the rule sends it there.
        let mut home = None;
        let (hint, count) = match self.layout.destage_rule() {
            DestageRule::NearNeighbours => {
                // A place the copy-out just emptied for this block is its own.
                if let Some(frame) = self.copied_homes.remove(&(id, logical)) {
                    if let Some(run) = self.data_space.allocate_within(frame, frame, frame + 1, 1) {
                        return Ok(run);
                    }
                }
                if let Some(run) = self.allocate_continuation(id, logical, count) {
                    return Ok(run);
                }
                let hint = match range {
                    Some(range) => {
                        let (start, end) = self.range_bounds(range);
                        let hint = hint_in_range(neighbour, logical, start, end);
                        if let Some(run) = self.data_space.allocate_within(hint, start, end, count) {
                            return Ok(run);
                        }
                        hint
                    }
                    None => hint_in_range(neighbour, logical, 0, block_count),
                };
                (hint, count)
            }
            DestageRule::FrameHomes => {
                home = self.layout.frame_home(id, logical);
                (home.unwrap_or_else(|| hint_in_range(neighbour, logical, 0, block_count)), 1)
            }
            DestageRule::LogHead => {
                if let Some(run) = self.allocate_in_log(id, logical, count) {
                    return Ok(run);
                }
                // No clean segment left (the cleaner fell behind): plug
                // holes rather than fail while the device has free blocks.
                (0, count)
            }
            DestageRule::ColdHomesElseLog => match self.layout.frame_home(id, logical) {
                Some(frame) => {
                    home = Some(frame);
                    (frame, 1)
                }
                None => {
                    // The run up to the next block that goes home.
                    let homeless = (1..count)
                        .take_while(|&offset| self.layout.frame_home(id, logical + offset).is_none())
                        .count() as u64
                        + 1;
                    if let Some(run) = self.allocate_in_log(id, logical, homeless) {
                        return Ok(run);
                    }
                    (0, homeless)
                }
            },
        };
        let run = self.data_space.allocate_near(hint, count).ok_or_else(|| EngineError::NoSpace {
            role: DeviceRole::Data,
            detail: format!("no free block to destage block {logical} of extent #{id}"),
        })?;
        if home == Some(run.0) {
            self.stats.destaged_home_blocks += 1;
        }
        Ok(run)
    }
}

/// `runs` (in logical order) without the logical blocks of `blocks` (sorted):
/// each run split around them.
fn without_blocks(runs: Vec<FlashRun>, blocks: &[u64]) -> Vec<FlashRun> {
    let mut kept = Vec::with_capacity(runs.len() + blocks.len());
    for run in runs {
        let end = run.logical_block + run.block_count;
        let piece = |start: u64, piece_end: u64| FlashRun {
            logical_block: start,
            block_count: piece_end - start,
            flash_block: run.flash_block + (start - run.logical_block),
        };
        let mut start = run.logical_block;
        let first_inside = blocks.partition_point(|&block| block < run.logical_block);
        for &block in blocks[first_inside..].iter().take_while(|&&block| block < end) {
            if block > start {
                kept.push(piece(start, block));
            }
            start = block + 1;
        }
        if start < end {
            kept.push(piece(start, end));
        }
    }
    kept
}

/// Keeps the first `blocks` blocks of `runs` (in order) and returns the rest,
/// splitting the run the boundary falls in.
fn split_runs_after(runs: &mut Vec<FlashRun>, blocks: u64) -> Vec<FlashRun> {
    let mut kept = 0;
    for index in 0..runs.len() {
        let run = runs[index];
        if kept + run.block_count <= blocks {
            kept += run.block_count;
            continue;
        }
        let mut rest = runs.split_off(index);
        let head = blocks - kept;
        if head > 0 {
            runs.push(FlashRun { block_count: head, ..run });
            rest[0] = FlashRun {
                logical_block: run.logical_block + head,
                block_count: run.block_count - head,
                flash_block: run.flash_block + head,
            };
        }
        return rest;
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(logical_block: u64, block_count: u64, flash_block: u64) -> FlashRun {
        FlashRun { logical_block, block_count, flash_block }
    }

    #[test]
    fn retained_blocks_are_cut_out_of_the_runs() {
        let runs = vec![run(10, 5, 100), run(20, 1, 7), run(30, 3, 50)];
        assert_eq!(without_blocks(runs.clone(), &[]), runs);
        assert_eq!(
            without_blocks(runs.clone(), &[0, 10, 12, 20, 32, 40]),
            vec![run(11, 1, 101), run(13, 2, 103), run(30, 2, 50)]
        );
        assert_eq!(
            without_blocks(runs, &[14, 31]),
            vec![run(10, 4, 100), run(20, 1, 7), run(30, 1, 50), run(32, 1, 52)]
        );
    }
}
