//! Clones share their source's blocks: divergent writes to both, clones from
//! snapshots (which break the 010 property and switch deletion scans to
//! addition), reopen, and deleting both returning exactly their space.

use crate::common;

use common::{assert_clean, memory_volume, pattern, BLOCK};
use proxima_engine::{CloneSource, Overcommit};

const EXTENT_BLOCKS: u64 = 300;

#[test]
fn a_clone_shares_every_block_and_diverges_on_write() {
    let mut volume = memory_volume(8192, 1024);
    let free_before = volume.space().data.allocatable_blocks;
    let source = volume.create_extent("a", EXTENT_BLOCKS * BLOCK as u64).unwrap();
    let original = pattern(1, EXTENT_BLOCKS as usize * BLOCK);
    volume.write(source, 0, &original, false).unwrap();
    volume.destage().unwrap();
    volume.commit().unwrap();
    let used = volume.space().data.used_blocks;
    let clone = volume.clone_extent(CloneSource::Extent("a"), "b", Overcommit::Refuse).unwrap();
    assert_eq!(volume.space().data.used_blocks, used, "a clone takes no data space");
    assert_eq!(volume.shared_bytes(), EXTENT_BLOCKS * BLOCK as u64);
    assert_eq!(volume.read(clone, 0, original.len() as u64).unwrap(), original);
    // Divergent writes: the source's first half, the clone's second.
    let half = EXTENT_BLOCKS / 2 * BLOCK as u64;
    let source_update = pattern(2, half as usize);
    let clone_update = pattern(3, half as usize);
    volume.write(source, 0, &source_update, false).unwrap();
    volume.write(clone, half, &clone_update, false).unwrap();
    volume.destage().unwrap();
    assert_eq!(volume.shared_bytes(), 0, "no block is shared any more");
    let mut expected_source = original.clone();
    expected_source[..half as usize].copy_from_slice(&source_update);
    let mut expected_clone = original.clone();
    expected_clone[half as usize..].copy_from_slice(&clone_update);
    assert_eq!(volume.read(source, 0, original.len() as u64).unwrap(), expected_source);
    assert_eq!(volume.read(clone, 0, original.len() as u64).unwrap(), expected_clone);
    assert_clean(&mut volume);
    let (data, flash) = volume.close().unwrap();
    let mut volume = proxima_engine::Volume::open(data, flash, Default::default()).unwrap();
    assert_eq!(volume.read(clone, 0, original.len() as u64).unwrap(), expected_clone);
    volume.delete_extent("a").unwrap();
    volume.delete_extent("b").unwrap();
    volume.commit().unwrap();
    assert_eq!(volume.space().data.allocatable_blocks, free_before, "deleting both frees exactly their space");
    assert_clean(&mut volume);
}

#[test]
fn deleting_the_source_keeps_the_clone_and_then_the_clone_frees_the_blocks() {
    let mut volume = memory_volume(8192, 1024);
    let free_before = volume.space().data.allocatable_blocks;
    let source = volume.create_extent("a", EXTENT_BLOCKS * BLOCK as u64).unwrap();
    let original = pattern(4, EXTENT_BLOCKS as usize * BLOCK);
    volume.write(source, 0, &original, false).unwrap();
    // Staged blocks are copied, the rest shared.
    volume.write(source, 0, &pattern(5, BLOCK), false).unwrap();
    let clone = volume.clone_extent(CloneSource::Extent("a"), "b", Overcommit::Refuse).unwrap();
    let expected = volume.read(source, 0, original.len() as u64).unwrap();
    volume.delete_extent("a").unwrap();
    assert_eq!(volume.read(clone, 0, original.len() as u64).unwrap(), expected);
    assert_eq!(volume.shared_bytes(), 0);
    assert_clean(&mut volume);
    volume.delete_extent("b").unwrap();
    volume.commit().unwrap();
    assert_eq!(volume.space().data.allocatable_blocks, free_before);
    assert_clean(&mut volume);
}

#[test]
fn a_clone_from_an_older_snapshot_breaks_the_010_property_until_its_snapshots_are_gone() {
    let mut volume = memory_volume(8192, 1024);
    let free_before = volume.space().data.allocatable_blocks;
    let source = volume.create_extent("a", EXTENT_BLOCKS * BLOCK as u64).unwrap();
    let first = pattern(6, EXTENT_BLOCKS as usize * BLOCK);
    volume.write(source, 0, &first, false).unwrap();
    volume.destage().unwrap();
    volume.create_snapshot("old").unwrap();
    let second = pattern(7, EXTENT_BLOCKS as usize * BLOCK);
    volume.write(source, 0, &second, false).unwrap();
    volume.destage().unwrap();
    volume.create_snapshot("young").unwrap();
    // "old"'s blocks are only in the summary now; the clone takes them back.
    let clone = volume.clone_extent(CloneSource::Snapshot("a", "old"), "c", Overcommit::Refuse).unwrap();
    assert_eq!(volume.read(clone, 0, first.len() as u64).unwrap(), first);
    assert_clean(&mut volume);
    // The clone lets go of them while "old" still holds them.
    volume.write(clone, 0, &pattern(8, first.len()), false).unwrap();
    volume.destage().unwrap();
    volume.delete_snapshot("young").unwrap();
    volume.finish_deletions().unwrap();
    assert_eq!(volume.read_snapshot("old", "a", 0, first.len() as u64).unwrap(), first);
    assert_clean(&mut volume);
    volume.delete_snapshot("old").unwrap();
    volume.finish_deletions().unwrap();
    assert_clean(&mut volume);
    volume.delete_extent("a").unwrap();
    volume.delete_extent("c").unwrap();
    volume.commit().unwrap();
    assert_eq!(volume.space().data.allocatable_blocks, free_before);
    assert_clean(&mut volume);
}

#[test]
fn restoring_the_volume_to_a_snapshot_restores_its_refcounts() {
    let mut volume = memory_volume(8192, 1024);
    let source = volume.create_extent("a", EXTENT_BLOCKS * BLOCK as u64).unwrap();
    volume.write(source, 0, &pattern(9, EXTENT_BLOCKS as usize * BLOCK), false).unwrap();
    volume.destage().unwrap();
    volume.clone_extent(CloneSource::Extent("a"), "b", Overcommit::Refuse).unwrap();
    volume.create_snapshot("shared").unwrap();
    volume.delete_extent("b").unwrap();
    assert_eq!(volume.shared_bytes(), 0);
    volume.restore_volume("shared").unwrap();
    assert_eq!(volume.shared_bytes(), EXTENT_BLOCKS * BLOCK as u64);
    assert_clean(&mut volume);
}
