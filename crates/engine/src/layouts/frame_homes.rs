//! The frame homes of staged blocks: for each staged block that overwrote a
//! data-device block, that block (its frame home), where a layout that
//! overwrites in place destages it back. Kept in memory only and rebuilt as
//! blocks are staged (after a restart, destage falls back to the layout's
//! other rule). The in-place and HyLog layouts share it.

use std::collections::{HashMap, HashSet};

use crate::map::Location;

/// Frame homes by `(extent, logical block)`, and the set of home blocks.
#[derive(Debug, Clone, Default)]
pub struct FrameHomes {
    /// `(extent, logical block)` → the data block its staged copy overwrote.
    homes: HashMap<(u64, u64), u64>,
    /// The blocks of `homes`.
    home_blocks: HashSet<u64>,
}

impl FrameHomes {
    /// The frame home of block `logical_block` of extent `extent_id`.
    pub fn home(&self, extent_id: u64, logical_block: u64) -> Option<u64> {
        self.homes.get(&(extent_id, logical_block)).copied()
    }

    /// Whether `block` is the frame home of a staged block.
    pub fn is_home(&self, block: u64) -> bool {
        self.home_blocks.contains(&block)
    }

    /// The block was staged over `previous`: a data block becomes its home, a
    /// restaged block keeps the home it has, a new block has none.
    pub fn staged(&mut self, extent_id: u64, logical_block: u64, previous: Option<Location>) {
        match previous {
            Some(Location::Data(block)) => {
                if let Some(old) = self.homes.insert((extent_id, logical_block), block) {
                    self.home_blocks.remove(&old);
                }
                self.home_blocks.insert(block);
            }
            Some(Location::Flash(_)) => {}
            None => self.forget(extent_id, logical_block),
        }
    }

    /// The blocks were destaged: their homes are forgotten.
    pub fn destaged(&mut self, extent_id: u64, logical_block: u64, block_count: u64) {
        if !self.homes.is_empty() {
            for block in logical_block..logical_block + block_count {
                self.forget(extent_id, block);
            }
        }
    }

    fn forget(&mut self, extent_id: u64, logical_block: u64) {
        if let Some(home) = self.homes.remove(&(extent_id, logical_block)) {
            self.home_blocks.remove(&home);
        }
    }
}
