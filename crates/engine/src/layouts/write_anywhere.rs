//! The write-anywhere layout: no staging; every write goes to the data device,
//! new blocks plugging the first holes after a rolling cursor (greedy hole
//! plugging, next-fit over the device). State: that cursor.

use super::{Layout, LayoutParameters, LayoutStrategy, Placement, WriteContext};

/// The write-anywhere layout.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteAnywhere {
    /// Where the search for the next hole starts.
    hole_cursor: u64,
}

impl LayoutStrategy for WriteAnywhere {
    fn kind(&self) -> Layout {
        Layout::WriteAnywhere
    }

    fn place_write(&self, _parameters: &LayoutParameters, _write: &WriteContext) -> Placement {
        Placement::PlugHoles
    }

    fn hole_cursor(&self) -> u64 {
        self.hole_cursor
    }

    fn move_hole_cursor(&mut self, next_block: u64) {
        self.hole_cursor = next_block;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layouts::test_support::{parameters, write};

    #[test]
    fn never_stages() {
        let anywhere = WriteAnywhere::default();
        assert_eq!(anywhere.place_write(&parameters(), &write(1, true)), Placement::PlugHoles);
        assert_eq!(anywhere.place_write(&parameters(), &write(500, false)), Placement::PlugHoles);
    }

    #[test]
    fn the_hole_cursor_rolls_on() {
        let mut anywhere = WriteAnywhere::default();
        assert_eq!(anywhere.hole_cursor(), 0);
        anywhere.move_hole_cursor(77);
        assert_eq!(anywhere.hole_cursor(), 77);
    }
}
