//! Output files (`--json`, `--timeseries`, `trace convert -o`): checked
//! before the run, never an input or another output, written atomically.

use std::path::{Path, PathBuf};
use std::process::Command;

fn nandlab(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A scratch directory holding a copy of a preset's configuration file.
fn with_config(preset: &str) -> (tempfile::TempDir, PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../presets").join(preset)).unwrap();
    let config = dir.path().join("base.toml");
    std::fs::write(&config, &text).unwrap();
    (dir, config, text)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn stress_refuses_a_json_report_over_its_config_and_leaves_the_config_unchanged() {
    let (_dir, config, text) = with_config("tiny.toml");
    let (code, out, err) = nandlab(&["stress", "--config", s(&config), "--json", s(&config), "--write_size", "0.1x"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--json") && err.contains("input file") && err.contains("--config"), "{err}");
    assert!(!err.contains("nandlab stress:"), "refused before the run: {err}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), text, "the configuration is untouched");
}

#[test]
fn crash_refuses_a_json_report_that_is_a_link_to_its_config() {
    let (dir, config, text) = with_config("tiny.toml");
    let link = dir.path().join("report.json");
    std::os::unix::fs::symlink(&config, &link).unwrap();
    let (code, out, err) = nandlab(&["crash", "--config", s(&config), "--json", s(&link), "--crash-points", "2"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("input file"), "{err}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), text);
}

#[test]
fn stress_refuses_a_json_report_over_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    let text = "128166372003061629,hm,1,Write,4096,4096,1\n128166372003061630,hm,1,Read,4096,4096,1\n";
    std::fs::write(&trace, text).unwrap();
    let (code, out, err) = nandlab(&["stress", "--preset", "tiny", "--trace", s(&trace), "--json", s(&trace)]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--trace"), "{err}");
    assert_eq!(std::fs::read_to_string(&trace).unwrap(), text);
}

#[test]
fn perf_refuses_a_time_series_and_a_json_report_in_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("out");
    let (code, out, err) =
        nandlab(&["perf", "--preset", "tiny-timed", "--requests", "50", "--timeseries", s(&f), "--json", s(&f)]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--json") && err.contains("--timeseries") && err.contains("same file"), "{err}");
    assert!(!f.exists(), "nothing written");
    let (code, out, err) =
        nandlab(&["perf", "--preset", "tiny-timed", "--requests", "50", "--timeseries", "-", "--json", "-"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("standard output"), "{err}");
}

#[test]
fn an_unwritable_json_directory_exits_2_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir").join("r.json");
    for mode in ["stress", "crash"] {
        let (code, out, err) = nandlab(&[mode, "--preset", "tiny", "--json", s(&missing)]);
        assert_eq!(code, 2, "{mode}: {out}{err}");
        assert!(err.contains("--json") && err.contains("no-such-dir"), "{mode}: {err}");
        assert!(!err.contains(&format!("nandlab {mode}:")), "{mode}: refused before the run: {err}");
    }
    let (code, out, err) = nandlab(&["perf", "--preset", "tiny-timed", "--timeseries", s(&missing)]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--timeseries"), "{err}");
    assert!(!err.contains("nandlab perf:"), "refused before the run: {err}");
}

#[test]
fn perf_writes_both_outputs_in_place_and_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let csv = dir.path().join("t.csv");
    std::fs::write(&json, "old").unwrap();
    let (code, out, err) = nandlab(&[
        "perf",
        "--preset",
        "tiny-timed",
        "--requests",
        "200",
        "--no-progress",
        "--seed",
        "3",
        "--interval",
        "1ms",
        "--json",
        s(&json),
        "--timeseries",
        s(&csv),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["seed"], 3);
    assert!(std::fs::read_to_string(&csv).unwrap().lines().count() > 1);
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 2, "only the two outputs: {names:?}");
}
