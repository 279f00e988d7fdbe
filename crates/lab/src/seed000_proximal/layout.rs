//! What the three layout experiments (`proximal-table2`, `proximal-table3`,
//! `proximal-srarw`) share: their flags, their settings, the report's opening
//! and the definitions every report states.

use std::fmt::Write as _;
use std::path::PathBuf;

use proxima_engine::Layout;
use proxima_workload::srarw::UpdateSkew;

use crate::experiment::RunSettings;
use crate::rig::lab_volume::{ArrayShape, RunSpec};
use crate::LabError;

/// The default scale of the layout experiments: 0.4 % of each drive (869 extents
/// of 16 MiB on the nearline array), which keeps the three default runs to about
/// five minutes together on a 2-core machine; per-batch figures do not depend on
/// the scale.
pub const DEFAULT_SCALE: f64 = 0.004;

/// The default drive model: the paper's 1 TB 7200 RPM drive.
pub const DEFAULT_MODEL: &str = "nearline7200";

/// The flags of a layout experiment.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct LayoutParams {
    /// Fraction of the paper's full size: of each drive, of the extents and of
    /// the staging area.
    #[arg(long, default_value_t = DEFAULT_SCALE)]
    pub scale: f64,
    /// Independent simulations run at once, one per thread (the figures are the
    /// same; peak memory is the sum of those in flight).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
}

impl Default for LayoutParams {
    fn default() -> LayoutParams {
        LayoutParams { scale: DEFAULT_SCALE, jobs: 1 }
    }
}

impl LayoutParams {
    /// What a run's opening line says of these flags.
    pub fn describe(&self) -> String {
        format!(", {} simulation(s) at once", self.jobs)
    }
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
    /// Independent simulations run at once.
    pub jobs: usize,
    /// Where the files go.
    pub out_dir: PathBuf,
}

impl LayoutSettings {
    /// The run of `layout` with a staging area of `staging_percent` on this
    /// array, scale and seed.
    pub fn run_spec(&self, layout: Layout, staging_percent: f64) -> RunSpec {
        RunSpec {
            shape: self.shape.clone(),
            layout,
            staging_percent,
            scale: self.scale,
            seed: self.seed,
            snapshots_at_once_max: 0,
            snapshot_reserve_blocks_per_extent: 0,
            range_reserve_fraction: 0.0,
            update_skew: UpdateSkew::Uniform,
            proximal_copy_out: false,
        }
    }

    /// Resolves the model and checks the scale.
    pub fn new(run: &RunSettings, params: &LayoutParams) -> Result<LayoutSettings, LabError> {
        LayoutSettings::reserving(run, params, 0)
    }

    /// As [`LayoutSettings::new`], with room for two extents or more each
    /// with a snapshot reserve of `reserve_blocks_per_extent`.
    pub fn reserving(
        run: &RunSettings,
        params: &LayoutParams,
        reserve_blocks_per_extent: u64,
    ) -> Result<LayoutSettings, LabError> {
        let shape = ArrayShape::for_model(&run.model)?;
        shape.window_with_room(params.scale, reserve_blocks_per_extent)?;
        Ok(LayoutSettings {
            shape,
            model_name: run.model.clone(),
            scale: params.scale,
            seed: run.seed,
            jobs: usize::from(params.jobs),
            out_dir: run.out_dir.clone(),
        })
    }

    /// The command that regenerates the experiment.
    pub fn command_line(&self, name: &str) -> String {
        format!(
            "proxima reproduce {name} --scale {} --model {} --seed {} --out {}",
            self.scale,
            self.model_name,
            self.seed,
            self.out_dir.display()
        )
    }

    /// The drive's revolution time.
    pub fn revolution_ns(&self) -> u64 {
        self.shape.model.revolution_ns()
    }
}

/// The report's opening: title, what runs, command, seed, scale.
pub fn report_header(title: &str, settings: &LayoutSettings, command: &str, extent_count: u64) -> String {
    report_header_filling(title, settings, command, extent_count, proxima_workload::srarw::FILL_FRACTION)
}

/// The report's opening for extents filling `fill_fraction` of the array.
pub fn report_header_filling(
    title: &str,
    settings: &LayoutSettings,
    command: &str,
    extent_count: u64,
    fill_fraction: f64,
) -> String {
    let model = &settings.shape.model;
    let mut text = String::new();
    let _ = writeln!(text, "# {title}\n");
    let _ = writeln!(
        text,
        "A 4+1 RAID-4 of simulated `{}` drives ({:.0} RPM, revolution {:.3} ms, {} sectors; drive queue depth \
         8, metadata-only), stripe unit and allocation range {} KiB, {}, and a simulated flash device \
         standing for the paper's Intel X25 SSD; all on one virtual clock, exact for the seed. A read takes \
         the blocks between places it needs up to {} blocks apart (half a track of the drive's middle zone) \
         within an allocation range in one request (docs/layouts.md, \"Reading through gaps\").\n",
        model.name(),
        model.rpm(),
        model.revolution_ns() as f64 / 1e6,
        model.sector_count(),
        settings.shape.stripe_unit_bytes / 1024,
        match crate::rig::lab_volume::ZONE_DATA_BLOCKS {
            Some(zone_blocks) => format!("zone checksums on every drive (one crc32c block per {zone_blocks} blocks)"),
            None => "no block checksums".to_string(),
        },
        settings.shape.read_gap_blocks(),
    );
    let _ = writeln!(text, "Command: `{command}`  ");
    let _ = writeln!(
        text,
        "Seed: {}; scale {} ({extent_count} extents of 16 MiB filling {:.0} % of a {:.1} GB array; the paper's \
         full size is scale 1).\n",
        settings.seed,
        settings.scale,
        fill_fraction * 100.0,
        extent_count as f64 * 16.0 * 1.048_576 / fill_fraction / 1000.0
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
    fn settings_refuse_a_scale_out_of_range() {
        let run = RunSettings { out_dir: "unused".into(), seed: 1, model: DEFAULT_MODEL.into() };
        let params = LayoutParams { scale: 2.0, jobs: 1 };
        assert!(matches!(LayoutSettings::new(&run, &params), Err(LabError::InvalidParameter { .. })));
    }
}
