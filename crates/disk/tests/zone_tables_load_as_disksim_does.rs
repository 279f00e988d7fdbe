//! G1 zone tables: a last zone ending on the cylinder count itself loads (as
//! DiskSim 4.0 runs it), and an inconsistent zone is refused with the file,
//! line and parameter named.

use std::fs;

use proxima_disk::{DiskModel, LoadError};

const HP_C2247A: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/models/hp_c2247a");
const MODEL_FILE: &str = "hp_c2247a_validate.model";

/// The HP C2247A with its `.model` file edited by `edit`.
fn load_edited(edit: impl Fn(&str) -> String) -> Result<DiskModel, LoadError> {
    let directory = tempfile::tempdir().unwrap();
    for entry in fs::read_dir(HP_C2247A).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), directory.path().join(entry.file_name())).unwrap();
    }
    let model = fs::read_to_string(directory.path().join(MODEL_FILE)).unwrap();
    fs::write(directory.path().join(MODEL_FILE), edit(&model)).unwrap();
    DiskModel::load(&directory.path().join("hp_c2247a.parv"), &[])
}

#[test]
fn a_last_zone_ending_on_the_cylinder_count_loads() {
    let shipped = load_edited(str::to_string).unwrap();
    assert_eq!(shipped.cylinder_count(), 2051);
    let model = load_edited(|text| text.replace("Last cylinder number = 2050", "Last cylinder number = 2051")).unwrap();
    assert_eq!(model.cylinder_count(), 2052, "the zone's last cylinder joins the drive");
    assert_eq!(model.sector_count(), shipped.sector_count(), "the block count still bounds the capacity");
    let last = model.lbn_to_physical(model.sector_count() - 1).unwrap();
    assert!(last.cylinder < model.cylinder_count());
}

#[test]
fn a_zone_past_the_cylinder_count_names_file_line_and_parameter() {
    let error = load_edited(|text| text.replace("Last cylinder number = 2050", "Last cylinder number = 2052"))
        .unwrap_err()
        .to_string();
    assert!(error.contains(&format!("{MODEL_FILE}:")), "{error}");
    assert!(error.contains("Last cylinder number"), "{error}");
}

#[test]
fn overlapping_zones_name_the_first_cylinder() {
    let error = load_edited(|text| text.replace("First cylinder number = 559", "First cylinder number = 558"))
        .unwrap_err()
        .to_string();
    assert!(error.contains(&format!("{MODEL_FILE}:")) && error.contains("First cylinder number"), "{error}");
}
