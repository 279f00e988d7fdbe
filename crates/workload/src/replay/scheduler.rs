//! Which request goes next, and when.
//!
//! [`InOrder`] serves the timed and untimed modes that keep the trace's order
//! (faithful, scaled, AFAP, load): only the next request matters, ready at its
//! mode's time. [`DependencyOrder`] serves dependency mode: a request is ready
//! once every inferred parent has completed in the replay, at the last of
//! those completions plus its *slack*: the recorded time from the completion
//! of the parent that finished last to its own issue (as hfplayer's replay
//! engine does); and the earliest ready request goes next, whatever its place
//! in the trace.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};

use super::dependency::Parent;
use super::mapping::TargetRequest;
use super::order::Sequenced;

/// A request read from the trace and mapped, not yet issued.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The request in trace order.
    pub sequenced: Sequenced,
    /// What the target receives.
    pub request: TargetRequest,
    /// The most requests in flight once it is issued (itself included).
    pub in_flight_max: Option<u32>,
}

/// The next candidate: when it is ready, its sequence number, its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// When it may be issued.
    pub ready_ns: u64,
    /// Its sequence number.
    pub sequence: u64,
    /// Its in-flight limit.
    pub in_flight_max: Option<u32>,
}

/// Trace order, each request ready at a time its mode gives.
#[derive(Debug, Default)]
pub struct InOrder {
    queue: VecDeque<(u64, Entry)>,
}

impl InOrder {
    /// Queues `entry`, ready at `ready_ns`.
    pub fn push(&mut self, entry: Entry, ready_ns: u64) {
        self.queue.push_back((ready_ns, entry));
    }

    /// The next request in trace order.
    pub fn candidate(&self) -> Option<Candidate> {
        self.queue.front().map(|(ready_ns, entry)| Candidate {
            ready_ns: *ready_ns,
            sequence: entry.sequenced.sequence,
            in_flight_max: entry.in_flight_max,
        })
    }

    /// Takes the candidate.
    pub fn pop(&mut self) -> Entry {
        self.queue.pop_front().expect("a candidate was offered").1
    }

    /// Requests held.
    pub fn len(&self) -> usize {
        self.queue.len()
    }
}

/// A request waiting for parents or its time.
#[derive(Debug)]
struct Waiting {
    entry: Entry,
    parents_left: usize,
    /// The latest replay completion among its resolved parents.
    last_parent_completion_ns: u64,
    /// Whether any parent was replayed (not skipped).
    any_parent_replayed: bool,
    /// The recorded time from its last parent's completion to its issue.
    slack_ns: u64,
    /// When it may be issued, once no parent is left (a root: its recorded time).
    ready_ns: u64,
}

impl Waiting {
    /// When it may go once no parent is left: after the last replayed parent
    /// plus the slack, or at its recorded time if none was replayed.
    fn ready_time(&self) -> u64 {
        if self.any_parent_replayed {
            self.last_parent_completion_ns.saturating_add(self.slack_ns)
        } else {
            self.entry.sequenced.issue_ns
        }
    }
}

/// Dependency order: ready when the parents are done.
#[derive(Debug, Default)]
pub struct DependencyOrder {
    waiting: HashMap<u64, Waiting>,
    /// Children waiting on each parent.
    children: HashMap<u64, Vec<u64>>,
    ready: BinaryHeap<Reverse<(u64, u64)>>,
    /// Replay completions of requests that may still be parents; `None` for a
    /// request that was not replayed (its children do not wait for it).
    resolved: BTreeMap<u64, Option<u64>>,
}

impl DependencyOrder {
    /// Queues `entry` with its parents; a root is ready at its recorded time.
    pub fn push(&mut self, entry: Entry, parents: &[Parent]) {
        let sequence = entry.sequenced.sequence;
        let slack_ns = parents.iter().map(|parent| parent.think_ns).min().unwrap_or(0);
        let mut waiting = Waiting {
            ready_ns: 0,
            entry,
            parents_left: 0,
            last_parent_completion_ns: 0,
            any_parent_replayed: false,
            slack_ns,
        };
        let mut any_replayed = false;
        for parent in parents {
            match self.resolved.get(&parent.sequence) {
                Some(Some(completion_ns)) => {
                    waiting.last_parent_completion_ns = waiting.last_parent_completion_ns.max(*completion_ns);
                    any_replayed = true;
                }
                Some(None) => {}
                None => {
                    self.children.entry(parent.sequence).or_default().push(sequence);
                    waiting.parents_left += 1;
                }
            }
        }
        waiting.any_parent_replayed = any_replayed;
        if waiting.parents_left == 0 {
            waiting.ready_ns = waiting.ready_time();
            self.ready.push(Reverse((waiting.ready_ns, sequence)));
        }
        self.waiting.insert(sequence, waiting);
    }

    /// Notes that `sequence` will not be replayed.
    pub fn skipped(&mut self, sequence: u64) {
        self.resolve(sequence, None);
    }

    /// Notes the replay completion of `sequence`; children may become ready.
    pub fn completed(&mut self, sequence: u64, completion_ns: u64) {
        self.resolve(sequence, Some(completion_ns));
    }

    fn resolve(&mut self, sequence: u64, completion_ns: Option<u64>) {
        self.resolved.insert(sequence, completion_ns);
        for child in self.children.remove(&sequence).unwrap_or_default() {
            let waiting = self.waiting.get_mut(&child).expect("children wait until their parents resolve");
            if let Some(completion_ns) = completion_ns {
                waiting.last_parent_completion_ns = waiting.last_parent_completion_ns.max(completion_ns);
                waiting.any_parent_replayed = true;
            }
            waiting.parents_left -= 1;
            if waiting.parents_left == 0 {
                waiting.ready_ns = waiting.ready_time();
                self.ready.push(Reverse((waiting.ready_ns, child)));
            }
        }
    }

    /// Forgets the completions of requests older than `oldest_parent`: no
    /// request still to come can name them.
    pub fn forget_before(&mut self, oldest_parent: u64) {
        self.resolved = self.resolved.split_off(&oldest_parent);
    }

    /// The ready request with the earliest time.
    pub fn candidate(&self) -> Option<Candidate> {
        self.ready.peek().map(|Reverse((ready_ns, sequence))| Candidate {
            ready_ns: *ready_ns,
            sequence: *sequence,
            in_flight_max: self.waiting[sequence].entry.in_flight_max,
        })
    }

    /// Takes the candidate.
    pub fn pop(&mut self) -> Entry {
        let Reverse((_, sequence)) = self.ready.pop().expect("a candidate was offered");
        self.waiting.remove(&sequence).expect("ready requests are held").entry
    }

    /// Requests held (waiting or ready).
    pub fn len(&self) -> usize {
        self.waiting.len()
    }
}
