//! LBN -> physical -> LBN round trips on every shipped layout, sampled in every
//! zone (and densely at zone edges), plus track extents that agree with the
//! mapping.

use std::path::PathBuf;

use proxima_disk::closed_loop::Random;
use proxima_disk::DiskModel;

fn models() -> Vec<DiskModel> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models");
    let mut models: Vec<DiskModel> =
        DiskModel::builtin_names().iter().map(|name| DiskModel::builtin(name).unwrap()).collect();
    for parv in ["hp_c3323a/hp_c3323a.parv", "cheetah4LP/cheetah4LP.parv"] {
        models.push(DiskModel::load(&root.join(parv), &[]).unwrap());
    }
    models
}

fn check_round_trip(model: &DiskModel, lbn: u64) {
    let physical = model.lbn_to_physical(lbn).unwrap_or_else(|| panic!("{}: lbn {lbn} unmapped", model.name()));
    assert_eq!(model.physical_to_lbn(physical), Some(lbn), "{}: lbn {lbn} -> {physical:?}", model.name());
}

#[test]
fn every_region_round_trips() {
    for model in models() {
        let mut random = Random::new(11);
        let count = model.sector_count();
        // Dense at both ends, and a sample every 1/4000th of the disk with random offsets.
        for lbn in (0..5000).chain(count - 5000..count) {
            check_round_trip(&model, lbn);
        }
        for step in 0..4000u64 {
            let base = count / 4000 * step;
            for _ in 0..10 {
                check_round_trip(&model, (base + random.below(count / 4000)).min(count - 1));
            }
        }
    }
}

#[test]
fn track_extents_agree_with_the_mapping() {
    for model in models() {
        let mut random = Random::new(5);
        for _ in 0..300 {
            let lbn = random.below(model.sector_count());
            let track = model.track_of(lbn).unwrap();
            assert!(track.first_lbn <= lbn && lbn < track.first_lbn + u64::from(track.sector_count));
            assert!(track.sector_count <= track.sectors_per_track);
            for member in [track.first_lbn, track.first_lbn + u64::from(track.sector_count) - 1] {
                let physical = model.lbn_to_physical(member).unwrap();
                assert_eq!((physical.cylinder, physical.surface), (track.cylinder, track.surface), "{}", model.name());
            }
            if let Some(before) = track.first_lbn.checked_sub(1) {
                let physical = model.lbn_to_physical(before).unwrap();
                assert_ne!((physical.cylinder, physical.surface), (track.cylinder, track.surface), "{}", model.name());
            }
        }
    }
}

#[test]
fn cheetah15k5_is_surface_serpentine_in_bands_of_65() {
    let model = DiskModel::builtin("cheetah15k5").unwrap();
    let first = model.track_of(0).unwrap();
    let next = model.track_of(u64::from(first.sector_count)).unwrap();
    assert_eq!((first.cylinder, first.surface), (0, 0));
    assert_eq!((next.cylinder, next.surface), (1, 0), "the next track is on the same surface");
    let band_end = model.lbn_to_physical(64 * u64::from(first.sector_count)).unwrap();
    assert_eq!((band_end.cylinder, band_end.surface), (64, 0));
    let turn = model.lbn_to_physical(65 * u64::from(first.sector_count)).unwrap();
    assert_eq!((turn.cylinder, turn.surface), (64, 1), "surface 1 walks the band back");
}
