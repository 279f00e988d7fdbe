//! The replay target `--target volume`: a simulated volume of any layout, in
//! virtual time, through the engine — the laboratory's testbed (a RAID-4 of
//! 4 + 1 simulated drives of one model and a simulated flash device on one
//! clock) with one extent of the requested size, written once serially
//! before the replay so that reads find data on the drives.
//!
//! **Sizing.** The extent holds `--volume-size` bytes and fills
//! [`FILL_FRACTION`] of the array, as the laboratory's workloads do, so that
//! layouts that write out of place have the free space they have there. Each
//! member uses a centred window of its drive large enough for that; the
//! staging area is a percentage of the array's capacity (by default the
//! paper's 1 % for the proximal layout, none for the others).
//!
//! **Service.** The engine serves one request at a time, in arrival order, as
//! its synchronous interface does: a request starts when it arrives or when
//! the one before it completes, and takes the virtual time its device I/O
//! (and any destage or consistency point it triggers) takes. The target's
//! clock is the replay's; the simulation runs ahead of it by at most the
//! request in service, whose completion is reported once the replay's clock
//! reaches it.
//!
//! **Blocks.** The engine's unit is a 4 KiB block: a request covers the blocks
//! it touches (a partial block is written whole, without reading it first,
//! as the volume carries no payload); a trim covers the whole blocks inside
//! its range only. Flushes take a consistency point.

use std::collections::VecDeque;
use std::sync::Arc;

use proxima_device::SimulationHandle;
use proxima_disk::DiskModel;
use proxima_engine::{EngineError, Layout, Volume, VolumeOptions};
use proxima_lab::rig::lab_volume::{
    flash_block_count, ArrayShape, DATA_DISK_COUNT, DRIVE_QUEUE_DEPTH, PROXIMAL_SPAN_RANGES, STAGING_THRESHOLD_BYTES,
    ZONE_DATA_BLOCKS,
};
use proxima_lab::rig::testbed::{take_member_logs, Array, FlashDisk, TestbedConfig, BLOCK_SIZE_BYTES};
use proxima_workload::replay::mapping::{TargetRequest, TargetShape};
use proxima_workload::replay::{ReplayError, Target, TargetCompletion};
use proxima_workload::srarw::{EXTENT_BLOCKS, FILL_FRACTION};
use proxima_workload::Operation;

/// The staging area of the proximal layout unless one is given: the paper's 1 %.
pub const PROXIMAL_STAGING_PERCENT_DEFAULT: f64 = 1.0;
/// The extent's size unless one is given: 4 GiB.
pub const VOLUME_SIZE_BYTES_DEFAULT: u64 = 4 << 30;
/// The largest request the target takes (longer ones are skipped as too long).
const REQUEST_BYTES_MAX: u64 = 64 << 20;

/// What the volume is made of.
#[derive(Debug, Clone)]
pub struct VolumeSpec {
    /// The drive model of every member.
    pub model: Arc<DiskModel>,
    /// The layout.
    pub layout: Layout,
    /// The staging area, in percent of the array's capacity (0: none).
    pub staging_percent: f64,
    /// The extent's size in bytes (a multiple of 4 KiB).
    pub size_bytes: u64,
    /// Seed of the drives (their platters' initial angles).
    pub seed: u64,
}

/// Why the volume could not be built.
#[derive(Debug, thiserror::Error)]
pub enum VolumeTargetError {
    /// The specification cannot be built (bad input).
    #[error("{0}")]
    Invalid(String),
    /// The engine or the laboratory failed while building or filling it.
    #[error("building the volume: {0}")]
    Build(String),
}

/// A request waiting for the engine.
#[derive(Debug, Clone, Copy)]
struct Queued {
    id: u64,
    request: TargetRequest,
}

/// The request the engine is serving: done in the simulation, reported when
/// the replay's clock reaches its completion.
#[derive(Debug, Clone)]
struct InService {
    id: u64,
    completion_ns: u64,
    error: Option<String>,
}

/// A simulated volume as a replay target.
pub struct VolumeTarget {
    volume: Volume<Array, FlashDisk>,
    handle: SimulationHandle,
    extent_id: u64,
    size_bytes: u64,
    /// The simulation's clock when the replay started.
    origin_ns: u64,
    /// The replay's clock.
    now_ns: u64,
    queue: VecDeque<Queued>,
    in_service: Option<InService>,
}

impl std::fmt::Debug for VolumeTarget {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("VolumeTarget")
            .field("size_bytes", &self.size_bytes)
            .field("now_ns", &self.now_ns)
            .field("queued", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl VolumeTarget {
    /// Builds the testbed and the volume, and writes the extent once.
    pub fn build(spec: &VolumeSpec) -> Result<VolumeTarget, VolumeTargetError> {
        if spec.size_bytes == 0 || !spec.size_bytes.is_multiple_of(BLOCK_SIZE_BYTES) {
            return Err(VolumeTargetError::Invalid(format!(
                "--volume-size {} is not a positive multiple of {BLOCK_SIZE_BYTES} bytes",
                spec.size_bytes
            )));
        }
        if !(0.0..=50.0).contains(&spec.staging_percent) {
            let message = format!("--staging {} is not a percentage in [0, 50]", spec.staging_percent);
            return Err(VolumeTargetError::Invalid(message));
        }
        if spec.staging_percent > 0.0 && spec.layout == Layout::WriteAnywhere {
            return Err(VolumeTargetError::Invalid("the write-anywhere layout does not stage: --staging 0".into()));
        }
        let shape = ArrayShape::for_disk_model(Arc::clone(&spec.model));
        let size_blocks = spec.size_bytes / BLOCK_SIZE_BYTES;
        let window = window_blocks_for(&shape, size_blocks)?;
        let capacity_blocks = shape.capacity_blocks(window);
        let staging_blocks = (capacity_blocks as f64 * spec.staging_percent / 100.0) as u64;
        let config = TestbedConfig {
            model: Arc::clone(&spec.model),
            data_disk_count: DATA_DISK_COUNT,
            stripe_unit_bytes: shape.stripe_unit_bytes,
            window_blocks_per_disk: window,
            zone_data_blocks: ZONE_DATA_BLOCKS,
            drive_queue_depth: DRIVE_QUEUE_DEPTH,
            flash_block_count: flash_block_count(
                staging_blocks,
                size_blocks.div_ceil(EXTENT_BLOCKS),
                capacity_blocks,
                0,
            ),
            flash_keeps_metadata: false,
            seed: spec.seed,
        };
        let build_error = |error: &dyn std::fmt::Display| VolumeTargetError::Build(error.to_string());
        let testbed = config.build().map_err(|error| build_error(&error))?;
        let options = VolumeOptions {
            layout: spec.layout,
            staging_threshold_bytes: if staging_blocks > 0 { STAGING_THRESHOLD_BYTES } else { 0 },
            staging_capacity_blocks: staging_blocks.max(1),
            allocation_range_blocks: shape.allocation_range_blocks,
            proximal_span_ranges: PROXIMAL_SPAN_RANGES,
            payload: false,
            // The laboratory's array keeps parity consistent through its NVRAM.
            write_intents: false,
            ..VolumeOptions::default()
        };
        let mut volume =
            Volume::format(testbed.array, testbed.flash, 1, options).map_err(|error| build_error(&error))?;
        let extent_id = volume.create_extent("replay", spec.size_bytes).map_err(|error| build_error(&error))?;
        fill(&mut volume, extent_id, size_blocks).map_err(|error| build_error(&error))?;
        let origin_ns = testbed.handle.now_ns();
        Ok(VolumeTarget {
            volume,
            handle: testbed.handle,
            extent_id,
            size_bytes: spec.size_bytes,
            origin_ns,
            now_ns: 0,
            queue: VecDeque::new(),
            in_service: None,
        })
    }

    /// Starts the next queued request if the engine is free: runs it in the
    /// simulation from the replay's clock and keeps its completion.
    fn start_next(&mut self) {
        if self.in_service.is_some() {
            return;
        }
        let Some(Queued { id, request }) = self.queue.pop_front() else { return };
        let start_ns = self.origin_ns + self.now_ns;
        self.handle.with_simulation(|simulation| simulation.advance_to(start_ns));
        let error = self.serve(request).err().map(|error| error.to_string());
        // Every member's record of the request: kept by nothing here.
        take_member_logs(self.volume.data_device_mut());
        let completion_ns = self.handle.now_ns().max(start_ns) - self.origin_ns;
        self.in_service = Some(InService { id, completion_ns, error });
    }

    /// One request through the engine, synchronously.
    fn serve(&mut self, request: TargetRequest) -> Result<(), EngineError> {
        let block = BLOCK_SIZE_BYTES;
        let end_bytes = request.offset_bytes + request.length_bytes;
        let first_block = request.offset_bytes / block;
        let covered_blocks = end_bytes.div_ceil(block) - first_block;
        match request.operation {
            Operation::Read => self.volume.read_blocks_synthetic(self.extent_id, first_block, covered_blocks).map(drop),
            Operation::Write => self.volume.write_blocks_synthetic(self.extent_id, first_block, covered_blocks, false),
            Operation::Trim => {
                let inner_first = request.offset_bytes.div_ceil(block);
                let inner_end = end_bytes / block;
                if inner_end <= inner_first {
                    return Ok(());
                }
                let length_bytes = (inner_end - inner_first) * block;
                self.volume.trim(self.extent_id, inner_first * block, length_bytes, false)
            }
            Operation::Flush => self.volume.flush(),
        }
    }
}

/// Blocks of each drive that hold an array whose capacity the extent fills to
/// [`FILL_FRACTION`]: whole stripe units, the checksum blocks left out.
fn window_blocks_for(shape: &ArrayShape, size_blocks: u64) -> Result<u64, VolumeTargetError> {
    let unit_blocks = shape.stripe_unit_bytes / BLOCK_SIZE_BYTES;
    let needed_blocks = (size_blocks as f64 / FILL_FRACTION).ceil() as u64;
    let drive_blocks = shape.model.sector_count() / (BLOCK_SIZE_BYTES / 512);
    let mut window = needed_blocks.div_ceil(DATA_DISK_COUNT as u64).div_ceil(unit_blocks) * unit_blocks;
    while shape.capacity_blocks(window) < needed_blocks {
        window += unit_blocks;
    }
    if window > drive_blocks {
        return Err(VolumeTargetError::Invalid(format!(
            "a volume of {} bytes needs {window} blocks of each of {} drives of {}, which have {drive_blocks}",
            size_blocks * BLOCK_SIZE_BYTES,
            DATA_DISK_COUNT + 1,
            shape.model.name()
        )));
    }
    Ok(window)
}

/// Writes the extent once, serially, in 16 MiB writes, and commits it.
fn fill(volume: &mut Volume<Array, FlashDisk>, extent_id: u64, size_blocks: u64) -> Result<(), EngineError> {
    let mut first_block = 0;
    while first_block < size_blocks {
        let block_count = EXTENT_BLOCKS.min(size_blocks - first_block);
        volume.write_blocks_synthetic(extent_id, first_block, block_count, false)?;
        take_member_logs(volume.data_device_mut());
        first_block += block_count;
    }
    volume.flush()?;
    take_member_logs(volume.data_device_mut());
    Ok(())
}

impl Target for VolumeTarget {
    fn shape(&self) -> TargetShape {
        TargetShape {
            capacity_bytes: self.size_bytes,
            request_bytes_max: REQUEST_BYTES_MAX,
            trims: true,
            flushes: true,
        }
    }

    fn now_ns(&mut self) -> u64 {
        self.now_ns
    }

    fn submit(&mut self, batch: &[(u64, TargetRequest)]) -> Result<u64, ReplayError> {
        self.queue.extend(batch.iter().map(|&(id, request)| Queued { id, request }));
        self.start_next();
        Ok(self.now_ns)
    }

    fn wait(&mut self, deadline_ns: Option<u64>, completions: &mut Vec<TargetCompletion>) -> Result<(), ReplayError> {
        let completion_ns = self.in_service.as_ref().map(|service| service.completion_ns);
        match (completion_ns, deadline_ns) {
            (Some(completion_ns), deadline) if deadline.is_none_or(|deadline| completion_ns <= deadline) => {
                let service = self.in_service.take().expect("a request in service");
                self.now_ns = self.now_ns.max(completion_ns);
                completions.push(TargetCompletion { id: service.id, completion_ns, error: service.error });
                self.start_next();
            }
            (_, Some(deadline)) => self.now_ns = self.now_ns.max(deadline),
            (None, None) => unreachable!("waiting with nothing in flight and no deadline"),
            (Some(_), None) => unreachable!("a completion without a deadline is always reached"),
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), ReplayError> {
        assert!(self.in_service.is_none() && self.queue.is_empty(), "every request completed");
        Ok(())
    }
}
