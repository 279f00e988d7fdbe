//! `reproduce hylog-throughput` on a small TPC-C database (two warehouses)
//! and the atlas10k: the contract's keys and the files written, Overwrite
//! flat in the utilisation, LFS ahead of Overwrite with room to clean and
//! paying more for its cleaning as the disk fills, a fixed hot share kept, and
//! RAID-5 below RAID-0 for Overwrite's small writes, Figure 8's sweeps
//! normalised by Overwrite; and of the rig: users
//! share the drives (more users, more throughput, up to the drives' limit)
//! and a run is deterministic. Prints the summary (run with `--nocapture`).

use std::sync::Arc;

use proxima_device::seeds_for_test;
use proxima_disk::DiskModel;
use proxima_lab::experiment::{run, RunSettings};
use proxima_lab::progress::NoProgress;
use proxima_lab::seed001_hylog::cost_model::ArrayLevel;
use proxima_lab::seed001_hylog::hylog_throughput::{HylogThroughput, HylogThroughputParams};
use proxima_lab::seed001_hylog::tpcc_array::{run_array, ArrayRunSpec, ThroughputLayout};
use proxima_workload::tpcc::{TpccSpec, TpccWorkload};
use serde_json::Value;

const RERUN: &str =
    "cargo test --release -p proxima-lab --test integration hylog_throughput_experiment:: -- --nocapture";

fn number(value: &Value) -> f64 {
    value.as_f64().unwrap_or_else(|| panic!("{value} is a number"))
}

fn small_params() -> HylogThroughputParams {
    HylogThroughputParams {
        utilizations: vec![0.5, 0.9],
        detail_utilization: 0.8,
        hot_fractions: vec![0.1, 1.0],
        warehouses: 2,
        buffer_pool_mib: 16,
        users: 20,
        disks: 4,
        rewrites: 1.0,
        measure_seconds: 5,
        fig8_users: vec![4, 20],
        fig8_disks: vec![2, 4],
        fig8_utilizations: vec![0.5],
        seeds: 1,
        jobs: 2,
    }
}

#[test]
fn the_figures_have_the_papers_shape_at_a_small_scale() {
    for seed in seeds_for_test([1], "PROXIMA_HYLOG_THROUGHPUT_SEED", RERUN) {
        has_the_papers_shape(seed);
    }
}

fn has_the_papers_shape(seed: u64) {
    let directory = tempfile::tempdir().unwrap();
    let settings = RunSettings { out_dir: directory.path().to_path_buf(), seed, model: "atlas10k".into() };
    let outcome = run::<HylogThroughput>(&settings, &small_params(), &mut NoProgress).expect("it runs");
    println!("{}", outcome.summary);
    for file in ["throughput.csv", "fig6.svg", "fig6_normalized.svg", "fig7.svg", "fig9.svg", "report.md"] {
        assert!(directory.path().join(file).is_file(), "{file} written");
    }
    let json = serde_json::to_value(&outcome.headline).unwrap();
    let rows = json["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4 * 2, "every layout at every utilisation");
    let at = |layout: &str, u: f64| {
        let row = rows
            .iter()
            .find(|row| row["layout"] == layout && number(&row["utilization"]) == u)
            .unwrap_or_else(|| panic!("{layout} at {u}: {json}"));
        assert_eq!(row["disk"], "atlas10k");
        (number(&row["requests_per_second"]), row)
    };
    let (overwrite_low, _) = at("overwrite", 0.5);
    let (overwrite_high, _) = at("overwrite", 0.9);
    assert!((overwrite_high / overwrite_low - 1.0).abs() < 0.02, "seed {seed}: Overwrite flat: {json}");
    let (lfs_low, lfs_low_row) = at("lfs", 0.5);
    let (_, lfs_high_row) = at("lfs", 0.9);
    assert!(lfs_low > overwrite_low, "seed {seed}: LFS ahead with room to clean: {json}");
    // Whether LFS's throughput falls from 0.5 to 0.9 is within one 5 s
    // window's spread at this scale (one of twelve seeds tried reversed it); what
    // makes it fall at scale, its cleaning's cost, is not.
    assert!(
        number(&lfs_high_row["write_cost"]) > number(&lfs_low_row["write_cost"]),
        "seed {seed}: cleaning dearer on a fuller disk: {json}"
    );
    let fig7 = json["fig7"].as_array().expect("fig7");
    assert_eq!(fig7.len(), 3, "the adaptive run and two fixed shares");
    assert!(fig7[0]["fixed_hot_fraction"].is_null());
    assert!(number(&fig7[0]["hot_fraction"]) > 0.0, "seed {seed}: HyLog chose a hot set: {json}");
    // A fixed share, or every block the interval wrote when fewer were.
    let fixed = number(&fig7[1]["hot_fraction"]);
    // The share is rounded to whole blocks.
    assert!(fixed > 0.0 && fixed <= 0.1 + 1e-4, "seed {seed}: at most the fixed share: {json}");
    let adaptive = number(&json["adaptive_h_fraction_of_best"]);
    assert!(adaptive > 0.0 && adaptive.is_finite(), "{json}");
    let raid5_vs_raid0 = number(&json["shape"]["raid5_overwrite_vs_raid0"]);
    assert!(raid5_vs_raid0 < 0.8, "seed {seed}: RAID-5's small writes cost four I/Os: {json}");
    assert_eq!(json["fig9"].as_array().map(Vec::len), Some(8));
    // Figure 8: each sweep's points, normalised by Overwrite at the same
    // point, where Overwrite is 1 by definition.
    let fig8 = json["fig8"].as_array().expect("fig8");
    assert_eq!(fig8.len(), 2 * 3 * 2, "two sweeps of two points, three layouts: {json}");
    for row in fig8 {
        let x = if row["sweep"] == "users" { &row["users"] } else { &row["disks"] };
        assert!([2, 4, 20].contains(&x.as_u64().unwrap()), "{row}");
        assert!(number(&row["requests_per_second"]) > 0.0, "{row}");
        if row["layout"] == "overwrite" {
            assert_eq!(number(&row["vs_overwrite"]), 1.0, "{row}");
        }
    }
    let users = |count: u64| {
        let row =
            fig8.iter().find(|row| row["sweep"] == "users" && row["layout"] == "overwrite" && row["users"] == count);
        number(&row.expect("an Overwrite point")["requests_per_second"])
    };
    assert!(users(20) > users(4), "seed {seed}: more users keep the drives busier: {json}");
    assert!(json["shape"]["fig8_lfs_gain_falls_with_users"].is_boolean(), "{json}");
}

/// One run on the rig, with `users` closed-loop users: requests per
/// second, the drives' mean busy share and the requests the drives
/// completed per second.
fn overwrite_run(users: u32, seed: u64) -> (f64, f64, f64) {
    let tpcc = TpccSpec { warehouses: 1, buffer_pool_bytes: 8 << 20, users, seed, ..TpccSpec::paper(seed) };
    let spec = ArrayRunSpec {
        model: Arc::new(DiskModel::builtin("atlas10k").unwrap()),
        level: ArrayLevel::Raid0,
        disk_count: 4,
        layout: ThroughputLayout::Overwrite,
        hot_fraction: None,
        utilization: 0.5,
        stripe_unit_blocks: 256,
        segment_efficiency: 40.0,
        tpcc,
        database_pages: TpccWorkload::new(tpcc).page_count(),
        rewrites: 0.2,
        settle_ns: 200_000_000,
        measure_ns: 2_000_000_000,
        seed,
    };
    let run = run_array(&spec, &mut NoProgress).expect("it runs");
    let disk_requests_per_second = run.disk_requests as f64 * 1e9 / run.measured_ns as f64;
    (run.requests_per_second(), run.disk_busy_share, disk_requests_per_second)
}

#[test]
fn users_share_the_drives_and_a_run_repeats_itself() {
    for seed in seeds_for_test([1], "PROXIMA_HYLOG_THROUGHPUT_SEED", RERUN) {
        let one = overwrite_run(1, seed);
        let four = overwrite_run(4, seed);
        let sixteen = overwrite_run(16, seed);
        println!(
            "seed {seed}: (requests/s, drives' busy share, drive requests/s) 1 user {one:?}, 4 users {four:?}, \
             16 users {sixteen:?}"
        );
        // One request at a time keeps at most one of the four drives busy.
        assert!(one.1 <= 0.26, "seed {seed}: {one:?}");
        // Four users keep several busy at once, and the drives get more done.
        // The users need not: their pages share the 8 MiB buffer pool, and
        // where one user's run hits its buffer often, four miss more (seed
        // 113731839460220: 5,870 requests/s for one user, 4,426 for four, the
        // drives busy 0.23 and 0.52; seed 1: 1,428 and 4,134).
        assert!(four.1 > 1.5 * one.1 && four.2 > one.2, "seed {seed}: {one:?} → {four:?}");
        assert!(sixteen.1 >= four.1, "seed {seed}: more users, busier drives: {four:?} → {sixteen:?}");
        assert_eq!(overwrite_run(4, seed), four, "seed {seed}: the same spec, the same figures");
    }
}

#[test]
fn a_point_pools_the_runs_of_its_seeds() {
    let directory = tempfile::tempdir().unwrap();
    let settings = RunSettings { out_dir: directory.path().to_path_buf(), seed: 1, model: "atlas10k".into() };
    let params = HylogThroughputParams {
        utilizations: vec![0.5],
        detail_utilization: 0.5,
        hot_fractions: vec![1.0],
        warehouses: 1,
        buffer_pool_mib: 4,
        users: 4,
        disks: 2,
        rewrites: 1.0,
        measure_seconds: 1,
        fig8_users: vec![4],
        fig8_disks: vec![2],
        seeds: 2,
        ..small_params()
    };
    let outcome = run::<HylogThroughput>(&settings, &params, &mut NoProgress).expect("it runs");
    let json = serde_json::to_value(&outcome.headline).unwrap();
    for row in json["rows"].as_array().expect("rows") {
        let by_seed: Vec<f64> = row["requests_per_second_by_seed"].as_array().unwrap().iter().map(number).collect();
        assert_eq!(by_seed.len(), 2, "{row}");
        // Equal measured times: the pooled rate is the two runs' mean.
        let pooled = number(&row["requests_per_second"]);
        assert!((pooled - (by_seed[0] + by_seed[1]) / 2.0).abs() < 1e-6, "{row}");
    }
    let first_seed = run::<HylogThroughput>(&settings, &HylogThroughputParams { seeds: 1, ..params }, &mut NoProgress)
        .expect("it runs");
    let single = serde_json::to_value(&first_seed.headline).unwrap();
    for (pooled, alone) in json["rows"].as_array().unwrap().iter().zip(single["rows"].as_array().unwrap()) {
        assert_eq!(pooled["requests_per_second_by_seed"][0], alone["requests_per_second"], "seed 1 runs as alone");
    }
}
