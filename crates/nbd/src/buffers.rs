//! Buffers for write payloads and read replies, recycled across requests and
//! connections so that a request's buffer is neither allocated nor zeroed each
//! time (a recycled buffer is zeroed only where it grows; the transport or the
//! export overwrites every byte used).
//!
//! Allocation never aborts the process: a buffer that cannot be allocated is an
//! error the caller answers with `ENOMEM`. The recycler keeps at most
//! [`RETAINED_BYTES_MAX`] of idle buffers, none larger than
//! [`RETAINED_BUFFER_BYTES_MAX`]: with the memory budgets, this bounds what the
//! server holds for request data.

use std::collections::TryReserveError;
use std::sync::{Mutex, PoisonError};

/// Idle buffers kept for reuse, in all.
pub const RETAINED_BYTES_MAX: usize = 32 << 20;
/// Larger buffers are freed after their request rather than kept.
pub const RETAINED_BUFFER_BYTES_MAX: usize = 4 << 20;
/// Smaller buffers are not worth keeping.
const RETAINED_BUFFER_BYTES_MIN: usize = 4096;

/// A pool of idle buffers.
#[derive(Debug, Default)]
pub struct BufferRecycler {
    idle: Mutex<Idle>,
}

#[derive(Debug, Default)]
struct Idle {
    buffers: Vec<Vec<u8>>,
    bytes: usize,
}

impl BufferRecycler {
    /// A buffer of exactly `length` initialized bytes (contents unspecified),
    /// reused if an idle one is large enough.
    pub fn take(&self, length: usize) -> Result<Vec<u8>, TryReserveError> {
        let reused = {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            // The smallest idle buffer that holds `length`.
            let best = idle
                .buffers
                .iter()
                .enumerate()
                .filter(|(_, buffer)| buffer.capacity() >= length)
                .min_by_key(|(_, buffer)| buffer.capacity())
                .map(|(index, _)| index);
            best.map(|index| {
                let buffer = idle.buffers.swap_remove(index);
                idle.bytes -= buffer.capacity();
                buffer
            })
        };
        let mut buffer = match reused {
            Some(buffer) => buffer,
            None => {
                let mut buffer = Vec::new();
                buffer.try_reserve_exact(length)?;
                buffer
            }
        };
        // Zeroes only what was never initialized; truncating keeps the capacity.
        buffer.resize(length, 0);
        Ok(buffer)
    }

    /// Returns a buffer for reuse (or frees it).
    pub fn give_back(&self, buffer: Vec<u8>) {
        let capacity = buffer.capacity();
        if !(RETAINED_BUFFER_BYTES_MIN..=RETAINED_BUFFER_BYTES_MAX).contains(&capacity) {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.bytes + capacity <= RETAINED_BYTES_MAX {
            idle.bytes += capacity;
            idle.buffers.push(buffer);
        }
    }

    /// Bytes held in idle buffers.
    pub fn idle_bytes(&self) -> usize {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_and_sized_exactly() {
        let recycler = BufferRecycler::default();
        let mut buffer = recycler.take(65536).unwrap();
        assert_eq!(buffer.len(), 65536);
        buffer[0] = 7;
        let pointer = buffer.as_ptr();
        recycler.give_back(buffer);
        assert_eq!(recycler.idle_bytes(), 65536);
        let again = recycler.take(8192).unwrap();
        assert_eq!((again.as_ptr(), again.len()), (pointer, 8192), "the idle buffer is reused");
        assert_eq!(recycler.idle_bytes(), 0);
    }

    #[test]
    fn retention_is_bounded() {
        let recycler = BufferRecycler::default();
        recycler.give_back(vec![0; RETAINED_BUFFER_BYTES_MAX + 1]);
        recycler.give_back(vec![0; 100]);
        assert_eq!(recycler.idle_bytes(), 0, "too large and too small buffers are freed");
        for _ in 0..(RETAINED_BYTES_MAX / RETAINED_BUFFER_BYTES_MAX + 2) {
            recycler.give_back(vec![0; RETAINED_BUFFER_BYTES_MAX]);
        }
        assert_eq!(recycler.idle_bytes(), RETAINED_BYTES_MAX);
    }

    #[test]
    fn an_impossible_allocation_is_an_error_not_an_abort() {
        assert!(BufferRecycler::default().take(usize::MAX / 2).is_err());
    }
}
