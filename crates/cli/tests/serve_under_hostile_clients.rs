//! `proxima serve` against clients that misbehave, as a hostile or buggy client
//! would:
//! - eight connections pipelining 32 MiB reads and never reading the replies:
//!   the server's peak resident memory stays under its memory budget plus
//!   100 MB, and other clients are served meanwhile;
//! - two connections that never read, holding the whole memory budget: with a
//!   reply timeout of 2 s they lose their replies and another client is
//!   served;
//! - SIGTERM while replies are unread: the server exits 0 within 5 s, with what
//!   was flushed durable and a CP committed;
//! - a pids limit of 40 (a pids cgroup around the server) with 8 clients of two
//!   connections each, more than the threads allow: the server refuses the
//!   connections it cannot serve, keeps serving the ones it accepted, and
//!   accepts again once they leave.

use crate::service_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use proxima_nbd::protocol::transmission::Command as NbdCommand;
use service_support::raw_nbd::{attach, RawConnection};
use service_support::{last_json_line, run, seeded_bytes, Volume};

const READ_BYTES: u32 = 32 << 20;

/// A volume with a 256 MiB extent `lun0`, served with `flags`.
fn served_volume(flags: &[&str]) -> Volume {
    let mut volume = Volume::create(&["--data-size", "1G", "--flash-size", "64M"]);
    volume.create_extent("lun0", "256M");
    volume.start_server_with(flags, |_| {});
    volume
}

/// A connection that sends `count` 32 MiB reads and never reads a reply.
fn pipeline_unread_reads(socket: &Path, count: u64) -> RawConnection {
    let mut connection = attach(socket, "lun0").expect("attach");
    for cookie in 0..count {
        connection.send(NbdCommand::Read, cookie, (cookie % 8) * u64::from(READ_BYTES), READ_BYTES, &[]);
    }
    connection
}

/// A field of /proc/PID/status in bytes (e.g. `VmHWM`, the peak resident set).
fn process_memory_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the server's /proc status");
    let line = status.lines().find(|line| line.starts_with(field)).unwrap_or_else(|| panic!("no {field}"));
    let kilobytes: u64 = line.split_whitespace().nth(1).and_then(|value| value.parse().ok()).expect("a size in kB");
    kilobytes * 1024
}

fn qemu_io(volume: &Volume, commands: &[&str]) -> String {
    let mut command = Command::new("qemu-io");
    command.args(["-f", "raw"]);
    for text in commands {
        command.args(["-c", text]);
    }
    let output = run(command.arg(volume.uri("lun0")));
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(!text.contains("verification failed") && !text.contains("error"), "{text}");
    text
}

#[test]
fn unread_replies_keep_the_server_within_its_memory_budget_while_others_are_served() {
    let budget_bytes: u64 = 400 << 20;
    let mut volume = served_volume(&["--memory-per-connection", "40M", "--memory-total", "400M"]);
    let socket = volume.socket.clone();
    // 8 connections asking for 256 MiB each: 2 GiB of replies nobody reads.
    let hostile: Vec<RawConnection> = (0..8).map(|_| pipeline_unread_reads(&socket, 8)).collect();
    // Give the server time to take in as much of it as it would.
    std::thread::sleep(Duration::from_secs(2));
    qemu_io(&volume, &["write -P 0x5a 0 4M", "read -P 0x5a 0 4M"]);
    let peak_bytes = process_memory_bytes(volume.server_pid(), "VmHWM");
    eprintln!("peak resident memory of the server: {} MiB", peak_bytes >> 20);
    assert!(
        peak_bytes < budget_bytes + 100_000_000,
        "peak resident memory {peak_bytes} bytes with a budget of {budget_bytes}"
    );
    assert!(volume.server_running(), "{}", volume.server_log());
    drop(hostile);
    assert!(volume.stop_server().success(), "{}", volume.server_log());
}

#[test]
fn clients_that_never_read_their_replies_lose_them_and_cannot_hold_the_budget() {
    // Two connections that never read hold a 32 MiB reply each, all but
    // 2 MiB of the server's budget; without a reply timeout every other
    // client's 4 MiB requests would wait for ever.
    let mut volume =
        served_volume(&["--memory-per-connection", "40M", "--memory-total", "66M", "--reply-timeout", "2"]);
    let socket = volume.socket.clone();
    let hostile: Vec<RawConnection> = (0..2).map(|_| pipeline_unread_reads(&socket, 8)).collect();
    std::thread::sleep(Duration::from_secs(1));
    let started = Instant::now();
    qemu_io(&volume, &["write -P 0x3c 0 4M", "read -P 0x3c 0 4M"]);
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(30), "qemu-io waited {waited:?}");
    assert!(volume.server_log().contains("within the reply timeout"), "{}", volume.server_log());
    assert!(volume.server_running(), "{}", volume.server_log());
    drop(hostile);
    assert!(volume.stop_server().success(), "{}", volume.server_log());
}

#[test]
fn sigterm_with_unread_replies_exits_promptly_with_flushed_data_durable() {
    let mut volume = served_volume(&[]);
    let hostile = pipeline_unread_reads(&volume.socket.clone(), 8);
    std::thread::sleep(Duration::from_millis(500));
    // qemu-io flushes before it closes the connection.
    qemu_io(&volume, &["write -P 0x6b 64M 3M"]);

    let asked = Instant::now();
    volume.signal_server(libc::SIGTERM);
    let status = volume.wait_server(Duration::from_secs(5));
    let elapsed = asked.elapsed();
    let status = status.unwrap_or_else(|| panic!("still running 5 s after SIGTERM: {}", volume.server_log()));
    assert!(status.success(), "exit status {status}: {}", volume.server_log());
    eprintln!("the server stopped {elapsed:?} after SIGTERM");
    drop(hostile);

    let fsck = last_json_line(&run(&mut volume.command(&["fsck", "--json"], 1)));
    assert_eq!(fsck["log_pending"], false, "the shutdown committed a CP: {fsck}");
    assert_eq!(fsck["findings"], serde_json::json!([]), "{fsck}");
    volume.start_server();
    qemu_io(&volume, &["read -P 0x6b 64M 3M"]);
    assert!(volume.stop_server().success(), "{}", volume.server_log());
}

/// A pids cgroup of its own (v1 `pids` hierarchy or v2), removed when dropped.
struct PidsCgroup {
    path: PathBuf,
}

impl PidsCgroup {
    fn create(limit: u32) -> Self {
        let name = format!("proxima-test-{}", std::process::id());
        let candidates = [PathBuf::from("/sys/fs/cgroup/pids"), PathBuf::from("/sys/fs/cgroup")];
        let mut failures = Vec::new();
        for parent in candidates {
            let path = parent.join(&name);
            let attempt =
                std::fs::create_dir(&path).and_then(|()| std::fs::write(path.join("pids.max"), limit.to_string()));
            match attempt {
                Ok(()) => return Self { path },
                Err(error) => {
                    let _ = std::fs::remove_dir(&path);
                    failures.push(format!("{}: {error}", parent.display()));
                }
            }
        }
        panic!("no writable pids cgroup for the test (run as root with the pids controller): {failures:?}");
    }

    /// Makes `command`'s process join the cgroup before it runs the program.
    fn enter_on_exec(&self, command: &mut Command) {
        use std::os::unix::process::CommandExt;
        let procs = std::ffi::CString::new(self.path.join("cgroup.procs").into_os_string().into_encoded_bytes())
            .expect("a path without NUL");
        // SAFETY: between fork and exec the closure only calls open, write and
        // close (async-signal-safe) on memory prepared before the fork.
        unsafe {
            command.pre_exec(move || {
                let descriptor = libc::open(procs.as_ptr(), libc::O_WRONLY);
                if descriptor < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let written = libc::write(descriptor, b"0".as_ptr().cast(), 1);
                libc::close(descriptor);
                if written != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.path);
    }
}

#[test]
fn under_a_pids_limit_the_server_refuses_what_it_cannot_serve_and_serves_the_rest() {
    const CLIENTS: u64 = 8;
    const CONNECTIONS_PER_CLIENT: u64 = 2;
    let cgroup = PidsCgroup::create(40);
    let mut volume = Volume::create(&["--data-size", "1G", "--flash-size", "64M"]);
    volume.create_extent("lun0", "256M");
    volume.start_server_with(&[], |command| cgroup.enter_on_exec(command));
    let socket = volume.socket.clone();

    // Every client holds its connections open at the same time, so that the
    // server needs threads for all of them at once.
    let barrier = Arc::new(Barrier::new(CLIENTS as usize));
    let outcomes: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|client| {
                let (socket, barrier) = (socket.clone(), Arc::clone(&barrier));
                scope.spawn(move || {
                    let attempts: Vec<_> = (0..CONNECTIONS_PER_CLIENT).map(|_| attach(&socket, "lun0")).collect();
                    barrier.wait();
                    let mut outcomes = Vec::new();
                    for (index, attempt) in attempts.into_iter().enumerate() {
                        outcomes.push(attempt.map(|mut connection| {
                            let offset = (client * CONNECTIONS_PER_CLIENT + index as u64) << 20;
                            let data = seeded_bytes(offset, 64 << 10);
                            connection.write_flush_verify(offset, &data)
                        }));
                    }
                    barrier.wait();
                    outcomes
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for client in clients {
            for outcome in client.join().expect("a client thread panicked") {
                // Refused (Err) or served, and then the I/O must have succeeded.
                match outcome {
                    Ok(served) => outcomes.push(served),
                    Err(refusal) => eprintln!("refused: {refusal}"),
                }
            }
        }
        outcomes
    });
    let served = outcomes.len() as u64;
    let refused = CLIENTS * CONNECTIONS_PER_CLIENT - served;
    eprintln!("under pids.max 40: {served} connections served, {refused} refused");
    for outcome in &outcomes {
        assert_eq!(outcome, &Ok(()), "an accepted connection is served");
    }
    assert!(volume.server_running(), "the server survived: {}", volume.server_log());
    assert!(served >= CLIENTS, "most connections were served ({served})");
    assert!(refused >= 1, "the limit was reached (else this test tests nothing)");

    // Once those clients have left, new ones are served.
    std::thread::sleep(Duration::from_millis(200));
    qemu_io(&volume, &["write -P 0x3c 128M 1M", "read -P 0x3c 128M 1M"]);
    assert!(volume.stop_server().success(), "{}", volume.server_log());
}
