//! SIGINT / SIGTERM during a run: the first stops it at a request boundary
//! with a partial summary and report (exit 130); a second exits at once.
//! Waits are bounded generously; nothing here measures time.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BOUND: Duration = Duration::from_secs(300);

/// Start `nandlab ARGS`; return the child and a channel of its stderr lines.
fn spawn(args: &[&str]) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nandlab"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Wait for a stderr line containing `text` (all lines seen so far returned).
fn wait_for(rx: &mpsc::Receiver<String>, text: &str, child: &mut Child) -> String {
    let mut seen = String::new();
    loop {
        match rx.recv_timeout(BOUND) {
            Ok(line) => {
                seen.push_str(&line);
                seen.push('\n');
                if line.contains(text) {
                    return seen;
                }
            }
            Err(_) => {
                let _ = child.kill();
                panic!("no `{text}` on stderr: {seen}");
            }
        }
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// Wait for the child to exit (bounded), returning its exit code and stdout.
fn finish(mut child: Child) -> (Option<i32>, String) {
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        let _ = tx.send(s);
    });
    let out = match rx.recv_timeout(BOUND) {
        Ok(s) => s,
        Err(_) => {
            let _ = child.kill();
            panic!("the run did not end after the signal");
        }
    };
    (child.wait().unwrap().code(), out)
}

/// A run far longer than any test waits for.
fn long_run(mode: &str, json: &str) -> Vec<String> {
    let mut args: Vec<String> = match mode {
        "stress" => vec!["stress", "--preset", "tiny", "--write_size", "100000x", "--remount"],
        "perf" => vec!["perf", "--preset", "tiny-timed", "--write_size", "100000x"],
        _ => vec!["crash", "--preset", "tiny", "--write_size", "100000x", "--crash-every", "1", "--threads", "1"],
    }
    .into_iter()
    .map(String::from)
    .collect();
    args.extend(["--seed", "1", "--json", json].map(String::from));
    if mode != "crash" {
        args.push("--no-progress".into());
    }
    args
}

#[test]
fn a_first_sigint_stops_at_a_request_boundary_with_a_partial_summary_and_report_and_exits_130() {
    for mode in ["stress", "perf", "crash"] {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let args = long_run(mode, json.to_str().unwrap());
        let (mut child, rx) = spawn(&args.iter().map(String::as_str).collect::<Vec<_>>());
        wait_for(&rx, &format!("nandlab {mode}:"), &mut child);
        signal(&child, libc::SIGINT);
        let (code, out) = finish(child);
        assert_eq!(code, Some(130), "{mode}: {out}");
        assert!(out.contains("interrupted"), "{mode}: the summary says so: {out}");
        let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(report["interrupted"], true, "{mode}");
        assert_eq!(report["seed"], 1, "{mode}");
    }
}

#[test]
fn sigterm_also_stops_the_run_with_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let args = long_run("stress", json.to_str().unwrap());
    let (mut child, rx) = spawn(&args.iter().map(String::as_str).collect::<Vec<_>>());
    wait_for(&rx, "nandlab stress:", &mut child);
    signal(&child, libc::SIGTERM);
    let (code, out) = finish(child);
    assert_eq!(code, Some(130), "{out}");
    assert!(std::fs::read_to_string(&json).unwrap().contains("\"interrupted\": true"));
}

#[test]
fn a_second_signal_exits_at_once_without_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let args = long_run("stress", json.to_str().unwrap());
    let (mut child, rx) = spawn(&args.iter().map(String::as_str).collect::<Vec<_>>());
    wait_for(&rx, "nandlab stress:", &mut child);
    // Stopped, the child receives both signals before it runs again (two
    // different signals, so they are not merged into one): the second
    // finds the stop already asked for and exits before the run sees it.
    signal(&child, libc::SIGSTOP);
    signal(&child, libc::SIGINT);
    signal(&child, libc::SIGTERM);
    signal(&child, libc::SIGCONT);
    let (code, out) = finish(child);
    assert_eq!(code, Some(130), "{out}");
    assert!(!out.contains("interrupted"), "no summary: {out}");
    assert!(!json.exists(), "no report");
}

#[test]
fn a_sigint_stops_a_hunt_between_runs_with_what_it_found_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("hunt.json");
    let args = ["hunt", "--preset", "tiny", "--ftl", "hybrid", "--budget", "60m", "--json", json.to_str().unwrap()];
    let (mut child, rx) = spawn(&args);
    wait_for(&rx, "nandlab hunt:", &mut child);
    signal(&child, libc::SIGINT);
    let (code, out) = finish(child);
    assert_eq!(code, Some(130), "{out}");
    assert!(out.contains("interrupted") && out.contains("result: nothing found"), "{out}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["interrupted"], true);
}
