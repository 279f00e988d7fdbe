//! Bad requests in the transmission phase: each gets the error the protocol names
//! (a write's payload is consumed, and the connection carries on), while framing
//! the server cannot trust ends the connection with a hard disconnect and leaves
//! other connections untouched.

use crate::common;

use std::sync::Arc;

use common::{RawClient, TestServer};
use proxima_nbd::protocol::transmission::{Command, *};
use proxima_nbd::protocol::Errno;
use proxima_nbd::MemoryBackend;

const SIZE: u64 = 1 << 20;

fn server() -> TestServer {
    let mut backend = MemoryBackend::new();
    backend.add_export("disk", SIZE, false);
    backend.add_export("snapshot", SIZE, true).load(0, &[0xee; 4096]);
    TestServer::start(Arc::new(backend))
}

/// Sends a request and returns the error of its reply.
fn error_of(client: &mut RawClient, command: Command, flags: u16, offset: u64, length: u32, payload: &[u8]) -> u32 {
    client.request(command, flags, 77, offset, length);
    client.send(payload);
    let (cookie, error, _) = client.read_any_reply();
    assert_eq!(cookie, 77);
    error
}

/// A write and a read-back on the same connection succeed.
fn assert_still_serving(client: &mut RawClient) {
    client.request(Command::Write, 0, 1, 4096, 512);
    client.send(&[0x3c; 512]);
    assert_eq!(client.read_any_reply().1, 0);
    client.request(Command::Read, 0, 2, 4096, 512);
    let (cookie, error, chunk) = client.read_any_reply();
    assert_eq!((cookie, error), (2, 0));
    let chunk = chunk.expect("structured replies were negotiated");
    assert_eq!(chunk.payload, ChunkPayload::OffsetData { offset_bytes: 4096, data: vec![0x3c; 512] });
    assert_eq!(chunk.flags & REPLY_FLAG_DONE, REPLY_FLAG_DONE);
}

#[test]
fn invalid_requests_get_error_replies_and_the_connection_carries_on() {
    let server = server();
    let (mut client, flags) = RawClient::attach(&server.socket_path, "disk", true, false);
    assert_eq!(flags & proxima_nbd::protocol::handshake::TRANSMISSION_FLAG_READ_ONLY, 0);
    let inval = Errno::Inval.code();
    let cases: Vec<(Command, u16, u64, u32, Vec<u8>, u32)> = vec![
        (Command::Read, 0, SIZE, 512, vec![], inval),
        (Command::Read, 0, SIZE - 512, 1024, vec![], inval),
        (Command::Read, 0, u64::MAX - 511, 1024, vec![], inval),
        (Command::Read, 0, 100, 512, vec![], inval),
        (Command::Read, 0, 0, 100, vec![], inval),
        (Command::Read, 0, 0, (1 << 25) + 512, vec![], Errno::Overflow.code()),
        (Command::Read, COMMAND_FLAG_NO_HOLE, 0, 512, vec![], inval),
        (Command::Write, 0, SIZE, 512, vec![1; 512], Errno::NoSpc.code()),
        (Command::Write, 0, 3, 512, vec![1; 512], inval),
        (Command::Write, COMMAND_FLAG_REQ_ONE, 0, 512, vec![1; 512], inval),
        (Command::WriteZeroes, 0, SIZE - 512, 4096, vec![], Errno::NoSpc.code()),
        (Command::Trim, 0, SIZE, 512, vec![], inval),
        (Command::Flush, 0, 512, 0, vec![], inval),
        (Command::BlockStatus, 0, 0, 4096, vec![], inval),
    ];
    for (command, flags, offset, length, payload, expected) in cases {
        let error = error_of(&mut client, command, flags, offset, length, &payload);
        assert_eq!(error, expected, "{command:?} flags {flags:#x} offset {offset} length {length}");
    }
    // An unknown command.
    client.send(&RequestHeader { flags: 0, command_code: 42, cookie: 77, offset_bytes: 0, length_bytes: 0 }.encode());
    assert_eq!(client.read_any_reply().1, inval);
    assert_still_serving(&mut client);
    drop(client);
    assert_eq!(server.stop().failed_connection_count, 0);
}

#[test]
fn simple_replies_carry_the_same_errors() {
    let server = server();
    let (mut client, _) = RawClient::attach(&server.socket_path, "disk", false, false);
    client.request(Command::Read, 0, 5, SIZE, 512);
    assert_eq!(client.read_simple_reply(), (5, Errno::Inval.code()));
    client.request(Command::Read, COMMAND_FLAG_DF, 6, 0, 512);
    assert_eq!(client.read_simple_reply(), (6, Errno::Inval.code()), "DF needs structured replies");
    client.request(Command::Read, 0, 7, 0, 1024);
    assert_eq!(client.read_simple_reply(), (7, 0));
    assert_eq!(client.read_bytes(1024), vec![0; 1024]);
}

#[test]
fn writes_to_a_read_only_export_are_refused_with_eperm() {
    let server = server();
    let (mut client, flags) = RawClient::attach(&server.socket_path, "snapshot", true, false);
    assert_ne!(flags & proxima_nbd::protocol::handshake::TRANSMISSION_FLAG_READ_ONLY, 0);
    let perm = Errno::Perm.code();
    assert_eq!(error_of(&mut client, Command::Write, 0, 0, 512, &[1; 512]), perm);
    assert_eq!(error_of(&mut client, Command::Trim, 0, 0, 4096, &[]), perm);
    assert_eq!(error_of(&mut client, Command::WriteZeroes, 0, 0, 4096, &[]), perm);
    client.request(Command::Read, 0, 9, 0, 4096);
    let (_, error, chunk) = client.read_any_reply();
    assert_eq!(error, 0);
    assert_eq!(chunk.unwrap().payload, ChunkPayload::OffsetData { offset_bytes: 0, data: vec![0xee; 4096] });
}

#[test]
fn block_status_reports_holes_zeroes_and_data() {
    let server = server();
    let (mut client, _) = RawClient::attach(&server.socket_path, "disk", true, true);
    client.request(Command::Write, 0, 1, 8192, 4096);
    client.send(&[9; 4096]);
    assert_eq!(client.read_any_reply().1, 0);
    client.request(Command::WriteZeroes, COMMAND_FLAG_NO_HOLE | COMMAND_FLAG_FAST_ZERO, 2, 16384, 4096);
    assert_eq!(client.read_any_reply().1, 0);
    client.request(Command::BlockStatus, 0, 3, 0, 32768);
    let (_, error, chunk) = client.read_any_reply();
    assert_eq!(error, 0);
    let descriptor = |length_bytes, flags| BlockStatusDescriptor { length_bytes, flags };
    let hole = STATE_HOLE | STATE_ZERO;
    assert_eq!(
        chunk.unwrap().payload,
        ChunkPayload::BlockStatus {
            context_id: 1,
            descriptors: vec![
                descriptor(8192, hole),
                descriptor(4096, 0),
                descriptor(4096, hole),
                descriptor(4096, STATE_ZERO),
                descriptor(12288, hole),
            ],
        }
    );
    client.request(Command::BlockStatus, COMMAND_FLAG_REQ_ONE, 4, 8192, 2048);
    let chunk = client.read_any_reply().2.unwrap();
    assert_eq!(chunk.payload, ChunkPayload::BlockStatus { context_id: 1, descriptors: vec![descriptor(2048, 0)] });
}

#[test]
fn unrecoverable_framing_is_a_hard_disconnect_that_spares_other_connections() {
    let server = server();
    let (mut healthy, _) = RawClient::attach(&server.socket_path, "disk", true, false);

    let (mut bad_magic, _) = RawClient::attach(&server.socket_path, "disk", true, false);
    let mut header =
        RequestHeader { flags: 0, command_code: 0, cookie: 1, offset_bytes: 0, length_bytes: 512 }.encode();
    header[3] ^= 1;
    bad_magic.send(&header);
    assert!(bad_magic.is_closed_by_server());

    let (mut oversized, _) = RawClient::attach(&server.socket_path, "disk", true, false);
    oversized.request(Command::Write, 0, 1, 0, (1 << 25) + 4096);
    assert!(oversized.is_closed_by_server());

    let (mut truncated, _) = RawClient::attach(&server.socket_path, "disk", true, false);
    truncated.request(Command::Write, 0, 1, 0, 4096);
    truncated.send(&[1; 100]);
    truncated.stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(truncated.is_closed_by_server());

    let (mut garbage, _) = RawClient::attach(&server.socket_path, "disk", false, false);
    garbage.send(&common::seeded_bytes(99, 1000));
    assert!(garbage.is_closed_by_server());

    assert_still_serving(&mut healthy);
    drop(healthy);
    assert_eq!(server.stop().failed_connection_count, 4);
}

#[test]
fn disconnect_answers_every_request_in_flight_first() {
    let server = server();
    let (mut client, _) = RawClient::attach(&server.socket_path, "disk", true, false);
    for cookie in 0..64u64 {
        client.request(Command::Write, COMMAND_FLAG_FUA, cookie, cookie * 4096, 4096);
        client.send(&[cookie as u8; 4096]);
    }
    client.request(Command::Disconnect, 0, 999, 0, 0);
    let mut cookies: Vec<u64> = (0..64)
        .map(|_| client.read_any_reply())
        .map(|(cookie, error, _)| {
            assert_eq!(error, 0);
            cookie
        })
        .collect();
    cookies.sort_unstable();
    assert_eq!(cookies, (0..64).collect::<Vec<_>>());
    assert!(client.is_closed_by_server());
}
