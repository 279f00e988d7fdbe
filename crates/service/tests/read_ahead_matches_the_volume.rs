//! Read-ahead never changes what a read returns. Random sequences of
//! sequential readers (several streams, each with its own cursor), random
//! reads, writes, trims, flushes and restarts run against an export with
//! read-ahead on, its workers prefetching in the background all the while;
//! every read is checked against a model of the extent's bytes. Writes and
//! trims land inside prefetched windows, so a stale prefetch would show.

use std::sync::{Arc, RwLock};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use proxima_device::seeds_for_test;
use proxima_engine::prefetch::PrefetchSettings;
use proxima_nbd::{Backend, Export};
use proxima_service::{create_volume, open_volume, CreateSpec, OpenVolume, VolumeBackend};

const BLOCK: u64 = 4096;
const EXTENT_BYTES: u64 = 8 << 20;
const STREAMS: usize = 3;

#[derive(Debug, Clone)]
enum Op {
    /// The next `blocks` blocks of stream `stream`, from its cursor.
    Sequential {
        stream: usize,
        blocks: u64,
    },
    /// Moves a stream's cursor.
    Jump {
        stream: usize,
        block: u64,
    },
    Random {
        block: u64,
        blocks: u64,
    },
    /// A write near (usually ahead of) a stream's cursor: inside what it has
    /// prefetched.
    WriteAhead {
        stream: usize,
        ahead_blocks: u64,
        blocks: u64,
        tag: u8,
    },
    Write {
        block: u64,
        blocks: u64,
        tag: u8,
    },
    Trim {
        block: u64,
        blocks: u64,
    },
    Flush,
    /// Stop serving, close the volume, open it again.
    Restart,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let extent_blocks = EXTENT_BYTES / BLOCK;
    prop_oneof![
        12 => (0..STREAMS, prop_oneof![3 => 1..=16u64, 1 => 17..=64u64])
            .prop_map(|(stream, blocks)| Op::Sequential { stream, blocks }),
        1 => (0..STREAMS, 0..extent_blocks).prop_map(|(stream, block)| Op::Jump { stream, block }),
        2 => (0..extent_blocks, 1..=32u64).prop_map(|(block, blocks)| Op::Random { block, blocks }),
        4 => (0..STREAMS, 0..96u64, 1..=8u64, any::<u8>())
            .prop_map(|(stream, ahead_blocks, blocks, tag)| Op::WriteAhead { stream, ahead_blocks, blocks, tag }),
        2 => (0..extent_blocks, 1..=16u64, any::<u8>()).prop_map(|(block, blocks, tag)| Op::Write { block, blocks, tag }),
        1 => (0..extent_blocks, 1..=64u64).prop_map(|(block, blocks)| Op::Trim { block, blocks }),
        1 => Just(Op::Flush),
        1 => Just(Op::Restart),
    ]
}

/// Small read-aheads, so that a run covers many turns and the memory budget.
fn settings() -> PrefetchSettings {
    let mut settings = PrefetchSettings::with_readahead(128 << 10);
    settings.requests_per_turn = 2;
    settings.memory_bytes_max = 2 * settings.turn_bytes().unwrap();
    settings
}

struct Harness {
    directory: tempfile::TempDir,
    served: Option<(VolumeBackend, proxima_service::VolumeLock)>,
    model: Vec<u8>,
    cursors: [u64; STREAMS],
}

impl Harness {
    fn new() -> Self {
        let directory = tempfile::tempdir().unwrap();
        let spec = CreateSpec { data_disk_bytes: 64 << 20, flash_bytes: Some(16 << 20), ..CreateSpec::default() };
        create_volume(directory.path(), &spec).unwrap();
        let mut open = open_volume(directory.path()).unwrap();
        open.volume.create_extent("lun0", EXTENT_BYTES).unwrap();
        let mut harness = Self {
            directory,
            served: None,
            model: vec![0; EXTENT_BYTES as usize],
            cursors: [0, EXTENT_BYTES / 3, 2 * EXTENT_BYTES / 3],
        };
        harness.serve(open);
        harness
    }

    fn serve(&mut self, open: OpenVolume) {
        let backend = VolumeBackend::with_read_ahead(Arc::new(RwLock::new(open.volume)), Some(settings()));
        self.served = Some((backend, open.lock));
    }

    fn export(&self) -> impl Export {
        self.served.as_ref().unwrap().0.open_export("lun0").unwrap()
    }

    fn restart(&mut self) {
        let (backend, lock) = self.served.take().unwrap();
        let volume = Arc::clone(backend.volume());
        drop(backend);
        let volume = Arc::try_unwrap(volume).expect("the backend's threads have stopped").into_inner().unwrap();
        volume.close().unwrap();
        drop(lock);
        let open = open_volume(self.directory.path()).unwrap();
        self.serve(open);
    }

    /// Clamps `[block, block + blocks)` to the extent, as bytes.
    fn span(block: u64, blocks: u64) -> (u64, u64) {
        let offset = (block * BLOCK) % EXTENT_BYTES;
        (offset, (blocks * BLOCK).min(EXTENT_BYTES - offset))
    }

    fn check_read(&self, offset: u64, length: u64) -> Result<(), TestCaseError> {
        let mut buffer = vec![0u8; length as usize];
        self.export().read(offset, &mut buffer).unwrap();
        let expected = &self.model[offset as usize..(offset + length) as usize];
        prop_assert!(buffer == expected, "read of {} bytes at {} differs from the model", length, offset);
        Ok(())
    }

    fn write(&mut self, offset: u64, length: u64, tag: u8) {
        let bytes: Vec<u8> = (0..length).map(|index| tag ^ (index / BLOCK) as u8 ^ 0x5a).collect();
        self.export().write(offset, &bytes, false).unwrap();
        self.model[offset as usize..(offset + length) as usize].copy_from_slice(&bytes);
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Sequential { stream, blocks } => {
                let offset = self.cursors[stream];
                let length = (blocks * BLOCK).min(EXTENT_BYTES - offset);
                self.check_read(offset, length)?;
                self.cursors[stream] = (offset + length) % EXTENT_BYTES;
            }
            Op::Jump { stream, block } => self.cursors[stream] = Self::span(block, 1).0,
            Op::Random { block, blocks } => {
                let (offset, length) = Self::span(block, blocks);
                self.check_read(offset, length)?;
            }
            Op::WriteAhead { stream, ahead_blocks, blocks, tag } => {
                let (offset, length) = Self::span(self.cursors[stream] / BLOCK + ahead_blocks, blocks);
                self.write(offset, length, tag);
            }
            Op::Write { block, blocks, tag } => {
                let (offset, length) = Self::span(block, blocks);
                self.write(offset, length, tag);
            }
            Op::Trim { block, blocks } => {
                let (offset, length) = Self::span(block, blocks);
                self.export().trim(offset, length, false).unwrap();
                self.model[offset as usize..(offset + length) as usize].fill(0);
            }
            Op::Flush => self.export().flush().unwrap(),
            Op::Restart => self.restart(),
        }
        Ok(())
    }
}

fn run_case(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut harness = Harness::new();
    for op in ops {
        harness.apply(op)?;
    }
    harness.check_read(0, EXTENT_BYTES)
}

#[test]
fn reads_with_read_ahead_return_what_the_volume_holds() {
    let rerun = "cargo test --release -p proxima-service --test read_ahead_matches_the_volume";
    let cases: u32 = std::env::var("PROXIMA_MODEL_CASES").ok().and_then(|value| value.parse().ok()).unwrap_or(1000);
    for seed in seeds_for_test([20_261_124], "PROXIMA_MODEL_SEED", rerun) {
        let mut seed_bytes = [0u8; 32];
        seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
        let config = Config { cases: (cases / 10).max(1), failure_persistence: None, ..Config::default() };
        let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes));
        let outcome = runner.run(&proptest::collection::vec(op_strategy(), 1..120), |ops| run_case(&ops));
        if let Err(error) = outcome {
            panic!("seed {seed}: {error}");
        }
    }
}

#[test]
fn sequential_readers_are_served_from_memory() {
    let harness = Harness::new();
    let export = harness.export();
    // Two readers, each through its own half, in 64 KiB reads, interleaved.
    let half = EXTENT_BYTES / 2;
    let mut buffer = vec![0u8; 64 << 10];
    for step in 0..half / (64 << 10) {
        for start in [0, half] {
            export.read(start + step * (64 << 10), &mut buffer).unwrap();
        }
    }
    let stats = harness.served.as_ref().unwrap().0.read_ahead_stats().expect("read-ahead is on");
    let reads = 2 * half / (64 << 10);
    assert!(stats.streams_started >= 2, "{stats:?}");
    assert!(stats.reads_from_memory >= reads * 9 / 10, "{reads} reads: {stats:?}");
    assert_eq!(stats.reads_fallen_back, 0, "{stats:?}");
}
