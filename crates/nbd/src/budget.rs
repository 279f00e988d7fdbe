//! Memory budgets for the request and reply data a server holds: one for the
//! whole server and one per connection. Before a request's payload is read or
//! its reply allocated, the connection's reader reserves the bytes the request
//! can need from both; when the budgets are spent it waits (and so stops
//! reading that connection's requests) until replies have been sent and their
//! reservations released. This is the server's backpressure: a client that
//! pipelines requests without reading the replies pins at most its
//! connection's budget, and all clients together at most the server's.
//!
//! Invariants: the bytes reserved on a connection never exceed its limit, and
//! the bytes reserved on all connections never exceed the server's limit (both
//! counters change together, under the server budget's one lock). A
//! [`Reservation`] releases its bytes when dropped, whatever becomes of its
//! request. A waiting reservation gives up (returns `None`) when its connection
//! is cancelled or the server budget is closed at shutdown.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// The server-wide budget, shared by every connection.
#[derive(Debug)]
pub struct MemoryBudget {
    limit_bytes: u64,
    state: Mutex<BudgetState>,
    released: Condvar,
}

#[derive(Debug, Default)]
struct BudgetState {
    used_bytes: u64,
    closed: bool,
}

impl MemoryBudget {
    /// A budget of `limit_bytes` for the whole server.
    pub fn new(limit_bytes: u64) -> Arc<Self> {
        Arc::new(Self { limit_bytes, state: Mutex::default(), released: Condvar::new() })
    }

    /// The bytes reserved now, on all connections.
    pub fn used_bytes(&self) -> u64 {
        self.lock().used_bytes
    }

    /// Makes every waiting and later reservation give up (at shutdown).
    pub fn close(&self) {
        self.lock().closed = true;
        self.released.notify_all();
    }

    /// A connection's budget of `limit_bytes` within this one.
    pub fn connection(self: &Arc<Self>, limit_bytes: u64) -> Arc<ConnectionBudget> {
        Arc::new(ConnectionBudget {
            server: Arc::clone(self),
            limit_bytes,
            used_bytes: std::sync::atomic::AtomicU64::new(0),
            cancelled: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, BudgetState> {
        // The state is two counters changed together: a panic cannot leave it
        // half updated.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One connection's budget, drawn from the server's.
#[derive(Debug)]
pub struct ConnectionBudget {
    server: Arc<MemoryBudget>,
    limit_bytes: u64,
    /// Changed only under the server budget's lock.
    used_bytes: std::sync::atomic::AtomicU64,
    cancelled: AtomicBool,
}

impl ConnectionBudget {
    /// The bytes this connection has reserved now.
    pub fn used_bytes(&self) -> u64 {
        self.used_bytes.load(Ordering::SeqCst)
    }

    /// Reserves `bytes`, waiting until both this connection's and the server's
    /// budgets have room. `None` when the connection was cancelled or the
    /// server budget closed while waiting.
    ///
    /// # Panics
    /// If `bytes` exceeds the connection's limit (it could never be granted:
    /// the server checks its settings so that the largest request fits).
    pub fn reserve(self: &Arc<Self>, bytes: u64) -> Option<Reservation> {
        assert!(bytes <= self.limit_bytes, "a reservation of {bytes} bytes exceeds the connection limit");
        assert!(bytes <= self.server.limit_bytes, "a reservation of {bytes} bytes exceeds the server limit");
        let mut state = self.server.lock();
        loop {
            if state.closed || self.cancelled.load(Ordering::SeqCst) {
                return None;
            }
            let connection_used = self.used_bytes.load(Ordering::SeqCst);
            if connection_used + bytes <= self.limit_bytes && state.used_bytes + bytes <= self.server.limit_bytes {
                state.used_bytes += bytes;
                self.used_bytes.store(connection_used + bytes, Ordering::SeqCst);
                return Some(Reservation { connection: Arc::clone(self), bytes });
            }
            state = self.server.released.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Makes every waiting and later reservation of this connection give up
    /// (its client is gone, or the connection is ending).
    pub fn cancel(&self) {
        let _state = self.server.lock();
        self.cancelled.store(true, Ordering::SeqCst);
        self.server.released.notify_all();
    }

    fn release(&self, bytes: u64) {
        let mut state = self.server.lock();
        state.used_bytes -= bytes;
        self.used_bytes.fetch_sub(bytes, Ordering::SeqCst);
        drop(state);
        self.server.released.notify_all();
    }
}

/// Bytes reserved for one request, released when dropped.
#[derive(Debug)]
pub struct Reservation {
    connection: Arc<ConnectionBudget>,
    bytes: u64,
}

impl Reservation {
    /// The bytes reserved.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.connection.release(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn reservations_are_bounded_per_connection_and_in_all() {
        let server = MemoryBudget::new(100);
        let first = server.connection(60);
        let second = server.connection(60);
        let a = first.reserve(60).unwrap();
        assert_eq!(first.used_bytes(), 60);
        let b = second.reserve(40).unwrap();
        assert_eq!(server.used_bytes(), 100);
        drop(a);
        assert_eq!(server.used_bytes(), 40);
        let c = first.reserve(50).unwrap();
        assert_eq!((first.used_bytes(), second.used_bytes(), server.used_bytes()), (50, 40, 90));
        drop((b, c));
        assert_eq!(server.used_bytes(), 0);
    }

    #[test]
    fn a_reservation_waits_for_room_and_cancelling_stops_the_wait() {
        let server = MemoryBudget::new(100);
        let connection = server.connection(50);
        let held = connection.reserve(50).unwrap();
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| connection.reserve(10).map(|reservation| reservation.bytes()));
            std::thread::sleep(Duration::from_millis(20));
            assert!(!waiter.is_finished(), "no room yet");
            drop(held);
            assert_eq!(waiter.join().unwrap(), Some(10));
        });
        let held = connection.reserve(50).unwrap();
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| connection.reserve(10).is_none());
            connection.cancel();
            assert!(waiter.join().unwrap(), "a cancelled connection's wait gives up");
        });
        drop(held);
        assert!(connection.reserve(1).is_none(), "and so does every later one");
    }

    #[test]
    fn closing_the_server_budget_stops_every_wait() {
        let server = MemoryBudget::new(10);
        let first = server.connection(10);
        let second = server.connection(10);
        let _held = first.reserve(10).unwrap();
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| second.reserve(5).is_none());
            server.close();
            assert!(waiter.join().unwrap());
        });
    }
}
