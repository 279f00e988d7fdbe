//! Cloning a 16 GiB extent: wall time of `Volume::clone_extent` (which ends
//! with its CP), data space used before and after, and the metadata the
//! clone's CP wrote — for an extent written sequentially and for one aged by
//! random 4 KiB overwrites under the write-anywhere layout (many more map
//! runs).
//!
//! `cargo bench -p proxima-engine --bench clone_16g -- --seed 1 --overwrites 200000`
//!
//! Payload-less data device (32 GiB; the clone's cost is all metadata, which
//! lives on the flash device, kept in memory here). Prints one JSON object per
//! case and a summary line.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use proxima_device::{
    validate_request, BatchTicket, BlockDevice, DeviceError, DeviceInfo, IoCompletion, IoOp, IoRequest,
};
use proxima_engine::{CloneSource, Layout, Overcommit, Volume, VolumeOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const BLOCK_BYTES: u64 = 4096;
const EXTENT_BYTES: u64 = 16 << 30;
const DATA_BLOCKS: u64 = (32 << 30) / BLOCK_BYTES;
const FLASH_BLOCKS: u64 = (2 << 30) / BLOCK_BYTES;

/// A device that completes every request at once and keeps the non-zero
/// blocks written to it, or nothing when it keeps no payload.
#[derive(Debug)]
struct MemoryOrNullDevice {
    info: DeviceInfo,
    blocks: HashMap<u64, Box<[u8]>>,
    completed: BTreeMap<u64, Vec<IoCompletion>>,
    next_ticket: u64,
}

impl MemoryOrNullDevice {
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
                    self.blocks.insert(request.block + offset as u64, chunk.into());
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

impl BlockDevice for MemoryOrNullDevice {
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

fn argument(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|arg| arg == name)
        .and_then(|at| args.get(at + 1))
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// Fills a 16 GiB extent, ages it by `overwrites` random 4 KiB writes, clones
/// it and prints what the clone cost.
fn measure(case: &str, layout: Layout, overwrites: u64, seed: u64) {
    let data = MemoryOrNullDevice::new("data", DATA_BLOCKS, false);
    let flash = MemoryOrNullDevice::new("flash", FLASH_BLOCKS, true);
    let options = VolumeOptions { layout, payload: false, data_checksums: false, ..VolumeOptions::default() };
    let mut volume = Volume::format(data, flash, seed, options).expect("format");
    let id = volume.create_extent("source", EXTENT_BYTES).expect("create");
    let piece = vec![0x5a; 1 << 20];
    for offset in (0..EXTENT_BYTES).step_by(piece.len()) {
        volume.write(id, offset, &piece, false).expect("fill");
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let block = vec![0xa5; BLOCK_BYTES as usize];
    for _ in 0..overwrites {
        let offset = rng.gen_range(0..EXTENT_BYTES / BLOCK_BYTES) * BLOCK_BYTES;
        volume.write(id, offset, &block, false).expect("overwrite");
    }
    volume.destage().expect("destage");
    volume.commit().expect("commit");
    let runs = volume.extents()[0].run_count;
    let used_before = volume.space().data.used_blocks;
    let written_before = volume.stats().checkpoint_blocks_written;
    let started = Instant::now();
    volume.clone_extent(CloneSource::Extent("source"), "clone", Overcommit::Allow).expect("clone");
    let clone_ms = started.elapsed().as_secs_f64() * 1000.0;
    let used_after = volume.space().data.used_blocks;
    let metadata_blocks = volume.stats().checkpoint_blocks_written - written_before;
    println!(
        "{}",
        serde_json::json!({
            "case": case,
            "layout": format!("{layout:?}"),
            "extent_bytes": EXTENT_BYTES,
            "overwrites": overwrites,
            "seed": seed,
            "map_runs": runs,
            "clone_ms": (clone_ms * 10.0).round() / 10.0,
            "data_blocks_used_before": used_before,
            "data_blocks_used_after": used_after,
            "shared_bytes": volume.shared_bytes(),
            "checkpoint_metadata_blocks": metadata_blocks,
        })
    );
    assert_eq!(used_before, used_after, "a clone takes no data space");
    assert_eq!(volume.shared_bytes(), EXTENT_BYTES, "every block is shared");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|arg| arg == "--list") {
        return;
    }
    let seed = argument(&args, "--seed", 1);
    let overwrites = argument(&args, "--overwrites", 200_000);
    measure("sequential", Layout::default(), 0, seed);
    // Write-anywhere puts each overwrite elsewhere: a map of many runs.
    measure("aged", Layout::WriteAnywhere, overwrites, seed);
}
