//! The trace commands end to end: exit codes, bad-line messages, skipped
//! lines in the summary and JSON, stats counts, convert, stress --trace.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nandlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).output().expect("nandlab runs")
}

fn shared(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces").join(name).display().to_string()
}

fn temp(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nandlab-trace-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const BAD: &str = "100 0 0 8 0\n200 0 8 8 2\n300 0 16 8 1\n";

#[test]
fn a_bad_line_is_exit_code_2_naming_file_line_field_and_expectation() {
    let p = temp("bad.trace", BAD);
    let o = nandlab(&["trace", "stats", p.to_str().unwrap(), "--trace-format", "mqsim"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("bad.trace:2: field `type`: expected 0 (write) or 1 (read); found `2`"), "{e}");
}

#[test]
fn skipped_bad_lines_are_counted_in_stats_json_and_the_stress_summary() {
    let p = temp("skip.trace", BAD);
    let o = nandlab(&["trace", "stats", p.to_str().unwrap(), "--trace-format", "mqsim", "--skip-bad-lines", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["skipped_bad_lines"], 1);
    assert_eq!(j["requests"], 2);
    assert!(j["bad_line_examples"][0].as_str().unwrap().contains("skip.trace:2"));

    let json = p.with_extension("json");
    let o = nandlab(&[
        "stress",
        "--preset",
        "tiny",
        "--trace",
        p.to_str().unwrap(),
        "--trace-format",
        "mqsim",
        "--skip-bad-lines",
        "--seed",
        "1",
        "--no-progress",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("1 bad lines skipped"), "{out}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["workload_report"]["read"]["skipped_bad_lines"], 1);
    assert_eq!(r["host"]["write_requests"], 1);
    assert_eq!(r["host"]["read_requests"], 1);
}

#[test]
fn trace_stats_counts_the_public_traces() {
    let stats = |f: &str| {
        let o = nandlab(&["trace", "stats", &shared(f), "--json"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let t = stats("mqsim_tpcc-small.trace");
    assert_eq!(
        (t["requests"].as_u64(), t["read"]["requests"].as_u64(), t["write"]["requests"].as_u64()),
        (Some(6_999), Some(4_381), Some(2_618))
    );
    assert_eq!(t["format"], "mqsim");
    assert_eq!(t["footprint_exact"], true);
    assert_eq!(stats("mqsim_wsrch-small.trace")["requests"], 24_783);
    let b = stats("apress_blkparse.txt");
    assert_eq!((b["format"].as_str(), b["lines"].as_u64()), (Some("blkparse"), Some(50_000)));
    assert_eq!(b["skipped_bad_lines"], 0);
    let o = nandlab(&["trace", "stats", &shared("mqsim_tpcc-small.trace")]);
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("requests   6999") && table.contains("footprint"), "{table}");
}

#[test]
fn convert_to_mqsim_says_what_it_dropped_and_fio_keeps_everything() {
    let src = temp(
        "conv.log",
        "fio version 2 iolog\nf add\nf open\nf write 0 4096\nf sync 0 0\nf trim 0 4096\nf read 0 4096\nf close\n",
    );
    let out = src.with_extension("mqsim");
    let o = nandlab(&["trace", "convert", src.to_str().unwrap(), "--to", "mqsim", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("dropped 1 flush(es) and 1 trim(s)"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "0 0 0 8 0\n0 0 0 8 1\n");
    let gz = src.with_extension("log.gz");
    let o = nandlab(&["trace", "convert", src.to_str().unwrap(), "--to", "fio", "-o", gz.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = nandlab(&["trace", "stats", gz.to_str().unwrap(), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((j["format"].as_str(), j["compression"].as_str()), (Some("fio"), Some("gzip")));
    assert_eq!(j["requests"], 4);
}

#[test]
fn stress_refuses_synthetic_flags_with_a_trace_and_trace_flags_without_one() {
    let o = nandlab(&["stress", "--preset", "tiny", "--trace", &shared("mqsim_tpcc-small.trace"), "--rw", "randwrite"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--rw"), "{}", stderr(&o));
    let o = nandlab(&["stress", "--preset", "tiny", "--trace-align", "4k"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("need --trace FILE"), "{}", stderr(&o));
}

#[test]
fn stress_replays_a_trace_repeated_until_twice_the_device_and_verifies_it() {
    let o = nandlab(&[
        "stress",
        "--preset",
        "tiny",
        "--trace",
        &shared("mqsim_tpcc-small.trace"),
        "--trace-align",
        "4k",
        "--trace-repeat-until",
        "2x",
        "--seed",
        "7",
        "--remount",
        "--no-progress",
        "--json",
        "-",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    let json = &text[text.find("\n{").unwrap()..];
    let r: serde_json::Value = serde_json::from_str(json).unwrap();
    let logical = r["logical_bytes"].as_u64().unwrap();
    assert_eq!(r["host"]["write_bytes"].as_u64(), Some(2 * logical));
    assert!(r["workload_report"]["transforms"]["passes"].as_u64().unwrap() > 1);
    assert_eq!(r["errors"], 0);
}
