//! Replaying the shipped real-drive traces against DiskSim 4.0's own figures
//! on the same drives and traces (`proxima_disk::validate::DISKSIM_REFERENCES`).
//!
//! The goal is a demerit no worse than DiskSim's and a mean simulated access
//! time within 2 % of the measured mean or no further from it than DiskSim's.
//! The Cheetah 15K.5, the Atlas 10K, the Cheetah 4LP, the HP C2247A and the
//! IBM Ultrastar 18ES meet it. On the HP C3323A the model takes DiskSim's
//! time on all but three requests and is nearer the drive on those three, yet
//! its demerit is 0.3 % above DiskSim's, whose lost revolutions happen to fill
//! the measured distribution's tail (docs/disk-model.md, "Remaining
//! differences from DiskSim"): for it the test guards the figure reached, as
//! a ratio to DiskSim's, so that a change making it worse fails.

use std::path::PathBuf;
use std::sync::Arc;

use proxima_disk::validate::{disksim_reference, parse_trace, replay};
use proxima_disk::{DiskModel, Override};

/// How far above DiskSim's demerit, and above DiskSim's distance from the
/// measured mean, a drive may be: 1.0 is the goal itself.
struct Allowance {
    rms_ratio: f64,
    mean_distance_ratio: f64,
}

const GOAL: Allowance = Allowance { rms_ratio: 1.0, mean_distance_ratio: 1.0 };

fn check(folder: &str, parv: &str, trace: &str, allowance: Allowance) {
    let reference = disksim_reference(folder).unwrap();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models").join(folder);
    let overrides: Vec<Override> = reference.overrides.iter().map(|text| Override::parse(text).unwrap()).collect();
    let model = Arc::new(DiskModel::load(&root.join(parv), &overrides).unwrap());
    let text = std::fs::read_to_string(root.join(trace)).unwrap();
    let records = parse_trace(trace, &text).unwrap();
    let result = replay(model, &records, 0).unwrap();
    let (simulated, measured) = (result.mean_simulated_ms(), result.mean_measured_ms());
    let rms = result.rms_ms();
    let allowed_rms = reference.rms_ms * allowance.rms_ratio;
    assert!(rms <= allowed_rms, "{folder}: rms {rms:.4} ms above {allowed_rms:.4} (DiskSim {})", reference.rms_ms);
    let allowed_mean = (0.02 * measured).max((reference.mean_ms - measured).abs() * allowance.mean_distance_ratio);
    assert!(
        (simulated - measured).abs() <= allowed_mean,
        "{folder}: mean {simulated:.3} ms vs measured {measured:.3} ms (allowed {allowed_mean:.3})"
    );
}

#[test]
fn cheetah15k5_without_cache_matches_disksim() {
    check("cheetah15k5", "Seagate-Cheetah15k5.parv", "random.trace", GOAL);
}

#[test]
fn atlas10k_matches_disksim() {
    check("atlas10k", "atlas10k.parv", "atlas10k.trace", GOAL);
}

#[test]
fn hp_c3323a_stays_near_disksim() {
    check("hp_c3323a", "hp_c3323a.parv", "hp_c3323a.trace", Allowance { rms_ratio: 1.005, mean_distance_ratio: 1.0 });
}

#[test]
fn cheetah4lp_matches_disksim() {
    check("cheetah4LP", "cheetah4LP.parv", "cheetah4LP.trace", GOAL);
}

#[test]
fn hp_c2247a_matches_disksim() {
    check("hp_c2247a", "hp_c2247a.parv", "hp_c2247a.trace", GOAL);
}

#[test]
fn ibm18es_matches_disksim() {
    check("ibm18es", "ibm18es.parv", "ibm18es.trace", GOAL);
}
