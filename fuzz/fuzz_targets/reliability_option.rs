//! Fuzz the media reliability options: any `--reliability` text and any
//! `--fail` text are either accepted (and then build a drive) or rejected
//! with an error naming the option — never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nandlab::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // The first line is the --reliability value, the others --fail values.
    let mut lines = text.lines();
    let spec = lines.next().unwrap_or("");
    let fails: Vec<String> = lines.map(str::to_string).collect();
    let mut config = Config::preset("tiny").expect("tiny");
    match config.set_reliability(Some(spec), &fails) {
        Ok(()) => {
            let _ = nandlab::run::Session::new(&config, 1, 1, 4);
        }
        Err(e) => assert!(e.starts_with("--reliability ") || e.starts_with("--fail "), "{e}"),
    }
});
