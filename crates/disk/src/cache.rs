//! The drive's segmented buffer cache: a few segments, each holding one
//! contiguous LBN range (the data of a recent request plus what was read ahead
//! after it), replaced least recently used first.
//!
//! Read-ahead is lazy: after a read the last segment records when the head
//! started prefetching and how fast it reads, and the range actually prefetched
//! is settled when the next command starts (prefetching stops then, as
//! DiskSim's does when a new request arrives and the minimum read-ahead is met).

/// A contiguous range of cached LBNs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Segment {
    pub first_lbn: u64,
    /// One past the last valid LBN.
    pub end_lbn: u64,
    /// Read-ahead still running into this segment.
    pub prefetch: Option<Prefetch>,
    /// Last use, for LRU replacement.
    pub last_use: u64,
    /// Read-ahead sliding the window (see [`Cache`]) never drops this LBN or
    /// the ones after it: the data the last request returned, unless
    /// read-ahead may overwrite them.
    pub pinned_lbn: u64,
}

/// Read-ahead in progress: from `origin_ns` the head reads sequential LBNs from
/// `end_lbn` onwards, one every `sector_ns`, up to `limit_lbn`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Prefetch {
    pub origin_ns: f64,
    pub sector_ns: f64,
    pub limit_lbn: u64,
}

impl Segment {
    /// End of valid data at `now_ns` (prefetch included).
    pub fn end_at(&self, now_ns: f64) -> u64 {
        match self.prefetch {
            Some(prefetch) if now_ns > prefetch.origin_ns => {
                let read = ((now_ns - prefetch.origin_ns) / prefetch.sector_ns).floor() as u64;
                (self.end_lbn + read).min(prefetch.limit_lbn)
            }
            _ => self.end_lbn,
        }
    }

    /// Where read-ahead `prefetch` into this segment stops at `now_ns`: the end
    /// of the data and the time, finishing a sector under way if asked.
    fn stop_point(&self, prefetch: Prefetch, now_ns: f64, finish_sector: bool) -> (u64, f64) {
        if now_ns <= prefetch.origin_ns {
            return (self.end_lbn, now_ns);
        }
        let elapsed_sectors = (now_ns - prefetch.origin_ns) / prefetch.sector_ns;
        let whole = elapsed_sectors.floor() as u64;
        let limit_sectors = prefetch.limit_lbn.saturating_sub(self.end_lbn);
        if whole >= limit_sectors {
            return (prefetch.limit_lbn.max(self.end_lbn), now_ns);
        }
        if finish_sector && elapsed_sectors > whole as f64 {
            let stopped_ns = prefetch.origin_ns + (whole + 1) as f64 * prefetch.sector_ns;
            return (self.end_lbn + whole + 1, stopped_ns);
        }
        (self.end_lbn + whole, now_ns)
    }

    /// When LBN `lbn - 1` becomes valid (for a range ending at `lbn`), if ever.
    pub fn ready_ns(&self, end_lbn: u64) -> Option<f64> {
        if end_lbn <= self.end_lbn {
            return Some(f64::NEG_INFINITY);
        }
        let prefetch = self.prefetch?;
        (end_lbn <= prefetch.limit_lbn)
            .then(|| prefetch.origin_ns + (end_lbn - self.end_lbn) as f64 * prefetch.sector_ns)
    }
}

/// The set of segments, sorted by first LBN. Invariant: the segments' spans
/// `[first_lbn, limit)` (the limit being where read-ahead stops, or the end of
/// the data) are disjoint, so at most one segment can hold a given LBN and a
/// lookup is one binary search.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cache {
    segments: Vec<Segment>,
    segment_count: usize,
    /// When read-ahead may overwrite older data (requested data, or blocks read
    /// before the request), a segment keeps only this many most recent
    /// sectors, never dropping its pinned LBN.
    window_sectors: Option<u64>,
    clock: u64,
    /// First LBN of the one segment whose read-ahead may still be running (read
    /// misses stop all read-ahead before starting their own).
    prefetching_first_lbn: Option<u64>,
}

impl Segment {
    /// Where this segment's span ends: the read-ahead limit, or the data's end.
    fn limit_lbn(&self) -> u64 {
        self.prefetch.map_or(self.end_lbn, |prefetch| prefetch.limit_lbn.max(self.end_lbn))
    }
}

impl Cache {
    pub fn new(segment_count: u32, window_sectors: Option<u64>) -> Cache {
        Cache {
            segments: Vec::with_capacity(segment_count.max(1) as usize + 1),
            segment_count: segment_count.max(1) as usize,
            window_sectors,
            clock: 0,
            prefetching_first_lbn: None,
        }
    }

    /// Stops all read-ahead at `now_ns`, keeping what it read. With
    /// `finish_sector`, a sector being read when the stop comes is read to its
    /// end first. When read-ahead read anything since it last stopped, returns
    /// the end of the data and when the head stopped reading.
    pub fn stop_prefetch(&mut self, now_ns: f64, finish_sector: bool) -> Option<(u64, f64)> {
        let first_lbn = self.prefetching_first_lbn.take()?;
        let index = self.segments.binary_search_by_key(&first_lbn, |segment| segment.first_lbn).ok()?;
        let segment = &mut self.segments[index];
        let prefetch = segment.prefetch.take()?;
        let (end_lbn, stopped_ns) = segment.stop_point(prefetch, now_ns, finish_sector);
        let read_ahead = end_lbn > segment.end_lbn;
        segment.end_lbn = end_lbn;
        read_ahead.then_some((end_lbn, stopped_ns))
    }

    /// When `[lbn, lbn + count)` starts with data a segment holds at `now_ns`
    /// but not all of it, the end of the held part.
    pub fn cached_prefix_end(&self, lbn: u64, count: u64, now_ns: f64) -> Option<u64> {
        let segment = &self.segments[self.candidate(lbn)?];
        self.serves(segment, lbn, 1, now_ns, false)?;
        let valid_end = segment.end_at(now_ns);
        (valid_end < lbn + count).then_some(valid_end)
    }

    /// A partial hit on running read-ahead: when `[lbn, lbn + count)` starts
    /// with data a segment holds at `now_ns` and that segment's read-ahead is
    /// still under way, the read-ahead is stretched to the request's end and
    /// the time that end is buffered is returned.
    pub fn stretch_running_prefetch(&mut self, lbn: u64, count: u64, now_ns: f64) -> Option<f64> {
        let index = self.candidate(lbn)?;
        let segment = &self.segments[index];
        let prefetch = segment.prefetch?;
        let valid_end = segment.end_at(now_ns);
        let running = valid_end < prefetch.limit_lbn;
        if !running || self.serves(segment, lbn, 1, now_ns, false).is_none() || lbn + count <= valid_end {
            return None;
        }
        let end_lbn = lbn + count;
        // The stretched span must not run into the next segment.
        if self.segments.get(index + 1).is_some_and(|next| next.first_lbn < end_lbn) {
            return None;
        }
        self.clock += 1;
        let segment = &mut self.segments[index];
        segment.last_use = self.clock;
        if let Some(prefetch) = &mut segment.prefetch {
            prefetch.limit_lbn = prefetch.limit_lbn.max(end_lbn);
        }
        segment.ready_ns(end_lbn)
    }

    /// The end of the data of the segment holding `lbn`, when its read-ahead
    /// has stopped or run to its limit by `now_ns`.
    pub fn idle_segment_end(&self, lbn: u64, now_ns: f64) -> Option<u64> {
        let segment = &self.segments[self.candidate(lbn)?];
        let end_lbn = segment.end_at(now_ns);
        let running = segment.prefetch.is_some_and(|prefetch| end_lbn < prefetch.limit_lbn);
        (!running && lbn < end_lbn).then_some(end_lbn)
    }

    /// Restarts read-ahead into the segment holding `lbn` (see
    /// [`Cache::idle_segment_end`]), dropping the segments its new span covers.
    pub fn resume_prefetch(&mut self, lbn: u64, now_ns: f64, prefetch: Prefetch) {
        let Some(index) = self.candidate(lbn) else { return };
        let end_lbn = self.segments[index].end_at(now_ns);
        self.segments[index].end_lbn = end_lbn;
        let covered = self.overlapping(end_lbn, prefetch.limit_lbn.max(end_lbn));
        let covered = covered.start.max(index + 1)..covered.end.max(index + 1);
        self.forget_prefetch_in(covered.clone());
        self.segments.drain(covered);
        let _ = self.stop_prefetch(now_ns, false);
        let segment = &mut self.segments[index];
        segment.prefetch = Some(prefetch);
        self.prefetching_first_lbn = Some(segment.first_lbn);
    }

    /// The index of the only segment that may hold `lbn`.
    fn candidate(&self, lbn: u64) -> Option<usize> {
        self.segments.partition_point(|segment| segment.first_lbn <= lbn).checked_sub(1)
    }

    /// Whether `[lbn, lbn + count)` can be served from the cache at `now_ns`
    /// (no LRU update); see [`Cache::lookup`].
    pub fn contains(&self, lbn: u64, count: u64, now_ns: f64, almost_hits: bool) -> bool {
        self.candidate(lbn)
            .is_some_and(|index| self.serves(&self.segments[index], lbn, count, now_ns, almost_hits).is_some())
    }

    /// If `[lbn, lbn + count)` can be served from the cache, the time at which
    /// all of it is in the buffer. Data already buffered at `now_ns` always
    /// serve; data still being read ahead serve only with `almost_hits`.
    pub fn lookup(&mut self, lbn: u64, count: u64, now_ns: f64, almost_hits: bool) -> Option<f64> {
        self.clock += 1;
        let index = self.candidate(lbn)?;
        let ready = self.serves(&self.segments[index], lbn, count, now_ns, almost_hits)?;
        self.segments[index].last_use = self.clock;
        Some(ready)
    }

    fn serves(&self, segment: &Segment, lbn: u64, count: u64, now_ns: f64, almost_hits: bool) -> Option<f64> {
        let valid_end = segment.end_at(now_ns);
        // With a sliding window, read-ahead overwrites the oldest data.
        let valid_first = match self.window_sectors {
            Some(window) => segment.first_lbn.max(valid_end.saturating_sub(window).min(segment.pinned_lbn)),
            None => segment.first_lbn,
        };
        if lbn < valid_first {
            return None;
        }
        if lbn + count <= valid_end {
            return Some(f64::NEG_INFINITY);
        }
        if almost_hits && lbn < valid_end.max(segment.end_lbn + 1) {
            return segment.ready_ns(lbn + count);
        }
        None
    }

    /// The index range of segments whose spans overlap `[first_lbn, limit_lbn)`.
    fn overlapping(&self, first_lbn: u64, limit_lbn: u64) -> std::ops::Range<usize> {
        // Spans are disjoint and sorted, so their limits are sorted too.
        let start = self.segments.partition_point(|segment| segment.limit_lbn() <= first_lbn);
        let end = self.segments.partition_point(|segment| segment.first_lbn < limit_lbn).max(start);
        start..end
    }

    /// Records `[first, end)` as cached, with optional read-ahead, replacing any
    /// overlapping segments and else the least recently used one. Read-ahead
    /// sliding the window keeps `pinned_lbn` and after.
    pub fn insert(&mut self, first_lbn: u64, end_lbn: u64, prefetch: Option<Prefetch>, pinned_lbn: u64) {
        self.clock += 1;
        let segment = Segment { first_lbn, end_lbn, prefetch, last_use: self.clock, pinned_lbn };
        let range = self.overlapping(first_lbn, segment.limit_lbn());
        self.forget_prefetch_in(range.clone());
        self.segments.drain(range);
        if self.segments.len() >= self.segment_count {
            if let Some(oldest) =
                self.segments.iter().enumerate().min_by_key(|(_, segment)| segment.last_use).map(|(index, _)| index)
            {
                self.forget_prefetch_in(oldest..oldest + 1);
                self.segments.remove(oldest);
            }
        }
        let position = self.segments.partition_point(|existing| existing.first_lbn < first_lbn);
        self.segments.insert(position, segment);
        if prefetch.is_some() {
            self.prefetching_first_lbn = Some(first_lbn);
        }
    }

    /// Drops cached data overlapping `[first, end)` (a write that is not kept).
    pub fn invalidate(&mut self, first_lbn: u64, end_lbn: u64) {
        let range = self.overlapping(first_lbn, end_lbn);
        self.forget_prefetch_in(range.clone());
        self.segments.drain(range);
    }

    /// Forgets the running read-ahead if its segment is among `range` (about to go).
    fn forget_prefetch_in(&mut self, range: std::ops::Range<usize>) {
        if let Some(first_lbn) = self.prefetching_first_lbn {
            if self.segments[range].iter().any(|segment| segment.first_lbn == first_lbn) {
                self.prefetching_first_lbn = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetch_fills_over_time_and_stops() {
        let mut cache = Cache::new(2, None);
        cache.insert(100, 108, Some(Prefetch { origin_ns: 1000.0, sector_ns: 10.0, limit_lbn: 200 }), u64::MAX);
        assert_eq!(cache.lookup(100, 8, 0.0, false), Some(f64::NEG_INFINITY));
        assert_eq!(cache.lookup(108, 8, 1000.0, true), Some(1080.0));
        assert_eq!(cache.lookup(108, 8, 1000.0, false), None);
        assert_eq!(cache.lookup(108, 8, 1080.0, false), Some(f64::NEG_INFINITY));
        assert_eq!(cache.lookup(300, 8, 1000.0, true), None);
        let _ = cache.stop_prefetch(1045.0, false);
        assert_eq!(cache.lookup(108, 4, 2000.0, false), Some(f64::NEG_INFINITY));
        assert_eq!(cache.lookup(108, 8, 2000.0, true), None);
    }

    /// Whether any segment serves the range: the scan the binary search replaces.
    fn served_by_any(cache: &Cache, lbn: u64, count: u64, now_ns: f64, almost_hits: bool) -> bool {
        cache.segments.iter().any(|segment| cache.serves(segment, lbn, count, now_ns, almost_hits).is_some())
    }

    #[test]
    fn segments_stay_sorted_and_disjoint_and_lookup_agrees_with_a_scan() {
        // Seeded random inserts, invalidations and read-ahead stops.
        let mut random = crate::closed_loop::Random::new(17);
        for window in [None, Some(64)] {
            let mut cache = Cache::new(8, window);
            let mut now_ns = 0.0;
            for _ in 0..5_000 {
                now_ns += random.below(100) as f64;
                let first = random.below(2_000);
                let end = first + 1 + random.below(40);
                match random.below(4) {
                    0 => cache.invalidate(first, end),
                    1 => {
                        let _ = cache.stop_prefetch(now_ns, false);
                    }
                    _ => {
                        let _ = cache.stop_prefetch(now_ns, false);
                        let prefetch = (random.below(2) == 0).then(|| Prefetch {
                            origin_ns: now_ns + random.below(50) as f64,
                            sector_ns: 1.0 + random.below(5) as f64,
                            limit_lbn: end + 1 + random.below(100),
                        });
                        cache.insert(first, end, prefetch, u64::MAX);
                    }
                }
                assert!(cache.segments.len() <= 8);
                for pair in cache.segments.windows(2) {
                    assert!(pair[0].limit_lbn() <= pair[1].first_lbn, "{pair:?} overlap or are out of order");
                }
                let (lbn, count) = (random.below(2_200), 1 + random.below(16));
                let almost_hits = random.below(2) == 0;
                assert_eq!(
                    cache.contains(lbn, count, now_ns, almost_hits),
                    served_by_any(&cache, lbn, count, now_ns, almost_hits),
                    "[{lbn}, +{count}) at {now_ns}"
                );
            }
        }
    }

    #[test]
    fn least_recently_used_segment_is_replaced() {
        let mut cache = Cache::new(2, None);
        cache.insert(0, 8, None, u64::MAX);
        cache.insert(100, 108, None, u64::MAX);
        assert!(cache.lookup(0, 8, 0.0, false).is_some());
        cache.insert(200, 208, None, u64::MAX);
        assert!(cache.lookup(0, 8, 0.0, false).is_some());
        assert!(cache.lookup(100, 8, 0.0, false).is_none());
    }

    #[test]
    fn sliding_window_drops_the_oldest_data() {
        let mut cache = Cache::new(1, Some(16));
        cache.insert(0, 8, Some(Prefetch { origin_ns: 0.0, sector_ns: 1.0, limit_lbn: 100 }), u64::MAX);
        assert!(cache.lookup(0, 8, 5.0, false).is_some());
        assert!(cache.lookup(0, 8, 20.0, false).is_none());
        assert!(cache.lookup(12, 8, 20.0, false).is_some());
    }
}
