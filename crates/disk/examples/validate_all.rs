//! Replays every shipped real-drive trace (with DiskSim's overrides for the
//! known drives) and prints the demerit and means beside DiskSim's.
//! Run: `cargo run --release -p proxima-disk --example validate_all`
//! (`proxima disk validate-all` does the same with a JSON summary).

use std::sync::Arc;

use proxima_disk::validate::{disksim_reference, drive_folders, parse_trace, replay, shipped_models_directory};
use proxima_disk::{DiskModel, Override};

fn main() {
    for drive in drive_folders(&shipped_models_directory()).unwrap() {
        let reference = disksim_reference(&drive.name);
        let overrides: Vec<Override> = reference
            .map(|reference| reference.overrides.iter().map(|text| Override::parse(text).unwrap()).collect())
            .unwrap_or_default();
        let model = Arc::new(DiskModel::load(&drive.parv, &overrides).unwrap());
        let name = drive.trace.display().to_string();
        let records = parse_trace(&name, &std::fs::read_to_string(&drive.trace).unwrap()).unwrap();
        let result = replay(model, &records, 0).unwrap();
        println!(
            "{}: requests {} simulated {:.3} ms measured {:.3} ms rms {:.4} ms (DiskSim {})",
            drive.name,
            records.len(),
            result.mean_simulated_ms(),
            result.mean_measured_ms(),
            result.rms_ms(),
            reference.map_or("unknown".to_string(), |reference| format!("{} ms", reference.rms_ms))
        );
    }
}
