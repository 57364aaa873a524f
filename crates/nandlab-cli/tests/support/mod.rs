//! Shared helpers for the CLI tests (each test crate uses some of them).
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A public trace the repository carries in `crates/nandlab/tests/data/traces/`
/// (see its SOURCES.md for origin and licence).
pub fn public_trace(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../nandlab/tests/data/traces").join(name);
    assert!(path.exists(), "{} is missing from the repository", path.display());
    path.display().to_string()
}

/// Run `nandlab ARGS` to completion. A run still going after `bound` is
/// killed and fails the test: for the tests of inputs that used to hang,
/// a hang is the defect, so it must fail rather than wait forever.
pub fn nandlab_within(args: &[&str], bound: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nandlab"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nandlab runs");
    let deadline = Instant::now() + bound;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            child.kill().ok();
            panic!("nandlab {} did not end within {bound:?}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// Whether the external tool `name` is installed. A missing tool skips
/// the test that needs it, said on stderr, unless `NANDLAB_REQUIRE_TOOLS=1`
/// (CI, whose `.ci/run` installs them): then the test fails.
pub fn tool(name: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {name}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        if std::env::var("NANDLAB_REQUIRE_TOOLS").as_deref() == Ok("1") {
            panic!("`{name}` is not installed and NANDLAB_REQUIRE_TOOLS=1: install it (see .ci/run)");
        }
        eprintln!(
            "SKIPPED: `{name}` is not installed (.ci/run installs it; NANDLAB_REQUIRE_TOOLS=1 makes this a failure)"
        );
    }
    found
}

/// A small run of each report kind writing `KIND.json` and `KIND.html`
/// into `dir` (stress on the page FTL, perf on tiny-timed, crash on the
/// buggy FTL, whose every point fails): (kind, JSON path, HTML path).
pub fn report_runs(dir: &Path) -> Vec<(&'static str, std::path::PathBuf, std::path::PathBuf)> {
    let runs: [(&str, &[&str], i32); 3] = [
        (
            "stress",
            &[
                "stress",
                "--preset",
                "tiny",
                "--ftl",
                "page",
                "--seed",
                "3",
                "--no-progress",
                "--rw",
                "randwrite",
                "--bs",
                "4k",
                "--io_size",
                "80m",
            ],
            0,
        ),
        (
            "perf",
            &[
                "perf",
                "--preset",
                "tiny-timed",
                "--seed",
                "3",
                "--no-progress",
                "--rw",
                "randrw",
                "--bs",
                "4k",
                "--iodepth",
                "8",
                "--requests",
                "6000",
            ],
            0,
        ),
        (
            "crash",
            &[
                "crash",
                "--preset",
                "tiny",
                "--ftl",
                "buggy",
                "--ftl-opt",
                "bug=out-of-order",
                "--seed",
                "4",
                "--quiet",
                "--crash-points",
                "12",
                "--threads",
                "1",
            ],
            1,
        ),
    ];
    runs.iter()
        .map(|(kind, args, expected)| {
            let json = dir.join(format!("{kind}.json"));
            let html = dir.join(format!("{kind}.html"));
            let mut all: Vec<&str> = args.to_vec();
            all.extend(["--json", json.to_str().unwrap(), "--html", html.to_str().unwrap()]);
            let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(&all).output().expect("runs");
            assert_eq!(out.status.code(), Some(*expected), "{kind}: {}", String::from_utf8_lossy(&out.stderr));
            (*kind, json, html)
        })
        .collect()
}

/// A small run of each bench with `--html`, writing `bench-KIND.html` into
/// `dir`: (kind, HTML path, the configurations its table must list).
pub fn bench_pages(dir: &Path) -> Vec<(&'static str, std::path::PathBuf, &'static [&'static str])> {
    let runs: [(&str, &[&str], &[&str]); 4] = [
        (
            "stress",
            &[
                "bench",
                "stress",
                "--preset",
                "tiny",
                "--ftl",
                "page",
                "--ftl",
                "dftl",
                "--runs",
                "1",
                "--write-size",
                "1m",
            ],
            &["page", "dftl"],
        ),
        ("perf", &["bench", "perf", "--scenario", "mqsim-s1", "--runs", "1"], &["mqsim-s1"]),
        ("crash", &["bench", "crash", "--preset", "tiny", "--points", "40", "--runs", "1", "--ftl", "page"], &["page"]),
        (
            "trace",
            &["bench", "trace", "--size", "4m", "--runs", "1", "--formats", "msr,blktrace"],
            &["msr", "blkparse"],
        ),
    ];
    runs.iter()
        .map(|(kind, args, configurations)| {
            let html = dir.join(format!("bench-{kind}.html"));
            let mut all: Vec<&str> = args.to_vec();
            all.extend(["--html", html.to_str().unwrap()]);
            // Extra arguments go to each run: a short timed perf run; crash
            // points long enough (more workload after each recovery) for
            // their CPU time to be measurable, so that the chart has a bar.
            match *kind {
                "perf" => all.extend(["--", "--requests", "3000"]),
                "crash" => all.extend(["--", "--post-requests", "8192"]),
                _ => {}
            }
            let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(&all).output().expect("runs");
            assert_eq!(out.status.code(), Some(0), "bench {kind}: {}", String::from_utf8_lossy(&out.stderr));
            (*kind, html, *configurations)
        })
        .collect()
}
