//! Every on-disk decoder of the engine on arbitrary bytes: none may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proxima_engine::codec::{
    decode_header, decode_index_entries, decode_leaf_entries, decode_log_block, ExtentRecord, Run, SnapshotRecord,
    Superblock, BLOCK_SIZE,
};

fuzz_target!(|bytes: &[u8]| {
    let _ = decode_header(bytes);
    let _ = Superblock::decode(bytes);
    let _ = decode_log_block(bytes);
    if bytes.len() >= BLOCK_SIZE {
        let block = &bytes[..BLOCK_SIZE];
        let count = usize::from(bytes.get(BLOCK_SIZE).copied().unwrap_or(0)) * 4;
        let _ = decode_index_entries(block, count);
        let _ = decode_leaf_entries::<Run>(block, count);
        let _ = decode_leaf_entries::<ExtentRecord>(block, count);
        let _ = decode_leaf_entries::<SnapshotRecord>(block, count);
    }
});
