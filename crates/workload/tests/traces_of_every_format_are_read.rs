//! Every trace format is read to its definition: the samples (real traces) are
//! detected and read whole, gzip transparently; fio logs, blkparse output and
//! DiskSim validate traces written by hand read as their definitions say; a
//! malformed line in any format names the file, the line and the field.

use std::path::{Path, PathBuf};

use proxima_workload::trace::write::SystorWriter;
use proxima_workload::{Operation, TraceError, TraceFormat, TraceReader, TraceRequest};

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn read_all(path: &Path, format: Option<TraceFormat>) -> (TraceFormat, Vec<TraceRequest>) {
    let reader = TraceReader::open(path, format).unwrap_or_else(|error| panic!("{error}"));
    let format = reader.format();
    (format, reader.map(|request| request.unwrap_or_else(|error| panic!("{error}"))).collect())
}

fn reads(requests: &[TraceRequest]) -> usize {
    requests.iter().filter(|request| request.operation == Operation::Read).count()
}

fn devices(requests: &[TraceRequest]) -> usize {
    let mut devices: Vec<u64> = requests.iter().map(|request| request.device).collect();
    devices.sort_unstable();
    devices.dedup();
    devices.len()
}

#[test]
fn the_samples_are_detected_and_read_whole() {
    // (file, format, requests, reads, devices), as the samples' README counts them.
    let expected = [
        ("disksim-ascii.trace", TraceFormat::DisksimAscii, 10_000, 7_980, 14),
        ("mqsim-tpcc-small.trace", TraceFormat::DisksimAsciiNanoseconds, 6_999, 4_381, 16),
        ("msr-hm0-sample.csv", TraceFormat::Msr, 1_000, 508, 1),
        ("systor17-sample.csv.gz", TraceFormat::Systor, 999, 826, 1),
        ("tencent-cbs-sample.spc", TraceFormat::Spc, 10_000, 5_088, 743),
    ];
    for (name, format, count, read_count, device_count) in expected {
        let (detected, requests) = read_all(&sample(name), None);
        assert_eq!(detected, format, "{name}");
        assert_eq!((requests.len(), reads(&requests), devices(&requests)), (count, read_count, device_count), "{name}");
        let (_, given) = read_all(&sample(name), Some(format));
        assert_eq!(given, requests, "{name}: detection and --format read the same");
    }
}

#[test]
fn sample_fields_are_converted_to_bytes_and_nanoseconds() {
    let (_, disksim) = read_all(&sample("disksim-ascii.trace"), None);
    // `17.829285	20	576560	6	1`
    assert_eq!(
        disksim[1],
        TraceRequest {
            line_number: 2,
            issue_ns: 17_829_285,
            device: 20,
            operation: Operation::Read,
            offset_bytes: 576_560 * 512,
            length_bytes: 6 * 512,
            response_ns: None,
        }
    );
    let (_, mqsim) = read_all(&sample("mqsim-tpcc-small.trace"), None);
    // `938513000 4 264719034 16 0`
    assert_eq!((mqsim[0].issue_ns, mqsim[0].device, mqsim[0].operation), (938_513_000, 4, Operation::Write));
    let (_, msr) = read_all(&sample("msr-hm0-sample.csv"), None);
    // `128166385295514663,hm,0,Write,9056014336,2048,2833`
    assert_eq!(msr[0].issue_ns, 128_166_385_295_514_663 * 100);
    assert_eq!((msr[0].offset_bytes, msr[0].length_bytes, msr[0].response_ns), (9_056_014_336, 2048, Some(283_300)));
    let (_, systor) = read_all(&sample("systor17-sample.csv.gz"), None);
    // `1456095145.133076000,0.000806000,R,0,899056122368,131072`, the first record.
    assert_eq!(systor[0].issue_ns, 1_456_095_145_133_076_000);
    assert_eq!(systor[0].response_ns, Some(806_000));
    assert!(systor.windows(2).any(|pair| pair[1].issue_ns < pair[0].issue_ns), "the sample is not sorted by time");
    let (_, spc) = read_all(&sample("tencent-cbs-sample.spc"), None);
    // `1063,13896880,65536,r,0.000000`
    assert_eq!((spc[0].device, spc[0].offset_bytes, spc[0].length_bytes), (1063, 13_896_880 * 512, 65_536));
}

#[test]
fn gzip_is_read_transparently_whatever_the_name() {
    let directory = tempfile::tempdir().unwrap();
    let plain = directory.path().join("capture.trace");
    let mut writer = SystorWriter::new(std::fs::File::create(&plain).unwrap()).unwrap();
    let request = TraceRequest {
        line_number: 2,
        issue_ns: 5,
        device: 1,
        operation: Operation::Write,
        offset_bytes: 4096,
        length_bytes: 512,
        response_ns: Some(77),
    };
    writer.write(&request).unwrap();
    writer.finish().unwrap();
    let compressed = directory.path().join("capture.bin");
    let mut encoder = flate2::write::GzEncoder::new(std::fs::File::create(&compressed).unwrap(), Default::default());
    std::io::copy(&mut std::fs::File::open(&plain).unwrap(), &mut encoder).unwrap();
    encoder.finish().unwrap();
    assert_eq!(read_all(&compressed, None), (TraceFormat::Systor, vec![request]));
}

fn read_text(text: &str, format: Option<TraceFormat>) -> Result<Vec<TraceRequest>, TraceError> {
    TraceReader::from_text("t", text, format)?.collect()
}

#[test]
fn fio_logs_of_both_versions() {
    let version_3 = "fio version 3 iolog\n0 /dev/a add\n1 /dev/a open\n100 /dev/a write 4096 8192\n250 /dev/b read 0 512\n300 /dev/a trim 0 4096\n400 /dev/a sync 0 0\n500 /dev/a close\n";
    let requests = read_text(version_3, None).unwrap();
    let summary: Vec<(u64, u64, Operation, u64, u64)> = requests
        .iter()
        .map(|request| {
            (request.issue_ns, request.device, request.operation, request.offset_bytes, request.length_bytes)
        })
        .collect();
    assert_eq!(
        summary,
        [
            (100_000, 0, Operation::Write, 4096, 8192),
            (250_000, 1, Operation::Read, 0, 512),
            (300_000, 0, Operation::Trim, 0, 4096),
            (400_000, 0, Operation::Flush, 0, 0),
        ]
    );
    let version_2 = "fio version 2 iolog\n/dev/a add\n/dev/a read 0 4096\n/dev/a wait 50\n/dev/a read 4096 4096\n/dev/a wait 2000\n/dev/a write 0 4096\n";
    let times: Vec<u64> = read_text(version_2, None).unwrap().iter().map(|request| request.issue_ns).collect();
    assert_eq!(times, [0, 0, 2_000_000], "waits under 100 µs are discarded; later waits advance the clock");
    let error = read_text("fio version 3 iolog\n10 /dev/a wait 5 0\n", Some(TraceFormat::Fio)).unwrap_err();
    assert!(error.to_string().contains("t:2: field `action`"), "{error}");
}

#[test]
fn blkparse_issues_take_their_completion_times() {
    let text = "\
  8,0    3        1     0.000000000  4162  Q  WS 3417048 + 8 [kjournald]
  8,0    3        2     0.000010114  4162  G  WS 3417048 + 8 [kjournald]
  8,0    3        6     0.000044294  4162  D  WS 3417048 + 8 [kjournald]
  8,0    3        7     0.000050000  4162  D   R 100 + 16 [cat]
  8,0    3        0     0.000060000     0  m   N cfq4162 insert_request
  8,16   1        1     0.000070000  4162  D   D 64 + 2048 [fstrim]
  8,0    1        8     0.000341832     0  C  WS 3417048 + 8 [0]
  8,0    1        9     0.000500000     0  C   R 100 + 16 [0]
CPU0 (8,0):
 Reads Queued:           1,        8KiB\t Writes Queued:           1,        4KiB
Total (8,0):
";
    let requests = read_text(text, None).unwrap();
    assert_eq!(requests.len(), 3);
    let write = requests[0];
    assert_eq!((write.line_number, write.issue_ns, write.operation), (3, 44_294, Operation::Write));
    assert_eq!((write.offset_bytes, write.length_bytes, write.response_ns), (3_417_048 * 512, 4096, Some(297_538)));
    assert_eq!((requests[1].operation, requests[1].response_ns), (Operation::Read, Some(450_000)));
    let trim = requests[2];
    assert_eq!((trim.device, trim.operation, trim.response_ns), (8 << 20 | 16, Operation::Trim, None));
    let error = read_text("  8,0 3 1 0.1 4162 D W x + 8 [a]\n", Some(TraceFormat::Blkparse)).unwrap_err();
    assert!(error.to_string().contains("t:1: field `sector`"), "{error}");
}

#[test]
fn validate_traces_turn_a_closed_loop_into_times() {
    let text = "R Hit   31853640   8   4067.00000      9.00000\nW Miss  20114256   8   2950.50000  11099.00000\nR Hit 100 24 10 0\n";
    let requests = read_text(text, None).unwrap();
    let times: Vec<(u64, Option<u64>)> =
        requests.iter().map(|request| (request.issue_ns, request.response_ns)).collect();
    // Each arrives the previous line's gap after the previous completion.
    assert_eq!(times, [(0, Some(4_067_000)), (4_076_000, Some(2_950_500)), (18_125_500, Some(10_000))]);
    assert_eq!(requests[1].operation, Operation::Write);
}

#[test]
fn a_malformed_line_names_file_line_and_field() {
    let cases = [
        (TraceFormat::DisksimAscii, "1.0 0 8 8 1\n2.0 0 x 8 1\n", 2, "block number"),
        (TraceFormat::DisksimAscii, "1.0 0 8 0 1\n", 1, "request size"),
        (TraceFormat::DisksimAsciiNanoseconds, "100 0 8 8 1\n200 0 8 8 zz\n", 2, "flags"),
        (TraceFormat::DisksimValidate, "R Hit 1 8 100 5\nR Maybe 1 8 1 1\n", 2, "cache"),
        (TraceFormat::Spc, "0,1,512,r,0.0\n0,1,512,x,0.1\n", 2, "Opcode"),
        (TraceFormat::Msr, "1,h,0,Read,0,512,3\n2,h,0,Read,0,-512,3\n", 2, "Size"),
        (
            TraceFormat::Systor,
            "Timestamp,Response,IOType,LUN,Offset,Size\n1.0,0.1,R,0,0,512\n1.0,oops,R,0,0,512\n",
            3,
            "Response",
        ),
        (TraceFormat::Fio, "fio version 3 iolog\n5 /dev/a read 0\n", 2, "length"),
        (TraceFormat::Fio, "fio version 9 iolog\n", 1, "version"),
        (TraceFormat::Blkparse, "  8,0 3 1 0.1 4162 D W 8 + 8 [a]\n  8:0 3 1 0.1 4162 D W 8 + 8 [a]\n", 2, "device"),
    ];
    let directory = tempfile::tempdir().unwrap();
    for (index, (format, text, line, field)) in cases.into_iter().enumerate() {
        let path = directory.path().join(format!("case{index}.trace"));
        std::fs::write(&path, text).unwrap();
        let error = TraceReader::open(&path, Some(format)).unwrap().find_map(Result::err).expect("an error");
        let prefix = format!("{}:{line}: field `{field}`", path.display());
        assert!(error.to_string().starts_with(&prefix), "{format}: `{error}` does not start with `{prefix}`");
        assert!(matches!(error, TraceError::Malformed { .. }));
    }
}

#[test]
fn content_that_fits_no_format_asks_for_one() {
    let error = read_text("this is not a trace\n", None).unwrap_err();
    assert!(matches!(error, TraceError::Undetected { .. }), "{error}");
    assert!(error.to_string().contains("give --format"));
}
