//! Seek-time curves: DiskSim's `extracted` table (linear interpolation, linear
//! extrapolation past the last measured distance), `linear`, `curve` (Lee's
//! equation), `constant`, `hpl` and `hplplus10`.
//!
//! All times are in nanoseconds as `f64` so that sub-nanosecond table values
//! interpolate without drift; callers round once per request.

use crate::params::Location;
use crate::LoadError;

/// A seek-time function of distance in cylinders (distance 0 costs nothing).
#[derive(Debug, Clone, PartialEq)]
pub enum SeekCurve {
    /// Measured (distance, time) points, sorted by distance, at least one point.
    Extracted {
        /// Distances in cylinders, ascending.
        distances: Vec<u32>,
        /// Seek times in nanoseconds for those distances.
        times_ns: Vec<f64>,
    },
    /// Piecewise linear through single-cylinder, average (at a third of the
    /// stroke) and full-stroke times.
    Linear {
        /// One-cylinder seek time.
        single_ns: f64,
        /// Average seek time.
        average_ns: f64,
        /// Full-stroke seek time.
        full_ns: f64,
        /// Cylinders on the disk.
        cylinder_count: u32,
    },
    /// Lee's equation `a·sqrt(d−1) + b·(d−1) + c`.
    Lee {
        /// Coefficient of the square root term (ns).
        a_ns: f64,
        /// Coefficient of the linear term (ns).
        b_ns: f64,
        /// Constant term, the single-cylinder time (ns).
        c_ns: f64,
    },
    /// The same time for every non-zero distance.
    Constant {
        /// The seek time.
        time_ns: f64,
    },
    /// The HPL equation (Ruemmler and Wilkes), optionally with the first ten
    /// distances given explicitly.
    Hpl {
        /// V1: boundary distance in cylinders.
        boundary_cylinders: f64,
        /// V2, V3: `V2 + V3·sqrt(d)` below the boundary (ns).
        short_ns: (f64, f64),
        /// V4, V5: `V4 + V5·d` at or beyond the boundary (ns).
        long_ns: (f64, f64),
        /// V6: single-cylinder seek time (ns), or `None` to use the equation.
        single_ns: Option<f64>,
        /// Seek times for distances 1..=10 (hplplus10).
        first_ten_ns: Option<[f64; 10]>,
    },
}

impl SeekCurve {
    /// Seek time for `distance` cylinders, in nanoseconds (0 for distance 0).
    pub fn time_ns(&self, distance: u32) -> f64 {
        if distance == 0 {
            return 0.0;
        }
        match self {
            SeekCurve::Extracted { distances, times_ns } => interpolate(distances, times_ns, distance),
            SeekCurve::Linear { single_ns, average_ns, full_ns, cylinder_count } => {
                let full_distance = f64::from(cylinder_count.saturating_sub(1).max(2));
                let average_distance = (full_distance / 3.0).max(1.5);
                let d = f64::from(distance);
                if d <= average_distance {
                    single_ns + (average_ns - single_ns) * (d - 1.0) / (average_distance - 1.0)
                } else {
                    average_ns + (full_ns - average_ns) * (d - average_distance) / (full_distance - average_distance)
                }
            }
            SeekCurve::Lee { a_ns, b_ns, c_ns } => {
                let excess = f64::from(distance - 1);
                a_ns * excess.sqrt() + b_ns * excess + c_ns
            }
            SeekCurve::Constant { time_ns } => *time_ns,
            SeekCurve::Hpl { boundary_cylinders, short_ns, long_ns, single_ns, first_ten_ns } => {
                if let (Some(table), true) = (first_ten_ns, distance <= 10) {
                    return table[distance as usize - 1];
                }
                if let (Some(single), true) = (single_ns, distance == 1) {
                    return *single;
                }
                let d = f64::from(distance);
                if d < *boundary_cylinders {
                    short_ns.0 + short_ns.1 * d.sqrt()
                } else {
                    long_ns.0 + long_ns.1 * d
                }
            }
        }
    }

    /// Parses an extracted seek file: an optional `Seek distances measured: N`
    /// line, then `distance, time_ms[, ...]` lines.
    pub fn parse_extracted(file: &str, text: &str) -> Result<SeekCurve, LoadError> {
        let mut points: Vec<(u32, f64)> = Vec::new();
        for (index, raw_line) in text.lines().enumerate() {
            let line_number = u32::try_from(index + 1).unwrap_or(u32::MAX);
            let line = raw_line.split('#').next().unwrap_or("").trim();
            if line.is_empty() || line.to_ascii_lowercase().starts_with("seek distances measured") {
                continue;
            }
            let location = Location { file: file.into(), line: line_number };
            points.push(parse_seek_line(line, &location)?);
        }
        if points.is_empty() {
            return Err(LoadError::Model { file: file.to_string(), message: "seek curve has no points".to_string() });
        }
        points.sort_by_key(|&(distance, _)| distance);
        points.dedup_by_key(|&mut (distance, _)| distance);
        Ok(SeekCurve::Extracted {
            distances: points.iter().map(|&(distance, _)| distance).collect(),
            times_ns: points.iter().map(|&(_, time_ns)| time_ns).collect(),
        })
    }
}

fn parse_seek_line(line: &str, location: &Location) -> Result<(u32, f64), LoadError> {
    let mut fields = line.split(|c: char| c == ',' || c.is_whitespace()).filter(|field| !field.is_empty());
    let bad = |message: String| LoadError::Syntax { file: location.file.to_string(), line: location.line, message };
    let distance_text = fields.next().ok_or_else(|| bad("expected `distance, time_ms`".to_string()))?;
    let time_text =
        fields.next().ok_or_else(|| bad(format!("expected a seek time after distance `{distance_text}`")))?;
    let distance: u32 = distance_text
        .parse()
        .ok()
        .filter(|&distance| distance > 0)
        .ok_or_else(|| bad(format!("seek distance `{distance_text}` is not a positive integer")))?;
    let time_ms: f64 = time_text
        .parse()
        .ok()
        .filter(|time: &f64| time.is_finite() && *time >= 0.0)
        .ok_or_else(|| bad(format!("seek time `{time_text}` is not a non-negative number of milliseconds")))?;
    Ok((distance, time_ms * 1.0e6))
}

/// Linear interpolation between points, linear extrapolation beyond the last two
/// (or flat from a single point), never below zero.
fn interpolate(distances: &[u32], times_ns: &[f64], distance: u32) -> f64 {
    assert!(!distances.is_empty() && distances.len() == times_ns.len());
    let index = distances.partition_point(|&known| known < distance);
    if index < distances.len() && distances[index] == distance {
        return times_ns[index];
    }
    if distances.len() == 1 {
        return times_ns[0];
    }
    // Choose the segment: the one around `distance`, or the first/last for
    // extrapolation.
    let upper = index.clamp(1, distances.len() - 1);
    let (d0, d1) = (f64::from(distances[upper - 1]), f64::from(distances[upper]));
    let (t0, t1) = (times_ns[upper - 1], times_ns[upper]);
    let time = t0 + (t1 - t0) * (f64::from(distance) - d0) / (d1 - d0);
    time.max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracted_interpolates_and_extrapolates() {
        let curve =
            SeekCurve::parse_extracted("t.seek", "Seek distances measured: 3\n1, 1.0\n3, 2.0\n5, 4.0\n").unwrap();
        assert_eq!(curve.time_ns(0), 0.0);
        assert_eq!(curve.time_ns(1), 1.0e6);
        assert_eq!(curve.time_ns(2), 1.5e6);
        assert_eq!(curve.time_ns(4), 3.0e6);
        assert_eq!(curve.time_ns(7), 6.0e6);
    }

    #[test]
    fn extracted_rejects_garbage_with_line() {
        let error = SeekCurve::parse_extracted("t.seek", "1, 1.0\nx, y\n").unwrap_err().to_string();
        assert!(error.contains("t.seek:2"), "{error}");
    }

    #[test]
    fn lee_matches_its_minimum_at_one_cylinder() {
        let curve = SeekCurve::Lee { a_ns: 10.0, b_ns: 1.0, c_ns: 500.0 };
        assert_eq!(curve.time_ns(1), 500.0);
        assert_eq!(curve.time_ns(5), 10.0 * 2.0 + 4.0 + 500.0);
    }

    #[test]
    fn hpl_uses_both_regimes() {
        let curve = SeekCurve::Hpl {
            boundary_cylinders: 100.0,
            short_ns: (1000.0, 100.0),
            long_ns: (2000.0, 10.0),
            single_ns: Some(700.0),
            first_ten_ns: None,
        };
        assert_eq!(curve.time_ns(1), 700.0);
        assert_eq!(curve.time_ns(4), 1200.0);
        assert_eq!(curve.time_ns(100), 3000.0);
    }
}
