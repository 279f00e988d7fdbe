//! The laboratory's integration tests, one test binary for all of them: each
//! file below is a module, so what they share is compiled and linked once
//! rather than once per file. Run one file's tests with its module's name as
//! the filter, e.g. `cargo test --release -p proxima-lab --test integration
//! aging_experiment::`.

mod aging_experiment;
mod birthday_model_agrees_with_simulation;
mod figure_1_cheetah_targets;
mod figure_2_queue_depth;
mod foreground_priority_experiment;
mod hylog_cleaning_experiment;
mod hylog_model_experiment;
mod hylog_proximal_experiment;
mod hylog_segment_simulator;
mod hylog_table3_experiment;
mod hylog_throughput_experiment;
mod issue_order_ascending_no_worse;
mod layout_experiments_are_deterministic;
mod layout_targets_at_small_scale;
mod lfs_runs_on_the_lab_volume;
mod many_streams_experiment;
mod realloc_on_read_experiment;
mod reproduce_is_deterministic;
mod snapshot_experiment;
mod wafl_experiments;
