//! The handshake phase of a session: the greeting, option haggling and
//! attaching an export, up to the first request.
//!
//! This file drives the exchange; the options' and replies' wire format is
//! [`crate::protocol::handshake`]. Option data beyond
//! [`OPTION_DATA_MAX_BYTES`] ends the connection; every other bad option gets an
//! error reply and haggling goes on.

use std::io::{Read, Write};

use tracing::{debug, warn};

use super::{
    Attachment, FrameRead, HandshakeOutcome, Session, SessionEnd, SessionError, BASE_ALLOCATION,
    BASE_ALLOCATION_CONTEXT_ID, BLOCK_SIZE_CONSTRAINTS, OPTION_DATA_MAX_BYTES,
};
use crate::backend::{Backend, Export, ExportInfo};
use crate::protocol::handshake::*;
use crate::protocol::DecodeError;

/// State of option haggling.
#[derive(Debug, Default)]
struct Negotiation {
    client_no_zeroes: bool,
    structured_replies: bool,
    /// Canonical name of the export `base:allocation` was selected for, if any.
    meta_context_export: Option<String>,
}

impl<'b, B: Backend> Session<'b, B> {
    pub(super) fn handshake<R: Read, W: Write>(
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
