//! `nandlab perf` from the command line: reports, files, exit codes.

mod support;

use std::process::Command;

fn nandlab(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run `nandlab perf ARGS --json FILE`: exit code, stdout, stderr and the report.
fn perf_json(name: &str, args: &[&str]) -> (i32, String, String, serde_json::Value) {
    let json = std::env::temp_dir().join(format!("nandlab-perf-{name}-{}.json", std::process::id()));
    let mut all = vec!["perf"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--no-progress", "--json", json.to_str().unwrap()]);
    let (code, stdout, stderr) = nandlab(&all);
    let report = std::fs::read_to_string(&json).ok().and_then(|t| serde_json::from_str(&t).ok());
    std::fs::remove_file(&json).ok();
    (code, stdout, stderr, report.unwrap_or_default())
}

#[test]
fn perf_writes_json_and_a_csv_time_series() {
    let dir = std::env::temp_dir().join(format!("nandlab-perf-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("r.json");
    let csv = dir.join("t.csv");
    let (code, stdout, stderr) = nandlab(&[
        "perf",
        "--preset",
        "tiny-timed",
        "--rw",
        "randrw",
        "--bs",
        "4k",
        "--iodepth",
        "8",
        "--write_size",
        "1x",
        "--seed",
        "3",
        "--interval",
        "10ms",
        "--no-progress",
        "--remount",
        "--json",
        json.to_str().unwrap(),
        "--timeseries",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("bottleneck"), "{stdout}");
    assert!(stdout.contains("sectors verified"), "{stdout}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["mode"], "perf");
    assert!(report["perf"]["latency"]["write"]["p99_99_us"].as_f64().unwrap() > 0.0);
    assert_eq!(report["errors"], 0);
    let series = std::fs::read_to_string(&csv).unwrap();
    assert!(series.starts_with("start_s,length_s,reads,writes,iops,"));
    assert!(series.lines().count() > 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_perf_input_exits_2_with_a_clear_message() {
    let (code, _, err) = nandlab(&["perf", "--preset", "tiny", "--no-progress"]);
    assert_eq!(code, 2);
    assert!(err.contains("no [timing] table"), "{err}");
    let (code, _, err) =
        nandlab(&["perf", "--preset", "tiny-timed", "--timing", "erase_latency_us=-3", "--no-progress"]);
    assert_eq!(code, 2);
    assert!(err.contains("erase_latency_us"), "{err}");
    let (code, _, err) = nandlab(&[
        "perf",
        "--preset",
        "tiny-timed",
        "--host",
        "interface=\"sata\"",
        "--host",
        "queues=1",
        "--host",
        "queue_depth=32",
        "--no-progress",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("sata_gbps"), "{err}");
    let (code, _, err) = nandlab(&["perf", "--preset", "tiny-timed", "--runtime", "soon"]);
    assert_eq!(code, 2);
    assert!(err.contains("--runtime"), "{err}");
}

#[test]
fn perf_replays_a_trace_open_loop_at_its_timestamps() {
    let trace = &support::public_trace("mqsim_tpcc-small.trace");
    let json = std::env::temp_dir().join(format!("nandlab-perf-trace-{}.json", std::process::id()));
    let (code, stdout, stderr) =
        nandlab(&["perf", "--preset", "femu-bbssd", "--trace", trace, "--seed", "1", "--json", json.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("open loop, trace timestamps"), "{stdout}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).ok();
    let text = report.to_string();
    assert!(text.contains("6999"), "all 6,999 trace requests were issued");
    let (code, _, stderr) = nandlab(&["perf", "--preset", "femu-bbssd", "--trace", trace, "--flow", "iodepth=4"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--flow trace=FILE"), "{stderr}");
}

#[test]
fn a_trace_flow_runs_beside_synthetic_flows() {
    let trace = support::public_trace("mqsim_tpcc-small.trace");
    let flow = format!("trace={trace}");
    let args = ["--preset", "femu-bbssd", "--flow", &flow, "--flow", "rw=randwrite,bs=4k,iodepth=4,arrival=rate:20000"];
    // The trace's requests arrive from 0.94 s to 1.08 s.
    let (code, stdout, stderr, report) =
        perf_json("mixed", &[&args[..], &["--runtime", "1200ms", "--seed", "1"]].concat());
    assert_eq!(code, 0, "{stdout}{stderr}");
    let flows = report["perf"]["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2);
    assert!(flows[0]["arrival"].as_str().unwrap().starts_with("open loop, trace timestamps"));
    assert!(flows[0]["requests"].as_u64().unwrap() > 0 && flows[1]["requests"].as_u64().unwrap() > 0);
    assert_eq!(report["errors"], 0);
    let (code, _, stderr) =
        nandlab(&["perf", "--preset", "femu-bbssd", "--flow", &format!("trace={trace},iodepth=4"), "--no-progress"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("only trace=FILE and arrival"), "{stderr}");
}

#[test]
fn a_run_too_short_to_time_reports_no_speed() {
    let (code, stdout, stderr, report) =
        perf_json("short", &["--preset", "tiny-timed", "--requests", "20", "--seed", "1"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("n/a simulated requests per CPU-second"), "{stdout}");
    assert!(stdout.contains("  ftl        ") && stdout.contains("  wear       "), "{stdout}");
    assert!(report["perf"]["requests_per_cpu_second"].is_null());
    assert!(report["perf"]["host_mb_per_cpu_second"].is_null());
    assert_eq!(report["perf"]["requests"], 20);
}

/// A scratch file of this test process.
fn scratch(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("nandlab-perf-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn durations_past_one_second_in_a_device_file_exit_2_naming_file_line_key_and_bound() {
    let preset = include_str!("../../../presets/tiny-timed.toml");
    for (key, value) in [
        ("firmware_ns_per_request", "1e18"),
        ("firmware_ns_per_request", "1e12"),
        ("command_latency_ns", "1e20"),
        ("read_latency_us", "1e9"),
    ] {
        let line = preset.lines().position(|l| l.starts_with(&format!("{key} ="))).expect("the preset sets it") + 1;
        let text: String = preset
            .lines()
            .map(|l| if l.starts_with(&format!("{key} =")) { format!("{key} = {value}") } else { l.into() })
            .map(|l| l + "\n")
            .collect();
        let path = scratch(&format!("{key}.toml"), &text);
        let (code, stdout, err) = nandlab(&["perf", "--config", path.to_str().unwrap(), "--no-progress"]);
        std::fs::remove_file(&path).ok();
        assert_eq!(code, 2, "{key} = {value}: {stdout}{err}");
        assert!(err.contains(&format!("{}:{line}", path.display())), "{key} = {value}: {err}");
        assert!(err.contains(key) && err.contains("(1 s)"), "{key} = {value}: {err}");
        assert!(!stdout.contains("bottleneck"), "nothing ran: {stdout}");
    }
    let (code, _, err) =
        nandlab(&["perf", "--preset", "tiny-timed", "--host", "command_overhead_ns=1e20", "--no-progress"]);
    assert_eq!(code, 2);
    assert!(err.contains("--host command_overhead_ns") && err.contains("10^9 ns (1 s)"), "{err}");
}

#[test]
fn perf_requests_0_exits_2_naming_the_option() {
    let (code, stdout, err) = nandlab(&["perf", "--preset", "tiny-timed", "--requests", "0", "--no-progress"]);
    assert_eq!(code, 2, "{stdout}{err}");
    assert!(err.contains("--requests: must be at least 1"), "{err}");
    assert!(!stdout.contains("bottleneck"), "{stdout}");
}

#[test]
fn outstanding_requests_and_arrival_rates_past_their_bounds_exit_2_with_the_bound() {
    let (code, _, err) =
        nandlab(&["perf", "--preset", "tiny-timed", "--numjobs", "4096", "--iodepth", "65535", "--no-progress"]);
    assert_eq!(code, 2);
    assert!(err.contains("--numjobs x --iodepth") && err.contains("at most 1048576"), "{err}");
    let (code, _, err) = nandlab(&["perf", "--preset", "tiny-timed", "--arrival", "rate:1e-9", "--no-progress"]);
    assert_eq!(code, 2);
    assert!(err.contains("--arrival") && err.contains("at least 0.001 IOPS"), "{err}");
    let (code, _, err) = nandlab(&["perf", "--preset", "tiny-timed", "--interval", "1e12s", "--no-progress"]);
    assert_eq!(code, 2);
    assert!(err.contains("--interval") && err.contains("2^62 ns"), "{err}");
}

#[test]
fn a_trace_time_past_the_end_of_simulated_time_exits_2() {
    let trace = scratch("far.trace", "0 0 0 8 0\n1000 0 8 8 1\n18446744073709551615 0 16 8 0\n");
    let (code, stdout, err) = nandlab(&[
        "perf",
        "--preset",
        "tiny-timed",
        "--trace",
        trace.to_str().unwrap(),
        "--trace-format",
        "mqsim",
        "--no-progress",
    ]);
    std::fs::remove_file(&trace).ok();
    assert_eq!(code, 2, "{stdout}{err}");
    assert!(err.contains("18446744073709551615 ns") && err.contains("past its end"), "{err}");
}

#[test]
fn a_one_nanosecond_interval_gives_a_bounded_series_and_says_its_interval() {
    let (code, stdout, err, report) =
        perf_json("1ns", &["--preset", "tiny-timed", "--interval", "1ns", "--requests", "2000", "--seed", "1"]);
    assert_eq!(code, 0, "{stdout}{err}");
    let p = &report["perf"];
    assert!(p["timeseries"].as_array().unwrap().len() <= 65_536);
    assert!(p["timeseries_interval_s"].as_f64().unwrap() > 1e-9, "the interval doubled");
}

#[test]
fn a_drive_taking_a_second_per_request_reports_its_true_small_iops() {
    let (code, stdout, err, report) = perf_json(
        "slow",
        &["--preset", "tiny-timed", "--host", "firmware_ns_per_request=1e9", "--requests", "10", "--seed", "1"],
    );
    assert_eq!(code, 0, "{stdout}{err}");
    let iops = report["perf"]["iops"].as_f64().unwrap();
    assert!(iops > 0.9 && iops < 1.0, "{iops}");
    let (code, stdout, err, _) =
        perf_json("slower", &["--preset", "tiny-timed", "--arrival", "rate:0.001", "--requests", "3", "--seed", "1"]);
    assert_eq!(code, 0, "{stdout}{err}");
    assert!(stdout.contains("3 requests: 0.0015 IOPS"), "not 0 IOPS: {stdout}");
}

#[test]
fn scheduler_runs_on_the_event_core_and_a_bad_one_exits_2_naming_the_choices() {
    let base = ["--preset", "tiny-timed", "--rw", "randrw", "--bs", "4k", "--iodepth", "8", "--requests", "2000"];
    let (code, stdout, stderr, report) = perf_json("sched-default", &base);
    assert_eq!(code, 0, "{stderr}");
    assert!(report["perf"].get("scheduler").is_none(), "the default report has no scheduler field");
    assert!(!stdout.contains("event core"), "{stdout}");
    let mut args = base.to_vec();
    args.extend(["--scheduler", "mqsim"]);
    let (code, stdout, stderr, report) = perf_json("sched-mqsim", &args);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["perf"]["scheduler"], "mqsim");
    assert_eq!(report["perf"]["completed"], 2000);
    assert!(stdout.contains("event core, scheduler mqsim"), "{stdout}");
    let mut bad = base.to_vec();
    bad.extend(["--scheduler", "lifo"]);
    let (code, _, stderr, _) = perf_json("sched-bad", &bad);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--scheduler `lifo`") && stderr.contains("reservation, fifo, mqsim, read-priority"),
        "{stderr}"
    );
    let (code, _, stderr, _) =
        perf_json("sched-bad-timing", &[&base[..], &["--timing", "scheduler=\"lifo\""]].concat());
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("scheduler") && stderr.contains("`lifo`"), "{stderr}");
}
