//! The rotational arithmetic of one track's part of a request: how long the
//! head waits for the data and how long it then transfers, with or without
//! zero-latency access (DiskSim's `Immediate buffer read` / `Immediate buffer
//! write`, also called read-on-arrival and write-on-arrival).
//!
//! Everything here is in sectors of the track (one revolution is
//! `sectors_per_track` sectors) so that it can be checked by hand; callers
//! multiply by the sector time.
//!
//! Without zero latency the head waits until the first requested sector comes
//! under it and then transfers the requested sectors in order. With zero
//! latency, a head that lands inside the requested sectors starts at the next
//! sector boundary, transfers to the end of the requested sectors, and picks up
//! the skipped head of the range when it comes around: the track's part then
//! takes exactly one revolution from that boundary, never a wait for the first
//! sector followed by a full pass.

/// The fractional part of `value`, in `[0, 1)`, for finite values of magnitude
/// below 2^62 (angles in revolutions and times in revolutions qualify).
///
/// Equal to `value.rem_euclid(1.0)` but without a call to `fmod`: the
/// subtraction of the integer part is exact in floating point.
pub(crate) fn fraction(value: f64) -> f64 {
    let fractional = value - (value as i64) as f64;
    if fractional < 0.0 {
        fractional + 1.0
    } else {
        fractional
    }
}

/// How one track's part of a request passes under the head.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TrackPass {
    /// Rotation from the head's arrival on the track to the first transferred sector.
    pub wait_sectors: f64,
    /// From the first transferred sector to the last one's end.
    pub transfer_sectors: f64,
    /// Requested sectors at the head of the range that are transferred last,
    /// after the head comes around (0 unless zero latency applied).
    pub wrapped_sectors: u64,
    /// The requested sectors on the track.
    pub requested_sectors: u64,
}

impl TrackPass {
    /// Wait plus transfer.
    pub fn total_sectors(&self) -> f64 {
        self.wait_sectors + self.transfer_sectors
    }

    /// Sectors that pass fully under the head, outside the requested range,
    /// before the first requested sector is transferred in order: the wait
    /// without zero latency; with a wrap, every other sector of the track.
    pub fn passed_before_first_sectors(&self, sectors_per_track: u32) -> u64 {
        if self.wrapped_sectors > 0 {
            u64::from(sectors_per_track) - self.requested_sectors
        } else {
            self.wait_sectors.floor() as u64
        }
    }
}

/// Times one track's part of a request: `count` consecutive sectors (at most
/// `sectors_per_track`), the head `offset_sectors` past the start of the first
/// of them (in `[0, sectors_per_track)`) when it arrives on the track.
pub(crate) fn track_pass(offset_sectors: f64, count: u64, sectors_per_track: u32, zero_latency: bool) -> TrackPass {
    let spt = f64::from(sectors_per_track);
    assert!(count >= 1 && count <= u64::from(sectors_per_track), "{count} sectors on a track of {sectors_per_track}");
    assert!((0.0..spt).contains(&offset_sectors), "offset {offset_sectors} outside the track");
    if zero_latency {
        // The first whole sector the head can transfer, counted from the range's start.
        let boundary = offset_sectors.ceil();
        if boundary >= 1.0 && boundary < count as f64 {
            return TrackPass {
                wait_sectors: boundary - offset_sectors,
                transfer_sectors: spt,
                wrapped_sectors: boundary as u64,
                requested_sectors: count,
            };
        }
    }
    let wait_sectors = if offset_sectors == 0.0 { 0.0 } else { spt - offset_sectors };
    TrackPass { wait_sectors, transfer_sectors: count as f64, wrapped_sectors: 0, requested_sectors: count }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPT: u32 = 100;

    #[test]
    fn fraction_matches_rem_euclid() {
        for value in [0.0, 0.25, 1.0, 3.75, -0.25, -2.5, 1_234.000_1, -0.0, 1.0e15 + 0.5] {
            assert_eq!(fraction(value), value.rem_euclid(1.0), "{value}");
        }
    }

    #[test]
    fn without_zero_latency_the_head_waits_for_the_first_sector() {
        // Landing 3.5 sectors into an 8-sector range: wait for the rest of the
        // revolution, then transfer the 8 sectors.
        let pass = track_pass(3.5, 8, SPT, false);
        assert_eq!(
            pass,
            TrackPass { wait_sectors: 96.5, transfer_sectors: 8.0, wrapped_sectors: 0, requested_sectors: 8 }
        );
        assert_eq!(track_pass(0.0, 8, SPT, false).total_sectors(), 8.0);
        assert_eq!(track_pass(90.0, 8, SPT, false).total_sectors(), 18.0);
    }

    #[test]
    fn landing_mid_request_costs_one_revolution_from_the_next_boundary() {
        let pass = track_pass(3.5, 8, SPT, true);
        assert_eq!(pass.wait_sectors, 0.5);
        assert_eq!(pass.transfer_sectors, f64::from(SPT));
        assert_eq!(pass.wrapped_sectors, 4);
        // Never a wait to the first sector and then a full pass.
        assert!(pass.total_sectors() <= f64::from(SPT) + 1.0);
        assert!(pass.total_sectors() < track_pass(3.5, 8, SPT, false).total_sectors());
        // On a sector boundary it is exactly one revolution.
        assert_eq!(track_pass(5.0, 8, SPT, true).total_sectors(), f64::from(SPT));
    }

    #[test]
    fn zero_latency_saves_the_sectors_after_the_landing_point() {
        // A whole-track request: wherever the head lands it takes one revolution
        // (plus the part of a sector it landed in).
        for tenths in 0..(SPT * 10) {
            let offset = f64::from(tenths) / 10.0;
            let pass = track_pass(offset, u64::from(SPT), SPT, true);
            assert!(pass.total_sectors() <= f64::from(SPT) + 1.0 - 1e-9 || offset == 0.0, "{offset}: {pass:?}");
            let saving = track_pass(offset, u64::from(SPT), SPT, false).total_sectors() - pass.total_sectors();
            assert!(saving >= 0.0, "{offset}");
        }
    }

    #[test]
    fn landing_outside_the_range_or_in_its_last_sector_waits_as_usual() {
        // Outside the range (after its end): the ordinary wait.
        assert_eq!(track_pass(50.0, 8, SPT, true), track_pass(50.0, 8, SPT, false));
        // Inside the last sector: nothing whole is left after the boundary.
        assert_eq!(track_pass(7.5, 8, SPT, true), track_pass(7.5, 8, SPT, false));
        // Exactly at the first sector: no wait, no wrap.
        assert_eq!(track_pass(0.0, 8, SPT, true).total_sectors(), 8.0);
        // Inside the first sector: the rest of the range, then the first sector.
        let pass = track_pass(0.25, 8, SPT, true);
        assert_eq!((pass.wait_sectors, pass.wrapped_sectors), (0.75, 1));
    }

    #[test]
    fn sectors_passed_before_the_first_count_only_whole_sectors() {
        assert_eq!(track_pass(97.5, 8, SPT, false).passed_before_first_sectors(SPT), 2);
        assert_eq!(track_pass(0.0, 8, SPT, false).passed_before_first_sectors(SPT), 0);
        // A wrapped pass sweeps every sector outside the range.
        assert_eq!(track_pass(3.5, 8, SPT, true).passed_before_first_sectors(SPT), 92);
    }
}
