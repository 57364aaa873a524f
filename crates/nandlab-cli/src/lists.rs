//! `nandlab presets`, `nandlab ftls`, `nandlab rules`: what the library ships, listed.

use nandlab::config::{Config, PRESETS};
use nandlab::ftl;
use nandlab::violation::Rule;
use std::process::ExitCode;

/// The device presets: name, description and source.
pub fn presets() -> ExitCode {
    for (name, _) in PRESETS {
        match Config::preset(name) {
            Ok(c) => println!("{name:16} {}\n{:16} source: {}", c.description, "", c.source),
            Err(e) => println!("{name:16} (invalid: {e})"),
        }
    }
    ExitCode::SUCCESS
}

/// The FTLs and their options.
pub fn ftls() -> ExitCode {
    for d in ftl::registry() {
        println!("{} — {}", d.name, d.summary);
        for o in d.options {
            println!("    {:36} default {:10} {}", o.name, o.default, o.help);
        }
    }
    ExitCode::SUCCESS
}

/// The rules nandlab checks, their group and default severity.
pub fn rules() -> ExitCode {
    for r in Rule::ALL {
        let group = if r.is_nand_rule() {
            "nand"
        } else if r.is_media_rule() {
            "media"
        } else {
            "oracle"
        };
        println!(
            "{:22} {:6} default {:6} {}",
            r.name(),
            group,
            format!("{:?}", r.default_severity()).to_lowercase(),
            r.description()
        );
    }
    ExitCode::SUCCESS
}
