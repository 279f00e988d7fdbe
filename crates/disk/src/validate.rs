//! DiskSim "validate" traces and the Ruemmler–Wilkes demerit.
//!
//! A validate trace has one request per line:
//! `R|W Hit|Miss blkno nblks measured_access_us next_interarrival_us`. The
//! replay is closed-loop at queue depth 1: each request arrives
//! `next_interarrival_us` (taken from the line before it) after the previous one
//! completes. The demerit is the root-mean-square horizontal distance between
//! the simulated and measured response-time distributions, computed exactly by
//! sorting both samples and pairing them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{DiskModel, DiskOp, DiskRequest, HardDisk, LoadError, Nanos};

/// DiskSim 4.0's own figures on one drive's validate trace, as published with
/// the drive's files: its exact demerit and mean simulated access time, and
/// the overrides its validation run used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiskSimReference {
    /// The drive's folder name, as in `crates/disk/models/`.
    pub folder: &'static str,
    /// DiskSim's exact demerit (ms).
    pub rms_ms: f64,
    /// DiskSim's mean simulated access time (ms).
    pub mean_ms: f64,
    /// `COMPONENT:PARAMETER=VALUE` overrides of DiskSim's run.
    pub overrides: &'static [&'static str],
}

/// The drives whose DiskSim figures are known (from the models' README;
/// the Cheetah 15K.5's run turns its cache off as its own README says).
#[allow(clippy::approx_constant, reason = "0.318 ms is DiskSim's published demerit, not 1/pi")]
pub const DISKSIM_REFERENCES: [DiskSimReference; 6] = [
    DiskSimReference {
        folder: "cheetah15k5",
        rms_ms: 0.296,
        mean_ms: 6.020,
        overrides: &["disk0:Enable caching in buffer=0", "disk0:Fast write level=0", "disk0:Buffer continuous read=0"],
    },
    DiskSimReference { folder: "atlas10k", rms_ms: 0.268, mean_ms: 3.971, overrides: &[] },
    DiskSimReference { folder: "hp_c3323a", rms_ms: 0.289, mean_ms: 15.575, overrides: &[] },
    DiskSimReference { folder: "cheetah4LP", rms_ms: 0.318, mean_ms: 5.071, overrides: &[] },
    DiskSimReference { folder: "hp_c2247a", rms_ms: 0.094, mean_ms: 15.315, overrides: &[] },
    DiskSimReference { folder: "ibm18es", rms_ms: 0.136, mean_ms: 5.236, overrides: &[] },
];

/// DiskSim's figures for the drive in folder `folder`, if known.
pub fn disksim_reference(folder: &str) -> Option<&'static DiskSimReference> {
    DISKSIM_REFERENCES.iter().find(|reference| reference.folder == folder)
}

/// The folder of the models shipped with this crate (one folder per drive).
pub fn shipped_models_directory() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/models"))
}

/// A drive folder's parameter file and validate trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriveFiles {
    /// The folder's name.
    pub name: String,
    /// Its `.parv` (the one named after the folder when there are several).
    pub parv: PathBuf,
    /// Its `.trace`.
    pub trace: PathBuf,
}

/// The drive folders under `directory` that hold a `.parv` and a `.trace`,
/// sorted by name; folders without both are skipped.
pub fn drive_folders(directory: &Path) -> Result<Vec<DriveFiles>, LoadError> {
    let io_error = |path: &Path, error: std::io::Error| LoadError::Io {
        file: path.display().to_string(),
        message: error.to_string(),
    };
    let mut drives = Vec::new();
    for entry in std::fs::read_dir(directory).map_err(|error| io_error(directory, error))? {
        let folder = entry.map_err(|error| io_error(directory, error))?.path();
        if !folder.is_dir() {
            continue;
        }
        let name = folder.file_name().map(|name| name.to_string_lossy().to_string()).unwrap_or_default();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
            .map_err(|error| io_error(&folder, error))?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .collect();
        files.sort();
        let with_extension = |extension: &str| -> Vec<PathBuf> {
            files.iter().filter(|path| path.extension().is_some_and(|found| found == extension)).cloned().collect()
        };
        let (parvs, traces) = (with_extension("parv"), with_extension("trace"));
        let named = |paths: &[PathBuf]| {
            paths
                .iter()
                .find(|path| path.file_stem().is_some_and(|stem| stem.to_string_lossy() == name))
                .or(paths.first())
                .cloned()
        };
        if let (Some(parv), Some(trace)) = (named(&parvs), named(&traces)) {
            drives.push(DriveFiles { name, parv, trace });
        }
    }
    drives.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(drives)
}

/// One line of a validate trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceRecord {
    /// Read or write.
    pub op: DiskOp,
    /// First block.
    pub lbn: u64,
    /// Blocks.
    pub sector_count: u32,
    /// What the real drive took, in microseconds.
    pub measured_us: f64,
    /// Delay, after this request completes, before the next one arrives (µs).
    pub next_interarrival_us: f64,
}

/// Parses a validate trace; errors name the file and line.
pub fn parse_trace(file: &str, text: &str) -> Result<Vec<TraceRecord>, LoadError> {
    let mut records = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line_number = u32::try_from(index + 1).unwrap_or(u32::MAX);
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.is_empty() {
            continue;
        }
        let bad = |message: String| LoadError::Syntax { file: file.to_string(), line: line_number, message };
        if fields.len() < 6 {
            return Err(bad(format!(
                "expected `R|W Hit|Miss blkno nblks measured_us next_interarrival_us`, found {} fields",
                fields.len()
            )));
        }
        let op = match fields[0] {
            "R" | "r" => DiskOp::Read,
            "W" | "w" => DiskOp::Write,
            other => return Err(bad(format!("operation `{other}` is neither R nor W"))),
        };
        let lbn: u64 = fields[2].parse().map_err(|_| bad(format!("block number `{}` is not an integer", fields[2])))?;
        let sector_count: u32 = fields[3]
            .parse()
            .ok()
            .filter(|&count| count > 0)
            .ok_or_else(|| bad(format!("block count `{}` is not a positive integer", fields[3])))?;
        let time = |text: &str, what: &str| -> Result<f64, LoadError> {
            text.parse::<f64>()
                .ok()
                .filter(|value| value.is_finite() && *value >= 0.0)
                .ok_or_else(|| bad(format!("{what} `{text}` is not a non-negative number")))
        };
        records.push(TraceRecord {
            op,
            lbn,
            sector_count,
            measured_us: time(fields[4], "measured time")?,
            next_interarrival_us: time(fields[5], "inter-arrival time")?,
        });
    }
    Ok(records)
}

/// The result of a replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// Simulated response time of each request, in trace order (ms).
    pub simulated_ms: Vec<f64>,
    /// Measured time of each request, in trace order (ms).
    pub measured_ms: Vec<f64>,
}

impl Replay {
    /// Mean simulated response time (ms).
    pub fn mean_simulated_ms(&self) -> f64 {
        mean(&self.simulated_ms)
    }

    /// Mean measured response time (ms).
    pub fn mean_measured_ms(&self) -> f64 {
        mean(&self.measured_ms)
    }

    /// The exact Ruemmler–Wilkes demerit (ms).
    pub fn rms_ms(&self) -> f64 {
        demerit_ms(&self.simulated_ms, &self.measured_ms)
    }
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// RMS of the paired differences of the two sorted samples (equal lengths).
pub fn demerit_ms(simulated_ms: &[f64], measured_ms: &[f64]) -> f64 {
    assert_eq!(simulated_ms.len(), measured_ms.len(), "demerit needs paired samples");
    if simulated_ms.is_empty() {
        return 0.0;
    }
    let mut simulated = simulated_ms.to_vec();
    let mut measured = measured_ms.to_vec();
    simulated.sort_by(f64::total_cmp);
    measured.sort_by(f64::total_cmp);
    let sum: f64 = simulated.iter().zip(&measured).map(|(a, b)| (a - b) * (a - b)).sum();
    (sum / simulated.len() as f64).sqrt()
}

/// Replays `records` closed-loop on a fresh drive (seeded by `seed`).
/// Records addressing beyond the drive are an error naming the request.
pub fn replay(model: Arc<DiskModel>, records: &[TraceRecord], seed: u64) -> Result<Replay, LoadError> {
    let capacity = model.sector_count();
    let mut disk = HardDisk::new(model, seed);
    let mut simulated_ms = Vec::with_capacity(records.len());
    let mut completions = Vec::with_capacity(1);
    let mut now_ns: Nanos = 0;
    let mut interarrival_us = 0.0;
    for (index, record) in records.iter().enumerate() {
        if record.lbn.saturating_add(u64::from(record.sector_count)) > capacity {
            return Err(LoadError::Model {
                file: format!("trace request {}", index + 1),
                message: format!(
                    "blocks {}+{} lie beyond the drive's {capacity} sectors",
                    record.lbn, record.sector_count
                ),
            });
        }
        now_ns += (interarrival_us * 1000.0_f64).round() as Nanos;
        let request =
            DiskRequest { id: index as u64, op: record.op, lbn: record.lbn, sector_count: record.sector_count };
        disk.arrive(now_ns, request);
        completions.clear();
        let completion_ns = disk.next_event_ns().expect("a request was just delivered");
        disk.advance(completion_ns, &mut completions);
        let completion = completions.pop().expect("the request completes at its event");
        simulated_ms.push(completion.response_ns() as f64 / 1.0e6);
        now_ns = completion.completion_ns;
        interarrival_us = record.next_interarrival_us;
    }
    Ok(Replay { simulated_ms, measured_ms: records.iter().map(|record| record.measured_us / 1000.0).collect() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demerit_pairs_sorted_samples() {
        assert_eq!(demerit_ms(&[3.0, 1.0], &[1.0, 3.0]), 0.0);
        assert!((demerit_ms(&[1.0, 2.0], &[2.0, 3.0]) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn trace_errors_name_the_line() {
        let error = parse_trace("t.trace", "R Hit 1 8 100.0 5.0\nX Hit 1 8 1 1\n").unwrap_err().to_string();
        assert!(error.contains("t.trace:2"), "{error}");
    }
}
