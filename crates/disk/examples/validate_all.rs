//! Replays the four shipped real-drive traces and prints the demerit and means.
//! Run: `cargo run --release -p proxima-disk --example validate_all`.

use std::path::PathBuf;
use std::sync::Arc;

use proxima_disk::validate::{parse_trace, replay};
use proxima_disk::{DiskModel, Override};

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models");
    let cheetah_overrides =
        ["disk0:Enable caching in buffer=0", "disk0:Fast write level=0", "disk0:Buffer continuous read=0"];
    let drives: [(&str, &str, &[&str]); 4] = [
        ("cheetah15k5/Seagate-Cheetah15k5.parv", "cheetah15k5/random.trace", &cheetah_overrides),
        ("atlas10k/atlas10k.parv", "atlas10k/atlas10k.trace", &[]),
        ("hp_c3323a/hp_c3323a.parv", "hp_c3323a/hp_c3323a.trace", &[]),
        ("cheetah4LP/cheetah4LP.parv", "cheetah4LP/cheetah4LP.trace", &[]),
    ];
    for (parv, trace, overrides) in drives {
        let overrides: Vec<Override> = overrides.iter().map(|text| Override::parse(text).unwrap()).collect();
        let model = Arc::new(DiskModel::load(&root.join(parv), &overrides).unwrap());
        let text = std::fs::read_to_string(root.join(trace)).unwrap();
        let records = parse_trace(trace, &text).unwrap();
        let result = replay(model, &records, 0).unwrap();
        println!(
            "{parv}: requests {} simulated {:.3} ms measured {:.3} ms rms {:.3} ms",
            records.len(),
            result.mean_simulated_ms(),
            result.mean_measured_ms(),
            result.rms_ms()
        );
    }
}
