//! `proxima volume create DIR`: creates a volume directory — data disk files
//! (or existing block devices), a flash file or device, the formatted volume,
//! and its configuration file. `proxima volume create ./vol` alone makes one
//! 16 GiB sparse data file and a 1 GiB flash file with the proximal layout.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use proxima_engine::Layout;
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
    /// Number of data disk files to create in DIR when no --data is given.
    #[arg(long = "disks", value_name = "N", default_value_t = 1)]
    disk_count: usize,
    /// Size of each data disk file created (K, M, G, T suffixes).
    #[arg(long, value_name = "SIZE", value_parser = size_argument, default_value = "16G")]
    data_size: u64,
    /// The flash (staging and metadata) device: a new file or a block device.
    /// Default: flash.img in DIR.
    #[arg(long = "flash", value_name = "PATH")]
    flash_path: Option<PathBuf>,
    /// Size of the flash file created.
    #[arg(long, value_name = "SIZE", value_parser = size_argument, default_value = "1G")]
    flash_size: u64,
    /// Data layout: proximal, in-place or write-anywhere.
    #[arg(long, value_parser = parse_layout, default_value = "proximal")]
    layout: Layout,
    /// RAID level over several data disks: none, raid4 or raid5 [default: none
    /// for one disk, raid5 for several].
    #[arg(long, value_parser = parse_raid)]
    raid: Option<RaidChoice>,
    /// RAID stripe unit.
    #[arg(long, value_name = "SIZE", value_parser = size_argument, default_value = "1M")]
    stripe_unit: u64,
    /// Bypass the page cache (O_DIRECT) instead of buffered I/O with fdatasync.
    #[arg(long)]
    direct: bool,
    /// Take existing block devices (--data, --flash) that hold data — another
    /// volume's label, a partition table, a file system — all the same,
    /// overwriting it.
    #[arg(long)]
    force: bool,
    /// Print the configuration as JSON on the last line.
    #[arg(long)]
    json: bool,
}

fn parse_layout(text: &str) -> Result<Layout, String> {
    Layout::parse(text).ok_or_else(|| format!("unknown layout {text:?} (proximal, in-place or write-anywhere)"))
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

fn run_create(args: &CreateArgs) -> ExitCode {
    let spec = CreateSpec {
        data_paths: args.data_paths.clone(),
        data_disk_count: args.disk_count,
        data_disk_bytes: args.data_size,
        flash_path: args.flash_path.clone(),
        flash_bytes: args.flash_size,
        layout: args.layout,
        raid: args.raid,
        stripe_unit_bytes: args.stripe_unit,
        io_mode: if args.direct { IoMode::Direct } else { IoMode::Buffered },
        force: args.force,
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
    println!("created volume {} ({} layout, {} I/O)", directory.display(), config.layout, config.io_mode.name());
    for disk in &config.data_disks {
        println!("  data disk {} ({})", disk.path.display(), format_size(disk.size_bytes));
    }
    if config.raid != RaidChoice::None {
        println!("  {} with a {} stripe unit", config.raid.name(), format_size(config.stripe_unit_bytes));
    }
    println!("  flash {} ({})", config.flash.path.display(), format_size(config.flash.size_bytes));
    println!("next: proxima extent create {} lun0 --size 2G", directory.display());
}
