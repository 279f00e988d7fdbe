//! Trace writers: generated workloads and replay captures, in formats the
//! readers take back exactly.
//!
//! - [`DisksimAsciiWriter`]: DiskSim ascii with millisecond times printed to
//!   the nanosecond (six decimals), for generated open-loop traces.
//! - [`SystorWriter`]: SNIA Systor'17 CSV with seconds printed to the
//!   nanosecond (nine decimals), so a capture's issue and response times read
//!   back bit for bit: the format the simulated captures use.

use std::io::{self, Write};

use super::fields::{NANOS_PER_MILLISECOND, NANOS_PER_SECOND};
use super::SYSTOR_HEADER;
use crate::request::{Operation, TraceRequest};

/// Formats `nanos` as a decimal number of `unit_ns` units with exactly enough
/// digits for the nanosecond.
fn decimal(nanos: u64, unit_ns: u64) -> String {
    let digits = unit_ns.ilog10() as usize;
    format!("{}.{:0digits$}", nanos / unit_ns, nanos % unit_ns)
}

/// Writes DiskSim ascii lines: `time_ms device block count flags`.
#[derive(Debug)]
pub struct DisksimAsciiWriter<W: Write> {
    out: W,
}

impl<W: Write> DisksimAsciiWriter<W> {
    /// A writer on `out`.
    pub fn new(out: W) -> Self {
        DisksimAsciiWriter { out }
    }

    /// Writes one read or write. Offsets and lengths must be whole 512-byte
    /// blocks, and the length positive.
    ///
    /// # Panics
    /// On a trim or flush, or a range that is not whole blocks: DiskSim's
    /// format cannot say them.
    pub fn write(&mut self, request: &TraceRequest) -> io::Result<()> {
        assert!(request.operation.transfers_data(), "DiskSim ascii has only reads and writes");
        assert!(
            request.offset_bytes.is_multiple_of(512)
                && request.length_bytes.is_multiple_of(512)
                && request.length_bytes > 0,
            "DiskSim ascii addresses whole 512-byte blocks"
        );
        let flags = u8::from(request.operation == Operation::Read);
        writeln!(
            self.out,
            "{} {} {} {} {flags}",
            decimal(request.issue_ns, NANOS_PER_MILLISECOND),
            request.device,
            request.offset_bytes / 512,
            request.length_bytes / 512
        )
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Writes Systor'17 CSV: `Timestamp,Response,IOType,LUN,Offset,Size`.
#[derive(Debug)]
pub struct SystorWriter<W: Write> {
    out: W,
}

impl<W: Write> SystorWriter<W> {
    /// A writer on `out`; writes the header line.
    pub fn new(mut out: W) -> io::Result<Self> {
        writeln!(out, "{SYSTOR_HEADER}")?;
        Ok(SystorWriter { out })
    }

    /// Writes one read or write with its response time.
    ///
    /// # Panics
    /// On a trim or flush, or a request without a response time: the format
    /// cannot say them.
    pub fn write(&mut self, request: &TraceRequest) -> io::Result<()> {
        let kind = match request.operation {
            Operation::Read => 'R',
            Operation::Write => 'W',
            other => panic!("Systor'17 has only reads and writes, not {}", other.name()),
        };
        let response = request.response_ns.expect("a capture records response times");
        writeln!(
            self.out,
            "{},{},{kind},{},{},{}",
            decimal(request.issue_ns, NANOS_PER_SECOND),
            decimal(response, NANOS_PER_SECOND),
            request.device,
            request.offset_bytes,
            request.length_bytes
        )
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{TraceFormat, TraceReader};

    fn request(issue_ns: u64, operation: Operation, response_ns: Option<u64>) -> TraceRequest {
        TraceRequest {
            line_number: 0,
            issue_ns,
            device: 3,
            operation,
            offset_bytes: 4096,
            length_bytes: 8192,
            response_ns,
        }
    }

    #[test]
    fn systor_captures_read_back_exactly() {
        let written = [request(0, Operation::Read, Some(1)), request(1_234_567_891, Operation::Write, Some(7_000_001))];
        let mut writer = SystorWriter::new(Vec::new()).unwrap();
        written.iter().for_each(|request| writer.write(request).unwrap());
        let text = String::from_utf8(writer.finish().unwrap()).unwrap();
        let read: Vec<TraceRequest> =
            TraceReader::from_text("capture", &text, None).unwrap().map(Result::unwrap).collect();
        assert_eq!(read.len(), 2);
        for (read, written) in read.iter().zip(&written) {
            assert_eq!(TraceRequest { line_number: 0, ..*read }, *written);
        }
    }

    #[test]
    fn disksim_traces_read_back_exactly() {
        let written = [request(5, Operation::Read, None), request(3_000_000_007, Operation::Write, None)];
        let mut writer = DisksimAsciiWriter::new(Vec::new());
        written.iter().for_each(|request| writer.write(request).unwrap());
        let text = String::from_utf8(writer.finish().unwrap()).unwrap();
        let reader = TraceReader::from_text("generated", &text, None).unwrap();
        assert_eq!(reader.format(), TraceFormat::DisksimAscii);
        let read: Vec<TraceRequest> = reader.map(Result::unwrap).collect();
        for (read, written) in read.iter().zip(&written) {
            assert_eq!(TraceRequest { line_number: 0, ..*read }, *written);
        }
    }
}
