//! The discrete-event core: one integer clock shared by any number of devices.
//!
//! Devices are passive: each says when it next needs attention
//! ([`SimDevice::next_event_ns`]) and runs up to a time when told
//! ([`SimDevice::advance`]). The [`Simulation`] repeatedly advances the clock to
//! the earliest pending event across devices, so devices progress in parallel in
//! virtual time. Ties between devices break by device index, and completions of
//! one device keep its own order, so a run is deterministic.

use std::collections::VecDeque;

use crate::{DiskCompletion, DiskRequest, Nanos};

/// A device that runs in virtual time.
pub trait SimDevice: std::fmt::Debug + Send {
    /// Delivers a request at `now_ns` (never earlier than a previous call's time).
    fn arrive(&mut self, now_ns: Nanos, request: DiskRequest);
    /// When the device next completes a request, if it has work.
    fn next_event_ns(&self) -> Option<Nanos>;
    /// Runs up to and including `until_ns`, appending completions in time order.
    fn advance(&mut self, until_ns: Nanos, completions: &mut Vec<DiskCompletion>);
    /// True when nothing is queued or in service.
    fn is_idle(&self) -> bool;
    /// Places the heads over `lbn`'s track at `now_ns` without I/O (a hard disk);
    /// devices without heads ignore it. Called only while the device is idle.
    fn move_heads_to(&mut self, _now_ns: Nanos, _lbn: u64) {}
}

/// Identifies a device within a [`Simulation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceIndex(pub usize);

/// The clock and the devices on it.
#[derive(Debug)]
pub struct Simulation {
    seed: u64,
    now_ns: Nanos,
    devices: Vec<Box<dyn SimDevice>>,
    /// Completions already produced but not yet handed out, in order.
    ready: VecDeque<(DeviceIndex, DiskCompletion)>,
    scratch: Vec<DiskCompletion>,
}

impl Simulation {
    /// An empty simulation at time zero. The seed is kept for callers that derive
    /// device seeds from it ([`Simulation::device_seed`]).
    pub fn new(seed: u64) -> Simulation {
        Simulation { seed, now_ns: 0, devices: Vec::new(), ready: VecDeque::new(), scratch: Vec::new() }
    }

    /// The run's seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// A seed for the `index`-th device, derived from the run's seed.
    pub fn device_seed(&self, index: usize) -> u64 {
        crate::disk::split_mix(self.seed ^ (index as u64).wrapping_mul(0xA076_1D64_78BD_642F))
    }

    /// Adds a device; returns its index.
    pub fn add_device(&mut self, device: Box<dyn SimDevice>) -> DeviceIndex {
        self.devices.push(device);
        DeviceIndex(self.devices.len() - 1)
    }

    /// The current virtual time.
    pub fn now_ns(&self) -> Nanos {
        self.now_ns
    }

    /// Number of devices.
    pub fn device_count(&self) -> usize {
        self.devices.len()
    }

    /// Places `device`'s heads over `lbn`'s track now, without I/O and without
    /// advancing the clock (experiments randomise the arm between batches so that
    /// seeks do not depend on the span of the data used). Devices without heads
    /// ignore it.
    ///
    /// # Panics
    /// If the device is not idle: moving the arm under a request in service would
    /// contradict its already computed timing.
    pub fn move_heads_to(&mut self, device: DeviceIndex, lbn: u64) {
        let now = self.now_ns;
        let target = &mut self.devices[device.0];
        assert!(target.is_idle(), "device {} must be idle to move its heads", device.0);
        target.move_heads_to(now, lbn);
    }

    /// Delivers `request` to `device` now.
    pub fn submit(&mut self, device: DeviceIndex, request: DiskRequest) {
        let now = self.now_ns;
        self.devices[device.0].arrive(now, request);
    }

    /// Moves the clock forward to `time_ns` (never back), running every device;
    /// completions produced on the way are kept for [`Simulation::next_completion`].
    pub fn advance_to(&mut self, time_ns: Nanos) {
        while let Some(next) = self.earliest_event().filter(|&next| next <= time_ns) {
            self.run_until(next);
        }
        self.now_ns = self.now_ns.max(time_ns);
    }

    /// Advances the clock to the earliest pending completion across all devices
    /// and returns it; `None` when every device is idle and nothing is buffered.
    pub fn next_completion(&mut self) -> Option<(DeviceIndex, DiskCompletion)> {
        if self.ready.is_empty() {
            let next = self.earliest_event()?;
            self.run_until(next);
        }
        let (device, completion) = self.ready.pop_front()?;
        self.now_ns = self.now_ns.max(completion.completion_ns);
        Some((device, completion))
    }

    /// True when no device has work and nothing is buffered.
    pub fn is_idle(&self) -> bool {
        self.ready.is_empty() && self.devices.iter().all(|device| device.is_idle())
    }

    fn earliest_event(&self) -> Option<Nanos> {
        self.devices.iter().filter_map(|device| device.next_event_ns()).min()
    }

    /// Runs every device whose next event is at `time_ns`, in index order.
    fn run_until(&mut self, time_ns: Nanos) {
        for (index, device) in self.devices.iter_mut().enumerate() {
            if device.next_event_ns().is_some_and(|next| next <= time_ns) {
                self.scratch.clear();
                device.advance(time_ns, &mut self.scratch);
                self.ready.extend(self.scratch.drain(..).map(|completion| (DeviceIndex(index), completion)));
            }
        }
        self.now_ns = self.now_ns.max(time_ns);
    }
}
