//! `nbdinfo --map` (block status over `base:allocation`) reports data where
//! qemu-io wrote, holes where it trimmed and where nothing was ever written, and
//! allocated zeroes after a write-zeroes that must not leave a hole.

use crate::common;

use std::process::Command;
use std::sync::Arc;

use common::{run, TestServer};
use proxima_nbd::MemoryBackend;

const MIB: u64 = 1 << 20;

/// (offset, length, type) triples from `nbdinfo --map --json`.
fn map(server: &TestServer) -> Vec<(u64, u64, u64)> {
    let output = run(Command::new("nbdinfo").args(["--map", "--json"]).arg(server.uri("disk")));
    let entries: serde_json::Value = serde_json::from_slice(&output.stdout).expect("nbdinfo map JSON");
    entries
        .as_array()
        .expect("map array")
        .iter()
        .map(|entry| {
            (entry["offset"].as_u64().unwrap(), entry["length"].as_u64().unwrap(), entry["type"].as_u64().unwrap())
        })
        .collect()
}

#[test]
fn map_shows_holes_after_trim() {
    let server = TestServer::start(Arc::new(MemoryBackend::new().with_export("disk", 16 * MIB, false)));
    assert_eq!(map(&server), vec![(0, 16 * MIB, 3)], "a fresh export is one hole that reads as zeroes");

    run(Command::new("qemu-io").args(["-f", "raw", "-c", "write -P 0x55 0 8M"]).arg(server.uri("disk")));
    assert_eq!(map(&server), vec![(0, 8 * MIB, 0), (8 * MIB, 8 * MIB, 3)]);

    run(Command::new("qemu-io").args(["-f", "raw", "-c", "discard 2M 1M"]).arg(server.uri("disk")));
    run(Command::new("qemu-io").args(["-f", "raw", "-c", "write -z -u 4M 1M"]).arg(server.uri("disk")));
    run(Command::new("qemu-io").args(["-f", "raw", "-c", "write -z 6M 1M"]).arg(server.uri("disk")));
    // "write -z -u" may unmap: a hole. "write -z" asks for NO_HOLE: allocated zeroes.
    assert_eq!(
        map(&server),
        vec![
            (0, 2 * MIB, 0),
            (2 * MIB, MIB, 3),
            (3 * MIB, MIB, 0),
            (4 * MIB, MIB, 3),
            (5 * MIB, MIB, 0),
            (6 * MIB, MIB, 2),
            (7 * MIB, MIB, 0),
            (8 * MIB, 8 * MIB, 3),
        ]
    );
}
