//! `foreground-priority` at a small size: the headline keeps the contract's
//! keys; an idle array destages nothing; foreground-first with one background
//! request per drive keeps clients faster than FIFO while destaging less than
//! a relaxed limit does; the paced default keeps up with what clients stage
//! without filling the staging area; bad flags are refused by name.

use proxima_lab::experiment::{run, RunSettings};
use proxima_lab::progress::NoProgress;
use proxima_lab::seed002_priority::foreground_priority::{ForegroundPriority, ForegroundPriorityParams};
use proxima_lab::LabError;
use serde_json::Value;

fn settings(directory: &std::path::Path) -> RunSettings {
    settings_seeded(directory, 5)
}

fn settings_seeded(directory: &std::path::Path, seed: u64) -> RunSettings {
    RunSettings { out_dir: directory.to_path_buf(), seed, model: "nearline7200".into() }
}

fn small() -> ForegroundPriorityParams {
    ForegroundPriorityParams {
        scale: 0.0005,
        clients: 4,
        read_percent: 50.0,
        think_ms: 5.0,
        limits: vec![1, 8],
        seconds: 60.0,
        jobs: 2,
    }
}

/// Seeds of the behaviour test: the drives, the captured destage and the
/// clients all change with it.
const SEEDS: [u64; 3] = [5, 6, 7];

#[test]
fn priority_trades_destage_rate_for_client_latency_and_the_default_keeps_up() {
    for seed in SEEDS {
        priority_trades_destage_rate_for_client_latency(seed);
    }
}

fn priority_trades_destage_rate_for_client_latency(seed: u64) {
    let directory = tempfile::tempdir().unwrap();
    let outcome =
        run::<ForegroundPriority>(&settings_seeded(directory.path(), seed), &small(), &mut NoProgress).unwrap();
    let headline = serde_json::to_value(&outcome.headline).unwrap();
    let rows = headline["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        for key in ["background_limit", "system_mb_s", "foreground_mean_ms", "foreground_p99_ms"] {
            assert!(row[key].as_f64().is_some(), "{key} missing from {row}");
        }
    }
    let default = &headline["default"];
    for key in ["foreground_p99_ms", "idle_p99_ms"] {
        assert!(default[key].as_f64().unwrap() > 0.0, "{key}: {default}");
    }
    assert_eq!(default["destage_keeps_up"], Value::Bool(true), "{default}");
    assert!(default["backlog_fraction_max"].as_f64().unwrap() < 1.0);

    let csv = std::fs::read_to_string(directory.path().join("foreground_priority.csv")).unwrap();
    let column = |policy: &str, limit: &str, name: &str| -> f64 {
        let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
        let index = header.iter().position(|cell| *cell == name).unwrap();
        let line = csv
            .lines()
            .find(|line| line.starts_with(&format!("{policy},{limit},")))
            .unwrap_or_else(|| panic!("no {policy} {limit} row in {csv}"));
        line.split(',').nth(index).unwrap().parse().unwrap()
    };
    assert_eq!(column("idle", "", "destaged_blocks_per_s"), 0.0);
    assert!(column("limit", "1", "destaged_blocks_per_s") < column("limit", "8", "destaged_blocks_per_s"));
    assert!(column("limit", "1", "foreground_read_p99_ms") < column("fifo", "", "foreground_read_p99_ms"));
    assert!(column("limit", "1", "foreground_read_p99_ms") >= column("idle", "", "foreground_read_p99_ms"));
    assert!(directory.path().join("foreground_priority.svg").exists());
    assert!(std::fs::read_to_string(directory.path().join("report.md")).unwrap().contains("| target |"));
}

#[test]
fn the_same_seed_gives_the_same_headline() {
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    let params = ForegroundPriorityParams { limits: vec![2], seconds: 4.0, ..small() };
    let a = run::<ForegroundPriority>(&settings(first.path()), &params, &mut NoProgress).unwrap();
    let b = run::<ForegroundPriority>(&settings(second.path()), &params, &mut NoProgress).unwrap();
    assert_eq!(a.headline, b.headline);
}

#[test]
fn flags_out_of_range_are_refused_by_name() {
    let directory = tempfile::tempdir().unwrap();
    let cases: [(&str, ForegroundPriorityParams); 4] = [
        ("limits", ForegroundPriorityParams { limits: vec![0], ..small() }),
        ("limits", ForegroundPriorityParams { limits: vec![33], ..small() }),
        ("read-percent", ForegroundPriorityParams { read_percent: 101.0, ..small() }),
        ("seconds", ForegroundPriorityParams { seconds: 0.0, ..small() }),
    ];
    for (parameter, params) in cases {
        match run::<ForegroundPriority>(&settings(directory.path()), &params, &mut NoProgress) {
            Err(LabError::InvalidParameter { parameter: refused, .. }) => assert_eq!(refused, parameter),
            other => panic!("{parameter}: {other:?}"),
        }
    }
}
