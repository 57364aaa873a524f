//! `nandlab report` and `--html`: the page of a run is the page of its
//! JSON report, deterministic, several runs overlaid; bad input is refused
//! with exit 2 naming the file (and the line and column of broken JSON).

use std::path::Path;
use std::process::Command;

mod support;

fn nandlab(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A small stress run of `ftl` writing JSON and HTML into `dir`.
fn stress(dir: &Path, ftl: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let json = dir.join(format!("{ftl}.json"));
    let html = dir.join(format!("{ftl}.html"));
    let (code, out, err) = nandlab(&[
        "stress",
        "--preset",
        "tiny",
        "--ftl",
        ftl,
        "--seed",
        "3",
        "--no-progress",
        "--rw",
        "randwrite",
        "--bs",
        "4k",
        "--io_size",
        "80m",
        "--json",
        s(&json),
        "--html",
        s(&html),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    (json, html)
}

/// The `<svg>` charts of a page.
fn charts(page: &str) -> usize {
    page.matches("<svg").count()
}

#[test]
fn the_html_of_a_run_is_the_page_report_draws_from_its_json_and_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let (json, html) = stress(dir.path(), "page");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && !page.contains("<script") && !page.contains("<link"));
    assert!(!page.contains("src=") && !page.contains("href="), "nothing loaded from elsewhere");
    assert!(charts(&page) >= 5, "{} charts", charts(&page));
    for title in
        ["WAF along the run", "Free blocks along the run", "Erase-count histogram", "Pages programmed by cause"]
    {
        assert!(page.contains(title), "{title}");
    }
    let again = dir.path().join("again.html");
    let (code, _, err) = nandlab(&["report", s(&json), "-o", s(&again)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read(&again).unwrap(), page.as_bytes(), "same JSON, same bytes");
    let json_text = std::fs::read_to_string(&json).unwrap();
    let series: serde_json::Value = serde_json::from_str(&json_text).unwrap();
    let samples = series["series"].as_array().expect("stress reports carry their samples");
    assert!(samples.len() > 2 && samples.len() <= 256, "{} samples", samples.len());
    assert!(samples.iter().any(|s| s["free_blocks"].is_u64()), "the page FTL counts free blocks");
}

#[test]
fn several_reports_are_drawn_on_the_same_axes_with_their_labels() {
    let dir = tempfile::tempdir().unwrap();
    let (page_json, _) = stress(dir.path(), "page");
    let (dftl_json, _) = stress(dir.path(), "dftl");
    let out = dir.path().join("both.html");
    let (code, _, err) = nandlab(&["report", s(&page_json), s(&dftl_json), "-o", s(&out)]);
    assert_eq!(code, 0, "{err}");
    let both = std::fs::read_to_string(&out).unwrap();
    let one = std::fs::read_to_string(dir.path().join("page.html")).unwrap();
    assert_eq!(charts(&both), charts(&one), "one chart per question, both runs in it");
    assert!(both.contains("page on tiny") && both.contains("dftl on tiny"));
    // The WAF chart has two lines, each with a legend entry.
    let waf = &both[both.find("WAF along the run").unwrap()..];
    let waf = &waf[..waf.find("</svg>").unwrap()];
    assert!(waf.contains("\npage on tiny\n") && waf.contains("\ndftl on tiny\n"), "a legend names both runs");
}

#[test]
fn a_broken_or_foreign_or_mixed_input_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.html");
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\n  \"mode\": \"stress\",\n  \"waf\": 1.0,,\n}").unwrap();
    let (code, _, err) = nandlab(&["report", s(&broken), "-o", s(&out)]);
    assert_eq!(code, 2);
    assert!(err.contains("broken.json: line 3, column 14: not valid JSON"), "{err}");
    let foreign = dir.path().join("package.json");
    std::fs::write(&foreign, r#"{"name": "left-pad", "version": "1.3.0"}"#).unwrap();
    let (code, _, err) = nandlab(&["report", s(&foreign), "-o", s(&out)]);
    assert_eq!(code, 2);
    assert!(err.contains("package.json: not a nandlab report"), "{err}");
    let missing = dir.path().join("missing.json");
    let (code, _, err) = nandlab(&["report", s(&missing), "-o", s(&out)]);
    assert_eq!(code, 2);
    assert!(err.contains("missing.json: cannot read"), "{err}");
    let (stress_json, _) = stress(dir.path(), "page");
    let crash = dir.path().join("crash.json");
    std::fs::write(&crash, r#"{"schema_version": 2, "mode": "crash"}"#).unwrap();
    let (code, _, err) = nandlab(&["report", s(&stress_json), s(&crash), "-o", s(&out)]);
    assert_eq!(code, 2);
    assert!(err.contains("crash.json is a crash report") && err.contains("stress"), "{err}");
    assert!(!out.exists(), "nothing written");
    let (code, _, err) = nandlab(&["report", s(&stress_json), "-o", s(&stress_json)]);
    assert_eq!(code, 2);
    assert!(err.contains("input file"), "the output may not overwrite an input: {err}");
}

#[test]
fn perf_and_crash_pages_have_their_own_charts() {
    let dir = tempfile::tempdir().unwrap();
    let runs = support::report_runs(dir.path());
    let page = std::fs::read_to_string(&runs[1].2).unwrap();
    for title in
        ["IOPS", "p99 latency", "Latency CDF: all", "Latency CDF: read", "Mean latency by component", "Busy share"]
    {
        assert!(page.contains(title), "{title}");
    }
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&runs[1].1).unwrap()).unwrap();
    let cdf = report["perf"]["latency_cdf"]["all"].as_array().unwrap();
    assert!(!cdf.is_empty() && cdf.len() <= 512);
    assert_eq!(cdf.last().unwrap()["fraction"], 1.0);
    assert!(report.get("series").is_none(), "perf reports keep their own time series only");

    let page = std::fs::read_to_string(&runs[2].2).unwrap();
    for title in ["Crash points tested", "Failed points by rule", "Shrunk finding", "Reproduce with:", "--crash-at"] {
        assert!(page.contains(title), "{title}");
    }
    assert!(!page.contains("--html"), "the reproduce command leaves the HTML output out");
}
