//! Foreground-first I/O scheduling as a pure policy: which request a device
//! gets next, when client (foreground) requests share it with background work
//! (destage, cleaning, deletion scans). No I/O happens here: the caller admits
//! requests, asks for the next dispatch whenever the device may take one, and
//! reports completions.
//!
//! # Model (request-centric prioritisation)
//!
//! - **Two classes, admitted apart.** Foreground and background requests have
//!   their own admission slots ([`PrioritySettings::foreground_slots`],
//!   [`PrioritySettings::background_slots`]; 128 each by default): a burst of
//!   background work cannot take the places client requests need.
//! - **Foreground first.** Each class waits in its own FIFO queue; the
//!   foreground queue is always served first.
//! - **Bounded background.** At most [`PriorityScheduler::background_limit`]
//!   background requests are outstanding at the device, so a client request
//!   arriving finds at most that many background requests ahead of it there.
//! - **No starvation.** A background request that has waited
//!   [`PrioritySettings::starvation_interval_ns`] (10 ms by default) without
//!   any background dispatch goes next, whatever the limit and the foreground
//!   queue.
//! - **Promotion.** A queued background request a foreground request depends
//!   on (its data, its room) is moved to the foreground queue
//!   ([`PriorityScheduler::promote`]).
//! - **Pacing.** [`background_limit_for_backlog`] raises the limit as the
//!   background backlog (for destage: the staging area's fill) rises past its
//!   high-water mark, so background work keeps up with the foreground's rate
//!   without taking the device from clients while it has room.
//!
//! # Invariants
//!
//! - Requests outstanding at the device never exceed
//!   [`PrioritySettings::device_depth`].
//! - Background requests outstanding exceed the limit only through a
//!   starvation dispatch, one at a time.
//! - Every admitted request is dispatched exactly once and completed exactly
//!   once; queued plus outstanding requests of a class never exceed its slots
//!   at admission (a promoted request moves to the foreground's count).

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;

use thiserror::Error;

/// Admission slots per class by default.
pub const DEFAULT_SLOTS_PER_CLASS: usize = 128;

/// Longest a queued background request waits without any background dispatch
/// before it goes next, by default (10 ms).
pub const DEFAULT_STARVATION_INTERVAL_NS: u64 = 10_000_000;

/// Background requests outstanding at a device while the backlog is below its
/// high-water mark, by default.
pub const DEFAULT_BACKGROUND_LIMIT: usize = 1;

/// Backlog (for destage, the staging fill), percent of its room, above which
/// the background limit rises.
pub const BACKLOG_HIGH_WATER_PERCENT: u64 = 50;

/// Whose request it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum IoClass {
    /// A client's request, or work a client request waits on.
    Foreground,
    /// Work no client waits on: destage, cleaning, scans.
    Background,
}

/// The scheduler's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrioritySettings {
    /// Requests the device holds at once (its queue).
    pub device_depth: usize,
    /// Foreground requests admitted at once (queued and outstanding).
    pub foreground_slots: usize,
    /// Background requests admitted at once (queued and outstanding).
    pub background_slots: usize,
    /// Background requests outstanding at the device at most, starvation
    /// dispatches aside.
    pub background_limit: usize,
    /// A background request waiting this long without a background dispatch
    /// goes next.
    pub starvation_interval_ns: u64,
}

impl PrioritySettings {
    /// The defaults for a device holding `device_depth` requests.
    pub fn for_device_depth(device_depth: usize) -> PrioritySettings {
        PrioritySettings {
            device_depth,
            foreground_slots: DEFAULT_SLOTS_PER_CLASS,
            background_slots: DEFAULT_SLOTS_PER_CLASS,
            background_limit: DEFAULT_BACKGROUND_LIMIT,
            starvation_interval_ns: DEFAULT_STARVATION_INTERVAL_NS,
        }
    }
}

/// Why a request was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum AdmissionError {
    /// Every slot of the class is taken; admit again after a completion.
    #[error("all {slots} {class:?} slots are taken")]
    SlotsFull {
        /// The class refused.
        class: IoClass,
        /// Its slots.
        slots: usize,
    },
    /// The request is already queued or outstanding: a bug in the caller.
    #[error("the request is already admitted")]
    AlreadyAdmitted,
}

/// A request the device should take now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dispatch<Id> {
    /// The request.
    pub id: Id,
    /// The class it is dispatched as (a promoted request is foreground).
    pub class: IoClass,
    /// Whether it went ahead because background work had starved.
    pub starved: bool,
}

/// The foreground-first scheduler of one device.
#[derive(Debug, Clone)]
pub struct PriorityScheduler<Id> {
    settings: PrioritySettings,
    foreground: VecDeque<Id>,
    background: VecDeque<Id>,
    /// Every request admitted and not yet completed.
    admitted_ids: HashSet<Id>,
    outstanding: HashMap<Id, IoClass>,
    outstanding_foreground: usize,
    outstanding_background: usize,
    /// Since when background work has waited without a background dispatch
    /// (the later of the last background dispatch and the moment the
    /// background queue last became non-empty).
    background_waiting_since_ns: u64,
}

impl<Id: Copy + Eq + Hash> PriorityScheduler<Id> {
    /// An idle scheduler.
    ///
    /// # Panics
    /// If the device depth, a class's slots or the background limit is zero.
    pub fn new(settings: PrioritySettings) -> Self {
        assert!(settings.device_depth > 0, "a device holds at least one request");
        assert!(settings.foreground_slots > 0 && settings.background_slots > 0, "each class has a slot");
        assert!(settings.background_limit > 0, "background work may have one request outstanding");
        PriorityScheduler {
            settings,
            foreground: VecDeque::new(),
            background: VecDeque::new(),
            admitted_ids: HashSet::new(),
            outstanding: HashMap::new(),
            outstanding_foreground: 0,
            outstanding_background: 0,
            background_waiting_since_ns: 0,
        }
    }

    /// The settings (with the current background limit).
    pub fn settings(&self) -> PrioritySettings {
        self.settings
    }

    /// Background requests outstanding at most now.
    pub fn background_limit(&self) -> usize {
        self.settings.background_limit
    }

    /// Sets the background limit (pacing); at least 1.
    pub fn set_background_limit(&mut self, limit: usize) {
        self.settings.background_limit = limit.max(1);
    }

    /// Whether a request of `class` would be admitted now.
    pub fn has_room(&self, class: IoClass) -> bool {
        self.admitted(class) < self.slots(class)
    }

    /// Requests of `class` queued or outstanding.
    pub fn admitted(&self, class: IoClass) -> usize {
        match class {
            IoClass::Foreground => self.foreground.len() + self.outstanding_foreground,
            IoClass::Background => self.background.len() + self.outstanding_background,
        }
    }

    /// Requests of `class` waiting in its queue.
    pub fn queued(&self, class: IoClass) -> usize {
        match class {
            IoClass::Foreground => self.foreground.len(),
            IoClass::Background => self.background.len(),
        }
    }

    /// Requests outstanding at the device.
    pub fn outstanding(&self) -> usize {
        self.outstanding_foreground + self.outstanding_background
    }

    /// Background requests outstanding at the device.
    pub fn outstanding_background(&self) -> usize {
        self.outstanding_background
    }

    /// Queues request `id` of `class` at `now_ns`.
    pub fn admit(&mut self, id: Id, class: IoClass, now_ns: u64) -> Result<(), AdmissionError> {
        if !self.has_room(class) {
            return Err(AdmissionError::SlotsFull { class, slots: self.slots(class) });
        }
        if !self.admitted_ids.insert(id) {
            return Err(AdmissionError::AlreadyAdmitted);
        }
        match class {
            IoClass::Foreground => self.foreground.push_back(id),
            IoClass::Background => {
                if self.background.is_empty() {
                    self.background_waiting_since_ns = self.background_waiting_since_ns.max(now_ns);
                }
                self.background.push_back(id);
            }
        }
        Ok(())
    }

    /// Moves queued background request `id` to the foreground queue's tail
    /// (a foreground request waits on it). Returns whether it was queued as
    /// background; an outstanding or unknown request is left as it is.
    pub fn promote(&mut self, id: Id) -> bool {
        let Some(position) = self.background.iter().position(|&queued| queued == id) else {
            return false;
        };
        self.background.remove(position);
        self.foreground.push_back(id);
        true
    }

    /// The request the device should take now, if any.
    pub fn next_dispatch(&mut self, now_ns: u64) -> Option<Dispatch<Id>> {
        if self.outstanding() >= self.settings.device_depth {
            return None;
        }
        let starving = !self.background.is_empty()
            && now_ns.saturating_sub(self.background_waiting_since_ns) >= self.settings.starvation_interval_ns;
        if starving {
            return Some(self.dispatch_background(now_ns, true));
        }
        if let Some(id) = self.foreground.pop_front() {
            self.outstanding.insert(id, IoClass::Foreground);
            self.outstanding_foreground += 1;
            return Some(Dispatch { id, class: IoClass::Foreground, starved: false });
        }
        if !self.background.is_empty() && self.outstanding_background < self.settings.background_limit {
            return Some(self.dispatch_background(now_ns, false));
        }
        None
    }

    fn dispatch_background(&mut self, now_ns: u64, starved: bool) -> Dispatch<Id> {
        let id = self.background.pop_front().expect("a background request is queued");
        self.outstanding.insert(id, IoClass::Background);
        self.outstanding_background += 1;
        self.background_waiting_since_ns = now_ns;
        Dispatch { id, class: IoClass::Background, starved }
    }

    /// Records that the device completed `id`; returns the class it was
    /// dispatched as.
    ///
    /// # Panics
    /// If `id` is not outstanding: a bug in the caller.
    pub fn on_complete(&mut self, id: Id) -> IoClass {
        let class = self.outstanding.remove(&id).expect("a completed request was outstanding");
        self.admitted_ids.remove(&id);
        match class {
            IoClass::Foreground => self.outstanding_foreground -= 1,
            IoClass::Background => self.outstanding_background -= 1,
        }
        class
    }

    fn slots(&self, class: IoClass) -> usize {
        match class {
            IoClass::Foreground => self.settings.foreground_slots,
            IoClass::Background => self.settings.background_slots,
        }
    }
}

/// The background limit for a backlog of `backlog_blocks` in a room of
/// `capacity_blocks` (for destage, the staging area): `base_limit` up to the
/// high-water mark ([`BACKLOG_HIGH_WATER_PERCENT`]), then doubling in even
/// steps up to `max_limit` as the backlog reaches its room, so background
/// work gets more of the device only when it is falling behind.
pub fn background_limit_for_backlog(
    backlog_blocks: u64,
    capacity_blocks: u64,
    base_limit: usize,
    max_limit: usize,
) -> usize {
    let base_limit = base_limit.max(1);
    let max_limit = max_limit.max(base_limit);
    let high_water_blocks = capacity_blocks * BACKLOG_HIGH_WATER_PERCENT / 100;
    let headroom_blocks = capacity_blocks - high_water_blocks;
    if backlog_blocks <= high_water_blocks || headroom_blocks == 0 {
        return if backlog_blocks > high_water_blocks { max_limit } else { base_limit };
    }
    let doublings_max = u64::from((max_limit / base_limit).ilog2());
    let above_blocks = (backlog_blocks - high_water_blocks).min(headroom_blocks);
    let doublings = u32::try_from(doublings_max * above_blocks / headroom_blocks).expect("at most 63 doublings");
    base_limit.checked_shl(doublings).unwrap_or(max_limit).min(max_limit)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn settings(depth: usize, limit: usize) -> PrioritySettings {
        PrioritySettings { background_limit: limit, ..PrioritySettings::for_device_depth(depth) }
    }

    #[test]
    fn foreground_goes_first_and_background_stays_within_its_limit() {
        let mut scheduler = PriorityScheduler::new(settings(8, 2));
        for id in 0..4 {
            scheduler.admit(id, IoClass::Background, 0).unwrap();
        }
        scheduler.admit(10, IoClass::Foreground, 0).unwrap();
        let order: Vec<_> = std::iter::from_fn(|| scheduler.next_dispatch(0)).map(|dispatch| dispatch.id).collect();
        assert_eq!(order, vec![10, 0, 1], "the client first, then two background requests");
        assert_eq!(scheduler.outstanding_background(), 2);
        assert_eq!(scheduler.on_complete(0), IoClass::Background);
        assert_eq!(scheduler.next_dispatch(0).map(|dispatch| dispatch.id), Some(2));
    }

    #[test]
    fn the_device_depth_bounds_what_is_outstanding() {
        let mut scheduler = PriorityScheduler::new(settings(2, 1));
        for id in 0..5 {
            scheduler.admit(id, IoClass::Foreground, 0).unwrap();
        }
        assert!(scheduler.next_dispatch(0).is_some());
        assert!(scheduler.next_dispatch(0).is_some());
        assert_eq!(scheduler.next_dispatch(0), None);
        scheduler.on_complete(1);
        assert_eq!(scheduler.next_dispatch(0).map(|dispatch| dispatch.id), Some(2));
    }

    #[test]
    fn starved_background_work_goes_next_after_the_interval() {
        let mut scheduler = PriorityScheduler::new(settings(4, 1));
        scheduler.admit(100, IoClass::Background, 0).unwrap();
        scheduler.admit(101, IoClass::Background, 0).unwrap();
        assert_eq!(scheduler.next_dispatch(0).map(|dispatch| dispatch.id), Some(100));
        for id in 0..3 {
            scheduler.admit(id, IoClass::Foreground, 1).unwrap();
        }
        // The limit holds 101 back while 100 is outstanding...
        let early: Vec<_> = std::iter::from_fn(|| scheduler.next_dispatch(1)).map(|dispatch| dispatch.id).collect();
        assert_eq!(early, vec![0, 1, 2]);
        scheduler.on_complete(0);
        // ...until it has waited the interval, when it goes ahead of the limit.
        let late = scheduler.next_dispatch(DEFAULT_STARVATION_INTERVAL_NS).unwrap();
        assert_eq!((late.id, late.starved), (101, true));
    }

    #[test]
    fn promotion_moves_a_queued_background_request_ahead() {
        let mut scheduler = PriorityScheduler::new(settings(4, 1));
        for id in 0..3 {
            scheduler.admit(id, IoClass::Background, 0).unwrap();
        }
        assert_eq!(scheduler.next_dispatch(0).map(|dispatch| dispatch.id), Some(0));
        assert!(scheduler.promote(2));
        assert!(!scheduler.promote(0), "outstanding requests are not moved");
        assert_eq!(scheduler.admit(1, IoClass::Foreground, 0), Err(AdmissionError::AlreadyAdmitted));
        let promoted = scheduler.next_dispatch(0).unwrap();
        assert_eq!((promoted.id, promoted.class), (2, IoClass::Foreground));
        assert_eq!(scheduler.next_dispatch(0), None, "1 waits for the background limit");
    }

    #[test]
    fn slots_bound_each_class_apart() {
        let mut scheduler = PriorityScheduler::new(PrioritySettings {
            foreground_slots: 1,
            background_slots: 2,
            ..PrioritySettings::for_device_depth(4)
        });
        scheduler.admit(0, IoClass::Background, 0).unwrap();
        scheduler.admit(1, IoClass::Background, 0).unwrap();
        assert_eq!(
            scheduler.admit(2, IoClass::Background, 0),
            Err(AdmissionError::SlotsFull { class: IoClass::Background, slots: 2 })
        );
        scheduler.admit(3, IoClass::Foreground, 0).unwrap();
        assert_eq!(
            scheduler.admit(3, IoClass::Background, 0),
            Err(AdmissionError::SlotsFull { class: IoClass::Background, slots: 2 })
        );
        assert!(!scheduler.has_room(IoClass::Foreground));
    }

    #[test]
    fn pacing_raises_the_limit_only_past_high_water() {
        assert_eq!(background_limit_for_backlog(0, 1000, 1, 32), 1);
        assert_eq!(background_limit_for_backlog(500, 1000, 1, 32), 1);
        assert_eq!(background_limit_for_backlog(600, 1000, 1, 32), 2);
        assert_eq!(background_limit_for_backlog(900, 1000, 1, 32), 16);
        assert_eq!(background_limit_for_backlog(1000, 1000, 1, 32), 32);
        assert_eq!(background_limit_for_backlog(1700, 1000, 1, 32), 32);
        assert_eq!(background_limit_for_backlog(750, 1000, 4, 4), 4);
        assert_eq!(background_limit_for_backlog(1, 1, 1, 8), 8, "a one-block room is full at one block");
    }

    #[derive(Debug, Clone)]
    enum Step {
        Admit(IoClass),
        Promote(usize),
        Complete(usize),
        Dispatch,
        Wait(u64),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => prop_oneof![Just(IoClass::Foreground), Just(IoClass::Background)].prop_map(Step::Admit),
            1 => any::<usize>().prop_map(Step::Promote),
            3 => any::<usize>().prop_map(Step::Complete),
            4 => Just(Step::Dispatch),
            1 => (0..20_000_000u64).prop_map(Step::Wait),
        ]
    }

    proptest! {
        /// Under any sequence of admissions, promotions, dispatches,
        /// completions and time, the device depth holds, background exceeds
        /// its limit only by starvation dispatches, background goes ahead of
        /// a waiting client only when starved, and draining
        /// answers every admitted request exactly once.
        #[test]
        fn every_request_is_served_once_within_the_bounds(
            depth in 1usize..6,
            limit in 1usize..4,
            steps in proptest::collection::vec(step(), 1..200),
        ) {
            let mut scheduler = PriorityScheduler::new(PrioritySettings {
                foreground_slots: 8,
                background_slots: 8,
                ..settings(depth, limit)
            });
            let mut now_ns = 0u64;
            let mut next_id = 0usize;
            let mut queued: Vec<usize> = Vec::new();
            let mut outstanding: Vec<usize> = Vec::new();
            let mut dispatched = std::collections::HashSet::new();
            let mut check = |dispatch: Dispatch<usize>,
                             foreground_was_queued: bool,
                             scheduler: &PriorityScheduler<usize>,
                             queued: &mut Vec<usize>,
                             outstanding: &mut Vec<usize>| {
                prop_assert!(dispatched.insert(dispatch.id), "dispatched twice");
                queued.retain(|&id| id != dispatch.id);
                outstanding.push(dispatch.id);
                prop_assert!(scheduler.outstanding() <= depth);
                if dispatch.class == IoClass::Background && !dispatch.starved {
                    prop_assert!(!foreground_was_queued, "background went ahead of a waiting client");
                    prop_assert!(scheduler.outstanding_background() <= limit);
                }
                Ok(())
            };
            for step in steps {
                match step {
                    Step::Admit(class) => {
                        if scheduler.admit(next_id, class, now_ns).is_ok() {
                            queued.push(next_id);
                        }
                        next_id += 1;
                    }
                    Step::Promote(pick) => {
                        if !queued.is_empty() {
                            scheduler.promote(queued[pick % queued.len()]);
                        }
                    }
                    Step::Complete(pick) => {
                        if !outstanding.is_empty() {
                            let id = outstanding.swap_remove(pick % outstanding.len());
                            scheduler.on_complete(id);
                        }
                    }
                    Step::Dispatch => {
                        let foreground_was_queued = scheduler.queued(IoClass::Foreground) > 0;
                        if let Some(dispatch) = scheduler.next_dispatch(now_ns) {
                            check(dispatch, foreground_was_queued, &scheduler, &mut queued, &mut outstanding)?;
                        }
                    }
                    Step::Wait(ns) => now_ns += ns,
                }
            }
            // Drain: everything queued is dispatched and completed.
            while !queued.is_empty() || !outstanding.is_empty() {
                now_ns += 1_000_000;
                loop {
                    let foreground_was_queued = scheduler.queued(IoClass::Foreground) > 0;
                    let Some(dispatch) = scheduler.next_dispatch(now_ns) else { break };
                    check(dispatch, foreground_was_queued, &scheduler, &mut queued, &mut outstanding)?;
                }
                if let Some(id) = outstanding.pop() {
                    scheduler.on_complete(id);
                }
            }
            prop_assert_eq!(scheduler.outstanding(), 0);
            prop_assert_eq!(scheduler.admitted(IoClass::Foreground) + scheduler.admitted(IoClass::Background), 0);
        }
    }
}
