//! Fuzz format sniffing (`--trace-format auto`: majority, header and
//! MQSim/DiskSim variant rules) and everything after a reader: the
//! transform chain on a small device (or none, so huge requests reach the
//! writers), then conversion to every target and reading the result back.
//! A request a target refuses ends the conversion; what was written before
//! it must still read back.
#![no_main]

use nandlab_fuzz as common;

use libfuzzer_sys::fuzz_target;
use nandlab::workload::trace::convert::{ConvertError, TargetFormat, TraceWriter};
use nandlab::workload::trace::{ReaderOptions, TraceReader};
use nandlab::workload::transform::{DeviceMap, MapRule, TransformSpec, Transformed};

const TARGETS: [TargetFormat; 6] = [
    TargetFormat::Fio,
    TargetFormat::FioV2,
    TargetFormat::Mqsim,
    TargetFormat::Disksim,
    TargetFormat::Msr,
    TargetFormat::Spc,
];

fuzz_target!(|data: &[u8]| {
    common::read_all(None, data);
    let Some((&bits, text)) = data.split_first() else {
        return;
    };
    let options = ReaderOptions {
        skip_bad_lines: true,
        ..ReaderOptions::default()
    };
    let Ok(reader) = TraceReader::from_bytes("fuzz.trace", text.to_vec(), &options) else {
        return;
    };
    let rule = [MapRule::Wrap, MapRule::Scale, MapRule::Skip, MapRule::Reject][(bits & 3) as usize];
    // Capacities of 4 KiB (at least the 4 KiB alignment) to 64 MiB; the
    // largest shift means no device.
    let shift = bits >> 4;
    let capacity = (shift != 15).then_some(4096u64 << shift);
    let map = capacity.map(|c| DeviceMap { rule, capacity_bytes: c, grain_bytes: 512, extent_bytes: Some(c * 3 + 1) });
    let spec = TransformSpec {
        align_bytes: (bits & 4 != 0).then_some(4096),
        speed: if bits & 8 != 0 { 3.5 } else { 1.0 },
        map,
        max_requests: Some(10_000),
        ..Default::default()
    };
    let mut stream = Transformed::new(reader, spec).expect("a valid spec");
    let target = TARGETS[(bits as usize >> 2) % TARGETS.len()];
    let mut writer = TraceWriter::new(Vec::new(), target, "/dev/fuzz");
    while let Ok(Some(r)) = stream.next_request() {
        if let Some(c) = capacity {
            assert!(r.end_bytes() <= c, "mapped requests fit the device");
        }
        match writer.write(&r) {
            Ok(()) => {}
            Err(ConvertError::Unrepresentable { line, .. }) => {
                assert_eq!(line, r.line);
                break;
            }
            Err(ConvertError::Io(e)) => panic!("writing to memory: {e}"),
        }
    }
    let _ = stream.warnings();
    let (bytes, _) = writer.finish().expect("writing to memory");
    let back = ReaderOptions::for_format(target.reader());
    let mut r = TraceReader::from_bytes("converted", bytes, &back).expect("converted output opens");
    while let Some(_) = r.next_request().unwrap_or_else(|e| panic!("converted output reads back: {e}")) {}
});
