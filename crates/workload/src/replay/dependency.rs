//! hfplayer's dependency inference (Haghdoost et al., FAST'17, section 3.1):
//! which earlier requests a request waited for, guessed from timing alone.
//!
//! Start by taking every request as dependent on every earlier one; drop the
//! pairs that cannot be dependent — they overlap in time (the earlier one
//! completed after the later one was issued), or the think time between the
//! earlier one's completion and the later one's issue is shorter than a
//! threshold (about 10 µs on the paper's testbed: the least time an
//! application needs to see a completion and issue again) — then drop the
//! edges implied by others (transitive reduction).
//!
//! For a request `j` issued at `t_j`, the *candidates* are the earlier
//! requests `i` with `c_i + threshold <= t_j`. A candidate is redundant when
//! another candidate `k` depends on it (`c_i + threshold <= t_k`): then `j`
//! waits for `i` through `k`. So with `S` the latest issue time among the
//! candidates, the parents are the candidates with `c_i + threshold > S`. The
//! candidate set only grows as `t_j` does, so `S` never decreases, and a
//! request with `c_i + threshold <= S` can never again be a parent: it is
//! forgotten. What is kept is the requests still in flight or recently
//! completed, so memory is bounded by the trace's concurrency.
//!
//! Replay issues a child at the latest of its parents' replayed completions
//! plus the original think time after each (`t_j − c_i`).

use crate::replay::order::Sequenced;

/// The default think-time threshold: 10 µs, as in the paper.
pub const THINK_THRESHOLD_NS_DEFAULT: u64 = 10_000;

/// One inferred dependency of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parent {
    /// The parent's sequence number.
    pub sequence: u64,
    /// The recorded think time from the parent's completion to the child's issue.
    pub think_ns: u64,
}

/// A request that may still be a parent.
#[derive(Debug, Clone, Copy)]
struct Recent {
    sequence: u64,
    issue_ns: u64,
    completion_ns: u64,
}

/// The streaming inference over requests in trace order.
#[derive(Debug)]
pub struct DependencyInference {
    threshold_ns: u64,
    recent: Vec<Recent>,
    /// The latest issue time among all candidates so far (`S`).
    latest_candidate_issue_ns: Option<u64>,
}

impl DependencyInference {
    /// An inference with a think-time threshold (at least 1 ns).
    pub fn new(threshold_ns: u64) -> DependencyInference {
        DependencyInference { threshold_ns: threshold_ns.max(1), recent: Vec::new(), latest_candidate_issue_ns: None }
    }

    /// The smallest sequence number a later request may still name as a
    /// parent (every older one is forgotten).
    pub fn oldest_possible_parent(&self) -> Option<u64> {
        self.recent.iter().map(|recent| recent.sequence).min()
    }

    /// The parents of `request` (whose completion must be recorded); takes it
    /// in as a possible parent of later requests.
    pub fn parents(&mut self, request: &Sequenced, completion_ns: u64) -> Vec<Parent> {
        let issue = request.issue_ns;
        let threshold = self.threshold_ns;
        let is_candidate = |recent: &Recent| recent.completion_ns.saturating_add(threshold) <= issue;
        let newest_candidate =
            self.recent.iter().filter(|recent| is_candidate(recent)).map(|recent| recent.issue_ns).max();
        if let Some(newest) = newest_candidate {
            self.latest_candidate_issue_ns = Some(self.latest_candidate_issue_ns.map_or(newest, |s| s.max(newest)));
        }
        let parents = match self.latest_candidate_issue_ns {
            Some(latest) => {
                let parents: Vec<Parent> = self
                    .recent
                    .iter()
                    .filter(|recent| is_candidate(recent) && recent.completion_ns.saturating_add(threshold) > latest)
                    .map(|recent| Parent { sequence: recent.sequence, think_ns: issue - recent.completion_ns })
                    .collect();
                self.recent.retain(|recent| recent.completion_ns.saturating_add(threshold) > latest);
                parents
            }
            None => Vec::new(),
        };
        self.recent.push(Recent { sequence: request.sequence, issue_ns: issue, completion_ns });
        parents
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Operation, TraceRequest};

    fn sequenced(sequence: u64, issue_ns: u64) -> Sequenced {
        let request = TraceRequest {
            line_number: sequence + 1,
            issue_ns,
            device: 0,
            operation: Operation::Read,
            offset_bytes: 0,
            length_bytes: 512,
            response_ns: None,
        };
        Sequenced { sequence, request, issue_ns, in_flight: None }
    }

    /// The shape of the paper's Figure 2: A and B overlap; D is issued after
    /// A completed; C follows B's completion within the threshold; E comes
    /// after everything, and A→E is implied through A→D.
    #[test]
    fn overlap_short_think_and_implied_edges() {
        let mut inference = DependencyInference::new(10);
        // (issue, completion) in issue order: A, B, D, C, E.
        let timings = [(0, 100), (50, 200), (150, 400), (205, 300), (450, 500)];
        let parents: Vec<Vec<u64>> = timings
            .iter()
            .enumerate()
            .map(|(index, &(issue, completion))| {
                let request = sequenced(index as u64, issue);
                inference.parents(&request, completion).iter().map(|parent| parent.sequence).collect()
            })
            .collect();
        assert_eq!(parents[0], Vec::<u64>::new(), "A is a root");
        assert_eq!(parents[1], Vec::<u64>::new(), "B overlaps A");
        assert_eq!(parents[2], vec![0], "D after A's completion");
        assert_eq!(parents[3], vec![0], "C: B completed 5 ns before, under the threshold");
        assert_eq!(parents[4], vec![1, 2, 3], "E after B, D and C; A is implied through D");
    }

    #[test]
    fn a_closed_loop_chain_depends_on_its_predecessor_only() {
        let mut inference = DependencyInference::new(10);
        let mut issue = 0;
        for sequence in 0..100 {
            let completion = issue + 1000;
            let parents = inference.parents(&sequenced(sequence, issue), completion);
            if sequence == 0 {
                assert!(parents.is_empty());
            } else {
                assert_eq!(parents, vec![Parent { sequence: sequence - 1, think_ns: 50 }]);
            }
            issue = completion + 50;
        }
        assert!(inference.recent.len() <= 2, "forgotten as they are dominated");
    }
}
