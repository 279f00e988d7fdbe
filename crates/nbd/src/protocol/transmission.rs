//! The transmission phase: request headers, simple replies and structured reply
//! chunks (offset data, offset hole, block status, error, error with offset, none).

use super::{length_u32, DecodeError, WireReader, WireWriter};
use super::{REQUEST_MAGIC, SIMPLE_REPLY_MAGIC, STRUCTURED_REPLY_MAGIC};

/// Command flag: force unit access (reply only once the data is durable).
pub const COMMAND_FLAG_FUA: u16 = 1 << 0;
/// Command flag on `WRITE_ZEROES`: do not leave a hole.
pub const COMMAND_FLAG_NO_HOLE: u16 = 1 << 1;
/// Command flag on `READ`: reply with at most one content chunk.
pub const COMMAND_FLAG_DF: u16 = 1 << 2;
/// Command flag on `BLOCK_STATUS`: one extent per context.
pub const COMMAND_FLAG_REQ_ONE: u16 = 1 << 3;
/// Command flag on `WRITE_ZEROES`: fail with `ENOTSUP` unless zeroing is fast.
pub const COMMAND_FLAG_FAST_ZERO: u16 = 1 << 4;

/// Structured reply flag: this is the last chunk of the reply.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;

/// Structured reply type: no payload, only ends a reply.
pub const REPLY_TYPE_NONE: u16 = 0;
/// Structured reply type: data at an offset.
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
/// Structured reply type: a run of zeroes at an offset.
pub const REPLY_TYPE_OFFSET_HOLE: u16 = 2;
/// Structured reply type: block status descriptors for one metadata context.
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
/// Structured reply type: an error.
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;
/// Structured reply type: an error at an offset.
pub const REPLY_TYPE_ERROR_OFFSET: u16 = (1 << 15) + 2;

/// Block status flag of `base:allocation`: the extent is not allocated.
pub const STATE_HOLE: u32 = 1 << 0;
/// Block status flag of `base:allocation`: the extent reads as zeroes.
pub const STATE_ZERO: u32 = 1 << 1;

/// Length of a request header in bytes.
pub const REQUEST_HEADER_LENGTH_BYTES: usize = 28;
/// Length of a simple reply header in bytes.
pub const SIMPLE_REPLY_HEADER_LENGTH_BYTES: usize = 16;
/// Length of a structured reply chunk header in bytes.
pub const STRUCTURED_REPLY_HEADER_LENGTH_BYTES: usize = 20;

/// A transmission command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    /// `NBD_CMD_READ` (0).
    Read,
    /// `NBD_CMD_WRITE` (1): the request carries `length` bytes of payload.
    Write,
    /// `NBD_CMD_DISC` (2).
    Disconnect,
    /// `NBD_CMD_FLUSH` (3).
    Flush,
    /// `NBD_CMD_TRIM` (4).
    Trim,
    /// `NBD_CMD_CACHE` (5).
    Cache,
    /// `NBD_CMD_WRITE_ZEROES` (6).
    WriteZeroes,
    /// `NBD_CMD_BLOCK_STATUS` (7).
    BlockStatus,
}

impl Command {
    /// The command for a wire code, if it is one this code knows.
    pub fn from_code(code: u16) -> Option<Self> {
        Some(match code {
            0 => Self::Read,
            1 => Self::Write,
            2 => Self::Disconnect,
            3 => Self::Flush,
            4 => Self::Trim,
            5 => Self::Cache,
            6 => Self::WriteZeroes,
            7 => Self::BlockStatus,
            _ => return None,
        })
    }

    /// The wire code.
    pub fn code(self) -> u16 {
        match self {
            Self::Read => 0,
            Self::Write => 1,
            Self::Disconnect => 2,
            Self::Flush => 3,
            Self::Trim => 4,
            Self::Cache => 5,
            Self::WriteZeroes => 6,
            Self::BlockStatus => 7,
        }
    }

    /// The protocol's name of the command, for logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Read => "NBD_CMD_READ",
            Self::Write => "NBD_CMD_WRITE",
            Self::Disconnect => "NBD_CMD_DISC",
            Self::Flush => "NBD_CMD_FLUSH",
            Self::Trim => "NBD_CMD_TRIM",
            Self::Cache => "NBD_CMD_CACHE",
            Self::WriteZeroes => "NBD_CMD_WRITE_ZEROES",
            Self::BlockStatus => "NBD_CMD_BLOCK_STATUS",
        }
    }
}

/// A request header. `command_code` stays raw so that an unknown command can be
/// answered with `EINVAL` rather than treated as garbage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    /// Command flags (`COMMAND_FLAG_*`).
    pub flags: u16,
    /// Command code (see [`Command`]).
    pub command_code: u16,
    /// Opaque value the reply must echo.
    pub cookie: u64,
    /// Byte offset into the export.
    pub offset_bytes: u64,
    /// Length in bytes (payload length for writes).
    pub length_bytes: u32,
}

impl RequestHeader {
    /// Decodes a 28-byte request header, checking the magic.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut reader = WireReader::new(bytes);
        let magic = reader.u32("request magic")?;
        if magic != REQUEST_MAGIC {
            return Err(DecodeError::BadMagic {
                field: "request",
                found: u64::from(magic),
                expected: u64::from(REQUEST_MAGIC),
            });
        }
        let header = Self {
            flags: reader.u16("command flags")?,
            command_code: reader.u16("command type")?,
            cookie: reader.u64("cookie")?,
            offset_bytes: reader.u64("offset")?,
            length_bytes: reader.u32("length")?,
        };
        reader.finish("request header")?;
        Ok(header)
    }

    /// Encodes the header (a write's payload is sent after it).
    pub fn encode(&self) -> [u8; REQUEST_HEADER_LENGTH_BYTES] {
        let mut bytes = Vec::with_capacity(REQUEST_HEADER_LENGTH_BYTES);
        bytes.put_u32(REQUEST_MAGIC);
        bytes.put_u16(self.flags);
        bytes.put_u16(self.command_code);
        bytes.put_u64(self.cookie);
        bytes.put_u64(self.offset_bytes);
        bytes.put_u32(self.length_bytes);
        let mut array = [0u8; REQUEST_HEADER_LENGTH_BYTES];
        array.copy_from_slice(&bytes);
        array
    }

    /// The command, if known.
    pub fn command(&self) -> Option<Command> {
        Command::from_code(self.command_code)
    }
}

/// Encodes a simple reply header (a successful read's data follows it).
pub fn encode_simple_reply(cookie: u64, error: u32) -> [u8; SIMPLE_REPLY_HEADER_LENGTH_BYTES] {
    let mut bytes = [0u8; SIMPLE_REPLY_HEADER_LENGTH_BYTES];
    bytes[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    bytes[4..8].copy_from_slice(&error.to_be_bytes());
    bytes[8..].copy_from_slice(&cookie.to_be_bytes());
    bytes
}

/// One `base:allocation` block status descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockStatusDescriptor {
    /// Length of the extent in bytes (nonzero).
    pub length_bytes: u32,
    /// Status flags (`STATE_*`).
    pub flags: u32,
}

/// The payload of a structured reply chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkPayload {
    /// `NBD_REPLY_TYPE_NONE`.
    None,
    /// `NBD_REPLY_TYPE_OFFSET_DATA`.
    OffsetData {
        /// Absolute offset of the data.
        offset_bytes: u64,
        /// The data (at least one byte).
        data: Vec<u8>,
    },
    /// `NBD_REPLY_TYPE_OFFSET_HOLE`.
    OffsetHole {
        /// Absolute offset of the hole.
        offset_bytes: u64,
        /// Length of the hole (nonzero).
        length_bytes: u32,
    },
    /// `NBD_REPLY_TYPE_BLOCK_STATUS`.
    BlockStatus {
        /// Metadata context id.
        context_id: u32,
        /// Consecutive descriptors from the request offset (at least one).
        descriptors: Vec<BlockStatusDescriptor>,
    },
    /// `NBD_REPLY_TYPE_ERROR`.
    Error {
        /// NBD error value (nonzero).
        error: u32,
        /// Message for humans.
        message: String,
    },
    /// `NBD_REPLY_TYPE_ERROR_OFFSET`.
    ErrorOffset {
        /// NBD error value (nonzero).
        error: u32,
        /// Message for humans.
        message: String,
        /// Offset where the error occurred.
        offset_bytes: u64,
    },
    /// A type this code does not know.
    Unknown {
        /// Chunk type.
        reply_type: u16,
        /// Raw payload.
        payload: Vec<u8>,
    },
}

/// A structured reply chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructuredChunk {
    /// Reply flags (`REPLY_FLAG_DONE` on the last chunk).
    pub flags: u16,
    /// The request's cookie.
    pub cookie: u64,
    /// The payload.
    pub payload: ChunkPayload,
}

/// The header fields of a structured reply chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Reply flags.
    pub flags: u16,
    /// Chunk type (`REPLY_TYPE_*`).
    pub reply_type: u16,
    /// The request's cookie.
    pub cookie: u64,
    /// Payload length in bytes.
    pub payload_length_bytes: u32,
}

impl ChunkHeader {
    /// Encodes the 20-byte chunk header.
    pub fn encode(&self) -> [u8; STRUCTURED_REPLY_HEADER_LENGTH_BYTES] {
        let mut bytes = [0u8; STRUCTURED_REPLY_HEADER_LENGTH_BYTES];
        bytes[..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
        bytes[4..6].copy_from_slice(&self.flags.to_be_bytes());
        bytes[6..8].copy_from_slice(&self.reply_type.to_be_bytes());
        bytes[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        bytes[16..].copy_from_slice(&self.payload_length_bytes.to_be_bytes());
        bytes
    }

    /// Decodes the 20-byte chunk header, checking the magic.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut reader = WireReader::new(bytes);
        let magic = reader.u32("structured reply magic")?;
        if magic != STRUCTURED_REPLY_MAGIC {
            return Err(DecodeError::BadMagic {
                field: "structured reply",
                found: u64::from(magic),
                expected: u64::from(STRUCTURED_REPLY_MAGIC),
            });
        }
        let header = Self {
            flags: reader.u16("reply flags")?,
            reply_type: reader.u16("reply type")?,
            cookie: reader.u64("cookie")?,
            payload_length_bytes: reader.u32("reply length")?,
        };
        reader.finish("structured reply header")?;
        Ok(header)
    }
}

/// The header and the 8-byte offset that start an `OFFSET_DATA` chunk, so that the
/// data itself can be written from its own buffer without a copy.
pub fn encode_offset_data_prefix(cookie: u64, flags: u16, offset_bytes: u64, data_length_bytes: u32) -> [u8; 28] {
    let header = ChunkHeader {
        flags,
        reply_type: REPLY_TYPE_OFFSET_DATA,
        cookie,
        payload_length_bytes: data_length_bytes.checked_add(8).expect("read longer than 4 GiB - 8"),
    };
    let mut bytes = [0u8; 28];
    bytes[..20].copy_from_slice(&header.encode());
    bytes[20..].copy_from_slice(&offset_bytes.to_be_bytes());
    bytes
}

impl StructuredChunk {
    /// The chunk type on the wire.
    pub fn reply_type(&self) -> u16 {
        match &self.payload {
            ChunkPayload::None => REPLY_TYPE_NONE,
            ChunkPayload::OffsetData { .. } => REPLY_TYPE_OFFSET_DATA,
            ChunkPayload::OffsetHole { .. } => REPLY_TYPE_OFFSET_HOLE,
            ChunkPayload::BlockStatus { .. } => REPLY_TYPE_BLOCK_STATUS,
            ChunkPayload::Error { .. } => REPLY_TYPE_ERROR,
            ChunkPayload::ErrorOffset { .. } => REPLY_TYPE_ERROR_OFFSET,
            ChunkPayload::Unknown { reply_type, .. } => *reply_type,
        }
    }

    /// Encodes the chunk with its header.
    pub fn encode(&self) -> Vec<u8> {
        let mut payload = Vec::new();
        match &self.payload {
            ChunkPayload::None => {}
            ChunkPayload::OffsetData { offset_bytes, data } => {
                payload.put_u64(*offset_bytes);
                payload.extend_from_slice(data);
            }
            ChunkPayload::OffsetHole { offset_bytes, length_bytes } => {
                payload.put_u64(*offset_bytes);
                payload.put_u32(*length_bytes);
            }
            ChunkPayload::BlockStatus { context_id, descriptors } => {
                payload.put_u32(*context_id);
                for descriptor in descriptors {
                    payload.put_u32(descriptor.length_bytes);
                    payload.put_u32(descriptor.flags);
                }
            }
            ChunkPayload::Error { error, message } => {
                payload.put_u32(*error);
                payload.put_u16(message_length(message));
                payload.extend_from_slice(&message.as_bytes()[..usize::from(message_length(message))]);
            }
            ChunkPayload::ErrorOffset { error, message, offset_bytes } => {
                payload.put_u32(*error);
                payload.put_u16(message_length(message));
                payload.extend_from_slice(&message.as_bytes()[..usize::from(message_length(message))]);
                payload.put_u64(*offset_bytes);
            }
            ChunkPayload::Unknown { payload: raw, .. } => payload.extend_from_slice(raw),
        }
        let header = ChunkHeader {
            flags: self.flags,
            reply_type: self.reply_type(),
            cookie: self.cookie,
            payload_length_bytes: length_u32(payload.len()),
        };
        let mut bytes = Vec::with_capacity(STRUCTURED_REPLY_HEADER_LENGTH_BYTES + payload.len());
        bytes.extend_from_slice(&header.encode());
        bytes.extend_from_slice(&payload);
        bytes
    }

    /// Decodes a chunk from its header and payload, checking each type's layout.
    pub fn decode(header: ChunkHeader, payload: &[u8]) -> Result<Self, DecodeError> {
        let mut reader = WireReader::new(payload);
        let decoded = match header.reply_type {
            REPLY_TYPE_NONE => ChunkPayload::None,
            REPLY_TYPE_OFFSET_DATA => {
                let offset_bytes = reader.u64("data offset")?;
                if reader.remaining_bytes() == 0 {
                    return Err(DecodeError::InvalidValue { field: "OFFSET_DATA", reason: "no data" });
                }
                ChunkPayload::OffsetData { offset_bytes, data: reader.take_rest().to_vec() }
            }
            REPLY_TYPE_OFFSET_HOLE => {
                let offset_bytes = reader.u64("hole offset")?;
                let length_bytes = reader.u32("hole size")?;
                if length_bytes == 0 {
                    return Err(DecodeError::InvalidValue { field: "OFFSET_HOLE", reason: "zero hole size" });
                }
                ChunkPayload::OffsetHole { offset_bytes, length_bytes }
            }
            REPLY_TYPE_BLOCK_STATUS => decode_block_status(&mut reader)?,
            REPLY_TYPE_ERROR => {
                let (error, message) = decode_error_prefix(&mut reader)?;
                ChunkPayload::Error { error, message }
            }
            REPLY_TYPE_ERROR_OFFSET => {
                let (error, message) = decode_error_prefix(&mut reader)?;
                let offset_bytes = reader.u64("error offset")?;
                ChunkPayload::ErrorOffset { error, message, offset_bytes }
            }
            other => ChunkPayload::Unknown { reply_type: other, payload: reader.take_rest().to_vec() },
        };
        reader.finish("structured reply chunk")?;
        Ok(Self { flags: header.flags, cookie: header.cookie, payload: decoded })
    }
}

fn message_length(message: &str) -> u16 {
    // Messages are capped at the protocol's 4096-byte string limit; cut on a char
    // boundary so the bytes stay valid UTF-8.
    let mut length = message.len().min(super::STRING_LENGTH_MAX_BYTES);
    while !message.is_char_boundary(length) {
        length -= 1;
    }
    u16::try_from(length).expect("message length capped at 4096")
}

fn decode_block_status(reader: &mut WireReader<'_>) -> Result<ChunkPayload, DecodeError> {
    let context_id = reader.u32("context id")?;
    if reader.remaining_bytes() == 0 || !reader.remaining_bytes().is_multiple_of(8) {
        return Err(DecodeError::InvalidValue { field: "BLOCK_STATUS", reason: "length is not 4 + 8n with n > 0" });
    }
    let mut descriptors = Vec::with_capacity(reader.remaining_bytes() / 8);
    while reader.remaining_bytes() > 0 {
        let length_bytes = reader.u32("extent length")?;
        let flags = reader.u32("extent flags")?;
        if length_bytes == 0 {
            return Err(DecodeError::InvalidValue { field: "BLOCK_STATUS", reason: "zero extent length" });
        }
        descriptors.push(BlockStatusDescriptor { length_bytes, flags });
    }
    Ok(ChunkPayload::BlockStatus { context_id, descriptors })
}

fn decode_error_prefix(reader: &mut WireReader<'_>) -> Result<(u32, String), DecodeError> {
    let error = reader.u32("error")?;
    if error == 0 {
        return Err(DecodeError::InvalidValue { field: "error chunk", reason: "zero error value" });
    }
    let message_length = reader.u16("message length")?;
    let message = reader.string(usize::from(message_length), "error message")?;
    Ok((error, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trips() {
        let header = RequestHeader {
            flags: COMMAND_FLAG_FUA,
            command_code: Command::Write.code(),
            cookie: 0xdead_beef_cafe,
            offset_bytes: 1 << 40,
            length_bytes: 4096,
        };
        let bytes = header.encode();
        assert_eq!(RequestHeader::decode(&bytes).unwrap(), header);
        assert_eq!(header.command(), Some(Command::Write));
    }

    #[test]
    fn request_with_bad_magic_is_an_error() {
        let mut bytes =
            RequestHeader { flags: 0, command_code: 0, cookie: 1, offset_bytes: 0, length_bytes: 512 }.encode();
        bytes[0] ^= 0xff;
        assert!(matches!(RequestHeader::decode(&bytes), Err(DecodeError::BadMagic { .. })));
    }

    #[test]
    fn every_command_code_round_trips() {
        for code in 0..=7 {
            assert_eq!(Command::from_code(code).unwrap().code(), code);
        }
        assert_eq!(Command::from_code(8), None);
    }

    #[test]
    fn chunks_round_trip() {
        let payloads = [
            ChunkPayload::None,
            ChunkPayload::OffsetData { offset_bytes: 512, data: vec![7; 100] },
            ChunkPayload::OffsetHole { offset_bytes: 4096, length_bytes: 8192 },
            ChunkPayload::BlockStatus {
                context_id: 1,
                descriptors: vec![
                    BlockStatusDescriptor { length_bytes: 4096, flags: 0 },
                    BlockStatusDescriptor { length_bytes: 8192, flags: STATE_HOLE | STATE_ZERO },
                ],
            },
            ChunkPayload::Error { error: 22, message: "misaligned".into() },
            ChunkPayload::ErrorOffset { error: 5, message: String::new(), offset_bytes: 1024 },
        ];
        for payload in payloads {
            let chunk = StructuredChunk { flags: REPLY_FLAG_DONE, cookie: 9, payload };
            let bytes = chunk.encode();
            let header = ChunkHeader::decode(&bytes[..20]).unwrap();
            assert_eq!(header.payload_length_bytes as usize, bytes.len() - 20);
            assert_eq!(StructuredChunk::decode(header, &bytes[20..]).unwrap(), chunk);
        }
    }

    #[test]
    fn offset_data_prefix_matches_the_full_encoding() {
        let chunk = StructuredChunk {
            flags: REPLY_FLAG_DONE,
            cookie: 3,
            payload: ChunkPayload::OffsetData { offset_bytes: 4096, data: vec![1, 2, 3] },
        };
        let full = chunk.encode();
        assert_eq!(&full[..28], &encode_offset_data_prefix(3, REPLY_FLAG_DONE, 4096, 3));
    }

    #[test]
    fn error_messages_are_cut_at_4096_bytes_on_a_char_boundary() {
        let message = "é".repeat(3000);
        let chunk = StructuredChunk { flags: 1, cookie: 1, payload: ChunkPayload::Error { error: 5, message } };
        let bytes = chunk.encode();
        let header = ChunkHeader::decode(&bytes[..20]).unwrap();
        let decoded = StructuredChunk::decode(header, &bytes[20..]).unwrap();
        let ChunkPayload::Error { message, .. } = decoded.payload else { panic!("not an error chunk") };
        assert_eq!(message.len(), 4096);
    }

    #[test]
    fn malformed_block_status_is_an_error() {
        let header = ChunkHeader { flags: 1, reply_type: REPLY_TYPE_BLOCK_STATUS, cookie: 1, payload_length_bytes: 4 };
        assert!(StructuredChunk::decode(header, &[0, 0, 0, 1]).is_err());
        assert!(StructuredChunk::decode(header, &[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }
}
