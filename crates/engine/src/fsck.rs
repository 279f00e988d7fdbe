//! fsck: an offline check of a volume's durable state that reports every
//! finding. It walks the active tree and every snapshot's tree, verifying each
//! metadata block, and checks the free-space invariants of docs/format.md:
//! activemaps equal what their trees use (the active tree's delete log
//! included: a logged block is allocated until punched, and is logged once
//! and by nothing else), no block owned twice, in use ⊆
//! activemap ∪ summary ⊆ in use ∪ what pending deletion scans will still visit,
//! the 010 property. It walks the log after the CP (both copies of each
//! block) without replaying it, and, unless asked for metadata only, reads
//! every data and staged block a live tree uses and checks it against its
//! checksum.

use std::collections::BTreeMap;

use proxima_device::BlockDevice;
use serde::Serialize;

use crate::bitmap::{Bitmap, PersistentBitmap};
use crate::checksums::PersistentChecksums;
use crate::codec::{
    CopyOutRecord, ExtentRecord, LogRecord, LogSlot, RangeReservation, RootSet, SegmentUsageRecord, SnapshotRecord,
    SnapshotState, Superblock, TreePointer, BLOCK_SIZE, SUPERBLOCK_SLOTS, WORDS_PER_PAGE,
};
use crate::copy_out::CopyOuts;
use crate::delete_log::{check_persisted, DeleteLogMode};
use crate::error::{DeviceRole, EngineError, Result, Unsuitable};
use crate::io::{read_pieces, FlashReader};
use crate::log::walk::{walk_log, ChainEnd, LogIdentity};
use crate::map::{self, ExtentMap, LayoutScore, Location};
use crate::refcount::PersistentRefcounts;
use crate::segments::check_usage_table;
use crate::tree::PersistentTree;

/// The name findings give the active tree.
const ACTIVE_TREE: &str = "active tree";

/// How much fsck reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsckScope {
    /// Metadata and the log only.
    Metadata,
    /// Metadata, the log, and every data and staged block a live tree uses,
    /// checked against its checksum (a scrub).
    MetadataAndData,
}

/// What kind of problem a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum FindingKind {
    /// A superblock slot is invalid or the slots disagree.
    SuperblockSlot,
    /// A metadata block failed verification.
    CorruptMetadata,
    /// A block is used twice within one tree.
    BlockOwnedTwice,
    /// A map run lies outside its extent or its device.
    OutOfRange,
    /// A block in use is clear in its tree's activemap.
    ActivemapMissing,
    /// A block set in an activemap is not used by its tree.
    ActivemapLeaked,
    /// A block in use by a snapshot is in neither the activemap nor the summary.
    SummaryMissing,
    /// A block is in the activemap or summary but used by nothing that will
    /// account for it (no tree, and no deletion scan that will still reach it).
    SummaryExcess,
    /// A block's bits over the snapshots and the active tree are not `0*1*0*`.
    Property010,
    /// A data or staged block does not match its checksum, or cannot be read.
    DataChecksum,
    /// A copy of an acknowledged log block is damaged (the other copy holds
    /// it; the next open replays from that one).
    LogCopyDamaged,
    /// An acknowledged staged record names data that does not match it.
    StagedDataDamaged,
    /// Two extents of the active tree reserve one allocation range.
    ReservationsOverlap,
    /// The delete log is malformed: a block outside the device, an entry
    /// out of its place, more blocks than its size allows.
    DeleteLog,
    /// A data block's references from its tree's extents differ from
    /// `1 + its refcount` (or a block no extent maps has a count).
    RefcountMismatch,
}

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What kind.
    pub kind: FindingKind,
    /// Where and what exactly.
    pub detail: String,
}

/// The result of a check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FsckReport {
    /// Generation of the superblock checked.
    pub generation: u64,
    /// Extents in the active tree.
    pub extent_count: u64,
    /// Live snapshots.
    pub snapshot_count: u64,
    /// Snapshot deletions not finished.
    pub pending_deletions: u64,
    /// Data blocks in use by the active tree.
    pub data_blocks_used: u64,
    /// Metadata blocks in the active tree.
    pub metadata_blocks: u64,
    /// Whether a log after the superblock holds records (replayed at the next open).
    pub log_pending: bool,
    /// The active extents' Smith–Seltzer layout score, as counts (see
    /// [`FsckReport::layout_score`]).
    pub layout_score_blocks: LayoutScore,
    /// Every problem found.
    pub findings: Vec<Finding>,
    /// States that a crash leaves and the next open repairs (not problems):
    /// the superblock slots one CP apart, the log ending in a torn block.
    pub notes: Vec<String>,
}

impl FsckReport {
    /// Whether nothing was found.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }

    /// Of the active extents' mapped blocks whose logical predecessor is
    /// mapped, the fraction placed directly after it (1 when no block is
    /// scored).
    pub fn layout_score(&self) -> f64 {
        self.layout_score_blocks.fraction().unwrap_or(1.0)
    }

    fn add(&mut self, kind: FindingKind, detail: impl Into<String>) {
        self.findings.push(Finding { kind, detail: detail.into() });
    }
}

/// What one tree uses, and its own maps.
struct Walk {
    data_used: Bitmap,
    flash_used: Bitmap,
    /// The flash blocks holding staged data (a subset of `flash_used`).
    staged_used: Bitmap,
    /// The checksum tables, kept for the active tree only.
    checksums: Option<(PersistentChecksums, PersistentChecksums)>,
    data_active: Option<Bitmap>,
    flash_active: Option<Bitmap>,
    data_summary: Option<Bitmap>,
    flash_summary: Option<Bitmap>,
    extent_count: u64,
    /// The tree's copy-out table (the active tree's redirects snapshot reads).
    copy_outs: Option<CopyOuts>,
    /// Data blocks the tree's extents map more than once, with the number
    /// of references beyond the first (clones).
    data_extra_references: BTreeMap<u64, u64>,
    /// The layout score of the tree's extent maps, summed.
    layout_score: LayoutScore,
}

struct Checker<'a, F> {
    reader: FlashReader<'a, F>,
    data_count: u64,
    flash_count: u64,
    report: FsckReport,
}

impl<F: BlockDevice> Checker<'_, F> {
    fn mark(&mut self, bitmap: &mut Bitmap, role: DeviceRole, block: u64, tree: &str, what: &str) {
        if block >= bitmap.bit_count() {
            self.report
                .add(FindingKind::OutOfRange, format!("{tree}: {what} names {role} block {block}, beyond the device"));
        } else if !bitmap.put(block, true) {
            self.report.add(FindingKind::BlockOwnedTwice, format!("{tree}: {role} block {block} used twice ({what})"));
        }
    }

    fn walk(&mut self, roots: &RootSet, log_head: LogSlot, checksums: Option<Keep>, tree: &str) -> Walk {
        let mut walk = Walk {
            data_used: Bitmap::new(self.data_count),
            flash_used: Bitmap::new(self.flash_count),
            staged_used: Bitmap::new(self.flash_count),
            checksums: None,
            data_active: None,
            flash_active: None,
            data_summary: None,
            flash_summary: None,
            extent_count: 0,
            copy_outs: None,
            data_extra_references: BTreeMap::new(),
            layout_score: LayoutScore::default(),
        };
        let mut flash_used = Bitmap::new(self.flash_count);
        for slot in SUPERBLOCK_SLOTS {
            flash_used.put(slot, true);
        }
        for block in log_head.blocks() {
            self.mark(&mut flash_used, DeviceRole::Flash, block, tree, "log head");
        }
        self.walk_extents(roots, tree, &mut walk, &mut flash_used);
        walk.copy_outs = self.walk_copy_outs(roots.copy_outs, tree, &mut flash_used);
        self.walk_refcounts(roots.refcounts, tree, &walk.data_extra_references, &mut flash_used);
        if let Some(keep) = checksums {
            walk.checksums = self.walk_checksums(roots, tree, keep, &mut flash_used);
        }
        match PersistentTree::<SnapshotRecord>::load(roots.snapshot_table, 0, &mut self.reader) {
            Ok(table) => table
                .blocks()
                .into_iter()
                .for_each(|b| self.mark(&mut flash_used, DeviceRole::Flash, b, tree, "snapshot table")),
            Err(error) => self.report.add(FindingKind::CorruptMetadata, format!("{tree}: snapshot table: {error}")),
        }
        let bitmaps = [
            (roots.data_active, self.data_count, "data activemap"),
            (roots.data_summary, self.data_count, "data summary"),
            (roots.flash_active, self.flash_count, "flash activemap"),
            (roots.flash_summary, self.flash_count, "flash summary"),
        ];
        let mut loaded = Vec::new();
        for (pointer, count, name) in bitmaps {
            match PersistentBitmap::load(pointer, count, &mut self.reader) {
                Ok(bitmap) => {
                    for block in bitmap.blocks() {
                        self.mark(&mut flash_used, DeviceRole::Flash, block, tree, name);
                    }
                    loaded.push(Some(bitmap.bits().clone()));
                }
                Err(error) => {
                    self.report.add(FindingKind::CorruptMetadata, format!("{tree}: {name}: {error}"));
                    loaded.push(None);
                }
            }
        }
        let mut loaded = loaded.into_iter();
        walk.data_active = loaded.next().flatten();
        walk.data_summary = loaded.next().flatten();
        walk.flash_active = loaded.next().flatten();
        walk.flash_summary = loaded.next().flatten();
        self.walk_segment_usage(roots.segment_usage, tree, &mut flash_used, &walk);
        walk.flash_used = flash_used;
        walk
    }

    /// Marks a segment usage table's nodes as its tree's and checks its live
    /// counts against the data maps of the same CP.
    fn walk_segment_usage(&mut self, pointer: TreePointer, tree: &str, flash_used: &mut Bitmap, walk: &Walk) {
        let table = match PersistentTree::<SegmentUsageRecord>::load(pointer, 0, &mut self.reader) {
            Ok(table) => table,
            Err(error) => {
                return self.report.add(FindingKind::CorruptMetadata, format!("{tree}: segment usage table: {error}"))
            }
        };
        for block in table.blocks() {
            self.mark(flash_used, DeviceRole::Flash, block, tree, "segment usage table");
        }
        let (Some(active), Some(summary)) = (&walk.data_active, &walk.data_summary) else { return };
        let in_use =
            |start: u64, end: u64| (start..end).filter(|&block| active.get(block) || summary.get(block)).count() as u64;
        for problem in check_usage_table(&table, self.data_count, in_use) {
            self.report.add(FindingKind::CorruptMetadata, format!("{tree}: segment usage table: {problem}"));
        }
    }

    /// Marks a copy-out table's nodes as its tree's (the copies are the
    /// snapshots', in the summary) and returns the table.
    fn walk_copy_outs(&mut self, pointer: TreePointer, tree: &str, flash_used: &mut Bitmap) -> Option<CopyOuts> {
        match PersistentTree::<CopyOutRecord>::load(pointer, 0, &mut self.reader) {
            Ok(table) => {
                for block in table.blocks() {
                    self.mark(flash_used, DeviceRole::Flash, block, tree, "copy-out table");
                }
                for (copy, record) in table.iter() {
                    if copy >= self.data_count || record.frame >= self.data_count {
                        let what =
                            format!("copy of data block {} for snapshots up to #{}", record.frame, record.watermark);
                        self.report.add(
                            FindingKind::OutOfRange,
                            format!("{tree}: {what} names data block {copy}, beyond the device"),
                        );
                    }
                }
                match CopyOuts::try_from_tree(table) {
                    Ok(table) => Some(table),
                    Err(error) => {
                        self.report.add(FindingKind::CorruptMetadata, format!("{tree}: copy-out table: {error}"));
                        None
                    }
                }
            }
            Err(error) => {
                self.report.add(FindingKind::CorruptMetadata, format!("{tree}: copy-out table: {error}"));
                None
            }
        }
    }

    fn walk_extents(&mut self, roots: &RootSet, tree: &str, walk: &mut Walk, flash_used: &mut Bitmap) {
        let extents = match PersistentTree::<ExtentRecord>::load(roots.extent_table, 0, &mut self.reader) {
            Ok(extents) => extents,
            Err(error) => {
                return self.report.add(FindingKind::CorruptMetadata, format!("{tree}: extent table: {error}"))
            }
        };
        for block in extents.blocks() {
            self.mark(flash_used, DeviceRole::Flash, block, tree, "extent table");
        }
        walk.extent_count = extents.len() as u64;
        if tree == ACTIVE_TREE {
            self.check_reservations(&extents);
        }
        for (id, record) in extents.iter() {
            let map = match ExtentMap::load(record.map, id, &mut self.reader) {
                Ok(map) => map,
                Err(error) => {
                    self.report
                        .add(FindingKind::CorruptMetadata, format!("{tree}: map of extent {:?}: {error}", record.name));
                    continue;
                }
            };
            for block in map.blocks() {
                self.mark(flash_used, DeviceRole::Flash, block, tree, "map node");
            }
            walk.layout_score = walk.layout_score + map::layout_score(&map);
            let size_blocks = record.size_bytes / BLOCK_SIZE as u64;
            for (logical, run) in map.iter() {
                let what = format!("extent {:?} block {logical}", record.name);
                if logical + run.count() > size_blocks {
                    self.report.add(
                        FindingKind::OutOfRange,
                        format!("{tree}: {what}+{} beyond the extent's end", run.count()),
                    );
                }
                for offset in 0..run.count() {
                    match Location::from_raw(run.location()).offset(offset) {
                        // A clone shares its source's blocks: a second
                        // reference is counted, and checked against the
                        // refcount file.
                        Location::Data(block) if block < self.data_count && walk.data_used.get(block) => {
                            *walk.data_extra_references.entry(block).or_default() += 1;
                        }
                        Location::Data(block) => self.mark(&mut walk.data_used, DeviceRole::Data, block, tree, &what),
                        Location::Flash(block) => {
                            self.mark(flash_used, DeviceRole::Flash, block, tree, &what);
                            if block < self.flash_count {
                                walk.staged_used.put(block, true);
                            }
                        }
                    }
                }
            }
        }
    }

    /// The active extents' reservations share no range (a snapshot's records
    /// may: an extent restored from it drops what overlaps).
    fn check_reservations(&mut self, extents: &PersistentTree<ExtentRecord>) {
        let mut reserved: Vec<(RangeReservation, &str)> = extents
            .iter()
            .filter_map(|(_, record)| record.reservation.map(|reservation| (reservation, record.name.as_str())))
            .collect();
        reserved.sort_unstable_by_key(|(reservation, _)| reservation.first_range);
        for pair in reserved.windows(2) {
            let ((first, first_name), (second, second_name)) = (pair[0], pair[1]);
            if first.overlaps(&second) {
                self.report.add(
                    FindingKind::ReservationsOverlap,
                    format!(
                        "extents {first_name:?} (ranges {}..{}) and {second_name:?} (ranges {}..{}) reserve the same ranges",
                        first.first_range,
                        first.end_range(),
                        second.first_range,
                        second.end_range()
                    ),
                );
            }
        }
    }

    /// Loads and marks a tree's refcount file and checks it against the
    /// extra references its extents make (`extra`).
    fn walk_refcounts(
        &mut self,
        pointer: TreePointer,
        tree: &str,
        extra: &BTreeMap<u64, u64>,
        flash_used: &mut Bitmap,
    ) {
        let refcounts = match PersistentRefcounts::load(pointer, self.data_count, &mut self.reader) {
            Ok(refcounts) => refcounts,
            Err(error) => {
                return self.report.add(FindingKind::CorruptMetadata, format!("{tree}: refcount file: {error}"))
            }
        };
        for block in refcounts.pages().blocks() {
            self.mark(flash_used, DeviceRole::Flash, block, tree, "refcount file");
        }
        let mut wrong = Vec::new();
        for (block, count) in refcounts.content().nonzero() {
            if extra.get(&block).copied().unwrap_or(0) != u64::from(count) {
                wrong.push(block);
            }
        }
        for (&block, &references) in extra {
            if u64::from(refcounts.get(block)) != references {
                wrong.push(block);
            }
        }
        wrong.sort_unstable();
        wrong.dedup();
        if !wrong.is_empty() {
            self.report.add(
                FindingKind::RefcountMismatch,
                format!("{tree}: data blocks whose references are not 1 + their refcount: {}", summarize(&wrong)),
            );
        }
    }

    /// Loads and marks a tree's checksum tables; returns them if `keep` asks.
    fn walk_checksums(
        &mut self,
        roots: &RootSet,
        tree: &str,
        keep: Keep,
        flash_used: &mut Bitmap,
    ) -> Option<(PersistentChecksums, PersistentChecksums)> {
        let data = PersistentChecksums::load(roots.data_checksums, self.data_count, &mut self.reader);
        let flash = PersistentChecksums::load(roots.flash_checksums, self.flash_count, &mut self.reader);
        let mut loaded = Vec::new();
        for (table, name) in [(data, "data checksum table"), (flash, "flash checksum table")] {
            match table {
                Ok(table) => {
                    for block in table.pages().blocks() {
                        self.mark(flash_used, DeviceRole::Flash, block, tree, name);
                    }
                    loaded.push(table);
                }
                Err(error) => self.report.add(FindingKind::CorruptMetadata, format!("{tree}: {name}: {error}")),
            }
        }
        let flash = loaded.pop()?;
        let data = loaded.pop()?;
        (keep == Keep::Tables).then_some((data, flash))
    }

    /// Marks the delete log's nodes and the data blocks it holds as the
    /// active tree's: a logged block is allocated until punched, and one
    /// logged twice, or logged while an extent maps it, is used twice.
    fn walk_delete_log(&mut self, superblock: &Superblock, active: &mut Walk) {
        let mode = DeleteLogMode::from_flags(superblock.flags);
        let tree = ACTIVE_TREE;
        match check_persisted(mode, superblock.delete_log, self.data_count, &mut self.reader) {
            Ok(log) => {
                for block in log.node_blocks {
                    self.mark(&mut active.flash_used, DeviceRole::Flash, block, tree, "delete log");
                }
                for block in log.blocks {
                    self.mark(&mut active.data_used, DeviceRole::Data, block, tree, "delete log");
                }
            }
            Err(error) => self.report.add(FindingKind::DeleteLog, format!("{} delete log: {error}", mode.name())),
        }
    }

    fn compare(&mut self, used: &Bitmap, map: Option<&Bitmap>, role: DeviceRole, tree: &str) {
        let Some(map) = map else { return };
        let mut missing = Vec::new();
        let mut leaked = Vec::new();
        for page in 0..used.page_count() {
            if used.page_equals(map, page) {
                continue;
            }
            for word in 0..WORDS_PER_PAGE {
                let (in_use, set) = (used.word(page, word), map.word(page, word));
                collect_bits(in_use & !set, page, word, &mut missing);
                collect_bits(set & !in_use, page, word, &mut leaked);
            }
        }
        if !missing.is_empty() {
            self.report.add(
                FindingKind::ActivemapMissing,
                format!("{tree}: {role} blocks in use but clear in the activemap: {}", summarize(&missing)),
            );
        }
        if !leaked.is_empty() {
            self.report.add(
                FindingKind::ActivemapLeaked,
                format!("{tree}: {role} blocks set in the activemap but unused: {}", summarize(&leaked)),
            );
        }
    }
}

/// Whether a walk keeps the checksum tables it loads (the active tree's serve
/// the data check) or only verifies and marks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    Tables,
    MarksOnly,
}

fn collect_bits(mut word_bits: u64, page: usize, word: usize, into: &mut Vec<u64>) {
    while word_bits != 0 {
        let bit = u64::from(word_bits.trailing_zeros());
        into.push(page as u64 * crate::codec::BITS_PER_PAGE + word as u64 * 64 + bit);
        word_bits &= word_bits - 1;
    }
}

fn summarize(blocks: &[u64]) -> String {
    let shown: Vec<String> = blocks.iter().take(8).map(u64::to_string).collect();
    let more = if blocks.len() > 8 { format!(" and {} more", blocks.len() - 8) } else { String::new() };
    format!("{} block(s): {}{more}", blocks.len(), shown.join(", "))
}

/// Checks the durable state of the volume on `data` and `flash`.
pub fn check<D: BlockDevice, F: BlockDevice>(data: &mut D, flash: &mut F, scope: FsckScope) -> Result<FsckReport> {
    let mut report = FsckReport::default();
    let slots = crate::volume::read_superblock_slots(flash)?;
    let superblock = match (&slots[0], &slots[1]) {
        (Ok(a), Ok(b)) => {
            check_slot_generations(&mut report, a.generation, b.generation);
            if b.generation > a.generation {
                *b
            } else {
                *a
            }
        }
        (Ok(a), Err(error)) | (Err(error), Ok(a)) => {
            // Not a crash outcome: a superblock's bytes lie in its first
            // sector (the rest is zeroes in every generation), so a write torn
            // at sector granularity leaves a whole old or a whole new one.
            report.add(
                FindingKind::SuperblockSlot,
                format!(
                    "one superblock slot is invalid ({error}); the other holds CP {} and the next CP rewrites both",
                    a.generation
                ),
            );
            *a
        }
        (Err(slot_a), Err(slot_b)) => {
            return Err(EngineError::NoSuperblock { slot_a: slot_a.clone(), slot_b: slot_b.clone() })
        }
    };
    if superblock.data_block_count != data.info().block_count
        || superblock.flash_block_count != flash.info().block_count
    {
        return Err(EngineError::Unsuitable(Unsuitable::SizesDiffer {
            superblock_data_blocks: superblock.data_block_count,
            superblock_flash_blocks: superblock.flash_block_count,
            data_blocks: data.info().block_count,
            flash_blocks: flash.info().block_count,
        }));
    }
    report.generation = superblock.generation;
    let logged_crcs = check_log(&mut report, flash, &superblock)?;
    let mut checker = Checker {
        reader: FlashReader { flash, volume_id: superblock.volume_id, flash_block_count: superblock.flash_block_count },
        data_count: superblock.data_block_count,
        flash_count: superblock.flash_block_count,
        report,
    };
    let keep = superblock.has_data_checksums().then_some(Keep::Tables);
    let mut active = checker.walk(&superblock.roots, superblock.log_head, keep, ACTIVE_TREE);
    checker.walk_delete_log(&superblock, &mut active);
    checker.compare(&active.data_used, active.data_active.as_ref(), DeviceRole::Data, ACTIVE_TREE);
    checker.compare(&active.flash_used, active.flash_active.as_ref(), DeviceRole::Flash, ACTIVE_TREE);
    checker.report.extent_count = active.extent_count;
    checker.report.data_blocks_used = active.data_used.count_ones();
    checker.report.metadata_blocks = active.flash_used.count_ones();
    checker.report.layout_score_blocks = active.layout_score;
    let snapshots =
        match PersistentTree::<SnapshotRecord>::load(superblock.roots.snapshot_table, 0, &mut checker.reader) {
            Ok(table) => table.iter().map(|(id, record)| (id, record.clone())).collect::<Vec<_>>(),
            Err(_) => Vec::new(), // reported by the walk
        };
    let mut live_walks = Vec::new();
    let mut pending = Pending { data: Bitmap::new(checker.data_count), flash: Bitmap::new(checker.flash_count) };
    for (id, record) in &snapshots {
        let name = format!("snapshot {:?} (#{id})", record.name);
        let keep = superblock.has_data_checksums().then_some(Keep::MarksOnly);
        let mut walk = checker.walk(&record.roots, record.log_head, keep, &name);
        if record.state == SnapshotState::Live {
            checker.compare(&walk.data_used, walk.data_active.as_ref(), DeviceRole::Data, &name);
            checker.compare(&walk.flash_used, walk.flash_active.as_ref(), DeviceRole::Flash, &name);
            redirect_to_copies(&mut walk, active.copy_outs.as_ref(), *id);
            live_walks.push(walk);
        } else {
            checker.report.pending_deletions += 1;
            pending.add(walk, record.scan_cursor);
        }
    }
    checker.report.snapshot_count = live_walks.len() as u64;
    // A copy is kept while a snapshot, live or being deleted, has an id in
    // its range, whether or not that snapshot's tree maps the frame.
    let snapshot_ids: Vec<u64> = snapshots.iter().map(|(id, _)| *id).collect();
    for copy in active.copy_outs.iter().flat_map(|table| table.read_copies(&snapshot_ids)) {
        if copy < checker.data_count {
            pending.data.put(copy, true);
        }
    }
    // A clone from a snapshot may break the 010 property for the data
    // blocks of the snapshots older than it (docs/wafl.md, "Clones").
    let unordered = snapshots.iter().any(|&(id, _)| id < superblock.unordered_below_snapshot_id);
    if unordered {
        checker
            .report
            .notes
            .push("the 010 property is not checked for data blocks: a clone from a snapshot broke it".into());
    }
    for role in [DeviceRole::Data, DeviceRole::Flash] {
        check_summary(&mut checker.report, &active, &live_walks, &pending, role);
        if !(unordered && role == DeviceRole::Data) {
            check_010(&mut checker.report, &active, &live_walks, role);
        }
    }
    let mut report = checker.report;
    if let (FsckScope::MetadataAndData, Some((data_table, flash_table))) = (scope, active.checksums.take()) {
        let mut data_in_use = active.data_used.clone();
        let mut staged_in_use = active.staged_used.clone();
        for walk in &live_walks {
            data_in_use.or_with(&walk.data_used);
            staged_in_use.or_with(&walk.staged_used);
        }
        check_data(&mut report, data, DeviceRole::Data, &data_in_use, &data_table, &logged_crcs)?;
        check_data(&mut report, flash, DeviceRole::Flash, &staged_in_use, &flash_table, &LoggedCrcs::new())?;
    }
    Ok(report)
}

/// Reads every block set in `in_use` (in runs of consecutive blocks) and
/// reports those that match neither their checksum nor one the log carries
/// for them, or cannot be read.
fn check_data<D: BlockDevice>(
    report: &mut FsckReport,
    device: &mut D,
    role: DeviceRole,
    in_use: &Bitmap,
    table: &PersistentChecksums,
    logged: &LoggedCrcs,
) -> Result<()> {
    const RUN_BLOCKS_MAX: u64 = 256;
    let mut damaged = Vec::new();
    let mut unreadable = Vec::new();
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for block in in_use.ones() {
        match runs.last_mut() {
            Some((first, count)) if *first + *count == block && *count < RUN_BLOCKS_MAX => *count += 1,
            _ => runs.push((block, 1)),
        }
    }
    for (first, count) in runs {
        match read_pieces(device, role, &[(first, count)]) {
            Ok(bytes) => {
                for (block, block_bytes) in (first..).zip(bytes.chunks(BLOCK_SIZE)) {
                    let crc = crc32c::crc32c(block_bytes);
                    if crc != table.get(block) && !logged.get(&block).is_some_and(|crcs| crcs.contains(&crc)) {
                        damaged.push(block);
                    }
                }
            }
            Err(EngineError::Device { .. }) => unreadable.extend(first..first + count),
            Err(other) => return Err(other),
        }
    }
    for (blocks, what) in [(damaged, "do not match their checksums"), (unreadable, "cannot be read")] {
        if !blocks.is_empty() {
            report.add(FindingKind::DataChecksum, format!("{role} blocks in use {what}: {}", summarize(&blocks)));
        }
    }
    Ok(())
}

/// What may still be in the summary without a live tree using it: a deletion
/// scan releases a data block when it reaches the block's page, so a deleting
/// snapshot accounts for its data blocks on the pages its scan has not passed,
/// and for all its flash blocks (released in the CP that drops its record);
/// and a copy-out's copy stays while a snapshot has an id in its range.
/// Anything else in the summary and used by nothing has leaked for ever.
struct Pending {
    data: Bitmap,
    flash: Bitmap,
}

/// What snapshot `id` holds, for the free-space rules: its tree's blocks,
/// with every frame block it reads at a copy replaced by the copy (the active
/// tree's copy-out table says which).
fn redirect_to_copies(walk: &mut Walk, table: Option<&CopyOuts>, id: u64) {
    for (frame, copy) in table.into_iter().flat_map(|table| table.redirects(id)) {
        if walk.data_used.get(frame) {
            walk.data_used.put(frame, false);
            walk.data_used.put(copy, true);
        }
    }
}

impl Pending {
    fn add(&mut self, walk: Walk, scan_cursor: u64) {
        let mut data = walk.data_used;
        data.clear_pages_below(usize::try_from(scan_cursor).unwrap_or(usize::MAX));
        self.data.or_with(&data);
        self.flash.or_with(&walk.flash_used);
    }

    fn of(&self, role: DeviceRole) -> &Bitmap {
        match role {
            DeviceRole::Data => &self.data,
            DeviceRole::Flash => &self.flash,
        }
    }
}

/// Slot A is written and flushed before slot B at every CP, so a crash leaves
/// A one CP ahead of B at most; anything else is damage.
fn check_slot_generations(report: &mut FsckReport, slot_a: u64, slot_b: u64) {
    if slot_a == slot_b {
        return;
    }
    if slot_a == slot_b + 1 {
        report.notes.push(format!(
            "superblock slot B holds CP {slot_b}, slot A CP {slot_a}: a crash came between the two slot writes; \
             the next CP rewrites both"
        ));
    } else {
        report.add(
            FindingKind::SuperblockSlot,
            format!("slots hold generations {slot_a} and {slot_b}, which no sequence of CPs and crashes leaves"),
        );
    }
}

/// Walks the log after the CP without replaying it: whether there is one,
/// damage to the copies of acknowledged blocks and to the staged data their
/// records name (findings), and what a crash left at its end (notes).
/// Data-device checksums the log carries past the CP, per block: replay
/// settles a block overwritten in place on whichever of its checksums it
/// matches.
type LoggedCrcs = BTreeMap<u64, Vec<u32>>;

/// Checks the log after the CP; returns the data checksums its records carry.
fn check_log<F: BlockDevice>(report: &mut FsckReport, flash: &mut F, superblock: &Superblock) -> Result<LoggedCrcs> {
    let identity = LogIdentity {
        volume_id: superblock.volume_id,
        generation: superblock.generation,
        mount_count: superblock.mount_count,
    };
    let walk = match walk_log(flash, identity, superblock.log_head, superblock.flash_block_count) {
        Ok(walk) => walk,
        Err(EngineError::Corrupt { block, what, detail }) => {
            report.add(FindingKind::CorruptMetadata, format!("log: {what} at flash block {block}: {detail}"));
            return Ok(LoggedCrcs::new());
        }
        Err(other) => return Err(other),
    };
    report.log_pending = !walk.blocks.is_empty();
    let mut logged = LoggedCrcs::new();
    for record in walk.blocks.iter().flat_map(|walked| &walked.block.records) {
        if let LogRecord::Checksums { first_data_block, count, crcs } = *record {
            for (block, &crc) in (first_data_block..).zip(&crcs[..usize::from(count)]) {
                logged.entry(block).or_default().push(crc);
            }
        }
    }
    let acknowledged_through = walk.acknowledged_through();
    for walked in &walk.blocks {
        let acknowledged = acknowledged_through.is_some_and(|through| walked.sequence <= through);
        if let Some(copy) = walked.damaged_copy {
            let detail = format!("log block {} (copy at flash block {copy})", walked.sequence);
            if acknowledged {
                report.add(FindingKind::LogCopyDamaged, format!("{detail} is damaged; the other copy holds it"));
            } else {
                report.notes.push(format!("{detail} was not completed before the crash; the other copy holds it"));
            }
        }
        if !acknowledged {
            continue;
        }
        for record in &walked.block.records {
            let LogRecord::Staged { extent_id, logical_block, flash_block, data_crc } = *record else { continue };
            let matches = flash_block < superblock.flash_block_count
                && read_pieces(flash, DeviceRole::Flash, &[(flash_block, 1)])
                    .is_ok_and(|bytes| crc32c::crc32c(&bytes) == data_crc);
            if !matches {
                report.add(
                    FindingKind::StagedDataDamaged,
                    format!(
                        "log block {}: acknowledged staged data of extent #{extent_id} block {logical_block} at flash \
                         block {flash_block} does not match its record",
                        walked.sequence
                    ),
                );
            }
        }
    }
    if let ChainEnd::Torn { sequence } = walk.end {
        report.notes.push(format!(
            "the log ends in block {sequence}, torn or damaged: the records of the last flush window after it \
             will not be replayed"
        ));
    }
    Ok(logged)
}

/// A walk's used blocks, activemap and summary map of the device `role`.
fn pick(walk: &Walk, role: DeviceRole) -> (&Bitmap, Option<&Bitmap>, Option<&Bitmap>) {
    match role {
        DeviceRole::Data => (&walk.data_used, walk.data_active.as_ref(), walk.data_summary.as_ref()),
        DeviceRole::Flash => (&walk.flash_used, walk.flash_active.as_ref(), walk.flash_summary.as_ref()),
    }
}

fn check_summary(report: &mut FsckReport, active: &Walk, snapshots: &[Walk], pending: &Pending, role: DeviceRole) {
    let (active_used, Some(active_map), Some(summary)) = pick(active, role) else { return };
    let mut in_use = active_used.clone();
    for walk in snapshots {
        in_use.or_with(pick(walk, role).0);
    }
    let mut accounted = in_use.clone();
    accounted.or_with(pending.of(role));
    let mut missing = Vec::new();
    let mut excess = Vec::new();
    for page in 0..in_use.page_count() {
        for word in 0..WORDS_PER_PAGE {
            let covered = active_map.word(page, word) | summary.word(page, word);
            collect_bits(in_use.word(page, word) & !covered, page, word, &mut missing);
            collect_bits(covered & !accounted.word(page, word), page, word, &mut excess);
        }
    }
    if !missing.is_empty() {
        report.add(
            FindingKind::SummaryMissing,
            format!("{role} blocks in use but in neither activemap nor summary: {}", summarize(&missing)),
        );
    }
    if !excess.is_empty() {
        report.add(
            FindingKind::SummaryExcess,
            format!(
                "{role} blocks in the activemap or summary but used by nothing a deletion scan will still visit: {}",
                summarize(&excess)
            ),
        );
    }
}

fn check_010(report: &mut FsckReport, active: &Walk, snapshots: &[Walk], role: DeviceRole) {
    let sequence: Vec<&Bitmap> =
        snapshots.iter().map(|walk| pick(walk, role).0).chain([pick(active, role).0]).collect();
    let mut violations = Vec::new();
    for page in 0..sequence[0].page_count() {
        for word in 0..WORDS_PER_PAGE {
            let (mut seen_one, mut zero_after_one, mut violation) = (0u64, 0u64, 0u64);
            for bitmap in &sequence {
                let bits = bitmap.word(page, word);
                violation |= zero_after_one & bits;
                zero_after_one |= seen_one & !bits;
                seen_one |= bits;
            }
            collect_bits(violation, page, word, &mut violations);
        }
    }
    if !violations.is_empty() {
        report.add(
            FindingKind::Property010,
            format!(
                "{role} blocks whose bits over the snapshots and the active tree are not 0*1*0*: {}",
                summarize(&violations)
            ),
        );
    }
}
