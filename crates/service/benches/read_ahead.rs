//! Benchmark: read-ahead on against off, in one run, on two volumes made alike.
//!
//! Targets: `read-ahead-on` and `read-ahead-off`, each a default volume bypassing the
//! page cache (`volume create --direct --preallocate`: with the page cache the kernel's
//! own read-ahead would do the work) with one extent served through `VolumeBackend`, the
//! first with read-ahead as `proxima serve` sets it up from the data device, the second
//! without. Each repetition runs, on both targets in turn:
//! - `seqread_128k_qd1_64clients`: 64 fio clients, each on its own connection, each
//!   reading its own 64th of the export sequentially in 128 KiB reads at queue depth 1;
//! - `randread_4k_qd16`: random 4 KiB reads at queue depth 16, which read-ahead must
//!   leave alone.
//!
//! Every export is filled by a sequential write first. The report gives the medians per
//! target and job (IOPS, bandwidth, p99, p99.99, max, slowest second) and the ratio of
//! median IOPS on / off, as JSON on the last line.
//!
//! Run: `cargo bench -p proxima-service --bench read_ahead -- [--repetitions 3]
//! [--runtime-seconds 60] [--size-mib 4096] [--directory DIR] [--output FILE.json]`
//! (docs/service.md, "Read-ahead", has the figures and the command).

#[path = "../../nbd/benches/fio_harness/mod.rs"]
mod fio_harness;

use std::path::Path;
use std::sync::{Arc, RwLock};

use fio_harness::{start_proxima, Benchmark, Job, Options, Ratio, Target, EXPORT_NAME, RANDOM_READ_4K_QD16};
use proxima_service::read_ahead::is_rotational;
use proxima_service::{create_volume, open_volume, CreateSpec, IoMode, ReadAheadOverrides, VolumeBackend, VolumeLock};

/// 64 sequential readers, each in its own part, 128 KiB at queue depth 1.
const SEQUENTIAL_READ_128K_QD1_64_CLIENTS: Job = Job {
    name: "seqread_128k_qd1_64clients",
    rw: "read",
    block_size: "128k",
    queue_depth: 1,
    read_percent: None,
    clients: 64,
};

const BENCHMARK: Benchmark = Benchmark {
    name: "read_ahead",
    jobs: &[SEQUENTIAL_READ_128K_QD1_64_CLIENTS, RANDOM_READ_4K_QD16],
    ratios: &[Ratio { label: "read_ahead_on_vs_off", ours: "read-ahead-on", theirs: "read-ahead-off" }],
};

/// A default volume bypassing the page cache in `directory`, with one extent of
/// `size_bytes`, served with read-ahead or without; the returned lock on the volume
/// directory must be held until the target has stopped.
fn serve_volume(name: &'static str, directory: &Path, size_bytes: u64, read_ahead: bool) -> (Target, VolumeLock) {
    let spec = CreateSpec { io_mode: IoMode::Direct, preallocate: true, ..CreateSpec::default() };
    let volume_directory = directory.join(name);
    create_volume(&volume_directory, &spec).expect("create the volume");
    let mut open = open_volume(&volume_directory).expect("open the volume");
    open.volume.create_extent(EXPORT_NAME, size_bytes).expect("create the extent");
    let settings = read_ahead.then(|| {
        let rotational = is_rotational(&volume_directory).unwrap_or(true);
        let settings = ReadAheadOverrides::default().settings(rotational).expect("default settings");
        eprintln!("{name}: data device rotational: {rotational}; {settings:?}");
        settings
    });
    let backend = VolumeBackend::with_read_ahead(Arc::new(RwLock::new(open.volume)), settings);
    (start_proxima(name, backend, &directory.join(format!("{name}.sock"))), open.lock)
}

fn main() {
    let mut options = Options::parse();
    if !std::env::args().any(|argument| argument == "--size-mib") {
        options.size_mib = 4096;
    }
    let scratch = options.scratch_directory(&std::env::current_dir().expect("working directory"));
    eprintln!("read-ahead benchmark: {options:?}, scratch {}", scratch.path().display());
    let size_bytes = options.size_bytes();
    let (on, _on_lock) = serve_volume("read-ahead-on", scratch.path(), size_bytes, true);
    let (off, _off_lock) = serve_volume("read-ahead-off", scratch.path(), size_bytes, false);
    fio_harness::run(&BENCHMARK, vec![on, off], &options);
}
