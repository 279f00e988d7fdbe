//! Shared by the volume commands (volume, extent, snapshot, status, fsck,
//! serve): size arguments, the spinner shown on a terminal during long
//! operations, running a management request, and turning errors into exit codes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use proxima_service::{run_request, Request, ServiceError, Venue};
use serde_json::Value;

/// Parses a size argument (`2G`, `512M`, `4096`) for clap; a bad size is a
/// usage error (exit code 2).
pub fn size_argument(text: &str) -> Result<u64, String> {
    proxima_service::parse_size(text).map_err(|error| error.to_string())
}

/// Runs `operation` with a spinner and `message` on stderr when it is a
/// terminal (nothing is drawn when it is piped).
pub fn with_spinner<T>(message: &str, operation: impl FnOnce() -> T) -> T {
    let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    spinner.set_style(ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("the template is valid"));
    spinner.set_message(message.to_owned());
    spinner.enable_steady_tick(Duration::from_millis(120));
    let result = operation();
    spinner.finish_and_clear();
    result
}

/// Prints `error` for `command` and returns its exit code (2 bad input, 1 failure).
pub fn fail(command: &str, error: &ServiceError) -> ExitCode {
    eprintln!("proxima {command}: {error}");
    ExitCode::from(error.exit_code())
}

/// Runs a management request (locally, or inside a running server) with a
/// spinner; on failure prints the error and returns the exit code.
pub fn request(command: &str, directory: &Path, request: &Request) -> Result<(Value, Venue), ExitCode> {
    with_spinner(&format!("{command} {}", directory.display()), || run_request(directory, request))
        .map_err(|error| fail(command, &error))
}

/// The arguments of the commands that report on a volume (`status`, `fsck`,
/// `scrub`).
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// The volume directory.
    pub directory: PathBuf,
    /// Print the report as one JSON object on the last line.
    #[arg(long)]
    pub json: bool,
}

/// Prints a result's `message` (for humans, on stdout) and, with `json`, the
/// whole result as the last line.
pub fn print_message(result: &Value, venue: Venue, json: bool) {
    if let Some(message) = result["message"].as_str() {
        match venue {
            Venue::Local => println!("{message}"),
            Venue::Server => println!("{message} (through the running server)"),
        }
    }
    if json {
        println!("{result}");
    }
}
