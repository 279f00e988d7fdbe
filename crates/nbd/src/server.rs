//! The NBD server: Unix socket and TCP listeners, a thread per connection (each
//! running a [`Session`] with its own worker pool), and a clean shutdown.
//!
//! Connections are isolated: a session that fails, or panics, ends only its own
//! thread. Shutdown (on request, or on SIGINT/SIGTERM when signals are registered)
//! stops accepting, closes the read side of every connection so that each session
//! finishes the requests it has in flight and ends, waits for them, and then
//! flushes every export of the backend.

use std::collections::HashMap;
use std::io::{self, BufReader};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use thiserror::Error;
use tracing::{info, warn};

use crate::backend::{Backend, BackendError};
use crate::session::{Session, SessionConfig};

/// The default TCP address, on the IANA port for NBD.
pub const DEFAULT_TCP_ADDRESS: &str = "127.0.0.1:10809";

/// Buffer of the request reader: several small pipelined requests per system call.
const READ_BUFFER_BYTES: usize = 256 * 1024;

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Per-connection session settings (the label is replaced by the peer).
    pub session: SessionConfig,
    /// How often the accept loop checks for shutdown when no client connects.
    pub accept_poll_interval: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self { session: SessionConfig::default(), accept_poll_interval: Duration::from_millis(10) }
    }
}

/// Why the server could not start or stop cleanly.
#[derive(Debug, Error)]
pub enum ServerError {
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
    /// Connections accepted.
    pub connection_count: u64,
    /// Connections that ended with a hard disconnect or a panic.
    pub failed_connection_count: u64,
}

/// A clonable handle that asks a running server to stop.
#[derive(Debug, Clone, Default)]
pub struct ShutdownHandle {
    requested: Arc<AtomicBool>,
}

impl ShutdownHandle {
    /// Asks the server to stop.
    pub fn request(&self) {
        self.requested.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was asked for.
    pub fn is_requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
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

/// A connection's stream kept so that shutdown can close its read side.
enum ConnectionStream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl ConnectionStream {
    fn shutdown_read(&self) {
        // The peer may already be gone; the session ends either way.
        let _ = match self {
            Self::Unix(stream) => stream.shutdown(Shutdown::Read),
            Self::Tcp(stream) => stream.shutdown(Shutdown::Read),
        };
    }
}

type ConnectionRegistry = Arc<Mutex<HashMap<u64, ConnectionStream>>>;

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

    /// Makes SIGINT and SIGTERM stop the server cleanly. A second signal while
    /// the server is stopping exits the process at once (status 1).
    pub fn stop_on_signals(&self) -> Result<(), ServerError> {
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register_conditional_shutdown(signal, 1, Arc::clone(&self.shutdown.requested))
                .map_err(ServerError::Signals)?;
            signal_hook::flag::register(signal, Arc::clone(&self.shutdown.requested)).map_err(ServerError::Signals)?;
        }
        Ok(())
    }

    /// Serves until shutdown is requested, then drains the connections, flushes
    /// the backend and removes the Unix sockets.
    pub fn run(self) -> Result<ServerSummary, ServerError> {
        let registry: ConnectionRegistry = Arc::default();
        let failures = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut threads: Vec<JoinHandle<()>> = Vec::new();
        let mut connection_count = 0u64;
        let accept_result = self.accept_until_shutdown(&registry, &failures, &mut threads, &mut connection_count);
        for stream in registry.lock().unwrap_or_else(PoisonError::into_inner).values() {
            stream.shutdown_read();
        }
        for thread in threads {
            if thread.join().is_err() {
                failures.fetch_add(1, Ordering::SeqCst);
            }
        }
        for listener in &self.listeners {
            if let Listener::Unix { path, .. } = listener {
                let _ = std::fs::remove_file(path);
            }
        }
        let flush_result = self.backend.flush_all().map_err(ServerError::Flush);
        info!(connection_count, "server stopped");
        accept_result?;
        flush_result?;
        Ok(ServerSummary { connection_count, failed_connection_count: failures.load(Ordering::SeqCst) })
    }

    fn accept_until_shutdown(
        &self,
        registry: &ConnectionRegistry,
        failures: &Arc<std::sync::atomic::AtomicU64>,
        threads: &mut Vec<JoinHandle<()>>,
        connection_count: &mut u64,
    ) -> Result<(), ServerError> {
        for listener in &self.listeners {
            info!(address = %listener.address(), "listening");
        }
        while !self.shutdown.is_requested() {
            let mut accepted_any = false;
            for listener in &self.listeners {
                let Some((reader, writer, stream, peer)) = accept(listener)? else { continue };
                accepted_any = true;
                *connection_count += 1;
                let id = *connection_count;
                registry.lock().unwrap_or_else(PoisonError::into_inner).insert(id, stream);
                if self.shutdown.is_requested() {
                    // Shutdown raced with this accept: the read side must close too.
                    if let Some(stream) = registry.lock().unwrap_or_else(PoisonError::into_inner).get(&id) {
                        stream.shutdown_read();
                    }
                }
                let backend = Arc::clone(&self.backend);
                let mut session_config = self.config.session.clone();
                session_config.connection_label = format!("#{id} {peer}");
                let registry = Arc::clone(registry);
                let failures = Arc::clone(failures);
                threads.push(std::thread::spawn(move || {
                    let result = Session::new(&*backend, session_config).run(reader, writer);
                    if result.is_err() {
                        failures.fetch_add(1, Ordering::SeqCst);
                    }
                    registry.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
                }));
            }
            threads.retain(|thread| !thread.is_finished());
            if !accepted_any {
                std::thread::sleep(self.config.accept_poll_interval);
            }
        }
        Ok(())
    }
}

type Accepted = (Box<dyn io::Read + Send>, Box<dyn io::Write + Send>, ConnectionStream, String);

/// Accepts one pending connection, if any, as a buffered reader, a writer, the
/// stream kept for shutdown, and a label.
fn accept(listener: &Listener) -> Result<Option<Accepted>, ServerError> {
    let accept_error = |source| ServerError::Accept { address: listener.address(), source };
    let result = match listener {
        Listener::Unix { listener, path } => listener.accept().and_then(|(stream, _)| {
            stream.set_nonblocking(false)?;
            let writer = stream.try_clone()?;
            let kept = stream.try_clone()?;
            let reader = BufReader::with_capacity(READ_BUFFER_BYTES, stream);
            Ok((Box::new(reader) as _, Box::new(writer) as _, ConnectionStream::Unix(kept), path.display().to_string()))
        }),
        Listener::Tcp { listener, .. } => listener.accept().and_then(|(stream, peer)| {
            stream.set_nonblocking(false)?;
            stream.set_nodelay(true)?;
            let writer = stream.try_clone()?;
            let kept = stream.try_clone()?;
            let reader = BufReader::with_capacity(READ_BUFFER_BYTES, stream);
            Ok((Box::new(reader) as _, Box::new(writer) as _, ConnectionStream::Tcp(kept), peer.to_string()))
        }),
    };
    match result {
        Ok(accepted) => Ok(Some(accepted)),
        Err(error) if error.kind() == io::ErrorKind::WouldBlock || error.kind() == io::ErrorKind::Interrupted => {
            Ok(None)
        }
        // A client that vanished between connect and accept, or a momentary lack
        // of descriptors, must not stop the server.
        Err(error)
            if matches!(
                error.raw_os_error(),
                Some(libc::ECONNABORTED) | Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::EPROTO)
            ) =>
        {
            warn!(address = %listener.address(), "accept failed, continuing: {error}");
            Ok(None)
        }
        Err(error) => Err(accept_error(error)),
    }
}
