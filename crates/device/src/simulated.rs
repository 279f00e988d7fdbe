//! A [`BlockDevice`] over a simulated hard disk or flash device in virtual time.
//!
//! Several devices share one [`SimulationHandle`] (an `Rc<RefCell<…>>`: a
//! simulation is single-threaded). `submit` delivers the batch's requests to the
//! simulated drive at the simulation's current time; `wait` runs the shared event
//! loop until every request of the ticket has completed, keeping completions that
//! belong to other tickets or other devices for their own `wait`. Batches
//! submitted to several devices before waiting are therefore serviced in parallel
//! in virtual time, as a RAID group's members would be.
//!
//! A device block of `block_size_bytes` maps to `block_size_bytes / 512` sectors
//! (8 for 4 KiB blocks). Data is either stored (sparse: a map of the blocks
//! written) or dropped (`stores_payload: false`, reads return no bytes), so a
//! multi-terabyte simulated volume fits in memory. Trims and flushes cost no
//! virtual time: the drive models have no discard, and a write completes once
//! the model says so.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use proxima_disk::{DeviceIndex, DiskCompletion, DiskOp, DiskRequest, FlashDevice, HardDisk, SimDevice, Simulation};

use crate::{validate_request, BatchTicket, BlockDevice, DeviceError, DeviceInfo, IoCompletion, IoOp, IoRequest};

/// The sector size of the simulated drives' addressing.
const SECTOR_SIZE_BYTES: u32 = 512;

/// A simulation shared by several [`SimulatedDevice`]s, with the completions the
/// event loop produced that no one has collected yet.
#[derive(Debug)]
struct SharedSimulation {
    simulation: Simulation,
    next_request_id: u64,
    /// Completions by request id, waiting for their device's `wait`.
    arrived: HashMap<u64, DiskCompletion>,
}

/// A cloneable handle on one simulation and its clock.
#[derive(Debug, Clone)]
pub struct SimulationHandle {
    shared: Rc<RefCell<SharedSimulation>>,
}

impl SimulationHandle {
    /// Shares `simulation` (which may already hold devices).
    pub fn new(simulation: Simulation) -> Self {
        let shared = SharedSimulation { simulation, next_request_id: 0, arrived: HashMap::new() };
        Self { shared: Rc::new(RefCell::new(shared)) }
    }

    /// The simulation clock in nanoseconds.
    pub fn now_ns(&self) -> u64 {
        self.shared.borrow().simulation.now_ns()
    }

    /// Runs `action` on the simulation (to add devices, advance the clock, ...).
    /// Completions it takes out of the simulation itself are lost to the devices,
    /// so it must not call `next_completion` while devices have requests in flight.
    pub fn with_simulation<T>(&self, action: impl FnOnce(&mut Simulation) -> T) -> T {
        action(&mut self.shared.borrow_mut().simulation)
    }

    /// Runs the event loop until request `id` has completed; returns its completion.
    fn completion_of(&self, id: u64) -> DiskCompletion {
        let mut shared = self.shared.borrow_mut();
        if let Some(completion) = (!shared.arrived.is_empty()).then(|| shared.arrived.remove(&id)).flatten() {
            return completion;
        }
        loop {
            let (_, completion) = shared
                .simulation
                .next_completion()
                .unwrap_or_else(|| panic!("simulation went idle before request {id} completed"));
            // Completions mostly come in the order they are waited for: only
            // the others are kept for later.
            if completion.id == id {
                return completion;
            }
            shared.arrived.insert(completion.id, completion);
        }
    }

    fn deliver(&self, device: DeviceIndex, op: DiskOp, lbn: u64, sector_count: u32) -> u64 {
        let mut shared = self.shared.borrow_mut();
        let id = shared.next_request_id;
        shared.next_request_id += 1;
        shared.simulation.submit(device, DiskRequest { id, op, lbn, sector_count });
        id
    }
}

/// How a simulated device presents itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimulatedOptions {
    /// Name in errors and reports.
    pub name: String,
    /// Device block size (a multiple of 512; 4096 by default).
    pub block_size_bytes: u32,
    /// Keep written data (sparse) or drop it (metadata-only).
    pub stores_payload: bool,
}

impl SimulatedOptions {
    /// 4 KiB blocks, payload stored.
    pub fn named(name: impl Into<String>) -> Self {
        Self { name: name.into(), block_size_bytes: 4096, stores_payload: true }
    }

    /// The same options without payload (metadata-only).
    pub fn metadata_only(mut self) -> Self {
        self.stores_payload = false;
        self
    }
}

/// How one request of a batch will be answered.
#[derive(Debug)]
enum Slot {
    /// Answered at submission (invalid request, trim).
    Done(IoCompletion),
    /// Delivered to the simulated drive as request `id`; `data` is what a read returns.
    Simulated { id: u64, data: Vec<u8> },
}

/// A [`BlockDevice`] backed by one device of a shared simulation.
#[derive(Debug)]
pub struct SimulatedDevice {
    handle: SimulationHandle,
    device: DeviceIndex,
    info: DeviceInfo,
    sectors_per_block: u64,
    /// Written blocks, when payload is stored; absent blocks read as zeroes.
    payload: BTreeMap<u64, Vec<u8>>,
    pending: BTreeMap<u64, Vec<Slot>>,
    next_ticket: u64,
}

impl SimulatedDevice {
    /// Adds `device` (of `sector_count` 512-byte sectors) to the simulation behind
    /// `handle` and presents it as a block device.
    pub fn new(
        handle: &SimulationHandle,
        device: Box<dyn SimDevice>,
        sector_count: u64,
        options: SimulatedOptions,
    ) -> Result<Self, DeviceError> {
        let block_size = options.block_size_bytes;
        if block_size == 0 || !block_size.is_multiple_of(SECTOR_SIZE_BYTES) || !block_size.is_power_of_two() {
            return Err(DeviceError::Invalid {
                device: options.name,
                detail: format!("block size {block_size} is not a power-of-two multiple of 512 bytes"),
            });
        }
        let sectors_per_block = u64::from(block_size / SECTOR_SIZE_BYTES);
        let index = handle.with_simulation(|simulation| simulation.add_device(device));
        Ok(Self {
            handle: handle.clone(),
            device: index,
            info: DeviceInfo {
                name: options.name,
                block_size_bytes: block_size,
                block_count: sector_count / sectors_per_block,
                atomic_write_bytes: SECTOR_SIZE_BYTES,
                stores_payload: options.stores_payload,
            },
            sectors_per_block,
            payload: BTreeMap::new(),
            pending: BTreeMap::new(),
            next_ticket: 0,
        })
    }

    /// A simulated hard disk; its capacity is the model's.
    pub fn hard_disk(
        handle: &SimulationHandle,
        disk: HardDisk,
        options: SimulatedOptions,
    ) -> Result<Self, DeviceError> {
        let model = disk.model();
        if model.sector_size_bytes() != SECTOR_SIZE_BYTES {
            return Err(DeviceError::Invalid {
                device: options.name,
                detail: format!(
                    "model {} has {}-byte sectors; 512 are supported",
                    model.name(),
                    model.sector_size_bytes()
                ),
            });
        }
        let sector_count = model.sector_count();
        Self::new(handle, Box::new(disk), sector_count, options)
    }

    /// A simulated flash device; its capacity is its parameters'.
    pub fn flash(
        handle: &SimulationHandle,
        flash: FlashDevice,
        options: SimulatedOptions,
    ) -> Result<Self, DeviceError> {
        let sector_count = flash.params().sector_count;
        Self::new(handle, Box::new(flash), sector_count, options)
    }

    /// The device's index in the simulation.
    pub fn device_index(&self) -> DeviceIndex {
        self.device
    }

    /// The shared simulation.
    pub fn simulation(&self) -> &SimulationHandle {
        &self.handle
    }

    /// Number of blocks holding stored payload (0 in metadata-only mode).
    pub fn stored_block_count(&self) -> usize {
        self.payload.len()
    }

    fn slot_for(&mut self, request: IoRequest, now_ns: u64) -> Slot {
        let done = |result| Slot::Done(IoCompletion { result, submitted_ns: now_ns, completed_ns: now_ns });
        if let Err(error) = validate_request(&self.info, &request) {
            return done(Err(error));
        }
        let sector_count = u64::from(request.block_count) * self.sectors_per_block;
        let Ok(sector_count) = u32::try_from(sector_count) else {
            let detail = format!("{} blocks exceed one simulated request", request.block_count);
            return done(Err(DeviceError::Invalid { device: self.info.name.clone(), detail }));
        };
        let lbn = request.block * self.sectors_per_block;
        let op = match request.op {
            IoOp::Trim => {
                (request.block..request.end_block()).for_each(|block| drop(self.payload.remove(&block)));
                return done(Ok(Vec::new()));
            }
            IoOp::Read => DiskOp::Read,
            IoOp::Write | IoOp::WriteZeroes => DiskOp::Write,
        };
        let data = match request.op {
            IoOp::Read => self.read_payload(&request),
            _ => {
                self.write_payload(&request);
                Vec::new()
            }
        };
        Slot::Simulated { id: self.handle.deliver(self.device, op, lbn, sector_count), data }
    }

    fn read_payload(&self, request: &IoRequest) -> Vec<u8> {
        if !self.info.stores_payload {
            return Vec::new();
        }
        let block_size = self.info.block_size_bytes as usize;
        let mut data = vec![0; request.block_count as usize * block_size];
        for (block, stored) in self.payload.range(request.block..request.end_block()) {
            let index = usize::try_from(block - request.block).expect("a block of a request lies within its buffer");
            let start = index * block_size;
            data[start..start + block_size].copy_from_slice(stored);
        }
        data
    }

    fn write_payload(&mut self, request: &IoRequest) {
        if !self.info.stores_payload {
            return;
        }
        if request.op == IoOp::WriteZeroes {
            // Absent blocks read as zeroes.
            (request.block..request.end_block()).for_each(|block| drop(self.payload.remove(&block)));
            return;
        }
        let block_size = self.info.block_size_bytes as usize;
        for (offset, chunk) in request.data.chunks(block_size).enumerate() {
            self.payload.insert(request.block + offset as u64, chunk.to_vec());
        }
    }
}

impl BlockDevice for SimulatedDevice {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        let now_ns = self.now_ns();
        let slots: Vec<Slot> = batch.into_iter().map(|request| self.slot_for(request, now_ns)).collect();
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.pending.insert(ticket, slots);
        Ok(BatchTicket(ticket))
    }

    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        let slots = self
            .pending
            .remove(&ticket.0)
            .ok_or_else(|| DeviceError::UnknownTicket { device: self.info.name.clone(), ticket: ticket.0 })?;
        let completions = slots
            .into_iter()
            .map(|slot| match slot {
                Slot::Done(completion) => completion,
                Slot::Simulated { id, data } => {
                    let completion = self.handle.completion_of(id);
                    IoCompletion {
                        result: Ok(data),
                        submitted_ns: completion.arrival_ns,
                        completed_ns: completion.completion_ns,
                    }
                }
            })
            .collect();
        Ok(completions)
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        Ok(())
    }

    fn now_ns(&self) -> u64 {
        self.handle.now_ns()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proxima_disk::{DiskModel, FlashParams};

    use super::*;

    fn flash_params() -> FlashParams {
        FlashParams {
            read_latency_ns: 50_000,
            write_latency_ns: 200_000,
            bandwidth_bytes_per_second: 400_000_000,
            channel_count: 1,
            page_size_bytes: 4096,
            sector_count: 1 << 16,
        }
    }

    fn disk(handle: &SimulationHandle, name: &str, seed: u64) -> SimulatedDevice {
        let model = Arc::new(DiskModel::builtin("cheetah15k5").unwrap());
        let options = SimulatedOptions::named(name).metadata_only();
        SimulatedDevice::hard_disk(handle, HardDisk::new(model, seed), options).unwrap()
    }

    fn scattered_reads(seed: u64) -> Vec<IoRequest> {
        (0..6).map(|index| IoRequest::read((seed * 7_919 + index * 1_234_567) % 5_000_000, 2)).collect()
    }

    #[test]
    fn stores_payload_sparsely_and_times_requests_in_virtual_time() {
        let handle = SimulationHandle::new(Simulation::new(1));
        let mut flash =
            SimulatedDevice::flash(&handle, FlashDevice::new(flash_params()), SimulatedOptions::named("flash"))
                .unwrap();
        assert_eq!(flash.info().block_count, (1 << 16) / 8);
        flash.write_blocks(10, &[7; 8192]).unwrap();
        // 200 µs latency + 8 KiB at 400 MB/s = 20 480 ns.
        assert_eq!(flash.now_ns(), 200_000 + 20_480);
        assert_eq!(flash.read_blocks(9, 3).unwrap(), [vec![0; 4096], vec![7; 8192]].concat());
        assert_eq!(flash.stored_block_count(), 2);
        flash.trim_blocks(10, 1).unwrap();
        assert_eq!(flash.stored_block_count(), 1);
        assert!(matches!(flash.read_blocks(8191, 2), Err(DeviceError::OutOfRange { .. })));
    }

    #[test]
    fn metadata_only_devices_drop_data() {
        let handle = SimulationHandle::new(Simulation::new(1));
        let options = SimulatedOptions::named("flash").metadata_only();
        let mut flash = SimulatedDevice::flash(&handle, FlashDevice::new(flash_params()), options).unwrap();
        flash.execute(vec![IoRequest::write(0, 4, Vec::new())]).unwrap();
        assert_eq!(flash.read_blocks(0, 4).unwrap(), Vec::<u8>::new());
        assert_eq!(flash.stored_block_count(), 0);
    }

    #[test]
    fn batches_on_two_disks_proceed_in_parallel() {
        let alone = |seed| {
            let handle = SimulationHandle::new(Simulation::new(1));
            let mut device = disk(&handle, "disk", seed);
            device.execute(scattered_reads(seed)).unwrap();
            handle.now_ns()
        };
        let (time_a_ns, time_b_ns) = (alone(3), alone(4));
        let handle = SimulationHandle::new(Simulation::new(1));
        let mut disk_a = disk(&handle, "a", 3);
        let mut disk_b = disk(&handle, "b", 4);
        let ticket_a = disk_a.submit(scattered_reads(3)).unwrap();
        let ticket_b = disk_b.submit(scattered_reads(4)).unwrap();
        // Waiting on b first buffers a's completions for a's own wait.
        let completions_b = disk_b.wait(ticket_b).unwrap();
        let completions_a = disk_a.wait(ticket_a).unwrap();
        let last = |completions: &[IoCompletion]| completions.iter().map(|c| c.completed_ns).max().unwrap();
        assert_eq!(last(&completions_a), time_a_ns);
        assert_eq!(last(&completions_b), time_b_ns);
        assert_eq!(handle.now_ns(), time_a_ns.max(time_b_ns), "max(a, b), not a + b");
        assert!(time_a_ns > 0);
        assert!(time_b_ns > 0);
    }
}
