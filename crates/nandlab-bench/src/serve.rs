//! `nandlab bench serve`: `nandlab serve` beside `nbdkit memory` (a RAM
//! disk: an NBD server with nothing to simulate or check), in the same run.
//!
//! Each repetition measures, for each workload, nandlab then nbdkit (runs
//! interleaved, so a change of the machine's load falls on both): a fresh
//! server on a Unix socket, fio's `nbd` engine at iodepth 16 for the time
//! given, and around fio the server's CPU time (user + system, from
//! `/proc/PID/stat`) and at the end its peak RSS (`VmHWM` in
//! `/proc/PID/status`). Workloads: 4 KiB random write, 4 KiB random read
//! (of a region first filled with 1 MiB sequential writes, not measured,
//! so reads find data), 128 KiB sequential write. nandlab serves untimed,
//! every read checked. Printed: every run, the medians of IOPS, MiB/s,
//! server CPU µs per request and peak RSS, and nandlab's median over
//! nbdkit's. Without fio or nbdkit it says so and measures nothing.

use crate::html::{fixed, BenchTable};
use crate::{median, Verdict};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What `nandlab bench serve` measures.
pub struct ServeBenchArgs {
    pub nandlab: PathBuf,
    pub preset: String,
    pub ftl: String,
    pub runs: usize,
    pub seconds: u32,
    /// Bytes of the export fio uses.
    pub region_bytes: u64,
    /// Extra arguments to each `nandlab serve`.
    pub extra: Vec<String>,
}

/// One fio workload.
struct Workload {
    name: &'static str,
    rw: &'static str,
    bs: &'static str,
    fill_first: bool,
}

const WORKLOADS: [Workload; 3] = [
    Workload { name: "4 KiB random write", rw: "randwrite", bs: "4k", fill_first: false },
    Workload { name: "4 KiB random read", rw: "randread", bs: "4k", fill_first: true },
    Workload { name: "128 KiB sequential write", rw: "write", bs: "128k", fill_first: false },
];

/// One measured run.
#[derive(Clone, Copy, Default)]
struct Sample {
    iops: f64,
    mib_s: f64,
    cpu_us_per_request: f64,
    peak_rss_mib: f64,
}

/// A server under measurement.
struct Server {
    child: Child,
    uri: String,
}

fn installed(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Run `bench serve`, printing as it goes and filling `table` (the
/// `--html` page: both servers, measured side by side in this run).
pub fn run(args: &ServeBenchArgs, table: &mut BenchTable) -> Result<Verdict, String> {
    *table = BenchTable::new(
        "nandlab bench serve",
        &["workload", "server", "runs", "IOPS", "MiB/s", "server CPU µs/request", "peak RSS, MiB", "IOPS vs nbdkit"],
        "IOPS (fio, iodepth 16)",
    );
    table.setup = format!(
        "nandlab serve --preset {} --ftl {} (untimed, every read checked) beside nbdkit memory, fio nbd engine, iodepth 16, {} s per run, {} MiB region, {} run(s) each, interleaved",
        args.preset,
        args.ftl,
        args.seconds,
        args.region_bytes >> 20,
        args.runs
    );
    let missing: Vec<&str> = ["fio", "nbdkit"].into_iter().filter(|t| !installed(t)).collect();
    if !missing.is_empty() {
        let skipped =
            format!("bench serve: skipped, not installed: {} (Debian: apt-get install fio nbdkit)", missing.join(", "));
        println!("{skipped}");
        table.notes.push(skipped);
        return Ok(Verdict::Measured);
    }
    table.notes.push(
        "nbdkit memory ran beside nandlab in this run, on the same fio jobs; ratios are of this run's medians.".into(),
    );

    let dir = std::env::temp_dir().join(format!("nandlab-bench-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    println!(
        "bench serve: nandlab serve --preset {} --ftl {} (untimed, every read checked) beside nbdkit memory; \
         fio nbd engine, iodepth 16, {} s per run, {} MiB region, {} run(s) each, interleaved",
        args.preset,
        args.ftl,
        args.seconds,
        args.region_bytes >> 20,
        args.runs
    );
    let mut samples: Vec<[Vec<Sample>; 2]> = WORKLOADS.iter().map(|_| [Vec::new(), Vec::new()]).collect();
    let mut failed = false;
    for run in 1..=args.runs {
        for (w, workload) in WORKLOADS.iter().enumerate() {
            for (s, name) in ["nandlab", "nbdkit"].into_iter().enumerate() {
                let server = if s == 0 { start_nandlab(args, &dir) } else { start_nbdkit(args, &dir) };
                let sample = server.and_then(|server| measure(server, workload, args));
                match sample {
                    Ok(x) => {
                        println!(
                            "  run {run} {:<25} {name:<8} {:>9.0} IOPS {:>8.1} MiB/s {:>7.2} µs CPU/request  peak RSS {:>6.0} MiB",
                            workload.name, x.iops, x.mib_s, x.cpu_us_per_request, x.peak_rss_mib
                        );
                        samples[w][s].push(x);
                    }
                    Err(e) => {
                        println!("  run {run} {:<25} {name:<8} failed: {e}", workload.name);
                        failed = true;
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("medians (nandlab / nbdkit = ratio):");
    for (w, workload) in WORKLOADS.iter().enumerate() {
        let med = |s: usize, f: fn(&Sample) -> f64| median(samples[w][s].iter().map(f).collect());
        let line = |what: &str, f: fn(&Sample) -> f64, unit: &str| {
            let (a, b) = (med(0, f), med(1, f));
            let ratio = if b > 0.0 { format!("{:.2}x", a / b) } else { "-".into() };
            format!("{what} {a:.1} / {b:.1} {unit} = {ratio}")
        };
        for (s, server) in ["nandlab", "nbdkit"].into_iter().enumerate() {
            let iops_ratio = if s == 0 && med(1, |x| x.iops) > 0.0 {
                format!("{}x", fixed(med(0, |x| x.iops) / med(1, |x| x.iops), 2))
            } else {
                "—".to_string()
            };
            table.row(
                vec![
                    workload.name.to_string(),
                    server.to_string(),
                    samples[w][s].len().to_string(),
                    fixed(med(s, |x| x.iops), 0),
                    fixed(med(s, |x| x.mib_s), 1),
                    fixed(med(s, |x| x.cpu_us_per_request), 2),
                    fixed(med(s, |x| x.peak_rss_mib), 0),
                    iops_ratio,
                ],
                Some((workload.name.to_string(), server.to_string(), med(s, |x| x.iops))),
            );
        }
        println!(
            "  {:<25} {}; {}; {}; {}",
            workload.name,
            line("IOPS", |x| x.iops, ""),
            line("MiB/s", |x| x.mib_s, ""),
            line("server CPU", |x| x.cpu_us_per_request, "µs/request"),
            line("peak RSS", |x| x.peak_rss_mib, "MiB")
        );
    }
    Ok(Verdict::of(failed))
}

fn start_nandlab(args: &ServeBenchArgs, dir: &Path) -> Result<Server, String> {
    let socket = dir.join("nandlab.sock");
    let _ = std::fs::remove_file(&socket);
    let err = dir.join("nandlab.err");
    let child = Command::new(&args.nandlab)
        .args(["serve", "--preset", &args.preset, "--ftl", &args.ftl, "--seed", "1", "--unix"])
        .arg(&socket)
        .args(&args.extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("{}: {e}", args.nandlab.display()))?;
    let server = Server { child, uri: format!("nbd+unix:///?socket={}", socket.display()) };
    wait_listening(server, || std::fs::read_to_string(&err).unwrap_or_default().contains("listening on"))
}

fn start_nbdkit(args: &ServeBenchArgs, dir: &Path) -> Result<Server, String> {
    let socket = dir.join("nbdkit.sock");
    let _ = std::fs::remove_file(&socket);
    let child = Command::new("nbdkit")
        .args(["-f", "-U"])
        .arg(&socket)
        .args(["memory", &format!("{}", args.region_bytes.max(1 << 20))])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("nbdkit: {e}"))?;
    let server = Server { child, uri: format!("nbd+unix:///?socket={}", socket.display()) };
    wait_listening(server, || socket.exists())
}

/// Wait (at most 60 s) until `ready`; the server is stopped otherwise.
fn wait_listening(mut server: Server, ready: impl Fn() -> bool) -> Result<Server, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        if Instant::now() > deadline || server.child.try_wait().ok().flatten().is_some() {
            stop(&mut server);
            return Err("the server did not start listening".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(server)
}

fn stop(server: &mut Server) {
    // SAFETY: a signal to our own child process.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.child.try_wait().ok().flatten().is_none() {
        if Instant::now() > deadline {
            let _ = server.child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One fio run on `server` and what the server spent on it; the server
/// is stopped afterwards.
fn measure(mut server: Server, w: &Workload, args: &ServeBenchArgs) -> Result<Sample, String> {
    let pid = server.child.id();
    let result = (|| {
        let size = format!("{}", args.region_bytes);
        if w.fill_first {
            fio(&server.uri, &["--rw=write", "--bs=1m", "--iodepth=8", &format!("--size={size}")])?;
        }
        let before = cpu_seconds(pid)?;
        let out = fio(
            &server.uri,
            &[
                &format!("--rw={}", w.rw),
                &format!("--bs={}", w.bs),
                "--iodepth=16",
                &format!("--size={size}"),
                "--time_based",
                &format!("--runtime={}", args.seconds),
                "--randseed=1",
            ],
        )?;
        let after = cpu_seconds(pid)?;
        let job = &out["jobs"][0];
        let (r, wr) = (&job["read"], &job["write"]);
        let num = |v: &Value| v.as_f64().unwrap_or(0.0);
        let ios = num(&r["total_ios"]) + num(&wr["total_ios"]);
        if ios == 0.0 {
            return Err("fio completed no I/O".to_string());
        }
        Ok(Sample {
            iops: num(&r["iops"]) + num(&wr["iops"]),
            mib_s: (num(&r["bw"]) + num(&wr["bw"])) / 1024.0,
            cpu_us_per_request: (after - before) / ios * 1e6,
            peak_rss_mib: peak_rss_kib(pid)? / 1024.0,
        })
    })();
    stop(&mut server);
    result
}

/// fio's nbd engine on `uri` with `args`: its JSON report.
fn fio(uri: &str, args: &[&str]) -> Result<Value, String> {
    let out = Command::new("fio")
        .args(["--name=bench", "--ioengine=nbd", &format!("--uri={uri}"), "--output-format=json"])
        .args(args)
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("fio: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let json = text.find('{').map(|at| &text[at..]).ok_or_else(|| "fio printed no report".to_string())?;
    if !out.status.success() {
        return Err(format!("fio failed ({})", out.status));
    }
    serde_json::from_str(json).map_err(|e| format!("fio's report: {e}"))
}

/// User + system CPU seconds of process `pid` so far.
fn cpu_seconds(pid: u32) -> Result<f64, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // Fields after the command name (which may hold spaces): state is field 3.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Ok((ticks(11) + ticks(12)) / hz)
}

/// Peak resident set of process `pid`, KiB.
fn peak_rss_kib(pid: u32) -> Result<f64, String> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| "no VmHWM in /proc/PID/status".to_string())
}
