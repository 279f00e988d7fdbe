//! The drive's segmented buffer cache: a few segments, each holding one
//! contiguous LBN range (the data of a recent request plus what was read ahead
//! after it), replaced least recently used first.
//!
//! Read-ahead is lazy: after a read the last segment records when the head
//! started prefetching and how fast it reads, and the range actually prefetched
//! is settled when the next command starts (prefetching stops then, as
//! DiskSim's does when a new request arrives and the minimum read-ahead is met).

/// A contiguous range of cached LBNs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Segment {
    pub first_lbn: u64,
    /// One past the last valid LBN.
    pub end_lbn: u64,
    /// Read-ahead still running into this segment.
    pub prefetch: Option<Prefetch>,
    /// Last use, for LRU replacement.
    pub last_use: u64,
}

/// One track's part of a read-ahead: LBNs `[first_lbn, end_lbn)`, the first
/// under the head at `start_ns` and one more every `sector_ns`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PrefetchPiece {
    pub first_lbn: u64,
    pub end_lbn: u64,
    /// How long the heads take to switch to the piece's track (0 when it
    /// continues the track they are on)...
    pub switch_ns: f64,
    /// ... and when they reach it.
    pub arrival_ns: f64,
    /// When the piece's first sector comes under the heads.
    pub start_ns: f64,
    pub sector_ns: f64,
}

impl PrefetchPiece {
    /// When the head has passed the piece's last sector.
    pub fn end_ns(&self) -> f64 {
        self.start_ns + (self.end_lbn - self.first_lbn) as f64 * self.sector_ns
    }
}

/// Read-ahead in progress: the head reads sequential LBNs from the segment's
/// end onwards, track by track (the switch to each next track, and the wait
/// for its first sector, lie between the pieces), up to the last piece's end.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Prefetch {
    /// Consecutive pieces, the first starting at the segment's end; never empty.
    pieces: Vec<PrefetchPiece>,
}

impl Prefetch {
    /// Read-ahead over `pieces` (consecutive LBNs, at least one).
    pub fn new(pieces: Vec<PrefetchPiece>) -> Prefetch {
        assert!(!pieces.is_empty(), "read-ahead reads at least one track's part");
        assert!(pieces.windows(2).all(|pair| pair[0].end_lbn == pair[1].first_lbn), "pieces are consecutive");
        Prefetch { pieces }
    }

    /// Read-ahead of `[first_lbn, limit_lbn)` on one track from `origin_ns`.
    #[cfg(test)]
    pub fn linear(first_lbn: u64, origin_ns: f64, sector_ns: f64, limit_lbn: u64) -> Prefetch {
        Prefetch::new(vec![PrefetchPiece {
            first_lbn,
            end_lbn: limit_lbn,
            switch_ns: 0.0,
            arrival_ns: origin_ns,
            start_ns: origin_ns,
            sector_ns,
        }])
    }

    /// When the head reaches the first sector.
    pub fn origin_ns(&self) -> f64 {
        self.pieces[0].start_ns
    }

    /// Where read-ahead stops.
    pub fn limit_lbn(&self) -> u64 {
        self.last_piece().end_lbn
    }

    /// The part on the last track.
    pub fn last_piece(&self) -> PrefetchPiece {
        *self.pieces.last().expect("never empty")
    }

    /// Reads on over `more`, which continues the last piece.
    pub fn extend(&mut self, more: Vec<PrefetchPiece>) {
        assert!(more.first().is_none_or(|piece| piece.first_lbn == self.limit_lbn()), "the pieces continue");
        self.pieces.extend(more);
    }

    /// Drops the pieces read whole by `now_ns` (all but the last), returning
    /// where the data they read end: a stream carried on by hit after hit
    /// keeps only the tracks still ahead of it.
    fn drop_read_pieces(&mut self, now_ns: f64) -> Option<u64> {
        let done = self.pieces[..self.pieces.len() - 1].iter().take_while(|piece| piece.end_ns() <= now_ns).count();
        let end_lbn = done.checked_sub(1).map(|last| self.pieces[last].end_lbn)?;
        self.pieces.drain(..done);
        Some(end_lbn)
    }

    /// One past the last LBN read whole by `now_ns`.
    fn end_at(&self, now_ns: f64) -> u64 {
        for piece in &self.pieces {
            if now_ns <= piece.start_ns {
                return piece.first_lbn;
            }
            let read = ((now_ns - piece.start_ns) / piece.sector_ns).floor() as u64;
            if piece.first_lbn + read < piece.end_lbn {
                return piece.first_lbn + read;
            }
        }
        self.limit_lbn()
    }

    /// When LBN `end_lbn - 1` has been read, if read-ahead reaches it.
    fn ready_ns(&self, end_lbn: u64) -> Option<f64> {
        let piece = self.pieces.iter().find(|piece| piece.first_lbn < end_lbn && end_lbn <= piece.end_lbn)?;
        Some(piece.start_ns + (end_lbn - piece.first_lbn) as f64 * piece.sector_ns)
    }

    /// The piece whose track the heads are switching to at `now_ns`, if any.
    fn switching_to(&self, now_ns: f64) -> Option<PrefetchPiece> {
        self.pieces
            .iter()
            .find(|piece| {
                piece.switch_ns > 0.0 && piece.arrival_ns - piece.switch_ns <= now_ns && now_ns < piece.arrival_ns
            })
            .copied()
    }

    /// The sector under the head at `now_ns` and when it has passed, if the
    /// head is reading (not switching tracks, not done).
    fn under_way(&self, now_ns: f64) -> Option<(u64, f64)> {
        let piece = self.pieces.iter().find(|piece| piece.start_ns <= now_ns && now_ns < piece.end_ns())?;
        let index = ((now_ns - piece.start_ns) / piece.sector_ns).floor() as u64;
        Some((piece.first_lbn + index, piece.start_ns + (index + 1) as f64 * piece.sector_ns))
    }
}

impl Segment {
    /// End of valid data at `now_ns` (prefetch included).
    pub fn end_at(&self, now_ns: f64) -> u64 {
        self.prefetch.as_ref().map_or(self.end_lbn, |prefetch| prefetch.end_at(now_ns).max(self.end_lbn))
    }

    /// Where read-ahead `prefetch` into this segment stops at `now_ns`, as
    /// DiskSim 4.0 stops it: the sectors read whole are kept; the one under
    /// the head is not, and with `finish_sector` the mechanism stays busy
    /// until it has passed. Read-ahead continues its access without a break,
    /// so at its origin (to the clock's nanosecond) the head is on its first
    /// sector already.
    fn stop_point(&self, prefetch: &Prefetch, now_ns: f64, finish_sector: bool) -> PrefetchStop {
        // Switching to a track: DiskSim 4.0 lets the seek or head switch
        // finish, the heads on the new track, before the mechanism is free
        // (`disk_buffer_stopable_access`).
        if let Some(next) = prefetch.switching_to(now_ns) {
            let end_lbn = next.first_lbn.max(self.end_lbn);
            return PrefetchStop { end_lbn, free_ns: next.arrival_ns, head_lbn: Some(next.first_lbn) };
        }
        if now_ns < prefetch.origin_ns() - 1.0 {
            return PrefetchStop { end_lbn: self.end_lbn, free_ns: now_ns, head_lbn: None };
        }
        let now_ns = now_ns.max(prefetch.origin_ns());
        if let Some((lbn, passed_ns)) = prefetch.under_way(now_ns) {
            let free_ns = if finish_sector { passed_ns } else { now_ns };
            return PrefetchStop { end_lbn: lbn.max(self.end_lbn), free_ns, head_lbn: Some(lbn) };
        }
        // Waiting for the next track's first sector, or done.
        let end_lbn = prefetch.end_at(now_ns).max(self.end_lbn);
        let head_lbn = if end_lbn < prefetch.limit_lbn() { Some(end_lbn) } else { end_lbn.checked_sub(1) };
        PrefetchStop { end_lbn, free_ns: now_ns, head_lbn }
    }

    /// When LBN `lbn - 1` becomes valid (for a range ending at `lbn`), if ever.
    pub fn ready_ns(&self, end_lbn: u64) -> Option<f64> {
        if end_lbn <= self.end_lbn {
            return Some(f64::NEG_INFINITY);
        }
        self.prefetch.as_ref()?.ready_ns(end_lbn)
    }
}

/// Where stopped read-ahead left the data and the mechanism.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PrefetchStop {
    /// One past the last sector read whole.
    pub end_lbn: u64,
    /// When the mechanism is free for the next access.
    pub free_ns: f64,
    /// The LBN the heads were over when it stopped, if it had begun.
    pub head_lbn: Option<u64>,
}

/// The set of segments, sorted by first LBN. Invariant: the segments' spans
/// `[first_lbn, limit)` (the limit being where read-ahead stops, or the end of
/// the data) are disjoint, so at most one segment can hold a given LBN and a
/// lookup is one binary search.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cache {
    segments: Vec<Segment>,
    segment_count: usize,
    /// A segment's size: read-ahead slides its window, keeping only this many
    /// most recent sectors (as DiskSim 4.0 does whatever `Read-ahead over
    /// requested` says; the buffer gate keeps what has not yet crossed the
    /// bus).
    segment_sectors: u64,
    clock: u64,
    /// First LBN of the one segment whose read-ahead may still be running (read
    /// misses stop all read-ahead before starting their own).
    prefetching_first_lbn: Option<u64>,
}

impl Segment {
    /// Where this segment's span ends: the read-ahead limit, or the data's end.
    fn limit_lbn(&self) -> u64 {
        self.prefetch.as_ref().map_or(self.end_lbn, |prefetch| prefetch.limit_lbn().max(self.end_lbn))
    }
}

impl Cache {
    pub fn new(segment_count: u32, segment_sectors: u64) -> Cache {
        Cache {
            segments: Vec::with_capacity(segment_count.max(1) as usize + 1),
            segment_count: segment_count.max(1) as usize,
            segment_sectors,
            clock: 0,
            prefetching_first_lbn: None,
        }
    }

    /// Stops all read-ahead at `now_ns`, keeping the sectors it read whole
    /// (see `Segment::stop_point`; with `finish_sector` the mechanism stays
    /// busy until the sector under way has passed). Returns where it stopped
    /// when read-ahead was running.
    pub fn stop_prefetch(&mut self, now_ns: f64, finish_sector: bool) -> Option<PrefetchStop> {
        let first_lbn = self.prefetching_first_lbn.take()?;
        let index = self.segments.binary_search_by_key(&first_lbn, |segment| segment.first_lbn).ok()?;
        let segment = &mut self.segments[index];
        let prefetch = segment.prefetch.take()?;
        let stop = segment.stop_point(&prefetch, now_ns, finish_sector);
        segment.end_lbn = stop.end_lbn;
        Some(stop)
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
    /// with data a segment holds at `now_ns` and that segment's read-ahead,
    /// still under way, reaches the request's end, the time that end is
    /// buffered.
    pub fn stretch_running_prefetch(&mut self, lbn: u64, count: u64, now_ns: f64) -> Option<f64> {
        let index = self.candidate(lbn)?;
        let segment = &self.segments[index];
        let limit_lbn = segment.prefetch.as_ref()?.limit_lbn();
        let valid_end = segment.end_at(now_ns);
        let end_lbn = lbn + count;
        if valid_end >= limit_lbn || self.serves(segment, lbn, 1, now_ns, false).is_none() || end_lbn <= valid_end {
            return None;
        }
        let ready_ns = segment.ready_ns(end_lbn)?;
        self.clock += 1;
        self.segments[index].last_use = self.clock;
        Some(ready_ns)
    }

    /// The last track's part of the read-ahead of the segment whose span
    /// holds `lbn` (its data or what its read-ahead will bring), if that
    /// read-ahead is still running at `now_ns`, and how far it may go on (to
    /// the next segment's first LBN).
    pub fn running_prefetch_tail(&self, lbn: u64, now_ns: f64) -> Option<(PrefetchPiece, u64)> {
        let index = self.candidate(lbn)?;
        let segment = &self.segments[index];
        let prefetch = segment.prefetch.as_ref()?;
        let next_first_lbn = self.segments.get(index + 1).map_or(u64::MAX, |next| next.first_lbn);
        let running = segment.end_at(now_ns) < prefetch.limit_lbn();
        (running && lbn < prefetch.limit_lbn()).then(|| (prefetch.last_piece(), next_first_lbn))
    }

    /// Lets the read-ahead of the segment holding `lbn` (see
    /// [`Cache::running_prefetch_tail`]) read on over `more`, at `now_ns`.
    pub fn extend_prefetch(&mut self, lbn: u64, more: Vec<PrefetchPiece>, now_ns: f64) {
        let Some(index) = self.candidate(lbn) else { return };
        let segment = &mut self.segments[index];
        if let Some(prefetch) = &mut segment.prefetch {
            if let Some(end_lbn) = prefetch.drop_read_pieces(now_ns) {
                segment.end_lbn = segment.end_lbn.max(end_lbn);
            }
            prefetch.extend(more);
        }
    }

    /// The end of the data of the segment holding `lbn`, when its read-ahead
    /// has stopped or run to its limit by `now_ns`.
    pub fn idle_segment_end(&self, lbn: u64, now_ns: f64) -> Option<u64> {
        let segment = &self.segments[self.candidate(lbn)?];
        let end_lbn = segment.end_at(now_ns);
        let running = segment.prefetch.as_ref().is_some_and(|prefetch| end_lbn < prefetch.limit_lbn());
        (!running && lbn < end_lbn).then_some(end_lbn)
    }

    /// Restarts read-ahead into the segment holding `lbn` (see
    /// [`Cache::idle_segment_end`]), dropping the segments its new span covers.
    pub fn resume_prefetch(&mut self, lbn: u64, now_ns: f64, prefetch: Prefetch) {
        let Some(index) = self.candidate(lbn) else { return };
        let end_lbn = self.segments[index].end_at(now_ns);
        self.segments[index].end_lbn = end_lbn;
        let covered = self.overlapping(end_lbn, prefetch.limit_lbn().max(end_lbn));
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
        let valid_first = segment.first_lbn.max(valid_end.saturating_sub(self.segment_sectors));
        if lbn < valid_first {
            return None;
        }
        if lbn + count <= valid_end {
            return Some(f64::NEG_INFINITY);
        }
        // An almost hit: the first sector is the one read-ahead is reading.
        if almost_hits && lbn <= valid_end {
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
    /// overlapping segments and else the least recently used one.
    pub fn insert(&mut self, first_lbn: u64, end_lbn: u64, prefetch: Option<Prefetch>) {
        self.clock += 1;
        let prefetching = prefetch.is_some();
        let segment = Segment { first_lbn, end_lbn, prefetch, last_use: self.clock };
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
        if prefetching {
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
        let mut cache = Cache::new(2, 1024);
        cache.insert(100, 108, Some(Prefetch::linear(108, 1000.0, 10.0, 200)));
        assert_eq!(cache.lookup(100, 8, 0.0, false), Some(f64::NEG_INFINITY));
        assert_eq!(cache.lookup(108, 8, 1000.0, true), Some(1080.0));
        assert_eq!(cache.lookup(108, 8, 1000.0, false), None);
        assert_eq!(cache.lookup(108, 8, 1080.0, false), Some(f64::NEG_INFINITY));
        assert_eq!(cache.lookup(300, 8, 1000.0, true), None);
        let _ = cache.stop_prefetch(1045.0, false);
        assert_eq!(cache.lookup(108, 4, 2000.0, false), Some(f64::NEG_INFINITY));
        assert_eq!(cache.lookup(108, 8, 2000.0, true), None);
    }

    #[test]
    fn read_ahead_stopped_while_switching_tracks_frees_the_mechanism_on_the_new_track() {
        // Track one: LBNs 108..150 from 1000 ns, 10 ns a sector (ends at 1420);
        // then a 300 ns switch to the next track (arriving at 1720) and a wait
        // for its first sector, LBN 150, at 1800.
        let piece = |first_lbn, end_lbn, switch_ns, arrival_ns, start_ns| PrefetchPiece {
            first_lbn,
            end_lbn,
            switch_ns,
            arrival_ns,
            start_ns,
            sector_ns: 10.0,
        };
        let prefetch =
            || Some(Prefetch::new(vec![piece(108, 150, 0.0, 1000.0, 1000.0), piece(150, 200, 300.0, 1720.0, 1800.0)]));
        let stop_at = |now_ns| {
            let mut cache = Cache::new(2, 1024);
            cache.insert(100, 108, prefetch());
            cache.stop_prefetch(now_ns, false).unwrap()
        };
        // During the switch: free once the heads are on the new track.
        let stop = stop_at(1500.0);
        assert_eq!((stop.end_lbn, stop.free_ns, stop.head_lbn), (150, 1720.0, Some(150)));
        // Waiting for the first sector: free at once.
        let stop = stop_at(1750.0);
        assert_eq!((stop.end_lbn, stop.free_ns, stop.head_lbn), (150, 1750.0, Some(150)));
        // Reading a sector: free at once (stopping in the sector).
        let stop = stop_at(1205.0);
        assert_eq!((stop.end_lbn, stop.free_ns, stop.head_lbn), (128, 1205.0, Some(128)));
    }

    /// Whether any segment serves the range: the scan the binary search replaces.
    fn served_by_any(cache: &Cache, lbn: u64, count: u64, now_ns: f64, almost_hits: bool) -> bool {
        cache.segments.iter().any(|segment| cache.serves(segment, lbn, count, now_ns, almost_hits).is_some())
    }

    #[test]
    fn segments_stay_sorted_and_disjoint_and_lookup_agrees_with_a_scan() {
        // Seeded random inserts, invalidations and read-ahead stops.
        let mut random = crate::closed_loop::Random::new(17);
        for window in [u64::MAX, 64] {
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
                        let prefetch = (random.below(2) == 0).then(|| {
                            let origin_ns = now_ns + random.below(50) as f64;
                            let sector_ns = 1.0 + random.below(5) as f64;
                            Prefetch::linear(end, origin_ns, sector_ns, end + 1 + random.below(100))
                        });
                        cache.insert(first, end, prefetch);
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
        let mut cache = Cache::new(2, 1024);
        cache.insert(0, 8, None);
        cache.insert(100, 108, None);
        assert!(cache.lookup(0, 8, 0.0, false).is_some());
        cache.insert(200, 208, None);
        assert!(cache.lookup(0, 8, 0.0, false).is_some());
        assert!(cache.lookup(100, 8, 0.0, false).is_none());
    }

    #[test]
    fn sliding_window_drops_the_oldest_data() {
        let mut cache = Cache::new(1, 16);
        cache.insert(0, 8, Some(Prefetch::linear(8, 0.0, 1.0, 100)));
        assert!(cache.lookup(0, 8, 5.0, false).is_some());
        assert!(cache.lookup(0, 8, 20.0, false).is_none());
        assert!(cache.lookup(12, 8, 20.0, false).is_some());
    }
}
