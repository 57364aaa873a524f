//! The `nandlab` binary on devices too small for an FTL: each FTL either
//! runs or refuses the device at format (exit 2, naming what it needs and
//! the setting to change) — never a hang, never `no free space` at run time.

mod support;

use std::time::Duration;

/// The FTLs that ship (`buggy` exists to prove the checkers and is left out).
const FTLS: [&str; 5] = ["page", "dftl", "hybrid", "block", "optr"];

/// Run `nandlab` to completion; a run that has not ended after a few minutes
/// is killed and fails the test (the defect was an endless GC loop).
fn nandlab(args: &[&str]) -> (i32, String) {
    let out = support::nandlab_within(args, Duration::from_secs(300));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// The `tiny` preset with `replace` applied (each `(from, to)` must match a line).
fn config(name: &str, replace: &[(&str, &str)]) -> std::path::PathBuf {
    let preset = concat!(env!("CARGO_MANIFEST_DIR"), "/../../presets/tiny.toml");
    let mut text = std::fs::read_to_string(preset).expect("tiny preset");
    for (from, to) in replace {
        assert!(text.contains(from), "tiny.toml has no `{from}`");
        text = text.replacen(from, to, 1);
    }
    let path = std::env::temp_dir().join(format!("nandlab-capacity-{name}-{}.toml", std::process::id()));
    std::fs::write(&path, text).expect("write config");
    path
}

/// A run on `path` with `ftl`: exit 0 with a clean result, or exit 2 at
/// format with a message naming the minimum (`at least`).
fn runs_or_is_refused_at_format(path: &std::path::Path, ftl: &str) -> (i32, String) {
    let (code, out) =
        nandlab(&["stress", "--config", path.to_str().unwrap(), "--ftl", ftl, "--seed", "1", "--no-progress"]);
    match code {
        0 => assert!(out.contains("PASS"), "{ftl}: {out}"),
        2 => assert!(!out.contains("result "), "{ftl}: refused before the run: {out}"),
        _ => panic!("{ftl} on {}: exit {code}, neither a run nor a refusal at format: {out}", path.display()),
    }
    (code, out)
}

/// 49.9 % (and 14 %) of `tiny`'s blocks bad leave less than its logical
/// space: `page` collected forever, `dftl` and `optr` ran out of space at
/// run time. Every FTL refuses at format and says what it needs.
#[test]
fn factory_bad_blocks_beyond_the_spare_are_refused_at_format_naming_the_numbers() {
    for percent in ["49.9", "14"] {
        let line = format!("spare_percent = 15\nfactory_bad_block_percent = {percent}");
        let path = config(&format!("bad{percent}"), &[("spare_percent = 15", &line)]);
        for ftl in FTLS {
            let (code, out) = runs_or_is_refused_at_format(&path, ftl);
            if ["page", "dftl", "optr"].contains(&ftl) || percent == "49.9" {
                assert_eq!(code, 2, "{ftl} with {percent} % bad blocks: {out}");
                assert!(out.contains("failed to format the device"), "{ftl}: {out}");
                assert!(out.contains("good blocks"), "{ftl} names the good blocks: {out}");
            }
            if ["page", "dftl", "optr"].contains(&ftl) {
                assert!(out.contains("needs at least"), "{ftl} names the minimum: {out}");
                assert!(out.contains("factory_bad_block_percent"), "{ftl} names the setting: {out}");
            }
        }
        std::fs::remove_file(&path).ok();
    }
}

/// Small geometries reached `no free space` at run time (exit 1) with
/// `page` and `dftl`: every FTL runs on them or refuses them at format
/// naming the minimum (a setting and its value).
#[test]
fn small_geometries_run_or_are_refused_at_format_with_the_minimum() {
    let shapes: [(&str, &[(&str, &str)]); 4] = [
        (
            "planes16-blocks8",
            &[("planes_per_die = 2", "planes_per_die = 16"), ("blocks_per_plane = 64", "blocks_per_plane = 8")],
        ),
        ("blocks3", &[("blocks_per_plane = 64", "blocks_per_plane = 3")]),
        ("pages2", &[("pages_per_block = 32", "pages_per_block = 2")]),
        (
            "mib-pages",
            &[
                ("page_size_bytes = 4096", "page_size_bytes = 1048576"),
                ("blocks_per_plane = 64", "blocks_per_plane = 4"),
            ],
        ),
    ];
    for (name, replace) in shapes {
        let path = config(name, replace);
        for ftl in FTLS {
            let (code, out) = runs_or_is_refused_at_format(&path, ftl);
            if code == 2 {
                assert!(out.contains("at least"), "{ftl} on {name} names the minimum: {out}");
            }
            if ftl == "page" || (ftl == "dftl" && name != "pages2") {
                assert_eq!(code, 2, "{ftl} on {name}: {out}");
                assert!(out.contains("needs at least"), "{ftl} on {name}: {out}");
                assert!(
                    out.contains("spare_percent` at least") || out.contains("blocks_per_plane` to at least"),
                    "{out}"
                );
            }
        }
        std::fs::remove_file(&path).ok();
    }
}
