//! A volume opens only over its own devices, and only once.
//!
//! Devices used to be bound to their volume by nothing but the paths in its
//! configuration: another volume's flash file of the same size, or a
//! configuration whose volume id was edited, opened and served thousands of
//! wrong blocks; a second directory naming the first one's files served beside
//! it, each losing the other's writes; `volume create` over block devices
//! another volume used succeeded. Every device now carries a label (volume,
//! role, member, generation) checked at open, every device is held
//! exclusively while open, and `volume create` refuses a block device that
//! holds anything unless `--force`.

use crate::service_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use service_support::{last_json_line, proxima, run, Volume};

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn small_volume() -> Volume {
    let volume = Volume::create(&["--data-size", "32M", "--flash-size", "8M"]);
    volume.create_extent("lun0", "4M");
    volume
}

#[test]
fn another_volumes_flash_file_or_an_edited_volume_id_is_refused() {
    let first = small_volume();
    let second = small_volume();
    std::fs::copy(second.directory.join("flash.img"), first.directory.join("flash.img")).unwrap();
    let refused = first.command(&["status"], 1).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", stderr_of(&refused));
    assert!(
        stderr_of(&refused).contains("flash.img") && stderr_of(&refused).contains("labelled"),
        "{}",
        stderr_of(&refused)
    );

    let config_path = second.directory.join("proxima-volume.json");
    let mut config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    config["volume_id"] = (config["volume_id"].as_u64().unwrap() ^ 0x10).into();
    std::fs::write(&config_path, config.to_string()).unwrap();
    let refused = second.command(&["fsck"], 1).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", stderr_of(&refused));
    assert!(stderr_of(&refused).contains("labelled"), "{}", stderr_of(&refused));
}

#[test]
fn a_second_directory_naming_the_same_files_cannot_open_them_while_the_first_serves() {
    let mut volume = small_volume();
    let twin = volume.temporary.path().join("twin");
    std::fs::create_dir(&twin).unwrap();
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(volume.directory.join("proxima-volume.json")).unwrap()).unwrap();
    let absolute = |entry: &mut serde_json::Value| {
        let path = volume.directory.join(entry["path"].as_str().unwrap());
        entry["path"] = path.display().to_string().into();
    };
    config["data_disks"].as_array_mut().unwrap().iter_mut().for_each(absolute);
    absolute(&mut config["flash"]);
    std::fs::write(twin.join("proxima-volume.json"), config.to_string()).unwrap();
    volume.start_server();
    let refused = proxima().arg("status").arg(&twin).output().unwrap();
    assert_eq!(refused.status.code(), Some(1), "{}", stderr_of(&refused));
    assert!(stderr_of(&refused).contains("in use"), "{}", stderr_of(&refused));
    assert!(volume.stop_server().success(), "{}", volume.server_log());
}

/// A loop device over a file, detached when dropped.
struct Loop {
    device: PathBuf,
}

impl Loop {
    fn over(file: &Path, size_bytes: u64) -> Self {
        std::fs::File::create(file).unwrap().set_len(size_bytes).unwrap();
        let output = run(Command::new("losetup").args(["--find", "--show"]).arg(file));
        let device = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        assert!(device.to_string_lossy().starts_with("/dev/loop"), "losetup gave {device:?}");
        Self { device }
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("--detach").arg(&self.device).status();
    }
}

fn create_on(directory: &Path, data: &Loop, flash: &Loop, force: bool) -> Output {
    let mut command = proxima();
    command.args(["volume", "create"]).arg(directory).arg("--data").arg(&data.device).arg("--flash").arg(&flash.device);
    if force {
        command.arg("--force");
    }
    command.output().unwrap()
}

#[test]
fn a_flash_block_device_too_small_for_the_data_is_refused_naming_the_least_that_fits() {
    let scratch = tempfile::tempdir().unwrap();
    // 64 GiB of sparse data disk: its checksums, refcounts and maps take
    // about 100 MiB of flash.
    let data = Loop::over(&scratch.path().join("data.img"), 64 << 30);
    let flash = Loop::over(&scratch.path().join("flash.img"), 16 << 20);
    let directory = scratch.path().join("volume");
    let refused = create_on(&directory, &data, &flash, false);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr_of(&refused));
    let message = stderr_of(&refused);
    assert!(message.contains("--flash") && message.contains("at least") && message.contains("larger"), "{message}");
    assert!(!directory.exists(), "a refused create leaves no directory");
}

#[test]
fn volume_create_over_block_devices_that_hold_something_needs_force_and_never_takes_them_in_use() {
    let scratch = tempfile::tempdir().unwrap();
    let data = Loop::over(&scratch.path().join("data.img"), 64 << 20);
    let flash = Loop::over(&scratch.path().join("flash.img"), 16 << 20);
    let first = scratch.path().join("first");
    let created = create_on(&first, &data, &flash, false);
    assert!(created.status.success(), "blank devices are taken: {}", stderr_of(&created));
    run(proxima().args(["extent", "create"]).arg(&first).args(["lun0", "--size", "8M"]));

    let second = scratch.path().join("second");
    let refused = create_on(&second, &data, &flash, false);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr_of(&refused));
    assert!(
        stderr_of(&refused).contains("Proxima label") && stderr_of(&refused).contains("--force"),
        "{}",
        stderr_of(&refused)
    );

    // While the first volume is served, not even --force takes its devices.
    let socket = scratch.path().join("first.sock");
    let mut server = proxima()
        .arg("serve")
        .arg(&first)
        .arg("--socket")
        .arg(&socket)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(std::time::Instant::now() < deadline, "the server did not start");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let refused = create_on(&second, &data, &flash, true);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr_of(&refused));
    assert!(stderr_of(&refused).contains("in use"), "{}", stderr_of(&refused));
    // SAFETY: kill with a valid pid and signal has no memory effects.
    assert_eq!(unsafe { libc::kill(i32::try_from(server.id()).unwrap(), libc::SIGTERM) }, 0);
    assert!(server.wait().unwrap().success());

    // Stopped, --force takes them, and the first volume no longer opens.
    let forced = create_on(&second, &data, &flash, true);
    assert!(forced.status.success(), "{}", stderr_of(&forced));
    let status = last_json_line(&run(proxima().arg("status").arg(&second).arg("--json")));
    assert_eq!(status["extents"].as_array().unwrap().len(), 0);
    let gone = proxima().arg("status").arg(&first).output().unwrap();
    assert_eq!(gone.status.code(), Some(2), "{}", stderr_of(&gone));
    assert!(stderr_of(&gone).contains("labelled"), "{}", stderr_of(&gone));
}

#[test]
fn force_without_a_block_device_to_take_is_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let output = proxima().args(["volume", "create"]).arg(scratch.path().join("v")).arg("--force").output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));
    assert!(stderr_of(&output).contains("--force"), "{}", stderr_of(&output));
}
