//! The paper's qualitative results at a small scale (about 100 extents), on the
//! nearline array: batches grow with the staging area and retire more I/Os per
//! revolution; updates per batch near the paper's; I/O amplification at most the
//! paper's; write-anywhere reads collapse after aging; proximal sustains several
//! times the random-update throughput of the frame array without flash; with the
//! array's zone checksums, a 1 % staging area retires the paper's 5.3 disk I/Os
//! per revolution.

use proxima_lab::experiment::{run, Experiment, RunSettings};
use proxima_lab::progress::NoProgress;
use proxima_lab::seed000_proximal::layout::LayoutParams;
use proxima_lab::seed000_proximal::paper;
use proxima_lab::seed000_proximal::srarw::ProximalSrarw;
use proxima_lab::seed000_proximal::table2::{HeadlineRow, ProximalTable2};
use proxima_lab::seed000_proximal::table3::ProximalTable3;

const SMALL_SCALE: f64 = 0.0005;
const SEED: u64 = 1;

fn headline<E: Experiment<Params = LayoutParams>>() -> E::Headline {
    let directory = tempfile::tempdir().unwrap();
    let settings = RunSettings { out_dir: directory.path().to_path_buf(), seed: SEED, model: "nearline7200".into() };
    let params = LayoutParams { scale: SMALL_SCALE, jobs: 1 };
    run::<E>(&settings, &params, &mut NoProgress).expect("the experiment runs").headline
}

fn row(table2: &proxima_lab::seed000_proximal::table2::Headline, staging_percent: f64) -> &HeadlineRow {
    table2.rows.iter().find(|row| row.staging_percent == staging_percent).unwrap()
}

#[test]
fn table2_batches_grow_denser_with_the_staging_area() {
    let table2 = headline::<ProximalTable2>();
    let one = row(&table2, 1.0);
    let ten = row(&table2, 10.0);
    let within = |ours: f64, paper: f64| (ours - paper).abs() <= 0.25 * paper;
    assert!(within(one.updates_per_batch, paper::UPDATES_PER_BATCH_1), "1 %: {one:?}");
    // A 10 % area holds ten times the 1 % area's blocks; per extent that is
    // 0.10 / 0.89 × 4096 = 460 blocks, 24.5 % above the paper's 369.7 at any
    // scale (and a little more at this one, whose extent count rounds down).
    let growth = ten.updates_per_batch / one.updates_per_batch;
    assert!((7.0..=11.0).contains(&growth), "batches grow {growth}× from 1 % to 10 %");
    assert!(one.io_amplification <= paper::IO_AMPLIFICATION_1, "1 %: {one:?}");
    assert!(ten.io_amplification <= paper::IO_AMPLIFICATION_10, "10 %: {ten:?}");
    assert!(ten.ios_per_revolution >= 8.0, "10 %: {ten:?}");
    let per_revolution: Vec<f64> =
        [1.0, 2.0, 5.0, 10.0].iter().map(|&percent| row(&table2, percent).ios_per_revolution).collect();
    assert!(per_revolution.windows(2).all(|pair| pair[0] < pair[1]), "denser with more staging: {per_revolution:?}");
}

#[test]
fn srarw_proximal_outruns_the_frame_array_and_write_anywhere_reads_collapse() {
    let srarw = headline::<ProximalSrarw>();
    let layout = |key: &str| srarw.layouts[key];
    let proximal = layout("proximal").random_update_iops;
    let in_place = layout("in_place").random_update_iops;
    assert!(proximal >= 3.0 * in_place, "proximal {proximal} against in-place {in_place} updates per second");
    assert!(layout("write_anywhere").aged_to_fresh <= 0.30, "{srarw:?}");
    assert!(layout("proximal").dollars_per_iops < layout("in_place").dollars_per_iops, "{srarw:?}");
}

#[test]
fn table3_proximal_reads_stay_near_fresh_and_write_anywhere_reads_collapse() {
    let table3 = headline::<ProximalTable3>();
    assert!(table3.proximal.aged_to_fresh >= 0.97, "{table3:?}");
    assert!(table3.write_anywhere.aged_to_fresh <= 0.30, "{table3:?}");
}

#[test]
fn table2_one_percent_reaches_the_papers_density() {
    let table2 = headline::<ProximalTable2>();
    assert!(row(&table2, 1.0).ios_per_revolution >= paper::IOS_PER_REVOLUTION_1, "{table2:?}");
}
