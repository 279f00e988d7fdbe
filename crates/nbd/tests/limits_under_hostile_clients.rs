//! The server's limits against clients that misbehave: a connection past the
//! limit is refused with the reason; a connection that pipelines reads and
//! never reads the replies makes the server execute only what its memory
//! budget allows (the rest stays unread in the socket) while another
//! connection is served; and shutdown with replies unread ends after the grace
//! period, with the backend flushed.

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::{seeded_bytes, RawClient};
use proxima_nbd::protocol::handshake::*;
use proxima_nbd::protocol::transmission::{ChunkPayload, Command};
use proxima_nbd::server::CONNECTION_MEMORY_BYTES_MIN;
use proxima_nbd::{
    Backend, BackendError, Export, ExportInfo, MemoryBackend, MemoryExport, Server, ServerConfig, ServerSummary,
    ShutdownHandle, StatusExtent, ZeroOptions,
};

const READ_BYTES: u32 = 32 << 20;

/// A memory backend that counts the reads its exports execute and the
/// shutdown flushes.
struct CountingBackend {
    inner: MemoryBackend,
    reads: Arc<AtomicU64>,
    flushes: AtomicU64,
}

struct CountingExport {
    inner: Arc<MemoryExport>,
    reads: Arc<AtomicU64>,
}

impl Export for CountingExport {
    fn info(&self) -> &ExportInfo {
        self.inner.info()
    }
    fn read(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), BackendError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read(offset_bytes, buffer)
    }
    fn write(&self, offset_bytes: u64, data: &[u8], fua: bool) -> Result<(), BackendError> {
        self.inner.write(offset_bytes, data, fua)
    }
    fn flush(&self) -> Result<(), BackendError> {
        self.inner.flush()
    }
    fn trim(&self, offset_bytes: u64, length_bytes: u64, fua: bool) -> Result<(), BackendError> {
        self.inner.trim(offset_bytes, length_bytes, fua)
    }
    fn write_zeroes(&self, offset_bytes: u64, length_bytes: u64, options: ZeroOptions) -> Result<(), BackendError> {
        self.inner.write_zeroes(offset_bytes, length_bytes, options)
    }
    fn block_status(&self, offset_bytes: u64, length_bytes: u64) -> Result<Vec<StatusExtent>, BackendError> {
        self.inner.block_status(offset_bytes, length_bytes)
    }
}

impl Backend for CountingBackend {
    type Export = CountingExport;
    fn list_exports(&self) -> Vec<ExportInfo> {
        self.inner.list_exports()
    }
    fn open_export(&self, name: &str) -> Option<CountingExport> {
        Some(CountingExport { inner: self.inner.open_export(name)?, reads: Arc::clone(&self.reads) })
    }
    fn flush_all(&self) -> Result<(), BackendError> {
        self.flushes.fetch_add(1, Ordering::SeqCst);
        self.inner.flush_all()
    }
}

fn counting_backend() -> Arc<CountingBackend> {
    Arc::new(CountingBackend {
        inner: MemoryBackend::new().with_export("disk", 256 << 20, false),
        reads: Arc::default(),
        flushes: AtomicU64::new(0),
    })
}

struct Running {
    socket: std::path::PathBuf,
    shutdown: ShutdownHandle,
    summary: mpsc::Receiver<ServerSummary>,
    _directory: tempfile::TempDir,
}

fn start(backend: Arc<CountingBackend>, config: ServerConfig) -> Running {
    common::init_logging();
    let directory = tempfile::tempdir().unwrap();
    let socket = directory.path().join("nbd.sock");
    let mut server = Server::new(backend, config);
    server.bind_unix(&socket).unwrap();
    let shutdown = server.shutdown_handle();
    let (sender, summary) = mpsc::channel();
    std::thread::spawn(move || sender.send(server.run().expect("clean stop")).unwrap());
    Running { socket, shutdown, summary, _directory: directory }
}

impl Running {
    fn stop(self) -> ServerSummary {
        self.shutdown.request();
        self.summary.recv_timeout(Duration::from_secs(30)).expect("the server stops")
    }
}

/// Writes, reads back and compares 64 KiB at `offset_bytes`.
fn write_and_read_back(client: &mut RawClient, offset_bytes: u64) {
    let data = seeded_bytes(offset_bytes, 64 << 10);
    client.request(Command::Write, 0, 1, offset_bytes, data.len() as u32);
    client.send(&data);
    assert_eq!(client.read_any_reply().1, 0);
    client.request(Command::Read, 0, 2, offset_bytes, data.len() as u32);
    let (_, error, chunk) = client.read_any_reply();
    assert_eq!(error, 0);
    let Some(ChunkPayload::OffsetData { data: read_back, .. }) = chunk.map(|chunk| chunk.payload) else {
        panic!("a read reply without data");
    };
    assert!(read_back == data, "the data read back differs");
}

#[test]
fn a_connection_past_the_limit_is_refused_with_the_reason() {
    let running = start(counting_backend(), ServerConfig { connection_limit: 1, ..ServerConfig::default() });
    let (mut first, _) = RawClient::attach(&running.socket, "disk", true, false);
    let mut second = RawClient::connect(&running.socket, CLIENT_FLAG_FIXED_NEWSTYLE | CLIENT_FLAG_NO_ZEROES);
    second.send(&ClientOption::Go(InfoRequest { export_name: "disk".into(), info_items: vec![] }).encode());
    let reply = second.read_option_reply();
    let OptionReplyBody::Error { reply_type, message } = reply.body else { panic!("not refused: {reply:?}") };
    assert_eq!(reply_type, REP_ERR_POLICY);
    assert!(message.contains("too many connections"), "{message}");
    assert!(message.contains("at most 1"), "{message}");
    write_and_read_back(&mut first, 0);
    drop((first, second));
    let summary = running.stop();
    assert_eq!((summary.connection_count, summary.refused_connection_count), (1, 1));
}

#[test]
fn unread_replies_hold_the_reading_to_the_budget_while_others_are_served() {
    let backend = counting_backend();
    let config = ServerConfig {
        connection_memory_bytes: CONNECTION_MEMORY_BYTES_MIN,
        server_memory_bytes: 4 * CONNECTION_MEMORY_BYTES_MIN,
        ..ServerConfig::default()
    };
    let running = start(Arc::clone(&backend), config);
    let (mut hostile, _) = RawClient::attach(&running.socket, "disk", true, false);
    for cookie in 0..8 {
        hostile.request(Command::Read, 0, cookie, cookie * u64::from(READ_BYTES), READ_BYTES);
    }
    // Another connection is served meanwhile, several times over.
    let (mut other, _) = RawClient::attach(&running.socket, "disk", true, false);
    for round in 0..4 {
        write_and_read_back(&mut other, (1 << 20) * round);
    }
    // The other connection's 4 reads, and one of the hostile connection's: its
    // budget holds one 32 MiB reply, which the client does not read.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while backend.reads.load(Ordering::SeqCst) < 5 {
        assert!(std::time::Instant::now() < deadline, "the hostile connection's first read never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(backend.reads.load(Ordering::SeqCst), 5, "no further read: the budget is spent");
    drop((hostile, other));
    running.stop();
}

#[test]
fn shutdown_with_unread_replies_ends_after_the_grace_period_and_flushes() {
    let backend = counting_backend();
    let config = ServerConfig { shutdown_grace: Duration::from_millis(500), ..ServerConfig::default() };
    let running = start(Arc::clone(&backend), config);
    let (mut hostile, _) = RawClient::attach(&running.socket, "disk", true, false);
    for cookie in 0..8 {
        hostile.request(Command::Read, 0, cookie, 0, READ_BYTES);
    }
    let (mut other, _) = RawClient::attach(&running.socket, "disk", true, false);
    write_and_read_back(&mut other, 0);
    std::thread::sleep(Duration::from_millis(200));
    let summary = running.stop();
    assert_eq!(summary.connection_count, 2);
    assert_eq!(backend.flushes.load(Ordering::SeqCst), 1);
    // What the server had sent before it closed the connection, and then the end.
    let mut received = 0usize;
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        match std::io::Read::read(&mut hostile.stream, &mut buffer) {
            Ok(0) => break,
            Ok(count) => received += count,
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(error) => panic!("the connection was not closed: {error}"),
        }
    }
    assert!(received < 8 * READ_BYTES as usize, "the unread replies were dropped ({received} bytes sent)");
}
