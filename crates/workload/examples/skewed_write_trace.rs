//! Writes a DiskSim ascii trace of single-block (4 KiB) random writes whose
//! blocks follow Knuth's 80/20 rule (80 % of the writes to 20 % of the
//! blocks, self-similarly), the hottest scattered over the range, arriving
//! every millisecond on average: the skewed updates the HyLog layouts are
//! compared under with `proxima replay --target volume` (docs/hylog.md).
//!
//! Run: `cargo run --release -p proxima-workload --example skewed_write_trace
//! -- BLOCKS REQUESTS SEED > FILE` (defaults 65536 200000 1: a 256 MiB range).

use std::io::{stdout, BufWriter};

use proxima_workload::synthetic::{open_loop, Pattern, SyntheticSpec, SyntheticWorkload};
use proxima_workload::trace::write::DisksimAsciiWriter;

/// Bytes per block.
const BLOCK_BYTES: u64 = 4096;

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let number = |index: usize, default: u64, name: &str| -> u64 {
        arguments.get(index).map_or(default, |text| text.parse().unwrap_or_else(|_| panic!("{name} is a count")))
    };
    let (blocks, requests, seed) = (number(0, 65_536, "BLOCKS"), number(1, 200_000, "REQUESTS"), number(2, 1, "SEED"));
    let workload = SyntheticWorkload::new(SyntheticSpec {
        pattern: Pattern::eighty_twenty(0.8, 0.2),
        block_count: blocks,
        request_blocks: 1,
        read_fraction: 0.0,
        scatter: true,
        seed,
    });
    let mut writer = DisksimAsciiWriter::new(BufWriter::new(stdout().lock()));
    for request in open_loop(workload, 1000.0, BLOCK_BYTES, seed).take(usize::try_from(requests).expect("a count")) {
        writer.write(&request).expect("stdout takes the trace");
    }
    writer.finish().expect("stdout takes the trace");
}
