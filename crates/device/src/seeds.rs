//! Seeds for randomized tests: the fixed ones a test always runs, plus one
//! fresh seed per run, so that every run of the suite also explores a case
//! never seen before. The fresh seed is printed with the command that reruns
//! it; setting the test's seed variable runs that one seed alone.

use std::time::{SystemTime, UNIX_EPOCH};

/// The seeds a randomized test runs: `fixed`, then a fresh one — or, when the
/// environment variable `variable` holds a seed, that seed alone. `rerun` is
/// the command that runs the test (printed with the variable set).
pub fn seeds_for_test(fixed: impl IntoIterator<Item = u64>, variable: &str, rerun: &str) -> Vec<u64> {
    if let Some(seed) = std::env::var(variable).ok().and_then(|value| value.parse().ok()) {
        return vec![seed];
    }
    let fresh = fresh_seed();
    println!("fresh seed {fresh} this run; rerun it with: {variable}={fresh} {rerun}");
    fixed.into_iter().chain([fresh]).collect()
}

/// A seed from the clock and the process id.
fn fresh_seed() -> u64 {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_nanos());
    // Keep the low bits, which change fastest, mixed with the process id.
    let low_bits = u64::try_from(nanos & u128::from(u64::MAX)).expect("masked to 64 bits");
    let mixed = low_bits ^ u64::from(std::process::id()).rotate_left(32);
    mixed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 16
}
