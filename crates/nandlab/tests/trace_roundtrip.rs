//! convert → read gives the same request stream, for every field the target
//! format can represent (and drops exactly what it cannot: flushes and trims
//! in MQSim, DiskSim, MSR and SPC), and a request a target cannot write
//! readably is refused, naming its line and field.

mod support;

use nandlab::workload::trace::convert::{ConvertError, TargetFormat, TraceWriter};
use nandlab::workload::trace::{ReaderOptions, TraceFormat, TraceReader, TraceRequest};
use nandlab::workload::transform::{TransformSpec, Transformed};
use nandlab::workload::HostOp;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/traces").join(name)
}

/// The source's requests as the converter sees them (times rebased to the first).
fn source(path: &Path) -> Vec<TraceRequest> {
    let r = TraceReader::open(path, &ReaderOptions::default()).unwrap();
    let mut t = Transformed::new(r, TransformSpec::default()).unwrap();
    let mut v = Vec::new();
    while let Some(x) = t.next_request().unwrap() {
        v.push(x);
    }
    v
}

fn convert(reqs: &[TraceRequest], target: TargetFormat) -> (Vec<u8>, u64) {
    let mut w = TraceWriter::new(Vec::new(), target, "/dev/nandlab0");
    for r in reqs {
        w.write(r).unwrap();
    }
    let (bytes, counts) = w.finish().unwrap();
    (bytes, counts.dropped_flushes + counts.dropped_trims)
}

fn read_back(bytes: Vec<u8>, target: TargetFormat) -> Vec<TraceRequest> {
    let o = ReaderOptions::for_format(target.reader());
    let mut r = TraceReader::from_bytes("converted", bytes, &o).unwrap();
    let mut v = Vec::new();
    while let Some(x) = r.next_request().unwrap_or_else(|e| panic!("{e}")) {
        v.push(x);
    }
    v
}

/// (op, offset, size, time, device) as the target can represent it.
type Row = (HostOp, u64, u64, u64, u32);

fn representable(target: TargetFormat, reqs: &[TraceRequest]) -> Vec<Row> {
    // fio numbers its files in order of first appearance.
    let mut fio_files = HashMap::new();
    // fio v2 has only waits: its time never goes backwards.
    let mut v2_time = 0;
    let sector = |r: &TraceRequest| {
        let lba = r.offset_bytes / 512;
        (lba * 512, r.end_bytes().div_ceil(512) * 512 - lba * 512)
    };
    reqs.iter()
        .filter_map(|r| {
            let data = matches!(r.op, HostOp::Read | HostOp::Write);
            Some(match target {
                TargetFormat::Fio | TargetFormat::FioV2 => {
                    let n = fio_files.len() as u32;
                    let dev = *fio_files.entry(r.device).or_insert(n);
                    let (o, s) = if r.op == HostOp::Flush { (0, 0) } else { (r.offset_bytes, r.size_bytes) };
                    let mut t = r.time_ns / 1000 * 1000;
                    if target == TargetFormat::FioV2 {
                        v2_time = t.max(v2_time);
                        t = v2_time;
                    }
                    (r.op, o, s, t, dev)
                }
                TargetFormat::Mqsim if data => {
                    let (o, s) = sector(r);
                    (r.op, o, s, r.time_ns, r.device)
                }
                TargetFormat::Disksim if data => {
                    let (o, s) = sector(r);
                    (r.op, o, s, r.time_ns, r.device)
                }
                TargetFormat::Msr if data => (r.op, r.offset_bytes, r.size_bytes, r.time_ns / 100 * 100, r.device),
                TargetFormat::Spc if data => {
                    let (o, _) = sector(r);
                    (r.op, o, r.end_bytes() - o, r.time_ns, r.device)
                }
                _ => return None,
            })
        })
        .collect()
}

fn rows(v: &[TraceRequest]) -> Vec<Row> {
    v.iter().map(|r| (r.op, r.offset_bytes, r.size_bytes, r.time_ns, r.device)).collect()
}

const TARGETS: [TargetFormat; 6] = [
    TargetFormat::Fio,
    TargetFormat::FioV2,
    TargetFormat::Mqsim,
    TargetFormat::Disksim,
    TargetFormat::Msr,
    TargetFormat::Spc,
];

#[test]
fn every_fixture_round_trips_through_every_target() {
    for file in ["msr.csv", "mqsim.trace", "disksim.trace", "spc.csv", "fio_v2.log", "fio_v3.log", "blkparse.txt"] {
        let src = source(&fixture(file));
        assert!(!src.is_empty());
        for target in TARGETS {
            let (bytes, dropped) = convert(&src, target);
            let back = read_back(bytes, target);
            let want = representable(target, &src);
            assert_eq!(rows(&back), want, "{file} → {}", target.name());
            assert_eq!(
                back.len() as u64 + dropped,
                src.len() as u64,
                "{file} → {}: every request is written or counted as dropped",
                target.name()
            );
        }
    }
}

#[test]
fn mqsim_to_mqsim_is_exact_on_a_public_trace() {
    let src = source(&support::public_trace("mqsim_tpcc-small.trace"));
    let (bytes, dropped) = convert(&src, TargetFormat::Mqsim);
    assert_eq!(dropped, 0);
    assert_eq!(rows(&read_back(bytes, TargetFormat::Mqsim)), rows(&src));
}

#[test]
fn flushes_and_trims_are_dropped_from_mqsim_output_and_kept_in_fio() {
    let src = source(&fixture("blkparse.txt"));
    let flushes = src.iter().filter(|r| r.op == HostOp::Flush).count() as u64;
    let trims = src.iter().filter(|r| r.op == HostOp::Trim).count() as u64;
    assert!(flushes > 0 && trims > 0);
    let (_, dropped) = convert(&src, TargetFormat::Mqsim);
    assert_eq!(dropped, flushes + trims);
    let (bytes, dropped) = convert(&src, TargetFormat::Fio);
    assert_eq!(dropped, 0);
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.starts_with("fio version 3 iolog\n"));
    assert!(text.contains(" sync 0 0\n") && text.contains(" trim "));
    assert!(text.trim_end().ends_with("close"));
}

#[test]
fn the_reader_of_each_target_is_the_one_auto_detection_picks() {
    let src = source(&fixture("mqsim.trace"));
    for target in TARGETS {
        let (bytes, _) = convert(&src, target);
        let r = TraceReader::from_bytes("c", bytes, &ReaderOptions::default()).unwrap();
        let want = target.reader();
        assert_eq!(r.format(), want, "{}", target.name());
    }
    assert_eq!(TargetFormat::Mqsim.reader(), TraceFormat::Mqsim);
}

#[test]
fn a_request_ending_past_the_last_64_bit_sector_is_refused_by_sector_targets_only() {
    let text = b"fio version 2 iolog\nf add\nf write 0 18446744073709551615\n".to_vec();
    let r = TraceReader::from_bytes("huge.log", text, &ReaderOptions::default()).unwrap();
    let mut t = Transformed::new(r, TransformSpec::default()).unwrap();
    let huge = t.next_request().unwrap().unwrap();
    for target in [TargetFormat::Mqsim, TargetFormat::Disksim] {
        let mut w = TraceWriter::new(Vec::new(), target, "f");
        let e = w.write(&huge).unwrap_err();
        assert!(matches!(e, ConvertError::Unrepresentable { line: 3, .. }), "{e:?}");
        let msg = e.located("huge.log", TraceFormat::Fio, "out");
        assert!(
            msg.starts_with(&format!(
                "huge.log:3: field `length`: cannot be written as {}: the request ends at byte 18446744073709551615",
                target.name()
            )),
            "{msg}"
        );
        let (bytes, counts) = w.finish().unwrap();
        assert_eq!((bytes.len(), counts.written), (0, 0), "nothing written for the refused request");
    }
    // The byte-addressed targets represent it, and their readers take it back.
    for target in [TargetFormat::Fio, TargetFormat::FioV2, TargetFormat::Msr, TargetFormat::Spc] {
        let (bytes, _) = convert(std::slice::from_ref(&huge), target);
        let back = read_back(bytes, target);
        assert_eq!(back.iter().map(|r| r.end_bytes()).collect::<Vec<_>>(), vec![u64::MAX], "{}", target.name());
    }
}

#[test]
fn a_fio_log_of_more_than_4096_files_is_refused_at_the_first_extra_device() {
    let mut w = TraceWriter::new(Vec::new(), TargetFormat::Fio, "/dev/x");
    for d in 0..4096u32 {
        let r = TraceRequest {
            op: HostOp::Write,
            offset_bytes: 0,
            size_bytes: 512,
            time_ns: 0,
            device: d,
            line: 1 + u64::from(d),
        };
        w.write(&r).unwrap();
    }
    let again = TraceRequest { op: HostOp::Read, offset_bytes: 0, size_bytes: 512, time_ns: 0, device: 7, line: 4097 };
    w.write(&again).unwrap();
    let extra = TraceRequest { device: 4096, line: 4098, ..again };
    let e = w.write(&extra).unwrap_err().located("in.csv", TraceFormat::Msr, "out");
    assert!(
        e.starts_with(
            "in.csv:4098: field `DiskNumber`: cannot be written as fio: device 4096 would be file number 4097"
        ),
        "{e}"
    );
    let (bytes, counts) = w.finish().unwrap();
    assert_eq!(counts.written, 4097);
    assert_eq!(read_back(bytes, TargetFormat::Fio).len(), 4097, "what was written reads back");
}
