//! Repeat-until-N-bytes writes exactly N bytes at the promised offsets, and
//! a replayed trace becomes host requests that fit the device.

use nandlab::workload::trace::replay::TraceWorkload;
use nandlab::workload::trace::{ReaderOptions, TraceFormat, TraceReader, TraceRequest};
use nandlab::workload::transform::{DeviceMap, MapRule, TransformSpec, Transformed};
use nandlab::workload::{HostOp, Workload};
use std::path::PathBuf;

/// A temporary MQSim trace: writes of 8 sectors at sectors 0, 16, 8, a read at 0.
fn trace_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nandlab-trace-tf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const TEXT: &str = "0 0 0 8 0\n10 0 16 8 0\n20 0 8 8 0\n30 0 0 8 1\n";

fn run(path: &std::path::Path, spec: TransformSpec) -> (Vec<TraceRequest>, Transformed) {
    let r = TraceReader::open(path, &ReaderOptions::for_format(TraceFormat::Mqsim)).unwrap();
    let mut t = Transformed::new(r, spec).unwrap();
    let mut v = Vec::new();
    while let Some(x) = t.next_request().unwrap_or_else(|e| panic!("{e}")) {
        v.push(x);
    }
    (v, t)
}

fn writes(v: &[TraceRequest]) -> Vec<(u64, u64)> {
    v.iter().filter(|r| r.op == HostOp::Write).map(|r| (r.offset_bytes, r.size_bytes)).collect()
}

const MIB: u64 = 1 << 20;
const K4: u64 = 4096;

#[test]
fn repeat_until_writes_exactly_n_bytes_with_default_offset_of_pass0_extent_rounded_to_mib() {
    let p = trace_file("a.trace", TEXT);
    let (v, t) = run(&p, TransformSpec { repeat_until_written_bytes: Some(10 * K4), ..Default::default() });
    // Pass 0's highest end is 12 KiB → S = 1 MiB; pass k adds k MiB.
    assert_eq!(
        writes(&v),
        vec![
            (0, K4),
            (2 * K4, K4),
            (K4, K4),
            (MIB, K4),
            (MIB + 2 * K4, K4),
            (MIB + K4, K4),
            (2 * MIB, K4),
            (2 * MIB + 2 * K4, K4),
            (2 * MIB + K4, K4),
            (3 * MIB, K4),
        ]
    );
    let c = t.counts();
    assert_eq!(c.written_bytes, 10 * K4);
    assert_eq!((c.passes, c.repeat_offset_bytes), (4, MIB));
    assert!(!c.last_write_shortened);
    // Reads are shifted too, and times continue pass after pass.
    let reads: Vec<_> = v.iter().filter(|r| r.op == HostOp::Read).collect();
    assert_eq!(reads[1].offset_bytes, MIB);
    assert!(v.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
}

#[test]
fn the_last_write_is_shortened_to_stop_exactly_at_the_target() {
    let p = trace_file("b.trace", TEXT);
    let (v, t) = run(
        &p,
        TransformSpec {
            repeat_until_written_bytes: Some(5 * K4 + 1024),
            repeat_offset_bytes: Some(64 * K4),
            ..Default::default()
        },
    );
    assert_eq!(writes(&v), vec![(0, K4), (2 * K4, K4), (K4, K4), (64 * K4, K4), (66 * K4, K4), (65 * K4, 1024),]);
    assert_eq!(t.counts().written_bytes, 5 * K4 + 1024);
    assert!(t.counts().last_write_shortened);
    assert_eq!(v.last().unwrap().op, HostOp::Write, "nothing after the target");
}

#[test]
fn repeated_passes_wrap_around_the_device() {
    let p = trace_file("c.trace", TEXT);
    let (v, t) = run(
        &p,
        TransformSpec {
            repeat_until_written_bytes: Some(12 * K4),
            map: Some(DeviceMap {
                rule: MapRule::Wrap,
                capacity_bytes: 2 * MIB + 8 * K4,
                grain_bytes: 512,
                extent_bytes: None,
            }),
            ..Default::default()
        },
    );
    let w = writes(&v);
    // Pass 3 starts at 3 MiB, which wraps to 3 MiB − (2 MiB + 32 KiB).
    assert_eq!(w[9], (MIB - 8 * K4, K4));
    // Pass 2 at 2 MiB + 8 KiB ends at 2 MiB + 12 KiB: inside.
    assert_eq!(w[7], (2 * MIB + 2 * K4, K4));
    assert_eq!(t.counts().out_of_range, 3, "the three writes of pass 3");
    assert!(v.iter().all(|r| r.end_bytes() <= 2 * MIB + 8 * K4));
}

#[test]
fn a_pass_that_writes_nothing_is_an_error_not_an_endless_loop() {
    let p = trace_file("d.trace", "0 0 0 8 1\n");
    let r = TraceReader::open(&p, &ReaderOptions::for_format(TraceFormat::Mqsim)).unwrap();
    let mut t =
        Transformed::new(r, TransformSpec { repeat_until_written_bytes: Some(K4), ..Default::default() }).unwrap();
    assert!(t.next_request().unwrap().is_some());
    let e = t.next_request().unwrap_err().to_string();
    assert!(e.contains("wrote nothing"), "{e}");
}

#[test]
fn replay_turns_bytes_into_sectors_and_skips_zero_lengths() {
    let p = trace_file("e.trace", "0 0 0 8 0\n1 0 4 0 1\n2 0 100 8 0\n");
    let r = TraceReader::open(&p, &ReaderOptions::for_format(TraceFormat::Mqsim)).unwrap();
    let spec = TransformSpec {
        map: Some(DeviceMap { rule: MapRule::Wrap, capacity_bytes: 64 * 512, grain_bytes: 512, extent_bytes: None }),
        ..Default::default()
    };
    let mut w = TraceWorkload::new(r, spec, 512).unwrap();
    let mut v = Vec::new();
    while let Some(h) = w.next_request().unwrap() {
        v.push((h.op, h.lba, h.sectors, h.arrival_ns));
    }
    assert_eq!(v, vec![(HostOp::Write, 0, 8, 0), (HostOp::Write, 36, 8, 2)]);
    let report = w.replay_report();
    assert_eq!(report.zero_length_skipped, 1);
    assert_eq!(report.transforms.out_of_range, 1);
    assert_eq!(w.progress().done, w.progress().total.unwrap());
}

#[test]
fn the_oracle_grain_follows_the_alignment_and_the_device() {
    let p = trace_file("f.trace", TEXT);
    let grain = |align: Option<u64>, capacity: u64| {
        let r = TraceReader::open(&p, &ReaderOptions::for_format(TraceFormat::Mqsim)).unwrap();
        let spec = TransformSpec {
            align_bytes: align,
            map: Some(DeviceMap {
                rule: MapRule::Wrap,
                capacity_bytes: capacity,
                grain_bytes: 512,
                extent_bytes: None,
            }),
            ..Default::default()
        };
        TraceWorkload::new(r, spec, 512).unwrap().alignment_sectors()
    };
    assert_eq!(grain(Some(4096), 64 * 4096), 8);
    assert_eq!(grain(None, 64 * 4096), 1, "unaligned traces are tracked per sector");
    assert_eq!(grain(Some(4096), 64 * 4096 + 512), 1, "wrap splits at an unaligned end");
}
