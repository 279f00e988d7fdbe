//! The NBD wire format, pure: constants, and encoders and decoders of every message
//! Proxima sends or accepts, with no I/O.
//!
//! Both directions are here (a server's and a client's view) so that the tests, the
//! fuzz target and the benchmarks can speak the protocol to the server with the same
//! code that the server uses. Every decoder is total: any byte slice yields either a
//! value or a [`DecodeError`], never a panic. All integers are big-endian.
//!
//! The handshake (greeting, options, option replies) lives in [`handshake`], the
//! transmission phase (requests, simple and structured replies) in [`transmission`].

pub mod handshake;
pub mod transmission;

use thiserror::Error;

/// `NBDMAGIC`: the first 8 bytes the server sends.
pub const INIT_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: the newstyle greeting magic, and the magic of every client option.
pub const OPTION_MAGIC: u64 = 0x4948_4156_454f_5054;
/// Magic of every option reply sent by the server during option haggling.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic of every transmission request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of a simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Magic of a structured reply chunk.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// The longest string (export name, context name, message) the protocol allows.
pub const STRING_LENGTH_MAX_BYTES: usize = 4096;

/// Why a byte slice is not a valid message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The slice ended before the field was complete.
    #[error("truncated {field}: needs {needed_bytes} more bytes, {available_bytes} available")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Bytes the field needs.
        needed_bytes: usize,
        /// Bytes left in the slice.
        available_bytes: usize,
    },
    /// A magic number did not match.
    #[error("bad {field} magic {found:#x}, expected {expected:#x}")]
    BadMagic {
        /// Which magic.
        field: &'static str,
        /// What was received.
        found: u64,
        /// What the protocol requires.
        expected: u64,
    },
    /// Bytes were left over after a fixed-layout message.
    #[error("{trailing_bytes} trailing bytes after {field}")]
    TrailingBytes {
        /// The message.
        field: &'static str,
        /// How many bytes were left over.
        trailing_bytes: usize,
    },
    /// A string was not valid UTF-8, contained NUL, or exceeded 4096 bytes.
    #[error("invalid string in {field}: {reason}")]
    InvalidString {
        /// The field holding the string.
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A field held a value the protocol forbids.
    #[error("invalid {field}: {reason}")]
    InvalidValue {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Reads big-endian fields from a byte slice, failing (never panicking) at the end.
#[derive(Debug)]
pub struct WireReader<'a> {
    bytes: &'a [u8],
}

impl<'a> WireReader<'a> {
    /// Starts reading at the beginning of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    /// Bytes not yet read.
    pub fn remaining_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Takes the next `count` bytes.
    pub fn take(&mut self, count: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.bytes.len() < count {
            return Err(DecodeError::Truncated { field, needed_bytes: count, available_bytes: self.bytes.len() });
        }
        let (head, tail) = self.bytes.split_at(count);
        self.bytes = tail;
        Ok(head)
    }

    /// Takes everything left.
    pub fn take_rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.bytes)
    }

    /// Reads a `u16`.
    pub fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        let bytes = self.take(2, field)?;
        Ok(u16::from_be_bytes([bytes[0], bytes[1]]))
    }

    /// Reads a `u32`.
    pub fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        let bytes = self.take(4, field)?;
        Ok(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// Reads a `u64`.
    pub fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        let bytes = self.take(8, field)?;
        let mut array = [0u8; 8];
        array.copy_from_slice(bytes);
        Ok(u64::from_be_bytes(array))
    }

    /// Reads a string of `length_bytes` bytes, checking the protocol's string rules.
    pub fn string(&mut self, length_bytes: usize, field: &'static str) -> Result<String, DecodeError> {
        let bytes = self.take(length_bytes, field)?;
        decode_string(bytes, field)
    }

    /// Fails if any bytes are left.
    pub fn finish(&self, field: &'static str) -> Result<(), DecodeError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes { field, trailing_bytes: self.bytes.len() })
        }
    }
}

/// Checks the protocol's string rules: UTF-8, no NUL, at most 4096 bytes.
pub fn decode_string(bytes: &[u8], field: &'static str) -> Result<String, DecodeError> {
    if bytes.len() > STRING_LENGTH_MAX_BYTES {
        return Err(DecodeError::InvalidString { field, reason: "longer than 4096 bytes" });
    }
    if bytes.contains(&0) {
        return Err(DecodeError::InvalidString { field, reason: "contains NUL" });
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text.to_owned()),
        Err(_) => Err(DecodeError::InvalidString { field, reason: "not UTF-8" }),
    }
}

/// Appends big-endian fields to a buffer.
pub(crate) trait WireWriter {
    fn put_u16(&mut self, value: u16);
    fn put_u32(&mut self, value: u32);
    fn put_u64(&mut self, value: u64);
}

impl WireWriter for Vec<u8> {
    fn put_u16(&mut self, value: u16) {
        self.extend_from_slice(&value.to_be_bytes());
    }
    fn put_u32(&mut self, value: u32) {
        self.extend_from_slice(&value.to_be_bytes());
    }
    fn put_u64(&mut self, value: u64) {
        self.extend_from_slice(&value.to_be_bytes());
    }
}

/// Length of a byte string as the protocol's 32-bit length field.
///
/// Callers only encode strings they built or checked (at most 4096 bytes) and
/// payloads bounded by the 32-bit request length, so overflow is a bug.
pub(crate) fn length_u32(length: usize) -> u32 {
    u32::try_from(length).expect("encoded field longer than 4 GiB")
}

/// NBD error values carried in replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Errno {
    /// Operation not permitted (write to a read-only export).
    Perm = 1,
    /// Input/output error.
    Io = 5,
    /// Cannot allocate memory.
    NoMem = 12,
    /// Invalid argument (misaligned, out of range read, unknown command or flag).
    Inval = 22,
    /// No space left (write beyond the end, or the backend is full).
    NoSpc = 28,
    /// Value too large (an effect length beyond what the server accepts).
    Overflow = 75,
    /// Operation not supported (a fast zero that cannot be fast).
    NotSup = 95,
    /// The server is shutting down.
    Shutdown = 108,
}

impl Errno {
    /// The value on the wire.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The value for a wire code; unknown codes are treated as `EINVAL`, as the
    /// protocol asks of clients.
    pub fn from_code(code: u32) -> Self {
        match code {
            1 => Self::Perm,
            5 => Self::Io,
            12 => Self::NoMem,
            28 => Self::NoSpc,
            75 => Self::Overflow,
            95 => Self::NotSup,
            108 => Self::Shutdown,
            _ => Self::Inval,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_fails_on_truncation_instead_of_panicking() {
        let mut reader = WireReader::new(&[1, 2, 3]);
        assert_eq!(reader.u16("a").unwrap(), 0x0102);
        let error = reader.u32("b").unwrap_err();
        assert_eq!(error, DecodeError::Truncated { field: "b", needed_bytes: 4, available_bytes: 1 });
    }

    #[test]
    fn strings_reject_nul_invalid_utf8_and_overlong() {
        assert!(decode_string(b"ok", "s").is_ok());
        assert!(decode_string(b"a\0b", "s").is_err());
        assert!(decode_string(&[0xff, 0xfe], "s").is_err());
        assert!(decode_string(&vec![b'a'; 4097], "s").is_err());
        assert!(decode_string(&vec![b'a'; 4096], "s").is_ok());
    }

    #[test]
    fn errno_round_trips_and_unknown_codes_are_einval() {
        for errno in [Errno::Perm, Errno::Io, Errno::NoMem, Errno::Inval, Errno::NoSpc, Errno::Overflow] {
            assert_eq!(Errno::from_code(errno.code()), errno);
        }
        assert_eq!(Errno::from_code(9999), Errno::Inval);
    }
}
