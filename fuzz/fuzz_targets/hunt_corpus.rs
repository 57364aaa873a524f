//! Fuzz what a hunt reads back: a corpus entry file (`--corpus DIR`) and a
//! `--splice NAME=SEED,...` value are either accepted, and then draw a
//! run's configuration, or rejected with a message — never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nandlab::config::Config;
use nandlab::run::hunt::{guide, swarm};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let config = Config::preset("tiny").expect("tiny");
    if let Ok(entry) = guide::Entry::parse(text) {
        let _ = entry.genes.draw(&config, "dftl").describe();
    }
    match swarm::parse_splice(text) {
        Ok(splice) => {
            let s = swarm::Swarm::draw_spliced(&config, "page", 1, &Default::default(), &splice, Some(100));
            assert!(s.requests <= 100);
        }
        Err(e) => assert!(!e.is_empty()),
    }
});
