//! `proxima snapshot create|list|delete|restore DIR ...`: snapshots of every
//! extent of a volume, served read-only as `EXTENT@SNAPSHOT`. Create, list and
//! delete also work through a running server; restore needs the volume offline.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use proxima_service::Request;

use crate::management::{run_operation, ListingPrinter, VolumeArguments};

/// `proxima snapshot`.
#[derive(Debug, Args)]
pub struct SnapshotArgs {
    #[command(subcommand)]
    command: SnapshotCommand,
}

#[derive(Debug, Subcommand)]
enum SnapshotCommand {
    /// Snapshot every extent of the volume.
    Create {
        #[command(flatten)]
        volume: VolumeArguments,
        /// The snapshot's name (no '@').
        name: String,
    },
    /// List the live snapshots, oldest first.
    List {
        #[command(flatten)]
        volume: VolumeArguments,
    },
    /// Delete a snapshot and reclaim the space only it held.
    Delete {
        #[command(flatten)]
        volume: VolumeArguments,
        /// The snapshot's name.
        name: String,
    },
    /// Restore the whole volume (younger snapshots are deleted) or one extent
    /// (`--extent`) to a snapshot. The volume must not be served.
    Restore {
        #[command(flatten)]
        volume: VolumeArguments,
        /// The snapshot's name.
        name: String,
        /// Restore only this extent, by copying.
        #[arg(long)]
        extent: Option<String>,
    },
}

/// Runs `proxima snapshot`.
pub fn run(args: &SnapshotArgs) -> ExitCode {
    let (volume, operation, print_listing): (_, _, Option<ListingPrinter>) = match &args.command {
        SnapshotCommand::Create { volume, name } => (volume, Request::SnapshotCreate { name: name.clone() }, None),
        SnapshotCommand::List { volume } => (volume, Request::SnapshotList, Some(print_snapshots)),
        SnapshotCommand::Delete { volume, name } => (volume, Request::SnapshotDelete { name: name.clone() }, None),
        SnapshotCommand::Restore { volume, name, extent } => {
            (volume, Request::SnapshotRestore { name: name.clone(), extent: extent.clone() }, None)
        }
    };
    run_operation("snapshot", volume, &operation, print_listing)
}

fn print_snapshots(result: &serde_json::Value) {
    let snapshots = result["snapshots"].as_array().cloned().unwrap_or_default();
    if snapshots.is_empty() {
        println!("no snapshots");
    }
    for snapshot in snapshots {
        println!(
            "{:<24} CP {}",
            snapshot["name"].as_str().unwrap_or("?"),
            snapshot["generation"].as_u64().unwrap_or(0)
        );
    }
}
