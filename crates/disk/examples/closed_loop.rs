//! Closed-loop 4 KiB random reads on the Cheetah 15K.5, as DiskSim's published
//! figures. Run: `cargo run --release -p proxima-disk --example closed_loop`.

use std::sync::Arc;

use proxima_disk::closed_loop::{run, ClosedLoopConfig};
use proxima_disk::{DiskModel, DiskOp, Scheduler};

fn main() {
    let model = Arc::new(DiskModel::builtin("cheetah15k5").unwrap());
    for (scheduler, depth) in [
        (Scheduler::Fcfs, 1),
        (Scheduler::Fcfs, 8),
        (Scheduler::Sptf, 1),
        (Scheduler::Sptf, 2),
        (Scheduler::Sptf, 4),
        (Scheduler::Sptf, 8),
        (Scheduler::Sptf, 16),
        (Scheduler::Sptf, 32),
    ] {
        let config = ClosedLoopConfig {
            queue_depth: depth,
            scheduler,
            op: DiskOp::Read,
            sectors_per_request: 8,
            request_count: 20_000,
            seed: 1,
        };
        let result = run(model.clone(), &config);
        println!("{scheduler:?} qd {depth}: {:.1} IOPS, {:.3} ms", result.iops, result.mean_response_ms);
    }
}
