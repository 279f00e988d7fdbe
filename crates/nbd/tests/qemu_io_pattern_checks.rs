//! qemu-io writes patterns (plain, FUA, zeroes, discards) and reads them back with
//! pattern verification, through structured replies.

use crate::common;

use std::process::Command;
use std::sync::Arc;

use common::{run, TestServer};
use proxima_nbd::MemoryBackend;

fn qemu_io(server: &TestServer, commands: &[&str]) -> String {
    let mut command = Command::new("qemu-io");
    command.args(["-f", "raw"]);
    for each in commands {
        command.args(["-c", each]);
    }
    let output = run(command.arg(server.uri("disk")));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(!stdout.contains("Pattern verification failed"), "{stdout}");
    assert!(!stdout.contains("failed"), "{stdout}");
    stdout
}

#[test]
fn written_patterns_read_back() {
    let server = TestServer::start(Arc::new(MemoryBackend::new().with_export("disk", 32 << 20, false)));
    qemu_io(
        &server,
        &[
            "write -P 0xa1 0 1M",
            "write -P 0xb2 -f 1M 64k",
            "write -P 0xc3 3584 1024",
            "write -z 2M 512k",
            "aio_write -P 0xd4 4M 256k",
            "aio_write -P 0xe5 5M 256k",
            "aio_flush",
            "flush",
        ],
    );
    let stdout = qemu_io(
        &server,
        &[
            "read -P 0xa1 0 3584",
            "read -P 0xc3 3584 1024",
            "read -P 0xa1 4608 1043968",
            "read -P 0xb2 1M 64k",
            "read -P 0x00 2M 512k",
            "read -P 0xd4 4M 256k",
            "read -P 0xe5 5M 256k",
            "read -P 0x00 31M 1M",
        ],
    );
    assert_eq!(stdout.matches("read ").count(), 8, "{stdout}");
}

#[test]
fn discarded_range_reads_back_as_zeroes_on_this_backend() {
    let server = TestServer::start(Arc::new(MemoryBackend::new().with_export("disk", 8 << 20, false)));
    qemu_io(&server, &["write -P 0x77 0 4M", "discard 1M 1M"]);
    qemu_io(&server, &["read -P 0x77 0 1M", "read -P 0x00 1M 1M", "read -P 0x77 2M 2M"]);
}
