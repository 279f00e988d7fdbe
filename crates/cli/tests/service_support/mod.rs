//! Shared by the volume scenario tests: the real `proxima` binary creating a
//! volume in a temporary directory and serving it on a Unix socket, killed with
//! SIGKILL or stopped with SIGTERM, and helpers to run the real NBD clients.
#![allow(dead_code, reason = "each test binary uses a different subset of these helpers")]

#[path = "../../../nbd/tests/common/clients.rs"]
mod clients;
pub mod raw_nbd;
#[allow(unused_imports, reason = "each test binary uses a different subset of these helpers")]
pub use clients::{fio_totals, fio_verify_command, run, seeded_bytes};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub fn proxima() -> Command {
    Command::new(env!("CARGO_BIN_EXE_proxima"))
}

/// The last line of a command's standard output, parsed as JSON.
pub fn last_json_line(output: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_else(|| panic!("no output: {stdout}"));
    serde_json::from_str(line).unwrap_or_else(|error| panic!("last line {line:?} is not JSON: {error}"))
}

/// A volume in a temporary directory, and the server serving it (when started).
pub struct Volume {
    pub temporary: tempfile::TempDir,
    pub directory: PathBuf,
    pub socket: PathBuf,
    server: Option<Child>,
}

impl Volume {
    /// Creates a volume with `proxima volume create DIR` and the given flags.
    pub fn create(flags: &[&str]) -> Self {
        let temporary = tempfile::tempdir().expect("temporary directory");
        let directory = temporary.path().join("vol");
        let socket = temporary.path().join("nbd.sock");
        run(proxima().args(["volume", "create"]).arg(&directory).args(flags));
        Self { temporary, directory, socket, server: None }
    }

    /// Runs `proxima ARGS...` with the volume directory inserted after the
    /// first `insert_at` arguments.
    pub fn command(&self, words: &[&str], insert_at: usize) -> Command {
        let mut command = proxima();
        command.args(&words[..insert_at]).arg(&self.directory).args(&words[insert_at..]);
        command
    }

    /// `proxima extent create DIR NAME --size SIZE`.
    pub fn create_extent(&self, name: &str, size: &str) {
        run(&mut self.command(&["extent", "create", name, "--size", size], 2));
    }

    /// Creates a thin extent, which may be larger than the data device.
    pub fn create_thin_extent(&self, name: &str, size: &str) {
        run(&mut self.command(&["extent", "create", name, "--size", size, "--thin"], 2));
    }

    /// A path in the test's temporary directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.temporary.path().join(name)
    }

    /// The NBD URI of an export.
    pub fn uri(&self, export: &str) -> String {
        format!("nbd+unix:///{export}?socket={}", self.socket.display())
    }

    /// Starts `proxima serve DIR --socket PATH` and waits until it accepts.
    pub fn start_server(&mut self) {
        self.start_server_with(&[], |_| {});
    }

    /// Starts `proxima serve DIR --socket PATH EXTRA...`, letting `configure`
    /// adjust the command first, and waits until it accepts.
    pub fn start_server_with(&mut self, extra: &[&str], configure: impl FnOnce(&mut Command)) {
        assert!(self.server.is_none(), "one server at a time");
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(self.path("serve.log")).expect("server log");
        let mut command = proxima();
        command
            .arg("serve")
            .arg(&self.directory)
            .arg("--socket")
            .arg(&self.socket)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log);
        configure(&mut command);
        let child = command.spawn().expect("start proxima serve");
        self.server = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::os::unix::net::UnixStream::connect(&self.socket).is_err() {
            if let Some(status) = self.server.as_mut().and_then(|child| child.try_wait().ok().flatten()) {
                panic!("proxima serve exited with {status}: {}", self.server_log());
            }
            assert!(Instant::now() < deadline, "the server did not start: {}", self.server_log());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The running server's process id.
    pub fn server_pid(&self) -> u32 {
        self.server.as_ref().expect("a running server").id()
    }

    /// Whether the server is still running.
    pub fn server_running(&mut self) -> bool {
        self.server.as_mut().is_some_and(|child| child.try_wait().expect("poll the server").is_none())
    }

    /// Sends SIGTERM to the server without waiting for it.
    pub fn signal_server(&self, signal: i32) {
        let pid = i32::try_from(self.server_pid()).expect("pid fits");
        // SAFETY: kill with a valid pid and signal has no memory effects.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill");
    }

    /// Waits up to `limit` for the server to exit; its status, or `None` if it
    /// still runs.
    pub fn wait_server(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            let child = self.server.as_mut().expect("a running server");
            if let Some(status) = child.try_wait().expect("poll the server") {
                self.server = None;
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the server wrote to stderr so far.
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.path("serve.log")).unwrap_or_default()
    }

    /// Kills the server with SIGKILL: no flush, no commit (a crash).
    pub fn kill_server(&mut self) {
        let mut child = self.server.take().expect("a running server");
        child.kill().expect("SIGKILL");
        child.wait().expect("reap the server");
    }

    /// Stops the server with SIGTERM and returns its exit status.
    pub fn stop_server(&mut self) -> std::process::ExitStatus {
        let mut child = self.server.take().expect("a running server");
        let pid = i32::try_from(child.id()).expect("pid fits");
        // SAFETY: kill with a valid pid and signal has no memory effects.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0, "SIGTERM");
        child.wait().expect("wait for the server")
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        if let Some(mut child) = self.server.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// fio's nbd engine on an export with crc32c verification (seeded), JSON output,
/// run in `directory` (fio keeps verify state files in its working directory).
pub fn fio(volume: &Volume, export: &str, name: &str, directory: &Path) -> Command {
    let mut command = fio_verify_command(&volume.uri(export), name);
    command.current_dir(directory);
    command
}
