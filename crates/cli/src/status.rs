//! `proxima status DIR [--json]`: capacity, use, space held by snapshots,
//! staging fill, CP and destage counts, the fragmentation figure, the
//! layout score, and the delete log's waiting blocks and reclaim rate (defined in `proxima_service::status`). Through a running server when one holds the
//! volume, so the counts are the live process's.

use std::process::ExitCode;

use proxima_service::{format_size, Request, Venue};
use serde_json::Value;

use crate::service_common::{request, ReportArgs};
use proxima_service::devices::BLOCK_BYTES;

/// Runs `proxima status`.
pub fn run(args: &ReportArgs) -> ExitCode {
    let (report, venue) = match request("status", &args.directory, &Request::Status) {
        Ok(outcome) => outcome,
        Err(code) => return code,
    };
    print_report(&args.directory, &report, venue);
    if args.json {
        println!("{report}");
    }
    ExitCode::SUCCESS
}

fn bytes(report: &Value, key: &str) -> String {
    format_size(report[key].as_u64().unwrap_or(0))
}

fn print_report(directory: &std::path::Path, report: &Value, venue: Venue) {
    let served = if venue == Venue::Server { " (served)" } else { "" };
    println!(
        "volume {}{served}: {} layout, {} data disk(s), RAID {}, {} I/O",
        directory.display(),
        report["layout"].as_str().unwrap_or("?"),
        report["data_disk_count"],
        report["raid"].as_str().unwrap_or("?"),
        report["io_mode"].as_str().unwrap_or("?")
    );
    println!("  capacity            {}", bytes(report, "capacity_bytes"));
    println!("  committed           {} (the extents' sizes)", bytes(report, "committed_bytes"));
    // Staged blocks live on flash until a destage moves them: a volume
    // written in small pieces may hold most of its data there.
    let staged_bytes = report["staging"]["used_blocks"].as_u64().unwrap_or(0) * BLOCK_BYTES;
    println!(
        "  used                {} on the data disks, {} staged on flash",
        bytes(report, "used_bytes"),
        format_size(staged_bytes)
    );
    println!(
        "  held by snapshots   {} ({} of it copied out of frames)",
        bytes(report, "held_by_snapshots_bytes"),
        bytes(report, "copied_out_bytes")
    );
    println!("  shared by clones    {}", bytes(report, "shared_bytes"));
    println!(
        "  free                {} ({} of it reserved for extents' first writes)",
        bytes(report, "free_bytes"),
        bytes(report, "reserved_bytes")
    );
    println!(
        "  flash used          {} of {}",
        bytes(report, "flash_used_bytes"),
        bytes(report, "flash_capacity_bytes")
    );
    let staging = &report["staging"];
    println!(
        "  staging             {} of {} blocks ({:.1} %)",
        staging["used_blocks"],
        staging["capacity_blocks"],
        staging["fill_fraction"].as_f64().unwrap_or(0.0) * 100.0
    );
    println!(
        "  CPs                 generation {}, {} since open",
        report["checkpoint_generation"], report["checkpoints_since_open"]
    );
    println!(
        "  destages            {} since open ({} blocks{})",
        report["destages_since_open"],
        report["destaged_blocks_since_open"],
        [
            ("destaged_from_memory_blocks_since_open", "from memory"),
            ("retained_hot_blocks_since_open", "hot blocks left staged"),
            ("destaged_home_blocks_since_open", "back at their frame homes"),
        ]
        .iter()
        .filter_map(|&(key, what)| report[key]
            .as_u64()
            .filter(|&blocks| blocks > 0)
            .map(|blocks| format!("; {blocks} {what}")))
        .collect::<String>()
    );
    println!(
        "  fragmentation       {:.4} (mean run {:.1} blocks)",
        report["fragmentation"].as_f64().unwrap_or(0.0),
        report["mean_run_blocks"].as_f64().unwrap_or(0.0)
    );
    println!(
        "  layout score        {:.4} (blocks directly after their logical predecessor)",
        report["layout_score"].as_f64().unwrap_or(0.0)
    );
    println!(
        "  delete log          {}: {} blocks waiting, {} given back in the last CP",
        report["delete_log"].as_str().unwrap_or("?"),
        report["delete_log_blocks"],
        report["reclaimed_blocks_last_checkpoint"]
    );
    if report["copy_out"].as_bool() == Some(true) {
        println!("  copy-out            on: destage copies what snapshots read out beside its place, then takes it");
    }
    if report["read_realloc"].as_bool() == Some(true) {
        println!(
            "  read reallocation   on: {} rewritten since open ({} found no contiguous room)",
            bytes(report, "reallocated_bytes_since_open"),
            bytes(report, "reallocation_skipped_bytes_since_open")
        );
    }
    let extents = report["extents"].as_array().map_or(0, Vec::len);
    let snapshots = report["snapshots"].as_array().map_or(0, Vec::len);
    println!("  extents {extents}, snapshots {snapshots}, deletions pending {}", report["pending_deletions"]);
}
