//! Engine benchmarks: figures, not tests. Prints one JSON object per figure and
//! a final summary line.
//!
//! `cargo bench -p proxima-engine --bench engine` (optionally `-- --seed N`, and
//! `--figure NAME` for one of the CP and memory figures alone).
//!
//! - random 4 KiB writes per second, CPU time per write, and the latency of
//!   each write and flush (p50, p99, p99.99, max), on memory devices and on
//!   files in this machine's file system (a flush every 32 writes; 400 MB
//!   written over a 256 MiB extent, more than the 192 MiB staging area, so
//!   the run includes CPs and a destage);
//! - CP commit time and blocks written against the number of random writes
//!   since the previous CP (dirty metadata);
//! - CP commit time after a few writes against the data device's size (4 GiB
//!   to 1 TiB): what a CP costs beyond its dirty metadata;
//! - CP commit time on an aged 8 GiB extent after 3,000 random writes (about
//!   what a step of the service's background destage commits);
//! - heap bytes per mapped block of a sequentially written extent, and of the
//!   same extent aged by random 4 KiB overwrites.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use proxima_device::{
    validate_request, BatchTicket, BlockDevice, DeviceError, DeviceInfo, FileDevice, IoCompletion, IoOp, IoRequest,
    MemoryDevice,
};
use proxima_engine::{fixed_metadata_blocks, format_flash_blocks, Volume, VolumeOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Counts live heap bytes.
struct CountingAllocator;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator and only adds bookkeeping.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(pointer, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(pointer, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const BLOCK: u64 = 4096;

/// A data device that keeps no payload (reads return zeroes) but claims to, so
/// that a large extent's map can be measured without its data in memory.
#[derive(Debug)]
struct DiscardDevice {
    info: DeviceInfo,
    completed: BTreeMap<u64, Vec<IoCompletion>>,
    next_ticket: u64,
}

impl DiscardDevice {
    fn new(block_count: u64) -> Self {
        let info = DeviceInfo {
            name: "discard".into(),
            block_size_bytes: 4096,
            block_count,
            atomic_write_bytes: 512,
            stores_payload: true,
        };
        Self { info, completed: BTreeMap::new(), next_ticket: 0 }
    }
}

impl BlockDevice for DiscardDevice {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }
    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        let completions = batch
            .into_iter()
            .map(|request| {
                let result = validate_request(&self.info, &request).map(|()| match request.op {
                    IoOp::Read => vec![0; (u64::from(request.block_count) * BLOCK) as usize],
                    _ => Vec::new(),
                });
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
            .ok_or(DeviceError::UnknownTicket { device: "discard".into(), ticket: ticket.0 })
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        Ok(())
    }
    fn now_ns(&self) -> u64 {
        0
    }
}

fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// What a run of random writes measured.
struct WriteRun {
    wall_seconds: f64,
    cpu_seconds: f64,
    /// Latency of each `write` call, in nanoseconds (CPs and destages the
    /// engine runs inside a write included).
    writes_ns: hdrhistogram::Histogram<u64>,
    /// Latency of each `flush`, in nanoseconds.
    flushes_ns: hdrhistogram::Histogram<u64>,
}

fn random_writes<D: BlockDevice, F: BlockDevice>(
    volume: &mut Volume<D, F>,
    extent_blocks: u64,
    count: u64,
    seed: u64,
) -> WriteRun {
    let id = volume.extent_id("bench").unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let buffer = vec![0xA5u8; BLOCK as usize];
    // 1 ns to an hour, three significant digits.
    let histogram = || hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds");
    let (mut writes_ns, mut flushes_ns) = (histogram(), histogram());
    let nanos = |since: Instant| u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let wall = Instant::now();
    let cpu = cpu_seconds();
    for index in 0..count {
        let block = rng.gen_range(0..extent_blocks);
        let started = Instant::now();
        volume.write(id, block * BLOCK, &buffer, false).unwrap();
        writes_ns.saturating_record(nanos(started));
        if index % 32 == 31 {
            let started = Instant::now();
            volume.flush().unwrap();
            flushes_ns.saturating_record(nanos(started));
        }
    }
    volume.flush().unwrap();
    WriteRun { wall_seconds: wall.elapsed().as_secs_f64(), cpu_seconds: cpu_seconds() - cpu, writes_ns, flushes_ns }
}

fn report_random_writes<D: BlockDevice, F: BlockDevice>(mut volume: Volume<D, F>, device: &str, seed: u64) -> f64 {
    let extent_blocks = 65_536;
    volume.create_extent("bench", extent_blocks * BLOCK).unwrap();
    let count = 100_000;
    let run = random_writes(&mut volume, extent_blocks, count, seed);
    let stats = volume.stats().clone();
    let writes_per_second = count as f64 / run.wall_seconds;
    let micros =
        |histogram: &hdrhistogram::Histogram<u64>, quantile: f64| histogram.value_at_quantile(quantile) as f64 / 1e3;
    println!(
        "{{\"figure\":\"random_4k_writes\",\"device\":\"{device}\",\"writes\":{count},\"writes_per_second\":{writes_per_second:.0},\"cpu_us_per_write\":{:.2},\"write_us\":{{\"p50\":{:.1},\"p99\":{:.1},\"p99_99\":{:.1},\"max\":{:.1}}},\"flush_us\":{{\"p50\":{:.1},\"p99\":{:.1},\"max\":{:.1}}},\"checkpoints\":{},\"destages\":{},\"seed\":{seed}}}",
        run.cpu_seconds * 1e6 / count as f64,
        micros(&run.writes_ns, 0.5),
        micros(&run.writes_ns, 0.99),
        micros(&run.writes_ns, 0.9999),
        run.writes_ns.max() as f64 / 1e3,
        micros(&run.flushes_ns, 0.5),
        micros(&run.flushes_ns, 0.99),
        run.flushes_ns.max() as f64 / 1e3,
        stats.checkpoint_count,
        stats.destage_count
    );
    writes_per_second
}

fn checkpoint_cost(seed: u64) {
    let options = VolumeOptions { records_per_checkpoint: u64::MAX, ..VolumeOptions::default() };
    let mut volume =
        Volume::format(MemoryDevice::new(4096, 1 << 18), MemoryDevice::new(4096, 1 << 16), 1, options).unwrap();
    let extent_blocks = 1 << 17;
    let id = volume.create_extent("bench", extent_blocks * BLOCK).unwrap();
    // A populated extent: sequential, then committed.
    for chunk in 0..extent_blocks / 256 {
        volume.write(id, chunk * 256 * BLOCK, &vec![1u8; 256 * BLOCK as usize], false).unwrap();
    }
    volume.commit().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let buffer = vec![7u8; BLOCK as usize];
    for dirty_writes in [1u64, 10, 100, 1000, 10_000] {
        for _ in 0..dirty_writes {
            // Large enough writes go direct, so the staging log does not fill.
            let block = rng.gen_range(0..extent_blocks);
            volume.write(id, block * BLOCK, &buffer, false).unwrap();
        }
        let before = volume.stats().checkpoint_blocks_written;
        let start = Instant::now();
        volume.commit().unwrap();
        let micros = start.elapsed().as_secs_f64() * 1e6;
        println!(
            "{{\"figure\":\"checkpoint_cost\",\"writes_since_checkpoint\":{dirty_writes},\"commit_us\":{micros:.0},\"blocks_written\":{},\"seed\":{seed}}}",
            volume.stats().checkpoint_blocks_written - before
        );
        volume.destage().unwrap();
        volume.commit().unwrap();
    }
}

/// The median commit time of CPs that each follow `WRITES` random 4 KiB
/// writes, on data devices from 4 GiB to 1 TiB with the same extent: a CP
/// whose cost grows with the device rather than with what changed shows here.
fn checkpoint_cost_by_device_size(seed: u64) {
    const WRITES: u64 = 16;
    const COMMITS: usize = 21;
    let extent_blocks: u64 = 1 << 16;
    for device_blocks in [1u64 << 20, 1 << 24, 1 << 28] {
        let options = VolumeOptions { staging_threshold_bytes: 0, ..VolumeOptions::default() };
        // Room for the metadata the device's size fixes, twice, and 256 MiB.
        let flash_blocks = format_flash_blocks(device_blocks, 1 << 16, &options)
            + fixed_metadata_blocks(device_blocks, 1 << 16, &options)
            + (1 << 16);
        let mut volume =
            Volume::format(DiscardDevice::new(device_blocks), MemoryDevice::new(4096, flash_blocks), 1, options)
                .unwrap();
        let id = volume.create_extent("bench", extent_blocks * BLOCK).unwrap();
        volume.write(id, 0, &vec![1u8; (extent_blocks * BLOCK) as usize], false).unwrap();
        volume.commit().unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let buffer = vec![7u8; BLOCK as usize];
        let mut micros = Vec::with_capacity(COMMITS);
        for _ in 0..COMMITS {
            for _ in 0..WRITES {
                let block = rng.gen_range(0..extent_blocks);
                volume.write(id, block * BLOCK, &buffer, false).unwrap();
            }
            let start = Instant::now();
            volume.commit().unwrap();
            micros.push(start.elapsed().as_secs_f64() * 1e6);
        }
        micros.sort_by(f64::total_cmp);
        println!(
            "{{\"figure\":\"checkpoint_cost_by_device_size\",\"device_gib\":{},\"writes_since_checkpoint\":{WRITES},\"median_commit_us\":{:.0},\"max_commit_us\":{:.0},\"seed\":{seed}}}",
            (device_blocks * BLOCK) >> 30,
            micros[COMMITS / 2],
            micros[COMMITS - 1]
        );
    }
}

/// The commit time of CPs on a service-sized volume whose extent is aged: a
/// 16 GiB data device, 1 GiB of flash, an 8 GiB extent written whole and then
/// overwritten at `AGING_WRITES` random blocks (its map some hundreds of
/// thousands of runs), each CP after `WRITES` more random writes — about
/// what a background destage step and the client writes beside it dirty.
/// What the CP costs in CPU, its flash a memory device.
fn checkpoint_cost_on_an_aged_map(seed: u64) {
    const AGING_WRITES: u64 = 500_000;
    const WRITES: u64 = 3_000;
    const COMMITS: usize = 21;
    let (device_blocks, flash_blocks, extent_blocks) = (1u64 << 22, 1u64 << 18, 1u64 << 21);
    let options = VolumeOptions { staging_threshold_bytes: 0, ..VolumeOptions::default() };
    let mut volume =
        Volume::format(DiscardDevice::new(device_blocks), MemoryDevice::new(4096, flash_blocks), 1, options).unwrap();
    let id = volume.create_extent("bench", extent_blocks * BLOCK).unwrap();
    let chunk = 256u64;
    let buffer = vec![1u8; (chunk * BLOCK) as usize];
    for index in 0..extent_blocks / chunk {
        volume.write(id, index * chunk * BLOCK, &buffer, false).unwrap();
    }
    volume.commit().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let block_buffer = vec![7u8; BLOCK as usize];
    let mut random_writes = |volume: &mut Volume<DiscardDevice, MemoryDevice>, count: u64| {
        for _ in 0..count {
            let block = rng.gen_range(0..extent_blocks);
            volume.write(id, block * BLOCK, &block_buffer, false).unwrap();
        }
    };
    random_writes(&mut volume, AGING_WRITES);
    volume.commit().unwrap();
    let (mut micros, mut blocks) = (Vec::with_capacity(COMMITS), Vec::with_capacity(COMMITS));
    for _ in 0..COMMITS {
        random_writes(&mut volume, WRITES);
        let before = volume.stats().checkpoint_blocks_written;
        let start = Instant::now();
        volume.commit().unwrap();
        micros.push(start.elapsed().as_secs_f64() * 1e6);
        blocks.push(volume.stats().checkpoint_blocks_written - before);
    }
    micros.sort_by(f64::total_cmp);
    blocks.sort_unstable();
    println!(
        "{{\"figure\":\"checkpoint_cost_on_an_aged_map\",\"map_runs\":{},\"writes_since_checkpoint\":{WRITES},\"median_blocks_written\":{},\"median_commit_us\":{:.0},\"max_commit_us\":{:.0},\"seed\":{seed}}}",
        volume.extents()[0].run_count,
        blocks[COMMITS / 2],
        micros[COMMITS / 2],
        micros[COMMITS - 1]
    );
}

fn map_memory(seed: u64) {
    let extent_blocks: u64 = 4 << 20; // 16 GiB
    let data = DiscardDevice::new(extent_blocks * 2);
    let options = VolumeOptions { staging_threshold_bytes: 0, ..VolumeOptions::default() };
    let mut volume = Volume::format(data, MemoryDevice::new(4096, 1 << 16), 1, options).unwrap();
    let id = volume.create_extent("bench", extent_blocks * BLOCK).unwrap();
    volume.commit().unwrap();
    let baseline = LIVE_BYTES.load(Ordering::Relaxed);
    let chunk = 256u64;
    let buffer = vec![3u8; (chunk * BLOCK) as usize];
    for index in 0..extent_blocks / chunk {
        volume.write(id, index * chunk * BLOCK, &buffer, false).unwrap();
    }
    volume.commit().unwrap();
    drop(buffer);
    let report = |volume: &Volume<DiscardDevice, MemoryDevice>, aged_percent: f64| {
        let heap = LIVE_BYTES.load(Ordering::Relaxed) - baseline;
        let extent = &volume.extents()[0];
        println!(
            "{{\"figure\":\"map_memory\",\"mapped_blocks\":{},\"aged_percent\":{aged_percent},\"runs\":{},\"heap_bytes_per_mapped_block\":{:.4},\"map_bytes_per_mapped_block\":{:.4},\"bitmap_bytes\":{},\"seed\":{seed}}}",
            extent.mapped_block_count,
            extent.run_count,
            heap as f64 / extent.mapped_block_count as f64,
            volume.map_memory_bytes() as f64 / extent.mapped_block_count as f64,
            volume.bitmap_memory_bytes(),
        );
    };
    report(&volume, 0.0);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let block_buffer = vec![9u8; BLOCK as usize];
    let mut written = 0u64;
    for percent in [1u64, 5] {
        let target = extent_blocks * percent / 100;
        while written < target {
            let block = rng.gen_range(0..extent_blocks);
            volume.write(id, block * BLOCK, &block_buffer, false).unwrap();
            written += 1;
        }
        volume.commit().unwrap();
        report(&volume, percent as f64);
    }
}

/// A named figure of this benchmark, run with a seed.
type Figure = (&'static str, fn(u64));

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seed = args
        .iter()
        .position(|arg| arg == "--seed")
        .and_then(|at| args.get(at + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    if args.iter().any(|arg| arg == "--list") {
        return;
    }
    let figures: [Figure; 4] = [
        ("checkpoint_cost", checkpoint_cost),
        ("checkpoint_cost_by_device_size", checkpoint_cost_by_device_size),
        ("checkpoint_cost_on_an_aged_map", checkpoint_cost_on_an_aged_map),
        ("map_memory", map_memory),
    ];
    if let Some(name) = args.iter().position(|arg| arg == "--figure").map(|at| args.get(at + 1)) {
        let figure = figures.iter().find(|(figure, _)| Some(&figure.to_string()) == name);
        let Some((_, run)) = figure else {
            let names: Vec<&str> = figures.iter().map(|(figure, _)| *figure).collect();
            eprintln!("--figure takes one of: {}", names.join(", "));
            std::process::exit(2);
        };
        run(seed);
        return;
    }
    let memory =
        Volume::format(MemoryDevice::new(4096, 1 << 18), MemoryDevice::new(4096, 1 << 16), 1, VolumeOptions::default())
            .unwrap();
    let memory_rate = report_random_writes(memory, "memory", seed);
    let directory =
        tempfile::Builder::new().prefix("proxima-engine-bench").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = FileDevice::create(&directory.path().join("data"), 4096, 1 << 18).unwrap();
    let flash = FileDevice::create(&directory.path().join("flash"), 4096, 1 << 16).unwrap();
    let file = Volume::format(data, flash, 1, VolumeOptions::default()).unwrap();
    let file_rate = report_random_writes(file, "file", seed);
    for (_, run) in figures {
        run(seed);
    }
    println!("{{\"summary\":{{\"memory_writes_per_second\":{memory_rate:.0},\"file_writes_per_second\":{file_rate:.0},\"seed\":{seed}}}}}");
}
