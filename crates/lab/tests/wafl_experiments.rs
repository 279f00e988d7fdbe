//! `reproduce wafl-delete` and `reproduce wafl-overwrite` at a tiny scale:
//! the contract's keys, and the mechanism — random frees of an aged volume
//! dirty more activemap blocks per freed block than an unaged volume's
//! without a delete log, and a delete log turns them back into few, sorted
//! activemap updates; every run gives back exactly the deleted blocks.
//!
//! At this scale (a few activemap pages) a BFLog's batch spans every page,
//! so its punches touch as many pages as the frees would (docs/wafl.md): the
//! sorting is checked on the TLog, whose single leaf holds a few thousand
//! blocks.

use proxima_lab::experiment::{measure, render, Experiment, RunSettings};
use proxima_lab::progress::NoProgress;
use proxima_lab::report::cost::WallCost;
use proxima_lab::seed002_wafl::delete::{DeleteParams, WaflDelete};
use proxima_lab::seed002_wafl::overwrite::{OverwriteParams, WaflOverwrite};

fn settings(directory: &tempfile::TempDir) -> RunSettings {
    RunSettings { out_dir: directory.path().to_path_buf(), seed: 5, model: WaflDelete::DEFAULT_MODEL.into() }
}

#[test]
fn a_delete_log_makes_an_aged_delete_cost_what_an_unaged_one_does() {
    let directory = tempfile::tempdir().unwrap();
    let settings = settings(&directory);
    let params =
        DeleteParams { scale: 0.0002, fill: 0.85, aging_writes_per_piece: 1.0, frees_per_checkpoint: 128, jobs: 2 };
    let rows = measure::<WaflDelete>(&settings, &params, &mut NoProgress).expect("the experiment runs");
    assert_eq!(rows.rows.len(), 6, "three delete logs, unaged and aged");
    let deleted_blocks = rows.deleted_extent_count * 4096;
    for row in &rows.rows {
        assert_eq!(
            row.freed_blocks, deleted_blocks,
            "{} aged {}: every deleted block comes back",
            row.delete_log, row.aged
        );
    }
    let row = |log: &str, aged: bool| rows.rows.iter().find(|row| row.delete_log == log && row.aged == aged).unwrap();
    let activemap = |log: &str, aged: bool| row(log, aged).activemap_blocks_per_freed_block;
    assert!(activemap("none", true) > 2.0 * activemap("none", false), "aging scatters the frees");
    assert!(activemap("tlog", true) < activemap("none", true) / 2.0, "the log sorts them");
    assert!(row("none", false).delete_log_blocks_per_freed_block == 0.0, "no log, no log blocks");
    assert!(row("bflog", true).delete_log_blocks_per_freed_block > 0.0);
    let rendered =
        render::<WaflDelete>(&settings, &params, &rows, &WallCost { wall_seconds: 0.0, peak_memory_bytes: None })
            .unwrap();
    let json = serde_json::to_value(&rendered.headline).unwrap();
    for headline_row in json["rows"].as_array().unwrap() {
        for key in ["delete_log", "aged", "blocks_freed_per_second", "worst_cp_ms"] {
            assert!(headline_row.get(key).is_some(), "every row has {key}");
        }
    }
}

#[test]
fn a_delete_log_cuts_the_activemap_blocks_random_overwrites_dirty() {
    let directory = tempfile::tempdir().unwrap();
    let settings = settings(&directory);
    let params = OverwriteParams {
        scale: 0.0002,
        fill: 0.85,
        aging_writes_per_piece: 0.5,
        writes: 4000,
        writes_per_checkpoint: 256,
        jobs: 2,
    };
    let rows = measure::<WaflOverwrite>(&settings, &params, &mut NoProgress).expect("the experiment runs");
    assert_eq!(rows.rows.len(), 3);
    let row = |log: &str| rows.rows.iter().find(|row| row.delete_log == log).unwrap();
    assert!(row("tlog").activemap_blocks_per_user_block < row("none").activemap_blocks_per_user_block);
    assert!(rows.rows.iter().all(|row| row.iops > 0.0 && row.p99_cp_ms > 0.0 && row.p99_cp_ms <= row.max_cp_ms));
    let rendered =
        render::<WaflOverwrite>(&settings, &params, &rows, &WallCost { wall_seconds: 0.0, peak_memory_bytes: None })
            .unwrap();
    let json = serde_json::to_value(&rendered.headline).unwrap();
    for headline_row in json["rows"].as_array().unwrap() {
        for key in ["delete_log", "iops", "metadata_blocks_per_user_block", "p99_cp_ms"] {
            assert!(headline_row.get(key).is_some(), "every row has {key}");
        }
    }
}
