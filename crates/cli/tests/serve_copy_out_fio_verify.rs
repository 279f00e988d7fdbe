//! The proximal layout's copy-out (`volume create --copy-out on`) through the
//! real server: fio fills an export in 1 MiB writes, a snapshot is taken, and
//! 4 KiB random overwrites of every block pass through a staging area too
//! small to hold them, so destages put them back in their places after
//! copying out the versions the snapshot reads. The live export verifies the
//! overwrites and the snapshot's export the fill, before and after a SIGKILL
//! of the server; fsck finds the volume consistent.

use crate::service_support;

use std::process::Command;

use service_support::{fio, fio_totals, last_json_line, run, Volume};

const MIB: u64 = 1 << 20;
const REGION_MIB: u64 = 64;

/// The fill's blocks, read back from `export` in its 1 MiB writes (each
/// carries one verify header).
fn fill_reads(volume: &Volume, export: &str) -> Command {
    let mut command = fio(volume, export, "fill-verify", volume.temporary.path());
    command.args([format!("--size={REGION_MIB}M"), "--rw=read".into(), "--bs=1M".into()]).arg("--verify_state_save=0");
    command
}

/// The random overwrites: written (saving fio's verify state), or checked
/// against that state with `verify_only`.
fn overwrites(volume: &Volume, verify_only: bool) -> Command {
    let mut command = fio(volume, "lun0", "overwrite", volume.temporary.path());
    command.args([format!("--size={REGION_MIB}M"), "--rw=randwrite".into()]);
    if verify_only {
        command.args(["--verify_only", "--verify_state_load=1"]);
    } else {
        command.args(["--do_verify=0", "--end_fsync=1", "--verify_state_save=1"]);
    }
    command
}

#[test]
fn overwrites_go_home_and_the_snapshot_keeps_its_versions_across_a_sigkill() {
    let mut volume = Volume::create(&["--data-size", "1G", "--flash-size", "48M", "--copy-out", "on"]);
    volume.create_extent("lun0", "256M");
    volume.start_server();
    let mut fill = fio(&volume, "lun0", "fill", volume.temporary.path());
    fill.args([format!("--size={REGION_MIB}M"), "--rw=write".into(), "--bs=1M".into(), "--do_verify=1".into()])
        .arg("--verify_state_save=0");
    assert_eq!(fio_totals(&run(&mut fill)), (REGION_MIB * MIB, REGION_MIB * MIB, 0));
    run(&mut volume.command(&["snapshot", "create", "base"], 2));

    let written = run(&mut overwrites(&volume, false));
    assert_eq!(fio_totals(&written), (0, REGION_MIB * MIB, 0));
    let status = last_json_line(&run(&mut volume.command(&["status", "--json"], 1)));
    assert_eq!(status["copy_out"], true);
    let copied = status["copied_out_bytes"].as_u64().expect("copied_out_bytes");
    assert!(copied > 0, "destages copied out what the snapshot reads: {status}");
    assert_eq!(fio_totals(&run(&mut fill_reads(&volume, "lun0@base"))), (REGION_MIB * MIB, 0, 0));

    volume.kill_server();
    volume.start_server();
    // fio counts the writes verify_only pretends to make: the reads and
    // errors are what it checked.
    let (read_bytes, _, errors) = fio_totals(&run(&mut overwrites(&volume, true)));
    assert_eq!((read_bytes, errors), (REGION_MIB * MIB, 0), "every overwrite verified after the SIGKILL");
    assert_eq!(
        fio_totals(&run(&mut fill_reads(&volume, "lun0@base"))),
        (REGION_MIB * MIB, 0, 0),
        "the snapshot reads the fill after the SIGKILL"
    );
    // The verification is real: the live export no longer holds the fill.
    let stale = fill_reads(&volume, "lun0").output().expect("run fio");
    assert!(!stale.status.success(), "the live export still holds the fill");

    assert!(volume.stop_server().success(), "{}", volume.server_log());
    run(&mut volume.command(&["fsck"], 1));
}
