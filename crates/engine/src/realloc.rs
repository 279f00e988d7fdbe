//! Reallocate-on-read: the decision, apart from the I/O that executes it.
//!
//! A copy-on-write layout scatters a file as random updates land wherever
//! their batch was written. When a read finds the span it just read scattered
//! over the data device, the blocks it read are rewritten as one contiguous
//! run, right after the block that logically precedes them, from the bytes
//! the read already holds: no extra read, and only the parts clients use are
//! fixed (docs/read-realloc.md).
//!
//! The decision is pure: from the span's segments (as the extent map gives
//! them), the gaps the volume's reads take through and which data blocks
//! snapshots hold, [`pieces_to_reallocate`] returns the logical pieces to
//! rewrite. The volume executes it (`Volume::reallocate_after_read`): it
//! allocates a contiguous run per piece — or, where reads take gaps through
//! and no run is free, blocks that one read takes in one request — or leaves
//! the piece alone, writes it as direct writes, and logs them like any —
//! so a crash mid-reallocation leaves each block at its old place or its new
//! one, both holding the same bytes.
//!
//! Invariants: a piece covers only blocks mapped on the data device (staged
//! blocks are placed by destage, holes have nothing to move); a block a
//! snapshot holds is in no piece unless the settings allow it (moving it would
//! keep both versions); pieces are disjoint and in logical order.

use serde::Serialize;

use crate::map::{Location, Segment};
use crate::read::{data_reads, data_spans, ReadGaps};

/// When reads reallocate what they read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ReadRealloc {
    /// Whether reads reallocate at all.
    pub enabled: bool,
    /// A read's span is rewritten when its data-device blocks lie in at least
    /// this many physical runs. The rewrite costs about one positioning plus
    /// its transfer and saves `runs - 1` positionings on every later read of
    /// the span; from 3 runs on it pays for itself at the first reread even if
    /// the rewrite costs two positionings, and a span rewritten in two halves
    /// is never moved again for being in two runs.
    pub runs_min: u64,
    /// Also move blocks a snapshot holds. Off by default: the snapshot keeps
    /// the old block, so moving it doubles the space the block takes.
    pub snapshot_blocks: bool,
}

impl ReadRealloc {
    /// Reads never reallocate.
    pub const OFF: ReadRealloc = ReadRealloc { enabled: false, runs_min: 3, snapshot_blocks: false };
    /// Reads reallocate spans in 3 or more runs, snapshot blocks excepted.
    pub const ON: ReadRealloc = ReadRealloc { enabled: true, ..ReadRealloc::OFF };
}

impl Default for ReadRealloc {
    fn default() -> Self {
        ReadRealloc::OFF
    }
}

/// A run of logically consecutive blocks to rewrite contiguously.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReallocPiece {
    /// The first logical block.
    pub logical_block: u64,
    /// Blocks in the piece.
    pub block_count: u64,
}

/// Physical runs of the data-device blocks of `segments` (in logical order):
/// a run continues while the next mapped block follows the last physically.
pub fn data_run_count(segments: &[Segment]) -> u64 {
    let mut runs = 0;
    let mut next_block = None;
    for segment in segments {
        if let Some(Location::Data(block)) = segment.location {
            if next_block != Some(block) {
                runs += 1;
            }
            next_block = Some(block + segment.block_count);
        }
    }
    runs
}

/// The data-device requests a read of `segments` (in logical order) takes:
/// one per physical run, or, where the volume reads through gaps (`gaps`),
/// the requests the read path makes of them ([`data_reads`]).
pub(crate) fn read_request_count(segments: &[Segment], gaps: ReadGaps) -> u64 {
    if gaps.gap_blocks == 0 {
        return data_run_count(segments);
    }
    data_reads(&mut data_spans(segments), gaps).len() as u64
}

/// The pieces of the span `segments` (in logical order, as one read covers
/// them) to rewrite under `settings`: none unless reading the span takes at
/// least `runs_min` data-device requests ([`read_request_count`] with the
/// volume's `gaps`); else its data-device blocks, less those
/// `held_by_snapshot` unless the settings allow them, in maximal logically
/// consecutive pieces.
pub(crate) fn pieces_to_reallocate(
    segments: &[Segment],
    settings: &ReadRealloc,
    gaps: ReadGaps,
    held_by_snapshot: impl Fn(u64) -> bool,
) -> Vec<ReallocPiece> {
    if !settings.enabled || read_request_count(segments, gaps) < settings.runs_min {
        return Vec::new();
    }
    let mut pieces: Vec<ReallocPiece> = Vec::new();
    for segment in segments {
        let Some(Location::Data(first)) = segment.location else { continue };
        for index in 0..segment.block_count {
            if !settings.snapshot_blocks && held_by_snapshot(first + index) {
                continue;
            }
            let logical = segment.logical_block + index;
            match pieces.last_mut() {
                Some(piece) if piece.logical_block + piece.block_count == logical => piece.block_count += 1,
                _ => pieces.push(ReallocPiece { logical_block: logical, block_count: 1 }),
            }
        }
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(logical_block: u64, block_count: u64, block: u64) -> Segment {
        Segment { logical_block, block_count, location: Some(Location::Data(block)) }
    }

    fn other(logical_block: u64, block_count: u64, location: Option<Location>) -> Segment {
        Segment { logical_block, block_count, location }
    }

    const NO_GAPS: ReadGaps = ReadGaps { gap_blocks: 0, unit_blocks: 64 };

    #[test]
    fn where_reads_take_gaps_through_the_requests_count() {
        // Three runs, the last two 3 blocks apart in one 64-block unit.
        let scattered = [data(0, 4, 100), data(4, 4, 500), data(8, 4, 507)];
        assert_eq!(read_request_count(&scattered, NO_GAPS), 3);
        let gaps = ReadGaps { gap_blocks: 4, unit_blocks: 64 };
        assert_eq!(read_request_count(&scattered, gaps), 2);
        assert!(pieces_to_reallocate(&scattered, &ReadRealloc::ON, gaps, |_| false).is_empty());
        assert_eq!(pieces_to_reallocate(&scattered, &ReadRealloc::ON, NO_GAPS, |_| false).len(), 1);
        // A span gathered into one unit with short gaps is one request: never moved again.
        let gathered = [data(0, 1, 640), data(1, 2, 643), data(3, 1, 647), data(4, 4, 650)];
        assert_eq!(read_request_count(&gathered, gaps), 1);
        assert!(pieces_to_reallocate(&gathered, &ReadRealloc::ON, gaps, |_| false).is_empty());
        assert_eq!(read_request_count(&gathered, NO_GAPS), 4);
    }

    #[test]
    fn runs_are_counted_on_the_data_device_only() {
        assert_eq!(data_run_count(&[data(0, 4, 100), data(4, 4, 104)]), 1);
        assert_eq!(data_run_count(&[data(0, 4, 100), data(4, 4, 200), data(8, 1, 204)]), 2);
        let staged = other(4, 2, Some(Location::Flash(7)));
        assert_eq!(data_run_count(&[data(0, 4, 100), staged, data(6, 2, 300)]), 2);
        assert_eq!(data_run_count(&[other(0, 8, None)]), 0);
    }

    #[test]
    fn a_span_in_fewer_runs_than_the_threshold_stays() {
        let two_runs = [data(0, 8, 100), data(8, 8, 500)];
        assert!(pieces_to_reallocate(&two_runs, &ReadRealloc::ON, NO_GAPS, |_| false).is_empty());
        let three_runs = [data(0, 4, 100), data(4, 4, 500), data(8, 8, 900)];
        assert!(pieces_to_reallocate(&three_runs, &ReadRealloc::OFF, NO_GAPS, |_| false).is_empty());
        let pieces = pieces_to_reallocate(&three_runs, &ReadRealloc::ON, NO_GAPS, |_| false);
        assert_eq!(pieces, vec![ReallocPiece { logical_block: 0, block_count: 16 }]);
    }

    #[test]
    fn holes_staged_blocks_and_snapshot_blocks_split_the_pieces() {
        let segments = [
            data(0, 2, 100),
            other(2, 2, None),
            data(4, 2, 500),
            other(6, 1, Some(Location::Flash(3))),
            data(7, 3, 900),
        ];
        let held = |block: u64| block == 901;
        let pieces = pieces_to_reallocate(&segments, &ReadRealloc::ON, NO_GAPS, held);
        let expected = [(0, 2), (4, 2), (7, 1), (9, 1)]
            .map(|(logical_block, block_count)| ReallocPiece { logical_block, block_count });
        assert_eq!(pieces, expected);
        let allowed = ReadRealloc { snapshot_blocks: true, ..ReadRealloc::ON };
        let pieces = pieces_to_reallocate(&segments, &allowed, NO_GAPS, held);
        assert_eq!(pieces.last(), Some(&ReallocPiece { logical_block: 7, block_count: 3 }));
    }
}
