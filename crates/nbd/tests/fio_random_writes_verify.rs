//! fio's nbd engine (libnbd, structured replies, queue depth 16) writes 4 KiB
//! blocks at random with crc32c verification headers, then reads everything back
//! sequentially and at random, verifying every block; and the same with four jobs,
//! each over its own connection. A corrupted block must make verification fail,
//! which shows the verification is real.

use crate::common;

use std::process::Command;
use std::sync::Arc;

use common::{fio_totals, fio_verify_command, run, TestServer};
use proxima_nbd::MemoryBackend;

/// The export is sparse and larger than the region fio works on.
const EXPORT_BYTES: u64 = 1 << 30;

fn fio(server: &TestServer, name: &str, arguments: &[&str]) -> Command {
    let mut command = fio_verify_command(&server.uri("disk"), name);
    command
        // No verify state files in the working directory: verification here is
        // within one run or from the written headers.
        .arg("--verify_state_save=0")
        .args(arguments);
    command
}

#[test]
fn single_job_random_writes_then_sequential_and_random_verifying_reads() {
    let server = TestServer::start(Arc::new(MemoryBackend::new().with_export("disk", EXPORT_BYTES, false)));
    let region = ["--offset=512M", "--size=96M"];

    let write = run(fio(&server, "write", &region).args(["--rw=randwrite", "--do_verify=1"]));
    let (read_bytes, written_bytes, errors) = fio_totals(&write);
    assert_eq!((written_bytes, errors), (96 << 20, 0));
    assert_eq!(read_bytes, 96 << 20, "the verify phase reads every written block");

    let sequential = run(fio(&server, "sequential-verify", &region).arg("--rw=read"));
    assert_eq!(fio_totals(&sequential), (96 << 20, 0, 0));
    let random = run(fio(&server, "random-verify", &region).arg("--rw=randread"));
    assert_eq!(fio_totals(&random), (96 << 20, 0, 0));

    // Corrupt one block: a verifying read must now fail.
    run(Command::new("qemu-io").args(["-f", "raw", "-c", "write -P 0x5a 600M 4k"]).arg(server.uri("disk")));
    let corrupted = fio(&server, "detect-corruption", &region).arg("--rw=read").output().expect("run fio");
    assert!(!corrupted.status.success(), "fio verification missed a corrupted block");
}

#[test]
fn four_jobs_over_separate_connections() {
    let server = TestServer::start(Arc::new(MemoryBackend::new().with_export("disk", EXPORT_BYTES, false)));
    // Each job owns a 32 MiB region and a connection of its own.
    let jobs = ["--numjobs=4", "--size=32M", "--offset_increment=32M"];

    let write = run(fio(&server, "write4", &jobs).args(["--rw=randwrite", "--do_verify=1"]));
    assert_eq!(fio_totals(&write), (128 << 20, 128 << 20, 0));
    let sequential = run(fio(&server, "sequential-verify4", &jobs).arg("--rw=read"));
    assert_eq!(fio_totals(&sequential), (128 << 20, 0, 0));
    let random = run(fio(&server, "random-verify4", &jobs).arg("--rw=randread"));
    assert_eq!(fio_totals(&random), (128 << 20, 0, 0));

    let summary = server.stop();
    assert!(summary.connection_count >= 12, "each of the 12 fio jobs uses its own connection: {summary:?}");
    assert_eq!(summary.failed_connection_count, 0);
}
