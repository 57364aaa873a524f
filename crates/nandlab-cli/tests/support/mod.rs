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
