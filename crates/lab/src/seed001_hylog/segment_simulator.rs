//! An independent segment-accounting simulator of a log-structured layout, in
//! the spirit of the HyLog paper's TinySim and of Rosenblum's LFS simulator:
//! no disk, no data, no engine; only which page lives in which slot of which
//! segment, and how many segment and page I/Os writing and cleaning cost.
//!
//! The disk is `segment_count` segments of `segment_pages` page slots. The
//! data set is `live_pages` pages (the utilisation u is live pages over slots),
//! laid out packed at the start. Each user write appends the page to the open
//! segment of its partition (a log head) and leaves a hole where the page was.
//! A full open segment is sealed: one segment write. When fewer than
//! `free_segments_low` segments are free, the cleaner runs passes of at most
//! `pass_pages` slots of victims each, until the low-water mark is met:
//!
//! - [`CleaningPolicy::Greedy`]: the victims are the segments with the fewest
//!   live pages; their live pages are copied to the log head (each victim one
//!   segment read, the copies fill segments written whole).
//! - [`CleaningPolicy::CostAge`]: Rosenblum's cost-benefit: the victims are
//!   the segments of highest (1 − u)·age / (1 + u), age being the time since
//!   the youngest page in the segment was written; the copies are sorted by
//!   age before they are written.
//! - [`CleaningPolicy::HolePlugging`]: Matthews' hole-plugging: the victims
//!   are the least-used segments, read whole, and each live page is written
//!   alone (a page I/O) into a hole of the fullest other segment.
//! - [`CleaningPolicy::Adaptive`]: HyLog's adaptive cleaner: for cost-age and
//!   hole-plugging in each partition, the write cost the pass would have
//!   (Eq 4, 2/(1 − u_c), or Eq 5, 2 + u_c·A, with u_c the victims'
//!   utilisation) is computed, and the cheaper is run.
//!
//! Costs are the model's scaled write costs (time per user page over T_s/n):
//! a segment read or write costs n, a page write A (the segment-vs-page
//! efficiency of Eq 1), so W' = (n · segment I/Os + A · page writes) / user
//! pages. With [`Separation::WriteFrequency`], pages written at least
//! `hot_writes` times in the last measurement interval are hot and go to a hot
//! log head and partition, the others to a cold one (the partitions share the
//! free segments); otherwise there is one partition.
//!
//! Invariants (checked by [`SegmentSimulator::check_invariants`] in tests):
//! every page is in exactly one slot; a segment's live count is the number of
//! its slots holding a page; a sealed segment is in exactly the live-count
//! bucket of its partition that matches; free segments hold no page.

use serde::{Deserialize, Serialize};

/// A slot holding no page.
const EMPTY: u32 = u32::MAX;

/// How the cleaner picks and empties its victims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CleaningPolicy {
    /// Fewest live pages first; live pages copied to the log.
    Greedy,
    /// Highest (1 − u)·age/(1 + u) first; live pages copied, sorted by age.
    CostAge,
    /// Fewest live pages first; live pages written one by one into holes.
    HolePlugging,
    /// The cheapest of cost-age and hole-plugging, per pass and partition.
    Adaptive,
}

impl CleaningPolicy {
    /// Every policy, in the order of the paper's figures.
    pub const ALL: [CleaningPolicy; 4] =
        [CleaningPolicy::Greedy, CleaningPolicy::CostAge, CleaningPolicy::HolePlugging, CleaningPolicy::Adaptive];

    /// `greedy`, `cost-age`, `hole-plugging`, `adaptive`.
    pub fn name(self) -> &'static str {
        match self {
            CleaningPolicy::Greedy => "greedy",
            CleaningPolicy::CostAge => "cost-age",
            CleaningPolicy::HolePlugging => "hole-plugging",
            CleaningPolicy::Adaptive => "adaptive",
        }
    }
}

/// Whether hot and cold pages are logged apart.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Separation {
    /// One log head, one partition.
    None,
    /// Per-page write counters, reset every `interval_writes` user writes: a
    /// page written at least `hot_writes` times in the last interval is hot.
    WriteFrequency {
        /// User writes per measurement interval; 0 means as many as the data
        /// set has pages.
        interval_writes: u64,
        /// Writes in an interval that make a page hot.
        hot_writes: u32,
    },
}

/// What to simulate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SimulatorConfig {
    /// Page slots per segment (n).
    pub segment_pages: u32,
    /// Segments on the disk.
    pub segment_count: u32,
    /// Pages of data (u = live pages / all slots).
    pub live_pages: u64,
    /// The cleaning policy.
    pub policy: CleaningPolicy,
    /// The cleaner runs while fewer segments than this are free (the paper: 10).
    pub free_segments_low: u32,
    /// Slots of victims one pass processes at most (the paper: 20 MB).
    pub pass_pages: u32,
    /// A, the segment-vs-page efficiency: a page write's cost in segment-I/O
    /// units per page (Eq 1).
    pub segment_efficiency: f64,
    /// Hot/cold separation.
    pub separation: Separation,
}

impl SimulatorConfig {
    /// A configuration of `segment_count` segments of `segment_pages` pages
    /// filled to `utilization`, with the paper's cleaner settings: start below
    /// 10 free segments, at most 20 MB of 4 KiB pages per pass.
    pub fn at_utilization(
        segment_pages: u32,
        segment_count: u32,
        utilization: f64,
        policy: CleaningPolicy,
        segment_efficiency: f64,
    ) -> SimulatorConfig {
        assert!(utilization > 0.0 && utilization < 1.0, "a utilisation in (0, 1)");
        let slots = u64::from(segment_pages) * u64::from(segment_count);
        SimulatorConfig {
            segment_pages,
            segment_count,
            live_pages: (slots as f64 * utilization).round() as u64,
            policy,
            free_segments_low: PAPER_FREE_SEGMENTS_LOW,
            pass_pages: PAPER_PASS_PAGES,
            segment_efficiency,
            separation: Separation::None,
        }
    }

    /// Live pages over slots.
    pub fn utilization(&self) -> f64 {
        self.live_pages as f64 / (f64::from(self.segment_pages) * f64::from(self.segment_count))
    }
}

/// The paper's cleaner threshold: fewer than 10 free segments (001:L256).
pub const PAPER_FREE_SEGMENTS_LOW: u32 = 10;
/// The paper's pass: up to 20 MB (001:L257), in 4 KiB pages.
pub const PAPER_PASS_PAGES: u32 = 20 * (1 << 20) / 4096;

/// The I/O the simulator counted since it was built or last reset.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct SimulatorCounts {
    /// Pages the user wrote.
    pub user_page_writes: u64,
    /// Whole segments read by the cleaner.
    pub segment_reads: u64,
    /// Whole segments written (user data and copies).
    pub segment_writes: u64,
    /// Pages written alone into holes by hole-plugging.
    pub plug_page_writes: u64,
    /// Segments the cleaner emptied.
    pub cleaned_segments: u64,
    /// Live pages those segments held when cleaned.
    pub cleaned_live_pages: u64,
    /// Passes run by copying (greedy or cost-age).
    pub copying_passes: u64,
    /// Passes run by hole-plugging.
    pub plugging_passes: u64,
}

/// A run's figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SimulatorReport {
    /// Disk utilisation u.
    pub utilization: f64,
    /// Mean utilisation of the cleaned segments, u_c.
    pub cleaning_utilization: f64,
    /// The overall scaled write cost W' (segment I/O = n, page write = A, per user page).
    pub write_cost: f64,
    /// The counts behind them.
    pub counts: SimulatorCounts,
}

/// Where a segment stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SegmentState {
    Free,
    Open,
    Sealed,
}

/// One of the cleaner's options for a pass.
#[derive(Debug, Clone)]
struct PassPlan {
    partition: usize,
    plugging: bool,
    victims: Vec<u32>,
    estimated_cost: f64,
}

/// The simulator's state. See the module's documentation.
#[derive(Debug, Clone)]
pub struct SegmentSimulator {
    config: SimulatorConfig,
    segment_pages: usize,
    /// Slot (segment · n + index) of each page.
    page_slot: Vec<u32>,
    /// Page in each slot, or `EMPTY`.
    slot_page: Vec<u32>,
    /// User-write time each page was last written at.
    page_written_at: Vec<u64>,
    /// Hot pages (separation only).
    page_hot: Vec<bool>,
    /// Writes of each page in the current interval (separation only).
    page_interval_writes: Vec<u32>,
    segment_live: Vec<u32>,
    segment_state: Vec<SegmentState>,
    segment_partition: Vec<u8>,
    /// Youngest write time of the pages placed in the segment.
    segment_youngest: Vec<u64>,
    /// Empty slot indices of each segment (holes and, for free segments, nothing).
    segment_holes: Vec<Vec<u32>>,
    /// Sealed segments by partition and live count; `bucket_position` indexes them.
    buckets: Vec<Vec<u32>>,
    bucket_position: Vec<u32>,
    /// Holes in sealed segments, per partition.
    partition_holes: [u64; 2],
    free_segments: Vec<u32>,
    /// Per partition: open segment and its next slot.
    open: [Option<(u32, u32)>; 2],
    clock: u64,
    counts: SimulatorCounts,
}

impl SegmentSimulator {
    /// A disk with the data packed at the start, every page cold.
    ///
    /// # Panics
    /// On a configuration with no room to clean: the data must leave at least
    /// `free_segments_low` + 2 segments free, and a pass must hold a segment.
    pub fn new(config: SimulatorConfig) -> SegmentSimulator {
        let segment_pages = config.segment_pages as usize;
        let segment_count = config.segment_count as usize;
        let slots = segment_pages * segment_count;
        assert!(segment_pages >= 2 && slots < EMPTY as usize, "segments of 2 pages or more, slots fit u32");
        let full_segments = config.live_pages.div_ceil(u64::from(config.segment_pages)) as usize;
        assert!(
            full_segments + config.free_segments_low as usize + 2 <= segment_count,
            "the data leave room for the cleaner's free segments"
        );
        assert!(config.pass_pages >= config.segment_pages, "a pass cleans at least one segment");
        assert!(config.segment_efficiency > 0.0, "A is positive");
        let live = config.live_pages as usize;
        let mut simulator = SegmentSimulator {
            config,
            segment_pages,
            page_slot: (0..live as u32).collect(),
            slot_page: (0..slots).map(|slot| if slot < live { slot as u32 } else { EMPTY }).collect(),
            page_written_at: vec![0; live],
            page_hot: vec![false; live],
            page_interval_writes: vec![0; live],
            segment_live: vec![0; segment_count],
            segment_state: vec![SegmentState::Free; segment_count],
            segment_partition: vec![0; segment_count],
            segment_youngest: vec![0; segment_count],
            segment_holes: vec![Vec::new(); segment_count],
            buckets: vec![Vec::new(); 2 * (segment_pages + 1)],
            bucket_position: vec![0; segment_count],
            partition_holes: [0; 2],
            free_segments: Vec::new(),
            open: [None, None],
            clock: 0,
            counts: SimulatorCounts::default(),
        };
        for segment in 0..segment_count {
            let first = segment * segment_pages;
            let live_here = live.saturating_sub(first).min(segment_pages);
            if live_here == 0 {
                continue;
            }
            simulator.segment_live[segment] = live_here as u32;
            simulator.segment_holes[segment] = (live_here as u32..segment_pages as u32).rev().collect();
            simulator.seal(segment as u32);
        }
        simulator.free_segments = (full_segments as u32..segment_count as u32).rev().collect();
        simulator
    }

    /// The configuration.
    pub fn config(&self) -> &SimulatorConfig {
        &self.config
    }

    /// The counts since the start or the last [`SegmentSimulator::reset_counts`].
    pub fn counts(&self) -> SimulatorCounts {
        self.counts
    }

    /// Starts counting afresh (after a warm-up).
    pub fn reset_counts(&mut self) {
        self.counts = SimulatorCounts::default();
    }

    /// The figures of the counts so far.
    pub fn report(&self) -> SimulatorReport {
        let counts = self.counts;
        let n = f64::from(self.config.segment_pages);
        let segment_ios = (counts.segment_reads + counts.segment_writes) as f64;
        let write_cost = (n * segment_ios + self.config.segment_efficiency * counts.plug_page_writes as f64)
            / counts.user_page_writes.max(1) as f64;
        let cleaning_utilization = if counts.cleaned_segments == 0 {
            0.0
        } else {
            counts.cleaned_live_pages as f64 / (counts.cleaned_segments as f64 * n)
        };
        SimulatorReport { utilization: self.config.utilization(), cleaning_utilization, write_cost, counts }
    }

    /// Writes `page` (below the configured live pages), cleaning first if
    /// free segments run low.
    pub fn write(&mut self, page: u64) {
        assert!(page < self.config.live_pages, "page {page} is outside the data set");
        let page = page as u32;
        self.clock += 1;
        self.counts.user_page_writes += 1;
        let partition = self.classify(page);
        self.invalidate(page);
        self.page_written_at[page as usize] = self.clock;
        self.append(page, partition);
        self.clean_while_low();
    }

    /// Warms up on `warmup_writes` writes of `pages`, then counts
    /// `measured_writes` more and reports them.
    pub fn run(
        &mut self,
        pages: &mut impl Iterator<Item = u64>,
        warmup_writes: u64,
        measured_writes: u64,
    ) -> SimulatorReport {
        for page in pages.by_ref().take(warmup_writes as usize) {
            self.write(page);
        }
        self.reset_counts();
        for page in pages.by_ref().take(measured_writes as usize) {
            self.write(page);
        }
        self.report()
    }

    /// Which partition a user write of `page` goes to, counting the write.
    fn classify(&mut self, page: u32) -> usize {
        let Separation::WriteFrequency { interval_writes, hot_writes } = self.config.separation else {
            return 0;
        };
        let interval = if interval_writes == 0 { self.config.live_pages } else { interval_writes };
        if self.clock.is_multiple_of(interval.max(1)) {
            for (hot, writes) in self.page_hot.iter_mut().zip(self.page_interval_writes.iter_mut()) {
                *hot = *writes >= hot_writes;
                *writes = 0;
            }
        }
        self.page_interval_writes[page as usize] += 1;
        usize::from(self.page_hot[page as usize])
    }

    fn bucket_index(&self, segment: u32) -> usize {
        let partition = usize::from(self.segment_partition[segment as usize]);
        partition * (self.segment_pages + 1) + self.segment_live[segment as usize] as usize
    }

    fn bucket_insert(&mut self, segment: u32) {
        let index = self.bucket_index(segment);
        self.bucket_position[segment as usize] = self.buckets[index].len() as u32;
        self.buckets[index].push(segment);
    }

    fn bucket_remove(&mut self, segment: u32) {
        let index = self.bucket_index(segment);
        let position = self.bucket_position[segment as usize] as usize;
        let bucket = &mut self.buckets[index];
        assert_eq!(bucket[position], segment, "the bucket index is consistent");
        bucket.swap_remove(position);
        if let Some(&moved) = bucket.get(position) {
            self.bucket_position[moved as usize] = position as u32;
        }
    }

    /// Makes the slot of `page` a hole.
    fn invalidate(&mut self, page: u32) {
        let slot = self.page_slot[page as usize];
        let segment = slot / self.config.segment_pages;
        let sealed = self.segment_state[segment as usize] == SegmentState::Sealed;
        if sealed {
            self.bucket_remove(segment);
            self.partition_holes[usize::from(self.segment_partition[segment as usize])] += 1;
        }
        self.slot_page[slot as usize] = EMPTY;
        self.segment_live[segment as usize] -= 1;
        self.segment_holes[segment as usize].push(slot % self.config.segment_pages);
        if sealed {
            self.bucket_insert(segment);
        }
    }

    /// Puts `page` in the next slot of the partition's log head.
    fn append(&mut self, page: u32, partition: usize) {
        let (segment, index) = match self.open[partition] {
            Some(open) => open,
            None => {
                let segment = self.free_segments.pop().expect("the cleaner keeps free segments");
                self.segment_state[segment as usize] = SegmentState::Open;
                self.segment_partition[segment as usize] = partition as u8;
                self.segment_youngest[segment as usize] = 0;
                self.segment_holes[segment as usize].clear();
                (segment, 0)
            }
        };
        self.place(page, segment, index);
        if index + 1 == self.config.segment_pages {
            self.open[partition] = None;
            self.counts.segment_writes += 1;
            self.seal(segment);
        } else {
            self.open[partition] = Some((segment, index + 1));
        }
    }

    fn place(&mut self, page: u32, segment: u32, index: u32) {
        let slot = segment * self.config.segment_pages + index;
        assert_eq!(self.slot_page[slot as usize], EMPTY, "a page goes into an empty slot");
        self.slot_page[slot as usize] = page;
        self.page_slot[page as usize] = slot;
        self.segment_live[segment as usize] += 1;
        let youngest = &mut self.segment_youngest[segment as usize];
        *youngest = (*youngest).max(self.page_written_at[page as usize]);
    }

    fn seal(&mut self, segment: u32) {
        self.segment_state[segment as usize] = SegmentState::Sealed;
        let holes = self.config.segment_pages - self.segment_live[segment as usize];
        self.partition_holes[usize::from(self.segment_partition[segment as usize])] += u64::from(holes);
        self.bucket_insert(segment);
    }

    fn clean_while_low(&mut self) {
        while self.free_segments.len() < self.config.free_segments_low as usize {
            let plan = self.plan_pass();
            self.run_pass(&plan);
        }
    }

    /// Victims per pass.
    fn victims_per_pass(&self) -> usize {
        (self.config.pass_pages / self.config.segment_pages) as usize
    }

    /// The least-used sealed segments of `partition`, at most a pass of them.
    fn least_used(&self, partition: usize) -> Vec<u32> {
        let wanted = self.victims_per_pass();
        let first = partition * (self.segment_pages + 1);
        // A full segment frees nothing; it is never a victim.
        self.buckets[first..first + self.segment_pages].iter().flatten().copied().take(wanted).collect()
    }

    /// The sealed segments of `partition` with the highest cost-benefit score.
    fn best_cost_benefit(&self, partition: usize) -> Vec<u32> {
        let n = f64::from(self.config.segment_pages);
        let mut scored: Vec<(f64, u32)> = (0..self.config.segment_count)
            .filter(|&segment| {
                let index = segment as usize;
                self.segment_state[index] == SegmentState::Sealed
                    && usize::from(self.segment_partition[index]) == partition
                    && self.segment_live[index] < self.config.segment_pages
            })
            .map(|segment| {
                let utilization = f64::from(self.segment_live[segment as usize]) / n;
                let age = (self.clock - self.segment_youngest[segment as usize]) as f64 + 1.0;
                ((1.0 - utilization) * age / (1.0 + utilization), segment)
            })
            .collect();
        let wanted = self.victims_per_pass().min(scored.len());
        if wanted < scored.len() && wanted > 0 {
            scored.select_nth_unstable_by(wanted - 1, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        }
        scored.truncate(wanted);
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.into_iter().map(|(_, segment)| segment).collect()
    }

    fn victims_live(&self, victims: &[u32]) -> u64 {
        victims.iter().map(|&segment| u64::from(self.segment_live[segment as usize])).sum()
    }

    fn plan(&self, partition: usize, plugging: bool) -> Option<PassPlan> {
        let victims = if plugging { self.least_used(partition) } else { self.best_cost_benefit(partition) };
        if victims.is_empty() {
            return None;
        }
        let live = self.victims_live(&victims);
        let slots = victims.len() as u64 * u64::from(self.config.segment_pages);
        let cleaning = live as f64 / slots as f64;
        let estimated_cost = if plugging {
            let holes_elsewhere = self.partition_holes[partition] - (slots - live);
            if holes_elsewhere < live {
                return None;
            }
            2.0 + cleaning * self.config.segment_efficiency
        } else {
            2.0 / (1.0 - cleaning)
        };
        Some(PassPlan { partition, plugging, victims, estimated_cost })
    }

    /// The adaptive cleaner's choice: in the partition with the most
    /// reclaimable space, the method of lower estimated write cost. (Taking
    /// the lowest cost over both partitions instead starves the cold
    /// partition's cleaning; see docs/hylog.md.)
    fn adaptive_plan(&self) -> Option<PassPlan> {
        let partition = self.fuller_partition();
        [self.plan(partition, false), self.plan(partition, true)]
            .into_iter()
            .flatten()
            .min_by(|a, b| a.estimated_cost.total_cmp(&b.estimated_cost))
    }

    /// The partition that needs cleaning most: the one with more holes.
    fn fuller_partition(&self) -> usize {
        usize::from(self.partition_holes[1] > self.partition_holes[0])
    }

    fn plan_pass(&self) -> PassPlan {
        let partition = self.fuller_partition();
        let plan = match self.config.policy {
            CleaningPolicy::Greedy => {
                let victims = self.least_used(partition);
                Some(PassPlan { partition, plugging: false, victims, estimated_cost: 0.0 })
            }
            CleaningPolicy::CostAge => self.plan(partition, false),
            CleaningPolicy::HolePlugging => self.plan(partition, true).or_else(|| self.plan(partition, false)),
            CleaningPolicy::Adaptive => self.adaptive_plan(),
        };
        let plan = plan.expect("some sealed segment has a hole to clean");
        assert!(!plan.victims.is_empty(), "the cleaner found a victim");
        plan
    }

    /// Reads the victims, frees them, and writes their live pages back.
    fn run_pass(&mut self, plan: &PassPlan) {
        let mut live_pages = Vec::new();
        for &segment in &plan.victims {
            self.counts.segment_reads += 1;
            self.counts.cleaned_segments += 1;
            self.counts.cleaned_live_pages += u64::from(self.segment_live[segment as usize]);
            self.take_live_pages(segment, &mut live_pages);
        }
        if plan.plugging {
            self.counts.plugging_passes += 1;
            for page in live_pages {
                self.plug(page, plan.partition);
            }
        } else {
            self.counts.copying_passes += 1;
            if self.config.policy != CleaningPolicy::Greedy {
                live_pages.sort_by_key(|&page| (self.page_written_at[page as usize], page));
            }
            for page in live_pages {
                let partition = usize::from(self.page_hot[page as usize]);
                self.append(page, partition);
            }
        }
    }

    /// Empties a sealed `segment` into `pages` and frees it.
    fn take_live_pages(&mut self, segment: u32, pages: &mut Vec<u32>) {
        assert_eq!(self.segment_state[segment as usize], SegmentState::Sealed, "victims are sealed");
        self.bucket_remove(segment);
        let partition = usize::from(self.segment_partition[segment as usize]);
        let first = (segment * self.config.segment_pages) as usize;
        for slot in first..first + self.segment_pages {
            let page = std::mem::replace(&mut self.slot_page[slot], EMPTY);
            if page != EMPTY {
                pages.push(page);
            }
        }
        self.partition_holes[partition] -= u64::from(self.config.segment_pages - self.segment_live[segment as usize]);
        self.segment_live[segment as usize] = 0;
        self.segment_holes[segment as usize].clear();
        self.segment_state[segment as usize] = SegmentState::Free;
        self.free_segments.push(segment);
    }

    /// Writes `page` alone into a hole of the fullest sealed segment of `partition`.
    fn plug(&mut self, page: u32, partition: usize) {
        let first = partition * (self.segment_pages + 1);
        let bucket = (first..first + self.segment_pages)
            .rev()
            .find(|&index| !self.buckets[index].is_empty())
            .expect("the plan counted enough holes");
        let segment = *self.buckets[bucket].last().expect("a non-empty bucket");
        self.bucket_remove(segment);
        let index = self.segment_holes[segment as usize].pop().expect("a segment below full has a hole");
        self.place(page, segment, index);
        self.partition_holes[partition] -= 1;
        self.bucket_insert(segment);
        self.counts.plug_page_writes += 1;
    }

    /// Checks the structure's invariants (for tests); panics on a violation.
    pub fn check_invariants(&self) {
        let n = self.config.segment_pages;
        for (page, &slot) in self.page_slot.iter().enumerate() {
            assert_eq!(self.slot_page[slot as usize], page as u32, "page {page} is where it says");
        }
        let mut holes = [0u64; 2];
        for segment in 0..self.config.segment_count {
            let first = (segment * n) as usize;
            let live = self.slot_page[first..first + n as usize].iter().filter(|&&page| page != EMPTY).count();
            assert_eq!(live as u32, self.segment_live[segment as usize], "segment {segment}'s live count");
            match self.segment_state[segment as usize] {
                SegmentState::Free => assert_eq!(live, 0, "a free segment is empty"),
                SegmentState::Sealed => {
                    let bucket = &self.buckets[self.bucket_index(segment)];
                    assert_eq!(bucket[self.bucket_position[segment as usize] as usize], segment, "in its bucket");
                    assert_eq!(self.segment_holes[segment as usize].len() as u32, n - live as u32, "its holes");
                    holes[usize::from(self.segment_partition[segment as usize])] += u64::from(n) - live as u64;
                }
                SegmentState::Open => {}
            }
        }
        assert_eq!(holes, self.partition_holes, "holes per partition");
        let sealed = self.segment_state.iter().filter(|&&state| state == SegmentState::Sealed).count();
        assert_eq!(self.buckets.iter().map(Vec::len).sum::<usize>(), sealed, "every sealed segment in one bucket");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn small(policy: CleaningPolicy, separation: Separation) -> SimulatorConfig {
        SimulatorConfig {
            segment_pages: 16,
            segment_count: 64,
            live_pages: 700,
            policy,
            free_segments_low: 4,
            pass_pages: 48,
            segment_efficiency: 10.0,
            separation,
        }
    }

    #[test]
    fn every_policy_keeps_the_invariants() {
        let separations = [Separation::None, Separation::WriteFrequency { interval_writes: 500, hot_writes: 2 }];
        for policy in CleaningPolicy::ALL {
            for separation in separations {
                let mut simulator = SegmentSimulator::new(small(policy, separation));
                let mut rng = ChaCha8Rng::seed_from_u64(5);
                for step in 0..20_000 {
                    let page = if rng.gen_bool(0.9) { rng.gen_range(0..70) } else { rng.gen_range(70..700) };
                    simulator.write(page);
                    if step % 997 == 0 {
                        simulator.check_invariants();
                    }
                }
                simulator.check_invariants();
                let report = simulator.report();
                assert!(report.counts.cleaned_segments > 0, "{policy:?} cleaned");
                assert!(report.write_cost >= 1.0, "{policy:?}: W' {}", report.write_cost);
            }
        }
    }

    #[test]
    fn writing_without_cleaning_costs_one_segment_per_segment() {
        let mut config = small(CleaningPolicy::Greedy, Separation::None);
        config.live_pages = 16 * 10;
        let mut simulator = SegmentSimulator::new(config);
        for page in 0..16 * 40 {
            simulator.write(page % 160);
        }
        let report = simulator.report();
        assert_eq!(report.counts.segment_reads, 0, "nothing cleaned yet");
        assert_eq!(report.counts.segment_writes, 40);
        assert!((report.write_cost - 1.0).abs() < 1e-12);
    }

    #[test]
    fn sequential_overwrites_clean_empty_segments_for_free() {
        // Rewriting the data in order empties whole segments: u_c = 0, W' = 2
        // (one read of an empty segment per segment of new data).
        let mut simulator = SegmentSimulator::new(small(CleaningPolicy::Greedy, Separation::None));
        let mut pages = (0..).map(|index: u64| index % 700);
        let report = simulator.run(&mut pages, 7000, 7000);
        assert_eq!(report.counts.cleaned_live_pages, 0);
        // Up to a segment read or written at either edge of the window.
        assert!((report.write_cost - 2.0).abs() < 2.0 * 16.0 / 7000.0, "{}", report.write_cost);
    }

    #[test]
    fn hole_plugging_costs_eq_5() {
        let mut simulator = SegmentSimulator::new(small(CleaningPolicy::HolePlugging, Separation::None));
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let mut pages = std::iter::from_fn(|| Some(rng.gen_range(0..700)));
        let report = simulator.run(&mut pages, 20_000, 50_000);
        assert!(report.counts.plugging_passes > 0 && report.counts.copying_passes == 0);
        let counts = report.counts;
        // Each user page needs a slot of a freed segment; each freed segment
        // costs one read and its live pages' plugs.
        let expected = 2.0 + report.cleaning_utilization * 10.0;
        assert!((report.write_cost - expected).abs() / expected < 0.05, "{} vs {expected}", report.write_cost);
        assert_eq!(counts.plug_page_writes, counts.cleaned_live_pages);
    }
}
