//! A small NBD client: URIs, the fixed-newstyle handshake, and the
//! transmission phase's framing, over `proxima-nbd`'s codec.
//!
//! Connects to any NBD server (Proxima, nbdkit, qemu-nbd, nbd-server) by a URI
//! of the NBD URI specification: `nbd://HOST[:PORT]/EXPORT` (port 10809 by
//! default) or `nbd+unix:///EXPORT?socket=PATH`. The handshake asks for the
//! export with `NBD_OPT_GO` (falling back to `NBD_OPT_EXPORT_NAME` on servers
//! that do not know it) and negotiates no structured replies, so every reply
//! is a simple one and a read's data follows its header. Requests are
//! pipelined: the caller writes requests on one half of the connection while
//! another thread reads replies from the other.
//!
//! Why not a crate: the `nbd` crate (0.3) is an early, synchronous,
//! one-request-at-a-time client, and `libnbd`'s bindings need the C library and
//! its headers at build time; the protocol codec is already in this workspace.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use proxima_nbd::protocol::handshake::{
    decode_greeting, ClientOption, InfoItem, InfoRequest, OptionReply, OptionReplyBody, CLIENT_FLAG_FIXED_NEWSTYLE,
    CLIENT_FLAG_NO_ZEROES, EXPORT_NAME_REPLY_PADDING_BYTES, GREETING_LENGTH_BYTES, HANDSHAKE_FLAG_FIXED_NEWSTYLE,
    HANDSHAKE_FLAG_NO_ZEROES, INFO_BLOCK_SIZE, OPTION_REPLY_HEADER_LENGTH_BYTES, REP_ERR_UNSUP,
};
use proxima_nbd::protocol::transmission::{RequestHeader, SIMPLE_REPLY_HEADER_LENGTH_BYTES};
use proxima_nbd::protocol::{WireReader, SIMPLE_REPLY_MAGIC};
use thiserror::Error;

/// The IANA port of NBD.
pub const NBD_DEFAULT_PORT: u16 = 10809;
/// The largest request payload assumed when the server does not say.
pub const PAYLOAD_BYTES_MAX_DEFAULT: u32 = 32 << 20;

/// Why the client failed.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum NbdClientError {
    /// The URI is not an NBD URI this client takes.
    #[error("NBD URI `{uri}`: {message}")]
    BadUri {
        /// The URI.
        uri: String,
        /// What is wrong.
        message: String,
    },
    /// Connecting or talking to the server failed.
    #[error("NBD server {address}: {message}")]
    Connection {
        /// The address.
        address: String,
        /// What happened.
        message: String,
    },
    /// The server broke the protocol or refused the export.
    #[error("NBD server {address}: {message}")]
    Protocol {
        /// The address.
        address: String,
        /// What happened.
        message: String,
    },
}

/// Where a server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NbdAddress {
    /// A TCP `host:port`.
    Tcp(String),
    /// A Unix socket path.
    Unix(PathBuf),
}

impl std::fmt::Display for NbdAddress {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NbdAddress::Tcp(address) => write!(formatter, "{address}"),
            NbdAddress::Unix(path) => write!(formatter, "{}", path.display()),
        }
    }
}

/// A parsed NBD URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NbdUri {
    /// Where the server listens.
    pub address: NbdAddress,
    /// The export's name (empty: the default export).
    pub export_name: String,
}

impl NbdUri {
    /// Parses `nbd://HOST[:PORT]/EXPORT` or `nbd+unix:///EXPORT?socket=PATH`.
    pub fn parse(text: &str) -> Result<NbdUri, NbdClientError> {
        let bad = |message: &str| NbdClientError::BadUri { uri: text.to_string(), message: message.to_string() };
        if let Some(rest) = text.strip_prefix("nbd+unix://") {
            let (path_part, query) = rest.split_once('?').ok_or_else(|| bad("a Unix URI needs ?socket=PATH"))?;
            let export_name = path_part.strip_prefix('/').unwrap_or(path_part);
            let socket = query
                .split('&')
                .find_map(|pair| pair.strip_prefix("socket="))
                .filter(|path| !path.is_empty())
                .ok_or_else(|| bad("a Unix URI needs ?socket=PATH"))?;
            return Ok(NbdUri {
                address: NbdAddress::Unix(PathBuf::from(socket)),
                export_name: export_name.to_string(),
            });
        }
        let rest = text.strip_prefix("nbd://").ok_or_else(|| bad("expected nbd:// or nbd+unix://"))?;
        let (authority, export_name) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.is_empty() {
            return Err(bad("no host"));
        }
        let address = if authority.rsplit_once(':').is_some_and(|(_, port)| port.parse::<u16>().is_ok())
            && !authority.ends_with(']')
        {
            authority.to_string()
        } else {
            format!("{authority}:{NBD_DEFAULT_PORT}")
        };
        Ok(NbdUri { address: NbdAddress::Tcp(address), export_name: export_name.to_string() })
    }
}

/// What the handshake learned about the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportDetails {
    /// The export's size.
    pub size_bytes: u64,
    /// Its transmission flags (`TRANSMISSION_FLAG_*`).
    pub transmission_flags: u16,
    /// The largest payload of one request.
    pub payload_bytes_max: u32,
}

/// A connection in the transmission phase, split in two halves.
pub struct NbdConnection {
    /// Where requests are written.
    pub writer: Box<dyn Write + Send>,
    /// Where replies are read.
    pub reader: Box<dyn Read + Send>,
    /// The export.
    pub export: ExportDetails,
    /// The server, for messages.
    pub address: NbdAddress,
}

impl std::fmt::Debug for NbdConnection {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("NbdConnection")
            .field("export", &self.export)
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl NbdConnection {
    /// Connects and completes the handshake.
    pub fn connect(uri: &NbdUri) -> Result<NbdConnection, NbdClientError> {
        let address_text = uri.address.to_string();
        let connection_error =
            |error: io::Error| NbdClientError::Connection { address: address_text.clone(), message: error.to_string() };
        let (mut reader, mut writer): (Box<dyn Read + Send>, Box<dyn Write + Send>) = match &uri.address {
            NbdAddress::Tcp(address) => {
                let stream = TcpStream::connect(address).map_err(connection_error)?;
                stream.set_nodelay(true).map_err(connection_error)?;
                (Box::new(stream.try_clone().map_err(connection_error)?), Box::new(stream))
            }
            NbdAddress::Unix(path) => {
                let stream = UnixStream::connect(path).map_err(connection_error)?;
                (Box::new(stream.try_clone().map_err(connection_error)?), Box::new(stream))
            }
        };
        let mut handshake = Handshake { reader: &mut reader, writer: &mut writer, address: &address_text };
        let export = handshake.run(&uri.export_name)?;
        Ok(NbdConnection { writer, reader, export, address: uri.address.clone() })
    }
}

/// The handshake's state: the two halves and the address for errors.
struct Handshake<'a> {
    reader: &'a mut Box<dyn Read + Send>,
    writer: &'a mut Box<dyn Write + Send>,
    address: &'a str,
}

impl Handshake<'_> {
    fn io(&self, error: io::Error) -> NbdClientError {
        NbdClientError::Connection { address: self.address.to_string(), message: error.to_string() }
    }

    fn protocol(&self, message: impl Into<String>) -> NbdClientError {
        NbdClientError::Protocol { address: self.address.to_string(), message: message.into() }
    }

    fn read_exact(&mut self, length: usize) -> Result<Vec<u8>, NbdClientError> {
        let mut bytes = vec![0; length];
        self.reader.read_exact(&mut bytes).map_err(|error| self.io(error))?;
        Ok(bytes)
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), NbdClientError> {
        self.writer.write_all(bytes).and_then(|()| self.writer.flush()).map_err(|error| self.io(error))
    }

    fn run(&mut self, export_name: &str) -> Result<ExportDetails, NbdClientError> {
        let greeting = self.read_exact(GREETING_LENGTH_BYTES)?;
        let flags = decode_greeting(&greeting).map_err(|error| self.protocol(format!("greeting: {error}")))?;
        if flags & HANDSHAKE_FLAG_FIXED_NEWSTYLE == 0 {
            return Err(self.protocol("the server does not speak fixed newstyle"));
        }
        let no_zeroes = flags & HANDSHAKE_FLAG_NO_ZEROES != 0;
        let client_flags = CLIENT_FLAG_FIXED_NEWSTYLE | if no_zeroes { CLIENT_FLAG_NO_ZEROES } else { 0 };
        self.send(&client_flags.to_be_bytes())?;
        let go =
            ClientOption::Go(InfoRequest { export_name: export_name.to_string(), info_items: vec![INFO_BLOCK_SIZE] });
        self.send(&go.encode())?;
        let mut export: Option<(u64, u16)> = None;
        let mut payload_bytes_max = PAYLOAD_BYTES_MAX_DEFAULT;
        loop {
            let header = self.read_exact(OPTION_REPLY_HEADER_LENGTH_BYTES)?;
            let (option, reply_type, length) =
                OptionReply::decode_header(&header).map_err(|error| self.protocol(format!("option reply: {error}")))?;
            let payload = self.read_exact(length as usize)?;
            let reply = OptionReply::decode_body(option, reply_type, &payload)
                .map_err(|error| self.protocol(format!("option reply: {error}")))?;
            match reply.body {
                OptionReplyBody::Ack => break,
                OptionReplyBody::Info(InfoItem::Export { size_bytes, transmission_flags }) => {
                    export = Some((size_bytes, transmission_flags));
                }
                OptionReplyBody::Info(InfoItem::BlockSize(constraints)) => {
                    payload_bytes_max = constraints.maximum_payload_bytes;
                }
                OptionReplyBody::Info(_) | OptionReplyBody::Unknown { .. } => {}
                OptionReplyBody::Error { reply_type: REP_ERR_UNSUP, .. } => {
                    return self.export_name_fallback(export_name, no_zeroes);
                }
                OptionReplyBody::Error { message, .. } => {
                    return Err(self.protocol(format!("export `{export_name}` refused: {message}")));
                }
                other => return Err(self.protocol(format!("unexpected reply to NBD_OPT_GO: {other:?}"))),
            }
        }
        let (size_bytes, transmission_flags) =
            export.ok_or_else(|| self.protocol("NBD_OPT_GO succeeded without the export's size"))?;
        Ok(ExportDetails { size_bytes, transmission_flags, payload_bytes_max })
    }

    /// `NBD_OPT_EXPORT_NAME`, for servers without `NBD_OPT_GO`.
    fn export_name_fallback(&mut self, export_name: &str, no_zeroes: bool) -> Result<ExportDetails, NbdClientError> {
        self.send(&ClientOption::ExportName(export_name.to_string()).encode())?;
        let reply_length = 10 + if no_zeroes { 0 } else { EXPORT_NAME_REPLY_PADDING_BYTES };
        let reply = self.read_exact(reply_length)?;
        let size_bytes = u64::from_be_bytes(reply[..8].try_into().expect("8 bytes"));
        let transmission_flags = u16::from_be_bytes(reply[8..10].try_into().expect("2 bytes"));
        Ok(ExportDetails { size_bytes, transmission_flags, payload_bytes_max: PAYLOAD_BYTES_MAX_DEFAULT })
    }
}

/// A simple reply's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimpleReply {
    /// The NBD error (0: success).
    pub error: u32,
    /// The request's cookie.
    pub cookie: u64,
}

/// Reads one simple reply header; `Ok(None)` at a clean end of the stream.
pub fn read_simple_reply(reader: &mut dyn Read) -> io::Result<Option<SimpleReply>> {
    let mut header = [0u8; SIMPLE_REPLY_HEADER_LENGTH_BYTES];
    match reader.read_exact(&mut header) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(error) => return Err(error),
    }
    let mut wire = WireReader::new(&header);
    let decode =
        |error: proxima_nbd::protocol::DecodeError| io::Error::new(io::ErrorKind::InvalidData, error.to_string());
    let magic = wire.u32("reply magic").map_err(decode)?;
    if magic != SIMPLE_REPLY_MAGIC {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("reply magic {magic:#x} is not a simple reply"),
        ));
    }
    let error = wire.u32("reply error").map_err(decode)?;
    let cookie = wire.u64("reply cookie").map_err(decode)?;
    Ok(Some(SimpleReply { error, cookie }))
}

/// Encodes a request header.
pub fn request_header(command_code: u16, cookie: u64, offset_bytes: u64, length_bytes: u32) -> [u8; 28] {
    RequestHeader { flags: 0, command_code, cookie, offset_bytes, length_bytes }.encode()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_of_both_transports() {
        let unix = NbdUri::parse("nbd+unix:///lun0?socket=/tmp/p.sock").unwrap();
        assert_eq!(unix, NbdUri { address: NbdAddress::Unix("/tmp/p.sock".into()), export_name: "lun0".into() });
        let tcp = NbdUri::parse("nbd://127.0.0.1/disk").unwrap();
        assert_eq!(tcp.address, NbdAddress::Tcp("127.0.0.1:10809".into()));
        assert_eq!(tcp.export_name, "disk");
        assert_eq!(NbdUri::parse("nbd://localhost:1234").unwrap().address, NbdAddress::Tcp("localhost:1234".into()));
        assert!(NbdUri::parse("http://x/").is_err());
        assert!(NbdUri::parse("nbd+unix:///lun0").is_err());
    }
}
