//! The progress bar, seen as a user sees it: the runs go under a pseudo-
//! terminal (util-linux `script`, which gives the command a terminal and
//! copies what it draws to its own output), and the bar's text is read
//! back. Without a terminal, and with `--quiet` or `--no-progress`,
//! nothing of a bar may appear.

use std::process::Command;

mod support;

const BAR_GLYPHS: [&str; 2] = ["█", "░"];

/// What `nandlab ARGS` draws on a terminal (standard output and error
/// together, carriage returns as line ends), or `None` when `script` is
/// missing (the test is skipped, or fails under NANDLAB_REQUIRE_TOOLS=1).
fn on_a_terminal(args: &[&str]) -> Option<String> {
    if !support::tool("script") {
        return None;
    }
    let cmd = std::iter::once(env!("CARGO_BIN_EXE_nandlab")).chain(args.iter().copied()).collect::<Vec<_>>().join(" ");
    let out = Command::new("script").args(["-qfec", &cmd, "/dev/null"]).output().expect("script runs");
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "\n");
    Some(text)
}

/// The lines of `text` that are frames of a bar.
fn bar_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| BAR_GLYPHS.iter().any(|g| l.contains(g))).collect()
}

/// The WAF numbers the bar showed (`WAF 1.23`).
fn wafs(text: &str) -> Vec<f64> {
    text.split("WAF ").skip(1).filter_map(|t| t.split(')').next()?.trim().parse().ok()).collect()
}

const STRESS: &[&str] = &["stress", "--preset", "tiny", "--write-size", "2x", "--seed", "1"];

#[test]
fn stress_on_a_terminal_shows_bytes_of_the_target_requests_per_second_waf_and_eta() {
    let Some(text) = on_a_terminal(STRESS) else { return };
    let bars = bar_lines(&text);
    assert!(!bars.is_empty(), "no bar drawn:\n{text}");
    let last = bars.last().unwrap();
    assert!(last.contains("MiB/108.80 MiB"), "bytes of the target: {last}");
    assert!(last.contains(" req/s, WAF ") && last.contains("eta"), "{last}");
    let w = wafs(&text);
    assert!(!w.is_empty() && w.iter().all(|w| (1.0..10.0).contains(w)), "WAF so far: {w:?}");
    // The run goes on past the bar: its summary is printed as without one.
    assert!(text.contains("result     PASS"), "{text}");
}

#[test]
fn perf_on_a_terminal_shows_requests_of_the_bound_and_the_timed_phase_waf() {
    let args =
        ["perf", "--preset", "tiny-timed", "--seed", "3", "--rw", "randwrite", "--bs", "4k", "--requests", "200000"];
    let Some(text) = on_a_terminal(&args) else { return };
    let bars = bar_lines(&text);
    assert!(bars.iter().any(|l| l.contains("/200000 requests (timed, ") && l.contains(" req/s, WAF ")), "{text}");
    assert!(!wafs(&text).is_empty(), "{text}");
}

#[test]
fn a_crash_campaign_on_a_terminal_shows_points_tested_and_failures() {
    let args = [
        "crash",
        "--preset",
        "tiny",
        "--ftl",
        "buggy",
        "--ftl-opt",
        "bug=out-of-order",
        "--seed",
        "4",
        "--crash-points",
        "40",
        "--threads",
        "2",
    ];
    let Some(text) = on_a_terminal(&args) else { return };
    let bars = bar_lines(&text);
    let counted: Vec<(u64, u64, u64)> = bars
        .iter()
        .filter_map(|l| {
            let rest = l.split("points ").nth(1)?;
            let (tested, rest) = rest.split_once('/')?;
            let (planned, rest) = rest.split_once(", failures ")?;
            let failures = rest.split(|c: char| !c.is_ascii_digit()).next()?;
            Some((tested.parse().ok()?, planned.parse().ok()?, failures.parse().ok()?))
        })
        .collect();
    assert!(counted.iter().any(|&(t, p, f)| p == 40 && t > 0 && f > 0 && f <= t && t <= p), "{counted:?}\n{text}");
}

#[test]
fn no_bar_without_a_terminal_nor_with_quiet_or_no_progress() {
    // Standard error a pipe: no bar, not even escape codes.
    let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(STRESS).output().expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(bar_lines(&err).is_empty() && !err.contains("req/s") && !err.contains('\u{1b}'), "{err}");
    for flag in ["--quiet", "--no-progress"] {
        let args: Vec<&str> = STRESS.iter().copied().chain([flag]).collect();
        let Some(text) = on_a_terminal(&args) else { return };
        assert!(text.contains("result     PASS"), "the run ran: {text}");
        assert!(bar_lines(&text).is_empty() && !text.contains("req/s"), "{flag}: {text}");
    }
    let crash = ["crash", "--preset", "tiny", "--seed", "4", "--crash-points", "8", "--threads", "1", "--quiet"];
    let Some(text) = on_a_terminal(&crash) else { return };
    assert!(text.contains("points"), "the campaign ran: {text}");
    assert!(bar_lines(&text).is_empty() && !text.contains(", failures "), "crash --quiet: {text}");
}
