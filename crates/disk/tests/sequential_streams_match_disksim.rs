//! One reader issuing sequential reads at queue depth 1, each the moment the
//! previous one completes, against DiskSim 4.0's per-request times for the
//! same closed-loop stream (DiskSim 4.0 built from its published 64-bit tree,
//! run on a validate trace of `R Miss LBN 256 0 0` lines from LBN 0;
//! docs/disk-model.md, "Sequential streams").
//!
//! With caching off the stream runs at the media rate: a request arriving
//! just as the head reaches its first sector starts at once, never a
//! revolution later.

use std::sync::Arc;

use proxima_disk::validate::{replay, TraceRecord};
use proxima_disk::{DiskModel, DiskOp, Override};

/// `count` sequential reads of `sectors` each from LBN 0, closed loop.
fn stream(sectors: u32, count: u64) -> Vec<TraceRecord> {
    (0..count)
        .map(|index| TraceRecord {
            op: DiskOp::Read,
            lbn: index * u64::from(sectors),
            sector_count: sectors,
            measured_us: 0.0,
            next_interarrival_us: 0.0,
        })
        .collect()
}

fn model(name: &str, overrides: &[&str]) -> Arc<DiskModel> {
    let overrides: Vec<Override> = overrides.iter().map(|text| Override::parse(text).unwrap()).collect();
    Arc::new(DiskModel::resolve(name, &overrides).unwrap())
}

#[test]
fn without_caching_a_stream_runs_at_the_media_rate() {
    let cheetah = model("cheetah15k5", &["disk0:Enable caching in buffer=0"]);
    let replayed = replay(cheetah, &stream(256, 4000), 0).unwrap();
    // DiskSim: 0.852 ms per 256-sector read (1,200 sectors per track at
    // 15,020 RPM), 1.42–1.62 ms across a track switch, 2.35 ms at most
    // (a band's seek), 0.974 ms on average; a lost revolution costs 4 ms.
    let mean_ms = replayed.mean_simulated_ms();
    assert!((mean_ms - 0.974).abs() < 0.005, "mean {mean_ms:.3} ms, DiskSim 0.974 ms");
    let slowest_ms = replayed.simulated_ms[1..].iter().copied().fold(0.0, f64::max);
    assert!(slowest_ms < 2.4, "a request took {slowest_ms:.3} ms: a lost revolution");
}
