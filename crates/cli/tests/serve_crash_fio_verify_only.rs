//! Crash consistency through the real server: fio writes 4 KiB blocks at random
//! with crc32c headers and saves its verify state (in a temporary directory),
//! ends with a FLUSH (`end_fsync`), then the server is killed with SIGKILL (no
//! flush, no CP); a new server replays the log, and `fio --verify_only` against
//! the saved state must find every block. The second scenario takes and
//! deletes a snapshot through the running server while fio writes.

use crate::service_support;

use std::process::{Command, Stdio};
use std::time::Duration;

use service_support::{fio, fio_totals, run, Volume};

const WRITTEN_BYTES: u64 = 64 << 20;

fn write_job(volume: &Volume, extra: &[&str]) -> Command {
    let mut command = fio(volume, "lun0", "crash", volume.temporary.path());
    command
        .args(["--offset=1G", "--size=64M", "--rw=randwrite", "--do_verify=0", "--end_fsync=1"])
        .args(["--verify_state_save=1"])
        .args(extra);
    command
}

fn verify_only(volume: &Volume) -> std::process::Output {
    let mut command = fio(volume, "lun0", "crash", volume.temporary.path());
    command.args(["--offset=1G", "--size=64M", "--rw=randwrite", "--verify_only", "--verify_state_load=1"]);
    run(&mut command)
}

fn fresh_volume() -> Volume {
    let mut volume = Volume::create(&["--data-size", "4G", "--flash-size", "256M"]);
    volume.create_extent("lun0", "2G");
    volume.start_server();
    volume
}

fn assert_state_saved(volume: &Volume) {
    let saved = std::fs::read_dir(volume.temporary.path())
        .expect("list the temporary directory")
        .filter_map(Result::ok)
        .any(|entry| entry.file_name().to_string_lossy().ends_with("verify.state"));
    assert!(saved, "fio saved no verify state");
}

#[test]
fn flushed_writes_survive_a_sigkill_of_the_server() {
    let mut volume = fresh_volume();
    let write = run(&mut write_job(&volume, &[]));
    assert_eq!(fio_totals(&write), (0, WRITTEN_BYTES, 0));
    assert_state_saved(&volume);

    volume.kill_server();
    volume.start_server();
    let verify = verify_only(&volume);
    let (read_bytes, _, errors) = fio_totals(&verify);
    assert_eq!((read_bytes, errors), (WRITTEN_BYTES, 0), "every written block verified");

    assert!(volume.stop_server().success(), "{}", volume.server_log());
    run(&mut volume.command(&["fsck"], 1));
}

#[test]
fn flushed_writes_survive_a_sigkill_across_a_snapshot_create_and_delete() {
    let mut volume = fresh_volume();
    // Rate-limited so the snapshot operations land while fio writes.
    let mut writer = write_job(&volume, &["--rate_iops=6000"]).stdout(Stdio::null()).spawn().expect("start fio");
    std::thread::sleep(Duration::from_millis(600));
    let created = run(&mut volume.command(&["snapshot", "create", "mid"], 2));
    assert!(String::from_utf8_lossy(&created.stdout).contains("through the running server"));
    std::thread::sleep(Duration::from_millis(600));
    run(&mut volume.command(&["snapshot", "delete", "mid"], 2));
    let status = writer.wait().expect("fio ends");
    assert!(status.success(), "fio failed: {status}");
    assert_state_saved(&volume);

    volume.kill_server();
    volume.start_server();
    let verify = verify_only(&volume);
    let (read_bytes, _, errors) = fio_totals(&verify);
    assert_eq!((read_bytes, errors), (WRITTEN_BYTES, 0), "every written block verified");
    let snapshots = run(&mut volume.command(&["snapshot", "list", "--json"], 3));
    assert!(String::from_utf8_lossy(&snapshots.stdout).contains("\"snapshots\":[]"), "the deleted snapshot is gone");

    assert!(volume.stop_server().success(), "{}", volume.server_log());
    run(&mut volume.command(&["fsck"], 1));
}
