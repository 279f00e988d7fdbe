//! The worker threads that execute requests for every connection of a server.
//!
//! Each connection queues its requests under its own id; workers take one
//! request at a time from the connections in turn (round robin), so a
//! connection with thousands of requests queued delays another one's next
//! request by at most one request per busy connection, not by its whole queue.
//! Requests of one connection may run on several workers at once (NBD lets
//! replies leave in any order).
//!
//! A task that panics is caught: the worker goes on with the next one. The
//! pool stops once asked to and every queued task has run.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use tracing::error;

/// A unit of work: one request's execution and the queuing of its reply.
pub type Task = Box<dyn FnOnce() + Send + 'static>;

/// A fixed set of worker threads shared by every connection.
#[derive(Debug)]
pub struct WorkerPool {
    shared: Arc<PoolShared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

#[derive(Debug, Default)]
struct PoolShared {
    state: Mutex<PoolState>,
    work_ready: Condvar,
}

#[derive(Default)]
struct PoolState {
    /// Each connection's queued tasks; a connection is here only while it has some.
    queues: HashMap<u64, VecDeque<Task>>,
    /// The connections with queued tasks, in the order they are served.
    turns: VecDeque<u64>,
    stopping: bool,
}

impl std::fmt::Debug for PoolState {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PoolState")
            .field("queued_tasks", &self.queues.values().map(VecDeque::len).sum::<usize>())
            .field("turns", &self.turns)
            .field("stopping", &self.stopping)
            .finish()
    }
}

impl PoolShared {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // Tasks run outside the lock, so a panic cannot leave the queues half changed.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl WorkerPool {
    /// Starts `worker_count` workers (at least one); fails if a thread cannot
    /// be created (the workers already started are stopped).
    pub fn start(worker_count: usize) -> io::Result<Self> {
        let pool = Self { shared: Arc::default(), threads: Mutex::default() };
        for index in 0..worker_count.max(1) {
            let shared = Arc::clone(&pool.shared);
            let thread =
                std::thread::Builder::new().name(format!("nbd-worker-{index}")).spawn(move || work(&shared))?;
            pool.threads.lock().unwrap_or_else(PoisonError::into_inner).push(thread);
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
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(PoisonError::into_inner));
        for thread in threads {
            // A worker catches its tasks' panics; a failed join has nothing left to clean.
            let _ = thread.join();
        }
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        self.stop();
    }
}

fn work(shared: &PoolShared) {
    while let Some(task) = next_task(shared) {
        if catch_unwind(AssertUnwindSafe(task)).is_err() {
            error!("a request task panicked; the worker goes on");
        }
    }
}

/// The next connection's next task; `None` once stopping with nothing queued.
fn next_task(shared: &PoolShared) -> Option<Task> {
    let mut state = shared.lock();
    loop {
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
            return None;
        }
        state = shared.work_ready.wait(state).unwrap_or_else(PoisonError::into_inner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

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
    fn a_panicking_task_does_not_stop_the_worker() {
        let pool = WorkerPool::start(1).unwrap();
        let (sender, receiver) = mpsc::channel();
        pool.submit(1, Box::new(|| panic!("a bug in a task")));
        pool.submit(1, Box::new(move || sender.send(42).unwrap()));
        assert_eq!(receiver.recv().unwrap(), 42);
    }
}
