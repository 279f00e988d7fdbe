//! `proxima serve DIR [--socket PATH] [--listen ADDR] [--max-connections N]
//! [--memory-per-connection SIZE] [--memory-total SIZE] [--reply-timeout
//! SECONDS] [--read-ahead on|off] [--read-ahead-size SIZE]
//! [--read-ahead-streams N] [--read-ahead-requests N] [--read-ahead-memory
//! SIZE]`: serves every extent
//! of the volume as an NBD export of its name and every snapshot's extents as
//! read-only exports `EXTENT@SNAPSHOT`, until SIGINT or SIGTERM, then flushes,
//! commits and closes the volume. With neither `--socket` nor `--listen` it
//! listens on TCP 127.0.0.1:10809.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use proxima_nbd::server::CONNECTION_MEMORY_BYTES_MIN;
use proxima_nbd::ServerConfig;
use proxima_service::{format_size, serve, ReadAheadChoice, ReadAheadOverrides, ServeOptions, ServeReady};

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
    /// Read ahead of sequential readers with the many-stream prefetch policy
    /// (docs/service.md, "Read-ahead"): made for a disk that serves one
    /// request at a time; off by default.
    #[arg(long, value_name = "on|off", default_value = "off", value_parser = ["on", "off"])]
    read_ahead: String,
    /// R: bytes of one read-ahead [default: from the data device: 19M on a
    /// rotating disk, 1M on a solid-state one].
    #[arg(long, value_name = "SIZE", value_parser = size_argument)]
    read_ahead_size: Option<u64>,
    /// D: streams read ahead at once, each by a thread of its own [default: 2].
    #[arg(long, value_name = "N")]
    read_ahead_streams: Option<usize>,
    /// N: read-aheads a stream issues per turn [default: 1].
    #[arg(long, value_name = "N")]
    read_ahead_requests: Option<u32>,
    /// M: memory for read-ahead data, at least D·R·N [default: 2·D·R·N].
    #[arg(long, value_name = "SIZE", value_parser = size_argument)]
    read_ahead_memory: Option<u64>,
}

/// The read-ahead the flags ask for, or the message for a bad combination.
fn read_ahead_choice(args: &ServeArgs) -> Result<ReadAheadChoice, String> {
    let overrides = ReadAheadOverrides {
        readahead_bytes: args.read_ahead_size,
        dispatch_streams: args.read_ahead_streams,
        requests_per_turn: args.read_ahead_requests,
        memory_bytes: args.read_ahead_memory,
    };
    if args.read_ahead == "off" {
        if overrides != ReadAheadOverrides::default() {
            return Err("--read-ahead-size, -streams, -requests and -memory need --read-ahead on".to_owned());
        }
        return Ok(ReadAheadChoice::Off);
    }
    if args.read_ahead_size.is_some_and(|bytes| bytes < 4096) {
        return Err("--read-ahead-size must be at least 4K".to_owned());
    }
    if args.read_ahead_streams == Some(0) {
        return Err("--read-ahead-streams must be at least 1".to_owned());
    }
    if args.read_ahead_requests == Some(0) {
        return Err("--read-ahead-requests must be at least 1".to_owned());
    }
    // Checked with either device class now; the server derives the rest
    // from its data device.
    for rotational in [true, false] {
        if let Err(error) = overrides.settings(rotational) {
            let flags = if args.read_ahead_memory.is_some() {
                "--read-ahead-memory"
            } else {
                "--read-ahead-size, --read-ahead-streams and --read-ahead-requests"
            };
            return Err(format!("{flags}: {error}"));
        }
    }
    Ok(ReadAheadChoice::On(overrides))
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
    let read_ahead = match read_ahead_choice(args) {
        Ok(read_ahead) => read_ahead,
        Err(message) => {
            eprintln!("proxima serve: {message}");
            return ExitCode::from(2);
        }
    };
    let options = ServeOptions {
        socket: args.socket.clone(),
        listen: args.listen.clone(),
        stop_on_signals: true,
        server,
        read_ahead,
    };
    match serve(&args.directory, &options, |ready| announce(args, &options.server, ready)) {
        Ok(summary) => {
            eprintln!(
                "proxima serve: stopped after {} connection(s); volume flushed and committed",
                summary.server.connection_count
            );
            if let Some(stats) = summary.read_ahead {
                eprintln!(
                    "  read-ahead: {} read(s), {} from memory; {} prefetch(es), {} read; {} stream(s), \
                     {} dropped idle for want of memory; {} read(s) went to the volume after all",
                    stats.reads_from_memory,
                    format_size(stats.bytes_from_memory),
                    stats.prefetches,
                    format_size(stats.prefetched_bytes),
                    stats.streams_started,
                    stats.streams_evicted,
                    stats.reads_fallen_back
                );
            }
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
    match &ready.read_ahead {
        Some(settings) => eprintln!(
            "  read-ahead of sequential readers: {} per read-ahead, {} stream(s) at once, {} per turn, \
             at most {} held",
            format_size(settings.readahead_bytes),
            settings.dispatch_streams,
            settings.requests_per_turn,
            format_size(settings.memory_bytes_max)
        ),
        None => eprintln!("  no read-ahead"),
    }
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
