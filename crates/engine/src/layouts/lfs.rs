//! The log-structured layout (`lfs`): small writes are buffered in the flash
//! staging log (the NV segment buffer) and destage writes the buffered blocks
//! at the log head, filling clean segments in ascending block order; a large
//! write (at least the staging threshold, or more than the buffer holds) goes
//! straight to the log head. The data device sees segment-sized sequential
//! writes only. Live blocks of partly dead
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

    fn place_write(&self, parameters: &LayoutParameters, write: &WriteContext) -> Placement {
        if write.is_small(parameters) && write.block_count <= write.staging_capacity_blocks {
            Placement::Stage
        } else {
            Placement::LogHead
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
    fn small_writes_are_buffered_and_large_ones_go_to_the_log_head() {
        assert_eq!(Lfs.place_write(&parameters(), &write(1, true)), Placement::Stage);
        assert_eq!(Lfs.place_write(&parameters(), &write(41, false)), Placement::Stage);
        assert_eq!(Lfs.place_write(&parameters(), &write(42, false)), Placement::LogHead);
        let mut larger_than_the_buffer = write(30, true);
        larger_than_the_buffer.staging_capacity_blocks = 20;
        assert_eq!(Lfs.place_write(&parameters(), &larger_than_the_buffer), Placement::LogHead);
        assert_eq!(Lfs.destage_rule(), DestageRule::LogHead);
        assert!(Lfs.writes_segments());
    }
}
