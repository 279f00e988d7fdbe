//! Clones: a writable extent that shares every data block of another extent,
//! live or as of a snapshot, made in one CP without copying data
//! (docs/wafl.md, "Clones").
//!
//! The clone's map points at the source's data blocks, and the refcount file
//! (`refcount.rs`) counts each extra reference. From then on both extents are
//! ordinary: a write to a shared block of either goes to a new block as every
//! write does, and the block it displaces loses one reference
//! ([`Volume::release_data_reference`]: the count falls, or, at zero, the
//! block is freed as before). Staged blocks (on flash) are not shared: their
//! data is copied to new data blocks, which the staging area's capacity
//! bounds.
//!
//! A clone from a snapshot takes back into the active tree blocks that only
//! snapshots held (they leave the summary for the activemap). When a younger
//! snapshot lacks such a block, the 010 property no longer holds for the
//! snapshots that exist then: the volume remembers it
//! (`unordered_below_snapshot_id`, in the superblock) until they are all
//! gone, and meanwhile the on-free rule asks every live snapshot and
//! deletions scan by addition (`snapshot.rs`).

use proxima_device::BlockDevice;

use crate::codec::{ExtentRecord, BLOCK_SIZE};
use crate::error::{EngineError, Result};
use crate::map::{self, Location, Segment};
use crate::room::MetadataOperation;
use crate::staging::Payload;
use crate::volume::{validate_name, Overcommit, Volume};

const BLOCK_BYTES: u64 = BLOCK_SIZE as u64;

/// Blocks of staged data a clone copies per read and write.
const COPY_PIECE_BLOCKS: u64 = 256;

/// Where a clone takes its blocks from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloneSource<'a> {
    /// An extent of the active tree.
    Extent(&'a str),
    /// An extent as of a snapshot: `(extent, snapshot)`.
    Snapshot(&'a str, &'a str),
}

impl<'a> CloneSource<'a> {
    /// Parses `EXTENT` or `EXTENT@SNAPSHOT`.
    pub fn parse(text: &'a str) -> Self {
        match text.split_once('@') {
            Some((extent, snapshot)) => CloneSource::Snapshot(extent, snapshot),
            None => CloneSource::Extent(text),
        }
    }
}

impl<D: BlockDevice, F: BlockDevice> Volume<D, F> {
    /// Makes `destination` a writable extent with the contents of `source`,
    /// sharing its data blocks, and commits. Refuses, like
    /// [`Volume::create_extent_with`], to commit more than the data device
    /// holds unless `overcommit` allows it.
    pub fn clone_extent(&mut self, source: CloneSource<'_>, destination: &str, overcommit: Overcommit) -> Result<u64> {
        self.check_usable()?;
        validate_name(destination)?;
        if self.extents.id_of(destination).is_some() {
            return Err(EngineError::ExtentExists(destination.to_string()));
        }
        let (segments, size_bytes, snapshot_id) = self.clone_source_segments(source)?;
        self.check_commitment(0, size_bytes, overcommit)?;
        let saturated = segments.iter().find_map(|segment| match segment.location {
            Some(Location::Data(first)) => {
                (first..first + segment.block_count).find(|&block| !self.refcounts.can_increment(block))
            }
            _ => None,
        });
        if let Some(block) = saturated {
            return Err(EngineError::InvalidRange(format!(
                "data block {block} already has {} references, the most the refcount file counts",
                u32::from(u16::MAX) + 1
            )));
        }
        let shared_blocks: u64 = segments
            .iter()
            .filter(|segment| matches!(segment.location, Some(Location::Data(_))))
            .map(|segment| segment.block_count)
            .sum();
        self.guarded(|volume| {
            volume.ensure_room_for_metadata_operation(MetadataOperation::CloneExtent {
                run_count: segments.len() as u64,
                shared_blocks,
            })?;
            volume.flush_pending_records()?;
            volume.ensure_data_room_for_copies(&segments)?;
            // The delete log's blocks reach the activemap first: a block a
            // snapshot holds that waits in the log is the summary's again,
            // where a clone from the snapshot takes it back, and no block
            // both waits in the log and is shared (docs/wafl.md).
            volume.drain_delete_log();
            let id = volume.extents.create(ExtentRecord {
                name: destination.to_string(),
                size_bytes,
                map: Default::default(),
                created_generation: volume.generation + 1,
                reservation: None,
            });
            let mut took_from_summary = false;
            for segment in &segments {
                match segment.location {
                    None => {}
                    Some(Location::Data(_)) => {
                        for piece in volume.split_at_copies(segment) {
                            let Some(Location::Data(first)) = piece.location else { unreachable!("a data piece") };
                            if volume.copy_outs.tree().get(first).is_some() {
                                volume.copy_into_clone(id, &piece)?;
                                continue;
                            }
                            took_from_summary |= volume.add_data_references(first, piece.block_count, snapshot_id);
                            map::assign(
                                volume.extents.map_mut(id),
                                piece.logical_block,
                                piece.block_count,
                                Location::Data(first),
                            );
                        }
                    }
                    Some(Location::Flash(_)) => volume.copy_into_clone(id, segment)?,
                }
            }
            if took_from_summary && snapshot_id.is_some_and(|id| volume.snapshots.range(id + 1..).next().is_some()) {
                volume.unordered_below_snapshot_id = volume.next_snapshot_id;
                volume.refresh_youngest()?;
            }
            volume.commit()?;
            Ok(id)
        })
    }

    /// The segments of the source to clone, its size in bytes, and the
    /// snapshot's id when it is one. A snapshot's frame blocks that it reads
    /// at a copy (in-place layout) come back at their copies.
    fn clone_source_segments(&mut self, source: CloneSource<'_>) -> Result<(Vec<Segment>, u64, Option<u64>)> {
        match source {
            CloneSource::Extent(name) => {
                let id = self.extent_id(name)?;
                let size_bytes = self.extent_size(id)?;
                Ok((map::segments(self.extents.map(id), 0, size_bytes / BLOCK_BYTES), size_bytes, None))
            }
            CloneSource::Snapshot(extent, snapshot) => {
                let infos = self.snapshot_extents(snapshot)?;
                let info = infos
                    .iter()
                    .find(|info| info.name == extent)
                    .ok_or_else(|| EngineError::NoSuchExtent(format!("{extent}@{snapshot}")))?;
                let size_bytes = info.size_bytes;
                let segments =
                    if size_bytes == 0 { Vec::new() } else { self.snapshot_segments(snapshot, extent, 0, size_bytes)? };
                let snapshot_id = self.snapshots().into_iter().find(|info| info.name == snapshot).map(|info| info.id);
                Ok((segments, size_bytes, snapshot_id))
            }
        }
    }

    /// Makes sure the data device can take every block a clone copies
    /// (staged blocks and copy-out copies) before the clone changes
    /// anything: a CP first if blocks awaiting one are what is missing, else
    /// [`EngineError::NoSpace`].
    fn ensure_data_room_for_copies(&mut self, segments: &[Segment]) -> Result<()> {
        let mut needed = 0;
        for segment in segments {
            needed += match segment.location {
                Some(Location::Flash(_)) => segment.block_count,
                Some(Location::Data(_)) => self
                    .split_at_copies(segment)
                    .iter()
                    .filter(|piece| matches!(piece.location, Some(Location::Data(block)) if self.copy_outs.tree().get(block).is_some()))
                    .map(|piece| piece.block_count)
                    .sum(),
                None => 0,
            };
        }
        if needed > self.data_space.allocatable_count() {
            self.commit()?;
        }
        if needed > self.data_space.allocatable_count() {
            return Err(EngineError::NoSpace {
                role: crate::error::DeviceRole::Data,
                detail: format!("no room to copy the {needed} staged blocks of a clone's source"),
            });
        }
        Ok(())
    }

    /// A data segment in pieces that are each wholly copies of frame blocks
    /// (in-place layout, read by a snapshot) or wholly not: a copy belongs to
    /// the copy-out table, which releases it, so a clone copies it rather
    /// than share it.
    fn split_at_copies(&self, segment: &Segment) -> Vec<Segment> {
        let Some(Location::Data(first)) = segment.location else { unreachable!("a data segment") };
        if self.copy_outs.is_empty() {
            return vec![*segment];
        }
        let is_copy = |block: u64| self.copy_outs.tree().get(block).is_some();
        let mut pieces: Vec<Segment> = Vec::new();
        for index in 0..segment.block_count {
            let block = first + index;
            let continues = pieces.last().is_some_and(|last: &Segment| {
                let Some(Location::Data(last_first)) = last.location else { unreachable!("a data piece") };
                is_copy(last_first) == is_copy(block)
            });
            match pieces.last_mut() {
                Some(last) if continues => last.block_count += 1,
                _ => pieces.push(Segment {
                    logical_block: segment.logical_block + index,
                    block_count: 1,
                    location: Some(Location::Data(block)),
                }),
            }
        }
        pieces
    }

    /// Counts one more reference to each of data blocks `[first, first +
    /// count)`: a block the active tree uses gains a count; a block only
    /// snapshots held (a clone from snapshot `snapshot_id`) returns to the
    /// activemap. Returns whether any did.
    fn add_data_references(&mut self, first: u64, count: u64, snapshot_id: Option<u64>) -> bool {
        let mut took_from_summary = false;
        for block in first..first + count {
            if self.data_space.active().get(block) {
                self.refcounts.increment(block);
            } else {
                assert!(
                    snapshot_id.is_some() && self.data_space.in_summary(block),
                    "data block {block} of a clone's source is held by neither the active tree nor a snapshot"
                );
                self.data_space.return_from_summary(block);
                took_from_summary = true;
            }
        }
        took_from_summary
    }

    /// Copies a staged segment of the source to new data blocks of clone
    /// `id` (unlogged: the CP that ends the clone makes them durable).
    fn copy_into_clone(&mut self, id: u64, segment: &Segment) -> Result<()> {
        let mut done = 0;
        while done < segment.block_count {
            let count = (segment.block_count - done).min(COPY_PIECE_BLOCKS);
            let location = segment.location.expect("a staged segment").offset(done);
            let piece =
                Segment { logical_block: segment.logical_block + done, block_count: count, location: Some(location) };
            let bytes = self.read_segments(&[piece])?;
            let mut written = 0;
            while written < count {
                let (start, got) =
                    self.data_space.allocate_near(0, count - written).expect("room for the copies was made first");
                let payload = Payload::Bytes(&bytes[in_bytes(written)..in_bytes(written + got)]);
                let stores = self.data_stores_payload();
                self.write_data_pieces(vec![(start, got, payload.device_bytes(stores))])?;
                if let Some(checksums) = &mut self.checksums {
                    for index in 0..got {
                        checksums.data.set(start + index, payload.block_crc(index));
                    }
                }
                self.log.data_unflushed = true;
                map::assign(self.extents.map_mut(id), piece.logical_block + written, got, Location::Data(start));
                written += got;
            }
            done += count;
        }
        Ok(())
    }

    /// The active tree lets go of one reference to data block `block`: with
    /// extra references counted, the count falls and the block stays in use;
    /// otherwise the block is let go of: to the delete log if the volume
    /// keeps one, else freed (to the summary if a snapshot holds it, else
    /// pinned until the next CP). A shared block's count falls at once rather
    /// than at its punch, so a logged block is never shared. Every free of a data block the active
    /// tree maps goes through here (writes, trims, deletes, replay, destage's
    /// moves).
    pub(crate) fn release_data_reference(&mut self, block: u64) {
        if self.refcounts.get(block) > 0 {
            self.refcounts.decrement(block);
            return;
        }
        self.let_go_of_data_block(block);
    }

    /// Bytes of data blocks more than one extent of the active tree maps
    /// (each counted once).
    pub fn shared_bytes(&self) -> u64 {
        self.refcounts.shared_block_count() * BLOCK_BYTES
    }

    /// The extra-reference count of data block `block` (0: at most one
    /// reference).
    pub fn refcount(&self, block: u64) -> u16 {
        self.refcounts.get(block)
    }
}

fn in_bytes(blocks: u64) -> usize {
    usize::try_from(blocks * BLOCK_BYTES).expect("a copied piece fits in memory")
}
