//! `proxima replay --nbd` against `proxima serve`: every trace sample replays
//! against a served Proxima export in wall time, every request answered
//! without error; a short trace replays at its recorded times too, and a
//! missing export is a failure of the operation (exit 1).

use crate::service_support;

use std::path::{Path, PathBuf};
use std::process::Output;

use service_support::{last_json_line, proxima, Volume};

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

fn replay(trace: &Path, uri: &str, flags: &[&str]) -> Output {
    proxima().arg("replay").arg(trace).args(["--nbd", uri]).args(flags).output().expect("run proxima replay")
}

fn succeeded(output: &Output) -> serde_json::Value {
    assert!(output.status.success(), "exit {:?}: {}", output.status, String::from_utf8_lossy(&output.stderr));
    last_json_line(output)
}

#[test]
fn every_sample_replays_against_a_served_export() {
    let mut volume = Volume::create(&["--data-size", "2G", "--flash-size", "256M"]);
    volume.create_extent("lun0", "1G");
    volume.start_server();
    let uri = volume.uri("lun0");
    for (name, requests) in SAMPLES {
        // As fast as possible: the samples span minutes of recorded time.
        let json = succeeded(&replay(&sample(name), &uri, &["--mode", "afap"]));
        assert_eq!(json["requests"], requests, "{name}: {json}");
        assert_eq!(json["failed"], 0, "{name}");
        assert_eq!(json["target"]["kind"], "nbd");
        assert_eq!(json["target"]["size_bytes"], 1u64 << 30);
        assert!(json["iops"].as_f64().unwrap() > 0.0 && json["mean_latency_ms"].as_f64().unwrap() > 0.0, "{name}");
    }
    // MQSim's sample lasts 0.136 s: replay it at its recorded times, bundling
    // requests due within 20 µs.
    let trace = sample("mqsim-tpcc-small.trace");
    let json = succeeded(&replay(&trace, &uri, &["--bundle-us", "20"]));
    assert_eq!(json["requests"], 6_999);
    assert!(json["execution_time_s"].as_f64().unwrap() >= 0.13, "no faster than recorded: {json}");
    assert_eq!(json["reordered_fraction"], 0.0, "one connection keeps the issue order");
    // The trace's own in-flight counts, with recorded latencies to compare.
    let json = succeeded(&replay(&sample("systor17-sample.csv.gz"), &uri, &["--mode", "load"]));
    assert_eq!(json["requests"], 999);
    assert!(json["recorded"]["mean_latency_ms"].as_f64().unwrap() > 0.0, "{json}");

    let missing = replay(&trace, &volume.uri("no-such-export"), &[]);
    assert_eq!(missing.status.code(), Some(1), "{}", String::from_utf8_lossy(&missing.stderr));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no-such-export"));
}
