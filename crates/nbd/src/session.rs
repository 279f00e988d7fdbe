//! One NBD connection, generic over its transport (`Read` + `Write`) and the
//! [`Backend`]: the fixed newstyle handshake, option haggling, then the
//! transmission phase with pipelined requests.
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

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use thiserror::Error;
use tracing::{debug, error, warn};

use crate::backend::{Backend, Export, ExportInfo, StatusExtent, ZeroOptions};
use crate::budget::{ConnectionBudget, Reservation};
use crate::buffers::BufferRecycler;
use crate::pool::WorkerPool;
use crate::protocol::handshake::*;
use crate::protocol::transmission::*;
use crate::protocol::{DecodeError, Errno};

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

/// State of option haggling.
#[derive(Debug, Default)]
struct Negotiation {
    client_no_zeroes: bool,
    structured_replies: bool,
    /// Canonical name of the export `base:allocation` was selected for, if any.
    meta_context_export: Option<String>,
}

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

    // ----- handshake -----

    fn handshake<R: Read, W: Write>(
        &self,
        reader: &mut R,
        writer: &mut W,
    ) -> Result<HandshakeOutcome<B::Export>, SessionError> {
        let greeting = encode_greeting(HANDSHAKE_FLAG_FIXED_NEWSTYLE | HANDSHAKE_FLAG_NO_ZEROES);
        writer.write_all(&greeting).and_then(|()| writer.flush()).map_err(|error| self.io_error(error))?;
        let mut client_flags_bytes = [0u8; 4];
        if let FrameRead::EndOfStream = self.read_frame(reader, &mut client_flags_bytes, "client flags")? {
            return Ok(HandshakeOutcome::Ended(SessionEnd::ClosedByClient));
        }
        let client_flags = u32::from_be_bytes(client_flags_bytes);
        let known_flags = CLIENT_FLAG_FIXED_NEWSTYLE | CLIENT_FLAG_NO_ZEROES;
        if client_flags & !known_flags != 0 {
            return Err(self.protocol_error(format!("unknown client flags {client_flags:#x}")));
        }
        let mut negotiation =
            Negotiation { client_no_zeroes: client_flags & CLIENT_FLAG_NO_ZEROES != 0, ..Negotiation::default() };
        loop {
            let mut header_bytes = [0u8; OPTION_HEADER_LENGTH_BYTES];
            if let FrameRead::EndOfStream = self.read_frame(reader, &mut header_bytes, "option header")? {
                return Ok(HandshakeOutcome::Ended(SessionEnd::ClosedByClient));
            }
            let header = OptionHeader::decode(&header_bytes).map_err(|error| self.protocol_error(error.to_string()))?;
            if header.data_length_bytes > OPTION_DATA_MAX_BYTES {
                return Err(self.protocol_error(format!(
                    "option {} with {} bytes of data (limit {OPTION_DATA_MAX_BYTES})",
                    header.option, header.data_length_bytes
                )));
            }
            let mut data = vec![0u8; header.data_length_bytes as usize];
            self.read_body(reader, &mut data, "option data")?;
            let decoded = ClientOption::decode(header.option, &data);
            if let Some(outcome) = self.handle_option(header.option, decoded, &mut negotiation, writer)? {
                writer.flush().map_err(|error| self.io_error(error))?;
                return Ok(outcome);
            }
            writer.flush().map_err(|error| self.io_error(error))?;
        }
    }

    fn send_option_reply(
        &self,
        writer: &mut impl Write,
        option: u32,
        body: OptionReplyBody,
    ) -> Result<(), SessionError> {
        writer.write_all(&OptionReply { option, body }.encode()).map_err(|error| self.io_error(error))
    }

    fn send_option_error(
        &self,
        writer: &mut impl Write,
        option: u32,
        reply_type: u32,
        message: String,
    ) -> Result<(), SessionError> {
        self.send_option_reply(writer, option, OptionReplyBody::Error { reply_type, message })
    }

    /// Answers one option; returns the outcome when option haggling is over.
    fn handle_option(
        &self,
        option_code: u32,
        decoded: Result<ClientOption, DecodeError>,
        negotiation: &mut Negotiation,
        writer: &mut impl Write,
    ) -> Result<Option<HandshakeOutcome<B::Export>>, SessionError> {
        let option = match decoded {
            Ok(option) => option,
            Err(error) if option_code == OPT_EXPORT_NAME => {
                return Err(self.protocol_error(format!("NBD_OPT_EXPORT_NAME: {error}")));
            }
            Err(error) => {
                warn!(connection = %self.label(), option = option_code, "invalid option: {error}");
                self.send_option_error(writer, option_code, REP_ERR_INVALID, error.to_string())?;
                return Ok(None);
            }
        };
        match option {
            ClientOption::ExportName(name) => self.attach_by_export_name(&name, negotiation, writer).map(Some),
            ClientOption::Abort => {
                // The client may already have gone; the acknowledgement is a courtesy.
                let _ = self.send_option_reply(writer, option_code, OptionReplyBody::Ack);
                Ok(Some(HandshakeOutcome::Ended(SessionEnd::Aborted)))
            }
            ClientOption::List => {
                for info in self.backend.list_exports() {
                    self.send_option_reply(writer, option_code, OptionReplyBody::Server { export_name: info.name })?;
                }
                self.send_option_reply(writer, option_code, OptionReplyBody::Ack).map(|()| None)
            }
            ClientOption::Info(request) => self.answer_info(option_code, &request, negotiation, writer, false),
            ClientOption::Go(request) => self.answer_info(option_code, &request, negotiation, writer, true),
            ClientOption::StructuredReply => {
                if negotiation.structured_replies {
                    let message = "structured replies are already negotiated".to_owned();
                    return self.send_option_error(writer, option_code, REP_ERR_INVALID, message).map(|()| None);
                }
                negotiation.structured_replies = true;
                self.send_option_reply(writer, option_code, OptionReplyBody::Ack).map(|()| None)
            }
            ClientOption::ListMetaContext(request) => {
                self.answer_meta_context(option_code, &request, negotiation, writer, false).map(|()| None)
            }
            ClientOption::SetMetaContext(request) => {
                self.answer_meta_context(option_code, &request, negotiation, writer, true).map(|()| None)
            }
            ClientOption::StartTls | ClientOption::Unknown(_) => {
                debug!(connection = %self.label(), option = option_code, "unsupported option");
                let message = format!("option {option_code} is not supported by this server");
                self.send_option_error(writer, option_code, REP_ERR_UNSUP, message).map(|()| None)
            }
        }
    }

    fn attach_by_export_name(
        &self,
        name: &str,
        negotiation: &Negotiation,
        writer: &mut impl Write,
    ) -> Result<HandshakeOutcome<B::Export>, SessionError> {
        let Some(export) = self.backend.open_export(name) else {
            // NBD_OPT_EXPORT_NAME has no error reply: the protocol prescribes a
            // hard disconnect.
            return Err(self.protocol_error(format!("NBD_OPT_EXPORT_NAME of unknown export {name:?}")));
        };
        let info = export.info();
        let flags = transmission_flags(info, negotiation.structured_replies);
        let reply = encode_export_name_reply(info.size_bytes, flags, negotiation.client_no_zeroes);
        writer.write_all(&reply).map_err(|error| self.io_error(error))?;
        Ok(HandshakeOutcome::Attached(self.attachment(export, negotiation)))
    }

    fn attachment(&self, export: B::Export, negotiation: &Negotiation) -> Attachment<B::Export> {
        let block_status = negotiation.structured_replies
            && negotiation.meta_context_export.as_deref() == Some(export.info().name.as_str());
        Attachment { export, structured_replies: negotiation.structured_replies, block_status }
    }

    fn answer_info(
        &self,
        option_code: u32,
        request: &InfoRequest,
        negotiation: &Negotiation,
        writer: &mut impl Write,
        go: bool,
    ) -> Result<Option<HandshakeOutcome<B::Export>>, SessionError> {
        let Some(export) = self.backend.open_export(&request.export_name) else {
            let message = format!("no export named {:?}", request.export_name);
            debug!(connection = %self.label(), "{message}");
            return self.send_option_error(writer, option_code, REP_ERR_UNKNOWN, message).map(|()| None);
        };
        let info = export.info();
        let mut items = vec![
            InfoItem::Export {
                size_bytes: info.size_bytes,
                transmission_flags: transmission_flags(info, negotiation.structured_replies),
            },
            // Sent whether requested or not: the server enforces a 512-byte minimum,
            // which is not the protocol's default.
            InfoItem::BlockSize(BLOCK_SIZE_CONSTRAINTS),
        ];
        if request.info_items.contains(&INFO_NAME) {
            items.push(InfoItem::Name(info.name.clone()));
        }
        if let (true, Some(description)) = (request.info_items.contains(&INFO_DESCRIPTION), &info.description) {
            items.push(InfoItem::Description(description.clone()));
        }
        for item in items {
            self.send_option_reply(writer, option_code, OptionReplyBody::Info(item))?;
        }
        self.send_option_reply(writer, option_code, OptionReplyBody::Ack)?;
        if go {
            Ok(Some(HandshakeOutcome::Attached(self.attachment(export, negotiation))))
        } else {
            Ok(None)
        }
    }

    fn answer_meta_context(
        &self,
        option_code: u32,
        request: &MetaContextRequest,
        negotiation: &mut Negotiation,
        writer: &mut impl Write,
        select: bool,
    ) -> Result<(), SessionError> {
        if select {
            // Setting contexts replaces the previous selection even when it fails.
            negotiation.meta_context_export = None;
        }
        if !negotiation.structured_replies {
            let message = "metadata contexts need structured replies first".to_owned();
            return self.send_option_error(writer, option_code, REP_ERR_INVALID, message);
        }
        let Some(export) = self.backend.open_export(&request.export_name) else {
            let message = format!("no export named {:?}", request.export_name);
            return self.send_option_error(writer, option_code, REP_ERR_UNKNOWN, message);
        };
        let matches_base_allocation = if select {
            request.queries.iter().any(|query| query == BASE_ALLOCATION)
        } else {
            request.queries.is_empty()
                || request.queries.iter().any(|query| query == BASE_ALLOCATION || query == "base:")
        };
        if matches_base_allocation {
            let context_id = if select { BASE_ALLOCATION_CONTEXT_ID } else { 0 };
            let body = OptionReplyBody::MetaContext { context_id, name: BASE_ALLOCATION.to_owned() };
            self.send_option_reply(writer, option_code, body)?;
            if select {
                negotiation.meta_context_export = Some(export.info().name.clone());
            }
        }
        self.send_option_reply(writer, option_code, OptionReplyBody::Ack)
    }

    // ----- transmission -----

    /// What the validator needs to know of the attached export.
    fn limits(&self, attachment: &Attachment<B::Export>) -> RequestLimits {
        let info = attachment.export.info();
        debug!(connection = %self.label(), export = %info.name, structured = attachment.structured_replies, "attached");
        RequestLimits {
            size_bytes: info.size_bytes,
            read_only: info.read_only,
            structured_replies: attachment.structured_replies,
            block_status: attachment.block_status,
        }
    }

    /// Executes requests one at a time, in order, each reply written before the
    /// next request is read.
    fn transmit_inline<R: Read, W: Write>(
        &self,
        reader: &mut R,
        writer: &mut W,
        attachment: Attachment<B::Export>,
    ) -> Result<SessionEnd, SessionError> {
        let limits = self.limits(&attachment);
        let context = ExecutionContext {
            structured: attachment.structured_replies,
            connection: self.label(),
            buffers: &BufferRecycler::default(),
        };
        let mut send = |reply: ReplyBytes| -> Result<(), SessionError> {
            writer.write_all(reply.as_slice()).and_then(|()| writer.flush()).map_err(|error| self.io_error(error))
        };
        loop {
            let Some(header) = self.read_header(reader)? else { return Ok(SessionEnd::ClosedByClient) };
            match validate_request(&header, &limits) {
                Verdict::Execute(command) => {
                    let Some(payload) = self.read_payload(reader, &header, command, context.buffers)? else {
                        send(out_of_memory_reply(&header, context.structured))?;
                        continue;
                    };
                    send(execute_guarded(&attachment.export, Work { header, command, payload }, &context))?;
                }
                Verdict::Reject(rejection) => send(self.reject(reader, &header, &rejection, context.structured)?)?,
                Verdict::HardDisconnect(reason) => return Err(self.protocol_error(reason)),
                Verdict::Disconnect => return Ok(SessionEnd::Disconnected),
            }
        }
    }

    /// Reads requests and hands each to the worker pool while a reply thread of
    /// this connection sends the replies as they come, in completion order.
    /// Each request first reserves its memory from the connection's and the
    /// server's budgets: when they are spent, reading stops until replies
    /// drain. The first end of the session (end of stream, `NBD_CMD_DISC`, a
    /// hard disconnect, shutdown) stops the reading; requests already read are
    /// still answered, unless the client stops reading replies or shutdown
    /// cuts the connection.
    fn transmit_pipelined<R: Read, W: Write + Send + 'static>(
        &self,
        reader: &mut R,
        writer: W,
        attachment: Attachment<B::Export>,
        pipeline: &Pipeline,
        reply_thread: ReplyThread,
    ) -> Result<SessionEnd, SessionError>
    where
        B::Export: 'static,
    {
        let limits = self.limits(&attachment);
        let connection = Arc::new(Connection {
            export: attachment.export,
            structured: attachment.structured_replies,
            label: self.label().to_owned(),
            replies: Mutex::default(),
            reply_ready: Condvar::new(),
            budget: Arc::clone(&pipeline.budget),
            buffers: Arc::clone(&pipeline.buffers),
            server_stopping: Arc::clone(&pipeline.server_stopping),
        });
        let (outcome_sender, outcome) = mpsc::channel();
        let replying = Arc::clone(&connection);
        let replies_thread = reply_thread.run(Box::new(move || {
            // The receiver waits for this result; it cannot be gone.
            let _ = outcome_sender.send(replying.send_replies(writer));
        }));
        let read_outcome = self.read_requests(reader, &limits, &connection, pipeline);
        connection.finish_reading();
        let write_outcome =
            outcome.recv().unwrap_or_else(|_| Err(io::Error::other("the reply thread ended without a result")));
        let _ = replies_thread.join();
        match (read_outcome, write_outcome) {
            (Err(error), _) => Err(error),
            (Ok(_), Err(error)) => Err(self.io_error(error)),
            (Ok(end), Ok(())) => Ok(end),
        }
    }

    /// The reading half of [`Session::transmit_pipelined`].
    fn read_requests<R: Read>(
        &self,
        reader: &mut R,
        limits: &RequestLimits,
        connection: &Arc<Connection<B::Export>>,
        pipeline: &Pipeline,
    ) -> Result<SessionEnd, SessionError>
    where
        B::Export: 'static,
    {
        let stopped = || {
            if pipeline.server_stopping.load(Ordering::SeqCst) {
                SessionEnd::ServerStopped
            } else {
                SessionEnd::ClosedByClient
            }
        };
        loop {
            if pipeline.server_stopping.load(Ordering::SeqCst) || connection.is_broken() {
                return Ok(stopped());
            }
            let Some(header) = self.read_header(reader)? else { return Ok(stopped()) };
            match validate_request(&header, limits) {
                Verdict::Execute(command) => {
                    // Waits here, not reading further requests, while the budgets are spent.
                    let Some(reservation) = pipeline.budget.reserve(reservation_bytes(&header, command)) else {
                        return Ok(stopped());
                    };
                    let Some(payload) = self.read_payload(reader, &header, command, &pipeline.buffers)? else {
                        connection.begin_request();
                        connection.queue_reply(out_of_memory_reply(&header, connection.structured), reservation);
                        continue;
                    };
                    connection.begin_request();
                    let task_connection = Arc::clone(connection);
                    let work = Work { header, command, payload };
                    pipeline
                        .pool
                        .submit(pipeline.connection_id, Box::new(move || task_connection.execute(work, reservation)));
                }
                Verdict::Reject(rejection) => {
                    let reply = self.reject(reader, &header, &rejection, connection.structured)?;
                    let Some(reservation) = pipeline.budget.reserve(REQUEST_OVERHEAD_BYTES) else {
                        return Ok(stopped());
                    };
                    connection.begin_request();
                    connection.queue_reply(reply, reservation);
                }
                Verdict::HardDisconnect(reason) => return Err(self.protocol_error(reason)),
                Verdict::Disconnect => return Ok(SessionEnd::Disconnected),
            }
        }
    }

    /// Reads a request header; `None` at a clean end of stream.
    fn read_header(&self, reader: &mut impl Read) -> Result<Option<RequestHeader>, SessionError> {
        let mut header_bytes = [0u8; REQUEST_HEADER_LENGTH_BYTES];
        if let FrameRead::EndOfStream = self.read_frame(reader, &mut header_bytes, "request header")? {
            return Ok(None);
        }
        RequestHeader::decode(&header_bytes).map(Some).map_err(|error| self.protocol_error(error.to_string()))
    }

    /// Reads a valid write's payload into a buffer (an empty one for other
    /// commands). `None` when no buffer could be allocated: the payload is
    /// then read and dropped, and the request is answered with `ENOMEM`.
    fn read_payload(
        &self,
        reader: &mut impl Read,
        header: &RequestHeader,
        command: Command,
        buffers: &BufferRecycler,
    ) -> Result<Option<Vec<u8>>, SessionError> {
        if command != Command::Write {
            return Ok(Some(Vec::new()));
        }
        match buffers.take(header.length_bytes as usize) {
            Ok(mut payload) => {
                self.read_body(reader, &mut payload, "write payload")?;
                Ok(Some(payload))
            }
            Err(error) => {
                warn!(connection = %self.label(), cookie = header.cookie, "no memory for a write payload: {error}");
                self.drain_payload(reader, u64::from(header.length_bytes))?;
                Ok(None)
            }
        }
    }

    /// Logs a rejected request, reads and drops a rejected write's payload, and
    /// returns the error reply.
    fn reject(
        &self,
        reader: &mut impl Read,
        header: &RequestHeader,
        rejection: &Rejection,
        structured: bool,
    ) -> Result<ReplyBytes, SessionError> {
        if header.command() == Some(Command::Write) {
            self.drain_payload(reader, u64::from(header.length_bytes))?;
        }
        warn!(
            connection = %self.label(),
            cookie = header.cookie,
            command = header.command_code,
            offset = header.offset_bytes,
            length = header.length_bytes,
            "rejected request ({:?}): {}",
            rejection.errno,
            rejection.reason
        );
        Ok(error_reply(header.cookie, rejection.errno, &rejection.reason, structured))
    }

    fn drain_payload(&self, reader: &mut impl Read, length_bytes: u64) -> Result<(), SessionError> {
        let copied = io::copy(&mut reader.take(length_bytes), &mut io::sink()).map_err(|error| self.io_error(error))?;
        if copied < length_bytes {
            return Err(SessionError::Truncated { connection: self.label().to_owned(), frame: "write payload" });
        }
        Ok(())
    }
}

/// The transmission flags of an export.
pub fn transmission_flags(info: &ExportInfo, structured_replies: bool) -> u16 {
    let mut flags = TRANSMISSION_FLAG_HAS_FLAGS | TRANSMISSION_FLAG_SEND_FLUSH | TRANSMISSION_FLAG_SEND_FUA;
    if info.read_only {
        flags |= TRANSMISSION_FLAG_READ_ONLY;
    } else {
        flags |= TRANSMISSION_FLAG_SEND_TRIM | TRANSMISSION_FLAG_SEND_WRITE_ZEROES | TRANSMISSION_FLAG_SEND_FAST_ZERO;
    }
    if structured_replies {
        flags |= TRANSMISSION_FLAG_SEND_DF;
    }
    if info.can_multi_conn {
        flags |= TRANSMISSION_FLAG_CAN_MULTI_CONN;
    }
    if info.rotational {
        flags |= TRANSMISSION_FLAG_ROTATIONAL;
    }
    flags
}

/// What the validator needs to know about the attached export.
#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    /// Export size in bytes.
    pub size_bytes: u64,
    /// Whether the export is read-only.
    pub read_only: bool,
    /// Whether structured replies were negotiated.
    pub structured_replies: bool,
    /// Whether `base:allocation` was selected for this export.
    pub block_status: bool,
}

/// The validator's decision on one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Valid: execute it.
    Execute(Command),
    /// Invalid: answer with this error (a write's payload is read and dropped).
    Reject(Rejection),
    /// `NBD_CMD_DISC`: finish the requests in flight and close.
    Disconnect,
    /// The connection cannot continue (e.g. a write payload beyond the maximum,
    /// which the server will not read).
    HardDisconnect(String),
}

/// An error reply to an invalid request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The NBD error value.
    pub errno: Errno,
    /// Why, for the log and the structured error message.
    pub reason: String,
}

fn reject(errno: Errno, reason: String) -> Verdict {
    Verdict::Reject(Rejection { errno, reason })
}

/// Validates a request against the protocol and the attached export: the one place
/// bad requests are caught, so that exports only see valid ones.
pub fn validate_request(header: &RequestHeader, limits: &RequestLimits) -> Verdict {
    let Some(command) = header.command() else {
        return reject(Errno::Inval, format!("unknown command {}", header.command_code));
    };
    let name = command.name();
    let length = header.length_bytes;
    if command == Command::Write && length > MAXIMUM_PAYLOAD_BYTES {
        return Verdict::HardDisconnect(format!("{name} payload of {length} bytes exceeds {MAXIMUM_PAYLOAD_BYTES}"));
    }
    if command == Command::Disconnect {
        return Verdict::Disconnect;
    }
    let allowed_flags = COMMAND_FLAG_FUA
        | match command {
            Command::Read if limits.structured_replies => COMMAND_FLAG_DF,
            Command::WriteZeroes => COMMAND_FLAG_NO_HOLE | COMMAND_FLAG_FAST_ZERO,
            Command::BlockStatus => COMMAND_FLAG_REQ_ONE,
            _ => 0,
        };
    if header.flags & !allowed_flags != 0 {
        return reject(Errno::Inval, format!("{name} with invalid flags {:#x}", header.flags & !allowed_flags));
    }
    match command {
        Command::Flush if header.offset_bytes != 0 || length != 0 => {
            return reject(Errno::Inval, format!("{name} with nonzero offset or length"));
        }
        Command::Flush => return Verdict::Execute(command),
        Command::BlockStatus if !limits.block_status => {
            return reject(Errno::Inval, format!("{name} without the {BASE_ALLOCATION} context negotiated"));
        }
        Command::BlockStatus if length == 0 => return reject(Errno::Inval, format!("{name} of length 0")),
        Command::Read if length > MAXIMUM_PAYLOAD_BYTES => {
            let errno = if limits.structured_replies { Errno::Overflow } else { Errno::Inval };
            return reject(errno, format!("{name} of {length} bytes exceeds {MAXIMUM_PAYLOAD_BYTES}"));
        }
        _ => {}
    }
    let minimum = u64::from(MINIMUM_BLOCK_BYTES);
    if !header.offset_bytes.is_multiple_of(minimum) || !u64::from(length).is_multiple_of(minimum) {
        return reject(
            Errno::Inval,
            format!("{name} at offset {} length {length} not aligned to {minimum} bytes", header.offset_bytes),
        );
    }
    let writes = matches!(command, Command::Write | Command::Trim | Command::WriteZeroes);
    if writes && limits.read_only {
        return reject(Errno::Perm, format!("{name} on a read-only export"));
    }
    let end = header.offset_bytes.checked_add(u64::from(length));
    if end.is_none_or(|end| end > limits.size_bytes) {
        let errno = if matches!(command, Command::Write | Command::WriteZeroes) { Errno::NoSpc } else { Errno::Inval };
        return reject(
            errno,
            format!(
                "{name} at offset {} length {length} beyond export size {}",
                header.offset_bytes, limits.size_bytes
            ),
        );
    }
    Verdict::Execute(command)
}

/// Memory reserved for every request besides its data: the request and reply
/// headers and an error message (at most 4096 bytes, as the protocol allows).
pub const REQUEST_OVERHEAD_BYTES: u64 = 8 << 10;

/// Longest error message sent in a structured error reply (the protocol's limit).
const ERROR_MESSAGE_BYTES_MAX: usize = 4096;

/// Bytes of the budgets a request holds from before its payload is read until
/// its reply is sent: its payload or its reply data (a read's data, a block
/// status reply's descriptors), plus [`REQUEST_OVERHEAD_BYTES`].
pub fn reservation_bytes(header: &RequestHeader, command: Command) -> u64 {
    let data_bytes = match command {
        Command::Read | Command::Write => u64::from(header.length_bytes),
        Command::BlockStatus => {
            BLOCK_STATUS_DESCRIPTOR_BYTES * block_status_descriptors_max(header.length_bytes) as u64
        }
        _ => 0,
    };
    REQUEST_OVERHEAD_BYTES + data_bytes
}

/// What the server lends a connection for pipelined transmission.
#[derive(Debug, Clone)]
pub struct Pipeline {
    /// The workers that execute requests, shared by every connection.
    pub pool: Arc<WorkerPool>,
    /// This connection's id in the pool (for taking turns).
    pub connection_id: u64,
    /// This connection's memory budget (drawn from the server's).
    pub budget: Arc<ConnectionBudget>,
    /// Buffers for payloads and replies, shared by every connection.
    pub buffers: Arc<BufferRecycler>,
    /// Set when the server stops: no further request is read, and requests
    /// not yet started are answered with `ESHUTDOWN`.
    pub server_stopping: Arc<AtomicBool>,
}

/// A connection's reply thread. The server starts it with the connection, so
/// that a connection is accepted only with every thread it needs (a client is
/// refused before its handshake rather than cut off after it); the session
/// gives it its work once the client attaches. Dropped unused, it ends.
#[derive(Debug)]
pub struct ReplyThread {
    work: Option<mpsc::SyncSender<ReplyWork>>,
    thread: Option<JoinHandle<()>>,
}

type ReplyWork = Box<dyn FnOnce() + Send + 'static>;

impl ReplyThread {
    /// Starts the thread, named `name`, waiting for its work.
    pub fn start(name: String) -> io::Result<Self> {
        let (work, receiver) = mpsc::sync_channel::<ReplyWork>(1);
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            if let Ok(work) = receiver.recv() {
                work();
            }
        })?;
        Ok(Self { work: Some(work), thread: Some(thread) })
    }

    /// Gives the thread its work; the thread to join once the work is done.
    fn run(mut self, work: ReplyWork) -> JoinHandle<()> {
        let sender = self.work.take().expect("a reply thread is given work once");
        // The thread waits for this message; it cannot have ended.
        let _ = sender.send(work);
        self.thread.take().expect("a reply thread is given work once")
    }
}

impl Drop for ReplyThread {
    fn drop(&mut self) {
        drop(self.work.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A validated request ready to execute, with a write's payload.
struct Work {
    header: RequestHeader,
    command: Command,
    payload: Vec<u8>,
}

/// An encoded reply: `buffer[..length]`.
#[derive(Debug)]
struct ReplyBytes {
    buffer: Vec<u8>,
    length: usize,
}

impl ReplyBytes {
    fn whole(buffer: Vec<u8>) -> Self {
        let length = buffer.len();
        Self { buffer, length }
    }

    fn as_slice(&self) -> &[u8] {
        &self.buffer[..self.length]
    }
}

/// A reply waiting for the reply thread, with the memory its request reserved.
#[derive(Debug)]
struct QueuedReply {
    reply: ReplyBytes,
    _reservation: Reservation,
}

/// What the reading and the reply threads of a connection know of each other.
#[derive(Debug, Default)]
struct ReplyQueue {
    ready: VecDeque<QueuedReply>,
    /// Requests read and not yet answered (executing, or their reply queued).
    unanswered: usize,
    reading_done: bool,
    /// Sending failed: the client is gone or shutdown cut the connection.
    broken: bool,
}

/// A connection in the transmission phase, shared by its reading thread, its
/// reply thread and the workers executing its requests.
#[derive(Debug)]
struct Connection<E> {
    export: E,
    structured: bool,
    label: String,
    replies: Mutex<ReplyQueue>,
    reply_ready: Condvar,
    budget: Arc<ConnectionBudget>,
    buffers: Arc<BufferRecycler>,
    server_stopping: Arc<AtomicBool>,
}

/// Replies smaller than this are gathered and sent with one system call.
const REPLY_GATHERING_BYTES: usize = 64 << 10;

impl<E: Export> Connection<E> {
    fn lock(&self) -> MutexGuard<'_, ReplyQueue> {
        self.replies.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn is_broken(&self) -> bool {
        self.lock().broken
    }

    fn begin_request(&self) {
        self.lock().unanswered += 1;
    }

    fn finish_reading(&self) {
        self.lock().reading_done = true;
        self.reply_ready.notify_all();
    }

    /// Runs on a worker: executes the request, unless the server is stopping,
    /// and queues its reply.
    fn execute(&self, work: Work, reservation: Reservation) {
        let reply = if self.server_stopping.load(Ordering::SeqCst) {
            error_reply(work.header.cookie, Errno::Shutdown, "the server is shutting down", self.structured)
        } else {
            let context =
                ExecutionContext { structured: self.structured, connection: &self.label, buffers: &self.buffers };
            execute_guarded(&self.export, work, &context)
        };
        self.queue_reply(reply, reservation);
    }

    /// Queues the reply of a request counted by [`Connection::begin_request`]
    /// (or drops it, and its reservation, once sending has failed). Every
    /// counted request gets exactly one call: the reply thread waits for them.
    fn queue_reply(&self, reply: ReplyBytes, reservation: Reservation) {
        let mut queue = self.lock();
        if queue.broken {
            queue.unanswered -= 1;
            drop(queue);
            self.buffers.give_back(reply.buffer);
            return;
        }
        queue.ready.push_back(QueuedReply { reply, _reservation: reservation });
        drop(queue);
        self.reply_ready.notify_one();
    }

    /// The reply thread: sends replies as they are queued, gathering the ready
    /// ones into as few writes as possible, and releases each one's memory once
    /// sent. Ends when reading has ended and every request is answered, or at
    /// the first failed write (then every queued and later reply is dropped).
    fn send_replies<W: Write>(&self, writer: W) -> io::Result<()> {
        let mut writer = io::BufWriter::with_capacity(REPLY_GATHERING_BYTES, writer);
        loop {
            let batch = {
                let mut queue = self.lock();
                while queue.ready.is_empty() && !(queue.reading_done && queue.unanswered == 0) {
                    queue = self.reply_ready.wait(queue).unwrap_or_else(PoisonError::into_inner);
                }
                if queue.ready.is_empty() {
                    return Ok(());
                }
                std::mem::take(&mut queue.ready)
            };
            let sent = batch
                .iter()
                .try_for_each(|queued| writer.write_all(queued.reply.as_slice()))
                .and_then(|()| writer.flush());
            let count = batch.len();
            for queued in batch {
                self.buffers.give_back(queued.reply.buffer);
            }
            let mut queue = self.lock();
            queue.unanswered -= count;
            if let Err(error) = sent {
                if matches!(error.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) {
                    warn!(
                        connection = %self.label,
                        "the client read none of its replies within the reply timeout: dropping them and the connection"
                    );
                }
                queue.broken = true;
                queue.unanswered -= queue.ready.len();
                let dropped = std::mem::take(&mut queue.ready);
                drop(queue);
                drop(dropped);
                // A reading thread waiting for memory must not wait for replies
                // that will never be sent.
                self.budget.cancel();
                return Err(error);
            }
        }
    }
}

/// What executing a request needs besides the export.
struct ExecutionContext<'a> {
    structured: bool,
    connection: &'a str,
    buffers: &'a BufferRecycler,
}

/// The error reply to a request.
fn error_reply(cookie: u64, errno: Errno, message: &str, structured: bool) -> ReplyBytes {
    if !structured {
        return ReplyBytes::whole(encode_simple_reply(cookie, errno.code()).to_vec());
    }
    let mut end = message.len().min(ERROR_MESSAGE_BYTES_MAX);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    let chunk = StructuredChunk {
        flags: REPLY_FLAG_DONE,
        cookie,
        payload: ChunkPayload::Error { error: errno.code(), message: message[..end].to_owned() },
    };
    ReplyBytes::whole(chunk.encode())
}

fn out_of_memory_reply(header: &RequestHeader, structured: bool) -> ReplyBytes {
    error_reply(header.cookie, Errno::NoMem, "the server could not allocate the request's buffer", structured)
}

fn success_reply(cookie: u64) -> ReplyBytes {
    // A simple reply is allowed for any successful reply without payload.
    ReplyBytes::whole(encode_simple_reply(cookie, 0).to_vec())
}

/// Executes a request, turning a panic of the export (a bug) into an `EIO` reply
/// so that one bad request cannot take the connection's other requests with it.
fn execute_guarded<E: Export>(export: &E, work: Work, context: &ExecutionContext<'_>) -> ReplyBytes {
    let cookie = work.header.cookie;
    match catch_unwind(AssertUnwindSafe(|| execute(export, work, context))) {
        Ok(reply) => reply,
        Err(_) => {
            error!(connection = %context.connection, cookie, "export panicked while executing a request");
            error_reply(cookie, Errno::Io, "internal error", context.structured)
        }
    }
}

fn execute<E: Export>(export: &E, work: Work, context: &ExecutionContext<'_>) -> ReplyBytes {
    let header = work.header;
    let (offset, length) = (header.offset_bytes, u64::from(header.length_bytes));
    let fua = header.flags & COMMAND_FLAG_FUA != 0;
    let result = match work.command {
        Command::Read => return execute_read(export, &header, context),
        Command::BlockStatus => return execute_block_status(export, &header, context),
        Command::Write => {
            let result = export.write(offset, &work.payload, fua);
            context.buffers.give_back(work.payload);
            result
        }
        Command::Flush => export.flush(),
        Command::Trim if length == 0 => Ok(()),
        Command::Trim => export.trim(offset, length, fua),
        Command::WriteZeroes if length == 0 => Ok(()),
        Command::WriteZeroes => {
            let options = ZeroOptions {
                no_hole: header.flags & COMMAND_FLAG_NO_HOLE != 0,
                fast_zero: header.flags & COMMAND_FLAG_FAST_ZERO != 0,
                fua,
            };
            export.write_zeroes(offset, length, options)
        }
        // A cache request is only a hint; this server keeps no cache to warm.
        Command::Cache => Ok(()),
        Command::Disconnect => unreachable!("the reader handles NBD_CMD_DISC"),
    };
    match result {
        Ok(()) => success_reply(header.cookie),
        Err(error) => {
            warn!(connection = %context.connection, cookie = header.cookie, "{} failed: {error}", work.command.name());
            error_reply(header.cookie, error.errno(), &error.to_string(), context.structured)
        }
    }
}

fn execute_read<E: Export>(export: &E, header: &RequestHeader, context: &ExecutionContext<'_>) -> ReplyBytes {
    let length = header.length_bytes as usize;
    if length == 0 {
        // An OFFSET_DATA chunk must carry at least one byte.
        if context.structured {
            let chunk = StructuredChunk { flags: REPLY_FLAG_DONE, cookie: header.cookie, payload: ChunkPayload::None };
            return ReplyBytes::whole(chunk.encode());
        }
        return success_reply(header.cookie);
    }
    // The reply header goes in front of the data in one buffer, so the data is
    // read once and sent with a single write.
    let prefix_length = if context.structured { 28 } else { SIMPLE_REPLY_HEADER_LENGTH_BYTES };
    let mut buffer = match context.buffers.take(prefix_length + length) {
        Ok(buffer) => buffer,
        Err(error) => {
            warn!(connection = %context.connection, cookie = header.cookie, "no memory for a read reply: {error}");
            return out_of_memory_reply(header, context.structured);
        }
    };
    match export.read(header.offset_bytes, &mut buffer[prefix_length..]) {
        Ok(()) => {
            if context.structured {
                let prefix =
                    encode_offset_data_prefix(header.cookie, REPLY_FLAG_DONE, header.offset_bytes, header.length_bytes);
                buffer[..prefix_length].copy_from_slice(&prefix);
            } else {
                buffer[..prefix_length].copy_from_slice(&encode_simple_reply(header.cookie, 0));
            }
            ReplyBytes::whole(buffer)
        }
        Err(error) => {
            context.buffers.give_back(buffer);
            warn!(connection = %context.connection, cookie = header.cookie, "NBD_CMD_READ failed: {error}");
            error_reply(header.cookie, error.errno(), &error.to_string(), context.structured)
        }
    }
}

fn execute_block_status<E: Export>(export: &E, header: &RequestHeader, context: &ExecutionContext<'_>) -> ReplyBytes {
    let length = u64::from(header.length_bytes);
    match export.block_status(header.offset_bytes, length) {
        Ok(extents) => {
            let request_one = header.flags & COMMAND_FLAG_REQ_ONE != 0;
            let descriptors = status_descriptors(&extents, header.length_bytes, request_one);
            let chunk = StructuredChunk {
                flags: REPLY_FLAG_DONE,
                cookie: header.cookie,
                payload: ChunkPayload::BlockStatus { context_id: BASE_ALLOCATION_CONTEXT_ID, descriptors },
            };
            ReplyBytes::whole(chunk.encode())
        }
        Err(error) => {
            warn!(connection = %context.connection, cookie = header.cookie, "NBD_CMD_BLOCK_STATUS failed: {error}");
            error_reply(header.cookie, error.errno(), &error.to_string(), context.structured)
        }
    }
}

/// Bytes of one block status descriptor on the wire.
const BLOCK_STATUS_DESCRIPTOR_BYTES: u64 = 8;

/// The most descriptors a block status reply of `length_bytes` carries: one per
/// minimum block at most, and never more than [`BLOCK_STATUS_DESCRIPTORS_MAX`].
fn block_status_descriptors_max(length_bytes: u32) -> usize {
    (length_bytes.div_ceil(MINIMUM_BLOCK_BYTES) as usize).clamp(1, BLOCK_STATUS_DESCRIPTORS_MAX)
}

/// Turns an export's status runs into reply descriptors: clipped to the request,
/// at most one with `REQ_ONE`, at most one per 512 bytes requested (so that the
/// reply fits the memory reserved for it) and [`BLOCK_STATUS_DESCRIPTORS_MAX`], merged
/// when neighbours share flags, and never empty (an export that reports nothing
/// gets the always-safe status 0 for the whole range).
pub fn status_descriptors(
    extents: &[StatusExtent],
    length_bytes: u32,
    request_one: bool,
) -> Vec<BlockStatusDescriptor> {
    let descriptors_max = block_status_descriptors_max(length_bytes);
    let mut descriptors: Vec<BlockStatusDescriptor> = Vec::new();
    let mut remaining = length_bytes;
    for extent in extents {
        if remaining == 0 {
            break;
        }
        let piece = u32::try_from(extent.length_bytes).unwrap_or(u32::MAX).min(remaining);
        if piece == 0 {
            continue;
        }
        let flags = extent.state.status_flags();
        let count = descriptors.len();
        match descriptors.last_mut() {
            Some(last) if last.flags == flags => last.length_bytes += piece,
            Some(_) if request_one || count == descriptors_max => break,
            _ => descriptors.push(BlockStatusDescriptor { length_bytes: piece, flags }),
        }
        remaining -= piece;
    }
    if descriptors.is_empty() {
        descriptors.push(BlockStatusDescriptor { length_bytes, flags: 0 });
    }
    descriptors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::AllocationState;

    const LIMITS: RequestLimits =
        RequestLimits { size_bytes: 1 << 20, read_only: false, structured_replies: true, block_status: true };

    fn request(command: Command, flags: u16, offset_bytes: u64, length_bytes: u32) -> RequestHeader {
        RequestHeader { flags, command_code: command.code(), cookie: 1, offset_bytes, length_bytes }
    }

    fn errno_of(verdict: Verdict) -> Errno {
        match verdict {
            Verdict::Reject(rejection) => rejection.errno,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn valid_requests_execute() {
        for command in [Command::Read, Command::Write, Command::Trim, Command::WriteZeroes, Command::BlockStatus] {
            assert_eq!(validate_request(&request(command, 0, 4096, 4096), &LIMITS), Verdict::Execute(command));
        }
        let zero_flags = COMMAND_FLAG_NO_HOLE | COMMAND_FLAG_FAST_ZERO | COMMAND_FLAG_FUA;
        let zeroes = request(Command::WriteZeroes, zero_flags, 0, 1 << 20);
        assert_eq!(validate_request(&zeroes, &LIMITS), Verdict::Execute(Command::WriteZeroes));
        assert_eq!(validate_request(&request(Command::Flush, 0, 0, 0), &LIMITS), Verdict::Execute(Command::Flush));
        assert_eq!(validate_request(&request(Command::Disconnect, 0, 0, 0), &LIMITS), Verdict::Disconnect);
    }

    #[test]
    fn out_of_range_requests_get_the_errno_the_protocol_names() {
        assert_eq!(errno_of(validate_request(&request(Command::Read, 0, 1 << 20, 512), &LIMITS)), Errno::Inval);
        assert_eq!(errno_of(validate_request(&request(Command::Trim, 0, 1 << 20, 512), &LIMITS)), Errno::Inval);
        assert_eq!(errno_of(validate_request(&request(Command::Write, 0, 1 << 20, 512), &LIMITS)), Errno::NoSpc);
        let zeroes = request(Command::WriteZeroes, 0, (1 << 20) - 512, 1024);
        assert_eq!(errno_of(validate_request(&zeroes, &LIMITS)), Errno::NoSpc);
        let wrapping = request(Command::Read, 0, u64::MAX - 511, 1024);
        assert_eq!(errno_of(validate_request(&wrapping, &LIMITS)), Errno::Inval);
    }

    #[test]
    fn misaligned_requests_are_einval() {
        assert_eq!(errno_of(validate_request(&request(Command::Read, 0, 100, 512), &LIMITS)), Errno::Inval);
        assert_eq!(errno_of(validate_request(&request(Command::Write, 0, 512, 100), &LIMITS)), Errno::Inval);
    }

    #[test]
    fn oversized_requests() {
        let big = MAXIMUM_PAYLOAD_BYTES + 512;
        let large = RequestLimits { size_bytes: 1 << 40, ..LIMITS };
        assert_eq!(errno_of(validate_request(&request(Command::Read, 0, 0, big), &large)), Errno::Overflow);
        let simple = RequestLimits { structured_replies: false, ..large };
        assert_eq!(errno_of(validate_request(&request(Command::Read, 0, 0, big), &simple)), Errno::Inval);
        assert!(matches!(validate_request(&request(Command::Write, 0, 0, big), &large), Verdict::HardDisconnect(_)));
        // Commands without payload may exceed the maximum payload.
        assert_eq!(validate_request(&request(Command::Trim, 0, 0, big), &large), Verdict::Execute(Command::Trim));
    }

    #[test]
    fn writes_to_read_only_exports_are_eperm() {
        let read_only = RequestLimits { read_only: true, ..LIMITS };
        for command in [Command::Write, Command::Trim, Command::WriteZeroes] {
            assert_eq!(errno_of(validate_request(&request(command, 0, 0, 512), &read_only)), Errno::Perm);
        }
        assert_eq!(validate_request(&request(Command::Read, 0, 0, 512), &read_only), Verdict::Execute(Command::Read));
    }

    #[test]
    fn unknown_commands_and_flags_are_einval() {
        let unknown = RequestHeader { flags: 0, command_code: 42, cookie: 1, offset_bytes: 0, length_bytes: 0 };
        assert_eq!(errno_of(validate_request(&unknown, &LIMITS)), Errno::Inval);
        assert_eq!(
            errno_of(validate_request(&request(Command::Write, COMMAND_FLAG_NO_HOLE, 0, 512), &LIMITS)),
            Errno::Inval
        );
        assert_eq!(errno_of(validate_request(&request(Command::Read, 1 << 9, 0, 512), &LIMITS)), Errno::Inval);
        let simple = RequestLimits { structured_replies: false, ..LIMITS };
        assert_eq!(errno_of(validate_request(&request(Command::Read, COMMAND_FLAG_DF, 0, 512), &simple)), Errno::Inval);
    }

    #[test]
    fn block_status_needs_a_context_and_flush_needs_zero_range() {
        let no_context = RequestLimits { block_status: false, ..LIMITS };
        assert_eq!(errno_of(validate_request(&request(Command::BlockStatus, 0, 0, 512), &no_context)), Errno::Inval);
        assert_eq!(errno_of(validate_request(&request(Command::BlockStatus, 0, 0, 0), &LIMITS)), Errno::Inval);
        assert_eq!(errno_of(validate_request(&request(Command::Flush, 0, 512, 0), &LIMITS)), Errno::Inval);
    }

    #[test]
    fn status_descriptors_clip_merge_and_honour_req_one() {
        let extents = [
            StatusExtent { length_bytes: 4096, state: AllocationState::Data },
            StatusExtent { length_bytes: 4096, state: AllocationState::Zero },
            StatusExtent { length_bytes: 1 << 40, state: AllocationState::Hole },
        ];
        let all = status_descriptors(&extents, 16384, false);
        assert_eq!(
            all,
            vec![
                BlockStatusDescriptor { length_bytes: 4096, flags: 0 },
                BlockStatusDescriptor { length_bytes: 4096, flags: STATE_ZERO },
                BlockStatusDescriptor { length_bytes: 8192, flags: STATE_HOLE | STATE_ZERO },
            ]
        );
        assert_eq!(
            status_descriptors(&extents, 2048, true),
            vec![BlockStatusDescriptor { length_bytes: 2048, flags: 0 }]
        );
        assert_eq!(status_descriptors(&[], 512, false), vec![BlockStatusDescriptor { length_bytes: 512, flags: 0 }]);
    }
}
