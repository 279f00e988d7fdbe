//! Seed 000: Schindler, Shete and Smith, "Improving throughput for small disk
//! requests with proximal I/O" (FAST 2011): its experiments and the figures
//! they are compared with.
//!
//! - [`disk`]: `proximal-disk`, the disk-level results (Section 2, Figures 1–2,
//!   the issue order, Appendix A), built on [`placement`] (where a strand's
//!   requests go), [`strands`] (strands on a simulated drive),
//!   [`closed_loop`] (the OP that prices them) and [`birthday`] (the
//!   analytical model of missed revolutions).
//! - [`layout`]: what the three layout experiments share (their flags and
//!   settings, the report's opening and definitions), on the laboratory's
//!   [`rig`](crate::rig).
//! - [`table2`]: `proximal-table2` (Table 2: destage batches from 1–10 %
//!   staging areas).
//! - [`table3`]: `proximal-table3` (Table 3: serial reads after random
//!   writes, proximal and write-anywhere).
//! - [`srarw`]: `proximal-srarw` (Sections 5.3–5.4: proximal against in-place
//!   and write-anywhere, cost per IOPS).
//! - [`snapshots`]: `proximal-snapshots` (Sections 1 and 6: what snapshots
//!   taken during the aging cost each layout per update, and how fast the
//!   live data and the oldest kept snapshot read afterwards).
//! - [`paper`]: the paper's figures, quoted beside ours.

pub mod birthday;
pub mod closed_loop;
pub mod disk;
pub mod layout;
pub mod placement;
pub mod snapshots;
pub mod srarw;
pub mod strands;
pub mod table2;
pub mod table3;

/// The paper's figures, quoted beside ours in the reports.
pub mod paper {
    /// Section 2: one OP, a random 4 KiB read at queue depth 1, ms.
    pub const OP_MS: f64 = 5.6;
    /// Figure 1: per-request cost of a proximal strand of 8, OP.
    pub const PROXIMAL_8_OP: f64 = 0.39;
    /// Figure 1: per-request cost of a semi-sequential strand of 8, OP.
    pub const SEMI_SEQUENTIAL_8_OP: f64 = 0.23;
    /// Figure 2: per-request time at queue depth 8 against 1, percent lower.
    pub const QUEUE_DEPTH_REDUCTION_PERCENT: f64 = 32.0;
    /// Appendix A: probability of no extra revolution for a strand of 6.
    pub const NO_EXTRA_REVOLUTION_D6: f64 = 0.02;
    /// Appendix A: the likeliest number of extra revolutions for a strand of 8.
    pub const MOST_LIKELY_EXTRA_REVOLUTIONS_D8: usize = 2;
    /// Table 2, staging area 1 % of capacity.
    pub const UPDATES_PER_BATCH_1: f64 = 47.5;
    /// Table 2, 1 %: I/O amplification.
    pub const IO_AMPLIFICATION_1: f64 = 6.2;
    /// Table 2, 1 %: disk I/Os per revolution.
    pub const IOS_PER_REVOLUTION_1: f64 = 5.3;
    /// Table 2, 10 %.
    pub const UPDATES_PER_BATCH_10: f64 = 369.7;
    /// Table 2, 10 %: I/O amplification.
    pub const IO_AMPLIFICATION_10: f64 = 4.5;
    /// Table 2, 10 %: disk I/Os per revolution.
    pub const IOS_PER_REVOLUTION_10: f64 = 8.6;
    /// Table 3: blocks per request.
    pub const READ_BLOCKS_PER_REQUEST: f64 = 819.2;
    /// Table 3: runs per request on the aged layout.
    pub const READ_RUNS_PER_REQUEST: f64 = 47.5;
    /// Table 3: I/Os per disk per request on the aged layout.
    pub const READ_IOS_PER_DISK: f64 = 20.7;
    /// Table 3: response time on the aged layout, ms.
    pub const AGED_RESPONSE_MS: f64 = 9.5;
    /// Table 3: response time on the fresh layout, ms.
    pub const FRESH_RESPONSE_MS: f64 = 9.2;
    /// Table 3: MB/s per disk, aged.
    pub const AGED_MB_S_PER_DISK: f64 = 86.2;
    /// Table 3: MB/s per disk, fresh.
    pub const FRESH_MB_S_PER_DISK: f64 = 89.0;
    /// Section 5.3: write-anywhere degrades to as little as this fraction of fresh.
    pub const WRITE_ANYWHERE_AGED_TO_FRESH_MIN: f64 = 0.03;
    /// Section 5.4: random IOPS per disk with a 1 % staging area.
    pub const IOPS_PER_DISK: f64 = 333.0;
    /// Section 5.4: dollars per IOPS with a 1 % staging area.
    pub const DOLLARS_PER_IOPS: f64 = 0.48;
    /// Section 5.4: price of one disk, dollars.
    pub const DISK_DOLLARS: f64 = 130.0;
    /// Section 5.4: price of flash, dollars per GB.
    pub const FLASH_DOLLARS_PER_GB: f64 = 3.13;
    /// Section 1: disk I/Os per random update of a frame array with RAID-5 and
    /// a non-volatile write cache.
    pub const FRAME_ARRAY_IOS_PER_UPDATE: f64 = 4.0;
    /// Section 1: the same with copy-on-write snapshots ("this number doubles").
    pub const FRAME_ARRAY_SNAPSHOT_IOS_PER_UPDATE: f64 = 8.0;
    /// Section 1: "about one disk I/O at the back end" per random update for
    /// proximal I/O with RAID and copy-on-write.
    pub const PROXIMAL_SNAPSHOT_IOS_PER_UPDATE: f64 = 1.0;
}
