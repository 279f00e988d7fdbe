//! Figures 2 and 5 of the HyLog paper on the independent segment simulator
//! ([`crate::seed001_hylog::segment_simulator`]), under writes drawn from the
//! workload crate's seeded generators.
//!
//! - Figure 2: the cleaning utilisation u_c of greedy cleaning against the
//!   disk utilisation u under uniformly random updates, beside Eq 2.
//! - Figure 5: the overall write cost of cost-age, hole-plugging and the
//!   adaptive cleaner (and greedy, for reference) against u, uniformly random
//!   updates.
//!
//! The disk is the paper's atlas10k with Eq 6's segment (512 KiB, 128 pages,
//! A = 32.8) unless the spec says otherwise. Each point warms up for
//! `warmup_rewrites` times the data set's pages and measures as many again
//! times `measured_rewrites`.

use proxima_workload::synthetic::{Pattern, SyntheticSpec, SyntheticWorkload};
use serde::{Deserialize, Serialize};

use crate::seed001_hylog::cost_model::{
    cleaning_utilization_for, segment_efficiency, segment_size_bytes, DiskTiming, PAGE_SIZE_BYTES,
    SEGMENT_EFFICIENCY_SHARE,
};
use crate::seed001_hylog::paper::{self, PaperDisk};
use crate::seed001_hylog::segment_simulator::{
    CleaningPolicy, SegmentSimulator, Separation, SimulatorConfig, SimulatorReport,
};

/// The utilisations of both figures: 0.50 to 0.95 in steps of 0.05.
pub const UTILIZATIONS: [f64; 10] = [0.50, 0.55, 0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90, 0.95];

/// How big and how long each point's simulation is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CleaningRunSpec {
    /// Pages per segment.
    pub segment_pages: u32,
    /// Segments on the disk.
    pub segment_count: u32,
    /// A, for the cost of a page write.
    pub segment_efficiency: f64,
    /// Warm-up writes, in multiples of the data set's pages.
    pub warmup_rewrites: u64,
    /// Measured writes, in multiples of the data set's pages.
    pub measured_rewrites: u64,
    /// Seed of the write stream.
    pub seed: u64,
    /// Hot/cold log heads, or one log.
    pub separation: Separation,
}

impl CleaningRunSpec {
    /// The paper's disk (the atlas10k, Eq 6's 512 KiB segment and its A) on
    /// `segment_count` segments.
    pub fn atlas10k(segment_count: u32, seed: u64) -> CleaningRunSpec {
        let atlas = paper::disk(paper::DEFAULT_DISK).expect("the atlas10k is a paper disk");
        CleaningRunSpec::paper_disk(atlas, segment_count, seed)
    }

    /// A disk of the paper: Eq 6's segment for its timing and the A of that
    /// segment, on `segment_count` segments.
    pub fn paper_disk(disk: &PaperDisk, segment_count: u32, seed: u64) -> CleaningRunSpec {
        CleaningRunSpec::for_timing(disk.timing, segment_count, seed)
    }

    /// A disk of `timing` (the paper's figures for one of its disks, or a
    /// simulated drive's fitted ones): Eq 6's segment and the A of that
    /// segment, on `segment_count` segments.
    pub fn for_timing(timing: DiskTiming, segment_count: u32, seed: u64) -> CleaningRunSpec {
        let segment_bytes = segment_size_bytes(timing, PAGE_SIZE_BYTES, SEGMENT_EFFICIENCY_SHARE);
        CleaningRunSpec {
            segment_pages: u32::try_from(segment_bytes / PAGE_SIZE_BYTES).expect("a segment of fewer than 2^32 pages"),
            segment_count,
            segment_efficiency: segment_efficiency(timing, PAGE_SIZE_BYTES, segment_bytes as f64),
            warmup_rewrites: 4,
            measured_rewrites: 4,
            seed,
            separation: Separation::None,
        }
    }
}

/// One point of Figure 2.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Figure2Point {
    /// Disk utilisation.
    pub u: f64,
    /// u_c measured with greedy cleaning.
    pub uc_simulated: f64,
    /// u_c from Eq 2.
    pub uc_eq2: f64,
}

/// One point of Figure 5: overall scaled write costs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Figure5Point {
    /// Disk utilisation.
    pub u: f64,
    /// Greedy cleaning (for reference; not in the paper's figure).
    pub greedy: f64,
    /// Cost-age cleaning.
    pub cost_age: f64,
    /// Hole-plugging.
    pub hole_plugging: f64,
    /// The adaptive cleaner.
    pub adaptive: f64,
}

/// Uniformly random updates of `pages` pages from `seed`.
pub fn uniform_updates(pages: u64, seed: u64) -> impl Iterator<Item = u64> {
    updates(Pattern::Uniform, pages, seed)
}

/// Updates of `pages` pages in `pattern` from `seed` (writes only).
pub fn updates(pattern: Pattern, pages: u64, seed: u64) -> impl Iterator<Item = u64> {
    let spec =
        SyntheticSpec { pattern, block_count: pages, request_blocks: 1, read_fraction: 0.0, scatter: false, seed };
    SyntheticWorkload::new(spec).map(|request| request.block)
}

/// One simulation: `policy` at utilisation `u` under `pattern`.
pub fn simulate(spec: &CleaningRunSpec, u: f64, policy: CleaningPolicy, pattern: Pattern) -> SimulatorReport {
    let config = SimulatorConfig {
        separation: spec.separation,
        ..SimulatorConfig::at_utilization(spec.segment_pages, spec.segment_count, u, policy, spec.segment_efficiency)
    };
    let pages = config.live_pages;
    let mut simulator = SegmentSimulator::new(config);
    let mut writes = updates(pattern, pages, spec.seed);
    simulator.run(&mut writes, spec.warmup_rewrites * pages, spec.measured_rewrites * pages)
}

/// Figure 2 at every utilisation of [`UTILIZATIONS`].
pub fn figure_2(spec: &CleaningRunSpec) -> Vec<Figure2Point> {
    UTILIZATIONS
        .iter()
        .map(|&u| Figure2Point {
            u,
            uc_simulated: simulate(spec, u, CleaningPolicy::Greedy, Pattern::Uniform).cleaning_utilization,
            uc_eq2: cleaning_utilization_for(u),
        })
        .collect()
}

/// Figure 5 at every utilisation of [`UTILIZATIONS`].
pub fn figure_5(spec: &CleaningRunSpec) -> Vec<Figure5Point> {
    UTILIZATIONS
        .iter()
        .map(|&u| {
            let cost = |policy| simulate(spec, u, policy, Pattern::Uniform).write_cost;
            Figure5Point {
                u,
                greedy: cost(CleaningPolicy::Greedy),
                cost_age: cost(CleaningPolicy::CostAge),
                hole_plugging: cost(CleaningPolicy::HolePlugging),
                adaptive: cost(CleaningPolicy::Adaptive),
            }
        })
        .collect()
}
