//! What experiments run on, shared by every seed: the simulated array and
//! flash device, a volume over them driven by a workload, the figures measured
//! on the drives, and independent simulations run on several threads.
//!
//! - [`testbed`]: the simulated RAID-4 of hard disks and the flash device.
//! - [`lab_volume`]: a volume over the testbed, filled, aged and read by the
//!   SRARW workload of `proxima_workload::srarw`.
//! - [`measure`]: per-batch and per-disk figures of the member disks' I/O.
//! - [`parallel`]: independent simulations, several at once.
//! - [`recording`]: devices that answer at once and record the engine's
//!   requests in rounds, for a timing simulation of many users.

pub mod lab_volume;
pub mod measure;
pub mod parallel;
pub mod recording;
pub mod testbed;

/// Serialises a [`proxima_engine::Layout`] in saved rows by its name, and reads
/// it back with [`proxima_engine::Layout::parse`].
pub mod layout_by_name {
    use proxima_engine::Layout;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the layout's name.
    pub fn serialize<S: Serializer>(layout: &Layout, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(layout.name())
    }

    /// Reads a layout's name.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Layout, D::Error> {
        let name = String::deserialize(deserializer)?;
        Layout::parse(&name).ok_or_else(|| serde::de::Error::custom(format!("no layout `{name}`")))
    }
}
