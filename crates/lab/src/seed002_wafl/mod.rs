//! Seed 002's WAFL free-space paper (FAST'17), its delete-logging half: what
//! random frees cost an aged volume, and what the engine's delete logs
//! (TLog, BFLog; `proxima_engine::DeleteLogMode`, docs/wafl.md) give back.
//!
//! - [`rig`]: the volume both experiments run on — the layout experiments'
//!   simulated RAID-4 for data, its simulated flash for metadata, the
//!   write-anywhere layout, filled with 16 MiB extents and aged by random
//!   8 KiB overwrites.
//! - [`delete`]: `reproduce wafl-delete`, the rate an otherwise idle volume
//!   reclaims the blocks of deleted extents, unaged and aged, per delete log.
//! - [`overwrite`]: `reproduce wafl-overwrite`, random 8 KiB overwrites of an
//!   aged volume: client IOPS, metadata blocks per user block, CP durations.

pub mod delete;
pub mod overwrite;
pub mod rig;
