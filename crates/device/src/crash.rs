//! Crash recording: a wrapper that keeps what was written apart from what is
//! durable, and can put the device beneath into any state a power loss could
//! leave behind.
//!
//! # The model
//!
//! - The wrapper records, in completion order, every write and trim that
//!   completed successfully (a trim is recorded as a write of zeroes) and every
//!   flush that succeeded. Writes are numbered from 0 in that order. *Boundary* `b`
//!   (`0..=write_count()`) is the moment just after exactly `b` writes completed.
//! - A write is *durable* once a flush that succeeded after its completion has been
//!   recorded, or at its completion if it was submitted with FUA. Completed writes
//!   that are not durable are *pending*. Reads always see every completed write (the
//!   device beneath holds the written state).
//! - A crash at boundary `b` leaves: the contents from before the recording
//!   started, with every write durable at `b` applied; each pending write at `b`
//!   dropped or kept according to [`PendingWrites`] (the device may have written any
//!   subset of them, in any order — a kept write is applied in its completion order);
//!   and optionally one write *torn* ([`Tear`]): the write in flight at `b` (write
//!   number `b`, if it exists) or, when crashing after the last write, one of the
//!   dropped pending writes chosen by the tear's seed. A torn write changes some of
//!   its `atomic_write_bytes` units (sectors) and leaves the others as they were.
//! - Writes after write `b` and flushes after boundary `b` never happened.
//!
//! [`CrashDevice::crash_image`] computes such a state without touching the device;
//! [`CrashDevice::crash_at`] and [`CrashDevice::crash`] write it to the device
//! beneath and start a new recording from it (boundaries count from 0 again).
//! A crash test runs its workload once, then for every boundary applies
//! `crash_image(point)` to a copy of the initial device, recovers and checks.
//!
//! The recording keeps every write's data and the pre-image of each block written
//! (read from the device beneath before the first write to it), so it is meant for
//! test-sized devices that store payload.

use std::collections::{BTreeMap, BTreeSet};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::{BatchTicket, BlockDevice, DeviceError, DeviceInfo, IoCompletion, IoOp, IoRequest};

/// What happens to the writes still pending (completed, not durable) at a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PendingWrites {
    /// None of them reached the medium.
    DropAll,
    /// All of them reached the medium.
    KeepAll,
    /// Each reached the medium with probability ½, drawn from the seed.
    KeepSeeded {
        /// Seeds the choice.
        seed: u64,
    },
}

/// How the torn write is torn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Tear {
    /// The first `unit_count` atomic units were written, the rest not (clamped to
    /// the write's length).
    Prefix {
        /// Units written.
        unit_count: u64,
    },
    /// Each atomic unit was written with probability ½, drawn from the seed.
    Seeded {
        /// Seeds the choice (and, when crashing after the last write, which dropped
        /// pending write tears; a prefix tear there tears the last one).
        seed: u64,
    },
}

/// Where and how to crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrashPoint {
    /// The number of writes completed before the crash (`0..=write_count()`).
    pub boundary: u64,
    /// The fate of the pending writes.
    pub pending: PendingWrites,
    /// The write torn, if any.
    pub tear: Option<Tear>,
}

impl CrashPoint {
    /// Crash after exactly `boundary` writes, dropping every pending write, with
    /// write number `boundary` (if any) torn by `seed`: the strict point a crash
    /// test iterates over.
    pub fn torn_at(boundary: u64, seed: u64) -> Self {
        Self { boundary, pending: PendingWrites::DropAll, tear: Some(Tear::Seeded { seed }) }
    }

    /// Crash after exactly `boundary` writes with nothing pending kept, nothing torn.
    pub fn clean_at(boundary: u64) -> Self {
        Self { boundary, pending: PendingWrites::DropAll, tear: None }
    }
}

/// What a crash kept, for test reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrashReport {
    /// The boundary crashed at.
    pub boundary: u64,
    /// Writes durable at the boundary.
    pub durable_write_count: u64,
    /// Pending writes kept.
    pub kept_pending_count: u64,
    /// Pending writes dropped (the torn one included).
    pub dropped_pending_count: u64,
    /// The torn write: its number, and units written out of its units.
    pub torn: Option<TornWrite>,
}

/// The write a crash tore.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TornWrite {
    /// The write's number.
    pub write_index: u64,
    /// Atomic units that were written.
    pub units_written: u64,
    /// Atomic units in the write.
    pub unit_count: u64,
}

/// A device state a crash can leave: the contents of every block the recording
/// touched (all other blocks are as before the recording).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashImage {
    /// Block → contents.
    pub blocks: BTreeMap<u64, Vec<u8>>,
    /// What the crash kept.
    pub report: CrashReport,
}

impl CrashImage {
    /// Writes the image to `device`, in runs of consecutive blocks.
    pub fn apply_to<D: BlockDevice + ?Sized>(&self, device: &mut D) -> Result<(), DeviceError> {
        let mut batch: Vec<IoRequest> = Vec::new();
        for (&block, data) in &self.blocks {
            match batch.last_mut() {
                Some(last) if last.end_block() == block && last.block_count < 256 => {
                    last.data.extend_from_slice(data);
                    last.block_count += 1;
                }
                _ => batch.push(IoRequest::write(block, 1, data.clone())),
            }
        }
        if batch.is_empty() {
            return Ok(());
        }
        for completion in device.execute(batch)? {
            completion.result?;
        }
        device.flush()
    }
}

/// A write or trim of a batch not yet waited for: first block, data, FUA.
type Modification = (u64, Vec<u8>, bool);

#[derive(Debug, Clone)]
enum Event {
    Write { block: u64, data: Vec<u8>, fua: bool },
    Flush,
}

/// Records writes and flushes to `D` so as to reproduce any crash state.
#[derive(Debug)]
pub struct CrashDevice<D> {
    inner: D,
    info: DeviceInfo,
    /// Contents, at the start of the recording, of every block written since.
    base: BTreeMap<u64, Vec<u8>>,
    events: Vec<Event>,
    write_count: u64,
    /// Per outstanding batch, the modifying requests (block, data, fua) by position.
    outstanding: BTreeMap<BatchTicket, Vec<Option<Modification>>>,
}

impl<D: BlockDevice> CrashDevice<D> {
    /// Starts recording on `inner`, whose current contents count as durable.
    pub fn new(inner: D) -> Self {
        let info = inner.info();
        assert!(info.stores_payload, "crash recording needs a device that stores payload");
        assert!(info.atomic_write_bytes > 0, "the atomic write unit is at least a byte");
        assert!(
            info.block_size_bytes.is_multiple_of(info.atomic_write_bytes),
            "a block is a whole number of atomic units"
        );
        Self { inner, info, base: BTreeMap::new(), events: Vec::new(), write_count: 0, outstanding: BTreeMap::new() }
    }

    /// Writes completed since the recording started: boundaries are `0..=write_count()`.
    pub fn write_count(&self) -> u64 {
        self.write_count
    }

    /// Number of crash boundaries (`write_count() + 1`).
    pub fn boundary_count(&self) -> u64 {
        self.write_count + 1
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably (writes issued directly to it are not recorded).
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// Unwraps the device.
    pub fn into_inner(self) -> D {
        self.inner
    }

    /// The state a crash at `point` leaves, computed without touching the device.
    /// Panics if `point.boundary` exceeds [`CrashDevice::write_count`].
    pub fn crash_image(&self, point: CrashPoint) -> CrashImage {
        assert!(point.boundary <= self.write_count, "boundary {} > {} writes", point.boundary, self.write_count);
        let writes = self.writes_with_durability(point.boundary);
        let mut image = self.base.clone();
        let mut report = CrashReport { boundary: point.boundary, ..CrashReport::default() };
        let mut pending_rng = match point.pending {
            PendingWrites::KeepSeeded { seed } => Some(ChaCha8Rng::seed_from_u64(seed)),
            _ => None,
        };
        let mut dropped = BTreeSet::new();
        let mut kept = Vec::with_capacity(writes.len());
        for (index, &(_, durable)) in writes.iter().enumerate() {
            let keep = durable
                || match point.pending {
                    PendingWrites::DropAll => false,
                    PendingWrites::KeepAll => true,
                    PendingWrites::KeepSeeded { .. } => pending_rng.as_mut().expect("seeded").gen_bool(0.5),
                };
            match (durable, keep) {
                (true, _) => report.durable_write_count += 1,
                (false, true) => report.kept_pending_count += 1,
                (false, false) => {
                    report.dropped_pending_count += 1;
                    dropped.insert(index);
                }
            }
            kept.push(keep);
        }
        let torn_index = point.tear.and_then(|tear| self.torn_write_index(point.boundary, tear, &dropped));
        for (index, &(event, _)) in writes.iter().enumerate() {
            if kept[index] {
                self.apply_whole(&mut image, event);
            } else if Some(index as u64) == torn_index {
                report.torn = Some(self.apply_torn(&mut image, event, index as u64, point.tear.expect("tear")));
            }
        }
        if let Some(index) = torn_index.filter(|&index| index == point.boundary) {
            // The write in flight at the boundary: after every completed write.
            let event = self.write_event(index);
            report.torn = Some(self.apply_torn(&mut image, event, index, point.tear.expect("tear")));
        }
        CrashImage { blocks: image, report }
    }

    /// Crashes at `point`: writes the crash state to the device beneath and starts
    /// a new recording from it. No batch may be outstanding.
    pub fn crash_at(&mut self, point: CrashPoint) -> Result<CrashReport, DeviceError> {
        assert!(self.outstanding.is_empty(), "crash with batches still outstanding");
        let image = self.crash_image(point);
        image.apply_to(&mut self.inner)?;
        self.base.extend(image.blocks);
        self.events.clear();
        self.write_count = 0;
        Ok(image.report)
    }

    /// Crashes now: durable writes kept, each pending write kept or dropped by
    /// `seed`, one dropped pending write (if any) torn by `seed`.
    pub fn crash(&mut self, seed: u64) -> Result<CrashReport, DeviceError> {
        self.crash_at(CrashPoint {
            boundary: self.write_count,
            pending: PendingWrites::KeepSeeded { seed },
            tear: Some(Tear::Seeded { seed: seed ^ 0x7ea2 }),
        })
    }

    /// The writes completed before `boundary`, each with whether it is durable there.
    fn writes_with_durability(&self, boundary: u64) -> Vec<(&Event, bool)> {
        let mut writes: Vec<(&Event, bool)> = Vec::new();
        for event in &self.events {
            match event {
                Event::Write { fua, .. } if (writes.len() as u64) < boundary => writes.push((event, *fua)),
                Event::Write { .. } => break,
                Event::Flush => writes.iter_mut().for_each(|(_, durable)| *durable = true),
            }
        }
        writes
    }

    fn write_event(&self, index: u64) -> &Event {
        let index = usize::try_from(index).expect("a write index counts events held in memory");
        self.events.iter().filter(|event| matches!(event, Event::Write { .. })).nth(index).expect("write")
    }

    /// Which write a tear applies to: the one in flight at the boundary, else one
    /// of the dropped pending writes chosen by the tear's seed.
    fn torn_write_index(&self, boundary: u64, tear: Tear, dropped: &BTreeSet<usize>) -> Option<u64> {
        if boundary < self.write_count {
            return Some(boundary);
        }
        let candidates: Vec<usize> = dropped.iter().copied().collect();
        let chosen = match tear {
            Tear::Seeded { seed } => candidates.choose(&mut ChaCha8Rng::seed_from_u64(seed)),
            Tear::Prefix { .. } => candidates.last(),
        };
        chosen.map(|&index| index as u64)
    }

    fn apply_whole(&self, image: &mut BTreeMap<u64, Vec<u8>>, event: &Event) {
        let Event::Write { block, data, .. } = event else { unreachable!("only writes are applied") };
        let block_size = self.info.block_size_bytes as usize;
        for (offset, chunk) in data.chunks(block_size).enumerate() {
            image.insert(block + offset as u64, chunk.to_vec());
        }
    }

    fn apply_torn(&self, image: &mut BTreeMap<u64, Vec<u8>>, event: &Event, index: u64, tear: Tear) -> TornWrite {
        let Event::Write { block, data, .. } = event else { unreachable!("only writes are torn") };
        let block_size = self.info.block_size_bytes as usize;
        let unit_bytes = self.info.atomic_write_bytes as usize;
        let unit_count = (data.len() / unit_bytes) as u64;
        let written: Vec<bool> = match tear {
            Tear::Prefix { unit_count: prefix } => (0..unit_count).map(|unit| unit < prefix).collect(),
            Tear::Seeded { seed } => {
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ index.rotate_left(17));
                (0..unit_count).map(|_| rng.gen_bool(0.5)).collect()
            }
        };
        for (unit, _) in written.iter().enumerate().filter(|(_, &written)| written) {
            let byte = unit * unit_bytes;
            let target = block + (byte / block_size) as u64;
            let within = byte % block_size;
            let contents = image.get_mut(&target).expect("every written block has a pre-image");
            contents[within..within + unit_bytes].copy_from_slice(&data[byte..byte + unit_bytes]);
        }
        TornWrite { write_index: index, units_written: written.iter().filter(|&&w| w).count() as u64, unit_count }
    }

    /// Reads the pre-image of every block about to be written for the first time.
    fn capture_pre_images(&mut self, batch: &[IoRequest]) -> Result<(), DeviceError> {
        let mut missing: BTreeSet<u64> = BTreeSet::new();
        for request in batch.iter().filter(|request| request.op != IoOp::Read) {
            if crate::validate_request(&self.info, request).is_ok() {
                missing.extend((request.block..request.end_block()).filter(|block| !self.base.contains_key(block)));
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let reads: Vec<IoRequest> = missing.iter().map(|&block| IoRequest::read(block, 1)).collect();
        for (block, completion) in missing.into_iter().zip(self.inner.execute(reads)?) {
            self.base.insert(block, completion.result?);
        }
        Ok(())
    }
}

impl<D: BlockDevice> BlockDevice for CrashDevice<D> {
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }

    fn submit(&mut self, batch: Vec<IoRequest>) -> Result<BatchTicket, DeviceError> {
        self.capture_pre_images(&batch)?;
        let block_size = self.info.block_size_bytes as usize;
        let modifications = batch
            .iter()
            .map(|request| match request.op {
                IoOp::Read => None,
                IoOp::Write => Some((request.block, request.data.clone(), request.fua)),
                IoOp::Trim | IoOp::WriteZeroes => {
                    Some((request.block, vec![0; request.block_count as usize * block_size], request.fua))
                }
            })
            .collect();
        let ticket = self.inner.submit(batch)?;
        self.outstanding.insert(ticket, modifications);
        Ok(ticket)
    }

    fn wait(&mut self, ticket: BatchTicket) -> Result<Vec<IoCompletion>, DeviceError> {
        let completions = self.inner.wait(ticket)?;
        let modifications = self.outstanding.remove(&ticket).expect("the inner device accepted a ticket we never saw");
        for (modification, completion) in modifications.into_iter().zip(&completions) {
            if let (Some((block, data, fua)), Ok(_)) = (modification, &completion.result) {
                self.events.push(Event::Write { block, data, fua });
                self.write_count += 1;
            }
        }
        Ok(completions)
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        self.inner.flush()?;
        self.events.push(Event::Flush);
        Ok(())
    }

    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryDevice;

    fn block(value: u8) -> Vec<u8> {
        vec![value; 4096]
    }

    /// Writes 1 to block 0, flushes, writes 2 to block 1 and 3 to block 0, FUA 4 to block 2.
    fn recorded() -> CrashDevice<MemoryDevice> {
        let mut device = CrashDevice::new(MemoryDevice::new(4096, 4));
        device.write_blocks(0, &block(1)).unwrap();
        device.flush().unwrap();
        device.write_blocks(1, &block(2)).unwrap();
        device.write_blocks(0, &block(3)).unwrap();
        device.execute(vec![IoRequest::write(2, 1, block(4)).with_fua()]).unwrap();
        device
    }

    #[test]
    fn reads_see_written_state_and_a_crash_keeps_only_durable_writes() {
        let mut device = recorded();
        assert_eq!(device.write_count(), 4);
        assert_eq!(device.read_blocks(0, 1).unwrap(), block(3));
        let report = device.crash_at(CrashPoint::clean_at(4)).unwrap();
        assert_eq!(report.durable_write_count, 2);
        assert_eq!(report.dropped_pending_count, 2);
        assert_eq!(device.read_blocks(0, 1).unwrap(), block(1));
        assert_eq!(device.read_blocks(1, 1).unwrap(), block(0));
        assert_eq!(device.read_blocks(2, 1).unwrap(), block(4), "FUA write is durable");
        assert_eq!(device.write_count(), 0, "a new recording starts");
    }

    #[test]
    fn boundaries_replay_the_history() {
        let device = recorded();
        let at = |boundary| device.crash_image(CrashPoint { tear: None, pending: PendingWrites::KeepAll, boundary });
        assert_eq!(at(0).blocks[&0], block(0));
        assert_eq!(at(1).blocks[&0], block(1));
        assert_eq!(at(3).blocks[&0], block(3));
        assert_eq!(at(3).blocks[&2], block(0));
        assert_eq!(at(4).blocks[&2], block(4));
    }

    #[test]
    fn the_write_in_flight_tears_at_sector_granularity() {
        let device = recorded();
        let image = device.crash_image(CrashPoint {
            boundary: 2,
            pending: PendingWrites::DropAll,
            tear: Some(Tear::Prefix { unit_count: 3 }),
        });
        // Write 2 (3 to block 0) is in flight: 3 of its 8 sectors reached the medium.
        let torn = &image.blocks[&0];
        assert_eq!(&torn[..1536], &vec![3; 1536][..]);
        assert_eq!(&torn[1536..], &vec![1; 2560][..]);
        assert_eq!(image.blocks[&1], block(0), "pending write 1 dropped");
        assert_eq!(image.report.torn, Some(TornWrite { write_index: 2, units_written: 3, unit_count: 8 }));
    }

    #[test]
    fn seeded_crashes_are_deterministic_and_keep_durable_writes() {
        for seed in 0..20 {
            let first = recorded().crash(seed).unwrap();
            let mut device = recorded();
            assert_eq!(device.crash(seed).unwrap(), first);
            assert_eq!(device.read_blocks(2, 1).unwrap(), block(4));
            let block0 = device.read_blocks(0, 1).unwrap();
            assert!(block0.chunks(512).all(|sector| sector == [1; 512] || sector == [3; 512]));
        }
    }

    #[test]
    fn images_apply_to_a_fresh_copy() {
        let device = recorded();
        let mut copy = MemoryDevice::new(4096, 4);
        device.crash_image(CrashPoint::clean_at(3)).apply_to(&mut copy).unwrap();
        assert_eq!(copy.read_blocks(0, 3).unwrap(), [block(1), block(0), block(0)].concat());
    }
}
