//! The comma-separated formats of the SNIA IOTTA repository.
//!
//! - **SPC** (the UMass trace repository's format, also used for the SPC-1
//!   derived traces): `ASU,LBA,Size,Opcode,Timestamp[,...]`, no header. LBA in
//!   512-byte sectors, Size in bytes, Opcode `r` or `w` (either case),
//!   Timestamp in seconds from the start of the trace. Fields after the fifth
//!   are optional and ignored.
//! - **MSR Cambridge**: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`,
//!   no header. Timestamp and ResponseTime in Windows FILETIME units (100 ns),
//!   Type `Read` or `Write`, Offset and Size in bytes.
//! - **SNIA Systor'17**: `Timestamp,Response,IOType,LUN,Offset,Size`, with that
//!   header line (optional here). Timestamp and Response in seconds, IOType `R`
//!   or `W`, Offset and Size in bytes. Records are not sorted by time: the
//!   replay sorts within a window (see `replay::order`).

use std::collections::VecDeque;

use super::fields::{comma_fields, decimal_time_ns, field, letter_operation, unsigned, FieldError, NANOS_PER_SECOND};
use super::LineParser;
use crate::request::{Operation, TraceRequest};

/// Bytes per SPC sector.
pub const SPC_SECTOR_BYTES: u64 = 512;
/// Nanoseconds per Windows FILETIME tick.
pub const FILETIME_TICK_NS: u64 = 100;

/// The SPC format.
#[derive(Debug, Default)]
pub struct Spc;

impl LineParser for Spc {
    fn parse_line(&mut self, line: &str, line_number: u64, out: &mut VecDeque<TraceRequest>) -> Result<(), FieldError> {
        let fields = comma_fields(line);
        let device = unsigned(field(&fields, 0, "ASU")?, "ASU")?;
        let sector = unsigned(field(&fields, 1, "LBA")?, "LBA")?;
        let length_bytes = unsigned(field(&fields, 2, "Size")?, "Size")?;
        let operation = letter_operation(field(&fields, 3, "Opcode")?, "Opcode")?;
        let issue_ns = decimal_time_ns(field(&fields, 4, "Timestamp")?, NANOS_PER_SECOND, "Timestamp")?;
        let offset_bytes = sector
            .checked_mul(SPC_SECTOR_BYTES)
            .ok_or_else(|| FieldError::new("LBA", format!("sector {sector} overflows")))?;
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

/// The MSR Cambridge format.
#[derive(Debug, Default)]
pub struct Msr;

/// A FILETIME count of 100 ns ticks in nanoseconds, checked.
fn filetime_ns(text: &str, name: &'static str) -> Result<u64, FieldError> {
    let ticks = unsigned(text, name)?;
    ticks.checked_mul(FILETIME_TICK_NS).ok_or_else(|| FieldError::new(name, format!("`{text}` is too large")))
}

impl LineParser for Msr {
    fn parse_line(&mut self, line: &str, line_number: u64, out: &mut VecDeque<TraceRequest>) -> Result<(), FieldError> {
        let fields = comma_fields(line);
        if fields.len() > 7 {
            return Err(FieldError::new("ResponseTime", format!("expected 7 fields, found {}", fields.len())));
        }
        let issue_ns = filetime_ns(field(&fields, 0, "Timestamp")?, "Timestamp")?;
        field(&fields, 1, "Hostname")?;
        let device = unsigned(field(&fields, 2, "DiskNumber")?, "DiskNumber")?;
        let type_text = field(&fields, 3, "Type")?;
        let operation = if type_text.eq_ignore_ascii_case("read") {
            Operation::Read
        } else if type_text.eq_ignore_ascii_case("write") {
            Operation::Write
        } else {
            return Err(FieldError::new("Type", format!("`{type_text}` is neither Read nor Write")));
        };
        let offset_bytes = unsigned(field(&fields, 4, "Offset")?, "Offset")?;
        let length_bytes = unsigned(field(&fields, 5, "Size")?, "Size")?;
        let response_ns = filetime_ns(field(&fields, 6, "ResponseTime")?, "ResponseTime")?;
        out.push_back(TraceRequest {
            line_number,
            issue_ns,
            device,
            operation,
            offset_bytes,
            length_bytes,
            response_ns: Some(response_ns),
        });
        Ok(())
    }
}

/// The header of a Systor'17 file.
pub const SYSTOR_HEADER: &str = "Timestamp,Response,IOType,LUN,Offset,Size";

/// The SNIA Systor'17 format.
#[derive(Debug, Default)]
pub struct Systor {
    seen_first_line: bool,
}

impl LineParser for Systor {
    fn parse_line(&mut self, line: &str, line_number: u64, out: &mut VecDeque<TraceRequest>) -> Result<(), FieldError> {
        let first = !self.seen_first_line;
        self.seen_first_line = true;
        let fields = comma_fields(line);
        if first && fields.first().is_some_and(|name| name.eq_ignore_ascii_case("timestamp")) {
            return Ok(());
        }
        if fields.len() > 6 {
            return Err(FieldError::new("Size", format!("expected 6 fields, found {}", fields.len())));
        }
        let issue_ns = decimal_time_ns(field(&fields, 0, "Timestamp")?, NANOS_PER_SECOND, "Timestamp")?;
        let response_ns = decimal_time_ns(field(&fields, 1, "Response")?, NANOS_PER_SECOND, "Response")?;
        let operation = letter_operation(field(&fields, 2, "IOType")?, "IOType")?;
        let device = unsigned(field(&fields, 3, "LUN")?, "LUN")?;
        let offset_bytes = unsigned(field(&fields, 4, "Offset")?, "Offset")?;
        let length_bytes = unsigned(field(&fields, 5, "Size")?, "Size")?;
        out.push_back(TraceRequest {
            line_number,
            issue_ns,
            device,
            operation,
            offset_bytes,
            length_bytes,
            response_ns: Some(response_ns),
        });
        Ok(())
    }
}
