//! What the three layout experiments (`proximal-table2`, `proximal-table3`,
//! `proximal-srarw`) share: their settings from the command line, the paper's
//! figures, the run's cost in wall time and memory, and report helpers.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use crate::srarw::ArrayShape;
use crate::{LabError, ReproduceOptions};

/// The default scale of the layout experiments: 0.4 % of each drive (869 extents
/// of 16 MiB on the nearline array), which keeps the three default runs to about
/// five minutes together on a 2-core machine; per-batch figures do not depend on
/// the scale.
pub const DEFAULT_SCALE: f64 = 0.004;

/// The default drive model: the paper's 1 TB 7200 RPM drive.
pub const DEFAULT_MODEL: &str = "nearline7200";

/// The paper's figures (seed 000, Section 5), quoted beside ours.
pub mod paper {
    /// Table 2, staging area 1 % of capacity.
    pub const UPDATES_PER_BATCH_1: f64 = 47.5;
    /// Table 2, 1 %: I/O amplification.
    pub const IO_AMPLIFICATION_1: f64 = 6.2;
    /// Table 2, 1 %: disk I/Os per revolution.
    pub const IOS_PER_REVOLUTION_1: f64 = 5.3;
    /// Table 2, 10 %.
    pub const UPDATES_PER_BATCH_10: f64 = 369.7;
    /// Table 2, 10 %: I/O amplification.
    pub const IO_AMPLIFICATION_10: f64 = 4.5;
    /// Table 2, 10 %: disk I/Os per revolution.
    pub const IOS_PER_REVOLUTION_10: f64 = 8.6;
    /// Table 3: blocks per request.
    pub const READ_BLOCKS_PER_REQUEST: f64 = 819.2;
    /// Table 3: runs per request on the aged layout.
    pub const READ_RUNS_PER_REQUEST: f64 = 47.5;
    /// Table 3: I/Os per disk per request on the aged layout.
    pub const READ_IOS_PER_DISK: f64 = 20.7;
    /// Table 3: response time on the aged layout, ms.
    pub const AGED_RESPONSE_MS: f64 = 9.5;
    /// Table 3: response time on the fresh layout, ms.
    pub const FRESH_RESPONSE_MS: f64 = 9.2;
    /// Table 3: MB/s per disk, aged.
    pub const AGED_MB_S_PER_DISK: f64 = 86.2;
    /// Table 3: MB/s per disk, fresh.
    pub const FRESH_MB_S_PER_DISK: f64 = 89.0;
    /// Section 5.3: write-anywhere degrades to as little as this fraction of fresh.
    pub const WRITE_ANYWHERE_AGED_TO_FRESH_MIN: f64 = 0.03;
    /// Section 5.4: random IOPS per disk with a 1 % staging area.
    pub const IOPS_PER_DISK: f64 = 333.0;
    /// Section 5.4: dollars per IOPS with a 1 % staging area.
    pub const DOLLARS_PER_IOPS: f64 = 0.48;
    /// Section 5.4: price of one disk, dollars.
    pub const DISK_DOLLARS: f64 = 130.0;
    /// Section 5.4: price of flash, dollars per GB.
    pub const FLASH_DOLLARS_PER_GB: f64 = 3.13;
}

/// The settings of one layout experiment.
#[derive(Debug, Clone)]
pub struct LayoutSettings {
    /// The drive model and the array's units.
    pub shape: ArrayShape,
    /// The model as given on the command line.
    pub model_name: String,
    /// Fraction of each drive used.
    pub scale: f64,
    /// Seed of every simulation.
    pub seed: u64,
}

impl LayoutSettings {
    /// Reads the settings from the command line's options.
    pub fn from_options(options: &ReproduceOptions) -> Result<LayoutSettings, LabError> {
        let scale = options.scale.unwrap_or(DEFAULT_SCALE);
        let shape = ArrayShape::for_model(&options.model)?;
        shape.window_blocks_per_disk(scale)?;
        Ok(LayoutSettings { shape, model_name: options.model.clone(), scale, seed: options.seed })
    }

    /// The command that regenerates the experiment.
    pub fn command_line(&self, name: &str, out_dir: &Path) -> String {
        format!(
            "proxima reproduce {name} --scale {} --model {} --seed {} --out {}",
            self.scale,
            self.model_name,
            self.seed,
            out_dir.display()
        )
    }

    /// The drive's revolution time.
    pub fn revolution_ns(&self) -> u64 {
        self.shape.model.revolution_ns()
    }
}

/// What a run cost on this machine, and how much it simulated.
#[derive(Debug, Clone, Copy)]
pub struct RunCost {
    started: Instant,
    /// Simulated user updates.
    pub simulated_updates: u64,
    /// Simulated member-disk I/Os.
    pub simulated_disk_ios: u64,
}

impl RunCost {
    /// Starts the wall clock.
    pub fn start() -> RunCost {
        RunCost { started: Instant::now(), simulated_updates: 0, simulated_disk_ios: 0 }
    }

    /// Wall seconds since the start.
    pub fn wall_seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// A line for the terminal and the report: wall time, simulation rates, peak
    /// memory of the process.
    pub fn render(&self) -> String {
        let seconds = self.wall_seconds().max(1e-9);
        let memory = peak_memory_bytes()
            .map_or_else(|| "unknown".to_string(), |bytes| format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64));
        format!(
            "wall {:.1} s; {:.0} simulated user updates per wall second; {:.0} simulated disk I/Os per wall \
             second; peak memory (VmHWM) {memory}",
            seconds,
            self.simulated_updates as f64 / seconds,
            self.simulated_disk_ios as f64 / seconds
        )
    }
}

/// The process's peak resident memory (`VmHWM` of /proc/self/status), where the
/// operating system reports it.
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kibibytes: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kibibytes * 1024)
}

/// Creates the output directory.
pub fn create_directory(path: &Path) -> Result<(), LabError> {
    std::fs::create_dir_all(path).map_err(|source| LabError::CreateDirectory { path: path.to_path_buf(), source })
}

/// Writes `text` to `path`.
pub fn write_text(path: &Path, text: &str) -> Result<(), LabError> {
    std::fs::write(path, text).map_err(|source| LabError::Write { path: path.to_path_buf(), source })
}

/// The report's opening: title, what runs, command, seed, scale.
pub fn report_header(title: &str, settings: &LayoutSettings, command: &str, extent_count: u64) -> String {
    let model = &settings.shape.model;
    let mut text = String::new();
    let _ = writeln!(text, "# {title}\n");
    let _ = writeln!(
        text,
        "A 4+1 RAID-4 of simulated `{}` drives ({:.0} RPM, revolution {:.3} ms, {} sectors; drive queue depth \
         8, metadata-only), stripe unit and allocation range {} KiB, {}, and a simulated flash device \
         standing for the paper's Intel X25 SSD; all on one virtual clock, exact for the seed.\n",
        model.name(),
        model.rpm(),
        model.revolution_ns() as f64 / 1e6,
        model.sector_count(),
        settings.shape.stripe_unit_bytes / 1024,
        match crate::srarw::ZONE_DATA_BLOCKS {
            Some(zone_blocks) => format!("zone checksums on every drive (one crc32c block per {zone_blocks} blocks)"),
            None => "no block checksums".to_string(),
        }
    );
    let _ = writeln!(text, "Command: `{command}`  ");
    let _ = writeln!(
        text,
        "Seed: {}; scale {} ({extent_count} extents of 16 MiB filling 89 % of a {:.1} GB array; the paper's \
         full size is scale 1).\n",
        settings.seed,
        settings.scale,
        extent_count as f64 * 16.0 * 1.048_576 / 0.89 / 1000.0
    );
    text
}

/// The definitions every layout report states.
pub const DEFINITIONS: &str = "\
- **Batch**: the disk I/O of destaging one extent's staged blocks (the paper's definition). Before each batch \
every drive's heads are moved to a uniformly random LBN of the whole drive, without I/O (the paper ran random \
I/Os and excluded them).
- **Updates per batch**: user 4 KiB updates destaged by the batch.
- **Disk I/Os per batch**: requests completed by the five drives (reads and writes, after the RAID layer \
coalesced adjacent blocks).
- **I/O amplification**: disk I/Os per user update, as the ratio of the sums over all batches.
- **Service time of a disk I/O**: its completion minus the previous completion on the same drive, or minus its \
own submission when the drive was idle in between (the paper: \"the difference between the completions of the \
last two I/Os\"). The first I/O of a drive in a batch therefore includes the seek from the random position.
- **Disk I/Os per revolution**: the revolution time over the mean service time of every I/O but each drive's \
first in a batch, pooled over drives and batches: the I/Os a drive retires per revolution once positioned (the \
paper adds an average seek to price a batch). For layouts that write each update at once (no batches) every \
I/O counts, positioning included.
- **Batch response time**: first submission to last completion of the batch's disk I/O, on any drive.
- **Utilisation** of a drive: its time with a request outstanding over the batches' response time.
- Drives acknowledge writes once the data is in their cache and write it to the medium right after; the next \
request waits for that, so the medium time shows in the service time of the I/O that follows.
- **Random-update throughput**: user updates per second of array busy time (time during which any drive had a \
request outstanding) over the whole aging, final destage included; staging writes to flash proceed alongside \
the disks and are not counted.
- **MB/s per disk** (reads): bytes read (10^6-byte MB) over the sum of the read requests' response times, \
divided by the four data disks.
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_memory_is_read_from_the_process_status() {
        let bytes = peak_memory_bytes().expect("Linux reports VmHWM");
        assert!(bytes > 0);
    }

    #[test]
    fn settings_refuse_a_scale_out_of_range() {
        let options = ReproduceOptions {
            out_dir: "unused".into(),
            seed: 1,
            model: DEFAULT_MODEL.into(),
            strand_count: 0,
            scale: Some(2.0),
            jobs: 1,
        };
        assert!(matches!(LayoutSettings::from_options(&options), Err(LabError::InvalidParameter { .. })));
    }
}
