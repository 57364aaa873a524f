//! Fuzz the configuration loader: any text either loads into a valid
//! configuration or is rejected with an error naming a location — never a
//! panic. Configurations that load must also build a drive without
//! panicking (the geometry and FTL options are validated up front).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nandlab::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Config::parse(text, "fuzz.toml") {
        Ok(config) => {
            // Keep the drive small enough to build quickly.
            if config.geometry.pages() <= 1 << 16 {
                let _ = nandlab::run::Session::new(&config, 1, 1, 4);
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
