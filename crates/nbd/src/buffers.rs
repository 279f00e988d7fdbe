//! Buffers for write payloads and read replies, recycled across requests and
//! connections so that a request's buffer is neither allocated nor zeroed each
//! time (a recycled buffer is zeroed only where it grows; the transport or the
//! export overwrites every byte used).
//!
//! A buffer's data start on a [`DATA_ALIGNMENT_BYTES`] boundary (for a read
//! reply, the byte after the reply header), so that an export bypassing the
//! page cache (O_DIRECT) hands a request's data to the kernel as they are,
//! without copying them into an aligned buffer of its own. The alignment is
//! carved out of a slightly larger `Vec`: no unsafe allocation is needed.
//!
//! Allocation never aborts the process: a buffer that cannot be allocated is an
//! error the caller answers with `ENOMEM`. The recycler keeps at most
//! [`RETAINED_BYTES_MAX`] of idle buffers, none larger than
//! [`RETAINED_BUFFER_BYTES_MAX`]: with the memory budgets, this bounds what the
//! server holds for request data.

use std::collections::TryReserveError;
use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, PoisonError};

/// Idle buffers kept for reuse, in all.
pub const RETAINED_BYTES_MAX: usize = 32 << 20;
/// Larger buffers are freed after their request rather than kept.
pub const RETAINED_BUFFER_BYTES_MAX: usize = 4 << 20;
/// Smaller buffers are not worth keeping.
const RETAINED_BUFFER_BYTES_MIN: usize = 4096;
/// The boundary a buffer's data start on: the largest logical block size
/// O_DIRECT asks of a buffer's address on common devices.
pub const DATA_ALIGNMENT_BYTES: usize = 4096;
/// Storage beyond a buffer's length that lets its data start be aligned.
const ALIGNMENT_SLACK_BYTES: usize = DATA_ALIGNMENT_BYTES - 1;

/// A request's bytes: `length` bytes of `storage` from `start`.
#[derive(Debug, Default)]
pub struct RequestBuffer {
    storage: Vec<u8>,
    start: usize,
    length: usize,
}

impl RequestBuffer {
    /// Bytes this buffer could hold if it were aligned afresh (what recycling
    /// it offers).
    fn reusable_bytes(&self) -> usize {
        self.storage.capacity().saturating_sub(ALIGNMENT_SLACK_BYTES)
    }
}

impl From<Vec<u8>> for RequestBuffer {
    /// Bytes as they are, without alignment (encoded replies without data).
    fn from(storage: Vec<u8>) -> Self {
        let length = storage.len();
        Self { storage, start: 0, length }
    }
}

impl Deref for RequestBuffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.length]
    }
}

impl DerefMut for RequestBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.length]
    }
}

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
    /// A buffer of exactly `length` initialized bytes (contents unspecified)
    /// whose byte `aligned_at` lies on a [`DATA_ALIGNMENT_BYTES`] boundary,
    /// reused if an idle one is large enough.
    pub fn take(&self, length: usize, aligned_at: usize) -> Result<RequestBuffer, TryReserveError> {
        let capacity = length + ALIGNMENT_SLACK_BYTES;
        let reused = {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            // The smallest idle buffer that holds `length` wherever it starts.
            let best = idle
                .buffers
                .iter()
                .enumerate()
                .filter(|(_, storage)| storage.capacity() >= capacity)
                .min_by_key(|(_, storage)| storage.capacity())
                .map(|(index, _)| index);
            best.map(|index| {
                let storage = idle.buffers.swap_remove(index);
                idle.bytes -= storage.capacity();
                storage
            })
        };
        let mut storage = match reused {
            Some(storage) => storage,
            None => {
                let mut storage = Vec::new();
                storage.try_reserve_exact(capacity)?;
                storage
            }
        };
        let address = storage.as_ptr() as usize + aligned_at;
        let start = address.next_multiple_of(DATA_ALIGNMENT_BYTES) - address;
        // Zeroes only what was never initialized; within the capacity, so the
        // storage does not move and `start` stays aligned.
        storage.resize(start + length, 0);
        Ok(RequestBuffer { storage, start, length })
    }

    /// Returns a buffer for reuse (or frees it).
    pub fn give_back(&self, buffer: RequestBuffer) {
        if !(RETAINED_BUFFER_BYTES_MIN..=RETAINED_BUFFER_BYTES_MAX).contains(&buffer.reusable_bytes()) {
            return;
        }
        let storage = buffer.storage;
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.bytes + storage.capacity() <= RETAINED_BYTES_MAX {
            idle.bytes += storage.capacity();
            idle.buffers.push(storage);
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

    fn is_aligned(bytes: &[u8]) -> bool {
        (bytes.as_ptr() as usize).is_multiple_of(DATA_ALIGNMENT_BYTES)
    }

    #[test]
    fn buffers_are_reused_and_sized_exactly() {
        let recycler = BufferRecycler::default();
        let mut buffer = recycler.take(65536, 0).unwrap();
        assert_eq!(buffer.len(), 65536);
        buffer[0] = 7;
        let storage = buffer.storage.as_ptr();
        recycler.give_back(buffer);
        assert_eq!(recycler.idle_bytes(), 65536 + ALIGNMENT_SLACK_BYTES);
        let again = recycler.take(8192, 0).unwrap();
        assert_eq!((again.storage.as_ptr(), again.len()), (storage, 8192), "the idle buffer is reused");
        assert_eq!(recycler.idle_bytes(), 0);
    }

    #[test]
    fn the_data_start_on_an_alignment_boundary_new_or_reused() {
        let recycler = BufferRecycler::default();
        for (length, aligned_at) in [(65536, 0), (65536 + 16, 16), (4096 + 28, 28), (1 << 20, 0), (8192 + 16, 16)] {
            let mut buffer = recycler.take(length, aligned_at).unwrap();
            assert_eq!(buffer.len(), length);
            assert!(is_aligned(&buffer[aligned_at..]), "{length} bytes aligned at {aligned_at}");
            buffer.fill(0xa5);
            assert!(buffer.storage.len() <= buffer.storage.capacity());
            recycler.give_back(buffer);
        }
        assert!(recycler.idle_bytes() > 0, "the later buffers were reused ones");
    }

    #[test]
    fn encoded_bytes_are_a_buffer_as_they_are() {
        let buffer = RequestBuffer::from(vec![1, 2, 3]);
        assert_eq!(&buffer[..], &[1, 2, 3]);
        assert!(RequestBuffer::default().is_empty());
    }

    #[test]
    fn retention_is_bounded() {
        let recycler = BufferRecycler::default();
        let too_large = recycler.take(RETAINED_BUFFER_BYTES_MAX + 1, 0).unwrap();
        recycler.give_back(too_large);
        recycler.give_back(RequestBuffer::from(vec![0; 100]));
        assert_eq!(recycler.idle_bytes(), 0, "too large and too small buffers are freed");
        let largest = RETAINED_BUFFER_BYTES_MAX + ALIGNMENT_SLACK_BYTES;
        for _ in 0..(RETAINED_BYTES_MAX / largest + 2) {
            recycler.give_back(RequestBuffer::from(vec![0; largest]));
        }
        assert_eq!(recycler.idle_bytes(), RETAINED_BYTES_MAX / largest * largest);
        assert!(recycler.idle_bytes() <= RETAINED_BYTES_MAX);
    }

    #[test]
    fn an_impossible_allocation_is_an_error_not_an_abort() {
        assert!(BufferRecycler::default().take(usize::MAX / 2, 0).is_err());
    }
}
