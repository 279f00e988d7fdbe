//! Block trace readers: one streaming reader over every supported format.
//!
//! [`TraceReader::open`] opens a file (gzip-compressed input is recognised by
//! its magic bytes and decompressed on the fly), detects the format from the
//! content unless one is given ([`detect`]), and yields one [`TraceRequest`]
//! per request as an iterator. Memory does not grow with the trace: one line
//! is held at a time (plus, for blkparse, the issue events still waiting for
//! their completion, bounded).
//!
//! Errors name the file, the line and the field (`trace.csv:17: field
//! `Offset`: ...`); after an error the iterator ends.

mod blkparse;
mod csv;
mod detect;
mod disksim;
pub mod fields;
mod fio;
pub mod write;

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use flate2::read::MultiGzDecoder;
use thiserror::Error;

pub use blkparse::PENDING_ISSUES_MAX;
pub use csv::SYSTOR_HEADER;
pub use detect::detect;
pub use fio::{FIO_VERSION_2_HEADER, FIO_VERSION_3_HEADER};

use crate::request::TraceRequest;
use fields::{FieldError, NANOS_PER_MILLISECOND};

/// The trace formats the reader knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// DiskSim's default ascii format, times in milliseconds.
    DisksimAscii,
    /// The same layout with integer nanosecond times, as MQSim writes it.
    DisksimAsciiNanoseconds,
    /// DiskSim's validate format (closed loop with measured times).
    DisksimValidate,
    /// SPC (UMass trace repository).
    Spc,
    /// MSR Cambridge CSV.
    Msr,
    /// SNIA Systor'17 CSV.
    Systor,
    /// fio I/O log, version 2 or 3.
    Fio,
    /// blkparse's default text output.
    Blkparse,
}

impl TraceFormat {
    /// Every format, in the order `--format` lists them.
    pub const ALL: [TraceFormat; 8] = [
        TraceFormat::DisksimAscii,
        TraceFormat::DisksimAsciiNanoseconds,
        TraceFormat::DisksimValidate,
        TraceFormat::Spc,
        TraceFormat::Msr,
        TraceFormat::Systor,
        TraceFormat::Fio,
        TraceFormat::Blkparse,
    ];

    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::DisksimAscii => "disksim",
            TraceFormat::DisksimAsciiNanoseconds => "disksim-ns",
            TraceFormat::DisksimValidate => "validate",
            TraceFormat::Spc => "spc",
            TraceFormat::Msr => "msr",
            TraceFormat::Systor => "systor",
            TraceFormat::Fio => "fio",
            TraceFormat::Blkparse => "blkparse",
        }
    }

    /// The format of a `--format` name.
    pub fn from_name(name: &str) -> Option<TraceFormat> {
        TraceFormat::ALL.into_iter().find(|format| format.name() == name)
    }

    /// Whether traces of this format record each request's response time.
    pub fn records_response_times(self) -> bool {
        matches!(self, TraceFormat::DisksimValidate | TraceFormat::Msr | TraceFormat::Systor | TraceFormat::Blkparse)
    }

    fn parser(self) -> Box<dyn LineParser> {
        match self {
            TraceFormat::DisksimAscii => Box::new(disksim::DisksimAscii::new(NANOS_PER_MILLISECOND)),
            TraceFormat::DisksimAsciiNanoseconds => Box::new(disksim::DisksimAscii::new(1)),
            TraceFormat::DisksimValidate => Box::<disksim::DisksimValidate>::default(),
            TraceFormat::Spc => Box::new(csv::Spc),
            TraceFormat::Msr => Box::new(csv::Msr),
            TraceFormat::Systor => Box::<csv::Systor>::default(),
            TraceFormat::Fio => Box::<fio::FioLog>::default(),
            TraceFormat::Blkparse => Box::<blkparse::Blkparse>::default(),
        }
    }
}

impl std::fmt::Display for TraceFormat {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}

/// Why a trace could not be read.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum TraceError {
    /// The file could not be opened or read (or decompressed).
    #[error("{file}: {message}")]
    Io {
        /// The file.
        file: String,
        /// The operating system's or decompressor's reason.
        message: String,
    },
    /// A line does not follow the format.
    #[error("{file}:{line}: field `{field}`: {message}")]
    Malformed {
        /// The file.
        file: String,
        /// One-based line number.
        line: u64,
        /// The field, as the format's definition names it.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// No format was given and the content matches none.
    #[error("{file}: cannot tell the trace format from the content ({message}); give --format")]
    Undetected {
        /// The file.
        file: String,
        /// What the first lines looked like.
        message: String,
    },
}

/// One format's line parser. A line may yield no request (headers, file
/// actions, unmatched events) or several (blkparse emitting issues whose
/// completion arrived).
pub(crate) trait LineParser: Send + std::fmt::Debug {
    /// Parses one non-blank line, appending the requests it completes.
    fn parse_line(&mut self, line: &str, line_number: u64, out: &mut VecDeque<TraceRequest>) -> Result<(), FieldError>;
    /// Emits whatever is still held at the end of the file.
    fn finish(&mut self, _out: &mut VecDeque<TraceRequest>) {}
}

/// Counts the bytes read from the file (before decompression), for progress.
#[derive(Debug)]
struct CountingReader<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buffer)?;
        self.count.fetch_add(read as u64, Ordering::Relaxed);
        Ok(read)
    }
}

/// Lines of the input, some of them already read for detection.
struct Lines {
    source: Box<dyn BufRead + Send>,
    sniffed: VecDeque<String>,
    buffer: Vec<u8>,
}

impl std::fmt::Debug for Lines {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Lines").field("sniffed", &self.sniffed.len()).finish_non_exhaustive()
    }
}

/// One line read from the source, before it is known to be text.
enum RawLine {
    Text(String),
    NotUtf8,
}

impl Lines {
    /// The next line without its terminator, or `None` at the end.
    fn next_line(&mut self) -> std::io::Result<Option<RawLine>> {
        if let Some(line) = self.sniffed.pop_front() {
            return Ok(Some(RawLine::Text(line)));
        }
        self.buffer.clear();
        if self.source.read_until(b'\n', &mut self.buffer)? == 0 {
            return Ok(None);
        }
        while matches!(self.buffer.last(), Some(b'\n' | b'\r')) {
            self.buffer.pop();
        }
        Ok(Some(match std::str::from_utf8(&self.buffer) {
            Ok(text) => RawLine::Text(text.to_string()),
            Err(_) => RawLine::NotUtf8,
        }))
    }
}

/// Lines read to detect the format.
const DETECTION_LINES: usize = 64;

/// A streaming reader of one trace file.
#[derive(Debug)]
pub struct TraceReader {
    file: String,
    format: TraceFormat,
    lines: Lines,
    line_number: u64,
    parser: Box<dyn LineParser>,
    ready: VecDeque<TraceRequest>,
    done: bool,
    bytes_read: Arc<AtomicU64>,
    file_size_bytes: u64,
}

impl TraceReader {
    /// Opens `path`, decompressing gzip input, in `format` or else the format
    /// detected from the first lines.
    pub fn open(path: &Path, format: Option<TraceFormat>) -> Result<TraceReader, TraceError> {
        let file_name = path.display().to_string();
        let io_error = |error: std::io::Error| TraceError::Io { file: file_name.clone(), message: error.to_string() };
        let file = File::open(path).map_err(io_error)?;
        let file_size_bytes = file.metadata().map_err(io_error)?.len();
        let bytes_read = Arc::new(AtomicU64::new(0));
        let counting = CountingReader { inner: file, count: Arc::clone(&bytes_read) };
        let mut buffered = BufReader::with_capacity(1 << 16, counting);
        let gzip = buffered.fill_buf().map_err(io_error)?.starts_with(&[0x1f, 0x8b]);
        let source: Box<dyn BufRead + Send> = if gzip {
            Box::new(BufReader::with_capacity(1 << 16, MultiGzDecoder::new(buffered)))
        } else {
            Box::new(buffered)
        };
        TraceReader::from_source(file_name, source, format, bytes_read, file_size_bytes)
    }

    /// A reader over text already in memory (tests, generated traces).
    pub fn from_text(name: &str, text: &str, format: Option<TraceFormat>) -> Result<TraceReader, TraceError> {
        let bytes = text.as_bytes().to_vec();
        let size = bytes.len() as u64;
        let source: Box<dyn BufRead + Send> = Box::new(std::io::Cursor::new(bytes));
        TraceReader::from_source(name.to_string(), source, format, Arc::new(AtomicU64::new(size)), size)
    }

    fn from_source(
        file: String,
        source: Box<dyn BufRead + Send>,
        format: Option<TraceFormat>,
        bytes_read: Arc<AtomicU64>,
        file_size_bytes: u64,
    ) -> Result<TraceReader, TraceError> {
        let mut lines = Lines { source, sniffed: VecDeque::new(), buffer: Vec::new() };
        let format = match format {
            Some(format) => format,
            None => {
                let sniffed = sniff(&mut lines, &file)?;
                let format =
                    detect(&sniffed).map_err(|message| TraceError::Undetected { file: file.clone(), message })?;
                lines.sniffed = sniffed.into();
                format
            }
        };
        Ok(TraceReader {
            file,
            format,
            lines,
            line_number: 0,
            parser: format.parser(),
            ready: VecDeque::new(),
            done: false,
            bytes_read,
            file_size_bytes,
        })
    }

    /// The format being read.
    pub fn format(&self) -> TraceFormat {
        self.format
    }

    /// The file's name, as errors give it.
    pub fn file_name(&self) -> &str {
        &self.file
    }

    /// Bytes of the file read so far (compressed bytes for gzip input).
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read.load(Ordering::Relaxed)
    }

    /// A shared counter of the bytes read so far, readable from another
    /// thread or after the reader has been moved into a pipeline.
    pub fn progress_counter(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.bytes_read)
    }

    /// The file's size in bytes (as stored, compressed or not).
    pub fn file_size_bytes(&self) -> u64 {
        self.file_size_bytes
    }

    fn malformed(&self, error: FieldError) -> TraceError {
        TraceError::Malformed {
            file: self.file.clone(),
            line: self.line_number,
            field: error.field,
            message: error.message,
        }
    }

    /// Reads lines until a request is ready or the file ends.
    fn fill(&mut self) -> Result<(), TraceError> {
        while self.ready.is_empty() && !self.done {
            let raw = self
                .lines
                .next_line()
                .map_err(|error| TraceError::Io { file: self.file.clone(), message: error.to_string() })?;
            let Some(raw) = raw else {
                self.done = true;
                self.parser.finish(&mut self.ready);
                break;
            };
            self.line_number += 1;
            let line = match raw {
                RawLine::Text(line) => line,
                RawLine::NotUtf8 => return Err(self.malformed(FieldError::new("line", "is not UTF-8 text"))),
            };
            if line.trim().is_empty() {
                continue;
            }
            if let Err(error) = self.parser.parse_line(&line, self.line_number, &mut self.ready) {
                return Err(self.malformed(error));
            }
        }
        Ok(())
    }
}

impl Iterator for TraceReader {
    type Item = Result<TraceRequest, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Err(error) = self.fill() {
            self.done = true;
            self.ready.clear();
            return Some(Err(error));
        }
        self.ready.pop_front().map(Ok)
    }
}

/// Reads up to [`DETECTION_LINES`] non-blank lines for detection.
fn sniff(lines: &mut Lines, file: &str) -> Result<Vec<String>, TraceError> {
    let mut sniffed = Vec::new();
    let mut non_blank = 0;
    while non_blank < DETECTION_LINES {
        match lines.next_line() {
            Ok(Some(RawLine::Text(line))) => {
                non_blank += usize::from(!line.trim().is_empty());
                sniffed.push(line);
            }
            Ok(Some(RawLine::NotUtf8)) => {
                return Err(TraceError::Undetected {
                    file: file.to_string(),
                    message: "the content is not text".into(),
                })
            }
            Ok(None) => break,
            Err(error) => return Err(TraceError::Io { file: file.to_string(), message: error.to_string() }),
        }
    }
    Ok(sniffed)
}
