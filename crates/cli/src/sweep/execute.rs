//! Running cells on this machine: a pool of worker threads, each running one
//! `proxima` process at a time, reporting each cell as it finishes.

use std::collections::VecDeque;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{mpsc, Mutex};

use serde_json::Value;

/// How one cell's process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellRun {
    /// Its exit code (`None`: killed by a signal, or never started).
    pub exit_code: Option<i32>,
    /// What it printed.
    pub stdout: String,
    /// What it printed on standard error (or why it did not start).
    pub stderr: String,
}

impl CellRun {
    /// The result: the JSON object of the last line of a successful run.
    pub fn result(&self) -> Result<Value, String> {
        if self.exit_code != Some(0) {
            let code = self.exit_code.map_or("no exit code".to_string(), |code| format!("exit {code}"));
            let last = self.stderr.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or_default();
            return Err(format!("{code}: {last}"));
        }
        let line = self.stdout.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or_default();
        match serde_json::from_str::<Value>(line) {
            Ok(value) if value.is_object() => Ok(value),
            _ => Err(format!("the last line of its output is not a JSON object: {line:?}")),
        }
    }
}

/// Runs `binary` with each cell's arguments, `jobs` at once, and calls
/// `finished` (on this thread) with each cell's index as it finishes.
pub fn run_local(
    binary: &Path,
    cells: Vec<(usize, Vec<String>)>,
    jobs: usize,
    finished: &mut dyn FnMut(usize, CellRun),
) {
    let count = cells.len();
    let queue = Mutex::new(VecDeque::from(cells));
    let (sender, receiver) = mpsc::channel();
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(count) {
            let sender = sender.clone();
            let queue = &queue;
            scope.spawn(move || loop {
                let Some((index, args)) = queue.lock().expect("no worker panics holding it").pop_front() else {
                    return;
                };
                if sender.send((index, run_cell(binary, &args))).is_err() {
                    return;
                }
            });
        }
        drop(sender);
        for (index, run) in receiver.iter().take(count) {
            finished(index, run);
        }
    });
}

/// One `proxima` process, to its end.
fn run_cell(binary: &Path, args: &[String]) -> CellRun {
    match Command::new(binary).args(args).stdin(Stdio::null()).output() {
        Ok(output) => CellRun {
            exit_code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        },
        Err(error) => {
            CellRun { exit_code: None, stdout: String::new(), stderr: format!("{}: {error}", binary.display()) }
        }
    }
}
