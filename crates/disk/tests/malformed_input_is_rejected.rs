//! Bad parameter files give errors naming the file, line and parameter; no
//! input, however malformed, makes the loader panic.

use std::fs;

use proptest::prelude::*;
use proxima_disk::{DiskModel, LoadError, Override};

const CHEETAH_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/models/cheetah15k5");

/// Copies the Cheetah 15K.5 model into a temporary directory with one file replaced.
fn load_with(file: &str, contents: &str) -> Result<DiskModel, LoadError> {
    let directory = tempfile::tempdir().unwrap();
    for entry in fs::read_dir(CHEETAH_DIR).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), directory.path().join(entry.file_name())).unwrap();
    }
    fs::write(directory.path().join(file), contents).unwrap();
    DiskModel::load(&directory.path().join("Seagate-Cheetah15k5.parv"), &[])
}

fn diskspecs() -> String {
    fs::read_to_string(format!("{CHEETAH_DIR}/Seagate-Cheetah15k5.diskspecs")).unwrap()
}

#[test]
fn a_bad_number_names_file_line_and_parameter() {
    let text = diskspecs().replace("Max queue length = 8", "Max queue length = eight");
    let error = load_with("Seagate-Cheetah15k5.diskspecs", &text).unwrap_err().to_string();
    assert!(error.contains("Seagate-Cheetah15k5.diskspecs:18"), "{error}");
    assert!(error.contains("Max queue length"), "{error}");
}

#[test]
fn a_missing_parameter_is_named() {
    let text = diskspecs().replace("Max queue length = 8,\n", "");
    let error = load_with("Seagate-Cheetah15k5.diskspecs", &text).unwrap_err().to_string();
    assert!(error.contains("lacks required parameter `Max queue length`"), "{error}");
}

#[test]
fn an_unsupported_value_says_what_is_supported() {
    let text = diskspecs().replace("Scheduling policy = 8", "Scheduling policy = 99");
    let error = load_with("Seagate-Cheetah15k5.diskspecs", &text).unwrap_err().to_string();
    assert!(error.contains("Scheduling policy") && error.contains("99") && error.contains("FCFS"), "{error}");
}

#[test]
fn a_truncated_layout_is_a_syntax_error() {
    let layout = fs::read_to_string(format!("{CHEETAH_DIR}/Seagate-Cheetah15k5-skews.layout")).unwrap();
    let error = load_with("Seagate-Cheetah15k5-skews.layout", &layout[..layout.len() / 2]).unwrap_err().to_string();
    assert!(error.contains("Seagate-Cheetah15k5-skews.layout"), "{error}");
}

#[test]
fn a_missing_seek_file_is_named() {
    let model = fs::read_to_string(format!("{CHEETAH_DIR}/Seagate-Cheetah15k5.model")).unwrap();
    let text = model.replace("Seagate-Cheetah15k5.seeks", "absent.seeks");
    let error = load_with("Seagate-Cheetah15k5.model", &text).unwrap_err().to_string();
    assert!(error.contains("absent.seeks") && error.contains("Full seek curve"), "{error}");
}

#[test]
fn overrides_must_be_well_formed() {
    for bad in ["disk0", "disk0:Max queue length", ":x=1", "disk0:x=", "disk0:x=[1]"] {
        assert!(Override::parse(bad).is_err(), "{bad}");
    }
    let error = DiskModel::builtin_with("cheetah15k5", &[Override::parse("disk9:Max queue length=4").unwrap()]);
    assert!(error.unwrap_err().to_string().contains("disk9"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Arbitrary bytes as the top-level file never panic.
    #[test]
    fn arbitrary_parv_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let _ = load_with("Seagate-Cheetah15k5.parv", &String::from_utf8_lossy(&bytes));
    }

    /// Mutating one byte of the disk specification never panics.
    #[test]
    fn mutated_diskspecs_never_panic(position in 0usize..2500, byte in any::<u8>()) {
        let mut bytes = diskspecs().into_bytes();
        let index = position % bytes.len();
        bytes[index] = byte;
        let _ = load_with("Seagate-Cheetah15k5.diskspecs", &String::from_utf8_lossy(&bytes));
    }
}

#[test]
fn more_slips_in_a_sparing_period_than_spares_names_the_slips() {
    // The Cheetah 4LP spares 108 sectors per range of 12 cylinders; its first
    // zone has four slips in one range.
    let directory = tempfile::tempdir().unwrap();
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/models/cheetah4LP");
    for entry in fs::read_dir(source).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), directory.path().join(entry.file_name())).unwrap();
    }
    let model_path = directory.path().join("cheetah4LP.model");
    let text = fs::read_to_string(&model_path).unwrap().replacen("Number of spares = 108", "Number of spares = 3", 1);
    fs::write(&model_path, text).unwrap();
    let error = DiskModel::load(&directory.path().join("cheetah4LP.parv"), &[]).unwrap_err().to_string();
    assert!(error.contains("cheetah4LP.model:") && error.contains("slips"), "{error}");
    assert!(error.contains("4 slips fall in one sparing period"), "{error}");
}
