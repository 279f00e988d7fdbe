//! One NBD connection, generic over its transport (`Read` + `Write`) and the
//! [`Backend`]: the fixed newstyle handshake, option haggling, then the
//! transmission phase with pipelined requests.
//!
//! This module drives the connection; the wire format it speaks (encoding and
//! decoding, no I/O) is [`crate::protocol`]. Each phase has its own file:
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | [`Session`], its configuration, how it ends ([`SessionEnd`], [`SessionError`]), [`Session::run`] and [`Session::run_pipelined`], reading whole frames |
//! | `negotiation.rs` | the handshake phase: greeting, option haggling, attaching an export (codec: [`crate::protocol::handshake`]) |
//! | `requests.rs` | the transmission phase's reading side: reading requests, inline or pipelined dispatch, rejecting invalid ones (codec: [`crate::protocol::transmission`]) |
//! | `validate.rs` | pure: [`validate_request`], [`Verdict`], [`RequestLimits`], [`reservation_bytes`] |
//! | `reply.rs` | executing a valid request on the export and encoding its reply |
//! | `pipeline.rs` | [`Pipeline`], [`ReplyThread`], and the connection state its reading thread, reply thread and workers share |
//!
//! Bad input is handled at this edge, once: every request is validated before an
//! export sees it ([`validate_request`]); a request the protocol lets the server
//! refuse gets an error reply, and only framing the server cannot recover from
//! (bad magic, truncated frames, unknown client flags, an unknown export after
//! `NBD_OPT_EXPORT_NAME`, a write payload beyond the advertised maximum) ends the
//! connection with a hard disconnect. Each such event is logged once, here.
//!
//! Two ways to run the transmission phase:
//! - pipelined ([`Session::run_pipelined`], what the server does): the
//!   connection's thread reads and validates requests and hands each to the
//!   server's shared worker pool; a second thread of the connection sends the
//!   replies as they complete, so replies may leave out of order (every reply
//!   carries its request's cookie and is sent whole, so replies never
//!   interleave). Each request first reserves its payload or reply memory from
//!   the connection's and the server's budgets ([`crate::budget`]): when they
//!   are spent, the connection's requests are not read until replies drain.
//! - inline ([`Session::run`]): requests execute one at a time, in order, on
//!   the calling thread; how the fuzz target and property tests drive a
//!   session from a byte buffer.

mod negotiation;
mod pipeline;
mod reply;
mod requests;
mod validate;

use std::io::{self, Read, Write};

use thiserror::Error;
use tracing::{debug, warn};

use crate::backend::Backend;
use crate::protocol::handshake::BlockSizeConstraints;

pub use negotiation::transmission_flags;
pub use pipeline::{Pipeline, ReplyThread};
pub use reply::status_descriptors;
pub use validate::{reservation_bytes, validate_request, Rejection, RequestLimits, Verdict, REQUEST_OVERHEAD_BYTES};

/// Minimum block size advertised: offsets and lengths must be multiples of it.
pub const MINIMUM_BLOCK_BYTES: u32 = 512;
/// Preferred block size advertised.
pub const PREFERRED_BLOCK_BYTES: u32 = 4096;
/// Largest read or write payload accepted (the protocol's 32 MiB interoperable limit).
pub const MAXIMUM_PAYLOAD_BYTES: u32 = 1 << 25;
/// Largest option data accepted during the handshake; longer options are treated
/// as a denial of service and end the connection.
pub const OPTION_DATA_MAX_BYTES: u32 = 1 << 16;
/// Most block status descriptors in one reply chunk, as the protocol recommends.
pub const BLOCK_STATUS_DESCRIPTORS_MAX: usize = 1 << 20;
/// The one metadata context served.
pub const BASE_ALLOCATION: &str = "base:allocation";
/// The id of `base:allocation` after `NBD_OPT_SET_META_CONTEXT`.
pub const BASE_ALLOCATION_CONTEXT_ID: u32 = 1;

/// The block size constraints every export advertises.
pub const BLOCK_SIZE_CONSTRAINTS: BlockSizeConstraints = BlockSizeConstraints {
    minimum_bytes: MINIMUM_BLOCK_BYTES,
    preferred_bytes: PREFERRED_BLOCK_BYTES,
    maximum_payload_bytes: MAXIMUM_PAYLOAD_BYTES,
};

/// How a session runs.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Names the connection in logs and errors (e.g. the peer address).
    pub connection_label: String,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self { connection_label: "connection".to_owned() }
    }
}

/// How a session ended when it ended cleanly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEnd {
    /// The client sent `NBD_OPT_ABORT` during the handshake.
    Aborted,
    /// The client sent `NBD_CMD_DISC`; every earlier request was answered.
    Disconnected,
    /// The client closed the connection between two messages.
    ClosedByClient,
    /// The server stopped reading requests to shut down; the requests read
    /// before were answered.
    ServerStopped,
}

/// Why a session ended with a hard disconnect.
#[derive(Debug, Error)]
pub enum SessionError {
    /// Reading or writing the transport failed.
    #[error("{connection}: transport error: {source}")]
    Io {
        /// The connection.
        connection: String,
        /// The error.
        source: io::Error,
    },
    /// The client closed the connection in the middle of a message.
    #[error("{connection}: connection closed in the middle of {frame}")]
    Truncated {
        /// The connection.
        connection: String,
        /// The message being read.
        frame: &'static str,
    },
    /// The client broke a rule the server cannot answer with an error reply.
    #[error("{connection}: protocol violation: {reason}")]
    Protocol {
        /// The connection.
        connection: String,
        /// What the client did.
        reason: String,
    },
}

/// Serves one connection on a backend.
#[derive(Debug)]
pub struct Session<'b, B: Backend> {
    backend: &'b B,
    config: SessionConfig,
}

/// What the handshake agreed for the transmission phase.
struct Attachment<E> {
    export: E,
    structured_replies: bool,
    block_status: bool,
}

/// How the handshake phase ended: an export attached, or the session over.
enum HandshakeOutcome<E> {
    Attached(Attachment<E>),
    Ended(SessionEnd),
}

/// Outcome of reading one fixed-size frame.
enum FrameRead {
    Complete,
    EndOfStream,
}

impl<'b, B: Backend> Session<'b, B> {
    /// A session serving `backend`.
    pub fn new(backend: &'b B, config: SessionConfig) -> Self {
        Self { backend, config }
    }

    /// Runs the whole session on the calling thread: handshake, then
    /// transmission with requests executed inline, one at a time, until the
    /// client disconnects or breaks the protocol.
    pub fn run<R: Read, W: Write>(&self, mut reader: R, mut writer: W) -> Result<SessionEnd, SessionError> {
        let result = match self.handshake(&mut reader, &mut writer) {
            Ok(HandshakeOutcome::Ended(end)) => Ok(end),
            Ok(HandshakeOutcome::Attached(attachment)) => self.transmit_inline(&mut reader, &mut writer, attachment),
            Err(error) => Err(error),
        };
        self.log_end(&result);
        result
    }

    /// Runs the whole session with pipelined transmission: requests execute on
    /// `pipeline`'s worker pool and `reply_thread`, started with the
    /// connection, sends their replies (see the module documentation).
    pub fn run_pipelined<R: Read, W: Write + Send + 'static>(
        &self,
        mut reader: R,
        mut writer: W,
        pipeline: &Pipeline,
        reply_thread: ReplyThread,
    ) -> Result<SessionEnd, SessionError>
    where
        B::Export: 'static,
    {
        let result = match self.handshake(&mut reader, &mut writer) {
            Ok(HandshakeOutcome::Ended(end)) => Ok(end),
            Ok(HandshakeOutcome::Attached(attachment)) => {
                self.transmit_pipelined(&mut reader, writer, attachment, pipeline, reply_thread)
            }
            Err(error) => Err(error),
        };
        self.log_end(&result);
        result
    }

    fn log_end(&self, result: &Result<SessionEnd, SessionError>) {
        match result {
            Ok(end) => debug!(connection = %self.label(), ?end, "session ended"),
            Err(error) => warn!(connection = %self.label(), "hard disconnect: {error}"),
        }
    }

    fn label(&self) -> &str {
        &self.config.connection_label
    }

    fn io_error(&self, source: io::Error) -> SessionError {
        SessionError::Io { connection: self.label().to_owned(), source }
    }

    fn protocol_error(&self, reason: String) -> SessionError {
        SessionError::Protocol { connection: self.label().to_owned(), reason }
    }

    /// Reads exactly `buffer.len()` bytes, telling a clean end of stream (no byte
    /// of the frame read) from a truncated frame.
    fn read_frame(
        &self,
        reader: &mut impl Read,
        buffer: &mut [u8],
        frame: &'static str,
    ) -> Result<FrameRead, SessionError> {
        let mut filled = 0;
        while filled < buffer.len() {
            match reader.read(&mut buffer[filled..]) {
                Ok(0) if filled == 0 => return Ok(FrameRead::EndOfStream),
                Ok(0) => return Err(SessionError::Truncated { connection: self.label().to_owned(), frame }),
                Ok(count) => filled += count,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(self.io_error(error)),
            }
        }
        Ok(FrameRead::Complete)
    }

    fn read_body(&self, reader: &mut impl Read, buffer: &mut [u8], frame: &'static str) -> Result<(), SessionError> {
        match self.read_frame(reader, buffer, frame)? {
            FrameRead::Complete => Ok(()),
            FrameRead::EndOfStream if buffer.is_empty() => Ok(()),
            FrameRead::EndOfStream => Err(SessionError::Truncated { connection: self.label().to_owned(), frame }),
        }
    }
}
