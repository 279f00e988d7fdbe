//! Figure 2 on the Cheetah 15K.5: strands of 8 within 100,000 LBNs cost at least
//! 25 % less per request with 8 requests outstanding than with 1, when issued to a
//! busy drive (the scheduler then chooses among all of them); on an idle drive,
//! which starts the first request as it arrives, depth still helps.

use std::sync::Arc;

use proxima_disk::{DiskModel, DiskOp};
use proxima_lab::progress::NoProgress;
use proxima_lab::seed000_proximal::placement::{IssueOrder, Placement};
use proxima_lab::seed000_proximal::strands::{run_strands, StrandConfig, StrandStart};

const SEED: u64 = 32;

fn per_request_ms(model: &Arc<DiskModel>, queue_depth: u32, start: StrandStart) -> f64 {
    let config = StrandConfig {
        placement: Placement::Span { span_lbn: 100_000 },
        strand_size: 8,
        strand_count: 300,
        op: DiskOp::Read,
        queue_depth,
        order: IssueOrder::Ascending,
        start,
        seed: SEED,
    };
    run_strands(model, &config, 1.0, &mut NoProgress).expect("strands run").per_request_ms
}

#[test]
fn queue_depth_eight_is_at_least_a_quarter_below_depth_one() {
    let model = Arc::new(DiskModel::builtin("cheetah15k5").expect("built-in model"));
    let busy_1 = per_request_ms(&model, 1, StrandStart::Busy);
    let busy_8 = per_request_ms(&model, 8, StrandStart::Busy);
    assert!(busy_8 <= 0.75 * busy_1, "busy drive: depth 8 {busy_8} ms vs depth 1 {busy_1} ms");
    let idle_1 = per_request_ms(&model, 1, StrandStart::Idle);
    let idle_8 = per_request_ms(&model, 8, StrandStart::Idle);
    assert!(idle_8 < 0.85 * idle_1, "idle drive: depth 8 {idle_8} ms vs depth 1 {idle_1} ms");
}
