//! fio's nbd engine against `proxima serve` on a `hylog` volume: the export
//! is written whole (every block gets a place on the data device), then
//! skewed random writes (Zipf 1.1, three times the export's blocks) fill the
//! staging area again and again, so measurement intervals end and the hot
//! set is chosen; the cold blocks' destages write them back at their frame
//! homes, the hot ones at the log head. The extent fills 96 % of the data
//! device: there a log's cleaning costs more than overwriting the cold
//! blocks in place, so HyLog's model splits the blocks (half full, logging
//! every block is cheaper, and HyLog does). fio verifies every block, the server
//! reports the blocks written back home, and the volume checks clean once
//! stopped.

use crate::service_support;

use service_support::{fio, fio_totals, last_json_line, run, Volume};

#[test]
fn skewed_random_writes_go_home_or_to_the_log_and_verify() {
    let mut volume = Volume::create(&["--layout", "hylog", "--data-size", "50M", "--flash-size", "16M"]);
    volume.create_extent("lun0", "48M");
    volume.start_server();
    let work = volume.temporary.path();

    let fill = run(fio(&volume, "lun0", "fill", work).args(["--rw=write", "--bs=64k", "--do_verify=0"]));
    assert_eq!(fio_totals(&fill).2, 0, "the fill has no errors");
    let skewed =
        ["--size=48M", "--io_size=144M", "--random_distribution=zipf:1.1", "--verify_state_save=0", "--rw=randwrite"];
    let write = run(fio(&volume, "lun0", "skewed", work).args(skewed).arg("--do_verify=1"));
    let (_, written, errors) = fio_totals(&write);
    assert_eq!((written, errors), (144 << 20, 0));

    let status = volume.command(&["status", "--json"], 1).output().unwrap();
    let report = last_json_line(&status);
    assert!(report["destages_since_open"].as_u64().unwrap() > 0, "the staging area filled and destaged: {report}");
    let home = report["destaged_home_blocks_since_open"].as_u64().unwrap();
    assert!(home > 0, "cold blocks went home: {report}");
    assert!(report["destaged_blocks_since_open"].as_u64().unwrap() > home, "hot blocks went to the log: {report}");

    let verify = run(fio(&volume, "lun0", "skewed", work).args(skewed).arg("--verify_only"));
    let (read, _, errors) = fio_totals(&verify);
    assert!(read > 0 && errors == 0, "verified {read} bytes, {errors} errors");

    assert!(volume.stop_server().success(), "{}", volume.server_log());
    let fsck = volume.command(&["fsck"], 1).output().unwrap();
    assert_eq!(fsck.status.code(), Some(0), "{}", String::from_utf8_lossy(&fsck.stdout));
}
