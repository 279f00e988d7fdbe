//! `reproduce proximal-disk` run twice with the same seed writes the same figures and
//! the same headline; another seed gives other numbers.

use proxima_lab::progress::NoProgress;
use proxima_lab::{find_experiment, ReproduceOptions};

fn run(directory: &std::path::Path, seed: u64) -> serde_json::Value {
    let experiment = find_experiment("proximal-disk").expect("the experiment is registered");
    let options = ReproduceOptions {
        out_dir: directory.to_path_buf(),
        seed,
        model: "cheetah15k5".into(),
        strand_count: 20,
        scale: None,
        jobs: 1,
    };
    let outcome = (experiment.run)(&options, &mut NoProgress).expect("the experiment runs");
    assert!(outcome.report_path.exists());
    let mut headline = outcome.headline;
    headline.as_object_mut().expect("an object").remove("out_dir");
    headline
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
    let experiment = find_experiment("proximal-disk").unwrap();
    let options = ReproduceOptions {
        out_dir: directory.path().to_path_buf(),
        seed: 1,
        model: "no-such-drive".into(),
        strand_count: 5,
        scale: None,
        jobs: 1,
    };
    assert!(matches!((experiment.run)(&options, &mut NoProgress), Err(proxima_lab::LabError::Model { .. })));
}
