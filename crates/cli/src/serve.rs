//! `proxima serve DIR [--socket PATH] [--listen ADDR]`: serves every extent of
//! the volume as an NBD export of its name and every snapshot's extents as
//! read-only exports `EXTENT@SNAPSHOT`, until SIGINT or SIGTERM, then flushes,
//! commits and closes the volume. With neither flag it listens on TCP
//! 127.0.0.1:10809.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use proxima_service::{format_size, serve, ServeOptions, ServeReady};

use crate::service_common::fail;

/// `proxima serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The volume directory.
    directory: PathBuf,
    /// Listen on a Unix socket at PATH.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Listen on TCP at ADDR (host:port) [default: 127.0.0.1:10809 when no
    /// --socket is given].
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
}

/// Runs `proxima serve`.
pub fn run(args: &ServeArgs) -> ExitCode {
    init_logging();
    let options = ServeOptions {
        socket: args.socket.clone(),
        listen: args.listen.clone(),
        stop_on_signals: true,
        ..Default::default()
    };
    match serve(&args.directory, &options, |ready| announce(args, ready)) {
        Ok(summary) => {
            eprintln!(
                "proxima serve: stopped after {} connection(s); volume flushed and committed",
                summary.connection_count
            );
            ExitCode::SUCCESS
        }
        Err(error) => fail("serve", &error),
    }
}

fn announce(args: &ServeArgs, ready: &ServeReady) {
    let mut places = Vec::new();
    if let Some(socket) = &ready.socket {
        places.push(format!("nbd+unix:///EXPORT?socket={}", socket.display()));
    }
    if let Some(address) = &ready.tcp {
        places.push(format!("nbd://{address}/EXPORT"));
    }
    eprintln!("proxima serve: serving {} at {}", args.directory.display(), places.join(" and "));
    for export in &ready.exports {
        let access = if export.read_only { "read-only" } else { "read-write" };
        eprintln!("  {:<32} {:>10} {access}", export.name, format_size(export.size_bytes));
    }
    if ready.exports.is_empty() {
        eprintln!("  no exports yet: proxima extent create {} lun0 --size 2G", args.directory.display());
    }
}

/// Server logs (connections, bad requests) on stderr; RUST_LOG overrides.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
