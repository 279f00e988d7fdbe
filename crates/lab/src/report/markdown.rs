//! The files an experiment renders from its rows — CSV tables, SVG plots and
//! the markdown report — and their one writer.
//!
//! Rendering is pure: [`Rendered`] holds every file's content, so a report can
//! be regenerated from saved rows and compared without touching the disk.
//! [`write_rendered`] writes the tables and plots first and `report.md` last.

use std::path::{Path, PathBuf};

use crate::report::plot::{GroupedBarChart, LineChart};
use crate::report::table::Table;
use crate::LabError;

/// The name of every experiment's report.
pub const REPORT_FILE: &str = "report.md";

/// One rendered file's content.
#[derive(Debug, Clone, PartialEq)]
pub enum Artifact {
    /// A table, written as CSV.
    Csv(Table),
    /// A line chart, written as SVG.
    LineChart(LineChart),
    /// A grouped bar chart, written as SVG.
    BarChart(GroupedBarChart),
}

/// Everything an experiment renders from its rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered<Headline> {
    /// `(file name, content)` of each table and plot, in the order written.
    pub files: Vec<(&'static str, Artifact)>,
    /// The markdown report.
    pub report: String,
    /// A short human-readable table of the headline figures.
    pub summary: String,
    /// The headline figures.
    pub headline: Headline,
}

/// Writes the tables and plots of `rendered` under `out_dir`, then
/// `report.md`; returns the report's path.
pub fn write_rendered<Headline>(out_dir: &Path, rendered: &Rendered<Headline>) -> Result<PathBuf, LabError> {
    for (name, artifact) in &rendered.files {
        let path = out_dir.join(name);
        match artifact {
            Artifact::Csv(table) => table.write_csv(&path)?,
            Artifact::LineChart(chart) => chart.write_svg(&path)?,
            Artifact::BarChart(chart) => chart.write_svg(&path)?,
        }
    }
    let report_path = out_dir.join(REPORT_FILE);
    write_text(&report_path, &rendered.report)?;
    Ok(report_path)
}

/// Creates the output directory.
pub fn create_directory(path: &Path) -> Result<(), LabError> {
    std::fs::create_dir_all(path).map_err(|source| LabError::CreateDirectory { path: path.to_path_buf(), source })
}

/// Writes `text` to `path`.
pub fn write_text(path: &Path, text: &str) -> Result<(), LabError> {
    std::fs::write(path, text).map_err(|source| LabError::Write { path: path.to_path_buf(), source })
}

/// How a report's table of targets says whether one was reached: `met`, or
/// `**missed**` (bold, so that misses stand out).
pub fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "**missed**"
    }
}
