//! The same seed and requests give the same completions, bit for bit, through
//! the simulation clock with several devices; another seed changes the timing.

use std::sync::Arc;

use proxima_disk::closed_loop::Random;
use proxima_disk::{DiskCompletion, DiskModel, DiskOp, DiskRequest, FlashDevice, FlashParams, HardDisk, Simulation};

fn run(seed: u64) -> Vec<(usize, DiskCompletion)> {
    let model = Arc::new(DiskModel::builtin("cheetah15k5").unwrap());
    let mut simulation = Simulation::new(seed);
    let disks: Vec<_> = (0..3)
        .map(|index| {
            let device_seed = simulation.device_seed(index);
            simulation.add_device(Box::new(HardDisk::new(model.clone(), device_seed)))
        })
        .collect();
    let flash = simulation.add_device(Box::new(FlashDevice::new(FlashParams {
        read_latency_ns: 60_000,
        write_latency_ns: 250_000,
        bandwidth_bytes_per_second: 400_000_000,
        channel_count: 4,
        page_size_bytes: 4096,
        sector_count: 1 << 24,
    })));
    let mut random = Random::new(seed);
    let mut results = Vec::new();
    for batch in 0..20u64 {
        for (index, &disk) in disks.iter().enumerate() {
            for request in 0..4u64 {
                let lbn = random.below(model.sector_count() / 8) * 8;
                let op = if random.below(3) == 0 { DiskOp::Write } else { DiskOp::Read };
                let id = batch * 100 + index as u64 * 10 + request;
                simulation.submit(disk, DiskRequest { id, op, lbn, sector_count: 8 });
            }
        }
        simulation.submit(flash, DiskRequest { id: batch, op: DiskOp::Write, lbn: batch * 8, sector_count: 8 });
        while let Some((device, completion)) = simulation.next_completion() {
            assert!(completion.completion_ns >= completion.start_ns && completion.start_ns >= completion.arrival_ns);
            results.push((device.0, completion));
        }
        let now = simulation.now_ns();
        simulation.advance_to(now + 1_000_000);
    }
    assert!(simulation.is_idle());
    results
}

#[test]
fn same_seed_same_completions() {
    let first = run(7);
    assert_eq!(first.len(), 20 * 13);
    assert_eq!(first, run(7));
    assert_ne!(first, run(8));
}

#[test]
fn completions_come_in_time_order() {
    let completions = run(3);
    assert!(completions.windows(2).all(|pair| pair[0].1.completion_ns <= pair[1].1.completion_ns));
}
