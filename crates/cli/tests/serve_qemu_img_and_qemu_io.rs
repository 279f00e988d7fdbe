//! qemu-img and qemu-io against `proxima serve`: a raw image converted into an
//! export and back out compares identical (and a changed export does not);
//! qemu-io writes patterns (plain, FUA, unaligned, zeroes) and reads them back
//! with verification, also after a restart of the server.

use crate::service_support;

use std::process::Command;

use service_support::{run, seeded_bytes, Volume};

const IMAGE_BYTES: usize = 24 << 20;

fn served_volume() -> Volume {
    let mut volume = Volume::create(&["--data-size", "2G", "--flash-size", "128M"]);
    volume.create_extent("disk", "64M");
    volume.start_server();
    volume
}

fn qemu_io(volume: &Volume, export: &str, commands: &[&str]) -> String {
    let mut command = Command::new("qemu-io");
    command.args(["-f", "raw"]);
    for each in commands {
        command.args(["-c", each]);
    }
    let output = run(command.arg(volume.uri(export)));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(!stdout.contains("error") && !stdout.contains("failed"), "qemu-io reported a problem:\n{stdout}");
    stdout
}

#[test]
fn convert_in_and_out_compares_identical() {
    let volume = served_volume();
    // Data with holes: a sparse image exercises zero detection on the way in.
    let mut image = seeded_bytes(7, IMAGE_BYTES);
    image[4 << 20..9 << 20].fill(0);
    let source = volume.path("source.raw");
    std::fs::write(&source, &image).expect("write the image");
    let uri = volume.uri("disk");

    run(Command::new("qemu-img").args(["convert", "-n", "-f", "raw", "-O", "raw"]).arg(&source).arg(&uri));
    let back = volume.path("back.raw");
    run(Command::new("qemu-img").args(["convert", "-f", "raw", "-O", "raw"]).arg(&uri).arg(&back));
    let mut expected = image.clone();
    expected.resize(64 << 20, 0);
    assert!(std::fs::read(&back).expect("read back") == expected, "the image came back changed");
    run(Command::new("qemu-img").args(["compare", "-f", "raw", "-F", "raw"]).arg(&back).arg(&uri));

    qemu_io(&volume, "disk", &["write -P 0x11 1M 4k"]);
    let differs = Command::new("qemu-img").args(["compare", "-f", "raw", "-F", "raw"]).arg(&back).arg(&uri).output();
    assert_eq!(differs.expect("run qemu-img").status.code(), Some(1), "qemu-img compare must see the change");
}

#[test]
fn patterns_read_back_before_and_after_a_restart() {
    let mut volume = served_volume();
    let writes = [
        "write -P 0x41 0 1M",
        "write -P 0x42 -f 2M 64k",
        "write -P 0x43 3146240 3584",
        "write -P 0x44 40M 8M",
        "write -z 41947136 8k",
        "aio_write -P 0x45 50M 128k",
        "aio_flush",
    ];
    let reads = [
        "read -P 0x41 0 1M",
        "read -P 0x42 2M 64k",
        "read -P 0 3M 512",
        "read -P 0x43 3146240 3584",
        "read -P 0x44 40M 4k",
        "read -P 0 41947136 8k",
        "read -P 0x44 41955328 8376320",
        "read -P 0x45 50M 128k",
        "read -P 0 60M 4M",
    ];
    qemu_io(&volume, "disk", &writes);
    let output = qemu_io(&volume, "disk", &reads);
    assert!(!output.contains("Pattern verification failed"), "{output}");

    assert!(volume.stop_server().success());
    volume.start_server();
    let output = qemu_io(&volume, "disk", &reads);
    assert!(!output.contains("Pattern verification failed"), "{output}");
    // A wrong pattern must be reported: the check is real.
    let wrong = Command::new("qemu-io").args(["-f", "raw", "-c", "read -P 0x99 0 4k"]).arg(volume.uri("disk")).output();
    let wrong = String::from_utf8_lossy(&wrong.expect("run qemu-io").stdout).into_owned();
    assert!(wrong.contains("Pattern verification failed"), "{wrong}");
}
