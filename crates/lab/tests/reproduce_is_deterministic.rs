//! `reproduce proximal-disk` run twice with the same seed writes the same figures and
//! the same headline; another seed gives other numbers.

use proxima_lab::experiment::{run as run_experiment, RunSettings};
use proxima_lab::progress::NoProgress;
use proxima_lab::seed000_proximal::disk::{DiskParams, Headline, ProximalDisk};

fn run(directory: &std::path::Path, seed: u64) -> Headline {
    let settings = RunSettings { out_dir: directory.to_path_buf(), seed, model: "cheetah15k5".into() };
    let outcome = run_experiment::<ProximalDisk>(&settings, &DiskParams { count: 20 }, &mut NoProgress)
        .expect("the experiment runs");
    assert!(outcome.report_path.exists());
    assert_eq!(outcome.headline.out_dir, directory.display().to_string());
    // The output directory is the one figure that differs between runs.
    Headline { out_dir: String::new(), ..outcome.headline }
}

#[test]
fn same_seed_same_output() {
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    let headline = run(first.path(), 7);
    assert_eq!(headline, run(second.path(), 7));
    for file in [
        "figure1.csv",
        "figure2.csv",
        "issue_order.csv",
        "appendix_a.csv",
        "appendix_a_total_variation.csv",
        "appendix_a_distribution.csv",
    ] {
        let one = std::fs::read_to_string(first.path().join(file)).unwrap();
        let two = std::fs::read_to_string(second.path().join(file)).unwrap();
        assert_eq!(one, two, "{file} differs between runs with the same seed");
    }
    for file in ["figure1.svg", "figure2.svg", "issue_order.svg", "appendix_a.svg", "report.md"] {
        assert!(first.path().join(file).exists(), "{file} written");
    }
    let other = tempfile::tempdir().unwrap();
    assert_ne!(headline, run(other.path(), 8));
}

#[test]
fn an_unknown_model_is_a_model_error() {
    let directory = tempfile::tempdir().unwrap();
    let settings = RunSettings { out_dir: directory.path().to_path_buf(), seed: 1, model: "no-such-drive".into() };
    let outcome = run_experiment::<ProximalDisk>(&settings, &DiskParams { count: 5 }, &mut NoProgress);
    assert!(matches!(outcome, Err(proxima_lab::LabError::Model { .. })));
}
