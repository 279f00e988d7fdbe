//! How experiments write their results: tables (CSV and markdown), SVG plots,
//! the files of a run and its report, and what the run cost.
//!
//! Everything here is pure but the final write: an experiment renders its
//! rows into [`markdown::Rendered`] files, and [`markdown::write_rendered`]
//! puts them on disk.

pub mod cost;
pub mod markdown;
pub mod plot;
pub mod table;
