//! The NBD server's integration tests, one test binary for all of them: each
//! file below is a module, so what they share is compiled and linked once
//! rather than once per file. Run one file's tests with its module's name as
//! the filter, e.g. `cargo test --release -p proxima-nbd --test integration
//! fio_random_writes_verify::`.
//!
//! Apart, as a binary of its own: `shutdown_on_sigterm`, whose signal
//! handler is process-wide.

mod common;

mod fio_random_writes_verify;
mod handshake_bad_input;
mod limits_under_hostile_clients;
mod nbdcopy_round_trip;
mod nbdinfo_lists_every_export;
mod nbdinfo_map_shows_holes_after_trim;
mod pipelined_requests_on_many_connections;
mod qemu_img_convert_round_trip;
mod qemu_io_pattern_checks;
mod session_against_a_model;
mod tcp_listener;
mod transmission_bad_input;
