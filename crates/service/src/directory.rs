//! The volume directory: creating a volume (device files, format, configuration
//! file), opening one (configuration, devices, engine volume), and the lock that
//! keeps two processes from opening the same volume.
//!
//! A directory holds `proxima-volume.json`, `proxima.lock` (held with `flock`
//! by whichever process has the volume open, recording its pid), the device
//! files created by default (`data-N.img`, `flash.img`), and, while a server
//! runs, its control socket `control.sock`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use proxima_device::{
    read_label, BlockDevice, DeviceLabel, FileDevice, LabelError, LabelRole, LabeledDevice, RaidConfig, RaidDevice,
};
use proxima_engine::{
    fixed_metadata_blocks, format_flash_blocks, DeleteLogMode, Layout, Volume, VolumeOptions, MIN_FLASH_BLOCKS,
};

use crate::config::{DeviceEntry, RaidChoice, VolumeConfig, CONFIG_FORMAT_VERSION};
use crate::devices::{open_file, DataDevice, IoMode, TrimPolicy, VolumeDisk, BLOCK_BYTES};
use crate::error::{Result, ServiceError};

/// The engine volume as the service opens it.
pub type ServiceVolume = Volume<DataDevice, VolumeDisk>;

/// Name of the lock file inside a volume directory.
pub const LOCK_FILE_NAME: &str = "proxima.lock";
/// Name of a running server's control socket inside a volume directory.
pub const CONTROL_SOCKET_NAME: &str = "control.sock";

/// Default size of each data disk file created by `volume create`.
pub const DEFAULT_DATA_DISK_BYTES: u64 = 16 << 30;
/// Least size of the flash file `volume create` makes without `--flash-size`
/// ([`default_flash_bytes`]).
pub const DEFAULT_FLASH_BYTES: u64 = 1 << 30;

/// What `volume create` makes.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateSpec {
    /// Data disks to use (files to create, or existing block devices). Empty:
    /// create `data_disk_count` files `data-N.img` in the directory.
    pub data_paths: Vec<PathBuf>,
    /// Data disk files to create when `data_paths` is empty.
    pub data_disk_count: usize,
    /// Size of each data disk file created.
    pub data_disk_bytes: u64,
    /// The flash file or block device; `None`: `flash.img` in the directory.
    pub flash_path: Option<PathBuf>,
    /// Size of the flash file created; `None`: [`default_flash_bytes`] for
    /// the data disks.
    pub flash_bytes: Option<u64>,
    /// The layout.
    pub layout: Layout,
    /// RAID level; `None`: no RAID for one disk, RAID-5 for several.
    pub raid: Option<RaidChoice>,
    /// RAID stripe unit in bytes.
    pub stripe_unit_bytes: u64,
    /// How the files are accessed.
    pub io_mode: IoMode,
    /// Take existing block devices that hold data (another volume's label, a
    /// partition table, a file system) all the same.
    pub force: bool,
    /// Allocate the files created on the host file system at once
    /// (`fallocate`) rather than leave them sparse: writes then never find
    /// the host file system full, and direct I/O into them skips block
    /// allocation (random 4 KiB O_DIRECT writes into a sparse ext4 file ran
    /// at a sixth of the rate into an allocated one on the machine of
    /// docs/service.md).
    pub preallocate: bool,
    /// Whether reads reallocate the scattered spans they read.
    pub read_realloc: bool,
    /// Whether destage copies out what snapshots read at the places its
    /// blocks go back to (proximal layout only).
    pub copy_out: bool,
    /// The delete log of the new volume.
    pub delete_log: DeleteLogMode,
}

impl Default for CreateSpec {
    fn default() -> Self {
        Self {
            data_paths: Vec::new(),
            data_disk_count: 1,
            data_disk_bytes: DEFAULT_DATA_DISK_BYTES,
            flash_path: None,
            flash_bytes: None,
            layout: Layout::Proximal,
            raid: None,
            stripe_unit_bytes: proxima_device::DEFAULT_STRIPE_UNIT_BYTES,
            io_mode: IoMode::Buffered,
            force: false,
            preallocate: false,
            read_realloc: false,
            copy_out: false,
            delete_log: DeleteLogMode::None,
        }
    }
}

/// An exclusive lock on a volume directory, released when dropped (or when the
/// process dies, which is what `flock` guarantees).
#[derive(Debug)]
pub struct VolumeLock {
    _file: File,
}

impl VolumeLock {
    /// Takes the lock of `directory` without waiting.
    pub fn acquire(directory: &Path) -> Result<Self> {
        let path = directory.join(LOCK_FILE_NAME);
        let file_error = |source| ServiceError::File { path: path.clone(), source };
        let mut file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(file_error)?;
        // SAFETY: flock on a valid, open descriptor has no memory effects.
        let status = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if status != 0 {
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                return Err(ServiceError::InUse { directory: directory.to_owned(), holder: holder.trim().to_owned() });
            }
            return Err(file_error(error));
        }
        file.set_len(0).map_err(file_error)?;
        file.rewind().map_err(file_error)?;
        write!(file, "{}", std::process::id()).map_err(file_error)?;
        Ok(Self { _file: file })
    }
}

/// An open volume: its directory, configuration, the engine volume, and the lock.
#[derive(Debug)]
pub struct OpenVolume {
    /// The directory.
    pub directory: PathBuf,
    /// Its configuration.
    pub config: VolumeConfig,
    /// The engine volume (the log replayed and a CP committed).
    pub volume: ServiceVolume,
    /// Held for as long as the volume is open.
    pub lock: VolumeLock,
}

/// Opens the volume of `directory`: takes the lock, opens the devices, and
/// opens the engine volume (replaying its log).
pub fn open_volume(directory: &Path) -> Result<OpenVolume> {
    let config = VolumeConfig::load(directory)?;
    let lock = VolumeLock::acquire(directory)?;
    open_locked(directory, config, lock)
}

/// Opens the volume of `directory` whose lock the caller holds.
pub fn open_locked(directory: &Path, config: VolumeConfig, lock: VolumeLock) -> Result<OpenVolume> {
    let (data, flash) = open_devices(directory, &config)?;
    let volume = Volume::open_as(data, flash, config.volume_options(), config.volume_id)?;
    Ok(OpenVolume { directory: directory.to_owned(), config, volume, lock })
}

/// The label the configuration expects on data disk `index`, or on the flash
/// device (`None`).
fn expected_label(config: &VolumeConfig, data_disk_index: Option<usize>) -> DeviceLabel {
    let (role, member_index, member_count) = match data_disk_index {
        Some(index) => (
            LabelRole::Data,
            u32::try_from(index).expect("a handful of disks"),
            u32::try_from(config.data_disks.len()).expect("a handful of disks"),
        ),
        None => (LabelRole::Flash, 0, 1),
    };
    DeviceLabel { volume_id: config.volume_id, role, member_index, member_count, generation: config.label_generation }
}

/// Opens (exclusively) a device the configuration names, checking its size.
fn open_entry(directory: &Path, config: &VolumeConfig, entry: &DeviceEntry, trims: TrimPolicy) -> Result<FileDevice> {
    let path = VolumeConfig::resolve(directory, &entry.path);
    let device = open_file(&path, config.io_mode, trims)?;
    let size_bytes = device.info().capacity_bytes();
    if size_bytes != entry.size_bytes {
        return Err(ServiceError::DevicePath {
            path,
            message: format!("is {size_bytes} bytes; the configuration says {}", entry.size_bytes),
        });
    }
    Ok(device)
}

/// Opens the devices a configuration names, checking their sizes and labels
/// against it.
pub fn open_devices(directory: &Path, config: &VolumeConfig) -> Result<(DataDevice, VolumeDisk)> {
    labelled_devices(directory, config, LabeledDevice::open)
}

/// Opens the devices of a configuration being created and writes their labels.
fn label_new_devices(directory: &Path, config: &VolumeConfig) -> Result<(DataDevice, VolumeDisk)> {
    labelled_devices(directory, config, LabeledDevice::create)
}

/// Opens every device of a configuration and passes it, with the label it
/// should carry, to `label` (which checks or writes it).
fn labelled_devices(
    directory: &Path,
    config: &VolumeConfig,
    label: fn(FileDevice, DeviceLabel) -> std::result::Result<VolumeDisk, LabelError>,
) -> Result<(DataDevice, VolumeDisk)> {
    let labelled = |device: FileDevice, data_disk_index: Option<usize>| -> Result<VolumeDisk> {
        let path = PathBuf::from(device.info().name);
        label(device, expected_label(config, data_disk_index)).map_err(|source| ServiceError::Label { path, source })
    };
    let mut disks = Vec::new();
    for (index, entry) in config.data_disks.iter().enumerate() {
        disks.push(labelled(open_entry(directory, config, entry, TrimPolicy::Forward)?, Some(index))?);
    }
    let flash = labelled(open_entry(directory, config, &config.flash, TrimPolicy::Ignore)?, None)?;
    Ok((assemble_data_device(config, disks)?, flash))
}

/// One disk, or the RAID array of several.
fn assemble_data_device(config: &VolumeConfig, mut disks: Vec<VolumeDisk>) -> Result<DataDevice> {
    Ok(match config.raid {
        RaidChoice::None => DataDevice::Single(disks.pop().expect("validated: one disk")),
        RaidChoice::Raid4 | RaidChoice::Raid5 => {
            let level = if config.raid == RaidChoice::Raid4 { RaidConfig::raid4() } else { RaidConfig::raid5() };
            DataDevice::Raid(RaidDevice::new(disks, level.with_stripe_unit_bytes(config.stripe_unit_bytes))?)
        }
    })
}

/// Creates a volume in `directory` (created if missing): the device files, the
/// formatted volume, and the configuration file, written last so that a failed
/// create leaves no half volume behind: it removes the files it made and, if
/// it made the directory, the directory with its lock file. Returns the
/// configuration.
pub fn create_volume(directory: &Path, spec: &CreateSpec) -> Result<VolumeConfig> {
    let raid = check_spec(spec)?;
    let made_directory = !directory.exists();
    std::fs::create_dir_all(directory).map_err(|source| ServiceError::File { path: directory.to_owned(), source })?;
    if VolumeConfig::path_in(directory).exists() {
        return Err(ServiceError::AlreadyAVolume(directory.to_owned()));
    }
    let lock = VolumeLock::acquire(directory)?;
    let mut created = Vec::new();
    let outcome = create_locked(directory, spec, raid, &mut created);
    if outcome.is_err() {
        for path in created {
            let _ = std::fs::remove_file(path);
        }
        drop(lock);
        if made_directory {
            // Only if then empty: nothing but what this create made goes.
            let _ = std::fs::remove_file(directory.join(LOCK_FILE_NAME));
            let _ = std::fs::remove_dir(directory);
        }
    }
    outcome
}

fn create_locked(
    directory: &Path,
    spec: &CreateSpec,
    raid: RaidChoice,
    created: &mut Vec<PathBuf>,
) -> Result<VolumeConfig> {
    let data_paths: Vec<PathBuf> = if spec.data_paths.is_empty() {
        (0..spec.data_disk_count).map(|index| PathBuf::from(format!("data-{index}.img"))).collect()
    } else {
        spec.data_paths.clone()
    };
    let names_a_block_device = data_paths.iter().chain(&spec.flash_path).any(|path| {
        std::fs::metadata(VolumeConfig::resolve(directory, path)).is_ok_and(|m| m.file_type().is_block_device())
    });
    if spec.force && !names_a_block_device {
        return Err(ServiceError::InvalidParameter {
            parameter: "--force".into(),
            message: "applies to existing block devices, and none is named (--data, --flash)".into(),
        });
    }
    let mut data_disks = Vec::new();
    for path in &data_paths {
        data_disks.push(prepare_device(directory, path, spec.data_disk_bytes, spec, created)?);
    }
    let data_bytes: u64 = data_disks.iter().map(|disk| disk.size_bytes).sum();
    let flash_bytes = match spec.flash_bytes {
        Some(bytes) => check_flash_size(FlashSize::Requested, bytes, data_bytes).map(|()| bytes)?,
        None => default_flash_bytes(data_bytes),
    };
    let flash_path = spec.flash_path.clone().unwrap_or_else(|| PathBuf::from("flash.img"));
    let flash = prepare_device(directory, &flash_path, flash_bytes, spec, created)?;
    if flash.size_bytes != flash_bytes {
        // A flash block device is used whole: its size is known only now.
        check_flash_size(FlashSize::OfTheDevice, flash.size_bytes, data_bytes)?;
    }
    let config = VolumeConfig {
        format_version: CONFIG_FORMAT_VERSION,
        volume_id: new_volume_id(),
        layout: spec.layout.name().to_owned(),
        io_mode: spec.io_mode,
        raid,
        stripe_unit_bytes: spec.stripe_unit_bytes,
        data_disks,
        flash,
        label_generation: 1,
        read_realloc: spec.read_realloc,
        copy_out: spec.copy_out,
        delete_log: spec.delete_log.name().to_owned(),
    };
    config.validate(&VolumeConfig::path_in(directory))?;
    let (data, flash_device) = label_new_devices(directory, &config)?;
    let volume = Volume::format(data, flash_device, config.volume_id, config.volume_options())?;
    let (mut data, mut flash_device) = volume.close()?;
    data.flush()?;
    flash_device.flush()?;
    config.save(directory)?;
    Ok(config)
}

fn check_spec(spec: &CreateSpec) -> Result<RaidChoice> {
    let parameter =
        |parameter: &str, message: String| ServiceError::InvalidParameter { parameter: parameter.to_owned(), message };
    let disk_count = if spec.data_paths.is_empty() { spec.data_disk_count } else { spec.data_paths.len() };
    if disk_count == 0 {
        return Err(parameter("--disks", "at least one data disk is needed".into()));
    }
    let raid = spec.raid.unwrap_or(if disk_count == 1 { RaidChoice::None } else { RaidChoice::Raid5 });
    match (raid, disk_count) {
        (RaidChoice::None, count) if count > 1 => {
            return Err(parameter("--raid", format!("{count} data disks need raid4 or raid5")));
        }
        (RaidChoice::Raid4 | RaidChoice::Raid5, 1) => {
            return Err(parameter("--raid", format!("{} needs at least 2 data disks", raid.name())));
        }
        _ => {}
    }
    let sizes = std::iter::once(("--data-size", spec.data_disk_bytes))
        .chain(spec.flash_bytes.map(|bytes| ("--flash-size", bytes)));
    for (name, bytes) in sizes {
        if bytes == 0 || bytes % BLOCK_BYTES != 0 {
            return Err(parameter(name, format!("{bytes} bytes is not a positive multiple of 4 KiB")));
        }
    }
    if spec.flash_bytes.is_some_and(|bytes| bytes < MIN_FLASH_BLOCKS * BLOCK_BYTES) {
        return Err(parameter("--flash-size", format!("at least {} KiB", MIN_FLASH_BLOCKS * BLOCK_BYTES / 1024)));
    }
    if spec.stripe_unit_bytes == 0 || !spec.stripe_unit_bytes.is_multiple_of(BLOCK_BYTES) {
        return Err(parameter(
            "--stripe-unit",
            format!("{} is not a positive multiple of 4 KiB", spec.stripe_unit_bytes),
        ));
    }
    if raid != RaidChoice::None && spec.data_disk_bytes < spec.stripe_unit_bytes {
        return Err(parameter("--data-size", "each disk must hold at least one stripe unit".into()));
    }
    Ok(raid)
}

/// The least flash, in bytes, `volume create` takes beside `data_bytes` of
/// data disks on a flash device of `flash_bytes`: what formatting needs
/// ([`format_flash_blocks`]) and a second copy of the metadata whose shape
/// the devices fix ([`fixed_metadata_blocks`]: a CP may rewrite it whole
/// beside the old copy). The data disks' sum counts, so at least what RAID
/// leaves of them.
fn minimum_flash_bytes(data_bytes: u64, flash_bytes: u64) -> u64 {
    let (data, flash, options) = (data_bytes / BLOCK_BYTES, flash_bytes / BLOCK_BYTES, VolumeOptions::default());
    (format_flash_blocks(data, flash, &options) + fixed_metadata_blocks(data, flash, &options)) * BLOCK_BYTES
}

/// The smallest flash size, from `flash_bytes` up in steps of `step` bytes,
/// that holds the metadata of `data_bytes` of data disks, its own included
/// (the flash device's maps and checksums grow with it).
fn least_flash_bytes(data_bytes: u64, mut flash_bytes: u64, step: u64) -> u64 {
    loop {
        let wanted = minimum_flash_bytes(data_bytes, flash_bytes).div_ceil(step) * step;
        if wanted <= flash_bytes {
            return flash_bytes;
        }
        flash_bytes = wanted;
    }
}

/// The flash file made when `--flash-size` is not given: 1 GiB, or twice
/// what the metadata of `data_bytes` of data disks needs when that is more
/// (about 0.3 % of the data), in whole GiB, so that as much again is left to
/// stage writes.
pub fn default_flash_bytes(data_bytes: u64) -> u64 {
    const GIB: u64 = 1 << 30;
    let least = least_flash_bytes(data_bytes, 1 << 20, 1 << 20);
    DEFAULT_FLASH_BYTES.max((2 * least).div_ceil(GIB) * GIB)
}

/// Where a flash size came from, for the usage error that refuses it.
#[derive(Debug, Clone, Copy)]
enum FlashSize {
    /// `--flash-size`.
    Requested,
    /// The block device `--flash` names, used whole.
    OfTheDevice,
}

/// Refuses a flash of `flash_bytes` that cannot hold the metadata of
/// `data_bytes` of data disks, as a usage error of the option the size came
/// from, naming the least that fits.
fn check_flash_size(source: FlashSize, flash_bytes: u64, data_bytes: u64) -> Result<()> {
    if flash_bytes >= minimum_flash_bytes(data_bytes, flash_bytes) {
        return Ok(());
    }
    const MIB: u64 = 1 << 20;
    let least = least_flash_bytes(data_bytes, flash_bytes, MIB);
    let (flag, remedy) = match source {
        FlashSize::Requested => ("--flash-size", "without --flash-size the flash file is sized for the data"),
        FlashSize::OfTheDevice => ("--flash", "name a larger flash device"),
    };
    Err(ServiceError::InvalidParameter {
        parameter: flag.into(),
        message: format!(
            "{} MiB cannot hold the metadata of {} MiB of data disks (checksums, refcounts and free-space maps, \
             twice over, beside the log): at least {} MiB is needed; {remedy}",
            flash_bytes.div_ceil(MIB),
            data_bytes.div_ceil(MIB),
            least / MIB
        ),
    })
}

/// Creates a sparse file of `size_bytes` at `path` (relative to `directory`),
/// or takes an existing block device whole — unless it holds something
/// recognisable and `force` is off. An existing regular file is refused
/// rather than overwritten.
fn prepare_device(
    directory: &Path,
    path: &Path,
    size_bytes: u64,
    spec: &CreateSpec,
    created: &mut Vec<PathBuf>,
) -> Result<DeviceEntry> {
    let resolved = VolumeConfig::resolve(directory, path);
    let refuse = |message: String| ServiceError::DevicePath { path: resolved.clone(), message };
    match std::fs::metadata(&resolved) {
        Ok(metadata) if metadata.file_type().is_block_device() => {
            let mut device = open_file(&resolved, IoMode::Buffered, TrimPolicy::Forward)?;
            if !spec.force {
                if let Some(what) = recognisable_contents(&mut device)? {
                    return Err(ServiceError::HoldsData { path: resolved.clone(), what });
                }
            }
            let size_bytes = device.info().capacity_bytes();
            Ok(DeviceEntry { path: absolute(&resolved), size_bytes })
        }
        Ok(_) => Err(refuse("exists already; name a new file or a block device".into())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&resolved)
                .map_err(|error| refuse(format!("cannot create: {error}")))?;
            created.push(resolved.clone());
            file.set_len(size_bytes).map_err(|error| refuse(format!("cannot set the size: {error}")))?;
            if spec.preallocate {
                allocate(&file, size_bytes).map_err(|error| refuse(format!("cannot preallocate: {error}")))?;
            }
            file.sync_all().map_err(|error| refuse(format!("cannot sync: {error}")))?;
            Ok(DeviceEntry { path: path.to_owned(), size_bytes })
        }
        Err(error) => Err(refuse(error.to_string())),
    }
}

/// Allocates the first `size_bytes` of `file` on its file system (blocks that
/// read as zeroes until written).
fn allocate(file: &File, size_bytes: u64) -> std::io::Result<()> {
    let length = libc::off_t::try_from(size_bytes).map_err(std::io::Error::other)?;
    // SAFETY: fallocate reads no memory of ours; the descriptor is open for writing.
    let outcome = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, length) };
    if outcome == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Bytes at the start of a device inspected for existing contents.
const INSPECTED_BYTES: u64 = 1 << 20;

/// What an existing device holds, if anything recognisable: a Proxima label,
/// a partition table or file system signature, or any data in its first MiB
/// (a fresh or wiped device reads as zeroes there).
fn recognisable_contents(device: &mut FileDevice) -> Result<Option<String>> {
    let path = PathBuf::from(device.info().name);
    match read_label(device) {
        Ok(Some(label)) => return Ok(Some(format!("a Proxima label of volume {:#x}", label.volume_id))),
        Ok(None) => {}
        Err(LabelError::Damaged { .. }) => return Ok(Some("a damaged Proxima label".into())),
        Err(source) => return Err(ServiceError::Label { path, source }),
    }
    let blocks = (INSPECTED_BYTES / BLOCK_BYTES).min(device.info().block_count);
    let head = device.read_blocks(0, u32::try_from(blocks).expect("a MiB of blocks"))?;
    let signatures: [(usize, &[u8], &str); 6] = [
        (510, &[0x55, 0xAA], "a partition table or boot sector"),
        (512, b"EFI PART", "a GPT partition table"),
        (1080, &[0x53, 0xEF], "an ext2/3/4 file system"),
        (0, b"XFSB", "an XFS file system"),
        (0x10040, b"_BHRfS_M", "a Btrfs file system"),
        (0, b"LUKS\xba\xbe", "a LUKS volume"),
    ];
    for (offset, signature, what) in signatures {
        if head.get(offset..offset + signature.len()) == Some(signature) {
            return Ok(Some(what.to_owned()));
        }
    }
    Ok(head.iter().any(|&byte| byte != 0).then(|| "data in its first MiB".to_owned()))
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// A volume id from the clock and the process id (unique enough to tell two
/// volumes apart; the engine does not require uniqueness).
fn new_volume_id() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        // The low 64 bits, which change fastest.
        .map(|elapsed| u64::try_from(elapsed.as_nanos() & u128::from(u64::MAX)).expect("masked to 64 bits"))
        .unwrap_or(0);
    (nanos ^ (u64::from(std::process::id()) << 40)) | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_spec() -> CreateSpec {
        CreateSpec { data_disk_bytes: 64 << 20, flash_bytes: Some(8 << 20), ..CreateSpec::default() }
    }

    #[test]
    fn a_created_volume_opens_with_no_extents() {
        let directory = tempfile::tempdir().unwrap();
        let config = create_volume(directory.path(), &small_spec()).unwrap();
        assert_eq!(config.raid, RaidChoice::None);
        let open = open_volume(directory.path()).unwrap();
        assert!(open.volume.extents().is_empty());
        assert_eq!(open.volume.volume_id(), config.volume_id);
    }

    #[test]
    fn a_second_create_and_a_second_open_are_refused() {
        let directory = tempfile::tempdir().unwrap();
        create_volume(directory.path(), &small_spec()).unwrap();
        assert!(matches!(create_volume(directory.path(), &small_spec()), Err(ServiceError::AlreadyAVolume(_))));
        let _open = open_volume(directory.path()).unwrap();
        let error = open_volume(directory.path()).unwrap_err();
        assert!(matches!(error, ServiceError::InUse { .. }), "{error}");
        assert!(error.to_string().contains(&std::process::id().to_string()), "{error}");
    }

    #[test]
    fn raid5_over_three_files_is_created_and_reopened() {
        let directory = tempfile::tempdir().unwrap();
        let spec = CreateSpec { data_disk_count: 3, stripe_unit_bytes: 64 << 10, ..small_spec() };
        let config = create_volume(directory.path(), &spec).unwrap();
        assert_eq!(config.raid, RaidChoice::Raid5);
        assert_eq!(config.data_disks.len(), 3);
        let mut open = open_volume(directory.path()).unwrap();
        let id = open.volume.create_extent("lun0", 32 << 20).unwrap();
        open.volume.write(id, 4096, &[9u8; 8192], true).unwrap();
        drop(open);
        let mut open = open_volume(directory.path()).unwrap();
        assert_eq!(open.volume.read(id, 4096, 8192).unwrap(), vec![9u8; 8192]);
    }

    #[test]
    fn bad_specs_are_usage_errors_and_leave_nothing_behind() {
        let directory = tempfile::tempdir().unwrap();
        let cases = [
            CreateSpec { data_disk_count: 2, raid: Some(RaidChoice::None), ..small_spec() },
            CreateSpec { raid: Some(RaidChoice::Raid4), ..small_spec() },
            CreateSpec { flash_bytes: Some(4096 * 10), ..small_spec() },
            CreateSpec { data_disk_bytes: 1000, ..small_spec() },
        ];
        for spec in cases {
            let error = create_volume(directory.path(), &spec).unwrap_err();
            assert!(error.is_usage(), "{error}");
        }
        let leftover: Vec<_> = std::fs::read_dir(directory.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name != LOCK_FILE_NAME)
            .collect();
        assert!(leftover.is_empty(), "{leftover:?}");
    }

    #[test]
    fn the_default_flash_grows_with_the_data_disks_metadata() {
        const GIB: u64 = 1 << 30;
        assert_eq!(default_flash_bytes(16 * GIB), GIB, "the default volume's flash");
        assert_eq!(default_flash_bytes(64 * GIB), GIB);
        let large = default_flash_bytes(1024 * GIB);
        assert!(large > GIB && large.is_multiple_of(GIB), "{large}");
        assert!(large >= 2 * minimum_flash_bytes(1024 * GIB, large), "{large}");
        assert!(large <= 2 * minimum_flash_bytes(1024 * GIB, large) + 2 * GIB, "{large}");
    }

    #[test]
    fn a_flash_too_small_for_the_data_is_refused_and_leaves_nothing_behind() {
        let parent = tempfile::tempdir().unwrap();
        let directory = parent.path().join("volume");
        // 32 GiB of sparse data disk: its metadata alone is about 50 MiB.
        let spec = CreateSpec { data_disk_bytes: 32 << 30, flash_bytes: Some(16 << 20), ..CreateSpec::default() };
        let error = create_volume(&directory, &spec).unwrap_err();
        assert!(error.is_usage(), "{error}");
        let message = error.to_string();
        assert!(message.contains("--flash-size") && message.contains("at least"), "{message}");
        assert!(!directory.exists(), "a failed create leaves no directory it made");
        // The size it names is enough.
        let named: u64 = message.split("at least ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
        let spec = CreateSpec { flash_bytes: Some(named << 20), ..spec };
        let config = create_volume(&directory, &spec).unwrap();
        assert_eq!(config.flash.size_bytes, named << 20);
        open_volume(&directory).unwrap();
    }

    #[test]
    fn a_device_whose_size_changed_is_refused_by_name() {
        let directory = tempfile::tempdir().unwrap();
        create_volume(directory.path(), &small_spec()).unwrap();
        File::options().write(true).open(directory.path().join("flash.img")).unwrap().set_len(16 << 20).unwrap();
        let error = open_volume(directory.path()).unwrap_err();
        assert!(error.to_string().contains("flash.img"), "{error}");
    }
}
