//! Progress reporting for long experiments.
//!
//! Experiments count their work in units (simulated strands, requests) and report it
//! through [`Progress`]; the command line draws a bar on a terminal, tests pass
//! [`NoProgress`].

/// Receives progress from a running experiment.
pub trait Progress {
    /// Announces a new phase of `total_units` units of work, named `phase`.
    fn start_phase(&mut self, phase: &str, total_units: u64);
    /// Reports `units` more units done in the current phase.
    fn advance(&mut self, units: u64);
}

/// Progress that goes nowhere.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn start_phase(&mut self, _phase: &str, _total_units: u64) {}
    fn advance(&mut self, _units: u64) {}
}
