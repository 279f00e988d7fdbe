//! fio's I/O logs (`write_iolog`, `read_iolog`), versions 2 and 3.
//!
//! The first line is `fio version 2 iolog` or `fio version 3 iolog`. Then one
//! action per line:
//!
//! - version 3: `timestamp filename action [offset length]`, the timestamp in
//!   microseconds from the start of the run;
//! - version 2: `filename action [offset length]`, with no times: requests are
//!   issued back to back, and `filename wait MICROSECONDS` advances the clock
//!   (relative to the previous wait; waits under 100 µs are discarded, as
//!   fio's documentation says). Version 3 does not allow `wait`.
//!
//! Actions: `read`, `write`, `trim` (a byte range), `sync` and `datasync`
//! (flushes; their offset and length, if present, are ignored), and the file
//! actions `add`, `open`, `close`, which issue no request. Each file name is a
//! device, numbered in order of first appearance.

use std::collections::{HashMap, VecDeque};

use super::fields::{field, unsigned, FieldError, NANOS_PER_MICROSECOND};
use super::LineParser;
use crate::request::{Operation, TraceRequest};

/// The version line of a version 2 log.
pub const FIO_VERSION_2_HEADER: &str = "fio version 2 iolog";
/// The version line of a version 3 log.
pub const FIO_VERSION_3_HEADER: &str = "fio version 3 iolog";
/// Version 2 waits shorter than this are discarded.
const WAIT_DISCARDED_BELOW_US: u64 = 100;

/// A fio I/O log of either version.
#[derive(Debug, Default)]
pub struct FioLog {
    /// 2 or 3, once the version line has been read.
    version: Option<u8>,
    devices: HashMap<String, u64>,
    /// Version 2's clock, advanced by `wait`.
    clock_ns: u64,
}

impl FioLog {
    fn device(&mut self, file_name: &str) -> u64 {
        let next = self.devices.len() as u64;
        *self.devices.entry(file_name.to_string()).or_insert(next)
    }

    fn parse_header(&mut self, line: &str) -> Result<(), FieldError> {
        let trimmed = line.trim();
        self.version = if trimmed.starts_with(FIO_VERSION_3_HEADER) {
            Some(3)
        } else if trimmed.starts_with(FIO_VERSION_2_HEADER) {
            Some(2)
        } else {
            return Err(FieldError::new(
                "version",
                format!("expected `{FIO_VERSION_2_HEADER}` or `{FIO_VERSION_3_HEADER}`, found `{trimmed}`"),
            ));
        };
        Ok(())
    }
}

impl LineParser for FioLog {
    fn parse_line(&mut self, line: &str, line_number: u64, out: &mut VecDeque<TraceRequest>) -> Result<(), FieldError> {
        let Some(version) = self.version else {
            return self.parse_header(line);
        };
        let all: Vec<&str> = line.split_whitespace().collect();
        let (issue_ns, fields) = if version == 3 {
            let microseconds = unsigned(field(&all, 0, "timestamp")?, "timestamp")?;
            let issue_ns = microseconds
                .checked_mul(NANOS_PER_MICROSECOND)
                .ok_or_else(|| FieldError::new("timestamp", format!("{microseconds} µs is too large")))?;
            (issue_ns, &all[1..])
        } else {
            (self.clock_ns, &all[..])
        };
        let file_name = field(fields, 0, "filename")?;
        let action = field(fields, 1, "action")?;
        let device = self.device(file_name);
        let operation = match action {
            "add" | "open" | "close" => return expect_field_count(fields, 2, "action"),
            "wait" if version == 2 => {
                let microseconds = unsigned(field(fields, 2, "offset")?, "offset")?;
                if microseconds >= WAIT_DISCARDED_BELOW_US {
                    self.clock_ns = self.clock_ns.saturating_add(microseconds.saturating_mul(NANOS_PER_MICROSECOND));
                }
                return Ok(());
            }
            "wait" => return Err(FieldError::new("action", "`wait` is not allowed in a version 3 log")),
            "read" => Operation::Read,
            "write" => Operation::Write,
            "trim" => Operation::Trim,
            "sync" | "datasync" => Operation::Flush,
            other => return Err(FieldError::new("action", format!("unknown action `{other}`"))),
        };
        let (offset_bytes, length_bytes) = if operation == Operation::Flush && fields.len() == 2 {
            (0, 0)
        } else {
            expect_field_count(fields, 4, "length")?;
            let offset = unsigned(field(fields, 2, "offset")?, "offset")?;
            let length = unsigned(field(fields, 3, "length")?, "length")?;
            if operation == Operation::Flush {
                (0, 0)
            } else {
                (offset, length)
            }
        };
        out.push_back(TraceRequest {
            line_number,
            issue_ns,
            device,
            operation,
            offset_bytes,
            length_bytes,
            response_ns: None,
        });
        Ok(())
    }
}

/// An error unless the action has exactly `count` fields (after the timestamp).
fn expect_field_count(fields: &[&str], count: usize, name: &'static str) -> Result<(), FieldError> {
    if fields.len() == count {
        Ok(())
    } else {
        Err(FieldError::new(name, format!("expected {count} fields after the timestamp, found {}", fields.len())))
    }
}
