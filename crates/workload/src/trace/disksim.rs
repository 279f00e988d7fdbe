//! DiskSim's default ("ascii") trace format and its DiskSim "validate" format.
//!
//! **ascii** (DiskSim 4.0 manual, section 4.1.1): five whitespace-separated
//! values per line, `arrival_time device block_number block_count flags`.
//! The time is a non-negative float of milliseconds from the start; block
//! number and count are in the device's 512-byte blocks (the count positive);
//! flags are a hex bitfield whose bit 0 says read (1) or write (0). MQSim
//! writes the same layout with integer nanoseconds for the time
//! ([`TraceFormat::DisksimAsciiNanoseconds`](super::TraceFormat)).
//!
//! **validate**: `R|W Hit|Miss block_number block_count measured_us
//! next_interarrival_us`, replayed closed-loop at queue depth 1: a request
//! arrives `next_interarrival_us` (of the line before it) after the previous
//! one completed, and took `measured_us`. The reader turns this into absolute
//! issue times (the first request at 0) and recorded response times.

use std::collections::VecDeque;

use super::fields::{
    decimal_time_ns, field, hexadecimal, letter_operation, unsigned, FieldError, NANOS_PER_MICROSECOND,
};
use super::LineParser;
use crate::request::{Operation, TraceRequest};

/// Bytes per DiskSim device block.
pub const DISKSIM_BLOCK_BYTES: u64 = 512;

/// Bytes of `block_count` 512-byte blocks, checked.
fn blocks_to_bytes(blocks: u64, name: &'static str) -> Result<u64, FieldError> {
    blocks.checked_mul(DISKSIM_BLOCK_BYTES).ok_or_else(|| FieldError::new(name, format!("{blocks} blocks overflow")))
}

/// The ascii format, with times in `time_unit_ns` nanosecond units.
#[derive(Debug)]
pub struct DisksimAscii {
    time_unit_ns: u64,
}

impl DisksimAscii {
    /// Times in milliseconds (DiskSim) or nanoseconds (MQSim).
    pub fn new(time_unit_ns: u64) -> DisksimAscii {
        DisksimAscii { time_unit_ns }
    }
}

impl LineParser for DisksimAscii {
    fn parse_line(&mut self, line: &str, line_number: u64, out: &mut VecDeque<TraceRequest>) -> Result<(), FieldError> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() > 5 {
            return Err(FieldError::new("flags", format!("expected 5 fields, found {}", fields.len())));
        }
        let issue_ns = decimal_time_ns(field(&fields, 0, "arrival time")?, self.time_unit_ns, "arrival time")?;
        let device = unsigned(field(&fields, 1, "device number")?, "device number")?;
        let block = unsigned(field(&fields, 2, "block number")?, "block number")?;
        let block_count = unsigned(field(&fields, 3, "request size")?, "request size")?;
        if block_count == 0 {
            return Err(FieldError::new("request size", "must be positive"));
        }
        let flags = hexadecimal(field(&fields, 4, "flags")?, "flags")?;
        out.push_back(TraceRequest {
            line_number,
            issue_ns,
            device,
            operation: if flags & 1 == 1 { Operation::Read } else { Operation::Write },
            offset_bytes: blocks_to_bytes(block, "block number")?,
            length_bytes: blocks_to_bytes(block_count, "request size")?,
            response_ns: None,
        });
        Ok(())
    }
}

/// The validate format: a closed loop turned into absolute times.
#[derive(Debug, Default)]
pub struct DisksimValidate {
    /// When the next request arrives, less its inter-arrival gap.
    previous_completion_ns: u64,
    /// The gap the previous line asked for.
    gap_ns: u64,
}

impl LineParser for DisksimValidate {
    fn parse_line(&mut self, line: &str, line_number: u64, out: &mut VecDeque<TraceRequest>) -> Result<(), FieldError> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let operation = letter_operation(field(&fields, 0, "operation")?, "operation")?;
        match field(&fields, 1, "cache")? {
            "Hit" | "Miss" | "hit" | "miss" => {}
            other => return Err(FieldError::new("cache", format!("`{other}` is neither Hit nor Miss"))),
        }
        let block = unsigned(field(&fields, 2, "block number")?, "block number")?;
        let block_count = unsigned(field(&fields, 3, "block count")?, "block count")?;
        if block_count == 0 {
            return Err(FieldError::new("block count", "must be positive"));
        }
        let measured_ns = decimal_time_ns(field(&fields, 4, "measured time")?, NANOS_PER_MICROSECOND, "measured time")?;
        let gap_ns = decimal_time_ns(
            field(&fields, 5, "next inter-arrival time")?,
            NANOS_PER_MICROSECOND,
            "next inter-arrival time",
        )?;
        if fields.len() > 6 {
            return Err(FieldError::new(
                "next inter-arrival time",
                format!("expected 6 fields, found {}", fields.len()),
            ));
        }
        let issue_ns = self.previous_completion_ns.saturating_add(self.gap_ns);
        self.previous_completion_ns = issue_ns.saturating_add(measured_ns);
        self.gap_ns = gap_ns;
        out.push_back(TraceRequest {
            line_number,
            issue_ns,
            device: 0,
            operation,
            offset_bytes: blocks_to_bytes(block, "block number")?,
            length_bytes: blocks_to_bytes(block_count, "block count")?,
            response_ns: Some(measured_ns),
        });
        Ok(())
    }
}
