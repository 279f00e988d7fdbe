//! The layout experiments at a tiny scale: each writes its CSV, plots and report,
//! prints the headline the issue specifies (exactly those keys), and gives the
//! same headline for the same seed, however many simulations run at once, and
//! another for another seed.

use proxima_lab::progress::NoProgress;
use proxima_lab::{find_experiment, ReproduceOptions};
use serde_json::Value;

const TINY_SCALE: f64 = 0.0001;

fn run(name: &str, directory: &std::path::Path, seed: u64) -> Value {
    run_with_jobs(name, directory, seed, 1)
}

fn run_with_jobs(name: &str, directory: &std::path::Path, seed: u64, jobs: usize) -> Value {
    let experiment = find_experiment(name).expect("the experiment is registered");
    let options = ReproduceOptions {
        out_dir: directory.to_path_buf(),
        seed,
        model: experiment.default_model.into(),
        strand_count: experiment.default_strand_count,
        scale: Some(TINY_SCALE),
        jobs,
    };
    let outcome = (experiment.run)(&options, &mut NoProgress).expect("the experiment runs");
    let report = std::fs::read_to_string(&outcome.report_path).expect("report.md written");
    assert!(report.contains(&format!("--seed {seed}")), "the report names its command and seed");
    assert!(report.contains("paper"), "the report quotes the paper");
    outcome.headline
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
    let headline = run("proximal-table2", first.path(), 3);
    assert_eq!(keys(&headline), ["rows"]);
    let rows = headline["rows"].as_array().unwrap();
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
        assert!(row["updates_per_batch"].as_f64().unwrap() > 0.0);
    }
    assert_files(
        first.path(),
        &["table2.csv", "destages.csv", "table2_ios_per_revolution.svg", "table2_updates_per_batch.svg"],
    );
    let second = tempfile::tempdir().unwrap();
    assert_eq!(headline, run_with_jobs("proximal-table2", second.path(), 3, 2), "same seed, same headline");
    let third = tempfile::tempdir().unwrap();
    assert_ne!(headline, run("proximal-table2", third.path(), 4), "another seed, other figures");
}

#[test]
fn table3_and_srarw_have_the_specified_keys_and_repeat_for_a_seed() {
    let first = tempfile::tempdir().unwrap();
    let table3 = run("proximal-table3", first.path(), 5);
    assert_eq!(keys(&table3), ["proximal", "write_anywhere"]);
    for layout in ["proximal", "write_anywhere"] {
        assert_eq!(keys(&table3[layout]), ["aged_mb_s_per_disk", "aged_to_fresh", "fresh_mb_s_per_disk"]);
    }
    assert_files(first.path(), &["table3.csv", "table3.svg"]);
    let second = tempfile::tempdir().unwrap();
    let srarw = run("proximal-srarw", second.path(), 5);
    assert_eq!(keys(&srarw), ["layouts"]);
    assert_eq!(keys(&srarw["layouts"]), ["in_place", "proximal", "write_anywhere"]);
    for layout in ["in_place", "proximal", "write_anywhere"] {
        assert_eq!(
            keys(&srarw["layouts"][layout]),
            ["aged_to_fresh", "dollars_per_iops", "ios_per_revolution", "random_update_iops"]
        );
    }
    assert_files(second.path(), &["srarw.csv", "srarw_throughput.svg", "srarw_reads.svg"]);
    let again = tempfile::tempdir().unwrap();
    assert_eq!(srarw, run_with_jobs("proximal-srarw", again.path(), 5, 3), "same seed, same headline");
    let table3_again = tempfile::tempdir().unwrap();
    assert_eq!(table3, run_with_jobs("proximal-table3", table3_again.path(), 5, 2), "same seed, same headline");
}

#[test]
fn a_scale_out_of_range_is_bad_input() {
    let directory = tempfile::tempdir().unwrap();
    let experiment = find_experiment("proximal-table2").unwrap();
    for scale in [0.0, -1.0, 1.5, 1e-7] {
        let options = ReproduceOptions {
            out_dir: directory.path().to_path_buf(),
            seed: 1,
            model: "nearline7200".into(),
            strand_count: 0,
            scale: Some(scale),
            jobs: 1,
        };
        let outcome = (experiment.run)(&options, &mut NoProgress);
        assert!(
            matches!(outcome, Err(proxima_lab::LabError::InvalidParameter { parameter: "scale", .. })),
            "scale {scale}"
        );
    }
}
