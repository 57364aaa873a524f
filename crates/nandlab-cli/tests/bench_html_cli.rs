//! `nandlab bench stress|perf|crash|trace --html FILE` (and `bench serve`,
//! not run here: it needs fio and nbdkit and seconds per run): one self-contained page
//! with the bench's table of medians and a bar chart of throughput per
//! configuration; a file that cannot be written is refused before any run.
//! (The pages are also opened in Chromium by tests/html_browser.rs.)

use std::process::Command;

mod support;

#[test]
fn each_bench_writes_a_page_with_its_configurations_and_one_bar_each() {
    let dir = tempfile::tempdir().unwrap();
    for (kind, page, configurations) in support::bench_pages(dir.path()) {
        let html = std::fs::read_to_string(&page).unwrap();
        assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>\n"), "{kind}");
        // Self-contained: no script, nothing loaded from elsewhere.
        assert!(!html.contains("<script") && !html.contains("<link") && !html.contains("src="), "{kind}");
        assert!(html.contains(&format!("<h1>nandlab bench {kind}</h1>")), "{kind}");
        for c in configurations {
            assert!(html.contains(&format!("<tr><td class=\"\">{c}</td>")), "{kind}: row of {c}");
        }
        // One chart, with a category (tick label) per configuration's bar.
        assert_eq!(html.matches("<figure class=\"chart\">").count(), 1, "{kind}");
        let svg = &html[html.find("<svg").unwrap()..html.find("</svg>").unwrap()];
        for c in configurations {
            assert!(svg.lines().any(|l| l.starts_with(c)), "{kind}: bar label of {c}");
        }
        assert!(!html.contains("no data in the report"), "{kind}: the chart has bars");
    }
}

#[test]
fn an_html_file_that_cannot_be_written_or_is_standard_output_exits_2_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("no-such-dir/page.html");
    for args in [
        vec!["bench", "crash", "--preset", "tiny", "--points", "4", "--runs", "1"],
        vec!["bench", "perf", "--scenario", "mqsim-s1", "--runs", "1"],
    ] {
        let mut all = args.clone();
        all.extend(["--html", bad.to_str().unwrap()]);
        let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(&all).output().expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("--html") && err.contains("no-such-dir"), "{err}");
        assert!(
            String::from_utf8_lossy(&out.stdout).is_empty(),
            "nothing ran: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    // Not standard output: the bench's figures go there.
    let out = Command::new(env!("CARGO_BIN_EXE_nandlab"))
        .args(["bench", "crash", "--preset", "tiny", "--points", "4", "--html", "-"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--html -: the bench prints"));
    assert!(out.stdout.is_empty());
}
