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
