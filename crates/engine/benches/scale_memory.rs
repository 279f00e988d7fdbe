//! Memory of the paper's SRARW experiment at a fraction of its size, to size
//! `--scale 1` (4 × 1 TB data disks 89 % full of 16 MiB extents, each aged by
//! 2000 random 4 KiB updates staged in a flash staging area).
//!
//! `cargo bench -p proxima-engine --bench scale_memory -- --scale 0.01 --staging-percent 10 --seed 1`
//!
//! Payload-less volume (metadata-only data device, a flash device that keeps
//! its non-zero blocks, so the metadata's size on flash is seen beside the
//! engine's own heap; the laboratory's flash keeps none). Prints one JSON object: peak
//! heap bytes, the heap after aging, bytes per extent and per map run at the
//! peak, and the linear extrapolation to scale 1 (every term grows with the
//! data device: extents, staged blocks, bitmaps).

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use proxima_device::{
    validate_request, BatchTicket, BlockDevice, DeviceError, DeviceInfo, IoCompletion, IoOp, IoRequest,
};
use proxima_engine::{Volume, VolumeOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

struct CountingAllocator;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);
static PEAK_BYTES: AtomicIsize = AtomicIsize::new(0);

fn note(delta: isize) {
    let live = LIVE_BYTES.fetch_add(delta, Ordering::Relaxed) + delta;
    PEAK_BYTES.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: every method forwards to the system allocator unchanged and only
// counts bytes on the side.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        note(-(layout.size() as isize));
        // SAFETY: the pointer came from `alloc` with this layout.
        unsafe { System.dealloc(pointer, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size as isize - layout.size() as isize);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(pointer, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const BLOCK_BYTES: u64 = 4096;
const EXTENT_BLOCKS: u64 = 4096;
const UPDATES_PER_EXTENT: u64 = 2000;
/// Four 1 TB (10^12 bytes) data disks.
const SCALE_ONE_DATA_BLOCKS: u64 = 4 * 1_000_000_000_000 / BLOCK_BYTES;

/// A device that completes every request at once; reads return zeroes, or no
/// bytes when it keeps no payload.
#[derive(Debug)]
struct SparseDevice {
    info: DeviceInfo,
    /// Non-zero blocks, when payload is kept.
    blocks: HashMap<u64, Box<[u8]>>,
    completed: BTreeMap<u64, Vec<IoCompletion>>,
    next_ticket: u64,
}

impl SparseDevice {
    fn new(name: &str, block_count: u64, stores_payload: bool) -> Self {
        let info = DeviceInfo {
            name: name.into(),
            block_size_bytes: BLOCK_BYTES as u32,
            block_count,
            atomic_write_bytes: 512,
            stores_payload,
        };
        Self { info, blocks: HashMap::new(), completed: BTreeMap::new(), next_ticket: 0 }
    }

    fn apply(&mut self, request: &IoRequest) -> Vec<u8> {
        if !self.info.stores_payload {
            return Vec::new();
        }
        let block_bytes = BLOCK_BYTES as usize;
        match request.op {
            IoOp::Read => {
                let mut data = vec![0; request.block_count as usize * block_bytes];
                for offset in 0..u64::from(request.block_count) {
                    if let Some(stored) = self.blocks.get(&(request.block + offset)) {
                        let at = offset as usize * block_bytes;
                        data[at..at + block_bytes].copy_from_slice(stored);
                    }
                }
                data
            }
            IoOp::Write => {
                for (offset, chunk) in request.data.chunks(block_bytes).enumerate() {
                    let block = request.block + offset as u64;
                    if chunk.iter().all(|&byte| byte == 0) {
                        self.blocks.remove(&block);
                    } else {
                        self.blocks.insert(block, chunk.into());
                    }
                }
                Vec::new()
            }
            IoOp::Trim | IoOp::WriteZeroes => {
                (request.block..request.end_block()).for_each(|block| drop(self.blocks.remove(&block)));
                Vec::new()
            }
        }
    }
}

impl BlockDevice for SparseDevice {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }
    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        let completions = batch
            .iter()
            .map(|request| {
                let result = validate_request(&self.info, request).map(|()| self.apply(request));
                IoCompletion { result, submitted_ns: 0, completed_ns: 0 }
            })
            .collect();
        self.next_ticket += 1;
        self.completed.insert(self.next_ticket, completions);
        Ok(BatchTicket(self.next_ticket))
    }
    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        self.completed
            .remove(&ticket.0)
            .ok_or(DeviceError::UnknownTicket { device: self.info.name.clone(), ticket: ticket.0 })
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        Ok(())
    }
    fn now_ns(&self) -> u64 {
        0
    }
}

fn argument(args: &[String], name: &str, default: f64) -> f64 {
    args.iter()
        .position(|arg| arg == name)
        .and_then(|at| args.get(at + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|arg| arg == "--list") {
        return;
    }
    let scale = argument(&args, "--scale", 0.005);
    let staging_percent = argument(&args, "--staging-percent", 10.0);
    let seed = argument(&args, "--seed", 1.0) as u64;
    let data_blocks = (SCALE_ONE_DATA_BLOCKS as f64 * scale) as u64;
    let extent_count = (data_blocks as f64 * 0.89) as u64 / EXTENT_BLOCKS;
    let staging_blocks = (data_blocks as f64 * staging_percent / 100.0) as u64;
    // Flash: the staging area plus room for the metadata (a few map nodes per
    // extent, the bitmaps and their copies across CPs).
    // The engine keeps an eighth of the flash for the next CP's metadata.
    let flash_blocks = (staging_blocks + 8 * extent_count + data_blocks / 4096 + 65_536) * 8 / 6;
    let started = Instant::now();
    let baseline = LIVE_BYTES.load(Ordering::Relaxed);
    let options = VolumeOptions { staging_capacity_blocks: staging_blocks, payload: false, ..VolumeOptions::default() };
    let mut volume = Volume::format(
        SparseDevice::new("data", data_blocks, false),
        SparseDevice::new("flash", flash_blocks, true),
        seed,
        options,
    )
    .unwrap();
    for extent in 0..extent_count {
        let id = volume.create_extent(&format!("e{extent}"), EXTENT_BLOCKS * BLOCK_BYTES).unwrap();
        volume.write_blocks_synthetic(id, 0, EXTENT_BLOCKS, false).unwrap();
    }
    volume.commit().unwrap();
    let filled_heap = LIVE_BYTES.load(Ordering::Relaxed) - baseline;
    PEAK_BYTES.store(LIVE_BYTES.load(Ordering::Relaxed), Ordering::Relaxed);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut max_runs = 0u64;
    // Heap, map and stored flash bytes when the staging area is fullest.
    let mut fullest = (0isize, 0usize, 0u64);
    let mut destages_seen = 0;
    let update_count = extent_count * UPDATES_PER_EXTENT;
    for _ in 0..update_count {
        // Just before a destage the staging area is full: count the runs then.
        if volume.staging_fill().used_blocks + 1 > staging_blocks {
            let runs: u64 = volume.extents().iter().map(|extent| extent.run_count).sum();
            if runs > max_runs {
                max_runs = runs;
                fullest = (
                    LIVE_BYTES.load(Ordering::Relaxed) - baseline,
                    volume.map_memory_bytes(),
                    volume.flash_device().blocks.len() as u64 * BLOCK_BYTES,
                );
            }
        }
        let id = rng.gen_range(1..=extent_count);
        volume.write_blocks_synthetic(id, rng.gen_range(0..EXTENT_BLOCKS), 1, false).unwrap();
        destages_seen = volume.stats().destage_count;
    }
    volume.destage().unwrap();
    let peak_heap = PEAK_BYTES.load(Ordering::Relaxed) - baseline;
    let aged_heap = LIVE_BYTES.load(Ordering::Relaxed) - baseline;
    let final_runs: u64 = volume.extents().iter().map(|extent| extent.run_count).sum();
    let bitmap_bytes = volume.bitmap_memory_bytes();
    let map_bytes = volume.map_memory_bytes();
    println!(
        "{{\"figure\":\"scale_memory\",\"scale\":{scale},\"staging_percent\":{staging_percent},\"seed\":{seed},\
\"data_blocks\":{data_blocks},\"extents\":{extent_count},\"updates\":{update_count},\"destages\":{destages_seen},\
\"filled_heap_bytes\":{filled_heap},\"peak_heap_bytes\":{peak_heap},\"aged_heap_bytes\":{aged_heap},\
\"runs_at_fullest_staging\":{max_runs},\"heap_bytes_at_fullest_staging\":{},\"map_bytes_at_fullest_staging\":{},\"flash_stored_bytes_at_fullest_staging\":{},\"runs_after_destage\":{final_runs},\"bitmap_bytes\":{bitmap_bytes},\
\"map_bytes\":{map_bytes},\"peak_bytes_per_extent\":{:.0},\"peak_heap_bytes_at_scale_1\":{:.0},\"wall_seconds\":{:.1}}}",
        fullest.0,
        fullest.1,
        fullest.2,
        peak_heap as f64 / extent_count as f64,
        peak_heap as f64 / scale,
        started.elapsed().as_secs_f64()
    );
}
