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
    id: SegmentId,
    first_lbn: u64,
    /// One past the last valid LBN.
    end_lbn: u64,
    /// Read-ahead still running into this segment.
    prefetch: Option<Prefetch>,
    /// Last use, for LRU replacement.
    last_use: u64,
    /// Where the span ends: the read-ahead limit, or the data's end (kept
    /// here, beside the first LBN, so that a scan reads no read-ahead).
    span_end_lbn: u64,
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

/// A segment's identity while it holds data: its first LBN (which orders the
/// segments) and the clock value it was filled at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentId {
    first_lbn: u64,
    serial: u64,
}

/// A read served from the buffer: when all its data are there, and the
/// segment that holds them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Hit {
    pub ready_ns: f64,
    segment: SegmentId,
}

/// The set of segments, sorted by first LBN. Spans may overlap: as in
/// DiskSim 4.0, a read that misses takes a segment of its own and leaves the
/// data of the others alone, and only writes clear what they overlap. A read
/// goes to the segment DiskSim's `disk_buffer_select_read_segment` would pick
/// (see [`Cache::holder`]). No span is longer than `span_bound`, so the
/// segments that may hold an LBN are found by a binary search and a short
/// scan back.
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
    /// At least the longest span of any segment (never lowered: it only
    /// bounds how far back a lookup scans).
    span_bound: u64,
    /// The one segment whose read-ahead may still be running (read misses
    /// stop all read-ahead before starting their own).
    prefetching: Option<SegmentId>,
    /// The segment whose running read-ahead the command under way stopped:
    /// to DiskSim, still reading when the command chose its segment, so a
    /// read miss takes it last.
    interrupted: Option<SegmentId>,
}

impl Segment {
    /// Where this segment's span ends: the read-ahead limit, or the data's end.
    fn limit_lbn(&self) -> u64 {
        self.span_end_lbn
    }

    /// Sets the data's end and the read-ahead, and the span they make.
    fn set(&mut self, end_lbn: u64, prefetch: Option<Prefetch>) {
        self.end_lbn = end_lbn;
        self.prefetch = prefetch;
        self.span_end_lbn = self.prefetch.as_ref().map_or(end_lbn, |prefetch| prefetch.limit_lbn().max(end_lbn));
    }

    /// Whether read-ahead is still bringing data in at `now_ns`.
    fn reading(&self, now_ns: f64) -> bool {
        self.reads_on_past(self.end_at(now_ns))
    }

    /// Whether read-ahead goes on past `valid_end` (the data's end now).
    fn reads_on_past(&self, valid_end: u64) -> bool {
        self.prefetch.as_ref().is_some_and(|prefetch| valid_end < prefetch.limit_lbn())
    }
}

impl Cache {
    pub fn new(segment_count: u32, segment_sectors: u64) -> Cache {
        Cache {
            segments: Vec::with_capacity(segment_count.max(1) as usize + 1),
            segment_count: segment_count.max(1) as usize,
            segment_sectors,
            clock: 0,
            span_bound: 0,
            prefetching: None,
            interrupted: None,
        }
    }

    fn index_of(&self, id: SegmentId) -> Option<usize> {
        let start = self.segments.partition_point(|segment| segment.first_lbn < id.first_lbn);
        self.segments[start..]
            .iter()
            .take_while(|segment| segment.first_lbn == id.first_lbn)
            .position(|segment| segment.id == id)
            .map(|offset| start + offset)
    }

    /// The indices of the segments whose spans may reach back to `lbn` from
    /// below `before_lbn`: every segment starting below `before_lbn` whose
    /// span reaches `lbn` is among them.
    fn reaching(&self, lbn: u64, before_lbn: u64) -> impl Iterator<Item = usize> + '_ {
        let end = self.segments.partition_point(|segment| segment.first_lbn < before_lbn);
        (0..end).rev().take_while(move |&index| self.segments[index].first_lbn.saturating_add(self.span_bound) >= lbn)
    }

    /// Records a change of the span of the segment at `index`.
    fn spanned(&mut self, index: usize) {
        let segment = &self.segments[index];
        self.span_bound = self.span_bound.max(segment.limit_lbn() - segment.first_lbn);
    }

    /// Stops all read-ahead at `now_ns`, keeping the sectors it read whole
    /// (see `Segment::stop_point`; with `finish_sector` the mechanism stays
    /// busy until the sector under way has passed). Returns where it stopped
    /// when read-ahead was running.
    pub fn stop_prefetch(&mut self, now_ns: f64, finish_sector: bool) -> Option<PrefetchStop> {
        let id = self.prefetching.take()?;
        let index = self.index_of(id)?;
        let segment = &mut self.segments[index];
        let prefetch = segment.prefetch.take()?;
        let stop = segment.stop_point(&prefetch, now_ns, finish_sector);
        segment.set(stop.end_lbn, None);
        if stop.end_lbn < prefetch.limit_lbn() {
            self.interrupted = Some(id);
        }
        Some(stop)
    }

    /// How DiskSim 4.0 ranks `segment` for a read of `[lbn, lbn + count)` at
    /// `now_ns`, if it holds the read's first sector: all of the read before
    /// part of it, and a segment still reading ahead before an idle one
    /// (`disk_buffer_select_read_segment`'s 9, 8, 5, 4); the sector being read
    /// ahead counts as held only with `almost_hits`.
    fn rank(&self, segment: &Segment, lbn: u64, count: u64, now_ns: f64, almost_hits: bool) -> Option<u8> {
        let valid_end = segment.end_at(now_ns);
        // With a sliding window, read-ahead overwrites the oldest data.
        let valid_first = segment.first_lbn.max(valid_end.saturating_sub(self.segment_sectors));
        if lbn < valid_first || lbn > valid_end {
            return None;
        }
        let reading = segment.reads_on_past(valid_end);
        if lbn + count <= valid_end {
            Some(8 + u8::from(reading))
        } else if lbn < valid_end {
            Some(4 + u8::from(reading))
        } else {
            (reading && almost_hits).then_some(5)
        }
    }

    /// The segment a read of `[lbn, lbn + count)` goes to, if one holds its
    /// first sector: the best ranked (see [`Cache::rank`]), the least recently
    /// used of equals (DiskSim scans its segments from the least recently used
    /// and keeps the first best).
    fn holder(&self, lbn: u64, count: u64, now_ns: f64, almost_hits: bool) -> Option<usize> {
        let mut best: Option<(u8, u64, usize)> = None;
        for index in self.reaching(lbn, lbn.saturating_add(1)) {
            let segment = &self.segments[index];
            if segment.limit_lbn() < lbn {
                continue;
            }
            let Some(rank) = self.rank(segment, lbn, count, now_ns, almost_hits) else { continue };
            if best.is_none_or(|(best_rank, last_use, _)| {
                (rank, std::cmp::Reverse(segment.last_use)) > (best_rank, std::cmp::Reverse(last_use))
            }) {
                best = Some((rank, segment.last_use, index));
            }
        }
        best.map(|(_, _, index)| index)
    }

    /// When `[lbn, lbn + count)` starts with data a segment holds at `now_ns`
    /// but not all of it, the end of the held part.
    pub fn cached_prefix_end(&self, lbn: u64, count: u64, now_ns: f64) -> Option<u64> {
        let segment = &self.segments[self.holder(lbn, count, now_ns, false)?];
        let valid_end = segment.end_at(now_ns);
        (valid_end < lbn + count).then_some(valid_end)
    }

    /// A partial hit on running read-ahead: when `[lbn, lbn + count)` starts
    /// with data a segment holds at `now_ns` and that segment's read-ahead,
    /// still under way, reaches the request's end, the time that end is
    /// buffered.
    pub fn stretch_running_prefetch(&mut self, lbn: u64, count: u64, now_ns: f64) -> Option<f64> {
        let index = self.holder(lbn, count, now_ns, false)?;
        let segment = &self.segments[index];
        let end_lbn = lbn + count;
        if !segment.reading(now_ns) || end_lbn <= segment.end_at(now_ns) {
            return None;
        }
        let ready_ns = segment.ready_ns(end_lbn)?;
        self.clock += 1;
        self.segments[index].last_use = self.clock;
        Some(ready_ns)
    }

    /// The last track's part of the running read-ahead, if its span (the data
    /// it holds or will bring) holds `lbn` at `now_ns` and a read of `[lbn,
    /// lbn + count)` goes to it — no other segment holding the read's first
    /// sector ranks above it ([`Cache::holder`]; DiskSim raises the target of
    /// the read-ahead of the segment a read is given, and no other) — and how
    /// far it may go on: to the first segment starting at or past where it
    /// stops now.
    pub fn running_prefetch_tail(
        &self,
        lbn: u64,
        count: u64,
        now_ns: f64,
        almost_hits: bool,
    ) -> Option<(PrefetchPiece, u64)> {
        let index = self.index_of(self.prefetching?)?;
        let segment = &self.segments[index];
        let prefetch = segment.prefetch.as_ref()?;
        let limit_lbn = prefetch.limit_lbn();
        if !segment.reading(now_ns) || lbn < segment.first_lbn || lbn >= limit_lbn {
            return None;
        }
        if self.holder(lbn, count, now_ns, almost_hits).is_some_and(|holder| holder != index) {
            return None;
        }
        let next = self.segments.partition_point(|other| other.first_lbn < limit_lbn);
        let next_first_lbn = self.segments.get(next).map_or(u64::MAX, |other| other.first_lbn);
        Some((prefetch.last_piece(), next_first_lbn))
    }

    /// Lets the running read-ahead (see [`Cache::running_prefetch_tail`])
    /// read on over `more`, at `now_ns`.
    pub fn extend_prefetch(&mut self, more: Vec<PrefetchPiece>, now_ns: f64) {
        let Some(index) = self.prefetching.and_then(|id| self.index_of(id)) else { return };
        let segment = &mut self.segments[index];
        if let Some(mut prefetch) = segment.prefetch.take() {
            let end_lbn = prefetch.drop_read_pieces(now_ns).map_or(segment.end_lbn, |end| end.max(segment.end_lbn));
            prefetch.extend(more);
            segment.set(end_lbn, Some(prefetch));
            self.spanned(index);
        }
    }

    /// The end of the data of the segment that served `hit`, when its
    /// read-ahead has stopped or run to its limit by `now_ns`.
    pub fn idle_segment_end(&self, hit: &Hit, now_ns: f64) -> Option<u64> {
        let segment = &self.segments[self.index_of(hit.segment)?];
        (!segment.reading(now_ns)).then(|| segment.end_at(now_ns))
    }

    /// Restarts read-ahead into the segment that served `hit` (see
    /// [`Cache::idle_segment_end`]) at `now_ns`.
    pub fn resume_prefetch(&mut self, hit: &Hit, now_ns: f64, prefetch: Prefetch) {
        let _ = self.stop_prefetch(now_ns, false);
        let Some(index) = self.index_of(hit.segment) else { return };
        let segment = &mut self.segments[index];
        segment.set(segment.end_at(now_ns), Some(prefetch));
        self.prefetching = Some(segment.id);
        self.spanned(index);
    }

    /// Whether `[lbn, lbn + count)` can be served from the cache at `now_ns`
    /// (no LRU update); see [`Cache::lookup`].
    pub fn contains(&self, lbn: u64, count: u64, now_ns: f64, almost_hits: bool) -> bool {
        self.holder(lbn, count, now_ns, almost_hits)
            .is_some_and(|index| self.serves(&self.segments[index], lbn, count, now_ns, almost_hits).is_some())
    }

    /// If `[lbn, lbn + count)` can be served from the cache, the time at which
    /// all of it is in the buffer, and the segment serving it. Data already
    /// buffered at `now_ns` always serve; data still being read ahead serve
    /// only with `almost_hits`.
    pub fn lookup(&mut self, lbn: u64, count: u64, now_ns: f64, almost_hits: bool) -> Option<Hit> {
        self.clock += 1;
        self.interrupted = None;
        let index = self.holder(lbn, count, now_ns, almost_hits)?;
        let ready_ns = self.serves(&self.segments[index], lbn, count, now_ns, almost_hits)?;
        let segment = &mut self.segments[index];
        segment.last_use = self.clock;
        Some(Hit { ready_ns, segment: segment.id })
    }

    /// When `segment`, holding `lbn` (see [`Cache::holder`]), has all of
    /// `[lbn, lbn + count)`: at once when it is buffered at `now_ns`; with
    /// `almost_hits`, when read-ahead brings the rest.
    fn serves(&self, segment: &Segment, lbn: u64, count: u64, now_ns: f64, almost_hits: bool) -> Option<f64> {
        if lbn + count <= segment.end_at(now_ns) {
            return Some(f64::NEG_INFINITY);
        }
        almost_hits.then(|| segment.ready_ns(lbn + count)).flatten()
    }

    /// Gives a read of `[lbn, lbn + count)` that reaches the medium a segment,
    /// as DiskSim 4.0 does: the one holding its first sector (a partial hit),
    /// else an unused one, else the least recently used of those not reading
    /// ahead when the read came, else the one that was; the others keep their
    /// data. The segment then holds `[first_lbn, end_lbn)`, with read-ahead.
    pub fn fill_for_read(
        &mut self,
        (lbn, count): (u64, u64),
        now_ns: f64,
        (first_lbn, end_lbn): (u64, u64),
        prefetch: Option<Prefetch>,
    ) {
        let interrupted = self.interrupted.take().and_then(|id| self.index_of(id));
        let victim = self.holder(lbn, count, now_ns, false).or_else(|| {
            let full = self.segments.len() >= self.segment_count;
            full.then(|| self.oldest(interrupted)).flatten()
        });
        if let Some(index) = victim {
            self.remove(index);
        }
        self.fill(first_lbn, end_lbn, prefetch);
    }

    /// The index of the least recently used segment, that at `last` (if
    /// any) only when it is the one segment.
    fn oldest(&self, last: Option<usize>) -> Option<usize> {
        let age = |index: usize, segment: &Segment| if Some(index) == last { u64::MAX } else { segment.last_use };
        self.segments.iter().enumerate().min_by_key(|&(index, segment)| age(index, segment)).map(|(index, _)| index)
    }

    /// Records `[first, end)` as cached (written data), with no read-ahead,
    /// replacing any overlapping segments and else the least recently used one.
    pub fn insert_written(&mut self, first_lbn: u64, end_lbn: u64) {
        self.interrupted = None;
        self.invalidate(first_lbn, end_lbn);
        self.fill(first_lbn, end_lbn, None);
    }

    /// Puts `[first, end)` and its read-ahead in a segment, replacing the
    /// least recently used one when all are taken.
    fn fill(&mut self, first_lbn: u64, end_lbn: u64, prefetch: Option<Prefetch>) {
        if self.segments.len() >= self.segment_count {
            if let Some(oldest) = self.oldest(None) {
                self.remove(oldest);
            }
        }
        self.clock += 1;
        let id = SegmentId { first_lbn, serial: self.clock };
        if prefetch.is_some() {
            self.prefetching = Some(id);
        }
        let mut segment =
            Segment { id, first_lbn, end_lbn, prefetch: None, last_use: self.clock, span_end_lbn: end_lbn };
        segment.set(end_lbn, prefetch);
        let index = self.segments.partition_point(|existing| existing.first_lbn <= first_lbn);
        self.segments.insert(index, segment);
        self.spanned(index);
    }

    /// Drops cached data overlapping `[first, end)` (a write).
    pub fn invalidate(&mut self, first_lbn: u64, end_lbn: u64) {
        loop {
            let found = self.reaching(first_lbn, end_lbn).find(|&index| first_lbn < self.segments[index].limit_lbn());
            let Some(index) = found else { break };
            self.remove(index);
        }
    }

    fn remove(&mut self, index: usize) {
        let segment = self.segments.remove(index);
        if self.prefetching == Some(segment.id) {
            self.prefetching = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A read of `[first, end)` that missed, at time 0.
    fn read(cache: &mut Cache, first_lbn: u64, end_lbn: u64, prefetch: Option<Prefetch>) {
        cache.fill_for_read((first_lbn, end_lbn - first_lbn), 0.0, (first_lbn, end_lbn), prefetch);
    }

    fn ready(cache: &mut Cache, lbn: u64, count: u64, now_ns: f64, almost_hits: bool) -> Option<f64> {
        cache.lookup(lbn, count, now_ns, almost_hits).map(|hit| hit.ready_ns)
    }

    #[test]
    fn prefetch_fills_over_time_and_stops() {
        let mut cache = Cache::new(2, 1024);
        read(&mut cache, 100, 108, Some(Prefetch::linear(108, 1000.0, 10.0, 200)));
        assert_eq!(ready(&mut cache, 100, 8, 0.0, false), Some(f64::NEG_INFINITY));
        assert_eq!(ready(&mut cache, 108, 8, 1000.0, true), Some(1080.0));
        assert_eq!(ready(&mut cache, 108, 8, 1000.0, false), None);
        assert_eq!(ready(&mut cache, 108, 8, 1080.0, false), Some(f64::NEG_INFINITY));
        assert_eq!(ready(&mut cache, 300, 8, 1000.0, true), None);
        let _ = cache.stop_prefetch(1045.0, false);
        assert_eq!(ready(&mut cache, 108, 4, 2000.0, false), Some(f64::NEG_INFINITY));
        assert_eq!(ready(&mut cache, 108, 8, 2000.0, true), None);
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
            read(&mut cache, 100, 108, prefetch());
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

    /// Whether any segment holds all of the range at `now_ns`, or (with
    /// `almost_hits`) its first sector and will read the rest ahead.
    fn served_by_any(cache: &Cache, lbn: u64, count: u64, now_ns: f64, almost_hits: bool) -> bool {
        cache.segments.iter().any(|segment| {
            let valid_end = segment.end_at(now_ns);
            let valid_first = segment.first_lbn.max(valid_end.saturating_sub(cache.segment_sectors));
            let reading = segment.reading(now_ns);
            lbn >= valid_first
                && (lbn + count <= valid_end
                    || (almost_hits && reading && lbn <= valid_end && segment.ready_ns(lbn + count).is_some()))
        })
    }

    /// What the drive does to its cache, in the orders it does it.
    #[derive(Debug, Clone)]
    enum Step {
        /// A read that misses: the lookup, read-ahead stopped, a segment
        /// filled, with read-ahead after it (`ahead` sectors at `sector_ns`)
        /// or none.
        ReadMiss { first: u64, count: u64, ahead: Option<(u64, u64)> },
        /// A lookup; on a hit, read-ahead resumed in its segment when idle
        /// (`Read-ahead on idle hit`) over `ahead` sectors.
        Lookup { lbn: u64, count: u64, almost_hits: bool, ahead: Option<u64> },
        /// The running read-ahead carried on by `more` sectors for a read
        /// `offset` sectors into its segment's span, when the read goes to it.
        Extend { offset: u64, count: u64, more: u64 },
        /// A write: read-ahead stopped, the data kept for read hits or dropped.
        Write { first: u64, count: u64, kept: bool },
        /// Read-ahead stopped with nothing after it (the heads moved).
        Stop,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0..2_000u64, 1..40u64, proptest::option::of((1..100u64, 1..5u64)))
                .prop_map(|(first, count, ahead)| Step::ReadMiss { first, count, ahead }),
            (0..2_200u64, 1..16u64, any::<bool>(), proptest::option::of(1..100u64))
                .prop_map(|(lbn, count, almost_hits, ahead)| Step::Lookup { lbn, count, almost_hits, ahead }),
            (0..200u64, 1..16u64, 1..100u64).prop_map(|(offset, count, more)| Step::Extend { offset, count, more }),
            (0..2_000u64, 1..40u64, any::<bool>()).prop_map(|(first, count, kept)| Step::Write { first, count, kept }),
            Just(Step::Stop),
        ]
    }

    fn apply(cache: &mut Cache, step: &Step, now_ns: f64) {
        match *step {
            Step::ReadMiss { first, count, ahead } => {
                let _ = cache.lookup(first, count, now_ns, false);
                let _ = cache.stop_prefetch(now_ns, false);
                let end = first + count;
                let prefetch = ahead
                    .map(|(sectors, sector_ns)| Prefetch::linear(end, now_ns + 10.0, sector_ns as f64, end + sectors));
                cache.fill_for_read((first, count), now_ns, (first, end), prefetch);
            }
            Step::Lookup { lbn, count, almost_hits, ahead } => {
                let Some(hit) = cache.lookup(lbn, count, now_ns, almost_hits) else { return };
                let (Some(sectors), Some(end)) = (ahead, cache.idle_segment_end(&hit, now_ns)) else { return };
                cache.resume_prefetch(&hit, now_ns, Prefetch::linear(end, now_ns, 2.0, end + sectors));
            }
            Step::Extend { offset, count, more } => {
                let Some(running) = cache.prefetching.and_then(|id| cache.index_of(id)) else { return };
                let lbn = cache.segments[running].first_lbn + offset;
                let Some((tail, _)) = cache.running_prefetch_tail(lbn, count, now_ns, true) else { return };
                let start_ns = tail.end_ns();
                let next = PrefetchPiece {
                    first_lbn: tail.end_lbn,
                    end_lbn: tail.end_lbn + more,
                    switch_ns: 0.0,
                    arrival_ns: start_ns,
                    start_ns,
                    sector_ns: tail.sector_ns,
                };
                cache.extend_prefetch(vec![next], now_ns);
            }
            Step::Write { first, count, kept } => {
                let _ = cache.stop_prefetch(now_ns, false);
                if kept {
                    cache.insert_written(first, first + count);
                } else {
                    cache.invalidate(first, first + count);
                }
            }
            Step::Stop => {
                let _ = cache.stop_prefetch(now_ns, false);
            }
        }
    }

    proptest! {
        /// Whatever the drive does, the cache holds at most its segments, at
        /// most one reads ahead, they stay sorted with no span beyond the
        /// bound a lookup scans back over, and a lookup finds whatever any
        /// segment holds.
        #[test]
        fn lookup_finds_whatever_any_segment_holds(
            window in prop_oneof![Just(u64::MAX), Just(64u64)],
            steps in proptest::collection::vec((0..100u64, step(), 0..2_200u64, 1..16u64, any::<bool>()), 1..300),
        ) {
            let mut cache = Cache::new(8, window);
            let mut now_ns = 0.0;
            for (elapsed_ns, step, lbn, count, almost_hits) in steps {
                now_ns += elapsed_ns as f64;
                apply(&mut cache, &step, now_ns);
                prop_assert!(cache.segments.len() <= 8);
                prop_assert!(cache.segments.iter().filter(|segment| segment.reading(now_ns)).count() <= 1);
                prop_assert!(cache.segments.windows(2).all(|pair| pair[0].first_lbn <= pair[1].first_lbn));
                prop_assert!(cache.segments.iter().all(|segment| segment.limit_lbn() - segment.first_lbn <= cache.span_bound));
                prop_assert_eq!(
                    cache.contains(lbn, count, now_ns, almost_hits),
                    served_by_any(&cache, lbn, count, now_ns, almost_hits),
                    "[{}, +{}) at {} after {:?}", lbn, count, now_ns, step
                );
            }
        }
    }

    #[test]
    fn least_recently_used_segment_is_replaced() {
        let mut cache = Cache::new(2, 1024);
        read(&mut cache, 0, 8, None);
        read(&mut cache, 100, 108, None);
        assert!(cache.lookup(0, 8, 0.0, false).is_some());
        read(&mut cache, 200, 208, None);
        assert!(cache.lookup(0, 8, 0.0, false).is_some());
        assert!(cache.lookup(100, 8, 0.0, false).is_none());
    }

    #[test]
    fn a_read_miss_takes_the_least_recently_used_segment_and_leaves_overlapped_data() {
        // As DiskSim 4.0 does: the read at 90 reads ahead over the segment at
        // 100, yet takes the segment at 0, the least recently used.
        let mut cache = Cache::new(2, 1024);
        read(&mut cache, 0, 8, None);
        read(&mut cache, 100, 108, None);
        read(&mut cache, 90, 92, Some(Prefetch::linear(92, 1000.0, 10.0, 200)));
        assert!(cache.lookup(0, 8, 0.0, false).is_none());
        assert_eq!(ready(&mut cache, 100, 8, 1000.0, false), Some(f64::NEG_INFINITY));
        // Writes clear whatever they overlap.
        cache.insert_written(104, 105);
        assert!(cache.lookup(100, 4, 1000.0, false).is_none());
    }

    #[test]
    fn a_read_miss_takes_the_segment_it_stopped_reading_ahead_last() {
        let mut cache = Cache::new(2, 1024);
        read(&mut cache, 0, 8, Some(Prefetch::linear(8, 0.0, 10.0, 200)));
        read(&mut cache, 500, 508, None);
        // The segment at 0 is the least recently used, but it was still
        // reading ahead when the next miss came and stopped it.
        let _ = cache.lookup(900, 8, 60.0, false);
        let _ = cache.stop_prefetch(60.0, false);
        cache.fill_for_read((900, 8), 60.0, (900, 908), None);
        assert!(cache.lookup(0, 4, 70.0, false).is_some());
        assert!(cache.lookup(500, 8, 70.0, false).is_none());
    }

    #[test]
    fn a_partial_hit_that_reads_on_keeps_its_segment() {
        let mut cache = Cache::new(2, 1024);
        read(&mut cache, 0, 8, None);
        read(&mut cache, 100, 108, None);
        // [104, 120) starts in the segment at 100 (the least recently used is
        // the one at 0): the read takes the segment it partly hit.
        cache.fill_for_read((104, 16), 0.0, (104, 120), None);
        assert!(cache.lookup(0, 8, 0.0, false).is_some());
        assert!(cache.lookup(100, 4, 0.0, false).is_none());
        assert!(cache.lookup(104, 16, 0.0, false).is_some());
    }

    #[test]
    fn sliding_window_drops_the_oldest_data() {
        let mut cache = Cache::new(1, 16);
        read(&mut cache, 0, 8, Some(Prefetch::linear(8, 0.0, 1.0, 100)));
        assert!(cache.lookup(0, 8, 5.0, false).is_some());
        assert!(cache.lookup(0, 8, 20.0, false).is_none());
        assert!(cache.lookup(12, 8, 20.0, false).is_some());
    }
}
