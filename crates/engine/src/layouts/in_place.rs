//! The in-place layout: a frame array. Each block lives at the place of its
//! first write. Overwrites are held in the flash log (the array's NV write
//! cache) and written back in place, block by block in ascending LBN per
//! extent, at destage ([`super::DestageRule::FrameHomes`]). Without a cache
//! (staging threshold 0) overwrites go in place.
//!
//! State: the frame home of each staged block that overwrote a data-device
//! block ([`FrameHomes`]) — a placement hint, kept in memory only and rebuilt
//! as blocks are staged (after a restart, destage falls back to the logical
//! neighbour).
//! A frame a snapshot holds is copied out when its overwrite arrives
//! ([`LayoutStrategy::copies_out`]; docs/layouts.md, "Copy-out of snapshot
//! blocks"), so destage finds it free for its block.

use super::frame_homes::FrameHomes;
use super::{DestageRule, Layout, LayoutParameters, LayoutStrategy, Placement, WriteContext};
use crate::map::Location;

/// The in-place layout.
#[derive(Debug, Clone, Default)]
pub struct InPlace {
    /// Where the staged overwrites go back to.
    frame_homes: FrameHomes,
}

impl LayoutStrategy for InPlace {
    fn kind(&self) -> Layout {
        Layout::InPlace
    }

    fn place_write(&self, parameters: &LayoutParameters, write: &WriteContext) -> Placement {
        let cached = parameters.staging_threshold_blocks > 0;
        let staged = match (write.overwrites_data_blocks, cached) {
            // The cache holds every overwrite, so a crash never tears a block
            // in place.
            (true, true) => true,
            (true, false) => return Placement::InPlace,
            (false, _) => write.is_small(parameters),
        };
        if !staged {
            Placement::Ranges
        } else if write.block_count > write.staging_capacity_blocks {
            // Larger than the cache: through it in pieces, never in place.
            Placement::StageInPieces
        } else {
            Placement::Stage
        }
    }

    fn destage_rule(&self) -> DestageRule {
        DestageRule::FrameHomes
    }

    fn frame_home(&self, extent_id: u64, logical_block: u64) -> Option<u64> {
        self.frame_homes.home(extent_id, logical_block)
    }

    fn copies_out(&self) -> bool {
        true
    }

    fn is_frame_home(&self, block: u64) -> bool {
        self.frame_homes.is_home(block)
    }

    fn staged(&mut self, extent_id: u64, logical_block: u64, previous: Option<Location>) {
        self.frame_homes.staged(extent_id, logical_block, previous);
    }

    fn destaged(&mut self, extent_id: u64, logical_block: u64, block_count: u64) {
        self.frame_homes.destaged(extent_id, logical_block, block_count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layouts::test_support::{parameters, write};

    #[test]
    fn caches_every_overwrite_and_writes_in_place_without_a_cache() {
        let in_place = InPlace::default();
        let cached = parameters();
        assert_eq!(in_place.place_write(&cached, &write(100, true)), Placement::Stage);
        assert_eq!(in_place.place_write(&cached, &write(100, false)), Placement::Ranges);
        assert_eq!(in_place.place_write(&cached, &write(1, false)), Placement::Stage);
        let uncached = LayoutParameters { staging_threshold_blocks: 0, ..cached };
        assert_eq!(in_place.place_write(&uncached, &write(1, true)), Placement::InPlace);
        assert_eq!(in_place.place_write(&uncached, &write(1, false)), Placement::Ranges);
    }

    #[test]
    fn an_overwrite_larger_than_the_cache_passes_through_it_in_pieces() {
        let in_place = InPlace::default();
        let oversized = WriteContext { staging_capacity_blocks: 99, ..write(100, true) };
        assert_eq!(in_place.place_write(&parameters(), &oversized), Placement::StageInPieces);
        let fresh = WriteContext { staging_capacity_blocks: 99, ..write(100, false) };
        assert_eq!(in_place.place_write(&parameters(), &fresh), Placement::Ranges);
        let small = WriteContext { staging_capacity_blocks: 9, ..write(10, false) };
        assert_eq!(in_place.place_write(&parameters(), &small), Placement::StageInPieces);
    }

    #[test]
    fn remembers_the_frame_home_of_a_staged_overwrite_until_destage() {
        let mut in_place = InPlace::default();
        in_place.staged(1, 10, Some(Location::Data(500)));
        in_place.staged(1, 11, Some(Location::Flash(3)));
        in_place.staged(1, 12, None);
        assert_eq!(in_place.frame_home(1, 10), Some(500));
        assert!(in_place.is_frame_home(500));
        assert_eq!(in_place.frame_home(1, 11), None);
        assert_eq!(in_place.frame_home(2, 10), None);
        in_place.staged(1, 10, Some(Location::Flash(9)));
        assert_eq!(in_place.frame_home(1, 10), Some(500), "a restaged block keeps its frame");
        in_place.destaged(1, 9, 3);
        assert_eq!(in_place.frame_home(1, 10), None);
        assert!(!in_place.is_frame_home(500));
        assert_eq!(in_place.destage_rule(), DestageRule::FrameHomes);
    }
}
