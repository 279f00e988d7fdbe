//! One block request of a workload, as a trace records it.
//!
//! Times are integer nanoseconds on the trace's own clock (its origin is the
//! format's: the start of the trace, the Unix epoch, the Windows epoch);
//! addresses are bytes. A reader converts each format's units exactly (decimal
//! seconds or milliseconds are parsed digit by digit, never through a float),
//! so a trace written with nanosecond precision reads back bit for bit.

/// What a request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Read bytes.
    Read,
    /// Write bytes.
    Write,
    /// Discard (trim, unmap) a byte range.
    Trim,
    /// Make completed writes durable; carries no range.
    Flush,
}

impl Operation {
    /// A short lowercase name (`read`, `write`, `trim`, `flush`).
    pub fn name(self) -> &'static str {
        match self {
            Operation::Read => "read",
            Operation::Write => "write",
            Operation::Trim => "trim",
            Operation::Flush => "flush",
        }
    }

    /// Whether the request moves data (a read or a write).
    pub fn transfers_data(self) -> bool {
        matches!(self, Operation::Read | Operation::Write)
    }
}

/// One request read from a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRequest {
    /// The line of the trace the request came from (one-based; for blkparse,
    /// the line of its issue event).
    pub line_number: u64,
    /// When the request was issued, in nanoseconds on the trace's clock.
    pub issue_ns: u64,
    /// Device, ASU, LUN or disk number. Formats that name devices by text number
    /// them: fio's file names in order of first appearance, blkparse's
    /// `major,minor` as `major << 20 | minor` (Linux's `dev_t` layout).
    pub device: u64,
    /// Read, write, trim or flush.
    pub operation: Operation,
    /// First byte addressed.
    pub offset_bytes: u64,
    /// Bytes addressed (0 for a flush).
    pub length_bytes: u64,
    /// How long the request took when it was recorded, where the trace says
    /// (MSR Cambridge, SNIA Systor'17, DiskSim validate, blkparse with
    /// completion events).
    pub response_ns: Option<u64>,
}

impl TraceRequest {
    /// When the recorded request completed, if the trace says.
    pub fn completion_ns(&self) -> Option<u64> {
        self.response_ns.map(|response| self.issue_ns.saturating_add(response))
    }

    /// One past the last byte addressed.
    pub fn end_bytes(&self) -> u64 {
        self.offset_bytes.saturating_add(self.length_bytes)
    }
}
