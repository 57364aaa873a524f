//! Fuzz the fio trace reader: arbitrary bytes never panic.
#![no_main]

use nandlab_fuzz as common;

use libfuzzer_sys::fuzz_target;
use nandlab::workload::trace::TraceFormat;

fuzz_target!(|data: &[u8]| {
    common::read_all(Some(TraceFormat::Fio), data);
});
