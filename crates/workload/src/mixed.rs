//! A mixed aging workload, as the reallocate-on-read talk (seed 003) ages its
//! volume: fixed-size I/Os from several threads over one span, a share of them
//! random (uniform, aligned to the I/O size) and the rest sequential (each
//! thread continuing where its last I/O ended), a share of them writes.
//!
//! The threads take turns, one I/O each, so the stream interleaves them as a
//! device sees threads that run at the same pace.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::synthetic::seeded_stream;

/// The shape of the mix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MixedShape {
    /// Blocks in the span the I/Os cover.
    pub span_blocks: u64,
    /// Blocks per I/O (2 for the talk's 8 KiB with 4 KiB blocks).
    pub io_blocks: u64,
    /// Threads taking turns (30 in the talk).
    pub threads: usize,
    /// Share of I/Os at a random place (0.8 in the talk).
    pub random_fraction: f64,
    /// Share of I/Os that write (0.6 in the talk).
    pub write_fraction: f64,
}

/// One I/O of the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MixedIo {
    /// Whether it writes (else it reads).
    pub write: bool,
    /// Its first block.
    pub block: u64,
    /// Its blocks.
    pub block_count: u64,
}

/// The endless stream of a mix's I/Os from a seed.
#[derive(Debug, Clone)]
pub struct MixedIos {
    shape: MixedShape,
    rng: ChaCha8Rng,
    cursors: Vec<u64>,
    turn: usize,
}

impl MixedIos {
    /// The stream of `shape` from `seed` (its own random stream, purpose 4).
    pub fn new(shape: MixedShape, seed: u64) -> MixedIos {
        assert!(shape.io_blocks > 0 && shape.span_blocks >= shape.io_blocks, "I/Os fit in the span");
        assert!(shape.threads > 0, "at least one thread");
        let mut rng = seeded_stream(seed, 4);
        let slots = shape.span_blocks / shape.io_blocks;
        let cursors = (0..shape.threads).map(|_| rng.gen_range(0..slots) * shape.io_blocks).collect();
        MixedIos { shape, rng, cursors, turn: 0 }
    }
}

impl Iterator for MixedIos {
    type Item = MixedIo;

    fn next(&mut self) -> Option<MixedIo> {
        let shape = self.shape;
        let slots = shape.span_blocks / shape.io_blocks;
        let thread = self.turn;
        self.turn = (self.turn + 1) % shape.threads;
        let block = if self.rng.gen_bool(shape.random_fraction) {
            self.rng.gen_range(0..slots) * shape.io_blocks
        } else {
            self.cursors[thread]
        };
        self.cursors[thread] = (block + shape.io_blocks) % (slots * shape.io_blocks);
        let write = self.rng.gen_bool(shape.write_fraction);
        Some(MixedIo { write, block, block_count: shape.io_blocks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_has_its_shares_and_threads_continue_sequentially() {
        let shape =
            MixedShape { span_blocks: 1 << 20, io_blocks: 2, threads: 30, random_fraction: 0.8, write_fraction: 0.6 };
        for seed in [1, 7, 42, 1_000_003] {
            let ios: Vec<MixedIo> = MixedIos::new(shape, seed).take(30_000).collect();
            let writes = ios.iter().filter(|io| io.write).count() as f64 / ios.len() as f64;
            assert!((writes - 0.6).abs() < 0.02, "seed {seed}: {writes}");
            // An I/O continues its thread's previous one (30 turns earlier)
            // about a fifth of the time; random ones almost never do.
            let continued = (30..ios.len()).filter(|&index| ios[index].block == ios[index - 30].block + 2).count()
                as f64
                / (ios.len() - 30) as f64;
            assert!((continued - 0.2).abs() < 0.02, "seed {seed}: {continued}");
            assert!(ios.iter().all(|io| io.block % 2 == 0 && io.block + 2 <= 1 << 20));
            assert_eq!(ios, MixedIos::new(shape, seed).take(30_000).collect::<Vec<_>>(), "seeded");
        }
    }
}
