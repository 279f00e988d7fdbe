//! A clone through a running server: fio fills part of an export, `proxima
//! extent clone` makes a second export sharing its blocks, both verify, then
//! fio writes different patterns to different regions of each (through
//! NBD, verified as written) and every region of both verifies as what it
//! must hold: its own pattern, or the shared original. `status` counts the
//! bytes still shared, and deleting both extents frees exactly their space.

use crate::service_support;

use std::process::Command;

use service_support::{fio, fio_totals, last_json_line, run, Volume};

const MIB: u64 = 1 << 20;

fn status(volume: &Volume) -> serde_json::Value {
    last_json_line(&run(&mut volume.command(&["status", "--json"], 1)))
}

/// A verifying fio run over `[offset, offset + size)` MiB of `export`.
fn fio_region(volume: &Volume, export: &str, name: &str, offset_mib: u64, size_mib: u64) -> Command {
    let mut command = fio(volume, export, name, volume.temporary.path());
    command.args([format!("--offset={offset_mib}M"), format!("--size={size_mib}M")]).arg("--verify_state_save=0");
    command
}

/// The same, with every block written as or checked against `pattern`.
fn fio_pattern(volume: &Volume, export: &str, name: &str, offset_mib: u64, size_mib: u64, pattern: &str) -> Command {
    let mut command = fio_region(volume, export, name, offset_mib, size_mib);
    command.args(["--verify=pattern", &format!("--verify_pattern={pattern}")]);
    command
}

#[test]
fn a_clone_and_its_source_diverge_under_fio_and_both_verify() {
    let mut volume = Volume::create(&["--data-size", "1G", "--flash-size", "128M"]);
    volume.start_server();
    let free_before = status(&volume)["free_bytes"].as_u64().unwrap();
    volume.create_extent("lun0", "256M");
    // Large sequential writes go straight to the data device (nothing
    // staged, so the clone shares every block).
    let fill = run(fio_region(&volume, "lun0", "fill", 0, 96).args(["--rw=write", "--bs=1M", "--do_verify=1"]));
    assert_eq!(fio_totals(&fill), (96 * MIB, 96 * MIB, 0));

    run(&mut volume.command(&["extent", "clone", "lun0", "lun1"], 2));
    assert_eq!(status(&volume)["shared_bytes"].as_u64(), Some(96 * MIB), "the clone shares the 96 MiB written");
    // Read back in the fill's 1 MiB blocks (each carries one verify header).
    let clone_reads = run(fio_region(&volume, "lun1", "clone-verify", 0, 96).args(["--rw=read", "--bs=1M"]));
    assert_eq!(fio_totals(&clone_reads), (96 * MIB, 0, 0));

    // Divergent 4 KiB random writes: the source's first 32 MiB, the
    // clone's second.
    let source_write = fio_pattern(&volume, "lun0", "source-write", 0, 32, "0xa5a5a5a5")
        .args(["--rw=randwrite", "--do_verify=1"])
        .output()
        .expect("run fio");
    assert!(source_write.status.success(), "{}", String::from_utf8_lossy(&source_write.stderr));
    let clone_write = run(
        fio_pattern(&volume, "lun1", "clone-write", 32, 32, "0x5a5a5a5a").args(["--rw=randwrite", "--do_verify=1"])
    );
    assert_eq!(fio_totals(&clone_write).1, 32 * MIB);
    assert_eq!(status(&volume)["shared_bytes"].as_u64(), Some(32 * MIB), "only the last 32 MiB stay shared");

    // Each region holds what it must, on both exports.
    for (export, offset, pattern) in [("lun0", 0, "0xa5a5a5a5"), ("lun1", 32, "0x5a5a5a5a")] {
        let read = run(fio_pattern(&volume, export, "pattern-verify", offset, 32, pattern).arg("--rw=read"));
        assert_eq!(fio_totals(&read), (32 * MIB, 0, 0), "{export} at {offset} MiB");
    }
    for (export, offset) in [("lun0", 32), ("lun0", 64), ("lun1", 0), ("lun1", 64)] {
        let read = run(fio_region(&volume, export, "original-verify", offset, 32).args(["--rw=read", "--bs=1M"]));
        assert_eq!(fio_totals(&read), (32 * MIB, 0, 0), "{export} at {offset} MiB keeps the original");
    }
    // The verification is real: the source's pattern does not verify on the
    // clone's region it never wrote.
    let wrong =
        fio_pattern(&volume, "lun1", "wrong-pattern", 0, 32, "0xa5a5a5a5").arg("--rw=read").output().expect("run fio");
    assert!(!wrong.status.success(), "the clone holds the source's divergent writes");

    run(&mut volume.command(&["extent", "delete", "lun0"], 2));
    run(&mut volume.command(&["extent", "delete", "lun1"], 2));
    let after = status(&volume);
    assert_eq!(after["shared_bytes"].as_u64(), Some(0));
    assert_eq!(after["free_bytes"].as_u64(), Some(free_before), "deleting both frees exactly their space");
    volume.stop_server();
}
