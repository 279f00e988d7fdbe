//! An extent filled by large writes that arrived out of order (a client with
//! several in flight) has logical windows split over two allocation ranges;
//! random overwrites staged and destaged over and over still return every
//! block to its hole, so the extent keeps the runs the fill gave it.

use crate::common;

use common::{memory_volume, pattern, BLOCK};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SEED: u64 = 20261121;
const CHUNK: usize = 1 << 20;

#[test]
fn destaged_blocks_return_to_their_holes_after_an_out_of_order_fill() {
    let mut volume = memory_volume(16384, 1024);
    let chunks = 16u64;
    let id = volume.create_extent("lun0", chunks * CHUNK as u64).unwrap();
    // Chunks 1, 0, 3, 2, ...: each first write of a pair finds no predecessor.
    for pair in 0..chunks / 2 {
        for chunk in [2 * pair + 1, 2 * pair] {
            volume.write(id, chunk * CHUNK as u64, &pattern(chunk, CHUNK), false).unwrap();
        }
    }
    let runs_after_fill = volume.extents()[0].run_count;
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let extent_blocks = chunks * (CHUNK / BLOCK) as u64;
    for _ in 0..6 {
        for _ in 0..2000 {
            let block = rng.gen_range(0..extent_blocks);
            volume.write(id, block * BLOCK as u64, &pattern(block, BLOCK), false).unwrap();
        }
        volume.destage().unwrap();
    }
    let runs_after_aging = volume.extents()[0].run_count;
    assert!(
        runs_after_aging <= runs_after_fill,
        "{runs_after_fill} runs after the fill, {runs_after_aging} after six rounds of aging and destage"
    );
}
