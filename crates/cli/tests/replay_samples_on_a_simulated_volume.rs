//! `proxima replay --target volume`: every trace sample replays through the
//! engine on a simulated volume of every layout, in virtual time and
//! deterministically; the mapping options apply as on the disk model; options
//! that belong to another target are bad input (exit 2).

use crate::service_support;

use std::path::{Path, PathBuf};
use std::process::Output;

use proxima_engine::Layout;
use service_support::{last_json_line, proxima};

/// (file, requests)
const SAMPLES: [(&str, u64); 5] = [
    ("disksim-ascii.trace", 10_000),
    ("mqsim-tpcc-small.trace", 6_999),
    ("msr-hm0-sample.csv", 1_000),
    ("systor17-sample.csv.gz", 999),
    ("tencent-cbs-sample.spc", 10_000),
];

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../workload/tests/data").join(name)
}

fn replay(trace: &Path, flags: &[&str]) -> Output {
    proxima().arg("replay").arg(trace).args(["--target", "volume"]).args(flags).output().expect("run proxima replay")
}

fn succeeded(output: &Output) -> serde_json::Value {
    assert!(output.status.success(), "exit {:?}: {}", output.status, String::from_utf8_lossy(&output.stderr));
    last_json_line(output)
}

fn skipped_total(json: &serde_json::Value) -> u64 {
    json["skipped"].as_object().expect("skipped counts").values().map(|count| count.as_u64().unwrap()).sum()
}

#[test]
fn every_sample_replays_on_a_volume_of_every_layout() {
    for layout in Layout::ALL {
        for (name, requests) in SAMPLES {
            let json = succeeded(&replay(&sample(name), &["--layout", layout.name(), "--volume-size", "1G"]));
            let context = format!("{name} on {}", layout.name());
            assert_eq!(json["target"]["kind"], "volume", "{context}");
            assert_eq!(json["target"]["layout"], layout.name(), "{context}");
            assert_eq!(json["requests"], requests, "{context}");
            assert_eq!(json["failed"], 0, "{context}");
            assert_eq!(skipped_total(&json), 0, "{context}: addresses beyond the volume wrap by default");
            assert_eq!(json["reordered_fraction"], 0.0, "{context}: the engine serves requests in order");
            assert!(json["execution_time_s"].as_f64().unwrap() > 0.0, "{context}");
            assert!(json["mean_latency_ms"].as_f64().unwrap() > 0.0, "{context}");
        }
    }
}

#[test]
fn a_volume_replay_repeats_exactly_and_its_layout_and_staging_matter() {
    let trace = sample("systor17-sample.csv.gz");
    let first = succeeded(&replay(&trace, &["--mode", "afap"]));
    let again = succeeded(&replay(&trace, &["--mode", "afap"]));
    assert_eq!(first, again, "virtual time: the same replay gives the same figures");
    assert_eq!(first["target"]["layout"], "proximal", "the default layout");
    assert_eq!(first["target"]["staging_percent"], 1.0, "the proximal layout stages 1 % by default");
    let in_place = succeeded(&replay(&trace, &["--mode", "afap", "--layout", "in-place"]));
    assert_eq!(in_place["target"]["staging_percent"], 0.0);
    assert_ne!(first["execution_time_s"], in_place["execution_time_s"], "the layouts place writes differently");
    let unstaged = succeeded(&replay(&trace, &["--mode", "afap", "--staging", "0"]));
    assert_ne!(first["execution_time_s"], unstaged["execution_time_s"], "staging serves small writes on flash");
}

#[test]
fn every_mode_replays_on_a_volume() {
    let trace = sample("msr-hm0-sample.csv");
    for flags in [&["--mode", "afap"][..], &["--mode", "load"], &["--scale", "4"], &["--mode", "dependency"]] {
        let json = succeeded(&replay(&trace, flags));
        assert_eq!(json["requests"], 1_000, "{flags:?}");
    }
}

#[test]
fn mapping_options_apply_on_a_volume() {
    let trace = sample("tencent-cbs-sample.spc");
    let skipped = succeeded(&replay(&trace, &["--volume-size", "64M", "--out-of-range", "skip"]));
    assert!(skipped["skipped"]["out_of_range"].as_u64().unwrap() > 0, "{skipped}");
    let only = succeeded(&replay(&trace, &["--only-device", "1063"]));
    assert!(only["skipped"]["other_device"].as_u64().unwrap() > 0, "{only}");
    let rejected = replay(&trace, &["--volume-size", "64M", "--out-of-range", "error"]);
    assert_eq!(rejected.status.code(), Some(2), "{}", String::from_utf8_lossy(&rejected.stderr));
    assert!(String::from_utf8_lossy(&rejected.stderr).contains("lies beyond"));
}

fn bad_input(output: &Output, expected: &str) {
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains(expected), "`{message}` does not say `{expected}`");
}

#[test]
fn options_of_other_targets_or_impossible_volumes_are_bad_input() {
    let trace = sample("msr-hm0-sample.csv");
    let on_the_disk = |flags: &[&str]| proxima().arg("replay").arg(&trace).args(flags).output().unwrap();
    bad_input(&on_the_disk(&["--layout", "in-place"]), "apply to --target volume");
    bad_input(&on_the_disk(&["--staging", "2"]), "apply to --target volume");
    bad_input(&on_the_disk(&["--target", "disk", "--volume-size", "1G"]), "apply to --target volume");
    bad_input(&on_the_disk(&["--nbd", "nbd://127.0.0.1/x", "--layout", "proximal"]), "not --nbd");
    bad_input(&replay(&trace, &["--layout", "log-structured-soup"]), "unknown layout");
    bad_input(&replay(&trace, &["--layout", "write-anywhere", "--staging", "1"]), "does not stage");
    bad_input(&replay(&trace, &["--staging", "80"]), "[0, 50]");
    bad_input(&replay(&trace, &["--volume-size", "100T"]), "needs");
}
