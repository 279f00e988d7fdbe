//! Tables of results and their CSV form.
//!
//! A [`Table`] is a header and rows of already formatted cells; experiments fill
//! one per figure and write it next to the plot, so the CSV is exactly what the
//! plot and the report were drawn from.

use std::fmt::Write as _;
use std::path::Path;

use crate::LabError;

/// A table of formatted cells with a header row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with these column names.
    pub fn new(header: &[&str]) -> Self {
        Table { header: header.iter().map(|name| name.to_string()).collect(), rows: Vec::new() }
    }

    /// Appends a row.
    ///
    /// # Panics
    /// If the row's width differs from the header's: a bug in the experiment.
    pub fn push_row(&mut self, cells: Vec<String>) {
        assert_eq!(cells.len(), self.header.len(), "row width must match the header {:?}", self.header);
        self.rows.push(cells);
    }

    /// The column names.
    pub fn header(&self) -> &[String] {
        &self.header
    }

    /// The rows, in insertion order.
    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    /// The table as CSV (RFC 4180 quoting, `\n` line ends).
    pub fn to_csv(&self) -> String {
        let mut text = String::new();
        for row in std::iter::once(&self.header).chain(self.rows.iter()) {
            let line: Vec<String> = row.iter().map(|cell| quote_csv_cell(cell)).collect();
            let _ = writeln!(text, "{}", line.join(","));
        }
        text
    }

    /// The table as a GitHub-flavoured markdown table.
    pub fn to_markdown(&self) -> String {
        let mut text = String::new();
        let _ = writeln!(text, "| {} |", self.header.join(" | "));
        let _ = writeln!(text, "|{}", " --- |".repeat(self.header.len()));
        for row in &self.rows {
            let _ = writeln!(text, "| {} |", row.join(" | "));
        }
        text
    }

    /// Writes the CSV form to `path`.
    pub fn write_csv(&self, path: &Path) -> Result<(), LabError> {
        std::fs::write(path, self.to_csv()).map_err(|source| LabError::Write { path: path.to_path_buf(), source })
    }
}

fn quote_csv_cell(cell: &str) -> String {
    if cell.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", cell.replace('"', "\"\""))
    } else {
        cell.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_only_cells_that_need_it() {
        let mut table = Table::new(&["name", "value"]);
        table.push_row(vec!["plain".into(), "1.5".into()]);
        table.push_row(vec!["with, comma".into(), "say \"hi\"".into()]);
        assert_eq!(table.to_csv(), "name,value\nplain,1.5\n\"with, comma\",\"say \"\"hi\"\"\"\n");
    }

    #[test]
    fn markdown_has_a_separator_row() {
        let mut table = Table::new(&["a", "b"]);
        table.push_row(vec!["1".into(), "2".into()]);
        assert_eq!(table.to_markdown(), "| a | b |\n| --- | --- |\n| 1 | 2 |\n");
    }

    #[test]
    #[should_panic(expected = "row width")]
    fn rejects_a_row_of_the_wrong_width() {
        Table::new(&["a", "b"]).push_row(vec!["1".into()]);
    }
}
