//! The parametric nearline7200 reproduces the figures it was built from: about
//! 11.1 ms per 4 KiB random read at queue depth 1 (0.75 requests per
//! revolution at 7200 RPM), about 110 MB/s on the outer zone, 1 TB.

use std::sync::Arc;

use proxima_disk::closed_loop::{run, ClosedLoopConfig};
use proxima_disk::{DiskModel, DiskOp, Scheduler};

#[test]
fn random_reads_take_about_eleven_milliseconds() {
    let model = Arc::new(DiskModel::builtin("nearline7200").unwrap());
    let config = ClosedLoopConfig {
        queue_depth: 1,
        scheduler: Scheduler::Fcfs,
        op: DiskOp::Read,
        sectors_per_request: 8,
        request_count: 20_000,
        seed: 3,
    };
    let result = run(model.clone(), &config);
    assert!((result.mean_response_ms - 11.1).abs() < 0.3, "{} ms", result.mean_response_ms);
    let per_revolution = model.revolution_ns() as f64 / 1.0e6 / result.mean_response_ms;
    assert!((per_revolution - 0.75).abs() < 0.03, "{per_revolution} requests per revolution");
}

#[test]
fn geometry_matches_the_drive() {
    let model = DiskModel::builtin("nearline7200").unwrap();
    assert_eq!(model.sector_count(), 1_953_525_168);
    assert_eq!(model.rpm(), 7200.0);
    let outer = model.track_of(0).unwrap();
    let outer_megabytes_per_second =
        f64::from(outer.sectors_per_track) * 512.0 / (model.revolution_ns() as f64 / 1.0e9) / 1.0e6;
    assert!((outer_megabytes_per_second - 110.0).abs() < 2.0, "{outer_megabytes_per_second} MB/s");
    let next = model.track_of(u64::from(outer.sector_count)).unwrap();
    assert_eq!((next.cylinder, next.surface), (1, 0), "surface serpentine");
}
