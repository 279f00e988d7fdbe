//! The log-structured layout runs on the laboratory's volume (simulated RAID
//! of the layout experiments): a full stripe per segment, aged by random
//! updates with the lab's own destages, cleaned, and read back.

use proxima_engine::Layout;
use proxima_lab::progress::NoProgress;
use proxima_lab::rig::lab_volume::{ArrayShape, LabVolume, RunSpec};

#[test]
fn lfs_ages_cleans_and_reads_on_the_lab_volume() {
    let spec = RunSpec {
        shape: ArrayShape::for_model("cheetah15k5").expect("a built-in model"),
        layout: Layout::Lfs,
        staging_percent: 1.0,
        scale: 0.0005,
        seed: 1,
        snapshots_at_once_max: 0,
        snapshot_reserve_blocks_per_extent: 0,
        range_reserve_fraction: 0.0,
        update_skew: proxima_workload::srarw::UpdateSkew::Uniform,
        proximal_copy_out: false,
    };
    let mut volume = LabVolume::create(&spec, &mut NoProgress).expect("the volume is created and filled");
    let aging = volume.age(&mut NoProgress).expect("the volume ages");
    assert!(aging.update_count > 0);
    let reads = volume.read_every_extent(&mut NoProgress).expect("every extent reads back");
    assert!(reads.block_count > 0 && reads.run_count > 0);
}
