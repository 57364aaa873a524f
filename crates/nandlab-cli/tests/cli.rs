//! The `nandlab` binary: exit codes, errors, reports.

mod support;

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
    let json = std::env::temp_dir().join(format!("nandlab-cli-violation-{}.json", std::process::id()));
    let (code, out, _) = nandlab(&[
        "stress",
        "--preset",
        "tiny",
        "--seed",
        "3",
        "--ftl",
        "buggy",
        "--ftl-opt",
        "bug=gc-stale-remap",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAIL"), "{out}");
    assert!(out.contains("stale_read") && out.contains("request"), "{out}");
    assert!(out.contains("data from physical page"), "the physical address is named: {out}");
    assert!(out.contains("Reproduce with:") && out.contains("--seed 3"), "{out}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).ok();
    assert_eq!(report["schema_version"], 2);
    let v = &report["violations"][0];
    assert_eq!(v["rule"], "stale_read");
    assert!(v["address"].is_u64(), "address stays the LBA: {v}");
    for key in ["page", "block", "page_in_block", "sector_in_page", "op_index"] {
        assert!(v["source"][key].is_u64(), "source lacks `{key}`: {v}");
    }
}

#[test]
fn bad_input_exits_2_with_a_clear_error() {
    let cases: &[(&[&str], &str)] = &[
        (&["stress", "--preset", "nope"], "unknown preset"),
        (&["stress"], "--preset"),
        (&["stress", "--preset", "tiny", "--bs", "1000"], "--bs 1000"),
        (&["stress", "--preset", "tiny", "--rw", "sideways"], "--rw"),
        (&["stress", "--preset", "tiny", "--ftl", "nosuch"], "unknown FTL"),
        (&["stress", "--preset", "tiny", "--ftl-opt", "gc_policy=random-walk"], "gc_policy"),
        (&["stress", "--preset", "tiny", "--rule", "stale_read=allow"], "always an error"),
        (&["stress", "--config", "/nonexistent/device.toml"], "cannot read"),
        (&["stress", "--preset", "tiny", "--ftl", "dftl", "--cmt-bytes", "4x"], "--cmt-bytes 4x"),
        (&["stress", "--preset", "tiny", "--ftl", "dftl", "--cmt-bytes", "lots"], "--cmt-bytes lots"),
        (&["stress", "--preset", "tiny", "--ftl", "dftl", "--cmt-bytes", "4"], "--cmt-bytes 4:"),
        (&["stress", "--preset", "tiny", "--hot-cold", "lukewarm"], "--hot-cold lukewarm"),
        (&["stress", "--preset", "tiny", "--hot-cold", "dac:9"], "--hot-cold dac:9"),
        (
            &["stress", "--preset", "tiny", "--wear-leveling", "static:threshold=0"],
            "--wear-leveling static:threshold=0",
        ),
        (&["stress", "--preset", "tiny", "--gc-policy", "d-choices:0"], "--gc-policy d-choices:0"),
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

/// Bad input the audit found: each exits 2 with the cause named (before:
/// a run that never ended, an `ftl_error` exit 1, the wrong field, "0 MiB").
#[test]
fn audited_bad_input_exits_2_naming_the_cause() {
    let tiny = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../presets/tiny.toml")).unwrap();
    let device = |name: &str, from: &str, to: &str| {
        let path = std::env::temp_dir().join(format!("nandlab-{name}-{}.toml", std::process::id()));
        std::fs::write(&path, tiny.replace(from, to)).unwrap();
        path.to_str().unwrap().to_string()
    };
    let oob = device("oob", "oob_size_bytes = 128", "oob_size_bytes = 4");
    let channels = device("channels", "channels = 2", "channels = 4000000000");
    let dram = device("dram", "dram_bytes = \"16m\"", "dram_bytes = \"1000\"");
    let cases: &[(&[&str], &[&str])] = &[
        (&["stress", "--preset", "tiny", "--rwmixread", "100"], &["`write_size`", "`rwmixread`"]),
        (&["stress", "--preset", "tiny", "--trim_percent", "100"], &["`write_size`", "`trim_percent`"]),
        (
            &["stress", "--preset", "tiny", "--rw", "randwrite", "--trim_percent", "100", "--io_size", "1m"],
            &["`io_size`", "`trim_percent`"],
        ),
        (&["stress", "--preset", "tiny", "--rw", "read", "--write_size", "1x"], &["--write_size 1x", "never writes"]),
        (&["stress", "--preset", "tiny", "--io_size", "0"], &["--io_size 0"]),
        (&["stress", "--preset", "tiny", "--size", "2k"], &["--size 2k"]),
        (&["stress", "--preset", "tiny", "--ftl-opt", "op=5"], &["unknown option `op`", "`gc_policy`"]),
        (&["stress", "--config", &oob], &[":15:", "`geometry.oob_size_bytes`", "has 4"]),
        (&["crash", "--config", &oob], &["`geometry.oob_size_bytes`"]),
        (&["stress", "--config", &channels], &["`geometry.channels`", "channels 4000000000 x"]),
        (&["stress", "--config", &dram], &["1000 bytes", "device.dram_bytes"]),
    ];
    for (args, needles) in cases {
        // A hang is the bug being tested for: fail instead of waiting forever.
        let out = support::nandlab_within(args, std::time::Duration::from_secs(120));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}{err}", String::from_utf8_lossy(&out.stdout));
        for needle in *needles {
            assert!(err.contains(needle), "{args:?}: expected `{needle}` in: {err}");
        }
        assert!(!err.contains("option `gc_policy`"), "{args:?}: blames the wrong key: {err}");
        assert!(!err.contains("0 MiB"), "{args:?}: {err}");
    }
    for f in [oob, channels, dram] {
        std::fs::remove_file(f).ok();
    }
}

#[test]
fn stress_and_crash_echo_iodepth_and_say_they_run_one_request_at_a_time() {
    let (code, _, err) = nandlab(&["stress", "--preset", "tiny", "--write_size", "0.05x", "--iodepth", "8"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("note: stress") && err.contains("iodepth=8") && err.contains("one at a time"), "{err}");
    let crash = ["crash", "--preset", "tiny", "--write_size", "0.05x", "--crash-points", "2", "--iodepth", "4"];
    let (code, _, err) = nandlab(&crash);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("note: crash") && err.contains("iodepth=4") && err.contains("one at a time"), "{err}");
    let (_, _, err) = nandlab(&crash[..crash.len() - 2]);
    assert!(!err.contains("one at a time"), "no note without a queue depth: {err}");
}

#[test]
fn a_read_mode_on_the_command_line_ends_at_io_size_instead_of_the_presets_write_size() {
    let (code, out, err) = nandlab(&["stress", "--preset", "tiny", "--rw", "randread", "--io_size", "4m"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = nandlab(&["stress", "--preset", "tiny", "--rw", "randread", "--size", "8m"]);
    assert_eq!(code, 0, "the default io_size is the region: {out}{err}");
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
