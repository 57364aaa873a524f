//! Bad input found after parsing, and conflicting options: exit 2 naming
//! the file, line and key, or the options, and what was expected.

use std::process::Command;

fn nandlab(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bs_and_bsrange_together_exit_2_naming_both() {
    for mode in ["stress", "crash"] {
        let (code, out, err) = nandlab(&[mode, "--preset", "tiny", "--bs", "4k", "--bsrange", "4k-16k"]);
        assert_eq!(code, 2, "{mode}: {out}{err}");
        assert!(err.contains("--bs") && err.contains("--bsrange"), "{mode}: {err}");
    }
}

#[test]
fn a_gc_free_percent_that_is_not_a_number_from_0_to_100_exits_2_naming_the_option() {
    for value in ["nan", "-5", "inf"] {
        let opt = format!("gc_foreground_free_percent={value}");
        let (code, out, err) = nandlab(&["stress", "--preset", "tiny", "--write_size", "0.1x", "--ftl-opt", &opt]);
        assert_eq!(code, 2, "{value}: {out}{err}");
        assert!(err.contains("gc_foreground_free_percent") && err.contains("0 to 100"), "{value}: {err}");
    }
}

/// A copy of the `tiny` preset with `from` replaced by `to`, and the line `to` is on.
fn config_with(dir: &std::path::Path, from: &str, to: &str) -> (String, usize) {
    let preset = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../presets/tiny.toml");
    let text = std::fs::read_to_string(preset).unwrap();
    assert!(text.contains(from), "tiny.toml has `{from}`");
    let text = text.replace(from, to);
    let line = text.lines().position(|l| l == to).unwrap() + 1;
    let path = dir.join("cfg.toml");
    std::fs::write(&path, text).unwrap();
    (path.to_str().unwrap().to_string(), line)
}

#[test]
fn errors_found_after_parsing_name_the_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("gc_policy = \"greedy\"", "gc_policy = \"nonsense\"", "`ftl.gc_policy`", "choose from greedy"),
        ("rwmixread = 30", "rwmixread = 101", "`workload.rwmixread`", "0..=100"),
        (
            "spare_percent = 15",
            "logical_sectors = 131071",
            "`device.logical_sectors`",
            "at most 131064 logical sectors",
        ),
    ];
    for (from, to, key, why) in cases {
        let (config, line) = config_with(dir.path(), from, to);
        for mode in ["stress", "crash"] {
            let (code, out, err) = nandlab(&[mode, "--config", &config, "--write_size", "0.01x"]);
            assert_eq!(code, 2, "{mode} {to}: {out}{err}");
            assert!(err.contains(&format!("{config}:{line}: {key}: ")), "{mode} {to}: {err}");
            assert!(err.contains(why), "{mode} {to}: {err}");
        }
    }
}

#[test]
fn errors_about_values_set_on_the_command_line_name_the_option() {
    let cases: [(&[&str], &str); 4] = [
        (&["stress", "--preset", "tiny", "--rwmixread", "101"], "--rwmixread 101: must be within 0..=100"),
        (&["stress", "--preset", "tiny", "--ftl-opt", "gc_policy=nonsense"], "--ftl-opt gc_policy=nonsense: unknown"),
        (&["crash", "--preset", "tiny", "--gc-policy", "nonsense"], "--gc-policy nonsense: unknown"),
        (&["stress", "--preset", "tiny", "--ftl-opt", "op=3"], "--ftl-opt op=3: ftl `page`: unknown option `op`"),
    ];
    for (args, expected) in cases {
        let (code, out, err) = nandlab(args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

#[test]
fn a_bad_timing_override_names_the_option_and_what_is_accepted() {
    let (code, out, err) = nandlab(&["perf", "--preset", "tiny-timed", "--timing", "read_latency_us=abc"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--timing read_latency_us=abc: "), "{err}");
    assert!(err.contains("a number (40), or one per page type"), "{err}");
    assert!(!err.contains("untagged"), "{err}");
}

#[test]
fn bench_perf_refuses_a_preset_it_does_not_run_before_running_anything() {
    let (code, out, err) = nandlab(&["bench", "perf", "--runs", "1", "--preset", "tiny"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--preset tiny: not a bench perf device (one of mqsim-default, mqsim-compat)"), "{err}");
    assert!(!out.contains("mqsim-s1:"), "nothing ran: {out}");
}

#[test]
fn bench_perf_refuses_an_mqsim_that_is_not_an_executable_before_running_anything() {
    let (code, out, err) = nandlab(&["bench", "perf", "--runs", "1", "--mqsim", "/nonexistent/MQSim"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--mqsim /nonexistent/MQSim"), "{err}");
    assert!(!out.contains("mqsim-s1:"), "nothing ran: {out}");
    let dir = std::env::temp_dir().join(format!("nandlab-errors-mqsim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (code, out, err) = nandlab(&["bench", "perf", "--mqsim", dir.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("not an executable file"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
