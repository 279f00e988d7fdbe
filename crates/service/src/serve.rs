//! `proxima serve`: opens a volume, serves its extents and snapshots over NBD
//! on a Unix socket and/or TCP, answers management requests on the control
//! socket, and on SIGINT/SIGTERM (or a shutdown request) drains the
//! connections, flushes, commits a CP and closes the volume.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use proxima_engine::prefetch::PrefetchSettings;
use proxima_nbd::{Backend, ExportInfo, Server, ServerConfig, ServerSummary, ShutdownHandle, DEFAULT_TCP_ADDRESS};
use tracing::warn;

use crate::adapter::VolumeBackend;
use crate::config::VolumeConfig;
use crate::directory::open_volume;
use crate::error::Result;
use crate::operations::ControlSocket;
use crate::read_ahead::{is_rotational, ReadAheadChoice, ReadAheadStats};

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
    /// Read-ahead of sequential readers (off by default; its settings derived
    /// from the data device unless given).
    pub read_ahead: ReadAheadChoice,
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
    /// The read-ahead's settings (`None`: off).
    pub read_ahead: Option<PrefetchSettings>,
    /// Stops the server.
    pub shutdown: ShutdownHandle,
}

/// What a server did, once stopped.
#[derive(Debug, Clone)]
pub struct ServeSummary {
    /// The NBD server's summary.
    pub server: ServerSummary,
    /// What the read-ahead did (`None`: off).
    pub read_ahead: Option<ReadAheadStats>,
}

/// Serves the volume of `directory` until stopped; `ready` is called once the
/// listeners accept connections.
pub fn serve(directory: &Path, options: &ServeOptions, ready: impl FnOnce(&ServeReady)) -> Result<ServeSummary> {
    options.server.check()?;
    let open = open_volume(directory)?;
    let config = open.config.clone();
    let lock = open.lock;
    let read_ahead = match options.read_ahead {
        ReadAheadChoice::Off => None,
        ReadAheadChoice::On(overrides) => Some(overrides.settings(data_disks_rotate(directory, &config))?),
    };
    let volume = Arc::new(RwLock::new(open.volume));
    let backend = Arc::new(VolumeBackend::with_read_ahead(Arc::clone(&volume), read_ahead));
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
        read_ahead,
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
    let summary = ServeSummary { server: outcome?, read_ahead: backend.read_ahead_stats() };
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

/// Whether the volume's data disks rotate, as far as the kernel tells: the
/// first disk decides. When it cannot tell (a file on a file system without
/// a block device), they are taken to rotate: Proxima's data devices are
/// hard disks.
fn data_disks_rotate(directory: &Path, config: &VolumeConfig) -> bool {
    config
        .data_disks
        .first()
        .and_then(|disk| is_rotational(&VolumeConfig::resolve(directory, &disk.path)))
        .unwrap_or(true)
}
