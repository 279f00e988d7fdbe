//! `proxima snapshot create|list|delete|restore DIR ...`: snapshots of every
//! extent of a volume, served read-only as `EXTENT@SNAPSHOT`. Create, list and
//! delete also work through a running server; restore needs the volume offline.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use proxima_service::Request;

use crate::service_common::{print_message, request};

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
        /// The volume directory.
        directory: PathBuf,
        /// The snapshot's name (no '@').
        name: String,
        /// Print the result as JSON on the last line.
        #[arg(long)]
        json: bool,
    },
    /// List the live snapshots, oldest first.
    List {
        /// The volume directory.
        directory: PathBuf,
        /// Print the list as JSON on the last line.
        #[arg(long)]
        json: bool,
    },
    /// Delete a snapshot and reclaim the space only it held.
    Delete {
        /// The volume directory.
        directory: PathBuf,
        /// The snapshot's name.
        name: String,
        /// Print the result as JSON on the last line.
        #[arg(long)]
        json: bool,
    },
    /// Restore the whole volume (younger snapshots are deleted) or one extent
    /// (`--extent`) to a snapshot. The volume must not be served.
    Restore {
        /// The volume directory.
        directory: PathBuf,
        /// The snapshot's name.
        name: String,
        /// Restore only this extent, by copying.
        #[arg(long)]
        extent: Option<String>,
        /// Print the result as JSON on the last line.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `proxima snapshot`.
pub fn run(args: &SnapshotArgs) -> ExitCode {
    let (directory, operation, json) = match &args.command {
        SnapshotCommand::Create { directory, name, json } => {
            (directory, Request::SnapshotCreate { name: name.clone() }, *json)
        }
        SnapshotCommand::List { directory, json } => (directory, Request::SnapshotList, *json),
        SnapshotCommand::Delete { directory, name, json } => {
            (directory, Request::SnapshotDelete { name: name.clone() }, *json)
        }
        SnapshotCommand::Restore { directory, name, extent, json } => {
            (directory, Request::SnapshotRestore { name: name.clone(), extent: extent.clone() }, *json)
        }
    };
    let (result, venue) = match request("snapshot", directory, &operation) {
        Ok(outcome) => outcome,
        Err(code) => return code,
    };
    if operation == Request::SnapshotList {
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
        if json {
            println!("{result}");
        }
    } else {
        print_message(&result, venue, json);
    }
    ExitCode::SUCCESS
}
