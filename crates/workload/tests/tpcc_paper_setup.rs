//! The TPC-C-like workload at the HyLog paper's setup (50 warehouses, 4 KiB
//! pages, a 400 MB LRU buffer pool, 20 users taking turns, as closed-loop
//! users with equal service times do): the database is about the paper's
//! 5088 MB; the buffer pool absorbs reads better than writes, so physical
//! I/O holds a larger share of writes than logical accesses do, as in the
//! paper's Table 4; and the writes are skewed: 80 % of them land on fewer
//! than 20 % of the pages.

use std::collections::HashMap;

use proxima_workload::tpcc::{TpccSpec, TpccWorkload};
use proxima_workload::Operation;

const SEED: u64 = 1;
const WARMUP_STEPS: u64 = 3_000_000;
const MEASURED_STEPS: u64 = 10_000_000;

#[test]
fn the_paper_setup_has_its_shape() {
    let mut workload = TpccWorkload::new(TpccSpec::paper(SEED));
    let database_mb = workload.database_bytes() as f64 / (1 << 20) as f64;
    assert!((database_mb / 5088.0 - 1.0).abs() < 0.25, "{database_mb} MB");
    let users = workload.spec().users;
    for step in 0..WARMUP_STEPS {
        workload.next_step((step % u64::from(users)) as u32);
    }
    workload.reset_counts();
    let mut writes_per_page: HashMap<u64, u64> = HashMap::new();
    for step in 0..MEASURED_STEPS {
        for io in workload.next_step((step % u64::from(users)) as u32).ios {
            if io.operation == Operation::Write {
                *writes_per_page.entry(io.page).or_default() += 1;
            }
        }
    }
    let counts = workload.counts();
    let logical_ratio = counts.logical_reads as f64 / counts.logical_writes as f64;
    let physical_ratio = counts.physical_reads as f64 / counts.physical_writes as f64;
    let miss_share = counts.physical_reads as f64 / (counts.logical_reads + counts.logical_writes) as f64;
    let mut writes: Vec<u64> = writes_per_page.into_values().collect();
    writes.sort_unstable_by(|a, b| b.cmp(a));
    // The fewest pages that take 80 % of the physical writes, as a share of
    // the database.
    let total: u64 = writes.iter().sum();
    let mut running = 0;
    let pages_for_most = writes.iter().take_while(|&&count| {
        running += count;
        running - count < total * 4 / 5
    });
    let hot_share = pages_for_most.count() as f64 / workload.page_count() as f64;
    println!(
        "database {database_mb:.0} MB ({} pages); {counts:?}\nlogical reads/writes {logical_ratio:.2}, \
         physical reads/writes {physical_ratio:.2}, misses per access {miss_share:.3}, \
         {} pages written, 80 % of the writes on {:.1} % of the database",
        workload.page_count(),
        writes.len(),
        hot_share * 100.0
    );
    assert!(physical_ratio < logical_ratio, "the pool absorbs reads better than writes");
    assert!(counts.physical_writes > 0 && counts.physical_reads > 0);
    assert!(hot_share < 0.2, "80 % of the writes on {hot_share} of the pages");
}
