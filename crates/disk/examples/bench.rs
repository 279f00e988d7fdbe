//! The simulator's own speed on the two workloads `proxima disk bench` reports:
//! 4 KiB uniformly random reads on the Cheetah 15K.5, FCFS at queue depth 1
//! and SPTF at queue depth 8. Prints simulated requests per wall second.
//!
//! Run: `cargo run --release -p proxima-disk --example bench [REQUESTS] [SEED] [fcfs|sptf]`
//! (both workloads unless one is named).
//! Under `valgrind --tool=callgrind --toggle-collect='proxima_disk::closed_loop::run*'`
//! the instruction count of the closed loops alone divided by the requests gives
//! instructions per simulated request, a figure that does not depend on the
//! machine's load.

use std::sync::Arc;
use std::time::Instant;

use proxima_disk::closed_loop::{run, ClosedLoopConfig};
use proxima_disk::{DiskModel, DiskOp, Scheduler};

fn main() {
    let mut arguments = std::env::args().skip(1);
    let requests: u64 = arguments.next().map_or(1_000_000, |text| text.parse().expect("REQUESTS is a count"));
    let seed: u64 = arguments.next().map_or(1, |text| text.parse().expect("SEED is an integer"));
    let only = arguments.next();
    let model = Arc::new(DiskModel::builtin("cheetah15k5").expect("the built-in model loads"));
    for (scheduler, queue_depth) in [(Scheduler::Fcfs, 1), (Scheduler::Sptf, 8)] {
        if only.as_deref().is_some_and(|name| Scheduler::parse(name) != Some(scheduler)) {
            continue;
        }
        let config = ClosedLoopConfig {
            queue_depth,
            scheduler,
            op: DiskOp::Read,
            sectors_per_request: 8,
            request_count: requests,
            seed,
        };
        let started = Instant::now();
        let result = run(Arc::clone(&model), &config);
        let seconds = started.elapsed().as_secs_f64().max(1e-9);
        println!(
            "{scheduler:?} queue depth {queue_depth}: {:.0} requests per wall second ({:.1} simulated IOPS)",
            result.completed as f64 / seconds,
            result.iops
        );
    }
}
