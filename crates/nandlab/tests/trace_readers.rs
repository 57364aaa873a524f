//! Each trace reader on hand-written fixtures with known requests (CRLF,
//! headers, blank lines, huge sizes, zero lengths, a missing final newline),
//! the public traces in `../shared/traces/`, compression, and bad input.

use nandlab::workload::trace::{
    BlkparseEvents, ReaderOptions, TimeUnit, TraceError, TraceFormat, TraceReader, TraceRequest,
};
use nandlab::workload::HostOp::{self, Flush, Read, Trim, Write};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/traces").join(name)
}

/// The public traces (see /work/shared/traces/SOURCES.md), beside the repository.
fn shared(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces").join(name)
}

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

#[test]
fn msr_fixture_with_header_crlf_blank_line_and_huge_request() {
    let (v, r) = read_all(&fixture("msr.csv"), &fixed(TraceFormat::Msr));
    assert_eq!(
        rows(&v),
        vec![
            (Read, 3154152960, 32768, 12816637200306162900, 1, 2),
            (Write, 3154152960, 4096, 12816637201638215500, 1, 4),
            (Write, 0, 0, 12816637202638224500, 0, 5),
            (Read, 1 << 40, 1 << 30, 12816637203638224500, 0, 6),
        ]
    );
    assert_eq!(r.counts().lines, 6);
    assert_eq!(r.counts().ignored_lines, 2, "header and blank line");
}

#[test]
fn mqsim_fixture_counts_the_last_line_without_newline() {
    let (v, r) = read_all(&fixture("mqsim.trace"), &fixed(TraceFormat::Mqsim));
    assert_eq!(
        rows(&v),
        vec![
            (Write, 264719034 * 512, 8192, 938513000, 4, 2),
            (Read, 197570570 * 512, 8192, 938828000, 3, 3),
            (Read, 93230992 * 512, 0, 938944000, 13, 5),
            (Write, 0, 1 << 41, 18446744073709551, 0, 6),
            (Write, 238240490 * 512, 8192, 939044000, 6, 7),
        ]
    );
    assert_eq!(r.counts().ignored_lines, 2, "comment and blank line");
}

#[test]
fn disksim_fixture_reads_milliseconds_and_flag_bit_zero() {
    let (v, _) = read_all(&fixture("disksim.trace"), &fixed(TraceFormat::Disksim));
    assert_eq!(
        rows(&v),
        vec![
            (Read, 0, 5 * 512, 13_191_135, 30, 1),
            (Write, 576560 * 512, 6 * 512, 17_829_285, 20, 2),
            (Read, 0, 24 * 512, 24_314_779, 17, 3),
            (Write, 28601 * 512, 12 * 512, 25_911_729, 18, 4),
            (Read, 10 * 512, 0, 500_000, 1, 5),
        ]
    );
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
fn spc_fixture_with_spaces_and_extra_fields() {
    let (v, _) = read_all(&fixture("spc.csv"), &fixed(TraceFormat::Spc));
    assert_eq!(
        rows(&v),
        vec![
            (Write, 303567 * 512, 3584, 0, 0, 2),
            (Read, 55590 * 512, 3072, 26_214_000, 1, 3),
            (Read, 55596 * 512, 3072, 78_643_000, 1, 4),
            (Write, 0, 0, 1_500_000_000, 0, 6),
            (Write, 1 << 40, 1 << 30, 3_600_000_000_001, 2, 7),
        ]
    );
}

#[test]
fn fio_v2_fixture_numbers_files_and_accumulates_waits() {
    let (v, r) = read_all(&fixture("fio_v2.log"), &fixed(TraceFormat::Fio));
    assert_eq!(
        rows(&v),
        vec![
            (Write, 0, 4096, 0, 0, 4),
            (Read, 4096, 8192, 1_500_000, 0, 6),
            (Trim, 1 << 20, 65536, 1_500_000, 1, 9),
            (Flush, 0, 0, 1_500_000, 0, 10),
            (Flush, 0, 0, 1_500_000, 0, 11),
            (Write, 0, 0, 1_500_000, 0, 12),
        ]
    );
    assert_eq!(r.counts().ignored_lines, 8, "header, add/open/close, wait");
}

#[test]
fn fio_v3_fixture_reads_microsecond_timestamps() {
    let (v, _) = read_all(&fixture("fio_v3.log"), &fixed(TraceFormat::Fio));
    assert_eq!(
        rows(&v),
        vec![
            (Write, 0, 16384, 878_000, 0, 4),
            (Read, 16384, 16384, 888_000, 0, 5),
            (Flush, 0, 0, 891_000, 0, 6),
            (Trim, 1 << 34, 1 << 32, 10_001_677_000, 0, 7),
        ]
    );
}

#[test]
fn blkparse_fixture_completed_events_map_rwbs() {
    let (v, r) = read_all(&fixture("blkparse.txt"), &fixed(TraceFormat::Blkparse));
    let sdb = 8 << 20 | 16;
    let sdc = 8 << 20 | 32;
    assert_eq!(
        rows(&v),
        vec![
            (Read, 1444645666 * 512, 256 * 512, 356_669, sdb, 8),
            (Flush, 0, 0, 100_500_000, sdb, 11),
            (Write, 2048 * 512, 4096, 100_500_000, sdb, 11),
            (Flush, 0, 0, 100_500_000, sdb, 11),
            (Flush, 0, 0, 200_100_000, sdb, 13),
            (Trim, 4096 * 512, 2048 * 512, 300_200_000, sdb, 15),
            (Write, 8192 * 512, 16 * 512, 400_300_000, sdc, 17),
            (Write, 1950885322 * 512, 0, 3_832_956_675, sdb, 18),
        ]
    );
    assert_eq!(r.counts().lines, 27, "the summary is read and ignored");
}

#[test]
fn blkparse_queued_and_issued_events_are_selectable() {
    let count = |e| {
        let o = ReaderOptions { blkparse_events: Some(e), ..fixed(TraceFormat::Blkparse) };
        read_all(&fixture("blkparse.txt"), &o).0.len()
    };
    assert_eq!(count(BlkparseEvents::Queued), 7);
    assert_eq!(count(BlkparseEvents::Issued), 4);
    assert_eq!(count(BlkparseEvents::Completed), 8);
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

#[test]
fn apress_blkparse_sample_parses_completely() {
    let (v, r) = read_all(&shared("apress_blkparse.txt"), &ReaderOptions::default());
    assert_eq!(r.format(), TraceFormat::Blkparse);
    assert_eq!(r.counts().lines, 50_000);
    assert_eq!(r.counts().skipped_bad_lines, 0);
    // 171 completions: 78 R, 86 W, 7 WS (one of them without a length).
    assert_eq!(v.len(), 171);
    assert_eq!(v.iter().filter(|r| r.op == Read).count(), 78);
    assert_eq!(v.iter().filter(|r| r.op == Write).count(), 93);
    assert_eq!(v.iter().filter(|r| r.size_bytes == 0).count(), 1);
    // Queued: 15,524 Q events, two of them barriers (WBS) with a preflush.
    let o = ReaderOptions { blkparse_events: Some(BlkparseEvents::Queued), ..ReaderOptions::default() };
    let (q, _) = read_all(&shared("apress_blkparse.txt"), &o);
    assert_eq!(q.len(), 15_526);
    assert_eq!(q.iter().filter(|r| r.op == Flush).count(), 2);
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
    let cases: [(TraceFormat, &str, &str); 10] = [
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
