//! Experiments: each reproduced table or figure, with CSV, plots and markdown reports.
//!
//! - [`birthday`]: the analytical model of missed revolutions in a strand.

pub mod birthday;
