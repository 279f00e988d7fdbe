//! Format detection from a trace's first lines.
//!
//! Each format is tried on the first non-blank lines (up to 64); the one whose
//! parser accepts the longest run of them from the first wins (the earliest in
//! the list below on a tie), so a malformed line among the first ones is
//! reported by the reader, at its line, rather than defeating detection. The
//! formats' shapes exclude one another (a fio
//! version line; Systor's header or its decimal seconds with `R`/`W`; MSR's
//! seven fields with `Read`/`Write`; SPC's integer ASU and sector with
//! `r`/`w`; validate's `R|W Hit|Miss`; blkparse's `major,minor`; DiskSim's
//! five numbers), except DiskSim ascii in milliseconds and MQSim's variant in
//! nanoseconds, which share a layout: times that are all integers and reach
//! [`NANOSECOND_TIMES_FROM`] within those lines are taken for nanoseconds
//! (DiskSim writes fractional milliseconds, and a millisecond trace whose first
//! lines span more than a quarter of an hour is implausible). Give `--format`
//! when in doubt.

use std::collections::VecDeque;

use super::TraceFormat;

/// Integer times at least this large among the first lines mean nanoseconds.
pub const NANOSECOND_TIMES_FROM: u64 = 1_000_000;

/// The order in which formats are tried; DiskSim ascii stands for both units.
const CANDIDATES: [TraceFormat; 7] = [
    TraceFormat::Fio,
    TraceFormat::Systor,
    TraceFormat::Msr,
    TraceFormat::Spc,
    TraceFormat::DisksimValidate,
    TraceFormat::Blkparse,
    TraceFormat::DisksimAscii,
];

/// The format of a trace whose first lines are `lines`, or why none fits.
pub fn detect(lines: &[String]) -> Result<TraceFormat, String> {
    let non_blank: Vec<&str> = lines.iter().map(String::as_str).filter(|line| !line.trim().is_empty()).collect();
    let Some(first) = non_blank.first() else {
        return Err("the file is empty".into());
    };
    let mut best: Option<(TraceFormat, usize)> = None;
    for format in CANDIDATES {
        let accepted = accepted_prefix(format, &non_blank);
        if accepted > best.map_or(0, |(_, count)| count) {
            best = Some((format, accepted));
        }
    }
    match best {
        Some((TraceFormat::DisksimAscii, accepted)) => Ok(disksim_unit(&non_blank[..accepted])),
        Some((format, _)) => Ok(format),
        None => {
            let shown: String = first.chars().take(80).collect();
            Err(format!("first line `{shown}` matches no known format"))
        }
    }
}

/// How many lines from the first `format`'s parser accepts.
fn accepted_prefix(format: TraceFormat, lines: &[&str]) -> usize {
    let mut parser = format.parser();
    let mut out = VecDeque::new();
    lines
        .iter()
        .enumerate()
        .take_while(|(index, line)| parser.parse_line(line, *index as u64 + 1, &mut out).is_ok())
        .count()
}

/// Milliseconds or nanoseconds for a DiskSim ascii trace.
fn disksim_unit(lines: &[&str]) -> TraceFormat {
    let times: Vec<&str> = lines.iter().filter_map(|line| line.split_whitespace().next()).collect();
    let all_integers = times.iter().all(|time| time.bytes().all(|byte| byte.is_ascii_digit()));
    let largest = times.iter().filter_map(|time| time.parse::<u64>().ok()).max().unwrap_or(0);
    if all_integers && largest >= NANOSECOND_TIMES_FROM {
        TraceFormat::DisksimAsciiNanoseconds
    } else {
        TraceFormat::DisksimAscii
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect_text(text: &str) -> Result<TraceFormat, String> {
        detect(&text.lines().map(str::to_string).collect::<Vec<_>>())
    }

    #[test]
    fn each_format_is_recognised_by_its_shape() {
        let cases = [
            ("13.191135\t30\t0\t5\t1\n17.8\t20\t576560\t6\t1\n", TraceFormat::DisksimAscii),
            ("0 1 2 8 0\n5 1 10 8 1\n", TraceFormat::DisksimAscii),
            ("938513000 4 264719034 16 0\n938828000 3 197570570 16 0\n", TraceFormat::DisksimAsciiNanoseconds),
            ("R Hit   31853640   8   4067.00000      9.00000\n", TraceFormat::DisksimValidate),
            ("1063,13896880,65536,r,0.000000\n1063,49413280,8192,W,0.1\n", TraceFormat::Spc),
            ("128166385295514663,hm,0,Write,9056014336,2048,2833\n", TraceFormat::Msr),
            ("Timestamp,Response,IOType,LUN,Offset,Size\n1456095145.133076000,0.000806000,R,0,899056122368,131072\n", TraceFormat::Systor),
            ("1456095145.133076000,0.000806000,R,0,899056122368,131072\n", TraceFormat::Systor),
            ("fio version 3 iolog\n0 /dev/sda add\n10 /dev/sda read 0 4096\n", TraceFormat::Fio),
            ("fio version 2 iolog\n/dev/sda add\n/dev/sda write 0 4096\n", TraceFormat::Fio),
            (
                "  8,0    3        1     0.000000000  4162  Q  WS 3417048 + 8 [kjournald]\n  8,0    1        1     0.000341832     0  C   W 3417048 + 8 [0]\n",
                TraceFormat::Blkparse,
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(detect_text(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn a_malformed_line_does_not_defeat_detection() {
        assert_eq!(detect_text("1,hm,0,Read,0,512,3\n2,hm,0,Raed,0,512,3\n"), Ok(TraceFormat::Msr));
    }

    #[test]
    fn unknown_content_is_refused() {
        assert!(detect_text("hello world\n").unwrap_err().contains("hello world"));
        assert!(detect_text("\n\n").is_err());
    }
}
