//! The simulated testbed of the proximal-layout experiments: a RAID-4 of
//! simulated hard disks and a simulated flash device, all on one clock.
//!
//! - Each member is a [`MemberDisk`]: a window of a metadata-only simulated drive
//!   (the whole drive at `--scale 1`, a centred slice of it at smaller scales, so
//!   the drive's geometry, zones and seek curve stay the paper's), recording the
//!   submission and completion time of every request, so that each destage batch
//!   can be measured per disk.
//! - The flash device ([`staging_flash_params`]) stands for the paper's Intel X25
//!   SATA SSD of 2010; [`FlashDisk`] times every request and keeps no bytes
//!   (nothing reads an open volume's metadata back).
//! - [`randomise_arms`] places every drive's heads at a uniformly random LBN of the
//!   whole drive without I/O and without advancing the clock: the paper's random
//!   I/Os before each batch, which it excluded from its figures, so that seeks do
//!   not depend on the span of disk the experiment happens to use.

use std::sync::Arc;

use proxima_device::{
    validate_request, BatchTicket, BlockDevice, DeviceError, DeviceInfo, IoCompletion, IoOp, IoRequest, RaidConfig,
    RaidDevice, SimulatedDevice, SimulatedOptions, SimulationHandle,
};
use proxima_disk::{DiskModel, FlashDevice, FlashParams, HardDisk, Simulation};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::LabError;

/// Bytes per block of the engine and the devices.
pub const BLOCK_SIZE_BYTES: u64 = 4096;
/// Sectors per 4 KiB block.
const SECTORS_PER_BLOCK: u64 = BLOCK_SIZE_BYTES / 512;

/// One request a member disk completed, in its own (window) block numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberIo {
    /// Read or write.
    pub op: IoOp,
    /// First block, relative to the window.
    pub block: u64,
    /// Blocks addressed.
    pub block_count: u32,
    /// When the request reached the drive (virtual time).
    pub submitted_ns: u64,
    /// When the drive completed it (virtual time).
    pub completed_ns: u64,
}

/// How one request of a member batch is answered.
#[derive(Debug)]
enum MemberSlot {
    /// Refused at submission (outside the window, malformed).
    Refused(IoCompletion),
    /// Forwarded to the drive as the `index`-th request of the inner batch.
    Forwarded { index: usize, op: IoOp, block: u64, block_count: u32 },
}

/// A window of a simulated drive that records every completed request.
#[derive(Debug)]
pub struct MemberDisk {
    device: SimulatedDevice,
    info: DeviceInfo,
    first_block: u64,
    drive_sector_count: u64,
    pending: std::collections::BTreeMap<u64, (BatchTicket, Vec<MemberSlot>)>,
    next_ticket: u64,
    log: Vec<MemberIo>,
}

impl MemberDisk {
    /// Presents blocks `[first_block, first_block + block_count)` of `device` (a
    /// simulated hard disk of `drive_sector_count` sectors) as a device of its own.
    ///
    /// # Panics
    /// If the window does not lie within the device: a bug in the testbed.
    pub fn new(device: SimulatedDevice, first_block: u64, block_count: u64, drive_sector_count: u64) -> Self {
        let inner = device.info();
        assert!(
            first_block + block_count <= inner.block_count,
            "window [{first_block}, +{block_count}) lies beyond {} blocks",
            inner.block_count
        );
        let info = DeviceInfo { block_count, ..inner };
        MemberDisk {
            device,
            info,
            first_block,
            drive_sector_count,
            pending: Default::default(),
            next_ticket: 0,
            log: Vec::new(),
        }
    }

    /// The requests completed since the last call, in completion order per batch.
    pub fn take_log(&mut self) -> Vec<MemberIo> {
        std::mem::take(&mut self.log)
    }

    /// Empties the drive's cache (of `model`, the drive's model) of the
    /// window's data, as a cold start would: reads one block at each of as many places outside the window
    /// as the cache has segments, plus one, each a segment apart, and keeps
    /// no record of them. The clock advances by those reads; the heads end
    /// before the window.
    ///
    /// # Panics
    /// If the drive has no room for them before the window (a window of
    /// nearly the whole drive): a bug of the experiment that asks.
    pub fn empty_cache(&mut self, model: &DiskModel) -> Result<(), DeviceError> {
        let cache = model.cache();
        let sectors_per_block = u64::from(self.info.block_size_bytes / 512);
        let spacing_blocks = (u64::from(cache.segment_size_sectors) / sectors_per_block).max(1) * 2;
        let places = u64::from(cache.segment_count) + 1;
        assert!(
            places * spacing_blocks <= self.first_block,
            "{places} places {spacing_blocks} blocks apart do not fit before the window at block {}",
            self.first_block
        );
        let reads = (0..places).map(|place| IoRequest::read(place * spacing_blocks, 1)).collect();
        let ticket = self.device.submit(reads)?;
        for completion in self.device.wait(ticket)? {
            completion.result?;
        }
        Ok(())
    }

    /// Places the drive's heads over a uniformly random LBN of the whole drive.
    pub fn randomise_arm(&mut self, rng: &mut ChaCha8Rng) {
        let lbn = rng.gen_range(0..self.drive_sector_count);
        let index = self.device.device_index();
        self.device.simulation().with_simulation(|simulation| simulation.move_heads_to(index, lbn));
    }
}

impl BlockDevice for MemberDisk {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        let now_ns = self.now_ns();
        let mut slots = Vec::with_capacity(batch.len());
        let mut forwarded = Vec::with_capacity(batch.len());
        for mut request in batch {
            if let Err(error) = validate_request(&self.info, &request) {
                let refused = IoCompletion { result: Err(error), submitted_ns: now_ns, completed_ns: now_ns };
                slots.push(MemberSlot::Refused(refused));
                continue;
            }
            slots.push(MemberSlot::Forwarded {
                index: forwarded.len(),
                op: request.op,
                block: request.block,
                block_count: request.block_count,
            });
            request.block += self.first_block;
            forwarded.push(request);
        }
        let inner_ticket = self.device.submit(forwarded)?;
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.pending.insert(ticket, (inner_ticket, slots));
        Ok(BatchTicket(ticket))
    }

    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        let (inner_ticket, slots) = self
            .pending
            .remove(&ticket.0)
            .ok_or_else(|| DeviceError::UnknownTicket { device: self.info.name.clone(), ticket: ticket.0 })?;
        let mut inner = self.device.wait(inner_ticket)?;
        let mut completions = Vec::with_capacity(slots.len());
        for slot in slots {
            match slot {
                MemberSlot::Refused(completion) => completions.push(completion),
                MemberSlot::Forwarded { index, op, block, block_count } => {
                    let completion = std::mem::replace(
                        &mut inner[index],
                        IoCompletion { result: Ok(Vec::new()), submitted_ns: 0, completed_ns: 0 },
                    );
                    if op != IoOp::Trim {
                        self.log.push(MemberIo {
                            op,
                            block,
                            block_count,
                            submitted_ns: completion.submitted_ns,
                            completed_ns: completion.completed_ns,
                        });
                    }
                    completions.push(completion);
                }
            }
        }
        Ok(completions)
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        self.device.flush()
    }

    fn now_ns(&self) -> u64 {
        self.device.now_ns()
    }
}

/// The flash device as the engine sees it: a metadata-only simulated flash
/// device that times every request and keeps no bytes.
///
/// The engine writes metadata (map nodes, bitmaps, log blocks) with its bytes
/// and, in metadata-only mode, staged data as zeroes. While a volume is open it
/// never reads its metadata back (maps are held in memory; the log is read only
/// at open) and the experiments never reopen a volume, so the metadata's bytes
/// would only cost memory: at `--scale 1` the aged write-anywhere volume's map
/// leaves come to about 15 GiB, twice that while a CP holds the old ones. The
/// device remembers, one bit per block, which blocks hold bytes it did not
/// keep: reading one of them is refused with an I/O error rather than answered
/// with wrong bytes; every other block reads as zeroes (staged data).
///
/// Snapshots are the exception: reading a snapshot's extent loads its maps
/// from flash, and a deletion scan loads the snapmaps of the deleted snapshot
/// and its neighbours. A device made with [`FlashDisk::keeping_metadata`]
/// keeps the bytes of every block written with a non-zero byte (until it is
/// overwritten with zeroes or trimmed), so those reads are answered; the
/// memory is that of the metadata on flash.
#[derive(Debug)]
pub struct FlashDisk {
    device: SimulatedDevice,
    info: DeviceInfo,
    /// One bit per block: its last write carried some non-zero byte.
    unkept: Vec<u64>,
    /// The bytes of the blocks marked in `unkept`, when the device keeps them.
    kept: Option<std::collections::HashMap<u64, Box<[u8]>>>,
    /// Per outstanding ticket, what each read returns (`None` for other requests).
    reads: std::collections::BTreeMap<u64, Vec<Option<ReadAnswer>>>,
}

/// What a read of the flash returns: zeroes, or a refusal.
type ReadAnswer = Result<Vec<u8>, DeviceError>;

/// Whether every byte of `block` is zero (a staged block of a metadata-only run).
fn is_zero(block: &[u8]) -> bool {
    // OR-folding fixed-size chunks lets the compiler vectorise the scan.
    block.chunks(64).all(|chunk| chunk.iter().fold(0, |any, &byte| any | byte) == 0)
}

impl FlashDisk {
    /// Wraps a metadata-only simulated flash device; metadata is not kept.
    pub fn new(device: SimulatedDevice) -> Self {
        let info = DeviceInfo { stores_payload: true, ..device.info() };
        let unkept = vec![0; info.block_count.div_ceil(64) as usize];
        FlashDisk { device, info, unkept, kept: None, reads: Default::default() }
    }

    /// Wraps a metadata-only simulated flash device that keeps the bytes of
    /// the metadata written to it, so that they can be read back.
    pub fn keeping_metadata(device: SimulatedDevice) -> Self {
        FlashDisk { kept: Some(Default::default()), ..FlashDisk::new(device) }
    }

    /// Blocks whose last write carried non-zero bytes (metadata), whether or
    /// not the device keeps them.
    pub fn unkept_block_count(&self) -> u64 {
        self.unkept.iter().map(|word| u64::from(word.count_ones())).sum()
    }

    fn is_unkept(&self, block: u64) -> bool {
        self.unkept[(block / 64) as usize] & (1 << (block % 64)) != 0
    }

    /// Marks `block` as holding `bytes` (`None`: zeroes), keeping them if
    /// the device keeps metadata.
    fn set_block(&mut self, block: u64, bytes: Option<&[u8]>) {
        let word = &mut self.unkept[(block / 64) as usize];
        if bytes.is_some() {
            *word |= 1 << (block % 64);
        } else {
            *word &= !(1 << (block % 64));
        }
        if let Some(kept) = &mut self.kept {
            match bytes {
                Some(bytes) => kept.insert(block, bytes.into()),
                None => kept.remove(&block),
            };
        }
    }

    /// What a valid read of `request`'s blocks answers: their bytes, or a
    /// refusal naming the first block holding bytes not kept.
    fn read(&self, request: &IoRequest) -> ReadAnswer {
        let block_size = self.info.block_size_bytes as usize;
        let mut bytes = vec![0; request.block_count as usize * block_size];
        for (block, destination) in (request.block..request.end_block()).zip(bytes.chunks_mut(block_size)) {
            if !self.is_unkept(block) {
                continue;
            }
            match self.kept.as_ref().and_then(|kept| kept.get(&block)) {
                Some(kept) => destination.copy_from_slice(kept),
                None => {
                    return Err(DeviceError::Io {
                        device: self.info.name.clone(),
                        block,
                        detail: "the block holds metadata, whose bytes the laboratory's flash does not keep".into(),
                    })
                }
            }
        }
        Ok(bytes)
    }

    /// Applies a valid request to the bit map; returns what a read answers.
    fn apply(&mut self, request: &IoRequest) -> Option<ReadAnswer> {
        let block_size = self.info.block_size_bytes as usize;
        match request.op {
            IoOp::Read => Some(self.read(request)),
            IoOp::Write => {
                for (index, chunk) in request.data.chunks(block_size).enumerate() {
                    self.set_block(request.block + index as u64, (!is_zero(chunk)).then_some(chunk));
                }
                None
            }
            IoOp::Trim | IoOp::WriteZeroes => {
                (request.block..request.end_block()).for_each(|block| self.set_block(block, None));
                None
            }
        }
    }
}

impl BlockDevice for FlashDisk {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        let mut returned = Vec::with_capacity(batch.len());
        let mut forwarded = Vec::with_capacity(batch.len());
        for mut request in batch {
            // Invalid requests go on unchanged for the simulated device to refuse.
            let valid = validate_request(&self.info, &request).is_ok();
            returned.push(if valid { self.apply(&request) } else { None });
            if valid {
                request.data = Vec::new();
            }
            forwarded.push(request);
        }
        let ticket = self.device.submit(forwarded)?;
        self.reads.insert(ticket.0, returned);
        Ok(ticket)
    }

    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        let mut completions = self.device.wait(ticket)?;
        let returned = self.reads.remove(&ticket.0).unwrap_or_default();
        for (completion, data) in completions.iter_mut().zip(returned) {
            if let (Ok(_), Some(answer)) = (&completion.result, data) {
                completion.result = answer;
            }
        }
        Ok(completions)
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        self.device.flush()
    }

    fn now_ns(&self) -> u64 {
        self.device.now_ns()
    }
}

/// The array the experiments write to.
pub type Array = RaidDevice<MemberDisk>;

/// The flash device of the testbed, standing for the paper's Intel X25 (a 2010
/// MLC SATA SSD: 4 KiB reads in about 65 µs and writes in about 85 µs at queue
/// depth 1, 250 MB/s sequential): two channels of 125 MB/s, read latency 32 µs
/// and write latency 52 µs on top of the 4 KiB transfer (32.8 µs), so one 4 KiB
/// read takes 65 µs and one write 85 µs, and two proceed in parallel.
pub fn staging_flash_params(block_count: u64) -> FlashParams {
    FlashParams {
        read_latency_ns: 32_000,
        write_latency_ns: 52_000,
        bandwidth_bytes_per_second: 125_000_000,
        channel_count: 2,
        page_size_bytes: BLOCK_SIZE_BYTES as u32,
        sector_count: block_count * SECTORS_PER_BLOCK,
    }
}

/// The shape of a testbed.
#[derive(Debug, Clone)]
pub struct TestbedConfig {
    /// The drive model of every member.
    pub model: Arc<DiskModel>,
    /// Data members (4 in the paper); one parity member is added.
    pub data_disk_count: usize,
    /// RAID stripe unit in bytes (1 MiB in the paper).
    pub stripe_unit_bytes: u64,
    /// Blocks of each drive used (a whole number of stripe units, at most the drive).
    pub window_blocks_per_disk: u64,
    /// Zone checksums on every member: data blocks per checksum block (none: parity only).
    pub zone_data_blocks: Option<u32>,
    /// Requests each drive holds in its queue (8 in the paper).
    pub drive_queue_depth: usize,
    /// Blocks of the flash device.
    pub flash_block_count: u64,
    /// Whether the flash device keeps the metadata's bytes (needed to read
    /// snapshots and to delete them; see [`FlashDisk`]).
    pub flash_keeps_metadata: bool,
    /// Seed of the drives' initial rotational positions.
    pub seed: u64,
}

/// The devices of one run, ready to be given to a volume.
#[derive(Debug)]
pub struct Testbed {
    /// The shared clock.
    pub handle: SimulationHandle,
    /// RAID-4 over the member disks.
    pub array: Array,
    /// The flash device.
    pub flash: FlashDisk,
}

/// Blocks of each member that hold data or parity, out of `window_blocks` with
/// zone checksums of `zone_data_blocks` (as [`RaidDevice`] lays them out): whole
/// stripe units of `unit_blocks`.
pub fn member_data_blocks(window_blocks: u64, unit_blocks: u64, zone_data_blocks: Option<u32>) -> u64 {
    let usable = match zone_data_blocks.map(u64::from) {
        Some(zone_blocks) => window_blocks / (zone_blocks + 1) * zone_blocks,
        None => window_blocks,
    };
    usable / unit_blocks * unit_blocks
}

impl TestbedConfig {
    /// The array's capacity in blocks.
    pub fn array_block_count(&self) -> u64 {
        let unit_blocks = self.stripe_unit_bytes / BLOCK_SIZE_BYTES;
        member_data_blocks(self.window_blocks_per_disk, unit_blocks, self.zone_data_blocks)
            * self.data_disk_count as u64
    }

    /// Blocks of the whole drive.
    pub fn drive_block_count(&self) -> u64 {
        self.model.sector_count() / SECTORS_PER_BLOCK
    }

    /// The first block of each member's window: the window is centred on the
    /// drive (aligned down to a stripe unit), so its tracks have the drive's
    /// median length.
    pub fn window_first_block(&self) -> u64 {
        let unit_blocks = self.stripe_unit_bytes / BLOCK_SIZE_BYTES;
        let spare = self.drive_block_count() - self.window_blocks_per_disk;
        (spare / 2) / unit_blocks * unit_blocks
    }

    /// Builds the simulation, the member disks, the array and the flash device.
    pub fn build(&self) -> Result<Testbed, LabError> {
        let invalid = |message: String| LabError::InvalidParameter { parameter: "scale", message };
        let unit_blocks = self.stripe_unit_bytes / BLOCK_SIZE_BYTES;
        if self.window_blocks_per_disk == 0
            || !self.window_blocks_per_disk.is_multiple_of(unit_blocks)
            || self.window_blocks_per_disk > self.drive_block_count()
        {
            return Err(invalid(format!(
                "{} blocks per disk is not a whole number of {unit_blocks}-block stripe units within the drive's {}",
                self.window_blocks_per_disk,
                self.drive_block_count()
            )));
        }
        let handle = SimulationHandle::new(Simulation::new(self.seed));
        let first_block = self.window_first_block();
        let mut members = Vec::with_capacity(self.data_disk_count + 1);
        for index in 0..=self.data_disk_count {
            let device_seed = handle.with_simulation(|simulation| simulation.device_seed(index));
            let disk = HardDisk::new(Arc::clone(&self.model), device_seed).with_queue_depth(self.drive_queue_depth);
            let options = SimulatedOptions::named(format!("disk{index}")).metadata_only();
            let device = SimulatedDevice::hard_disk(&handle, disk, options)?;
            members.push(MemberDisk::new(device, first_block, self.window_blocks_per_disk, self.model.sector_count()));
        }
        let mut config = RaidConfig::raid4().with_stripe_unit_bytes(self.stripe_unit_bytes);
        config.zone_data_blocks = self.zone_data_blocks;
        let array = RaidDevice::new(members, config)?;
        assert_eq!(array.info().block_count, self.array_block_count(), "the array's layout as computed");
        let flash_device = FlashDevice::new(staging_flash_params(self.flash_block_count));
        let flash = SimulatedDevice::flash(&handle, flash_device, SimulatedOptions::named("flash").metadata_only())?;
        let flash = if self.flash_keeps_metadata { FlashDisk::keeping_metadata(flash) } else { FlashDisk::new(flash) };
        Ok(Testbed { handle, array, flash })
    }
}

/// Places every member's heads at a random LBN of its drive.
pub fn randomise_arms(array: &mut Array, rng: &mut ChaCha8Rng) {
    for member in 0..array.member_count() {
        array.member_mut(member).randomise_arm(rng);
    }
}

/// Empties every member's cache of the window's data
/// ([`MemberDisk::empty_cache`]); the members run `model`.
pub fn empty_caches(array: &mut Array, model: &DiskModel) -> Result<(), LabError> {
    for member in 0..array.member_count() {
        array.member_mut(member).empty_cache(model)?;
    }
    Ok(())
}

/// Every member's completed requests since the last call, by member.
pub fn take_member_logs(array: &mut Array) -> Vec<Vec<MemberIo>> {
    (0..array.member_count()).map(|member| array.member_mut(member).take_log()).collect()
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn small_config() -> TestbedConfig {
        TestbedConfig {
            model: Arc::new(DiskModel::builtin("nearline7200").unwrap()),
            data_disk_count: 4,
            stripe_unit_bytes: 1 << 20,
            window_blocks_per_disk: 256 * 64,
            zone_data_blocks: None,
            drive_queue_depth: 8,
            flash_block_count: 4096,
            flash_keeps_metadata: false,
            seed: 3,
        }
    }

    #[test]
    fn the_array_is_four_windows_and_records_member_io() {
        let mut testbed = small_config().build().unwrap();
        assert_eq!(testbed.array.info().block_count, 4 * 256 * 64);
        assert!(!testbed.array.info().stores_payload);
        // A full stripe: one 1 MiB write per member (parity computed, nothing read).
        testbed.array.execute(vec![IoRequest::write(0, 4 * 256, Vec::new())]).unwrap();
        let logs = take_member_logs(&mut testbed.array);
        assert_eq!(logs.len(), 5);
        for log in &logs {
            assert_eq!(log.len(), 1);
            assert_eq!((log[0].op, log[0].block, log[0].block_count), (IoOp::Write, 0, 256));
            assert!(log[0].completed_ns > log[0].submitted_ns);
        }
        assert!(take_member_logs(&mut testbed.array).iter().all(Vec::is_empty), "logs are drained");
    }

    #[test]
    fn the_window_is_centred_and_refuses_blocks_beyond_it() {
        let config = small_config();
        let first = config.window_first_block();
        let middle = config.drive_block_count() / 2;
        assert!(first <= middle && middle - first <= config.window_blocks_per_disk / 2 + 256);
        let mut testbed = config.build().unwrap();
        let member = testbed.array.member_mut(0);
        let completions = member.execute(vec![IoRequest::read(256 * 64, 1)]).unwrap();
        assert!(matches!(completions[0].result, Err(DeviceError::OutOfRange { .. })));
        assert!(member.take_log().is_empty(), "refused requests are not recorded");
    }

    #[test]
    fn randomising_the_arms_takes_no_virtual_time() {
        let mut testbed = small_config().build().unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        testbed.array.execute(vec![IoRequest::read(0, 8)]).unwrap();
        let before = testbed.handle.now_ns();
        randomise_arms(&mut testbed.array, &mut rng);
        assert_eq!(testbed.handle.now_ns(), before);
    }

    #[test]
    fn flash_times_every_request_and_refuses_to_read_bytes_it_did_not_keep() {
        let mut testbed = small_config().build().unwrap();
        let flash = &mut testbed.flash;
        let mut data = vec![0u8; 3 * 4096];
        data[4096 + 4095] = 7;
        flash.write_blocks(10, &data).unwrap();
        assert!(testbed.handle.now_ns() > 0, "the write took virtual time");
        assert_eq!(flash.unkept_block_count(), 1, "only the block with a non-zero byte is marked");
        assert_eq!(flash.read_blocks(10, 1).unwrap(), vec![0; 4096], "staged zeroes read back");
        assert!(matches!(flash.read_blocks(10, 3), Err(DeviceError::Io { block: 11, .. })));
        flash.write_blocks(11, &[0; 4096]).unwrap();
        assert_eq!(flash.read_blocks(10, 3).unwrap(), vec![0; 3 * 4096], "overwritten with zeroes");
        flash.write_blocks(12, &data[4096..8192]).unwrap();
        flash.execute(vec![IoRequest::trim(12, 1)]).unwrap();
        assert_eq!(flash.unkept_block_count(), 0, "a trimmed block reads as zeroes again");
        let beyond = flash.info().block_count;
        assert!(matches!(flash.read_blocks(beyond, 1), Err(DeviceError::OutOfRange { .. })));
    }

    #[test]
    fn flash_keeping_metadata_reads_it_back_until_overwritten_or_trimmed() {
        let mut testbed = TestbedConfig { flash_keeps_metadata: true, ..small_config() }.build().unwrap();
        let flash = &mut testbed.flash;
        let mut data = vec![0u8; 3 * 4096];
        data[4096] = 5;
        data[2 * 4096 + 17] = 9;
        flash.write_blocks(20, &data).unwrap();
        assert_eq!(flash.unkept_block_count(), 2);
        assert_eq!(flash.read_blocks(20, 3).unwrap(), data, "metadata and staged zeroes read back");
        flash.write_blocks(21, &[0; 4096]).unwrap();
        flash.execute(vec![IoRequest::trim(22, 1)]).unwrap();
        assert_eq!(flash.read_blocks(20, 3).unwrap(), vec![0; 3 * 4096], "overwritten with zeroes, then trimmed");
        assert_eq!(flash.unkept_block_count(), 0);
    }

    #[test]
    fn a_window_larger_than_the_drive_is_refused() {
        let mut config = small_config();
        config.window_blocks_per_disk = (config.drive_block_count() / 256 + 1) * 256;
        assert!(matches!(config.build(), Err(LabError::InvalidParameter { .. })));
    }
}
