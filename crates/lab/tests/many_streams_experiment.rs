//! `many-streams` at a tiny size: every row carries the contract's keys; one
//! stream reads from the drive alone at 90 % of its media rate or more (its
//! read-ahead serves the next read); the prefetcher beats the drive alone at
//! many streams per disk; memory stays within the budget, which is at least
//! D·R·N; a budget below D·R·N is refused; and the same seed gives the same
//! headline.

use proxima_disk::DiskModel;
use proxima_lab::experiment::{run, RunSettings};
use proxima_lab::progress::NoProgress;
use proxima_lab::seed004_prefetch::many_streams::{ManyStreams, ManyStreamsParams};
use proxima_lab::seed004_prefetch::streams::media_mb_s_at;
use proxima_lab::LabError;
use serde_json::Value;

fn settings(directory: &std::path::Path) -> RunSettings {
    RunSettings { out_dir: directory.to_path_buf(), seed: 3, model: "nearline7200".into() }
}

fn tiny() -> ManyStreamsParams {
    ManyStreamsParams {
        streams: vec![1, 32],
        readahead_mib: vec![1],
        disks: vec![1, 2],
        seconds: 20.0,
        jobs: 2,
        ..ManyStreamsParams::default()
    }
}

fn rows(headline: &impl serde::Serialize) -> Vec<Value> {
    let value = serde_json::to_value(headline).unwrap();
    assert_eq!(value.as_object().unwrap().keys().collect::<Vec<_>>(), ["rows"]);
    value["rows"].as_array().unwrap().clone()
}

#[test]
fn prefetch_beats_the_drive_alone_within_its_memory_and_rows_keep_the_contract() {
    let directory = tempfile::tempdir().unwrap();
    let outcome = run::<ManyStreams>(&settings(directory.path()), &tiny(), &mut NoProgress).unwrap();
    let rows = rows(&outcome.headline);
    for row in &rows {
        for key in ["disks", "streams_per_disk", "scheduler", "mb_s_per_disk", "memory_mib", "response_time_spread"] {
            assert!(row.get(key).is_some(), "{key} missing from {row}");
        }
        assert!(row["mb_s_per_disk"].as_f64().unwrap() > 0.0, "{row}");
        if row["scheduler"] == "prefetch" {
            let turn_mib = row["dispatch_streams"].as_f64().unwrap()
                * row["readahead_kib"].as_f64().unwrap()
                * row["requests_per_turn"].as_f64().unwrap()
                / 1024.0;
            let budget = row["memory_mib"].as_f64().unwrap();
            assert!(budget >= turn_mib, "M ≥ D·R·N: {row}");
            assert!(row["memory_peak_mib"].as_f64().unwrap() <= budget, "memory within M: {row}");
        } else {
            assert_eq!(row["scheduler"], "baseline");
            assert_eq!(row["memory_mib"].as_f64().unwrap(), 0.0);
        }
    }
    // Every disk count × stream count has a baseline and one prefetch row per R
    // (1 MiB and the size the device rule gives).
    assert_eq!(rows.len(), 2 * 2 * 3);
    for disks in [1, 2] {
        let at_32 = |scheduler: &str| {
            rows.iter()
                .filter(|row| row["disks"] == disks && row["streams_per_disk"] == 32 && row["scheduler"] == scheduler)
                .map(|row| row["mb_s_per_disk"].as_f64().unwrap())
                .fold(0.0, f64::max)
        };
        assert!(at_32("prefetch") > 2.0 * at_32("baseline"), "{disks} disk(s): prefetch wins at 32 streams");
    }
    // One stream's file starts at the drive's first LBN.
    let media_mb_s = media_mb_s_at(&DiskModel::builtin("nearline7200").unwrap(), 0);
    let alone = rows
        .iter()
        .find(|row| row["disks"] == 1 && row["streams_per_disk"] == 1 && row["scheduler"] == "baseline")
        .map(|row| row["mb_s_per_disk"].as_f64().unwrap())
        .unwrap();
    assert!(alone >= 0.9 * media_mb_s, "one stream alone: {alone} MB/s of {media_mb_s} MB/s");
    for file in ["throughput.csv", "throughput.svg", "cache_cliff.csv", "cache_cliff.svg"] {
        let text = std::fs::read_to_string(directory.path().join(file)).unwrap();
        assert!(!text.is_empty(), "{file}");
    }
    let report = std::fs::read_to_string(&outcome.report_path).unwrap();
    assert!(report.contains("--seed 3") && report.contains("60 MB/s"), "the report names its command and the paper");
    let again = tempfile::tempdir().unwrap();
    let repeat = run::<ManyStreams>(&settings(again.path()), &ManyStreamsParams { jobs: 1, ..tiny() }, &mut NoProgress);
    assert_eq!(
        serde_json::to_value(&repeat.unwrap().headline).unwrap(),
        serde_json::to_value(&outcome.headline).unwrap()
    );
}

#[test]
fn a_memory_budget_below_one_dispatch_turn_is_refused() {
    let directory = tempfile::tempdir().unwrap();
    let params = ManyStreamsParams { dispatch_streams: 4, memory_mib: Some(3), ..tiny() };
    let error = run::<ManyStreams>(&settings(directory.path()), &params, &mut NoProgress).unwrap_err();
    assert!(matches!(error, LabError::InvalidParameter { parameter: "memory-mib", .. }), "{error}");
}
