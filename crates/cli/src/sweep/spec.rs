//! A sweep's specification (a TOML file) and the cells it expands to.
//!
//! ```toml
//! command = "replay"                 # or "reproduce", with experiment = "NAME"
//! options = ["--target", "volume"]   # given to every cell
//! plots = ["iops", "mean_latency_ms"] # result columns to plot (optional)
//! [grid]                             # every combination is one cell
//! trace = ["traces/a.csv"]           # replay's TRACE, relative to the SPEC's folder
//! layout = ["proximal", "in-place"]  # any other key K: the option --K VALUE
//! seed = [0, 1]
//! ```
//!
//! Invariants: a cell's arguments are a function of the specification alone
//! (paths are made absolute from the SPEC's folder), and its key is a hash of
//! those arguments, so the same cell has the same key in every run: that is
//! what resuming relies on. Cells are numbered in grid order, the last axis
//! varying fastest.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use thiserror::Error;

/// Why a specification was refused (bad input: exit 2).
#[derive(Debug, Error)]
pub enum SpecError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The SPEC file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// Not TOML, or not the expected keys.
    #[error("{path}: {message}")]
    Parse {
        /// The SPEC file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// Well-formed but not runnable.
    #[error("{path}: {message}")]
    Invalid {
        /// The SPEC file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecFile {
    command: String,
    experiment: Option<String>,
    #[serde(default)]
    options: Vec<String>,
    plots: Option<Vec<String>>,
    #[serde(default)]
    grid: toml::Table,
}

/// What every cell runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SweepCommand {
    /// `proxima replay TRACE ...`.
    Replay,
    /// `proxima reproduce EXPERIMENT ... --out CELL_DIRECTORY`.
    Reproduce {
        /// The experiment.
        experiment: String,
    },
}

/// One parameter of the grid and its values, in the file's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// The key: an option's name without `--`, or `trace`.
    pub name: String,
    /// Its values, as written (scalars).
    pub values: Vec<Value>,
}

/// A checked specification.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The command of every cell.
    pub command: SweepCommand,
    /// Options given to every cell.
    pub options: Vec<String>,
    /// The grid, in the file's order.
    pub axes: Vec<Axis>,
    /// Result columns to plot.
    pub plots: Option<Vec<String>>,
    /// The folder relative paths are taken from (absolute).
    folder: PathBuf,
}

/// One combination of the grid.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Position in grid order.
    pub index: usize,
    /// `(axis, value)`, in the grid's order.
    pub parameters: Vec<(String, Value)>,
    /// The `proxima` arguments (for `reproduce`, without `--out`).
    pub args: Vec<String>,
    /// A stable name: 16 hex digits of a hash of `args`.
    pub key: String,
}

impl Spec {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<Spec, SpecError> {
        let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read { path: path.into(), source })?;
        let file: SpecFile = toml::from_str(&text)
            .map_err(|error| SpecError::Parse { path: path.into(), message: error.to_string() })?;
        let invalid = |message: String| SpecError::Invalid { path: path.into(), message };
        let folder = std::fs::canonicalize(path)
            .map_err(|source| SpecError::Read { path: path.into(), source })?
            .parent()
            .expect("a file has a folder")
            .to_path_buf();
        let command = match (file.command.as_str(), file.experiment) {
            ("replay", None) => SweepCommand::Replay,
            ("replay", Some(_)) => return Err(invalid("`experiment` applies to command = \"reproduce\"".into())),
            ("reproduce", Some(experiment)) => {
                if proxima_lab::find_experiment(&experiment).is_none() {
                    return Err(invalid(format!("no experiment `{experiment}` (see proxima reproduce --help)")));
                }
                SweepCommand::Reproduce { experiment }
            }
            ("reproduce", None) => return Err(invalid("command = \"reproduce\" needs experiment = \"NAME\"".into())),
            (other, _) => return Err(invalid(format!("command `{other}` is neither \"replay\" nor \"reproduce\""))),
        };
        let mut axes = Vec::new();
        for (name, values) in file.grid {
            axes.push(axis(&name, values, &command).map_err(invalid)?);
        }
        if command == SweepCommand::Replay && !axes.iter().any(|axis| axis.name == "trace") {
            return Err(invalid("a replay sweep needs the traces: [grid] trace = [\"FILE\", ...]".into()));
        }
        if matches!(command, SweepCommand::Reproduce { .. }) && file.options.iter().any(|option| option == "--out") {
            return Err(invalid("the sweep gives each cell its own --out; leave it out of `options`".into()));
        }
        for axis in &axes {
            let option = format!("--{}", axis.name);
            if file.options.iter().any(|given| given == &option || given.starts_with(&format!("{option}="))) {
                return Err(invalid(format!("{option} is both in `options` and in the grid")));
            }
        }
        Ok(Spec { command, options: file.options, axes, plots: file.plots, folder })
    }

    /// Every cell, in grid order.
    pub fn cells(&self) -> Vec<Cell> {
        let count: usize = self.axes.iter().map(|axis| axis.values.len()).product();
        (0..count).map(|index| self.cell(index)).collect()
    }

    fn cell(&self, index: usize) -> Cell {
        let mut remainder = index;
        let mut parameters = vec![(String::new(), Value::Null); self.axes.len()];
        for (slot, axis) in parameters.iter_mut().zip(&self.axes).rev() {
            *slot = (axis.name.clone(), axis.values[remainder % axis.values.len()].clone());
            remainder /= axis.values.len();
        }
        let mut args = match &self.command {
            SweepCommand::Replay => {
                let trace = parameters.iter().find(|(name, _)| name == "trace").expect("checked at load");
                vec!["replay".to_string(), self.folder.join(text_of(&trace.1)).display().to_string()]
            }
            SweepCommand::Reproduce { experiment } => vec!["reproduce".to_string(), experiment.clone()],
        };
        args.extend(self.options.iter().cloned());
        for (name, value) in parameters.iter().filter(|(name, _)| !(name == "trace" && self.is_replay())) {
            args.push(format!("--{name}"));
            args.push(text_of(value));
        }
        let key = format!("{:016x}", fnv1a(&args));
        Cell { index, parameters, args, key }
    }

    fn is_replay(&self) -> bool {
        self.command == SweepCommand::Replay
    }
}

/// A grid entry, checked: a non-empty array of scalars under a plain name.
fn axis(name: &str, values: toml::Value, command: &SweepCommand) -> Result<Axis, String> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        return Err(format!("grid key `{name}` is not an option name (lowercase letters, digits and -)"));
    }
    if name == "out" && matches!(command, SweepCommand::Reproduce { .. }) {
        return Err("the sweep gives each cell its own --out; it cannot be a grid axis".into());
    }
    let toml::Value::Array(items) = values else {
        return Err(format!("grid `{name}` is not an array of values"));
    };
    if items.is_empty() {
        return Err(format!("grid `{name}` has no values"));
    }
    let values = items
        .into_iter()
        .map(|item| match item {
            toml::Value::String(text) => Ok(Value::String(text)),
            toml::Value::Integer(number) => Ok(Value::from(number)),
            toml::Value::Float(number) if number.is_finite() => Ok(Value::from(number)),
            other => Err(format!("grid `{name}`: {other} is not a string, an integer or a finite number")),
        })
        .collect::<Result<Vec<Value>, String>>()?;
    Ok(Axis { name: name.to_string(), values })
}

/// A scalar as it goes on the command line.
pub fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// FNV-1a (64 bits) of the arguments, each followed by a zero byte: a stable
/// name for a cell, not a defence against anyone.
fn fnv1a(args: &[String]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in args.iter().flat_map(|arg| arg.bytes().chain([0])) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> Result<Spec, SpecError> {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("sweep.toml");
        std::fs::write(&path, text).unwrap();
        Spec::load(&path)
    }

    #[test]
    fn the_grid_expands_in_order_last_axis_fastest() {
        let spec = spec(
            "command = \"replay\"\noptions = [\"--mode\", \"afap\"]\n[grid]\ntrace = [\"t.csv\"]\nmodel = [\"a\", \"b\"]\nseed = [1, 2, 3]\n",
        )
        .unwrap();
        let cells = spec.cells();
        assert_eq!(cells.len(), 6);
        let seeds: Vec<String> = cells.iter().map(|cell| text_of(&cell.parameters[2].1)).collect();
        assert_eq!(seeds, ["1", "2", "3", "1", "2", "3"]);
        assert_eq!(cells[4].args[2..], ["--mode", "afap", "--model", "b", "--seed", "2"]);
        assert!(cells[4].args[1].ends_with("/t.csv") && Path::new(&cells[4].args[1]).is_absolute());
        let keys: std::collections::HashSet<&str> = cells.iter().map(|cell| cell.key.as_str()).collect();
        assert_eq!(keys.len(), 6, "every cell has its own key");
        assert_eq!(spec.cells(), cells, "the same cells every time");
    }

    #[test]
    fn bad_specifications_are_refused() {
        for text in [
            "command = \"replay\"\n",
            "command = \"dance\"\n",
            "command = \"reproduce\"\n",
            "command = \"reproduce\"\nexperiment = \"nope\"\n",
            "command = \"reproduce\"\nexperiment = \"hylog-model\"\n[grid]\nout = [\"x\"]\n",
            "command = \"replay\"\n[grid]\ntrace = []\n",
            "command = \"replay\"\n[grid]\ntrace = \"t\"\n",
            "command = \"replay\"\n[grid]\ntrace = [\"t\"]\nSeed = [1]\n",
            "command = \"replay\"\n[grid]\ntrace = [\"t\"]\nfast = [true]\n",
            "command = \"replay\"\noptions = [\"--seed\", \"1\"]\n[grid]\ntrace = [\"t\"]\nseed = [1]\n",
            "command = \"replay\"\nunknown = 1\n[grid]\ntrace = [\"t\"]\n",
        ] {
            assert!(spec(text).is_err(), "{text}");
        }
    }
}
