//! `proxima scrub DIR [--json]`: reads every data and staged block a live
//! tree uses and checks it against its checksum; a mismatch is repaired from
//! the data device's redundancy (RAID) where there is some, and listed where
//! there is none (reads of that block then fail). Then the redundancy itself
//! is made consistent with the verified data. Exits 1 if any block stays
//! damaged. Runs offline, or through a running server while it serves.

use std::process::ExitCode;

use proxima_service::Request;

use crate::service_common::{request, ReportArgs};

/// Runs `proxima scrub`.
pub fn run(args: &ReportArgs) -> ExitCode {
    let (report, _) = match request("scrub", &args.directory, &Request::Scrub) {
        Ok(outcome) => outcome,
        Err(code) => return code,
    };
    let damaged = report["damaged_blocks"].as_array().cloned().unwrap_or_default();
    println!(
        "scrub {}: {} data and {} staged blocks checked, {} repaired, {} damaged{}",
        args.directory.display(),
        report["data_blocks_checked"],
        report["staged_blocks_checked"],
        report["repaired_blocks"],
        damaged.len(),
        if report["redundancy_resynced"].as_bool() == Some(true) { ", parity resynchronised" } else { "" }
    );
    for block in &damaged {
        println!("  damaged: {} block {}", block[0].as_str().unwrap_or("?"), block[1]);
    }
    if args.json {
        println!("{report}");
    }
    if damaged.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
