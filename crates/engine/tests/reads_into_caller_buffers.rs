//! Reads into a caller's buffer (`read_into`, `read_shared` through `&self`,
//! `read_snapshot_into`) return the same bytes as `read` for every alignment
//! — holes, staged blocks on flash, destaged and large-write blocks on the data
//! device, partial blocks at both ends — and block status of a snapshot
//! export shows the snapshot's holes.

use crate::common;

use common::{memory_volume, pattern, BLOCK};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SEED: u64 = 20261121;

#[test]
fn every_read_path_agrees_with_a_model_at_any_alignment() {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut volume = memory_volume(4096, 1024);
    let size = 2 << 20;
    let id = volume.create_extent("lun0", size as u64).unwrap();
    let mut model = vec![0u8; size];
    for round in 0..200u64 {
        let length = if round % 10 == 0 { 300 * BLOCK } else { rng.gen_range(1..3 * BLOCK) };
        let offset = rng.gen_range(0..size - length);
        let bytes = pattern(round + 1, length);
        volume.write(id, offset as u64, &bytes, false).unwrap();
        model[offset..offset + length].copy_from_slice(&bytes);
        if round == 100 {
            volume.destage().unwrap();
        }
    }
    volume.trim(id, 40 * BLOCK as u64, 30 * BLOCK as u64, false).unwrap();
    model[40 * BLOCK..70 * BLOCK].fill(0);
    assert!(volume.supports_shared_reads());
    for _ in 0..300 {
        let length = rng.gen_range(1..64 * BLOCK);
        let offset = rng.gen_range(0..size - length);
        let expected = &model[offset..offset + length];
        assert!(volume.read(id, offset as u64, length as u64).unwrap() == expected, "read at {offset}+{length}");
        let mut buffer = vec![0xa5u8; length];
        volume.read_into(id, offset as u64, &mut buffer).unwrap();
        assert!(buffer == expected, "read_into at {offset}+{length}");
        buffer.fill(0x5a);
        volume.read_shared(id, offset as u64, &mut buffer).unwrap();
        assert!(buffer == expected, "read_shared at {offset}+{length}");
    }
    let mut too_long = vec![0u8; 2 * BLOCK];
    assert!(volume.read_into(id, size as u64 - BLOCK as u64, &mut too_long).is_err());
}

#[test]
fn snapshot_reads_into_buffers_and_block_status_shows_its_holes() {
    let mut volume = memory_volume(4096, 1024);
    let id = volume.create_extent("lun0", 1 << 20).unwrap();
    volume.write(id, 0, &pattern(1, 16 * BLOCK), false).unwrap();
    volume.write(id, 64 * BLOCK as u64, &pattern(2, 8 * BLOCK), false).unwrap();
    volume.create_snapshot("before").unwrap();
    volume.write(id, 32 * BLOCK as u64, &pattern(3, 8 * BLOCK), false).unwrap();
    volume.trim(id, 0, 16 * BLOCK as u64, false).unwrap();

    let mut buffer = vec![0u8; 3 * BLOCK + 10];
    volume.read_snapshot_into("before", "lun0", 15 * BLOCK as u64 - 5, &mut buffer).unwrap();
    let mut expected = vec![0u8; 3 * BLOCK + 10];
    expected[..BLOCK + 5].copy_from_slice(&pattern(1, 16 * BLOCK)[15 * BLOCK - 5..]);
    assert!(buffer == expected, "the snapshot's bytes, then its hole");

    let status = volume.snapshot_block_status("before", "lun0", 0, 128 * BLOCK as u64).unwrap();
    let allocated = |block: u64| {
        let offset = block * BLOCK as u64;
        status.iter().find(|s| s.offset_bytes <= offset && offset < s.offset_bytes + s.length_bytes).unwrap().allocated
    };
    assert!(allocated(0) && allocated(15) && allocated(64) && allocated(71));
    assert!(!allocated(16) && !allocated(32) && !allocated(72), "{status:?}");
    let active = volume.block_status(id, 0, 128 * BLOCK as u64).unwrap();
    assert!(!active[0].allocated, "the active extent was trimmed: {active:?}");
    assert!(volume.snapshot_block_status("before", "lun0", 0, 2 << 20).is_err());
}
