//! The natural transfer size of a drive model: the effective bandwidth of
//! reads of one size at random places, for sizes from 4 KiB up, and the size
//! at which it reaches a fraction (50 %, 90 %) of the peak.
//!
//! Each read goes alone to the drive (queue depth 1) at a uniformly random
//! 4 KiB-aligned place of the whole drive, so every read pays a seek and a
//! rotational delay and then transfers; the effective bandwidth of a size is
//! its bytes over the reads' summed response times. The peak is the highest
//! bandwidth measured (the largest reads approach the media rate). The size
//! reaching a fraction of the peak is interpolated between the two measured
//! sizes around it, linearly in log₂(size), as the curve is drawn.

use std::sync::Arc;

use proxima_disk::{DiskCompletion, DiskModel, DiskOp, DiskRequest, HardDisk};
use proxima_workload::synthetic::seeded_stream;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The smallest read measured: one 4 KiB block.
const SMALLEST_READ_KIB: u64 = 4;
/// Doublings measured after the smallest (4 KiB … 256 MiB).
const DOUBLINGS: u32 = 16;
/// Bytes read at each size, at most (fewer reads of the large sizes).
const BYTES_PER_SIZE: u64 = 1 << 30;
/// Reads of each size, at least and at most.
const READS_PER_SIZE: (u64, u64) = (8, 64);

/// The effective bandwidth of one read size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TransferPoint {
    /// Bytes per read, KiB.
    pub read_kib: u64,
    /// Bytes read over the summed response times, MB/s (10⁶ bytes).
    pub mb_s: f64,
    /// Reads measured.
    pub read_count: u64,
}

/// Measures the curve on `model` with the random places of `seed`.
pub fn transfer_curve(model: &Arc<DiskModel>, seed: u64) -> Vec<TransferPoint> {
    let mut places = seeded_stream(seed, 11);
    let mut disk = HardDisk::new(Arc::clone(model), seed).with_queue_depth(1);
    let sector_bytes = u64::from(model.sector_size_bytes());
    let mut now_ns = 0;
    let mut completions: Vec<DiskCompletion> = Vec::new();
    let mut curve = Vec::new();
    for doubling in 0..=DOUBLINGS {
        let read_kib = SMALLEST_READ_KIB << doubling;
        let read_bytes = read_kib * 1024;
        let sector_count = read_bytes / sector_bytes;
        let read_count = (BYTES_PER_SIZE / read_bytes).clamp(READS_PER_SIZE.0, READS_PER_SIZE.1);
        let places_count = (model.sector_count() - sector_count) / 8;
        let mut response_ns = 0;
        for id in 0..read_count {
            let lbn = places.gen_range(0..places_count) * 8;
            let request = DiskRequest {
                id,
                op: DiskOp::Read,
                lbn,
                sector_count: u32::try_from(sector_count).expect("reads of at most 256 MiB"),
            };
            disk.arrive(now_ns, request);
            completions.clear();
            while completions.is_empty() {
                let next_ns = disk.next_event_ns().expect("a request in service");
                disk.advance(next_ns, &mut completions);
            }
            let completion = completions[0];
            response_ns += completion.completion_ns - completion.arrival_ns;
            now_ns = completion.completion_ns;
        }
        let mb_s = (read_bytes * read_count) as f64 * 1e3 / response_ns as f64;
        curve.push(TransferPoint { read_kib, mb_s, read_count });
    }
    curve
}

/// The highest bandwidth of the curve, MB/s.
pub fn peak_mb_s(curve: &[TransferPoint]) -> f64 {
    curve.iter().map(|point| point.mb_s).fold(0.0, f64::max)
}

/// The read size, KiB, at which the curve first reaches `fraction` of its
/// peak, interpolated linearly in log₂(size) between the measured sizes
/// around it; `None` for an empty curve.
pub fn natural_transfer_size_kib(curve: &[TransferPoint], fraction: f64) -> Option<f64> {
    let target = fraction * peak_mb_s(curve);
    let reached = curve.iter().position(|point| point.mb_s >= target)?;
    if reached == 0 {
        return Some(curve[0].read_kib as f64);
    }
    let (below, above) = (curve[reached - 1], curve[reached]);
    let share = (target - below.mb_s) / (above.mb_s - below.mb_s);
    let log_size =
        (below.read_kib as f64).log2() + share * ((above.read_kib as f64).log2() - (below.read_kib as f64).log2());
    Some(log_size.exp2())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(read_kib: u64, mb_s: f64) -> TransferPoint {
        TransferPoint { read_kib, mb_s, read_count: 8 }
    }

    #[test]
    fn the_natural_transfer_size_is_interpolated_in_log_size() {
        let curve = [point(4, 1.0), point(8, 2.0), point(16, 60.0), point(32, 100.0), point(64, 80.0)];
        assert_eq!(peak_mb_s(&curve), 100.0);
        // 50 MB/s lies 48/58 of the way from 8 KiB to 16 KiB.
        let half = natural_transfer_size_kib(&curve, 0.5).unwrap();
        assert!((half - (3.0 + 48.0 / 58.0f64).exp2()).abs() < 1e-9, "{half}");
        assert_eq!(natural_transfer_size_kib(&curve, 1.0), Some(32.0));
        assert_eq!(natural_transfer_size_kib(&curve, 0.001), Some(4.0));
        assert_eq!(natural_transfer_size_kib(&[], 0.5), None);
    }

    #[test]
    fn bandwidth_grows_with_read_size_on_a_drive() {
        let model = Arc::new(DiskModel::builtin("nearline7200").unwrap());
        let curve = transfer_curve(&model, 1);
        assert_eq!(curve.len(), DOUBLINGS as usize + 1);
        assert!(curve.windows(2).all(|pair| pair[1].mb_s > pair[0].mb_s * 0.95), "{curve:?}");
        assert!(curve.last().unwrap().mb_s > 20.0 * curve[0].mb_s, "seeks dominate small reads: {curve:?}");
        let half = natural_transfer_size_kib(&curve, 0.5).unwrap();
        let most = natural_transfer_size_kib(&curve, 0.9).unwrap();
        assert!(half > 64.0 && most > 2.0 * half, "{half} {most}");
    }
}
