//! Running cells as Ray tasks: the Python driver `tools/ray/sweep_driver.py`
//! (built into the binary and written into the sweep's folder) connects to
//! the cluster, runs each cell as a task executing this `proxima` binary on a
//! worker, and prints one line per finished cell, which this module reads as
//! they come, so that each result is stored the moment it arrives, as in a
//! local run.
//!
//! The driver's protocol: it reads `cells.json` (`[{"id", "args"}]`) and
//! prints, for each cell, `proxima-cell {"id", "exit_code", "stdout",
//! "stderr"}` on its standard output; any other line (Ray's own) is ignored.
//! Its standard error goes to `ray/driver.log` in the sweep's folder.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use super::execute::CellRun;

/// The driver, as in the repository.
const DRIVER: &str = include_str!("../../../../tools/ray/sweep_driver.py");
/// What starts each of the driver's result lines.
const LINE_PREFIX: &str = "proxima-cell ";

/// The Python with Ray: `--ray-python`, else the environment tools/ray/setup.sh makes.
fn python(given: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(path) = given {
        return Ok(path.to_path_buf());
    }
    let venv = match std::env::var_os("PROXIMA_RAY_VENV") {
        Some(venv) => PathBuf::from(venv),
        None => {
            let home = std::env::var_os("HOME").ok_or("HOME is not set; give --ray-python")?;
            Path::new(&home).join(".cache/proxima/ray-venv")
        }
    };
    let python = venv.join("bin/python");
    if python.exists() {
        Ok(python)
    } else {
        Err(format!("{} does not exist: run tools/ray/setup.sh, or give --ray-python", python.display()))
    }
}

/// Runs the cells on the Ray cluster at `address`, calling `finished` with
/// each as it finishes. An error when the driver could not run or stopped
/// early (cells it did not report have no result).
pub fn run_ray(
    address: &str,
    python_given: Option<&Path>,
    binary: &Path,
    folder: &Path,
    cells: Vec<(usize, Vec<String>)>,
    finished: &mut dyn FnMut(usize, CellRun),
) -> Result<(), String> {
    if cells.is_empty() {
        return Ok(());
    }
    let python = python(python_given)?;
    let work = folder.join("ray");
    let io_error = |path: &Path, error: std::io::Error| format!("{}: {error}", path.display());
    std::fs::create_dir_all(&work).map_err(|error| io_error(&work, error))?;
    let driver = work.join("sweep_driver.py");
    std::fs::write(&driver, DRIVER).map_err(|error| io_error(&driver, error))?;
    let cells_path = work.join("cells.json");
    let listed: Vec<Value> = cells.iter().map(|(index, args)| json!({ "id": index, "args": args })).collect();
    std::fs::write(&cells_path, Value::Array(listed).to_string()).map_err(|error| io_error(&cells_path, error))?;
    let log_path = work.join("driver.log");
    let log = std::fs::File::create(&log_path).map_err(|error| io_error(&log_path, error))?;
    let mut child = Command::new(&python)
        .arg(&driver)
        .arg("--address")
        .arg(address)
        .arg("--binary")
        .arg(binary)
        .arg("--cells")
        .arg(&cells_path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .map_err(|error| format!("{}: {error}", python.display()))?;
    let stdout = child.stdout.take().expect("piped");
    let mut reported = 0;
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|error| format!("reading the Ray driver: {error}"))?;
        let Some(record) = line.strip_prefix(LINE_PREFIX) else { continue };
        let (index, run) = parse_record(record)?;
        if !cells.iter().any(|(known, _)| *known == index) {
            return Err(format!("the Ray driver reported an unknown cell {index}"));
        }
        finished(index, run);
        reported += 1;
    }
    let status = child.wait().map_err(|error| format!("waiting for the Ray driver: {error}"))?;
    if !status.success() || reported < cells.len() {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect();
        return Err(format!(
            "the Ray driver ({status}) reported {reported} of {} cells; {}: {}",
            cells.len(),
            log_path.display(),
            tail.join(" | ")
        ));
    }
    Ok(())
}

fn parse_record(text: &str) -> Result<(usize, CellRun), String> {
    let record: Value =
        serde_json::from_str(text).map_err(|error| format!("the Ray driver wrote {text:?}: {error}"))?;
    let index = record["id"].as_u64().ok_or_else(|| format!("no cell id in {text:?}"))? as usize;
    let run = CellRun {
        exit_code: record["exit_code"].as_i64().map(|code| code as i32),
        stdout: record["stdout"].as_str().unwrap_or_default().to_string(),
        stderr: record["stderr"].as_str().unwrap_or_default().to_string(),
    };
    Ok((index, run))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_driver_record_reads_back_as_the_cells_run() {
        let (index, run) =
            parse_record(r#"{"id": 3, "exit_code": 0, "stdout": "x\n{\"a\": 1}\n", "stderr": ""}"#).unwrap();
        assert_eq!(index, 3);
        assert_eq!(run.result().unwrap(), json!({"a": 1}));
        let (_, killed) = parse_record(r#"{"id": 4, "exit_code": null, "stdout": "", "stderr": "gone"}"#).unwrap();
        assert!(killed.result().unwrap_err().contains("gone"));
        assert!(parse_record("{}").is_err());
    }
}
