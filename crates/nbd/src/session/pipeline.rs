//! Pipelined transmission: what the server lends a connection ([`Pipeline`]),
//! the connection's reply thread ([`ReplyThread`]), and the state its reading
//! thread, its reply thread and the workers executing its requests share: the
//! queue of replies waiting to be sent and the count of requests not yet
//! answered. Every request counted as begun gets exactly one reply queued.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use tracing::warn;

use super::reply::{error_reply, execute_guarded, ExecutionContext, ReplyBytes, Work};
use crate::backend::Export;
use crate::budget::{ConnectionBudget, Reservation};
use crate::buffers::BufferRecycler;
use crate::pool::WorkerPool;
use crate::protocol::Errno;

/// What the server lends a connection for pipelined transmission.
#[derive(Debug, Clone)]
pub struct Pipeline {
    /// The workers that execute requests, shared by every connection.
    pub pool: Arc<WorkerPool>,
    /// This connection's id in the pool (for taking turns).
    pub connection_id: u64,
    /// This connection's memory budget (drawn from the server's).
    pub budget: Arc<ConnectionBudget>,
    /// Buffers for payloads and replies, shared by every connection.
    pub buffers: Arc<BufferRecycler>,
    /// Set when the server stops: no further request is read, and requests
    /// not yet started are answered with `ESHUTDOWN`.
    pub server_stopping: Arc<AtomicBool>,
}

/// A connection's reply thread. The server starts it with the connection, so
/// that a connection is accepted only with every thread it needs (a client is
/// refused before its handshake rather than cut off after it); the session
/// gives it its work once the client attaches. Dropped unused, it ends.
#[derive(Debug)]
pub struct ReplyThread {
    work: Option<mpsc::SyncSender<ReplyWork>>,
    thread: Option<JoinHandle<()>>,
}

type ReplyWork = Box<dyn FnOnce() + Send + 'static>;

impl ReplyThread {
    /// Starts the thread, named `name`, waiting for its work.
    pub fn start(name: String) -> io::Result<Self> {
        let (work, receiver) = mpsc::sync_channel::<ReplyWork>(1);
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            if let Ok(work) = receiver.recv() {
                work();
            }
        })?;
        Ok(Self { work: Some(work), thread: Some(thread) })
    }

    /// Gives the thread its work; the thread to join once the work is done.
    pub(super) fn run(mut self, work: ReplyWork) -> JoinHandle<()> {
        let sender = self.work.take().expect("a reply thread is given work once");
        // The thread waits for this message; it cannot have ended.
        let _ = sender.send(work);
        self.thread.take().expect("a reply thread is given work once")
    }
}

impl Drop for ReplyThread {
    fn drop(&mut self) {
        drop(self.work.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A reply waiting for the reply thread, with the memory its request reserved.
#[derive(Debug)]
struct QueuedReply {
    reply: ReplyBytes,
    _reservation: Reservation,
}

/// What the reading and the reply threads of a connection know of each other.
#[derive(Debug, Default)]
pub(super) struct ReplyQueue {
    ready: VecDeque<QueuedReply>,
    /// Requests read and not yet answered (executing, or their reply queued).
    unanswered: usize,
    reading_done: bool,
    /// Sending failed: the client is gone or shutdown cut the connection.
    broken: bool,
}

/// A connection in the transmission phase, shared by its reading thread, its
/// reply thread and the workers executing its requests.
#[derive(Debug)]
pub(super) struct Connection<E> {
    pub(super) export: E,
    pub(super) structured: bool,
    pub(super) label: String,
    pub(super) replies: Mutex<ReplyQueue>,
    pub(super) reply_ready: Condvar,
    pub(super) budget: Arc<ConnectionBudget>,
    pub(super) buffers: Arc<BufferRecycler>,
    pub(super) server_stopping: Arc<AtomicBool>,
}

/// Replies smaller than this are gathered and sent with one system call.
const REPLY_GATHERING_BYTES: usize = 64 << 10;

impl<E: Export> Connection<E> {
    fn lock(&self) -> MutexGuard<'_, ReplyQueue> {
        self.replies.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn is_broken(&self) -> bool {
        self.lock().broken
    }

    pub(super) fn begin_request(&self) {
        self.lock().unanswered += 1;
    }

    pub(super) fn finish_reading(&self) {
        self.lock().reading_done = true;
        self.reply_ready.notify_all();
    }

    /// Runs on a worker: executes the request, unless the server is stopping,
    /// and queues its reply.
    pub(super) fn execute(&self, work: Work, reservation: Reservation) {
        let reply = if self.server_stopping.load(Ordering::SeqCst) {
            error_reply(work.header.cookie, Errno::Shutdown, "the server is shutting down", self.structured)
        } else {
            let context =
                ExecutionContext { structured: self.structured, connection: &self.label, buffers: &self.buffers };
            execute_guarded(&self.export, work, &context)
        };
        self.queue_reply(reply, reservation);
    }

    /// Queues the reply of a request counted by [`Connection::begin_request`]
    /// (or drops it, and its reservation, once sending has failed). Every
    /// counted request gets exactly one call: the reply thread waits for them.
    pub(super) fn queue_reply(&self, reply: ReplyBytes, reservation: Reservation) {
        let mut queue = self.lock();
        if queue.broken {
            queue.unanswered -= 1;
            drop(queue);
            self.buffers.give_back(reply.buffer);
            return;
        }
        queue.ready.push_back(QueuedReply { reply, _reservation: reservation });
        drop(queue);
        self.reply_ready.notify_one();
    }

    /// The reply thread: sends replies as they are queued, gathering the ready
    /// ones into as few writes as possible, and releases each one's memory once
    /// sent. Ends when reading has ended and every request is answered, or at
    /// the first failed write (then every queued and later reply is dropped).
    pub(super) fn send_replies<W: Write>(&self, writer: W) -> io::Result<()> {
        let mut writer = io::BufWriter::with_capacity(REPLY_GATHERING_BYTES, writer);
        loop {
            let batch = {
                let mut queue = self.lock();
                while queue.ready.is_empty() && !(queue.reading_done && queue.unanswered == 0) {
                    queue = self.reply_ready.wait(queue).unwrap_or_else(PoisonError::into_inner);
                }
                if queue.ready.is_empty() {
                    return Ok(());
                }
                std::mem::take(&mut queue.ready)
            };
            let sent = batch
                .iter()
                .try_for_each(|queued| writer.write_all(queued.reply.as_slice()))
                .and_then(|()| writer.flush());
            let count = batch.len();
            for queued in batch {
                self.buffers.give_back(queued.reply.buffer);
            }
            let mut queue = self.lock();
            queue.unanswered -= count;
            if let Err(error) = sent {
                if matches!(error.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) {
                    warn!(
                        connection = %self.label,
                        "the client read none of its replies within the reply timeout: dropping them and the connection"
                    );
                }
                queue.broken = true;
                queue.unanswered -= queue.ready.len();
                let dropped = std::mem::take(&mut queue.ready);
                drop(queue);
                drop(dropped);
                // A reading thread waiting for memory must not wait for replies
                // that will never be sent.
                self.budget.cancel();
                return Err(error);
            }
        }
    }
}
