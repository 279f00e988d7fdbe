//! blkparse's default text output (`blkparse -i TRACE`).
//!
//! Each event line is `%D %2c %8s %5T.%9t %5p %2a %3d` followed by the event's
//! payload: `major,minor cpu sequence seconds.nanoseconds pid action RWBS`,
//! then for events on a range `sector + sector_count [process or error]`. The
//! summary blkparse prints at the end (`CPU0 (8,0):`, `Total (8,0):`, ...) is
//! skipped.
//!
//! A request is an issue event (`D`: handed to the device driver, what the
//! device saw); its completion event (`C`, same device, sector and count)
//! gives its recorded response time. RWBS decides the operation: `D` discard
//! (trim), `W` write, `R` read, a leading `F` with neither a flush; events with
//! none of these (`N`) issue nothing. Sectors are 512 bytes.
//!
//! Streaming: issue events wait in a queue, in trace order, for their
//! completion; the oldest is emitted as soon as it has completed, or without a
//! response time once [`PENDING_ISSUES_MAX`] are waiting (a completion lost
//! from the trace must not hold everything back), so memory stays bounded.

use std::collections::{HashMap, VecDeque};

use super::fields::{decimal_time_ns, field, unsigned, FieldError, NANOS_PER_SECOND};
use super::LineParser;
use crate::request::{Operation, TraceRequest};

/// Issue events held while waiting for their completion.
pub const PENDING_ISSUES_MAX: usize = 65_536;
/// Bytes per sector.
const SECTOR_BYTES: u64 = 512;

/// What identifies a request's completion: device, first sector, sectors.
type RangeKey = (u64, u64, u64);

/// An issue event waiting for its completion.
#[derive(Debug)]
struct PendingIssue {
    request: TraceRequest,
    completed: bool,
}

/// The blkparse text reader.
#[derive(Debug, Default)]
pub struct Blkparse {
    /// Issue events in trace order; `first_sequence` numbers the front.
    pending: VecDeque<PendingIssue>,
    first_sequence: u64,
    /// Unmatched issue events by range, oldest first (sequence numbers).
    unmatched: HashMap<RangeKey, VecDeque<u64>>,
    /// The summary has begun: the rest of the file is not events.
    in_summary: bool,
}

/// The fields common to every event line.
struct EventHeader<'a> {
    device: u64,
    time_ns: u64,
    action: &'a str,
    rwbs: &'a str,
}

fn parse_device(text: &str) -> Result<u64, FieldError> {
    let (major, minor) =
        text.split_once(',').ok_or_else(|| FieldError::new("device", format!("`{text}` is not major,minor")))?;
    let major = unsigned(major, "device")?;
    let minor = unsigned(minor, "device")?;
    if minor >= 1 << 20 {
        return Err(FieldError::new("device", format!("minor number {minor} does not fit in 20 bits")));
    }
    Ok(major << 20 | minor)
}

fn parse_header<'a>(fields: &[&'a str]) -> Result<EventHeader<'a>, FieldError> {
    let device = parse_device(field(fields, 0, "device")?)?;
    unsigned(field(fields, 1, "cpu")?, "cpu")?;
    unsigned(field(fields, 2, "sequence")?, "sequence")?;
    let time_ns = decimal_time_ns(field(fields, 3, "time")?, NANOS_PER_SECOND, "time")?;
    unsigned(field(fields, 4, "pid")?, "pid")?;
    let action = field(fields, 5, "action")?;
    let rwbs = field(fields, 6, "RWBS")?;
    Ok(EventHeader { device, time_ns, action, rwbs })
}

/// The operation an RWBS string names, if any.
fn operation_of(rwbs: &str) -> Option<Operation> {
    if rwbs.contains('D') {
        Some(Operation::Trim)
    } else if rwbs.contains('W') {
        Some(Operation::Write)
    } else if rwbs.contains('R') {
        Some(Operation::Read)
    } else if rwbs.starts_with('F') {
        Some(Operation::Flush)
    } else {
        None
    }
}

/// `sector + count` after the header, if the event carries a range; `None`
/// for packet commands (`bytes (cdb)`) and events without a payload.
fn parse_range(fields: &[&str]) -> Result<Option<(u64, u64)>, FieldError> {
    match (fields.get(7), fields.get(8)) {
        (Some(sector), Some(&"+")) => {
            let sector = unsigned(sector, "sector")?;
            let count = unsigned(field(fields, 9, "sector count")?, "sector count")?;
            Ok(Some((sector, count)))
        }
        (None, _) => Ok(None),
        (Some(_), Some(next)) if next.starts_with('(') || next.starts_with('[') => Ok(None),
        (Some(_), None) => Ok(None),
        (Some(sector), Some(next)) => {
            Err(FieldError::new("sector", format!("expected `sector + count`, found `{sector} {next}`")))
        }
    }
}

impl Blkparse {
    fn issue(&mut self, header: &EventHeader<'_>, fields: &[&str], line_number: u64) -> Result<(), FieldError> {
        let Some(operation) = operation_of(header.rwbs) else {
            return Ok(());
        };
        let range = parse_range(fields)?;
        let (offset_bytes, length_bytes) = match (operation, range) {
            (Operation::Flush, _) => (0, 0),
            (_, Some((sector, count))) => (
                sector.checked_mul(SECTOR_BYTES).ok_or_else(|| FieldError::new("sector", "overflows"))?,
                count.checked_mul(SECTOR_BYTES).ok_or_else(|| FieldError::new("sector count", "overflows"))?,
            ),
            (_, None) => return Ok(()),
        };
        let request = TraceRequest {
            line_number,
            issue_ns: header.time_ns,
            device: header.device,
            operation,
            offset_bytes,
            length_bytes,
            response_ns: None,
        };
        let sequence = self.first_sequence + self.pending.len() as u64;
        // A flush's completion is not matched by range: it is emitted as is.
        let completed = operation == Operation::Flush;
        if let (false, Some((sector, count))) = (completed, range) {
            self.unmatched.entry((header.device, sector, count)).or_default().push_back(sequence);
        }
        self.pending.push_back(PendingIssue { request, completed });
        Ok(())
    }

    fn complete(&mut self, header: &EventHeader<'_>, fields: &[&str]) -> Result<(), FieldError> {
        let Some((sector, count)) = parse_range(fields)? else {
            return Ok(());
        };
        let key = (header.device, sector, count);
        let Some(waiting) = self.unmatched.get_mut(&key) else {
            return Ok(());
        };
        let sequence = waiting.pop_front();
        if waiting.is_empty() {
            self.unmatched.remove(&key);
        }
        if let Some(index) = sequence.and_then(|sequence| sequence.checked_sub(self.first_sequence)) {
            let pending = &mut self.pending[index as usize];
            pending.request.response_ns = Some(header.time_ns.saturating_sub(pending.request.issue_ns));
            pending.completed = true;
        }
        Ok(())
    }

    /// Emits completed issues from the front, and the oldest ones regardless
    /// once too many wait.
    fn emit_ready(&mut self, out: &mut VecDeque<TraceRequest>) {
        while let Some(front) = self.pending.front() {
            if !front.completed && self.pending.len() <= PENDING_ISSUES_MAX {
                break;
            }
            let front = self.pending.pop_front().expect("the front exists");
            if !front.completed {
                self.forget_unmatched(&front.request);
            }
            self.first_sequence += 1;
            out.push_back(front.request);
        }
    }

    /// Drops an emitted issue's entry from the unmatched index.
    fn forget_unmatched(&mut self, request: &TraceRequest) {
        let key = (request.device, request.offset_bytes / SECTOR_BYTES, request.length_bytes / SECTOR_BYTES);
        if let Some(waiting) = self.unmatched.get_mut(&key) {
            waiting.retain(|&sequence| sequence != self.first_sequence);
            if waiting.is_empty() {
                self.unmatched.remove(&key);
            }
        }
    }
}

impl LineParser for Blkparse {
    fn parse_line(&mut self, line: &str, line_number: u64, out: &mut VecDeque<TraceRequest>) -> Result<(), FieldError> {
        if self.in_summary {
            return Ok(());
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let first = fields.first().copied().unwrap_or_default();
        if !first.contains(',') && (first.starts_with("CPU") || first == "Total") {
            self.in_summary = true;
            return Ok(());
        }
        let header = parse_header(&fields)?;
        match header.action {
            "D" => self.issue(&header, &fields, line_number)?,
            "C" => self.complete(&header, &fields)?,
            _ => {}
        }
        self.emit_ready(out);
        Ok(())
    }

    fn finish(&mut self, out: &mut VecDeque<TraceRequest>) {
        out.extend(self.pending.drain(..).map(|pending| pending.request));
        self.unmatched.clear();
    }
}
