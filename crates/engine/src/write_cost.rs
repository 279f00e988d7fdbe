//! The write-cost model of HyLog (seed 001, §3) that the engine's policies
//! decide by: Eq 2 (the cleaning utilisation greedy cleaning meets at a disk
//! utilisation), Eqs 3 and 4 (the scaled write costs of overwriting in place
//! and of a cleaned log), Eq 7 (the hot partition's utilisation when the hot
//! pages get all the free space) and Eq 8 (HyLog's cost of logging the hot
//! pages and overwriting the cold ones). Pure arithmetic; the laboratory's
//! `cost_model` builds the rest of the model on these and checks them
//! against the paper's worked examples.
//!
//! Every cost is a *scaled write cost*: time per page written over the time
//! of one segment I/O divided by the pages in a segment. Utilisations and
//! fractions are in [0, 1]; a value outside its domain is a bug of the
//! caller and panics.

/// Eq 2 (Menon; greedy cleaning under uniform random updates): the disk
/// space utilisation u at which the segments cleaned are `cleaning` full,
/// u = (u_c − 1) / ln u_c, with u(0) = 0 and u(1) = 1 (its limits).
pub fn utilization_for_cleaning(cleaning: f64) -> f64 {
    assert!((0.0..=1.0).contains(&cleaning), "a cleaning utilisation in [0, 1]: {cleaning}");
    utilization_for_free_share(1.0 - cleaning)
}

/// Eq 2 in terms of the free share of the cleaned segments, f = 1 − u_c:
/// u = f / −ln(1 − f). `ln_1p` keeps its precision as f approaches 0.
fn utilization_for_free_share(free: f64) -> f64 {
    if free == 0.0 {
        return 1.0;
    }
    free / -(-free).ln_1p()
}

/// The inverse of Eq 2: the cleaning utilisation u_c at disk utilisation
/// `utilization`. Eq 2 rises strictly from 0 to 1, so bisection on the free
/// share 1 − u_c converges for every u, to the last bit also near u = 1.
pub fn cleaning_utilization_for(utilization: f64) -> f64 {
    assert!((0.0..=1.0).contains(&utilization), "a utilisation in [0, 1]: {utilization}");
    if utilization == 1.0 {
        // Eq 2 rounds to 1 for the last free shares; its limit is exact.
        return 1.0;
    }
    // Invariant: u(free_high) ≤ utilization ≤ u(free_low); u falls as the free share grows.
    let (mut free_low, mut free_high) = (0.0f64, 1.0f64);
    loop {
        let free = 0.5 * (free_low + free_high);
        if free <= free_low || free >= free_high {
            return 1.0 - free;
        }
        if utilization_for_free_share(free) >= utilization {
            free_low = free;
        } else {
            free_high = free;
        }
    }
}

/// Eq 3: Overwrite's scaled write cost, A (each page costs a page I/O).
pub fn overwrite_cost(segment_efficiency: f64) -> f64 {
    segment_efficiency
}

/// Eq 4: LFS-cleaning's scaled write cost, 2 / (1 − u_c): the segment I/Os
/// per segment of user data (its write, and reading and rewriting the
/// segments cleaned to free room for it).
pub fn lfs_cleaning_cost(cleaning: f64) -> f64 {
    assert!((0.0..1.0).contains(&cleaning), "a cleaning utilisation in [0, 1): {cleaning}");
    2.0 / (1.0 - cleaning)
}

/// Eq 7: the utilisation of the hot partition when a `hot_fraction` h of the
/// pages are hot and all free space is given to them:
/// u_h = h·u / (1 − u + h·u).
pub fn hot_partition_utilization(utilization: f64, hot_fraction: f64) -> f64 {
    assert!((0.0..1.0).contains(&utilization), "a utilisation in [0, 1): {utilization}");
    assert!((0.0..=1.0).contains(&hot_fraction), "a hot fraction in [0, 1]: {hot_fraction}");
    let hot_bytes = hot_fraction * utilization;
    hot_bytes / (1.0 - utilization + hot_bytes)
}

/// Eq 8: HyLog's scaled write cost when a `hot_write_fraction` w of the
/// writes go to the hot partition, cleaned at `hot_cleaning` (u_hc), and the
/// rest overwrite cold pages in place: w · 2 / (1 − u_hc) + (1 − w) · A.
pub fn hylog_cost(hot_write_fraction: f64, hot_cleaning: f64, segment_efficiency: f64) -> f64 {
    assert!((0.0..=1.0).contains(&hot_write_fraction), "a write fraction in [0, 1]");
    let hot_cost = if hot_write_fraction == 0.0 { 0.0 } else { lfs_cleaning_cost(hot_cleaning) };
    hot_write_fraction * hot_cost + (1.0 - hot_write_fraction) * overwrite_cost(segment_efficiency)
}

/// HyLog's page separation (001:L236–L244) on measured write counts. Of a
/// volume's `live_blocks` blocks, those written in the last measurement
/// interval were written `counts` times (hottest first). A write count is a
/// threshold: the blocks written at least that often are hot, `k` of them,
/// giving the hot fraction h = k / `live_blocks` and the hot write fraction
/// w, their share of the writes; Eq 8 prices that split at disk utilisation
/// `utilization` and segment efficiency A. Returns the `k` of the lowest
/// cost over every threshold (and none hot: Overwrite's cost A) and that
/// cost; the hottest `k` of `counts` are then exactly the blocks at or above
/// a threshold.
pub fn best_hot_count(counts: &[u32], live_blocks: u64, utilization: f64, segment_efficiency: f64) -> (usize, f64) {
    let total: u64 = counts.iter().map(|&count| u64::from(count)).sum();
    best_held_out_hot_count(counts, counts, total, live_blocks, utilization, segment_efficiency)
}

/// [`best_hot_count`] with w measured on other writes than those that rank
/// the blocks: the blocks are ranked by `ranking` (their write counts in one
/// interval, hottest first), and a threshold's w is the share of the
/// `later_total` writes of a later interval that went to its blocks
/// (`later[i]`: the later writes of the block ranked `i`). Priced on the
/// interval that ranked them, every block a short interval wrote looks hot
/// (w = 1 for the blocks written at all); priced on the next, the blocks
/// written once by chance show as the cold blocks they are.
pub fn best_held_out_hot_count(
    ranking: &[u32],
    later: &[u32],
    later_total: u64,
    live_blocks: u64,
    utilization: f64,
    segment_efficiency: f64,
) -> (usize, f64) {
    assert_eq!(ranking.len(), later.len(), "a later count for each ranked block");
    let everything_cold = (0, overwrite_cost(segment_efficiency));
    if later_total == 0 || live_blocks == 0 {
        return everything_cold;
    }
    // A full disk has no free space to give the hot partition.
    let utilization = utilization.clamp(0.0, 0.999);
    let mut best = everything_cold;
    let mut hot_writes = 0u64;
    for (index, &count) in ranking.iter().enumerate() {
        hot_writes += u64::from(later[index]);
        // A threshold ends where the next block is written less often.
        if ranking.get(index + 1).is_some_and(|&next| next == count) {
            continue;
        }
        let hot = index + 1;
        let cost =
            split_cost(hot, hot_writes.min(later_total), later_total, live_blocks, utilization, segment_efficiency);
        if cost < best.1 {
            best = (hot, cost);
        }
    }
    best
}

/// Eq 8's cost of making the hottest `hot` of the blocks written `counts`
/// times (hottest first) hot, the rest cold: [`best_hot_count`]'s pricing
/// of one split, for a hot set chosen otherwise.
pub fn hot_split_cost(counts: &[u32], hot: usize, live_blocks: u64, utilization: f64, segment_efficiency: f64) -> f64 {
    let total: u64 = counts.iter().map(|&count| u64::from(count)).sum();
    if total == 0 || live_blocks == 0 || hot == 0 {
        return overwrite_cost(segment_efficiency);
    }
    let hot_writes: u64 = counts.iter().take(hot).map(|&count| u64::from(count)).sum();
    split_cost(hot, hot_writes, total, live_blocks, utilization.clamp(0.0, 0.999), segment_efficiency)
}

/// Eq 8 for `hot` blocks taking `hot_writes` of `total` writes, `live_blocks`
/// in use at `utilization` (below 1).
fn split_cost(
    hot: usize,
    hot_writes: u64,
    total: u64,
    live_blocks: u64,
    utilization: f64,
    segment_efficiency: f64,
) -> f64 {
    let hot_fraction = (hot as f64 / live_blocks as f64).min(1.0);
    let hot_cleaning = cleaning_utilization_for(hot_partition_utilization(utilization, hot_fraction));
    hylog_cost(hot_writes as f64 / total as f64, hot_cleaning, segment_efficiency)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hot_set_grows_with_the_free_space() {
        // 1,000 live blocks: 50 written 40 times each, 500 written once.
        let mut counts = vec![40; 50];
        counts.extend(vec![1; 500]);
        // Nearly full: only the 50 hottest are worth the log's cleaning.
        let (hot, cost) = best_hot_count(&counts, 1000, 0.98, 32.8);
        assert_eq!(hot, 50, "the 50 hottest");
        let every_written = hylog_cost(1.0, cleaning_utilization_for(hot_partition_utilization(0.98, 0.55)), 32.8);
        assert!(cost < overwrite_cost(32.8) && cost < every_written, "{cost}");
        // With a fifth of the disk free, logging every block written is
        // cheaper than overwriting any in place at A = 32.8.
        let (hot, _) = best_hot_count(&counts, 1000, 0.8, 32.8);
        assert_eq!(hot, 550);
        assert_eq!(best_hot_count(&[], 1000, 0.5, 32.8), (0, 32.8));
    }
}
