//! Reallocate-on-read: a read of a scattered span rewrites it contiguously
//! from the bytes it read, leaves what snapshots hold unless told otherwise,
//! and never changes what any reader sees.

use proxima_device::MemoryDevice;
use proxima_engine::map::LayoutScore;
use proxima_engine::{Layout, ReadRealloc, Volume, VolumeOptions};

const BLOCK: usize = 4096;
const EXTENT_BLOCKS: u64 = 256;

fn volume(read_realloc: ReadRealloc) -> Volume<MemoryDevice, MemoryDevice> {
    let options = VolumeOptions { layout: Layout::WriteAnywhere, read_realloc, ..VolumeOptions::default() };
    Volume::format(MemoryDevice::new(4096, 8192), MemoryDevice::new(4096, 4096), 7, options).unwrap()
}

fn pattern(tag: u8, length: usize) -> Vec<u8> {
    (0..length).map(|index| tag.wrapping_add((index / 7) as u8)).collect()
}

/// An extent written whole, then every fourth block rewritten one by one
/// (each lands elsewhere: the extent is scattered). Returns its id and bytes.
fn scattered_extent(volume: &mut Volume<MemoryDevice, MemoryDevice>) -> (u64, Vec<u8>) {
    let id = volume.create_extent("lun", EXTENT_BLOCKS * BLOCK as u64).unwrap();
    let mut contents = pattern(1, EXTENT_BLOCKS as usize * BLOCK);
    volume.write(id, 0, &contents, false).unwrap();
    for block in (0..EXTENT_BLOCKS).step_by(4) {
        let bytes = pattern(block as u8 ^ 0x5a, BLOCK);
        let offset = block as usize * BLOCK;
        volume.write(id, offset as u64, &bytes, false).unwrap();
        contents[offset..offset + BLOCK].copy_from_slice(&bytes);
    }
    volume.flush().unwrap();
    (id, contents)
}

fn runs(volume: &Volume<MemoryDevice, MemoryDevice>) -> u64 {
    volume.extents().into_iter().find(|extent| extent.name == "lun").unwrap().run_count
}

#[test]
fn a_scattered_span_is_rewritten_contiguously_and_reads_the_same() {
    let mut volume = volume(ReadRealloc::ON);
    let (id, contents) = scattered_extent(&mut volume);
    let runs_before = runs(&volume);
    let score_before = volume.fsck().unwrap().layout_score();
    let span = 32 * BLOCK;
    assert!(volume.read_would_reallocate(id, 0, span as u64));
    assert_eq!(volume.read(id, 0, span as u64).unwrap(), contents[..span]);
    assert_eq!(volume.stats().reallocated_blocks, 32);
    assert!(runs(&volume) < runs_before, "the span is one run now");
    assert!(!volume.read_would_reallocate(id, 0, span as u64), "a contiguous span stays");
    assert_eq!(volume.read(id, 0, span as u64).unwrap(), contents[..span]);
    assert_eq!(volume.stats().reallocated_blocks, 32, "read again, nothing moves");
    // Durable at the next flush, and still the same bytes after a reopen.
    volume.flush().unwrap();
    // fsck scores the durable maps as status scores the live ones.
    let report = volume.fsck().unwrap();
    let live: LayoutScore = volume.extents().iter().map(|extent| extent.layout_score).sum();
    assert_eq!(report.layout_score_blocks, live);
    assert!(report.layout_score() > score_before, "{} after, {score_before} before", report.layout_score());
    let (data, flash) = volume.close().unwrap();
    let mut volume = Volume::open(data, flash, VolumeOptions::default()).unwrap();
    assert_eq!(volume.read(id, 0, EXTENT_BLOCKS * BLOCK as u64).unwrap(), contents);
    assert!(volume.fsck().unwrap().is_clean());
}

#[test]
fn a_partial_block_read_moves_only_the_whole_blocks_it_read() {
    let mut volume = volume(ReadRealloc::ON);
    let (id, contents) = scattered_extent(&mut volume);
    let (offset, length) = (BLOCK / 2, 16 * BLOCK);
    assert_eq!(volume.read(id, offset as u64, length as u64).unwrap(), contents[offset..offset + length]);
    assert_eq!(volume.stats().reallocated_blocks, 15, "blocks 1..16: the first and last are partial");
    assert_eq!(volume.read(id, 0, 17 * BLOCK as u64).unwrap(), contents[..17 * BLOCK]);
}

#[test]
fn off_nothing_moves() {
    let mut volume = volume(ReadRealloc::OFF);
    let (id, contents) = scattered_extent(&mut volume);
    assert!(!volume.read_would_reallocate(id, 0, 64 * BLOCK as u64));
    assert_eq!(volume.read(id, 0, 64 * BLOCK as u64).unwrap(), contents[..64 * BLOCK]);
    assert_eq!(volume.stats().reallocated_blocks, 0);
}

#[test]
fn blocks_a_snapshot_holds_stay_unless_allowed() {
    for (settings, moved) in [(ReadRealloc::ON, 0), (ReadRealloc { snapshot_blocks: true, ..ReadRealloc::ON }, 32)] {
        let mut volume = volume(settings);
        let (id, contents) = scattered_extent(&mut volume);
        volume.create_snapshot("before").unwrap();
        assert_eq!(volume.read(id, 0, 32 * BLOCK as u64).unwrap(), contents[..32 * BLOCK]);
        assert_eq!(volume.stats().reallocated_blocks, moved);
        // The snapshot reads what it held, wherever the live blocks went.
        let mut held = vec![0; 32 * BLOCK];
        volume.read_snapshot_into("before", "lun", 0, &mut held).unwrap();
        assert_eq!(held, contents[..32 * BLOCK]);
        volume.flush().unwrap();
        assert!(volume.fsck().unwrap().is_clean());
    }
}

/// Where reads take gaps through and the free space lies only in one-block
/// holes, a scattered span goes to holes that one read takes in one request
/// (a set skipping no more blocks than a read takes through), reads the
/// same, is one request from then on and is not moved again.
#[test]
fn with_no_free_run_a_span_gathers_into_holes_one_read_takes() {
    let options = VolumeOptions {
        layout: Layout::WriteAnywhere,
        read_realloc: ReadRealloc::ON,
        read_gap_blocks: 16,
        allocation_range_blocks: 64,
        ..VolumeOptions::default()
    };
    let mut volume = Volume::format(MemoryDevice::new(4096, 4096), MemoryDevice::new(4096, 4096), 7, options).unwrap();
    let id = volume.create_extent("lun", 64 * BLOCK as u64).unwrap();
    let mut contents = pattern(1, 64 * BLOCK);
    volume.write(id, 0, &contents, false).unwrap();
    // Blocks 0, 4, 8 and 12 rewritten far from each other: a spacer's 32
    // blocks between each two.
    let spacer = volume.create_extent("spacer", 128 * BLOCK as u64).unwrap();
    for (index, block) in [0usize, 4, 8, 12].into_iter().enumerate() {
        let bytes = pattern(block as u8 ^ 0x5a, BLOCK);
        volume.write(id, (block * BLOCK) as u64, &bytes, false).unwrap();
        contents[block * BLOCK..(block + 1) * BLOCK].copy_from_slice(&bytes);
        volume.write(spacer, (index * 32 * BLOCK) as u64, &pattern(9, 32 * BLOCK), false).unwrap();
    }
    volume.flush().unwrap();
    // The rest of the device filled, then every other filler block trimmed.
    let filler = volume.create_extent("filler", 4096 * BLOCK as u64 - volume.committed_bytes()).unwrap();
    let mut filled = 0u64;
    while volume.write(filler, filled * BLOCK as u64, &pattern(3, BLOCK), false).is_ok() {
        filled += 1;
    }
    assert!(filled > 1000, "the filler took the free space: {filled} blocks");
    for block in (0..filled).step_by(2) {
        volume.trim(filler, block * BLOCK as u64, BLOCK as u64, false).unwrap();
    }
    volume.flush().unwrap();
    volume.commit().unwrap();

    let span = 16 * BLOCK as u64;
    let runs_before = runs(&volume);
    assert!(volume.read_would_reallocate(id, 0, span), "five requests: the old place and four far blocks");
    assert_eq!(volume.read(id, 0, span).unwrap(), contents[..16 * BLOCK]);
    assert_eq!(volume.stats().reallocated_blocks, 16, "gathered into holes");
    assert_eq!(volume.stats().reallocation_skipped_blocks, 0);
    // Every other block is a hole: blocks 0..16 are 16 one-block runs now,
    // and 16..64 still one (8 runs before: four far blocks, four between).
    assert_eq!((runs_before, runs(&volume)), (8, 17), "not one contiguous run: none was free");
    assert!(!volume.read_would_reallocate(id, 0, span), "one request now: it stays");
    assert_eq!(volume.read(id, 0, span).unwrap(), contents[..16 * BLOCK]);
    assert_eq!(volume.stats().reallocated_blocks, 16, "read again, nothing moves");
    volume.flush().unwrap();
    let (data, flash) = volume.close().unwrap();
    let mut volume = Volume::open(data, flash, VolumeOptions::default()).unwrap();
    assert_eq!(volume.read(id, 0, 64 * BLOCK as u64).unwrap(), contents);
    assert!(volume.fsck().unwrap().is_clean());
}
