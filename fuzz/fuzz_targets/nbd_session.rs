//! Fuzzes a whole NBD session from the client's byte stream. The first byte picks
//! whether a valid handshake is sent first, so that the fuzzer reaches the
//! transmission phase (request validation and execution) as easily as the
//! handshake itself. Any panic is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proxima_nbd::fuzzing::{client_handshake_bytes, run_session_on_bytes};

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((selector, rest)) if selector % 2 == 1 => {
            let mut bytes = client_handshake_bytes();
            bytes.extend_from_slice(rest);
            let _ = run_session_on_bytes(&bytes);
        }
        _ => {
            let _ = run_session_on_bytes(data);
        }
    }
});
