//! The batched free log (BFLog) as a pure policy: three logs — active,
//! inactive and sorted — over the freed blocks, and the paced work that
//! moves a block from one to the next until it is punched into the activemap.
//!
//! A freed block is appended to the *active* log. When the active log holds
//! `rotate_entries` blocks and the inactive log is empty, it becomes the
//! inactive log (a new batch starts). The inactive log is sorted a chunk of
//! `chunk_entries` blocks at a time; once every chunk is sorted, the chunks
//! are merged, in ascending order, onto the end of the *sorted* log, which is
//! punched from its front, `bunch_entries` at a time. Each append earns one
//! block of sorting, one of merging and one of punching, and the three steps
//! proceed side by side (a batch sorts while the one before it is punched, and
//! the merge's output is final as it is written), so steady state does, per
//! freed block, one block of each step, all of it local or sequential.
//!
//! Keys (what the persistent tree holds, docs/format.md "Delete log"):
//! `0` is the header (its value the active batch), present while the log
//! holds a block (an empty log is an empty tree); an unsorted entry is
//! `batch << 32 | position` (the active batch and at most one older,
//! inactive, batch; a chunk is a run of `chunk_entries` positions); a sorted
//! entry is `1 << 63 | batch << 32 | sequence`. Everything the policy needs
//! is derived from the keys, so a log loaded after a crash resumes where the
//! CP left it: a chunk is taken as sorted when its entries ascend (sorting
//! it again would change nothing), and the merge of the inactive batch
//! continues after its last sorted entry.
//!
//! Invariants: no block appears twice; the sorted log is its batches in
//! order, each one ascending run; the merge only starts once every chunk of
//! the inactive log is sorted.

use std::collections::VecDeque;

use super::{LogSink, HEADER_KEY};

const SORTED_BIT: u64 = 1 << 63;
const POSITION_BITS: u32 = 32;

/// Sizes of a batched free log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchedSizes {
    /// Blocks the three logs may hold together before appends force work.
    pub capacity_entries: u64,
    /// Active-log blocks at which it becomes the inactive log.
    pub rotate_entries: u64,
    /// Blocks sorted together (a fixed number of log blocks' worth).
    pub chunk_entries: u64,
    /// Blocks punched together.
    pub bunch_entries: u64,
}

/// One chunk of the inactive log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Chunk {
    /// `(position, block)`, in position order; merged entries leave the front.
    entries: VecDeque<(u64, u64)>,
    sorted: bool,
}

/// The three logs and the work credit earned by appends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchedFreeLog {
    sizes: BatchedSizes,
    active_batch: u64,
    active: Vec<u64>,
    /// The inactive batch (`active_batch - 1`) as chunks, if any.
    inactive: Vec<Chunk>,
    /// `(key, block)`: the batches merged and not yet punched, oldest first,
    /// each ascending.
    sorted: VecDeque<(u64, u64)>,
    /// The sequence of the next sorted entry of the inactive batch.
    merge_sequence: u64,
    sort_credit: u64,
    merge_credit: u64,
    punch_credit: u64,
}

fn unsorted_key(batch: u64, position: u64) -> u64 {
    batch << POSITION_BITS | position
}

fn sorted_key(batch: u64, sequence: u64) -> u64 {
    SORTED_BIT | batch << POSITION_BITS | sequence
}

impl BatchedFreeLog {
    /// An empty log.
    pub(crate) fn new(sizes: BatchedSizes) -> Self {
        assert!(sizes.chunk_entries > 0 && sizes.bunch_entries > 0 && sizes.rotate_entries > 0, "sizes: {sizes:?}");
        Self::empty(sizes, 1)
    }

    fn empty(sizes: BatchedSizes, active_batch: u64) -> Self {
        Self {
            sizes,
            active_batch,
            active: Vec::new(),
            inactive: Vec::new(),
            sorted: VecDeque::new(),
            merge_sequence: 0,
            sort_credit: 0,
            merge_credit: 0,
            punch_credit: 0,
        }
    }

    /// Rebuilds the log from its persisted entries (in key order).
    pub(crate) fn from_entries(sizes: BatchedSizes, entries: &[(u64, u64)]) -> Result<Self, String> {
        if entries.is_empty() {
            return Ok(Self::new(sizes));
        }
        let Some(&(HEADER_KEY, active_batch)) = entries.first() else {
            return Err("the batched free log has no header".into());
        };
        if active_batch == 0 || active_batch >= 1 << 31 {
            return Err(format!("active batch {active_batch} is out of range"));
        }
        let mut log = Self::empty(sizes, active_batch);
        let mut inactive_positions: Vec<(u64, u64)> = Vec::new();
        for &(key, block) in &entries[1..] {
            let batch = (key & !SORTED_BIT) >> POSITION_BITS;
            let position = key & ((1 << POSITION_BITS) - 1);
            if key & SORTED_BIT != 0 {
                if batch >= active_batch {
                    return Err(format!("the sorted log holds batch {batch} of the active one"));
                }
                if let Some(&(last_key, last_block)) = log.sorted.back() {
                    let same_batch = (last_key & !SORTED_BIT) >> POSITION_BITS == batch;
                    if same_batch && (key != last_key + 1 || last_block >= block) {
                        return Err(format!("sorted-log entry {key:#x} breaks its batch's order"));
                    }
                }
                log.sorted.push_back((key, block));
            } else if batch == active_batch {
                if position != log.active.len() as u64 {
                    return Err(format!("active-log entry {key:#x} leaves a gap"));
                }
                log.active.push(block);
            } else if batch + 1 == active_batch {
                inactive_positions.push((position, block));
            } else {
                return Err(format!("entry {key:#x} of batch {batch} beside active batch {active_batch}"));
            }
        }
        for (position, block) in inactive_positions {
            let chunk = usize::try_from(position / sizes.chunk_entries).map_err(|_| "chunk index overflows")?;
            if log.inactive.len() <= chunk {
                log.inactive.resize(chunk + 1, Chunk::default());
            }
            log.inactive[chunk].entries.push_back((position, block));
        }
        for chunk in &mut log.inactive {
            chunk.sorted = chunk.entries.iter().zip(chunk.entries.iter().skip(1)).all(|(a, b)| a.1 < b.1);
        }
        log.inactive.retain(|chunk| !chunk.entries.is_empty());
        let inactive_batch = active_batch - 1;
        if let Some(&(last_key, last_block)) = log.sorted.back() {
            if (last_key & !SORTED_BIT) >> POSITION_BITS == inactive_batch && log.has_inactive() {
                if !log.inactive.iter().all(|chunk| chunk.sorted) {
                    return Err("a merge is in progress over unsorted chunks".into());
                }
                if log.inactive.iter().any(|chunk| chunk.entries.front().is_some_and(|&(_, next)| next <= last_block)) {
                    return Err("the merge's output is not below what is left to merge".into());
                }
                log.merge_sequence = (last_key & ((1 << POSITION_BITS) - 1)) + 1;
            }
        }
        if log.len() == 0 {
            return Err("a header without blocks".into());
        }
        Ok(log)
    }

    /// Blocks the three logs hold.
    pub(crate) fn len(&self) -> u64 {
        let inactive: usize = self.inactive.iter().map(|chunk| chunk.entries.len()).sum();
        (self.active.len() + inactive + self.sorted.len()) as u64
    }

    fn has_inactive(&self) -> bool {
        !self.inactive.is_empty()
    }

    /// Appends a freed block and does the work it pays for.
    pub(crate) fn append(&mut self, block: u64, sink: &mut dyn LogSink) {
        if self.len() == 0 {
            sink.put(HEADER_KEY, self.active_batch);
        }
        let position = self.active.len() as u64;
        assert!(position < 1 << POSITION_BITS, "an active log of 2^32 blocks");
        sink.put(unsorted_key(self.active_batch, position), block);
        self.active.push(block);
        self.sort_credit += 1;
        self.merge_credit += 1;
        self.punch_credit += 1;
        self.paced_work(sink);
        // Over capacity (frees arrive faster than the pacing retires them):
        // work without credit until back under it.
        while self.len() > self.sizes.capacity_entries && self.step(sink, Credit::Unlimited) {}
        self.drop_header_if_empty(sink);
    }

    /// An empty log is an empty tree: its header goes, and batches restart.
    fn drop_header_if_empty(&mut self, sink: &mut dyn LogSink) {
        if self.len() == 0 {
            sink.remove(HEADER_KEY);
            *self = Self::new(self.sizes);
        }
    }

    /// Work an idle log does: the credit `entries` appends would have
    /// earned, without the appends; a short active log is rotated when
    /// nothing older is left, so an idle log drains completely over calls.
    pub(crate) fn idle_work(&mut self, entries: u64, sink: &mut dyn LogSink) {
        if self.len() == 0 {
            return;
        }
        self.sort_credit = self.sort_credit.saturating_add(entries);
        self.merge_credit = self.merge_credit.saturating_add(entries);
        self.punch_credit = self.punch_credit.saturating_add(entries);
        if !self.has_inactive() {
            self.maybe_rotate(sink, true);
        }
        while self.step(sink, Credit::Earned) {}
        self.drop_header_if_empty(sink);
    }

    /// Punches every block, sorting and merging what it must first.
    pub(crate) fn drain(&mut self, sink: &mut dyn LogSink) {
        if self.len() == 0 {
            return;
        }
        while self.len() > 0 && self.step(sink, Credit::Unlimited) {}
        self.drop_header_if_empty(sink);
    }

    fn paced_work(&mut self, sink: &mut dyn LogSink) {
        self.maybe_rotate(sink, false);
        while self.step(sink, Credit::Earned) {}
    }

    fn maybe_rotate(&mut self, sink: &mut dyn LogSink, forced: bool) -> bool {
        let full = self.active.len() as u64 >= self.sizes.rotate_entries;
        if self.has_inactive() || self.active.is_empty() || !(full || forced) {
            return false;
        }
        let chunk_entries = self.sizes.chunk_entries;
        self.inactive = std::mem::take(&mut self.active)
            .into_iter()
            .enumerate()
            .map(|(position, block)| (position as u64, block))
            .collect::<Vec<_>>()
            .chunks(usize::try_from(chunk_entries).expect("a chunk size fits usize"))
            .map(|entries| Chunk { entries: entries.iter().copied().collect(), sorted: false })
            .collect();
        self.active_batch += 1;
        self.merge_sequence = 0;
        sink.put(HEADER_KEY, self.active_batch);
        true
    }

    /// One step of work: sort a chunk, merge a block, punch a bunch, or
    /// (unlimited) rotate. Returns whether it did anything.
    fn step(&mut self, sink: &mut dyn LogSink, credit: Credit) -> bool {
        let unlimited = credit == Credit::Unlimited;
        // Punch first: it is what gives space back.
        let punchable = !self.sorted.is_empty();
        if punchable && (unlimited || self.punch_credit >= self.sizes.bunch_entries) {
            self.punch_bunch(sink);
            if !unlimited {
                self.punch_credit -= self.sizes.bunch_entries;
            }
            return true;
        }
        if let Some(chunk) = self.inactive.iter().position(|chunk| !chunk.sorted) {
            let length = self.inactive[chunk].entries.len() as u64;
            if unlimited || self.sort_credit >= length {
                self.sort_chunk(chunk, sink);
                if !unlimited {
                    self.sort_credit -= length;
                }
                return true;
            }
        }
        let can_merge = self.has_inactive() && self.inactive.iter().all(|chunk| chunk.sorted);
        if can_merge && (unlimited || self.merge_credit >= 1) {
            self.merge_one(sink);
            if !unlimited {
                self.merge_credit -= 1;
            }
            return true;
        }
        if unlimited {
            return self.maybe_rotate(sink, true);
        }
        // Credit earned while a step was blocked is not banked beyond a
        // bunch or a chunk: pacing stays close to one block per append.
        self.sort_credit = self.sort_credit.min(self.sizes.chunk_entries);
        self.merge_credit = self.merge_credit.min(self.sizes.chunk_entries);
        self.punch_credit = self.punch_credit.min(self.sizes.bunch_entries);
        false
    }

    fn sort_chunk(&mut self, chunk: usize, sink: &mut dyn LogSink) {
        let batch = self.active_batch - 1;
        let entries = &mut self.inactive[chunk].entries;
        let mut blocks: Vec<u64> = entries.iter().map(|&(_, block)| block).collect();
        blocks.sort_unstable();
        for ((position, block), sorted) in entries.iter_mut().zip(blocks) {
            if *block != sorted {
                *block = sorted;
                sink.put(unsorted_key(batch, *position), sorted);
            }
        }
        self.inactive[chunk].sorted = true;
    }

    fn merge_one(&mut self, sink: &mut dyn LogSink) {
        let batch = self.active_batch - 1;
        let (chunk, _) = self
            .inactive
            .iter()
            .enumerate()
            .map(|(index, chunk)| (index, chunk.entries.front().expect("chunks are non-empty").1))
            .min_by_key(|&(_, block)| block)
            .expect("an inactive log to merge");
        let (position, block) = self.inactive[chunk].entries.pop_front().expect("non-empty");
        if self.inactive[chunk].entries.is_empty() {
            self.inactive.remove(chunk);
        }
        sink.remove(unsorted_key(batch, position));
        let key = sorted_key(batch, self.merge_sequence);
        // The next batch's merge numbers its entries from 0.
        self.merge_sequence = if self.has_inactive() { self.merge_sequence + 1 } else { 0 };
        sink.put(key, block);
        self.sorted.push_back((key, block));
    }

    fn punch_bunch(&mut self, sink: &mut dyn LogSink) {
        for _ in 0..self.sizes.bunch_entries {
            let Some((key, block)) = self.sorted.pop_front() else { break };
            sink.remove(key);
            sink.punch(block);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Credit {
    Earned,
    Unlimited,
}

#[cfg(test)]
mod tests {
    use super::super::tests::RecordingSink;
    use super::*;

    fn sizes() -> BatchedSizes {
        BatchedSizes { capacity_entries: 400, rotate_entries: 100, chunk_entries: 16, bunch_entries: 8 }
    }

    #[test]
    fn appends_are_sorted_merged_and_punched_in_ascending_bunches() {
        let mut sink = RecordingSink::default();
        let mut log = BatchedFreeLog::new(sizes());
        let blocks: Vec<u64> = (0..1000u64).map(|i| (i * 7919) % 100_003).collect();
        for &block in &blocks {
            log.append(block, &mut sink);
            assert!(log.len() <= sizes().capacity_entries);
        }
        assert!(!sink.punched.is_empty(), "steady state punches");
        // Each batch is punched as one ascending run.
        let descents = sink.punched.windows(2).filter(|pair| pair[0] > pair[1]).count();
        assert!(descents < 1000 / 100, "{descents} descents");
        log.drain(&mut sink);
        assert_eq!(log.len(), 0);
        let mut punched = sink.punched.clone();
        punched.sort_unstable();
        let mut expected = blocks.clone();
        expected.sort_unstable();
        assert_eq!(punched, expected, "every block punched exactly once");
    }

    #[test]
    fn the_persisted_entries_rebuild_the_same_log_at_every_step() {
        let mut sink = RecordingSink::default();
        let mut log = BatchedFreeLog::new(sizes());
        for i in 0..700u64 {
            log.append((i * 104_729) % 50_021, &mut sink);
            let entries: Vec<(u64, u64)> = sink.entries.iter().map(|(&key, &block)| (key, block)).collect();
            let loaded = BatchedFreeLog::from_entries(sizes(), &entries).unwrap();
            assert_eq!(loaded.len(), log.len());
            assert_eq!(loaded.active, log.active);
            assert_eq!(loaded.sorted, log.sorted);
            let blocks = |log: &BatchedFreeLog| -> Vec<u64> {
                log.inactive.iter().flat_map(|chunk| chunk.entries.iter().map(|&(_, block)| block)).collect()
            };
            assert_eq!(blocks(&loaded), blocks(&log));
        }
    }

    #[test]
    fn a_log_loaded_mid_way_drains_to_the_same_blocks() {
        let mut sink = RecordingSink::default();
        let mut log = BatchedFreeLog::new(sizes());
        for i in 0..333u64 {
            log.append(i * 3 + 1, &mut sink);
        }
        let entries: Vec<(u64, u64)> = sink.entries.iter().map(|(&key, &block)| (key, block)).collect();
        let mut loaded = BatchedFreeLog::from_entries(sizes(), &entries).unwrap();
        let mut rest = RecordingSink { entries: sink.entries.clone(), punched: Vec::new() };
        // Idle work in small pieces drains it.
        for _ in 0..1000 {
            loaded.idle_work(100, &mut rest);
        }
        assert_eq!(loaded.len(), 0);
        assert!(rest.entries.is_empty(), "an empty log is an empty tree");
        let mut all: Vec<u64> = sink.punched.iter().chain(&rest.punched).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..333u64).map(|i| i * 3 + 1).collect::<Vec<_>>());
    }
}
