//! A drive already added to a simulation can have its arm placed without I/O:
//! the next request then seeks from there, and the clock does not move. Devices
//! without heads (flash) ignore the call.

use std::sync::Arc;

use proxima_disk::{DiskModel, DiskOp, DiskRequest, FlashDevice, FlashParams, HardDisk, Simulation};

const FAR_LBN: u64 = 1_900_000_000;

/// Response time of one 4 KiB read at `FAR_LBN` after the arm was placed over `arm_lbn`
/// (or left at rest, over LBN 0).
fn read_far_after_moving_to(arm_lbn: Option<u64>) -> u64 {
    let model = Arc::new(DiskModel::builtin("nearline7200").unwrap());
    let mut simulation = Simulation::new(7);
    let disk = simulation.add_device(Box::new(HardDisk::new(model, 7)));
    simulation.advance_to(1_000_000);
    if let Some(lbn) = arm_lbn {
        simulation.move_heads_to(disk, lbn);
        assert_eq!(simulation.now_ns(), 1_000_000, "moving the arm takes no virtual time");
    }
    simulation.submit(disk, DiskRequest { id: 1, op: DiskOp::Read, lbn: FAR_LBN, sector_count: 8 });
    let (_, completion) = simulation.next_completion().unwrap();
    completion.response_ns()
}

#[test]
fn the_next_request_seeks_from_where_the_arm_was_placed() {
    let model = DiskModel::builtin("nearline7200").unwrap();
    let from_rest_ns = read_far_after_moving_to(None);
    let from_nearby_ns = read_far_after_moving_to(Some(FAR_LBN + 64));
    // From its own track the read waits at most a revolution plus overheads; from
    // LBN 0 it also pays a long seek, longer than that revolution.
    assert!(from_nearby_ns < model.revolution_ns() + 2_000_000, "nearby read took {from_nearby_ns} ns");
    assert!(
        from_rest_ns > from_nearby_ns + model.revolution_ns() / 2,
        "a long seek ({from_rest_ns} ns) against none ({from_nearby_ns} ns)"
    );
}

#[test]
fn devices_without_heads_ignore_the_move() {
    let mut simulation = Simulation::new(1);
    let flash = simulation.add_device(Box::new(FlashDevice::new(FlashParams {
        read_latency_ns: 50_000,
        write_latency_ns: 200_000,
        bandwidth_bytes_per_second: 400_000_000,
        channel_count: 1,
        page_size_bytes: 4096,
        sector_count: 1 << 20,
    })));
    simulation.move_heads_to(flash, 12_345);
    simulation.submit(flash, DiskRequest { id: 1, op: DiskOp::Read, lbn: 0, sector_count: 8 });
    let (_, completion) = simulation.next_completion().unwrap();
    assert_eq!(completion.response_ns(), 50_000 + 10_240);
}

#[test]
#[should_panic(expected = "must be idle")]
fn a_busy_drive_refuses_the_move() {
    let model = Arc::new(DiskModel::builtin("nearline7200").unwrap());
    let mut simulation = Simulation::new(1);
    let disk = simulation.add_device(Box::new(HardDisk::new(model, 1)));
    simulation.submit(disk, DiskRequest { id: 1, op: DiskOp::Read, lbn: FAR_LBN, sector_count: 8 });
    simulation.move_heads_to(disk, 0);
}
