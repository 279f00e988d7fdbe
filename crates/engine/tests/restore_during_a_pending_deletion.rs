//! Restoring the volume while a snapshot deletion is still scanning.
//!
//! Restore rebuilds the summary map by addition over the snapshots that
//! remain. It used to add every remaining snapshot's blocks, the one being
//! deleted included, on every page, so the blocks only that snapshot held on
//! pages its scan had already passed stayed in the summary for ever: fsck
//! reported `SummaryExcess` once the deletion finished, and `status` showed
//! space held by no snapshot (found by the model-based test, seed 90210:
//! create, write, destage, snapshot s0, write, snapshot s1, delete s0,
//! restore s1). A deleting snapshot now counts only for the pages its scan
//! will still visit, and fsck checks that bound while deletions are pending.

use crate::common;

use common::{assert_clean, pattern, BLOCK};
use proxima_device::MemoryDevice;
use proxima_engine::{Volume, VolumeOptions};

/// Six activemap pages, so a deletion scan takes six CPs.
const DATA_BLOCKS: u64 = 6 * 32_384;

fn options() -> VolumeOptions {
    VolumeOptions { scan_pages_per_checkpoint: 1, ..VolumeOptions::default() }
}

fn volume() -> Volume<MemoryDevice, MemoryDevice> {
    Volume::format(MemoryDevice::new(4096, DATA_BLOCKS), MemoryDevice::new(4096, 1024), 77, options()).unwrap()
}

fn assert_no_space_held_by_nothing(volume: &mut Volume<MemoryDevice, MemoryDevice>) {
    volume.finish_deletions().unwrap();
    assert_clean(volume);
    for snapshot in volume.snapshots() {
        volume.delete_snapshot(&snapshot.name).unwrap();
    }
    volume.finish_deletions().unwrap();
    let space = volume.space();
    assert_eq!(space.data.snapshot_only_blocks, 0, "{space:?}");
    assert_eq!(space.flash.snapshot_only_blocks, 0, "{space:?}");
    assert_clean(volume);
}

#[test]
fn restore_while_an_older_snapshot_is_being_deleted_leaks_nothing() {
    let mut volume = volume();
    let id = volume.create_extent("a", BLOCK as u64).unwrap();
    volume.write(id, 0, &pattern(1, BLOCK), false).unwrap();
    volume.destage().unwrap();
    volume.create_snapshot("s0").unwrap();
    volume.write(id, 0, &pattern(2, BLOCK), false).unwrap();
    volume.create_snapshot("s1").unwrap();
    volume.delete_snapshot("s0").unwrap();
    assert_eq!(volume.pending_deletions(), 1, "the scan takes several CPs");
    volume.restore_volume("s1").unwrap();
    assert_clean(&mut volume);
    assert!(volume.read(id, 0, BLOCK as u64).unwrap() == pattern(2, BLOCK));
    assert_no_space_held_by_nothing(&mut volume);
}

#[test]
fn a_crash_during_a_deletion_then_restore_and_delete_leaks_nothing() {
    let mut volume = volume();
    let id = volume.create_extent("a", 64 * BLOCK as u64).unwrap();
    volume.write(id, 0, &pattern(1, 64 * BLOCK), false).unwrap();
    volume.destage().unwrap();
    volume.create_snapshot("s1").unwrap();
    volume.write(id, 8 * BLOCK as u64, &pattern(2, 8 * BLOCK), false).unwrap();
    volume.destage().unwrap();
    volume.create_snapshot("s2").unwrap();
    volume.delete_snapshot("s1").unwrap();
    // What a kill leaves: the deletion recorded, its scan part way.
    let (data, flash) = volume.into_devices();
    let mut volume = Volume::open(data, flash, options()).unwrap();
    assert_eq!(volume.pending_deletions(), 1, "the scan takes several CPs");
    volume.restore_volume("s2").unwrap();
    volume.delete_snapshot("s2").unwrap();
    let mut expected = pattern(1, 64 * BLOCK);
    expected[8 * BLOCK..16 * BLOCK].copy_from_slice(&pattern(2, 8 * BLOCK));
    assert!(volume.read(id, 0, 64 * BLOCK as u64).unwrap() == expected);
    assert_no_space_held_by_nothing(&mut volume);
}
