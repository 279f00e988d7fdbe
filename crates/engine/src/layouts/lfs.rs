//! The log-structured layout (`lfs`): every write is buffered in the flash
//! staging log (the NV segment buffer) and destage writes the buffered blocks
//! at the log head, filling clean segments in ascending block order, so the
//! data device sees whole-segment writes only. Live blocks of partly dead
//! segments are moved by the segment cleaner (`cleaning.rs`, `cleaner.rs`).
//! No private state: the log head and the usage table are the volume's
//! (`segments.rs`), since the cleaner writes there too.

use super::{DestageRule, Layout, LayoutParameters, LayoutStrategy, Placement, WriteContext};

/// The log-structured layout.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lfs;

impl LayoutStrategy for Lfs {
    fn kind(&self) -> Layout {
        Layout::Lfs
    }

    fn place_write(&self, _parameters: &LayoutParameters, write: &WriteContext) -> Placement {
        // Whatever its size: the segment buffer takes it, in pieces if it is
        // larger than the buffer.
        if write.block_count <= write.staging_capacity_blocks {
            Placement::Stage
        } else {
            Placement::StageInPieces
        }
    }

    fn destage_rule(&self) -> DestageRule {
        DestageRule::LogHead
    }

    fn writes_segments(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layouts::test_support::{parameters, write};

    #[test]
    fn every_write_goes_through_the_segment_buffer() {
        assert_eq!(Lfs.place_write(&parameters(), &write(1, true)), Placement::Stage);
        assert_eq!(Lfs.place_write(&parameters(), &write(500, false)), Placement::Stage);
        assert_eq!(Lfs.place_write(&parameters(), &write(5000, false)), Placement::StageInPieces);
        assert_eq!(Lfs.destage_rule(), DestageRule::LogHead);
        assert!(Lfs.writes_segments());
    }
}
