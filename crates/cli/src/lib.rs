//! The `proxima` command: one binary for the laboratory (simulated disks and
//! reproduced experiments) and the block store (volumes served over NBD).
//!
//! Each subcommand lives in a module of its own; this file only dispatches.
//! Exit codes: 0 success, 1 a failure of the operation, 2 bad usage or input.
//!
//! A library as well as the binary (`src/main.rs` calls [`main`]), so that the
//! tests can walk the command line's definition ([`Cli`]) and check that every
//! option of every subcommand applies or is refused.

mod disk;
mod disk_lab;
mod extent;
mod fsck;
mod management;
mod replay;
mod replay_plots;
mod replay_volume;
mod reproduce;
mod scrub;
mod serve;
mod service_common;
mod snapshot;
mod status;
mod sweep;
mod volume;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The `proxima` command line.
#[derive(Debug, Parser)]
#[command(name = "proxima", version, about = "A copy-on-write data layout engine for hard disks with a flash tier")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The simulated hard disk: validate a model against a trace, benchmark the simulator.
    Disk(disk::DiskArgs),
    /// Regenerate a paper's figures on the simulator (CSV, plots, report.md).
    Reproduce(reproduce::ReproduceArgs),
    /// Create a volume directory (data disks, flash, layout, RAID).
    Volume(volume::VolumeArgs),
    /// Create, delete, list or resize a volume's extents (each an NBD export).
    Extent(extent::ExtentArgs),
    /// Create, list, delete or restore a volume's snapshots.
    Snapshot(snapshot::SnapshotArgs),
    /// Capacity, use, snapshots, staging, CPs, destages and fragmentation of a volume.
    Status(service_common::ReportArgs),
    /// Check a volume's durable state; exit 1 on any finding.
    Fsck(service_common::ReportArgs),
    /// Check every block in use against its checksum, repairing from RAID; exit 1 if any stays damaged.
    Scrub(service_common::ReportArgs),
    /// Serve a volume's extents and snapshots over NBD.
    Serve(serve::ServeArgs),
    /// Replay a block trace on the disk model, a simulated volume or an NBD export; accuracy figures as JSON.
    Replay(replay::ReplayArgs),
    /// Run every cell of a parameter grid (replays or experiments), locally or on Ray; one table and plots.
    Sweep(sweep::SweepArgs),
}

/// Parses the command line and runs the command; the process's exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_) | Command::Replay(_)) {
        stop_quietly_when_output_closes();
    }
    match cli.command {
        Command::Disk(args) => disk::run(args),
        Command::Reproduce(args) => reproduce::run(&args),
        Command::Volume(args) => volume::run(&args),
        Command::Extent(args) => extent::run(&args),
        Command::Snapshot(args) => snapshot::run(&args),
        Command::Status(args) => status::run(&args),
        Command::Fsck(args) => fsck::run(&args),
        Command::Scrub(args) => scrub::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Replay(args) => replay::run(&args),
        Command::Sweep(args) => sweep::run(&args),
    }
}

/// Lets a command whose output is piped into a reader that stops early
/// (`proxima disk validate-all DIR | head`) end as Unix tools do, killed by
/// SIGPIPE, rather than panic on its next `println!`. Not for the commands
/// that talk over sockets (`serve`, `replay --nbd`): there a closed peer must
/// be an error on that connection, not the end of the process.
fn stop_quietly_when_output_closes() {
    // SAFETY: restoring a signal's default disposition has no memory effects.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
