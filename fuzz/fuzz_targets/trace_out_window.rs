//! Fuzz `perf --trace-out-window START..END`: arbitrary text never panics,
//! and a window accepted is never empty.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nandlab::timing::trace_out::parse_window;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(w) = parse_window(text) {
            assert!(w.end_ns.is_none_or(|e| e > w.start_ns), "{text:?} gave an empty window {w:?}");
        }
    }
});
