//! What the scenario tests need to drive the real NBD clients, and nothing of the
//! server: running a command, fio with crc32c verification and its JSON totals,
//! seeded test data.
//!
//! Used by this crate's tests through `common` and by the volume scenario tests of
//! the `proxima` binary (crates/cli/tests/service_support) with `#[path]`, so it
//! depends only on std and serde_json.

use std::process::{Command, Output};

/// Runs a command, failing the test with its output unless it succeeds.
pub fn run(command: &mut Command) -> Output {
    let output = command.output().unwrap_or_else(|error| panic!("cannot run {command:?}: {error}"));
    assert!(
        output.status.success(),
        "{command:?} failed with {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The seed of fio's random offsets in every verifying run, so a run reproduces.
pub const FIO_SEED: u64 = 20261121;

/// fio's nbd engine on `uri` writing or reading 4 KiB blocks at queue depth 16 with
/// crc32c verification (seeded), one JSON report for all its jobs; the caller adds
/// the region and the `--rw` mode.
pub fn fio_verify_command(uri: &str, name: &str) -> Command {
    let mut command = Command::new("fio");
    command
        .arg(format!("--name={name}"))
        .args(["--ioengine=nbd", "--bs=4k", "--iodepth=16", "--verify=crc32c", "--verify_fatal=1"])
        // NBD lets a server run a connection's requests in any order, and
        // Proxima's worker pool does. A skewed distribution turns fio's
        // random map off, so two writes of one block may be in flight at
        // once and either may land last; fio's verify expects the later.
        // Holding back an overlapping write until the earlier completes is
        // what every ordering client (the kernel's block layer) does.
        .arg("--serialize_overlap=1")
        .arg(format!("--randseed={FIO_SEED}"))
        .args(["--output-format=json", "--group_reporting"])
        .arg(format!("--uri={uri}"));
    command
}

/// Total bytes read and written, and the error count, over all jobs of a fio run
/// with `--output-format=json`.
pub fn fio_totals(output: &Output) -> (u64, u64, u64) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    // fio may print notes before the JSON document.
    let json_start = stdout.find('{').expect("fio JSON output");
    let report: serde_json::Value = serde_json::from_str(&stdout[json_start..]).expect("fio JSON");
    let jobs = report["jobs"].as_array().expect("jobs");
    let sum = |key: &str, field: &str| jobs.iter().map(|job| job[key][field].as_u64().unwrap_or(0)).sum::<u64>();
    let errors = jobs.iter().map(|job| job["error"].as_u64().unwrap_or(0)).sum::<u64>();
    (sum("read", "io_bytes"), sum("write", "io_bytes"), errors)
}

/// Deterministic pseudo-random bytes from a seed (a xorshift generator).
pub fn seeded_bytes(seed: u64, length: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..length)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}
