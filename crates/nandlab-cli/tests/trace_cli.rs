//! The trace commands end to end: exit codes, bad-line messages, skipped
//! lines in the summary and JSON, stats counts, inter-arrival quantiles and
//! footprints (checked against values computed here from the files),
//! convert and what it refuses, warnings, stress --trace.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nandlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).output().expect("nandlab runs")
}

fn shared(name: &str) -> String {
    support::public_trace(name)
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

/// `stress --preset tiny --trace TRACE ARGS… --seed 1`, which must succeed:
/// its output and its JSON report (written in a directory of its own,
/// never beside a fixture).
fn stress_trace(trace: &Path, args: &[&str]) -> (Output, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let mut all = vec!["stress", "--preset", "tiny", "--trace", trace.to_str().unwrap()];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--seed", "1", "--no-progress", "--json", json.to_str().unwrap()]);
    let o = nandlab(&all);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (o, report)
}

/// `trace stats FILE ARGS… --json`, which must succeed.
fn stats_json(file: &str, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["trace", "stats", file, "--json"];
    all.extend_from_slice(args);
    let o = nandlab(&all);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The nearest-rank quantile of sorted values (what `trace stats` reports, up to its histogram's precision).
fn nearest_rank(sorted: &[u64], q: f64) -> u64 {
    sorted[((q * sorted.len() as f64).ceil() as usize).max(1) - 1]
}

/// A reported quantile (µs) against the true one (ns): never below it, at
/// most 0.1 % above (3 significant digits), never above the maximum.
fn assert_quantile(reported_us: &serde_json::Value, true_ns: u64, max_ns: u64, what: &str) {
    let got_ns = reported_us.as_f64().unwrap() * 1e3;
    let t = true_ns as f64;
    assert!(
        got_ns >= t - 1e-3 && got_ns <= t * 1.001 + 1e-3 && got_ns <= max_ns as f64 + 1e-3,
        "{what}: {got_ns} ns, true {t} ns"
    );
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

    let (o, r) = stress_trace(&p, &["--trace-format", "mqsim", "--skip-bad-lines"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("1 bad lines skipped"), "{out}");
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
    let b = stats("blkparse_sample.txt");
    let lines = std::fs::read_to_string(shared("blkparse_sample.txt")).unwrap().lines().count() as u64;
    assert_eq!((b["format"].as_str(), b["lines"].as_u64()), (Some("blkparse"), Some(lines)));
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

#[test]
fn inter_arrival_figures_are_the_gaps_of_a_fixture() {
    // Gaps 1 ms, 1 ms, 2 s, 1 µs, 3 ms: min 1 µs, median 1 ms, p99 and max 2 s.
    let p = temp(
        "gaps.trace",
        "5000 0 0 8 1\n1005000 0 0 8 1\n2005000 0 0 8 1\n2002005000 0 0 8 1\n2002006000 0 0 8 1\n2005006000 0 0 8 1\n",
    );
    let j = stats_json(p.to_str().unwrap(), &["--trace-format", "mqsim"]);
    let ia = &j["inter_arrival"];
    assert_eq!((ia["min_us"].as_f64(), ia["max_us"].as_f64()), (Some(1.0), Some(2_000_000.0)));
    assert_eq!(ia["mean_us"].as_f64(), Some(401_000.2));
    assert_quantile(&ia["p50_us"], 1_000_000, 2_000_000_000, "median");
    assert_eq!(ia["p99_us"].as_f64(), Some(2_000_000.0));
}

#[test]
fn inter_arrival_figures_of_tpcc_small_match_the_file() {
    let path = shared("mqsim_tpcc-small.trace");
    let times: Vec<u64> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    let backwards = times.windows(2).filter(|w| w[1] < w[0]).count() as u64;
    let mut gaps: Vec<u64> = times.windows(2).filter(|w| w[1] >= w[0]).map(|w| w[1] - w[0]).collect();
    gaps.sort_unstable();
    let (min, max) = (gaps[0], *gaps.last().unwrap());
    let mean_us = gaps.iter().sum::<u64>() as f64 / gaps.len() as f64 / 1e3;
    let j = stats_json(&path, &[]);
    let ia = &j["inter_arrival"];
    assert_eq!(ia["backwards"].as_u64(), Some(backwards));
    assert_eq!(ia["min_us"].as_f64(), Some(min as f64 / 1e3));
    assert_eq!(ia["max_us"].as_f64(), Some(max as f64 / 1e3));
    assert!((ia["mean_us"].as_f64().unwrap() - mean_us).abs() < 1e-9 * mean_us, "mean {} vs {mean_us}", ia["mean_us"]);
    assert_quantile(&ia["p50_us"], nearest_rank(&gaps, 0.5), max, "median");
    assert_quantile(&ia["p99_us"], nearest_rank(&gaps, 0.99), max, "p99");
    assert!(nearest_rank(&gaps, 0.5) > 2_000, "the gaps are microseconds, far above the 2 µs that used to clamp them");
}

#[test]
fn the_approximate_footprint_agrees_with_the_exact_one_within_its_stated_error() {
    let path = shared("mqsim_tpcc-small.trace");
    let mut sectors = std::collections::HashSet::new();
    for l in std::fs::read_to_string(&path).unwrap().lines() {
        let f: Vec<u64> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
        sectors.extend(f[2]..f[2] + f[3]);
    }
    let exact = stats_json(&path, &[]);
    assert_eq!(exact["footprint_exact"], true);
    assert_eq!(exact["footprint_bytes"].as_u64(), Some(sectors.len() as u64 * 512));
    // A 1 KiB bitmap covers the first 4 MiB of addresses; the rest is estimated.
    let approx = stats_json(&path, &["--footprint-bitmap-max", "1k"]);
    assert_eq!(approx["footprint_exact"], false);
    assert_eq!(approx["footprint_exact_below_bytes"].as_u64(), Some(4 << 20));
    let below = sectors.iter().filter(|&&s| s < (4 << 20) / 512).count() as u64 * 512;
    assert_eq!(approx["footprint_exact_part_bytes"].as_u64(), Some(below));
    let total = approx["footprint_bytes"].as_u64().unwrap();
    let estimated = approx["footprint_estimated_part_bytes"].as_u64().unwrap();
    assert_eq!(total, below + estimated);
    let sigma = approx["footprint_standard_error_bytes"].as_u64().unwrap() as f64;
    assert!((sigma - 0.0081 * estimated as f64).abs() <= 512.0, "σ {sigma}");
    let err = (total as f64 - (sectors.len() * 512) as f64).abs();
    assert!(err <= 3.0 * sigma, "approximate {total} vs exact {} (σ {sigma})", sectors.len() * 512);
    let method = approx["footprint_method"].as_str().unwrap();
    assert!(
        method.starts_with("distinct 512-byte units touched") && method.contains("HyperLogLog, standard error 0.81 %"),
        "{method}"
    );
}

/// Requests and bytes per operation of a blkparse file's completion
/// events, by the README's RWBS rules, computed here independently.
fn blkparse_completions(path: &str) -> [(u64, u64); 4] {
    let mut per_op = [(0u64, 0u64); 4]; // read, write, trim, flush
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 7 || !f[0].contains(',') || f[5] != "C" {
            continue;
        }
        let rwbs = f[6];
        let bytes = match (f.get(7), f.get(8), f.get(9)) {
            (Some(_), Some(&"+"), Some(n)) => n.parse::<u64>().unwrap() * 512,
            _ => 0,
        };
        let dir = rwbs.find(|c| "RWDN".contains(c)).unwrap();
        if rwbs[..dir].contains('F') || rwbs.contains('B') {
            per_op[3].0 += 1;
        }
        let op = match &rwbs[dir..dir + 1] {
            "R" => Some(0),
            "W" => Some(1),
            "D" => Some(2),
            _ => None,
        };
        if let Some(i) = op {
            per_op[i].0 += 1;
            per_op[i].1 += bytes;
            if i == 1 && rwbs[dir + 1..].contains('F') {
                per_op[3].0 += 1;
            }
        }
    }
    per_op
}

#[test]
fn blkparse_sample_stats_count_what_the_completion_lines_say() {
    let path = shared("blkparse_sample.txt");
    let want = blkparse_completions(&path);
    assert!(want[0].0 > 0 && want[1].0 > 0, "the sample has reads and writes: {want:?}");
    let j = stats_json(&path, &[]);
    for (i, op) in ["read", "write", "trim", "flush"].iter().enumerate() {
        assert_eq!((j[op]["requests"].as_u64(), j[op]["bytes"].as_u64()), (Some(want[i].0), Some(want[i].1)), "{op}");
    }
    assert_eq!(j["requests"].as_u64(), Some(want.iter().map(|w| w.0).sum()));
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../nandlab/tests/fixtures/traces/blkparse.txt");
    let fixture = fixture.to_str().unwrap();
    let want = blkparse_completions(fixture);
    assert!(want[2].0 > 0 && want[3].0 > 0, "the fixture has trims and flushes: {want:?}");
    let j = stats_json(fixture, &[]);
    for (i, op) in ["read", "write", "trim", "flush"].iter().enumerate() {
        assert_eq!((j[op]["requests"].as_u64(), j[op]["bytes"].as_u64()), (Some(want[i].0), Some(want[i].1)), "{op}");
    }
}

#[test]
fn convert_refuses_a_request_the_target_reader_would_reject_naming_line_and_field() {
    let src = temp("huge.log", "fio version 2 iolog\nf add\nf write 0 4096\nf write 0 18446744073709551615\n");
    let out = src.with_extension("mqsim");
    let o = nandlab(&["trace", "convert", src.to_str().unwrap(), "--to", "mqsim", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains(
            "huge.log:4: field `length`: cannot be written as mqsim: the request ends at byte 18446744073709551615"
        ),
        "{e}"
    );
    assert!(!out.exists(), "no partial output is left");
    // fio represents it and reads it back.
    let fio = src.with_extension("v3.log");
    let o = nandlab(&["trace", "convert", src.to_str().unwrap(), "--to", "fio", "-o", fio.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stats_json(fio.to_str().unwrap(), &[])["write"]["bytes"].as_u64(),
        Some(u64::MAX),
        "4096 + 2^64 - 1 saturates"
    );
    let o = nandlab(&[
        "trace",
        "convert",
        src.to_str().unwrap(),
        "--to",
        "fio",
        "--fio-file",
        "#x",
        "-o",
        fio.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--fio-file `#x`"), "{}", stderr(&o));
}

#[test]
fn convert_refuses_to_write_over_its_input_by_any_path() {
    let text = "100 0 0 8 0\n200 0 8 8 1\n";
    let src = temp("self.trace", text);
    let dir = src.parent().unwrap();
    let link = dir.join("self-link.trace");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&src, &link).unwrap();
    let dotted = dir.join(".").join("self.trace");
    for out in [&src, &link, &dotted] {
        let o = nandlab(&["trace", "convert", src.to_str().unwrap(), "--to", "mqsim", "-o", out.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{}", out.display());
        assert!(stderr(&o).contains("the output is the input file"), "{}", stderr(&o));
        assert_eq!(std::fs::read_to_string(&src).unwrap(), text, "the input is untouched");
    }
}

#[test]
fn sector_bytes_is_refused_for_byte_addressed_formats() {
    let msr = temp("s.csv", "128166372003061629,hm,1,Read,4096,4096,1\n");
    let fio = temp("s.log", "fio version 2 iolog\nf write 0 4096\n");
    for (p, format) in [(&msr, "msr"), (&fio, "fio")] {
        let o = nandlab(&["trace", "stats", p.to_str().unwrap(), "--trace-sector-bytes", "4096"]);
        assert_eq!(o.status.code(), Some(2), "{format}");
        assert!(
            stderr(&o).contains(&format!(
                "--trace-sector-bytes applies to sector-based traces (mqsim, disksim, blkparse, spc), not {format}"
            )),
            "{}",
            stderr(&o)
        );
    }
    let spc = temp("s.spc", "0,2,4096,w,0.0\n");
    let j = stats_json(spc.to_str().unwrap(), &["--trace-sector-bytes", "4096"]);
    assert_eq!(j["offset_min_bytes"].as_u64(), Some(8192));
}

#[test]
fn filters_that_keep_nothing_warn_in_stats_and_stress() {
    let p = temp("filtered.trace", "100 0 0 8 0\n200 1 8 8 1\n");
    let o = nandlab(&["trace", "stats", p.to_str().unwrap(), "--trace-device", "5", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let warning = "no request replayed: the filters (--trace-device 5) kept none of the trace's 2 requests; it has device(s) 0, 1 and operation(s) read, write";
    assert!(stderr(&o).contains(&format!("warning: {warning}")), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["warnings"][0].as_str(), Some(warning));

    let (o, r) = stress_trace(&p, &["--trace-op", "trim"]);
    let warning = "no request replayed: the filters (--trace-op trim) kept none of the trace's 2 requests; it has device(s) 0, 1 and operation(s) read, write";
    assert!(stderr(&o).contains(&format!("warning: {warning}")), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("warning    {warning}")));
    assert_eq!(r["workload_report"]["warnings"][0].as_str(), Some(warning));
    // A filter that keeps something gives no warning.
    let j = stats_json(p.to_str().unwrap(), &["--trace-device", "1"]);
    assert_eq!(j["warnings"], serde_json::json!([]));
}

#[test]
fn an_alignment_larger_than_the_device_is_an_input_error() {
    let o =
        nandlab(&["stress", "--preset", "tiny", "--trace", &shared("mqsim_tpcc-small.trace"), "--trace-align", "1t"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--trace-align 1099511627776: larger than the device's logical capacity"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn stress_prints_the_auto_detection_reason_once() {
    let p = temp("auto-once.trace", "100 0 0 8 0\n200 0 8 8 1\n300 0 16 8 1\n");
    let (o, report) = stress_trace(&p, &[]);
    let why = report["workload_report"]["format_chosen_because"].as_str().unwrap().to_string();
    assert!(why.contains("blank-separated"), "{why}");
    let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert_eq!(all.matches(why.as_str()).count(), 1, "{all}");
    assert!(report["workload"].as_str().unwrap().contains("mqsim"), "{report}");
}

#[test]
fn stats_counts_times_before_the_first_request_as_backwards_and_in_the_span() {
    let p = temp("backwards.trace", "5000 0 0 8 0\n1000 0 8 8 0\n3000 0 16 8 0\n0 0 24 8 0\n");
    let o = nandlab(&["trace", "stats", p.to_str().unwrap(), "--trace-format", "mqsim"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("time span  0.000005 s"), "{table}");
    assert!(table.contains("; 2 backwards"), "{table}");
    let s = stats_json(p.to_str().unwrap(), &["--trace-format", "mqsim"]);
    assert_eq!(s["span_seconds"].as_f64(), Some(5e-6), "{s}");
    assert_eq!(s["inter_arrival"]["backwards"], 2, "{s}");
    assert_eq!((s["time_first_ns"].as_i64(), s["time_last_ns"].as_i64()), (Some(0), Some(-5000)), "{s}");
    // The one forward gap, 1000 → 3000 ns.
    assert_eq!((s["inter_arrival"]["min_us"].as_f64(), s["inter_arrival"]["max_us"].as_f64()), (Some(2.0), Some(2.0)));
}

#[test]
fn auto_detection_reads_past_a_70_kb_first_line() {
    let text = format!("{}\n100 0 0 8 0\n200 0 8 8 1\n300 0 16 8 1\n", "x".repeat(70_000));
    let p = temp("long-first-line.trace", &text);
    let s = stats_json(p.to_str().unwrap(), &[]);
    assert_eq!((s["format"].as_str(), s["requests"].as_u64()), (Some("mqsim"), Some(3)), "{s}");
    assert_eq!(s["ignored_lines"], 1, "the long first line is a header");
}

/// Run nandlab on a FIFO that a thread fills once with `text`: its output,
/// or a failure if it has not ended within a minute (a hang, not slowness).
#[cfg(unix)]
fn nandlab_on_fifo(name: &str, text: &'static str, args: &[&str]) -> Output {
    let fifo = temp(name, "");
    std::fs::remove_file(&fifo).unwrap();
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success());
    let writer = {
        let fifo = fifo.clone();
        // Blocks until a reader opens the FIFO.
        std::thread::spawn(move || drop(std::fs::write(&fifo, text)))
    };
    let mut all: Vec<&str> = args.to_vec();
    all.push(fifo.to_str().unwrap());
    let mut child = Command::new(env!("CARGO_BIN_EXE_nandlab"))
        .args(&all)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut waited = 0;
    while child.try_wait().unwrap().is_none() {
        if waited >= 600 {
            let _ = child.kill();
            panic!("nandlab {all:?} hangs on a FIFO");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        waited += 1;
    }
    // If nandlab never opened the FIFO, the writer still waits for a
    // reader: be one. Opened read-write, a FIFO does not wait for a writer,
    // so this cannot block even when the writer has already gone.
    let unblock = std::fs::OpenOptions::new().read(true).write(true).open(&fifo).unwrap();
    writer.join().unwrap();
    drop(unblock);
    std::fs::remove_file(&fifo).unwrap();
    child.wait_with_output().unwrap()
}

#[cfg(unix)]
#[test]
fn a_fifo_that_would_be_read_twice_is_an_input_error_not_a_hang() {
    const T: &str = "100 0 0 8 0\n200 0 8 8 1\n300 0 16 8 1\n";
    let stress = ["stress", "--preset", "tiny", "--seed", "1", "--no-progress"];
    for (extra, flag) in [
        (&["--trace-map", "scale"][..], "--trace-map scale"),
        (&["--trace-repeat-until", "1m"][..], "--trace-repeat-until"),
    ] {
        let mut args = stress.to_vec();
        args.extend_from_slice(extra);
        args.push("--trace");
        let o = nandlab_on_fifo("twice.fifo", T, &args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(e.contains("twice.fifo: not a regular file") && e.contains(flag), "{e}");
        assert!(!e.contains("workload:"), "refused before any work: {e}");
    }
    // Read once, a FIFO is fine; so is scale with the extent given.
    let o = nandlab_on_fifo("once.fifo", T, &["trace", "stats"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut args = stress.to_vec();
    args.extend_from_slice(&["--trace-map", "scale", "--trace-extent", "1m", "--trace"]);
    let o = nandlab_on_fifo("extent.fifo", T, &args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A device file: the tiny preset with 16 KiB pages (32 sectors), so an
/// 8 KiB-aligned trace's 16-sector unit is below the page cap.
fn device_with_16k_pages() -> PathBuf {
    let tiny = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../presets/tiny.toml")).unwrap();
    let text = tiny
        .replace("page_size_bytes = 4096", "page_size_bytes = 16384")
        .replace("blocks_per_plane = 64", "blocks_per_plane = 32");
    assert_ne!(text, tiny);
    temp("pages16k.toml", &text)
}

/// An MQSim trace of `n` requests of 16 sectors (8 KiB) at 8 KiB-aligned
/// LBAs below 16 MiB, two writes for each read (deterministic), with `extra`
/// lines after the fifth.
fn aligned_8k_trace(name: &str, n: u64, extra: &str) -> PathBuf {
    let mut text = String::new();
    let mut x: u64 = 1;
    for i in 0..n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let lba = (x >> 33) % 2048 * 16;
        text += &format!("{} 0 {lba} 16 {}\n", (i + 1) * 1000, u64::from(i % 3 == 0));
        if i == 4 {
            text += extra;
        }
    }
    temp(name, &text)
}

/// `stress --config DEVICE --trace TRACE ARGS… --seed 1 --json`: its exit
/// code, stderr and JSON report.
fn stress_on(device: &Path, trace: &Path, args: &[&str]) -> (Option<i32>, String, serde_json::Value) {
    let json = trace.with_extension(format!("{}.json", args.join("_").replace(['-', '=', ' '], "")));
    let mut all = vec!["stress", "--config", device.to_str().unwrap(), "--trace", trace.to_str().unwrap()];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--seed", "1", "--no-progress", "--json", json.to_str().unwrap()]);
    let o = nandlab(&all);
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (o.status.code(), stderr(&o), report)
}

#[test]
fn an_8k_aligned_trace_gets_a_16_sector_oracle_unit_from_its_alignment() {
    let (code, e, r) = stress_on(&device_with_16k_pages(), &aligned_8k_trace("a8k.trace", 300, ""), &[]);
    assert_eq!(code, Some(0), "{e}");
    assert!(e.contains("  oracle unit: 16 sectors (8 KiB, from the trace's alignment)\n"), "{e}");
    assert_eq!(r["oracle_unit_sectors"], 16);
}

#[test]
fn one_512_byte_aligned_request_makes_the_oracle_unit_one_sector() {
    let trace = aligned_8k_trace("odd512.trace", 300, "4500 0 3 1 0\n");
    let (code, e, r) = stress_on(&device_with_16k_pages(), &trace, &[]);
    assert_eq!(code, Some(0), "{e}");
    assert!(e.contains("  oracle unit: 1 sector (512 B, from the trace's alignment)\n"), "{e}");
    assert_eq!(r["oracle_unit_sectors"], 1);
}

#[test]
fn the_derived_oracle_unit_is_capped_at_the_device_page() {
    // 8 KiB-aligned on the tiny preset's 4 KiB pages: 8 sectors, not 16.
    let trace = aligned_8k_trace("a8k-tiny.trace", 300, "");
    let (_, report) = stress_trace(&trace, &[]);
    assert_eq!(report["oracle_unit_sectors"], 8);
}

#[test]
fn an_aligned_trace_replays_the_same_with_the_derived_unit_as_with_oracle_unit_1() {
    let (device, trace) = (device_with_16k_pages(), aligned_8k_trace("same.trace", 3000, ""));
    let (code, e, derived) = stress_on(&device, &trace, &[]);
    assert_eq!(code, Some(0), "{e}");
    let (code, e1, one) = stress_on(&device, &trace, &["--oracle-unit", "1"]);
    assert_eq!(code, Some(0), "{e1}");
    assert!(e1.contains("  oracle unit: 1 sector (512 B, from --oracle-unit)\n"), "{e1}");
    assert_eq!((derived["oracle_unit_sectors"].as_u64(), one["oracle_unit_sectors"].as_u64()), (Some(16), Some(1)));
    assert_eq!(derived["host"], one["host"]);
    assert_eq!(derived["host"]["write_requests"], 2000);
    assert_eq!((derived["errors"].as_u64(), derived["warnings"].as_u64()), (Some(0), Some(0)), "{derived}");
    assert_eq!(derived["violation_counts"], one["violation_counts"]);
}

#[test]
fn a_broken_ftl_is_caught_with_the_derived_oracle_unit_as_with_oracle_unit_1() {
    let (device, trace) = (device_with_16k_pages(), aligned_8k_trace("buggy.trace", 3000, ""));
    let buggy = ["--ftl", "buggy", "--ftl-opt", "bug=alias-two-lbas", "--max-errors", "0"];
    let (code, e, derived) = stress_on(&device, &trace, &buggy);
    assert_eq!(code, Some(1), "violations are exit 1: {e}");
    assert_eq!(derived["oracle_unit_sectors"], 16);
    let mut with_one = buggy.to_vec();
    with_one.extend_from_slice(&["--oracle-unit", "1"]);
    let (code, _, one) = stress_on(&device, &trace, &with_one);
    assert_eq!(code, Some(1));
    assert!(derived["errors"].as_u64().unwrap() > 0);
    assert_eq!((&derived["errors"], &derived["violation_counts"]), (&one["errors"], &one["violation_counts"]));
}

#[test]
fn perf_trace_derives_the_oracle_unit_too() {
    let trace = aligned_8k_trace("perf8k.trace", 300, "");
    let json = trace.with_extension("perf.json");
    let o = nandlab(&[
        "perf",
        "--preset",
        "tiny-timed",
        "--trace",
        trace.to_str().unwrap(),
        "--seed",
        "1",
        "--no-progress",
        "--json",
        json.to_str().unwrap(),
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(e.contains("  oracle unit: 8 sectors (4 KiB, from the trace's alignment)\n"), "{e}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["oracle_unit_sectors"], 8);
}

#[cfg(unix)]
#[test]
fn a_fifo_trace_falls_back_to_a_1_sector_oracle_unit_and_says_so() {
    const T: &str = "100 0 0 16 0\n200 0 16 16 1\n300 0 32 16 1\n";
    let device = device_with_16k_pages();
    let args = ["stress", "--config", device.to_str().unwrap(), "--seed", "1", "--no-progress", "--trace"];
    let o = nandlab_on_fifo("unit.fifo", T, &args);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(
        e.contains("  oracle unit: 1 sector (512 B, the trace is a pipe or FIFO, read once, so its alignment is not measured; give --oracle-unit)\n"),
        "{e}"
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("1 writes"), "the FIFO was replayed whole");
}

fn csv_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../nandlab/tests/fixtures/traces").join(name)
}

#[test]
fn stress_replays_an_alibaba_trace_given_its_format() {
    let (_, report) = stress_trace(&csv_fixture("alibaba.csv"), &["--trace-format", "alibaba"]);
    let w = &report["workload_report"];
    assert_eq!(w["read"]["requests"], 4, "{w}");
}

#[test]
fn trace_stats_reads_csv_layouts_and_the_device_filter_selects_a_volume() {
    let t = csv_fixture("tencent.csv");
    let s = stats_json(t.to_str().unwrap(), &["--trace-format", "tencent"]);
    assert_eq!((s["requests"].as_u64(), s["format"].as_str()), (Some(3), Some("tencent")));
    let s = stats_json(t.to_str().unwrap(), &["--trace-format", "tencent", "--trace-device", "7"]);
    assert_eq!(s["requests"], 1);
    let g = csv_fixture("generic.csv");
    let s = stats_json(
        g.to_str().unwrap(),
        &[
            "--trace-format",
            "csv",
            "--trace-columns",
            "time=1,device=2,op=3,offset=4,size=5",
            "--trace-time-unit",
            "ms",
            "--trace-offset-unit",
            "4k",
            "--trace-size-unit",
            "sectors",
            "--trace-ops",
            "read=read",
            "--trace-ops",
            "WRITE=write",
            "--trace-ops",
            "trim=discard",
            "--trace-ops",
            "flush=sync",
            "--trace-ops",
            "ignore=stat",
            "--trace-delimiter",
            ";",
        ],
    );
    assert_eq!((s["requests"].as_u64(), s["ignored_lines"].as_u64()), (Some(4), Some(4)), "{s}");
}

#[test]
fn bad_csv_options_and_lines_exit_2_naming_the_option_or_line_and_field() {
    let t = csv_fixture("tencent.csv");
    let t = t.to_str().unwrap();
    for (args, want) in [
        (
            vec!["--trace-format", "csv", "--trace-columns", "op=1,offset=2", "--trace-ops", "read=R"],
            "--trace-columns: `size=N` is missing",
        ),
        (vec!["--trace-format", "csv", "--trace-ops", "read=R"], "needs --trace-columns"),
        (vec!["--trace-format", "tencent", "--trace-ops", "erase=9"], "--trace-ops: unknown operation `erase`"),
        (vec!["--trace-format", "tencent", "--trace-size-unit", "furlong"], "--trace-size-unit:"),
        (
            vec!["--trace-format", "msr", "--trace-columns", "op=1,offset=2,size=3"],
            "apply to csv, alibaba, tencent and vscsi",
        ),
        (vec!["--trace-format", "alibaba"], "tencent.csv:2: field `opcode`: expected R (read) or W (write)"),
    ] {
        let mut all = vec!["trace", "stats", t];
        all.extend_from_slice(&args);
        let o = nandlab(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?}: no work before the error");
    }
}

#[test]
fn trace_formats_lists_csv_and_its_layouts_and_convert_reads_them() {
    let o = nandlab(&["trace", "formats"]);
    let out = String::from_utf8_lossy(&o.stdout);
    for f in ["csv", "alibaba", "tencent", "vscsi"] {
        assert!(out.lines().any(|l| l.starts_with(f)), "{f}: {out}");
    }
    let out_file = temp("vscsi.mqsim", "");
    let v = csv_fixture("vscsi.csv");
    let o = nandlab(&[
        "trace",
        "convert",
        v.to_str().unwrap(),
        "--trace-format",
        "vscsi",
        "--to",
        "mqsim",
        "-o",
        out_file.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out_file).unwrap();
    assert_eq!(text.lines().next(), Some("0 0 2048 8 1"), "{text}");
    assert_eq!(text.lines().count(), 4);
}
