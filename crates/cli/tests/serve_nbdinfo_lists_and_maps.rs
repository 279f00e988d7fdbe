//! nbdinfo against `proxima serve`: `--list` shows every extent and every
//! snapshot's extents (read-only, `EXTENT@SNAPSHOT`) with their sizes, and
//! multi-conn; extents created through the running server appear at once;
//! `--map` shows data where written and holes after TRIM and zeroing.

use crate::service_support;

use std::process::Command;

use service_support::{run, Volume};

fn list(volume: &Volume) -> Vec<serde_json::Value> {
    let uri = format!("nbd+unix:///?socket={}", volume.socket.display());
    let output = run(Command::new("nbdinfo").args(["--list", "--json"]).arg(uri));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("nbdinfo JSON");
    report["exports"].as_array().expect("exports").clone()
}

fn summary(exports: &[serde_json::Value]) -> Vec<(String, u64, bool, bool)> {
    let mut rows: Vec<(String, u64, bool, bool)> = exports
        .iter()
        .map(|export| {
            (
                export["export-name"].as_str().expect("name").to_owned(),
                export["export-size"].as_u64().expect("size"),
                export["is_read_only"].as_bool().expect("read-only flag"),
                export["can_multi_conn"].as_bool().expect("multi-conn flag"),
            )
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn list_shows_every_extent_and_snapshot_export_with_its_size() {
    let mut volume = Volume::create(&["--data-size", "4G", "--flash-size", "128M"]);
    volume.create_extent("lun0", "1G");
    volume.create_extent("lun1", "256M");
    run(&mut volume.command(&["snapshot", "create", "monday"], 2));
    run(&mut volume.command(&["extent", "resize", "lun1", "--size", "512M"], 2));
    volume.start_server();
    // Through the running server: a new extent and a new snapshot.
    volume.create_extent("lun2", "64M");
    run(&mut volume.command(&["snapshot", "create", "tuesday"], 2));

    let expected = vec![
        ("lun0".to_owned(), 1 << 30, false, true),
        ("lun0@monday".to_owned(), 1 << 30, true, true),
        ("lun0@tuesday".to_owned(), 1 << 30, true, true),
        ("lun1".to_owned(), 512 << 20, false, true),
        ("lun1@monday".to_owned(), 256 << 20, true, true),
        ("lun1@tuesday".to_owned(), 512 << 20, true, true),
        ("lun2".to_owned(), 64 << 20, false, true),
        ("lun2@tuesday".to_owned(), 64 << 20, true, true),
    ];
    assert_eq!(summary(&list(&volume)), expected);
}

fn map(volume: &Volume) -> Vec<(u64, u64, u64)> {
    let output = run(Command::new("nbdinfo").args(["--map", "--json"]).arg(volume.uri("lun0")));
    let entries: serde_json::Value = serde_json::from_slice(&output.stdout).expect("nbdinfo map JSON");
    entries
        .as_array()
        .expect("map entries")
        .iter()
        .map(|entry| {
            (entry["offset"].as_u64().unwrap(), entry["length"].as_u64().unwrap(), entry["type"].as_u64().unwrap())
        })
        .collect()
}

#[test]
fn map_shows_holes_after_trim_and_zeroing() {
    let mut volume = Volume::create(&["--data-size", "1G", "--flash-size", "64M"]);
    volume.create_extent("lun0", "16M");
    volume.start_server();
    const HOLE: u64 = 3; // NBD_STATE_HOLE | NBD_STATE_ZERO
    const DATA: u64 = 0;
    assert_eq!(map(&volume), vec![(0, 16 << 20, HOLE)]);

    run(Command::new("qemu-io").args(["-f", "raw", "-c", "write -P 0x33 0 8M"]).arg(volume.uri("lun0")));
    assert_eq!(map(&volume), vec![(0, 8 << 20, DATA), (8 << 20, 8 << 20, HOLE)]);

    run(Command::new("qemu-io")
        .args(["-f", "raw", "-c", "discard 1M 1M", "-c", "write -z -u 4M 512k"])
        .arg(volume.uri("lun0")));
    let mib = 1 << 20;
    assert_eq!(
        map(&volume),
        vec![
            (0, mib, DATA),
            (mib, mib, HOLE),
            (2 * mib, 2 * mib, DATA),
            (4 * mib, 512 << 10, HOLE),
            ((4 << 20) + (512 << 10), (4 << 20) - (512 << 10), DATA),
            (8 * mib, 8 * mib, HOLE),
        ]
    );
    let output = run(Command::new("qemu-io")
        .args(["-f", "raw", "-c", "read -P 0 1M 1M", "-c", "read -P 0x33 2M 2M"])
        .arg(volume.uri("lun0")));
    assert!(!String::from_utf8_lossy(&output.stdout).contains("Pattern verification failed"));
}
