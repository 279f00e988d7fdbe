//! `proxima fsck DIR [--json]`: checks a volume's durable state (every metadata
//! block, the free-space invariants, the 010 property) and lists every finding
//! precisely, with the durable maps' layout score; exits 1 on any finding. Offline it checks the devices as they
//! are, without replaying the log; through a running server it commits a CP
//! first and checks that.

use std::process::ExitCode;

use proxima_service::Request;

use crate::service_common::{request, ReportArgs};

/// Runs `proxima fsck`.
pub fn run(args: &ReportArgs) -> ExitCode {
    let (report, _) = match request("fsck", &args.directory, &Request::Fsck) {
        Ok(outcome) => outcome,
        Err(code) => return code,
    };
    let findings = report["findings"].as_array().cloned().unwrap_or_default();
    println!(
        "fsck {}: CP generation {}, {} extent(s), {} snapshot(s), {} data blocks used, {} metadata blocks{}",
        args.directory.display(),
        report["generation"],
        report["extent_count"],
        report["snapshot_count"],
        report["data_blocks_used"],
        report["metadata_blocks"],
        if report["log_pending"].as_bool() == Some(true) { ", log to replay at next open" } else { "" }
    );
    println!(
        "  layout score {:.3} (of {} blocks after a mapped predecessor)",
        report["layout_score"].as_f64().unwrap_or(1.0),
        report["layout_score_blocks"]["scored_block_count"]
    );
    for finding in &findings {
        println!("  {}: {}", finding["kind"].as_str().unwrap_or("?"), finding["detail"].as_str().unwrap_or("?"));
    }
    for note in report["notes"].as_array().into_iter().flatten() {
        println!("  note: {}", note.as_str().unwrap_or("?"));
    }
    println!("{} finding(s)", findings.len());
    if args.json {
        println!("{report}");
    }
    if findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
