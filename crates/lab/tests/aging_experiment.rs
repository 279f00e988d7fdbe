//! `reproduce aging` at a tiny scale: the contract's keys, the files written,
//! and the behaviour of the layouts — a fresh sequential fill scores 1 and
//! reads fastest; random overwrites scatter write-anywhere's extents (both
//! scores fall, the read slows) but leave in-place blocks at home; all-append
//! rounds interleave write-anywhere's extents completely.

use proxima_lab::experiment::{run, Experiment, RunSettings};
use proxima_lab::progress::NoProgress;
use proxima_lab::seed002_aging::aging::{Aging, AgingParams};
use serde_json::Value;

fn params() -> AgingParams {
    AgingParams {
        extents: 4,
        extent_mib: 1,
        chunk_kib: 4,
        rounds: 2,
        overwrite_fraction: 0.1,
        staging: 1.0,
        read_kib: 128,
        jobs: 2,
    }
}

fn rows_of<'a>(rows: &'a [Value], workload: &str, layout: &str) -> Vec<&'a Value> {
    let mut selected: Vec<&Value> =
        rows.iter().filter(|row| row["workload"] == workload && row["layout"] == layout).collect();
    selected.sort_by_key(|row| row["round"].as_u64());
    selected
}

fn figure(row: &Value, key: &str) -> f64 {
    row[key].as_f64().unwrap_or_else(|| panic!("{key} in {row}"))
}

#[test]
fn aging_scatters_write_anywhere_and_the_headline_has_the_contract_keys() {
    let directory = tempfile::tempdir().unwrap();
    let settings = RunSettings { out_dir: directory.path().to_path_buf(), seed: 3, model: Aging::DEFAULT_MODEL.into() };
    let outcome = run::<Aging>(&settings, &params(), &mut NoProgress).expect("the experiment runs");
    for file in [
        "aging.csv",
        "aging_score_vs_read.svg",
        "aging_read_by_round.svg",
        "natural_transfer_size.csv",
        "natural_transfer_size.svg",
        "report.md",
    ] {
        assert!(directory.path().join(file).exists(), "{file} written");
    }
    let json = serde_json::to_value(&outcome.headline).unwrap();
    let correlation = json["correlation"].as_f64().expect("a correlation: the scores and costs vary");
    assert!(correlation < 0.0, "a lower score reads slower: r = {correlation}");
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2 * 3 * 3, "two workloads × three layouts × rounds 0..=2");
    for key in ["layout", "round", "layout_score", "serial_read_s_per_gib", "static_layout_score", "workload"] {
        assert!(rows.iter().all(|row| row.get(key).is_some()), "every row has {key}");
    }

    for fresh in rows.iter().filter(|row| row["round"] == 0) {
        assert!(figure(fresh, "layout_score") >= 0.99, "a sequential fill reads sequentially: {fresh}");
        assert_eq!(figure(fresh, "static_layout_score"), 1.0, "a sequential fill is one run: {fresh}");
    }

    let scattered = rows_of(rows, "random-overwrites", "write-anywhere");
    let static_scores: Vec<f64> = scattered.iter().map(|row| figure(row, "static_layout_score")).collect();
    assert!(static_scores.windows(2).all(|pair| pair[1] < pair[0]), "each round scatters more: {static_scores:?}");
    let (first, last) = (scattered[0], scattered[2]);
    assert!(figure(last, "layout_score") < figure(first, "layout_score"));
    assert!(figure(last, "serial_read_s_per_gib") > 1.2 * figure(first, "serial_read_s_per_gib"));

    for row in rows_of(rows, "random-overwrites", "in-place") {
        assert_eq!(figure(row, "static_layout_score"), 1.0, "in place, blocks stay home: {row}");
    }

    let interleaved = rows_of(rows, "interleaved-appenders", "write-anywhere");
    assert!(figure(interleaved[2], "static_layout_score") < 0.1, "all appends interleave: {}", interleaved[2]);
    assert!(figure(interleaved[2], "layout_score") < 0.1);

    let fifty = json["natural_transfer_size_50_kib"].as_f64().unwrap();
    let ninety = json["natural_transfer_size_90_kib"].as_f64().unwrap();
    assert!(4.0 < fifty && fifty < ninety, "{fifty} {ninety}");
}

#[test]
fn a_chunk_that_does_not_divide_the_extent_is_refused() {
    let directory = tempfile::tempdir().unwrap();
    let settings = RunSettings { out_dir: directory.path().to_path_buf(), seed: 1, model: Aging::DEFAULT_MODEL.into() };
    let odd = AgingParams { chunk_kib: 12, ..params() };
    let error = run::<Aging>(&settings, &odd, &mut NoProgress).unwrap_err();
    assert!(error.to_string().contains("chunk-kib"), "{error}");
}

/// The command line's defaults (10 extents of 4 MiB, 5 rounds, 4 KiB chunks,
/// 10 % overwrites, a 1 % staging area, 128 KiB reads).
fn defaults() -> AgingParams {
    AgingParams {
        extents: 10,
        extent_mib: 4,
        chunk_kib: 4,
        rounds: 5,
        overwrite_fraction: 0.1,
        staging: 1.0,
        read_kib: 128,
        jobs: 2,
    }
}

#[test]
fn at_the_defaults_the_scores_predict_the_serial_read() {
    // The documented run (seed 1): r = −0.753 over every row, −0.872 over
    // the random overwrites, −0.883 for the static score; seeds 2–13 lie
    // within 0.03 of these (docs/aging.md). The paper's r ≤ −0.8 for the
    // dynamic score over every row is missed since the drive decodes queued
    // commands while it serves others: interleaved pieces read in one pass
    // cost less than the score's count of breaks says.
    let directory = tempfile::tempdir().unwrap();
    let settings = RunSettings { out_dir: directory.path().to_path_buf(), seed: 1, model: Aging::DEFAULT_MODEL.into() };
    let outcome = run::<Aging>(&settings, &defaults(), &mut NoProgress).expect("the experiment runs");
    let json = serde_json::to_value(&outcome.headline).unwrap();
    let correlation = json["correlation"].as_f64().unwrap();
    assert!(correlation <= -0.75, "r = {correlation}");
    let overwrites = json["correlation_by_workload"]["random-overwrites"].as_f64().unwrap();
    assert!(overwrites <= -0.85, "r over the random overwrites = {overwrites}");
    let static_correlation = json["static_correlation"].as_f64().unwrap();
    assert!(static_correlation <= -0.85, "r of the static score = {static_correlation}");
}
