//! The shipped models with one numeric parameter perturbed within its legal
//! range (non-negative, integers kept integral) either load or give an error
//! naming a file: the loader never panics, and a model that loads runs reads
//! and writes without panicking.

use std::collections::HashMap;
use std::sync::Arc;

use proptest::prelude::*;
use proxima_disk::closed_loop::{self, ClosedLoopConfig};
use proxima_disk::params::FileSource;
use proxima_disk::{DiskModel, DiskOp, LoadError, Scheduler};

const MODELS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/models");

/// The G1 drives (the Cheetah 15K.5's table layout is too large to reload
/// hundreds of times in a test) and their `.parv`.
const DRIVES: [(&str, &str); 5] = [
    ("atlas10k", "atlas10k.parv"),
    ("hp_c3323a", "hp_c3323a.parv"),
    ("cheetah4LP", "cheetah4LP.parv"),
    ("hp_c2247a", "hp_c2247a.parv"),
    ("ibm18es", "ibm18es.parv"),
];

/// A drive's files held in memory, one of them editable.
struct MemorySource {
    files: HashMap<String, String>,
}

impl FileSource for MemorySource {
    fn read(&self, name: &str) -> Result<(Arc<str>, String), LoadError> {
        let text = self
            .files
            .get(name)
            .ok_or_else(|| LoadError::Io { file: name.to_string(), message: "no such file".to_string() })?;
        Ok((Arc::from(name), text.clone()))
    }
}

fn drive_files(folder: &str) -> HashMap<String, String> {
    std::fs::read_dir(format!("{MODELS}/{folder}"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_none_or(|extension| extension != "trace"))
        .map(|path| (path.file_name().unwrap().to_string_lossy().to_string(), std::fs::read_to_string(&path).unwrap()))
        .collect()
}

/// The positions (file, byte range) of every `Name = number` value in the
/// drive's `.diskspecs` and `.model` files.
fn numeric_values(files: &HashMap<String, String>) -> Vec<(String, std::ops::Range<usize>)> {
    let mut found = Vec::new();
    let mut names: Vec<&String> =
        files.keys().filter(|name| name.ends_with(".diskspecs") || name.ends_with(".model")).collect();
    names.sort();
    for name in names {
        let text = &files[name];
        let mut offset = 0;
        for line in text.split_inclusive('\n') {
            if let Some(equals) = line.find('=') {
                let value = line[equals + 1..].trim_start();
                let start = offset + line.len() - value.len();
                let length = value.find([',', '\n', ' ', '#']).unwrap_or(value.len());
                if length > 0 && value[..length].parse::<f64>().is_ok() && !line.trim_start().starts_with('#') {
                    found.push((name.clone(), start..start + length));
                }
            }
            offset += line.len();
        }
    }
    found
}

/// A value in the parameter's legal range: non-negative, integral when the
/// original is, from zero to about three times the original.
fn perturbed(original: &str, choice: u32) -> String {
    let value: f64 = original.parse().unwrap();
    let scaled = value.abs() * f64::from(choice) / 100.0 + f64::from(choice % 3);
    if original.contains('.') {
        format!("{scaled:.6}")
    } else {
        format!("{}", scaled.round() as i64)
    }
}

fn run_briefly(model: DiskModel) {
    let model = Arc::new(model);
    for op in [DiskOp::Read, DiskOp::Write] {
        let config = ClosedLoopConfig {
            queue_depth: 4,
            scheduler: Scheduler::Sptf,
            op,
            sectors_per_request: 8,
            request_count: 200,
            seed: 7,
        };
        let result = closed_loop::run(Arc::clone(&model), &config);
        assert_eq!(result.completed, 200);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn perturbed_parameters_load_or_err(drive in 0usize..DRIVES.len(), which in any::<prop::sample::Index>(), choice in 0u32..300) {
        let (folder, parv) = DRIVES[drive];
        let mut files = drive_files(folder);
        let values = numeric_values(&files);
        prop_assert!(!values.is_empty());
        let (file, range) = values[which.index(values.len())].clone();
        let text = files.get_mut(&file).unwrap();
        let replacement = perturbed(&text[range.clone()], choice);
        text.replace_range(range, &replacement);
        match DiskModel::load_from_source(&MemorySource { files }, parv, &[]) {
            Ok(model) => run_briefly(model),
            Err(error) => {
                let message = error.to_string();
                prop_assert!(message.contains(".parv") || message.contains(".diskspecs") || message.contains(".model")
                    || message.contains(".seek") || message.contains("trace"), "{message}");
            }
        }
    }
}

#[test]
fn every_shipped_drive_has_perturbable_values() {
    for (folder, parv) in DRIVES {
        let files = drive_files(folder);
        assert!(numeric_values(&files).len() > 50, "{folder}");
        DiskModel::load_from_source(&MemorySource { files }, parv, &[]).unwrap();
    }
}
