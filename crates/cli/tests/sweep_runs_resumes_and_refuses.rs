//! `proxima sweep` on this machine: every cell of the grid runs once and lands
//! in one table (CSV and Arrow) in grid order whatever the number of workers;
//! a sweep killed half way and run again runs only the cells without a stored
//! result and ends with the table of an uninterrupted run; a failing cell
//! fails the sweep (exit 1) without losing the others; a bad SPEC or options
//! that do not apply are bad input (exit 2).

use crate::service_support;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use service_support::{last_json_line, proxima};

fn spec(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn sweep(spec: &Path, out: &Path, flags: &[&str]) -> Output {
    proxima().arg("sweep").arg(spec).arg("--out").arg(out).args(flags).output().expect("run proxima sweep")
}

fn succeeded(output: &Output) -> serde_json::Value {
    assert!(output.status.success(), "exit {:?}: {}", output.status, String::from_utf8_lossy(&output.stderr));
    last_json_line(output)
}

fn stored_cells(out: &Path) -> usize {
    std::fs::read_dir(out.join("cells"))
        .map(|entries| {
            entries.filter(|entry| entry.as_ref().unwrap().path().extension().is_some_and(|ext| ext == "json")).count()
        })
        .unwrap_or(0)
}

#[test]
fn every_cell_runs_once_into_one_table_whatever_the_workers() {
    let folder = tempfile::tempdir().unwrap();
    let (one, two) = (folder.path().join("one"), folder.path().join("two"));
    let json = succeeded(&sweep(&spec("sweep-small.toml"), &one, &["--jobs", "1"]));
    assert_eq!((json["cells"].as_u64(), json["ran"].as_u64(), json["skipped"].as_u64()), (Some(24), Some(24), Some(0)));
    assert_eq!(json["table"], one.join("sweep.csv").display().to_string());
    assert!(one.join("sweep.arrow").exists() && json["plots"].as_array().unwrap().len() == 4);
    let csv = std::fs::read_to_string(one.join("sweep.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header[..5], ["cell", "trace", "model", "in-flight-max", "seed"]);
    for column in ["requests", "iops", "mean_latency_ms", "p99_latency_ms", "execution_time_s", "reordered_fraction"] {
        assert!(header.contains(&column), "{column} in {header:?}");
    }
    let rows: Vec<Vec<&str>> = lines.map(|line| line.split(',').collect()).collect();
    assert_eq!(rows.len(), 24);
    let grid_order: Vec<(&str, &str)> = rows.iter().take(4).map(|row| (row[3], row[4])).collect();
    assert_eq!(grid_order, [("1", "0"), ("1", "1"), ("4", "0"), ("4", "1")], "the last axis varies fastest");
    assert!(rows[..12].iter().all(|row| row[1].ends_with("msr-hm0-sample.csv") && !row[2].is_empty()));
    let requests = header.iter().position(|column| *column == "requests").unwrap();
    assert!(
        rows[..12].iter().all(|row| row[requests] == "1000") && rows[12..].iter().all(|row| row[requests] == "999")
    );

    let parallel = succeeded(&sweep(&spec("sweep-small.toml"), &two, &["--jobs", "2"]));
    assert_eq!(parallel["ran"], 24);
    assert_eq!(csv, std::fs::read_to_string(two.join("sweep.csv")).unwrap(), "the same table from two workers");
    assert_eq!(std::fs::read(one.join("sweep.arrow")).unwrap(), std::fs::read(two.join("sweep.arrow")).unwrap());

    let again = succeeded(&sweep(&spec("sweep-small.toml"), &one, &[]));
    assert_eq!((again["ran"].as_u64(), again["skipped"].as_u64()), (Some(0), Some(24)), "nothing left to run");
    assert_eq!(csv, std::fs::read_to_string(one.join("sweep.csv")).unwrap());
}

#[test]
fn a_sweep_killed_half_way_runs_only_the_missing_cells_when_run_again() {
    let folder = tempfile::tempdir().unwrap();
    let (whole, interrupted) = (folder.path().join("whole"), folder.path().join("interrupted"));
    succeeded(&sweep(&spec("sweep-small.toml"), &whole, &["--jobs", "1"]));

    let mut child = proxima()
        .arg("sweep")
        .arg(spec("sweep-small.toml"))
        .arg("--out")
        .arg(&interrupted)
        .args(["--jobs", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while stored_cells(&interrupted) < 4 {
        assert!(Instant::now() < deadline, "no cell stored in a minute");
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // The cell in flight when the sweep died goes on alone and stores nothing.
    std::thread::sleep(Duration::from_millis(500));
    let stored = stored_cells(&interrupted);
    assert!((4..24).contains(&stored), "killed half way: {stored} of 24 stored");
    assert!(!interrupted.join("sweep.csv").exists(), "the table is written at the end");

    let resumed = succeeded(&sweep(&spec("sweep-small.toml"), &interrupted, &["--jobs", "2"]));
    assert_eq!(resumed["skipped"].as_u64(), Some(stored as u64), "every stored cell is kept");
    assert_eq!(resumed["ran"].as_u64(), Some(24 - stored as u64), "only the missing cells run");
    assert_eq!(
        std::fs::read_to_string(whole.join("sweep.csv")).unwrap(),
        std::fs::read_to_string(interrupted.join("sweep.csv")).unwrap(),
        "the resumed sweep's table is the uninterrupted one's"
    );
}

#[test]
fn an_experiment_sweep_gives_each_cell_its_own_folder() {
    let folder = tempfile::tempdir().unwrap();
    let spec_path = folder.path().join("experiment.toml");
    std::fs::write(
        &spec_path,
        "command = \"reproduce\"\nexperiment = \"proximal-disk\"\noptions = [\"--count\", \"2\"]\n\
         [grid]\nmodel = [\"cheetah15k5\", \"atlas10k\"]\n",
    )
    .unwrap();
    let out = folder.path().join("out");
    let json = succeeded(&sweep(&spec_path, &out, &[]));
    assert_eq!(json["cells"], 2);
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3);
    let reports = std::fs::read_dir(out.join("cells"))
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().path().join("report.md").exists())
        .count();
    assert_eq!(reports, 2, "each cell's experiment wrote its report in its own folder");
}

#[test]
fn a_failing_cell_fails_the_sweep_and_the_others_are_kept() {
    let folder = tempfile::tempdir().unwrap();
    let spec_path = folder.path().join("failing.toml");
    let trace = spec("../../../workload/tests/data/systor17-sample.csv.gz");
    std::fs::write(
        &spec_path,
        format!(
            "command = \"replay\"\noptions = [\"--mode\", \"afap\"]\n[grid]\ntrace = [{:?}]\nmodel = [\"atlas10k\", \"no-such-drive\"]\n",
            trace.display().to_string()
        ),
    )
    .unwrap();
    let out = folder.path().join("out");
    let output = sweep(&spec_path, &out, &[]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("model=no-such-drive"));
    let json = last_json_line(&output);
    assert_eq!((json["ran"].as_u64(), json["failed"].as_u64()), (Some(2), Some(1)));
    assert_eq!(std::fs::read_to_string(out.join("sweep.csv")).unwrap().lines().count(), 2, "the header and one row");
    let rerun = last_json_line(&sweep(&spec_path, &out, &[]));
    assert_eq!((rerun["ran"].as_u64(), rerun["skipped"].as_u64()), (Some(1), Some(1)), "only the failed cell again");
}

fn bad_input(output: &Output, expected: &str) {
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains(expected), "`{message}` does not say `{expected}`");
}

#[test]
fn bad_specifications_and_options_are_bad_input() {
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("out");
    let tiny = spec("sweep-tiny.toml");
    bad_input(&sweep(&tiny, &out, &["--ray", "127.0.0.1:1", "--jobs", "2"]), "--jobs applies to a local run");
    bad_input(&sweep(&tiny, &out, &["--ray-python", "/usr/bin/python3"]), "--ray-python applies with --ray");
    bad_input(&sweep(&tiny, &out, &["--jobs", "0"]), "--jobs must be at least 1");
    bad_input(&sweep(&folder.path().join("missing.toml"), &out, &[]), "missing.toml");
    let broken = folder.path().join("broken.toml");
    std::fs::write(&broken, "command = \"replay\"\n[grid]\nseed = [1]\n").unwrap();
    bad_input(&sweep(&broken, &out, &[]), "needs the traces");
    std::fs::write(&broken, "command = \"replay\"\n[grid\n").unwrap();
    bad_input(&sweep(&broken, &out, &[]), "broken.toml");
}
