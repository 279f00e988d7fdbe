//! `proxima extent create|delete|clone|list|resize DIR ...`: the extents of a volume,
//! each served as an NBD export of its name. Works on a stopped volume, or
//! through a running server (new extents become exports at once).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use proxima_service::{format_size, Request};

use crate::management::{run_operation, ListingPrinter, VolumeArguments};
use crate::service_common::size_argument;
use proxima_service::devices::BLOCK_BYTES;

/// `proxima extent`.
#[derive(Debug, Args)]
pub struct ExtentArgs {
    #[command(subcommand)]
    command: ExtentCommand,
}

#[derive(Debug, Subcommand)]
enum ExtentCommand {
    /// Create an extent (an export of the same name).
    Create {
        #[command(flatten)]
        volume: VolumeArguments,
        /// The extent's name (no '@').
        name: String,
        /// Its size (a multiple of 4 KiB; K, M, G, T suffixes).
        #[arg(long, value_name = "SIZE", value_parser = size_argument)]
        size: u64,
        /// Allow the extents' sizes to add up to more than the data device
        /// holds (writes fail with ENOSPC once it fills).
        #[arg(long)]
        thin: bool,
    },
    /// Delete an extent and free its blocks.
    Delete {
        #[command(flatten)]
        volume: VolumeArguments,
        /// The extent's name.
        name: String,
    },
    /// Change an extent's size (shrinking discards the blocks past the end).
    Resize {
        #[command(flatten)]
        volume: VolumeArguments,
        /// The extent's name.
        name: String,
        /// The new size.
        #[arg(long, value_name = "SIZE", value_parser = size_argument)]
        size: u64,
        /// Allow growing past what the data device holds in all extents.
        #[arg(long)]
        thin: bool,
    },
    /// Make DST an extent sharing every block of SRC (or of SRC as of a
    /// snapshot: SRC@SNAP), at once and without copying data.
    Clone {
        #[command(flatten)]
        volume: VolumeArguments,
        /// The source: an extent, or EXTENT@SNAPSHOT.
        source: String,
        /// The clone's name (no '@').
        name: String,
        /// Allow the extents' sizes to add up to more than the data device
        /// holds (writes fail with ENOSPC once it fills).
        #[arg(long)]
        thin: bool,
    },
    /// List the extents.
    List {
        #[command(flatten)]
        volume: VolumeArguments,
    },
}

/// Runs `proxima extent`.
pub fn run(args: &ExtentArgs) -> ExitCode {
    let (volume, operation, print_listing): (_, _, Option<ListingPrinter>) = match &args.command {
        ExtentCommand::Create { volume, name, size, thin } => {
            (volume, Request::ExtentCreate { name: name.clone(), size_bytes: *size, thin: *thin }, None)
        }
        ExtentCommand::Delete { volume, name } => (volume, Request::ExtentDelete { name: name.clone() }, None),
        ExtentCommand::Resize { volume, name, size, thin } => {
            (volume, Request::ExtentResize { name: name.clone(), size_bytes: *size, thin: *thin }, None)
        }
        ExtentCommand::Clone { volume, source, name, thin } => {
            (volume, Request::ExtentClone { source: source.clone(), name: name.clone(), thin: *thin }, None)
        }
        ExtentCommand::List { volume } => (volume, Request::ExtentList, Some(print_extents)),
    };
    run_operation("extent", volume, &operation, print_listing)
}

fn print_extents(result: &serde_json::Value) {
    let extents = result["extents"].as_array().cloned().unwrap_or_default();
    if extents.is_empty() {
        println!("no extents");
        return;
    }
    println!("{:<24} {:>12} {:>12} {:>10}", "NAME", "SIZE", "MAPPED", "RUNS");
    for extent in extents {
        println!(
            "{:<24} {:>12} {:>12} {:>10}",
            extent["name"].as_str().unwrap_or("?"),
            format_size(extent["size_bytes"].as_u64().unwrap_or(0)),
            format_size(extent["mapped_block_count"].as_u64().unwrap_or(0) * BLOCK_BYTES),
            extent["run_count"].as_u64().unwrap_or(0)
        );
    }
}
