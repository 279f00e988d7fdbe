//! Benchmark: a default Proxima volume against nbdkit's file plugin and qemu-nbd, at a
//! size users have, in one run, on the same machine and file system, with the page
//! cache (default) or bypassing it on all three (`--direct`).
//!
//! Targets:
//! - `proxima-volume`: a volume as `proxima volume create` makes it (one data file, the
//!   default 1 GiB flash file and so its staging area), with `--direct --preallocate`
//!   under `--direct`; one extent served through `VolumeBackend`;
//! - `nbdkit-file`: nbdkit's file plugin on a raw file (`cache=none` under `--direct`);
//! - `qemu-nbd`: qemu-nbd on a raw file (`--cache=none --aio=native` under `--direct`,
//!   else `--cache=writeback`).
//!
//! The export is 4× the volume's staging capacity unless `--size-mib` says otherwise, so
//! random writes keep the destager busy for the whole run. Each repetition runs, on every
//! target in turn, these fio jobs over one connection: `seqwrite_1m_qd8`,
//! `seqread_1m_qd8`, `randread_4k_qd16`, `randrw70_4k_qd16` (70 % reads) and
//! `randwrite_4k_qd16`; every export is filled by a sequential write first. The report
//! gives per target and job the medians of IOPS, bandwidth, latency p99, p99.99 and max,
//! and the slowest 1-second IOPS sample over the mean, and the ratios of median IOPS
//! proxima-volume / nbdkit-file and proxima-volume / qemu-nbd, as JSON on the last line.
//!
//! Run: `cargo bench -p proxima-service --bench volume_vs_peers -- [--direct]
//! [--repetitions 3] [--runtime-seconds 300] [--size-mib N] [--directory DIR]
//! [--output FILE.json]` (docs/service.md has the figures and the commands).

#[path = "../../nbd/benches/fio_harness/mod.rs"]
mod fio_harness;

use std::path::Path;
use std::sync::{Arc, RwLock};

use fio_harness::{
    create_raw_file, start_nbdkit, start_proxima, start_qemu_nbd, Benchmark, Options, Ratio, Target, EXPORT_NAME,
    RANDOM_MIX_70_30_4K_QD16, RANDOM_READ_4K_QD16, RANDOM_WRITE_4K_QD16, SEQUENTIAL_READ_1M_QD8,
    SEQUENTIAL_WRITE_1M_QD8,
};
use proxima_service::{create_volume, open_volume, CreateSpec, IoMode, OpenVolume, VolumeBackend, VolumeLock};

const BENCHMARK: Benchmark = Benchmark {
    name: "volume_vs_peers",
    jobs: &[
        SEQUENTIAL_WRITE_1M_QD8,
        SEQUENTIAL_READ_1M_QD8,
        RANDOM_READ_4K_QD16,
        RANDOM_MIX_70_30_4K_QD16,
        RANDOM_WRITE_4K_QD16,
    ],
    ratios: &[
        Ratio { label: "proxima_volume_vs_nbdkit_file", ours: "proxima-volume", theirs: "nbdkit-file" },
        Ratio { label: "proxima_volume_vs_qemu_nbd", ours: "proxima-volume", theirs: "qemu-nbd" },
    ],
};

/// Bytes per block of the engine.
const BLOCK_BYTES: u64 = 4096;

/// Creates a default volume (bypassing the page cache under `direct`) in `scratch`.
fn open_default_volume(scratch: &Path, direct: bool) -> OpenVolume {
    let directory = scratch.join("vol");
    let spec = if direct {
        CreateSpec { io_mode: IoMode::Direct, preallocate: true, ..CreateSpec::default() }
    } else {
        CreateSpec::default()
    };
    create_volume(&directory, &spec).expect("create the volume");
    open_volume(&directory).expect("open the volume")
}

/// Serves one extent of `size_bytes` of `open`; the returned lock on the volume
/// directory must be held until the target has stopped.
fn serve_volume(mut open: OpenVolume, scratch: &Path, size_bytes: u64) -> (Target, VolumeLock) {
    open.volume.create_extent(EXPORT_NAME, size_bytes).expect("create the extent");
    let backend = VolumeBackend::new(Arc::new(RwLock::new(open.volume)));
    (start_proxima("proxima-volume", backend, &scratch.join("pv.sock")), open.lock)
}

fn main() {
    let mut options = Options::parse();
    let scratch = options.scratch_directory(&std::env::current_dir().expect("working directory"));
    let open = open_default_volume(scratch.path(), options.direct);
    let staging_bytes = open.volume.staging_fill().capacity_blocks * BLOCK_BYTES;
    if !std::env::args().any(|argument| argument == "--size-mib") {
        options.size_mib = (4 * staging_bytes).div_ceil(1 << 20);
    }
    let size_bytes = options.size_bytes();
    eprintln!(
        "peers benchmark: {options:?}, staging {} MiB, export {} MiB ({:.1}× the staging area), scratch {}",
        staging_bytes >> 20,
        size_bytes >> 20,
        size_bytes as f64 / staging_bytes as f64,
        scratch.path().display()
    );
    let (proxima_volume, _volume_lock) = serve_volume(open, scratch.path(), size_bytes);

    let nbdkit_path = scratch.path().join("nbdkit.raw");
    create_raw_file(&nbdkit_path, size_bytes);
    let mut nbdkit_arguments = vec!["file".to_owned(), format!("file={}", nbdkit_path.display())];
    if options.direct {
        nbdkit_arguments.push("cache=none".to_owned());
    }
    let qemu_path = scratch.path().join("qemu.raw");
    create_raw_file(&qemu_path, size_bytes);
    let targets = vec![
        proxima_volume,
        start_nbdkit("nbdkit-file", &scratch.path().join("kf.sock"), &nbdkit_arguments),
        start_qemu_nbd("qemu-nbd", &scratch.path().join("qn.sock"), &qemu_path, options.direct),
    ];
    fio_harness::run(&BENCHMARK, targets, &options);
}
