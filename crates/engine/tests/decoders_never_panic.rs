//! The on-disk decoders never panic on arbitrary bytes, including blocks whose
//! header and checksum are valid but whose body is random.

use proptest::prelude::*;
use proxima_engine::codec::{
    decode_header, decode_index_entries, decode_leaf_entries, decode_log_block, new_block, seal_block, BlockKind,
    ExtentRecord, Header, Run, SnapshotRecord, Superblock, BLOCK_SIZE, HEADER_SIZE,
};

fn decode_everything(block: &[u8]) {
    let _ = decode_header(block);
    let _ = Superblock::decode(block);
    let _ = decode_log_block(block);
    if block.len() == BLOCK_SIZE {
        for count in [0usize, 1, 5, 300, usize::from(u16::MAX)] {
            let _ = decode_index_entries(block, count);
            let _ = decode_leaf_entries::<Run>(block, count);
            let _ = decode_leaf_entries::<ExtentRecord>(block, count);
            let _ = decode_leaf_entries::<SnapshotRecord>(block, count);
        }
    }
}

/// A block with a valid header of `kind` and `entry_count`, random body, sealed.
fn sealed(kind: BlockKind, entry_count: u16, body: &[u8]) -> Vec<u8> {
    let mut block = new_block(&Header { kind, level: 0, entry_count, volume_id: 1, owner: 0, generation: 1, key: 0 });
    block[HEADER_SIZE..].copy_from_slice(&body[..BLOCK_SIZE - HEADER_SIZE]);
    seal_block(&mut block);
    block
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..5000)) {
        decode_everything(&bytes);
    }

    #[test]
    fn valid_headers_with_random_bodies(
        body in proptest::collection::vec(any::<u8>(), BLOCK_SIZE - HEADER_SIZE),
        kind in prop_oneof![
            Just(BlockKind::Superblock), Just(BlockKind::MapNode), Just(BlockKind::ExtentTableNode),
            Just(BlockKind::SnapshotTableNode), Just(BlockKind::BitmapPage), Just(BlockKind::LogBlock),
        ],
        entry_count in any::<u16>(),
    ) {
        let block = sealed(kind, entry_count, &body);
        prop_assert!(decode_header(&block).is_ok());
        decode_everything(&block);
    }
}
