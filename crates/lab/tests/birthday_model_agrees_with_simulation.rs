//! The birthday models derived from the Cheetah 15K.5's geometry against its
//! simulated strands of 6 and 8 within 100,000 LBNs (all outstanding, idle drive).
//!
//! Nothing is fitted: the clash windows come from the model's mapping and seek
//! curve. The sweep model stays within a total variation distance of 0.25 of the
//! simulated distribution of extra revolutions (0.15–0.16 at 1000 strands with seed
//! 1; 400 strands add up to about 0.05 of sampling noise), and both derived models
//! are closer than the paper's formula with the literal bin count `SPT / H`.

use std::sync::Arc;

use proxima_disk::{DiskModel, DiskOp};
use proxima_lab::progress::NoProgress;
use proxima_lab::seed000_proximal::birthday::{
    bin_count_for_track_switch, clash_windows_for_span, effective_bin_count, extra_revolution_distribution,
    sweep_extra_revolution_distributions, total_variation_distance,
};
use proxima_lab::seed000_proximal::disk::{SPAN_POSITIONS, SWEEP_CELLS_PER_REVOLUTION};
use proxima_lab::seed000_proximal::placement::{block_sectors, IssueOrder, Placement, PROXIMAL_SPAN_LBN};
use proxima_lab::seed000_proximal::strands::{run_strands, StrandConfig, StrandStart};

const SEED: u64 = 11;
const STRAND_COUNT: u32 = 400;
const SWEEP_DISTANCE_MAX: f64 = 0.25;

fn simulated(model: &Arc<DiskModel>, strand_size: u32) -> Vec<f64> {
    let config = StrandConfig {
        placement: Placement::Span { span_lbn: PROXIMAL_SPAN_LBN },
        strand_size,
        strand_count: STRAND_COUNT,
        op: DiskOp::Read,
        queue_depth: strand_size,
        order: IssueOrder::Ascending,
        start: StrandStart::Idle,
        seed: SEED,
    };
    run_strands(model, &config, 1.0, &mut NoProgress).expect("strands run").extra_revolutions_distribution
}

#[test]
fn derived_models_agree_with_the_simulated_extra_revolutions() {
    let model = Arc::new(DiskModel::builtin("cheetah15k5").expect("built-in model"));
    let windows =
        clash_windows_for_span(&model, PROXIMAL_SPAN_LBN, block_sectors(&model), SPAN_POSITIONS, DiskOp::Read);
    let sweep = sweep_extra_revolution_distributions(&windows, 8, SWEEP_CELLS_PER_REVOLUTION);
    let effective_bins = effective_bin_count(&windows);
    let literal_bins = bin_count_for_track_switch(model.revolution_ns(), model.seek_ns(1, DiskOp::Read));
    for strand_size in [6u32, 8] {
        let simulated = simulated(&model, strand_size);
        let sweep_distance = total_variation_distance(&simulated, &sweep[strand_size as usize - 1]);
        let effective_distance =
            total_variation_distance(&simulated, &extra_revolution_distribution(strand_size, effective_bins));
        let literal_distance =
            total_variation_distance(&simulated, &extra_revolution_distribution(strand_size, literal_bins));
        eprintln!(
            "D = {strand_size}: total variation sweep {sweep_distance:.4}, effective B {effective_distance:.4}, \
             SPT/H {literal_distance:.4} (seed {SEED}, {STRAND_COUNT} strands)"
        );
        assert!(
            sweep_distance <= SWEEP_DISTANCE_MAX,
            "D = {strand_size}: sweep model at {sweep_distance:.3} from the simulation ({simulated:?})"
        );
        assert!(
            sweep_distance < literal_distance && effective_distance < literal_distance,
            "D = {strand_size}: sweep {sweep_distance:.3}, effective B {effective_distance:.3}, \
             SPT/H {literal_distance:.3}"
        );
    }
}
