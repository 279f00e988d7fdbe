//! The server's edges: SIGTERM flushes and commits (the server exits 0, fsck
//! finds no log left to replay, the data is there after a restart); a second
//! `proxima serve` on the same volume is refused; and a thinly provisioned
//! extent larger than the volume gets ENOSPC when the volume fills, after
//! which the server keeps serving it.

use crate::service_support;

use std::process::Command;

use service_support::{last_json_line, run, Volume};

#[test]
fn sigterm_flushes_and_commits() {
    let mut volume = Volume::create(&["--data-size", "256M", "--flash-size", "32M"]);
    volume.create_extent("lun0", "32M");
    volume.start_server();
    run(Command::new("qemu-io")
        .args(["-f", "raw", "-c", "write -P 0x61 0 3M", "-c", "write -P 0x62 8M 4k"])
        .arg(volume.uri("lun0")));

    let second = volume.command(&["serve"], 1).arg("--socket").arg(volume.path("other.sock")).output().unwrap();
    assert_eq!(second.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&second.stderr).contains("in use by process"), "{second:?}");

    assert!(volume.stop_server().success(), "{}", volume.server_log());
    assert!(volume.server_log().contains("flushed and committed"), "{}", volume.server_log());
    let fsck = last_json_line(&run(&mut volume.command(&["fsck", "--json"], 1)));
    assert_eq!(fsck["log_pending"], false, "a clean shutdown leaves no log to replay: {fsck}");
    assert_eq!(fsck["findings"], serde_json::json!([]));

    volume.start_server();
    let output = run(Command::new("qemu-io")
        .args(["-f", "raw", "-c", "read -P 0x61 0 3M", "-c", "read -P 0x62 8M 4k"])
        .arg(volume.uri("lun0")));
    assert!(!String::from_utf8_lossy(&output.stdout).contains("verification failed"));
}

#[test]
fn a_full_volume_answers_enospc() {
    let mut volume = Volume::create(&["--data-size", "8M", "--flash-size", "2M"]);
    // Not without saying so: the extents would hold more than the device.
    let refused = volume.command(&["extent", "create", "thin", "--size", "64M"], 2).output().unwrap();
    assert_eq!(refused.status.code(), Some(1), "{}", String::from_utf8_lossy(&refused.stderr));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("overcommit"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    volume.create_thin_extent("thin", "64M");
    let status = last_json_line(&run(&mut volume.command(&["status", "--json"], 1)));
    assert_eq!(status["committed_bytes"], 64 << 20, "{status}");
    volume.start_server();
    let output = Command::new("qemu-io")
        .args(["-f", "raw", "-c", "write -P 0x70 0 32M"])
        .arg(volume.uri("thin"))
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(text.contains("No space left on device"), "{text}");

    // The volume keeps serving: once the extent is trimmed (and a CP makes
    // the freed space allocatable), writes succeed and read back.
    let output = run(Command::new("qemu-io")
        .args(["-f", "raw", "-c", "discard 0 64M", "-c", "write -P 0x71 16M 2M", "-c", "read -P 0x71 16M 2M"])
        .arg(volume.uri("thin")));
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(!text.contains("verification failed") && !text.contains("error"), "{text}");
    assert!(volume.stop_server().success(), "{}", volume.server_log());
    let fsck = last_json_line(&run(&mut volume.command(&["fsck", "--json"], 1)));
    assert_eq!(fsck["findings"], serde_json::json!([]), "{fsck}");
}
