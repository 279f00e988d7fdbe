//! `reproduce hylog-proximal`: the contract's keys, the files written, and
//! what the runs must show at a small scale — under 80/20 updates the
//! proximal-hot layout's destages leave hot blocks staged and move fewer
//! blocks than the proximal layout's, no more than the arithmetic bound
//! allows, and its serial reads after aging stay within 3 % of fresh; under
//! uniform updates the two layouts destage alike.

use proxima_lab::experiment::{run, Experiment, RunSettings};
use proxima_lab::progress::NoProgress;
use proxima_lab::seed000_proximal::layout::LayoutParams;
use proxima_lab::seed001_hylog::hylog_proximal::HylogProximal;
use serde_json::Value;

fn figure(json: &Value, path: &[&str]) -> f64 {
    let value = path.iter().fold(json, |value, key| &value[key]);
    value.as_f64().unwrap_or_else(|| panic!("{path:?} is a number in {json}"))
}

#[test]
fn proximal_hot_destages_fewer_blocks_under_skew_and_the_headline_keeps_the_contract() {
    let directory = tempfile::tempdir().unwrap();
    let settings =
        RunSettings { out_dir: directory.path().to_path_buf(), seed: 1, model: HylogProximal::DEFAULT_MODEL.into() };
    let params = LayoutParams { scale: 0.0005, jobs: 2 };
    let outcome = run::<HylogProximal>(&settings, &params, &mut NoProgress).expect("it runs");
    let json = serde_json::to_value(outcome.headline).unwrap();
    for layout in ["proximal", "proximal_hot"] {
        for key in ["disk_ios_per_update", "aged_to_fresh"] {
            assert!(figure(&json, &[layout, key]) > 0.0, "{layout}.{key} in {json}");
        }
    }
    // The rows of the CSV: updates, layout, …, in the experiment's order.
    let csv = std::fs::read_to_string(directory.path().join("hylog_proximal.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|&key| key == name).unwrap();
    let rows: Vec<Vec<String>> = lines.map(|line| line.split(',').map(str::to_owned).collect()).collect();
    let value = |row: usize, name: &str| -> f64 { rows[row][column(name)].parse().unwrap() };
    let order: Vec<(&str, &str)> = rows.iter().map(|row| (row[0].as_str(), row[1].as_str())).collect();
    assert_eq!(
        order,
        [
            ("knuth-80-20", "proximal"),
            ("knuth-80-20", "proximal-hot"),
            ("uniform", "proximal"),
            ("uniform", "proximal-hot")
        ]
    );
    assert!(value(1, "retained_hot_blocks") > 0.0, "80/20: destages left hot blocks staged");
    assert_eq!(value(0, "retained_hot_blocks"), 0.0, "the proximal layout retains nothing");
    let destaged = |row: usize| value(row, "destaged_blocks_per_update");
    assert!(
        destaged(1) < 0.98 * destaged(0),
        "80/20: {} against {} blocks destaged per update",
        destaged(1),
        destaged(0)
    );
    let gain = destaged(0) / destaged(1);
    let bound = figure(&json, &["retention_bound_reduction"]);
    assert!(gain <= bound * 1.05, "{gain:.3}× fewer blocks destaged, beyond the bound {bound:.3}×");
    assert!((destaged(3) / destaged(2) - 1.0).abs() < 0.02, "uniform: {} against {}", destaged(3), destaged(2));
    assert!(figure(&json, &["disk_io_reduction"]) > 1.0, "{json}");
    // The retained blocks' old places stay free between their neighbours:
    // serial reads go through them (the target, 0.97 of fresh).
    assert!(value(1, "aged_runs_per_request") > 1.0, "80/20: retained blocks split the runs");
    assert!(figure(&json, &["proximal_hot", "aged_to_fresh"]) >= 0.97, "{json}");
    for file in ["hylog_proximal.csv", "hylog_proximal.svg", "report.md"] {
        assert!(directory.path().join(file).is_file(), "{file} written");
    }
    let report = std::fs::read_to_string(directory.path().join("report.md")).unwrap();
    assert!(report.contains("proxima reproduce hylog-proximal") && report.contains("--seed 1"), "{report}");
}
