//! Seed 004: Panagiotakis, Flouris and Bilas, many-stream sequential prefetch
//! (ICDCS 2009, the talk's slides): a disk serving many concurrent
//! sequential streams, with and without a host scheduler that prefetches per
//! stream.
//!
//! - [`streams`]: `S` closed-loop sequential readers on one simulated drive,
//!   straight to the drive or through the engine's
//!   [`Prefetcher`](proxima_engine::prefetch::Prefetcher).
//! - [`many_streams`]: `many-streams`, the sweep over streams per disk,
//!   read-ahead sizes and disks, and the drive-cache cliff.
//! - [`paper`]: the talk's figures, quoted beside ours.

pub mod many_streams;
pub mod streams;

/// The talk's figures (the slides' graphs are lost; what their text says).
pub mod paper {
    /// One stream on one SATA disk under Linux, MB/s.
    pub const ONE_STREAM_MB_S: f64 = 60.0;
    /// 256 streams on one SATA disk under Linux: the low end, MB/s.
    pub const MANY_STREAMS_MB_S_LOW: f64 = 10.0;
    /// 256 streams on one SATA disk under Linux: the high end, MB/s.
    pub const MANY_STREAMS_MB_S_HIGH: f64 = 15.0;
    /// "Up to 4× higher throughput with 100 streams/disk".
    pub const PREFETCH_GAIN_AT_100: f64 = 4.0;
    /// Streams per disk of that claim.
    pub const GAIN_STREAMS_PER_DISK: u32 = 100;
    /// The read-ahead whose memory is quoted, MiB.
    pub const READAHEAD_MIB: u64 = 8;
    /// The memory that read-ahead needs for 100 streams, MB.
    pub const MEMORY_MB_AT_8_MIB: f64 = 800.0;
}
