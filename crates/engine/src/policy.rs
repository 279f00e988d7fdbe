//! The layout-policy seam: where new blocks go.
//!
//! A policy is a pure decision over a description of the state
//! ([`WriteContext`], [`DestageContext`]); the engine executes it. The default
//! policy stages small writes in the flash log, sends large writes to
//! allocation ranges on the data device, and destages in extent and offset
//! order next to each group's logical predecessor.

use crate::map::Location;

/// What the policy knows about a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteContext {
    /// The extent written.
    pub extent_id: u64,
    /// First logical block written.
    pub logical_block: u64,
    /// Number of blocks written.
    pub block_count: u64,
    /// Where the logical block just before the write lives, if mapped.
    pub predecessor: Option<Location>,
    /// Where the first block written lived before, if mapped.
    pub previous: Option<Location>,
    /// Flash blocks that may still be used for staging before a destage.
    pub staging_available_blocks: u64,
    /// Blocks of the data device.
    pub data_block_count: u64,
}

/// Where a write goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Each block to the flash staging log.
    Stage,
    /// To the data device, allocated at or after `hint_block`.
    Direct {
        /// Preferred first data-device block.
        hint_block: u64,
    },
}

/// A run of staged blocks of one extent (consecutive logical blocks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagedRun {
    /// The extent.
    pub extent_id: u64,
    /// First logical block.
    pub logical_block: u64,
    /// Number of blocks.
    pub block_count: u64,
    /// Where the logical block just before the run lives, if mapped.
    pub predecessor: Option<Location>,
}

/// What the policy knows when planning a destage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestageContext {
    /// Every staged run, in any order.
    pub staged: Vec<StagedRun>,
    /// Blocks of the data device.
    pub data_block_count: u64,
}

/// One group of a destage plan, written as one run (or as few as free space allows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DestageGroup {
    /// The extent.
    pub extent_id: u64,
    /// First logical block.
    pub logical_block: u64,
    /// Number of blocks.
    pub block_count: u64,
    /// Preferred first data-device block.
    pub hint_block: u64,
}

/// Decides placements. Implementations must be deterministic functions of their
/// inputs and their own configuration.
pub trait LayoutPolicy: std::fmt::Debug + Send {
    /// A short name for reports.
    fn name(&self) -> &str;
    /// Where a write of `context.block_count` blocks goes.
    fn place_write(&self, context: &WriteContext) -> Placement;
    /// Whether the staging log should be destaged now (checked after writes).
    fn should_destage(&self, staged_block_count: u64, staging_available_blocks: u64) -> bool;
    /// The order and placement of a destage.
    fn plan_destage(&self, context: &DestageContext) -> Vec<DestageGroup>;
}

/// The default layout: small writes staged, large writes and destages placed
/// after their logical predecessor, else at the start of a fresh allocation
/// range chosen by extent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultPolicy {
    /// Writes of fewer blocks than this are staged (168 KB in the paper: 42 blocks).
    pub stage_threshold_blocks: u64,
    /// Allocation range size in blocks (1 MiB: 256 blocks).
    pub allocation_range_blocks: u64,
    /// Destage when fewer staging blocks than this remain.
    pub destage_reserve_blocks: u64,
}

impl Default for DefaultPolicy {
    fn default() -> Self {
        Self { stage_threshold_blocks: 42, allocation_range_blocks: 256, destage_reserve_blocks: 64 }
    }
}

impl DefaultPolicy {
    fn hint_for(
        &self,
        extent_id: u64,
        logical_block: u64,
        predecessor: Option<Location>,
        data_block_count: u64,
    ) -> u64 {
        match predecessor {
            Some(Location::Data(block)) => (block + 1) % data_block_count.max(1),
            _ => {
                // Spread extents over the device by a multiplicative hash of the id,
                // keeping the logical offset's position within the extent's area.
                let range_count = (data_block_count / self.allocation_range_blocks).max(1);
                let range = extent_id.wrapping_mul(0x9E37_79B9_7F4A_7C15) % range_count;
                let logical_range = logical_block / self.allocation_range_blocks;
                ((range + logical_range) % range_count) * self.allocation_range_blocks
            }
        }
    }
}

impl LayoutPolicy for DefaultPolicy {
    fn name(&self) -> &str {
        "default"
    }

    fn place_write(&self, context: &WriteContext) -> Placement {
        if context.block_count < self.stage_threshold_blocks && context.staging_available_blocks > context.block_count {
            return Placement::Stage;
        }
        Placement::Direct {
            hint_block: self.hint_for(
                context.extent_id,
                context.logical_block,
                context.predecessor,
                context.data_block_count,
            ),
        }
    }

    fn should_destage(&self, staged_block_count: u64, staging_available_blocks: u64) -> bool {
        staged_block_count > 0 && staging_available_blocks < self.destage_reserve_blocks
    }

    fn plan_destage(&self, context: &DestageContext) -> Vec<DestageGroup> {
        let mut staged = context.staged.clone();
        staged.sort_by_key(|run| (run.extent_id, run.logical_block));
        staged
            .iter()
            .map(|run| DestageGroup {
                extent_id: run.extent_id,
                logical_block: run.logical_block,
                block_count: run.block_count,
                hint_block: self.hint_for(run.extent_id, run.logical_block, run.predecessor, context.data_block_count),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(block_count: u64, predecessor: Option<Location>) -> WriteContext {
        WriteContext {
            extent_id: 1,
            logical_block: 100,
            block_count,
            predecessor,
            previous: None,
            staging_available_blocks: 1000,
            data_block_count: 1 << 20,
        }
    }

    #[test]
    fn small_writes_are_staged_and_large_ones_follow_their_predecessor() {
        let policy = DefaultPolicy::default();
        assert_eq!(policy.place_write(&context(1, None)), Placement::Stage);
        assert_eq!(
            policy.place_write(&context(64, Some(Location::Data(5000)))),
            Placement::Direct { hint_block: 5001 }
        );
        let Placement::Direct { hint_block } = policy.place_write(&context(64, None)) else { panic!("direct") };
        assert_eq!(hint_block % 256, 0, "a fresh allocation range");
    }

    #[test]
    fn destage_is_planned_in_extent_and_offset_order() {
        let policy = DefaultPolicy::default();
        let run = |extent_id, logical_block| StagedRun { extent_id, logical_block, block_count: 1, predecessor: None };
        let plan = policy
            .plan_destage(&DestageContext { staged: vec![run(2, 5), run(1, 9), run(1, 3)], data_block_count: 1 << 20 });
        let order: Vec<_> = plan.iter().map(|group| (group.extent_id, group.logical_block)).collect();
        assert_eq!(order, vec![(1, 3), (1, 9), (2, 5)]);
    }
}
