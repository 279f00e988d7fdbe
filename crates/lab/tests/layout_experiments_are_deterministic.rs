//! The layout experiments at a tiny scale: each writes its CSV, plots and report,
//! prints the headline the issue specifies (exactly those keys), and gives the
//! same headline for the same seed, however many simulations run at once, and
//! another for another seed.

use proxima_lab::experiment::{run, Experiment, RunSettings};
use proxima_lab::progress::NoProgress;
use proxima_lab::seed000_proximal::layout::LayoutParams;
use proxima_lab::seed000_proximal::srarw::ProximalSrarw;
use proxima_lab::seed000_proximal::table2::ProximalTable2;
use proxima_lab::seed000_proximal::table3::ProximalTable3;
use serde_json::Value;

const TINY_SCALE: f64 = 0.0001;

fn run_once<E: Experiment<Params = LayoutParams>>(directory: &std::path::Path, seed: u64) -> E::Headline {
    run_with_jobs::<E>(directory, seed, 1)
}

fn run_with_jobs<E: Experiment<Params = LayoutParams>>(
    directory: &std::path::Path,
    seed: u64,
    jobs: u16,
) -> E::Headline {
    let settings = RunSettings { out_dir: directory.to_path_buf(), seed, model: E::DEFAULT_MODEL.into() };
    let params = LayoutParams { scale: TINY_SCALE, jobs };
    let outcome = run::<E>(&settings, &params, &mut NoProgress).expect("the experiment runs");
    let report = std::fs::read_to_string(&outcome.report_path).expect("report.md written");
    assert!(report.contains(&format!("--seed {seed}")), "the report names its command and seed");
    assert!(report.contains("paper"), "the report quotes the paper");
    outcome.headline
}

/// The headline as the JSON line scripts read.
fn json<H: serde::Serialize>(headline: &H) -> Value {
    serde_json::to_value(headline).expect("the headline serialises")
}

fn keys(value: &Value) -> Vec<String> {
    value.as_object().expect("an object").keys().cloned().collect()
}

fn assert_files(directory: &std::path::Path, files: &[&str]) {
    for file in files {
        let path = directory.join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("{file} written"));
        assert!(!text.is_empty(), "{file} is not empty");
        if file.ends_with(".svg") {
            assert!(text.starts_with("<svg"), "{file} is an SVG");
        }
    }
}

#[test]
fn table2_rows_have_the_specified_keys_and_repeat_for_a_seed() {
    let first = tempfile::tempdir().unwrap();
    let headline = run_once::<ProximalTable2>(first.path(), 3);
    let printed = json(&headline);
    assert_eq!(keys(&printed), ["rows"]);
    let rows = printed["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "1, 2, 5 and 10 % staging areas");
    for row in rows {
        let mut expected = [
            "batch_response_ms",
            "disk_ios_per_batch",
            "io_amplification",
            "ios_per_revolution",
            "staging_percent",
            "updates_per_batch",
        ];
        expected.sort_unstable();
        assert_eq!(keys(row), expected);
    }
    assert!(headline.rows.iter().all(|row| row.updates_per_batch > 0.0), "{headline:?}");
    assert_files(
        first.path(),
        &["table2.csv", "destages.csv", "table2_ios_per_revolution.svg", "table2_updates_per_batch.svg"],
    );
    let second = tempfile::tempdir().unwrap();
    assert_eq!(headline, run_with_jobs::<ProximalTable2>(second.path(), 3, 2), "same seed, same headline");
    let third = tempfile::tempdir().unwrap();
    assert_ne!(headline, run_once::<ProximalTable2>(third.path(), 4), "another seed, other figures");
}

#[test]
fn table3_and_srarw_have_the_specified_keys_and_repeat_for_a_seed() {
    let first = tempfile::tempdir().unwrap();
    let table3 = run_once::<ProximalTable3>(first.path(), 5);
    let printed = json(&table3);
    assert_eq!(keys(&printed), ["proximal", "write_anywhere"]);
    for layout in ["proximal", "write_anywhere"] {
        assert_eq!(keys(&printed[layout]), ["aged_mb_s_per_disk", "aged_to_fresh", "fresh_mb_s_per_disk"]);
    }
    assert_files(first.path(), &["table3.csv", "table3.svg"]);
    let second = tempfile::tempdir().unwrap();
    let srarw = run_once::<ProximalSrarw>(second.path(), 5);
    let printed = json(&srarw);
    assert_eq!(keys(&printed), ["layouts"]);
    assert_eq!(keys(&printed["layouts"]), ["in_place", "proximal", "write_anywhere"]);
    for layout in ["in_place", "proximal", "write_anywhere"] {
        assert_eq!(
            keys(&printed["layouts"][layout]),
            ["aged_to_fresh", "dollars_per_iops", "ios_per_revolution", "random_update_iops"]
        );
    }
    assert_files(second.path(), &["srarw.csv", "srarw_throughput.svg", "srarw_reads.svg"]);
    let again = tempfile::tempdir().unwrap();
    assert_eq!(srarw, run_with_jobs::<ProximalSrarw>(again.path(), 5, 3), "same seed, same headline");
    let table3_again = tempfile::tempdir().unwrap();
    assert_eq!(table3, run_with_jobs::<ProximalTable3>(table3_again.path(), 5, 2), "same seed, same headline");
}

#[test]
fn a_scale_out_of_range_is_bad_input() {
    let directory = tempfile::tempdir().unwrap();
    let settings = RunSettings { out_dir: directory.path().to_path_buf(), seed: 1, model: "nearline7200".into() };
    for scale in [0.0, -1.0, 1.5, 1e-7] {
        let params = LayoutParams { scale, jobs: 1 };
        let outcome = run::<ProximalTable2>(&settings, &params, &mut NoProgress);
        assert!(
            matches!(outcome, Err(proxima_lab::LabError::InvalidParameter { parameter: "scale", .. })),
            "scale {scale}"
        );
    }
}

#[test]
fn saved_rows_render_the_same_files() {
    let directory = tempfile::tempdir().unwrap();
    let settings = RunSettings { out_dir: directory.path().to_path_buf(), seed: 2, model: "nearline7200".into() };
    let params = LayoutParams { scale: TINY_SCALE, jobs: 2 };
    let rows = proxima_lab::experiment::measure::<ProximalTable3>(&settings, &params, &mut NoProgress).unwrap();
    let saved = serde_json::to_string(&rows).expect("rows serialise");
    let restored = serde_json::from_str(&saved).expect("rows deserialise");
    assert_eq!(rows, restored, "the rows survive saving");
    let cost = proxima_lab::report::cost::WallCost { wall_seconds: 1.0, peak_memory_bytes: None };
    let rendered = proxima_lab::experiment::render::<ProximalTable3>(&settings, &params, &rows, &cost).unwrap();
    let again = proxima_lab::experiment::render::<ProximalTable3>(&settings, &params, &restored, &cost).unwrap();
    assert_eq!(rendered, again, "saved rows give the same files, summary and headline");
    let measured = run::<ProximalTable3>(&settings, &params, &mut NoProgress).unwrap();
    assert_eq!(measured.headline, rendered.headline, "as the run that measured them");
    let csv = std::fs::read_to_string(directory.path().join("table3.csv")).unwrap();
    let proxima_lab::report::markdown::Artifact::Csv(table) = &rendered.files[0].1 else {
        panic!("table3.csv is a table");
    };
    assert_eq!(csv, table.to_csv(), "the rendered CSV is the one written");
}
