//! The server also listens on TCP (here an ephemeral port on the loopback
//! address), and real clients attach over it.

use crate::common;

use std::process::Command;
use std::sync::Arc;

use common::run;
use proxima_nbd::{MemoryBackend, Server, ServerConfig};

#[test]
fn clients_attach_over_tcp() {
    common::init_logging();
    let backend = Arc::new(MemoryBackend::new().with_export("disk", 8 << 20, false));
    let mut server = Server::new(backend, ServerConfig::default());
    let address = server.bind_tcp("127.0.0.1:0").unwrap();
    let shutdown = server.shutdown_handle();
    let thread = std::thread::spawn(move || server.run());
    let uri = format!("nbd://{address}/disk");

    run(Command::new("qemu-io").args(["-f", "raw", "-c", "write -P 0x33 1M 1M"]).arg(&uri));
    let output = run(Command::new("qemu-io").args(["-f", "raw", "-c", "read -P 0x33 1M 1M"]).arg(&uri));
    assert!(!String::from_utf8_lossy(&output.stdout).contains("failed"));
    let output = run(Command::new("nbdinfo").args(["--size"]).arg(&uri));
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), (8u64 << 20).to_string());

    shutdown.request();
    let summary = thread.join().unwrap().unwrap();
    assert_eq!(summary.failed_connection_count, 0);
}
