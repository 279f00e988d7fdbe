//! Every simulated experiment runs on every drive model shipped with the
//! repository, not only on the drive it defaults to. For each built-in model
//! and each validated drive folder of `crates/disk/models` (by its `.parv`),
//! and each experiment that takes `--model`:
//!
//! - sized by `--scale`: a scale far too small is refused (exit 2) with a
//!   message naming the smallest `--scale` that fits the drive, and the run
//!   at exactly that scale succeeds;
//! - sized by flags of its own: the run at small sizes succeeds;
//!
//! and a successful run prints its JSON headline, an object, as its last line
//! and writes its report.
//!
//! The drives span 1 GB to 1 TB and 5 to 110 MB/s of media rate, with buses
//! slower than the medium on the oldest: a size, a window or a rate worked out
//! for the default drive alone shows up here as a refusal or a failure.

use std::ffi::OsString;
use std::path::Path;
use std::process::Output;
use std::sync::Mutex;

use proxima_disk::validate::{drive_folders, shipped_models_directory};
use proxima_disk::DiskModel;

use crate::service_support::proxima;

/// A scale no shipped drive has room for.
const FAR_TOO_SMALL_SCALE: &str = "0.000001";

/// Experiments sized by `--scale`, with the flags that keep them short.
const SCALED: [(&str, &[&str]); 8] = [
    ("proximal-srarw", &[]),
    ("proximal-table2", &[]),
    ("proximal-table3", &[]),
    ("proximal-snapshots", &[]),
    ("realloc-on-read", &[]),
    ("hylog-proximal", &[]),
    ("wafl-delete", &[]),
    ("foreground-priority", &["--seconds", "2", "--limits", "1,4"]),
];

/// Experiments sized by flags of their own, at small sizes.
const SIZED: [(&str, &[&str]); 3] = [
    ("many-streams", &["--streams", "1,8", "--seconds", "5", "--disks", "1"]),
    ("aging", &["--extents", "4", "--extent-mib", "8", "--rounds", "2"]),
    ("proximal-disk", &["--count", "5"]),
];

/// Every shipped drive: its name, and what `--model` is given for it.
fn shipped_drives() -> Vec<(String, OsString)> {
    let builtin = DiskModel::builtin_names();
    let mut drives: Vec<(String, OsString)> =
        builtin.iter().map(|&name| (name.to_owned(), OsString::from(name))).collect();
    let folders = drive_folders(&shipped_models_directory()).expect("the shipped models load");
    drives.extend(
        folders
            .into_iter()
            .filter(|drive| !builtin.contains(&drive.name.as_str()))
            .map(|drive| (drive.name, drive.parv.into_os_string())),
    );
    drives
}

fn reproduce(experiment: &str, model: &OsString, out: &Path, args: &[&str]) -> Output {
    proxima()
        .args(["reproduce", experiment, "--seed", "3", "--model"])
        .arg(model)
        .arg("--out")
        .arg(out)
        .args(args)
        .output()
        .expect("proxima runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The scale a refusal names: "... (--scale 0.0011 or more)".
fn smallest_scale_named(stderr: &str) -> Option<String> {
    let (_, after) = stderr.split_once("(--scale ")?;
    let (scale, _) = after.split_once(" or more)")?;
    Some(scale.to_owned())
}

/// Checks a run that must have succeeded; returns what went wrong, if anything.
fn check_success(label: &str, out: &Path, output: &Output) -> Result<(), String> {
    let stderr = text(&output.stderr);
    if !output.status.success() {
        return Err(format!("{label}: exit {:?}: {stderr}", output.status.code()));
    }
    let stdout = text(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    match serde_json::from_str::<serde_json::Value>(last) {
        Ok(value) if value.is_object() => {}
        _ => return Err(format!("{label}: the last line is not a JSON object: {last}")),
    }
    if !out.join("report.md").is_file() {
        return Err(format!("{label}: no report.md in {}", out.display()));
    }
    Ok(())
}

/// Every experiment on one drive; the failures, described.
fn run_on_drive(name: &str, model: &OsString, scratch: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    for (experiment, flags) in SCALED {
        let label = format!("{experiment} on {name}");
        let out = scratch.join(format!("{name}-{experiment}"));
        let refused = reproduce(experiment, model, &out, &[&["--scale", FAR_TOO_SMALL_SCALE][..], flags].concat());
        let stderr = text(&refused.stderr);
        if refused.status.code() != Some(2) {
            failures
                .push(format!("{label}: --scale {FAR_TOO_SMALL_SCALE} exited {:?}: {stderr}", refused.status.code()));
            continue;
        }
        let Some(scale) = smallest_scale_named(&stderr) else {
            failures.push(format!("{label}: the refusal names no scale that fits: {stderr}"));
            continue;
        };
        let output = reproduce(experiment, model, &out, &[&["--scale", scale.as_str()][..], flags].concat());
        if let Err(failure) = check_success(&format!("{label} at --scale {scale}"), &out, &output) {
            failures.push(failure);
        }
    }
    for (experiment, flags) in SIZED {
        let out = scratch.join(format!("{name}-{experiment}"));
        let output = reproduce(experiment, model, &out, flags);
        if let Err(failure) = check_success(&format!("{experiment} on {name}"), &out, &output) {
            failures.push(failure);
        }
    }
    failures
}

#[test]
fn every_experiment_runs_on_every_shipped_drive() {
    let drives = shipped_drives();
    assert!(drives.len() >= 10, "the shipped drives: {drives:?}");
    let scratch = tempfile::tempdir().unwrap();
    // Two drives at a time: the runs are single-threaded.
    let queue = Mutex::new(drives.iter());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let Some((name, model)) = queue.lock().unwrap().next() else { break };
                let found = run_on_drive(name, model, scratch.path());
                failures.lock().unwrap().extend(found);
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
}
