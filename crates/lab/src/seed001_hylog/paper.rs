//! What the HyLog paper (seed 001) gives the model: its disks (Table 1 and
//! Table 5), the default array, and the measured inputs and printed results
//! of its §6.2 worked examples. Line numbers `L…` point into the seed's text
//! (`001_80299f804c636d96.txt`). Nothing here is computed.

use crate::seed001_hylog::cost_model::{ArrayLevel, DiskTiming};

/// A disk of the paper, as the write-cost model sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PaperDisk {
    /// Short name, as the headline's keys spell it.
    pub key: &'static str,
    /// The drive, as the paper names it.
    pub name: &'static str,
    /// Mean positioning time and bandwidth.
    pub timing: DiskTiming,
    /// Where the figures come from.
    pub source: &'static str,
}

/// The disks of Figures 1 and 3, oldest first: the three of Table 1 and the
/// "2008 disk" of Table 5, whose positioning time is its average seek plus
/// half a revolution at 24,000 RPM.
pub const DISKS: [PaperDisk; 4] = [
    PaperDisk {
        key: "rz26",
        name: "DEC RZ26 (1991)",
        timing: DiskTiming { positioning_ms: 15.0, bandwidth_mb_per_s: 2.3 },
        source: "Table 1 (L4): 15.0 ms, 2.3 MB/s",
    },
    PaperDisk {
        key: "atlas10k",
        name: "Quantum atlas10k (1999)",
        timing: DiskTiming { positioning_ms: 8.6, bandwidth_mb_per_s: 20.4 },
        source: "Table 1 (L3): 8.6 ms, 20.4 MB/s; Table 5: 5.6 ms seek + 3.0 ms half revolution at 10,025 RPM",
    },
    PaperDisk {
        key: "disk2003",
        name: "Cheetah X15 36LP (2003)",
        timing: DiskTiming { positioning_ms: 5.6, bandwidth_mb_per_s: 61.0 },
        source: "Table 1 (L2): 5.6 ms, 61.0 MB/s; Table 5's 2003 disk: 3.6 ms seek + 2.0 ms half revolution \
                 at 15,000 RPM, 61 MB/s",
    },
    PaperDisk {
        key: "disk2008",
        name: "2008 disk",
        timing: DiskTiming { positioning_ms: 3.25, bandwidth_mb_per_s: 198.0 },
        source: "Table 5 (L407–L415): 2.0 ms seek + 1.25 ms half revolution at 24,000 RPM, 198 MB/s",
    },
];

/// The disk of the paper's default configuration and of its §6.2 examples.
pub const DEFAULT_DISK: &str = "atlas10k";

/// Disks in the default array (Table 6, L460–L470).
pub const ARRAY_DISK_COUNT: u32 = 4;

/// The default array's level (Table 6).
pub const ARRAY_LEVEL: ArrayLevel = ArrayLevel::Raid0;

/// The share of the traffic that is writes after the buffer pool (Table 4,
/// L531–L532): the rest are reads, which cost the same in every layout.
pub const WRITE_SHARE: f64 = 0.42;

/// What the simulation measured in one example of §6.2.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeasuredRun {
    /// Mean page I/O time T_p, ms.
    pub page_io_ms: f64,
    /// Mean segment I/O time T_s, ms.
    pub segment_io_ms: f64,
    /// The share of the time the disks were idle.
    pub idle_fraction: f64,
}

/// LFS at 95 % utilisation (L519–L534): the share of segment I/O that was
/// cleaning.
pub const LFS_95_CLEANING_SHARE: f64 = 0.942;
/// LFS at 95 %: times and idle share.
pub const LFS_95_RUN: MeasuredRun = MeasuredRun { page_io_ms: 5.6, segment_io_ms: 27.3, idle_fraction: 0.30 };
/// LFS at 95 %: the paper's write throughput over Overwrite's ("2.2 times", L530).
pub const LFS_95_WRITE_RATIO_PRINTED: f64 = 2.2;
/// LFS at 95 %: overall throughput over Overwrite's from the model ("30 %", L533).
pub const LFS_95_OVERALL_PRINTED: f64 = 1.30;
/// LFS at 95 %: the same, simulated ("27 %", L534).
pub const LFS_95_OVERALL_SIMULATED: f64 = 1.27;

/// HyLog at 98 % (L535–L550): the share of the pages that were hot.
pub const HYLOG_98_HOT_FRACTION: f64 = 0.422;
/// HyLog at 98 %: the share of the writes to hot pages.
pub const HYLOG_98_HOT_WRITE_FRACTION: f64 = 0.582;
/// HyLog at 98 %: the hot partition's measured cleaning utilisation.
pub const HYLOG_98_HOT_CLEANING: f64 = 0.934;
/// HyLog at 98 %: times and idle share.
pub const HYLOG_98_RUN: MeasuredRun = MeasuredRun { page_io_ms: 5.8, segment_io_ms: 27.2, idle_fraction: 0.225 };
/// HyLog at 98 %: the hot partition's write throughput over Overwrite's ("16 % higher", L546).
pub const HYLOG_98_HOT_PRINTED: f64 = 1.16;
/// HyLog at 98 %: the weighted write throughput ("9 % higher", L547).
pub const HYLOG_98_WRITE_PRINTED: f64 = 1.09;
/// HyLog at 98 %: overall, from the model (L549).
pub const HYLOG_98_OVERALL_PRINTED: f64 = 1.036;
/// HyLog at 98 %: overall, simulated (L550).
pub const HYLOG_98_OVERALL_SIMULATED: f64 = 1.008;

/// LFS at 98 %: its measured cleaning utilisation ("96.2 %", L541).
pub const LFS_98_CLEANING: f64 = 0.962;
/// LFS at 98 %: write throughput over Overwrite's from the model ("66.9 %", L551–L552).
pub const LFS_98_WRITE_RATIO_PRINTED: f64 = 0.669;
/// LFS at 98 %: overall, from the model ("82.8 %", L553).
pub const LFS_98_OVERALL_PRINTED: f64 = 0.828;
/// LFS at 98 %: overall, simulated ("78.0 %", L554).
pub const LFS_98_OVERALL_SIMULATED: f64 = 0.780;

/// The cleaning utilisation the paper computes from Eq 2 at 95 % ("90.2 %", L520).
pub const EQ_2_CLEANING_AT_95_PRINTED: f64 = 0.902;

/// The disk named `key` in [`DISKS`].
pub fn disk(key: &str) -> Option<&'static PaperDisk> {
    DISKS.iter().find(|disk| disk.key == key)
}
