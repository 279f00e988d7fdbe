//! nbdcopy against `proxima serve`: a file copied into an export over four
//! connections, from that export to a second one, and back to a file, arrives
//! unchanged; a snapshot export taken in between still holds the first copy.

use crate::service_support;

use std::process::Command;

use service_support::{run, seeded_bytes, Volume};

const BYTES: usize = 32 << 20;

#[test]
fn file_to_export_to_export_to_file() {
    let mut volume = Volume::create(&["--data-size", "2G", "--flash-size", "128M"]);
    volume.create_extent("a", "32M");
    volume.create_extent("b", "32M");
    volume.start_server();
    let mut original = seeded_bytes(11, BYTES);
    original[(8 << 20)..(12 << 20)].fill(0);
    let source = volume.path("in.raw");
    std::fs::write(&source, &original).expect("write the source");

    run(Command::new("nbdcopy").args(["--connections=4", "--flush"]).arg(&source).arg(volume.uri("a")));
    run(&mut volume.command(&["snapshot", "create", "first"], 2));
    run(Command::new("nbdcopy").args(["--flush"]).arg(volume.uri("a")).arg(volume.uri("b")));
    run(Command::new("qemu-io").args(["-f", "raw", "-c", "write -P 0x77 0 1M"]).arg(volume.uri("a")));

    let out = volume.path("out.raw");
    run(Command::new("nbdcopy").arg(volume.uri("b")).arg(&out));
    assert!(std::fs::read(&out).expect("read the copy") == original, "export b differs from the source");
    let snapshot_out = volume.path("snapshot.raw");
    run(Command::new("nbdcopy").arg(volume.uri("a@first")).arg(&snapshot_out));
    assert!(std::fs::read(&snapshot_out).expect("read") == original, "the snapshot export changed");
}
