//! Fuzz format sniffing and the reader behind it (`--trace-format auto`).
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    common::read_all(None, data);
});
