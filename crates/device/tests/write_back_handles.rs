//! Write-back handles: a file device (alone, or as every member of an array)
//! gives one that works while the device itself is written elsewhere; the
//! handle holds the file open (and its lock) until dropped; a device with
//! nothing to write back (memory, or an array with such a member) gives none.

use proxima_device::{BlockDevice, FileDevice, MemoryDevice, RaidConfig, RaidDevice};

fn file_device(directory: &std::path::Path, name: &str) -> FileDevice {
    FileDevice::create(&directory.join(name), 4096, 256).unwrap()
}

#[test]
fn a_file_device_writes_back_through_its_handle_while_written_elsewhere() {
    let directory = tempfile::tempdir().unwrap();
    let mut device = file_device(directory.path(), "disk");
    let handle = device.write_back_handle().unwrap().expect("files write back");
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for _ in 0..20 {
                handle.write_back().unwrap();
            }
        });
        for block in 0..64 {
            device.write_blocks(block, &[block as u8; 4096]).unwrap();
        }
    });
    handle.write_back().unwrap();
    device.flush().unwrap();
    drop(device);
    handle.write_back().expect("the handle keeps its own descriptor");
    let held = FileDevice::open(&directory.path().join("disk")).unwrap_err();
    assert!(held.to_string().contains("holds it"), "the handle holds the file's lock: {held}");
    drop(handle);
    let mut reopened = FileDevice::open(&directory.path().join("disk")).unwrap();
    assert_eq!(reopened.read_blocks(63, 1).unwrap(), vec![63; 4096]);
}

#[test]
fn an_array_of_files_has_a_handle_and_one_with_a_memory_member_has_none() {
    let directory = tempfile::tempdir().unwrap();
    let members: Vec<Box<dyn BlockDevice>> = (0..3)
        .map(|index| Box::new(file_device(directory.path(), &format!("m{index}"))) as Box<dyn BlockDevice>)
        .collect();
    let array = RaidDevice::new(members, RaidConfig::raid4()).unwrap();
    array.write_back_handle().unwrap().expect("every member writes back").write_back().unwrap();

    let mixed: Vec<Box<dyn BlockDevice>> = vec![
        Box::new(file_device(directory.path(), "f0")),
        Box::new(file_device(directory.path(), "f1")),
        Box::new(MemoryDevice::new(4096, 256)),
    ];
    let array = RaidDevice::new(mixed, RaidConfig::raid4()).unwrap();
    assert!(array.write_back_handle().unwrap().is_none());
    assert!(MemoryDevice::new(4096, 16).write_back_handle().unwrap().is_none());
}
