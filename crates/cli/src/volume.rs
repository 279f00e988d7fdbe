//! `proxima volume create DIR`: creates a volume directory — data disk files
//! (or existing block devices), a flash file or device, the formatted volume,
//! and its configuration file. `proxima volume create ./vol` alone makes one
//! 16 GiB sparse data file and a 1 GiB flash file with the proximal layout.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use proxima_engine::{DeleteLogMode, Layout};
use proxima_service::{create_volume, format_size, CreateSpec, IoMode, RaidChoice, VolumeConfig};

use crate::service_common::{fail, size_argument, with_spinner};

/// `proxima volume`.
#[derive(Debug, Args)]
pub struct VolumeArgs {
    #[command(subcommand)]
    command: VolumeCommand,
}

#[derive(Debug, Subcommand)]
enum VolumeCommand {
    /// Create a volume in DIR (created if missing).
    Create(CreateArgs),
}

#[derive(Debug, Args)]
struct CreateArgs {
    /// The volume directory.
    directory: PathBuf,
    /// A data disk: a new file to create (relative to DIR) or an existing block
    /// device. Repeat for several disks (RAID). Default: data-N.img in DIR.
    #[arg(long = "data", value_name = "PATH")]
    data_paths: Vec<PathBuf>,
    /// Number of data disk files to create in DIR (not with --data) [default: 1].
    #[arg(long = "disks", value_name = "N")]
    disk_count: Option<usize>,
    /// Size of each data disk file created (K, M, G, T suffixes); block devices
    /// are used whole [default: 16G].
    #[arg(long, value_name = "SIZE", value_parser = size_argument)]
    data_size: Option<u64>,
    /// The flash (staging and metadata) device: a new file or a block device.
    /// Default: flash.img in DIR.
    #[arg(long = "flash", value_name = "PATH")]
    flash_path: Option<PathBuf>,
    /// Size of the flash file created (a block device is used whole) [default: 1G, or twice what the data
    /// disks' metadata needs when that is more, in whole G: about 0.3 % of the data].
    #[arg(long, value_name = "SIZE", value_parser = size_argument)]
    flash_size: Option<u64>,
    /// Data layout: proximal, in-place, write-anywhere, lfs, wolf, proximal-hot or hylog.
    #[arg(long, value_parser = parse_layout, default_value = "proximal")]
    layout: Layout,
    /// RAID level over several data disks: none, raid4 or raid5 [default: none
    /// for one disk, raid5 for several].
    #[arg(long, value_parser = parse_raid)]
    raid: Option<RaidChoice>,
    /// RAID stripe unit (with RAID only) [default: 1M].
    #[arg(long, value_name = "SIZE", value_parser = size_argument)]
    stripe_unit: Option<u64>,
    /// Bypass the page cache (O_DIRECT) instead of buffered I/O with fdatasync.
    #[arg(long)]
    direct: bool,
    /// Allocate the files created on the host file system now (fallocate)
    /// instead of leaving them sparse: writes never find the host file
    /// system full, and direct I/O into them skips block allocation.
    #[arg(long)]
    preallocate: bool,
    /// Reads rewrite the scattered spans they read as one contiguous run
    /// each (reallocate-on-read): on or off.
    #[arg(long, value_name = "on|off", value_parser = parse_on_off, default_value = "off", action = clap::ArgAction::Set)]
    read_realloc: bool,
    /// Proximal layout: a destaged block whose older version a snapshot
    /// reads at the block's place copies that version out beside it and
    /// takes the place back, so live data keeps its layout (docs/layouts.md):
    /// on or off.
    #[arg(long, value_name = "on|off", value_parser = parse_on_off, default_value = "off", action = clap::ArgAction::Set)]
    copy_out: bool,
    /// How frees reach the activemap: at once (none), through a tree log
    /// (tlog) or a batched free log (bflog); see docs/wafl.md.
    #[arg(long, value_name = "none|tlog|bflog", value_parser = parse_delete_log, default_value = "none")]
    delete_log: DeleteLogMode,
    /// Take existing block devices (--data, --flash) that hold data — another
    /// volume's label, a partition table, a file system — all the same,
    /// overwriting it.
    #[arg(long)]
    force: bool,
    /// Print the configuration as JSON on the last line.
    #[arg(long)]
    json: bool,
}

fn parse_on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("{text:?} is neither on nor off")),
    }
}

fn parse_layout(text: &str) -> Result<Layout, String> {
    Layout::parse(text).ok_or_else(|| format!("unknown layout {text:?} ({})", Layout::names_listed()))
}

fn parse_delete_log(text: &str) -> Result<DeleteLogMode, String> {
    DeleteLogMode::parse(text).ok_or_else(|| format!("unknown delete log {text:?} (none, tlog or bflog)"))
}

fn parse_raid(text: &str) -> Result<RaidChoice, String> {
    RaidChoice::parse(text).ok_or_else(|| format!("unknown RAID level {text:?} (none, raid4 or raid5)"))
}

/// Runs `proxima volume`.
pub fn run(args: &VolumeArgs) -> ExitCode {
    match &args.command {
        VolumeCommand::Create(create) => run_create(create),
    }
}

/// Why a flag given would do nothing for this volume, if one would: such a
/// flag is refused rather than ignored. `is_block_device` tells whether a
/// path (relative to the volume directory) is an existing block device, which
/// is used whole.
fn unused_flag(args: &CreateArgs, is_block_device: impl Fn(&Path) -> bool) -> Option<String> {
    if args.disk_count.is_some() && !args.data_paths.is_empty() {
        return Some("--disks does not apply with --data (the data disks are the --data paths)".to_owned());
    }
    let disk_count = if args.data_paths.is_empty() { args.disk_count.unwrap_or(1) } else { args.data_paths.len() };
    let raid = args.raid.unwrap_or(if disk_count == 1 { RaidChoice::None } else { RaidChoice::Raid5 });
    if args.copy_out && args.layout != Layout::Proximal {
        return Some(format!("--copy-out on applies to the proximal layout only, not {}", args.layout.name()));
    }
    if args.stripe_unit.is_some() && raid == RaidChoice::None {
        return Some("--stripe-unit does not apply without RAID (one data disk, or --raid none)".to_owned());
    }
    if args.data_size.is_some()
        && !args.data_paths.is_empty()
        && args.data_paths.iter().all(|path| is_block_device(path))
    {
        return Some("--data-size does not apply: every --data path is a block device, used whole".to_owned());
    }
    if args.flash_size.is_some() && args.flash_path.as_deref().is_some_and(&is_block_device) {
        return Some("--flash-size does not apply: --flash is a block device, used whole".to_owned());
    }
    if args.preallocate
        && !args.data_paths.is_empty()
        && args.data_paths.iter().all(|path| is_block_device(path))
        && args.flash_path.as_deref().is_some_and(&is_block_device)
    {
        return Some("--preallocate does not apply: every device is a block device, no file is created".to_owned());
    }
    None
}

fn run_create(args: &CreateArgs) -> ExitCode {
    let is_block_device = |path: &Path| {
        std::fs::metadata(VolumeConfig::resolve(&args.directory, path))
            .is_ok_and(|metadata| metadata.file_type().is_block_device())
    };
    if let Some(message) = unused_flag(args, is_block_device) {
        eprintln!("proxima volume create: {message}");
        return ExitCode::from(2);
    }
    let defaults = CreateSpec::default();
    let spec = CreateSpec {
        data_paths: args.data_paths.clone(),
        data_disk_count: args.disk_count.unwrap_or(defaults.data_disk_count),
        data_disk_bytes: args.data_size.unwrap_or(defaults.data_disk_bytes),
        flash_path: args.flash_path.clone(),
        flash_bytes: args.flash_size,
        layout: args.layout,
        raid: args.raid,
        stripe_unit_bytes: args.stripe_unit.unwrap_or(defaults.stripe_unit_bytes),
        io_mode: if args.direct { IoMode::Direct } else { IoMode::Buffered },
        force: args.force,
        preallocate: args.preallocate,
        read_realloc: args.read_realloc,
        copy_out: args.copy_out,
        delete_log: args.delete_log,
    };
    let message = format!("creating volume {}", args.directory.display());
    match with_spinner(&message, || create_volume(&args.directory, &spec)) {
        Ok(config) => {
            print_created(&args.directory, &config);
            if args.json {
                println!("{}", serde_json::to_string(&config).expect("a configuration serialises"));
            }
            ExitCode::SUCCESS
        }
        Err(error) => fail("volume create", &error),
    }
}

fn print_created(directory: &std::path::Path, config: &VolumeConfig) {
    let realloc = if config.read_realloc { ", reallocate-on-read" } else { "" };
    let realloc = if config.copy_out { format!("{realloc}, copy-out") } else { realloc.to_owned() };
    let realloc = format!("{realloc}, delete log {}", config.delete_log);
    println!(
        "created volume {} ({} layout, {} I/O{realloc})",
        directory.display(),
        config.layout,
        config.io_mode.name()
    );
    for disk in &config.data_disks {
        println!("  data disk {} ({})", disk.path.display(), device_size(directory, &disk.path, disk.size_bytes));
    }
    if config.raid != RaidChoice::None {
        println!("  {} with a {} stripe unit", config.raid.name(), format_size(config.stripe_unit_bytes));
    }
    let flash = &config.flash;
    println!("  flash {} ({})", flash.path.display(), device_size(directory, &flash.path, flash.size_bytes));
    println!("next: proxima extent create {} lun0 --size 2G", directory.display());
}

/// A device's size and, for a regular file, how much of it the host file
/// system has allocated (little for a sparse file, all with --preallocate).
fn device_size(directory: &Path, path: &Path, size_bytes: u64) -> String {
    match std::fs::metadata(VolumeConfig::resolve(directory, path)) {
        Ok(metadata) if metadata.is_file() => {
            let allocated = metadata.blocks().saturating_mul(512).min(size_bytes);
            format!("{}, {} allocated", format_size(size_bytes), format_size(allocated))
        }
        _ => format_size(size_bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// `volume create ARGS...` parsed, as the command line would.
    fn create_args(words: &[&str]) -> CreateArgs {
        #[derive(Debug, Parser)]
        struct Wrapper {
            #[command(flatten)]
            create: CreateArgs,
        }
        let mut argv = vec!["create", "vol"];
        argv.extend_from_slice(words);
        Wrapper::try_parse_from(argv).expect("valid flags").create
    }

    fn unused(words: &[&str], block_devices: &[&str]) -> Option<String> {
        unused_flag(&create_args(words), |path| block_devices.iter().any(|device| Path::new(device) == path))
    }

    #[test]
    fn flags_that_would_do_nothing_are_named() {
        assert!(unused(&["--disks", "3", "--data", "a.img"], &[]).unwrap().starts_with("--disks"));
        assert!(unused(&["--stripe-unit", "64K"], &[]).unwrap().starts_with("--stripe-unit"));
        assert!(unused(&["--stripe-unit", "64K", "--disks", "3", "--raid", "none"], &[])
            .unwrap()
            .starts_with("--stripe-unit"));
        let devices = ["/dev/sdb", "/dev/sdc"];
        let data_size = unused(&["--data", "/dev/sdb", "--data", "/dev/sdc", "--data-size", "1G"], &devices);
        assert!(data_size.unwrap().starts_with("--data-size"));
        let flash_size = unused(&["--flash", "/dev/sdb", "--flash-size", "1G"], &devices);
        assert!(flash_size.unwrap().starts_with("--flash-size"));
        let preallocate = unused(&["--data", "/dev/sdb", "--flash", "/dev/sdc", "--preallocate"], &devices);
        assert!(preallocate.unwrap().starts_with("--preallocate"));
        assert_eq!(unused(&["--data", "/dev/sdb", "--preallocate"], &devices), None, "flash.img is a file");
    }

    #[test]
    fn flags_that_apply_are_accepted() {
        assert_eq!(unused(&["--disks", "3", "--stripe-unit", "64K"], &[]), None);
        assert_eq!(
            unused(&["--data", "a.img", "--data", "b.img", "--raid", "raid4", "--stripe-unit", "64K"], &[]),
            None
        );
        // A file among the data paths is created with --data-size.
        assert_eq!(unused(&["--data", "/dev/sdb", "--data", "b.img", "--data-size", "1G"], &["/dev/sdb"]), None);
        assert_eq!(unused(&["--flash", "f.img", "--flash-size", "64M", "--data-size", "1G"], &[]), None);
    }
}
