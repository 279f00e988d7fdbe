//! The independent segment simulator against the HyLog paper's Figures 2 and
//! 5 and the write-cost model: greedy cleaning under uniformly random updates
//! lands on Eq 2; each cleaning method costs what Eq 4 or Eq 5 says for the
//! u_c it met; the adaptive cleaner is never worse than the better of
//! cost-age and hole-plugging (+2 %) under uniform writes; cost-age cleans
//! hot-and-cold writes cheaper than greedy, and hot and cold logs cheaper
//! still (also for greedy under Knuth 80/20 and Zipf writes); a seed gives the same figures every time.

use proxima_lab::seed001_hylog::cleaning_figures::{figure_2, figure_5, simulate, CleaningRunSpec};
use proxima_lab::seed001_hylog::cost_model::{lfs_cleaning_cost, lfs_plugging_cost};
use proxima_lab::seed001_hylog::segment_simulator::{CleaningPolicy, Separation};
use proxima_workload::synthetic::Pattern;

const SEED: u64 = 7;

fn spec(segment_count: u32) -> CleaningRunSpec {
    CleaningRunSpec { warmup_rewrites: 3, measured_rewrites: 3, ..CleaningRunSpec::atlas10k(segment_count, SEED) }
}

#[test]
fn figure_2_greedy_lands_on_eq_2() {
    for point in figure_2(&spec(4096)) {
        let error = (point.uc_simulated - point.uc_eq2).abs() / point.uc_eq2;
        assert!(error < 0.05, "u = {}: u_c {:.4} against Eq 2's {:.4}", point.u, point.uc_simulated, point.uc_eq2);
    }
}

#[test]
fn figure_5_adaptive_is_never_worse_than_the_better_method() {
    let points = figure_5(&spec(1024));
    for point in &points {
        let best = point.cost_age.min(point.hole_plugging);
        assert!(point.adaptive <= best * 1.02, "u = {}: adaptive {} against {best}", point.u, point.adaptive);
    }
    // Matthews' trend: copying wins at low utilisation, hole-plugging at high.
    let (first, last) = (points.first().unwrap(), points.last().unwrap());
    assert!(first.cost_age < first.hole_plugging && last.hole_plugging < last.cost_age);
}

#[test]
fn each_method_costs_its_equation_at_the_utilisation_it_met() {
    let spec = spec(1024);
    for u in [0.6, 0.8, 0.9] {
        let copying = simulate(&spec, u, CleaningPolicy::Greedy, Pattern::Uniform);
        let expected = lfs_cleaning_cost(copying.cleaning_utilization);
        assert!((copying.write_cost - expected).abs() / expected < 0.02, "Eq 4 at {u}: {copying:?}");
        let plugging = simulate(&spec, u, CleaningPolicy::HolePlugging, Pattern::Uniform);
        let expected = lfs_plugging_cost(plugging.cleaning_utilization, spec.segment_efficiency);
        assert!((plugging.write_cost - expected).abs() / expected < 0.02, "Eq 5 at {u}: {plugging:?}");
    }
}

#[test]
fn hot_and_cold_updates_clean_cheaper_with_cost_age() {
    // Rosenblum's result, on the paper's TinySim workload (10 % of the pages
    // take 90 % of the writes): cost-benefit beats greedy and uniform writes.
    let spec = spec(1024);
    let hot_cold = Pattern::HotCold { hot_block_fraction: 0.1, hot_access_fraction: 0.9 };
    let uniform = simulate(&spec, 0.8, CleaningPolicy::CostAge, Pattern::Uniform);
    let cost_age = simulate(&spec, 0.8, CleaningPolicy::CostAge, hot_cold);
    let greedy = simulate(&spec, 0.8, CleaningPolicy::Greedy, hot_cold);
    assert!(cost_age.write_cost < uniform.write_cost, "{cost_age:?} against uniform {uniform:?}");
    assert!(cost_age.write_cost < greedy.write_cost, "{cost_age:?} against greedy {greedy:?}");
}

#[test]
fn separate_hot_and_cold_logs_clean_cheaper() {
    // Hot pages (written twice or more in the last interval of as many writes
    // as there are pages) get a log head and partition of their own; the
    // adaptive cleaner then does at least as well as either method alone.
    let one_log = spec(1024);
    let two_logs =
        CleaningRunSpec { separation: Separation::WriteFrequency { interval_writes: 0, hot_writes: 2 }, ..one_log };
    let hot_cold = Pattern::HotCold { hot_block_fraction: 0.1, hot_access_fraction: 0.9 };
    for u in [0.8, 0.9] {
        let mixed = simulate(&one_log, u, CleaningPolicy::Adaptive, hot_cold);
        let separated = simulate(&two_logs, u, CleaningPolicy::Adaptive, hot_cold);
        assert!(separated.write_cost < mixed.write_cost, "at {u}: {separated:?} against {mixed:?}");
        let cost_age = simulate(&two_logs, u, CleaningPolicy::CostAge, hot_cold).write_cost;
        let plugging = simulate(&two_logs, u, CleaningPolicy::HolePlugging, hot_cold).write_cost;
        assert!(separated.write_cost <= cost_age.min(plugging) * 1.02, "at {u}: {separated:?}");
    }
}

#[test]
fn hot_and_cold_logs_help_greedy_under_knuth_and_zipf_writes() {
    let one_log = spec(1024);
    let two_logs =
        CleaningRunSpec { separation: Separation::WriteFrequency { interval_writes: 0, hot_writes: 2 }, ..one_log };
    for pattern in [Pattern::eighty_twenty(0.8, 0.2), Pattern::Zipf { exponent: 1.0 }] {
        let mixed = simulate(&one_log, 0.8, CleaningPolicy::Greedy, pattern);
        let separated = simulate(&two_logs, 0.8, CleaningPolicy::Greedy, pattern);
        assert!(separated.write_cost < mixed.write_cost, "{pattern:?}: {separated:?} against {mixed:?}");
    }
}

#[test]
fn the_same_seed_gives_the_same_figures() {
    let spec = CleaningRunSpec { warmup_rewrites: 1, measured_rewrites: 1, ..spec(256) };
    let first = simulate(&spec, 0.85, CleaningPolicy::Adaptive, Pattern::Uniform);
    assert_eq!(first, simulate(&spec, 0.85, CleaningPolicy::Adaptive, Pattern::Uniform));
    let other = CleaningRunSpec { seed: SEED + 1, ..spec };
    assert_ne!(first, simulate(&other, 0.85, CleaningPolicy::Adaptive, Pattern::Uniform));
}
