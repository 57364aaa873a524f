//! # nandlab-bench — nandlab's benches
//!
//! Standard workloads, measured honestly: `nandlab bench stress|trace|perf|crash|serve`.
//! The CLI parses the bench's arguments and calls into this crate; this
//! crate runs the `nandlab` executable it is given, one process per
//! measurement, reads each run's JSON report back and prints the runs and
//! their medians. Nothing here is asserted: speed is reported, never
//! tested.
//!
//! - [`stress`]: VST's workloads on every FTL configuration of the zoo,
//!   optionally side by side with a locally built VST on the same requests.
//! - [`trace`]: parsing throughput of every trace reader, in process.
//! - [`perf`]: MQSim's scenarios and a GC-heavy run, timed, with a locally
//!   built MQSim on the same flows side by side ([`mqsim`]) when given.
//! - [`crash`]: crash points checked per second.
//! - [`serve`]: `nandlab serve` beside `nbdkit memory` under fio: IOPS,
//!   MiB/s, server CPU per request, peak RSS.
//! - [`html`]: a bench's medians as an HTML page (`--html`).
//!
//! Why a crate of its own rather than a module of the library or of the
//! CLI: benches are not the simulator's subject. They hold other tools'
//! figures (MQSim's speed and published results, VST's output format),
//! devices derived for a measurement, and process handling (`wait4`, peak
//! RSS of a child) that the library does not need and the CLI's argument
//! handling should not carry. As a crate they depend on the library's
//! public API only, like any user of it, and the library builds without
//! them.
//!
//! Each run is a separate process so that its peak RSS and CPU time are
//! its own; a bench learns what a run did only from its JSON report (or,
//! for VST, its printed statistics), never from shared memory.

pub mod crash;
pub mod html;
pub mod mqsim;
pub mod perf;
pub mod serve;
pub mod stress;
pub mod trace;

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// How a bench ended, once its figures are printed. Bad input (an unknown
/// scenario, a missing file) is an `Err` with the message instead, before
/// anything or part of it ran.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every run ran and was clean.
    Measured,
    /// A run failed, left no report, found violations, or did not do the
    /// work it was meant to (the figures printed say which).
    Failed,
}

impl Verdict {
    fn of(failed: bool) -> Verdict {
        if failed {
            Verdict::Failed
        } else {
            Verdict::Measured
        }
    }
}

/// Run `cmd` (a `nandlab` subcommand writing its JSON report to `json`),
/// with its stdout discarded, and read the report back: `None` if it did
/// not run or left no readable report. Every bench runs each measurement
/// as its own process this way, so peak RSS is that run's alone.
pub fn report_of(mut cmd: Command, json: &Path) -> Option<Value> {
    cmd.stdout(std::process::Stdio::null())
        .status()
        .ok()
        .and_then(|_| std::fs::read_to_string(json).ok())
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
}

/// The median of `v` (0 for none).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A child process's exit, CPU time and peak RSS, from `wait4`.
pub(crate) struct Measured {
    pub(crate) success: bool,
    pub(crate) status: String,
    pub(crate) cpu_s: f64,
    pub(crate) rss_bytes: u64,
}

/// Run `cmd` to completion and measure it as the kernel accounted it.
pub(crate) fn run_measured(cmd: &mut Command) -> std::io::Result<Measured> {
    let child = cmd.spawn()?;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data; all-zero is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our child, not yet reaped (std waits only when
        // asked to); status and usage are valid for writes.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    drop(child);
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let (success, status) = if libc::WIFEXITED(status) {
        (libc::WEXITSTATUS(status) == 0, format!("exit status {}", libc::WEXITSTATUS(status)))
    } else if libc::WIFSIGNALED(status) {
        (false, format!("killed by signal {}", libc::WTERMSIG(status)))
    } else {
        (false, format!("wait status {status}"))
    };
    Ok(Measured {
        success,
        status,
        cpu_s: secs(usage.ru_utime) + secs(usage.ru_stime),
        // Linux reports ru_maxrss in KiB.
        rss_bytes: (usage.ru_maxrss as u64) * 1024,
    })
}
