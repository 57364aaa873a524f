//! convert → read gives the same request stream, for every field the target
//! format can represent (and drops exactly what it cannot: flushes and trims
//! in MQSim, DiskSim, MSR and SPC).

use nandlab::workload::trace::convert::{TargetFormat, TraceWriter};
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
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/mqsim_tpcc-small.trace");
    let src = source(&path);
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
