//! Shared by the scenario tests: an in-process server on a Unix socket in a
//! temporary directory, a raw protocol client built on the crate's own codec, and
//! helpers to run the real NBD clients (nbdinfo, qemu-img, qemu-io, nbdcopy, fio).
#![allow(dead_code, reason = "each test binary uses a different subset of these helpers")]

mod clients;
#[allow(unused_imports, reason = "each test binary uses a different subset of these helpers")]
pub use clients::{fio_totals, fio_verify_command, run, seeded_bytes};

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use proxima_nbd::protocol::transmission::Command as NbdCommand;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use proxima_nbd::protocol::handshake::*;
use proxima_nbd::protocol::transmission::*;
use proxima_nbd::{Backend, Server, ServerConfig, ServerSummary, ShutdownHandle};

/// Routes the server's logs to the test output (shown for failing tests).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
}

/// A server running in a background thread on a Unix socket.
pub struct TestServer {
    pub socket_path: PathBuf,
    pub directory: tempfile::TempDir,
    shutdown: ShutdownHandle,
    thread: Option<JoinHandle<ServerSummary>>,
}

impl TestServer {
    /// Starts serving `backend`; the socket accepts connections when this returns.
    pub fn start<B: Backend + 'static>(backend: Arc<B>) -> Self {
        init_logging();
        let directory = tempfile::tempdir().expect("temporary directory");
        let socket_path = directory.path().join("nbd.sock");
        let mut server = Server::new(backend, ServerConfig::default());
        server.bind_unix(&socket_path).expect("bind the Unix socket");
        let shutdown = server.shutdown_handle();
        let thread = std::thread::spawn(move || server.run().expect("server run"));
        Self { socket_path, directory, shutdown, thread: Some(thread) }
    }

    /// The NBD URI of an export.
    pub fn uri(&self, export: &str) -> String {
        format!("nbd+unix:///{export}?socket={}", self.socket_path.display())
    }

    /// A path in the test's temporary directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.directory.path().join(name)
    }

    /// Stops the server and returns its summary.
    pub fn stop(mut self) -> ServerSummary {
        self.stop_inner().expect("server thread present")
    }

    fn stop_inner(&mut self) -> Option<ServerSummary> {
        self.shutdown.request();
        self.thread.take().map(|thread| thread.join().expect("server thread panicked"))
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.stop_inner();
        } else {
            self.shutdown.request();
        }
    }
}

/// Writes a file.
pub fn write_file(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap_or_else(|error| panic!("writing {}: {error}", path.display()));
}

/// A client speaking the protocol byte by byte, for tests of bad input.
pub struct RawClient {
    pub stream: UnixStream,
}

impl RawClient {
    /// Connects and reads the greeting; sends the client flags.
    pub fn connect(socket_path: &Path, client_flags: u32) -> Self {
        let stream = UnixStream::connect(socket_path).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(20))).expect("read timeout");
        let mut client = Self { stream };
        let greeting = client.read_bytes(GREETING_LENGTH_BYTES);
        let flags = decode_greeting(&greeting).expect("valid greeting");
        assert_eq!(flags, HANDSHAKE_FLAG_FIXED_NEWSTYLE | HANDSHAKE_FLAG_NO_ZEROES);
        client.send(&client_flags.to_be_bytes());
        client
    }

    /// Connects and negotiates up to transmission on `export`; returns the
    /// transmission flags.
    pub fn attach(socket_path: &Path, export: &str, structured: bool, block_status: bool) -> (Self, u16) {
        let mut client = Self::connect(socket_path, CLIENT_FLAG_FIXED_NEWSTYLE | CLIENT_FLAG_NO_ZEROES);
        if structured {
            client.send(&ClientOption::StructuredReply.encode());
            assert_eq!(client.read_option_reply().body, OptionReplyBody::Ack);
        }
        if block_status {
            let request = MetaContextRequest { export_name: export.into(), queries: vec!["base:allocation".into()] };
            client.send(&ClientOption::SetMetaContext(request).encode());
            let reply = client.read_option_reply();
            assert!(matches!(reply.body, OptionReplyBody::MetaContext { .. }), "{reply:?}");
            assert_eq!(client.read_option_reply().body, OptionReplyBody::Ack);
        }
        let request = InfoRequest { export_name: export.into(), info_items: vec![INFO_BLOCK_SIZE] };
        client.send(&ClientOption::Go(request).encode());
        let mut transmission_flags = None;
        loop {
            match client.read_option_reply().body {
                OptionReplyBody::Info(InfoItem::Export { transmission_flags: flags, .. }) => {
                    transmission_flags = Some(flags)
                }
                OptionReplyBody::Info(_) => {}
                OptionReplyBody::Ack => break,
                other => panic!("unexpected reply to NBD_OPT_GO: {other:?}"),
            }
        }
        (client, transmission_flags.expect("NBD_INFO_EXPORT before the ACK"))
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    pub fn read_bytes(&mut self, length: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; length];
        self.stream.read_exact(&mut bytes).expect("receive");
        bytes
    }

    pub fn read_option_reply(&mut self) -> OptionReply {
        let header = self.read_bytes(OPTION_REPLY_HEADER_LENGTH_BYTES);
        let (option, reply_type, length) = OptionReply::decode_header(&header).expect("option reply header");
        let payload = self.read_bytes(length as usize);
        OptionReply::decode_body(option, reply_type, &payload).expect("option reply body")
    }

    /// Sends a request (and a write's payload).
    pub fn request(&mut self, command: NbdCommand, flags: u16, cookie: u64, offset_bytes: u64, length_bytes: u32) {
        let header = RequestHeader { flags, command_code: command.code(), cookie, offset_bytes, length_bytes };
        self.send(&header.encode());
    }

    /// Reads a simple reply; returns (cookie, error).
    pub fn read_simple_reply(&mut self) -> (u64, u32) {
        let bytes = self.read_bytes(SIMPLE_REPLY_HEADER_LENGTH_BYTES);
        assert_eq!(&bytes[..4], &0x6744_6698u32.to_be_bytes(), "simple reply magic");
        let error = u32::from_be_bytes(bytes[4..8].try_into().unwrap());
        let cookie = u64::from_be_bytes(bytes[8..16].try_into().unwrap());
        (cookie, error)
    }

    /// Reads one reply of either kind; returns (cookie, error, chunk if structured).
    /// A simple reply to a successful read is not supported here (length unknown).
    pub fn read_any_reply(&mut self) -> (u64, u32, Option<StructuredChunk>) {
        let magic = self.read_bytes(4);
        if magic == 0x6744_6698u32.to_be_bytes() {
            let rest = self.read_bytes(12);
            let error = u32::from_be_bytes(rest[..4].try_into().unwrap());
            let cookie = u64::from_be_bytes(rest[4..].try_into().unwrap());
            return (cookie, error, None);
        }
        let mut header = magic;
        header.extend(self.read_bytes(16));
        let header = ChunkHeader::decode(&header).expect("structured reply header");
        let payload = self.read_bytes(header.payload_length_bytes as usize);
        let chunk = StructuredChunk::decode(header, &payload).expect("structured chunk");
        let error = match &chunk.payload {
            ChunkPayload::Error { error, .. } | ChunkPayload::ErrorOffset { error, .. } => *error,
            _ => 0,
        };
        (chunk.cookie, error, Some(chunk))
    }

    /// Whether the server closed the connection: end of stream or a reset, not a
    /// byte and not the read timeout.
    pub fn is_closed_by_server(&mut self) -> bool {
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(error) => matches!(error.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe),
        }
    }
}
