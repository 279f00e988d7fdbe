//! SIGTERM stops the server cleanly: connections are closed after their requests
//! in flight, the backend is flushed once, and the Unix socket is removed. (A
//! test binary of its own: the signal handler is process-wide.)

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::RawClient;
use proxima_nbd::protocol::transmission::Command;
use proxima_nbd::{Backend, BackendError, ExportInfo, MemoryBackend, Server, ServerConfig};

/// A memory backend that counts shutdown flushes.
struct CountingBackend {
    inner: MemoryBackend,
    flush_all_count: AtomicU64,
}

impl Backend for CountingBackend {
    type Export = <MemoryBackend as Backend>::Export;
    fn list_exports(&self) -> Vec<ExportInfo> {
        self.inner.list_exports()
    }
    fn open_export(&self, name: &str) -> Option<Self::Export> {
        self.inner.open_export(name)
    }
    fn flush_all(&self) -> Result<(), BackendError> {
        self.flush_all_count.fetch_add(1, Ordering::SeqCst);
        self.inner.flush_all()
    }
}

#[test]
fn sigterm_drains_connections_and_flushes_the_backend() {
    common::init_logging();
    let backend = Arc::new(CountingBackend {
        inner: MemoryBackend::new().with_export("disk", 1 << 20, false),
        flush_all_count: AtomicU64::new(0),
    });
    let directory = tempfile::tempdir().unwrap();
    let socket = directory.path().join("nbd.sock");
    let mut server = Server::new(Arc::clone(&backend), ServerConfig::default());
    server.bind_unix(&socket).unwrap();
    server.stop_on_signals().unwrap();
    let thread = std::thread::spawn(move || server.run());

    let (mut client, _) = RawClient::attach(&socket, "disk", true, false);
    client.request(Command::Write, 0, 1, 0, 4096);
    client.send(&[0x42; 4096]);
    assert_eq!(client.read_any_reply().1, 0);

    signal_hook::low_level::raise(signal_hook::consts::SIGTERM).unwrap();
    let summary = thread.join().unwrap().expect("clean shutdown");
    assert_eq!(summary.connection_count, 1);
    assert_eq!(backend.flush_all_count.load(Ordering::SeqCst), 1);
    assert!(client.is_closed_by_server());
    assert!(!socket.exists(), "the socket file is removed");
    let mut data = vec![0u8; 4096];
    use proxima_nbd::Export;
    backend.inner.export("disk").unwrap().read(0, &mut data).unwrap();
    assert_eq!(data, vec![0x42; 4096]);
}
