//! What the extent and snapshot command families share: the arguments each of
//! their subcommands takes (the volume directory, first, and `--json`), and
//! running one management request and printing its result.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use proxima_service::Request;
use serde_json::Value;

use crate::service_common::{print_message, request};

/// The volume a management subcommand works on, and whether it prints JSON.
#[derive(Debug, Args)]
pub struct VolumeArguments {
    /// The volume directory.
    pub directory: PathBuf,
    /// Print the result as JSON on the last line.
    // Shown after each subcommand's own options in its help: it is the flag
    // common to all of them.
    #[arg(long, display_order = 100)]
    pub json: bool,
}

/// Prints a listing's result for people on stdout.
pub type ListingPrinter = fn(&Value);

/// Runs `operation` of `command` on the volume (locally, or through a running
/// server) and prints its result: with `print_listing` for a listing, else its
/// message; with `--json`, the whole result as the last line.
pub fn run_operation(
    command: &str,
    volume: &VolumeArguments,
    operation: &Request,
    print_listing: Option<ListingPrinter>,
) -> ExitCode {
    let (result, venue) = match request(command, &volume.directory, operation) {
        Ok(outcome) => outcome,
        Err(code) => return code,
    };
    match print_listing {
        Some(print_listing) => {
            print_listing(&result);
            if volume.json {
                println!("{result}");
            }
        }
        None => print_message(&result, venue, volume.json),
    }
    ExitCode::SUCCESS
}
