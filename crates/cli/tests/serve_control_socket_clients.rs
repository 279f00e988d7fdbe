//! The control socket of a running server answers several clients at once:
//! clients that connect and send nothing do not delay `proxima status` (they
//! are still connected, unanswered, when it has its answer), and past 8 clients
//! at once a new one is told at once that the server is busy.

use crate::service_support;

use std::io::{ErrorKind, Read};
use std::os::unix::net::UnixStream;

use service_support::{last_json_line, run, Volume};

/// Whether an idle client is still connected and unanswered.
fn still_waiting(client: &mut UnixStream) -> bool {
    client.set_nonblocking(true).expect("non-blocking");
    let mut byte = [0u8; 1];
    matches!(client.read(&mut byte), Err(error) if error.kind() == ErrorKind::WouldBlock)
}

#[test]
fn idle_control_clients_do_not_delay_others() {
    let mut volume = Volume::create(&["--data-size", "64M", "--flash-size", "8M"]);
    volume.create_extent("lun0", "4M");
    volume.start_server();
    let control = volume.directory.join("control.sock");

    let mut idle: Vec<UnixStream> = (0..3).map(|_| UnixStream::connect(&control).expect("connect")).collect();
    let status = last_json_line(&run(&mut volume.command(&["status", "--json"], 1)));
    assert_eq!(status["extents"].as_array().map(Vec::len), Some(1), "{status}");
    for client in &mut idle {
        assert!(still_waiting(client), "the status was answered while the idle clients were still waiting");
    }

    // Eight clients at once take every place: the next one is told so at once.
    idle.extend((0..5).map(|_| UnixStream::connect(&control).expect("connect")));
    // The server takes them in within its 20 ms accept poll.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let busy = volume.command(&["status"], 1).output().expect("run proxima status");
    let stderr = String::from_utf8_lossy(&busy.stderr);
    assert_eq!(busy.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("busy"), "{stderr}");

    // Once they leave, their places free up.
    drop(idle);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !volume.command(&["status"], 1).output().expect("run proxima status").status.success() {
        assert!(std::time::Instant::now() < deadline, "the control socket stayed busy: {}", volume.server_log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(volume.stop_server().success(), "{}", volume.server_log());
}
