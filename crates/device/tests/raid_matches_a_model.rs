//! RAID-4 and RAID-5 against a flat in-memory model: random batches of writes,
//! trims and reads, with and without a failed member, then a rebuild, with and
//! without zone checksums. After every batch the contents match the model, (with
//! every member present) parity is consistent, and every zone checksum matches its
//! block. Seeds 0..PROXIMA_RAID_SEEDS (default 40) and one fresh seed per run
//! (printed); PROXIMA_RAID_SEED runs one seed alone.

use proxima_device::{seeds_for_test, BlockDevice, IoOp, IoRequest, MemoryDevice, RaidConfig, RaidDevice, RaidLevel};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const BLOCK_SIZE: usize = 512;
const MEMBER_BLOCKS: u64 = 48;
const DEFAULT_SEED_COUNT: u64 = 40;

fn seed_count() -> u64 {
    std::env::var("PROXIMA_RAID_SEEDS").ok().and_then(|value| value.parse().ok()).unwrap_or(DEFAULT_SEED_COUNT)
}

struct Case {
    raid: RaidDevice<MemoryDevice>,
    model: Vec<u8>,
    rng: ChaCha8Rng,
    seed: u64,
}

impl Case {
    fn new(seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let level = if rng.gen_bool(0.5) { RaidLevel::Raid4 } else { RaidLevel::Raid5 };
        let member_count = rng.gen_range(2..=5);
        let unit_blocks = [1u64, 2, 4, 8][rng.gen_range(0..4)];
        let members = (0..member_count).map(|_| MemoryDevice::new(BLOCK_SIZE as u32, MEMBER_BLOCKS)).collect();
        let zone_data_blocks = [None, Some(1), Some(3), Some(5)][rng.gen_range(0..4)];
        let config = RaidConfig { level, stripe_unit_bytes: unit_blocks * BLOCK_SIZE as u64, zone_data_blocks };
        let raid = RaidDevice::new(members, config).unwrap();
        let model = vec![0; raid.info().block_count as usize * BLOCK_SIZE];
        Self { raid, model, rng, seed }
    }

    fn random_request(&mut self) -> IoRequest {
        let block_count = self.raid.info().block_count;
        let length = self.rng.gen_range(1..=12u64).min(block_count);
        let block = self.rng.gen_range(0..=block_count - length);
        match self.rng.gen_range(0..10) {
            0..=4 => {
                let mut data = vec![0; length as usize * BLOCK_SIZE];
                self.rng.fill(&mut data[..]);
                IoRequest::write(block, length as u32, data)
            }
            5 => IoRequest::trim(block, length as u32),
            6 => IoRequest::write_zeroes(block, length as u32),
            _ => IoRequest::read(block, length as u32),
        }
    }

    /// Runs one batch whose writes do not overlap (the order within a batch is
    /// unspecified), checking reads against the model as of before the batch.
    fn run_batch(&mut self) {
        let mut batch: Vec<IoRequest> = Vec::new();
        for _ in 0..self.rng.gen_range(1..=6) {
            let request = self.random_request();
            let overlaps = |other: &IoRequest| request.block < other.end_block() && other.block < request.end_block();
            if batch.iter().any(|other| overlaps(other) && (other.op != IoOp::Read || request.op != IoOp::Read)) {
                continue;
            }
            batch.push(request);
        }
        let completions = self.raid.execute(batch.clone()).unwrap();
        for (request, completion) in batch.iter().zip(completions) {
            let range = request.block as usize * BLOCK_SIZE..request.end_block() as usize * BLOCK_SIZE;
            let data = completion.result.unwrap_or_else(|error| panic!("seed {}: {error}", self.seed));
            match request.op {
                IoOp::Read => {
                    assert!(data == self.model[range], "seed {}: read of {:?} differs", self.seed, request.block)
                }
                IoOp::Write => self.model[range].copy_from_slice(&request.data),
                IoOp::Trim | IoOp::WriteZeroes => self.model[range].fill(0),
            }
        }
    }

    fn check(&mut self) {
        let block_count = self.raid.info().block_count as u32;
        assert!(self.raid.read_blocks(0, block_count).unwrap() == self.model, "seed {}: contents differ", self.seed);
        if self.raid.failed_member().is_none() {
            assert_eq!(self.raid.verify_parity().unwrap(), vec![], "seed {}: parity inconsistent", self.seed);
        }
        assert_eq!(self.raid.verify_zone_checksums().unwrap(), vec![], "seed {}: checksums inconsistent", self.seed);
    }
}

#[test]
fn raid_contents_and_parity_match_the_model() {
    let rerun = "cargo test --release -p proxima-device --test integration raid_matches_a_model::";
    for seed in seeds_for_test(0..seed_count(), "PROXIMA_RAID_SEED", rerun) {
        let mut case = Case::new(seed);
        for _ in 0..15 {
            case.run_batch();
            case.check();
        }
        let failed = case.rng.gen_range(0..case.raid.member_count());
        case.raid.fail_member(failed).unwrap();
        for _ in 0..15 {
            case.run_batch();
            case.check();
        }
        case.raid.rebuild(MemoryDevice::new(BLOCK_SIZE as u32, MEMBER_BLOCKS)).unwrap();
        case.check();
        for _ in 0..5 {
            case.run_batch();
            case.check();
        }
    }
}
