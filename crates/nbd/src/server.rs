//! The NBD server: Unix socket and TCP listeners, two threads per connection
//! (one reads requests, one sends replies), a pool of worker threads shared by
//! every connection that executes the requests, and a shutdown bounded in time.
//!
//! Limits, each with a setting in [`ServerConfig`]:
//! - connections: past [`ServerConfig::connection_limit`], a new connection is
//!   refused with an `NBD_REP_ERR_POLICY` reply naming the limit;
//! - memory: request payloads and reply data in flight hold at most
//!   [`ServerConfig::connection_memory_bytes`] per connection and
//!   [`ServerConfig::server_memory_bytes`] in all (see [`crate::budget`]):
//!   past them, the server stops reading a connection's requests until its
//!   replies drain;
//! - threads: a connection whose threads cannot be created is refused the
//!   same way, before its handshake; the server goes on serving the others.
//!
//! Connections are isolated: a session that fails, or panics, ends only its own
//! threads. Shutdown (on request, or on SIGINT/SIGTERM when signals are
//! registered) stops accepting, stops reading requests (requests already read
//! are executed, or answered `ESHUTDOWN` if not yet started), gives the clients
//! [`ServerConfig::shutdown_grace`] to read their replies, then closes every
//! connection, dropping unread replies, and flushes every export of the backend.

use std::collections::HashMap;
use std::io::{self, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use thiserror::Error;
use tracing::{info, warn};

use crate::backend::{Backend, BackendError};
use crate::budget::MemoryBudget;
use crate::buffers::BufferRecycler;
use crate::pool::WorkerPool;
use crate::protocol::handshake::{
    encode_greeting, OptionHeader, OptionReply, OptionReplyBody, HANDSHAKE_FLAG_FIXED_NEWSTYLE,
    HANDSHAKE_FLAG_NO_ZEROES, OPTION_HEADER_LENGTH_BYTES, OPT_ABORT, OPT_EXPORT_NAME, REP_ERR_POLICY,
};
use crate::session::{
    Pipeline, ReplyThread, Session, SessionConfig, MAXIMUM_PAYLOAD_BYTES, OPTION_DATA_MAX_BYTES, REQUEST_OVERHEAD_BYTES,
};

/// The default TCP address, on the IANA port for NBD.
pub const DEFAULT_TCP_ADDRESS: &str = "127.0.0.1:10809";

/// Buffer of the request reader: several small pipelined requests per system call.
const READ_BUFFER_BYTES: usize = 256 * 1024;

/// The least memory a connection may be given: the largest request (a 32 MiB
/// read or write) must fit.
pub const CONNECTION_MEMORY_BYTES_MIN: u64 = MAXIMUM_PAYLOAD_BYTES as u64 + REQUEST_OVERHEAD_BYTES;

/// How long a refused client is given to read why.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(1);
/// Options answered with the refusal before the connection is closed.
const REFUSAL_OPTIONS_MAX: usize = 8;
/// Refused connections waiting to be told; past this they are closed at once.
const REFUSAL_BACKLOG: usize = 64;

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Worker threads executing requests, shared by every connection: the
    /// most requests executing at once.
    pub worker_count: usize,
    /// Connections served at once; more are refused.
    pub connection_limit: usize,
    /// Memory for request payloads and reply data in flight, per connection
    /// (at least [`CONNECTION_MEMORY_BYTES_MIN`]).
    pub connection_memory_bytes: u64,
    /// Memory for request payloads and reply data in flight, in all (at least
    /// `connection_memory_bytes`).
    pub server_memory_bytes: u64,
    /// At shutdown, how long clients are given to read the replies to the
    /// requests they sent before their connections are closed.
    pub shutdown_grace: Duration,
    /// How long a reply may wait for the client to read any of it. A client
    /// that reads nothing for that long while replies wait loses them and its
    /// connection, so it cannot hold the server's memory budget for ever.
    pub reply_timeout: Duration,
    /// How often the accept loop checks for shutdown when no client connects.
    pub accept_poll_interval: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            worker_count: 8,
            connection_limit: 256,
            connection_memory_bytes: 64 << 20,
            server_memory_bytes: 1 << 30,
            shutdown_grace: Duration::from_secs(2),
            reply_timeout: Duration::from_secs(60),
            accept_poll_interval: Duration::from_millis(10),
        }
    }
}

impl ServerConfig {
    /// Checks the settings against each other and the protocol's limits.
    pub fn check(&self) -> Result<(), ServerError> {
        let refuse = |setting: &'static str, message: String| Err(ServerError::Config { setting, message });
        if self.worker_count == 0 {
            return refuse("worker_count", "at least one worker is needed".to_owned());
        }
        if self.connection_limit == 0 {
            return refuse("connection_limit", "at least one connection must be allowed".to_owned());
        }
        if self.connection_memory_bytes < CONNECTION_MEMORY_BYTES_MIN {
            return refuse(
                "connection_memory_bytes",
                format!(
                    "{} bytes is less than {CONNECTION_MEMORY_BYTES_MIN}: the largest request ({MAXIMUM_PAYLOAD_BYTES} \
                     bytes) must fit",
                    self.connection_memory_bytes
                ),
            );
        }
        if self.reply_timeout.is_zero() {
            return refuse("reply_timeout", "a reply must be given some time to be read".to_owned());
        }
        if self.server_memory_bytes < self.connection_memory_bytes {
            return refuse(
                "server_memory_bytes",
                format!(
                    "{} bytes is less than the memory of one connection ({} bytes)",
                    self.server_memory_bytes, self.connection_memory_bytes
                ),
            );
        }
        Ok(())
    }
}

/// Why the server could not start or stop cleanly.
#[derive(Debug, Error)]
pub enum ServerError {
    /// A setting is out of range.
    #[error("invalid server setting {setting}: {message}")]
    Config {
        /// The setting.
        setting: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// A listener could not be created.
    #[error("cannot listen on {address}: {source}")]
    Listen {
        /// The socket path or address.
        address: String,
        /// The error.
        source: io::Error,
    },
    /// Accepting a connection failed in a way that is not transient.
    #[error("accepting on {address} failed: {source}")]
    Accept {
        /// The socket path or address.
        address: String,
        /// The error.
        source: io::Error,
    },
    /// The server's own threads (workers) could not be started.
    #[error("cannot start the server's threads: {0}")]
    Threads(io::Error),
    /// Signal handlers could not be installed.
    #[error("cannot register signal handlers: {0}")]
    Signals(io::Error),
    /// The final flush of the backend failed: data may not be durable.
    #[error("flushing the backend at shutdown failed: {0}")]
    Flush(BackendError),
}

/// What a server did, reported when it stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSummary {
    /// Connections accepted and served.
    pub connection_count: u64,
    /// Connections that ended with a hard disconnect or a panic.
    pub failed_connection_count: u64,
    /// Connections refused (over the connection limit, or no thread for them).
    pub refused_connection_count: u64,
}

/// A clonable handle that asks a running server to stop.
#[derive(Debug, Clone, Default)]
pub struct ShutdownHandle {
    /// 0: running; 1: stop; 2 or more: stop without waiting for clients to
    /// read their replies.
    requests: Arc<AtomicUsize>,
}

impl ShutdownHandle {
    /// Asks the server to stop.
    pub fn request(&self) {
        self.requests.fetch_max(1, Ordering::SeqCst);
    }

    /// Asks the server to stop without the grace period for unread replies.
    pub fn request_urgent(&self) {
        self.requests.fetch_max(2, Ordering::SeqCst);
    }

    /// Whether a stop was asked for.
    pub fn is_requested(&self) -> bool {
        self.requests.load(Ordering::SeqCst) >= 1
    }

    /// Whether a stop without grace was asked for.
    pub fn is_urgent(&self) -> bool {
        self.requests.load(Ordering::SeqCst) >= 2
    }
}

enum Listener {
    Unix { listener: UnixListener, path: PathBuf },
    Tcp { listener: TcpListener, address: SocketAddr },
}

impl Listener {
    fn address(&self) -> String {
        match self {
            Self::Unix { path, .. } => path.display().to_string(),
            Self::Tcp { address, .. } => address.to_string(),
        }
    }
}

/// A connection's socket, kept so that shutdown can close it and a refusal can
/// be written to it.
enum ConnectionStream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl ConnectionStream {
    fn shutdown(&self, how: Shutdown) {
        // The peer may already be gone; the session ends either way.
        let _ = match self {
            Self::Unix(stream) => stream.shutdown(how),
            Self::Tcp(stream) => stream.shutdown(how),
        };
    }

    /// Bounds how long a write may make no progress (every clone of the
    /// socket shares it).
    fn set_write_timeout(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Self::Unix(stream) => stream.set_write_timeout(Some(timeout)),
            Self::Tcp(stream) => stream.set_write_timeout(Some(timeout)),
        }
    }

    fn set_timeouts(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Self::Unix(stream) => stream.set_read_timeout(Some(timeout)).and(stream.set_write_timeout(Some(timeout))),
            Self::Tcp(stream) => stream.set_read_timeout(Some(timeout)).and(stream.set_write_timeout(Some(timeout))),
        }
    }
}

impl Read for ConnectionStream {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Unix(stream) => stream.read(buffer),
            Self::Tcp(stream) => stream.read(buffer),
        }
    }
}

impl Write for ConnectionStream {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Self::Unix(stream) => stream.write(bytes),
            Self::Tcp(stream) => stream.write(bytes),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The live connections' sockets, by connection id; each connection's thread
/// removes its own when it ends.
type ConnectionRegistry = Arc<Mutex<HashMap<u64, ConnectionStream>>>;

fn lock_registry(registry: &ConnectionRegistry) -> MutexGuard<'_, HashMap<u64, ConnectionStream>> {
    // Inserts and removals only: a panic cannot leave the map half changed.
    registry.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the connections of one run share.
struct Shared {
    registry: ConnectionRegistry,
    pool: Arc<WorkerPool>,
    memory: Arc<MemoryBudget>,
    buffers: Arc<BufferRecycler>,
    stopping: Arc<AtomicBool>,
    failures: Arc<AtomicU64>,
    refuser: Refuser,
}

/// Counts kept by the accept loop.
#[derive(Default)]
struct Counts {
    accepted: u64,
    refused: u64,
}

/// An NBD server over a backend.
pub struct Server<B: Backend + 'static> {
    backend: Arc<B>,
    config: ServerConfig,
    listeners: Vec<Listener>,
    shutdown: ShutdownHandle,
}

impl<B: Backend + 'static> std::fmt::Debug for Server<B> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addresses: Vec<String> = self.listeners.iter().map(Listener::address).collect();
        formatter.debug_struct("Server").field("listeners", &addresses).field("config", &self.config).finish()
    }
}

impl<B: Backend + 'static> Server<B> {
    /// A server with no listeners yet.
    pub fn new(backend: Arc<B>, config: ServerConfig) -> Self {
        Self { backend, config, listeners: Vec::new(), shutdown: ShutdownHandle::default() }
    }

    /// Listens on a Unix socket at `path`. A stale socket left by an earlier run is
    /// replaced; any other existing file is an error.
    pub fn bind_unix(&mut self, path: &Path) -> Result<(), ServerError> {
        let listen_error = |source| ServerError::Listen { address: path.display().to_string(), source };
        if let Ok(metadata) = std::fs::symlink_metadata(path) {
            use std::os::unix::fs::FileTypeExt;
            if !metadata.file_type().is_socket() {
                return Err(listen_error(io::Error::new(io::ErrorKind::AlreadyExists, "exists and is not a socket")));
            }
            std::fs::remove_file(path).map_err(listen_error)?;
        }
        let listener = UnixListener::bind(path).map_err(listen_error)?;
        listener.set_nonblocking(true).map_err(listen_error)?;
        self.listeners.push(Listener::Unix { listener, path: path.to_owned() });
        Ok(())
    }

    /// Listens on a TCP address; returns the bound address (useful with port 0).
    pub fn bind_tcp(&mut self, address: &str) -> Result<SocketAddr, ServerError> {
        let listen_error = |source| ServerError::Listen { address: address.to_owned(), source };
        let listener = TcpListener::bind(address).map_err(listen_error)?;
        listener.set_nonblocking(true).map_err(listen_error)?;
        let bound = listener.local_addr().map_err(listen_error)?;
        self.listeners.push(Listener::Tcp { listener, address: bound });
        Ok(bound)
    }

    /// A handle that stops the server from another thread.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.shutdown.clone()
    }

    /// Makes SIGINT and SIGTERM stop the server cleanly; a second signal skips
    /// the grace period given to clients to read their replies (the backend is
    /// still flushed).
    pub fn stop_on_signals(&self) -> Result<(), ServerError> {
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            let requests = Arc::clone(&self.shutdown.requests);
            // SAFETY: the handler only increments an atomic integer, which is
            // async-signal-safe; it allocates nothing and takes no lock.
            unsafe {
                signal_hook::low_level::register(signal, move || {
                    requests.fetch_add(1, Ordering::SeqCst);
                })
            }
            .map_err(ServerError::Signals)?;
        }
        Ok(())
    }

    /// Serves until shutdown is requested, then stops (see the module
    /// documentation), flushes the backend and removes the Unix sockets.
    pub fn run(self) -> Result<ServerSummary, ServerError> {
        self.config.check()?;
        let pool = Arc::new(WorkerPool::start(self.config.worker_count).map_err(ServerError::Threads)?);
        let shared = Shared {
            registry: Arc::default(),
            pool,
            memory: MemoryBudget::new(self.config.server_memory_bytes),
            buffers: Arc::default(),
            stopping: Arc::default(),
            failures: Arc::default(),
            refuser: Refuser::start().map_err(ServerError::Threads)?,
        };
        let mut threads: Vec<JoinHandle<()>> = Vec::new();
        let mut counts = Counts::default();
        let accept_result = self.accept_until_shutdown(&shared, &mut threads, &mut counts);
        self.stop_connections(&shared, threads);
        let Shared { pool, refuser, failures, .. } = shared;
        refuser.stop();
        pool.stop();
        for listener in &self.listeners {
            if let Listener::Unix { path, .. } = listener {
                let _ = std::fs::remove_file(path);
            }
        }
        let flush_result = self.backend.flush_all().map_err(ServerError::Flush);
        info!(connection_count = counts.accepted, refused = counts.refused, "server stopped");
        accept_result?;
        flush_result?;
        Ok(ServerSummary {
            connection_count: counts.accepted,
            failed_connection_count: failures.load(Ordering::SeqCst),
            refused_connection_count: counts.refused,
        })
    }

    /// Stops reading requests, waits up to the grace period for the
    /// connections to answer what they have read, then closes the rest.
    fn stop_connections(&self, shared: &Shared, threads: Vec<JoinHandle<()>>) {
        shared.stopping.store(true, Ordering::SeqCst);
        shared.memory.close();
        for stream in lock_registry(&shared.registry).values() {
            stream.shutdown(Shutdown::Read);
        }
        let deadline = Instant::now() + self.config.shutdown_grace;
        while threads.iter().any(|thread| !thread.is_finished())
            && Instant::now() < deadline
            && !self.shutdown.is_urgent()
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        let cut = lock_registry(&shared.registry).len();
        if cut > 0 {
            info!(connections = cut, "closing connections whose clients did not read their replies in time");
        }
        for stream in lock_registry(&shared.registry).values() {
            stream.shutdown(Shutdown::Both);
        }
        for thread in threads {
            if thread.join().is_err() {
                shared.failures.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    fn accept_until_shutdown(
        &self,
        shared: &Shared,
        threads: &mut Vec<JoinHandle<()>>,
        counts: &mut Counts,
    ) -> Result<(), ServerError> {
        for listener in &self.listeners {
            info!(address = %listener.address(), "listening");
        }
        let mut next_id = 0u64;
        while !self.shutdown.is_requested() {
            let mut accepted_any = false;
            for listener in &self.listeners {
                let Some(accepted) = accept(listener)? else { continue };
                accepted_any = true;
                next_id += 1;
                match self.start_connection(shared, next_id, accepted) {
                    Ok(thread) => {
                        counts.accepted += 1;
                        threads.push(thread);
                    }
                    Err((stream, reason)) => {
                        counts.refused += 1;
                        shared.refuser.refuse(stream, reason);
                    }
                }
            }
            threads.retain(|thread| !thread.is_finished());
            if !accepted_any {
                std::thread::sleep(self.config.accept_poll_interval);
            }
        }
        Ok(())
    }

    /// Starts a connection's thread; gives the socket back with the reason
    /// when the connection must be refused.
    fn start_connection(
        &self,
        shared: &Shared,
        id: u64,
        accepted: Accepted,
    ) -> Result<JoinHandle<()>, (ConnectionStream, String)> {
        let Accepted { reader, writer, kept, label } = accepted;
        let live = lock_registry(&shared.registry).len();
        if live >= self.config.connection_limit {
            let reason =
                format!("too many connections: the server serves at most {} at once", self.config.connection_limit);
            warn!(peer = %label, "refusing a connection: {reason}");
            return Err((kept, reason));
        }
        if let Err(error) = kept.set_write_timeout(self.config.reply_timeout) {
            warn!(peer = %label, "refusing a connection: cannot set its reply timeout: {error}");
            return Err((kept, format!("the server cannot take another connection now ({error})")));
        }
        let reply_thread = match ReplyThread::start(format!("nbd-replies-{id}")) {
            Ok(reply_thread) => reply_thread,
            Err(error) => return Err(no_thread(kept, &label, &error)),
        };
        lock_registry(&shared.registry).insert(id, kept);
        let backend = Arc::clone(&self.backend);
        let session_config = SessionConfig { connection_label: format!("#{id} {label}") };
        let pipeline = Pipeline {
            pool: Arc::clone(&shared.pool),
            connection_id: id,
            budget: shared.memory.connection(self.config.connection_memory_bytes),
            buffers: Arc::clone(&shared.buffers),
            server_stopping: Arc::clone(&shared.stopping),
        };
        let registry = Arc::clone(&shared.registry);
        let failures = Arc::clone(&shared.failures);
        let spawned = std::thread::Builder::new().name(format!("nbd-connection-{id}")).spawn(move || {
            let session = Session::new(&*backend, session_config);
            if session.run_pipelined(reader, writer, &pipeline, reply_thread).is_err() {
                failures.fetch_add(1, Ordering::SeqCst);
            }
            lock_registry(&registry).remove(&id);
        });
        spawned.map_err(|error| {
            let kept = lock_registry(&shared.registry).remove(&id).expect("registered above");
            no_thread(kept, &label, &error)
        })
    }
}

/// A connection refused for want of a thread.
fn no_thread(kept: ConnectionStream, label: &str, error: &io::Error) -> (ConnectionStream, String) {
    warn!(peer = %label, "refusing a connection: cannot start its threads: {error}");
    (kept, format!("the server cannot take another connection now ({error})"))
}

/// An accepted connection: a buffered reader, a writer, the socket kept for
/// shutdown and refusals, and a label.
struct Accepted {
    reader: Box<dyn Read + Send>,
    writer: Box<dyn Write + Send>,
    kept: ConnectionStream,
    label: String,
}

/// Accepts one pending connection, if any.
fn accept(listener: &Listener) -> Result<Option<Accepted>, ServerError> {
    let accept_error = |source| ServerError::Accept { address: listener.address(), source };
    let result = match listener {
        Listener::Unix { listener, path } => listener.accept().and_then(|(stream, _)| {
            stream.set_nonblocking(false)?;
            let writer = stream.try_clone()?;
            let kept = stream.try_clone()?;
            Ok(Accepted {
                reader: Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, stream)),
                writer: Box::new(writer),
                kept: ConnectionStream::Unix(kept),
                label: path.display().to_string(),
            })
        }),
        Listener::Tcp { listener, .. } => listener.accept().and_then(|(stream, peer)| {
            stream.set_nonblocking(false)?;
            stream.set_nodelay(true)?;
            let writer = stream.try_clone()?;
            let kept = stream.try_clone()?;
            Ok(Accepted {
                reader: Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, stream)),
                writer: Box::new(writer),
                kept: ConnectionStream::Tcp(kept),
                label: peer.to_string(),
            })
        }),
    };
    match result {
        Ok(accepted) => Ok(Some(accepted)),
        Err(error) if error.kind() == io::ErrorKind::WouldBlock || error.kind() == io::ErrorKind::Interrupted => {
            Ok(None)
        }
        // A client that vanished between connect and accept, or a momentary lack
        // of descriptors or memory, must not stop the server (the connection, if
        // any, is closed).
        Err(error)
            if matches!(
                error.raw_os_error(),
                Some(libc::ECONNABORTED)
                    | Some(libc::EMFILE)
                    | Some(libc::ENFILE)
                    | Some(libc::ENOBUFS)
                    | Some(libc::ENOMEM)
                    | Some(libc::EPROTO)
            ) =>
        {
            warn!(address = %listener.address(), "accept failed, continuing: {error}");
            Ok(None)
        }
        Err(error) => Err(accept_error(error)),
    }
}

/// The thread that tells refused clients why: it runs a minimal handshake
/// answering each option with `NBD_REP_ERR_POLICY` and the reason, then closes
/// the connection. One thread for all, so that refusing costs no thread per
/// connection (thread exhaustion is one of the reasons to refuse).
struct Refuser {
    sender: SyncSender<(ConnectionStream, String)>,
    thread: JoinHandle<()>,
}

impl Refuser {
    fn start() -> io::Result<Self> {
        let (sender, receiver) = mpsc::sync_channel::<(ConnectionStream, String)>(REFUSAL_BACKLOG);
        let thread = std::thread::Builder::new().name("nbd-refusals".to_owned()).spawn(move || {
            for (mut stream, reason) in receiver {
                // The client may be gone or silent; either way the connection closes.
                let _ = tell_refusal(&mut stream, &reason);
            }
        })?;
        Ok(Self { sender, thread })
    }

    fn refuse(&self, stream: ConnectionStream, reason: String) {
        if let Err(TrySendError::Full((stream, _)) | TrySendError::Disconnected((stream, _))) =
            self.sender.try_send((stream, reason))
        {
            // Too many refusals pending: close without a word.
            stream.shutdown(Shutdown::Both);
        }
    }

    fn stop(self) {
        drop(self.sender);
        let _ = self.thread.join();
    }
}

/// The refusal handshake: the greeting, then `NBD_REP_ERR_POLICY` with the
/// reason to every option (`NBD_OPT_EXPORT_NAME` has no error reply: the
/// connection just closes), within [`REFUSAL_TIMEOUT`] per exchange.
fn tell_refusal(stream: &mut ConnectionStream, reason: &str) -> io::Result<()> {
    stream.set_timeouts(REFUSAL_TIMEOUT)?;
    stream.write_all(&encode_greeting(HANDSHAKE_FLAG_FIXED_NEWSTYLE | HANDSHAKE_FLAG_NO_ZEROES))?;
    let mut client_flags = [0u8; 4];
    stream.read_exact(&mut client_flags)?;
    for _ in 0..REFUSAL_OPTIONS_MAX {
        let mut header_bytes = [0u8; OPTION_HEADER_LENGTH_BYTES];
        stream.read_exact(&mut header_bytes)?;
        let header = OptionHeader::decode(&header_bytes).map_err(|error| io::Error::other(error.to_string()))?;
        if header.data_length_bytes > OPTION_DATA_MAX_BYTES {
            break;
        }
        io::copy(&mut Read::by_ref(stream).take(u64::from(header.data_length_bytes)), &mut io::sink())?;
        let body = match header.option {
            OPT_EXPORT_NAME => break,
            OPT_ABORT => OptionReplyBody::Ack,
            _ => OptionReplyBody::Error { reply_type: REP_ERR_POLICY, message: reason.to_owned() },
        };
        stream.write_all(&OptionReply { option: header.option, body }.encode())?;
        if header.option == OPT_ABORT {
            break;
        }
    }
    stream.shutdown(Shutdown::Both);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked_against_each_other() {
        assert!(ServerConfig::default().check().is_ok());
        let refused = |config: ServerConfig| match config.check() {
            Err(ServerError::Config { setting, .. }) => setting,
            other => panic!("not refused: {other:?}"),
        };
        assert_eq!(refused(ServerConfig { worker_count: 0, ..ServerConfig::default() }), "worker_count");
        assert_eq!(refused(ServerConfig { connection_limit: 0, ..ServerConfig::default() }), "connection_limit");
        let too_little =
            ServerConfig { connection_memory_bytes: CONNECTION_MEMORY_BYTES_MIN - 1, ..ServerConfig::default() };
        assert_eq!(refused(too_little), "connection_memory_bytes");
        let total_below_one = ServerConfig { server_memory_bytes: (64 << 20) - 1, ..ServerConfig::default() };
        assert_eq!(refused(total_below_one), "server_memory_bytes");
        let smallest = ServerConfig {
            connection_memory_bytes: CONNECTION_MEMORY_BYTES_MIN,
            server_memory_bytes: CONNECTION_MEMORY_BYTES_MIN,
            ..ServerConfig::default()
        };
        assert!(smallest.check().is_ok());
    }

    #[test]
    fn a_second_request_to_stop_is_urgent() {
        let handle = ShutdownHandle::default();
        assert!(!handle.is_requested());
        handle.request();
        handle.request();
        assert!(handle.is_requested());
        assert!(!handle.is_urgent(), "asking twice in code is not urgent");
        // What the signal handler does for a second signal.
        handle.requests.fetch_add(1, Ordering::SeqCst);
        assert!(handle.is_urgent());
        let urgent = ShutdownHandle::default();
        urgent.request_urgent();
        assert!(urgent.is_requested());
        assert!(urgent.is_urgent());
    }
}
