//! Several snapshot deletions in progress at once, with the active tree
//! freeing blocks the deleted snapshots held: every such block is reclaimed
//! when the deletions finish (no block left in the summary that nothing
//! uses), whatever the order of deletion and the layout. One scan runs at a
//! time (the oldest deletion first), so a younger deletion's scan may have
//! passed a page before an older one starts, and a block freed afterwards
//! must not be left to a scan that never returns to its page.

use crate::common;

use common::{assert_clean, pattern, BLOCK};
use proxima_device::MemoryDevice;
use proxima_engine::{Layout, Volume, VolumeOptions};

/// Three activemap pages, so each scan takes several CPs.
const DATA_BLOCKS: u64 = 3 * 32_384;

fn volume(layout: Layout, staging_threshold_bytes: u64) -> Volume<MemoryDevice, MemoryDevice> {
    let options =
        VolumeOptions { layout, staging_threshold_bytes, scan_pages_per_checkpoint: 1, ..VolumeOptions::default() };
    Volume::format(MemoryDevice::new(4096, DATA_BLOCKS), MemoryDevice::new(4096, 256), 77, options).unwrap()
}

fn run(layout: Layout, staging_threshold_bytes: u64, deletion_order: &[&str]) {
    let mut volume = volume(layout, staging_threshold_bytes);
    let id = volume.create_extent("lun0", 64 * BLOCK as u64).unwrap();
    volume.write(id, 0, &pattern(1, 64 * BLOCK), false).unwrap();
    for name in ["s1", "s2", "s3"] {
        volume.create_snapshot(name).unwrap();
    }
    for name in deletion_order {
        volume.delete_snapshot(name).unwrap();
    }
    // Overwrites free blocks every snapshot held, while the scans are under way.
    volume.write(id, 0, &pattern(2, 1), false).unwrap();
    volume.write(id, 8 * BLOCK as u64, &pattern(3, 4 * BLOCK), false).unwrap();
    volume.finish_deletions().unwrap();
    // fsck finds any block left in the summary that no snapshot uses.
    assert_clean(&mut volume);
    let label = format!("{layout:?}, threshold {staging_threshold_bytes}, deleting {deletion_order:?}");
    for snapshot in volume.snapshots() {
        volume.delete_snapshot(&snapshot.name).unwrap();
    }
    volume.finish_deletions().unwrap();
    let space = volume.space();
    assert_eq!(space.data.snapshot_only_blocks, 0, "{label}: {space:?}");
    assert_eq!(space.flash.snapshot_only_blocks, 0, "{label}: {space:?}");
    assert_clean(&mut volume);
    let mut expected = pattern(1, 64 * BLOCK);
    expected[..1].copy_from_slice(&pattern(2, 1));
    expected[8 * BLOCK..12 * BLOCK].copy_from_slice(&pattern(3, 4 * BLOCK));
    assert!(volume.read(id, 0, 64 * BLOCK as u64).unwrap() == expected, "{label}: contents");
}

#[test]
fn blocks_freed_during_interleaved_deletions_are_reclaimed() {
    let orders: [&[&str]; 6] = [
        &["s3", "s2"],
        &["s3", "s1"],
        &["s3", "s2", "s1"],
        &["s3", "s1", "s2"],
        &["s2", "s3", "s1"],
        &["s1", "s3", "s2"],
    ];
    for order in orders {
        run(Layout::Proximal, 0, order);
        run(Layout::Proximal, 168 * 1024, order);
        run(Layout::InPlace, 0, order);
        run(Layout::WriteAnywhere, 0, order);
    }
}
