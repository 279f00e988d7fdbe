//! Every shipped DiskSim model parses and builds, and its geometry is consistent.

use std::path::PathBuf;

use proxima_disk::{DiskModel, Override};

fn models_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models")
}

const PARVS: [&str; 6] = [
    "hp_c2247a/hp_c2247a.parv",
    "ibm18es/ibm18es.parv",
    "cheetah15k5/Seagate-Cheetah15k5.parv",
    "atlas10k/atlas10k.parv",
    "hp_c3323a/hp_c3323a.parv",
    "cheetah4LP/cheetah4LP.parv",
];

#[test]
fn every_shipped_parv_loads() {
    for parv in PARVS {
        let model = DiskModel::load(&models_dir().join(parv), &[]).unwrap_or_else(|error| panic!("{parv}: {error}"));
        assert!(model.sector_count() > 1_000_000, "{parv}: {} sectors", model.sector_count());
        assert!(model.revolution_ns() > 3_000_000, "{parv}");
        let last = model.lbn_to_physical(model.sector_count() - 1).unwrap();
        assert!(last.cylinder < model.cylinder_count(), "{parv}");
        assert!(model.lbn_to_physical(model.sector_count()).is_none());
    }
}

#[test]
fn builtins_load_and_match_their_files() {
    for name in DiskModel::builtin_names() {
        let model = DiskModel::builtin(name).unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_eq!(model.name(), *name);
    }
    let cheetah = DiskModel::builtin("cheetah15k5").unwrap();
    assert_eq!(cheetah.sector_count(), 286_749_487);
    assert_eq!(cheetah.surface_count(), 4);
    assert_eq!(cheetah.max_queue_length(), 8);
}

#[test]
fn overrides_change_the_named_parameter() {
    let off = Override::parse("disk0:Enable caching in buffer=0").unwrap();
    let model = DiskModel::builtin_with("cheetah15k5", &[off]).unwrap();
    assert!(!model.cache().enabled);
    assert!(DiskModel::builtin("cheetah15k5").unwrap().cache().enabled);
    let unknown = Override::parse("disk0:No such parameter=1").unwrap();
    let error = DiskModel::builtin_with("cheetah15k5", &[unknown]).unwrap_err().to_string();
    assert!(error.contains("No such parameter"), "{error}");
}
