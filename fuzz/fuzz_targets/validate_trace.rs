//! Arbitrary bytes as a DiskSim validate trace must parse or give a `LoadError`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use proxima_disk::validate::parse_trace;

fuzz_target!(|data: &[u8]| {
    let _ = parse_trace("fuzz.trace", &String::from_utf8_lossy(data));
});
