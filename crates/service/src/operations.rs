//! Management operations on a volume (extents, snapshots, status, fsck), and
//! where they run: on the volume opened by this process when nobody holds it,
//! or, while `proxima serve` holds it, inside the server through its control
//! socket (`control.sock` in the volume directory: one JSON request line in,
//! one JSON response line out; several clients at once, each on its own thread). Either way the same [`execute`] runs, so a
//! snapshot taken while clients write is a CP of the live volume.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use proxima_engine::{fsck_devices, CloneSource, FsckReport, FsckScope, Overcommit};
use proxima_nbd::ShutdownHandle;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tracing::{info, warn};

use crate::adapter::SharedVolume;
use crate::config::VolumeConfig;
use crate::directory::{open_devices, open_locked, ServiceVolume, VolumeLock, CONTROL_SOCKET_NAME};
use crate::error::{Result, ServiceError};
use crate::status::status;

/// Longest request line the control socket accepts.
const MAX_REQUEST_BYTES: u64 = 64 * 1024;
/// Control clients answered at once.
const CONTROL_CLIENTS_MAX: usize = 8;
/// How long a control client may take to send its request.
const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client told that the server is busy may take to send its
/// request and to take the answer (the accept loop waits for it).
const BUSY_TIMEOUT: Duration = Duration::from_millis(100);
/// How long a client waits for a server's answer (a snapshot deletion scan or
/// an fsck of a large volume can take a while).
const CONTROL_TIMEOUT: Duration = Duration::from_secs(600);

/// One management operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "operation", rename_all = "kebab-case")]
pub enum Request {
    /// Create an extent (an export of the same name).
    ExtentCreate {
        /// Its name.
        name: String,
        /// Its size (a multiple of 4096).
        size_bytes: u64,
        /// Allow the extents' sizes to add up to more than the data device.
        #[serde(default)]
        thin: bool,
    },
    /// Delete an extent and free its blocks.
    ExtentDelete {
        /// Its name.
        name: String,
    },
    /// Grow or shrink an extent.
    ExtentResize {
        /// Its name.
        name: String,
        /// The new size (a multiple of 4096).
        size_bytes: u64,
        /// Allow the extents' sizes to add up to more than the data device.
        #[serde(default)]
        thin: bool,
    },
    /// Make an extent sharing every data block of another (or of another as
    /// of a snapshot), in one CP, without copying data.
    ExtentClone {
        /// `EXTENT` or `EXTENT@SNAPSHOT`.
        source: String,
        /// The clone's name.
        name: String,
        /// Allow the extents' sizes to add up to more than the data device.
        #[serde(default)]
        thin: bool,
    },
    /// List the extents.
    ExtentList,
    /// Snapshot every extent (a CP).
    SnapshotCreate {
        /// Its name.
        name: String,
    },
    /// Delete a snapshot and reclaim the space only it held.
    SnapshotDelete {
        /// Its name.
        name: String,
    },
    /// List the live snapshots.
    SnapshotList,
    /// Restore the volume, or one extent, to a snapshot (offline only).
    SnapshotRestore {
        /// The snapshot.
        name: String,
        /// Restore only this extent.
        extent: Option<String>,
    },
    /// The status report.
    Status,
    /// Check the volume's durable state.
    Fsck,
    /// Read every block in use and check it against its checksum, repairing
    /// from redundancy; then resynchronise the redundancy.
    Scrub,
}

impl Request {
    /// The operation as the command line spells it.
    fn name(&self) -> &'static str {
        match self {
            Request::ExtentCreate { .. } => "extent create",
            Request::ExtentDelete { .. } => "extent delete",
            Request::ExtentResize { .. } => "extent resize",
            Request::ExtentClone { .. } => "extent clone",
            Request::ExtentList => "extent list",
            Request::SnapshotCreate { .. } => "snapshot create",
            Request::SnapshotDelete { .. } => "snapshot delete",
            Request::SnapshotList => "snapshot list",
            Request::SnapshotRestore { .. } => "snapshot restore",
            Request::Status => "status",
            Request::Fsck => "fsck",
            Request::Scrub => "scrub",
        }
    }
}

/// Where an operation ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Venue {
    /// On the volume opened by this process.
    Local,
    /// Inside a running server, through its control socket.
    Server,
}

/// Runs `request` on the volume in `directory`, locally or through a running
/// server. Returns the result as JSON and where it ran.
pub fn run_request(directory: &Path, request: &Request) -> Result<(Value, Venue)> {
    let config = VolumeConfig::load(directory)?;
    match VolumeLock::acquire(directory) {
        Ok(lock) => run_locally(directory, config, lock, request).map(|value| (value, Venue::Local)),
        Err(ServiceError::InUse { directory: held, holder }) => {
            let socket = directory.join(CONTROL_SOCKET_NAME);
            if !socket.exists() {
                return Err(ServiceError::InUse { directory: held, holder });
            }
            send_request(&socket, request).map(|value| (value, Venue::Server))
        }
        Err(other) => Err(other),
    }
}

fn run_locally(directory: &Path, config: VolumeConfig, lock: VolumeLock, request: &Request) -> Result<Value> {
    if *request == Request::Fsck {
        // Offline fsck checks the durable state as it is, without replaying the
        // log or committing anything.
        let (mut data, mut flash) = open_devices(directory, &config)?;
        let report = fsck_devices(&mut data, &mut flash, FsckScope::MetadataAndData)?;
        return Ok(fsck_json(&report));
    }
    let mut open = open_locked(directory, config, lock)?;
    let value = execute(&mut open.volume, &open.config, request, Venue::Local)?;
    open.volume.close()?;
    Ok(value)
}

/// An fsck report as JSON, with its layout score as a fraction beside the
/// counts (`layout_score`, as `status` gives it).
fn fsck_json(report: &FsckReport) -> Value {
    let mut value = serde_json::to_value(report).expect("a report serialises");
    value["layout_score"] = serde_json::json!(report.layout_score());
    value
}

fn overcommit(thin: bool) -> Overcommit {
    if thin {
        Overcommit::Allow
    } else {
        Overcommit::Refuse
    }
}

/// Executes `request` on an open volume.
pub fn execute(volume: &mut ServiceVolume, config: &VolumeConfig, request: &Request, venue: Venue) -> Result<Value> {
    let done = |message: String| json!({ "message": message });
    Ok(match request {
        Request::ExtentCreate { name, size_bytes, thin } => {
            let id = volume.create_extent_with(name, *size_bytes, overcommit(*thin))?;
            json!({ "message": format!("created extent {name} ({size_bytes} bytes)"), "id": id })
        }
        Request::ExtentDelete { name } => {
            volume.delete_extent(name)?;
            done(format!("deleted extent {name}"))
        }
        Request::ExtentResize { name, size_bytes, thin } => {
            volume.resize_extent_with(name, *size_bytes, overcommit(*thin))?;
            done(format!("resized extent {name} to {size_bytes} bytes"))
        }
        Request::ExtentClone { source, name, thin } => {
            let id = volume.clone_extent(CloneSource::parse(source), name, overcommit(*thin))?;
            json!({ "message": format!("cloned {source} as extent {name}"), "id": id })
        }
        Request::ExtentList => json!({ "extents": volume.extents() }),
        Request::SnapshotCreate { name } => {
            let id = volume.create_snapshot(name)?;
            json!({ "message": format!("created snapshot {name}"), "id": id })
        }
        Request::SnapshotDelete { name } => {
            volume.delete_snapshot(name)?;
            volume.finish_deletions()?;
            done(format!("deleted snapshot {name}"))
        }
        Request::SnapshotList => json!({ "snapshots": volume.snapshots() }),
        Request::SnapshotRestore { name, extent } => {
            if venue == Venue::Server {
                // Clients attached to the exports hold caches of the old contents.
                return Err(ServiceError::NeedsOffline { operation: request.name().to_owned() });
            }
            match extent {
                Some(extent) => {
                    volume.restore_extent(name, extent)?;
                    done(format!("restored extent {extent} from snapshot {name}"))
                }
                None => {
                    volume.restore_volume(name)?;
                    done(format!("restored the volume to snapshot {name}"))
                }
            }
        }
        Request::Status => serde_json::to_value(status(volume, config)).expect("a report serialises"),
        Request::Fsck => fsck_json(&volume.fsck()?),
        Request::Scrub => serde_json::to_value(volume.scrub()?).expect("a report serialises"),
    })
}

/// Sends one request to a server's control socket and returns its result.
pub fn send_request(socket: &Path, request: &Request) -> Result<Value> {
    let control_error = |message: String| ServiceError::Control { path: socket.to_owned(), message };
    let mut stream = UnixStream::connect(socket)
        .map_err(|error| control_error(format!("cannot connect (is `proxima serve` running?): {error}")))?;
    stream.set_read_timeout(Some(CONTROL_TIMEOUT)).map_err(|error| control_error(error.to_string()))?;
    let mut line = serde_json::to_string(request).expect("a request serialises");
    line.push('\n');
    stream.write_all(line.as_bytes()).map_err(|error| control_error(format!("sending: {error}")))?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).map_err(|error| control_error(format!("receiving: {error}")))?;
    let response: Value =
        serde_json::from_str(answer.trim()).map_err(|error| control_error(format!("malformed answer: {error}")))?;
    if response["ok"].as_bool() == Some(true) {
        return Ok(response["result"].clone());
    }
    Err(ServiceError::Remote {
        is_usage: response["usage"].as_bool().unwrap_or(false),
        message: response["error"].as_str().unwrap_or("the server reported an unknown error").to_owned(),
    })
}

/// A server's control socket.
#[derive(Debug)]
pub struct ControlSocket {
    listener: UnixListener,
    path: PathBuf,
}

impl ControlSocket {
    /// Binds `control.sock` in the volume directory (replacing a stale one).
    pub fn bind(directory: &Path) -> Result<Self> {
        let path = directory.join(CONTROL_SOCKET_NAME);
        let control_error =
            |error: std::io::Error| ServiceError::Control { path: path.clone(), message: error.to_string() };
        // The volume lock is held, so a socket left here is from a dead server.
        if path.exists() {
            std::fs::remove_file(&path).map_err(control_error)?;
        }
        let listener = UnixListener::bind(&path).map_err(control_error)?;
        listener.set_nonblocking(true).map_err(control_error)?;
        Ok(Self { listener, path })
    }

    /// Answers requests until `shutdown` is requested, then removes the socket.
    /// Each client gets a thread of its own, so one that is slow to send its
    /// request (it has [`REQUEST_READ_TIMEOUT`]) delays no other; past
    /// [`CONTROL_CLIENTS_MAX`] at once, or when no thread can be started, a
    /// client is told at once that the server is busy. At shutdown the clients
    /// still sending their requests are cut off; requests already running finish.
    pub fn serve(self, volume: &SharedVolume, config: &VolumeConfig, shutdown: &ShutdownHandle) {
        let clients: Mutex<HashMap<u64, UnixStream>> = Mutex::default();
        std::thread::scope(|scope| {
            let mut next_id = 0u64;
            while !shutdown.is_requested() {
                match self.listener.accept() {
                    Ok((stream, _)) => {
                        next_id += 1;
                        start_client(scope, stream, next_id, &clients, volume, config);
                    }
                    Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(error) => {
                        warn!("control socket: accept failed: {error}");
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            }
            for stream in lock_clients(&clients).values() {
                let _ = stream.shutdown(Shutdown::Read);
            }
        });
        let _ = std::fs::remove_file(&self.path);
    }
}

type ControlClients = Mutex<HashMap<u64, UnixStream>>;

fn lock_clients(clients: &ControlClients) -> std::sync::MutexGuard<'_, HashMap<u64, UnixStream>> {
    // Inserts and removals only: a panic cannot leave the map half changed.
    clients.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Answers one control client on a thread of its own (or tells it the server
/// is busy).
fn start_client<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    stream: UnixStream,
    id: u64,
    clients: &'scope ControlClients,
    volume: &'scope SharedVolume,
    config: &'scope VolumeConfig,
) {
    let busy = |stream: UnixStream, reason: String| {
        warn!("control socket: refusing a client: {reason}");
        let response =
            json!({ "ok": false, "usage": false, "error": format!("the server is busy: {reason}; try again") });
        let _ = stream.set_nonblocking(false);
        // The request is read (briefly) before the answer: closing a socket
        // with unread data resets it, and the client would lose the answer.
        let _ = stream.set_read_timeout(Some(BUSY_TIMEOUT));
        let _ = BufReader::new((&stream).take(MAX_REQUEST_BYTES)).read_line(&mut String::new());
        let _ = stream.set_write_timeout(Some(BUSY_TIMEOUT));
        let _ = (&stream).write_all(format!("{response}\n").as_bytes());
    };
    let live = lock_clients(clients).len();
    if live >= CONTROL_CLIENTS_MAX {
        return busy(stream, format!("{live} control requests in progress"));
    }
    let kept = match stream.try_clone() {
        Ok(kept) => kept,
        Err(error) => return busy(stream, format!("no descriptor for the client ({error})")),
    };
    lock_clients(clients).insert(id, kept);
    let spawned = std::thread::Builder::new().name(format!("control-{id}")).spawn_scoped(scope, move || {
        if let Err(error) = answer(stream, volume, config) {
            warn!("control socket: {error}");
        }
        lock_clients(clients).remove(&id);
    });
    if let Err(error) = spawned {
        if let Some(stream) = lock_clients(clients).remove(&id) {
            busy(stream, format!("cannot start a thread ({error})"));
        }
    }
}

/// What every request gets once a panic has poisoned the volume's lock.
pub(crate) const STOPPED_AFTER_A_PANIC: &str =
    "the volume stopped after an internal failure: nothing is committed any more; stop the server and open the \
     volume again (it recovers from its last durable CP)";

fn answer(stream: UnixStream, volume: &SharedVolume, config: &VolumeConfig) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(REQUEST_READ_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new((&stream).take(MAX_REQUEST_BYTES)).read_line(&mut line)?;
    let response = match serde_json::from_str::<Request>(line.trim()) {
        Err(error) => json!({ "ok": false, "usage": true, "error": format!("malformed control request: {error}") }),
        Ok(request) => {
            info!(operation = request.name(), "control request");
            // A panic while the volume was locked poisons the lock: its memory
            // may disagree with its devices, so nothing more is done with it.
            match volume.write() {
                Ok(mut guard) => match execute(&mut guard, config, &request, Venue::Server) {
                    Ok(result) => json!({ "ok": true, "result": result }),
                    Err(error) => json!({ "ok": false, "usage": error.is_usage(), "error": error.to_string() }),
                },
                Err(_) => json!({ "ok": false, "usage": false, "error": STOPPED_AFTER_A_PANIC }),
            }
        }
    };
    let mut text = response.to_string();
    text.push('\n');
    (&stream).write_all(text.as_bytes())
}
