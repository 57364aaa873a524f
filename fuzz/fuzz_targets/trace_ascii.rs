//! Fuzz the ascii trace reader: arbitrary bytes never panic.
#![no_main]

use nandlab_fuzz as common;

use libfuzzer_sys::fuzz_target;
use nandlab::workload::trace::TraceFormat;

fuzz_target!(|data: &[u8]| {
    // The first byte's bit 3 switches to the DiskSim convention; bit 7 the DiskSim variant.
    let format = if data.first().is_some_and(|b| b & 128 != 0) {
        TraceFormat::Disksim
    } else {
        TraceFormat::Mqsim
    };
    common::read_all(Some(format), data);
});
