//! Closed-loop 4 KiB uniform random reads on the Cheetah 15K.5 with its shipped
//! cache settings: within 5 % of DiskSim's 173 IOPS under FCFS at any depth and
//! 221 / 260 / 303 / 352 IOPS under SPTF at depth 4 / 8 / 16 / 32.

use std::sync::Arc;

use proxima_disk::closed_loop::{run, ClosedLoopConfig};
use proxima_disk::{DiskModel, DiskOp, Scheduler};

fn iops(scheduler: Scheduler, queue_depth: usize) -> f64 {
    let model = Arc::new(DiskModel::builtin("cheetah15k5").unwrap());
    let config = ClosedLoopConfig {
        queue_depth,
        scheduler,
        op: DiskOp::Read,
        sectors_per_request: 8,
        request_count: 20_000,
        seed: 1,
    };
    run(model, &config).iops
}

fn assert_within_five_percent(measured: f64, expected: f64, what: &str) {
    let error = (measured - expected).abs() / expected;
    assert!(error <= 0.05, "{what}: {measured:.1} IOPS vs DiskSim {expected} ({:.1} %)", error * 100.0);
}

#[test]
fn fcfs_is_flat_across_depths() {
    for depth in [1, 4, 16] {
        assert_within_five_percent(iops(Scheduler::Fcfs, depth), 173.0, &format!("FCFS depth {depth}"));
    }
}

#[test]
fn sptf_gains_with_depth() {
    for (depth, expected) in [(4, 221.0), (8, 260.0), (16, 303.0), (32, 352.0)] {
        assert_within_five_percent(iops(Scheduler::Sptf, depth), expected, &format!("SPTF depth {depth}"));
    }
}
