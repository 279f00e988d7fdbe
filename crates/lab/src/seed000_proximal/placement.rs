//! Where a strand's requests go on the disk, and in what order they are issued.
//!
//! A strand is `K` requests of one block (4 KiB) each, handed to the disk together.
//! Its placement is one of the paper's access modes: within `span` LBNs of a base
//! chosen uniformly over the disk (track-approximate with a 1024-LBN span, proximal
//! with 100,000), semi-sequential (each request on the next track, positioned to be
//! reached just after the track switch), or fully random over the disk.

use std::sync::Arc;

use proxima_disk::{DiskModel, DiskOp, DiskRequest, HardDisk, Nanos, PhysicalSector, TrackExtent};
use rand::seq::SliceRandom;
use rand::Rng;

use crate::seed000_proximal::strands::run_batch;
use crate::LabError;

/// Bytes in one block: the unit of every strand request.
pub const BLOCK_SIZE_BYTES: u32 = 4096;

/// The paper's track-approximate span: about one track, rounded down to a power of two.
pub const TRACK_APPROXIMATE_SPAN_LBN: u64 = 1024;

/// The paper's proximal span.
pub const PROXIMAL_SPAN_LBN: u64 = 100_000;

/// How a strand's requests are placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// Uniformly over distinct block-aligned positions within `span_lbn` LBNs of a
    /// base chosen uniformly over the disk.
    Span {
        /// Width of the window, in LBNs (sectors).
        span_lbn: u64,
    },
    /// Each request on the track following the previous one's in LBN order, at the
    /// angle the heads reach right after moving there: Section 2's semi-sequential
    /// access, the best case after sequential streaming.
    SemiSequential,
    /// Uniformly over distinct block-aligned positions on the whole disk.
    Random,
}

impl Placement {
    /// A short name for tables and plots.
    pub fn label(&self) -> String {
        match self {
            Placement::Span { span_lbn: TRACK_APPROXIMATE_SPAN_LBN } => "track-approximate".to_string(),
            Placement::Span { span_lbn: PROXIMAL_SPAN_LBN } => "proximal".to_string(),
            Placement::Span { span_lbn } => format!("span {span_lbn}"),
            Placement::SemiSequential => "semi-sequential".to_string(),
            Placement::Random => "random".to_string(),
        }
    }
}

/// The order in which a strand's requests are handed to the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IssueOrder {
    /// Ascending LBN, as the paper found real drives need.
    Ascending,
    /// A uniformly random permutation.
    Random,
}

impl IssueOrder {
    /// `ascending` or `random`.
    pub fn label(&self) -> &'static str {
        match self {
            IssueOrder::Ascending => "ascending",
            IssueOrder::Random => "random",
        }
    }
}

/// Sectors in one block on `model`.
pub fn block_sectors(model: &DiskModel) -> u32 {
    (BLOCK_SIZE_BYTES / model.sector_size_bytes()).max(1)
}

/// Draws the starting LBNs of a strand of `request_count` blocks, in issue order.
///
/// Errors when the placement cannot hold that many distinct blocks on this disk.
pub fn place_strand(
    model: &Arc<DiskModel>,
    placement: Placement,
    request_count: u32,
    op: DiskOp,
    order: IssueOrder,
    random: &mut impl Rng,
) -> Result<Vec<u64>, LabError> {
    let block = u64::from(block_sectors(model));
    let mut lbns = match placement {
        Placement::Span { span_lbn } => {
            let slot_count = span_lbn.min(model.sector_count()) / block;
            let base_slot_limit = model.sector_count() / block - slot_count + 1;
            let base = random.gen_range(0..base_slot_limit) * block;
            distinct_slots(slot_count, request_count, "span", random)?
                .into_iter()
                .map(|slot| base + slot * block)
                .collect()
        }
        Placement::Random => distinct_slots(model.sector_count() / block, request_count, "strand", random)?
            .into_iter()
            .map(|slot| slot * block)
            .collect(),
        Placement::SemiSequential => semi_sequential_strand(model, request_count, op, random)?,
    };
    match order {
        IssueOrder::Ascending => lbns.sort_unstable(),
        IssueOrder::Random => lbns.shuffle(random),
    }
    Ok(lbns)
}

/// `count` distinct values in `0..slot_count`, uniformly.
fn distinct_slots(
    slot_count: u64,
    count: u32,
    parameter: &'static str,
    random: &mut impl Rng,
) -> Result<Vec<u64>, LabError> {
    if slot_count < u64::from(count) {
        return Err(LabError::InvalidParameter {
            parameter,
            message: format!("{count} distinct 4 KiB requests do not fit in {slot_count} block positions"),
        });
    }
    let mut chosen: Vec<u64> = Vec::with_capacity(count as usize);
    while chosen.len() < count as usize {
        let slot = random.gen_range(0..slot_count);
        if !chosen.contains(&slot) {
            chosen.push(slot);
        }
    }
    Ok(chosen)
}

/// The semi-sequential strand: the first request on a random track; each next one
/// on the track that follows the previous request's in LBN order, starting at the
/// first sector the heads can reach after finishing the previous request and moving
/// tracks (seek or head switch, with write settle for writes), per the model's
/// geometry and timing queries (see [`next_semi_sequential_lbn`]).
fn semi_sequential_strand(
    model: &Arc<DiskModel>,
    request_count: u32,
    op: DiskOp,
    random: &mut impl Rng,
) -> Result<Vec<u64>, LabError> {
    let block = u64::from(block_sectors(model));
    // Leave room for the strand's tracks at the end of the disk (a generous bound:
    // each request takes at most two tracks' worth of LBNs).
    let room = u64::from(request_count) * 4 * largest_track_sectors_estimate(model);
    if model.sector_count() <= room + block {
        return Err(LabError::InvalidParameter {
            parameter: "strand",
            message: format!("a semi-sequential strand of {request_count} does not fit on this disk"),
        });
    }
    let mut lbns = Vec::with_capacity(request_count as usize);
    let mut lbn = random.gen_range(0..(model.sector_count() - room) / block) * block;
    lbns.push(lbn);
    for _ in 1..request_count {
        lbn = next_semi_sequential_lbn(model, lbn, block, op).ok_or_else(|| LabError::InvalidParameter {
            parameter: "pattern",
            message: format!("no semi-sequential successor for LBN {lbn} on this disk's layout"),
        })?;
        lbns.push(lbn);
    }
    Ok(lbns)
}

/// A probe counts as "in time" when the second request completes within this many
/// sectors' rotation of the ideal (gap plus its own transfer); a lost revolution
/// exceeds it by far.
const SEMI_SEQUENTIAL_TOLERANCE_SECTORS: u32 = 2;

/// The block that the heads reach first on the track after `lbn`'s, once they have
/// read or written `[lbn, lbn + block)` and moved tracks.
///
/// The search starts at the angle the geometry predicts (the previous block's end
/// plus the seek or head switch, with write settle, from the model's timing
/// queries) and walks forward until a probe on a scratch drive confirms that the
/// second request is serviced without losing a revolution: the model's command
/// overheads, bus transfer and zone-specific skews are thereby included, as a
/// drive-characterisation tool would measure them on a real drive.
fn next_semi_sequential_lbn(model: &Arc<DiskModel>, lbn: u64, block: u64, op: DiskOp) -> Option<u64> {
    let last = lbn + block - 1;
    let here = model.lbn_to_physical(last)?;
    let here_track = model.track_of(last)?;
    // The heads leave the previous block at the end of its last sector; sectors are
    // numbered by angle from the index mark.
    let leave_angle = f64::from(here.sector + 1) / f64::from(here_track.sectors_per_track);
    let mut track = here_track;
    // Usually the very next track; a track too short to hold an aligned block (the
    // layout has a few) is passed over.
    for _ in 0..SEMI_SEQUENTIAL_TRACKS_TRIED {
        track = model.track_of(track.first_lbn + u64::from(track.sector_count))?;
        if let Some(found) = first_block_in_time(model, lbn, here.cylinder, leave_angle, track, block, op) {
            return Some(found);
        }
    }
    None
}

/// How many tracks past the previous block's are searched for a successor.
const SEMI_SEQUENTIAL_TRACKS_TRIED: usize = 4;

/// On `track`, the first block-aligned block at or after the angle the geometry
/// predicts that the drive reaches without losing a revolution after servicing
/// `previous_lbn`; failing that, the one it reaches soonest.
fn first_block_in_time(
    model: &Arc<DiskModel>,
    previous_lbn: u64,
    previous_cylinder: u32,
    leave_angle: f64,
    track: TrackExtent,
    block: u64,
    op: DiskOp,
) -> Option<u64> {
    let move_ns = if track.cylinder != previous_cylinder {
        model.seek_ns(previous_cylinder.abs_diff(track.cylinder), op)
    } else {
        let settle = if op == DiskOp::Write { model.write_settle_ns() } else { 0 };
        model.head_switch_ns() + settle
    };
    let spt = track.sectors_per_track;
    let revolution_ns = model.revolution_ns() as f64;
    let move_sectors = (move_ns as f64 / revolution_ns * f64::from(spt)).ceil() as u32;
    let leave_sector = (leave_angle * f64::from(spt)).ceil() as u32;
    let track_end = track.first_lbn + u64::from(track.sector_count);
    let mut soonest: Option<(Nanos, u64)> = None;
    for gap in move_sectors..move_sectors + spt {
        let sector = (leave_sector + gap) % spt;
        let physical = PhysicalSector { cylinder: track.cylinder, surface: track.surface, sector };
        let Some(candidate) = model.physical_to_lbn(physical).filter(|&candidate| {
            candidate >= track.first_lbn && candidate + block <= track_end && candidate % block == 0
        }) else {
            continue;
        };
        let delay_ns = successor_delay_ns(model, previous_lbn, candidate, block as u32, op);
        let ideal_sectors = gap + block as u32 + SEMI_SEQUENTIAL_TOLERANCE_SECTORS;
        if delay_ns as f64 <= f64::from(ideal_sectors) / f64::from(spt) * revolution_ns {
            return Some(candidate);
        }
        if soonest.is_none_or(|(best_ns, _)| delay_ns < best_ns) {
            soonest = Some((delay_ns, candidate));
        }
    }
    soonest.map(|(_, candidate)| candidate)
}

/// Time between the completions of `first` and `second` issued back to back at
/// queue depth 1 to a scratch drive.
fn successor_delay_ns(model: &Arc<DiskModel>, first: u64, second: u64, block: u32, op: DiskOp) -> Nanos {
    let mut disk = HardDisk::new(Arc::clone(model), 0);
    let requests = [
        DiskRequest { id: 0, op, lbn: first, sector_count: block },
        DiskRequest { id: 1, op, lbn: second, sector_count: block },
    ];
    let completions = run_batch(&mut disk, 0, &requests, 1, None).completions;
    completions[1].completion_ns - completions[0].completion_ns
}

/// The sectors of the disk's first track: the outer zone has the most, so this
/// bounds every track's LBN count.
fn largest_track_sectors_estimate(model: &DiskModel) -> u64 {
    model.track_of(0).map_or(4096, |track| u64::from(track.sectors_per_track))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn cheetah() -> Arc<DiskModel> {
        Arc::new(DiskModel::builtin("cheetah15k5").expect("the built-in Cheetah 15K.5 loads"))
    }

    #[test]
    fn span_placement_stays_within_the_span_and_is_distinct_and_aligned() {
        let model = cheetah();
        let mut random = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..200 {
            let lbns = place_strand(
                &model,
                Placement::Span { span_lbn: 1024 },
                16,
                DiskOp::Read,
                IssueOrder::Ascending,
                &mut random,
            )
            .unwrap();
            assert_eq!(lbns.len(), 16);
            assert!(lbns.windows(2).all(|pair| pair[0] < pair[1]), "ascending and distinct: {lbns:?}");
            assert!(lbns.iter().all(|lbn| lbn % 8 == 0));
            assert!(lbns[15] + 8 - lbns[0] <= 1024, "within the span: {lbns:?}");
            assert!(lbns[15] + 8 <= model.sector_count());
        }
    }

    #[test]
    fn a_span_too_small_for_the_strand_is_an_error() {
        let model = cheetah();
        let mut random = ChaCha8Rng::seed_from_u64(7);
        let result =
            place_strand(&model, Placement::Span { span_lbn: 64 }, 9, DiskOp::Read, IssueOrder::Ascending, &mut random);
        assert!(matches!(result, Err(LabError::InvalidParameter { parameter: "span", .. })));
    }

    #[test]
    fn random_issue_order_is_a_permutation_of_the_placement() {
        let model = cheetah();
        let placement = Placement::Span { span_lbn: 100_000 };
        let ascending =
            place_strand(&model, placement, 8, DiskOp::Read, IssueOrder::Ascending, &mut ChaCha8Rng::seed_from_u64(3))
                .unwrap();
        let mut shuffled =
            place_strand(&model, placement, 8, DiskOp::Read, IssueOrder::Random, &mut ChaCha8Rng::seed_from_u64(3))
                .unwrap();
        shuffled.sort_unstable();
        assert_eq!(ascending, shuffled);
    }

    #[test]
    fn semi_sequential_requests_lie_on_consecutive_tracks() {
        let model = cheetah();
        let mut random = ChaCha8Rng::seed_from_u64(11);
        for _ in 0..50 {
            let lbns =
                place_strand(&model, Placement::SemiSequential, 8, DiskOp::Read, IssueOrder::Ascending, &mut random)
                    .unwrap();
            for pair in lbns.windows(2) {
                let first = model.track_of(pair[0] + 7).unwrap();
                let second = model.track_of(pair[1]).unwrap();
                assert_eq!(second.first_lbn, first.first_lbn + u64::from(first.sector_count), "{pair:?}");
                assert_eq!(
                    model.track_of(pair[1] + 7).unwrap().first_lbn,
                    second.first_lbn,
                    "a block within one track"
                );
            }
        }
    }
}
