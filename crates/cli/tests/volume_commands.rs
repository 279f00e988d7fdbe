//! The volume management commands as a user runs them: `volume create` with
//! defaults and with RAID, `extent create|list|resize|delete`, `snapshot
//! create|list|delete|restore`, `status --json`, `fsck` (clean, and exit 1 on a
//! damaged superblock slot), `scrub` (online, and exit 1 on damaged data), and bad
//! input giving exit code 2 with a clear message.

use crate::service_support;

use std::io::{Seek, SeekFrom, Write};

use service_support::{last_json_line, proxima, run, Volume};

fn stderr_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn create_with_defaults_alone_works() {
    let temporary = tempfile::tempdir().unwrap();
    let directory = temporary.path().join("vol");
    let output = run(proxima().args(["volume", "create", "--json"]).arg(&directory));
    let config = last_json_line(&output);
    assert_eq!(config["layout"], "proximal");
    assert_eq!(config["raid"], "none");
    assert_eq!(config["data_disks"][0]["size_bytes"], 16u64 << 30);
    assert_eq!(config["flash"]["size_bytes"], 1u64 << 30);
    assert!(directory.join("proxima-volume.json").is_file());
    // Sparse: formatting writes metadata only.
    let used_bytes = std::fs::metadata(directory.join("data-0.img")).map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.blocks() * 512
    });
    assert!(used_bytes.unwrap() < 1 << 20);
}

#[test]
fn extents_snapshots_status_and_restore() {
    let volume = Volume::create(&[
        "--disks",
        "3",
        "--raid",
        "raid4",
        "--data-size",
        "256M",
        "--flash-size",
        "32M",
        "--stripe-unit",
        "64K",
    ]);
    volume.create_extent("lun0", "64M");
    volume.create_extent("lun1", "8M");
    let list = last_json_line(&run(&mut volume.command(&["extent", "list", "--json"], 2)));
    let names: Vec<&str> = list["extents"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["lun0", "lun1"]);

    run(&mut volume.command(&["extent", "resize", "lun1", "--size", "16M"], 2));
    run(&mut volume.command(&["snapshot", "create", "s1"], 2));
    run(&mut volume.command(&["extent", "delete", "lun1"], 2));
    let status = last_json_line(&run(&mut volume.command(&["status", "--json"], 1)));
    assert_eq!(status["raid"], "raid4");
    // Each member gives up a stripe unit: its label block, rounded to units.
    assert_eq!(status["capacity_bytes"], 2 * ((256u64 << 20) - (64 << 10)), "two data disks of 256 MiB, one parity");
    assert_eq!(status["extents"].as_array().unwrap().len(), 1);
    assert_eq!(status["snapshots"][0]["name"], "s1");
    for key in [
        "used_bytes",
        "held_by_snapshots_bytes",
        "free_bytes",
        "reserved_bytes",
        "copied_out_bytes",
        "fragmentation",
        "layout_score",
        "staging",
        "checkpoint_generation",
        "destages_since_open",
    ] {
        assert!(!status[key].is_null(), "status lacks {key}: {status}");
    }

    // Restoring the volume brings lun1 back at its snapshot size.
    run(&mut volume.command(&["snapshot", "restore", "s1"], 2));
    let list = last_json_line(&run(&mut volume.command(&["extent", "list", "--json"], 2)));
    let lun1 = list["extents"].as_array().unwrap().iter().find(|e| e["name"] == "lun1").expect("lun1 restored").clone();
    assert_eq!(lun1["size_bytes"], 16u64 << 20);
    run(&mut volume.command(&["snapshot", "delete", "s1"], 2));
    let snapshots = last_json_line(&run(&mut volume.command(&["snapshot", "list", "--json"], 2)));
    assert_eq!(snapshots["snapshots"], serde_json::json!([]));
    let fsck = last_json_line(&run(&mut volume.command(&["fsck", "--json"], 1)));
    assert_eq!(fsck["findings"], serde_json::json!([]));
    let score = fsck["layout_score"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&score), "{fsck}");
    assert!(fsck["layout_score_blocks"]["scored_block_count"].is_u64(), "{fsck}");
}

#[test]
fn bad_input_is_exit_code_2_with_a_clear_message() {
    let volume = Volume::create(&["--data-size", "64M", "--flash-size", "8M"]);
    let cases: Vec<(Vec<&str>, usize, &str)> = vec![
        (vec!["extent", "create", "lun0", "--size", "2X"], 2, "invalid size"),
        (vec!["extent", "create", "lun0", "--size", "1000"], 2, "multiple of 4096"),
        (vec!["extent", "create", "a@b", "--size", "4M"], 2, "invalid name"),
        (vec!["extent", "delete", "nothing"], 2, "no extent named"),
        (vec!["snapshot", "delete", "nothing"], 2, "no snapshot named"),
        (vec!["volume", "create"], 2, "already holds a Proxima volume"),
    ];
    for (words, insert_at, message) in cases {
        let output = volume.command(&words, insert_at).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{words:?}: {}", stderr_of(&output));
        assert!(stderr_of(&output).contains(message), "{words:?}: {}", stderr_of(&output));
    }
    let temporary = tempfile::tempdir().unwrap();
    let missing = proxima().arg("status").arg(temporary.path().join("none")).output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr_of(&missing).contains("does not exist"));
    let not_a_volume = proxima().arg("status").arg(temporary.path()).output().unwrap();
    assert_eq!(not_a_volume.status.code(), Some(2));
    assert!(stderr_of(&not_a_volume).contains("proxima-volume.json is missing"));
    std::fs::write(temporary.path().join("proxima-volume.json"), "{ \"format_version\": 1,\n oops }").unwrap();
    let malformed = proxima().arg("status").arg(temporary.path()).output().unwrap();
    assert_eq!(malformed.status.code(), Some(2));
    assert!(stderr_of(&malformed).contains("proxima-volume.json:2:"), "{}", stderr_of(&malformed));
    let bad_layout = proxima().args(["volume", "create", "--layout", "log"]).arg(temporary.path().join("v2")).output();
    assert_eq!(bad_layout.unwrap().status.code(), Some(2));
    for layout in ["lfs", "wolf", "hylog"] {
        let created = proxima()
            .args(["volume", "create", "--layout", layout, "--data-size", "64M", "--flash-size", "8M"])
            .arg(temporary.path().join(layout))
            .output()
            .unwrap();
        assert_eq!(created.status.code(), Some(0), "{layout}: {}", stderr_of(&created));
    }
}

#[test]
fn fsck_reports_a_damaged_superblock_slot_and_exits_1() {
    let volume = Volume::create(&["--data-size", "64M", "--flash-size", "8M"]);
    volume.create_extent("lun0", "4M");
    // Junk in superblock slot A (flash block 0, after the label block); slot
    // B stays valid.
    let mut flash = std::fs::OpenOptions::new().write(true).open(volume.directory.join("flash.img")).unwrap();
    flash.seek(SeekFrom::Start(4096 + 100)).unwrap();
    flash.write_all(&[0xA5; 64]).unwrap();
    drop(flash);
    let output = volume.command(&["fsck", "--json"], 1).output().unwrap();
    let report = last_json_line(&output);
    let findings = report["findings"].as_array().unwrap();
    assert!(!findings.is_empty(), "{report}");
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stdout));
    assert!(String::from_utf8_lossy(&output.stdout).contains("SuperblockSlot"));
}

#[test]
fn scrub_checks_every_block_in_use_and_exits_1_on_damage_it_cannot_repair() {
    let mut volume = Volume::create(&["--data-size", "64M", "--flash-size", "16M"]);
    volume.create_extent("lun0", "8M");
    volume.start_server();
    // One 4 MiB write goes straight to the data device.
    let mut qemu_io = std::process::Command::new("qemu-io");
    qemu_io.args(["-f", "raw", "-c", "write -P 0x5a 0 4M"]).arg(volume.uri("lun0"));
    run(&mut qemu_io);
    // Online, through the running server.
    let online = volume.command(&["scrub", "--json"], 1).output().unwrap();
    assert_eq!(online.status.code(), Some(0), "{}", String::from_utf8_lossy(&online.stdout));
    let report = last_json_line(&online);
    assert!(report["data_blocks_checked"].as_u64().unwrap() >= 1024, "{report}");
    volume.stop_server();
    // One bit flipped in every data block after the label block, offline.
    let mut data =
        std::fs::OpenOptions::new().read(true).write(true).open(volume.directory.join("data-0.img")).unwrap();
    for block in 1..1 + 1024u64 {
        data.seek(SeekFrom::Start(block * 4096 + 100)).unwrap();
        data.write_all(&[0x01]).unwrap();
    }
    drop(data);
    let offline = volume.command(&["scrub", "--json"], 1).output().unwrap();
    let report = last_json_line(&offline);
    assert_eq!(offline.status.code(), Some(1), "{report}");
    assert_eq!(report["damaged_blocks"].as_array().unwrap().len(), 1024, "{report}");
    assert!(String::from_utf8_lossy(&offline.stdout).contains("damaged: Data block"));
}
