//! `proxima replay` on the disk model: every trace sample replays in every
//! mode and reports its figures as the last JSON line; a malformed trace or a
//! contradictory option is bad input (exit 2) with a message naming the file,
//! line and field.

use crate::service_support;

use std::path::{Path, PathBuf};
use std::process::Output;

use service_support::{last_json_line, proxima};

/// (file, format, requests, records response times)
const SAMPLES: [(&str, &str, u64, bool); 5] = [
    ("disksim-ascii.trace", "disksim", 10_000, false),
    ("mqsim-tpcc-small.trace", "disksim-ns", 6_999, false),
    ("msr-hm0-sample.csv", "msr", 1_000, true),
    ("systor17-sample.csv.gz", "systor", 999, true),
    ("tencent-cbs-sample.spc", "spc", 10_000, false),
];

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../workload/tests/data").join(name)
}

fn replay(trace: &Path, flags: &[&str]) -> Output {
    proxima().arg("replay").arg(trace).args(flags).output().expect("run proxima replay")
}

fn succeeded(output: &Output) -> serde_json::Value {
    assert!(output.status.success(), "exit {:?}: {}", output.status, String::from_utf8_lossy(&output.stderr));
    last_json_line(output)
}

fn skipped_total(json: &serde_json::Value) -> u64 {
    json["skipped"].as_object().expect("skipped counts").values().map(|count| count.as_u64().unwrap()).sum()
}

#[test]
fn every_sample_replays_faithfully_on_the_disk_model() {
    for (name, format, requests, has_response_times) in SAMPLES {
        let json = succeeded(&replay(&sample(name), &[]));
        assert_eq!(json["format"], format, "{name}");
        assert_eq!(json["requests"], requests, "{name}");
        assert_eq!(skipped_total(&json), 0, "{name}: addresses beyond the drive wrap by default");
        assert_eq!(json["reordered_fraction"], 0.0, "{name}: faithful replay keeps the trace's order");
        assert!(json["execution_time_s"].as_f64().unwrap() > 0.0 && json["iops"].as_f64().unwrap() > 0.0, "{name}");
        assert!(json["mean_latency_ms"].as_f64().unwrap() > 0.0, "{name}");
        assert!(json["p99_latency_ms"].as_f64().unwrap() >= json["p50_latency_ms"].as_f64().unwrap(), "{name}");
        assert_eq!(json["recorded"].is_object(), has_response_times, "{name}");
        assert_eq!(json["target"]["model"], "cheetah15k5");
    }
}

#[test]
fn every_mode_replays_a_trace_with_response_times() {
    let trace = sample("msr-hm0-sample.csv");
    for flags in [
        &["--mode", "afap"][..],
        &["--mode", "load"],
        &["--scale", "4"],
        &["--mode", "dependency"],
        &["--bundle-us", "20"],
    ] {
        let json = succeeded(&replay(&trace, flags));
        assert_eq!(json["requests"], 1_000, "{flags:?}");
    }
    let afap = succeeded(&replay(&trace, &["--mode", "afap", "--in-flight-max", "4"]));
    assert!(afap["mean_queue_depth"].as_f64().unwrap() <= 4.0, "the in-flight limit holds: {afap}");
    let faithful = succeeded(&replay(&trace, &["--model", "nearline7200", "--seed", "3"]));
    assert_eq!(faithful["target"]["model"], "nearline7200");
    assert_eq!(faithful["target"]["seed"], 3);
}

#[test]
fn mapping_options_filter_split_and_reject() {
    let trace = sample("tencent-cbs-sample.spc");
    let only = succeeded(&replay(&trace, &["--only-device", "1063"]));
    let others = only["skipped"]["other_device"].as_u64().unwrap();
    assert!(others > 0 && only["requests"].as_u64().unwrap() + others == 10_000, "{only}");
    let split = succeeded(&replay(&trace, &["--device-map", "split:16", "--block-bytes", "4096"]));
    assert_eq!(split["requests"], 10_000);
    let skipped = succeeded(&replay(&trace, &["--out-of-range", "skip"]));
    assert!(skipped["skipped"]["out_of_range"].as_u64().unwrap() > 0, "the sample addresses beyond 146 GB: {skipped}");
    let rejected = replay(&trace, &["--out-of-range", "error"]);
    assert_eq!(rejected.status.code(), Some(2));
    let message = String::from_utf8_lossy(&rejected.stderr);
    assert!(message.contains("tencent-cbs-sample.spc:") && message.contains("lies beyond"), "{message}");
}

#[test]
fn per_request_csv_has_one_line_per_request() {
    let directory = tempfile::tempdir().unwrap();
    let csv = directory.path().join("requests.csv");
    succeeded(&replay(&sample("systor17-sample.csv.gz"), &["--per-request", csv.to_str().unwrap()]));
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with("sequence,line,device,operation"));
    assert_eq!(lines.count(), 999);
}

#[test]
fn plots_draw_the_replay_beside_the_recording() {
    let directory = tempfile::tempdir().unwrap();
    let plots = directory.path().join("plots");
    let json = succeeded(&replay(&sample("systor17-sample.csv.gz"), &["--plots", plots.to_str().unwrap()]));
    for name in ["latency_percentiles.svg", "throughput.svg"] {
        let svg = std::fs::read_to_string(plots.join(name)).unwrap();
        assert!(svg.contains("<svg") && svg.contains("replayed") && svg.contains("recorded"), "{name}");
    }
    // The percentile curve's p0 and last point bracket the replay's latencies.
    let replayed = replayed_points(&plots.join("latency_percentiles.csv"));
    let (last_nines, last_latency) = *replayed.last().unwrap();
    assert!((last_nines - 999f64.log10()).abs() < 1e-9, "999 requests reach nearly p99.9: {last_nines}");
    let p99 = json["p99_latency_ms"].as_f64().unwrap();
    assert!(replayed[0].1 <= p99 && p99 <= last_latency * 1.001, "{p99} ms outside the curve");
    // Completions over time: bins in time order, whose full bins hold no
    // more requests than were replayed.
    let points = replayed_points(&plots.join("throughput.csv"));
    assert!(points.len() > 1 && points.windows(2).all(|pair| pair[0].0 < pair[1].0), "{points:?}");
    let bin_s = points[1].0 - points[0].0;
    let in_full_bins: f64 = points[..points.len() - 1].iter().map(|(_, iops)| iops * bin_s).sum();
    assert!(in_full_bins > 0.0 && in_full_bins <= 999.5, "{in_full_bins} requests in the full bins");
}

/// The `replayed` series of a plot's CSV (`series,x,y`).
fn replayed_points(csv: &Path) -> Vec<(f64, f64)> {
    let text = std::fs::read_to_string(csv).unwrap();
    text.lines()
        .skip(1)
        .filter_map(|line| line.strip_prefix("replayed,"))
        .map(|point| {
            let (x, y) = point.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect()
}

fn bad_input(output: &Output, expected: &str) {
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains(expected), "`{message}` does not say `{expected}`");
}

#[test]
fn a_malformed_line_is_bad_input_naming_file_line_and_field() {
    let directory = tempfile::tempdir().unwrap();
    let trace = directory.path().join("broken.csv");
    std::fs::write(&trace, "1,hm,0,Read,0,512,3\n2,hm,0,Read,0,512,3\n3,hm,0,Raed,0,512,3\n").unwrap();
    bad_input(&replay(&trace, &[]), &format!("{}:3: field `Type`", trace.display()));
    bad_input(&replay(&trace, &["--format", "spc"]), &format!("{}:1: field `LBA`", trace.display()));
}

#[test]
fn options_that_do_not_apply_are_bad_input() {
    let disksim = sample("mqsim-tpcc-small.trace");
    bad_input(&replay(&disksim, &["--mode", "dependency"]), "needs each request's recorded response time");
    bad_input(&replay(&disksim, &["--mode", "load"]), "needs each request's recorded response time");
    bad_input(&replay(&disksim, &["--mode", "afap", "--scale", "2"]), "--scale applies to scaled mode");
    bad_input(&replay(&disksim, &["--mode", "scaled"]), "needs --scale");
    bad_input(&replay(&disksim, &["--think-threshold-us", "5"]), "apply to dependency mode");
    bad_input(
        &replay(&disksim, &["--nbd", "nbd://127.0.0.1/x", "--model", "atlas10k"]),
        "apply to the simulated targets",
    );
    bad_input(&replay(&disksim, &["--model", "no-such-drive"]), "no-such-drive");
    bad_input(&replay(&disksim, &["--device-map", "split:0"]), "split:N");
    bad_input(&replay(&disksim, &["--block-bytes", "1000"]), "multiple of 512");
    bad_input(&replay(&disksim, &["--format", "nope"]), "unknown format");
}
