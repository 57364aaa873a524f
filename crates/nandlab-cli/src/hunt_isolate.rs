//! `hunt --isolate`: each run in a child process, watched.
//!
//! A hunt run in this process cannot survive two kinds of FTL failure: a
//! crash of a library FTL's C code (a signal ends the whole process) and
//! a hang (a Rust FTL that loops without returning cannot be stopped from
//! inside its thread). With `--isolate` every run is a child — this very
//! program, `hunt --seed S` with the run's draws and `--json` to a
//! temporary file — publishing its progress in a shared file as
//! `--isolate` does for `stress` (`isolate.rs`, [`progress`]): which FTL
//! call is pending and how many flash operations have been issued. The
//! parent polls it; when a call stays pending while the flash operation
//! count does not move for `--hang-timeout`, the child is killed and the
//! run is an `ftl_hang` finding (the call, the request, the count), and a
//! child killed by a signal is an `ftl_crash`. Either is shrunk and
//! printed with its reproducer like any finding (each shrinking step is a
//! child too). Otherwise the child's JSON report gives the run's outcome
//! and coverage.
//!
//! A child costs a process start (a few milliseconds, against runs of 1 to
//! 500 ms), so isolation is an option, and the default for library FTLs.

use nandlab::config::Config;
use nandlab::ftl::foreign::progress::{self, Call};
use nandlab::run::hunt::coverage::Coverage;
use nandlab::run::hunt::execute::{Finding, Outcome};
use nandlab::run::hunt::swarm::Swarm;
use nandlab::run::hunt::{reproduce_args, Executor};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How often the parent looks at a child's progress.
const POLL: Duration = Duration::from_millis(20);

/// An executor running each swarm as `exe hunt DEVICE_ARGS --seed …` in a
/// child, killing it when it hangs for `hang_timeout`.
pub fn executor(device_args: Vec<String>, hang_timeout: Duration) -> Result<Executor, String> {
    let exe = std::env::current_exe().map_err(|e| format!("--isolate: cannot find this program: {e}"))?;
    Ok(Box::new(move |_base: &Config, swarm: &Swarm, coverage: &mut Coverage| {
        run_child(&exe, &device_args, swarm, hang_timeout, coverage).unwrap_or_else(Outcome::Skipped)
    }))
}

fn run_child(
    exe: &std::path::Path,
    device_args: &[String],
    swarm: &Swarm,
    hang_timeout: Duration,
    coverage: &mut Coverage,
) -> Result<Outcome, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("--isolate: temporary directory: {e}"))?;
    let (json, progress_path, stderr_path) =
        (dir.path().join("run.json"), dir.path().join("progress"), dir.path().join("stderr"));
    let progress_file = std::fs::File::create(&progress_path).map_err(|e| format!("--isolate: {e}"))?;
    progress_file.set_len(progress::BYTES as u64).map_err(|e| format!("--isolate: {e}"))?;
    let stderr = std::fs::File::create(&stderr_path).map_err(|e| format!("--isolate: {e}"))?;
    let mut args: Vec<String> = vec!["hunt".into()];
    args.extend(device_args.iter().cloned());
    args.extend(reproduce_args(swarm, true).split(' ').map(str::to_string));
    args.extend(["--json".to_string(), json.display().to_string()]);
    let mut child = Command::new(exe)
        .args(&args)
        .env(crate::isolate::PROGRESS_VAR, &progress_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("--isolate: cannot start the child process: {e}"))?;
    // The last (call, flash operations) seen, and since when.
    let mut last: Option<(Call, u64)> = None;
    let mut since = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("--isolate: {e}"))? {
            break status;
        }
        std::thread::sleep(POLL);
        let snapshot = std::fs::read(&progress_path).ok().and_then(|b| progress::read_snapshot(&b));
        let now = snapshot.as_ref().map(|p| (p.call, p.flash_ops));
        if now != last {
            (last, since) = (now, Instant::now());
            continue;
        }
        match snapshot {
            Some(p) if p.call != Call::None && since.elapsed() >= hang_timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Ok(Outcome::Found(hang_finding(&p, hang_timeout)));
            }
            _ => {}
        }
    };
    if let Some(signal) = signal_of(&status) {
        let snapshot = std::fs::read(&progress_path).ok().and_then(|b| progress::read_snapshot(&b));
        return Ok(Outcome::Found(crash_finding(signal, snapshot.as_ref())));
    }
    let text = std::fs::read_to_string(&json).map_err(|_| {
        let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        format!("the isolated run exited {:?} without a report: {}", status.code(), err.trim())
    })?;
    parse_report(&text, coverage)
}

/// The request and call of a progress record, as a finding says them.
fn pending(p: &progress::Snapshot) -> (String, u64) {
    match p.request {
        Some((index, lba, sectors)) => (format!("request {index}: {sectors} sectors at LBA {lba}"), index),
        None => ("no host request (a mount, idle time or shutdown)".to_string(), 0),
    }
}

fn hang_finding(p: &progress::Snapshot, timeout: Duration) -> Finding {
    let (request, index) = pending(p);
    Finding {
        rule: "ftl_hang".into(),
        message: format!(
            "[Error] ftl_hang: {} issued no flash operation for {:.1} s ({request}); {} flash operations before; \
             the run's process was killed",
            p.call.function(),
            timeout.as_secs_f64(),
            p.flash_ops
        ),
        location: Some(p.call.function().to_string()),
        phase: format!("request {index}"),
        request_index: index,
    }
}

fn crash_finding(signal: i32, p: Option<&progress::Snapshot>) -> Finding {
    let (what, request, index, location) = match p {
        Some(p) if p.call != Call::None => {
            let (request, index) = pending(p);
            (format!("in {} after {} flash operations", p.call.function(), p.flash_ops), request, index, p.call)
        }
        _ => ("outside the FTL".to_string(), "no request".to_string(), 0, Call::None),
    };
    Finding {
        rule: "ftl_crash".into(),
        message: format!("[Error] ftl_crash: the run's process was killed by signal {signal} {what} ({request})"),
        location: Some(format!("{} (signal {signal})", location.function())),
        phase: format!("request {index}"),
        request_index: index,
    }
}

#[cfg(unix)]
fn signal_of(status: &std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

#[cfg(not(unix))]
fn signal_of(_: &std::process::ExitStatus) -> Option<i32> {
    None
}

/// The outcome and coverage of a child's one-run report.
fn parse_report(text: &str, coverage: &mut Coverage) -> Result<Outcome, String> {
    let bad = |what: &str| format!("the isolated run's report: {what}");
    let report: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(&e.to_string()))?;
    *coverage = Coverage(serde_json::from_value(report["coverage"].clone()).map_err(|e| bad(&e.to_string()))?);
    if let Some(f) = report["findings"].as_array().and_then(|f| f.first()) {
        let text = |k: &str| f[k].as_str().unwrap_or_default().to_string();
        return Ok(Outcome::Found(Finding {
            rule: text("rule"),
            message: text("message"),
            location: f["location"].as_str().map(str::to_string),
            phase: text("phase"),
            request_index: f["request_index"].as_u64().unwrap_or(0),
        }));
    }
    if let Some((reason, _)) = report["skip_reasons"].as_object().and_then(|r| r.iter().next()) {
        return Ok(Outcome::Skipped(reason.clone()));
    }
    Ok(Outcome::Clean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_childs_report_gives_the_outcome_and_coverage() {
        let mut c = Coverage::new();
        let r = r#"{"coverage": {"gc_runs": [0, 3]}, "findings": [{"rule": "lost_write", "message": "m",
                   "location": null, "phase": "request 4", "request_index": 4}], "skip_reasons": {}}"#;
        let Outcome::Found(f) = parse_report(r, &mut c).unwrap() else { panic!() };
        assert_eq!((f.rule.as_str(), f.request_index), ("lost_write", 4));
        assert_eq!(c.0["gc_runs"].len(), 2);
        let skipped = r#"{"coverage": {}, "findings": [], "skip_reasons": {"refused": 3}}"#;
        assert_eq!(parse_report(skipped, &mut c).unwrap(), Outcome::Skipped("refused".into()));
        assert!(parse_report("{", &mut c).is_err());
        let p = progress::Snapshot { flash_ops: 9, call: Call::Trim, request: Some((12, 5, 3)) };
        let h = hang_finding(&p, Duration::from_secs(2));
        assert_eq!((h.rule.as_str(), h.request_index), ("ftl_hang", 12));
        assert!(h.message.contains("nandlab_ftl_trim issued no flash operation for 2.0 s"), "{}", h.message);
        assert_eq!(crash_finding(11, Some(&p)).location.as_deref(), Some("nandlab_ftl_trim (signal 11)"));
    }
}
