//! The NBD protocol: pure encode/decode, a session generic over its transport, and
//! the server.
//!
//! - [`protocol`]: the wire format, no I/O; every decoder is total.
//! - [`backend`]: the [`Backend`] and [`Export`] traits the server serves, with
//!   typed errors mapped to NBD error values.
//! - [`MemoryBackend`] (sparse, in memory) and [`FileBackend`] (raw files).
//! - [`session`]: one connection: handshake, option haggling, validation at the
//!   edge, pipelined transmission.
//! - [`server`]: listeners, two threads per connection and a worker pool
//!   shared by all, limits on connections and memory, a bounded
//!   clean shutdown.
//! - [`budget`], [`buffers`], [`pool`]: the server's memory budgets, its
//!   recycled request buffers, and its worker pool.
//! - [`fuzzing`]: drives a session from a byte string (fuzz target, property tests).

#![warn(clippy::cast_possible_truncation)]

pub mod backend;
pub mod budget;
pub mod buffers;
pub mod file;
pub mod fuzzing;
pub mod memory;
pub mod pool;
pub mod protocol;
pub mod server;
pub mod session;

pub use backend::{AllocationState, Backend, BackendError, Export, ExportInfo, StatusExtent, ZeroOptions};
pub use file::{FileBackend, FileExport};
pub use memory::{MemoryBackend, MemoryExport};
pub use server::{Server, ServerConfig, ServerError, ServerSummary, ShutdownHandle, DEFAULT_TCP_ADDRESS};
pub use session::{Pipeline, Session, SessionConfig, SessionEnd, SessionError};
