//! `--isolate`: run the whole command in a child process, so that a crash
//! of an FTL library's C code (a segfault, an abort) is reported as the
//! violation it is instead of ending nandlab.
//!
//! The parent re-runs this very command line (its seed pinned, drawn here
//! if absent) with `NANDLAB_ISOLATE_PROGRESS` naming a small file; the
//! child maps that file and the library adapter keeps in it which
//! `nandlab_ftl_*` function is running, the host request it serves and how
//! many flash operations the library has issued
//! ([`nandlab::ftl::foreign::progress`]). The child's output is the run's
//! output. If the child ends by a signal, the parent reads the file and
//! prints the finding: the signal, the function, the request, the flash
//! operation, and the command that reproduces it (and writes them as the
//! JSON report when `--json` was given: the child's own report is lost
//! with it); exit code 1. Any other end of the child is passed on as its
//! exit code.
//!
//! While the child runs the parent ignores SIGINT and SIGTERM: the child,
//! in the same process group, gets the terminal's interrupt and writes its
//! partial report itself.

use nandlab::ftl::foreign::progress::{self, Call};
use std::process::ExitCode;

/// The variable naming the progress file in the child.
pub const PROGRESS_VAR: &str = "NANDLAB_ISOLATE_PROGRESS";

/// Called first for a run command: `Some(code)` when this process was the
/// parent of an isolated run (the command is done); `None` to run the
/// command here (not isolated, or this is the child).
pub fn maybe_isolate(isolate: bool) -> Option<ExitCode> {
    if let Some(path) = std::env::var_os(PROGRESS_VAR) {
        // The child: publish progress into the parent's file.
        let published = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| e.to_string())
            .and_then(|f| publish(&f));
        if let Err(e) = published {
            eprintln!("warning: --isolate: cannot publish progress: {e}");
        }
        return None;
    }
    if !isolate {
        return None;
    }
    Some(parent())
}

#[cfg(target_os = "linux")]
fn publish(f: &std::fs::File) -> Result<(), String> {
    progress::publish_to(f)
}

#[cfg(not(target_os = "linux"))]
fn publish(_: &std::fs::File) -> Result<(), String> {
    Err("only on Linux".into())
}

fn parent() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let seed = match seed_of(&args) {
        Some(s) => s,
        None => {
            let s = nandlab::seed::draw_run_seed();
            args.push("--seed".into());
            args.push(s.to_string());
            s
        }
    };
    let file = match tempfile::NamedTempFile::new() {
        Ok(f) => f,
        Err(e) => return crate::exit::input_error(format!("--isolate: cannot create the progress file: {e}")),
    };
    if let Err(e) = file.as_file().set_len(progress::BYTES as u64) {
        return crate::exit::input_error(format!("--isolate: progress file: {e}"));
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return crate::exit::input_error(format!("--isolate: cannot find this program: {e}")),
    };
    // The parent waits through interrupts; the child handles them.
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(signal, std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)));
    }
    let status = std::process::Command::new(exe).args(&args).env(PROGRESS_VAR, file.path()).status();
    let status = match status {
        Ok(s) => s,
        Err(e) => return crate::exit::input_error(format!("--isolate: cannot start the child process: {e}")),
    };
    if let Some(code) = status.code() {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let signal = signal_of(&status);
    let bytes = std::fs::read(file.path()).unwrap_or_default();
    let snapshot = progress::read_snapshot(&bytes);
    let reproduce = crate::options::reproduce_command(seed);
    if let Some(path) = json_of(&args) {
        let text =
            serde_json::to_string_pretty(&json(signal, snapshot.as_ref(), seed, &reproduce)).expect("json") + "\n";
        let written = if path == "-" { Ok(print!("{text}")) } else { std::fs::write(&path, text) };
        if let Err(e) = written {
            eprintln!("error: --json {path}: {e}");
        }
    }
    print!("{}", report(signal, snapshot.as_ref(), &reproduce));
    ExitCode::from(crate::exit::VIOLATIONS)
}

/// The value of `--json FILE` / `--json=FILE` in `args`.
fn json_of(args: &[String]) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--json" {
            return it.next().cloned();
        }
        if let Some(s) = a.strip_prefix("--json=") {
            return Some(s.to_string());
        }
    }
    None
}

/// The finding as the JSON report (the child's own report is lost with it).
fn json(signal: i32, snapshot: Option<&progress::Snapshot>, seed: u64, reproduce: &str) -> serde_json::Value {
    let violation = snapshot.map(|p| {
        serde_json::json!({
            "rule": if p.call == Call::None { "process_crash" } else { "ftl_crash" },
            "severity": "error",
            "signal": signal,
            "signal_name": signal_name(signal),
            "function": p.call.function(),
            "flash_ops_issued": p.flash_ops,
            "request": p.request.map(|(id, lba, sectors)| serde_json::json!({"id": id, "lba": lba, "sectors": sectors})),
        })
    });
    serde_json::json!({
        "seed": seed,
        "result": "fail",
        "errors": 1,
        "killed_by_signal": signal,
        "violations": violation.into_iter().collect::<Vec<_>>(),
        "reproduce": reproduce,
    })
}

/// The value of `--seed N` / `--seed=N` in `args`.
fn seed_of(args: &[String]) -> Option<u64> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--seed" {
            return it.next().and_then(|s| s.parse().ok());
        }
        if let Some(s) = a.strip_prefix("--seed=") {
            return s.parse().ok();
        }
    }
    None
}

#[cfg(unix)]
fn signal_of(status: &std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.signal().unwrap_or(0)
}

#[cfg(not(unix))]
fn signal_of(_: &std::process::ExitStatus) -> i32 {
    0
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => "a signal",
    }
}

/// The finding, as the summary prints it.
fn report(signal: i32, snapshot: Option<&progress::Snapshot>, reproduce: &str) -> String {
    let name = signal_name(signal);
    let mut s = String::new();
    match snapshot {
        Some(p) if p.call != Call::None => {
            let request = match (p.call, p.request) {
                (Call::Trim, Some((_, lba, sectors))) => format!("a trim of {sectors} sectors at LBA {lba}"),
                (_, Some((id, lba, sectors))) => format!("request {id}: {sectors} sectors at LBA {lba}"),
                _ => "no host request".to_string(),
            };
            s += &format!("nandlab --isolate: the FTL's C code crashed: {name} (signal {signal})\n");
            s += &format!(
                "  [Error] ftl_crash at flash op {} ({request}): {name} in {} after the library had issued {} flash \
                 operations\n",
                p.flash_ops,
                p.call.function(),
                p.flash_ops
            );
        }
        Some(p) => {
            s += &format!(
                "nandlab --isolate: the run's process died of {name} (signal {signal}) outside the FTL library\n"
            );
            s += &format!("  [Error] process_crash after flash op {}: {name}\n", p.flash_ops.saturating_sub(1));
        }
        None => {
            s += &format!("nandlab --isolate: the run's process died of {name} (signal {signal}) before it started\n");
        }
    }
    s += &format!("  result     FAIL — the run's process was killed by {name}\n");
    s += &format!("\nReproduce with:\n  {reproduce}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_names_the_signal_the_function_the_request_and_the_op() {
        let p = progress::Snapshot { flash_ops: 1234, call: Call::Write, request: Some((77, 4096, 16)) };
        let r = report(11, Some(&p), "nandlab stress --seed 1");
        assert!(r.contains("SIGSEGV (signal 11)"), "{r}");
        assert!(r.contains("at flash op 1234 (request 77: 16 sectors at LBA 4096)"), "{r}");
        assert!(r.contains("in nandlab_ftl_write"), "{r}");
        assert!(r.contains("Reproduce with:\n  nandlab stress --seed 1"), "{r}");
        assert_eq!(seed_of(&["--seed".into(), "9".into()]), Some(9));
        assert_eq!(seed_of(&["--seed=8".into()]), Some(8));
        assert_eq!(seed_of(&["--preset".into()]), None);
        let j = json(11, Some(&p), 1, "nandlab stress --seed 1");
        assert_eq!(j["violations"][0]["rule"], "ftl_crash");
        assert_eq!(j["violations"][0]["flash_ops_issued"], 1234);
        assert_eq!(j["violations"][0]["request"]["id"], 77);
        assert_eq!(json_of(&["--json".into(), "r.json".into()]).as_deref(), Some("r.json"));
    }
}
