//! Each trace reader on hand-written fixtures with known requests (headers,
//! blank lines, huge sizes, zero lengths, a missing final newline; every
//! fixture is also read with CRLF line endings and a byte order mark), the
//! public traces in `tests/data/traces/`, compression, auto-detection, and bad
//! input.

mod support;

use nandlab::workload::trace::{
    BlkparseEvents, ReaderOptions, TimeUnit, TraceError, TraceFormat, TraceReader, TraceRequest,
};
use nandlab::workload::HostOp::{self, Flush, Read, Trim, Write};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/traces").join(name)
}

use support::public_trace as shared;

fn read_all(path: &Path, o: &ReaderOptions) -> (Vec<TraceRequest>, TraceReader) {
    let mut r = TraceReader::open(path, o).unwrap_or_else(|e| panic!("{e}"));
    let mut v = Vec::new();
    while let Some(req) = r.next_request().unwrap_or_else(|e| panic!("{e}")) {
        v.push(req);
    }
    (v, r)
}

fn fixed(f: TraceFormat) -> ReaderOptions {
    ReaderOptions::for_format(f)
}

/// (op, offset_bytes, size_bytes, time_ns, device, line)
type Row = (HostOp, u64, u64, u64, u32, u64);

fn rows(v: &[TraceRequest]) -> Vec<Row> {
    v.iter().map(|r| (r.op, r.offset_bytes, r.size_bytes, r.time_ns, r.device, r.line)).collect()
}

/// `text` with CRLF line endings (LF and CRLF alike become CRLF) and a
/// UTF-8 byte order mark in front.
fn windows_style(text: &[u8]) -> Vec<u8> {
    let text = text.strip_prefix(b"\xef\xbb\xbf").unwrap_or(text);
    let mut out = b"\xef\xbb\xbf".to_vec();
    for (i, &c) in text.iter().enumerate() {
        if c == b'\n' && (i == 0 || text[i - 1] != b'\r') {
            out.push(b'\r');
        }
        out.push(c);
    }
    out
}

/// Read the fixture with `o`, check it gives `want`, then check that its
/// CRLF + BOM form gives the same requests and counts, with `o` and sniffed.
fn check_fixture(name: &str, o: &ReaderOptions, want: &[Row]) -> TraceReader {
    let (v, r) = read_all(&fixture(name), o);
    assert_eq!(rows(&v), want, "{name}");
    let crlf = windows_style(&std::fs::read(fixture(name)).unwrap());
    assert!(crlf.windows(2).any(|w| w == b"\r\n"));
    for options in [o.clone(), ReaderOptions { format: None, ..o.clone() }] {
        let mut w = TraceReader::from_bytes(name, crlf.clone(), &options).unwrap_or_else(|e| panic!("{e}"));
        let mut got = Vec::new();
        while let Some(x) = w.next_request().unwrap_or_else(|e| panic!("{name} with CRLF and BOM: {e}")) {
            got.push(x);
        }
        assert_eq!(rows(&got), want, "{name} with CRLF and BOM");
        assert_eq!(w.counts(), r.counts(), "{name} with CRLF and BOM");
        assert_eq!(w.format(), r.format(), "{name} with CRLF and BOM");
    }
    r
}

#[test]
fn msr_fixture_with_bom_header_crlf_blank_line_and_huge_request() {
    let r = check_fixture(
        "msr.csv",
        &fixed(TraceFormat::Msr),
        &[
            (Read, 3154152960, 32768, 12816637200306162900, 1, 2),
            (Write, 3154152960, 4096, 12816637201638215500, 1, 4),
            (Write, 0, 0, 12816637202638224500, 0, 5),
            (Read, 1 << 40, 1 << 30, 12816637203638224500, 0, 6),
        ],
    );
    assert_eq!(r.counts().lines, 6);
    assert_eq!(r.counts().ignored_lines, 2, "header (after the BOM) and blank line");
}

#[test]
fn mqsim_fixture_with_header_and_no_final_newline() {
    let r = check_fixture(
        "mqsim.trace",
        &fixed(TraceFormat::Mqsim),
        &[
            (Write, 264719034 * 512, 8192, 938513000, 4, 3),
            (Read, 197570570 * 512, 8192, 938828000, 3, 4),
            (Read, 93230992 * 512, 0, 938944000, 13, 6),
            (Write, 0, 1 << 41, 18446744073709551, 0, 7),
            (Write, 238240490 * 512, 8192, 939044000, 6, 8),
        ],
    );
    assert_eq!(r.counts().ignored_lines, 3, "comment, header and blank line");
}

#[test]
fn disksim_fixture_reads_milliseconds_and_flag_bit_zero() {
    let r = check_fixture(
        "disksim.trace",
        &fixed(TraceFormat::Disksim),
        &[
            (Read, 0, 5 * 512, 13_191_135, 30, 2),
            (Write, 576560 * 512, 6 * 512, 17_829_285, 20, 3),
            (Read, 0, 24 * 512, 24_314_779, 17, 5),
            (Write, 28601 * 512, 12 * 512, 25_911_729, 18, 6),
            (Read, 10 * 512, 0, 500_000, 1, 7),
            (Write, 1 << 50, 1 << 40, 30_000_001, 2, 8),
        ],
    );
    assert_eq!(r.counts().ignored_lines, 2, "header and blank line");
}

#[test]
fn ascii_time_unit_and_convention_are_options() {
    let o = ReaderOptions {
        time_unit: Some(TimeUnit::Us),
        ascii_rw: Some(nandlab::workload::trace::AsciiRw::Mqsim),
        ..fixed(TraceFormat::Disksim)
    };
    let text = b"1.5 0 8 8 0\n2 0 16 8 1\n".to_vec();
    let mut r = TraceReader::from_bytes("t", text, &o).unwrap();
    let a = r.next_request().unwrap().unwrap();
    let b = r.next_request().unwrap().unwrap();
    assert_eq!((a.op, a.time_ns), (Write, 1_500));
    assert_eq!((b.op, b.time_ns), (Read, 2_000));
    // The DiskSim flags 3 is not an MQSim type.
    let mut r = TraceReader::from_bytes("t", b"1 0 8 8 3\n".to_vec(), &o).unwrap();
    let e = r.next_request().unwrap_err().to_string();
    assert!(e.contains("t:1: field `type`: expected 0 (write) or 1 (read)"), "{e}");
}

#[test]
fn spc_fixture_with_header_spaces_and_extra_fields() {
    let r = check_fixture(
        "spc.csv",
        &fixed(TraceFormat::Spc),
        &[
            (Write, 303567 * 512, 3584, 0, 0, 2),
            (Read, 55590 * 512, 3072, 26_214_000, 1, 3),
            (Read, 55596 * 512, 3072, 78_643_000, 1, 4),
            (Write, 0, 0, 1_500_000_000, 0, 6),
            (Write, 1 << 40, 1 << 30, 3_600_000_000_001, 2, 7),
        ],
    );
    assert_eq!(r.counts().ignored_lines, 2, "header and blank line");
}

#[test]
fn fio_v2_fixture_numbers_files_and_accumulates_waits() {
    let r = check_fixture(
        "fio_v2.log",
        &fixed(TraceFormat::Fio),
        &[
            (Write, 0, 4096, 0, 0, 4),
            (Read, 4096, 8192, 1_500_000, 0, 7),
            (Trim, 1 << 20, 65536, 1_500_000, 1, 10),
            (Flush, 0, 0, 1_500_000, 0, 11),
            (Flush, 0, 0, 1_500_000, 0, 12),
            (Write, 0, 0, 1_500_000, 0, 13),
            (Write, 1 << 62, 1 << 61, 1_500_000, 0, 14),
        ],
    );
    assert_eq!(r.counts().ignored_lines, 9, "header, add/open/close, wait, blank line");
}

#[test]
fn fio_v3_fixture_reads_microsecond_timestamps() {
    let r = check_fixture(
        "fio_v3.log",
        &fixed(TraceFormat::Fio),
        &[
            (Write, 0, 16384, 878_000, 0, 4),
            (Read, 16384, 16384, 888_000, 0, 5),
            (Flush, 0, 0, 891_000, 0, 7),
            (Read, 4096, 0, 895_000, 0, 8),
            (Trim, 1 << 34, 1 << 32, 10_001_677_000, 0, 9),
        ],
    );
    assert_eq!(r.counts().ignored_lines, 5, "header, add, open, blank line, close");
}

#[test]
fn blkparse_fixture_completed_events_map_rwbs() {
    let sdb = 8 << 20 | 16;
    let sdc = 8 << 20 | 32;
    let r = check_fixture(
        "blkparse.txt",
        &fixed(TraceFormat::Blkparse),
        &[
            (Read, 1444645666 * 512, 256 * 512, 356_669, sdb, 9),
            (Flush, 0, 0, 100_500_000, sdb, 12),
            (Write, 2048 * 512, 4096, 100_500_000, sdb, 12),
            (Flush, 0, 0, 100_500_000, sdb, 12),
            (Flush, 0, 0, 200_100_000, sdb, 14),
            (Trim, 4096 * 512, 2048 * 512, 300_200_000, sdb, 16),
            (Write, 8192 * 512, 16 * 512, 400_300_000, sdc, 18),
            (Write, 1950885322 * 512, 0, 3_832_956_675, sdb, 19),
            (Write, 1 << 63, 4294967295 * 512, 3_900_000_000, sdb, 20),
        ],
    );
    assert_eq!(r.counts().lines, 29, "the summary is read and ignored");
}

#[test]
fn blkparse_queued_and_issued_events_are_selectable() {
    let count = |e| {
        let o = ReaderOptions { blkparse_events: Some(e), ..fixed(TraceFormat::Blkparse) };
        read_all(&fixture("blkparse.txt"), &o).0.len()
    };
    assert_eq!(count(BlkparseEvents::Queued), 7);
    assert_eq!(count(BlkparseEvents::Issued), 4);
    assert_eq!(count(BlkparseEvents::Completed), 9);
}

#[test]
fn auto_detects_every_fixture_and_says_why() {
    for (file, want) in [
        ("msr.csv", TraceFormat::Msr),
        ("mqsim.trace", TraceFormat::Mqsim),
        ("disksim.trace", TraceFormat::Disksim),
        ("spc.csv", TraceFormat::Spc),
        ("fio_v2.log", TraceFormat::Fio),
        ("fio_v3.log", TraceFormat::Fio),
        ("blkparse.txt", TraceFormat::Blkparse),
    ] {
        let r = TraceReader::open(&fixture(file), &ReaderOptions::default()).unwrap();
        assert_eq!(r.format(), want, "{file}");
        assert!(r.chosen_because().is_some_and(|w| !w.is_empty()));
        assert!(r.describe().contains("auto"));
    }
}

#[test]
fn auto_detection_reports_a_bad_line_after_a_header_instead_of_giving_up() {
    let text = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n\
                128166372003061629,hm,1,Read,0,4096,1\n\
                128166372003061630,hm,1,Erase,0,4096,1\n\
                128166372003061631,hm,1,Write,4096,4096,1\n";
    let mut r = TraceReader::from_bytes("h.csv", text.as_bytes().to_vec(), &ReaderOptions::default()).unwrap();
    assert_eq!(r.format(), TraceFormat::Msr);
    assert!(r.next_request().unwrap().is_some());
    let e = r.next_request().unwrap_err().to_string();
    assert_eq!(e, "h.csv:3: field `Type`: expected Read or Write; found `Erase`");
    let o = ReaderOptions { skip_bad_lines: true, ..ReaderOptions::default() };
    let mut r = TraceReader::from_bytes("h.csv", text.as_bytes().to_vec(), &o).unwrap();
    let mut n = 0;
    while r.next_request().unwrap().is_some() {
        n += 1;
    }
    assert_eq!((n, r.counts().skipped_bad_lines, r.counts().ignored_lines), (2, 1, 1));
}

#[test]
fn one_bad_type_in_an_mqsim_trace_is_a_bad_line_not_a_switch_to_disksim() {
    let mut text = String::new();
    for i in 0..40u64 {
        let ty = if i == 17 { 2 } else { i % 2 };
        text += &format!("{} 0 {} 8 {ty}\n", 1000 * i, 8 * i);
    }
    let mut r = TraceReader::from_bytes("m.trace", text.into_bytes(), &ReaderOptions::default()).unwrap();
    assert_eq!(r.format(), TraceFormat::Mqsim, "{:?}", r.chosen_because());
    let first = r.next_request().unwrap().unwrap();
    assert_eq!(first.time_ns, 0, "nanoseconds, not milliseconds");
    let e = loop {
        match r.next_request() {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("no error"),
            Err(e) => break e.to_string(),
        }
    };
    assert_eq!(e, "m.trace:18: field `type`: expected 0 (write) or 1 (read); found `2`");
}

#[test]
fn mqsim_tpcc_small_parses_completely() {
    let (v, r) = read_all(&shared("mqsim_tpcc-small.trace"), &ReaderOptions::default());
    assert_eq!(r.format(), TraceFormat::Mqsim);
    assert_eq!(v.len(), 6_999);
    assert_eq!(v.iter().filter(|r| r.op == Read).count(), 4_381);
    assert_eq!(v.iter().filter(|r| r.op == Write).count(), 2_618);
}

#[test]
fn mqsim_wsrch_small_counts_its_unterminated_last_line() {
    let (v, r) = read_all(&shared("mqsim_wsrch-small.trace"), &fixed(TraceFormat::Mqsim));
    assert_eq!(v.len(), 24_783);
    assert_eq!(r.counts().lines, 24_783);
    assert_eq!(v.last().unwrap().line, 24_783);
}

/// `[requests, bytes]` of `op` among the `events` of the blkparse sample,
/// over every device, as `make_blkparse_sample.py` counted them.
fn blkparse_expected(events: &str, op: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(shared("blkparse_sample.expected.json")).unwrap();
    let want: serde_json::Value = serde_json::from_str(&text).unwrap();
    let devices = want[events].as_object().unwrap_or_else(|| panic!("no `{events}` in the expected counts"));
    devices
        .values()
        .map(|d| (d[op][0].as_u64().unwrap_or(0), d[op][1].as_u64().unwrap_or(0)))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

#[test]
fn blkparse_sample_parses_completely_and_counts_what_its_generator_wrote() {
    let path = shared("blkparse_sample.txt");
    let lines = std::fs::read_to_string(&path).unwrap().lines().count() as u64;
    for (events, which) in [
        (BlkparseEvents::Completed, "completed"),
        (BlkparseEvents::Issued, "issued"),
        (BlkparseEvents::Queued, "queued"),
    ] {
        let o = ReaderOptions { blkparse_events: Some(events), ..ReaderOptions::default() };
        let (v, r) = read_all(&path, &o);
        assert_eq!(r.format(), TraceFormat::Blkparse);
        assert_eq!(r.counts().skipped_bad_lines, 0, "{which}");
        assert!(r.counts().lines <= lines && r.counts().lines > lines - 20, "{which}: {} of {lines}", r.counts().lines);
        for (op, name) in [(Read, "read"), (Write, "write"), (Trim, "trim"), (Flush, "flush")] {
            let got = v.iter().filter(|r| r.op == op).fold((0, 0), |a, r| (a.0 + 1, a.1 + r.size_bytes));
            assert_eq!(got, blkparse_expected(which, name), "{which} {name}");
        }
    }
    // The sample has every kind of request, so the comparison above means something.
    for op in ["read", "write", "trim", "flush"] {
        assert!(blkparse_expected("completed", op).0 > 10, "{op}");
    }
}

#[test]
fn gzip_and_zstd_files_read_like_the_plain_file() {
    use std::io::Write as _;
    let plain = std::fs::read(fixture("mqsim.trace")).unwrap();
    let dir = std::env::temp_dir().join(format!("nandlab-trace-compress-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gz_path = dir.join("t.trace.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&plain).unwrap();
    std::fs::write(&gz_path, gz.finish().unwrap()).unwrap();
    let zst_path = dir.join("t.trace.zst");
    std::fs::write(&zst_path, zstd::encode_all(&plain[..], 3).unwrap()).unwrap();
    let (want, _) = read_all(&fixture("mqsim.trace"), &ReaderOptions::default());
    for p in [&gz_path, &zst_path] {
        let (got, r) = read_all(p, &ReaderOptions::default());
        assert_eq!(got, want, "{}", p.display());
        assert_eq!(r.format(), TraceFormat::Mqsim);
        assert_eq!(r.file_bytes_read(), std::fs::metadata(p).unwrap().len(), "progress counts compressed bytes");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn first_error(format: TraceFormat, text: &str) -> TraceError {
    let mut r = TraceReader::from_bytes("bad.trace", text.as_bytes().to_vec(), &fixed(format)).unwrap();
    loop {
        match r.next_request() {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("no error in {text:?}"),
            Err(e) => return e,
        }
    }
}

#[test]
fn bad_lines_name_file_line_field_and_expectation() {
    let cases: [(TraceFormat, &str, &str); 15] = [
        (
            TraceFormat::Msr,
            "1,hm,1,Read,18446744073709551615,1,0\n",
            "bad.trace:1: field `Size`: expected a size that, added to the offset, ends within 2^64 - 1 bytes; found `1`",
        ),
        (TraceFormat::Mqsim, "1 0 36028797018963967 2 0\n", "bad.trace:1: field `size`: expected a size that, added"),
        (TraceFormat::Spc, "0,36028797018963967,1024,w,0.0\n", "bad.trace:1: field `Size`: expected a size that, added"),
        (
            TraceFormat::Fio,
            "fio version 2 iolog\nf write 1 18446744073709551615\n",
            "bad.trace:2: field `length`: expected a size that, added to the offset, ends within 2^64 - 1 bytes; found `18446744073709551615`",
        ),
        (
            TraceFormat::Blkparse,
            "  8,16   5        2     0.000001850 18615  C   W 36028797018963967 + 2 [0]\n",
            "bad.trace:1: field `blocks`: expected a size that, added to the offset, ends within 2^64 - 1 bytes; found `2`",
        ),
        (
            TraceFormat::Msr,
            "128166372003061629,hm,1,Read,3154152960,32768,23320\n128166372003061629,hm,1,Erase,0,512,1\n",
            "bad.trace:2: field `Type`: expected Read or Write; found `Erase`",
        ),
        (TraceFormat::Msr, "1,hm,1,Read,0,512\n", "bad.trace:1: field `line`: expected 7 comma-separated fields"),
        (TraceFormat::Mqsim, "1 0 0 8 0\n2 0 -5 8 0\n", "bad.trace:2: field `lba`: expected a start sector"),
        (TraceFormat::Mqsim, "1 0 0 8 0 7\n", "bad.trace:1: field `line`: expected 5 blank-separated fields"),
        (TraceFormat::Disksim, "1.0 0 0 99999999999999999999 1\n", "bad.trace:1: field `size`"),
        (TraceFormat::Spc, "0,1,512,x,0.0\n", "bad.trace:1: field `Opcode`: expected r or w; found `x`"),
        (TraceFormat::Fio, "/dev/sda add\n", "bad.trace:1: field `header`: expected the header `fio version 2 iolog`"),
        (TraceFormat::Fio, "fio version 2 iolog\n/dev/sda write 0\n", "bad.trace:2: field `length`"),
        (
            TraceFormat::Blkparse,
            "  8,16   5        2     0.000001850 18615  C   Q 1 + 8 [0]\n",
            "bad.trace:1: field `rwbs`",
        ),
        (TraceFormat::Blkparse, "hello\n", "bad.trace:1: field `device`: expected `major,minor`"),
    ];
    for (format, text, want) in cases {
        let e = first_error(format, text).to_string();
        assert!(e.starts_with(want), "{format}: got `{e}`, want `{want}…`");
    }
}

#[test]
fn skip_bad_lines_counts_them_and_keeps_examples() {
    let o = ReaderOptions { skip_bad_lines: true, ..fixed(TraceFormat::Mqsim) };
    let text = b"1 0 0 8 0\nbroken\n2 0 8 8 1\n3 0 8 8 7\n".to_vec();
    let mut r = TraceReader::from_bytes("skip.trace", text, &o).unwrap();
    let mut n = 0;
    while r.next_request().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 2);
    assert_eq!(r.counts().skipped_bad_lines, 2);
    assert_eq!(r.bad_line_examples().len(), 2);
    assert!(r.bad_line_examples()[1].starts_with("skip.trace:4: field `type`"));
}

#[test]
fn an_unrecognisable_file_is_an_error_naming_it() {
    let e = TraceReader::from_bytes("x.bin", b"\x00\x01 hello\n".to_vec(), &ReaderOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.starts_with("x.bin: cannot recognise"), "{e}");
    let e = TraceReader::open(Path::new("/nonexistent/t.trace"), &ReaderOptions::default()).err().unwrap().to_string();
    assert!(e.contains("/nonexistent/t.trace: cannot open"), "{e}");
}
