//! The `proxima` command: one binary for the laboratory (simulated disks and
//! reproduced experiments) and the block store (volumes served over NBD).
//!
//! Each subcommand lives in a module of its own; this file only dispatches.
//! Exit codes: 0 success, 1 a failure of the operation, 2 bad usage or input.

mod disk;
mod disk_lab;
mod reproduce;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "proxima", version, about = "A copy-on-write data layout engine for hard disks with a flash tier")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The simulated hard disk: validate a model against a trace, benchmark the simulator.
    Disk(disk::DiskArgs),
    /// Regenerate a paper's figures on the simulator (CSV, plots, report.md).
    Reproduce(reproduce::ReproduceArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Disk(args) => disk::run(args),
        Command::Reproduce(args) => reproduce::run(&args),
    }
}
