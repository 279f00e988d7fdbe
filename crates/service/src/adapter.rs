//! The NBD backend over an engine volume: every extent is a writable export of
//! its own name, and every extent of every live snapshot a read-only export
//! `EXTENT@SNAPSHOT`.
//!
//! All exports share one volume behind one reader-writer lock. Reads of the
//! active extents run under the read lock, several at once, through
//! `Volume::read_shared` (the devices read through `&self`; copy-on-write means
//! no block a read resolved is reused while the read lock is held, since reuse
//! needs a CP and a CP needs the write lock). Everything else — writes, trims,
//! flushes, snapshot reads (which may load a snapshot's map), management — runs
//! whole under the write lock, and each request is replied to only after the
//! engine call returns, so:
//! - a write completed (replied to) on any connection is in the volume's state
//!   before any later request on any connection sees the volume, and
//! - `Volume::flush` makes durable every write the volume has accepted,
//!   whichever connection sent it.
//!
//! A FLUSH on one connection therefore covers the writes completed on all of
//! them, which is what `NBD_FLAG_CAN_MULTI_CONN` promises: every export
//! advertises it.
//!
//! Small writes are combined across connections: each one is queued, and
//! whichever writer holds the write lock executes every queued write in one
//! `Volume::write_batch` (staged together as one append to the staging log)
//! before releasing it; a writer that then gets the lock and finds
//! its write done returns at once. Each write is still in the volume before its reply.
//! A background thread destages beside the clients, in bounded steps (the
//! densest windows first), each taken in short pieces: the step's CP, then
//! its plan (`Volume::commit`, `Volume::plan_destage_step`, each under the
//! lock on its own), then [`DESTAGE_PIECES_PER_STEP`] pieces
//! (`Volume::destage_planned`), taking the write lock for one piece at a
//! time, writing back what the piece wrote without the lock (so that a
//! flush under it finds little to write) and yielding it between pieces, so
//! no client waits for more than a piece or a CP: once the staging area is [`DESTAGE_HIGH_WATER_PERCENT`]
//! full it destages while writes go on, down to [`DESTAGE_LOW_WATER_PERCENT`]; and
//! when no write has come for [`IDLE_DESTAGE_AFTER`] it destages whatever the
//! staging area holds (idle destage, as write-back caches flush when idle),
//! so reads after a burst of random writes find the extents back in their
//! runs. A write that still finds the staging area full waits for one step
//! of its own.
//! The same thread cleans segments for the log-structured layouts, one pass
//! under the write lock at a time, when fewer segments are clean than the
//! cleaner's threshold (`Volume::cleaning_needed`, `Volume::clean_step`).
//!
//! Concurrent FLUSHes are coalesced (group commit): each
//! completed write takes a sequence number under the write lock, a flush
//! records the sequence it made durable, and a FLUSH that finds every write
//! completed before it already durable returns without another `fdatasync`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use proxima_device::{DeviceError, WriteBack, WriteBacks};
use proxima_engine::prefetch::PrefetchSettings;
use proxima_engine::{BatchedWrite, DestagePlan, EngineError};
use proxima_nbd::backend::push_status_extent;
use proxima_nbd::{AllocationState, Backend, BackendError, Export, ExportInfo, StatusExtent, ZeroOptions};
use tracing::{debug, warn};

use crate::directory::ServiceVolume;
use crate::read_ahead::{ReadAheadStats, ReadAheadWorkers};

/// Largest piece in which zeroes are written when a hole is not allowed.
const ZERO_PIECE_BYTES: u64 = 1 << 20;

/// A volume shared by the server's connections (and its control socket).
pub type SharedVolume = Arc<RwLock<ServiceVolume>>;

/// Write sequence numbers for coalescing flushes (group commit).
#[derive(Debug, Default)]
struct FlushSequence {
    /// Writes (and trims, zeroings) completed, counted under the write lock.
    completed: AtomicU64,
    /// `completed` as of the last successful flush, set under the write lock.
    durable: AtomicU64,
}

/// Writes up to this size are combined with other connections' writes.
/// Larger ones take the write lock alone and are written from the request's
/// own buffer: queueing them costs a copy each, which made 1 MiB sequential
/// writes about 5 % slower without the page cache, and gathering them gained
/// nothing measurable (docs/service.md, "Writes combined across
/// connections").
const COMBINED_WRITE_MAX_BYTES: usize = 64 * 1024;

/// A write waiting for the next holder of the write lock.
#[derive(Debug)]
struct QueuedWrite {
    extent_id: u64,
    offset_bytes: u64,
    bytes: Vec<u8>,
    fua: bool,
    export: String,
    outcome: Arc<Mutex<Option<Result<(), BackendError>>>>,
}

/// How long without a write before the staging area is destaged.
pub const IDLE_DESTAGE_AFTER: Duration = Duration::from_millis(100);

/// The staging fill (percent of its capacity) from which the background
/// destager works while writes go on.
pub const DESTAGE_HIGH_WATER_PERCENT: u64 = 50;

/// The staging fill (percent) down to which it then destages.
pub const DESTAGE_LOW_WATER_PERCENT: u64 = 25;

/// How often the background destager looks.
const DESTAGE_CHECK_INTERVAL: Duration = Duration::from_millis(25);

/// Pieces a destage step is taken in: the step's CP alone, then pieces of
/// this fraction of the step, each under the write lock for a few
/// milliseconds.
pub const DESTAGE_PIECES_PER_STEP: u64 = 16;

/// How long the background destager waits between two pieces, so that the
/// clients a step kept waiting take the lock before the next step does (an
/// unlock wakes a waiter, but a thread that locks again at once wins the race).
const DESTAGE_HANDOFF: Duration = Duration::from_millis(2);

/// How long the destager waits for the write-back of a piece (a few
/// milliseconds when the host's disk keeps up). Past it, the destager goes
/// on and the write-back finishes beside it: on a host whose disk is slow to
/// take dirty pages, waiting for each `fdatasync` would hold the destage
/// back while the staging area fills and the clients' writes destage
/// inline.
const PIECE_WRITE_BACK_PATIENCE: Duration = Duration::from_millis(20);

/// Write-backs on a thread of their own, which the destager waits for a
/// bounded time ([`WriteBackWorker::write_back_within`]).
#[derive(Debug)]
struct WriteBackWorker {
    state: Arc<(Mutex<WriteBackRounds>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

/// Write-backs asked for and done, counted; `stop` ends the worker.
#[derive(Debug, Default)]
struct WriteBackRounds {
    requested: u64,
    done: u64,
    stop: bool,
}

impl WriteBackWorker {
    /// A worker writing back through `handle`, or `None` when no thread can
    /// be started.
    fn start(handle: WriteBacks) -> Option<Self> {
        let state = Arc::new((Mutex::new(WriteBackRounds::default()), Condvar::new()));
        let shared = Arc::clone(&state);
        let spawned = std::thread::Builder::new().name("write-back".to_owned()).spawn(move || {
            let (rounds, changed) = &*shared;
            loop {
                let asked = {
                    let mut state = rounds.lock().unwrap_or_else(PoisonError::into_inner);
                    while state.requested == state.done && !state.stop {
                        state = changed.wait(state).unwrap_or_else(PoisonError::into_inner);
                    }
                    if state.stop {
                        return;
                    }
                    state.requested
                };
                // Every request up to `asked` came after the writes it
                // covers, so this one write-back answers them all.
                write_back_without_lock(&handle);
                rounds.lock().unwrap_or_else(PoisonError::into_inner).done = asked;
                changed.notify_all();
            }
        });
        let thread = spawned.map_err(|error| warn!("pieces are written back at CPs only: {error}")).ok()?;
        Some(Self { state, thread: Some(thread) })
    }

    /// Asks for a write-back of everything written so far and waits for it.
    fn write_back(&self) {
        self.request_and_wait(None);
    }

    /// Asks for a write-back of everything written so far and waits for it
    /// for at most `patience`.
    fn write_back_within(&self, patience: Duration) {
        self.request_and_wait(Some(Instant::now() + patience));
    }

    fn request_and_wait(&self, deadline: Option<Instant>) {
        let (rounds, changed) = &*self.state;
        let mut state = rounds.lock().unwrap_or_else(PoisonError::into_inner);
        state.requested += 1;
        let wanted = state.requested;
        changed.notify_all();
        while state.done < wanted {
            state = match deadline {
                None => changed.wait(state).unwrap_or_else(PoisonError::into_inner),
                Some(deadline) => {
                    let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|left| !left.is_zero())
                    else {
                        return;
                    };
                    changed.wait_timeout(state, left).unwrap_or_else(PoisonError::into_inner).0
                }
            };
        }
    }
}

impl Drop for WriteBackWorker {
    fn drop(&mut self) {
        let (rounds, changed) = &*self.state;
        rounds.lock().unwrap_or_else(PoisonError::into_inner).stop = true;
        changed.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// When the last change was made, for the idle destager.
#[derive(Debug)]
struct Activity {
    started: Instant,
    last_change_ns: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self { started: Instant::now(), last_change_ns: AtomicU64::new(0) }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn record_change(&self) {
        self.last_change_ns.store(self.now_ns(), Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        Duration::from_nanos(self.now_ns().saturating_sub(self.last_change_ns.load(Ordering::Relaxed)))
    }
}

/// The background thread that destages beside the clients; stopped and
/// joined when the backend and all its exports are gone.
#[derive(Debug)]
struct BackgroundDestager {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl BackgroundDestager {
    fn start(volume: Weak<RwLock<ServiceVolume>>, activity: Arc<Activity>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let spawned = std::thread::Builder::new().name("destage".to_owned()).spawn(move || {
            // Taken once, the first time the destager looks at the volume.
            let mut write_back: Option<Option<WriteBackWorker>> = None;
            while !stopping.load(Ordering::SeqCst) {
                std::thread::sleep(DESTAGE_CHECK_INTERVAL);
                let Some(volume) = volume.upgrade() else { return };
                let write_back =
                    write_back.get_or_insert_with(|| write_back_handle(&volume).and_then(WriteBackWorker::start));
                let mut draining = false;
                // What the step under way has still to move.
                let mut plan = DestagePlan::default();
                while !stopping.load(Ordering::SeqCst) {
                    match destage_one_piece(&volume, &activity, draining, &mut plan) {
                        None => break,
                        // What the piece wrote goes to disk now, without the
                        // lock: a flush under it (a log block's, a CP's) then
                        // finds little left to write.
                        Some(Piece::Moved) => {
                            if let Some(worker) = write_back {
                                worker.write_back_within(PIECE_WRITE_BACK_PATIENCE);
                            }
                        }
                        Some(Piece::StepDue) => match begin_step(&volume, write_back.as_ref()) {
                            Some(next) => plan = next,
                            None => break,
                        },
                    }
                    draining = true;
                    // Let the clients waiting for the lock have it between pieces.
                    std::thread::sleep(DESTAGE_HANDOFF);
                }
                if draining {
                    release_destaged_space(&volume, write_back.as_ref());
                }
                // Segment cleaning (log-structured layouts), a pass at a
                // time under the lock, yielding it between passes.
                while !stopping.load(Ordering::SeqCst) && clean_one_pass(&volume) {
                    std::thread::sleep(DESTAGE_HANDOFF);
                }
            }
        });
        // Without the thread the volume still destages when staging fills.
        let thread = spawned.map_err(|error| warn!("no background destage: cannot start its thread: {error}")).ok();
        Self { stop, thread }
    }
}

/// Why the background destager takes a step now, if it does: the staging
/// area is at the high-water mark, or still above the low-water mark while
/// `draining` (the last step was taken), or holds anything while writes
/// pause (`idle`).
fn destage_reason(used_blocks: u64, capacity_blocks: u64, idle: bool, draining: bool) -> Option<&'static str> {
    let percent_of_capacity = |percent: u64| capacity_blocks.saturating_mul(percent) / 100;
    if used_blocks == 0 {
        None
    } else if used_blocks >= percent_of_capacity(DESTAGE_HIGH_WATER_PERCENT)
        || (draining && used_blocks > percent_of_capacity(DESTAGE_LOW_WATER_PERCENT))
    {
        Some("high water")
    } else if idle {
        Some("idle")
    } else {
        None
    }
}

/// What the destager does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    /// A piece of the step's plan was moved.
    Moved,
    /// The step's plan is used up: the next step begins ([`begin_step`]).
    StepDue,
}

/// One piece of a destage step under the write lock, if [`destage_reason`]
/// gives one: a [`DESTAGE_PIECES_PER_STEP`]-th of a step, taken from the
/// step's `plan`, or, when the plan is used up, the news that the next step
/// is due. `None` when there is nothing to do (then the caller stops).
fn destage_one_piece(
    volume: &RwLock<ServiceVolume>,
    activity: &Activity,
    draining: bool,
    plan: &mut DestagePlan,
) -> Option<Piece> {
    let Ok(mut volume) = volume.write() else { return None };
    let fill = volume.staging_fill();
    let idle = activity.idle_for() >= IDLE_DESTAGE_AFTER;
    let reason = destage_reason(fill.used_blocks, fill.capacity_blocks, idle, draining)?;
    if plan.is_empty() {
        return Some(Piece::StepDue);
    }
    let started = Instant::now();
    let piece_blocks = (volume.destage_step_blocks() / DESTAGE_PIECES_PER_STEP).max(1);
    match volume.destage_planned(plan, piece_blocks) {
        Ok(summary) => {
            let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
            debug!(blocks = summary.user_blocks, reason, elapsed_ms, "destage piece");
            Some(Piece::Moved)
        }
        Err(error) => {
            warn!("background destage failed: {error}");
            None
        }
    }
}

/// One segment cleaning pass under the write lock, if the volume's layout
/// needs one; returns whether it cleaned a segment (then the caller yields
/// the lock and asks again).
fn clean_one_pass(volume: &RwLock<ServiceVolume>) -> bool {
    let Ok(mut volume) = volume.write() else { return false };
    if !volume.cleaning_needed() {
        return false;
    }
    let started = Instant::now();
    match volume.clean_step() {
        Ok(report) => {
            let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
            debug!(segments = report.segments_cleaned, blocks = report.blocks_written, elapsed_ms, "cleaning pass");
            report.segments_cleaned > 0
        }
        Err(error) => {
            warn!("background segment cleaning failed: {error}");
            false
        }
    }
}

/// The volume's write-back handle, if its devices have one.
fn write_back_handle(volume: &RwLock<ServiceVolume>) -> Option<WriteBacks> {
    let volume = volume.read().ok()?;
    volume.write_back_handle().unwrap_or_else(|error| {
        warn!("background destage writes back at its CPs only: {error}");
        None
    })
}

/// Writes back what the devices have taken so far through `write_back`;
/// called without the lock (by the [`WriteBackWorker`]).
fn write_back_without_lock(write_back: &WriteBacks) {
    if let Err(error) = write_back.write_back() {
        warn!("background destage cannot write back: {error}");
    }
}

/// Begins a destage step: its CP, which makes the staging space the last
/// step emptied reusable and the space its moved blocks left on the data
/// device allocatable, then its plan (the densest windows first), each
/// under the write lock on its own with a handoff between them. What the
/// pieces wrote is written back first without the lock, so that the CP's
/// flush, made under the lock, has little left to write. Returns the plan,
/// or `None` when the CP failed or there is nothing to plan.
fn begin_step(volume: &RwLock<ServiceVolume>, write_back: Option<&WriteBackWorker>) -> Option<DestagePlan> {
    let started = Instant::now();
    if let Some(worker) = write_back {
        worker.write_back();
    }
    let written_back_ms = started.elapsed().as_secs_f64() * 1e3;
    let committed_ms = {
        let mut volume = volume.write().ok()?;
        let locked = Instant::now();
        if let Err(error) = volume.commit() {
            warn!("background destage cannot commit: {error}");
            return None;
        }
        locked.elapsed().as_secs_f64() * 1e3
    };
    std::thread::sleep(DESTAGE_HANDOFF);
    let mut volume = volume.write().ok()?;
    let locked = Instant::now();
    let step_blocks = volume.destage_step_blocks();
    let plan = volume.plan_destage_step(step_blocks);
    let planned_ms = locked.elapsed().as_secs_f64() * 1e3;
    debug!(written_back_ms, committed_ms, planned_ms, blocks = plan.remaining_blocks(), "destage step begins");
    (!plan.is_empty()).then_some(plan)
}

/// Commits after the last piece of a drain, so that the staging space it
/// emptied is reusable (the next step's CP would do it otherwise), writing
/// back first without the lock.
fn release_destaged_space(volume: &RwLock<ServiceVolume>, write_back: Option<&WriteBackWorker>) {
    if let Some(worker) = write_back {
        worker.write_back();
    }
    let Ok(mut volume) = volume.write() else { return };
    if let Err(error) = volume.commit() {
        warn!("background destage cannot commit: {error}");
    }
}

impl Drop for BackgroundDestager {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What the exports of one backend share besides the volume.
#[derive(Debug)]
struct Shared {
    flushes: FlushSequence,
    queued_writes: Mutex<Vec<QueuedWrite>>,
    activity: Arc<Activity>,
    /// Reads ahead of sequential readers (`None`: off).
    read_ahead: Option<ReadAheadWorkers>,
    /// Declared last: dropped (stopped and joined) after the rest.
    _destager: BackgroundDestager,
}

/// The [`Backend`] serving a volume's extents and snapshots.
#[derive(Debug, Clone)]
pub struct VolumeBackend {
    volume: SharedVolume,
    shared: Arc<Shared>,
}

impl VolumeBackend {
    /// A backend over `volume`, without read-ahead.
    pub fn new(volume: SharedVolume) -> Self {
        Self::with_read_ahead(volume, None)
    }

    /// A backend over `volume` reading ahead of sequential readers with
    /// `read_ahead`'s settings (`None`: every read goes to the volume).
    pub fn with_read_ahead(volume: SharedVolume, read_ahead: Option<PrefetchSettings>) -> Self {
        let activity = Arc::new(Activity::new());
        let destager = BackgroundDestager::start(Arc::downgrade(&volume), Arc::clone(&activity));
        let read_ahead = read_ahead.map(|settings| ReadAheadWorkers::start(Arc::downgrade(&volume), settings));
        let shared = Shared {
            flushes: FlushSequence::default(),
            queued_writes: Mutex::default(),
            activity,
            read_ahead,
            _destager: destager,
        };
        Self { volume, shared: Arc::new(shared) }
    }

    /// What the read-ahead has done so far (`None`: it is off).
    pub fn read_ahead_stats(&self) -> Option<ReadAheadStats> {
        self.shared.read_ahead.as_ref().map(|workers| workers.read_ahead().stats())
    }

    /// The shared volume.
    pub fn volume(&self) -> &SharedVolume {
        &self.volume
    }
}

fn poisoned(export: &str) -> BackendError {
    BackendError::Io {
        export: export.to_owned(),
        offset_bytes: 0,
        message: "the volume stopped after an internal failure; restart the server".to_owned(),
    }
}

/// Locks the volume for a change. A panic inside an engine call poisons the
/// lock; the volume's memory may then disagree with its devices, so every
/// later request fails instead of guessing.
fn lock<'a>(volume: &'a SharedVolume, export: &str) -> Result<RwLockWriteGuard<'a, ServiceVolume>, BackendError> {
    volume.write().map_err(|_| poisoned(export))
}

/// Locks the volume for a read, shared with other readers.
pub(crate) fn lock_shared<'a>(
    volume: &'a SharedVolume,
    export: &str,
) -> Result<RwLockReadGuard<'a, ServiceVolume>, BackendError> {
    volume.read().map_err(|_| poisoned(export))
}

/// What an export addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// An extent of the active volume, by id (a deleted and recreated extent of
    /// the same name is another extent: I/O to the old one fails).
    Extent { id: u64 },
    /// An extent as of a snapshot.
    Snapshot { snapshot: String, extent: String },
}

fn extent_info(name: &str, size_bytes: u64, layout: &str) -> ExportInfo {
    ExportInfo {
        name: name.to_owned(),
        size_bytes,
        read_only: false,
        description: Some(format!("Proxima extent {name} ({layout} layout)")),
        can_multi_conn: true,
        rotational: false,
    }
}

fn snapshot_info(extent: &str, snapshot: &str, size_bytes: u64) -> ExportInfo {
    ExportInfo {
        name: format!("{extent}@{snapshot}"),
        size_bytes,
        read_only: true,
        description: Some(format!("Proxima extent {extent} as of snapshot {snapshot} (read-only)")),
        can_multi_conn: true,
        rotational: false,
    }
}

impl Backend for VolumeBackend {
    type Export = VolumeExport;

    fn list_exports(&self) -> Vec<ExportInfo> {
        let Ok(mut volume) = lock(&self.volume, "") else { return Vec::new() };
        let layout = volume.policy_name().to_owned();
        let mut infos: Vec<ExportInfo> =
            volume.extents().iter().map(|extent| extent_info(&extent.name, extent.size_bytes, &layout)).collect();
        for snapshot in volume.snapshots() {
            match volume.snapshot_extents(&snapshot.name) {
                Ok(extents) => infos.extend(
                    extents.iter().map(|extent| snapshot_info(&extent.name, &snapshot.name, extent.size_bytes)),
                ),
                Err(error) => warn!(snapshot = %snapshot.name, "cannot list the snapshot's extents: {error}"),
            }
        }
        infos
    }

    fn open_export(&self, name: &str) -> Option<VolumeExport> {
        let mut volume = lock(&self.volume, name).ok()?;
        let (info, target) = match name.split_once('@') {
            None => {
                let layout = volume.policy_name().to_owned();
                let extents = volume.extents();
                let extent = if name.is_empty() {
                    extents.first()?
                } else {
                    extents.iter().find(|extent| extent.name == name)?
                };
                (extent_info(&extent.name, extent.size_bytes, &layout), Target::Extent { id: extent.id })
            }
            Some((extent, snapshot)) => {
                let extents = volume.snapshot_extents(snapshot).ok()?;
                let found = extents.iter().find(|candidate| candidate.name == extent)?;
                (
                    snapshot_info(extent, snapshot, found.size_bytes),
                    Target::Snapshot { snapshot: snapshot.to_owned(), extent: extent.to_owned() },
                )
            }
        };
        drop(volume);
        Some(VolumeExport { volume: Arc::clone(&self.volume), shared: Arc::clone(&self.shared), info, target })
    }

    /// Flushes and commits a CP: what a clean shutdown leaves needs no log replay.
    fn flush_all(&self) -> Result<(), BackendError> {
        let mut volume = lock(&self.volume, "")?;
        volume.flush().map_err(|error| backend_error("", 0, 0, error))?;
        volume.commit().map_err(|error| backend_error("", 0, 0, error))
    }
}

/// One export: an extent, or an extent as of a snapshot.
#[derive(Debug)]
pub struct VolumeExport {
    volume: SharedVolume,
    shared: Arc<Shared>,
    info: ExportInfo,
    target: Target,
}

fn take_outcome(outcome: &Mutex<Option<Result<(), BackendError>>>) -> Option<Result<(), BackendError>> {
    outcome.lock().unwrap_or_else(PoisonError::into_inner).take()
}

/// Maps an engine error to the NBD error the client sees.
fn backend_error(export: &str, offset_bytes: u64, length_bytes: u64, error: EngineError) -> BackendError {
    match error {
        EngineError::NoSpace { .. }
        | EngineError::NoSpaceForMetadata { .. }
        | EngineError::Device { source: DeviceError::NoSpace { .. }, .. } => {
            BackendError::NoSpace { export: export.to_owned(), offset_bytes, length_bytes }
        }
        EngineError::InvalidRange(reason) => BackendError::InvalidArgument { export: export.to_owned(), reason },
        other => BackendError::Io { export: export.to_owned(), offset_bytes, message: other.to_string() },
    }
}

impl VolumeExport {
    fn extent_id(&self) -> Result<u64, BackendError> {
        match &self.target {
            Target::Extent { id } => Ok(*id),
            Target::Snapshot { .. } => Err(BackendError::ReadOnly { export: self.info.name.clone() }),
        }
    }

    fn fail(&self, offset_bytes: u64, length_bytes: u64) -> impl FnOnce(EngineError) -> BackendError + '_ {
        move |error| backend_error(&self.info.name, offset_bytes, length_bytes, error)
    }

    fn write_zero_bytes(&self, offset_bytes: u64, length_bytes: u64, fua: bool) -> Result<(), BackendError> {
        let id = self.extent_id()?;
        let zeroes = vec![0u8; length_bytes.min(ZERO_PIECE_BYTES) as usize];
        let mut done = 0;
        while done < length_bytes {
            let piece = (length_bytes - done).min(ZERO_PIECE_BYTES);
            self.change(offset_bytes, length_bytes, |volume| {
                volume.write(id, offset_bytes + done, &zeroes[..piece as usize], false)
            })?;
            done += piece;
        }
        if fua {
            self.flush_covering(offset_bytes, length_bytes)?;
        }
        Ok(())
    }

    /// Runs a change (write, trim, zeroing) under the write lock and counts it
    /// as completed for flush coalescing.
    fn change(
        &self,
        offset_bytes: u64,
        length_bytes: u64,
        operation: impl FnOnce(&mut ServiceVolume) -> Result<(), EngineError>,
    ) -> Result<(), BackendError> {
        let mut volume = lock(&self.volume, &self.info.name)?;
        self.shared.activity.record_change();
        let outcome = operation(&mut volume);
        // Counted even when it failed: a failed write may have changed part of
        // its range, which a later FLUSH must cover too.
        self.shared.flushes.completed.fetch_add(1, Ordering::SeqCst);
        outcome.map_err(self.fail(offset_bytes, length_bytes))
    }

    /// Queues a small write (its bytes copied) and makes sure it is executed: by
    /// this thread, together with every other queued write, if it is still
    /// queued once this thread holds the write lock; else it was executed by
    /// the holder before, and its outcome is waiting. Every writer waits in
    /// the lock's queue, even one that finds the lock free: writing at once
    /// would save the copy, but such writers overtake the ones waiting, the
    /// destager among them (docs/service.md, "Writes combined across
    /// connections").
    fn combined_write(&self, extent_id: u64, offset_bytes: u64, data: &[u8], fua: bool) -> Result<(), BackendError> {
        let outcome = Arc::new(Mutex::new(None));
        let queued = QueuedWrite {
            extent_id,
            offset_bytes,
            bytes: data.to_vec(),
            fua,
            export: self.info.name.clone(),
            outcome: Arc::clone(&outcome),
        };
        self.shared.queued_writes.lock().unwrap_or_else(PoisonError::into_inner).push(queued);
        let mut volume = lock(&self.volume, &self.info.name)?;
        if let Some(result) = take_outcome(&outcome) {
            return result;
        }
        let batch = std::mem::take(&mut *self.shared.queued_writes.lock().unwrap_or_else(PoisonError::into_inner));
        let writes: Vec<BatchedWrite<'_>> = batch
            .iter()
            .map(|queued| BatchedWrite {
                extent_id: queued.extent_id,
                offset_bytes: queued.offset_bytes,
                bytes: &queued.bytes,
                fua: queued.fua,
            })
            .collect();
        self.shared.activity.record_change();
        let results = volume.write_batch(&writes);
        self.shared.flushes.completed.fetch_add(batch.len() as u64, Ordering::SeqCst);
        for (queued, result) in batch.iter().zip(results) {
            let result = result
                .map_err(|error| backend_error(&queued.export, queued.offset_bytes, queued.bytes.len() as u64, error));
            *queued.outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(result);
        }
        drop(volume);
        take_outcome(&outcome).expect("a write still queued when its thread held the lock was in the batch")
    }

    /// Makes durable every change completed before this call, unless a flush
    /// that started after them already did.
    fn flush_covering(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), BackendError> {
        let needed = self.shared.flushes.completed.load(Ordering::SeqCst);
        let mut volume = lock(&self.volume, &self.info.name)?;
        if self.shared.flushes.durable.load(Ordering::SeqCst) >= needed {
            return Ok(());
        }
        // Under the write lock no change runs, so everything counted so far is
        // in the volume and becomes durable with this flush.
        let covered = self.shared.flushes.completed.load(Ordering::SeqCst);
        volume.flush().map_err(self.fail(offset_bytes, length_bytes))?;
        self.shared.flushes.durable.fetch_max(covered, Ordering::SeqCst);
        Ok(())
    }
}

/// Reads `buffer.len()` bytes at `offset_bytes` of active extent `id` and
/// returns the volume's content clock (`Volume::content_clock`) as of the
/// read, taken under the same lock: beside other readers when the
/// devices allow and the read reallocates nothing, else under the write lock
/// (a read that reallocates writes, and a damaged block may be repaired from
/// the data device's redundancy).
pub(crate) fn read_active(
    volume: &SharedVolume,
    export: &str,
    id: u64,
    offset_bytes: u64,
    buffer: &mut [u8],
) -> Result<u64, BackendError> {
    let length_bytes = buffer.len() as u64;
    let fail = |error| backend_error(export, offset_bytes, length_bytes, error);
    {
        let volume = lock_shared(volume, export)?;
        if volume.supports_shared_reads() && !volume.read_would_reallocate(id, offset_bytes, length_bytes) {
            match volume.read_shared(id, offset_bytes, buffer) {
                Ok(()) => return Ok(volume.content_clock()),
                Err(EngineError::ChecksumMismatch { .. }) => {}
                Err(error) => return Err(fail(error)),
            }
        }
    }
    let mut volume = lock(volume, export)?;
    volume.read_into(id, offset_bytes, buffer).map_err(fail)?;
    Ok(volume.content_clock())
}

impl Export for VolumeExport {
    fn info(&self) -> &ExportInfo {
        &self.info
    }

    fn read(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), BackendError> {
        let length_bytes = buffer.len() as u64;
        self.info.debug_assert_in_range(offset_bytes, length_bytes);
        self.info.debug_assert_aligned(offset_bytes, length_bytes);
        match &self.target {
            Target::Extent { id } => match &self.shared.read_ahead {
                Some(workers) => workers.read_ahead().read(
                    &self.volume,
                    &self.info.name,
                    (*id, self.info.size_bytes),
                    offset_bytes,
                    buffer,
                ),
                None => read_active(&self.volume, &self.info.name, *id, offset_bytes, buffer).map(drop),
            },
            Target::Snapshot { snapshot, extent } => lock(&self.volume, &self.info.name)?
                .read_snapshot_into(snapshot, extent, offset_bytes, buffer)
                .map_err(self.fail(offset_bytes, length_bytes)),
        }
    }

    fn write(&self, offset_bytes: u64, data: &[u8], fua: bool) -> Result<(), BackendError> {
        self.info.debug_assert_writable();
        self.info.debug_assert_in_range(offset_bytes, data.len() as u64);
        self.info.debug_assert_aligned(offset_bytes, data.len() as u64);
        let id = self.extent_id()?;
        if data.len() <= COMBINED_WRITE_MAX_BYTES {
            return self.combined_write(id, offset_bytes, data, fua);
        }
        self.change(offset_bytes, data.len() as u64, |volume| volume.write(id, offset_bytes, data, fua))
    }

    fn flush(&self) -> Result<(), BackendError> {
        self.flush_covering(0, 0)
    }

    fn trim(&self, offset_bytes: u64, length_bytes: u64, fua: bool) -> Result<(), BackendError> {
        self.info.debug_assert_writable();
        self.info.debug_assert_in_range(offset_bytes, length_bytes);
        self.info.debug_assert_aligned(offset_bytes, length_bytes);
        let id = self.extent_id()?;
        self.change(offset_bytes, length_bytes, |volume| volume.trim(id, offset_bytes, length_bytes, fua))
    }

    fn write_zeroes(&self, offset_bytes: u64, length_bytes: u64, options: ZeroOptions) -> Result<(), BackendError> {
        self.info.debug_assert_writable();
        self.info.debug_assert_in_range(offset_bytes, length_bytes);
        self.info.debug_assert_aligned(offset_bytes, length_bytes);
        let id = self.extent_id()?;
        if !options.no_hole {
            // Whole blocks become holes (reading as zeroes); partial edge blocks
            // are rewritten with zeroes. Always fast.
            return self.change(offset_bytes, length_bytes, |volume| {
                volume.write_zeroes(id, offset_bytes, length_bytes, options.fua)
            });
        }
        if options.fast_zero {
            // Keeping the range allocated means writing zero blocks: not faster
            // than the client writing them itself.
            return Err(BackendError::NotSupported {
                export: self.info.name.clone(),
                operation: "fast zero",
                reason: "NO_HOLE needs zero blocks written".to_owned(),
            });
        }
        self.write_zero_bytes(offset_bytes, length_bytes, options.fua)
    }

    fn block_status(&self, offset_bytes: u64, length_bytes: u64) -> Result<Vec<StatusExtent>, BackendError> {
        self.info.debug_assert_in_range(offset_bytes, length_bytes);
        self.info.debug_assert_aligned(offset_bytes, length_bytes);
        let statuses = match &self.target {
            Target::Extent { id } => {
                lock_shared(&self.volume, &self.info.name)?.block_status(*id, offset_bytes, length_bytes)
            }
            Target::Snapshot { snapshot, extent } => {
                lock(&self.volume, &self.info.name)?.snapshot_block_status(snapshot, extent, offset_bytes, length_bytes)
            }
        }
        .map_err(self.fail(offset_bytes, length_bytes))?;
        let mut extents = Vec::with_capacity(statuses.len());
        for status in statuses {
            let state = if status.allocated { AllocationState::Data } else { AllocationState::Hole };
            push_status_extent(&mut extents, status.length_bytes, state);
        }
        Ok(extents)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::directory::{create_volume, open_volume, CreateSpec};

    fn backend_with_extent(directory: &std::path::Path) -> (VolumeBackend, crate::VolumeLock) {
        let spec = CreateSpec { data_disk_bytes: 64 << 20, flash_bytes: Some(8 << 20), ..CreateSpec::default() };
        create_volume(directory, &spec).unwrap();
        let mut open = open_volume(directory).unwrap();
        open.volume.create_extent("lun0", 16 << 20).unwrap();
        (VolumeBackend::new(Arc::new(RwLock::new(open.volume))), open.lock)
    }

    #[test]
    fn writes_from_many_threads_are_combined_and_read_back() {
        let directory = tempfile::tempdir().unwrap();
        let (backend, _lock) = backend_with_extent(directory.path());
        std::thread::scope(|scope| {
            for thread in 0..4u8 {
                let export = backend.open_export("lun0").unwrap();
                scope.spawn(move || {
                    for index in 0..64u64 {
                        let offset = (u64::from(thread) * 64 + index) * 4096;
                        export.write(offset, &[thread + 1; 4096], index % 16 == 0).unwrap();
                    }
                });
            }
        });
        let export = backend.open_export("lun0").unwrap();
        let mut buffer = vec![0u8; 4096];
        for thread in 0..4u8 {
            for index in [0u64, 31, 63] {
                export.read((u64::from(thread) * 64 + index) * 4096, &mut buffer).unwrap();
                assert!(buffer.iter().all(|&byte| byte == thread + 1), "thread {thread} block {index}");
            }
        }
        assert!(backend.shared.queued_writes.lock().unwrap().is_empty());
    }

    #[test]
    fn the_staging_area_is_destaged_once_writes_pause() {
        let directory = tempfile::tempdir().unwrap();
        let (backend, _lock) = backend_with_extent(directory.path());
        let export = backend.open_export("lun0").unwrap();
        for index in 0..32u64 {
            export.write(index * 2 * 4096, &[7; 4096], false).unwrap();
        }
        assert!(backend.volume().read().unwrap().staging_fill().used_blocks > 0);
        // Bounded wait: the destager looks every 25 ms after 100 ms idle.
        let deadline = Instant::now() + Duration::from_secs(10);
        while backend.volume().read().unwrap().staging_fill().used_blocks > 0 {
            assert!(Instant::now() < deadline, "no idle destage within 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut buffer = vec![0u8; 4096];
        export.read(62 * 4096, &mut buffer).unwrap();
        assert!(buffer.iter().all(|&byte| byte == 7));
        assert!(backend.volume().read().unwrap().stats().destage_count >= 1);
    }

    #[test]
    fn the_destager_works_beside_writes_once_staging_passes_the_high_water_mark() {
        let directory = tempfile::tempdir().unwrap();
        let (backend, _lock) = backend_with_extent(directory.path());
        let export = backend.open_export("lun0").unwrap();
        let capacity = backend.volume().read().unwrap().staging_fill().capacity_blocks;
        let high_water = capacity * DESTAGE_HIGH_WATER_PERCENT / 100;
        // Past the high-water mark, every other block of the extent's start.
        let blocks = high_water + 64;
        for index in 0..blocks {
            export.write(index * 2 * 4096, &[9; 4096], false).unwrap();
        }
        // Writes go on, never pausing for as long as an idle destage waits:
        // the staging area still comes back under the mark.
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut next = blocks;
        while backend.volume().read().unwrap().staging_fill().used_blocks >= high_water {
            assert!(Instant::now() < deadline, "no destage beside the writes within 20 s");
            export.write(next * 2 * 4096 % (16 << 20), &[9; 4096], false).unwrap();
            next += 1;
            std::thread::sleep(IDLE_DESTAGE_AFTER / 5);
        }
        let mut buffer = vec![0u8; 4096];
        for index in 0..blocks {
            export.read(index * 2 * 4096, &mut buffer).unwrap();
            assert!(buffer.iter().all(|&byte| byte == 9), "block {}", index * 2);
        }
    }

    #[test]
    fn the_destager_starts_at_high_water_drains_to_low_water_and_empties_when_idle() {
        assert_eq!(destage_reason(0, 100, true, true), None);
        assert_eq!(destage_reason(49, 100, false, false), None);
        assert_eq!(destage_reason(50, 100, false, false), Some("high water"));
        assert_eq!(destage_reason(26, 100, false, true), Some("high water"));
        assert_eq!(destage_reason(25, 100, false, true), None);
        assert_eq!(destage_reason(1, 100, true, false), Some("idle"));
    }
}
