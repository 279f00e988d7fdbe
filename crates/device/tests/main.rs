//! The device layer's integration tests, one test binary for all of them: each
//! file below is a module, so what they share is compiled and linked once
//! rather than once per file. Run one file's tests with its module's name as
//! the filter, e.g. `cargo test --release -p proxima-device --test integration
//! crash_at_every_boundary::`.

mod crash_at_every_boundary;
mod raid_matches_a_model;
mod raid_on_simulated_disks;
mod raid_zone_checksums_repair;
mod wrappers_stack;
mod write_back_handles;
mod write_zeroes_reads_back_as_zeroes;
