//! HyLog's write-cost model (seed 001, §3): how much disk time it takes to
//! write one page under Overwrite (update in place), under a log-structured
//! layout that cleans its segments (LFS-cleaning, or LFS-plugging which plugs
//! holes), and under HyLog, which logs hot pages and overwrites cold ones.
//!
//! The paper's equations were lost from its text; they are rebuilt in
//! `hylog-model.md` (§A.1) and checked here against every worked number of
//! the paper's §6.2. Every cost is a *scaled write cost*: time per page
//! written, divided by the time of one segment I/O over the pages in a
//! segment (T_s / n), so LFS-cleaning's cost is Rosenblum's classic write
//! cost and Overwrite's is the segment-vs-page efficiency A of Eq 1.
//!
//! Conventions: times in milliseconds, sizes in bytes, bandwidth in MB/s of
//! 10^6 bytes (the paper's Table 1). Utilisations and fractions are in
//! [0, 1]; a value outside its domain is a bug of the caller and panics.
//!
//! - Eq 1 [`segment_efficiency`] (and [`segment_efficiency_from_times`],
//!   [`segment_efficiency_limit`]), Eq 6 [`segment_size_bytes`].
//! - Eq 2 [`utilization_for_cleaning`] and its inverse [`cleaning_utilization_for`].
//! - Eqs 3–5 [`overwrite_cost`], [`lfs_cleaning_cost`], [`lfs_plugging_cost`],
//!   which cross at [`crossover_cleaning_utilization`].
//! - Eq 7 [`hot_partition_utilization`], Eq 8 [`hylog_cost`] and
//!   [`hylog_cost_for_skew`] under a [`WriteSkew`].
//! - Arrays: [`array_segment_efficiency`] (A measured, adjusted for idle time).
//! - Throughput relative to Overwrite: [`write_throughput_vs_overwrite`],
//!   [`overall_throughput_vs_overwrite`].

use serde::{Deserialize, Serialize};

pub use proxima_engine::write_cost::{
    cleaning_utilization_for, hot_partition_utilization, hylog_cost, lfs_cleaning_cost, overwrite_cost,
    utilization_for_cleaning,
};

/// The page of the paper's databases: 4 KiB (001:L364).
pub const PAGE_SIZE_BYTES: u64 = 4096;

/// The share of Eq 1's limit the paper's segment size reaches (α of Eq 6):
/// 0.8 gives the "4 × disk performance product" rule of thumb.
pub const SEGMENT_EFFICIENCY_SHARE: f64 = 0.8;

/// What Eq 1 needs of a disk: its mean positioning time and its bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DiskTiming {
    /// Mean positioning time (seek plus rotational latency), ms.
    pub positioning_ms: f64,
    /// Media transfer rate, MB/s (10^6 bytes per second).
    pub bandwidth_mb_per_s: f64,
}

impl DiskTiming {
    /// The disk performance product T_pos · B: the bytes the disk could have
    /// transferred while positioning.
    pub fn performance_product_bytes(&self) -> f64 {
        self.positioning_ms * self.bandwidth_mb_per_s * 1e3
    }

    /// Time of one I/O of `bytes` at a random position: T_pos + bytes / B.
    pub fn io_time_ms(&self, bytes: f64) -> f64 {
        self.positioning_ms + bytes / (self.bandwidth_mb_per_s * 1e3)
    }
}

/// Eq 1: the segment-vs-page efficiency A = n · T_p / T_s, how many times
/// faster a page is written as part of a whole segment of `segment_bytes`
/// than alone.
pub fn segment_efficiency(disk: DiskTiming, page_bytes: u64, segment_bytes: f64) -> f64 {
    assert!(page_bytes > 0 && segment_bytes > 0.0, "sizes are positive");
    let pages_per_segment = segment_bytes / page_bytes as f64;
    segment_efficiency_from_times(pages_per_segment, disk.io_time_ms(page_bytes as f64), disk.io_time_ms(segment_bytes))
}

/// Eq 1 from measured times: A = n · T_p / T_s.
pub fn segment_efficiency_from_times(pages_per_segment: f64, page_io_ms: f64, segment_io_ms: f64) -> f64 {
    assert!(page_io_ms > 0.0 && segment_io_ms > 0.0, "I/O times are positive");
    pages_per_segment * page_io_ms / segment_io_ms
}

/// The limit of Eq 1 for ever larger segments: 1 + T_pos · B / P.
pub fn segment_efficiency_limit(disk: DiskTiming, page_bytes: u64) -> f64 {
    1.0 + disk.performance_product_bytes() / page_bytes as f64
}

/// Eq 6 before rounding: the segment whose A is `share` of Eq 1's limit,
/// S = share / (1 − share) · T_pos · B.
pub fn segment_bytes_for_share(disk: DiskTiming, share: f64) -> f64 {
    assert!(share > 0.0 && share < 1.0, "a share of the limit in (0, 1)");
    share / (1.0 - share) * disk.performance_product_bytes()
}

/// Eq 6 as the paper uses it: [`segment_bytes_for_share`] rounded to the
/// nearest power of two (by distance in bytes), and never below a page.
pub fn segment_size_bytes(disk: DiskTiming, page_bytes: u64, share: f64) -> u64 {
    nearest_power_of_two(segment_bytes_for_share(disk, share)).max(page_bytes)
}

/// The power of two nearest `bytes` (the lower one on a tie).
fn nearest_power_of_two(bytes: f64) -> u64 {
    assert!(bytes >= 1.0 && bytes < 2f64.powi(62), "a size from one byte to 2^62");
    let lower = 1u64 << bytes.log2().floor() as u32;
    let upper = lower << 1;
    if bytes - lower as f64 <= upper as f64 - bytes {
        lower
    } else {
        upper
    }
}

/// Eq 5: LFS-plugging's scaled write cost, 2 + u_c · A: a segment write, a
/// segment read per segment reclaimed, and its live pages written one by
/// one into holes.
pub fn lfs_plugging_cost(cleaning: f64, segment_efficiency: f64) -> f64 {
    assert!((0.0..=1.0).contains(&cleaning), "a cleaning utilisation in [0, 1]: {cleaning}");
    2.0 + cleaning * segment_efficiency
}

/// Where Eqs 3, 4 and 5 meet: u_c* = 1 − 2 / A. Below it LFS writes faster
/// than Overwrite. `None` when A ≤ 2 (LFS never wins).
pub fn crossover_cleaning_utilization(segment_efficiency: f64) -> Option<f64> {
    (segment_efficiency > 2.0).then(|| 1.0 - 2.0 / segment_efficiency)
}

/// The share of the segment I/O of LFS-cleaning that is cleaning,
/// (1 + u_c) / 2, inverted: the u_c a measured share implies (§6.2).
pub fn cleaning_utilization_from_cleaning_share(cleaning_share: f64) -> f64 {
    assert!((0.5..=1.0).contains(&cleaning_share), "cleaning is at least half of LFS's segment I/O");
    2.0 * cleaning_share - 1.0
}

/// How writes are spread over pages: the share of the writes w = F(h) that
/// go to the most written `h` of the pages.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum WriteSkew {
    /// Every page equally: w = h.
    Uniform,
    /// Knuth's family (vol. 3, p. 400): w = h^θ; θ = log a / log b puts a
    /// share a of the writes on a share b of the pages.
    Knuth {
        /// The exponent θ ∈ (0, 1]; 1 is uniform.
        theta: f64,
    },
}

impl WriteSkew {
    /// Knuth's skew with a share `write_share` of the writes on a share
    /// `page_share` of the pages (0.8 and 0.2: the 80-20 rule).
    pub fn knuth(write_share: f64, page_share: f64) -> WriteSkew {
        assert!(write_share > 0.0 && write_share < 1.0 && page_share > 0.0 && page_share < 1.0, "shares in (0, 1)");
        WriteSkew::Knuth { theta: write_share.ln() / page_share.ln() }
    }

    /// The 80-20 rule: 80 % of the writes on 20 % of the pages.
    pub fn knuth_80_20() -> WriteSkew {
        WriteSkew::knuth(0.8, 0.2)
    }

    /// w = F(h): the share of the writes that hit the hottest `hot_fraction` of the pages.
    pub fn hot_write_fraction(&self, hot_fraction: f64) -> f64 {
        assert!((0.0..=1.0).contains(&hot_fraction), "a hot fraction in [0, 1]: {hot_fraction}");
        match *self {
            WriteSkew::Uniform => hot_fraction,
            WriteSkew::Knuth { theta } => hot_fraction.powf(theta),
        }
    }
}

/// Eq 8 end to end: the hottest `hot_fraction` of the pages are logged, at
/// disk utilisation `utilization`, writes skewed as `skew`; the hot
/// partition's cleaning utilisation comes from Eq 7 and the inverse of Eq 2.
pub fn hylog_cost_for_skew(skew: WriteSkew, utilization: f64, hot_fraction: f64, segment_efficiency: f64) -> f64 {
    let hot_cleaning = cleaning_utilization_for(hot_partition_utilization(utilization, hot_fraction));
    hylog_cost(skew.hot_write_fraction(hot_fraction), hot_cleaning, segment_efficiency)
}

/// The hot fraction h on a grid of `steps` + 1 points over [0, 1] that
/// minimises [`hylog_cost_for_skew`], and that cost: what HyLog's page
/// separation chooses (001:L236–L244).
pub fn best_hot_fraction(skew: WriteSkew, utilization: f64, segment_efficiency: f64, steps: u32) -> (f64, f64) {
    assert!(steps > 0, "at least two grid points");
    (0..=steps)
        .map(|step| {
            let hot_fraction = f64::from(step) / f64::from(steps);
            (hot_fraction, hylog_cost_for_skew(skew, utilization, hot_fraction, segment_efficiency))
        })
        .fold((0.0, f64::INFINITY), |best, candidate| if candidate.1 < best.1 { candidate } else { best })
}

/// How an array stores a segment across its disks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArrayLevel {
    /// Striping without parity: a segment is a stripe unit on every disk.
    Raid0,
    /// Striping with one disk's worth of parity per stripe.
    Raid5,
}

impl ArrayLevel {
    /// The bytes of user data in a full stripe of `disk_count` disks: the
    /// segment of a log-structured layout on the array (001:L104–L112).
    pub fn segment_bytes(self, stripe_unit_bytes: u64, disk_count: u32) -> u64 {
        let data_disks = match self {
            ArrayLevel::Raid0 => disk_count,
            ArrayLevel::Raid5 => {
                assert!(disk_count >= 2, "RAID-5 needs a data disk and a parity disk");
                disk_count - 1
            }
        };
        stripe_unit_bytes * u64::from(data_disks)
    }
}

/// A on an array from measured mean I/O times, adjusted for idle time:
/// n · T_p / (N · T_s · (1 − r)). A page I/O holds one of the `disk_count`
/// disks while a segment I/O holds all of them, and the disks' idle share
/// `idle_fraction` r is time segment I/O could have used (001:L227–L232).
pub fn array_segment_efficiency(
    pages_per_segment: f64,
    page_io_ms: f64,
    segment_io_ms: f64,
    disk_count: u32,
    idle_fraction: f64,
) -> f64 {
    assert!(disk_count > 0, "an array has disks");
    assert!((0.0..1.0).contains(&idle_fraction), "an idle fraction in [0, 1): {idle_fraction}");
    segment_efficiency_from_times(pages_per_segment, page_io_ms, segment_io_ms)
        / (f64::from(disk_count) * (1.0 - idle_fraction))
}

/// Write throughput of a layout whose scaled write cost is `cost`, relative
/// to Overwrite's (whose cost is A): A / cost.
pub fn write_throughput_vs_overwrite(segment_efficiency: f64, cost: f64) -> f64 {
    assert!(cost > 0.0, "a write cost is positive");
    segment_efficiency / cost
}

/// Throughput of all traffic relative to Overwrite when a `write_share` of
/// it is writes whose throughput is `write_ratio` of Overwrite's and reads
/// cost the same in both: 1 / ((1 − f) + f / ratio).
pub fn overall_throughput_vs_overwrite(write_share: f64, write_ratio: f64) -> f64 {
    assert!((0.0..=1.0).contains(&write_share), "a write share in [0, 1]");
    assert!(write_ratio > 0.0, "a throughput ratio is positive");
    1.0 / ((1.0 - write_share) + write_share / write_ratio)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::seed001_hylog::paper::{self, DISKS};

    /// Within 0.5 % of `expected`.
    fn assert_close(name: &str, value: f64, expected: f64) {
        let error = (value - expected).abs() / expected;
        assert!(error <= 0.005, "{name}: {value:.4} is {:.2} % from {expected}", error * 100.0);
    }

    fn timing(key: &str) -> DiskTiming {
        paper::disk(key).expect("a paper disk").timing
    }

    fn eq_6_segment(disk: DiskTiming) -> u64 {
        segment_size_bytes(disk, PAGE_SIZE_BYTES, SEGMENT_EFFICIENCY_SHARE)
    }

    fn eq_6_efficiency(disk: DiskTiming) -> f64 {
        segment_efficiency(disk, PAGE_SIZE_BYTES, eq_6_segment(disk) as f64)
    }

    #[test]
    fn eq_2_gives_95_percent_at_the_papers_90_2_percent() {
        assert_close("u(0.902)", utilization_for_cleaning(0.902), 0.950);
        assert_close("u_c(0.95)", cleaning_utilization_for(0.95), 0.902);
    }

    #[test]
    fn eq_2_has_its_limits_at_the_ends() {
        assert_eq!(utilization_for_cleaning(0.0), 0.0);
        assert_eq!(utilization_for_cleaning(1.0), 1.0);
        assert_eq!(cleaning_utilization_for(0.0), 0.0);
        assert_eq!(cleaning_utilization_for(1.0), 1.0);
    }

    #[test]
    fn the_cleaning_utilizations_of_the_derived_table() {
        for (utilization, cleaning) in [(0.80, 0.629), (0.90, 0.807), (0.95, 0.902), (0.98, 0.960)] {
            assert_close(&format!("u_c({utilization})"), cleaning_utilization_for(utilization), cleaning);
        }
        for (utilization, cost) in [(0.80, 5.39), (0.90, 10.36), (0.95, 20.34), (0.98, 50.34)] {
            let value = lfs_cleaning_cost(cleaning_utilization_for(utilization));
            assert_close(&format!("W'_lfs({utilization})"), value, cost);
        }
    }

    #[test]
    fn the_derived_per_disk_table() {
        // (disk, T_pos·B in bytes, Eq 6 segment, A, u_c*, u*), hylog-model.md §A.1.
        let rows = [
            ("rz26", 34_500.0, 128 << 10, 7.46, 0.732, 0.859),
            ("atlas10k", 175_440.0, 512 << 10, 32.8, 0.939, 0.969),
            ("disk2003", 341_600.0, 1 << 20, 63.7, 0.969, 0.984),
            ("disk2008", 643_500.0, 2 << 20, 121.0, 0.984, 0.992),
        ];
        for (key, product_bytes, segment_bytes, efficiency, crossover, crossover_utilization) in rows {
            let disk = timing(key);
            assert_close(&format!("{key} T_pos·B"), disk.performance_product_bytes(), product_bytes);
            assert_eq!(eq_6_segment(disk), segment_bytes, "{key} Eq 6 segment");
            let measured = eq_6_efficiency(disk);
            assert_close(&format!("{key} A"), measured, efficiency);
            let cleaning = crossover_cleaning_utilization(measured).expect("A > 2");
            assert_close(&format!("{key} u_c*"), cleaning, crossover);
            assert_close(&format!("{key} u*"), utilization_for_cleaning(cleaning), crossover_utilization);
        }
    }

    #[test]
    fn eq_1_grows_with_the_segment_towards_its_limit() {
        for disk in DISKS {
            let limit = segment_efficiency_limit(disk.timing, PAGE_SIZE_BYTES);
            let mut previous = segment_efficiency(disk.timing, PAGE_SIZE_BYTES, PAGE_SIZE_BYTES as f64);
            assert!((previous - 1.0).abs() < 1e-12, "a one-page segment is a page I/O");
            for shift in 13..=30 {
                let value = segment_efficiency(disk.timing, PAGE_SIZE_BYTES, f64::from(1u32 << shift));
                assert!(value > previous && value < limit, "{}: A rises below its limit", disk.key);
                previous = value;
            }
        }
    }

    #[test]
    fn eq_6_reaches_its_share_of_the_limit_before_rounding() {
        for disk in DISKS {
            let segment = segment_bytes_for_share(disk.timing, SEGMENT_EFFICIENCY_SHARE);
            let share = segment_efficiency(disk.timing, PAGE_SIZE_BYTES, segment)
                / segment_efficiency_limit(disk.timing, PAGE_SIZE_BYTES);
            assert!((share - SEGMENT_EFFICIENCY_SHARE).abs() < 1e-12, "{}: {share}", disk.key);
            assert!((segment / disk.timing.performance_product_bytes() - 4.0).abs() < 1e-12, "4 × T_pos·B");
        }
    }

    #[test]
    fn nearest_power_of_two_rounds_by_distance() {
        assert_eq!(nearest_power_of_two(701_760.0), 512 << 10);
        assert_eq!(nearest_power_of_two(786_432.0), 512 << 10, "a tie goes down");
        assert_eq!(nearest_power_of_two(786_433.0), 1 << 20);
        assert_eq!(nearest_power_of_two(1.0), 1);
    }

    #[test]
    fn eq_8_is_overwrite_with_no_hot_pages_and_lfs_with_all() {
        for utilization in [0.5, 0.8, 0.95, 0.98] {
            for skew in [WriteSkew::Uniform, WriteSkew::knuth_80_20()] {
                assert_eq!(hylog_cost_for_skew(skew, utilization, 0.0, 32.8), overwrite_cost(32.8));
                let lfs = lfs_cleaning_cost(cleaning_utilization_for(utilization));
                assert!((hylog_cost_for_skew(skew, utilization, 1.0, 32.8) - lfs).abs() < 1e-9 * lfs);
            }
        }
    }

    #[test]
    fn knuth_80_20_puts_80_percent_of_the_writes_on_20_percent_of_the_pages() {
        let skew = WriteSkew::knuth_80_20();
        let WriteSkew::Knuth { theta } = skew else { panic!("a Knuth skew") };
        assert_close("θ", theta, 0.1386);
        assert!((skew.hot_write_fraction(0.2) - 0.8).abs() < 1e-12);
        assert_eq!(WriteSkew::Uniform.hot_write_fraction(0.3), 0.3);
    }

    #[test]
    fn skew_makes_hylog_beat_both_overwrite_and_lfs_at_high_utilization() {
        let efficiency = eq_6_efficiency(timing("atlas10k"));
        let lfs = lfs_cleaning_cost(cleaning_utilization_for(0.98));
        let (hot_fraction, cost) = best_hot_fraction(WriteSkew::knuth_80_20(), 0.98, efficiency, 200);
        assert!(hot_fraction > 0.0 && hot_fraction < 1.0, "a mix of hot and cold: h = {hot_fraction}");
        assert!(cost < efficiency && cost < lfs, "{cost} below Overwrite {efficiency} and LFS {lfs}");
    }

    #[test]
    fn raid_5_gives_up_one_disk_of_each_stripe() {
        assert_eq!(ArrayLevel::Raid0.segment_bytes(512 << 10, 8), 4 << 20);
        assert_eq!(ArrayLevel::Raid5.segment_bytes(512 << 10, 9), 4 << 20);
    }

    proptest! {
        #[test]
        fn eq_2_inverse_round_trips(cleaning in 0.0f64..0.999_999) {
            let back = cleaning_utilization_for(utilization_for_cleaning(cleaning));
            prop_assert!((back - cleaning).abs() < 1e-12, "{} came back as {}", cleaning, back);
        }

        #[test]
        fn eq_2_is_increasing_and_above_its_argument(cleaning in 0.001f64..0.999, step in 1e-6f64..1e-3) {
            let utilization = utilization_for_cleaning(cleaning);
            prop_assert!(utilization > cleaning);
            prop_assert!(utilization_for_cleaning((cleaning + step).min(1.0)) > utilization);
        }

        #[test]
        fn eqs_3_to_5_cross_at_one_point(efficiency in 2.5f64..500.0) {
            let crossover = crossover_cleaning_utilization(efficiency).unwrap();
            let overwrite = overwrite_cost(efficiency);
            prop_assert!((lfs_cleaning_cost(crossover) - overwrite).abs() < 1e-9 * overwrite);
            prop_assert!((lfs_plugging_cost(crossover, efficiency) - overwrite).abs() < 1e-9 * overwrite);
            // Below the crossover both LFS variants beat Overwrite, above it neither does.
            let (below, above) = (crossover * 0.99, crossover + (1.0 - crossover) * 0.01);
            prop_assert!(lfs_cleaning_cost(below) < overwrite && lfs_plugging_cost(below, efficiency) < overwrite);
            prop_assert!(lfs_cleaning_cost(above) > overwrite && lfs_plugging_cost(above, efficiency) > overwrite);
        }

        #[test]
        fn eq_7_gives_the_hot_partition_all_free_space(utilization in 0.01f64..0.99, hot in 0.01f64..1.0) {
            let hot_utilization = hot_partition_utilization(utilization, hot);
            // The hot pages fill the hot partition, whose size is theirs plus every free byte.
            let hot_bytes = hot * utilization;
            prop_assert!((hot_utilization * (hot_bytes + 1.0 - utilization) - hot_bytes).abs() < 1e-12);
            prop_assert!(hot_utilization <= utilization + 1e-12);
        }
    }
}
