//! fio's nbd engine against `proxima serve` on a `proximal-hot` volume with a
//! small staging area: skewed random writes (Zipf 1.1, 64 MiB over a 256 MiB
//! export) keep the background destager and the writers' destages busy, and
//! hot blocks stay staged through them; fio then verifies every block, the
//! server reports the blocks it kept staged, and the volume checks clean once
//! stopped.

use crate::service_support;

use service_support::{fio, fio_totals, last_json_line, run, Volume};

#[test]
fn skewed_random_writes_keep_hot_blocks_staged_and_verify() {
    let mut volume = Volume::create(&["--layout", "proximal-hot", "--data-size", "1G", "--flash-size", "16M"]);
    volume.create_extent("lun0", "256M");
    volume.start_server();
    let work = volume.temporary.path();
    let skewed = ["--size=64M", "--random_distribution=zipf:1.1", "--verify_state_save=0"];

    let write = run(fio(&volume, "lun0", "hot-write", work).args(skewed).args(["--rw=randwrite", "--do_verify=1"]));
    let (_, written, errors) = fio_totals(&write);
    assert_eq!((written, errors), (64 << 20, 0));

    let status = volume.command(&["status", "--json"], 1).output().unwrap();
    let report = last_json_line(&status);
    assert!(report["destages_since_open"].as_u64().unwrap() > 0, "the staging area filled and destaged: {report}");
    assert!(report["retained_hot_blocks_since_open"].as_u64().unwrap() > 0, "hot blocks were kept staged: {report}");

    // The same job in verify-only mode: every block it wrote is read back and
    // checked again, the hot ones from flash.
    let verify = run(fio(&volume, "lun0", "hot-write", work).args(skewed).args(["--rw=randwrite", "--verify_only"]));
    let (read, _, errors) = fio_totals(&verify);
    assert!(read > 0 && errors == 0, "verified {read} bytes, {errors} errors");

    assert!(volume.stop_server().success(), "{}", volume.server_log());
    let fsck = volume.command(&["fsck"], 1).output().unwrap();
    assert_eq!(fsck.status.code(), Some(0), "{}", String::from_utf8_lossy(&fsck.stdout));
}
