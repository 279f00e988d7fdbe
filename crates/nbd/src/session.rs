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
//! Pipelining: a small pool of worker threads takes turns reading requests (one
//! reads and validates the next request while the others execute theirs) and each
//! writes its reply as soon as it is ready, so replies may leave out of order (every reply carries its request's cookie, and
//! each reply is written whole under one lock, so replies never interleave). With
//! `worker_count == 0` requests execute inline, in order: how the fuzz target and
//! property tests drive a session from a byte buffer.

use std::io::{self, Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use thiserror::Error;
use tracing::{debug, error, warn};

use crate::backend::{Backend, Export, ExportInfo, StatusExtent, ZeroOptions};
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
    /// Worker threads per connection, which take turns reading requests and
    /// execute them concurrently: the most requests in flight per connection. 0
    /// executes requests inline, one at a time, in order.
    pub worker_count: usize,
    /// Names the connection in logs and errors (e.g. the peer address).
    pub connection_label: String,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self { worker_count: 8, connection_label: "connection".to_owned() }
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

    /// Runs the whole session: handshake, then transmission until the client
    /// disconnects or breaks the protocol.
    pub fn run<R: Read + Send, W: Write + Send>(
        &self,
        mut reader: R,
        mut writer: W,
    ) -> Result<SessionEnd, SessionError> {
        let outcome = self.handshake(&mut reader, &mut writer);
        let result = match outcome {
            Ok(HandshakeOutcome::Ended(end)) => Ok(end),
            Ok(HandshakeOutcome::Attached(attachment)) => self.transmit(&mut reader, writer, attachment),
            Err(error) => Err(error),
        };
        match &result {
            Ok(end) => debug!(connection = %self.label(), ?end, "session ended"),
            Err(error) => warn!(connection = %self.label(), "hard disconnect: {error}"),
        }
        result
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

    fn transmit<R: Read + Send, W: Write + Send>(
        &self,
        reader: &mut R,
        writer: W,
        attachment: Attachment<B::Export>,
    ) -> Result<SessionEnd, SessionError> {
        let info = attachment.export.info();
        debug!(connection = %self.label(), export = %info.name, structured = attachment.structured_replies, "attached");
        let limits = RequestLimits {
            size_bytes: info.size_bytes,
            read_only: info.read_only,
            structured_replies: attachment.structured_replies,
            block_status: attachment.block_status,
        };
        let replies = ReplyWriter {
            writer: Mutex::new(writer),
            structured: attachment.structured_replies,
            connection: self.label(),
        };
        let export = &attachment.export;
        if self.config.worker_count == 0 {
            let mut scratch = Scratch::default();
            loop {
                match self.read_request(reader, &limits, &replies, &mut scratch)? {
                    NextRequest::Execute(work) => {
                        execute_guarded(export, work, &replies, &mut scratch).map_err(|error| self.io_error(error))?
                    }
                    NextRequest::Answered => {}
                    NextRequest::End(end) => return Ok(end),
                }
            }
        }
        // Workers take turns reading: the one holding the reader reads a single
        // request, releases the reader and executes the request, so the next
        // request is read while this one executes, with no hand-off between
        // threads. The first worker to see the end of the session records it and
        // stops the others; requests already read are still answered.
        let reader = Mutex::new(reader);
        let stopping = AtomicBool::new(false);
        let outcome: Mutex<Option<Result<SessionEnd, SessionError>>> = Mutex::new(None);
        let finish = |result: Result<SessionEnd, SessionError>| {
            stopping.store(true, Ordering::SeqCst);
            outcome.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(result);
        };
        std::thread::scope(|scope| {
            for _ in 0..self.config.worker_count {
                scope.spawn(|| {
                    let mut scratch = Scratch::default();
                    loop {
                        let work = {
                            let mut reader = reader.lock().unwrap_or_else(PoisonError::into_inner);
                            if stopping.load(Ordering::SeqCst) {
                                break;
                            }
                            // The end of the session is recorded before the reader is
                            // released, so a worker reading after a hard disconnect
                            // cannot record a clean end of stream in its place.
                            match self.read_request(&mut **reader, &limits, &replies, &mut scratch) {
                                Ok(NextRequest::Execute(work)) => work,
                                Ok(NextRequest::Answered) => continue,
                                Ok(NextRequest::End(end)) => {
                                    finish(Ok(end));
                                    break;
                                }
                                Err(error) => {
                                    finish(Err(error));
                                    break;
                                }
                            }
                        };
                        if let Err(error) = execute_guarded(export, work, &replies, &mut scratch) {
                            finish(Err(self.io_error(error)));
                        }
                    }
                });
            }
        });
        outcome.into_inner().unwrap_or_else(PoisonError::into_inner).unwrap_or(Ok(SessionEnd::ClosedByClient))
    }

    /// Reads one request: returns it if valid, answers it here if invalid, or says
    /// the session is over (end of stream, `NBD_CMD_DISC`, or a hard disconnect).
    fn read_request<R: Read, W: Write>(
        &self,
        reader: &mut R,
        limits: &RequestLimits,
        replies: &ReplyWriter<'_, W>,
        scratch: &mut Scratch,
    ) -> Result<NextRequest, SessionError> {
        let mut header_bytes = [0u8; REQUEST_HEADER_LENGTH_BYTES];
        if let FrameRead::EndOfStream = self.read_frame(reader, &mut header_bytes, "request header")? {
            return Ok(NextRequest::End(SessionEnd::ClosedByClient));
        }
        let header = RequestHeader::decode(&header_bytes).map_err(|error| self.protocol_error(error.to_string()))?;
        match validate_request(&header, limits) {
            Verdict::Execute(command) => {
                if command == Command::Write {
                    let payload = Scratch::sized(&mut scratch.payload, header.length_bytes as usize);
                    self.read_body(reader, payload, "write payload")?;
                }
                Ok(NextRequest::Execute(Work { header, command }))
            }
            Verdict::Reject(rejection) => {
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
                replies
                    .send_error(header.cookie, rejection.errno, &rejection.reason)
                    .map_err(|error| self.io_error(error))?;
                Ok(NextRequest::Answered)
            }
            Verdict::HardDisconnect(reason) => Err(self.protocol_error(reason)),
            Verdict::Disconnect => Ok(NextRequest::End(SessionEnd::Disconnected)),
        }
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

/// What reading the next request gave.
enum NextRequest {
    /// A valid request to execute.
    Execute(Work),
    /// An invalid request, already answered.
    Answered,
    /// The session is over.
    End(SessionEnd),
}

/// A validated request ready to execute (a write's payload is in the
/// worker's [`Scratch`]).
struct Work {
    header: RequestHeader,
    command: Command,
}

/// Scratch buffers a worker keeps above this size are released after the
/// request (a rare 32 MiB write need not pin 32 MiB per worker).
const RETAINED_SCRATCH_BYTES: usize = 4 << 20;

/// A worker's buffers, reused from request to request, so that a write's
/// payload and a read's reply are neither allocated nor zeroed per request
/// (zeroed only where a buffer grows; the export or the transport overwrites
/// every byte used).
#[derive(Debug, Default)]
struct Scratch {
    payload: Vec<u8>,
    reply: Vec<u8>,
}

impl Scratch {
    /// The first `length` bytes of `buffer`, grown if needed; their old
    /// contents are to be overwritten.
    fn sized(buffer: &mut Vec<u8>, length: usize) -> &mut [u8] {
        if buffer.len() < length {
            buffer.resize(length, 0);
        }
        &mut buffer[..length]
    }

    fn release_if_large(&mut self) {
        for buffer in [&mut self.payload, &mut self.reply] {
            if buffer.capacity() > RETAINED_SCRATCH_BYTES {
                *buffer = Vec::new();
            }
        }
    }
}

/// Writes whole replies to the transport, one at a time.
struct ReplyWriter<'a, W> {
    writer: Mutex<W>,
    structured: bool,
    connection: &'a str,
}

impl<W: Write> ReplyWriter<'_, W> {
    fn send(&self, bytes: &[u8]) -> io::Result<()> {
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        writer.write_all(bytes)?;
        writer.flush()
    }

    fn send_ok(&self, cookie: u64) -> io::Result<()> {
        // A simple reply is allowed for any successful reply without payload.
        self.send(&encode_simple_reply(cookie, 0))
    }

    fn send_error(&self, cookie: u64, errno: Errno, message: &str) -> io::Result<()> {
        if self.structured {
            let chunk = StructuredChunk {
                flags: REPLY_FLAG_DONE,
                cookie,
                payload: ChunkPayload::Error { error: errno.code(), message: message.to_owned() },
            };
            self.send(&chunk.encode())
        } else {
            self.send(&encode_simple_reply(cookie, errno.code()))
        }
    }

    fn send_chunk(&self, chunk: StructuredChunk) -> io::Result<()> {
        self.send(&chunk.encode())
    }
}

/// Executes a request, turning a panic of the export (a bug) into an `EIO` reply
/// so that one bad request cannot take the connection's other requests with it.
fn execute_guarded<E: Export, W: Write>(
    export: &E,
    work: Work,
    replies: &ReplyWriter<'_, W>,
    scratch: &mut Scratch,
) -> io::Result<()> {
    let cookie = work.header.cookie;
    let outcome = catch_unwind(AssertUnwindSafe(|| execute(export, work, replies, scratch)));
    scratch.release_if_large();
    match outcome {
        Ok(result) => result,
        Err(_) => {
            error!(connection = %replies.connection, cookie, "export panicked while executing a request");
            replies.send_error(cookie, Errno::Io, "internal error")
        }
    }
}

fn execute<E: Export, W: Write>(
    export: &E,
    work: Work,
    replies: &ReplyWriter<'_, W>,
    scratch: &mut Scratch,
) -> io::Result<()> {
    let header = work.header;
    let (offset, length) = (header.offset_bytes, u64::from(header.length_bytes));
    let fua = header.flags & COMMAND_FLAG_FUA != 0;
    let result = match work.command {
        Command::Read => return execute_read(export, &header, replies, &mut scratch.reply),
        Command::BlockStatus => return execute_block_status(export, &header, replies),
        Command::Write => export.write(offset, &scratch.payload[..length as usize], fua),
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
        Ok(()) => replies.send_ok(header.cookie),
        Err(error) => {
            warn!(connection = %replies.connection, cookie = header.cookie, "{} failed: {error}", work.command.name());
            replies.send_error(header.cookie, error.errno(), &error.to_string())
        }
    }
}

fn execute_read<E: Export, W: Write>(
    export: &E,
    header: &RequestHeader,
    replies: &ReplyWriter<'_, W>,
    reply_buffer: &mut Vec<u8>,
) -> io::Result<()> {
    let length = header.length_bytes as usize;
    if length == 0 {
        // An OFFSET_DATA chunk must carry at least one byte.
        if replies.structured {
            return replies.send_chunk(StructuredChunk {
                flags: REPLY_FLAG_DONE,
                cookie: header.cookie,
                payload: ChunkPayload::None,
            });
        }
        return replies.send_ok(header.cookie);
    }
    // The reply header goes in front of the data in one buffer, so the data is
    // read once and sent with a single write.
    let prefix_length = if replies.structured { 28 } else { SIMPLE_REPLY_HEADER_LENGTH_BYTES };
    let buffer = Scratch::sized(reply_buffer, prefix_length + length);
    match export.read(header.offset_bytes, &mut buffer[prefix_length..]) {
        Ok(()) => {
            if replies.structured {
                let prefix =
                    encode_offset_data_prefix(header.cookie, REPLY_FLAG_DONE, header.offset_bytes, header.length_bytes);
                buffer[..prefix_length].copy_from_slice(&prefix);
            } else {
                buffer[..prefix_length].copy_from_slice(&encode_simple_reply(header.cookie, 0));
            }
            replies.send(buffer)
        }
        Err(error) => {
            warn!(connection = %replies.connection, cookie = header.cookie, "NBD_CMD_READ failed: {error}");
            replies.send_error(header.cookie, error.errno(), &error.to_string())
        }
    }
}

fn execute_block_status<E: Export, W: Write>(
    export: &E,
    header: &RequestHeader,
    replies: &ReplyWriter<'_, W>,
) -> io::Result<()> {
    let length = u64::from(header.length_bytes);
    match export.block_status(header.offset_bytes, length) {
        Ok(extents) => {
            let request_one = header.flags & COMMAND_FLAG_REQ_ONE != 0;
            let descriptors = status_descriptors(&extents, header.length_bytes, request_one);
            replies.send_chunk(StructuredChunk {
                flags: REPLY_FLAG_DONE,
                cookie: header.cookie,
                payload: ChunkPayload::BlockStatus { context_id: BASE_ALLOCATION_CONTEXT_ID, descriptors },
            })
        }
        Err(error) => {
            warn!(connection = %replies.connection, cookie = header.cookie, "NBD_CMD_BLOCK_STATUS failed: {error}");
            replies.send_error(header.cookie, error.errno(), &error.to_string())
        }
    }
}

/// Turns an export's status runs into reply descriptors: clipped to the request,
/// at most one with `REQ_ONE`, at most [`BLOCK_STATUS_DESCRIPTORS_MAX`], merged
/// when neighbours share flags, and never empty (an export that reports nothing
/// gets the always-safe status 0 for the whole range).
pub fn status_descriptors(
    extents: &[StatusExtent],
    length_bytes: u32,
    request_one: bool,
) -> Vec<BlockStatusDescriptor> {
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
            Some(_) if request_one || count == BLOCK_STATUS_DESCRIPTORS_MAX => break,
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
