//! The CSV reader with a column mapping and its named layouts (alibaba,
//! tencent, vscsi) on hand-written fixtures with known requests; header
//! detection, ignored op values, CRLF + BOM, and bad input naming the
//! line and the field.

use nandlab::workload::trace::csv::{Columns, CsvOptions, OpRule};
use nandlab::workload::trace::{ReaderOptions, TimeUnit, TraceError, TraceFormat, TraceReader, TraceRequest};
use nandlab::workload::HostOp::{self, Flush, Read, Trim, Write};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/traces").join(name)
}

/// (op, offset_bytes, size_bytes, time_ns, device, line)
type Row = (HostOp, u64, u64, u64, u32, u64);

fn read_bytes(name: &str, bytes: Vec<u8>, o: &ReaderOptions) -> Result<(Vec<Row>, TraceReader), TraceError> {
    let mut r = TraceReader::from_bytes(name, bytes, o)?;
    let mut v = Vec::new();
    while let Some(q) = r.next_request()? {
        v.push(q);
    }
    Ok((
        v.iter().map(|r: &TraceRequest| (r.op, r.offset_bytes, r.size_bytes, r.time_ns, r.device, r.line)).collect(),
        r,
    ))
}

/// Read the fixture with `o` and check `want`; its CRLF + BOM form must give the same.
fn check_fixture(name: &str, o: &ReaderOptions, want: &[Row]) -> TraceReader {
    let bytes = std::fs::read(fixture(name)).unwrap();
    let (got, r) = read_bytes(name, bytes.clone(), o).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, want, "{name}");
    let mut crlf = b"\xef\xbb\xbf".to_vec();
    for &c in &bytes {
        if c == b'\n' {
            crlf.push(b'\r');
        }
        crlf.push(c);
    }
    let (got2, r2) = read_bytes(name, crlf, o).unwrap_or_else(|e| panic!("{name} with CRLF and BOM: {e}"));
    assert_eq!(got2, want, "{name} with CRLF and BOM");
    assert_eq!(r2.counts(), r.counts());
    r
}

fn fixed(f: TraceFormat) -> ReaderOptions {
    ReaderOptions::for_format(f)
}

fn with_csv(f: TraceFormat, csv: CsvOptions) -> ReaderOptions {
    ReaderOptions { csv, ..fixed(f) }
}

fn ops(rules: &[&str]) -> Vec<OpRule> {
    rules.iter().map(|r| r.parse().unwrap()).collect()
}

#[test]
fn alibaba_layout_reads_device_opcode_bytes_and_microseconds() {
    let r = check_fixture(
        "alibaba.csv",
        &fixed(TraceFormat::Alibaba),
        &[
            (Read, 126_703_644_672, 4096, 1_577_808_144_249_765_000, 0, 1),
            (Write, 126_703_648_768, 8192, 1_577_808_144_250_001_000, 0, 2),
            (Write, 0, 512, 1_577_808_144_300_000_000, 3, 3),
            (Read, 4096, 0, 1_577_808_145_000_000_000, 7, 4),
        ],
    );
    assert_eq!((r.counts().lines, r.counts().ignored_lines), (4, 0));
}

#[test]
fn alibaba_traces_are_auto_detected_and_others_need_the_format() {
    let bytes = std::fs::read(fixture("alibaba.csv")).unwrap();
    let r = TraceReader::from_bytes("a.csv", bytes, &ReaderOptions::default()).unwrap();
    assert_eq!(r.format(), TraceFormat::Alibaba, "{:?}", r.chosen_because());
    for name in ["tencent.csv", "vscsi.csv"] {
        let bytes = std::fs::read(fixture(name)).unwrap();
        let e = TraceReader::from_bytes(name, bytes, &ReaderOptions::default()).err().unwrap().to_string();
        assert!(e.contains("--trace-format"), "{name}: {e}");
    }
}

#[test]
fn tencent_layout_reads_seconds_sectors_io_type_and_volume_after_its_header() {
    let r = check_fixture(
        "tencent.csv",
        &fixed(TraceFormat::Tencent),
        &[
            (Read, 2048 * 512, 8 * 512, 1_538_323_200_000_000_000, 1063, 2),
            (Write, 4096 * 512, 16 * 512, 1_538_323_200_000_000_000, 1063, 3),
            (Write, 0, 512, 1_538_323_201_000_000_000, 7, 4),
        ],
    );
    assert_eq!((r.counts().requests, r.counts().ignored_lines), (3, 1));
}

#[test]
fn vscsi_layout_reads_scsi_opcodes_bytes_and_sector_lbns() {
    let r = check_fixture(
        "vscsi.csv",
        &fixed(TraceFormat::Vscsi),
        &[
            (Read, 2048 * 512, 4096, 0, 0, 2),
            (Write, 16 * 512, 8192, 1_000_000_000, 0, 3),
            (Write, 0, 512, 1_000_000_000, 0, 4),
            (Read, 100 * 512, 65536, 2_000_000_000, 0, 5),
        ],
    );
    assert_eq!(r.counts().ignored_lines, 1);
}

fn generic_options() -> ReaderOptions {
    ReaderOptions {
        time_unit: Some(TimeUnit::Ms),
        ..with_csv(
            TraceFormat::Csv,
            CsvOptions {
                columns: Some("time=1,device=2,op=3,offset=4,size=5".parse().unwrap()),
                offset_unit: Some(4096),
                size_unit: Some(512),
                ops: ops(&["read=read", "write=write", "trim=discard", "flush=sync", "ignore=stat"]),
                delimiter: Some(b';'),
                skip_header: false,
            },
        )
    }
}

#[test]
fn a_column_mapping_with_units_delimiter_and_op_names_gives_the_requests() {
    let r = check_fixture(
        "generic.csv",
        &generic_options(),
        &[
            (Read, 10 * 4096, 8 * 512, 500_000, 2, 3),
            (Write, 11 * 4096, 16 * 512, 1_250_000, 2, 4),
            (Trim, 0, 8 * 512, 2_000_000, 3, 6),
            (Flush, 0, 0, 3_000_000, 3, 7),
        ],
    );
    // The comment, the header, the blank line and the `stat` line.
    assert_eq!((r.counts().lines, r.counts().requests, r.counts().ignored_lines), (8, 4, 4));
}

#[test]
fn without_a_time_column_requests_have_no_arrival_time_and_device_0() {
    let o = with_csv(
        TraceFormat::Csv,
        CsvOptions {
            columns: Some("op=1,offset=2,size=3".parse().unwrap()),
            ops: ops(&["read=R", "write=W"]),
            ..Default::default()
        },
    );
    let (v, _) = read_bytes("t.csv", b"W,0,4096\nr,4096,512\n".to_vec(), &o).unwrap();
    assert_eq!(v, vec![(Write, 0, 4096, 0, 0, 1), (Read, 4096, 512, 0, 0, 2)]);
}

#[test]
fn a_numeric_first_line_is_a_record_unless_skip_header_is_given() {
    let text = b"0,R,0,512,1\n0,W,512,512,2\n".to_vec();
    let (v, r) = read_bytes("t.csv", text.clone(), &fixed(TraceFormat::Alibaba)).unwrap();
    assert_eq!((v.len(), r.counts().ignored_lines), (2, 0));
    let o = with_csv(TraceFormat::Alibaba, CsvOptions { skip_header: true, ..Default::default() });
    let (v, r) = read_bytes("t.csv", text, &o).unwrap();
    assert_eq!((v, r.counts().ignored_lines), (vec![(Write, 512, 512, 2000, 0, 2)], 1));
}

#[test]
fn user_op_values_extend_a_layout_and_can_ignore_lines() {
    // SCSI READ(16) as a read, and a TEST UNIT READY (00) ignored.
    let o = with_csv(TraceFormat::Vscsi, CsvOptions { ops: ops(&["read=88", "ignore=00"]), ..Default::default() });
    let (v, r) = read_bytes("t.csv", b"1,0,88,512,1\n1,0,00,0,0\n1,0,2a,512,2\n".to_vec(), &o).unwrap();
    assert_eq!(v, vec![(Read, 512, 512, 0, 0, 1), (Write, 1024, 512, 0, 0, 3)]);
    assert_eq!(r.counts().ignored_lines, 1);
}

fn first_error(o: &ReaderOptions, text: &str) -> String {
    match read_bytes("bad.csv", text.as_bytes().to_vec(), o) {
        Ok((v, _)) => panic!("no error in {text:?}: {v:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_lines_name_the_line_the_field_and_the_expectation() {
    let csv = with_csv(
        TraceFormat::Csv,
        CsvOptions {
            columns: Some("op=1,offset=2,size=3,time=4".parse().unwrap()),
            ops: ops(&["read=R", "write=W"]),
            ..Default::default()
        },
    );
    let csv = ReaderOptions { time_unit: Some(TimeUnit::Us), ..csv };
    let cases: [(&ReaderOptions, &str, &str); 8] = [
        (&csv, "R,0,512,1\nX,0,512,2\n", "bad.csv:2: field `op`: expected a value listed with --trace-ops"),
        (&csv, "R,0,512,1\nR,0\n", "bad.csv:2: field `size`: expected a field in this column"),
        (&csv, "R,0,512,1\nW,abc,512,2\n", "bad.csv:2: field `offset`: expected an unsigned integer offset"),
        (&csv, "R,0,512,1\nW,0,512,-3\n", "bad.csv:2: field `time`: expected a non-negative time"),
        (&fixed(TraceFormat::Alibaba), "0,D,0,512,1\n", "bad.csv:1: field `opcode`: expected R (read) or W (write)"),
        (
            &fixed(TraceFormat::Alibaba),
            "0,R,18446744073709551615,1,1\n",
            "bad.csv:1: field `length`: expected a size that, added to the offset",
        ),
        (&fixed(TraceFormat::Tencent), "1538323200,0,8,0,1\nx1,0,8,0,1\n", "bad.csv:2: field `timestamp`"),
        (&fixed(TraceFormat::Vscsi), "1,0,88,512,1\n", "bad.csv:1: field `op`: expected SCSI opcode 28 (read) or 2a"),
    ];
    for (o, text, want) in cases {
        let e = first_error(o, text);
        assert!(e.starts_with(want), "got `{e}`, want `{want}…`");
        assert!(e.contains("found"), "{e}");
    }
}

#[test]
fn csv_options_are_checked_before_reading() {
    let open =
        |o: &ReaderOptions| TraceReader::from_bytes("x.csv", b"R,0,512\n".to_vec(), o).err().unwrap().to_string();
    let e = open(&with_csv(TraceFormat::Csv, CsvOptions { ops: ops(&["read=R"]), ..Default::default() }));
    assert!(e.starts_with("x.csv: --trace-format csv needs --trace-columns"), "{e}");
    let cols: Columns = "op=1,offset=2,size=3,time=4".parse().unwrap();
    let e = open(&with_csv(
        TraceFormat::Csv,
        CsvOptions { columns: Some(cols.clone()), ops: ops(&["read=R"]), ..Default::default() },
    ));
    assert!(e.contains("give its unit with --trace-time-unit"), "{e}");
    let untimed: Columns = "op=1,offset=2,size=3".parse().unwrap();
    let e = open(&with_csv(TraceFormat::Csv, CsvOptions { columns: Some(untimed), ..Default::default() }));
    assert!(e.contains("needs --trace-ops"), "{e}");
    let e = open(&with_csv(TraceFormat::Msr, CsvOptions { skip_header: true, ..Default::default() }));
    assert!(e.contains("apply to csv, alibaba, tencent and vscsi traces only, not msr"), "{e}");
    let e = open(&ReaderOptions { sector_bytes: Some(4096), ..fixed(TraceFormat::Tencent) });
    assert!(e.contains("--trace-sector-bytes does not apply to tencent"), "{e}");
}

#[test]
fn a_short_or_odd_first_line_is_never_a_panic() {
    for text in ["", "\n", ",,,,", "R", "0,R", "\u{feff}", ";;;\n1,R,2,3,4\n"] {
        let _ = read_bytes("odd.csv", text.as_bytes().to_vec(), &fixed(TraceFormat::Alibaba));
    }
    let _ = read_bytes("odd.csv", b"1\n".to_vec(), &generic_options());
}

#[test]
fn a_blank_delimiter_treats_a_run_of_blanks_as_one_separator() {
    let o = with_csv(
        TraceFormat::Csv,
        CsvOptions {
            columns: Some("op=1,offset=2,size=3,device=4".parse().unwrap()),
            ops: ops(&["read=R", "write=W"]),
            delimiter: Some(b' '),
            ..Default::default()
        },
    );
    let (v, _) = read_bytes("t.txt", b"W   0 \t 4096  3\n  R 8 512 1\n".to_vec(), &o).unwrap();
    assert_eq!(v, vec![(Write, 0, 4096, 0, 3, 1), (Read, 8, 512, 0, 1, 2)]);
}

/// SplitMix64, for reproducible pseudo-random lines.
fn next(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[test]
fn random_csv_like_input_gives_requests_or_located_errors_never_a_panic() {
    const TOKENS: [&str; 16] =
        ["0", "1", "R", "w", "28", "2a", "18446744073709551615", "4096", ",", ",", ",", ";", "\n", " ", "x", "1.5"];
    let mut seed = 7u64;
    let layouts =
        [fixed(TraceFormat::Alibaba), fixed(TraceFormat::Tencent), fixed(TraceFormat::Vscsi), generic_options()];
    for case in 0..2000 {
        let mut text = String::new();
        for _ in 0..next(&mut seed) % 40 {
            text += TOKENS[(next(&mut seed) % 16) as usize];
        }
        for o in &layouts {
            let o = ReaderOptions { skip_bad_lines: case % 2 == 0, ..o.clone() };
            match read_bytes("r.csv", text.clone().into_bytes(), &o) {
                Ok((v, r)) => {
                    assert!(v.iter().all(|q| q.5 >= 1 && q.5 <= r.counts().lines), "{text:?}");
                    let c = r.counts();
                    assert!(c.ignored_lines + c.skipped_bad_lines <= c.lines, "{text:?}");
                }
                Err(e) => {
                    let e = e.to_string();
                    assert!(e.starts_with("r.csv:") && e.contains("field `"), "{text:?}: {e}");
                }
            }
        }
    }
}
