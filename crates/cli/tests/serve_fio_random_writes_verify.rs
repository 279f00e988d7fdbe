//! fio's nbd engine against `proxima serve` on an engine volume on files: 4 KiB
//! random writes at queue depth 16 with crc32c verification over part of a
//! 4 GiB export (sparse files; 96 MiB written), then sequential and random
//! verifying reads; and the same with four jobs, each over its own connection.
//! The server reads ahead (`--read-ahead on`), so the sequential verifying
//! reads are answered from its memory, and a block changed behind fio's back
//! must still be seen.

use crate::service_support;

use service_support::{fio, fio_totals, run, Volume};

fn volume_with_a_4g_extent() -> Volume {
    let mut volume = Volume::create(&["--data-size", "8G", "--flash-size", "512M"]);
    volume.create_extent("lun0", "4G");
    volume.start_server_with(&["--read-ahead", "on"], |_| {});
    volume
}

#[test]
fn random_writes_then_sequential_and_random_verifying_reads() {
    let volume = volume_with_a_4g_extent();
    let work = volume.temporary.path();
    let region = ["--offset=3G", "--size=96M", "--verify_state_save=0"];

    let write = run(fio(&volume, "lun0", "write", work).args(region).args(["--rw=randwrite", "--do_verify=1"]));
    assert_eq!(fio_totals(&write), (96 << 20, 96 << 20, 0));
    let sequential = run(fio(&volume, "lun0", "sequential-verify", work).args(region).arg("--rw=read"));
    assert_eq!(fio_totals(&sequential), (96 << 20, 0, 0));
    let random = run(fio(&volume, "lun0", "random-verify", work).args(region).arg("--rw=randread"));
    assert_eq!(fio_totals(&random), (96 << 20, 0, 0));

    // A block overwritten behind fio's back must fail verification: the
    // verification is real.
    run(std::process::Command::new("qemu-io")
        .args(["-f", "raw", "-c", "write -P 0x5a 3080M 4k"])
        .arg(volume.uri("lun0")));
    let corrupted = fio(&volume, "lun0", "detect", work).args(region).arg("--rw=read").output().expect("run fio");
    assert!(!corrupted.status.success(), "fio verification missed a corrupted block");
}

#[test]
fn four_jobs_over_separate_connections() {
    let volume = volume_with_a_4g_extent();
    let work = volume.temporary.path();
    let jobs = ["--numjobs=4", "--size=32M", "--offset=1G", "--offset_increment=512M", "--verify_state_save=0"];

    let write = run(fio(&volume, "lun0", "write4", work).args(jobs).args(["--rw=randwrite", "--do_verify=1"]));
    assert_eq!(fio_totals(&write), (128 << 20, 128 << 20, 0));
    let sequential = run(fio(&volume, "lun0", "sequential-verify4", work).args(jobs).arg("--rw=read"));
    assert_eq!(fio_totals(&sequential), (128 << 20, 0, 0));
    let random = run(fio(&volume, "lun0", "random-verify4", work).args(jobs).arg("--rw=randread"));
    assert_eq!(fio_totals(&random), (128 << 20, 0, 0));
}
