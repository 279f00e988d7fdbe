//! Bad input during the handshake gets the reply the protocol prescribes: an
//! error reply where one exists (and the negotiation carries on), a hard
//! disconnect where none does.

use crate::common;

use std::sync::Arc;

use common::{RawClient, TestServer};
use proxima_nbd::protocol::handshake::*;
use proxima_nbd::MemoryBackend;

const FIXED: u32 = CLIENT_FLAG_FIXED_NEWSTYLE;

fn server() -> TestServer {
    TestServer::start(Arc::new(MemoryBackend::new().with_export("disk", 1 << 20, false)))
}

fn error_type(reply: &OptionReply) -> u32 {
    match &reply.body {
        OptionReplyBody::Error { reply_type, .. } => *reply_type,
        other => panic!("expected an error reply, got {other:?}"),
    }
}

fn go(client: &mut RawClient, export: &str) -> Vec<OptionReply> {
    let request = InfoRequest { export_name: export.into(), info_items: vec![INFO_NAME, INFO_DESCRIPTION] };
    client.send(&ClientOption::Go(request).encode());
    let mut replies = Vec::new();
    loop {
        let reply = client.read_option_reply();
        let last = !matches!(reply.body, OptionReplyBody::Info(_));
        replies.push(reply);
        if last {
            return replies;
        }
    }
}

#[test]
fn unknown_client_flags_are_a_hard_disconnect() {
    let server = server();
    let mut client = RawClient::connect(&server.socket_path, FIXED | 1 << 7);
    assert!(client.is_closed_by_server());
    assert_eq!(server.stop().failed_connection_count, 1);
}

#[test]
fn bad_option_magic_and_oversized_options_are_hard_disconnects() {
    let server = server();
    let mut client = RawClient::connect(&server.socket_path, FIXED);
    let mut option = ClientOption::List.encode();
    option[0] ^= 0xff;
    client.send(&option);
    assert!(client.is_closed_by_server());

    let mut client = RawClient::connect(&server.socket_path, FIXED);
    let mut header = encode_raw_option(OPT_GO, &[]);
    header[12..16].copy_from_slice(&(1u32 << 20).to_be_bytes());
    client.send(&header);
    assert!(client.is_closed_by_server());
    assert_eq!(server.stop().failed_connection_count, 2);
}

#[test]
fn export_name_of_an_unknown_export_is_a_hard_disconnect() {
    let server = server();
    let mut client = RawClient::connect(&server.socket_path, FIXED);
    client.send(&ClientOption::ExportName("nope".into()).encode());
    assert!(client.is_closed_by_server());
}

#[test]
fn export_name_replies_with_or_without_zero_padding() {
    let server = server();
    for (flags, reply_bytes) in [(FIXED, 134), (FIXED | CLIENT_FLAG_NO_ZEROES, 10)] {
        let mut client = RawClient::connect(&server.socket_path, flags);
        client.send(&ClientOption::ExportName("disk".into()).encode());
        let reply = client.read_bytes(reply_bytes);
        assert_eq!(u64::from_be_bytes(reply[..8].try_into().unwrap()), 1 << 20);
        assert!(reply[10..].iter().all(|&byte| byte == 0));
    }
}

#[test]
fn erroneous_options_get_error_replies_and_negotiation_continues() {
    let server = server();
    let mut client = RawClient::connect(&server.socket_path, FIXED | CLIENT_FLAG_NO_ZEROES);

    let replies = go(&mut client, "missing");
    assert_eq!(replies.len(), 1);
    assert_eq!(error_type(&replies[0]), REP_ERR_UNKNOWN);

    // A name length pointing past the option data.
    client.send(&encode_raw_option(OPT_GO, &[0, 0, 1, 0, b'd']));
    assert_eq!(error_type(&client.read_option_reply()), REP_ERR_INVALID);

    client.send(&encode_raw_option(OPT_LIST, b"data"));
    assert_eq!(error_type(&client.read_option_reply()), REP_ERR_INVALID);

    client.send(&ClientOption::Unknown(99).encode());
    assert_eq!(error_type(&client.read_option_reply()), REP_ERR_UNSUP);
    client.send(&ClientOption::StartTls.encode());
    assert_eq!(error_type(&client.read_option_reply()), REP_ERR_UNSUP);

    let request = MetaContextRequest { export_name: "disk".into(), queries: vec!["base:allocation".into()] };
    client.send(&ClientOption::SetMetaContext(request.clone()).encode());
    assert_eq!(error_type(&client.read_option_reply()), REP_ERR_INVALID, "meta contexts need structured replies");

    client.send(&ClientOption::StructuredReply.encode());
    assert_eq!(client.read_option_reply().body, OptionReplyBody::Ack);
    client.send(&ClientOption::StructuredReply.encode());
    assert_eq!(error_type(&client.read_option_reply()), REP_ERR_INVALID);

    // Unknown namespaces are ignored; `base:` lists base:allocation.
    let list = MetaContextRequest { export_name: "disk".into(), queries: vec!["qemu:dirty".into(), "base:".into()] };
    client.send(&ClientOption::ListMetaContext(list).encode());
    assert_eq!(
        client.read_option_reply().body,
        OptionReplyBody::MetaContext { context_id: 0, name: "base:allocation".into() }
    );
    assert_eq!(client.read_option_reply().body, OptionReplyBody::Ack);

    let replies = go(&mut client, "disk");
    let last = replies.last().unwrap();
    assert_eq!(last.body, OptionReplyBody::Ack);
    assert!(
        replies.contains(&OptionReply { option: OPT_GO, body: OptionReplyBody::Info(InfoItem::Name("disk".into())) })
    );
    assert!(replies.iter().any(|reply| matches!(reply.body, OptionReplyBody::Info(InfoItem::BlockSize(_)))));
    assert_eq!(server.stop().failed_connection_count, 0);
}

#[test]
fn abort_is_acknowledged_and_ends_the_session() {
    let server = server();
    let mut client = RawClient::connect(&server.socket_path, FIXED);
    client.send(&ClientOption::Abort.encode());
    assert_eq!(client.read_option_reply().body, OptionReplyBody::Ack);
    assert!(client.is_closed_by_server());
    assert_eq!(server.stop().failed_connection_count, 0);
}

#[test]
fn a_truncated_option_ends_only_that_connection() {
    let server = server();
    let (mut healthy, _) = RawClient::attach(&server.socket_path, "disk", true, false);
    let mut client = RawClient::connect(&server.socket_path, FIXED);
    let option = ClientOption::Go(InfoRequest { export_name: "disk".into(), info_items: vec![] }).encode();
    client.send(&option[..option.len() - 3]);
    client.stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(client.is_closed_by_server());
    healthy.request(proxima_nbd::protocol::transmission::Command::Flush, 0, 7, 0, 0);
    assert_eq!(healthy.read_simple_reply(), (7, 0));
    drop(healthy);
    assert_eq!(server.stop().failed_connection_count, 1);
}
