//! SVG plots of experiment results: line charts (one line per series over a numeric
//! x axis) and grouped bar charts (one bar per series for each category).

use std::ops::Range;
use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::LabError;

const WIDTH_PIXELS: u32 = 800;
const HEIGHT_PIXELS: u32 = 520;

/// One named line of a [`LineChart`].
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// `(x, y)` points, drawn in order.
    pub points: Vec<(f64, f64)>,
}

/// A chart of several lines over a shared numeric x axis.
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    /// Title above the plot.
    pub title: String,
    /// Label of the x axis, with its unit.
    pub x_label: String,
    /// Label of the y axis, with its unit.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
}

/// A bar chart with one group of bars per category and one bar per series in each group.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupedBarChart {
    /// Title above the plot.
    pub title: String,
    /// Label of the x axis.
    pub x_label: String,
    /// Label of the y axis, with its unit.
    pub y_label: String,
    /// The category names along the x axis.
    pub categories: Vec<String>,
    /// `(series name, one value per category)`.
    pub series: Vec<(String, Vec<f64>)>,
}

fn palette_colour(index: usize) -> RGBColor {
    const COLOURS: [RGBColor; 6] = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(255, 127, 14),
        RGBColor(148, 103, 189),
        RGBColor(127, 127, 127),
    ];
    COLOURS[index % COLOURS.len()]
}

fn plot_error(path: &Path, error: impl std::fmt::Display) -> LabError {
    LabError::Plot { path: path.to_path_buf(), message: error.to_string() }
}

/// A drawing area on an SVG file at a path that lives for `'path`.
type SvgArea<'path> = DrawingArea<SVGBackend<'path>, Shift>;
/// A chart with numeric axes drawn on an [`SvgArea`] borrowed for `'area`.
type SvgChart<'area, 'path> = ChartContext<'area, SVGBackend<'path>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A white drawing area of the plot size on a new SVG file at `path`.
fn white_svg_area(path: &Path) -> Result<SvgArea<'_>, LabError> {
    let area = SVGBackend::new(path, (WIDTH_PIXELS, HEIGHT_PIXELS)).into_drawing_area();
    area.fill(&WHITE).map_err(|error| plot_error(path, error))?;
    Ok(area)
}

/// A chart titled `title` on `area` over `x_range` × `y_range`, with room for the axis labels.
fn titled_chart<'area, 'path>(
    area: &'area SvgArea<'path>,
    title: &str,
    x_range: Range<f64>,
    y_range: Range<f64>,
    path: &Path,
) -> Result<SvgChart<'area, 'path>, LabError> {
    ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(x_range, y_range)
        .map_err(|error| plot_error(path, error))
}

/// Draws the legend of the labelled series in the upper right corner and writes the file.
fn finish_with_legend<'area, 'path: 'area>(
    chart: &mut SvgChart<'area, 'path>,
    area: &SvgArea<'path>,
    path: &Path,
) -> Result<(), LabError> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|error| plot_error(path, error))?;
    area.present().map_err(|error| plot_error(path, error))
}

impl LineChart {
    /// Draws the chart into an SVG file at `path`. The y axis starts at zero so that
    /// relative costs read honestly.
    pub fn write_svg(&self, path: &Path) -> Result<(), LabError> {
        let points = self.series.iter().flat_map(|series| series.points.iter());
        let (x_min, x_max, y_max) = points.fold((f64::MAX, f64::MIN, 0.0f64), |(x_min, x_max, y_max), (x, y)| {
            (x_min.min(*x), x_max.max(*x), y_max.max(*y))
        });
        if x_min > x_max {
            return Err(plot_error(path, "no points to plot"));
        }
        let x_pad = ((x_max - x_min) * 0.03).max(0.5);
        let area = white_svg_area(path)?;
        let mut chart =
            titled_chart(&area, &self.title, (x_min - x_pad)..(x_max + x_pad), 0.0..(y_max * 1.1).max(1e-9), path)?;
        chart
            .configure_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .draw()
            .map_err(|error| plot_error(path, error))?;
        for (index, series) in self.series.iter().enumerate() {
            let colour = palette_colour(index);
            chart
                .draw_series(LineSeries::new(series.points.iter().copied(), colour.stroke_width(2)))
                .map_err(|error| plot_error(path, error))?
                .label(&series.name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)));
            chart
                .draw_series(series.points.iter().map(|point| Circle::new(*point, 3, colour.filled())))
                .map_err(|error| plot_error(path, error))?;
        }
        finish_with_legend(&mut chart, &area, path)
    }
}

impl GroupedBarChart {
    /// Draws the chart into an SVG file at `path`.
    pub fn write_svg(&self, path: &Path) -> Result<(), LabError> {
        let category_count = self.categories.len();
        let series_count = self.series.len();
        if category_count == 0 || series_count == 0 {
            return Err(plot_error(path, "no bars to plot"));
        }
        let y_max = self.series.iter().flat_map(|(_, values)| values.iter()).fold(0.0f64, |max, value| max.max(*value));
        let area = white_svg_area(path)?;
        let mut chart =
            titled_chart(&area, &self.title, -0.5..(category_count as f64 - 0.5), 0.0..(y_max * 1.15).max(1e-9), path)?;
        let categories = self.categories.clone();
        chart
            .configure_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .x_labels(category_count)
            .x_label_formatter(&|x| {
                let rounded = x.round();
                let index = rounded as i64;
                if (x - rounded).abs() < 1e-6 && index >= 0 && (index as usize) < categories.len() {
                    categories[index as usize].clone()
                } else {
                    String::new()
                }
            })
            .disable_x_mesh()
            .draw()
            .map_err(|error| plot_error(path, error))?;
        let group_width = 0.8;
        let bar_width = group_width / series_count as f64;
        for (series_index, (name, values)) in self.series.iter().enumerate() {
            let colour = palette_colour(series_index);
            let bars = values.iter().enumerate().map(|(category, value)| {
                let left = category as f64 - group_width / 2.0 + series_index as f64 * bar_width;
                Rectangle::new([(left, 0.0), (left + bar_width * 0.95, *value)], colour.filled())
            });
            chart
                .draw_series(bars)
                .map_err(|error| plot_error(path, error))?
                .label(name)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], colour.filled()));
        }
        finish_with_legend(&mut chart, &area, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_chart_writes_an_svg_with_its_labels() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("line.svg");
        let chart = LineChart {
            title: "Per-request cost".into(),
            x_label: "strand size".into(),
            y_label: "OP".into(),
            series: vec![Series { name: "proximal".into(), points: vec![(1.0, 1.0), (8.0, 0.4)] }],
        };
        chart.write_svg(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "an SVG document");
        assert!(svg.contains("proximal") && svg.contains("Per-request cost"));
    }

    #[test]
    fn bar_chart_writes_an_svg_with_its_categories() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("bars.svg");
        let chart = GroupedBarChart {
            title: "Extra revolutions".into(),
            x_label: "extra revolutions".into(),
            y_label: "probability".into(),
            categories: vec!["0".into(), "1".into(), "2".into()],
            series: vec![("model".into(), vec![0.1, 0.5, 0.4]), ("simulated".into(), vec![0.2, 0.5, 0.3])],
        };
        chart.write_svg(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("simulated") && svg.contains("<rect"));
    }

    #[test]
    fn empty_chart_is_an_error_not_a_panic() {
        let directory = tempfile::tempdir().unwrap();
        let chart = LineChart { title: "t".into(), x_label: "x".into(), y_label: "y".into(), series: vec![] };
        assert!(matches!(chart.write_svg(&directory.path().join("empty.svg")), Err(LabError::Plot { .. })));
    }
}
