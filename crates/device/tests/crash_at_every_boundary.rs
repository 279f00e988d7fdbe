//! Crash recording at every write boundary of seeded workloads, checked against an
//! independent model of what may survive: every write made durable (by a later
//! flush or by FUA) before the boundary survives unless a later write to the same
//! block could have replaced it; nothing written after the boundary appears except
//! sectors of the one torn write; each sector holds a value some admissible write
//! put there.

use std::collections::BTreeMap;

use proxima_device::{BlockDevice, CrashDevice, CrashPoint, IoRequest, MemoryDevice, PendingWrites, Tear};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const BLOCK_SIZE: usize = 4096;
const SECTOR_SIZE: usize = 512;
const BLOCK_COUNT: u64 = 8;

/// One completed write as the workload saw it.
#[derive(Debug, Clone)]
struct Write {
    block: u64,
    data: Vec<u8>,
    /// Number of flushes that had completed before this write completed.
    flushes_before: usize,
    fua: bool,
}

struct Workload {
    writes: Vec<Write>,
    /// For each flush, the number of writes completed before it.
    flush_after_writes: Vec<usize>,
    device: CrashDevice<MemoryDevice>,
}

fn run_workload(seed: u64) -> Workload {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut device = CrashDevice::new(MemoryDevice::new(BLOCK_SIZE as u32, BLOCK_COUNT));
    let mut writes = Vec::new();
    let mut flush_after_writes = Vec::new();
    for _ in 0..40 {
        if rng.gen_bool(0.2) {
            device.flush().unwrap();
            flush_after_writes.push(writes.len());
            continue;
        }
        let block = rng.gen_range(0..BLOCK_COUNT);
        let mut data = vec![0; BLOCK_SIZE];
        rng.fill(&mut data[..]);
        let fua = rng.gen_bool(0.1);
        let request = IoRequest::write(block, 1, data.clone());
        let request = if fua { request.with_fua() } else { request };
        device.execute(vec![request]).unwrap()[0].result.as_ref().unwrap();
        writes.push(Write { block, data, flushes_before: flush_after_writes.len(), fua });
    }
    Workload { writes, flush_after_writes, device }
}

impl Workload {
    fn is_durable_at(&self, index: usize, boundary: usize) -> bool {
        let write = &self.writes[index];
        write.fua
            || self.flush_after_writes[write.flushes_before..].iter().any(|&after| after <= boundary && after > index)
    }

    /// Candidate contents of `block` at `boundary` (before any tear): the last
    /// durable write (or zeroes) and every later, pending write.
    fn candidates(&self, block: u64, boundary: usize) -> Vec<Vec<u8>> {
        let to_block: Vec<usize> = (0..boundary).filter(|&index| self.writes[index].block == block).collect();
        let last_durable = to_block.iter().rposition(|&index| self.is_durable_at(index, boundary));
        let mut candidates = vec![match last_durable {
            Some(position) => self.writes[to_block[position]].data.clone(),
            None => vec![0; BLOCK_SIZE],
        }];
        let first_pending = last_durable.map_or(0, |position| position + 1);
        // A pending write before the last durable one may also have landed after
        // it on the medium only if it is not durable itself; the device keeps
        // completion order for kept writes, so it cannot overwrite a later one.
        candidates.extend(to_block[first_pending..].iter().map(|&index| self.writes[index].data.clone()));
        candidates
    }
}

fn check_image(workload: &Workload, point: CrashPoint, seed: u64) {
    let boundary = point.boundary as usize;
    let image = workload.device.crash_image(point);
    let torn = image.report.torn.map(|torn| &workload.writes[torn.write_index as usize]);
    for block in 0..BLOCK_COUNT {
        let contents = image.blocks.get(&block).cloned().unwrap_or_else(|| vec![0; BLOCK_SIZE]);
        let mut candidates = workload.candidates(block, boundary);
        if let Some(torn) = torn.filter(|torn| torn.block == block) {
            candidates.push(torn.data.clone());
        }
        for (sector, bytes) in contents.chunks(SECTOR_SIZE).enumerate() {
            let range = sector * SECTOR_SIZE..(sector + 1) * SECTOR_SIZE;
            assert!(
                candidates.iter().any(|candidate| candidate[range.clone()] == *bytes),
                "seed {seed} {point:?}: block {block} sector {sector} holds a value no admissible write put there"
            );
        }
        if point.pending == PendingWrites::DropAll && torn.is_none_or(|torn| torn.block != block) {
            assert!(contents == candidates[0], "seed {seed} {point:?}: block {block} is not its last durable value");
        }
    }
}

#[test]
fn every_boundary_of_seeded_workloads_leaves_an_admissible_state() {
    let mut crash_points = 0;
    for seed in 0..30 {
        let workload = run_workload(seed);
        assert_eq!(workload.device.write_count() as usize, workload.writes.len());
        for boundary in 0..workload.device.boundary_count() {
            for point in [
                CrashPoint::clean_at(boundary),
                CrashPoint::torn_at(boundary, seed ^ boundary),
                CrashPoint {
                    boundary,
                    pending: PendingWrites::KeepSeeded { seed: seed + boundary },
                    tear: Some(Tear::Seeded { seed }),
                },
            ] {
                check_image(&workload, point, seed);
                crash_points += 1;
            }
        }
    }
    println!("{crash_points} crash points exercised over seeds 0..30");
    assert!(crash_points > 1000, "{crash_points} crash points exercised");
}

#[test]
fn crash_now_then_recording_restarts() {
    let mut workload = run_workload(99);
    let durable: BTreeMap<u64, Vec<u8>> =
        (0..BLOCK_COUNT).map(|block| (block, workload.candidates(block, workload.writes.len())[0].clone())).collect();
    let report = workload.device.crash_at(CrashPoint::clean_at(workload.device.write_count())).unwrap();
    assert_eq!(report.kept_pending_count, 0);
    for (block, contents) in &durable {
        assert!(workload.device.read_blocks(*block, 1).unwrap() == *contents, "block {block}");
    }
    assert_eq!(workload.device.write_count(), 0, "a new recording starts");
    // A single pending write, then a crash that may keep it, drop it or tear it.
    workload.device.write_blocks(0, &[5; BLOCK_SIZE]).unwrap();
    workload.device.crash(1).unwrap();
    let block0 = workload.device.read_blocks(0, 1).unwrap();
    for (sector, bytes) in block0.chunks(SECTOR_SIZE).enumerate() {
        let before = &durable[&0][sector * SECTOR_SIZE..(sector + 1) * SECTOR_SIZE];
        assert!(bytes == [5; SECTOR_SIZE] || bytes == before, "sector {sector} is neither old nor new");
    }
}
