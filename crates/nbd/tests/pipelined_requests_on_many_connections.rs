//! Many connections, each pipelining hundreds of writes and reads without waiting
//! for replies: every request is answered exactly once, with its cookie, and every
//! read returns what that connection wrote (connections own disjoint regions).

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use common::{seeded_bytes, RawClient, TestServer};
use proxima_nbd::protocol::transmission::{ChunkPayload, Command, COMMAND_FLAG_FUA};
use proxima_nbd::MemoryBackend;

const CONNECTIONS: u64 = 8;
const REGION_BYTES: u64 = 4 << 20;
const WRITES_PER_CONNECTION: u64 = 200;

fn exercise_connection(server_socket: &std::path::Path, connection: u64) {
    let (mut client, _) = RawClient::attach(server_socket, "disk", true, false);
    let region_start = connection * REGION_BYTES;
    let block_bytes = 16 * 1024u64;
    let mut expected = HashMap::new();
    // Writes first, all sent before any reply is read.
    let sender = {
        let mut stream = client.stream.try_clone().unwrap();
        std::thread::spawn(move || {
            use std::io::Write;
            for index in 0..WRITES_PER_CONNECTION {
                let offset = region_start + (index % (REGION_BYTES / block_bytes)) * block_bytes;
                let header = proxima_nbd::protocol::transmission::RequestHeader {
                    flags: if index % 7 == 0 { COMMAND_FLAG_FUA } else { 0 },
                    command_code: Command::Write.code(),
                    cookie: index,
                    offset_bytes: offset,
                    length_bytes: block_bytes as u32,
                };
                stream.write_all(&header.encode()).unwrap();
                stream.write_all(&seeded_bytes(connection * 1000 + index, block_bytes as usize)).unwrap();
            }
        })
    };
    let mut answered = vec![false; WRITES_PER_CONNECTION as usize];
    for _ in 0..WRITES_PER_CONNECTION {
        let (cookie, error, _) = client.read_any_reply();
        assert_eq!(error, 0);
        assert!(!std::mem::replace(&mut answered[cookie as usize], true), "cookie {cookie} answered twice");
    }
    sender.join().unwrap();
    // The last write to each block wins.
    for index in 0..WRITES_PER_CONNECTION {
        let offset = region_start + (index % (REGION_BYTES / block_bytes)) * block_bytes;
        expected.insert(offset, seeded_bytes(connection * 1000 + index, block_bytes as usize));
    }
    for (cookie, offset) in expected.keys().enumerate() {
        client.request(Command::Read, 0, cookie as u64 + 10_000, *offset, block_bytes as u32);
    }
    let offsets: Vec<u64> = expected.keys().copied().collect();
    for _ in 0..offsets.len() {
        let (cookie, error, chunk) = client.read_any_reply();
        assert_eq!(error, 0);
        let offset = offsets[(cookie - 10_000) as usize];
        let Some(ChunkPayload::OffsetData { offset_bytes, data }) = chunk.map(|chunk| chunk.payload) else {
            panic!("read reply without data");
        };
        assert_eq!(offset_bytes, offset);
        assert!(data == expected[&offset], "connection {connection} block at {offset} differs");
    }
}

#[test]
fn pipelined_requests_on_many_connections_are_all_answered_correctly() {
    let backend = MemoryBackend::new().with_export("disk", CONNECTIONS * REGION_BYTES, false);
    let server = TestServer::start(Arc::new(backend));
    let socket = server.socket_path.clone();
    let threads: Vec<_> = (0..CONNECTIONS)
        .map(|connection| {
            let socket = socket.clone();
            std::thread::spawn(move || exercise_connection(&socket, connection))
        })
        .collect();
    for thread in threads {
        thread.join().expect("a connection's checks failed");
    }
    let summary = server.stop();
    assert_eq!(summary.connection_count, CONNECTIONS);
    assert_eq!(summary.failed_connection_count, 0);
}
