//! `proxima replay` streams: a generated trace of 1,000,000 requests replays
//! on the disk model with a peak resident memory under 100 MB (measured by the
//! kernel for the child process), however long the trace.

mod service_support;

use std::io::BufWriter;

use proxima_workload::synthetic::{open_loop, Pattern, SyntheticSpec, SyntheticWorkload};
use proxima_workload::trace::write::DisksimAsciiWriter;
use service_support::{last_json_line, proxima};

const REQUESTS: usize = 1_000_000;
const PEAK_RESIDENT_BYTES_MAX: i64 = 100 << 20;

/// The peak resident set of the largest child this process has waited for.
fn children_peak_resident_bytes() -> i64 {
    // SAFETY: getrusage writes into the zeroed struct we pass and nothing else.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) }, 0, "getrusage");
    usage.ru_maxrss * 1024
}

#[test]
fn a_million_request_trace_replays_in_under_100_megabytes() {
    let directory = tempfile::tempdir().unwrap();
    let trace = directory.path().join("uniform.trace");
    // 4 KiB reads and writes uniformly over the first 100 GiB, Poisson
    // arrivals at 100 per second (below the drive's capacity), seed 7.
    let workload = SyntheticWorkload::new(SyntheticSpec {
        pattern: Pattern::Uniform,
        block_count: 100 << 18,
        request_blocks: 1,
        read_fraction: 0.7,
        scatter: false,
        seed: 7,
    });
    let mut writer = DisksimAsciiWriter::new(BufWriter::new(std::fs::File::create(&trace).unwrap()));
    for request in open_loop(workload, 100.0, 4096, 7).take(REQUESTS) {
        writer.write(&request).unwrap();
    }
    writer.finish().unwrap();

    let output = proxima().arg("replay").arg(&trace).output().expect("run proxima replay");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json = last_json_line(&output);
    assert_eq!(json["requests"], REQUESTS as u64);
    let peak = children_peak_resident_bytes();
    eprintln!("peak resident memory of proxima replay: {:.1} MiB", peak as f64 / f64::from(1 << 20));
    assert!(peak < PEAK_RESIDENT_BYTES_MAX, "peak resident memory {peak} bytes");
}
