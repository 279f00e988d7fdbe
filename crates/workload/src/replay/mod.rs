//! Trace replay: a trace's requests issued to a [`Target`] in one of five
//! modes, with accuracy figures.
//!
//! The pipeline, streaming end to end (memory independent of the trace's
//! length):
//!
//! 1. [`order::TimeOrder`] sorts the requests within a window, numbers them and
//!    makes times relative to the first;
//! 2. [`mapping::Mapping`] places each on the target (devices, rounding, out of
//!    range) or skips it;
//! 3. in dependency mode, [`dependency::DependencyInference`] names the
//!    earlier requests each one waited for;
//! 4. a scheduler (module `scheduler`) decides which request goes next and when;
//! 5. the target runs them; [`metrics::Metrics`] measures.
//!
//! **Modes** ([`Mode`]):
//!
//! - `Faithful`: each request at its recorded time (hfplayer's high-fidelity
//!   mode);
//! - `Scaled { factor }`: at its recorded time divided by `factor` (load ×k);
//! - `Afap`: in trace order, as fast as the in-flight limit allows;
//! - `Load`: in trace order, as fast as possible while keeping no more
//!   requests in flight than the trace had when it issued each one (the load
//!   replay of Sivathanu et al. that hfplayer compares with);
//! - `Dependency`: hfplayer's scaled replay: a request waits for its inferred
//!   parents, then for the recorded think time after each.
//!
//! **In-flight limit.** Faithful and dependency replay cap the requests in
//! flight at the number the trace had when it issued each request, rounded up
//! to a power of two (hfplayer's rule, which lets a late replay catch up
//! without flooding the device); load mode caps at that number exactly; AFAP
//! at [`AFAP_IN_FLIGHT_DEFAULT`]; scaled replay does not cap. `in_flight_max`
//! replaces these (load mode takes the smaller).
//!
//! **Bundling.** Requests due within `bundle_ns` of the first of a batch are
//! issued with it, up to [`BUNDLE_REQUESTS_MAX`] (hfplayer's bundles: one
//! system call, one socket write). Requests already due are always issued
//! together. Off (0) by default, so virtual-time replay is exact.

pub mod dependency;
pub mod mapping;
pub mod metrics;
pub mod nbd;
pub mod order;
mod scheduler;
pub mod target;

use std::collections::HashMap;

use thiserror::Error;

use crate::request::{Operation, TraceRequest};
use crate::trace::TraceError;
use dependency::{DependencyInference, THINK_THRESHOLD_NS_DEFAULT};
use mapping::{Mapped, Mapping, MappingOptions, TargetRequest};
use metrics::{Completed, Metrics, ReplayReport};
use order::{Sequenced, TimeOrder};
use scheduler::{Candidate, DependencyOrder, Entry, InOrder};
pub use target::{DiskTarget, Target, TargetCompletion};

/// AFAP's in-flight limit unless one is given.
pub const AFAP_IN_FLIGHT_DEFAULT: u32 = 32;
/// Most requests in one bundle (hfplayer's limit).
pub const BUNDLE_REQUESTS_MAX: usize = 256;
/// Requests held to repair disorder in the trace's times.
pub const ORDER_WINDOW_DEFAULT: usize = 65_536;
/// Requests dependency mode reads ahead of the oldest unissued one.
pub const LOOKAHEAD_DEFAULT: usize = 4096;
/// Completions between two progress reports.
const PROGRESS_EVERY: u64 = 4096;

/// How requests are timed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// At the recorded times.
    Faithful,
    /// As fast as possible, in trace order.
    Afap,
    /// At the recorded times divided by `factor`.
    Scaled {
        /// The load factor k (> 0).
        factor: f64,
    },
    /// As fast as possible with the trace's in-flight counts.
    Load,
    /// After the inferred parents plus the recorded think times.
    Dependency,
}

impl Mode {
    /// The mode's name (`faithful`, `afap`, `scaled`, `load`, `dependency`).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Faithful => "faithful",
            Mode::Afap => "afap",
            Mode::Scaled { .. } => "scaled",
            Mode::Load => "load",
            Mode::Dependency => "dependency",
        }
    }

    /// Whether the mode keeps the trace's order.
    fn in_order(self) -> bool {
        self != Mode::Dependency
    }
}

/// Everything a replay is told.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplayOptions {
    /// The mode.
    pub mode: Mode,
    /// Where requests go on the target.
    pub mapping: MappingOptions,
    /// An in-flight limit replacing the mode's.
    pub in_flight_max: Option<u32>,
    /// Bundle requests due within this long of a batch's first (0: off).
    pub bundle_ns: u64,
    /// Dependency mode's think-time threshold.
    pub think_threshold_ns: u64,
    /// Requests held to repair disorder in the trace's times.
    pub order_window: usize,
    /// Requests dependency mode reads ahead.
    pub lookahead: usize,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            mode: Mode::Faithful,
            mapping: MappingOptions::default(),
            in_flight_max: None,
            bundle_ns: 0,
            think_threshold_ns: THINK_THRESHOLD_NS_DEFAULT,
            order_window: ORDER_WINDOW_DEFAULT,
            lookahead: LOOKAHEAD_DEFAULT,
        }
    }
}

/// Why a replay failed.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum ReplayError {
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The options contradict each other or the target.
    #[error("{0}")]
    Options(String),
    /// A request lies beyond the target and the mapping says to fail.
    #[error(
        "{file}:{line}: request [{offset_bytes}, {end_bytes}) lies beyond the target's {slice_bytes} bytes (use --out-of-range wrap or skip)"
    )]
    OutOfRange {
        /// The trace.
        file: String,
        /// The request's line.
        line: u64,
        /// First byte after rounding.
        offset_bytes: u64,
        /// One past the last byte after rounding.
        end_bytes: u64,
        /// Bytes of the slice the device maps to.
        slice_bytes: u64,
    },
    /// The mode needs recorded response times the trace does not have.
    #[error("{file}:{line}: {mode} replay needs each request's recorded response time, and this request has none")]
    MissingResponseTimes {
        /// The trace.
        file: String,
        /// The request's line.
        line: u64,
        /// The mode.
        mode: &'static str,
    },
    /// The target failed (connection lost, protocol error).
    #[error("{0}")]
    Target(String),
}

impl ReplayError {
    /// Whether the failure is the input's (trace, options): exit code 2.
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, ReplayError::Target(_))
    }
}

/// One replayed request, for a per-request record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// Position in trace order.
    pub sequence: u64,
    /// The trace line.
    pub line_number: u64,
    /// The trace device.
    pub device: u64,
    /// The operation.
    pub operation: Operation,
    /// First byte on the target.
    pub offset_bytes: u64,
    /// Bytes on the target.
    pub length_bytes: u64,
    /// Recorded issue time, relative to the trace's first request.
    pub recorded_issue_ns: u64,
    /// Recorded response time, if any.
    pub recorded_response_ns: Option<u64>,
    /// Replay issue time.
    pub issue_ns: u64,
    /// Replay completion time.
    pub completion_ns: u64,
    /// The target's error, if any.
    pub error: Option<String>,
}

/// Watches a replay as it runs.
pub trait ReplayObserver {
    /// Each completed request, in completion order.
    fn completed(&mut self, _record: &RequestRecord) {}
    /// Every few thousand completions, with the count so far.
    fn progress(&mut self, _finished: u64) {}
}

/// An observer that watches nothing.
#[derive(Debug, Default)]
pub struct NoObserver;

impl ReplayObserver for NoObserver {}

/// The scheduler of the chosen mode.
#[derive(Debug)]
enum Order {
    InOrder(InOrder),
    Dependency(DependencyOrder),
}

impl Order {
    fn candidate(&self) -> Option<Candidate> {
        match self {
            Order::InOrder(order) => order.candidate(),
            Order::Dependency(order) => order.candidate(),
        }
    }

    fn pop(&mut self) -> Entry {
        match self {
            Order::InOrder(order) => order.pop(),
            Order::Dependency(order) => order.pop(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Order::InOrder(order) => order.len(),
            Order::Dependency(order) => order.len(),
        }
    }
}

/// Reads, orders, maps and (in dependency mode) links the trace's requests,
/// and hands them to the scheduler.
struct Feeder<'a, I: Iterator<Item = Result<TraceRequest, TraceError>>> {
    file: &'a str,
    options: &'a ReplayOptions,
    requests: TimeOrder<I>,
    mapping: Mapping,
    inference: Option<DependencyInference>,
    exhausted: bool,
}

impl<I: Iterator<Item = Result<TraceRequest, TraceError>>> Feeder<'_, I> {
    /// Feeds until the scheduler holds enough or the trace ends.
    fn fill(&mut self, order: &mut Order, metrics: &mut Metrics) -> Result<(), ReplayError> {
        let wanted = if self.options.mode.in_order() { 1 } else { self.options.lookahead.max(1) };
        while !self.exhausted && order.len() < wanted {
            match self.requests.next() {
                None => self.exhausted = true,
                Some(result) => self.feed(result?, order, metrics)?,
            }
        }
        Ok(())
    }

    fn missing_response(&self, sequenced: &Sequenced) -> ReplayError {
        missing_response(self.file, self.options.mode, sequenced)
    }

    fn feed(&mut self, sequenced: Sequenced, order: &mut Order, metrics: &mut Metrics) -> Result<(), ReplayError> {
        let (file, mode) = (self.file, self.options.mode);
        let parents = match &mut self.inference {
            Some(inference) => {
                let completion = sequenced.completion_ns().ok_or_else(|| missing_response(file, mode, &sequenced))?;
                Some(inference.parents(&sequenced, completion))
            }
            None => None,
        };
        let request = match self.mapping.map(&sequenced.request) {
            Mapped::Issue(request) => request,
            Mapped::Skip(reason) => {
                metrics.skip(reason);
                if let Order::Dependency(order) = order {
                    order.skipped(sequenced.sequence);
                }
                return Ok(());
            }
            Mapped::OutOfRange { offset_bytes, end_bytes, slice_bytes } => {
                return Err(ReplayError::OutOfRange {
                    file: self.file.to_string(),
                    line: sequenced.request.line_number,
                    offset_bytes,
                    end_bytes,
                    slice_bytes,
                })
            }
        };
        let in_flight_max = self.in_flight_max(&sequenced)?;
        let entry = Entry { sequenced, request, in_flight_max };
        match order {
            Order::InOrder(order) => order.push(entry, self.ready_ns(&sequenced)),
            Order::Dependency(order) => {
                order.push(entry, &parents.unwrap_or_default());
                let inference = self.inference.as_ref().expect("dependency mode infers");
                if let Some(oldest) = inference.oldest_possible_parent() {
                    order.forget_before(oldest);
                }
            }
        }
        Ok(())
    }

    /// When an in-order request may be issued.
    fn ready_ns(&self, sequenced: &Sequenced) -> u64 {
        match self.options.mode {
            Mode::Faithful => sequenced.issue_ns,
            Mode::Scaled { factor } => (sequenced.issue_ns as f64 / factor).round() as u64,
            Mode::Afap | Mode::Load | Mode::Dependency => 0,
        }
    }

    fn in_flight_max(&self, sequenced: &Sequenced) -> Result<Option<u32>, ReplayError> {
        let recorded = sequenced.in_flight;
        let given = self.options.in_flight_max;
        Ok(match self.options.mode {
            Mode::Load => {
                let recorded = recorded.ok_or_else(|| self.missing_response(sequenced))?;
                Some(given.map_or(recorded, |given| given.min(recorded)))
            }
            _ if given.is_some() => given,
            Mode::Faithful | Mode::Dependency => recorded.map(|count| count.max(1).next_power_of_two()),
            Mode::Afap => Some(AFAP_IN_FLIGHT_DEFAULT),
            Mode::Scaled { .. } => None,
        })
    }
}

/// The error for a request without the recorded response time `mode` needs.
fn missing_response(file: &str, mode: Mode, sequenced: &Sequenced) -> ReplayError {
    ReplayError::MissingResponseTimes { file: file.to_string(), line: sequenced.request.line_number, mode: mode.name() }
}

/// A request issued and not yet complete.
#[derive(Debug)]
struct InFlight {
    entry: Entry,
    issue_ns: u64,
}

/// Replays the requests of `source` (read from `file`, named in errors) on
/// `target`, telling `observer` as it goes.
pub fn replay<I, T>(
    file: &str,
    source: I,
    target: &mut T,
    options: &ReplayOptions,
    observer: &mut dyn ReplayObserver,
) -> Result<ReplayReport, ReplayError>
where
    I: Iterator<Item = Result<TraceRequest, TraceError>>,
    T: Target + ?Sized,
{
    check_options(options)?;
    let mapping = Mapping::new(options.mapping, target.shape()).map_err(ReplayError::Options)?;
    let mut feeder = Feeder {
        file,
        options,
        requests: TimeOrder::new(source, options.order_window),
        mapping,
        inference: (options.mode == Mode::Dependency).then(|| DependencyInference::new(options.think_threshold_ns)),
        exhausted: false,
    };
    let mut order = if options.mode.in_order() {
        Order::InOrder(InOrder::default())
    } else {
        Order::Dependency(DependencyOrder::default())
    };
    let mut metrics = Metrics::default();
    let mut in_flight: HashMap<u64, InFlight> = HashMap::new();
    let mut completions = Vec::new();
    loop {
        feeder.fill(&mut order, &mut metrics)?;
        let batch = take_batch(&mut feeder, &mut order, &mut metrics, target.now_ns(), in_flight.len(), options)?;
        if !batch.is_empty() {
            let requests: Vec<(u64, TargetRequest)> =
                batch.iter().map(|entry| (entry.sequenced.sequence, entry.request)).collect();
            let issue_ns = target.submit(&requests)?;
            for entry in batch {
                metrics.issue(entry.sequenced.sequence, issue_ns);
                in_flight.insert(entry.sequenced.sequence, InFlight { entry, issue_ns });
            }
            continue;
        }
        if in_flight.is_empty() && order.len() == 0 && feeder.exhausted {
            break;
        }
        let deadline = order
            .candidate()
            .filter(|candidate| candidate.in_flight_max.is_none_or(|limit| in_flight.len() < limit as usize))
            .map(|candidate| candidate.ready_ns);
        assert!(deadline.is_some() || !in_flight.is_empty(), "a request is always ready or in flight");
        completions.clear();
        target.wait(deadline, &mut completions)?;
        for completion in completions.drain(..) {
            let done = in_flight.remove(&completion.id).expect("completions name requests in flight");
            finish_request(done, completion, &mut order, &mut metrics, observer);
            if metrics.finished() % PROGRESS_EVERY == 0 {
                observer.progress(metrics.finished());
            }
        }
    }
    target.finish()?;
    observer.progress(metrics.finished());
    Ok(metrics.report(feeder.requests.late_count()))
}

fn check_options(options: &ReplayOptions) -> Result<(), ReplayError> {
    if let Mode::Scaled { factor } = options.mode {
        if !(factor.is_finite() && factor > 0.0) {
            return Err(ReplayError::Options(format!("the scale factor {factor} is not a positive number")));
        }
    }
    if options.in_flight_max == Some(0) {
        return Err(ReplayError::Options("an in-flight limit of 0 would issue nothing".into()));
    }
    Ok(())
}

/// The requests to issue now: the candidate if it is due and the in-flight
/// limit allows, then those due within the bundle window.
fn take_batch<I: Iterator<Item = Result<TraceRequest, TraceError>>>(
    feeder: &mut Feeder<'_, I>,
    order: &mut Order,
    metrics: &mut Metrics,
    now_ns: u64,
    in_flight: usize,
    options: &ReplayOptions,
) -> Result<Vec<Entry>, ReplayError> {
    let mut batch: Vec<Entry> = Vec::new();
    let mut due_until_ns = now_ns;
    while batch.len() < BUNDLE_REQUESTS_MAX {
        let Some(candidate) = order.candidate() else { break };
        if candidate.ready_ns > due_until_ns {
            break;
        }
        if candidate.in_flight_max.is_some_and(|limit| in_flight + batch.len() >= limit as usize) {
            break;
        }
        if batch.is_empty() {
            due_until_ns = now_ns.max(candidate.ready_ns.saturating_add(options.bundle_ns));
        }
        batch.push(order.pop());
        feeder.fill(order, metrics)?;
    }
    Ok(batch)
}

fn finish_request(
    done: InFlight,
    completion: TargetCompletion,
    order: &mut Order,
    metrics: &mut Metrics,
    observer: &mut dyn ReplayObserver,
) {
    let sequenced = &done.entry.sequenced;
    metrics.complete(&Completed {
        length_bytes: done.entry.request.length_bytes,
        issue_ns: done.issue_ns,
        completion_ns: completion.completion_ns,
        failed: completion.error.is_some(),
        recorded_issue_ns: sequenced.issue_ns,
        recorded_response_ns: sequenced.request.response_ns,
    });
    if let Order::Dependency(order) = order {
        order.completed(sequenced.sequence, completion.completion_ns);
    }
    observer.completed(&RequestRecord {
        sequence: sequenced.sequence,
        line_number: sequenced.request.line_number,
        device: sequenced.request.device,
        operation: done.entry.request.operation,
        offset_bytes: done.entry.request.offset_bytes,
        length_bytes: done.entry.request.length_bytes,
        recorded_issue_ns: sequenced.issue_ns,
        recorded_response_ns: sequenced.request.response_ns,
        issue_ns: done.issue_ns,
        completion_ns: completion.completion_ns,
        error: completion.error,
    });
}
