//! WOLF (Wang and Hu's reordering write buffer on LFS): the `lfs` layout, with
//! the segment buffer's blocks sorted by update frequency into two log
//! streams — hot and cold — each filling its own segments, written together
//! by the same destage. Segments then hold blocks of like lifetimes: hot
//! segments empty themselves, cold ones stay full, and the cleaner finds
//! emptier victims than in a mixed log.
//!
//! State: an update count per block written since open (in memory). A block
//! is hot when it has been written more often than the mean over the blocks
//! counted (`count × counted > total`); blocks the cleaner moves go to the
//! cold stream (they survived a segment's lifetime).

use std::collections::HashMap;

use super::{DestageRule, Layout, LayoutParameters, LayoutStrategy, Placement, WriteContext};
use crate::map::Location;

/// The stream of hot blocks.
pub const HOT_STREAM: usize = 0;
/// The stream of cold blocks (and of the blocks cleaning moves).
pub const COLD_STREAM: usize = 1;

/// The WOLF layout.
#[derive(Debug, Clone, Default)]
pub struct Wolf {
    /// Writes per `(extent, logical block)` since open.
    updates: HashMap<(u64, u64), u64>,
    /// Their sum.
    total_updates: u64,
}

impl Wolf {
    fn note_update(&mut self, extent_id: u64, logical_block: u64) {
        *self.updates.entry((extent_id, logical_block)).or_default() += 1;
        self.total_updates += 1;
    }
}

impl LayoutStrategy for Wolf {
    fn kind(&self) -> Layout {
        Layout::Wolf
    }

    fn place_write(&self, parameters: &LayoutParameters, write: &WriteContext) -> Placement {
        super::lfs::Lfs.place_write(parameters, write)
    }

    fn destage_rule(&self) -> DestageRule {
        DestageRule::LogHead
    }

    fn writes_segments(&self) -> bool {
        true
    }

    fn log_stream(&self, extent_id: u64, logical_block: u64) -> usize {
        let count = self.updates.get(&(extent_id, logical_block)).copied().unwrap_or(0);
        let counted = self.updates.len() as u64;
        if count.saturating_mul(counted) > self.total_updates {
            HOT_STREAM
        } else {
            COLD_STREAM
        }
    }

    fn cleaning_stream(&self) -> usize {
        COLD_STREAM
    }

    fn staged(&mut self, extent_id: u64, logical_block: u64, _previous: Option<Location>) {
        self.note_update(extent_id, logical_block);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layouts::test_support::{parameters, write};

    #[test]
    fn blocks_updated_more_often_than_the_mean_are_hot() {
        let mut wolf = Wolf::default();
        for _ in 0..5 {
            wolf.staged(1, 7, None);
        }
        for block in 0..4 {
            wolf.staged(1, block, None);
        }
        // 9 updates over 5 blocks: the mean is 1.8.
        assert_eq!(wolf.log_stream(1, 7), HOT_STREAM);
        assert_eq!(wolf.log_stream(1, 0), COLD_STREAM);
        assert_eq!(wolf.log_stream(2, 0), COLD_STREAM, "never written");
        assert_eq!(wolf.cleaning_stream(), COLD_STREAM);
    }

    #[test]
    fn places_writes_as_lfs_does() {
        let wolf = Wolf::default();
        assert_eq!(wolf.place_write(&parameters(), &write(1, true)), Placement::Stage);
        assert_eq!(wolf.place_write(&parameters(), &write(42, false)), Placement::LogHead);
        assert_eq!(wolf.destage_rule(), DestageRule::LogHead);
    }
}
