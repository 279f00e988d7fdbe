//! A live NBD export as a replay target, in wall time.
//!
//! One connection, pipelined: requests are written by the replay's thread (a
//! bundle in one write), replies read by a second thread that stamps each with
//! the time it arrived and passes it back over a channel; waiting for a
//! deadline is waiting on that channel. Times are nanoseconds since the target
//! was created. Writes carry a fixed pseudo-random payload; reads' data is
//! discarded. Trims and flushes are sent when the export advertises them, and
//! skipped otherwise.
//!
//! The cookie of each request carries a slot number in its high 32 bits and,
//! for reads, the length in its low 32 bits, so the reply reader knows how
//! many data bytes follow a successful read's header without sharing state.

use std::collections::HashMap;
use std::io::{self, BufWriter, Read, Write};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use proxima_nbd::protocol::handshake::{TRANSMISSION_FLAG_SEND_FLUSH, TRANSMISSION_FLAG_SEND_TRIM};
use proxima_nbd::protocol::transmission::Command;

use super::mapping::{TargetRequest, TargetShape};
use super::target::{Target, TargetCompletion};
use super::ReplayError;
use crate::nbd_client::{read_simple_reply, request_header, ExportDetails, NbdConnection, NbdUri};
use crate::request::Operation;

/// What the reply thread reports.
#[derive(Debug)]
enum ReplyEvent {
    /// A reply arrived.
    Reply { cookie: u64, error: u32, arrived: Instant },
    /// The connection failed or broke the protocol.
    Failed(String),
    /// The server closed the connection.
    Closed,
}

/// A live NBD export.
pub struct NbdTarget {
    writer: BufWriter<Box<dyn Write + Send>>,
    replies: Receiver<ReplyEvent>,
    reader_thread: Option<JoinHandle<()>>,
    start: Instant,
    export: ExportDetails,
    address: String,
    /// Caller ids of requests in flight, by cookie slot.
    in_flight: HashMap<u32, u64>,
    next_slot: u32,
    payload: Vec<u8>,
}

impl std::fmt::Debug for NbdTarget {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("NbdTarget")
            .field("export", &self.export)
            .field("address", &self.address)
            .field("in_flight", &self.in_flight.len())
            .finish_non_exhaustive()
    }
}

impl NbdTarget {
    /// Connects to `uri`.
    pub fn connect(uri: &NbdUri) -> Result<NbdTarget, ReplayError> {
        let connection = NbdConnection::connect(uri).map_err(|error| ReplayError::Target(error.to_string()))?;
        let NbdConnection { writer, reader, export, address } = connection;
        let (sender, replies) = mpsc::channel();
        let reader_thread = std::thread::Builder::new()
            .name("nbd-replies".into())
            .spawn(move || read_replies(reader, &sender))
            .map_err(|error| ReplayError::Target(format!("cannot start the reply thread: {error}")))?;
        Ok(NbdTarget {
            writer: BufWriter::with_capacity(1 << 20, writer),
            replies,
            reader_thread: Some(reader_thread),
            start: Instant::now(),
            export,
            address: address.to_string(),
            in_flight: HashMap::new(),
            next_slot: 0,
            payload: Vec::new(),
        })
    }

    /// The export as the handshake described it.
    pub fn export(&self) -> ExportDetails {
        self.export
    }

    fn io_error(&self, error: io::Error) -> ReplayError {
        ReplayError::Target(format!("NBD server {}: {error}", self.address))
    }

    /// Grows the write payload to at least `length` bytes of a fixed
    /// pseudo-random pattern (xorshift).
    fn grow_payload(&mut self, length: usize) {
        let mut state = 0x9E37_79B9_7F4A_7C15_u64.wrapping_add(self.payload.len() as u64);
        while self.payload.len() < length {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            self.payload.extend_from_slice(&state.to_le_bytes());
        }
    }

    fn write_request(&mut self, id: u64, request: &TargetRequest) -> Result<(), ReplayError> {
        let slot = self.next_slot;
        self.next_slot = self.next_slot.wrapping_add(1);
        assert!(self.in_flight.insert(slot, id).is_none(), "2^32 requests in flight");
        let length = u32::try_from(request.length_bytes).expect("the shape limits requests to the payload maximum");
        let (command, read_length) = match request.operation {
            Operation::Read => (Command::Read, length),
            Operation::Write => (Command::Write, 0),
            Operation::Trim => (Command::Trim, 0),
            Operation::Flush => (Command::Flush, 0),
        };
        let cookie = u64::from(slot) << 32 | u64::from(read_length);
        let header = request_header(command.code(), cookie, request.offset_bytes, length);
        self.writer.write_all(&header).map_err(|error| self.io_error(error))?;
        if command == Command::Write {
            self.grow_payload(length as usize);
            let written = self.writer.write_all(&self.payload[..length as usize]);
            written.map_err(|error| self.io_error(error))?;
        }
        Ok(())
    }

    fn handle(&mut self, event: ReplyEvent, completions: &mut Vec<TargetCompletion>) -> Result<(), ReplayError> {
        match event {
            ReplyEvent::Reply { cookie, error, arrived } => {
                let slot = (cookie >> 32) as u32;
                let id = self.in_flight.remove(&slot).ok_or_else(|| {
                    ReplayError::Target(format!("NBD server {}: a reply for unknown cookie {cookie:#x}", self.address))
                })?;
                completions.push(TargetCompletion {
                    id,
                    completion_ns: arrived.saturating_duration_since(self.start).as_nanos() as u64,
                    error: (error != 0).then(|| format!("NBD error {error}")),
                });
                Ok(())
            }
            ReplyEvent::Failed(message) => Err(ReplayError::Target(format!("NBD server {}: {message}", self.address))),
            ReplyEvent::Closed => Err(ReplayError::Target(format!(
                "NBD server {}: closed the connection with {} requests in flight",
                self.address,
                self.in_flight.len()
            ))),
        }
    }
}

/// The reply thread: reads replies until the connection ends.
fn read_replies(mut reader: Box<dyn Read + Send>, sender: &Sender<ReplyEvent>) {
    loop {
        let event = match read_simple_reply(&mut reader) {
            Ok(None) => ReplyEvent::Closed,
            Ok(Some(reply)) => {
                let read_length = reply.cookie & 0xFFFF_FFFF;
                if reply.error == 0 && read_length > 0 {
                    let discarded = io::copy(&mut (&mut reader).take(read_length), &mut io::sink());
                    match discarded {
                        Ok(count) if count == read_length => {}
                        Ok(_) => {
                            let _ = sender.send(ReplyEvent::Failed("the connection ended inside a read's data".into()));
                            return;
                        }
                        Err(error) => {
                            let _ = sender.send(ReplyEvent::Failed(error.to_string()));
                            return;
                        }
                    }
                }
                ReplyEvent::Reply { cookie: reply.cookie, error: reply.error, arrived: Instant::now() }
            }
            Err(error) => ReplyEvent::Failed(error.to_string()),
        };
        let last = !matches!(event, ReplyEvent::Reply { .. });
        if sender.send(event).is_err() || last {
            return;
        }
    }
}

impl Target for NbdTarget {
    fn shape(&self) -> TargetShape {
        TargetShape {
            capacity_bytes: self.export.size_bytes,
            request_bytes_max: u64::from(self.export.payload_bytes_max),
            trims: self.export.transmission_flags & TRANSMISSION_FLAG_SEND_TRIM != 0,
            flushes: self.export.transmission_flags & TRANSMISSION_FLAG_SEND_FLUSH != 0,
        }
    }

    fn now_ns(&mut self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn submit(&mut self, batch: &[(u64, TargetRequest)]) -> Result<u64, ReplayError> {
        let issue_ns = self.now_ns();
        for (id, request) in batch {
            self.write_request(*id, request)?;
        }
        self.writer.flush().map_err(|error| self.io_error(error))?;
        Ok(issue_ns)
    }

    fn wait(&mut self, deadline_ns: Option<u64>, completions: &mut Vec<TargetCompletion>) -> Result<(), ReplayError> {
        let first = match deadline_ns {
            None => self.replies.recv().ok(),
            Some(deadline) => {
                let timeout = Duration::from_nanos(deadline.saturating_sub(self.now_ns()));
                match self.replies.recv_timeout(timeout) {
                    Ok(event) => Some(event),
                    Err(RecvTimeoutError::Timeout) => return Ok(()),
                    Err(RecvTimeoutError::Disconnected) => None,
                }
            }
        };
        let first = first.unwrap_or(ReplyEvent::Failed("the reply thread ended".into()));
        self.handle(first, completions)?;
        while let Ok(event) = self.replies.try_recv() {
            self.handle(event, completions)?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), ReplayError> {
        assert!(self.in_flight.is_empty(), "every request completed");
        let disconnect = request_header(Command::Disconnect.code(), 0, 0, 0);
        self.writer.write_all(&disconnect).and_then(|()| self.writer.flush()).map_err(|error| self.io_error(error))?;
        // The server closes the connection after a disconnect; the reply
        // thread then sees the end of the stream and stops.
        if let Some(thread) = self.reader_thread.take() {
            let _ = thread.join();
        }
        Ok(())
    }
}
