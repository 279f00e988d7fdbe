//! Content changes: when each part of each active extent last changed what it
//! reads as, so that a copy of its bytes kept outside the volume (the
//! service's read-ahead) can tell whether it is still what a read would
//! return.
//!
//! A *content clock* ticks at every change. A change is recorded per region
//! of [`REGION_BYTES`] of its extent; a change spanning more than
//! [`REGIONS_PER_CHANGE_MAX`] regions, or a restore of the whole volume, is
//! recorded for the whole extent or volume instead. Bytes read at clock `t`
//! are still current while no region they lie in changed after `t`. Only
//! changes of contents count: a destage, a cleaning pass or a reallocation
//! moves blocks without changing what they read as. The record lives in
//! memory and means something within one open volume; it never grows past
//! [`REGIONS_KEPT_MAX`] regions (past that it is folded into one change of
//! every extent, which only makes copies look older than they are).

use std::collections::HashMap;

use proxima_device::BlockDevice;

use crate::volume::Volume;

/// The granularity of the record: 1 MiB of an extent.
pub const REGION_BYTES: u64 = 1 << 20;
/// A change spanning more regions than this is recorded for its whole extent.
const REGIONS_PER_CHANGE_MAX: u64 = 64;
/// Regions recorded at most before the record is folded.
const REGIONS_KEPT_MAX: usize = 1 << 16;

/// When the contents of each part of each extent last changed.
#[derive(Debug, Default)]
pub(crate) struct ContentChanges {
    /// Ticks at every change; 0 before the first.
    clock: u64,
    /// `(extent, region)` → the clock at its last change.
    regions: HashMap<(u64, u64), u64>,
    /// Extent → the clock at its last change as a whole.
    extents: HashMap<u64, u64>,
    /// The clock at the last change of every extent at once.
    everything: u64,
}

impl ContentChanges {
    /// Records that `[offset, offset + length)` of extent `id` may have changed.
    pub(crate) fn changed(&mut self, id: u64, offset_bytes: u64, length_bytes: u64) {
        self.clock += 1;
        let first = offset_bytes / REGION_BYTES;
        let end = offset_bytes.saturating_add(length_bytes.max(1)).div_ceil(REGION_BYTES);
        if end - first > REGIONS_PER_CHANGE_MAX {
            self.extents.insert(id, self.clock);
            return;
        }
        let spanned = usize::try_from(end - first).expect("at most REGIONS_PER_CHANGE_MAX");
        if self.regions.len() + spanned > REGIONS_KEPT_MAX {
            self.everything_changed();
            return;
        }
        for region in first..end {
            self.regions.insert((id, region), self.clock);
        }
    }

    /// Records that all of extent `id` may have changed (resized, deleted).
    pub(crate) fn extent_changed(&mut self, id: u64) {
        self.clock += 1;
        self.extents.insert(id, self.clock);
    }

    /// Records that every extent may have changed (the active tree was
    /// replaced).
    pub(crate) fn everything_changed(&mut self) {
        self.clock += 1;
        self.everything = self.clock;
        self.regions.clear();
        self.extents.clear();
    }

    fn changed_since(&self, id: u64, offset_bytes: u64, length_bytes: u64, clock: u64) -> bool {
        if self.everything > clock || self.extents.get(&id).is_some_and(|&at| at > clock) {
            return true;
        }
        let first = offset_bytes / REGION_BYTES;
        let end = offset_bytes.saturating_add(length_bytes.max(1)).div_ceil(REGION_BYTES);
        (first..end).any(|region| self.regions.get(&(id, region)).is_some_and(|&at| at > clock))
    }
}

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    /// The content clock now: bytes read now, under the same borrow of the
    /// volume, are current until [`Volume::content_changed_since`] says
    /// otherwise.
    pub fn content_clock(&self) -> u64 {
        self.content_changes.clock
    }

    /// Whether `[offset, offset + length)` of extent `id` may have changed
    /// since content clock `clock`: a write, trim, resize, deletion or restore
    /// touched it (or, the record being kept per 1 MiB region, its
    /// neighbourhood). `false` means bytes read at `clock` are still what a
    /// read returns. Extent ids are not reused within an open volume but a
    /// restore may bring one back; a restore counts as a change of every
    /// extent.
    pub fn content_changed_since(&self, id: u64, offset_bytes: u64, length_bytes: u64, clock: u64) -> bool {
        self.content_changes.changed_since(id, offset_bytes, length_bytes, clock)
    }
}

#[cfg(test)]
mod tests {
    use super::{ContentChanges, REGION_BYTES};

    #[test]
    fn a_change_dates_only_the_regions_it_touches() {
        let mut changes = ContentChanges::default();
        let before = changes.clock;
        changes.changed(1, 3 * REGION_BYTES + 10, 4096);
        assert!(changes.changed_since(1, 3 * REGION_BYTES, REGION_BYTES, before));
        assert!(changes.changed_since(1, 0, 8 * REGION_BYTES, before));
        assert!(!changes.changed_since(1, 4 * REGION_BYTES, REGION_BYTES, before), "the next region");
        assert!(!changes.changed_since(2, 3 * REGION_BYTES, REGION_BYTES, before), "another extent");
        assert!(!changes.changed_since(1, 3 * REGION_BYTES, REGION_BYTES, changes.clock), "read after it");
    }

    #[test]
    fn wide_changes_date_the_extent_and_a_restore_dates_everything() {
        let mut changes = ContentChanges::default();
        let before = changes.clock;
        changes.changed(1, 0, 1 << 40);
        assert!(changes.changed_since(1, 900 * REGION_BYTES, 1, before));
        assert!(!changes.changed_since(2, 0, 1, before));
        let before = changes.clock;
        changes.extent_changed(2);
        assert!(changes.changed_since(2, 0, 1, before));
        let before = changes.clock;
        changes.everything_changed();
        assert!(changes.changed_since(1, 0, 1, before) && changes.changed_since(7, 0, 1, before));
    }

    #[test]
    fn the_record_folds_when_full_and_stays_conservative() {
        let mut changes = ContentChanges::default();
        let before = changes.clock;
        for region in 0..(super::REGIONS_KEPT_MAX as u64 + 10) {
            changes.changed(1, region * REGION_BYTES, 1);
        }
        assert!(changes.regions.len() <= super::REGIONS_KEPT_MAX);
        assert!(changes.changed_since(9, 0, 1, before), "folded: everything looks changed");
    }
}
