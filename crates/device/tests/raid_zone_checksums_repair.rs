//! Zone checksums on a RAID-4/5 array: a data block flipped on a member behind the
//! array's back is detected on read, answered from parity, and written back whole;
//! a small update reads and writes each touched member's checksum block.

use proxima_device::{
    BlockDevice, ChecksumMismatch, MemoryDevice, RaidConfig, RaidDevice, RaidLevel, NETAPP_ZONE_DATA_BLOCKS,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const BLOCK_SIZE: u32 = 4096;
const MEMBER_BLOCKS: u64 = 256;
const UNIT_BLOCKS: u64 = 8;

fn array(level: RaidLevel) -> RaidDevice<MemoryDevice> {
    let members =
        (0..4).map(|index| MemoryDevice::new(BLOCK_SIZE, MEMBER_BLOCKS).named(format!("disk{index}"))).collect();
    let config = RaidConfig { level, stripe_unit_bytes: UNIT_BLOCKS * u64::from(BLOCK_SIZE), zone_data_blocks: None }
        .with_zone_checksums(NETAPP_ZONE_DATA_BLOCKS);
    RaidDevice::new(members, config).unwrap()
}

fn random_data(seed: u64, block_count: u64) -> Vec<u8> {
    let mut data = vec![0; (block_count * u64::from(BLOCK_SIZE)) as usize];
    ChaCha8Rng::seed_from_u64(seed).fill(&mut data[..]);
    data
}

/// Where member block `member_block` lies on a member: 63 data blocks, then their checksum block.
fn physical(member_block: u64) -> u64 {
    let zone = u64::from(NETAPP_ZONE_DATA_BLOCKS);
    member_block / zone * (zone + 1) + member_block % zone
}

#[test]
fn a_flipped_block_is_detected_answered_from_parity_and_repaired() {
    for level in [RaidLevel::Raid4, RaidLevel::Raid5] {
        let mut raid = array(level);
        // 252 physical blocks in 4 zones hold 252 member blocks, 248 in whole units.
        assert_eq!(raid.info().block_count, 3 * 248);
        let contents = random_data(7, raid.info().block_count);
        raid.write_blocks(0, &contents).unwrap();
        assert_eq!(raid.verify_zone_checksums().unwrap(), vec![]);
        // Logical block 100 is stripe 4 (24 blocks each), data unit 0, offset 4:
        // member block 36 of member 0 (RAID-5 puts stripe 4's parity on member 3,
        // its first data unit on member 0).
        let member = 0;
        let mut flipped = raid.member_mut(member).read_blocks(physical(36), 1).unwrap();
        flipped[17] ^= 0x40;
        raid.member_mut(member).write_blocks(physical(36), &flipped).unwrap();
        assert_eq!(raid.verify_zone_checksums().unwrap(), vec![ChecksumMismatch { member, member_block: 36 }]);
        let block =
            |logical: usize| contents[logical * BLOCK_SIZE as usize..(logical + 1) * BLOCK_SIZE as usize].to_vec();
        assert_eq!(raid.read_blocks(100, 1).unwrap(), block(100), "{level:?}: answered from parity");
        assert_eq!(raid.verify_zone_checksums().unwrap(), vec![], "{level:?}: written back");
        assert_eq!(raid.member_mut(member).read_blocks(physical(36), 1).unwrap(), block(100));
        assert_eq!(raid.verify_parity().unwrap(), vec![]);
    }
}

#[test]
fn a_small_update_reads_and_writes_the_checksum_blocks_it_touches() {
    let mut raid = array(RaidLevel::Raid4);
    raid.write_blocks(0, &random_data(1, raid.info().block_count)).unwrap();
    raid.take_member_stats();
    // Member block 5 of member 0: read old data with its checksum block (two runs:
    // physical 5 and 63), write both; the same on the parity member.
    raid.write_blocks(5, &random_data(2, 1)).unwrap();
    let stats = raid.take_member_stats();
    for member in [0, 3] {
        assert_eq!((stats[member].reads.block_count, stats[member].writes.block_count), (2, 2), "member {member}");
    }
    assert_eq!(stats[1].reads.request_count + stats[1].writes.request_count, 0);
    // Logical block 174 (stripe 7, data unit 0, offset 6) is member block 62 of
    // member 0, adjacent to its checksum block (physical 62 and 63): one request each way.
    raid.write_blocks(174, &random_data(3, 1)).unwrap();
    let stats = raid.take_member_stats();
    assert_eq!((stats[0].reads.request_count, stats[0].writes.request_count), (1, 1));
    assert_eq!(raid.verify_zone_checksums().unwrap(), vec![]);
    assert_eq!(raid.verify_parity().unwrap(), vec![]);
}
