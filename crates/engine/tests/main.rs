//! The engine's integration tests, one test binary for all of them: each
//! file below is a module, so the engine's generic code is compiled once for
//! the test devices rather than once per file. Run one file's tests with its
//! module's name as the filter, e.g.
//! `cargo test --release -p proxima-engine --test integration model_based::`.

mod common;

mod a_panic_stops_the_volume;
mod baseline_layouts;
mod batched_writes;
mod bounded_destage_steps;
mod clones;
mod corrupt_metadata_is_detected;
mod crash_at_every_write;
mod damage_is_repaired_or_refused;
mod decoders_never_panic;
mod destage_after_out_of_order_fill;
mod fault_matrix;
mod interleaved_snapshot_deletions;
mod model_based;
mod out_of_space_keeps_serving;
mod payload_less_simulation;
mod proximal_copy_out;
mod proximal_destage;
mod raid_write_hole_is_resynced;
mod random_first_writes_end_up_sequential;
mod read_realloc;
mod reads_into_caller_buffers;
mod reads_through_gaps;
mod restore_during_a_pending_deletion;
mod segment_cleaning;
mod snapshot_scans;
mod staging_area;
mod write_read_reopen;
