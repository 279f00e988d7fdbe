//! Arbitrary bytes as a DiskSim parameter file (and as every file it sources)
//! must give a model or a `LoadError`, never a panic or a hang.

#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use proxima_disk::params::FileSource;
use proxima_disk::{DiskModel, LoadError};

struct Bytes(String);

impl FileSource for Bytes {
    fn read(&self, name: &str) -> Result<(Arc<str>, String), LoadError> {
        Ok((Arc::from(name), self.0.clone()))
    }
}

fuzz_target!(|data: &[u8]| {
    let source = Bytes(String::from_utf8_lossy(data).into_owned());
    let _ = DiskModel::load_from_source(&source, "fuzz.parv", &[]);
});
