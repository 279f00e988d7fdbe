//! Every on-disk decoder of the engine on arbitrary bytes: none may panic. The
//! block decoders take whole 4 KiB blocks, so the input is laid into one
//! (zero-padded, cut at 4 KiB; the input's last byte sets how many entries the
//! tree decoders read), and the decoders also get the raw bytes.
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
    let mut block = vec![0u8; BLOCK_SIZE];
    let length = bytes.len().min(BLOCK_SIZE);
    block[..length].copy_from_slice(&bytes[..length]);
    let _ = decode_header(&block);
    let _ = Superblock::decode(&block);
    let _ = decode_log_block(&block);
    let count = usize::from(bytes.last().copied().unwrap_or(0)) * 4;
    let _ = decode_index_entries(&block, count);
    let _ = decode_leaf_entries::<Run>(&block, count);
    let _ = decode_leaf_entries::<ExtentRecord>(&block, count);
    let _ = decode_leaf_entries::<SnapshotRecord>(&block, count);
});
