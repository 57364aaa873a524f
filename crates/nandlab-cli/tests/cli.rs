//! The `nandlab` binary: exit codes, errors, reports.

use std::process::Command;

fn nandlab(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn a_clean_run_exits_0_prints_a_summary_and_writes_json() {
    let json = std::env::temp_dir().join(format!("nandlab-cli-{}.json", std::process::id()));
    let (code, out, err) =
        nandlab(&["stress", "--preset", "tiny", "--seed", "5", "--remount", "--json", json.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("PASS"), "{out}");
    assert!(err.contains("seed 5"), "the seed is printed: {err}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).ok();
    for key in [
        "schema_version",
        "seed",
        "preset",
        "ftl",
        "wall_seconds",
        "host",
        "flash",
        "waf",
        "waf_steady",
        "gc",
        "violations",
        "effective_host_gbps",
        "peak_rss_bytes",
    ] {
        assert!(report.get(key).is_some(), "report lacks `{key}`");
    }
    for key in ["write_bytes", "read_bytes", "write_requests", "read_requests", "flush_requests", "trim_requests"] {
        assert!(report["host"].get(key).is_some(), "host lacks `{key}`");
    }
    for key in ["page_programs", "page_reads", "block_erases", "copybacks"] {
        assert!(report["flash"].get(key).is_some(), "flash lacks `{key}`");
    }
    assert_eq!(report["seed"], 5);
    assert!(report["reproduce"].as_str().unwrap().contains("--seed 5"));
}

#[test]
fn a_seed_is_drawn_and_printed_when_absent() {
    let (code, _, err) = nandlab(&["stress", "--preset", "tiny", "--write_size", "0.2x"]);
    assert_eq!(code, 0);
    assert!(err.contains(", seed "), "{err}");
}

#[test]
fn violations_exit_1_with_context_and_a_reproducer() {
    let (code, out, _) =
        nandlab(&["stress", "--preset", "tiny", "--seed", "3", "--ftl", "buggy", "--ftl-opt", "bug=gc-stale-remap"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAIL"), "{out}");
    assert!(out.contains("stale_read") && out.contains("request"), "{out}");
    assert!(out.contains("Reproduce with:") && out.contains("--seed 3"), "{out}");
}

#[test]
fn bad_input_exits_2_with_a_clear_error() {
    let cases: &[(&[&str], &str)] = &[
        (&["stress", "--preset", "nope"], "unknown preset"),
        (&["stress"], "--preset"),
        (&["stress", "--preset", "tiny", "--bs", "1000"], "`bs`"),
        (&["stress", "--preset", "tiny", "--rw", "sideways"], "--rw"),
        (&["stress", "--preset", "tiny", "--ftl", "nosuch"], "unknown FTL"),
        (&["stress", "--preset", "tiny", "--ftl-opt", "gc_policy=random-walk"], "gc_policy"),
        (&["stress", "--preset", "tiny", "--rule", "stale_read=allow"], "always an error"),
        (&["stress", "--config", "/nonexistent/device.toml"], "cannot read"),
        (&["stress", "--preset", "tiny", "--ftl", "dftl", "--cmt-bytes", "4x"], "`cmt_bytes`"),
        (&["stress", "--preset", "tiny", "--ftl", "dftl", "--cmt-bytes", "lots"], "`cmt_bytes`"),
        (&["stress", "--preset", "tiny", "--ftl", "dftl", "--cmt-bytes", "4"], "`cmt_bytes`"),
        (&["stress", "--preset", "tiny", "--hot-cold", "lukewarm"], "`hot_cold`"),
        (&["stress", "--preset", "tiny", "--hot-cold", "dac:9"], "`hot_cold`"),
        (&["stress", "--preset", "tiny", "--wear-leveling", "static:threshold=0"], "`wear_leveling`"),
        (&["stress", "--preset", "tiny", "--gc-policy", "d-choices:0"], "`gc_policy`"),
        (&["stress", "--preset", "tiny", "--hot-cold", "dac", "--ftl-opt", "gc_stream=shared"], "gc_stream"),
        (
            &["stress", "--preset", "tiny", "--ftl", "hybrid", "--ftl-opt", "random_log_blocks=100000"],
            "random_log_blocks",
        ),
        (&["stress", "--preset", "tiny", "--ftl", "block", "--ftl-opt", "log_blocks=3"], "log_blocks"),
    ];
    for (args, needle) in cases {
        let (code, out, err) = nandlab(args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(needle), "{args:?}: expected `{needle}` in: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn a_bad_config_file_names_file_line_and_field() {
    let path = std::env::temp_dir().join(format!("nandlab-bad-{}.toml", std::process::id()));
    std::fs::write(&path, "[geometry]\nchannels = 2\nchips_per_channel = 1\ndies_per_chip = 1\nplanes_per_die = 1\nblocks_per_plane = 0\npages_per_block = 8\npage_size_bytes = 4096\noob_size_bytes = 64\nsector_size_bytes = 512\n").unwrap();
    let (code, _, err) = nandlab(&["stress", "--config", path.to_str().unwrap()]);
    std::fs::remove_file(&path).ok();
    assert_eq!(code, 2);
    assert!(err.contains(":6:") && err.contains("geometry.blocks_per_plane"), "{err}");
}

#[test]
fn listings_name_what_exists() {
    let (code, out, _) = nandlab(&["presets"]);
    assert_eq!(code, 0);
    for p in ["tiny", "femu-bbssd", "vst-jasmine", "mqsim-default"] {
        assert!(out.contains(p), "{out}");
    }
    let (_, out, _) = nandlab(&["ftls"]);
    assert!(out.contains("page") && out.contains("gc_policy"), "{out}");
    for needle in
        ["dftl", "hybrid", "block", "cmt_bytes", "random_log_blocks", "hot_cold", "wear_leveling", "d-choices"]
    {
        assert!(out.contains(needle), "`nandlab ftls` documents {needle}: {out}");
    }
    let (_, out, _) = nandlab(&["rules"]);
    assert!(out.contains("program_out_of_order") && out.contains("stale_read"), "{out}");
}

#[test]
fn every_ftl_and_policy_runs_from_the_command_line() {
    let runs: &[&[&str]] = &[
        &["--ftl", "dftl", "--cmt-bytes", "8KiB"],
        &["--ftl", "dftl", "--cmt-bytes", "25%", "--hot-cold", "two-stream", "--wear-leveling", "dynamic"],
        &["--ftl", "hybrid", "--ftl-opt", "random_log_blocks=8"],
        &["--ftl", "block"],
        &["--gc-policy", "cost-benefit", "--hot-cold", "dac:4", "--wear-leveling", "static:threshold=4"],
        &["--gc-policy", "windowed-greedy:8"],
    ];
    for extra in runs {
        let mut args = vec!["stress", "--preset", "tiny", "--seed", "1", "--write_size", "1.5x", "--remount"];
        args.extend_from_slice(extra);
        let (code, out, err) = nandlab(&args);
        assert_eq!(code, 0, "{extra:?}: {out}{err}");
        assert!(out.contains("PASS") && out.contains("  ftl "), "{extra:?}: per-FTL metrics are printed: {out}");
    }
}

#[test]
fn crash_exits_0_when_clean_and_prints_the_seed() {
    let (code, out, err) =
        nandlab(&["crash", "--preset", "tiny", "--write_size", "0.3x", "--crash-points", "20", "--seed", "4"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("PASS") && out.contains("points/s"), "{out}");
    assert!(err.contains("seed 4"), "{err}");
}

#[test]
fn crash_findings_exit_1_with_a_shrunk_reproducer_that_reproduces() {
    let args = [
        "crash",
        "--preset",
        "tiny",
        "--guarantee",
        "optr",
        "--rw",
        "randwrite",
        "--bs",
        "32k",
        "--write_size",
        "0.3x",
        "--crash-phase",
        "between",
        "--crash-points",
        "30",
        "--seed",
        "5",
    ];
    let (code, out, _) = nandlab(&args);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("torn_write_request"), "{out}");
    let cmd = out.lines().skip_while(|l| !l.starts_with("Reproduce")).nth(1).expect("a reproducer").trim().to_string();
    assert!(cmd.contains("--crash-at") && cmd.contains("--seed 5"), "{cmd}");
    let again: Vec<&str> = cmd.split_whitespace().skip(1).collect();
    let (code, out, _) = nandlab(&again);
    assert_eq!(code, 1, "the reproducer reproduces: {out}");
}

#[test]
fn crash_bad_input_exits_2_naming_the_option() {
    let cases: &[(&[&str], &str)] = &[
        (&["crash", "--preset", "tiny", "--power-cut", "sparks=on"], "--power-cut"),
        (&["crash", "--preset", "tiny", "--crash-at", "12:sideways"], "--crash-at"),
        (&["crash", "--preset", "tiny", "--crash-every", "0"], "--crash-every"),
        (&["crash", "--preset", "tiny", "--warmup", "lots"], "--warmup"),
        (&["crash", "--preset", "tiny", "--ftl", "optr", "--ftl-opt", "cache_pages=many"], "cache_pages"),
    ];
    for (args, needle) in cases {
        let (code, out, err) = nandlab(args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(needle), "{args:?}: expected `{needle}` in: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
