//! The harness shared by Proxima's fio benchmarks against its peers
//! (`crates/nbd/benches/nbd_vs_nbdkit.rs`, `crates/service/benches/volume_vs_nbdkit.rs`
//! and `crates/service/benches/volume_vs_peers.rs`): the command-line options, the
//! targets (a Proxima server on a thread, nbdkit or qemu-nbd as a child process), the
//! fio job runner (IOPS, bandwidth, latency percentiles, the slowest second), the
//! medians over repetitions and the JSON report. A benchmark chooses only its targets,
//! its jobs and the ratios it reports.
//!
//! The benchmarks include this file with `#[path]`, so it uses only what both crates
//! have: `proxima-nbd`, `serde_json` and `tempfile`.
#![allow(dead_code, reason = "each benchmark that includes this file uses a different subset")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proxima_nbd::{Backend, Server, ServerConfig, ShutdownHandle};

/// The export name every target serves.
pub const EXPORT_NAME: &str = "bench";
/// The seed fio draws its random offsets from, the same for every target.
pub const FIO_SEED: u64 = 20261121;

/// The benchmark's command-line options.
#[derive(Debug, Clone)]
pub struct Options {
    pub repetitions: usize,
    pub runtime_seconds: u64,
    pub size_mib: u64,
    pub directory: Option<PathBuf>,
    pub output: Option<PathBuf>,
    /// Bypass the page cache on every target (`--direct`), where a benchmark offers it.
    pub direct: bool,
}

impl Options {
    /// Parses `--repetitions`, `--runtime-seconds`, `--size-mib`, `--directory`,
    /// `--output` and `--direct` from the process arguments.
    pub fn parse() -> Self {
        let mut options =
            Self { repetitions: 5, runtime_seconds: 5, size_mib: 256, directory: None, output: None, direct: false };
        let mut arguments = std::env::args().skip(1);
        while let Some(argument) = arguments.next() {
            let mut value = |name: &str| arguments.next().unwrap_or_else(|| panic!("{name} needs a value"));
            match argument.as_str() {
                "--repetitions" => {
                    options.repetitions = value("--repetitions").parse().expect("--repetitions: a count")
                }
                "--runtime-seconds" => {
                    options.runtime_seconds = value("--runtime-seconds").parse().expect("--runtime-seconds: seconds")
                }
                "--size-mib" => options.size_mib = value("--size-mib").parse().expect("--size-mib: MiB"),
                "--directory" => options.directory = Some(PathBuf::from(value("--directory"))),
                "--output" => options.output = Some(PathBuf::from(value("--output"))),
                "--direct" => options.direct = true,
                // `cargo bench` passes --bench; other harness flags are ignored too.
                _ => {}
            }
        }
        options
    }

    /// The size of every export in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.size_mib << 20
    }

    /// A scratch directory, removed on drop: inside `--directory` if given, else inside
    /// `default_parent`.
    pub fn scratch_directory(&self, default_parent: &Path) -> tempfile::TempDir {
        tempfile::tempdir_in(self.directory.as_deref().unwrap_or(default_parent)).expect("scratch directory")
    }
}

/// One fio job of a benchmark.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    pub name: &'static str,
    pub rw: &'static str,
    pub block_size: &'static str,
    pub queue_depth: u32,
    /// For `randrw`: the percentage of reads.
    pub read_percent: Option<u32>,
    /// Clients at once (fio's `numjobs`, each on a connection of its own),
    /// each in its own equal part of the export; reported as one.
    pub clients: u32,
}

/// 4 KiB random writes at queue depth 16.
pub const RANDOM_WRITE_4K_QD16: Job = Job {
    name: "randwrite_4k_qd16",
    rw: "randwrite",
    block_size: "4k",
    queue_depth: 16,
    read_percent: None,
    clients: 1,
};
/// 4 KiB random reads at queue depth 16.
pub const RANDOM_READ_4K_QD16: Job =
    Job { name: "randread_4k_qd16", rw: "randread", block_size: "4k", queue_depth: 16, read_percent: None, clients: 1 };
/// 1 MiB sequential reads at queue depth 4.
pub const SEQUENTIAL_READ_1M_QD4: Job =
    Job { name: "seqread_1m_qd4", rw: "read", block_size: "1m", queue_depth: 4, read_percent: None, clients: 1 };
/// 1 MiB sequential writes at queue depth 4.
pub const SEQUENTIAL_WRITE_1M_QD4: Job =
    Job { name: "seqwrite_1m_qd4", rw: "write", block_size: "1m", queue_depth: 4, read_percent: None, clients: 1 };

/// 4 KiB random I/O at queue depth 16, 70 % reads.
pub const RANDOM_MIX_70_30_4K_QD16: Job = Job {
    name: "randrw70_4k_qd16",
    rw: "randrw",
    block_size: "4k",
    queue_depth: 16,
    read_percent: Some(70),
    clients: 1,
};
/// 1 MiB sequential reads at queue depth 8.
pub const SEQUENTIAL_READ_1M_QD8: Job =
    Job { name: "seqread_1m_qd8", rw: "read", block_size: "1m", queue_depth: 8, read_percent: None, clients: 1 };
/// 1 MiB sequential writes at queue depth 8.
pub const SEQUENTIAL_WRITE_1M_QD8: Job =
    Job { name: "seqwrite_1m_qd8", rw: "write", block_size: "1m", queue_depth: 8, read_percent: None, clients: 1 };

/// One ratio of median IOPS the report gives for every job: `ours / theirs`.
#[derive(Debug, Clone, Copy)]
pub struct Ratio {
    pub label: &'static str,
    pub ours: &'static str,
    pub theirs: &'static str,
}

/// What distinguishes one benchmark from another: its name in the report, its jobs
/// (in the order each repetition runs them) and the ratios it reports.
#[derive(Debug, Clone, Copy)]
pub struct Benchmark {
    pub name: &'static str,
    pub jobs: &'static [Job],
    pub ratios: &'static [Ratio],
}

/// A running NBD server to measure.
pub enum Target {
    Proxima {
        name: &'static str,
        uri: String,
        shutdown: ShutdownHandle,
        thread: std::thread::JoinHandle<()>,
    },
    /// A server in a child process (nbdkit, qemu-nbd).
    Process {
        name: &'static str,
        uri: String,
        child: Child,
    },
}

impl Target {
    fn name(&self) -> &'static str {
        match self {
            Self::Proxima { name, .. } | Self::Process { name, .. } => name,
        }
    }

    fn uri(&self) -> &str {
        match self {
            Self::Proxima { uri, .. } | Self::Process { uri, .. } => uri,
        }
    }

    fn stop(self) {
        match self {
            Self::Proxima { shutdown, thread, .. } => {
                shutdown.request();
                thread.join().expect("server thread");
            }
            Self::Process { mut child, .. } => {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn export_uri(socket: &Path) -> String {
    format!("nbd+unix:///{EXPORT_NAME}?socket={}", socket.display())
}

/// Serves `backend` with Proxima's NBD server on a thread, listening on `socket`.
pub fn start_proxima<B: Backend + 'static>(name: &'static str, backend: B, socket: &Path) -> Target {
    let mut server = Server::new(Arc::new(backend), ServerConfig::default());
    server.bind_unix(socket).expect("bind the Proxima socket");
    let shutdown = server.shutdown_handle();
    let thread = std::thread::spawn(move || {
        server.run().expect("Proxima server");
    });
    Target::Proxima { name, uri: export_uri(socket), shutdown, thread }
}

/// Starts nbdkit with `plugin_arguments` on `socket` and waits until it listens.
pub fn start_nbdkit(name: &'static str, socket: &Path, plugin_arguments: &[String]) -> Target {
    let mut command = Command::new("nbdkit");
    command.args(["--foreground", "--exit-with-parent", "--unix"]).arg(socket).args(plugin_arguments);
    start_process(name, command, socket, "nbdkit")
}

/// Starts qemu-nbd serving the raw file `path` as [`EXPORT_NAME`] on `socket` (any number
/// of connections), with `--cache=none` (O_DIRECT) when `direct`, and waits until it
/// listens.
pub fn start_qemu_nbd(name: &'static str, socket: &Path, path: &Path, direct: bool) -> Target {
    let mut command = Command::new("qemu-nbd");
    command
        .args(["--format=raw", "--persistent", "--shared=0", "--export-name", EXPORT_NAME])
        .arg(format!("--socket={}", socket.display()))
        .arg(if direct { "--cache=none" } else { "--cache=writeback" })
        .args(if direct { &["--aio=native"][..] } else { &[][..] })
        .arg(path);
    start_process(name, command, socket, "qemu-utils")
}

fn start_process(name: &'static str, mut command: Command, socket: &Path, package: &str) -> Target {
    let program = command.get_program().to_string_lossy().into_owned();
    let child = command
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| panic!("start {program} (apt-get install {package}): {error}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !socket.exists() {
        assert!(Instant::now() < deadline, "{program} did not create {}", socket.display());
        std::thread::sleep(Duration::from_millis(20));
    }
    Target::Process { name, uri: export_uri(socket), child }
}

/// Creates a sparse file of `size_bytes` at `path`.
pub fn create_raw_file(path: &Path, size_bytes: u64) {
    std::fs::File::create(path).and_then(|file| file.set_len(size_bytes)).expect("create a raw file");
}

/// Preconditions every target, runs every repetition, stops the targets, then prints the
/// JSON report as the last line of standard output (and writes it to `--output` if given).
pub fn run(benchmark: &Benchmark, targets: Vec<Target>, options: &Options) {
    for target in &targets {
        precondition(target, options);
    }
    let samples = measure(benchmark.jobs, &targets, options);
    for target in targets {
        target.stop();
    }
    let report = report(benchmark, &samples, options);
    if let Some(path) = &options.output {
        std::fs::write(path, serde_json::to_string_pretty(&report).expect("JSON")).expect("write the report");
    }
    println!("{report}");
}

fn fio_command(uri: &str, options: &Options) -> Command {
    let mut command = Command::new("fio");
    command
        .args(["--ioengine=nbd", "--output-format=json", "--group_reporting"])
        .arg(format!("--uri={uri}"))
        .arg(format!("--size={}m", options.size_mib))
        .arg(format!("--randseed={FIO_SEED}"));
    command
}

/// Fills the whole export with a sequential 1 MiB write, so reads return data, not holes.
fn precondition(target: &Target, options: &Options) {
    let output = fio_command(target.uri(), options)
        .args(["--name=fill", "--rw=write", "--bs=1m", "--iodepth=4"])
        .output()
        .expect("run fio");
    assert!(output.status.success(), "fill of {} failed: {}", target.name(), String::from_utf8_lossy(&output.stderr));
}

/// What one run of one job measured.
#[derive(Debug, Clone, Copy)]
struct Sample {
    iops: f64,
    bytes_per_second: f64,
    /// Completion latency percentiles over every request, in ms (the worse
    /// direction's in a mixed job).
    p99_ms: f64,
    p9999_ms: f64,
    max_ms: f64,
    /// The lowest 1-second IOPS sample over the mean of them (the worse
    /// direction's in a mixed job).
    slowest_second_fraction: f64,
}

/// Runs one job.
fn run_job(target: &Target, job: &Job, options: &Options) -> Sample {
    let mut command = fio_command(target.uri(), options);
    if job.clients > 1 {
        let part_mib = options.size_mib / u64::from(job.clients);
        assert!(part_mib > 0, "{}: the export is smaller than {} MiB", job.name, job.clients);
        // Each client its own part: the later --size overrides the whole export's.
        command
            .arg(format!("--numjobs={}", job.clients))
            .arg(format!("--size={part_mib}m"))
            .arg(format!("--offset_increment={part_mib}m"));
    }
    command
        .arg(format!("--name={}", job.name))
        .arg(format!("--rw={}", job.rw))
        .arg(format!("--bs={}", job.block_size))
        .arg(format!("--iodepth={}", job.queue_depth))
        .args(["--time_based", "--ramp_time=1", "--norandommap", "--randrepeat=1"])
        .args(["--lat_percentiles=1", "--percentile_list=99:99.99", "--iopsavgtime=1000"])
        .arg(format!("--runtime={}", options.runtime_seconds));
    if let Some(read_percent) = job.read_percent {
        command.arg(format!("--rwmixread={read_percent}"));
    }
    let output = command.output().expect("run fio");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{} on {}: {}", job.name, target.name(), String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&stdout[stdout.find('{').expect("fio JSON")..]).expect("fio JSON");
    let directions: Vec<&serde_json::Value> = ["read", "write"]
        .iter()
        .map(|direction| &report["jobs"][0][*direction])
        .filter(|result| result["total_ios"].as_u64().unwrap_or(0) > 0)
        .collect();
    let number = |value: &serde_json::Value| value.as_f64().unwrap_or(0.0);
    let worst =
        |read: &dyn Fn(&serde_json::Value) -> f64| directions.iter().map(|result| read(result)).fold(0.0, f64::max);
    let milliseconds = |nanoseconds: f64| nanoseconds / 1e6;
    Sample {
        iops: directions.iter().map(|result| number(&result["iops"])).sum(),
        bytes_per_second: directions.iter().map(|result| number(&result["bw_bytes"])).sum(),
        p99_ms: milliseconds(worst(&|result| number(&result["lat_ns"]["percentile"]["99.000000"]))),
        p9999_ms: milliseconds(worst(&|result| number(&result["lat_ns"]["percentile"]["99.990000"]))),
        max_ms: milliseconds(worst(&|result| number(&result["lat_ns"]["max"]))),
        slowest_second_fraction: directions
            .iter()
            .map(|result| match number(&result["iops_mean"]) {
                mean if mean > 0.0 => number(&result["iops_min"]) / mean,
                _ => 0.0,
            })
            .fold(1.0, f64::min),
    }
}

/// samples[target][job] = one sample per repetition.
type Samples = BTreeMap<&'static str, BTreeMap<&'static str, Vec<Sample>>>;

/// Runs every job on every target, once per repetition; targets are interleaved within a
/// job so that machine noise spreads evenly over them.
fn measure(jobs: &[Job], targets: &[Target], options: &Options) -> Samples {
    // One column wider than the longest job name, so the progress lines align.
    let job_name_width = jobs.iter().map(|job| job.name.len()).max().unwrap_or(0) + 1;
    let mut samples: Samples = BTreeMap::new();
    for repetition in 0..options.repetitions {
        for job in jobs {
            for target in targets {
                let sample = run_job(target, job, options);
                eprintln!(
                    "repetition {repetition} {:<15} {:<job_name_width$} {:>10.0} IOPS {:>8.1} MiB/s  p99 {:.2} ms  p99.99 {:.2} ms  max {:.1} ms  slowest second {:.0} %",
                    target.name(),
                    job.name,
                    sample.iops,
                    sample.bytes_per_second / f64::from(1 << 20),
                    sample.p99_ms,
                    sample.p9999_ms,
                    sample.max_ms,
                    sample.slowest_second_fraction * 100.0
                );
                samples.entry(target.name()).or_default().entry(job.name).or_default().push(sample);
            }
        }
    }
    samples
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

fn report(benchmark: &Benchmark, samples: &Samples, options: &Options) -> serde_json::Value {
    let mut medians: BTreeMap<&str, BTreeMap<&str, serde_json::Value>> = BTreeMap::new();
    let mut median_iops: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    let rounded = |value: f64, places: i32| {
        let scale = 10f64.powi(places);
        (value * scale).round() / scale
    };
    for (target, jobs) in samples {
        for (job, values) in jobs {
            let median_of = |read: fn(&Sample) -> f64| median(&mut values.iter().map(read).collect::<Vec<_>>());
            let iops = median_of(|sample| sample.iops);
            median_iops.insert((target, job), iops);
            medians.entry(target).or_default().insert(
                job,
                serde_json::json!({
                    "iops_median": iops.round(),
                    "mib_per_second_median": rounded(median_of(|sample| sample.bytes_per_second) / f64::from(1 << 20), 1),
                    "p99_ms_median": rounded(median_of(|sample| sample.p99_ms), 3),
                    "p99_99_ms_median": rounded(median_of(|sample| sample.p9999_ms), 3),
                    "max_ms_median": rounded(median_of(|sample| sample.max_ms), 1),
                    "slowest_second_fraction_median": rounded(median_of(|sample| sample.slowest_second_fraction), 3),
                    "iops_samples": values.iter().map(|value| value.iops.round()).collect::<Vec<_>>(),
                }),
            );
        }
    }
    let mut ratios = serde_json::Map::new();
    for ratio in benchmark.ratios {
        let mut per_job = serde_json::Map::new();
        for job in benchmark.jobs {
            let value = median_iops[&(ratio.ours, job.name)] / median_iops[&(ratio.theirs, job.name)];
            per_job.insert(job.name.to_owned(), serde_json::json!(rounded(value, 3)));
        }
        ratios.insert(ratio.label.to_owned(), serde_json::Value::Object(per_job));
    }
    serde_json::json!({
        "benchmark": benchmark.name,
        "repetitions": options.repetitions,
        "runtime_seconds": options.runtime_seconds,
        "size_mib": options.size_mib,
        "direct": options.direct,
        "fio_seed": FIO_SEED,
        "medians": medians,
        "ratios_of_median_iops": ratios,
    })
}
