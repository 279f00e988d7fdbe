//! Pure stripe arithmetic: where a logical block lies and which member holds a
//! stripe's parity. No device and no I/O.
//!
//! Every member is cut into stripe units of `unit_blocks`. Stripe `s` holds unit
//! `s` of every member: N data units, then parity. A logical block `L` lies in
//! stripe `s = L / (N·unit)`, data unit `d = (L mod N·unit) / unit`, at offset
//! `o = L mod unit`, i.e. member block `s·unit + o` of the member holding data
//! unit `d`. The same member block on every member forms a *row*; the parity
//! block of a row is the XOR of its N data blocks. RAID-4 keeps parity on the
//! last member; RAID-5 rotates it left-symmetrically (parity of stripe `s` on
//! member `N − (s mod (N+1))`, data unit `d` on member `(parity + 1 + d) mod (N+1)`).

use std::ops::Range;

use super::RaidLevel;

/// The shape of an array's stripes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Geometry {
    /// Where parity lives.
    pub(super) level: RaidLevel,
    /// Members, data and parity (at least 2).
    pub(super) member_count: usize,
    /// Blocks of one stripe unit (at least 1).
    pub(super) unit_blocks: u64,
}

/// The location of a logical block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Location {
    pub(super) stripe: u64,
    pub(super) data_index: usize,
    pub(super) member: usize,
    pub(super) member_block: u64,
}

impl Geometry {
    /// A geometry of `member_count` members (N data and one parity) with stripe
    /// units of `unit_blocks`.
    pub(super) fn new(level: RaidLevel, member_count: usize, unit_blocks: u64) -> Self {
        assert!(member_count >= 2, "an array has at least one data member and parity");
        assert!(unit_blocks > 0, "a stripe unit holds at least one block");
        Self { level, member_count, unit_blocks }
    }

    /// N: the members holding data in each stripe.
    pub(super) fn data_member_count(&self) -> usize {
        self.member_count - 1
    }

    /// Logical blocks of one stripe: N stripe units.
    pub(super) fn stripe_blocks(&self) -> u64 {
        self.unit_blocks * u64::try_from(self.data_member_count()).expect("a member count fits in u64")
    }

    /// The stripe a member block's row belongs to.
    pub(super) fn stripe_of_row(&self, member_block: u64) -> u64 {
        member_block / self.unit_blocks
    }

    /// The stripes holding logical blocks `[block, block + block_count)`.
    pub(super) fn stripes_of(&self, block: u64, block_count: u64) -> Range<u64> {
        let stripe_blocks = self.stripe_blocks();
        block / stripe_blocks..(block + block_count).div_ceil(stripe_blocks)
    }

    /// The member holding the parity of stripe `stripe`.
    pub(super) fn parity_member(&self, stripe: u64) -> usize {
        match self.level {
            RaidLevel::Raid4 => self.member_count - 1,
            RaidLevel::Raid5 => {
                let member_count = u64::try_from(self.member_count).expect("a member count fits in u64");
                let rotation = usize::try_from(stripe % member_count).expect("less than the member count");
                self.member_count - 1 - rotation
            }
        }
    }

    /// The member holding data unit `data_index` of stripe `stripe`.
    pub(super) fn data_member(&self, stripe: u64, data_index: usize) -> usize {
        match self.level {
            RaidLevel::Raid4 => data_index,
            RaidLevel::Raid5 => (self.parity_member(stripe) + 1 + data_index) % self.member_count,
        }
    }

    /// The data members of stripe `stripe`, in data unit order.
    pub(super) fn data_members(self, stripe: u64) -> impl Iterator<Item = usize> {
        (0..self.data_member_count()).map(move |index| self.data_member(stripe, index))
    }

    /// Where logical block `block` lies.
    pub(super) fn locate(&self, block: u64) -> Location {
        let stripe_blocks = self.stripe_blocks();
        let stripe = block / stripe_blocks;
        let within = block % stripe_blocks;
        let data_index =
            usize::try_from(within / self.unit_blocks).expect("a data index is less than the member count");
        let member_block = stripe * self.unit_blocks + within % self.unit_blocks;
        Location { stripe, data_index, member: self.data_member(stripe, data_index), member_block }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_and_raid5_rotation() {
        let raid5 = Geometry::new(RaidLevel::Raid5, 4, 4);
        assert_eq!((0..4).map(|stripe| raid5.parity_member(stripe)).collect::<Vec<_>>(), vec![3, 2, 1, 0]);
        // Stripe 1: parity on 2, data units on 3, 0, 1.
        assert_eq!(raid5.locate(12), Location { stripe: 1, data_index: 0, member: 3, member_block: 4 });
        assert_eq!(raid5.locate(23), Location { stripe: 1, data_index: 2, member: 1, member_block: 7 });
        let raid4 = Geometry::new(RaidLevel::Raid4, 4, 4);
        assert_eq!(raid4.locate(23), Location { stripe: 1, data_index: 2, member: 2, member_block: 7 });
        assert_eq!(raid4.parity_member(1), 3);
    }

    #[test]
    fn every_stripe_has_each_member_once() {
        for level in [RaidLevel::Raid4, RaidLevel::Raid5] {
            let geometry = Geometry::new(level, 5, 2);
            for stripe in 0..10 {
                let mut members: Vec<usize> = geometry.data_members(stripe).collect();
                members.push(geometry.parity_member(stripe));
                members.sort_unstable();
                assert_eq!(members, vec![0, 1, 2, 3, 4], "{level:?} stripe {stripe}");
            }
        }
    }

    #[test]
    fn a_stripe_maps_its_blocks_onto_its_rows_one_to_one() {
        let geometry = Geometry::new(RaidLevel::Raid5, 3, 4);
        assert_eq!(geometry.stripe_blocks(), 8);
        let stripe = 2;
        let mut seen: Vec<(usize, u64)> = (16..24)
            .map(|block| geometry.locate(block))
            .inspect(|location| assert_eq!(location.stripe, stripe))
            .map(|location| (location.member, location.member_block))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 8, "no two blocks of a stripe share a member block");
        for (member, member_block) in seen {
            assert_ne!(member, geometry.parity_member(stripe));
            assert_eq!(geometry.stripe_of_row(member_block), stripe);
        }
    }

    #[test]
    fn stripes_of_a_range_round_outward() {
        let geometry = Geometry::new(RaidLevel::Raid4, 4, 4);
        assert_eq!(geometry.stripes_of(0, 12), 0..1);
        assert_eq!(geometry.stripes_of(11, 2), 0..2);
        assert_eq!(geometry.stripes_of(12, 0), 1..1);
        assert_eq!(geometry.stripes_of(13, 24), 1..4);
    }
}
