//! Fuzzes every NBD decoder with arbitrary bytes: each must return a value or an
//! error, never panic, and whatever decodes must encode back to a message that
//! decodes to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proxima_nbd::protocol::handshake::{decode_greeting, ClientOption, InfoItem, OptionHeader, OptionReply};
use proxima_nbd::protocol::transmission::{ChunkHeader, RequestHeader, StructuredChunk};

fuzz_target!(|data: &[u8]| {
    let _ = decode_greeting(data);
    let _ = OptionHeader::decode(data);
    let _ = InfoItem::decode(data);
    let _ = OptionReply::decode_header(data);
    if data.len() >= 4 {
        let code = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
        if let Ok(option) = ClientOption::decode(code, &data[4..]) {
            let encoded = option.encode();
            let header = OptionHeader::decode(&encoded[..16]).expect("encoded option header");
            assert_eq!(ClientOption::decode(header.option, &encoded[16..]).as_ref(), Ok(&option));
        }
        let _ = OptionReply::decode_body(code, code.rotate_left(7), &data[4..]);
    }
    if let Ok(header) = RequestHeader::decode(data) {
        assert_eq!(RequestHeader::decode(&header.encode()), Ok(header));
    }
    if data.len() >= 20 {
        if let Ok(header) = ChunkHeader::decode(&data[..20]) {
            if let Ok(chunk) = StructuredChunk::decode(header, &data[20..]) {
                let encoded = chunk.encode();
                let header = ChunkHeader::decode(&encoded[..20]).expect("encoded chunk header");
                assert_eq!(StructuredChunk::decode(header, &encoded[20..]).as_ref(), Ok(&chunk));
            }
        }
    }
});
