//! The birthday model of missed revolutions (Appendix A of the proximal I/O paper).
//!
//! A strand of `D` proximal requests, each on its own track, is serviced by a disk
//! whose heads need a track switch of `H` sectors between any two of them. Divide a
//! track of `SPT` sectors into `B = SPT / H` equal bins (wedges). Two requests that
//! fall into the same bin cannot be serviced in the same revolution: after the first,
//! the heads arrive too late for the second and must wait a whole turn. With the
//! requests' angular positions independent and uniform, the bins are birthdays, the
//! requests are people, and the strand needs `k` revolutions (`k − 1` extra ones)
//! when the largest number of requests sharing one bin is exactly `k`.
//!
//! `Q_k(n, b)` is the probability that, with `n` people and `b` equally likely
//! birthdays, the largest group sharing a birthday has exactly `k` members. The
//! paper's formula (its reference [33]), restored from the garbled text, is
//!
//! ```text
//!            ⌊n/k⌋      n! b!                      k−1                  (b − i)^(n−ik)
//! Q_k(n,b) =   Σ    ───────────────────────────  ·  Σ  Q_j(n − ik, b − i) · ──────────────
//!             i=1   b^(ik) i! (k!)^i (n−ik)! (b−i)!  j=1                      b^(n−ik)
//! ```
//!
//! read as: choose the `i` bins that hold exactly `k` requests (`b!/(i!(b−i)!)`),
//! choose which requests go to them (`n!/((k!)^i (n−ik)!)`), each with probability
//! `1/b` (`b^−ik`); the remaining `n − ik` requests fall into the other `b − i` bins
//! (`((b−i)/b)^(n−ik)`) with no bin reaching `k` (the inner sum, which is 1 when no
//! request remains). `Q_1(n, b) = b! / ((b−n)! b^n)` is the classical birthday
//! probability. `P_k = 1 − Σ_{i≤k} Q_i` is the probability of more than `k`
//! revolutions.
//!
//! This module computes the distribution three ways, which the tests cross-check:
//! exactly with integer arithmetic (counting assignments, while they fit in `u128`),
//! with a numerically stable dynamic programme over bins (all terms positive, so no
//! cancellation), and with the paper's recursive formula in log space.
//!
//! # The clash window and the sweep model
//!
//! The fixed bins are the paper's simplification. What the geometry gives is a
//! *clash window*: the heads finish request `i` (its transfer takes `x_i` of a
//! revolution from its start angle `θ_i`) and need the switching time `s_ij` to
//! move to request `j`'s track, so `j` can follow `i` in the same sweep only when
//! `θ_j − θ_i ≥ w_ij = x_i + s_ij` (angles in revolutions). Within a 100,000-LBN
//! span of a surface-serpentine drive the switch is a seek over tens of cylinders,
//! not a head switch, so `s_ij` has a distribution ([`clash_windows_for_span`]
//! derives it from the model's mapping and seek curve). Since either request may
//! be served first, a pair clashes when `|θ_i − θ_j| < w`: the window is
//! two-sided, and the clash probability per pair is `2w`, where two requests share
//! one of `B` bins with probability `1/B`. Matching the two gives the effective
//! bin count `B = 1 / (2 E[w])` ([`effective_bin_count`]).
//!
//! The sweep model uses the window distribution directly and follows the drive's
//! shortest-positioning-time-first choice. From a request just started, another
//! request `j` at uniform angle is reached after `w_j + ((θ_j − θ_i − w_j) mod 1)`,
//! which is `w_j + U_j` with `U_j` uniform on `[0, 1)` whatever `w_j` is. The
//! scheduler takes the nearest, so with `m` requests left the step to the next
//! start is `S_m = min_j (w_j + U_j)`, with `P(S_m > t) = G(t)^m` where
//! `G(t) = P(w + U > t)`. From the first request's completion to the last one's
//! (equal transfers) the drive spends `S_{D−1} + … + S_1`; the strand's extra
//! revolutions are the whole revolutions in that time, which is how the
//! simulation counts them. [`sweep_extra_revolution_distributions`] computes the
//! sum by discrete convolution on a grid of the revolution, deterministically.
//! It assumes the requests still waiting are spread uniformly in angle at every
//! step (the scheduler's earlier choices leave them slightly clustered behind the
//! heads, which the model ignores).

use std::collections::HashMap;

use proxima_disk::{DiskModel, DiskOp, TrackExtent};

/// Probability that the largest bin holds exactly `largest_load` of `request_count`
/// requests thrown uniformly into `bin_count` bins: the paper's `Q_k(n, b)`.
///
/// `Q_0(0, b) = 1`; with no bins and at least one request every probability is 0.
pub fn probability_largest_load_exactly(largest_load: u32, request_count: u32, bin_count: u32) -> f64 {
    let at_most = probability_largest_load_at_most(largest_load, request_count, bin_count);
    if largest_load == 0 {
        return at_most;
    }
    at_most - probability_largest_load_at_most(largest_load - 1, request_count, bin_count)
}

/// Probability that no bin holds more than `load_limit` of `request_count` requests
/// thrown uniformly into `bin_count` bins.
///
/// Exact (a ratio of two integers, rounded once) while `bin_count^request_count`
/// fits in 128 bits; otherwise from the dynamic programme over bins.
pub fn probability_largest_load_at_most(load_limit: u32, request_count: u32, bin_count: u32) -> f64 {
    match exact_assignment_count_at_most(load_limit, request_count, bin_count) {
        Some((favourable, total)) => ratio_of_integers(favourable, total),
        None => probability_at_most_by_bins(load_limit, request_count, bin_count),
    }
}

/// The distribution of the largest bin load: element `k` is `Q_k(n, b)` for
/// `k = 0..=n`. The elements sum to 1 when `bin_count > 0` or `request_count == 0`.
pub fn largest_load_distribution(request_count: u32, bin_count: u32) -> Vec<f64> {
    let at_most: Vec<f64> =
        (0..=request_count).map(|limit| probability_largest_load_at_most(limit, request_count, bin_count)).collect();
    let mut distribution = Vec::with_capacity(at_most.len());
    for (load, probability) in at_most.iter().enumerate() {
        let below = if load == 0 { 0.0 } else { at_most[load - 1] };
        // Clamp rounding noise of the subtraction (only the floating-point path has any).
        distribution.push((probability - below).max(0.0));
    }
    distribution
}

/// Probability of exactly `e` extra revolutions for a strand of `request_count`
/// requests on a disk with `bin_count` bins per revolution: element `e` is
/// `Q_{e+1}(D, B)`, for `e = 0..D`.
///
/// `bin_count` is `SPT / H` and need not be an integer: a fractional count is read
/// as the mixture of the two neighbouring integer bin counts, weighted by the
/// fraction (`B = 6.25` is ¾ of the 6-bin distribution plus ¼ of the 7-bin one),
/// which is itself a probability distribution and agrees with the integer model at
/// integer `B`.
///
/// # Panics
/// If `bin_count` is not finite or is below 1, or `request_count` is 0 (a strand
/// has at least one request).
pub fn extra_revolution_distribution(request_count: u32, bin_count: f64) -> Vec<f64> {
    assert!(bin_count.is_finite() && bin_count >= 1.0, "bin count {bin_count} must be a finite number ≥ 1");
    assert!(request_count >= 1, "a strand has at least one request");
    let lower_bins = bin_count.floor();
    let upper_weight = bin_count - lower_bins;
    let lower = largest_load_distribution(request_count, lower_bins as u32);
    let upper = largest_load_distribution(request_count, lower_bins as u32 + 1);
    // Element k of a largest-load distribution is k revolutions, i.e. k − 1 extra;
    // k = 0 has probability 0 for a non-empty strand.
    (1..=request_count as usize).map(|load| (1.0 - upper_weight) * lower[load] + upper_weight * upper[load]).collect()
}

/// The paper's `P_k`: probability that the strand needs more than `revolution_count`
/// revolutions, i.e. at least `revolution_count` extra ones.
pub fn probability_more_revolutions_than(revolution_count: u32, request_count: u32, bin_count: u32) -> f64 {
    1.0 - probability_largest_load_at_most(revolution_count, request_count, bin_count)
}

/// The number of bins `B = SPT / H` for a drive whose track switch takes
/// `track_switch_ns` out of a revolution of `revolution_ns`: the number of sectors
/// per track divided by the sectors that pass under the heads during the switch,
/// which is the same ratio expressed in time.
pub fn bin_count_for_track_switch(revolution_ns: u64, track_switch_ns: u64) -> f64 {
    assert!(track_switch_ns > 0, "a track switch takes time");
    revolution_ns as f64 / track_switch_ns as f64
}

/// Mean of a distribution given as probabilities indexed by value.
pub fn distribution_mean(distribution: &[f64]) -> f64 {
    distribution.iter().enumerate().map(|(value, probability)| value as f64 * probability).sum()
}

/// The most likely value of a distribution given as probabilities indexed by value
/// (the smallest one on a tie).
pub fn distribution_mode(distribution: &[f64]) -> usize {
    let mut mode = 0;
    for (value, probability) in distribution.iter().enumerate() {
        if *probability > distribution[mode] {
            mode = value;
        }
    }
    mode
}

/// Total variation distance between two distributions indexed by value: half the
/// sum of absolute differences, where a missing element counts as probability 0.
pub fn total_variation_distance(first: &[f64], second: &[f64]) -> f64 {
    let length = first.len().max(second.len());
    let value_at = |distribution: &[f64], index: usize| distribution.get(index).copied().unwrap_or(0.0);
    0.5 * (0..length).map(|index| (value_at(first, index) - value_at(second, index)).abs()).sum::<f64>()
}

/// The distribution of the clash window `w` between two requests of a strand, in
/// revolutions: the transfer of the first request plus the switching time to the
/// second one's track (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct ClashWindows {
    /// `(window in revolutions, probability)`; probabilities sum to 1.
    entries: Vec<(f64, f64)>,
}

impl ClashWindows {
    /// A window distribution from `(window in revolutions, weight)` pairs; the
    /// weights are normalised.
    ///
    /// # Panics
    /// If a window is negative or not finite, a weight is negative, or all weights
    /// are zero.
    pub fn new(weighted_windows: Vec<(f64, f64)>) -> ClashWindows {
        let total: f64 = weighted_windows.iter().map(|(_, weight)| *weight).sum();
        assert!(total > 0.0 && total.is_finite(), "clash windows need a positive total weight");
        for (window, weight) in &weighted_windows {
            assert!(window.is_finite() && *window >= 0.0, "clash window {window} must be finite and ≥ 0");
            assert!(*weight >= 0.0, "clash window weight {weight} must be ≥ 0");
        }
        let entries = weighted_windows.into_iter().map(|(window, weight)| (window, weight / total)).collect();
        ClashWindows { entries }
    }

    /// `(window in revolutions, probability)` pairs.
    pub fn entries(&self) -> &[(f64, f64)] {
        &self.entries
    }

    /// `E[w]` in revolutions.
    pub fn mean_revolutions(&self) -> f64 {
        self.entries.iter().map(|(window, probability)| window * probability).sum()
    }

    /// The largest window, in revolutions.
    pub fn max_revolutions(&self) -> f64 {
        self.entries.iter().map(|(window, _)| *window).fold(0.0, f64::max)
    }

    /// `G(t) = P(w + U > t)` with `U` uniform on `[0, 1)`: the probability that one
    /// waiting request is not yet reachable `t` revolutions after the last start.
    pub fn unreached_probability(&self, time_revolutions: f64) -> f64 {
        self.entries
            .iter()
            .map(|(window, probability)| probability * (1.0 - (time_revolutions - window)).clamp(0.0, 1.0))
            .sum()
    }
}

/// Derives the clash windows of a strand within `span_lbn` LBNs from the drive's
/// geometry and timing queries only, for `base_count` span positions spread evenly
/// over the disk (the zones differ in sectors per track, hence in how many tracks
/// and cylinders a span covers).
///
/// For each position, the span's tracks are found with [`DiskModel::track_of`];
/// a request lands on a track in proportion to the span's sectors there. A pair on
/// tracks `a`, `b` has window `x_a + s_ab / T_rev`: `x_a` the transfer of
/// `block_sectors` on track `a` (`block_sectors / SPT_a` of a revolution), `s_ab`
/// the seek over their cylinder distance (with the write settle for writes), a head
/// switch on the same cylinder, nothing on the same track.
///
/// # Panics
/// If `span_lbn` or `block_sectors` is 0 or the span does not fit on the disk, or
/// `base_count` is 0.
pub fn clash_windows_for_span(
    model: &DiskModel,
    span_lbn: u64,
    block_sectors: u32,
    base_count: u32,
    op: DiskOp,
) -> Vec<ClashWindows> {
    assert!(span_lbn > 0 && block_sectors > 0 && base_count > 0, "a span, a block and a position are needed");
    assert!(span_lbn <= model.sector_count(), "the span {span_lbn} does not fit on the disk");
    span_bases(model, span_lbn, block_sectors, base_count)
        .map(|base| clash_windows_at(model, base, span_lbn, block_sectors, op))
        .collect()
}

/// `base_count` block-aligned span starts: the middles of equal slices of the
/// possible bases.
fn span_bases(model: &DiskModel, span_lbn: u64, block_sectors: u32, base_count: u32) -> impl Iterator<Item = u64> {
    let base_range = u128::from(model.sector_count() - span_lbn);
    (0..u128::from(base_count)).map(move |index| {
        let base = (base_range * (2 * index + 1) / (2 * u128::from(base_count))) as u64;
        base - base % u64::from(block_sectors)
    })
}

/// The mean switching time between the tracks of two requests within `span_lbn`
/// LBNs, over the same span positions as [`clash_windows_for_span`], in
/// nanoseconds: the part of the mean clash window that is not transfer.
pub fn mean_switching_ns_for_span(model: &DiskModel, span_lbn: u64, base_count: u32, op: DiskOp) -> f64 {
    assert!(span_lbn > 0 && base_count > 0, "a span and a position are needed");
    assert!(span_lbn <= model.sector_count(), "the span {span_lbn} does not fit on the disk");
    let transfer_free: f64 = span_bases(model, span_lbn, 1, base_count)
        .map(|base| {
            let tracks = span_tracks(model, base, span_lbn);
            let total: f64 = tracks.iter().map(|(_, sectors)| *sectors as f64).sum();
            let mut mean_ns = 0.0;
            for (first, first_sectors) in &tracks {
                for (second, second_sectors) in &tracks {
                    let weight = *first_sectors as f64 * *second_sectors as f64 / (total * total);
                    mean_ns += weight * switching_ns(model, first, second, op) as f64;
                }
            }
            mean_ns
        })
        .sum();
    transfer_free / f64::from(base_count)
}

/// The clash windows of a span starting at `base`.
fn clash_windows_at(model: &DiskModel, base: u64, span_lbn: u64, block_sectors: u32, op: DiskOp) -> ClashWindows {
    let tracks = span_tracks(model, base, span_lbn);
    let revolution_ns = model.revolution_ns() as f64;
    let mut weighted = Vec::with_capacity(tracks.len() * tracks.len());
    for (first, first_sectors) in &tracks {
        let transfer = f64::from(block_sectors) / f64::from(first.sectors_per_track);
        for (second, second_sectors) in &tracks {
            let switch_ns = switching_ns(model, first, second, op);
            let weight = *first_sectors as f64 * *second_sectors as f64;
            weighted.push((transfer + switch_ns as f64 / revolution_ns, weight));
        }
    }
    ClashWindows::new(weighted)
}

/// The tracks holding `[base, base + span_lbn)`, each with the span's sectors on it.
fn span_tracks(model: &DiskModel, base: u64, span_lbn: u64) -> Vec<(TrackExtent, u64)> {
    let end = base + span_lbn;
    let mut tracks = Vec::new();
    let mut lbn = base;
    while lbn < end {
        let track = model.track_of(lbn).expect("an LBN of the span lies on the disk");
        let track_end = track.first_lbn + u64::from(track.sector_count);
        assert!(track_end > lbn, "a track holds the LBN it was looked up by");
        tracks.push((track, track_end.min(end) - lbn));
        lbn = track_end;
    }
    tracks
}

/// The time the heads need between two tracks: a seek across cylinders, a head
/// switch between surfaces of one cylinder, nothing on the same track.
fn switching_ns(model: &DiskModel, from: &TrackExtent, to: &TrackExtent, op: DiskOp) -> u64 {
    let distance = from.cylinder.abs_diff(to.cylinder);
    let settle = if op == DiskOp::Write { model.write_settle_ns() } else { 0 };
    if distance > 0 {
        model.seek_ns(distance, op)
    } else if from.surface != to.surface {
        model.head_switch_ns() + settle
    } else {
        0
    }
}

/// The bin count whose per-pair collision probability `1/B` equals the two-sided
/// clash probability `2 E[w]`, averaged over the span positions.
///
/// # Panics
/// If `windows` is empty or every window is 0.
pub fn effective_bin_count(windows: &[ClashWindows]) -> f64 {
    assert!(!windows.is_empty(), "at least one span position");
    let mean = windows.iter().map(ClashWindows::mean_revolutions).sum::<f64>() / windows.len() as f64;
    assert!(mean > 0.0, "a clash window of zero gives no bins");
    1.0 / (2.0 * mean)
}

/// The sweep model's distribution of extra revolutions for strands of
/// `1..=strand_size_max` requests, averaged over the span positions: element
/// `D − 1` is the distribution for a strand of `D`, indexed by extra revolutions.
///
/// Each step `S_m` is discretised into cells of `1 / cells_per_revolution`
/// revolution (each cell's mass placed at its middle), and the steps are
/// convolved; the error in any probability is of the order of `D` cells.
///
/// # Panics
/// If `windows` is empty, `strand_size_max` is 0 or `cells_per_revolution` < 2.
pub fn sweep_extra_revolution_distributions(
    windows: &[ClashWindows],
    strand_size_max: u32,
    cells_per_revolution: u32,
) -> Vec<Vec<f64>> {
    assert!(!windows.is_empty(), "at least one span position");
    let mut sums: Vec<Vec<f64>> = vec![Vec::new(); strand_size_max as usize];
    for position in windows {
        let distributions = sweep_for_position(position, strand_size_max, cells_per_revolution);
        for (sum, distribution) in sums.iter_mut().zip(distributions) {
            if sum.len() < distribution.len() {
                sum.resize(distribution.len(), 0.0);
            }
            for (total, probability) in sum.iter_mut().zip(distribution) {
                *total += probability / windows.len() as f64;
            }
        }
    }
    sums
}

/// The sweep model for one window distribution (see
/// [`sweep_extra_revolution_distributions`]).
fn sweep_for_position(windows: &ClashWindows, strand_size_max: u32, cells_per_revolution: u32) -> Vec<Vec<f64>> {
    assert!(strand_size_max >= 1, "a strand has at least one request");
    assert!(cells_per_revolution >= 2, "at least two cells per revolution");
    let cell = 1.0 / f64::from(cells_per_revolution);
    // G(t) at the cell boundaries, up to where it reaches 0 (t = 1 + max window).
    let boundary_count = ((1.0 + windows.max_revolutions()) / cell).ceil() as usize + 1;
    let unreached: Vec<f64> =
        (0..=boundary_count).map(|index| windows.unreached_probability(index as f64 * cell)).collect();
    // elapsed[c]: probability that the steps so far sum to cell c (their cell
    // indices added; the half-cell midpoints are added when reading it out).
    let mut elapsed = vec![1.0];
    let mut distributions = vec![vec![1.0]];
    for remaining in 1..strand_size_max {
        let step: Vec<f64> =
            unreached.windows(2).map(|pair| pair[0].powi(remaining as i32) - pair[1].powi(remaining as i32)).collect();
        elapsed = convolve(&elapsed, &step);
        distributions.push(whole_revolutions(&elapsed, remaining, cells_per_revolution));
    }
    distributions
}

/// Folds a distribution over summed cell indices of `step_count` steps into whole
/// revolutions, each step's mass at the middle of its cell.
fn whole_revolutions(elapsed: &[f64], step_count: u32, cells_per_revolution: u32) -> Vec<f64> {
    let mut revolutions = Vec::new();
    for (cells, probability) in elapsed.iter().enumerate() {
        // (cells + step_count / 2) / cells_per_revolution, floored, in integers.
        let whole = (2 * cells + step_count as usize) / (2 * cells_per_revolution as usize);
        if revolutions.len() <= whole {
            revolutions.resize(whole + 1, 0.0);
        }
        revolutions[whole] += probability;
    }
    revolutions
}

/// Discrete convolution of two probability vectors, dropping negligible tails.
fn convolve(first: &[f64], second: &[f64]) -> Vec<f64> {
    let mut result = vec![0.0; first.len() + second.len() - 1];
    for (index, a) in first.iter().enumerate() {
        if *a == 0.0 {
            continue;
        }
        for (offset, b) in second.iter().enumerate() {
            result[index + offset] += a * b;
        }
    }
    while result.len() > 1 && result[result.len() - 1] < 1e-18 {
        result.pop();
    }
    result
}

/// Counts the assignments of `request_count` labelled requests to `bin_count` bins
/// with no bin above `load_limit`, and all assignments (`bin_count^request_count`),
/// exactly; `None` when a count overflows 128 bits.
///
/// Recurrence over bins: the last bin takes `j ≤ load_limit` of the `m` requests
/// (`C(m, j)` ways), the other bins take the rest.
pub fn exact_assignment_count_at_most(load_limit: u32, request_count: u32, bin_count: u32) -> Option<(u128, u128)> {
    if bin_count == 0 {
        // No bins: only the empty strand has an assignment.
        return Some((u128::from(request_count == 0), 1));
    }
    let total = (bin_count as u128).checked_pow(request_count)?;
    let requests = request_count as usize;
    let binomials = binomial_table(requests)?;
    // favourable[m] = assignments of m requests to the bins processed so far.
    let mut favourable = vec![0u128; requests + 1];
    favourable[0] = 1;
    for _ in 0..bin_count {
        let mut next = vec![0u128; requests + 1];
        for (placed, slot) in next.iter_mut().enumerate() {
            let mut sum = 0u128;
            for in_this_bin in 0..=placed.min(load_limit as usize) {
                let ways = binomials[placed][in_this_bin].checked_mul(favourable[placed - in_this_bin])?;
                sum = sum.checked_add(ways)?;
            }
            *slot = sum;
        }
        favourable = next;
    }
    Some((favourable[requests], total))
}

/// `P(largest load ≤ load_limit)` by a dynamic programme over bins in probability
/// space: the last of `c` bins receives each of the `m` remaining requests with
/// probability `1/c`, a binomial draw, and the rest go to the other `c − 1` bins.
/// Every term is a product of positive numbers, so the sum has no cancellation.
pub fn probability_at_most_by_bins(load_limit: u32, request_count: u32, bin_count: u32) -> f64 {
    let requests = request_count as usize;
    // within[m] = P(largest load ≤ limit | m requests in the bins processed so far).
    let mut within = vec![0.0f64; requests + 1];
    within[0] = 1.0;
    if bin_count == 0 {
        return within[requests];
    }
    // The first bin alone: all m requests land in it.
    for (placed, probability) in within.iter_mut().enumerate() {
        *probability = if placed <= load_limit as usize { 1.0 } else { 0.0 };
    }
    for bins in 2..=bin_count {
        let share = 1.0 / bins as f64;
        let mut next = vec![0.0f64; requests + 1];
        for (placed, slot) in next.iter_mut().enumerate() {
            *slot = (0..=placed.min(load_limit as usize))
                .map(|in_this_bin| binomial_probability(placed, in_this_bin, share) * within[placed - in_this_bin])
                .sum();
        }
        within = next;
    }
    within[requests]
}

/// The paper's recursive formula for `Q_k(n, b)`, evaluated term by term in log
/// space. Kept as a literal transcription to check the reading of the formula.
pub fn paper_formula_largest_load_exactly(largest_load: u32, request_count: u32, bin_count: u32) -> f64 {
    PaperFormula::default().largest_load_exactly(largest_load, request_count, bin_count)
}

/// Memoised evaluation of the paper's recursion.
#[derive(Debug, Default)]
struct PaperFormula {
    memo: HashMap<(u32, u32, u32), f64>,
}

impl PaperFormula {
    fn largest_load_exactly(&mut self, k: u32, n: u32, b: u32) -> f64 {
        if n == 0 {
            return if k == 0 { 1.0 } else { 0.0 };
        }
        if k == 0 || b == 0 {
            return 0.0;
        }
        if let Some(value) = self.memo.get(&(k, n, b)) {
            return *value;
        }
        let mut sum = 0.0;
        for groups in 1..=(n / k).min(b) {
            let rest_requests = n - groups * k;
            let rest_bins = b - groups;
            let log_ways = ln_factorial(n) + ln_factorial(b)
                - (groups * k) as f64 * (b as f64).ln()
                - ln_factorial(groups)
                - groups as f64 * ln_factorial(k)
                - ln_factorial(rest_requests)
                - ln_factorial(rest_bins);
            // The rest fall outside the chosen bins, with no bin reaching k.
            let rest_below_k = if rest_requests == 0 {
                1.0
            } else {
                (1..k).map(|smaller| self.largest_load_exactly(smaller, rest_requests, rest_bins)).sum::<f64>()
            };
            let rest_outside =
                if rest_requests == 0 { 1.0 } else { (rest_bins as f64 / b as f64).powi(rest_requests as i32) };
            sum += log_ways.exp() * rest_below_k * rest_outside;
        }
        self.memo.insert((k, n, b), sum);
        sum
    }
}

fn ln_factorial(value: u32) -> f64 {
    (2..=value).map(|factor| (factor as f64).ln()).sum()
}

/// `C(n, j) p^j (1−p)^(n−j)`.
fn binomial_probability(trials: usize, successes: usize, probability: f64) -> f64 {
    let mut coefficient = 1.0f64;
    for index in 0..successes {
        coefficient = coefficient * (trials - index) as f64 / (index + 1) as f64;
    }
    coefficient * probability.powi(successes as i32) * (1.0 - probability).powi((trials - successes) as i32)
}

/// Pascal's triangle up to row `size`; `None` on overflow.
fn binomial_table(size: usize) -> Option<Vec<Vec<u128>>> {
    let mut table = vec![vec![0u128; size + 1]; size + 1];
    for row in 0..=size {
        table[row][0] = 1;
        for column in 1..=row {
            table[row][column] = table[row - 1][column - 1].checked_add(table[row - 1][column])?;
        }
    }
    Some(table)
}

/// `numerator / denominator` rounded once: both are scaled down together until the
/// denominator is exact in an `f64`, which loses at most a few units in the last place.
fn ratio_of_integers(numerator: u128, denominator: u128) -> f64 {
    assert!(denominator > 0 && numerator <= denominator);
    let shift = (128 - denominator.leading_zeros()).saturating_sub(53);
    (numerator >> shift) as f64 / (denominator >> shift) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Largest-load distribution by enumerating every assignment of requests to bins.
    fn brute_force_distribution(request_count: u32, bin_count: u32) -> Vec<f64> {
        let total = (bin_count as usize).pow(request_count);
        let mut counts = vec![0usize; request_count as usize + 1];
        for code in 0..total {
            let mut loads = vec![0u32; bin_count as usize];
            let mut rest = code;
            for _ in 0..request_count {
                loads[rest % bin_count as usize] += 1;
                rest /= bin_count as usize;
            }
            counts[*loads.iter().max().unwrap_or(&0) as usize] += 1;
        }
        counts.iter().map(|count| *count as f64 / total as f64).collect()
    }

    fn assert_close(actual: f64, expected: f64, tolerance: f64, what: &str) {
        assert!(
            (actual - expected).abs() <= tolerance,
            "{what}: {actual} differs from {expected} by more than {tolerance}"
        );
    }

    #[test]
    fn matches_brute_force_enumeration_for_small_cases() {
        for request_count in 1..=7 {
            for bin_count in 1..=6 {
                let expected = brute_force_distribution(request_count, bin_count);
                let exact = largest_load_distribution(request_count, bin_count);
                for load in 0..=request_count as usize {
                    let what = format!("Q_{load}({request_count}, {bin_count})");
                    assert_close(exact[load], expected[load], 1e-15, &what);
                    let by_bins = probability_at_most_by_bins(load as u32, request_count, bin_count)
                        - if load == 0 {
                            0.0
                        } else {
                            probability_at_most_by_bins(load as u32 - 1, request_count, bin_count)
                        };
                    assert_close(by_bins, expected[load], 1e-12, &format!("{what} by bins"));
                    let paper = paper_formula_largest_load_exactly(load as u32, request_count, bin_count);
                    assert_close(paper, expected[load], 1e-12, &format!("{what} by the paper's formula"));
                }
            }
        }
    }

    #[test]
    fn paper_formula_agrees_with_the_exact_counts_for_strand_sizes() {
        for request_count in 1..=16 {
            for bin_count in [5, 6, 7, 8, 12, 30] {
                for load in 1..=request_count {
                    let exact = probability_largest_load_exactly(load, request_count, bin_count);
                    let paper = paper_formula_largest_load_exactly(load, request_count, bin_count);
                    assert_close(paper, exact, 1e-10, &format!("Q_{load}({request_count}, {bin_count})"));
                }
            }
        }
    }

    #[test]
    fn dynamic_programme_agrees_with_exact_counts_where_both_apply() {
        for (request_count, bin_count) in [(16, 7), (20, 40), (24, 30)] {
            for limit in 0..=request_count {
                let (favourable, total) = exact_assignment_count_at_most(limit, request_count, bin_count).unwrap();
                let exact = ratio_of_integers(favourable, total);
                let by_bins = probability_at_most_by_bins(limit, request_count, bin_count);
                assert_close(by_bins, exact, 1e-13, &format!("P(max ≤ {limit}) for {request_count} in {bin_count}"));
            }
        }
        // Beyond 128 bits the dynamic programme takes over and still sums to one.
        assert!(exact_assignment_count_at_most(64, 64, 1000).is_none());
        let distribution = largest_load_distribution(64, 1000);
        assert_close(distribution.iter().sum(), 1.0, 1e-12, "sum for 64 requests in 1000 bins");
    }

    #[test]
    fn classical_birthday_probability() {
        // 23 people, 365 days: the famous 0.4927 chance of no shared birthday.
        assert_close(probability_largest_load_exactly(1, 23, 365), 0.492_702_765_676_014_6, 1e-12, "23 in 365");
        // Q_1(n, b) = b! / ((b − n)! b^n).
        assert_close(probability_largest_load_exactly(1, 6, 7), 5040.0 / 117_649.0, 1e-15, "Q_1(6, 7)");
    }

    #[test]
    fn matches_monte_carlo_for_a_strand_of_eight() {
        let mut random = ChaCha8Rng::seed_from_u64(2011);
        let trials = 200_000;
        let mut counts = [0usize; 9];
        for _ in 0..trials {
            let mut loads = [0u32; 7];
            for _ in 0..8 {
                loads[random.gen_range(0..7)] += 1;
            }
            counts[*loads.iter().max().unwrap() as usize] += 1;
        }
        let model = largest_load_distribution(8, 7);
        for load in 0..=8 {
            // Five binomial standard deviations at most.
            let tolerance = 5.0 * (model[load] * (1.0 - model[load]) / trials as f64).sqrt() + 1e-9;
            assert_close(counts[load] as f64 / trials as f64, model[load], tolerance, &format!("load {load}"));
        }
    }

    #[test]
    fn paper_appendix_values() {
        // Six to seven bins per revolution: D = 6 almost never avoids an extra revolution.
        let six_bins = extra_revolution_distribution(6, 6.0);
        assert_close(six_bins[0], 0.015_432, 1e-6, "D = 6, B = 6");
        let seven_bins = extra_revolution_distribution(6, 7.0);
        assert_close(seven_bins[0], 0.042_839, 1e-6, "D = 6, B = 7");
        // For D = 8, two extra revolutions (three in total) are the most likely outcome.
        for bins in [6.0, 6.5, 7.0, 7.2] {
            assert_eq!(distribution_mode(&extra_revolution_distribution(8, bins)), 2, "D = 8, B = {bins}");
        }
    }

    #[test]
    fn fractional_bins_interpolate_between_integer_models() {
        let mixed = extra_revolution_distribution(6, 6.25);
        let six = extra_revolution_distribution(6, 6.0);
        let seven = extra_revolution_distribution(6, 7.0);
        for extra in 0..6 {
            assert_close(mixed[extra], 0.75 * six[extra] + 0.25 * seven[extra], 1e-15, "mixture");
        }
        assert_close(mixed.iter().sum(), 1.0, 1e-12, "mixture sums to one");
    }

    #[test]
    fn more_revolutions_than_complements_the_cumulative_distribution() {
        let distribution = largest_load_distribution(8, 7);
        let at_most_two: f64 = distribution[..=2].iter().sum();
        assert_close(probability_more_revolutions_than(2, 8, 7), 1.0 - at_most_two, 1e-15, "P_2");
    }

    #[test]
    fn sweep_model_by_hand_for_a_constant_window_of_a_quarter_revolution() {
        // w = 1/4. D = 2: the one step is 1/4 + U, past a revolution with probability 1/4.
        // D = 3: the steps sum to 1/2 + U + M with M = min(U1, U2), density 2(1 − m):
        // P(U + M < 1/2) = ∫₀^½ 2(1 − m)(½ − m) dm = 5/24, P(U + M ≥ 3/2) = 1/24.
        let windows = [ClashWindows::new(vec![(0.25, 1.0)])];
        assert_close(effective_bin_count(&windows), 2.0, 1e-15, "B = 1 / (2 · 1/4)");
        let sweep = sweep_extra_revolution_distributions(&windows, 3, 2048);
        assert_eq!(sweep[0], vec![1.0], "a single request has no extra revolution");
        assert_close(sweep[1][0], 0.75, 1e-12, "D = 2, none extra");
        assert_close(sweep[1][1], 0.25, 1e-12, "D = 2, one extra");
        assert_close(sweep[2][0], 5.0 / 24.0, 1e-3, "D = 3, none extra");
        assert_close(sweep[2][1], 0.75, 2e-3, "D = 3, one extra");
        assert_close(sweep[2][2], 1.0 / 24.0, 1e-3, "D = 3, two extra");
    }

    #[test]
    fn unequal_windows_mix_the_reachability_of_each() {
        // Half the pairs need 0.1 revolution, half 0.3: G(t) = ½ (1 − (t − 0.1)) + ½ · 1 at t = 0.2.
        let windows = ClashWindows::new(vec![(0.1, 1.0), (0.3, 1.0)]);
        assert_close(windows.mean_revolutions(), 0.2, 1e-15, "mean window");
        assert_close(windows.unreached_probability(0.2), 0.95, 1e-15, "G(0.2)");
        assert_close(windows.unreached_probability(1.3), 0.0, 1e-15, "G past the largest window plus a turn");
        assert_close(effective_bin_count(&[windows]), 2.5, 1e-12, "B = 1 / (2 · 0.2)");
    }

    #[test]
    fn sweep_distributions_sum_to_one_and_grow_with_the_strand() {
        let windows = [ClashWindows::new(vec![(0.05, 1.0), (0.2, 2.0), (0.3, 1.0)])];
        let sweep = sweep_extra_revolution_distributions(&windows, 12, 512);
        for (index, distribution) in sweep.iter().enumerate() {
            assert_close(distribution.iter().sum(), 1.0, 1e-9, &format!("D = {}", index + 1));
        }
        let means: Vec<f64> = sweep.iter().map(|distribution| distribution_mean(distribution)).collect();
        assert!(means.windows(2).all(|pair| pair[1] > pair[0]), "mean extra revolutions grow: {means:?}");
    }

    #[test]
    fn clash_windows_of_a_two_track_span_by_hand() {
        // A span of exactly the first two tracks of the Cheetah 15K.5: a request lands on
        // either with its share of the span's sectors; a pair on one track clashes over the
        // transfer only, a pair across the two over the transfer plus the move between them.
        let model = DiskModel::builtin("cheetah15k5").expect("the built-in Cheetah 15K.5 loads");
        let first = model.track_of(0).expect("LBN 0 is on the disk");
        let second = model.track_of(u64::from(first.sector_count)).expect("the second track is on the disk");
        let span = u64::from(first.sector_count) + u64::from(second.sector_count);
        let windows = clash_windows_at(&model, 0, span, 8, DiskOp::Read);
        let revolution_ns = model.revolution_ns() as f64;
        let move_ns = if first.cylinder == second.cylinder {
            model.head_switch_ns()
        } else {
            model.seek_ns(first.cylinder.abs_diff(second.cylinder), DiskOp::Read)
        } as f64;
        let share = f64::from(first.sector_count) / span as f64;
        let transfer = share * 8.0 / f64::from(first.sectors_per_track)
            + (1.0 - share) * 8.0 / f64::from(second.sectors_per_track);
        let across = 2.0 * share * (1.0 - share);
        assert_close(windows.mean_revolutions(), transfer + across * move_ns / revolution_ns, 1e-12, "E[w]");
        assert_eq!(windows.entries().len(), 4, "four ordered pairs of tracks");
    }

    #[test]
    fn total_variation_distance_of_disjoint_and_equal_distributions() {
        assert_close(total_variation_distance(&[1.0, 0.0], &[0.0, 1.0]), 1.0, 0.0, "disjoint");
        assert_close(total_variation_distance(&[0.5, 0.5], &[0.5, 0.5, 0.0]), 0.0, 0.0, "equal");
        assert_close(total_variation_distance(&[0.5, 0.5], &[0.25, 0.25, 0.5]), 0.5, 1e-15, "shifted mass");
    }
}
