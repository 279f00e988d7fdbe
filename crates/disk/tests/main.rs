//! The disk model's integration tests, one test binary for all of them: each
//! file below is a module, so what they share is compiled and linked once
//! rather than once per file. Run one file's tests with its module's name as
//! the filter, e.g. `cargo test --release -p proxima-disk --test integration
//! closed_loop_matches_disksim::`.

mod closed_loop_matches_disksim;
mod heads_move_within_a_simulation;
mod hylog_disks_match_the_paper;
mod malformed_input_is_rejected;
mod mapping_round_trips;
mod nearline_matches_its_sources;
mod perturbed_models_load_or_err;
mod queued_writes_match_disksim;
mod read_bursts_match_disksim;
mod real_drive_validation;
mod remapped_defects;
mod runs_are_deterministic;
mod sequential_streams_match_disksim;
mod shipped_models_load;
mod zero_latency_access;
mod zone_tables_load_as_disksim_does;
