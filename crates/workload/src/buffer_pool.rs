//! An LRU buffer pool of page frames, write-back, as the HyLog paper's
//! simulator puts one between its workloads and the disk layout: a hit costs
//! no I/O; a miss reads the page into the least recently used frame, after
//! writing that frame's page back if it is dirty (by the access that needs the
//! frame: there are no background page cleaners).

use crate::request::Operation;

/// A physical page I/O the buffer pool issues for an access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageIo {
    /// Read or write.
    pub operation: Operation,
    /// The page.
    pub page: u64,
}

/// An LRU buffer pool of page frames, write-back.
#[derive(Debug, Clone)]
pub struct BufferPool {
    /// Frame of each page, or `NO_FRAME`.
    frame_of_page: Vec<u32>,
    page_of_frame: Vec<u64>,
    dirty: Vec<bool>,
    /// Doubly linked LRU list over frames: most recent at `head`.
    newer: Vec<u32>,
    older: Vec<u32>,
    head: u32,
    tail: u32,
    used: u32,
}

const NO_FRAME: u32 = u32::MAX;

impl BufferPool {
    /// A pool of `frames` frames over pages `0..page_count`, empty.
    ///
    /// # Panics
    /// With no frame.
    pub fn new(frames: u32, page_count: u64) -> BufferPool {
        assert!(frames >= 1, "a frame at least");
        let frames = frames as usize;
        BufferPool {
            frame_of_page: vec![NO_FRAME; page_count as usize],
            page_of_frame: vec![0; frames],
            dirty: vec![false; frames],
            newer: vec![NO_FRAME; frames],
            older: vec![NO_FRAME; frames],
            head: NO_FRAME,
            tail: NO_FRAME,
            used: 0,
        }
    }

    fn unlink(&mut self, frame: u32) {
        let (newer, older) = (self.newer[frame as usize], self.older[frame as usize]);
        if newer == NO_FRAME {
            self.head = older;
        } else {
            self.older[newer as usize] = older;
        }
        if older == NO_FRAME {
            self.tail = newer;
        } else {
            self.newer[older as usize] = newer;
        }
    }

    fn push_front(&mut self, frame: u32) {
        self.newer[frame as usize] = NO_FRAME;
        self.older[frame as usize] = self.head;
        if self.head != NO_FRAME {
            self.newer[self.head as usize] = frame;
        }
        self.head = frame;
        if self.tail == NO_FRAME {
            self.tail = frame;
        }
    }

    /// Accesses `page` (`write`: the access modifies it) and appends the
    /// I/Os it costs to `ios`: none on a hit; on a miss, the write of the
    /// dirty page whose frame it takes, if any, then the read.
    pub fn access(&mut self, page: u64, write: bool, ios: &mut Vec<PageIo>) {
        let mut frame = self.frame_of_page[page as usize];
        if frame == NO_FRAME {
            frame = if (self.used as usize) < self.page_of_frame.len() {
                self.used += 1;
                self.used - 1
            } else {
                let victim = self.tail;
                self.unlink(victim);
                let evicted = self.page_of_frame[victim as usize];
                if self.dirty[victim as usize] {
                    ios.push(PageIo { operation: Operation::Write, page: evicted });
                }
                self.frame_of_page[evicted as usize] = NO_FRAME;
                victim
            };
            ios.push(PageIo { operation: Operation::Read, page });
            self.frame_of_page[page as usize] = frame;
            self.page_of_frame[frame as usize] = page;
            self.dirty[frame as usize] = false;
        } else {
            self.unlink(frame);
        }
        self.push_front(frame);
        self.dirty[frame as usize] |= write;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lru_pool_reads_misses_and_writes_dirty_victims() {
        let mut pool = BufferPool::new(2, 10);
        let mut ios = Vec::new();
        pool.access(1, true, &mut ios);
        pool.access(2, false, &mut ios);
        pool.access(1, false, &mut ios);
        assert_eq!(
            ios,
            [PageIo { operation: Operation::Read, page: 1 }, PageIo { operation: Operation::Read, page: 2 }]
        );
        ios.clear();
        pool.access(3, false, &mut ios);
        assert_eq!(ios, [PageIo { operation: Operation::Read, page: 3 }], "2 was least recent, and clean");
        ios.clear();
        pool.access(4, false, &mut ios);
        assert_eq!(
            ios,
            [PageIo { operation: Operation::Write, page: 1 }, PageIo { operation: Operation::Read, page: 4 }]
        );
    }
}
