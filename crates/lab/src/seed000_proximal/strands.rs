//! Strands on a simulated disk: `N` strands of `K` one-block requests, each issued
//! at once to an idle disk whose heads were first put at a random position, with at
//! most `Q` requests outstanding at the drive (the rest wait at the host and are
//! sent as others complete, in issue order).
//!
//! Measures (virtual time, exact from the seed):
//! - `strand_ms`: mean time from issuing a strand to its last completion;
//! - `per_request_ms = strand_ms / K`, and `per_request_op` in units of the drive's
//!   mean random 4 KiB read at queue depth 1 (one OP);
//! - extra revolutions: for each strand, the number of whole revolutions the platter
//!   turns between the completion of the strand's first request and that of its
//!   last, `⌊(t_last − t_first) / T_rev⌋`. Once the heads have reached the strand,
//!   a strand serviced in one sweep of the platter counts 0, and each revolution
//!   lost to a request the heads reached too late adds one: the `k − 1` of the
//!   birthday model, where the strand takes `k` revolutions from its first request.

use std::sync::Arc;

use proxima_disk::{DiskCompletion, DiskModel, DiskOp, DiskRequest, HardDisk, Nanos};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::progress::Progress;
use crate::seed000_proximal::placement::{block_sectors, place_strand, IssueOrder, Placement};
use crate::LabError;

/// One strand experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrandConfig {
    /// Where the requests go.
    pub placement: Placement,
    /// Requests per strand (`K`).
    pub strand_size: u32,
    /// Strands simulated (`N`).
    pub strand_count: u32,
    /// Read or write.
    pub op: DiskOp,
    /// Requests outstanding at the drive at once (`Q`); the drive's own queue is
    /// also capped by the model's maximum queue length.
    pub queue_depth: u32,
    /// Issue order within a strand.
    pub order: IssueOrder,
    /// Whether the strand meets an idle or a busy drive.
    pub start: StrandStart,
    /// Seed of the run: placements, head positions, rotational phases.
    pub seed: u64,
}

/// How a strand meets the drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StrandStart {
    /// The drive is idle, its heads at a random position: it starts on the first
    /// request the moment it arrives, so only the later ones are scheduled.
    Idle,
    /// The strand is issued while the drive services one random 4 KiB read (which
    /// leaves the heads at a random position); the scheduler then chooses even the
    /// first request among those queued. Timed from that read's completion. The
    /// paper notes that real drives need this ("a non-empty disk queue").
    Busy,
}

impl StrandStart {
    /// `idle` or `busy`.
    pub fn label(&self) -> &'static str {
        match self {
            StrandStart::Idle => "idle",
            StrandStart::Busy => "busy",
        }
    }
}

/// What a strand experiment measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrandResult {
    /// Requests per strand.
    pub strand_size: u32,
    /// Strands simulated.
    pub strand_count: u32,
    /// Mean strand response time.
    pub strand_ms: f64,
    /// `strand_ms / strand_size`.
    pub per_request_ms: f64,
    /// `per_request_ms` in OPs.
    pub per_request_op: f64,
    /// The OP used, in milliseconds.
    pub op_ms: f64,
    /// Mean of the per-strand extra revolutions (see the module documentation).
    pub extra_revolutions_mean: f64,
    /// Fraction of strands with exactly `e` extra revolutions, for `e = 0, 1, …`.
    pub extra_revolutions_distribution: Vec<f64>,
}

/// Validates a configuration before any simulation.
fn check_config(config: &StrandConfig) -> Result<(), LabError> {
    if config.strand_size == 0 {
        return Err(LabError::InvalidParameter {
            parameter: "strand",
            message: "a strand needs at least one request".into(),
        });
    }
    if config.strand_count == 0 {
        return Err(LabError::InvalidParameter { parameter: "count", message: "simulate at least one strand".into() });
    }
    if config.queue_depth == 0 {
        return Err(LabError::InvalidParameter { parameter: "queue-depth", message: "must be at least 1".into() });
    }
    Ok(())
}

/// Runs `config.strand_count` strands on a fresh drive running `model` and returns
/// the statistics, with costs in units of `op_ms` (see [`crate::seed000_proximal::closed_loop::measure_op_ms`]).
pub fn run_strands(
    model: &Arc<DiskModel>,
    config: &StrandConfig,
    op_ms: f64,
    progress: &mut dyn Progress,
) -> Result<StrandResult, LabError> {
    check_config(config)?;
    let mut random = ChaCha8Rng::seed_from_u64(config.seed);
    let mut disk = HardDisk::new(Arc::clone(model), config.seed);
    let revolution_ns = model.revolution_ns();
    let block = block_sectors(model);
    let mut now_ns: Nanos = 0;
    let mut total_strand_ns: u128 = 0;
    let mut extra_counts: Vec<u64> = Vec::new();
    let mut next_id = 0u64;
    for _ in 0..config.strand_count {
        let lbns = place_strand(model, config.placement, config.strand_size, config.op, config.order, &mut random)?;
        // A random head position and a random rotational phase before each strand.
        disk.move_heads_to(now_ns, random.gen_range(0..model.sector_count()));
        now_ns += random.gen_range(0..revolution_ns);
        let requests: Vec<DiskRequest> = lbns
            .iter()
            .map(|&lbn| {
                next_id += 1;
                DiskRequest { id: next_id, op: config.op, lbn, sector_count: block }
            })
            .collect();
        let primer = match config.start {
            StrandStart::Idle => None,
            StrandStart::Busy => {
                next_id += 1;
                let lbn = random.gen_range(0..model.sector_count() / u64::from(block)) * u64::from(block);
                Some(DiskRequest { id: next_id, op: DiskOp::Read, lbn, sector_count: block })
            }
        };
        let outcome = run_batch(&mut disk, now_ns, &requests, config.queue_depth as usize, primer);
        let completions = &outcome.completions;
        let first_ns = completions.first().map_or(outcome.start_ns, |completion| completion.completion_ns);
        let last_ns = completions.last().map_or(outcome.start_ns, |completion| completion.completion_ns);
        total_strand_ns += u128::from(last_ns - outcome.start_ns);
        let extra = ((last_ns - first_ns) / revolution_ns) as usize;
        if extra_counts.len() <= extra {
            extra_counts.resize(extra + 1, 0);
        }
        extra_counts[extra] += 1;
        now_ns = last_ns;
        progress.advance(1);
    }
    let count = f64::from(config.strand_count);
    let strand_ms = total_strand_ns as f64 / count / 1e6;
    let per_request_ms = strand_ms / f64::from(config.strand_size);
    let distribution: Vec<f64> = extra_counts.iter().map(|&strands| strands as f64 / count).collect();
    Ok(StrandResult {
        strand_size: config.strand_size,
        strand_count: config.strand_count,
        strand_ms,
        per_request_ms,
        per_request_op: per_request_ms / op_ms,
        op_ms,
        extra_revolutions_mean: crate::seed000_proximal::birthday::distribution_mean(&distribution),
        extra_revolutions_distribution: distribution,
    })
}

/// The completions of a batch and when its timing starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchOutcome {
    /// When the batch's own timing starts: its issue time on an idle drive, or the
    /// completion of the request it was queued behind.
    pub start_ns: Nanos,
    /// The batch's completions in time order (never the primer's).
    pub completions: Vec<DiskCompletion>,
}

/// Issues `requests` in order at `issue_ns` to an idle `disk`, keeping at most
/// `window` of them outstanding (the rest wait at the host and go out one per
/// completion), and returns their completions.
///
/// With a `primer`, the primer is delivered first and the batch queues behind it,
/// so the drive's scheduler chooses even the batch's first request among all those
/// queued; the batch is then timed from the primer's completion.
pub fn run_batch(
    disk: &mut HardDisk,
    issue_ns: Nanos,
    requests: &[DiskRequest],
    window: usize,
    primer: Option<DiskRequest>,
) -> BatchOutcome {
    assert!(disk.is_idle(), "a batch starts on an idle disk");
    assert!(window > 0, "at least one request outstanding");
    if let Some(primer) = primer {
        assert!(requests.iter().all(|request| request.id != primer.id), "the primer's id is distinct");
        disk.arrive(issue_ns, primer);
    }
    let mut start_ns = issue_ns;
    let mut completions = Vec::with_capacity(requests.len());
    let mut pending = requests.iter();
    for request in pending.by_ref().take(window) {
        disk.arrive(issue_ns, *request);
    }
    let mut produced = Vec::new();
    while completions.len() < requests.len() {
        let event_ns = disk.next_event_ns().expect("a disk with outstanding requests has a next event");
        disk.advance(event_ns, &mut produced);
        for completion in produced.drain(..) {
            if primer.is_some_and(|primer| primer.id == completion.id) {
                start_ns = completion.completion_ns;
                continue;
            }
            if let Some(request) = pending.next() {
                disk.arrive(completion.completion_ns, *request);
            }
            completions.push(completion);
        }
    }
    BatchOutcome { start_ns, completions }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;

    fn cheetah() -> Arc<DiskModel> {
        Arc::new(DiskModel::builtin("cheetah15k5").expect("the built-in Cheetah 15K.5 loads"))
    }

    fn proximal(strand_size: u32, queue_depth: u32, seed: u64) -> StrandConfig {
        StrandConfig {
            placement: Placement::Span { span_lbn: 100_000 },
            strand_size,
            strand_count: 50,
            op: DiskOp::Read,
            queue_depth,
            order: IssueOrder::Ascending,
            start: StrandStart::Idle,
            seed,
        }
    }

    #[test]
    fn batch_window_limits_outstanding_requests() {
        let model = cheetah();
        let mut disk = HardDisk::new(Arc::clone(&model), 1);
        let requests: Vec<DiskRequest> = (0..6)
            .map(|index| DiskRequest { id: index, op: DiskOp::Read, lbn: index * 1_000_000, sector_count: 8 })
            .collect();
        let completions = run_batch(&mut disk, 0, &requests, 2, None).completions;
        assert_eq!(completions.len(), 6);
        // With two outstanding, requests 2.. arrive only when an earlier one completes.
        for completion in completions.iter().filter(|completion| completion.id >= 2) {
            assert!(completion.arrival_ns > 0, "request {} waited at the host", completion.id);
        }
        assert!(disk.is_idle());
    }

    #[test]
    fn a_primed_batch_is_timed_from_the_primer_and_queues_behind_it() {
        let model = cheetah();
        let mut disk = HardDisk::new(Arc::clone(&model), 1);
        let primer = DiskRequest { id: 100, op: DiskOp::Read, lbn: 50_000_000, sector_count: 8 };
        let requests: Vec<DiskRequest> = (0..4)
            .map(|index| DiskRequest { id: index, op: DiskOp::Read, lbn: 1_000_000 + index * 800, sector_count: 8 })
            .collect();
        let outcome = run_batch(&mut disk, 0, &requests, 4, Some(primer));
        assert!(outcome.start_ns > 0, "timed from the primer's completion");
        assert_eq!(outcome.completions.len(), 4, "the primer is not among the batch's completions");
        assert!(outcome.completions.iter().all(|completion| completion.start_ns >= outcome.start_ns));
    }

    #[test]
    fn same_seed_same_result_and_other_seed_differs() {
        let model = cheetah();
        let first = run_strands(&model, &proximal(8, 8, 5), 5.0, &mut NoProgress).unwrap();
        let again = run_strands(&model, &proximal(8, 8, 5), 5.0, &mut NoProgress).unwrap();
        let other = run_strands(&model, &proximal(8, 8, 6), 5.0, &mut NoProgress).unwrap();
        assert_eq!(first, again);
        assert_ne!(first.strand_ms, other.strand_ms);
    }

    #[test]
    fn distribution_of_extra_revolutions_sums_to_one() {
        let result = run_strands(&cheetah(), &proximal(6, 8, 9), 5.0, &mut NoProgress).unwrap();
        let sum: f64 = result.extra_revolutions_distribution.iter().sum();
        assert!((sum - 1.0).abs() < 1e-12);
        assert!(result.extra_revolutions_mean >= 0.0);
    }

    #[test]
    fn a_single_request_strand_has_no_extra_revolutions() {
        let result = run_strands(&cheetah(), &proximal(1, 1, 9), 5.0, &mut NoProgress).unwrap();
        assert_eq!(result.extra_revolutions_distribution, vec![1.0]);
    }

    #[test]
    fn zero_queue_depth_is_rejected() {
        let result = run_strands(&cheetah(), &proximal(8, 0, 1), 5.0, &mut NoProgress);
        assert!(matches!(result, Err(LabError::InvalidParameter { parameter: "queue-depth", .. })));
    }
}
