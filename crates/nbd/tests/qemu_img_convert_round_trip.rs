//! `qemu-img convert` copies a raw image into an export and back out, and
//! `qemu-img compare` finds the image and the export identical.

use crate::common;

use std::process::Command;
use std::sync::Arc;

use common::{run, seeded_bytes, write_file, TestServer};
use proxima_nbd::MemoryBackend;

const IMAGE_BYTES: usize = 48 << 20;

#[test]
fn convert_in_and_out_and_compare() {
    let server = TestServer::start(Arc::new(MemoryBackend::new().with_export("disk", IMAGE_BYTES as u64, false)));
    // Data with a zero run in the middle, so the copy exercises zeroing too.
    let mut image = seeded_bytes(42, IMAGE_BYTES);
    image[8 << 20..16 << 20].fill(0);
    let source = server.path("source.raw");
    write_file(&source, &image);

    run(Command::new("qemu-img")
        .args(["convert", "-n", "-f", "raw", "-O", "raw"])
        .arg(&source)
        .arg(server.uri("disk")));
    run(Command::new("qemu-img").args(["compare", "-f", "raw", "-F", "raw"]).arg(&source).arg(server.uri("disk")));

    let copy = server.path("copy.raw");
    run(Command::new("qemu-img").args(["convert", "-f", "raw", "-O", "raw"]).arg(server.uri("disk")).arg(&copy));
    assert!(std::fs::read(&copy).unwrap() == image, "the image read back differs from the one written");
}

#[test]
fn compare_detects_a_difference() {
    let server = TestServer::start(Arc::new(MemoryBackend::new().with_export("disk", 4 << 20, false)));
    let source = server.path("source.raw");
    write_file(&source, &seeded_bytes(7, 4 << 20));
    run(Command::new("qemu-img")
        .args(["convert", "-n", "-f", "raw", "-O", "raw"])
        .arg(&source)
        .arg(server.uri("disk")));
    run(Command::new("qemu-io").args(["-f", "raw", "-c", "write -P 0x11 1M 4k"]).arg(server.uri("disk")));
    let output = Command::new("qemu-img")
        .args(["compare", "-f", "raw", "-F", "raw"])
        .arg(&source)
        .arg(server.uri("disk"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "qemu-img compare must report the difference");
}
