//! Figure 1 on the Cheetah 15K.5: per-request cost falls from 1 OP as strands grow;
//! a strand of 8 within 100,000 LBNs costs 0.3–0.5 OP; track-approximate is no worse
//! than proximal; semi-sequential reaches at most 0.3 OP at 8.

use std::sync::Arc;

use proxima_disk::{DiskModel, DiskOp};
use proxima_lab::progress::NoProgress;
use proxima_lab::seed000_proximal::closed_loop::measure_op_ms;
use proxima_lab::seed000_proximal::placement::{IssueOrder, Placement};
use proxima_lab::seed000_proximal::strands::{run_strands, StrandConfig, StrandStart};

const SEED: u64 = 20110215;
const STRANDS: u32 = 200;

fn cost(model: &Arc<DiskModel>, op_ms: f64, placement: Placement, strand_size: u32) -> f64 {
    let config = StrandConfig {
        placement,
        strand_size,
        strand_count: STRANDS,
        op: DiskOp::Read,
        queue_depth: strand_size,
        order: IssueOrder::Ascending,
        start: StrandStart::Idle,
        seed: SEED,
    };
    run_strands(model, &config, op_ms, &mut NoProgress).expect("strands run").per_request_op
}

#[test]
fn strand_costs_match_the_papers_shape() {
    let model = Arc::new(DiskModel::builtin("cheetah15k5").expect("built-in model"));
    let op_ms = measure_op_ms(&model, SEED).expect("OP measured");
    let proximal = Placement::Span { span_lbn: 100_000 };
    let track_approximate = Placement::Span { span_lbn: 1024 };

    let proximal_costs: Vec<f64> = [1, 2, 4, 8, 16].iter().map(|&size| cost(&model, op_ms, proximal, size)).collect();
    assert!((proximal_costs[0] - 1.0).abs() < 0.1, "a strand of one costs about 1 OP: {proximal_costs:?}");
    assert!(proximal_costs.windows(2).all(|pair| pair[1] < pair[0]), "monotone decrease: {proximal_costs:?}");
    let proximal_8 = proximal_costs[3];
    assert!((0.3..=0.5).contains(&proximal_8), "proximal strand of 8: {proximal_8} OP");

    let track_approximate_8 = cost(&model, op_ms, track_approximate, 8);
    assert!(track_approximate_8 <= proximal_8, "track-approximate {track_approximate_8} vs proximal {proximal_8}");

    let semi_sequential_8 = cost(&model, op_ms, Placement::SemiSequential, 8);
    assert!(semi_sequential_8 <= 0.3, "semi-sequential strand of 8: {semi_sequential_8} OP");

    let random_8 = cost(&model, op_ms, Placement::Random, 8);
    assert!(random_8 > proximal_8, "fully random {random_8} costs more than proximal {proximal_8}");
}
