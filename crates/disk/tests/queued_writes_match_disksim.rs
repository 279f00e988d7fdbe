//! Strands of write-back writes issued at once on the Cheetah 15K.5 (its
//! shipped settings: `Fast write level = 2`, zero-latency writes, SPTF over a
//! queue of 8), against DiskSim 4.0 on the same requests (docs/disk-model.md,
//! "Queued write-back writes against DiskSim").
//!
//! The drive decodes each command as it arrives, so a write chosen from the
//! queue takes its data at once, reports completion, and positions for it
//! while the data cross the bus; SPTF chooses with the same timing it then
//! runs. DiskSim's figures come from DiskSim 4.0 replaying these strands (the
//! generator below, written out as an ASCII trace: `time 0 lbn 8 0` lines).

use std::sync::Arc;

use proxima_disk::{DiskModel, DiskOp, DiskRequest, HardDisk, Nanos};

/// SplitMix64, the generator the DiskSim trace was written with.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// `count` strands of `size` distinct 8-sector writes at random 8-sector
/// offsets within `span` sectors of a random base, each strand issued at once
/// and `gap_ms` after the previous one: (arrival, LBN) in issue order.
fn strands(seed: u64, count: u64, size: usize, span: u64, gap_ms: u64) -> Vec<(Nanos, u64)> {
    const BASE_LIMIT: u64 = 280_000_000;
    let mut random = SplitMix(seed);
    let mut requests = Vec::new();
    for strand in 0..count {
        let base = random.next() % (BASE_LIMIT - span) / 8 * 8;
        let mut offsets: Vec<u64> = Vec::with_capacity(size);
        while offsets.len() < size {
            let offset = random.next() % (span / 8) * 8;
            if !offsets.contains(&offset) {
                offsets.push(offset);
            }
        }
        requests.extend(offsets.into_iter().map(|offset| (strand * gap_ms * 1_000_000, base + offset)));
    }
    requests
}

/// The mean time from a strand's issue to its last completion, in ms.
fn mean_strand_ms(requests: &[(Nanos, u64)], size: usize) -> f64 {
    let model = Arc::new(DiskModel::builtin("cheetah15k5").unwrap());
    let mut disk = HardDisk::new(model, 0);
    let mut completions = Vec::new();
    for (id, &(arrival_ns, lbn)) in requests.iter().enumerate() {
        disk.advance(arrival_ns, &mut completions);
        disk.arrive(arrival_ns, DiskRequest { id: id as u64, op: DiskOp::Write, lbn, sector_count: 8 });
    }
    while let Some(next_ns) = disk.next_event_ns() {
        disk.advance(next_ns, &mut completions);
    }
    assert_eq!(completions.len(), requests.len());
    let mut strand_end_ns = vec![0; requests.len() / size];
    for completion in &completions {
        let strand = completion.id as usize / size;
        strand_end_ns[strand] = strand_end_ns[strand].max(completion.completion_ns - completion.arrival_ns);
    }
    strand_end_ns.iter().sum::<Nanos>() as f64 / strand_end_ns.len() as f64 / 1e6
}

#[test]
fn sparse_strands_take_as_long_as_in_disksim() {
    // 500 strands of 8 within 100,000 sectors, 300 ms apart (seed 1):
    // DiskSim 16.63 ms per strand. As reads the same strands agree too; before
    // commands were decoded on arrival the writes took 23.5 ms.
    let mean_ms = mean_strand_ms(&strands(1, 500, 8, 100_000, 300), 8);
    let ratio = mean_ms / 16.63;
    assert!((0.95..=1.05).contains(&ratio), "{mean_ms:.2} ms per strand, DiskSim 16.63 ms ({ratio:.3}×)");
}

#[test]
fn dense_strands_are_no_slower_than_in_disksim() {
    // 100 strands of 64 within 20,000 sectors, 500 ms apart (seed 2): DiskSim
    // 88.09 ms per strand. DiskSim loses a revolution on about one choice in
    // 25, where its own SPTF estimate had the head arrive within a sector
    // before the first one (docs/disk-model.md): the model, which runs what
    // it estimates, is up to 15 % faster, never slower.
    let mean_ms = mean_strand_ms(&strands(2, 100, 64, 20_000, 500), 64);
    let ratio = mean_ms / 88.09;
    assert!((0.85..=1.0).contains(&ratio), "{mean_ms:.2} ms per strand, DiskSim 88.09 ms ({ratio:.3}×)");
}
