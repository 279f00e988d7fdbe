//! `proximal-snapshots` at a tiny scale: one row per layout and interval with
//! the headline keys scripts read; snapshots taken, kept and deleted on
//! schedule, every deletion scan finished; the snapshot figures measured by
//! reading the oldest kept snapshot (not the live extents); the same headline
//! for the same seed however many simulations run at once; and saved rows
//! rendering the same files.

use proxima_lab::experiment::{measure, render, run, RunSettings};
use proxima_lab::progress::NoProgress;
use proxima_lab::report::cost::WallCost;
use proxima_lab::seed000_proximal::layout::LayoutParams;
use proxima_lab::seed000_proximal::snapshots::{
    Interval, ProximalSnapshots, ReservePlacement, Rows, SnapshotParams, INTERVALS,
};
use proxima_workload::srarw::{EXTENT_BLOCKS, UPDATES_PER_EXTENT};
use serde_json::Value;

const TINY_SCALE: f64 = 0.00004;
const LAYOUTS: [&str; 5] = ["proximal", "proximal_copy_out", "in_place", "in_place_cached", "write_anywhere"];

fn settings(directory: &std::path::Path, seed: u64) -> RunSettings {
    RunSettings { out_dir: directory.to_path_buf(), seed, model: "nearline7200".into() }
}

fn params(keep: u64, jobs: u16) -> SnapshotParams {
    SnapshotParams {
        layout: LayoutParams { scale: TINY_SCALE, jobs },
        keep,
        reserve: ReservePlacement::Ranges,
        range_reserve: None,
    }
}

fn keys(value: &Value) -> Vec<String> {
    value.as_object().expect("an object").keys().cloned().collect()
}

#[test]
fn every_layout_and_interval_has_a_row_with_the_headline_keys_and_repeats_for_a_seed() {
    let directory = tempfile::tempdir().unwrap();
    let outcome = run::<ProximalSnapshots>(&settings(directory.path(), 5), &params(3, 1), &mut NoProgress).unwrap();
    let printed = serde_json::to_value(&outcome.headline).unwrap();
    assert_eq!(keys(&printed), ["rows"]);
    let rows = printed["rows"].as_array().unwrap();
    let mut pairs = Vec::new();
    for row in rows {
        let mut expected = [
            "disk_ios_per_update",
            "interval",
            "layout",
            "live_aged_to_fresh",
            "random_update_iops",
            "snapshot_aged_to_fresh",
            "snapshot_every",
            "snapshots_taken",
        ];
        expected.sort_unstable();
        assert_eq!(keys(row), expected);
        let interval = row["interval"].as_str().unwrap();
        pairs.push((row["layout"].as_str().unwrap().to_string(), interval.to_string()));
        assert!(row["random_update_iops"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["disk_ios_per_update"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["live_aged_to_fresh"].as_f64().unwrap() > 0.0, "{row}");
        if interval == "none" {
            assert!(row["snapshot_aged_to_fresh"].is_null() && row["snapshot_every"].is_null(), "{row}");
            assert_eq!(row["snapshots_taken"], 0);
        } else {
            assert!(row["snapshot_aged_to_fresh"].as_f64().unwrap() > 0.0, "{row}");
            assert!(row["snapshot_every"].as_u64().unwrap() > 0, "{row}");
        }
    }
    let expected_pairs: Vec<(String, String)> = LAYOUTS
        .iter()
        .flat_map(|layout| INTERVALS.map(|interval| (layout.to_string(), interval.key().to_string())))
        .collect();
    assert_eq!(pairs, expected_pairs, "every layout under every interval, in order");
    for file in ["snapshots.csv", "snapshots_ios_per_update.svg", "snapshots_throughput.svg", "snapshots_reads.svg"] {
        let text = std::fs::read_to_string(directory.path().join(file)).unwrap_or_else(|_| panic!("{file} written"));
        assert!(!text.is_empty(), "{file}");
    }
    let report = std::fs::read_to_string(&outcome.report_path).unwrap();
    assert!(report.contains("--seed 5") && report.contains("--keep 3"), "the report names its command");
    assert!(report.contains("this number doubles"), "the report quotes the paper");
    let again = tempfile::tempdir().unwrap();
    let parallel = run::<ProximalSnapshots>(&settings(again.path(), 5), &params(3, 3), &mut NoProgress).unwrap();
    assert_eq!(outcome.headline, parallel.headline, "same seed, same headline, whatever the jobs");
}

#[test]
fn snapshots_are_taken_kept_and_deleted_on_schedule_and_the_oldest_kept_is_what_is_read() {
    // Keeping 4: the rare schedule (4 snapshots) deletes none and keeps the
    // snapshot of the fresh volume; the frequent one deletes all but 4.
    let keep = 4;
    let directory = tempfile::tempdir().unwrap();
    let rows: Rows =
        measure::<ProximalSnapshots>(&settings(directory.path(), 2), &params(keep, 2), &mut NoProgress).unwrap();
    assert_eq!(rows.runs.len(), LAYOUTS.len() * INTERVALS.len());
    for run in &rows.runs {
        let extents = run.run.extent_count;
        let Some(every) = run.interval.updates_per_extent() else {
            assert!(run.snapshots.is_none(), "{}: no snapshot without an interval", run.layout_key);
            continue;
        };
        let snapshots = run.snapshots.as_ref().expect("an interval takes snapshots");
        let context = format!("{} {:?}", run.layout_key, run.interval);
        let taken_count = UPDATES_PER_EXTENT / every;
        assert_eq!(snapshots.taken.len() as u64, taken_count, "{context}");
        for (index, taken) in snapshots.taken.iter().enumerate() {
            assert_eq!(taken.after_updates, index as u64 * every * extents, "{context}: every N updates per extent");
        }
        assert_eq!(snapshots.deleted_count, taken_count.saturating_sub(keep), "{context}");
        assert_eq!(snapshots.pending_deletions, 0, "{context}: every deletion scan ran to the end");
        let kept: Vec<&str> =
            snapshots.taken[snapshots.taken.len() - keep as usize..].iter().map(|taken| taken.name.as_str()).collect();
        assert_eq!(snapshots.kept_names, kept, "{context}: the last {keep} are kept");
        let oldest_kept = &snapshots.taken[snapshots.taken.len() - keep as usize];
        assert_eq!(snapshots.oldest_kept_after_updates, oldest_kept.after_updates, "{context}");
        let reads = &snapshots.oldest_kept_reads;
        assert_eq!(reads.block_count, extents * EXTENT_BLOCKS, "{context}: every extent of the snapshot read");
        assert_eq!(reads.request_count, run.run.reads.aged.request_count, "{context}: in the same requests");
        assert_ne!(*reads, run.run.reads.aged, "{context}: the snapshot, not the live extents, was read");
        if run.layout_key == "proximal_copy_out" {
            // Destage copies out what the snapshots read and puts every
            // block back in its place: the live extents keep the fresh layout.
            assert_eq!(run.run.reads.aged.run_count, run.run.reads.fresh.run_count, "{context}: live in place");
        }
        let fresh_snapshot_kept = oldest_kept.after_updates == 0;
        assert_eq!(fresh_snapshot_kept, run.interval == Interval::Rare, "{context}");
        if fresh_snapshot_kept && matches!(run.layout_key.as_str(), "proximal" | "write_anywhere") {
            // These layouts never move a block a snapshot holds: the snapshot
            // of the fresh volume is read where the fresh extents were.
            assert_eq!(reads.run_count, run.run.reads.fresh.run_count, "{context}: the fresh layout, as of then");
            assert_ne!(reads.run_count, run.run.reads.aged.run_count, "{context}: not the aged one");
        }
    }
}

#[test]
fn saved_rows_render_the_same_files() {
    let directory = tempfile::tempdir().unwrap();
    let settings = settings(directory.path(), 3);
    let params = SnapshotParams { reserve: ReservePlacement::End, ..params(2, 2) };
    let rows = measure::<ProximalSnapshots>(&settings, &params, &mut NoProgress).unwrap();
    let saved = serde_json::to_string(&rows).expect("rows serialise");
    let restored: Rows = serde_json::from_str(&saved).expect("rows deserialise");
    assert_eq!(rows, restored, "the rows survive saving");
    let cost = WallCost { wall_seconds: 1.0, peak_memory_bytes: None };
    let rendered = render::<ProximalSnapshots>(&settings, &params, &rows, &cost).unwrap();
    let again = render::<ProximalSnapshots>(&settings, &params, &restored, &cost).unwrap();
    assert_eq!(rendered, again, "saved rows give the same files, summary and headline");
    assert!(rendered.report.contains("--reserve end"), "the report names the reserve's placement");
    let measured = run::<ProximalSnapshots>(&settings, &params, &mut NoProgress).unwrap();
    assert_eq!(measured.headline, rendered.headline, "as the run that measured them");
    let csv = std::fs::read_to_string(directory.path().join("snapshots.csv")).unwrap();
    let proxima_lab::report::markdown::Artifact::Csv(table) = &rendered.files[0].1 else {
        panic!("snapshots.csv is a table");
    };
    assert_eq!(csv, table.to_csv(), "the rendered CSV is the one written");
}
