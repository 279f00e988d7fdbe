//! The workloads' and traces' integration tests, one test binary for all of
//! them: each file below is a module, so what they share is compiled and linked
//! once rather than once per file. Run one file's tests with its module's name
//! as the filter, e.g. `cargo test --release -p proxima-workload --test
//! integration replay_accuracy_on_the_simulator::`.

mod replay_accuracy_on_the_simulator;
mod tpcc_paper_setup;
mod traces_of_every_format_are_read;
