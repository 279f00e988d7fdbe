//! The worker threads that execute requests for every connection of a server.
//!
//! Each connection queues its requests under its own id; workers take one
//! request at a time from the connections in turn (round robin), so a
//! connection with thousands of requests queued delays another one's next
//! request by at most one request per busy connection, not by its whole queue.
//! Requests of one connection may run on several workers at once (NBD lets
//! replies leave in any order).
//!
//! A task that waits for something other than the pool's tasks — a read
//! waiting for a prefetch another thread is reading — says so with
//! [`blocking`]: while it waits, a spare worker takes its place, so the other
//! connections' requests do not queue behind a waiting one. Spares retire as
//! soon as the pool again has more free workers than it was started with.
//!
//! A task that panics is caught: the worker goes on with the next one. The
//! pool stops once asked to and every queued task has run.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use tracing::{error, warn};

/// Spare workers a pool starts at most, beyond those it was started with,
/// for tasks waiting in [`blocking`]; past it a waiting task holds its worker.
pub const SPARE_WORKERS_MAX: usize = 512;

thread_local! {
    /// The pool whose worker this thread is, if it is one.
    static WORKER_OF: RefCell<Option<Arc<PoolShared>>> = const { RefCell::new(None) };
}

/// A unit of work: one request's execution and the queuing of its reply.
pub type Task = Box<dyn FnOnce() + Send + 'static>;

/// A set of worker threads shared by every connection: as many as it was
/// started with free to run tasks, plus spares for tasks in [`blocking`].
#[derive(Debug)]
pub struct WorkerPool {
    shared: Arc<PoolShared>,
}

#[derive(Debug, Default)]
struct PoolShared {
    state: Mutex<PoolState>,
    work_ready: Condvar,
    /// Every worker started, spares included, to join at the end.
    threads: Mutex<Vec<JoinHandle<()>>>,
}

#[derive(Default)]
struct PoolState {
    /// Each connection's queued tasks; a connection is here only while it has some.
    queues: HashMap<u64, VecDeque<Task>>,
    /// The connections with queued tasks, in the order they are served.
    turns: VecDeque<u64>,
    stopping: bool,
    /// Workers free to run tasks when none waits: the number started.
    free_target: usize,
    /// Workers running (spares included).
    workers: usize,
    /// Of those, the ones whose task waits in [`blocking`].
    blocked: usize,
}

impl PoolState {
    /// Workers not waiting in [`blocking`] (a task may wait in it more than
    /// once at a time, so this saturates).
    fn free_workers(&self) -> usize {
        self.workers.saturating_sub(self.blocked)
    }
}

impl std::fmt::Debug for PoolState {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PoolState")
            .field("queued_tasks", &self.queues.values().map(VecDeque::len).sum::<usize>())
            .field("turns", &self.turns)
            .field("stopping", &self.stopping)
            .field("workers", &self.workers)
            .field("blocked", &self.blocked)
            .finish()
    }
}

impl PoolShared {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // Tasks run outside the lock, so a panic cannot leave the queues half changed.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a worker thread named `name` (counted in `workers` by the caller).
    fn spawn_worker(self: &Arc<Self>, name: String) -> io::Result<()> {
        let shared = Arc::clone(self);
        let thread = std::thread::Builder::new().name(name).spawn(move || work(shared))?;
        self.threads.lock().unwrap_or_else(PoisonError::into_inner).push(thread);
        Ok(())
    }

    /// A worker's task begins to wait: start a spare if the free workers
    /// fall below the number the pool was started with.
    fn begin_blocking(self: &Arc<Self>) {
        let mut state = self.lock();
        state.blocked += 1;
        let wanted = state.free_workers() < state.free_target && state.workers < state.free_target + SPARE_WORKERS_MAX;
        if !wanted {
            return;
        }
        state.workers += 1;
        drop(state);
        if let Err(error) = self.spawn_worker("nbd-worker-spare".to_owned()) {
            warn!("a spare worker cannot start while a request waits: {error}");
            self.lock().workers -= 1;
        }
    }

    /// The waiting task goes on; a surplus worker retires when it next looks for work.
    fn end_blocking(&self) {
        self.lock().blocked -= 1;
    }
}

/// Runs `wait`, which waits for something other than this pool's tasks.
/// Called on a pool's worker, the pool keeps as many other workers free as it
/// was started with while `wait` runs (starting a spare if need be, at most
/// [`SPARE_WORKERS_MAX`]); on any other thread it just runs `wait`.
pub fn blocking<T>(wait: impl FnOnce() -> T) -> T {
    struct Unblock(Arc<PoolShared>);
    impl Drop for Unblock {
        fn drop(&mut self) {
            self.0.end_blocking();
        }
    }
    let Some(shared) = WORKER_OF.with(|pool| pool.borrow().clone()) else { return wait() };
    shared.begin_blocking();
    let _unblock = Unblock(shared);
    wait()
}

impl WorkerPool {
    /// Starts `worker_count` workers (at least one); fails if a thread cannot
    /// be created (the workers already started are stopped).
    pub fn start(worker_count: usize) -> io::Result<Self> {
        let pool = Self { shared: Arc::default() };
        let worker_count = worker_count.max(1);
        pool.shared.lock().free_target = worker_count;
        for index in 0..worker_count {
            pool.shared.lock().workers += 1;
            if let Err(error) = pool.shared.spawn_worker(format!("nbd-worker-{index}")) {
                pool.shared.lock().workers -= 1;
                return Err(error);
            }
        }
        Ok(pool)
    }

    /// Queues `task` as connection `connection_id`'s.
    pub fn submit(&self, connection_id: u64, task: Task) {
        let mut state = self.shared.lock();
        let queue = state.queues.entry(connection_id).or_default();
        queue.push_back(task);
        if queue.len() == 1 {
            state.turns.push_back(connection_id);
        }
        drop(state);
        self.shared.work_ready.notify_one();
    }

    /// Runs every queued task, then stops and joins the workers.
    pub fn stop(&self) {
        self.shared.lock().stopping = true;
        self.shared.work_ready.notify_all();
        // A task still running may start a spare while the others are joined.
        loop {
            let threads = std::mem::take(&mut *self.shared.threads.lock().unwrap_or_else(PoisonError::into_inner));
            if threads.is_empty() {
                break;
            }
            for thread in threads {
                // A worker catches its tasks' panics; a failed join has nothing left to clean.
                let _ = thread.join();
            }
        }
    }

    /// Workers running now, spares included.
    #[cfg(test)]
    fn workers(&self) -> usize {
        self.shared.lock().workers
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        self.stop();
    }
}

fn work(shared: Arc<PoolShared>) {
    WORKER_OF.with(|pool| *pool.borrow_mut() = Some(Arc::clone(&shared)));
    while let Some(task) = next_task(&shared) {
        if catch_unwind(AssertUnwindSafe(task)).is_err() {
            error!("a request task panicked; the worker goes on");
        }
    }
}

/// The next connection's next task; `None` once stopping with nothing
/// queued, or when this worker is surplus (the pool has more free workers
/// than it was started with, a waiting task having gone on).
fn next_task(shared: &PoolShared) -> Option<Task> {
    let mut state = shared.lock();
    loop {
        if state.free_workers() > state.free_target {
            state.workers -= 1;
            return None;
        }
        if let Some(connection_id) = state.turns.pop_front() {
            let queue = state.queues.get_mut(&connection_id).expect("a connection in turn has queued tasks");
            let task = queue.pop_front().expect("a connection's queue is never left empty");
            if queue.is_empty() {
                state.queues.remove(&connection_id);
            } else {
                state.turns.push_back(connection_id);
            }
            return Some(task);
        }
        if state.stopping {
            state.workers -= 1;
            return None;
        }
        state = shared.work_ready.wait(state).unwrap_or_else(PoisonError::into_inner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn connections_take_turns() {
        // One worker, held busy while the queues fill, then released: the order
        // it runs the tasks in is the round robin.
        let pool = WorkerPool::start(1).unwrap();
        let (gate_sender, gate) = mpsc::channel::<()>();
        pool.submit(0, Box::new(move || gate.recv().unwrap()));
        let order = Arc::new(Mutex::new(Vec::new()));
        for (connection, count) in [(1u64, 4), (2, 2), (3, 1)] {
            for index in 0..count {
                let order = Arc::clone(&order);
                pool.submit(connection, Box::new(move || order.lock().unwrap().push((connection, index))));
            }
        }
        gate_sender.send(()).unwrap();
        pool.stop();
        let order = order.lock().unwrap().clone();
        assert_eq!(order, vec![(1, 0), (2, 0), (3, 0), (1, 1), (2, 1), (1, 2), (1, 3)]);
    }

    #[test]
    fn a_waiting_task_leaves_its_worker_to_other_connections() {
        let pool = WorkerPool::start(1).unwrap();
        let (gate_sender, gate) = mpsc::channel::<()>();
        let (waiting_sender, waiting) = mpsc::channel();
        pool.submit(
            0,
            Box::new(move || {
                waiting_sender.send(()).unwrap();
                blocking(|| gate.recv().unwrap());
            }),
        );
        waiting.recv().unwrap();
        // With the only worker waiting, another connection's task still runs.
        let (sender, receiver) = mpsc::channel();
        pool.submit(1, Box::new(move || sender.send(7).unwrap()));
        assert_eq!(receiver.recv_timeout(Duration::from_secs(10)), Ok(7));
        assert_eq!(pool.workers(), 2, "one spare while the task waits");
        gate_sender.send(()).unwrap();
        // The surplus worker retires once the wait is over.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while pool.workers() > 1 {
            assert!(std::time::Instant::now() < deadline, "the spare never retired");
            std::thread::sleep(Duration::from_millis(1));
        }
        pool.stop();
    }

    #[test]
    fn spares_stop_at_their_limit() {
        let pool = WorkerPool::start(1).unwrap();
        let (gate_sender, gate) = mpsc::channel::<()>();
        let gate = Arc::new(Mutex::new(gate));
        let (waiting_sender, waiting) = mpsc::channel();
        for connection in 0..=SPARE_WORKERS_MAX as u64 {
            let (gate, waiting_sender) = (Arc::clone(&gate), waiting_sender.clone());
            pool.submit(
                connection,
                Box::new(move || {
                    blocking(|| {
                        waiting_sender.send(()).unwrap();
                        gate.lock().unwrap().recv().unwrap();
                    });
                }),
            );
        }
        for _ in 0..=SPARE_WORKERS_MAX {
            waiting.recv().unwrap();
        }
        assert_eq!(pool.workers(), 1 + SPARE_WORKERS_MAX);
        for _ in 0..=SPARE_WORKERS_MAX {
            gate_sender.send(()).unwrap();
        }
        pool.stop();
        assert_eq!(pool.workers(), 0, "every worker ended");
    }

    #[test]
    fn blocking_off_a_pool_just_runs() {
        assert_eq!(blocking(|| 5), 5);
    }

    #[test]
    fn a_panicking_task_does_not_stop_the_worker() {
        let pool = WorkerPool::start(1).unwrap();
        let (sender, receiver) = mpsc::channel();
        pool.submit(1, Box::new(|| panic!("a bug in a task")));
        pool.submit(1, Box::new(move || sender.send(42).unwrap()));
        assert_eq!(receiver.recv().unwrap(), 42);
    }
}
