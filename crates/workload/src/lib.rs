//! Workloads: block traces, seeded synthetic generators, and trace replay.
//!
//! - [`request`]: one request of a workload ([`TraceRequest`]): when, where,
//!   what, and how long it took when recorded.
//! - [`trace`]: streaming readers for DiskSim ascii (milliseconds, and MQSim's
//!   nanosecond variant), DiskSim validate, SPC, MSR Cambridge, SNIA Systor'17,
//!   fio I/O logs v2/v3 and blkparse text, gzip read transparently, format
//!   detected from content; writers for generated traces and captures.
//! - [`synthetic`]: seeded generators of block addresses (uniform, hot/cold,
//!   Knuth's 80/20 family, Zipf, sequential and interleaved appenders,
//!   TPC-B-like), and open-loop arrival timing for writing traces.
//! - [`buffer_pool`]: a write-back LRU buffer pool of pages, between the
//!   database workloads and the disk.
//! - [`tpcb`]: TPC-B as uniformly random page updates through that pool
//!   (the HyLog paper's Table 3).
//! - [`tpcc`]: a TPC-C-like transaction mix of closed-loop users over a
//!   warehouse database's pages through an LRU buffer pool (the HyLog
//!   paper's setup).
//! - [`srarw`]: the proximal I/O paper's serial-read-after-random-write
//!   workload (fill, random updates, serial reads of whole extents).
//! - [`mixed`]: a mixed aging workload (fixed-size I/Os from threads taking
//!   turns, a share random, a share writes), as the reallocate-on-read talk
//!   ages its volume.
//! - [`application`]: a closed-loop application (threads that issue, wait and
//!   think) run directly on a simulated drive, captured as a trace.
//! - [`replay`]: replays a trace on the disk model in virtual time or against
//!   a live NBD export in wall time, timing-faithful, as fast as possible,
//!   load-scaled or dependency-preserving (hfplayer's method), with accuracy
//!   figures (IOPS, latency percentiles, queue depth, execution time,
//!   RFC 4737 reordering, error against recorded latencies).
//! - [`nbd_client`]: a small pipelined NBD client over `proxima-nbd`'s codec.

pub mod application;
pub mod buffer_pool;
pub mod mixed;
pub mod nbd_client;
pub mod replay;
pub mod request;
pub mod srarw;
pub mod synthetic;
pub mod tpcb;
pub mod tpcc;
pub mod trace;

pub use request::{Operation, TraceRequest};
pub use trace::{TraceError, TraceFormat, TraceReader};
