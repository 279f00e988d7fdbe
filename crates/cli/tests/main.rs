//! The command line's integration tests, one test binary for all of them: each
//! file below is a module, so what they share is compiled and linked once
//! rather than once per file. Run one file's tests with its module's name as
//! the filter, e.g. `cargo test --release -p proxima-cli --test integration
//! devices_belong_to_their_volume::`.
//!
//! Apart, as a binary of its own: `replay_a_million_requests_in_bounded_memory`,
//! which measures the peak memory of its process's children: other tests'
//! servers and clients would be among them.

mod service_support;

mod devices_belong_to_their_volume;
mod disk_validate_all;
mod every_option_applies_or_is_refused;
mod experiments_run_on_every_shipped_drive;
mod replay_samples_against_a_served_export;
mod replay_samples_on_a_simulated_volume;
mod replay_samples_on_the_disk_model;
mod serve_clone_divergent_fio_verify;
mod serve_control_socket_clients;
mod serve_copy_out_fio_verify;
mod serve_crash_fio_verify_only;
mod serve_fio_random_writes_verify;
mod serve_hylog_fio_verify;
mod serve_nbdcopy_round_trip;
mod serve_nbdinfo_lists_and_maps;
mod serve_proximal_hot_fio_verify;
mod serve_qemu_img_and_qemu_io;
mod serve_sigterm_and_full_volume;
mod serve_under_hostile_clients;
mod sweep_runs_resumes_and_refuses;
mod volume_commands;
