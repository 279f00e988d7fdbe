//! The transmission phase's reading side: reads each request, validates it
//! ([`super::validate`]) and either executes it inline or hands it to the
//! worker pool ([`super::pipeline`]); rejects invalid requests with an error
//! reply, reading and dropping a rejected write's payload so that framing is
//! kept.
//!
//! This file drives the phase; the requests' and replies' wire format is
//! [`crate::protocol::transmission`].

use std::io::{self, Read, Write};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Condvar, Mutex};

use tracing::{debug, warn};

use super::pipeline::{Connection, Pipeline, ReplyThread};
use super::reply::{error_reply, execute_guarded, out_of_memory_reply, ExecutionContext, ReplyBytes, Work};
use super::validate::{reservation_bytes, validate_request, Rejection, RequestLimits, Verdict, REQUEST_OVERHEAD_BYTES};
use super::{Attachment, FrameRead, Session, SessionEnd, SessionError};
use crate::backend::{Backend, Export};
use crate::buffers::{BufferRecycler, RequestBuffer};
use crate::protocol::transmission::*;

impl<'b, B: Backend> Session<'b, B> {
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
    pub(super) fn transmit_inline<R: Read, W: Write>(
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
    pub(super) fn transmit_pipelined<R: Read, W: Write + Send + 'static>(
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
    ) -> Result<Option<RequestBuffer>, SessionError> {
        if command != Command::Write {
            return Ok(Some(RequestBuffer::default()));
        }
        match buffers.take(header.length_bytes as usize, 0) {
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
