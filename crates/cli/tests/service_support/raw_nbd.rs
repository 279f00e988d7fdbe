//! A minimal NBD client over a Unix socket, built on the server's own codec, for
//! tests that behave as hostile or plain clients do: attach (or be refused),
//! send requests without reading replies, write, flush and read back.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use proxima_nbd::protocol::handshake::*;
use proxima_nbd::protocol::transmission::*;

/// An attached connection (structured replies negotiated).
pub struct RawConnection {
    pub stream: UnixStream,
}

/// Connects and negotiates transmission on `export`; `Err` with what happened
/// when the server refuses (an option error, or the connection closed).
pub fn attach(socket: &Path, export: &str) -> Result<RawConnection, String> {
    let mut stream = UnixStream::connect(socket).map_err(|error| format!("connect: {error}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("read timeout");
    let mut greeting = vec![0u8; GREETING_LENGTH_BYTES];
    stream.read_exact(&mut greeting).map_err(|error| format!("greeting: {error}"))?;
    let flags = CLIENT_FLAG_FIXED_NEWSTYLE | CLIENT_FLAG_NO_ZEROES;
    let mut hello = flags.to_be_bytes().to_vec();
    hello.extend(ClientOption::StructuredReply.encode());
    hello.extend(ClientOption::Go(InfoRequest { export_name: export.into(), info_items: vec![] }).encode());
    stream.write_all(&hello).map_err(|error| format!("options: {error}"))?;
    let mut structured_acknowledged = false;
    loop {
        let reply = read_option_reply(&mut stream)?;
        match reply.body {
            OptionReplyBody::Ack if reply.option == OPT_STRUCTURED_REPLY => structured_acknowledged = true,
            OptionReplyBody::Ack if structured_acknowledged => return Ok(RawConnection { stream }),
            OptionReplyBody::Info(_) => {}
            OptionReplyBody::Error { message, .. } => return Err(format!("refused: {message}")),
            other => return Err(format!("unexpected option reply {other:?}")),
        }
    }
}

fn read_option_reply(stream: &mut UnixStream) -> Result<OptionReply, String> {
    let mut header = vec![0u8; OPTION_REPLY_HEADER_LENGTH_BYTES];
    stream.read_exact(&mut header).map_err(|error| format!("option reply: {error}"))?;
    let (option, reply_type, length) = OptionReply::decode_header(&header).map_err(|error| error.to_string())?;
    let mut payload = vec![0u8; length as usize];
    stream.read_exact(&mut payload).map_err(|error| format!("option reply body: {error}"))?;
    OptionReply::decode_body(option, reply_type, &payload).map_err(|error| error.to_string())
}

impl RawConnection {
    /// Sends a request header (and, for a write, its payload).
    pub fn send(&mut self, command: Command, cookie: u64, offset_bytes: u64, length_bytes: u32, payload: &[u8]) {
        let header = RequestHeader { flags: 0, command_code: command.code(), cookie, offset_bytes, length_bytes };
        self.stream.write_all(&header.encode()).expect("send a request");
        self.stream.write_all(payload).expect("send a payload");
    }

    /// Reads one reply: (cookie, error, data of a read).
    pub fn reply(&mut self) -> (u64, u32, Vec<u8>) {
        let mut magic = [0u8; 4];
        self.stream.read_exact(&mut magic).expect("reply magic");
        if magic == 0x6744_6698u32.to_be_bytes() {
            let mut rest = [0u8; 12];
            self.stream.read_exact(&mut rest).expect("simple reply");
            let error = u32::from_be_bytes(rest[..4].try_into().unwrap());
            return (u64::from_be_bytes(rest[4..].try_into().unwrap()), error, Vec::new());
        }
        let mut header = magic.to_vec();
        header.resize(STRUCTURED_REPLY_HEADER_LENGTH_BYTES, 0);
        self.stream.read_exact(&mut header[4..]).expect("chunk header");
        let header = ChunkHeader::decode(&header).expect("a valid chunk header");
        let mut payload = vec![0u8; header.payload_length_bytes as usize];
        self.stream.read_exact(&mut payload).expect("chunk payload");
        let chunk = StructuredChunk::decode(header, &payload).expect("a valid chunk");
        match chunk.payload {
            ChunkPayload::OffsetData { data, .. } => (chunk.cookie, 0, data),
            ChunkPayload::Error { error, .. } | ChunkPayload::ErrorOffset { error, .. } => {
                (chunk.cookie, error, Vec::new())
            }
            _ => (chunk.cookie, 0, Vec::new()),
        }
    }

    /// Writes `data` at `offset_bytes`, flushes, reads it back and compares,
    /// each request sent once the previous one is answered (requests in flight
    /// together may execute in any order, and a flush covers only the writes
    /// already answered).
    pub fn write_flush_verify(&mut self, offset_bytes: u64, data: &[u8]) -> Result<(), String> {
        let length = u32::try_from(data.len()).expect("a small write");
        let mut exchange = |command: Command, cookie: u64, offset: u64, length: u32, payload: &[u8]| {
            self.send(command, cookie, offset, length, payload);
            match self.reply() {
                (answered, 0, bytes) if answered == cookie => Ok(bytes),
                (answered, error, _) => Err(format!("request {cookie}: reply to {answered} with error {error}")),
            }
        };
        exchange(Command::Write, 1, offset_bytes, length, data)?;
        exchange(Command::Flush, 2, 0, 0, &[])?;
        let read_back = exchange(Command::Read, 3, offset_bytes, length, &[])?;
        if read_back != data {
            return Err(format!("the data read back at {offset_bytes} differs"));
        }
        Ok(())
    }
}
