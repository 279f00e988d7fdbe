//! The proximal layout (the default): small writes are staged in the flash
//! log; destage places each group of an extent's staged blocks in the
//! allocation range of its logical neighbours, or the nearest range with room
//! within the proximal span, or a new range ([`super::DestageRule::NearNeighbours`]).
//! Large writes go straight to allocation ranges. It keeps no state of its
//! own: every decision follows from the extent's map and the free space.

use super::{Layout, LayoutParameters, LayoutStrategy, Placement, WriteContext};

/// The proximal layout.
#[derive(Debug, Clone, Copy, Default)]
pub struct Proximal;

impl LayoutStrategy for Proximal {
    fn kind(&self) -> Layout {
        Layout::Proximal
    }

    fn place_write(&self, parameters: &LayoutParameters, write: &WriteContext) -> Placement {
        if write.is_small(parameters) {
            Placement::Stage
        } else {
            Placement::Ranges
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layouts::test_support::{parameters, write};
    use crate::layouts::DestageRule;

    #[test]
    fn stages_writes_below_the_threshold_and_ranges_the_rest() {
        let proximal = parameters();
        assert_eq!(Proximal.place_write(&proximal, &write(1, true)), Placement::Stage);
        assert_eq!(Proximal.place_write(&proximal, &write(41, false)), Placement::Stage);
        assert_eq!(Proximal.place_write(&proximal, &write(42, true)), Placement::Ranges);
        let unstaged = LayoutParameters { staging_threshold_blocks: 0, ..proximal };
        assert_eq!(Proximal.place_write(&unstaged, &write(1, true)), Placement::Ranges);
    }

    #[test]
    fn destages_near_the_neighbours() {
        assert_eq!(Proximal.destage_rule(), DestageRule::NearNeighbours);
        assert_eq!(Proximal.frame_home(1, 0), None);
    }
}
