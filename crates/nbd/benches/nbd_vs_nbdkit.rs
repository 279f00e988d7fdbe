//! Benchmark: the same fio jobs against Proxima's NBD server and against nbdkit,
//! in one run, on the same machine and file system.
//!
//! Targets: Proxima on a `MemoryBackend` and on a `FileBackend` (a raw file), and
//! nbdkit's memory plugin (the protocol ceiling) and file plugin (on a raw file in
//! the same directory). Jobs, each with fio's nbd engine over one connection:
//! 4 KiB random write at queue depth 16, 4 KiB random read at queue depth 16,
//! 1 MiB sequential read and 1 MiB sequential write at queue depth 4. Every export
//! is filled by a sequential write first, so reads return data, not holes.
//!
//! Each repetition runs every job on every target, targets interleaved so that
//! machine noise spreads evenly; the report gives the median of the repetitions
//! and the ratios Proxima/nbdkit (file vs file, memory vs memory) of those medians.
//!
//! Run: `cargo bench -p proxima-nbd --bench nbd_vs_nbdkit -- [--repetitions 5]
//! [--runtime-seconds 5] [--size-mib 256] [--directory DIR] [--output FILE.json]`.
//! The last line of standard output is the JSON report.

#[path = "fio_harness/mod.rs"]
mod fio_harness;

use fio_harness::{
    create_raw_file, start_nbdkit, start_proxima, Benchmark, Options, Ratio, EXPORT_NAME, RANDOM_READ_4K_QD16,
    RANDOM_WRITE_4K_QD16, SEQUENTIAL_READ_1M_QD4, SEQUENTIAL_WRITE_1M_QD4,
};
use proxima_nbd::{FileBackend, MemoryBackend};

const BENCHMARK: Benchmark = Benchmark {
    name: "nbd_vs_nbdkit",
    jobs: &[RANDOM_WRITE_4K_QD16, RANDOM_READ_4K_QD16, SEQUENTIAL_READ_1M_QD4, SEQUENTIAL_WRITE_1M_QD4],
    ratios: &[
        Ratio { label: "proxima_file_vs_nbdkit_file", ours: "proxima-file", theirs: "nbdkit-file" },
        Ratio { label: "proxima_memory_vs_nbdkit_memory", ours: "proxima-memory", theirs: "nbdkit-memory" },
    ],
};

fn main() {
    let options = Options::parse();
    assert!(!options.direct, "--direct: this benchmark measures buffered targets only (see volume_vs_peers)");
    let scratch = options.scratch_directory(&std::env::temp_dir());
    let size_bytes = options.size_bytes();
    eprintln!("nbd benchmark: {options:?}, scratch {}", scratch.path().display());

    let proxima_file_path = scratch.path().join("proxima.raw");
    let nbdkit_file_path = scratch.path().join("nbdkit.raw");
    create_raw_file(&proxima_file_path, size_bytes);
    create_raw_file(&nbdkit_file_path, size_bytes);
    let mut file_backend = FileBackend::new();
    file_backend.add_file(EXPORT_NAME, &proxima_file_path, false).expect("file export");

    let targets = vec![
        start_proxima(
            "proxima-memory",
            MemoryBackend::new().with_export(EXPORT_NAME, size_bytes, false),
            &scratch.path().join("pm.sock"),
        ),
        start_nbdkit(
            "nbdkit-memory",
            &scratch.path().join("km.sock"),
            &["memory".into(), format!("size={size_bytes}")],
        ),
        start_proxima("proxima-file", file_backend, &scratch.path().join("pf.sock")),
        start_nbdkit(
            "nbdkit-file",
            &scratch.path().join("kf.sock"),
            &["file".into(), format!("file={}", nbdkit_file_path.display())],
        ),
    ];
    fio_harness::run(&BENCHMARK, targets, &options);
}
