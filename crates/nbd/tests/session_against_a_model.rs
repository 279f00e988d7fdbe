//! Property tests of one session driven from a byte stream (inline, no threads):
//!
//! - arbitrary bytes, before or after a valid handshake, never panic the session;
//! - a random sequence of valid and invalid requests behaves like a plain byte
//!   array: every request gets exactly one reply, in order, reads return what the
//!   model holds (trimmed bytes are unspecified until rewritten), invalid requests
//!   get the errno the protocol names, and block status never calls a range zero
//!   that holds data.
//!
//! The seed is fixed (override with PROXIMA_TEST_SEED) so a failure reproduces.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use proxima_nbd::fuzzing::{client_handshake_bytes, run_session_on_bytes};
use proxima_nbd::protocol::handshake::*;
use proxima_nbd::protocol::transmission::*;
use proxima_nbd::protocol::Errno;

const EXPORT_BYTES: u64 = 1 << 20;
const SECTOR: u64 = 512;

fn config(cases: u32) -> Config {
    let seed = std::env::var("PROXIMA_TEST_SEED").ok().and_then(|seed| seed.parse().ok()).unwrap_or(20261121);
    eprintln!("seed {seed}");
    Config { cases, rng_seed: RngSeed::Fixed(seed), failure_persistence: None, ..Config::default() }
}

#[derive(Debug, Clone)]
enum Operation {
    Write { sector: u64, sector_count: u64, fill: u8, fua: bool },
    Read { sector: u64, sector_count: u64 },
    Trim { sector: u64, sector_count: u64 },
    WriteZeroes { sector: u64, sector_count: u64, no_hole: bool },
    BlockStatus { sector: u64, sector_count: u64 },
    Flush,
    Misaligned { offset: u64 },
    UnknownCommand { code: u16 },
}

fn operation() -> impl Strategy<Value = Operation> {
    // Sectors run a little past the end of the export to exercise range checks.
    let sector = 0..(EXPORT_BYTES / SECTOR + 16);
    let count = 0u64..40;
    prop_oneof![
        4 => (sector.clone(), count.clone(), any::<u8>(), any::<bool>())
            .prop_map(|(sector, sector_count, fill, fua)| Operation::Write { sector, sector_count, fill, fua }),
        4 => (sector.clone(), count.clone()).prop_map(|(sector, sector_count)| Operation::Read { sector, sector_count }),
        1 => (sector.clone(), count.clone()).prop_map(|(sector, sector_count)| Operation::Trim { sector, sector_count }),
        1 => (sector.clone(), count.clone(), any::<bool>())
            .prop_map(|(sector, sector_count, no_hole)| Operation::WriteZeroes { sector, sector_count, no_hole }),
        1 => (sector, count).prop_map(|(sector, sector_count)| Operation::BlockStatus { sector, sector_count }),
        1 => Just(Operation::Flush),
        1 => (1u64..511).prop_map(|offset| Operation::Misaligned { offset }),
        1 => (8u16..200).prop_map(|code| Operation::UnknownCommand { code }),
    ]
}

/// The bytes the export should hold; `None` where a trim left them unspecified.
struct Model {
    bytes: Vec<Option<u8>>,
}

impl Model {
    fn in_range(sector: u64, sector_count: u64) -> bool {
        (sector + sector_count) * SECTOR <= EXPORT_BYTES
    }

    fn set(&mut self, sector: u64, sector_count: u64, value: Option<u8>) {
        let range = (sector * SECTOR) as usize..((sector + sector_count) * SECTOR) as usize;
        self.bytes[range].fill(value);
    }
}

fn encode(operation: &Operation, cookie: u64) -> Vec<u8> {
    let header = |command: Command, flags: u16, sector: u64, sector_count: u64| RequestHeader {
        flags,
        command_code: command.code(),
        cookie,
        offset_bytes: sector * SECTOR,
        length_bytes: (sector_count * SECTOR) as u32,
    };
    let request = match *operation {
        Operation::Write { sector, sector_count, fill, fua } => {
            let mut bytes =
                header(Command::Write, if fua { COMMAND_FLAG_FUA } else { 0 }, sector, sector_count).encode().to_vec();
            bytes.extend(std::iter::repeat_n(fill, (sector_count * SECTOR) as usize));
            return bytes;
        }
        Operation::Read { sector, sector_count } => header(Command::Read, 0, sector, sector_count),
        Operation::Trim { sector, sector_count } => header(Command::Trim, 0, sector, sector_count),
        Operation::WriteZeroes { sector, sector_count, no_hole } => {
            header(Command::WriteZeroes, if no_hole { COMMAND_FLAG_NO_HOLE } else { 0 }, sector, sector_count)
        }
        Operation::BlockStatus { sector, sector_count } => header(Command::BlockStatus, 0, sector, sector_count),
        Operation::Flush => header(Command::Flush, 0, 0, 0),
        Operation::Misaligned { offset } => {
            RequestHeader { flags: 0, command_code: 0, cookie, offset_bytes: offset, length_bytes: 512 }
        }
        Operation::UnknownCommand { code } => {
            RequestHeader { flags: 0, command_code: code, cookie, offset_bytes: 0, length_bytes: 0 }
        }
    };
    request.encode().to_vec()
}

/// Reads option replies until the final ACK of NBD_OPT_GO; returns the rest.
fn skip_handshake(mut output: &[u8]) -> &[u8] {
    decode_greeting(&output[..GREETING_LENGTH_BYTES]).expect("greeting");
    output = &output[GREETING_LENGTH_BYTES..];
    loop {
        let (option, reply_type, length) = OptionReply::decode_header(&output[..20]).expect("option reply");
        output = &output[20 + length as usize..];
        if option == OPT_GO && reply_type == REP_ACK {
            return output;
        }
        assert!(reply_type & (1 << 31) == 0, "option {option} failed with {reply_type:#x}");
    }
}

/// Splits the next reply off the output: (cookie, error, chunk).
fn next_reply(output: &mut &[u8]) -> (u64, u32, Option<StructuredChunk>) {
    if output[..4] == 0x6744_6698u32.to_be_bytes() {
        let error = u32::from_be_bytes(output[4..8].try_into().unwrap());
        let cookie = u64::from_be_bytes(output[8..16].try_into().unwrap());
        *output = &output[16..];
        return (cookie, error, None);
    }
    let header = ChunkHeader::decode(&output[..20]).expect("chunk header");
    let end = 20 + header.payload_length_bytes as usize;
    let chunk = StructuredChunk::decode(header, &output[20..end]).expect("chunk");
    *output = &output[end..];
    assert_eq!(chunk.flags & REPLY_FLAG_DONE, REPLY_FLAG_DONE, "every reply here is one chunk");
    let error = match &chunk.payload {
        ChunkPayload::Error { error, .. } => *error,
        _ => 0,
    };
    (chunk.cookie, error, Some(chunk))
}

fn expected_errno(operation: &Operation) -> Option<Errno> {
    match *operation {
        Operation::Write { sector, sector_count, .. } | Operation::WriteZeroes { sector, sector_count, .. }
            if !Model::in_range(sector, sector_count) =>
        {
            Some(Errno::NoSpc)
        }
        Operation::Read { sector, sector_count } | Operation::Trim { sector, sector_count }
            if !Model::in_range(sector, sector_count) =>
        {
            Some(Errno::Inval)
        }
        Operation::BlockStatus { sector, sector_count }
            if sector_count == 0 || !Model::in_range(sector, sector_count) =>
        {
            Some(Errno::Inval)
        }
        Operation::Misaligned { .. } | Operation::UnknownCommand { .. } => Some(Errno::Inval),
        _ => None,
    }
}

fn check_reply(model: &mut Model, operation: &Operation, error: u32, chunk: Option<StructuredChunk>) {
    if let Some(errno) = expected_errno(operation) {
        assert_eq!(error, errno.code(), "{operation:?}");
        return;
    }
    assert_eq!(error, 0, "{operation:?}");
    match *operation {
        Operation::Write { sector, sector_count, fill, .. } => model.set(sector, sector_count, Some(fill)),
        Operation::Trim { sector, sector_count } => model.set(sector, sector_count, None),
        Operation::WriteZeroes { sector, sector_count, .. } => model.set(sector, sector_count, Some(0)),
        Operation::Read { sector, sector_count } => {
            let start = (sector * SECTOR) as usize;
            let data = match chunk.map(|chunk| chunk.payload) {
                Some(ChunkPayload::OffsetData { offset_bytes, data }) => {
                    assert_eq!(offset_bytes, sector * SECTOR);
                    data
                }
                Some(ChunkPayload::None) if sector_count == 0 => Vec::new(),
                other => panic!("read reply {other:?}"),
            };
            assert_eq!(data.len() as u64, sector_count * SECTOR);
            for (index, byte) in data.iter().enumerate() {
                if let Some(expected) = model.bytes[start + index] {
                    assert_eq!(*byte, expected, "byte {} after {operation:?}", start + index);
                }
            }
        }
        Operation::BlockStatus { sector, sector_count } => {
            let Some(ChunkPayload::BlockStatus { descriptors, .. }) = chunk.map(|chunk| chunk.payload) else {
                panic!("block status reply missing");
            };
            let mut position = (sector * SECTOR) as usize;
            for descriptor in &descriptors {
                let end = position + descriptor.length_bytes as usize;
                if descriptor.flags & STATE_ZERO != 0 {
                    assert!(model.bytes[position..end].iter().all(|byte| byte.unwrap_or(0) == 0), "{descriptors:?}");
                }
                position = end;
            }
            assert!(position as u64 <= (sector + sector_count) * SECTOR);
            assert!(!descriptors.is_empty());
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = run_session_on_bytes(&bytes);
    }

    #[test]
    fn arbitrary_bytes_after_a_valid_handshake_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut bytes = client_handshake_bytes();
        bytes.extend(tail);
        let _ = run_session_on_bytes(&bytes);
    }

    #[test]
    fn requests_behave_like_a_byte_array(operations in proptest::collection::vec(operation(), 1..60)) {
        let mut input = client_handshake_bytes();
        for (cookie, operation) in operations.iter().enumerate() {
            input.extend(encode(operation, cookie as u64));
        }
        input.extend(RequestHeader { flags: 0, command_code: 2, cookie: 0, offset_bytes: 0, length_bytes: 0 }.encode());
        let (result, output) = run_session_on_bytes(&input);
        prop_assert!(result.is_ok(), "{result:?}");
        let mut replies = skip_handshake(&output);
        let mut model = Model { bytes: vec![Some(0); EXPORT_BYTES as usize] };
        for (cookie, operation) in operations.iter().enumerate() {
            let (reply_cookie, error, chunk) = next_reply(&mut replies);
            prop_assert_eq!(reply_cookie, cookie as u64);
            check_reply(&mut model, operation, error, chunk);
        }
        prop_assert!(replies.is_empty(), "{} bytes after the last reply", replies.len());
    }
}
