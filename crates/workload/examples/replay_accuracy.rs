//! Replay accuracy on the deterministic simulator, after hfplayer's
//! evaluation (FAST'17): an application captured on one drive model and
//! replayed on another, in every mode, against the application run directly
//! on the second; and each capture replayed unscaled on its own model.
//!
//! The application: N threads, each a TPC-B-like loop (read a random 4 KiB
//! page, think, write it back, think), think times uniform in 0.1–2 ms, over
//! the smaller drive's capacity; N = 1, 2, 3, 4, 8, 16.
//!
//! Run: `cargo run --release -p proxima-workload --example replay_accuracy [SOURCE_MODEL TARGET_MODEL [REQUESTS [SEED]]]`
//! (defaults: atlas10k cheetah15k5 10000 1). Prints one JSON object.

use std::sync::Arc;

use proxima_disk::DiskModel;
use proxima_workload::application::{run_application, ApplicationConfig, ApplicationResult, APPLICATION_BLOCK_BYTES};
use proxima_workload::replay::metrics::ReplayReport;
use proxima_workload::replay::{replay, DiskTarget, Mode, NoObserver, ReplayOptions};
use proxima_workload::synthetic::{Pattern, SyntheticSpec};
use proxima_workload::TraceRequest;

const THREAD_COUNTS: [usize; 6] = [1, 2, 3, 4, 8, 16];
const THINK_US: (u64, u64) = (100, 2000);

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let source_name = arguments.first().map_or("atlas10k", String::as_str);
    let target_name = arguments.get(1).map_or("cheetah15k5", String::as_str);
    let requests: u64 = arguments.get(2).map_or(10_000, |text| text.parse().expect("REQUESTS is a count"));
    let seed: u64 = arguments.get(3).map_or(1, |text| text.parse().expect("SEED is an integer"));
    let source = Arc::new(DiskModel::builtin(source_name).expect("a built-in model"));
    let target = Arc::new(DiskModel::builtin(target_name).expect("a built-in model"));
    let block_count = source.sector_count().min(target.sector_count()) * 512 / APPLICATION_BLOCK_BYTES;
    let workload = SyntheticSpec {
        pattern: Pattern::TpcB,
        block_count,
        request_blocks: 1,
        read_fraction: 0.5,
        scatter: false,
        seed,
    };
    let rows: Vec<serde_json::Value> = THREAD_COUNTS
        .iter()
        .map(|&threads| {
            let config = ApplicationConfig {
                thread_count: threads,
                think_ns_min: THINK_US.0 * 1000,
                think_ns_max: THINK_US.1 * 1000,
                request_count: requests,
                seed,
                disk_seed: seed,
            };
            row(&source, &target, &workload, &config)
        })
        .collect();
    let json = serde_json::json!({
        "source_model": source_name,
        "target_model": target_name,
        "requests": requests,
        "seed": seed,
        "think_us": [THINK_US.0, THINK_US.1],
        "rows": rows,
    });
    println!("{json}");
}

/// One thread count: the application on both drives, the capture replayed
/// unscaled on the source and in every mode on the target.
fn row(
    source: &Arc<DiskModel>,
    target: &Arc<DiskModel>,
    workload: &SyntheticSpec,
    config: &ApplicationConfig,
) -> serde_json::Value {
    let mut capture = Vec::new();
    let on_source = run_application(Arc::clone(source), workload, config, &mut |request| capture.push(request));
    let on_target = run_application(Arc::clone(target), workload, config, &mut |_| {});
    let unscaled = replay_on(source, &capture, Mode::Faithful, config.disk_seed);
    let recorded = unscaled.recorded.expect("captures record response times");
    let modes = [Mode::Faithful, Mode::Afap, Mode::Load, Mode::Scaled { factor: 2.0 }, Mode::Dependency];
    let replays: Vec<serde_json::Value> = modes
        .iter()
        .map(|&mode| against(mode, &replay_on(target, &capture, mode, config.disk_seed), &on_target))
        .collect();
    serde_json::json!({
        "threads": config.thread_count,
        "application_on_source": application_json(&on_source),
        "application_on_target": application_json(&on_target),
        "unscaled_on_source": {
            "execution_time_error_percent": recorded.execution_time_error_percent,
            "mean_latency_error_percent": recorded.mean_latency_error_percent,
            "reordered_fraction": unscaled.reordered_fraction,
        },
        "replayed_on_target": replays,
    })
}

fn replay_on(model: &Arc<DiskModel>, capture: &[TraceRequest], mode: Mode, seed: u64) -> ReplayReport {
    let mut target = DiskTarget::new(Arc::clone(model), seed);
    let options = ReplayOptions { mode, ..ReplayOptions::default() };
    let source = capture.iter().map(|request| Ok(*request));
    replay("capture", source, &mut target, &options, &mut NoObserver).expect("the capture replays")
}

fn application_json(result: &ApplicationResult) -> serde_json::Value {
    serde_json::json!({
        "iops": result.iops,
        "mean_latency_ms": result.mean_latency_ms,
        "execution_time_s": result.execution_ns as f64 / 1e9,
    })
}

fn against(mode: Mode, report: &ReplayReport, application: &ApplicationResult) -> serde_json::Value {
    let error = |replayed: f64, expected: f64| (replayed - expected) / expected * 100.0;
    serde_json::json!({
        "mode": mode.name(),
        "scale": if let Mode::Scaled { factor } = mode { serde_json::json!(factor) } else { serde_json::Value::Null },
        "iops": report.iops,
        "mean_latency_ms": report.mean_latency_ms,
        "iops_error_percent": error(report.iops, application.iops),
        "mean_latency_error_percent": error(report.mean_latency_ms, application.mean_latency_ms),
        "reordered_fraction": report.reordered_fraction,
    })
}
