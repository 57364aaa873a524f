//! Fuzz the reader of `serve --drive` files: the input is a whole file
//! (header, device description, checksummed chunks of state). Reading must
//! refuse a damaged file with an error — never panic, hang or allocate
//! beyond what the device's geometry bounds. The checksums would stop
//! most mutations at the first chunk, so half of the inputs get their
//! CRCs recomputed to reach the state parser behind them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nandlab::config::Config;
use nandlab::run::serve::drive_file::{describe_device, file_of_state, load_bytes};

thread_local! {
    static CONFIG: (Config, u32) = {
        let config = Config::preset("tiny").expect("the tiny preset");
        let factory = nandlab::run::registry_factory(&config.ftl_name, &config.ftl_options);
        let (oob, _) = nandlab::run::drive::Drive::ftl_needs(&config, &factory, 0).expect("the page FTL");
        (config, oob)
    };
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let file = if mode & 1 == 0 { rest.to_vec() } else { with_valid_crcs(rest) };
    CONFIG.with(|(config, oob)| {
        if let Err(e) = load_bytes(&file, config, *oob) {
            assert!(!e.is_empty());
        }
    });
});

/// `state` as the state stream of a well-formed file for the tiny device.
fn with_valid_crcs(state: &[u8]) -> Vec<u8> {
    CONFIG.with(|(config, oob)| file_of_state(&describe_device(config, *oob), state))
}
