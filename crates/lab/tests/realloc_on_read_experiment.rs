//! `reproduce realloc-on-read` at a tiny scale: the contract's keys, files
//! written, and the mechanism's effect — with reallocation, the second pass
//! of the write-anywhere LUN reads larger pieces than the first and than
//! the run without it; without reallocation the passes agree.

use proxima_device::seeds_for_test;
use proxima_lab::experiment::{run, Experiment, RunSettings};
use proxima_lab::progress::NoProgress;
use proxima_lab::seed003_realloc::realloc_on_read::{ReallocOnRead, ReallocParams};

/// The headline of a run at a tiny scale, LUN filling `fill`; its files are
/// checked to be written.
fn headline_at(fill: f64, seed: u64) -> serde_json::Value {
    let directory = tempfile::tempdir().unwrap();
    let settings =
        RunSettings { out_dir: directory.path().to_path_buf(), seed, model: ReallocOnRead::DEFAULT_MODEL.into() };
    let params = ReallocParams { scale: 0.0002, fill, aging_ios_per_piece: 1.0, threads: 30, jobs: 2 };
    let outcome = run::<ReallocOnRead>(&settings, &params, &mut NoProgress).expect("the experiment runs");
    for file in ["realloc_on_read.csv", "realloc_on_read_reads.svg", "report.md"] {
        assert!(directory.path().join(file).exists(), "{file} written");
    }
    serde_json::to_value(&outcome.headline).unwrap()
}

#[test]
fn reallocation_enlarges_the_second_pass_and_the_headline_has_the_contract_keys() {
    let json = headline_at(0.5, 3);
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 8, "two layouts × realloc off/on × two passes");
    for key in ["layout", "realloc", "pass", "mean_physical_read_kib", "mb_s", "extra_write_mib"] {
        assert!(rows.iter().all(|row| row.get(key).is_some()), "every row has {key}");
    }
    let figure = |key: &str, layout: &str, realloc: bool, pass: u64| -> f64 {
        let row = rows.iter().find(|row| row["layout"] == layout && row["realloc"] == realloc && row["pass"] == pass);
        row.unwrap()[key].as_f64().unwrap()
    };
    let kib = |layout: &str, realloc: bool, pass: u64| figure("mean_physical_read_kib", layout, realloc, pass);
    let run_kib = |layout: &str, realloc: bool, pass: u64| figure("mean_contiguous_run_kib", layout, realloc, pass);
    assert_eq!(kib("write-anywhere", false, 1), kib("write-anywhere", false, 2), "reads alone move nothing");
    assert!(run_kib("write-anywhere", true, 2) > 1.2 * run_kib("write-anywhere", true, 1), "pass 1 fixed the layout");
    assert!(kib("write-anywhere", true, 2) > 1.2 * kib("write-anywhere", false, 2));
    let without = rows.iter().filter(|row| row["realloc"] == false);
    assert!(without.clone().all(|row| row["extra_write_mib"] == 0.0), "nothing rewritten without reallocation");
}

/// At the talk's fill the aged write-anywhere LUN has no free run as long
/// as a read: reallocation gathers each piece into free blocks that one
/// read takes through their gaps, so the second pass reads far larger
/// pieces, in fewer drive requests and faster than without it; nothing is
/// skipped.
#[test]
fn at_fill_0_8_the_second_pass_reads_gathered_pieces_faster() {
    let rerun = "cargo test --release -p proxima-lab --test integration realloc_on_read_experiment::at_fill";
    for seed in seeds_for_test([3], "PROXIMA_REALLOC_SEED", rerun) {
        second_pass_reads_gathered_pieces_faster(&headline_at(0.8, seed));
    }
}

fn second_pass_reads_gathered_pieces_faster(json: &serde_json::Value) {
    let rows = json["rows"].as_array().unwrap();
    let figure = |key: &str, realloc: bool, pass: u64| -> f64 {
        let row = rows
            .iter()
            .find(|row| row["layout"] == "write-anywhere" && row["realloc"] == realloc && row["pass"] == pass);
        row.unwrap()[key].as_f64().unwrap()
    };
    assert!(figure("extra_write_mib", true, 1) > 0.0 && figure("skipped_mib", true, 1) == 0.0, "{json}");
    assert!(figure("mean_physical_read_kib", true, 2) > 4.0 * figure("mean_physical_read_kib", false, 2), "{json}");
    assert!(figure("drive_reads", true, 2) < 0.5 * figure("drive_reads", false, 2), "{json}");
    assert!(figure("mb_s", true, 2) > 1.5 * figure("mb_s", false, 2), "{json}");
}
