//! A 4+1 RAID-4 of metadata-only simulated Cheetah 15K.5 drives: each batch from
//! above becomes one batch per member, the members work in parallel in virtual
//! time, and per-member statistics account the I/O without payload.

use std::sync::Arc;

use proxima_device::{
    BlockDevice, IoRequest, RaidConfig, RaidDevice, SimulatedDevice, SimulatedOptions, SimulationHandle,
};
use proxima_disk::{DiskModel, HardDisk, Simulation};

const SEED: u64 = 42;

fn array(handle: &SimulationHandle) -> RaidDevice<SimulatedDevice> {
    let model = Arc::new(DiskModel::builtin("cheetah15k5").unwrap());
    let members = (0..5)
        .map(|index| {
            let disk = HardDisk::new(model.clone(), handle.with_simulation(|simulation| simulation.device_seed(index)));
            let options = SimulatedOptions::named(format!("disk{index}")).metadata_only();
            SimulatedDevice::hard_disk(handle, disk, options).unwrap()
        })
        .collect();
    RaidDevice::new(members, RaidConfig::raid4()).unwrap()
}

#[test]
fn a_full_stripe_write_is_one_parallel_write_per_member() {
    let handle = SimulationHandle::new(Simulation::new(SEED));
    let mut raid = array(&handle);
    assert!(!raid.info().stores_payload);
    let stripe_blocks = 4 * 256; // four 1 MiB units of 4 KiB blocks
    let completions = raid.execute(vec![IoRequest::write(stripe_blocks, stripe_blocks as u32, Vec::new())]).unwrap();
    let stats = raid.take_member_stats();
    for member in &stats {
        assert_eq!((member.reads.request_count, member.writes.request_count), (0, 1), "{}", member.device);
        assert_eq!(member.writes.block_count, 256);
    }
    let slowest_member_ns = stats.iter().map(|member| member.last_completed_ns.unwrap()).max().unwrap();
    let busy_sum_ns: u64 = stats.iter().map(|member| member.busy_ns).sum();
    assert_eq!(completions[0].completed_ns, slowest_member_ns, "the write completes with its slowest member");
    assert!(completions[0].response_ns() < busy_sum_ns / 2, "members overlap in virtual time");
}

#[test]
fn a_partial_stripe_write_reads_old_data_and_parity_first() {
    let handle = SimulationHandle::new(Simulation::new(SEED));
    let mut raid = array(&handle);
    let batch = vec![IoRequest::write(5, 1, Vec::new()), IoRequest::write(7, 2, Vec::new())];
    raid.execute(batch).unwrap();
    let stats = raid.take_member_stats();
    let counts: Vec<(u64, u64)> =
        stats.iter().map(|member| (member.reads.request_count, member.writes.request_count)).collect();
    // Blocks 5, 7 and 8 lie on member 0 (rows 5, 7, 8): read-modify-write reads
    // them and the parity of the same rows, two runs each, then writes them back.
    assert_eq!(counts, vec![(2, 2), (0, 0), (0, 0), (0, 0), (2, 2)]);
    assert_eq!(stats[4].writes.block_count, 3, "one parity update per row, coalesced");
}
