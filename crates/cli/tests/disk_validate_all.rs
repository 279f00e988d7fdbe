//! `proxima disk validate-all DIR`: one row per drive folder and a JSON last
//! line with DiskSim's figures for the known drives; a drive that does not
//! load is named and the command exits 2.

use std::fs;
use std::path::Path;
use std::process::Command;

const MODELS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../disk/models");

fn copy_drive(folder: &str, into: &Path) {
    let destination = into.join(folder);
    fs::create_dir_all(&destination).unwrap();
    for entry in fs::read_dir(Path::new(MODELS).join(folder)).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), destination.join(entry.file_name())).unwrap();
    }
}

fn validate_all(directory: &Path) -> (i32, String, String) {
    let output =
        Command::new(env!("CARGO_BIN_EXE_proxima")).args(["disk", "validate-all"]).arg(directory).output().unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (output.status.code().unwrap(), text(output.stdout), text(output.stderr))
}

#[test]
fn known_and_unknown_drives_are_reported() {
    let directory = tempfile::tempdir().unwrap();
    copy_drive("hp_c2247a", directory.path());
    copy_drive("ibm18es", directory.path());
    // A drive without DiskSim's figures: the same files under another name.
    fs::rename(directory.path().join("ibm18es"), directory.path().join("unknown_drive")).unwrap();
    let (code, stdout, stderr) = validate_all(directory.path());
    assert_eq!(code, 0, "{stderr}");
    let json: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let drives = json["drives"].as_array().unwrap();
    assert_eq!(drives.len(), 2);
    assert_eq!(drives[0]["drive"], "hp_c2247a");
    assert_eq!(drives[0]["disksim_rms_ms"], 0.094);
    let ratio = drives[0]["ratio"].as_f64().unwrap();
    assert!((ratio - drives[0]["rms_ms"].as_f64().unwrap() / 0.094).abs() < 1e-9);
    assert_eq!(drives[1]["drive"], "unknown_drive");
    assert!(drives[1]["ratio"].is_null() && drives[1]["rms_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(stdout.lines().count(), 4, "a header, two rows and the JSON line:\n{stdout}");
}

#[test]
fn a_drive_that_does_not_load_is_named_with_exit_2() {
    let directory = tempfile::tempdir().unwrap();
    copy_drive("hp_c2247a", directory.path());
    let model = directory.path().join("hp_c2247a/hp_c2247a_validate.model");
    let text =
        fs::read_to_string(&model).unwrap().replace("Last cylinder number = 2050", "Last cylinder number = 2060");
    fs::write(&model, text).unwrap();
    let (code, _, stderr) = validate_all(directory.path());
    assert_eq!(code, 2);
    assert!(stderr.contains("hp_c2247a_validate.model:") && stderr.contains("Last cylinder number"), "{stderr}");
}
