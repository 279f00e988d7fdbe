//! Puts a trace's requests in time order and numbers them.
//!
//! Some traces are not sorted by issue time (Systor'17's are not). Requests
//! pass through a window of `window` requests held in a heap and leave it
//! earliest first, so any disorder within the window is repaired with bounded
//! memory. A request that still arrives after a later one has left (further
//! out of order than the window) keeps its place but takes the time already
//! reached: it is counted as *late*.
//!
//! The first request to leave sets the origin: recorded times are made
//! relative to it, so replay starts at 0. Requests are numbered in the order
//! they leave: that order is the trace's order for reordering figures.
//!
//! Where the trace records response times, each request also carries the
//! number of requests the trace had in flight just after issuing it (itself
//! included), counted from the completion times of the requests before it: the
//! in-flight limits of the faithful and load modes follow it.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::request::TraceRequest;
use crate::trace::TraceError;

/// A request in trace order, with its times relative to the origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sequenced {
    /// Position in trace (time) order, from 0.
    pub sequence: u64,
    /// The request as read.
    pub request: TraceRequest,
    /// Its issue time relative to the origin (never before an earlier request's).
    pub issue_ns: u64,
    /// Requests the trace had in flight just after issuing it, itself included.
    pub in_flight: Option<u32>,
}

impl Sequenced {
    /// The recorded completion, relative to the origin.
    pub fn completion_ns(&self) -> Option<u64> {
        self.request.response_ns.map(|response| self.issue_ns.saturating_add(response))
    }
}

/// A request in the window, ordered by issue time then arrival.
#[derive(Debug)]
struct Held {
    issue_ns: u64,
    arrival: u64,
    request: TraceRequest,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.issue_ns, self.arrival).cmp(&(other.issue_ns, other.arrival))
    }
}

/// The time-ordering window over a stream of requests.
#[derive(Debug)]
pub struct TimeOrder<I> {
    source: I,
    window: usize,
    held: BinaryHeap<Reverse<Held>>,
    arrivals: u64,
    source_done: bool,
    origin_ns: Option<u64>,
    last_issue_ns: u64,
    next_sequence: u64,
    late: u64,
    /// Recorded completion times (relative) of requests still in flight.
    completions: BinaryHeap<Reverse<u64>>,
}

impl<I: Iterator<Item = Result<TraceRequest, TraceError>>> TimeOrder<I> {
    /// Orders `source` within `window` requests (at least 1).
    pub fn new(source: I, window: usize) -> TimeOrder<I> {
        TimeOrder {
            source,
            window: window.max(1),
            held: BinaryHeap::new(),
            arrivals: 0,
            source_done: false,
            origin_ns: None,
            last_issue_ns: 0,
            next_sequence: 0,
            late: 0,
            completions: BinaryHeap::new(),
        }
    }

    /// Requests that arrived later than the window could repair.
    pub fn late_count(&self) -> u64 {
        self.late
    }

    /// The source iterator (to read its progress).
    pub fn source(&self) -> &I {
        &self.source
    }

    fn release(&mut self, held: Held) -> Sequenced {
        let origin = *self.origin_ns.get_or_insert(held.issue_ns);
        let relative = held.issue_ns.saturating_sub(origin);
        if relative < self.last_issue_ns || held.issue_ns < origin {
            self.late += 1;
        }
        let issue_ns = relative.max(self.last_issue_ns);
        self.last_issue_ns = issue_ns;
        let in_flight = held.request.response_ns.map(|response| {
            while self.completions.peek().is_some_and(|Reverse(completion)| *completion <= issue_ns) {
                self.completions.pop();
            }
            self.completions.push(Reverse(issue_ns.saturating_add(response)));
            u32::try_from(self.completions.len()).unwrap_or(u32::MAX)
        });
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        Sequenced { sequence, request: held.request, issue_ns, in_flight }
    }
}

impl<I: Iterator<Item = Result<TraceRequest, TraceError>>> Iterator for TimeOrder<I> {
    type Item = Result<Sequenced, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.source_done && self.held.len() < self.window {
            match self.source.next() {
                Some(Ok(request)) => {
                    self.held.push(Reverse(Held { issue_ns: request.issue_ns, arrival: self.arrivals, request }));
                    self.arrivals += 1;
                }
                Some(Err(error)) => {
                    self.source_done = true;
                    self.held.clear();
                    return Some(Err(error));
                }
                None => self.source_done = true,
            }
        }
        let Reverse(held) = self.held.pop()?;
        Some(Ok(self.release(held)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Operation;

    fn request(issue_ns: u64, response_ns: Option<u64>) -> Result<TraceRequest, TraceError> {
        Ok(TraceRequest {
            line_number: 0,
            issue_ns,
            device: 0,
            operation: Operation::Read,
            offset_bytes: 0,
            length_bytes: 512,
            response_ns,
        })
    }

    #[test]
    fn disorder_within_the_window_is_repaired() {
        let source = vec![request(130, None), request(100, None), request(120, None), request(110, None)];
        let ordered: Vec<Sequenced> = TimeOrder::new(source.into_iter(), 4).map(Result::unwrap).collect();
        let times: Vec<u64> = ordered.iter().map(|sequenced| sequenced.issue_ns).collect();
        assert_eq!(times, [0, 10, 20, 30]);
        assert_eq!(ordered.iter().map(|sequenced| sequenced.sequence).collect::<Vec<_>>(), [0, 1, 2, 3]);
    }

    #[test]
    fn disorder_beyond_the_window_is_late() {
        let source = vec![request(100, None), request(200, None), request(50, None)];
        let mut order = TimeOrder::new(source.into_iter(), 1);
        let times: Vec<u64> = order.by_ref().map(|sequenced| sequenced.unwrap().issue_ns).collect();
        assert_eq!(times, [0, 100, 100]);
        assert_eq!(order.late_count(), 1);
    }

    #[test]
    fn in_flight_counts_follow_recorded_completions() {
        let source = vec![request(0, Some(100)), request(10, Some(100)), request(50, Some(10)), request(150, Some(5))];
        let counts: Vec<Option<u32>> =
            TimeOrder::new(source.into_iter(), 8).map(|sequenced| sequenced.unwrap().in_flight).collect();
        assert_eq!(counts, [Some(1), Some(2), Some(3), Some(1)]);
    }
}
