//! Free space of one device, the WAFL way.
//!
//! Owns the activemap and summary map of the active tree, the *safe* copies as
//! of the last durable CP, the *pinned* set of blocks freed since that CP, the
//! snapmap of the youngest existing snapshot (for the on-free summary rule), and
//! the journal the per-CP audit checks. Invariants:
//! - a block is allocatable iff it is clear in all five of activemap, summary,
//!   safe activemap, safe summary and pinned;
//! - every bit change goes through this module and is journaled.

use std::collections::{BTreeSet, VecDeque};

use crate::bitmap::{Bitmap, PersistentBitmap};
use crate::codec::{BITS_PER_PAGE, WORDS_PER_PAGE};
use crate::error::{DeviceRole, EngineError, Result};

/// Which map a journaled change touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MapKind {
    Active,
    Summary,
}

/// One journaled bit change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Change {
    map: MapKind,
    block: u64,
    value: bool,
}

/// The state of snapshot deletions that concerns the on-free rule: when the
/// youngest snapshot is being deleted, a block on a page its scan has passed
/// is held only by an older snapshot that will still account for it — a
/// live one, or one being deleted whose own scan has not passed that page
/// yet. (A deleting snapshot whose scan has passed a page never looks at it
/// again, so it cannot release a block that moves to the summary later.)
#[derive(Debug, Clone)]
pub struct YoungestScan {
    /// Pages below this one were scanned by the youngest's deletion.
    pub cursor_page: u64,
    /// The older snapshots, youngest first, down to the first live one: each
    /// snapmap with the page below which its own deletion scan has passed
    /// (`None`: live).
    pub older: Vec<(Bitmap, Option<u64>)>,
}

/// Free-space maps of one device.
#[derive(Debug, Clone)]
pub struct SpaceMap {
    role: DeviceRole,
    active: PersistentBitmap,
    summary: PersistentBitmap,
    safe_active: Bitmap,
    safe_summary: Bitmap,
    pinned: Bitmap,
    audit_active: Bitmap,
    audit_summary: Bitmap,
    journal: Vec<Change>,
    /// The maps were replaced wholesale since the last durable CP: the
    /// journal holds only the changes since.
    replaced_since_durable: bool,
    touched_pages: BTreeSet<usize>,
    allocatable_per_page: Vec<u32>,
    /// The snapmap of the youngest existing snapshot.
    pub youngest: Option<Bitmap>,
    /// Set while the youngest snapshot is being deleted.
    pub youngest_scan: Option<YoungestScan>,
    /// Set while the 010 property may not hold (a clone from a snapshot):
    /// the OR of the live snapshots' snapmaps, which the on-free rule asks
    /// instead of the youngest snapshot.
    pub live_holders: Option<Bitmap>,
    cursor: u64,
    first_usable_block: u64,
    /// Blocks the active tree or a deletion scan has let go of since open.
    free_count: u64,
    /// Times the allocatable blocks have shrunk since open (a block taken,
    /// or held for snapshots, or the maps replaced): a count of something
    /// that only frees can raise (clean segments) stays a lower bound while
    /// this is unchanged.
    shrink_count: u64,
    /// Times the allocatable blocks may have grown since open (a durable CP
    /// returned frees, or the maps were replaced).
    grow_count: u64,
}

impl SpaceMap {
    /// Space maps over loaded bitmaps. Blocks below `first_usable_block` are
    /// never allocated (the superblock slots on flash).
    pub fn new(role: DeviceRole, active: PersistentBitmap, summary: PersistentBitmap, first_usable_block: u64) -> Self {
        let bit_count = active.bits().bit_count();
        let mut space = Self {
            role,
            safe_active: active.bits().clone(),
            safe_summary: summary.bits().clone(),
            audit_active: active.bits().clone(),
            audit_summary: summary.bits().clone(),
            active,
            summary,
            pinned: Bitmap::new(bit_count),
            journal: Vec::new(),
            replaced_since_durable: false,
            touched_pages: BTreeSet::new(),
            allocatable_per_page: Vec::new(),
            youngest: None,
            youngest_scan: None,
            live_holders: None,
            cursor: first_usable_block,
            first_usable_block,
            free_count: 0,
            shrink_count: 0,
            grow_count: 0,
        };
        space.recount_all();
        space
    }

    /// Number of blocks of the device.
    pub fn block_count(&self) -> u64 {
        self.active.bits().bit_count()
    }

    /// The activemap.
    pub fn active(&self) -> &PersistentBitmap {
        &self.active
    }

    /// The summary map.
    pub fn summary(&self) -> &PersistentBitmap {
        &self.summary
    }

    /// Blocks of the activemap's and summary map's trees: what a CP
    /// rewriting both whole writes.
    pub fn tree_block_count(&self) -> u64 {
        self.active().tree_block_count() + self.summary().tree_block_count()
    }

    /// Mutable access for the CP that persists the maps.
    pub fn maps_mut(&mut self) -> (&mut PersistentBitmap, &mut PersistentBitmap) {
        (&mut self.active, &mut self.summary)
    }

    /// Blocks allocatable now.
    pub fn allocatable_count(&self) -> u64 {
        self.allocatable_per_page.iter().map(|&count| u64::from(count)).sum()
    }

    /// Whether `block` may be allocated now.
    pub fn is_allocatable(&self, block: u64) -> bool {
        block >= self.first_usable_block
            && block < self.block_count()
            && !(self.active.get(block)
                || self.summary.get(block)
                || self.safe_active.get(block)
                || self.safe_summary.get(block)
                || self.pinned.get(block))
    }

    fn allocatable_word(&self, page: usize, word: usize) -> u64 {
        let used = self.active.bits().word(page, word)
            | self.summary.bits().word(page, word)
            | self.safe_active.word(page, word)
            | self.safe_summary.word(page, word)
            | self.pinned.word(page, word);
        let first_bit = page as u64 * BITS_PER_PAGE + word as u64 * 64;
        let mut mask = u64::MAX;
        let valid_bits = self.block_count().saturating_sub(first_bit).min(64);
        if valid_bits < 64 {
            mask = (1u64 << valid_bits) - 1;
        }
        if first_bit < self.first_usable_block {
            let reserved = (self.first_usable_block - first_bit).min(64);
            mask &= if reserved == 64 { 0 } else { u64::MAX << reserved };
        }
        !used & mask
    }

    fn recount_page(&mut self, page: usize) {
        let count = (0..WORDS_PER_PAGE).map(|word| self.allocatable_word(page, word).count_ones()).sum();
        self.allocatable_per_page[page] = count;
    }

    fn recount_all(&mut self) {
        self.allocatable_per_page = vec![0; self.active.bits().page_count()];
        for page in 0..self.allocatable_per_page.len() {
            self.recount_page(page);
        }
    }

    fn record(&mut self, map: MapKind, block: u64, value: bool) {
        let changed = match map {
            MapKind::Active => self.active.put(block, value),
            MapKind::Summary => self.summary.put(block, value),
        };
        assert!(changed, "{}: bit {block} of the {map:?} map already {value}", self.role);
        self.journal.push(Change { map, block, value });
        self.touched_pages.insert((block / BITS_PER_PAGE) as usize);
    }

    /// Allocates up to `max_count` consecutive blocks, the first allocatable one
    /// at or after `hint` (wrapping); `None` if the device has no allocatable
    /// block.
    pub fn allocate_near(&mut self, hint: u64, max_count: u64) -> Option<(u64, u64)> {
        assert!(max_count > 0, "allocate at least one block");
        let start = self.find_allocatable(hint.min(self.block_count().saturating_sub(1)))?;
        let mut count = 0;
        while count < max_count && start + count < self.block_count() && self.is_allocatable(start + count) {
            self.take(start + count);
            count += 1;
        }
        Some((start, count))
    }

    /// Calls `visit(first_bit, allocatable_word)` for each 64-bit word covering
    /// `[start, end)`, masked to that range.
    fn for_each_allocatable_word(&self, start: u64, end: u64, mut visit: impl FnMut(u64, u64) -> bool) {
        let end = end.min(self.block_count());
        let mut bit = start - start % 64;
        while bit < end {
            let page = (bit / BITS_PER_PAGE) as usize;
            let word = ((bit % BITS_PER_PAGE) / 64) as usize;
            let mut free = self.allocatable_word(page, word);
            if bit < start {
                free &= u64::MAX << (start - bit);
            }
            if end - bit < 64 {
                free &= (1u64 << (end - bit)) - 1;
            }
            if !visit(bit, free) {
                return;
            }
            bit += 64;
        }
    }

    /// Number of allocatable blocks in `[start, end)`.
    pub fn allocatable_in(&self, start: u64, end: u64) -> u64 {
        let mut count = 0;
        self.for_each_allocatable_word(start, end, |_, free| {
            count += u64::from(free.count_ones());
            true
        });
        count
    }

    /// The first allocatable block in `[start, end)`, if any.
    fn first_allocatable_in(&self, start: u64, end: u64) -> Option<u64> {
        let mut found = None;
        self.for_each_allocatable_word(start, end, |first_bit, free| {
            if free != 0 {
                found = Some(first_bit + u64::from(free.trailing_zeros()));
            }
            found.is_none()
        });
        found
    }

    /// Allocates up to `max_count` consecutive blocks inside `[start, end)`: the
    /// first allocatable block at or after `hint`, else the first after
    /// `start` (wrapping inside the range). `None` if the range has none.
    pub fn allocate_within(&mut self, hint: u64, start: u64, end: u64, max_count: u64) -> Option<(u64, u64)> {
        assert!(max_count > 0, "allocate at least one block");
        assert!(start <= hint, "the hint lies inside the range");
        assert!(hint < end, "the hint lies inside the range");
        let first = self.first_allocatable_in(hint, end).or_else(|| self.first_allocatable_in(start, hint))?;
        let mut count = 0;
        while count < max_count && first + count < end.min(self.block_count()) && self.is_allocatable(first + count) {
            self.take(first + count);
            count += 1;
        }
        Some((first, count))
    }

    /// Allocates `count` consecutive blocks, each of which `accept`s, the
    /// first such run that starts in `[hint, hint + search_blocks)` (clipped
    /// to the device); `None`, and nothing allocated, if there is none.
    pub fn allocate_run(
        &mut self,
        hint: u64,
        count: u64,
        search_blocks: u64,
        accept: impl Fn(u64) -> bool,
    ) -> Option<u64> {
        assert!(count > 0, "allocate at least one block");
        let search_end = hint.saturating_add(search_blocks);
        let end = search_end.saturating_add(count).min(self.block_count());
        let mut from = hint;
        let start = loop {
            let candidate = self.first_allocatable_run(from, end, count).filter(|&start| start < search_end)?;
            // `accept` is asked only of a candidate's blocks: a refused block
            // restarts the search after it.
            match (candidate..candidate + count).find(|&block| !accept(block)) {
                Some(refused) => from = refused + 1,
                None => break candidate,
            }
        };
        for block in start..start + count {
            self.take(block);
        }
        Some(start)
    }

    /// Allocates `count` blocks, each of which `accept`s, that one read takes
    /// in one request, reading the gaps between them through: ascending,
    /// with at most `gap_blocks` other blocks between the first and the last
    /// in all, inside one aligned unit of `unit_blocks`, the first in
    /// `[hint, hint + search_blocks)` (clipped to the device). The first such
    /// set from `hint` on, ascending; `None`, and nothing allocated, if there
    /// is none.
    pub fn allocate_gathered(
        &mut self,
        hint: u64,
        count: u64,
        (gap_blocks, unit_blocks): (u64, u64),
        search_blocks: u64,
        accept: impl Fn(u64) -> bool,
    ) -> Option<Vec<u64>> {
        assert!(count > 0 && unit_blocks > 0, "allocate at least one block, in units of at least one");
        let search_end = hint.saturating_add(search_blocks).min(self.block_count());
        // A set begun before the search's end may run on to its unit's end.
        let end = search_end.div_ceil(unit_blocks).saturating_mul(unit_blocks).min(self.block_count());
        // The candidate set: blocks leave at its front as it slides.
        let mut set: VecDeque<u64> = VecDeque::new();
        self.for_each_allocatable_word(hint.min(end), end, |first_bit, mut free| {
            while free != 0 {
                let block = first_bit + u64::from(free.trailing_zeros());
                free &= free - 1;
                if !accept(block) {
                    continue;
                }
                if set.front().is_some_and(|&oldest| oldest / unit_blocks != block / unit_blocks) {
                    set.clear();
                }
                set.push_back(block);
                // Blocks between the set's first and last that are not in it.
                while block + 1 - set[0] - set.len() as u64 > gap_blocks {
                    set.pop_front();
                }
                if set[0] >= search_end || set.len() as u64 == count {
                    return false;
                }
            }
            true
        });
        if (set.len() as u64) < count || set[0] >= search_end {
            return None;
        }
        for &block in &set {
            self.take(block);
        }
        Some(set.into())
    }

    /// The start of the first run of `count` allocatable blocks inside
    /// `[from, end)`, scanned a word and a stretch of equal bits at a time.
    fn first_allocatable_run(&self, from: u64, end: u64, count: u64) -> Option<u64> {
        let (mut run_start, mut run_length) = (from, 0);
        let mut found = None;
        self.for_each_allocatable_word(from.min(end), end, |first_bit, free| {
            let mut bit = 0;
            while bit < 64 {
                let rest = free >> bit;
                if rest == 0 {
                    run_length = 0;
                    break;
                }
                let taken = rest.trailing_zeros();
                if taken > 0 {
                    run_length = 0;
                    bit += taken;
                    continue;
                }
                if run_length == 0 {
                    run_start = first_bit + u64::from(bit);
                }
                let ones = rest.trailing_ones();
                run_length += u64::from(ones);
                if run_length >= count {
                    found = Some(run_start);
                    return false;
                }
                bit += ones;
            }
            true
        });
        found
    }

    /// Whether the summary holds `block`: a snapshot holds it, the active
    /// tree does not.
    pub fn in_summary(&self, block: u64) -> bool {
        self.summary.get(block)
    }

    /// Allocates the first allocatable block at or below `hint` that `accept`
    /// accepts, searching down and wrapping at the first usable block to the
    /// top of the device.
    pub fn allocate_below(&mut self, hint: u64, accept: impl Fn(u64) -> bool) -> Option<u64> {
        let page_count = self.allocatable_per_page.len();
        let hint = hint.min(self.block_count().checked_sub(1)?);
        let hint_page = (hint / BITS_PER_PAGE) as usize;
        for step in 0..=page_count {
            let page = (hint_page + page_count - step % page_count) % page_count;
            if self.allocatable_per_page[page] == 0 {
                continue;
            }
            let last_word = if step == 0 { ((hint % BITS_PER_PAGE) / 64) as usize } else { WORDS_PER_PAGE - 1 };
            for word in (0..=last_word).rev() {
                let mut free = self.allocatable_word(page, word);
                let word_first_bit = page as u64 * BITS_PER_PAGE + word as u64 * 64;
                if step == 0 && word == last_word {
                    // Only bits at or below the hint.
                    let keep = hint - word_first_bit;
                    free &= if keep >= 63 { u64::MAX } else { (1u64 << (keep + 1)) - 1 };
                }
                while free != 0 {
                    let bit = 63 - u64::from(free.leading_zeros());
                    free &= !(1u64 << bit);
                    let block = word_first_bit + bit;
                    if accept(block) {
                        self.take(block);
                        return Some(block);
                    }
                }
            }
        }
        None
    }

    /// Whether a snapshot holds `block` (it would move to the summary if the
    /// active tree freed it).
    pub fn held_by_snapshot(&self, block: u64) -> bool {
        self.summary.get(block) || self.snapshot_holds(block)
    }

    /// Allocates one block by next-fit from the rolling cursor.
    pub fn allocate_next(&mut self) -> Option<u64> {
        let (block, _) = self.allocate_near(self.cursor, 1)?;
        self.cursor = block + 1;
        if self.cursor >= self.block_count() {
            self.cursor = self.first_usable_block;
        }
        Some(block)
    }

    /// Allocates one block or fails with an out-of-space error naming `purpose`.
    pub fn allocate_one(&mut self, purpose: &str) -> Result<u64> {
        self.allocate_next().ok_or_else(|| EngineError::NoSpace { role: self.role, detail: purpose.to_string() })
    }

    /// Marks `block` allocated; it must be allocatable (log replay re-marking
    /// what the crashed run allocated). Returns false if it is not.
    pub fn allocate_exact(&mut self, block: u64) -> bool {
        if !self.is_allocatable(block) {
            return false;
        }
        self.take(block);
        true
    }

    fn take(&mut self, block: u64) {
        assert!(self.is_allocatable(block), "{} block {block} is taken only while allocatable", self.role);
        self.shrink_count += 1;
        self.record(MapKind::Active, block, true);
        let page = (block / BITS_PER_PAGE) as usize;
        self.allocatable_per_page[page] -= 1;
    }

    fn find_allocatable(&self, hint: u64) -> Option<u64> {
        let page_count = self.allocatable_per_page.len();
        let hint_page = (hint / BITS_PER_PAGE) as usize;
        for step in 0..=page_count {
            let page = (hint_page + step) % page_count;
            if self.allocatable_per_page[page] == 0 {
                continue;
            }
            let first_word = if step == 0 { ((hint % BITS_PER_PAGE) / 64) as usize } else { 0 };
            for word in first_word..WORDS_PER_PAGE {
                let mut free = self.allocatable_word(page, word);
                let word_first_bit = page as u64 * BITS_PER_PAGE + word as u64 * 64;
                if step == 0 && word == first_word && hint > word_first_bit {
                    let skip = hint - word_first_bit;
                    free &= if skip >= 64 { 0 } else { u64::MAX << skip };
                }
                if free != 0 {
                    return Some(word_first_bit + u64::from(free.trailing_zeros()));
                }
            }
        }
        None
    }

    /// Whether a snapshot holds `block`, by the on-free rule (docs/format.md,
    /// rule 3).
    fn snapshot_holds(&self, block: u64) -> bool {
        if let Some(holders) = &self.live_holders {
            return holders.get(block);
        }
        let Some(youngest) = &self.youngest else { return false };
        if !youngest.get(block) {
            return false;
        }
        let page = block / BITS_PER_PAGE;
        match &self.youngest_scan {
            Some(scan) if page < scan.cursor_page => {
                // The snapshots holding a block the active tree holds are a
                // run ending at the youngest (010 property): walk it down.
                for (snapmap, scanned_below) in &scan.older {
                    if !snapmap.get(block) {
                        return false;
                    }
                    if scanned_below.is_none_or(|cursor| page >= cursor) {
                        return true;
                    }
                }
                false
            }
            _ => true,
        }
    }

    /// The active tree stops using `block`: it is held by the summary if a
    /// snapshot holds it, else pinned until the next CP is durable.
    pub fn free(&mut self, block: u64) {
        self.free_count += 1;
        self.record(MapKind::Active, block, false);
        assert!(!self.summary.get(block), "{}: block {block} in both the activemap and the summary", self.role);
        if self.snapshot_holds(block) {
            self.record(MapKind::Summary, block, true);
        } else {
            self.pinned.put(block, true);
        }
    }

    /// Only snapshots hold `block` from now on (a copy-out's copy): it moves
    /// from the activemap to the summary if just allocated, or enters the
    /// summary if neither map has it (restore keeping a copy the adopted maps
    /// lack), whether or not it is allocatable now (the safe copies keep
    /// protecting the durable CP's blocks).
    pub fn hold_for_snapshots(&mut self, block: u64) {
        assert!(!self.summary.get(block), "{}: block {block} already in the summary", self.role);
        if self.active.get(block) {
            self.record(MapKind::Active, block, false);
        } else if self.is_allocatable(block) {
            self.allocatable_per_page[(block / BITS_PER_PAGE) as usize] -= 1;
            self.shrink_count += 1;
        }
        self.record(MapKind::Summary, block, true);
    }

    /// The active tree takes back a block only snapshots held (a clone from
    /// a snapshot): it leaves the summary for the activemap.
    pub fn return_from_summary(&mut self, block: u64) {
        assert!(!self.active.get(block), "{}: block {block} already in the activemap", self.role);
        self.record(MapKind::Summary, block, false);
        self.record(MapKind::Active, block, true);
    }

    /// The snapshot deletion scan found `block` held by no snapshot any more.
    pub fn release_from_summary(&mut self, block: u64) {
        self.free_count += 1;
        self.record(MapKind::Summary, block, false);
        if !self.active.get(block) {
            self.pinned.put(block, true);
        }
    }

    /// The CP is durable: blocks freed up to it become allocatable.
    pub fn checkpoint_durable(&mut self) {
        self.safe_active = self.active.bits().clone();
        self.safe_summary = self.summary.bits().clone();
        self.audit_active = self.safe_active.clone();
        self.audit_summary = self.safe_summary.clone();
        let pinned_pages: Vec<usize> =
            (0..self.pinned.page_count()).filter(|&page| !self.pinned.page_is_zero(page)).collect();
        self.pinned = Bitmap::new(self.block_count());
        let touched = std::mem::take(&mut self.touched_pages);
        for page in touched.into_iter().chain(pinned_pages) {
            self.recount_page(page);
        }
        self.grow_count += 1;
        // Released rather than cleared: a large CP's journal is not kept around.
        self.journal = Vec::new();
        self.replaced_since_durable = false;
    }

    /// Replaces both maps wholesale (restore to a snapshot). The safe copies
    /// stay, so nothing the durable CP uses is reused before the next CP; the
    /// audit's baseline becomes the new maps.
    pub fn rebase(&mut self, active: PersistentBitmap, summary: Bitmap) {
        self.active = active;
        self.summary.replace_forgetting_blocks(summary);
        self.audit_active = self.active.bits().clone();
        self.audit_summary = self.summary.bits().clone();
        self.journal.clear();
        self.replaced_since_durable = true;
        self.youngest_scan = None;
        self.recount_all();
        self.shrink_count += 1;
        self.grow_count += 1;
        // Blocks only the safe copies hold become allocatable at the next
        // durable CP: recount every page then.
        self.touched_pages.extend(0..self.allocatable_per_page.len());
    }

    /// Checks that the maps differ from the last CP's exactly by the journal.
    pub fn audit(&self) -> Result<()> {
        for (kind, current, baseline) in [
            (MapKind::Active, &self.active, &self.audit_active),
            (MapKind::Summary, &self.summary, &self.audit_summary),
        ] {
            let mut expected = baseline.clone();
            for change in self.journal.iter().filter(|change| change.map == kind) {
                expected.put(change.block, change.value);
            }
            for page in 0..expected.page_count() {
                if !current.bits().page_equals(&expected, page) {
                    let first_bit = page as u64 * BITS_PER_PAGE;
                    let differing = (first_bit..(first_bit + BITS_PER_PAGE).min(expected.bit_count()))
                        .find(|&bit| current.get(bit) != expected.get(bit))
                        .unwrap_or(first_bit);
                    return Err(EngineError::AuditFailed(format!(
                        "{}: {kind:?} map bit {differing} is {} but the journal of allocations and frees says {}",
                        self.role,
                        current.get(differing),
                        expected.get(differing)
                    )));
                }
            }
        }
        Ok(())
    }

    /// Times the allocatable blocks have shrunk since open: a clock of when
    /// space may have gone.
    pub fn shrink_count(&self) -> u64 {
        self.shrink_count
    }

    /// Times the allocatable blocks have changed since open: anything counted
    /// from them (clean segments) holds while this is unchanged.
    pub fn change_count(&self) -> u64 {
        self.shrink_count + self.grow_count
    }

    /// Blocks let go of (by the active tree or a deletion scan) since open: a
    /// clock of when space may have come back.
    pub fn free_count(&self) -> u64 {
        self.free_count
    }

    /// Blocks in use by the active tree.
    pub fn used_count(&self) -> u64 {
        self.active.bits().count_ones()
    }

    /// Blocks held only by snapshots (in the summary, not in the activemap).
    pub fn snapshot_only_count(&self) -> u64 {
        let mut count = 0;
        for page in 0..self.summary.bits().page_count() {
            if self.summary.bits().page_is_zero(page) {
                continue;
            }
            for word in 0..WORDS_PER_PAGE {
                let only = self.summary.bits().word(page, word) & !self.active.bits().word(page, word);
                count += u64::from(only.count_ones());
            }
        }
        count
    }

    /// The blocks whose bit in either map changed since the last durable CP,
    /// as often as they changed and in no order; `None` when the maps were
    /// replaced wholesale since (a restore), which changes any bit.
    pub fn blocks_changed_since_durable(&self) -> Option<impl Iterator<Item = u64> + '_> {
        (!self.replaced_since_durable).then(|| self.journal.iter().map(|change| change.block))
    }

    /// Blocks of `[start, end)` in use: set in the activemap or the summary
    /// (the live blocks of a segment, for the segment usage table).
    pub fn in_use_in(&self, start: u64, end: u64) -> u64 {
        self.count_in(start, end, |active, summary| active | summary)
    }

    /// Blocks of `[start, end)` in the summary (held by snapshots).
    pub fn summary_in(&self, start: u64, end: u64) -> u64 {
        self.count_in(start, end, |_, summary| summary)
    }

    /// Counts the bits `pick(activemap word, summary word)` sets in `[start, end)`.
    fn count_in(&self, start: u64, end: u64, pick: impl Fn(u64, u64) -> u64) -> u64 {
        let end = end.min(self.block_count());
        let mut count = 0;
        let mut bit = start - start % 64;
        while bit < end {
            let page = (bit / BITS_PER_PAGE) as usize;
            let word = ((bit % BITS_PER_PAGE) / 64) as usize;
            let mut set = pick(self.active.bits().word(page, word), self.summary.bits().word(page, word));
            if bit < start {
                set &= u64::MAX << (start - bit);
            }
            if end - bit < 64 {
                set &= (1u64 << (end - bit)) - 1;
            }
            count += u64::from(set.count_ones());
            bit += 64;
        }
        count
    }

    /// Memory held by this space map's bitmaps, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.active.bits().memory_bytes() + self.summary.bits().memory_bytes() + self.pinned.memory_bytes()
    }

    /// A bitmap of the pinned blocks (for fsck of the in-memory state).
    pub fn pinned(&self) -> &Bitmap {
        &self.pinned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space(block_count: u64) -> SpaceMap {
        SpaceMap::new(DeviceRole::Data, PersistentBitmap::new(block_count), PersistentBitmap::new(block_count), 0)
    }

    #[test]
    fn freed_blocks_are_reused_only_after_the_checkpoint_is_durable() {
        let mut space = space(100);
        let (start, count) = space.allocate_near(0, 10).unwrap();
        assert_eq!((start, count), (0, 10));
        space.checkpoint_durable();
        space.free(3);
        assert!(!space.is_allocatable(3));
        assert_eq!(space.allocate_near(0, 1), Some((10, 1)));
        space.audit().unwrap();
        space.checkpoint_durable();
        assert!(space.is_allocatable(3));
        assert_eq!(space.allocatable_count(), 100 - 10);
    }

    #[test]
    fn a_block_held_by_the_youngest_snapshot_moves_to_the_summary() {
        let mut space = space(100);
        space.allocate_near(0, 4).unwrap();
        space.checkpoint_durable();
        space.youngest = Some(space.active().bits().clone());
        space.free(2);
        assert!(space.summary().get(2));
        space.checkpoint_durable();
        assert!(!space.is_allocatable(2));
        space.release_from_summary(2);
        space.checkpoint_durable();
        assert!(space.is_allocatable(2));
    }

    #[test]
    fn allocation_inside_a_range_wraps_within_it_and_counts_free_blocks() {
        let mut space = space(1000);
        space.allocate_near(256, 10).unwrap();
        assert_eq!(space.allocatable_in(256, 512), 246);
        assert_eq!(space.allocatable_in(250, 270), 10);
        assert_eq!(space.allocate_within(300, 256, 512, 4), Some((300, 4)));
        // Past the end of the range's free space, the search wraps to its start.
        space.allocate_near(304, 208).unwrap();
        assert_eq!(space.allocatable_in(256, 512), 34);
        assert_eq!(space.allocate_within(400, 256, 512, 100), Some((266, 34)));
        assert_eq!(space.allocatable_in(256, 512), 0);
        assert_eq!(space.allocate_within(400, 256, 512, 1), None);
        space.free(260);
        space.checkpoint_durable();
        assert_eq!(space.allocate_within(500, 256, 512, 3), Some((260, 1)));
        assert_eq!(space.allocatable_in(990, 1200), 10);
    }

    #[test]
    fn a_run_is_allocated_whole_or_not_at_all_within_the_search_window() {
        let mut space = space(1000);
        // Taken: 100..110, 115, 120..300 — free runs 110..115 (5), 116..120 (4), 300.. .
        space.allocate_near(100, 10).unwrap();
        space.allocate_near(115, 1).unwrap();
        space.allocate_near(120, 180).unwrap();
        assert_eq!(space.allocate_run(100, 5, 50, |_| true), Some(110));
        assert_eq!(space.allocate_run(100, 4, 50, |_| true), Some(116));
        // The next free run of 4 starts at 300, outside a window of 100..200.
        assert_eq!(space.allocate_run(100, 4, 100, |_| true), None);
        assert_eq!(space.allocatable_in(100, 300), 0);
        assert_eq!(space.allocate_run(100, 130, 300, |block| block != 350), Some(351), "350 is refused");
        assert_eq!(space.allocate_run(0, 100, 1000, |_| true), Some(0));
        assert_eq!(space.allocate_run(400, 600, 1000, |_| true), None, "the run would pass the device's end");
        assert_eq!(space.allocate_run(481, 519, 1, |_| true), Some(481));
        space.audit().unwrap();
    }

    #[test]
    fn a_gathered_set_skips_few_blocks_in_all_and_stays_in_one_unit() {
        let mut space = space(512);
        // Every block taken but 1 in 3 (0, 3, 6, …) from 0 to 300; free from 300 on.
        for block in (0..300).filter(|block| block % 3 != 0) {
            space.allocate_run(block, 1, 1, |_| true).unwrap();
        }
        // 10 blocks every third skip 18 between them.
        let set = space.allocate_gathered(0, 10, (18, 64), 512, |_| true).unwrap();
        assert_eq!(set, (0..10).map(|index| index * 3).collect::<Vec<_>>());
        assert!(set.iter().all(|&block| !space.is_allocatable(block)));
        // With 1 allowed no two of the holes do: the first set is past 300.
        assert_eq!(space.allocate_gathered(30, 4, (1, 64), 512, |_| true), Some(vec![300, 301, 302, 303]));
        // A set does not cross a unit's end: 48, 51, …, 63 are six, the
        // seventh would be 66, in the next unit, where the set starts again.
        assert_eq!(space.allocate_gathered(48, 7, (12, 64), 100, |_| true), Some((66..85).step_by(3).collect()));
        // A refused block is skipped like a taken one: 90 and 96 are too far
        // apart with 93 refused, and the set slides on to 96.
        let set = space.allocate_gathered(90, 3, (4, 64), 100, |block| block != 93).unwrap();
        assert_eq!(set, vec![96, 99, 102]);
        // None beginning inside the window, and nothing taken.
        let free = space.allocatable_count();
        assert_eq!(space.allocate_gathered(200, 40, (80, 64), 40, |_| true), None);
        assert_eq!(space.allocatable_count(), free);
        space.audit().unwrap();
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 256,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]
        /// `allocate_run` takes the first run a block-by-block scan finds,
        /// whatever the free space, the window and the refused blocks.
        #[test]
        fn a_run_is_the_first_a_block_by_block_scan_finds(
            taken in proptest::collection::vec(proptest::bool::weighted(0.3), 700),
            hint in 0u64..700,
            count in 1u64..80,
            search_blocks in 0u64..700,
            refused_every in 5u64..200,
        ) {
            let mut space = space(700);
            for (block, _) in taken.iter().enumerate().filter(|(_, &taken)| taken) {
                space.allocate_exact(block as u64);
            }
            let accept = |block: u64| !block.is_multiple_of(refused_every);
            let end = (hint + search_blocks + count).min(700);
            let expected = (hint..(hint + search_blocks).min(700)).find(|&start| {
                start + count <= end
                    && (start..start + count).all(|block| space.is_allocatable(block) && accept(block))
            });
            proptest::prop_assert_eq!(space.allocate_run(hint, count, search_blocks, accept), expected);
            if let Some(start) = expected {
                proptest::prop_assert!((start..start + count).all(|block| !space.is_allocatable(block)));
            }
            space.audit().unwrap();
        }
    }

    #[test]
    fn allocation_below_searches_down_and_wraps_to_the_top() {
        let block_count = 3 * BITS_PER_PAGE + 100;
        let mut space = space(block_count);
        assert_eq!(space.allocate_below(u64::MAX, |_| true), Some(block_count - 1), "from the top");
        assert_eq!(space.allocate_below(block_count - 1, |_| true), Some(block_count - 2));
        assert_eq!(space.allocate_below(BITS_PER_PAGE + 64, |_| true), Some(BITS_PER_PAGE + 64));
        assert_eq!(space.allocate_below(BITS_PER_PAGE + 64, |_| true), Some(BITS_PER_PAGE + 63), "across a word");
        space.allocate_near(0, BITS_PER_PAGE + 1).unwrap();
        assert_eq!(space.allocate_below(BITS_PER_PAGE, |_| true), Some(block_count - 3), "wraps past the bottom");
        space.checkpoint_durable();
        space.free(5);
        assert_eq!(space.allocate_below(10, |_| true), Some(block_count - 4), "a block freed since the CP waits");
        space.checkpoint_durable();
        assert_eq!(space.allocate_below(10, |block| block != 5), Some(block_count - 5), "refused");
        assert_eq!(space.allocate_below(10, |_| true), Some(5));
        space.audit().unwrap();
    }
}
