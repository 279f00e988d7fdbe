//! Seed 002's request-centric I/O prioritisation: client requests go first
//! at the drives, background work (destage) is admitted apart, bounded,
//! paced and never starved.
//!
//! - [`replay`]: the simulation of clients beside the engine's captured
//!   destage, each drive behind the engine's foreground-first scheduler.
//! - [`foreground_priority`]: `reproduce foreground-priority`, the paper's
//!   Figure 11 sweep and the default policy against an idle array.

pub mod foreground_priority;
pub mod replay;
