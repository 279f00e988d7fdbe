//! Remapped defects change the mapping as DiskSim's layouts say: a G1 zone's
//! `defects` pair moves one defective sector's LBN to its replacement (here a
//! spare of the Cheetah 4LP), a G4 `Remaps` entry moves a run of LBNs to the
//! sectors it names (here a slipped sector of the Cheetah 15K.5). Everything
//! else stays where it was, mappings still round-trip, a read across the moved
//! sector detours to it, and replacements that hold data are refused.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use proxima_disk::{DiskModel, DiskOp, DiskRequest, HardDisk, LoadError, PhysicalSector};

const MODELS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/models");

/// Loads a shipped model from a temporary copy of its folder with `file`'s
/// text passed through `edit`.
fn load_edited(folder: &str, parv: &str, file: &str, edit: impl Fn(&str) -> String) -> Result<DiskModel, LoadError> {
    let directory = tempfile::tempdir().unwrap();
    for entry in fs::read_dir(Path::new(MODELS).join(folder)).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), directory.path().join(entry.file_name())).unwrap();
    }
    let text = fs::read_to_string(directory.path().join(file)).unwrap();
    let edited = edit(&text);
    assert_ne!(edited, text, "the edit must change {file}");
    fs::write(directory.path().join(file), edited).unwrap();
    DiskModel::load(&directory.path().join(parv), &[])
}

/// The Cheetah 4LP with its second zone's `defects` list replaced.
fn cheetah4lp_with_defects(pairs: &str) -> Result<DiskModel, LoadError> {
    load_edited("cheetah4LP", "cheetah4LP.parv", "cheetah4LP.model", |text| {
        text.replace(
            "defects = [\n               233375,\n               233375\n            ]",
            &format!("defects = [ {pairs} ]"),
        )
    })
}

/// Zone 2 of the Cheetah 4LP: cylinders from 1345, 8 surfaces, 187 sectors per
/// track, track skew 22, cylinder skew 35; spares are the last 108 sectors of
/// every 12 cylinders (17,952 sectors). Zone position 233,000 is track 1245
/// (cylinder 1345 + 155, surface 5), sector 185 before skew; the skew is
/// 1090 × 22 + 155 × 35 = 29,405 ≡ 46 (mod 187), so physical sector 44.
const DEFECTIVE: PhysicalSector = PhysicalSector { cylinder: 1500, surface: 5, sector: 44 };

#[test]
fn a_g1_defect_moves_one_lbn_to_its_spare() {
    let original = DiskModel::load(&Path::new(MODELS).join("cheetah4LP/cheetah4LP.parv"), &[]).unwrap();
    // 233,374 is a spare: 233,374 − 12 × 17,952 = 17,950 ≥ 17,952 − 108.
    let remapped = cheetah4lp_with_defects("233000, 233374").unwrap();
    let moved_lbn = original.physical_to_lbn(DEFECTIVE).expect("the defective sector holds data before the remap");
    assert_eq!(remapped.sector_count(), original.sector_count(), "remapping costs no capacity");
    for lbn in moved_lbn - 3000..moved_lbn + 3000 {
        let physical = remapped.lbn_to_physical(lbn).unwrap();
        assert_eq!(remapped.physical_to_lbn(physical), Some(lbn), "lbn {lbn} round-trips");
        assert_eq!(physical != original.lbn_to_physical(lbn).unwrap(), lbn == moved_lbn, "only lbn {moved_lbn} moves");
    }
    let replacement = remapped.lbn_to_physical(moved_lbn).unwrap();
    assert_eq!((replacement.cylinder, replacement.surface), (1500, 7), "track 1247 holds zone position 233,374");
    assert_eq!(remapped.physical_to_lbn(DEFECTIVE), None, "the defective sector holds nothing");
    let track = remapped.track_of(moved_lbn).unwrap();
    assert_eq!((track.first_lbn, track.sector_count), (moved_lbn, 1), "the moved LBN stands alone");
}

#[test]
fn a_read_across_a_remapped_sector_detours_to_it() {
    let original = Arc::new(DiskModel::load(&Path::new(MODELS).join("cheetah4LP/cheetah4LP.parv"), &[]).unwrap());
    let remapped = Arc::new(cheetah4lp_with_defects("233000, 233374").unwrap());
    let moved_lbn = original.physical_to_lbn(DEFECTIVE).unwrap();
    // Short enough for the media, not the bus, to set the response time.
    let request = DiskRequest { id: 0, op: DiskOp::Read, lbn: moved_lbn - 10, sector_count: 20 };
    let response = |model: &Arc<DiskModel>| {
        let mut disk = HardDisk::new(Arc::clone(model), 3);
        disk.arrive(1_000_000, request);
        let mut completions = Vec::new();
        disk.advance(disk.next_event_ns().unwrap(), &mut completions);
        completions[0].response_ns()
    };
    let (straight_ns, detour_ns) = (response(&original), response(&remapped));
    // Two head switches at least: to the spare's surface and back.
    assert!(
        detour_ns >= straight_ns + 2 * remapped.head_switch_ns(),
        "detour {detour_ns} ns against {straight_ns} ns straight"
    );
}

#[test]
fn a_replacement_that_holds_data_is_refused() {
    // 233,001 is the data sector right after the defective one.
    let error = cheetah4lp_with_defects("233000, 233001").unwrap_err().to_string();
    assert!(error.contains("cheetah4LP.model") && error.contains("defects") && error.contains("holds data"), "{error}");
    let error = cheetah4lp_with_defects("233000").unwrap_err().to_string();
    assert!(error.contains("defects") && error.contains("pairs"), "{error}");
}

/// The Cheetah 15K.5 with `Remaps` set to `entries`.
fn cheetah15k5_with_remaps(entries: &str) -> Result<DiskModel, LoadError> {
    load_edited("cheetah15k5", "Seagate-Cheetah15k5.parv", "Seagate-Cheetah15k5-skews.layout", |text| {
        text.replace("Remaps = [ ]", &format!("Remaps = [ {entries} ]"))
    })
}

/// A slipped sector: between two consecutive LBNs of one track whose sectors
/// are not adjacent. Returns it and its track's sectors per track.
fn slipped_sector(model: &DiskModel) -> (PhysicalSector, u32) {
    let start = model.sector_count() - 400_000;
    for lbn in start..model.sector_count() - 1 {
        let (here, next) = (model.lbn_to_physical(lbn).unwrap(), model.lbn_to_physical(lbn + 1).unwrap());
        let spt = model.track_of(lbn).unwrap().sectors_per_track;
        if (here.cylinder, here.surface) == (next.cylinder, next.surface) && (here.sector + 1) % spt != next.sector {
            let gap = PhysicalSector { sector: (here.sector + 1) % spt, ..here };
            assert_eq!(model.physical_to_lbn(gap), None, "a slipped sector holds no LBN");
            return (gap, spt);
        }
    }
    panic!("no slip in the last 400,000 LBNs");
}

#[test]
fn a_g4_remap_moves_its_run_onto_the_named_sectors() {
    let original = DiskModel::builtin("cheetah15k5").unwrap();
    let (gap, spt) = slipped_sector(&original);
    let moved_lbn = 1_000_000;
    let remapped =
        cheetah15k5_with_remaps(&format!("{moved_lbn}, 1, {}, {}, {}, {spt}", gap.cylinder, gap.surface, gap.sector))
            .unwrap();
    assert_eq!(remapped.lbn_to_physical(moved_lbn), Some(gap));
    assert_eq!(remapped.physical_to_lbn(gap), Some(moved_lbn));
    assert_eq!(remapped.physical_to_lbn(original.lbn_to_physical(moved_lbn).unwrap()), None);
    for lbn in moved_lbn - 2000..moved_lbn + 2000 {
        let physical = remapped.lbn_to_physical(lbn).unwrap();
        assert_eq!(remapped.physical_to_lbn(physical), Some(lbn), "lbn {lbn} round-trips");
        assert_eq!(physical != original.lbn_to_physical(lbn).unwrap(), lbn == moved_lbn, "only lbn {moved_lbn} moves");
    }
    let before = remapped.track_of(moved_lbn - 1).unwrap();
    assert_eq!(before.first_lbn + u64::from(before.sector_count), moved_lbn, "the remap ends the track's run");
}

#[test]
fn g4_remaps_onto_data_or_malformed_are_refused() {
    let occupied = DiskModel::builtin("cheetah15k5").unwrap().lbn_to_physical(5).unwrap();
    let error = cheetah15k5_with_remaps(&format!(
        "1000000, 1, {}, {}, {}, 1200",
        occupied.cylinder, occupied.surface, occupied.sector
    ))
    .unwrap_err()
    .to_string();
    assert!(error.contains("Remaps") && error.contains("holds LBN 5"), "{error}");
    let error = cheetah15k5_with_remaps("1000000, 1, 0, 0").unwrap_err().to_string();
    assert!(error.contains("Remaps") && error.contains("sextuples"), "{error}");
}
