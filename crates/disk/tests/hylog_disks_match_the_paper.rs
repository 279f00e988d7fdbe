//! The HyLog paper's disks (`disk2003`, `disk2008`, `dsp3105`) have the
//! geometry of its Tables 2 and 5, their seek curves average the tables'
//! seek times, and random 4 KiB reads take Table 1's positioning time (seek
//! plus half a revolution).

use std::sync::Arc;

use proxima_disk::closed_loop::{run, ClosedLoopConfig};
use proxima_disk::{DiskModel, DiskOp, Scheduler};

/// (name, RPM, sectors per track, cylinders, surfaces, average seek ms).
const TABLES: [(&str, f64, u32, u32, u32, f64); 3] = [
    ("disk2003", 15000.0, 476, 10042, 8, 3.6),
    ("disk2008", 24000.0, 967, 10042, 8, 2.0),
    ("dsp3105", 5400.0, 57, 2568, 14, 9.5),
];

/// The mean seek between two distinct, uniformly random cylinders, ms.
fn average_seek_ms(model: &DiskModel) -> f64 {
    let cylinders = u64::from(model.cylinder_count());
    let weighted: f64 = (1..cylinders)
        .map(|distance| {
            let seek_ms = model.seek_ns(distance as u32, DiskOp::Read) as f64 / 1e6;
            2.0 * (cylinders - distance) as f64 * seek_ms
        })
        .sum();
    weighted / (cylinders * (cylinders - 1)) as f64
}

#[test]
fn geometry_and_seek_match_the_tables() {
    for (name, rpm, sectors_per_track, cylinders, surfaces, seek_ms) in TABLES {
        let model = DiskModel::builtin(name).unwrap();
        assert_eq!(model.rpm(), rpm, "{name}");
        assert_eq!(model.cylinder_count(), cylinders, "{name}");
        assert_eq!(model.surface_count(), surfaces, "{name}");
        let expected_sectors = u64::from(sectors_per_track) * u64::from(cylinders) * u64::from(surfaces);
        assert_eq!(model.sector_count(), expected_sectors, "{name}");
        let last = model.track_of(model.sector_count() - 1).unwrap();
        assert_eq!(last.sectors_per_track, sectors_per_track, "{name}: one zone");
        let average = average_seek_ms(&model);
        assert!((average - seek_ms).abs() / seek_ms < 0.01, "{name}: average seek {average} ms");
    }
}

#[test]
fn the_scaled_disks_keep_the_atlas10k_curve_shape() {
    let atlas = DiskModel::builtin("atlas10k").unwrap();
    for (name, seek_ms) in [("disk2003", 3.6), ("disk2008", 2.0)] {
        let model = DiskModel::builtin(name).unwrap();
        for distance in [1, 10, 100, 1000, 5000, 10_000] {
            let ratio = model.seek_ns(distance, DiskOp::Read) as f64 / atlas.seek_ns(distance, DiskOp::Read) as f64;
            assert!((ratio - seek_ms / 5.6).abs() < 0.002, "{name} at {distance} cylinders: {ratio}");
        }
    }
}

#[test]
fn random_reads_take_table_1_positioning_times() {
    // Seek plus half a revolution (Table 1's positioning time for the 2003
    // disk, Table 5's figures for the others) plus 8 sectors at the media rate.
    for (name, rpm, sectors_per_track, _, _, seek_ms) in TABLES {
        let revolution_ms = 60_000.0 / rpm;
        let expected_ms = seek_ms + revolution_ms / 2.0 + revolution_ms * 8.0 / f64::from(sectors_per_track);
        let config = ClosedLoopConfig {
            queue_depth: 1,
            scheduler: Scheduler::Fcfs,
            op: DiskOp::Read,
            sectors_per_request: 8,
            request_count: 5_000,
            seed: 3,
        };
        let result = run(Arc::new(DiskModel::builtin(name).unwrap()), &config);
        let error = (result.mean_response_ms - expected_ms) / expected_ms;
        assert!(error.abs() < 0.05, "{name}: {} ms against {expected_ms} ms", result.mean_response_ms);
    }
}
