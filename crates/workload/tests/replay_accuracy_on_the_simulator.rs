//! Replay accuracy on the deterministic simulator, as hfplayer measures it:
//! a capture replayed unscaled on its own drive model reproduces it exactly;
//! a closed-loop application captured on a slow drive and replayed on a
//! faster one in dependency mode matches the application run directly on the
//! faster drive, where as-fast-as-possible and load replay do not.

use std::sync::Arc;

use proxima_disk::DiskModel;
use proxima_workload::application::{run_application, ApplicationConfig, ApplicationResult, APPLICATION_BLOCK_BYTES};
use proxima_workload::replay::metrics::ReplayReport;
use proxima_workload::replay::{replay, DiskTarget, Mode, ReplayObserver, ReplayOptions, RequestRecord};
use proxima_workload::synthetic::{Pattern, SyntheticSpec};
use proxima_workload::trace::write::SystorWriter;
use proxima_workload::{TraceFormat, TraceReader, TraceRequest};

const SEED: u64 = 1;

fn model(name: &str) -> Arc<DiskModel> {
    Arc::new(DiskModel::builtin(name).expect("a built-in model"))
}

/// TPC-B-like threads (read a page, think, write it back, think) over the
/// capacity both drives have.
fn application(threads: usize, requests: u64, models: &[&Arc<DiskModel>]) -> (SyntheticSpec, ApplicationConfig) {
    let sectors = models.iter().map(|model| model.sector_count()).min().expect("a model");
    let workload = SyntheticSpec {
        pattern: Pattern::TpcB,
        block_count: sectors * 512 / APPLICATION_BLOCK_BYTES,
        request_blocks: 1,
        read_fraction: 0.5,
        scatter: false,
        seed: SEED,
    };
    let config = ApplicationConfig {
        thread_count: threads,
        think_ns_min: 100_000,
        think_ns_max: 2_000_000,
        request_count: requests,
        seed: SEED,
        disk_seed: SEED,
    };
    (workload, config)
}

/// Keeps every replayed request's latency.
#[derive(Default)]
struct Latencies(Vec<(u64, u64, Option<u64>)>);

impl ReplayObserver for Latencies {
    fn completed(&mut self, record: &RequestRecord) {
        let latency = record.completion_ns - record.issue_ns;
        self.0.push((record.sequence, latency, record.recorded_response_ns));
    }
}

fn replay_capture(
    model: &Arc<DiskModel>,
    capture: &[TraceRequest],
    mode: Mode,
    observer: &mut dyn ReplayObserver,
) -> ReplayReport {
    let mut target = DiskTarget::new(Arc::clone(model), SEED);
    let options = ReplayOptions { mode, ..ReplayOptions::default() };
    replay("capture", capture.iter().map(|request| Ok(*request)), &mut target, &options, observer).expect("replays")
}

#[test]
fn an_unscaled_replay_of_a_capture_reproduces_it_exactly() {
    let cheetah = model("cheetah15k5");
    let (workload, config) = application(4, 5_000, &[&cheetah]);
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("capture.csv");
    let mut writer = SystorWriter::new(std::io::BufWriter::new(std::fs::File::create(&path).unwrap())).unwrap();
    run_application(Arc::clone(&cheetah), &workload, &config, &mut |request| writer.write(&request).unwrap());
    writer.finish().unwrap();

    let reader = TraceReader::open(&path, None).unwrap();
    assert_eq!(reader.format(), TraceFormat::Systor);
    let capture: Vec<TraceRequest> = reader.map(Result::unwrap).collect();
    let mut latencies = Latencies::default();
    let report = replay_capture(&cheetah, &capture, Mode::Faithful, &mut latencies);

    assert_eq!(report.requests, 5_000);
    let recorded = report.recorded.expect("the capture records response times");
    assert_eq!(recorded.execution_time_error_percent, 0.0);
    assert_eq!(recorded.mean_latency_error_percent, 0.0);
    assert_eq!(report.reordered, 0);
    assert!(latencies.0.iter().all(|&(_, latency, recorded)| Some(latency) == recorded), "every request, exactly");
}

fn error_percent(replayed: f64, expected: f64) -> f64 {
    (replayed - expected) / expected * 100.0
}

fn errors(report: &ReplayReport, direct: &ApplicationResult) -> (f64, f64) {
    (error_percent(report.iops, direct.iops), error_percent(report.mean_latency_ms, direct.mean_latency_ms))
}

#[test]
fn dependency_replay_on_a_faster_drive_matches_the_application_there() {
    let (slow, fast) = (model("atlas10k"), model("cheetah15k5"));
    let (workload, config) = application(2, 10_000, &[&slow, &fast]);
    let mut capture = Vec::new();
    let on_slow = run_application(Arc::clone(&slow), &workload, &config, &mut |request| capture.push(request));
    let on_fast = run_application(Arc::clone(&fast), &workload, &config, &mut |_| {});
    assert!(on_fast.iops > 2.0 * on_slow.iops, "a scaled environment: {on_slow:?} against {on_fast:?}");

    let report = |mode| errors(&replay_capture(&fast, &capture, mode, &mut Latencies::default()), &on_fast);
    let dependency = report(Mode::Dependency);
    let afap = report(Mode::Afap);
    let load = report(Mode::Load);
    let faithful = report(Mode::Faithful);
    eprintln!("IOPS and mean latency errors against the application on the faster drive (%):");
    eprintln!("dependency {dependency:?}, afap {afap:?}, load {load:?}, faithful {faithful:?}");

    assert!(dependency.0.abs() < 10.0 && dependency.1.abs() < 10.0, "dependency replay within 10 %: {dependency:?}");
    for (name, other) in [("afap", afap), ("load", load), ("faithful", faithful)] {
        let worst = other.0.abs().max(other.1.abs());
        assert!(worst > 10.0 && worst > dependency.1.abs().max(dependency.0.abs()), "{name} is worse: {other:?}");
    }
}
