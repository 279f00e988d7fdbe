//! `proxima serve`: opens a volume, serves its extents and snapshots over NBD
//! on a Unix socket and/or TCP, answers management requests on the control
//! socket, and on SIGINT/SIGTERM (or a shutdown request) drains the
//! connections, flushes, commits a CP and closes the volume.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use proxima_nbd::{Backend, ExportInfo, Server, ServerConfig, ServerSummary, ShutdownHandle, DEFAULT_TCP_ADDRESS};
use tracing::warn;

use crate::adapter::VolumeBackend;
use crate::directory::open_volume;
use crate::error::Result;
use crate::operations::ControlSocket;

/// Where to listen.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// A Unix socket path.
    pub socket: Option<PathBuf>,
    /// A TCP address. With neither, [`DEFAULT_TCP_ADDRESS`].
    pub listen: Option<String>,
    /// Register SIGINT/SIGTERM to stop the server (the command does; tests
    /// running in-process stop it with the handle instead).
    pub stop_on_signals: bool,
    /// Server settings (worker threads, connection limit, memory budgets,
    /// shutdown grace).
    pub server: ServerConfig,
}

/// What a started server tells its caller.
#[derive(Debug, Clone)]
pub struct ServeReady {
    /// The Unix socket, if any.
    pub socket: Option<PathBuf>,
    /// The bound TCP address, if any.
    pub tcp: Option<SocketAddr>,
    /// Whether the control socket is available.
    pub control_socket: bool,
    /// The exports at start.
    pub exports: Vec<ExportInfo>,
    /// Stops the server.
    pub shutdown: ShutdownHandle,
}

/// Serves the volume of `directory` until stopped; `ready` is called once the
/// listeners accept connections.
pub fn serve(directory: &Path, options: &ServeOptions, ready: impl FnOnce(&ServeReady)) -> Result<ServerSummary> {
    options.server.check()?;
    let open = open_volume(directory)?;
    let config = open.config.clone();
    let lock = open.lock;
    let volume = Arc::new(RwLock::new(open.volume));
    let backend = Arc::new(VolumeBackend::new(Arc::clone(&volume)));
    let mut server = Server::new(Arc::clone(&backend), options.server.clone());
    if let Some(socket) = &options.socket {
        server.bind_unix(socket)?;
    }
    let tcp = match (&options.listen, &options.socket) {
        (Some(address), _) => Some(server.bind_tcp(address)?),
        (None, None) => Some(server.bind_tcp(DEFAULT_TCP_ADDRESS)?),
        (None, Some(_)) => None,
    };
    if options.stop_on_signals {
        server.stop_on_signals()?;
    }
    let shutdown = server.shutdown_handle();
    let control = match ControlSocket::bind(directory) {
        Ok(control) => Some(control),
        Err(error) => {
            warn!("serving without a control socket: {error}");
            None
        }
    };
    let control_thread = control.and_then(|control| {
        let volume = Arc::clone(&volume);
        let config = config.clone();
        let shutdown = shutdown.clone();
        let spawned = std::thread::Builder::new()
            .name("control".to_owned())
            .spawn(move || control.serve(&volume, &config, &shutdown));
        spawned.map_err(|error| warn!("serving without a control socket: cannot start its thread: {error}")).ok()
    });
    let ready_info = ServeReady {
        socket: options.socket.clone(),
        tcp,
        control_socket: control_thread.is_some(),
        exports: backend.list_exports(),
        shutdown: shutdown.clone(),
    };
    ready(&ready_info);
    let outcome = server.run();
    // The accept loop only ends on a shutdown request; make sure the control
    // thread sees one even if the server stopped on an error.
    shutdown.request();
    if let Some(thread) = control_thread {
        let _ = thread.join();
    }
    let summary = outcome?;
    drop(backend);
    let volume = Arc::try_unwrap(volume).expect("every connection and the control thread have ended");
    // After a panic poisoned the lock the volume is not committed: the next
    // open recovers from its last durable CP and log.
    match volume.into_inner() {
        Ok(volume) => {
            volume.close()?;
        }
        Err(_) => return Err(crate::ServiceError::Stopped(crate::operations::STOPPED_AFTER_A_PANIC.into())),
    }
    drop(lock);
    Ok(summary)
}
