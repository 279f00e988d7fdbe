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

#[path = "../../nbd/benches/fio_harness/mod.rs"]
mod fio_harness;

use std::path::Path;
use std::sync::{Arc, RwLock};

use fio_harness::{
    create_raw_file, start_nbdkit, start_proxima, Benchmark, Job, Options, Ratio, Target, EXPORT_NAME,
    RANDOM_READ_4K_QD16, RANDOM_WRITE_4K_QD16, SEQUENTIAL_READ_1M_QD4, SEQUENTIAL_WRITE_1M_QD4,
};
use proxima_service::{create_volume, open_volume, CreateSpec, VolumeBackend, VolumeLock};

const BENCHMARK: Benchmark = Benchmark {
    name: "volume_vs_nbdkit",
    // In the order each repetition runs them (the order matters: see the header).
    jobs: &[
        SEQUENTIAL_WRITE_1M_QD4,
        SEQUENTIAL_READ_1M_QD4,
        RANDOM_READ_4K_QD16,
        RANDOM_WRITE_4K_QD16,
        Job { name: "seqread_1m_qd4_aged", ..SEQUENTIAL_READ_1M_QD4 },
    ],
    ratios: &[
        Ratio { label: "proxima_volume_vs_nbdkit_file", ours: "proxima-volume", theirs: "nbdkit-file" },
        Ratio { label: "proxima_volume_vs_nbdkit_memory", ours: "proxima-volume", theirs: "nbdkit-memory" },
    ],
};

/// Creates the volume and its extent and serves it; the returned lock on the volume
/// directory must be held until the target has stopped.
fn start_proxima_volume(scratch: &Path, size_bytes: u64) -> (Target, VolumeLock) {
    let directory = scratch.join("vol");
    let spec =
        CreateSpec { data_disk_bytes: 4 * size_bytes, flash_bytes: Some(size_bytes / 4), ..CreateSpec::default() };
    create_volume(&directory, &spec).expect("create the volume");
    let mut open = open_volume(&directory).expect("open the volume");
    open.volume.create_extent(EXPORT_NAME, size_bytes).expect("create the extent");
    let backend = VolumeBackend::new(Arc::new(RwLock::new(open.volume)));
    (start_proxima("proxima-volume", backend, &scratch.join("pv.sock")), open.lock)
}

fn main() {
    let options = Options::parse();
    assert!(!options.direct, "--direct: this benchmark measures buffered targets only (see volume_vs_peers)");
    let scratch = options.scratch_directory(&std::env::current_dir().expect("working directory"));
    let size_bytes = options.size_bytes();
    eprintln!("volume benchmark: {options:?}, scratch {}", scratch.path().display());

    let nbdkit_file_path = scratch.path().join("nbdkit.raw");
    create_raw_file(&nbdkit_file_path, size_bytes);
    let (proxima_volume, _volume_lock) = start_proxima_volume(scratch.path(), size_bytes);
    let targets = vec![
        proxima_volume,
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
    fio_harness::run(&BENCHMARK, targets, &options);
}
