//! `proxima serve DIR [--socket PATH] [--listen ADDR] [--max-connections N]
//! [--memory-per-connection SIZE] [--memory-total SIZE] [--reply-timeout
//! SECONDS]`: serves every extent
//! of the volume as an NBD export of its name and every snapshot's extents as
//! read-only exports `EXTENT@SNAPSHOT`, until SIGINT or SIGTERM, then flushes,
//! commits and closes the volume. With neither `--socket` nor `--listen` it
//! listens on TCP 127.0.0.1:10809.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use proxima_nbd::server::CONNECTION_MEMORY_BYTES_MIN;
use proxima_nbd::ServerConfig;
use proxima_service::{format_size, serve, ServeOptions, ServeReady};

use crate::service_common::{fail, size_argument};

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
    /// Connections served at once; more are refused with a message naming the limit.
    #[arg(long, value_name = "N", default_value_t = ServerConfig::default().connection_limit)]
    max_connections: usize,
    /// Memory for request payloads and reply data in flight on one connection
    /// (at least 33M: the largest request is 32 MiB). Past it the server reads
    /// no more of that connection's requests until it has sent the replies.
    #[arg(long, value_name = "SIZE", value_parser = size_argument, default_value = "64M")]
    memory_per_connection: u64,
    /// Memory for request payloads and reply data in flight on all connections
    /// (at least --memory-per-connection).
    #[arg(long, value_name = "SIZE", value_parser = size_argument, default_value = "1G")]
    memory_total: u64,
    /// Seconds a reply may wait for the client to read any of it; a client
    /// that reads nothing for that long loses its replies and its connection.
    #[arg(long, value_name = "SECONDS", default_value_t = ServerConfig::default().reply_timeout.as_secs())]
    reply_timeout: u64,
}

/// The server settings of the flags, or the message for a bad combination.
fn server_config(args: &ServeArgs) -> Result<ServerConfig, String> {
    if args.max_connections == 0 {
        return Err("--max-connections must be at least 1".to_owned());
    }
    if args.memory_per_connection < CONNECTION_MEMORY_BYTES_MIN {
        return Err(format!(
            "--memory-per-connection {} is less than {} ({CONNECTION_MEMORY_BYTES_MIN} bytes): the largest request is 32 MiB",
            format_size(args.memory_per_connection),
            format_size(CONNECTION_MEMORY_BYTES_MIN.next_multiple_of(1 << 20)),
        ));
    }
    if args.reply_timeout == 0 {
        return Err("--reply-timeout must be at least 1 second".to_owned());
    }
    if args.memory_total < args.memory_per_connection {
        return Err(format!(
            "--memory-total {} is less than --memory-per-connection {}",
            format_size(args.memory_total),
            format_size(args.memory_per_connection)
        ));
    }
    Ok(ServerConfig {
        connection_limit: args.max_connections,
        connection_memory_bytes: args.memory_per_connection,
        server_memory_bytes: args.memory_total,
        reply_timeout: std::time::Duration::from_secs(args.reply_timeout),
        ..ServerConfig::default()
    })
}

/// Runs `proxima serve`.
pub fn run(args: &ServeArgs) -> ExitCode {
    init_logging();
    let server = match server_config(args) {
        Ok(server) => server,
        Err(message) => {
            eprintln!("proxima serve: {message}");
            return ExitCode::from(2);
        }
    };
    let options =
        ServeOptions { socket: args.socket.clone(), listen: args.listen.clone(), stop_on_signals: true, server };
    match serve(&args.directory, &options, |ready| announce(args, &options.server, ready)) {
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

fn announce(args: &ServeArgs, server: &ServerConfig, ready: &ServeReady) {
    let mut places = Vec::new();
    if let Some(socket) = &ready.socket {
        places.push(format!("nbd+unix:///EXPORT?socket={}", socket.display()));
    }
    if let Some(address) = &ready.tcp {
        places.push(format!("nbd://{address}/EXPORT"));
    }
    eprintln!("proxima serve: serving {} at {}", args.directory.display(), places.join(" and "));
    eprintln!(
        "  at most {} connection(s); request and reply data in flight at most {} per connection, {} in all; \
         replies unread for {} s are dropped with their connection",
        server.connection_limit,
        format_size(server.connection_memory_bytes),
        format_size(server.server_memory_bytes),
        server.reply_timeout.as_secs()
    );
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
