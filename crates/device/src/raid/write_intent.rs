//! The RAID write hole and its remedy: a crash between a row's data write and
//! its parity write leaves the row inconsistent. A writer logs the regions it
//! is about to write ([`WRITE_INTENT_REGION_BYTES`] each, whole stripes); after
//! a crash the array recomputes the parity of the logged regions
//! ([`RaidDevice::resync_parity`]).

use super::block_set::BlockWrites;
use std::ops::Range;

use super::geometry::Geometry;
use super::member_io::MemberWrites;
use super::plan::xor_all;
use super::RaidDevice;
use crate::{validate_request, BlockDevice, DeviceError, IoRequest};

/// Bytes of a write-intent region (rounded up to whole stripes): a writer logs
/// the regions it is about to write, and after a crash the array recomputes
/// their parity. Larger regions log less often and resync more; 64 MiB is what
/// Linux md's write-intent bitmap uses on large arrays.
pub const WRITE_INTENT_REGION_BYTES: u64 = 64 << 20;

/// Blocks of one write-intent region of an array of `geometry` with blocks of
/// `block_size_bytes`: whole stripes, at least [`WRITE_INTENT_REGION_BYTES`].
pub(super) fn region_blocks(geometry: &Geometry, block_size_bytes: u32) -> u64 {
    let stripe_blocks = geometry.stripe_blocks();
    let region_stripes = (WRITE_INTENT_REGION_BYTES / u64::from(block_size_bytes)).div_ceil(stripe_blocks);
    stripe_blocks * region_stripes.max(1)
}

impl<D: BlockDevice> RaidDevice<D> {
    /// Recomputes the parity of every row that holds logical blocks `[block,
    /// block + block_count)` from the row's data: what a crash during writes
    /// may have left inconsistent (the RAID write hole). With a failed member
    /// nothing can be recomputed; the rows are left as they are.
    pub fn resync_parity(&mut self, block: u64, block_count: u64) -> Result<(), DeviceError> {
        let request_blocks = u32::try_from(block_count).unwrap_or(u32::MAX);
        validate_request(&self.info, &IoRequest::read(block, request_blocks.max(1)))?;
        if self.failed.is_some() || block_count == 0 {
            return Ok(());
        }
        let unit_blocks = self.geometry.unit_blocks;
        for stripe in self.geometry.stripes_of(block, block_count) {
            // A stripe's rows are its unit's member blocks on every member.
            let first_row = stripe * unit_blocks;
            let parity_member = self.geometry.parity_member(stripe);
            let rows = match self.read_member_rows(first_row..first_row + unit_blocks, Some(parity_member)) {
                Ok(rows) => rows,
                // A member block that does not read: the stripe again, row by
                // row, with its parity.
                Err(DeviceError::Io { .. }) => {
                    self.resync_rows_with_unreadable_blocks(first_row..first_row + unit_blocks, parity_member)?;
                    continue;
                }
                Err(other) => return Err(other),
            };
            let mut writes: MemberWrites = vec![BlockWrites::new(); self.members.len()];
            for (member_block, row) in (first_row..).zip(rows) {
                let xor = xor_all(row.iter().flatten());
                let parity = if self.info.stores_payload { xor.unwrap_or_default() } else { Vec::new() };
                writes[parity_member].insert(member_block, parity);
            }
            self.write_member_blocks(&writes)?;
        }
        Ok(())
    }

    /// Resynchronises rows of which a member block does not read. A row with one
    /// unreadable block gets it back from the rest of the row: a data block is
    /// reconstructed (data and parity XOR to it) and rewritten, parity left as
    /// it is; an unreadable parity block is recomputed from the data. Two
    /// unreadable blocks in one row are an error: the row cannot be resolved.
    fn resync_rows_with_unreadable_blocks(
        &mut self,
        rows: Range<u64>,
        parity_member: usize,
    ) -> Result<(), DeviceError> {
        let mut writes: MemberWrites = vec![BlockWrites::new(); self.members.len()];
        for member_block in rows {
            // One row at a time: a failed read of several coalesced blocks would
            // make every one of them look unreadable.
            let row = self.read_member_row(member_block)?;
            let mut unreadable = row.iter().enumerate().filter(|(_, result)| result.is_err()).map(|(member, _)| member);
            let (failed, second) = (unreadable.next(), unreadable.next());
            if let Some(second) = second {
                return Err(row[second].clone().expect_err("an unreadable block"));
            }
            let rebuilt = |skip: usize| -> Vec<u8> {
                let others = row.iter().enumerate().filter(|&(member, _)| member != skip);
                let blocks = others.map(|(_, result)| result.as_ref().expect("one block per row fails at most"));
                if self.info.stores_payload {
                    xor_all(blocks).unwrap_or_default()
                } else {
                    Vec::new()
                }
            };
            match failed {
                Some(member) if member != parity_member => {
                    writes[member].insert(member_block, rebuilt(member));
                }
                _ => {
                    writes[parity_member].insert(member_block, rebuilt(parity_member));
                }
            }
        }
        self.write_member_blocks(&writes)
    }

    /// Blocks of one write-intent region: whole stripes, at least
    /// [`WRITE_INTENT_REGION_BYTES`].
    pub fn write_intent_region_blocks(&self) -> u64 {
        region_blocks(&self.geometry, self.info.block_size_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raid::RaidLevel;

    #[test]
    fn a_region_is_whole_stripes_of_at_least_the_region_size() {
        // 3 data members × 1 MiB units of 4 KiB blocks: 768-block stripes; 64 MiB is 21⅓ stripes.
        let geometry = Geometry::new(RaidLevel::Raid5, 4, 256);
        assert_eq!(region_blocks(&geometry, 4096), 22 * 768);
        // A stripe larger than the region: one stripe.
        let wide = Geometry::new(RaidLevel::Raid4, 9, 1 << 20);
        assert_eq!(region_blocks(&wide, 4096), 8 << 20);
    }
}
