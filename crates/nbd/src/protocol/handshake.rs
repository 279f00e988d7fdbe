//! The fixed newstyle handshake: the server greeting, client flags, client options
//! and the server's option replies (including `NBD_REP_INFO` items).

use super::{decode_string, INIT_MAGIC};
use super::{length_u32, DecodeError, WireReader, WireWriter, OPTION_MAGIC, OPTION_REPLY_MAGIC};

/// Handshake flag: the server speaks fixed newstyle.
pub const HANDSHAKE_FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag: the server can omit the 124 zero bytes after `NBD_OPT_EXPORT_NAME`.
pub const HANDSHAKE_FLAG_NO_ZEROES: u16 = 1 << 1;

/// Client flag: the client speaks fixed newstyle.
pub const CLIENT_FLAG_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag: omit the 124 zero bytes after `NBD_OPT_EXPORT_NAME`.
pub const CLIENT_FLAG_NO_ZEROES: u32 = 1 << 1;

/// Transmission flag: always set.
pub const TRANSMISSION_FLAG_HAS_FLAGS: u16 = 1 << 0;
/// Transmission flag: the export is read-only.
pub const TRANSMISSION_FLAG_READ_ONLY: u16 = 1 << 1;
/// Transmission flag: `NBD_CMD_FLUSH` is supported.
pub const TRANSMISSION_FLAG_SEND_FLUSH: u16 = 1 << 2;
/// Transmission flag: `NBD_CMD_FLAG_FUA` is supported.
pub const TRANSMISSION_FLAG_SEND_FUA: u16 = 1 << 3;
/// Transmission flag: the export behaves like a rotational medium.
pub const TRANSMISSION_FLAG_ROTATIONAL: u16 = 1 << 4;
/// Transmission flag: `NBD_CMD_TRIM` is supported.
pub const TRANSMISSION_FLAG_SEND_TRIM: u16 = 1 << 5;
/// Transmission flag: `NBD_CMD_WRITE_ZEROES` (and `NO_HOLE`) is supported.
pub const TRANSMISSION_FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
/// Transmission flag: `NBD_CMD_FLAG_DF` is supported on reads.
pub const TRANSMISSION_FLAG_SEND_DF: u16 = 1 << 7;
/// Transmission flag: flush and FUA on one connection cover all connections.
pub const TRANSMISSION_FLAG_CAN_MULTI_CONN: u16 = 1 << 8;
/// Transmission flag: `NBD_CMD_CACHE` is understood.
pub const TRANSMISSION_FLAG_SEND_CACHE: u16 = 1 << 10;
/// Transmission flag: `NBD_CMD_FLAG_FAST_ZERO` is supported.
pub const TRANSMISSION_FLAG_SEND_FAST_ZERO: u16 = 1 << 11;

/// Option: choose an export and enter transmission (no error reply possible).
pub const OPT_EXPORT_NAME: u32 = 1;
/// Option: abort the negotiation.
pub const OPT_ABORT: u32 = 2;
/// Option: list the exports.
pub const OPT_LIST: u32 = 3;
/// Option: upgrade to TLS.
pub const OPT_STARTTLS: u32 = 5;
/// Option: describe an export.
pub const OPT_INFO: u32 = 6;
/// Option: describe an export and enter transmission.
pub const OPT_GO: u32 = 7;
/// Option: use structured replies.
pub const OPT_STRUCTURED_REPLY: u32 = 8;
/// Option: list metadata contexts.
pub const OPT_LIST_META_CONTEXT: u32 = 9;
/// Option: select metadata contexts.
pub const OPT_SET_META_CONTEXT: u32 = 10;

/// Option reply: success, or the end of a list.
pub const REP_ACK: u32 = 1;
/// Option reply: one export of a list.
pub const REP_SERVER: u32 = 2;
/// Option reply: one information item about an export.
pub const REP_INFO: u32 = 3;
/// Option reply: one metadata context.
pub const REP_META_CONTEXT: u32 = 4;
/// Option reply error: unknown option.
pub const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
/// Option reply error: forbidden by policy.
pub const REP_ERR_POLICY: u32 = (1 << 31) + 2;
/// Option reply error: syntactically or semantically invalid.
pub const REP_ERR_INVALID: u32 = (1 << 31) + 3;
/// Option reply error: not supported on this platform.
pub const REP_ERR_PLATFORM: u32 = (1 << 31) + 4;
/// Option reply error: TLS required.
pub const REP_ERR_TLS_REQD: u32 = (1 << 31) + 5;
/// Option reply error: no such export.
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;
/// Option reply error: the server is shutting down.
pub const REP_ERR_SHUTDOWN: u32 = (1 << 31) + 7;
/// Option reply error: the client must request block size information.
pub const REP_ERR_BLOCK_SIZE_REQD: u32 = (1 << 31) + 8;
/// Option reply error: the request or reply is too large.
pub const REP_ERR_TOO_BIG: u32 = (1 << 31) + 9;

/// Information item: export size and transmission flags.
pub const INFO_EXPORT: u16 = 0;
/// Information item: canonical export name.
pub const INFO_NAME: u16 = 1;
/// Information item: human-readable description.
pub const INFO_DESCRIPTION: u16 = 2;
/// Information item: block size constraints.
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Length of the server greeting in bytes.
pub const GREETING_LENGTH_BYTES: usize = 18;
/// Length of a client option header in bytes.
pub const OPTION_HEADER_LENGTH_BYTES: usize = 16;
/// Length of an option reply header in bytes.
pub const OPTION_REPLY_HEADER_LENGTH_BYTES: usize = 20;
/// Zero padding after an `NBD_OPT_EXPORT_NAME` reply unless `NO_ZEROES` was agreed.
pub const EXPORT_NAME_REPLY_PADDING_BYTES: usize = 124;

/// The server's first message: magic, `IHAVEOPT`, handshake flags.
pub fn encode_greeting(handshake_flags: u16) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(GREETING_LENGTH_BYTES);
    bytes.put_u64(INIT_MAGIC);
    bytes.put_u64(OPTION_MAGIC);
    bytes.put_u16(handshake_flags);
    bytes
}

/// Decodes the server greeting (client side), returning the handshake flags.
pub fn decode_greeting(bytes: &[u8]) -> Result<u16, DecodeError> {
    let mut reader = WireReader::new(bytes);
    expect_magic(&mut reader, INIT_MAGIC, "greeting INIT_PASSWD")?;
    expect_magic(&mut reader, OPTION_MAGIC, "greeting IHAVEOPT")?;
    let flags = reader.u16("handshake flags")?;
    reader.finish("greeting")?;
    Ok(flags)
}

fn expect_magic(reader: &mut WireReader<'_>, expected: u64, field: &'static str) -> Result<(), DecodeError> {
    let found = reader.u64(field)?;
    if found == expected {
        Ok(())
    } else {
        Err(DecodeError::BadMagic { field, found, expected })
    }
}

/// The header of a client option: which option and how many data bytes follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionHeader {
    /// Option code (`OPT_*`).
    pub option: u32,
    /// Length of the option data that follows.
    pub data_length_bytes: u32,
}

impl OptionHeader {
    /// Decodes the 16-byte option header, checking the magic.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut reader = WireReader::new(bytes);
        expect_magic(&mut reader, OPTION_MAGIC, "option")?;
        let option = reader.u32("option code")?;
        let data_length_bytes = reader.u32("option length")?;
        reader.finish("option header")?;
        Ok(Self { option, data_length_bytes })
    }
}

/// The data of `NBD_OPT_INFO` and `NBD_OPT_GO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRequest {
    /// Export name; empty means the default export.
    pub export_name: String,
    /// Requested information items (`INFO_*`), possibly unknown ones.
    pub info_items: Vec<u16>,
}

/// The data of `NBD_OPT_LIST_META_CONTEXT` and `NBD_OPT_SET_META_CONTEXT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaContextRequest {
    /// Export the contexts are for.
    pub export_name: String,
    /// Queries such as `base:allocation` or `base:`.
    pub queries: Vec<String>,
}

/// A client option, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientOption {
    /// `NBD_OPT_EXPORT_NAME`.
    ExportName(String),
    /// `NBD_OPT_ABORT` (any data is ignored, as the protocol asks).
    Abort,
    /// `NBD_OPT_LIST`.
    List,
    /// `NBD_OPT_STARTTLS`.
    StartTls,
    /// `NBD_OPT_INFO`.
    Info(InfoRequest),
    /// `NBD_OPT_GO`.
    Go(InfoRequest),
    /// `NBD_OPT_STRUCTURED_REPLY`.
    StructuredReply,
    /// `NBD_OPT_LIST_META_CONTEXT`.
    ListMetaContext(MetaContextRequest),
    /// `NBD_OPT_SET_META_CONTEXT`.
    SetMetaContext(MetaContextRequest),
    /// Any other option code, with its data skipped.
    Unknown(u32),
}

impl ClientOption {
    /// Decodes an option from its code and data. Options the protocol says must
    /// carry no data fail when they carry some.
    pub fn decode(option: u32, data: &[u8]) -> Result<Self, DecodeError> {
        match option {
            OPT_EXPORT_NAME => Ok(Self::ExportName(decode_string(data, "export name")?)),
            OPT_ABORT => Ok(Self::Abort),
            OPT_LIST => expect_no_data(data, "NBD_OPT_LIST").map(|()| Self::List),
            OPT_STARTTLS => expect_no_data(data, "NBD_OPT_STARTTLS").map(|()| Self::StartTls),
            OPT_INFO => Ok(Self::Info(decode_info_request(data)?)),
            OPT_GO => Ok(Self::Go(decode_info_request(data)?)),
            OPT_STRUCTURED_REPLY => expect_no_data(data, "NBD_OPT_STRUCTURED_REPLY").map(|()| Self::StructuredReply),
            OPT_LIST_META_CONTEXT => Ok(Self::ListMetaContext(decode_meta_context_request(data)?)),
            OPT_SET_META_CONTEXT => Ok(Self::SetMetaContext(decode_meta_context_request(data)?)),
            other => Ok(Self::Unknown(other)),
        }
    }

    /// The option code.
    pub fn code(&self) -> u32 {
        match self {
            Self::ExportName(_) => OPT_EXPORT_NAME,
            Self::Abort => OPT_ABORT,
            Self::List => OPT_LIST,
            Self::StartTls => OPT_STARTTLS,
            Self::Info(_) => OPT_INFO,
            Self::Go(_) => OPT_GO,
            Self::StructuredReply => OPT_STRUCTURED_REPLY,
            Self::ListMetaContext(_) => OPT_LIST_META_CONTEXT,
            Self::SetMetaContext(_) => OPT_SET_META_CONTEXT,
            Self::Unknown(code) => *code,
        }
    }

    /// Encodes the option with its header, as a client sends it.
    pub fn encode(&self) -> Vec<u8> {
        let mut data = Vec::new();
        match self {
            Self::ExportName(name) => data.extend_from_slice(name.as_bytes()),
            Self::Info(request) | Self::Go(request) => {
                data.put_u32(length_u32(request.export_name.len()));
                data.extend_from_slice(request.export_name.as_bytes());
                data.put_u16(u16::try_from(request.info_items.len()).expect("more than 65535 info items"));
                for item in &request.info_items {
                    data.put_u16(*item);
                }
            }
            Self::ListMetaContext(request) | Self::SetMetaContext(request) => {
                data.put_u32(length_u32(request.export_name.len()));
                data.extend_from_slice(request.export_name.as_bytes());
                data.put_u32(length_u32(request.queries.len()));
                for query in &request.queries {
                    data.put_u32(length_u32(query.len()));
                    data.extend_from_slice(query.as_bytes());
                }
            }
            Self::Abort | Self::List | Self::StartTls | Self::StructuredReply | Self::Unknown(_) => {}
        }
        encode_raw_option(self.code(), &data)
    }
}

/// Encodes an option header and arbitrary data (for tests of malformed options).
pub fn encode_raw_option(option: u32, data: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(OPTION_HEADER_LENGTH_BYTES + data.len());
    bytes.put_u64(OPTION_MAGIC);
    bytes.put_u32(option);
    bytes.put_u32(length_u32(data.len()));
    bytes.extend_from_slice(data);
    bytes
}

fn expect_no_data(data: &[u8], field: &'static str) -> Result<(), DecodeError> {
    if data.is_empty() {
        Ok(())
    } else {
        Err(DecodeError::TrailingBytes { field, trailing_bytes: data.len() })
    }
}

fn decode_info_request(data: &[u8]) -> Result<InfoRequest, DecodeError> {
    let mut reader = WireReader::new(data);
    let name_length = reader.u32("export name length")?;
    let export_name = reader.string(name_length as usize, "export name")?;
    let item_count = reader.u16("information request count")?;
    let mut info_items = Vec::with_capacity(usize::from(item_count).min(reader.remaining_bytes() / 2));
    for _ in 0..item_count {
        info_items.push(reader.u16("information request")?);
    }
    reader.finish("NBD_OPT_INFO/GO data")?;
    Ok(InfoRequest { export_name, info_items })
}

fn decode_meta_context_request(data: &[u8]) -> Result<MetaContextRequest, DecodeError> {
    let mut reader = WireReader::new(data);
    let name_length = reader.u32("export name length")?;
    let export_name = reader.string(name_length as usize, "export name")?;
    let query_count = reader.u32("query count")?;
    // Each query takes at least its 4-byte length, which bounds the allocation.
    let mut queries = Vec::with_capacity((query_count as usize).min(reader.remaining_bytes() / 4));
    for _ in 0..query_count {
        let query_length = reader.u32("query length")?;
        queries.push(reader.string(query_length as usize, "query")?);
    }
    reader.finish("meta context data")?;
    Ok(MetaContextRequest { export_name, queries })
}

/// One `NBD_REP_INFO` item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InfoItem {
    /// Export size and transmission flags.
    Export {
        /// Export size in bytes.
        size_bytes: u64,
        /// Transmission flags.
        transmission_flags: u16,
    },
    /// Canonical export name.
    Name(String),
    /// Human-readable description.
    Description(String),
    /// Block size constraints.
    BlockSize(BlockSizeConstraints),
    /// An item type this code does not know, with its raw payload.
    Unknown {
        /// Item type.
        item_type: u16,
        /// Payload after the type.
        payload: Vec<u8>,
    },
}

/// The block size constraints a server advertises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockSizeConstraints {
    /// Smallest addressable length and alignment.
    pub minimum_bytes: u32,
    /// Length and alignment for efficient I/O.
    pub preferred_bytes: u32,
    /// Largest payload of a read or write request.
    pub maximum_payload_bytes: u32,
}

impl BlockSizeConstraints {
    /// Whether the values obey the protocol: minimum a power of two at most 64 KiB,
    /// preferred a power of two at least max(minimum, 512), maximum at least preferred.
    pub fn is_valid(&self) -> bool {
        self.minimum_bytes.is_power_of_two()
            && self.minimum_bytes <= 65536
            && self.preferred_bytes.is_power_of_two()
            && self.preferred_bytes >= self.minimum_bytes.max(512)
            && self.maximum_payload_bytes >= self.preferred_bytes
    }
}

impl InfoItem {
    fn encode_payload(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        match self {
            Self::Export { size_bytes, transmission_flags } => {
                bytes.put_u16(INFO_EXPORT);
                bytes.put_u64(*size_bytes);
                bytes.put_u16(*transmission_flags);
            }
            Self::Name(name) => {
                bytes.put_u16(INFO_NAME);
                bytes.extend_from_slice(name.as_bytes());
            }
            Self::Description(text) => {
                bytes.put_u16(INFO_DESCRIPTION);
                bytes.extend_from_slice(text.as_bytes());
            }
            Self::BlockSize(constraints) => {
                bytes.put_u16(INFO_BLOCK_SIZE);
                bytes.put_u32(constraints.minimum_bytes);
                bytes.put_u32(constraints.preferred_bytes);
                bytes.put_u32(constraints.maximum_payload_bytes);
            }
            Self::Unknown { item_type, payload } => {
                bytes.put_u16(*item_type);
                bytes.extend_from_slice(payload);
            }
        }
        bytes
    }

    /// Decodes an `NBD_REP_INFO` payload.
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut reader = WireReader::new(payload);
        let item_type = reader.u16("information type")?;
        let item = match item_type {
            INFO_EXPORT => {
                let size_bytes = reader.u64("export size")?;
                let transmission_flags = reader.u16("transmission flags")?;
                Self::Export { size_bytes, transmission_flags }
            }
            INFO_NAME => Self::Name(decode_string(reader.take_rest(), "export name")?),
            INFO_DESCRIPTION => Self::Description(decode_string(reader.take_rest(), "export description")?),
            INFO_BLOCK_SIZE => Self::BlockSize(BlockSizeConstraints {
                minimum_bytes: reader.u32("minimum block size")?,
                preferred_bytes: reader.u32("preferred block size")?,
                maximum_payload_bytes: reader.u32("maximum payload size")?,
            }),
            other => Self::Unknown { item_type: other, payload: reader.take_rest().to_vec() },
        };
        reader.finish("information item")?;
        Ok(item)
    }
}

/// The body of a server option reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionReplyBody {
    /// `NBD_REP_ACK`.
    Ack,
    /// `NBD_REP_SERVER`: one export of a list.
    Server {
        /// Export name.
        export_name: String,
    },
    /// `NBD_REP_INFO`.
    Info(InfoItem),
    /// `NBD_REP_META_CONTEXT`.
    MetaContext {
        /// Context id used in block status replies (zero in list replies).
        context_id: u32,
        /// Context name, such as `base:allocation`.
        name: String,
    },
    /// An error reply (`REP_ERR_*`, bit 31 set) with a message for humans.
    Error {
        /// The reply type.
        reply_type: u32,
        /// A message, possibly empty.
        message: String,
    },
    /// A non-error reply type this code does not know.
    Unknown {
        /// The reply type.
        reply_type: u32,
        /// The raw payload.
        payload: Vec<u8>,
    },
}

/// A server option reply: which option it answers, and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionReply {
    /// The option being answered.
    pub option: u32,
    /// The reply.
    pub body: OptionReplyBody,
}

impl OptionReply {
    /// The reply type on the wire.
    pub fn reply_type(&self) -> u32 {
        match &self.body {
            OptionReplyBody::Ack => REP_ACK,
            OptionReplyBody::Server { .. } => REP_SERVER,
            OptionReplyBody::Info(_) => REP_INFO,
            OptionReplyBody::MetaContext { .. } => REP_META_CONTEXT,
            OptionReplyBody::Error { reply_type, .. } | OptionReplyBody::Unknown { reply_type, .. } => *reply_type,
        }
    }

    /// Encodes the reply with its header.
    pub fn encode(&self) -> Vec<u8> {
        let payload = match &self.body {
            OptionReplyBody::Ack => Vec::new(),
            OptionReplyBody::Server { export_name } => {
                let mut bytes = Vec::new();
                bytes.put_u32(length_u32(export_name.len()));
                bytes.extend_from_slice(export_name.as_bytes());
                bytes
            }
            OptionReplyBody::Info(item) => item.encode_payload(),
            OptionReplyBody::MetaContext { context_id, name } => {
                let mut bytes = Vec::new();
                bytes.put_u32(*context_id);
                bytes.extend_from_slice(name.as_bytes());
                bytes
            }
            OptionReplyBody::Error { message, .. } => message.as_bytes().to_vec(),
            OptionReplyBody::Unknown { payload, .. } => payload.clone(),
        };
        let mut bytes = Vec::with_capacity(OPTION_REPLY_HEADER_LENGTH_BYTES + payload.len());
        bytes.put_u64(OPTION_REPLY_MAGIC);
        bytes.put_u32(self.option);
        bytes.put_u32(self.reply_type());
        bytes.put_u32(length_u32(payload.len()));
        bytes.extend_from_slice(&payload);
        bytes
    }

    /// Decodes a 20-byte option reply header into (option, reply type, payload length).
    pub fn decode_header(bytes: &[u8]) -> Result<(u32, u32, u32), DecodeError> {
        let mut reader = WireReader::new(bytes);
        expect_magic(&mut reader, OPTION_REPLY_MAGIC, "option reply")?;
        let option = reader.u32("option")?;
        let reply_type = reader.u32("reply type")?;
        let length = reader.u32("reply length")?;
        reader.finish("option reply header")?;
        Ok((option, reply_type, length))
    }

    /// Decodes a reply from its header fields and payload.
    pub fn decode_body(option: u32, reply_type: u32, payload: &[u8]) -> Result<Self, DecodeError> {
        let body = match reply_type {
            REP_ACK => expect_no_data(payload, "NBD_REP_ACK").map(|()| OptionReplyBody::Ack)?,
            REP_SERVER => {
                let mut reader = WireReader::new(payload);
                let name_length = reader.u32("export name length")?;
                let export_name = reader.string(name_length as usize, "export name")?;
                // Whatever follows the name is a free-form description; ignore it.
                OptionReplyBody::Server { export_name }
            }
            REP_INFO => OptionReplyBody::Info(InfoItem::decode(payload)?),
            REP_META_CONTEXT => {
                let mut reader = WireReader::new(payload);
                let context_id = reader.u32("context id")?;
                let name = decode_string(reader.take_rest(), "context name")?;
                OptionReplyBody::MetaContext { context_id, name }
            }
            error if error & (1 << 31) != 0 => {
                OptionReplyBody::Error { reply_type: error, message: String::from_utf8_lossy(payload).into_owned() }
            }
            other => OptionReplyBody::Unknown { reply_type: other, payload: payload.to_vec() },
        };
        Ok(Self { option, body })
    }
}

/// The reply to `NBD_OPT_EXPORT_NAME`: size, flags and, unless `NO_ZEROES` was
/// agreed, 124 zero bytes.
pub fn encode_export_name_reply(size_bytes: u64, transmission_flags: u16, no_zeroes: bool) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(10 + EXPORT_NAME_REPLY_PADDING_BYTES);
    bytes.put_u64(size_bytes);
    bytes.put_u16(transmission_flags);
    if !no_zeroes {
        bytes.resize(bytes.len() + EXPORT_NAME_REPLY_PADDING_BYTES, 0);
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greeting_round_trips() {
        let bytes = encode_greeting(HANDSHAKE_FLAG_FIXED_NEWSTYLE | HANDSHAKE_FLAG_NO_ZEROES);
        assert_eq!(&bytes[..8], b"NBDMAGIC");
        assert_eq!(&bytes[8..16], b"IHAVEOPT");
        assert_eq!(decode_greeting(&bytes).unwrap(), 3);
    }

    #[test]
    fn every_option_round_trips() {
        let options = [
            ClientOption::ExportName("disk".into()),
            ClientOption::Abort,
            ClientOption::List,
            ClientOption::StartTls,
            ClientOption::Info(InfoRequest { export_name: "a".into(), info_items: vec![INFO_BLOCK_SIZE, 77] }),
            ClientOption::Go(InfoRequest { export_name: String::new(), info_items: vec![] }),
            ClientOption::StructuredReply,
            ClientOption::ListMetaContext(MetaContextRequest {
                export_name: "a".into(),
                queries: vec!["base:".into()],
            }),
            ClientOption::SetMetaContext(MetaContextRequest {
                export_name: "b".into(),
                queries: vec!["base:allocation".into(), "qemu:dirty".into()],
            }),
            ClientOption::Unknown(4242),
        ];
        for option in options {
            let bytes = option.encode();
            let header = OptionHeader::decode(&bytes[..OPTION_HEADER_LENGTH_BYTES]).unwrap();
            assert_eq!(header.data_length_bytes as usize, bytes.len() - OPTION_HEADER_LENGTH_BYTES);
            let decoded = ClientOption::decode(header.option, &bytes[OPTION_HEADER_LENGTH_BYTES..]).unwrap();
            assert_eq!(decoded, option);
        }
    }

    #[test]
    fn go_with_name_length_beyond_data_is_an_error() {
        let mut data = Vec::new();
        data.put_u32(100);
        data.extend_from_slice(b"short");
        assert!(matches!(ClientOption::decode(OPT_GO, &data), Err(DecodeError::Truncated { .. })));
    }

    #[test]
    fn meta_context_with_huge_query_count_fails_without_allocating() {
        let mut data = Vec::new();
        data.put_u32(0);
        data.put_u32(u32::MAX);
        assert!(ClientOption::decode(OPT_SET_META_CONTEXT, &data).is_err());
    }

    #[test]
    fn list_with_data_is_an_error() {
        assert!(ClientOption::decode(OPT_LIST, b"x").is_err());
        assert_eq!(ClientOption::decode(OPT_ABORT, b"ignored").unwrap(), ClientOption::Abort);
    }

    #[test]
    fn option_replies_round_trip() {
        let replies = [
            OptionReplyBody::Ack,
            OptionReplyBody::Server { export_name: "disk".into() },
            OptionReplyBody::Info(InfoItem::Export { size_bytes: 1 << 30, transmission_flags: 0x1ff }),
            OptionReplyBody::Info(InfoItem::Name("disk".into())),
            OptionReplyBody::Info(InfoItem::Description("a disk".into())),
            OptionReplyBody::Info(InfoItem::BlockSize(BlockSizeConstraints {
                minimum_bytes: 512,
                preferred_bytes: 4096,
                maximum_payload_bytes: 1 << 25,
            })),
            OptionReplyBody::MetaContext { context_id: 1, name: "base:allocation".into() },
            OptionReplyBody::Error { reply_type: REP_ERR_UNKNOWN, message: "no export".into() },
        ];
        for body in replies {
            let reply = OptionReply { option: OPT_GO, body };
            let bytes = reply.encode();
            let (option, reply_type, length) = OptionReply::decode_header(&bytes[..20]).unwrap();
            assert_eq!(length as usize, bytes.len() - 20);
            assert_eq!(OptionReply::decode_body(option, reply_type, &bytes[20..]).unwrap(), reply);
        }
    }

    #[test]
    fn export_name_reply_pads_unless_no_zeroes() {
        assert_eq!(encode_export_name_reply(4096, 1, false).len(), 134);
        assert_eq!(encode_export_name_reply(4096, 1, true).len(), 10);
    }

    #[test]
    fn block_size_validity_follows_the_protocol() {
        let good = BlockSizeConstraints { minimum_bytes: 512, preferred_bytes: 4096, maximum_payload_bytes: 1 << 25 };
        assert!(good.is_valid());
        assert!(!BlockSizeConstraints { minimum_bytes: 513, ..good }.is_valid());
        assert!(!BlockSizeConstraints { preferred_bytes: 256, minimum_bytes: 256, ..good }.is_valid());
        assert!(!BlockSizeConstraints { maximum_payload_bytes: 1024, ..good }.is_valid());
    }
}
