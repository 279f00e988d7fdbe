//! Benchmark: the same fio jobs against an engine volume served by Proxima and
//! against nbdkit, in one run, on the same machine and file system.
//!
//! Targets:
//! - `proxima-volume`: an engine volume (proximal layout, buffered I/O) on two
//!   files in the scratch directory — a data file 4× the export and a flash
//!   file a quarter of it — with one extent served through `VolumeBackend`;
//! - `nbdkit-file`: nbdkit's file plugin on a raw file in the same directory;
//! - `nbdkit-memory`: nbdkit's memory plugin (the protocol ceiling).
//!
//! Each repetition runs, on every target in turn (interleaved so that machine
//! noise spreads evenly), these fio jobs over one connection each:
//! `seqwrite_1m_qd4` (which also lays the export out sequentially),
//! `seqread_1m_qd4`, `randread_4k_qd16`, `randwrite_4k_qd16` (which ages the
//! volume: random overwrites go through staging and destage), then
//! `seqread_1m_qd4_aged` (sequential read after that aging phase). Every export
//! is filled by a sequential write first. The report gives the median of the
//! repetitions and the ratios proxima-volume / nbdkit-file and
//! proxima-volume / nbdkit-memory of the medians, as JSON on the last line.
//!
//! Run: `cargo bench -p proxima-service --bench volume_vs_nbdkit -- [--repetitions 5]
//! [--runtime-seconds 5] [--size-mib 256] [--directory DIR] [--output FILE.json]`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use proxima_nbd::{Server, ServerConfig, ShutdownHandle};
use proxima_service::{create_volume, open_volume, CreateSpec, VolumeBackend};

const EXPORT_NAME: &str = "bench";
const FIO_SEED: u64 = 20261121;

#[derive(Debug, Clone)]
struct Options {
    repetitions: usize,
    runtime_seconds: u64,
    size_mib: u64,
    directory: Option<PathBuf>,
    output: Option<PathBuf>,
}

fn parse_options() -> Options {
    let mut options = Options { repetitions: 5, runtime_seconds: 5, size_mib: 256, directory: None, output: None };
    let mut arguments = std::env::args().skip(1);
    while let Some(argument) = arguments.next() {
        let mut value = |name: &str| arguments.next().unwrap_or_else(|| panic!("{name} needs a value"));
        match argument.as_str() {
            "--repetitions" => options.repetitions = value("--repetitions").parse().expect("--repetitions: a count"),
            "--runtime-seconds" => {
                options.runtime_seconds = value("--runtime-seconds").parse().expect("--runtime-seconds: seconds")
            }
            "--size-mib" => options.size_mib = value("--size-mib").parse().expect("--size-mib: MiB"),
            "--directory" => options.directory = Some(PathBuf::from(value("--directory"))),
            "--output" => options.output = Some(PathBuf::from(value("--output"))),
            // `cargo bench` passes --bench; other harness flags are ignored too.
            _ => {}
        }
    }
    options
}

/// One fio job of the benchmark.
#[derive(Debug, Clone, Copy)]
struct Job {
    name: &'static str,
    rw: &'static str,
    block_size: &'static str,
    queue_depth: u32,
}

/// In the order each repetition runs them (the order matters: see the header).
const JOBS: [Job; 5] = [
    Job { name: "seqwrite_1m_qd4", rw: "write", block_size: "1m", queue_depth: 4 },
    Job { name: "seqread_1m_qd4", rw: "read", block_size: "1m", queue_depth: 4 },
    Job { name: "randread_4k_qd16", rw: "randread", block_size: "4k", queue_depth: 16 },
    Job { name: "randwrite_4k_qd16", rw: "randwrite", block_size: "4k", queue_depth: 16 },
    Job { name: "seqread_1m_qd4_aged", rw: "read", block_size: "1m", queue_depth: 4 },
];

/// A running NBD server to measure.
enum Target {
    Proxima { uri: String, shutdown: ShutdownHandle, thread: std::thread::JoinHandle<()> },
    Nbdkit { name: &'static str, uri: String, child: Child },
}

impl Target {
    fn name(&self) -> &'static str {
        match self {
            Self::Proxima { .. } => "proxima-volume",
            Self::Nbdkit { name, .. } => name,
        }
    }

    fn uri(&self) -> &str {
        match self {
            Self::Proxima { uri, .. } | Self::Nbdkit { uri, .. } => uri,
        }
    }

    fn stop(self) {
        match self {
            Self::Proxima { shutdown, thread, .. } => {
                shutdown.request();
                thread.join().expect("server thread");
            }
            Self::Nbdkit { mut child, .. } => {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn start_proxima(scratch: &Path, size_bytes: u64) -> Target {
    let directory = scratch.join("vol");
    let spec = CreateSpec { data_disk_bytes: 4 * size_bytes, flash_bytes: size_bytes / 4, ..CreateSpec::default() };
    create_volume(&directory, &spec).expect("create the volume");
    let mut open = open_volume(&directory).expect("open the volume");
    open.volume.create_extent(EXPORT_NAME, size_bytes).expect("create the extent");
    let lock = open.lock;
    let volume = Arc::new(RwLock::new(open.volume));
    let socket = scratch.join("pv.sock");
    let mut server = Server::new(Arc::new(VolumeBackend::new(volume)), ServerConfig::default());
    server.bind_unix(&socket).expect("bind the Proxima socket");
    let shutdown = server.shutdown_handle();
    let thread = std::thread::spawn(move || {
        server.run().expect("Proxima server");
        drop(lock);
    });
    let uri = format!("nbd+unix:///{EXPORT_NAME}?socket={}", socket.display());
    Target::Proxima { uri, shutdown, thread }
}

fn start_nbdkit(name: &'static str, socket: &Path, plugin_arguments: &[String]) -> Target {
    let child = Command::new("nbdkit")
        .args(["--foreground", "--exit-with-parent", "--unix"])
        .arg(socket)
        .args(plugin_arguments)
        .stdout(Stdio::null())
        .spawn()
        .expect("start nbdkit (apt-get install nbdkit)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !socket.exists() {
        assert!(Instant::now() < deadline, "nbdkit did not create {}", socket.display());
        std::thread::sleep(Duration::from_millis(20));
    }
    let uri = format!("nbd+unix:///{EXPORT_NAME}?socket={}", socket.display());
    Target::Nbdkit { name, uri, child }
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

/// Fills the whole export with a sequential 1 MiB write.
fn precondition(target: &Target, options: &Options) {
    let output = fio_command(target.uri(), options)
        .args(["--name=fill", "--rw=write", "--bs=1m", "--iodepth=4"])
        .output()
        .expect("run fio");
    assert!(output.status.success(), "fill of {} failed: {}", target.name(), String::from_utf8_lossy(&output.stderr));
}

/// Runs one job; returns (IOPS, bytes per second).
fn run_job(target: &Target, job: &Job, options: &Options) -> (f64, f64) {
    let output = fio_command(target.uri(), options)
        .arg(format!("--name={}", job.name))
        .arg(format!("--rw={}", job.rw))
        .arg(format!("--bs={}", job.block_size))
        .arg(format!("--iodepth={}", job.queue_depth))
        .args(["--time_based", "--ramp_time=1", "--norandommap", "--randrepeat=1"])
        .arg(format!("--runtime={}", options.runtime_seconds))
        .output()
        .expect("run fio");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{} on {}: {}", job.name, target.name(), String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&stdout[stdout.find('{').expect("fio JSON")..]).expect("fio JSON");
    let direction = if job.rw.contains("write") { "write" } else { "read" };
    let result = &report["jobs"][0][direction];
    (result["iops"].as_f64().unwrap_or(0.0), result["bw_bytes"].as_f64().unwrap_or(0.0))
}

/// samples[target][job] = one (IOPS, bytes per second) per repetition.
type Samples = BTreeMap<&'static str, BTreeMap<&'static str, Vec<(f64, f64)>>>;

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

fn measure(targets: &[Target], options: &Options) -> Samples {
    let mut samples: Samples = BTreeMap::new();
    for repetition in 0..options.repetitions {
        for job in &JOBS {
            for target in targets {
                let (iops, bytes_per_second) = run_job(target, job, options);
                eprintln!(
                    "repetition {repetition} {:<15} {:<20} {iops:>10.0} IOPS {:>8.1} MiB/s",
                    target.name(),
                    job.name,
                    bytes_per_second / f64::from(1 << 20)
                );
                samples.entry(target.name()).or_default().entry(job.name).or_default().push((iops, bytes_per_second));
            }
        }
    }
    samples
}

fn report(samples: &Samples, options: &Options) -> serde_json::Value {
    let mut medians: BTreeMap<&str, BTreeMap<&str, serde_json::Value>> = BTreeMap::new();
    let mut median_iops: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    for (target, jobs) in samples {
        for (job, values) in jobs {
            let iops = median(&mut values.iter().map(|value| value.0).collect::<Vec<_>>());
            let bytes_per_second = median(&mut values.iter().map(|value| value.1).collect::<Vec<_>>());
            median_iops.insert((target, job), iops);
            medians.entry(target).or_default().insert(
                job,
                serde_json::json!({
                    "iops_median": iops.round(),
                    "mib_per_second_median": (bytes_per_second / f64::from(1 << 20) * 10.0).round() / 10.0,
                    "iops_samples": values.iter().map(|value| value.0.round()).collect::<Vec<_>>(),
                }),
            );
        }
    }
    let mut ratios = serde_json::Map::new();
    for (theirs, label) in
        [("nbdkit-file", "proxima_volume_vs_nbdkit_file"), ("nbdkit-memory", "proxima_volume_vs_nbdkit_memory")]
    {
        let mut per_job = serde_json::Map::new();
        for job in &JOBS {
            let ratio = median_iops[&("proxima-volume", job.name)] / median_iops[&(theirs, job.name)];
            per_job.insert(job.name.to_owned(), serde_json::json!((ratio * 1000.0).round() / 1000.0));
        }
        ratios.insert(label.to_owned(), serde_json::Value::Object(per_job));
    }
    serde_json::json!({
        "benchmark": "volume_vs_nbdkit",
        "repetitions": options.repetitions,
        "runtime_seconds": options.runtime_seconds,
        "size_mib": options.size_mib,
        "fio_seed": FIO_SEED,
        "medians": medians,
        "ratios_of_median_iops": ratios,
    })
}

fn main() {
    let options = parse_options();
    let scratch = match &options.directory {
        Some(directory) => tempfile::tempdir_in(directory),
        None => tempfile::tempdir_in(std::env::current_dir().expect("working directory")),
    }
    .expect("scratch directory");
    let size_bytes = options.size_mib << 20;
    eprintln!("volume benchmark: {options:?}, scratch {}", scratch.path().display());

    let nbdkit_file_path = scratch.path().join("nbdkit.raw");
    std::fs::File::create(&nbdkit_file_path).and_then(|file| file.set_len(size_bytes)).expect("create a raw file");
    let targets = vec![
        start_proxima(scratch.path(), size_bytes),
        start_nbdkit(
            "nbdkit-file",
            &scratch.path().join("kf.sock"),
            &["file".into(), format!("file={}", nbdkit_file_path.display())],
        ),
        start_nbdkit(
            "nbdkit-memory",
            &scratch.path().join("km.sock"),
            &["memory".into(), format!("size={size_bytes}")],
        ),
    ];
    for target in &targets {
        precondition(target, &options);
    }
    let samples = measure(&targets, &options);
    for target in targets {
        target.stop();
    }
    let report = report(&samples, &options);
    if let Some(path) = &options.output {
        std::fs::write(path, serde_json::to_string_pretty(&report).expect("JSON")).expect("write the report");
    }
    println!("{report}");
}
