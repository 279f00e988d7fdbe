//! `proxima extent create|delete|list|resize DIR ...`: the extents of a volume,
//! each served as an NBD export of its name. Works on a stopped volume, or
//! through a running server (new extents become exports at once).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use proxima_service::{format_size, Request};

use crate::service_common::{print_message, request, size_argument};

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
        /// The volume directory.
        directory: PathBuf,
        /// The extent's name (no '@').
        name: String,
        /// Its size (a multiple of 4 KiB; K, M, G, T suffixes).
        #[arg(long, value_name = "SIZE", value_parser = size_argument)]
        size: u64,
        /// Print the result as JSON on the last line.
        #[arg(long)]
        json: bool,
    },
    /// Delete an extent and free its blocks.
    Delete {
        /// The volume directory.
        directory: PathBuf,
        /// The extent's name.
        name: String,
        /// Print the result as JSON on the last line.
        #[arg(long)]
        json: bool,
    },
    /// Change an extent's size (shrinking discards the blocks past the end).
    Resize {
        /// The volume directory.
        directory: PathBuf,
        /// The extent's name.
        name: String,
        /// The new size.
        #[arg(long, value_name = "SIZE", value_parser = size_argument)]
        size: u64,
        /// Print the result as JSON on the last line.
        #[arg(long)]
        json: bool,
    },
    /// List the extents.
    List {
        /// The volume directory.
        directory: PathBuf,
        /// Print the list as JSON on the last line.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `proxima extent`.
pub fn run(args: &ExtentArgs) -> ExitCode {
    let (directory, operation, json) = match &args.command {
        ExtentCommand::Create { directory, name, size, json } => {
            (directory, Request::ExtentCreate { name: name.clone(), size_bytes: *size }, *json)
        }
        ExtentCommand::Delete { directory, name, json } => {
            (directory, Request::ExtentDelete { name: name.clone() }, *json)
        }
        ExtentCommand::Resize { directory, name, size, json } => {
            (directory, Request::ExtentResize { name: name.clone(), size_bytes: *size }, *json)
        }
        ExtentCommand::List { directory, json } => (directory, Request::ExtentList, *json),
    };
    let (result, venue) = match request("extent", directory, &operation) {
        Ok(outcome) => outcome,
        Err(code) => return code,
    };
    if operation == Request::ExtentList {
        print_extents(&result["extents"]);
        if json {
            println!("{result}");
        }
    } else {
        print_message(&result, venue, json);
    }
    ExitCode::SUCCESS
}

fn print_extents(extents: &serde_json::Value) {
    let extents = extents.as_array().cloned().unwrap_or_default();
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
            format_size(extent["mapped_block_count"].as_u64().unwrap_or(0) * 4096),
            extent["run_count"].as_u64().unwrap_or(0)
        );
    }
}
