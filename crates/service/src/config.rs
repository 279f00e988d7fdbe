//! The volume configuration file, `proxima-volume.json` in the volume directory:
//! a small, versioned JSON document naming the data disks and the flash device
//! (relative paths are relative to the directory), their sizes, the layout, the
//! RAID level and stripe unit, and the I/O mode. `volume create` writes it;
//! every other command reads it. Example:
//!
//! ```json
//! {
//!   "format_version": 2,
//!   "volume_id": 1234,
//!   "layout": "proximal",
//!   "io_mode": "buffered",
//!   "raid": "none",
//!   "stripe_unit_bytes": 1048576,
//!   "data_disks": [{ "path": "data-0.img", "size_bytes": 17179869184 }],
//!   "flash": { "path": "flash.img", "size_bytes": 1073741824 },
//!   "label_generation": 1
//! }
//! ```

use std::path::{Path, PathBuf};

use proxima_engine::{DeleteLogMode, Layout, ReadRealloc, VolumeOptions};
use serde::{Deserialize, Serialize};

use crate::devices::{IoMode, BLOCK_BYTES};
use crate::error::{Result, ServiceError};

/// Name of the configuration file inside a volume directory.
pub const CONFIG_FILE_NAME: &str = "proxima-volume.json";
/// The configuration format this code reads and writes (2: labelled devices).
pub const CONFIG_FORMAT_VERSION: u32 = 2;

/// How the data disks are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RaidChoice {
    /// One data disk.
    None,
    /// RAID-4: the last disk holds parity.
    Raid4,
    /// RAID-5: parity rotates over all disks.
    Raid5,
}

impl RaidChoice {
    /// The name used in the file and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            RaidChoice::None => "none",
            RaidChoice::Raid4 => "raid4",
            RaidChoice::Raid5 => "raid5",
        }
    }

    /// Parses `none`, `raid4`/`4`, `raid5`/`5`.
    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "none" | "0" => Some(RaidChoice::None),
            "raid4" | "4" => Some(RaidChoice::Raid4),
            "raid5" | "5" => Some(RaidChoice::Raid5),
            _ => None,
        }
    }
}

/// One device named by the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceEntry {
    /// File or block device; relative to the volume directory unless absolute.
    pub path: PathBuf,
    /// Its size in bytes when the volume was created.
    pub size_bytes: u64,
}

/// Memory for staged blocks' bytes on a volume that bypasses the page cache
/// (`VolumeOptions::staged_cache_blocks`): the most recently staged third of
/// the default staging area (768 MiB of a 1 GiB flash file), whose destage
/// then reads nothing from flash.
pub const DIRECT_STAGED_CACHE_BYTES: u64 = 256 << 20;

/// The whole configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeConfig {
    /// Always [`CONFIG_FORMAT_VERSION`] when written by this code.
    pub format_version: u32,
    /// The engine's volume id (also in the superblock).
    pub volume_id: u64,
    /// `proximal`, `in-place` or `write-anywhere`.
    pub layout: String,
    /// How the files are accessed.
    #[serde(default)]
    pub io_mode: IoMode,
    /// How the data disks are combined.
    pub raid: RaidChoice,
    /// RAID stripe unit in bytes (a multiple of 4096).
    pub stripe_unit_bytes: u64,
    /// The data disks, in array order.
    pub data_disks: Vec<DeviceEntry>,
    /// The flash (staging and metadata) device.
    pub flash: DeviceEntry,
    /// The generation of the devices' labels (raised when the set of devices
    /// changes, so a device that left the volume is not taken back).
    pub label_generation: u64,
    /// Whether reads rewrite the scattered spans they read contiguously
    /// (reallocate-on-read, docs/read-realloc.md).
    #[serde(default)]
    pub read_realloc: bool,
    /// Whether destage copies out what snapshots read at the places its
    /// blocks go back to, so live data keeps its layout (the proximal
    /// layout's copy-out, docs/layouts.md).
    #[serde(default)]
    pub copy_out: bool,
    /// The delete log the volume was formatted with: `none`, `tlog` or
    /// `bflog` (docs/wafl.md). The superblock keeps the same choice; this
    /// field gives it to the format.
    #[serde(default = "no_delete_log")]
    pub delete_log: String,
}

fn no_delete_log() -> String {
    DeleteLogMode::None.name().to_owned()
}

impl VolumeConfig {
    /// The configuration file of `directory`.
    pub fn path_in(directory: &Path) -> PathBuf {
        directory.join(CONFIG_FILE_NAME)
    }

    /// Reads and validates the configuration of `directory`.
    pub fn load(directory: &Path) -> Result<Self> {
        if !directory.is_dir() {
            return Err(ServiceError::NoDirectory(directory.to_owned()));
        }
        let file = Self::path_in(directory);
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(ServiceError::NotAVolume { directory: directory.to_owned(), file });
            }
            Err(source) => return Err(ServiceError::File { path: file, source }),
        };
        Self::parse(&text, &file)
    }

    /// Parses and validates configuration text (`file` names it in errors).
    pub fn parse(text: &str, file: &Path) -> Result<Self> {
        // The version is checked before the shape, so a future format gets a
        // version error rather than a confusing field error.
        let value: serde_json::Value = serde_json::from_str(text).map_err(|error| malformed(file, &error))?;
        match value.get("format_version").and_then(serde_json::Value::as_u64) {
            Some(version) if version == u64::from(CONFIG_FORMAT_VERSION) => {}
            Some(version) => {
                return Err(ServiceError::UnsupportedVersion {
                    file: file.to_owned(),
                    found: u32::try_from(version).unwrap_or(u32::MAX),
                    supported: CONFIG_FORMAT_VERSION,
                })
            }
            None => return Err(invalid(file, "format_version", "missing or not a number")),
        }
        let config: VolumeConfig = serde_json::from_str(text).map_err(|error| malformed(file, &error))?;
        config.validate(file)?;
        Ok(config)
    }

    /// Checks every field.
    pub fn validate(&self, file: &Path) -> Result<()> {
        if Layout::parse(&self.layout).is_none() {
            return Err(invalid(file, "layout", &format!("{:?} is not {}", self.layout, Layout::names_listed())));
        }
        if self.copy_out && self.layout != Layout::Proximal.name() {
            return Err(invalid(
                file,
                "copy_out",
                &format!("applies to the proximal layout only, not {}", self.layout),
            ));
        }
        if DeleteLogMode::parse(&self.delete_log).is_none() {
            return Err(invalid(file, "delete_log", &format!("{:?} is not none, tlog or bflog", self.delete_log)));
        }
        if self.stripe_unit_bytes == 0 || !self.stripe_unit_bytes.is_multiple_of(BLOCK_BYTES) {
            return Err(invalid(file, "stripe_unit_bytes", "must be a positive multiple of 4096"));
        }
        let disk_count = self.data_disks.len();
        match (self.raid, disk_count) {
            (_, 0) => return Err(invalid(file, "data_disks", "at least one data disk is needed")),
            (RaidChoice::None, 1) => {}
            (RaidChoice::None, count) => {
                return Err(invalid(file, "raid", &format!("{count} data disks need raid4 or raid5")));
            }
            (_, 1) => return Err(invalid(file, "raid", "RAID needs at least 2 disks (data and parity)")),
            _ => {}
        }
        for (index, disk) in self.data_disks.iter().enumerate() {
            check_device_size(file, &format!("data_disks[{index}].size_bytes"), disk.size_bytes)?;
        }
        check_device_size(file, "flash.size_bytes", self.flash.size_bytes)
    }

    /// The engine options this configuration gives.
    pub fn volume_options(&self) -> VolumeOptions {
        VolumeOptions {
            layout: Layout::parse(&self.layout).expect("validated"),
            read_realloc: if self.read_realloc { ReadRealloc::ON } else { ReadRealloc::OFF },
            proximal_copy_out: self.copy_out,
            delete_log: DeleteLogMode::parse(&self.delete_log).expect("validated"),
            // The flash device ignores trims (`directory::labelled_devices`): a
            // CP need not list the blocks it releases.
            trim_released_flash: false,
            // Bypassing the page cache, nothing else keeps the staged blocks'
            // bytes for their destage.
            staged_cache_blocks: match self.io_mode {
                IoMode::Direct => DIRECT_STAGED_CACHE_BYTES / BLOCK_BYTES,
                IoMode::Buffered => 0,
            },
            ..VolumeOptions::default()
        }
    }

    /// A device path resolved against the volume directory.
    pub fn resolve(directory: &Path, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_owned()
        } else {
            directory.join(path)
        }
    }

    /// Writes the configuration to `directory` atomically (a temporary file,
    /// synced, renamed over the old one, directory synced).
    pub fn save(&self, directory: &Path) -> Result<()> {
        let path = Self::path_in(directory);
        let temporary = directory.join(format!("{CONFIG_FILE_NAME}.tmp"));
        let file_error = |path: &Path| {
            let path = path.to_owned();
            move |source| ServiceError::File { path, source }
        };
        let mut text = serde_json::to_string_pretty(self).expect("a configuration always serialises");
        text.push('\n');
        std::fs::write(&temporary, text).map_err(file_error(&temporary))?;
        std::fs::File::open(&temporary).and_then(|file| file.sync_all()).map_err(file_error(&temporary))?;
        std::fs::rename(&temporary, &path).map_err(file_error(&path))?;
        std::fs::File::open(directory).and_then(|file| file.sync_all()).map_err(file_error(directory))?;
        Ok(())
    }
}

fn check_device_size(file: &Path, parameter: &str, size_bytes: u64) -> Result<()> {
    if size_bytes == 0 || !size_bytes.is_multiple_of(BLOCK_BYTES) {
        return Err(invalid(file, parameter, &format!("{size_bytes} is not a positive multiple of 4096")));
    }
    Ok(())
}

fn invalid(file: &Path, parameter: &str, message: &str) -> ServiceError {
    ServiceError::InvalidConfig { file: file.to_owned(), parameter: parameter.to_owned(), message: message.to_owned() }
}

fn malformed(file: &Path, error: &serde_json::Error) -> ServiceError {
    ServiceError::MalformedConfig {
        file: file.to_owned(),
        line: error.line(),
        column: error.column(),
        message: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> VolumeConfig {
        VolumeConfig {
            format_version: CONFIG_FORMAT_VERSION,
            volume_id: 7,
            layout: "proximal".into(),
            io_mode: IoMode::Buffered,
            raid: RaidChoice::None,
            stripe_unit_bytes: 1 << 20,
            data_disks: vec![DeviceEntry { path: "data-0.img".into(), size_bytes: 1 << 30 }],
            flash: DeviceEntry { path: "flash.img".into(), size_bytes: 64 << 20 },
            label_generation: 1,
            read_realloc: false,
            copy_out: false,
            delete_log: "none".into(),
        }
    }

    #[test]
    fn a_saved_configuration_loads_back() {
        let directory = tempfile::tempdir().unwrap();
        sample().save(directory.path()).unwrap();
        assert_eq!(VolumeConfig::load(directory.path()).unwrap(), sample());
    }

    #[test]
    fn malformed_text_names_the_file_and_line() {
        let file = Path::new("/v/proxima-volume.json");
        let error = VolumeConfig::parse("{\n  \"format_version\": 1,\n  oops\n}", file).unwrap_err();
        let message = error.to_string();
        assert!(message.starts_with("/v/proxima-volume.json:3:"), "{message}");
        assert!(error.is_usage());
    }

    #[test]
    fn unknown_versions_and_fields_and_values_are_refused() {
        let file = Path::new("c.json");
        let mut value = serde_json::to_value(sample()).unwrap();
        value["format_version"] = 3.into();
        let error = VolumeConfig::parse(&value.to_string(), file).unwrap_err();
        assert!(matches!(error, ServiceError::UnsupportedVersion { found: 3, .. }), "{error}");
        value["format_version"] = 1.into();
        let error = VolumeConfig::parse(&value.to_string(), file).unwrap_err();
        assert!(matches!(error, ServiceError::UnsupportedVersion { found: 1, .. }), "{error}");

        let mut value = serde_json::to_value(sample()).unwrap();
        value["colour"] = "blue".into();
        assert!(matches!(VolumeConfig::parse(&value.to_string(), file), Err(ServiceError::MalformedConfig { .. })));

        let mut config = sample();
        config.layout = "log".into();
        let error = VolumeConfig::parse(&serde_json::to_string(&config).unwrap(), file).unwrap_err();
        assert!(error.to_string().contains("layout"), "{error}");

        let mut config = sample();
        config.data_disks.push(config.data_disks[0].clone());
        let error = VolumeConfig::parse(&serde_json::to_string(&config).unwrap(), file).unwrap_err();
        assert!(error.to_string().contains("raid"), "{error}");

        let mut config = sample();
        config.flash.size_bytes = 1000;
        let error = VolumeConfig::parse(&serde_json::to_string(&config).unwrap(), file).unwrap_err();
        assert!(error.to_string().contains("flash.size_bytes"), "{error}");
    }

    #[test]
    fn a_missing_directory_or_file_is_a_clear_error() {
        let directory = tempfile::tempdir().unwrap();
        let missing = directory.path().join("nope");
        assert!(matches!(VolumeConfig::load(&missing), Err(ServiceError::NoDirectory(_))));
        let error = VolumeConfig::load(directory.path()).unwrap_err();
        assert!(matches!(error, ServiceError::NotAVolume { .. }), "{error}");
        assert!(error.to_string().contains(CONFIG_FILE_NAME));
    }
}
