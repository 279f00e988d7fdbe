//! The sweep's plots: one SVG per plotted result column, against the grid.
//!
//! The x axis is the first grid axis whose values are all numbers and that
//! has at least two (a line chart, one line per combination of the other
//! axes); failing that the first axis with at least two values, as categories
//! (a grouped bar chart, one bar per combination of the others). A grid of
//! single values gives one bar per cell.

use std::path::{Path, PathBuf};

use proxima_lab::report::plot::{GroupedBarChart, LineChart, Series};
use serde_json::Value;

use super::spec::{text_of, Axis, Cell};
use super::table::Table;

/// Result columns plotted when the specification names none: those of the
/// replay's contract; for an experiment, its first four numeric top-level
/// result columns.
pub fn default_metrics(table: &Table, parameter_count: usize, replay: bool) -> Vec<String> {
    if replay {
        return ["iops", "mean_latency_ms", "p99_latency_ms", "execution_time_s"].map(String::from).to_vec();
    }
    table
        .columns
        .iter()
        .enumerate()
        .skip(1 + parameter_count)
        .filter(|(index, name)| !name.contains('.') && table.rows.iter().any(|row| row[*index].is_number()))
        .map(|(_, name)| name.clone())
        .take(4)
        .collect()
}

/// Writes one plot per metric into `folder`; the files written.
pub fn write_plots(
    folder: &Path,
    axes: &[Axis],
    cells: &[Cell],
    table: &Table,
    metrics: &[String],
) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(folder).map_err(|error| format!("{}: {error}", folder.display()))?;
    let mut written = Vec::new();
    for metric in metrics {
        let Some(values) = table.column(metric) else { continue };
        let by_key: std::collections::HashMap<&str, f64> = table
            .rows
            .iter()
            .zip(&values)
            .filter_map(|(row, value)| Some((row[0].as_str()?, value.as_f64()?)))
            .collect();
        let path = folder.join(format!("{}.svg", metric.replace(['/', '.'], "_")));
        let title = format!("{metric} across the sweep");
        let numeric_axis =
            axes.iter().position(|axis| axis.values.len() >= 2 && axis.values.iter().all(Value::is_number));
        let category_axis = axes.iter().position(|axis| axis.values.len() >= 2);
        let result = match (numeric_axis, category_axis) {
            (Some(x), _) => line_chart(&title, metric, axes, x, cells, &by_key).write_svg(&path),
            (None, Some(x)) => bar_chart(&title, metric, axes, x, cells, &by_key).write_svg(&path),
            (None, None) => single_bars(&title, metric, cells, &by_key).write_svg(&path),
        };
        result.map_err(|error| format!("{}: {error}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// "name=value, ..." of a cell's parameters other than axis `x`.
fn others_label(cell: &Cell, x: usize) -> String {
    let others: Vec<String> = cell
        .parameters
        .iter()
        .enumerate()
        .filter(|(index, _)| *index != x)
        .map(|(_, (name, value))| format!("{name}={}", short(&text_of(value))))
        .collect();
    if others.is_empty() {
        "all".to_string()
    } else {
        others.join(", ")
    }
}

/// A trace path's file name; other values as they are.
fn short(text: &str) -> String {
    Path::new(text).file_name().map_or(text.to_string(), |name| name.to_string_lossy().into_owned())
}

fn line_chart(
    title: &str,
    metric: &str,
    axes: &[Axis],
    x: usize,
    cells: &[Cell],
    by_key: &std::collections::HashMap<&str, f64>,
) -> LineChart {
    let mut series: Vec<Series> = Vec::new();
    for cell in cells {
        let Some(&y) = by_key.get(cell.key.as_str()) else { continue };
        let x_value = cell.parameters[x].1.as_f64().expect("a numeric axis");
        let name = others_label(cell, x);
        match series.iter_mut().find(|line| line.name == name) {
            Some(line) => line.points.push((x_value, y)),
            None => series.push(Series { name, points: vec![(x_value, y)] }),
        }
    }
    for line in &mut series {
        line.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    LineChart { title: title.into(), x_label: axes[x].name.clone(), y_label: metric.into(), series }
}

fn bar_chart(
    title: &str,
    metric: &str,
    axes: &[Axis],
    x: usize,
    cells: &[Cell],
    by_key: &std::collections::HashMap<&str, f64>,
) -> GroupedBarChart {
    let categories: Vec<String> = axes[x].values.iter().map(|value| short(&text_of(value))).collect();
    let mut series: Vec<(String, Vec<f64>)> = Vec::new();
    for cell in cells {
        let y = by_key.get(cell.key.as_str()).copied().unwrap_or(0.0);
        let category = axes[x].values.iter().position(|value| value == &cell.parameters[x].1).expect("a grid value");
        let name = others_label(cell, x);
        let bars = match series.iter_mut().position(|(existing, _)| existing == &name) {
            Some(found) => &mut series[found].1,
            None => {
                series.push((name, vec![0.0; categories.len()]));
                &mut series.last_mut().expect("just pushed").1
            }
        };
        bars[category] = y;
    }
    GroupedBarChart { title: title.into(), x_label: axes[x].name.clone(), y_label: metric.into(), categories, series }
}

fn single_bars(
    title: &str,
    metric: &str,
    cells: &[Cell],
    by_key: &std::collections::HashMap<&str, f64>,
) -> GroupedBarChart {
    let categories: Vec<String> = cells.iter().map(|cell| cell.key.clone()).collect();
    let values = cells.iter().map(|cell| by_key.get(cell.key.as_str()).copied().unwrap_or(0.0)).collect();
    GroupedBarChart {
        title: title.into(),
        x_label: "cell".into(),
        y_label: metric.into(),
        categories,
        series: vec![(metric.to_string(), values)],
    }
}
