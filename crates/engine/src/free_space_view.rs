//! A read-only view of the free-space state and of what every tree points
//! to, for checking the free-space rules (docs/wafl.md, "Snapshot scans":
//! Lemma 2, Theorems 1–3, the 010 property) from tests. Nothing here changes
//! the volume; building a view reads every snapshot's maps.

use std::collections::BTreeSet;

use proxima_device::BlockDevice;

use crate::bitmap::Bitmap;
use crate::codec::SnapshotState;
use crate::error::Result;
use crate::map::{self, ExtentMap, Location};
use crate::volume::Volume;

/// One snapshot in a [`FreeSpaceView`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotSpaceView {
    /// Its id (creation order).
    pub id: u64,
    /// Whether it is live (false: its deletion scan is in progress).
    pub live: bool,
    /// Data blocks set in its snapmap.
    pub data_snapmap: BTreeSet<u64>,
    /// Flash blocks set in its snapmap.
    pub flash_snapmap: BTreeSet<u64>,
    /// Data blocks its extents point to (live snapshots only; empty for one
    /// being deleted).
    pub data_pointed: BTreeSet<u64>,
}

/// The free-space maps of a volume and what its trees point to, as sets of
/// blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreeSpaceView {
    /// Data blocks set in the activemap.
    pub data_active: BTreeSet<u64>,
    /// Data blocks set in the summary.
    pub data_summary: BTreeSet<u64>,
    /// Flash blocks set in the activemap.
    pub flash_active: BTreeSet<u64>,
    /// Flash blocks set in the summary.
    pub flash_summary: BTreeSet<u64>,
    /// Data blocks the active extents point to.
    pub data_pointed: BTreeSet<u64>,
    /// Flash blocks that may be allocated now.
    pub flash_allocatable: BTreeSet<u64>,
    /// Of the data blocks some tree points to or some map holds, those that
    /// may be allocated now.
    pub data_allocatable: BTreeSet<u64>,
    /// The snapshots, oldest first.
    pub snapshots: Vec<SnapshotSpaceView>,
    /// Whether the 010 property may not hold for the data blocks (a clone
    /// from a snapshot broke it and its snapshots still exist).
    pub order_may_be_broken: bool,
    /// Whether a deletion scan runs by addition now.
    pub deletion_by_addition: bool,
}

fn ones(bitmap: &Bitmap) -> BTreeSet<u64> {
    bitmap.ones().collect()
}

fn data_blocks_of(map: &ExtentMap, into: &mut BTreeSet<u64>) {
    for (_, run) in map.iter() {
        if let Location::Data(first) = map::Location::from_raw(run.location()) {
            into.extend(first..first + run.count());
        }
    }
}

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    /// The free-space maps and what every tree points to.
    pub fn free_space_view(&mut self) -> Result<FreeSpaceView> {
        self.check_usable()?;
        let mut data_pointed = BTreeSet::new();
        for (_, map) in self.extents.maps() {
            data_blocks_of(map, &mut data_pointed);
        }
        let records: Vec<(u64, crate::codec::SnapshotRecord)> =
            self.snapshots.iter().map(|(id, record)| (id, record.clone())).collect();
        let mut snapshots = Vec::new();
        for (id, record) in records {
            let (data, flash) = self.load_snapmaps(&record.roots)?;
            let live = record.state == SnapshotState::Live;
            let mut pointed = BTreeSet::new();
            if live {
                for extent in self.snapshot_extents(&record.name)? {
                    let segments = match extent.size_bytes {
                        0 => Vec::new(),
                        size => self.snapshot_raw_segments(&record.name, &extent.name, size)?,
                    };
                    for segment in segments {
                        if let Some(Location::Data(first)) = segment.location {
                            pointed.extend(first..first + segment.block_count);
                        }
                    }
                }
            }
            snapshots.push(SnapshotSpaceView {
                id,
                live,
                data_snapmap: ones(&data),
                flash_snapmap: ones(&flash),
                data_pointed: pointed,
            });
        }
        let data_active = ones(self.data_space.active().bits());
        let data_summary = ones(self.data_space.summary().bits());
        let mut data_candidates: BTreeSet<u64> = data_active.union(&data_summary).copied().collect();
        data_candidates.extend(&data_pointed);
        for snapshot in &snapshots {
            data_candidates.extend(&snapshot.data_snapmap);
            data_candidates.extend(&snapshot.data_pointed);
        }
        let data_allocatable =
            data_candidates.into_iter().filter(|&block| self.data_space.is_allocatable(block)).collect();
        let flash = &self.flash_space;
        Ok(FreeSpaceView {
            data_active,
            data_summary,
            flash_active: ones(self.flash_space.active().bits()),
            flash_summary: ones(self.flash_space.summary().bits()),
            data_pointed,
            flash_allocatable: (0..flash.block_count()).filter(|&block| flash.is_allocatable(block)).collect(),
            data_allocatable,
            snapshots,
            order_may_be_broken: self.order_may_be_broken(),
            deletion_by_addition: self.deletion_by_addition(),
        })
    }
}
