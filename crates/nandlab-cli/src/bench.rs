//! `nandlab bench`: standard workloads, measured honestly.
//!
//! Each run is a separate `nandlab stress` process (so peak RSS is that
//! run's alone), its JSON report is read back, and the median of the runs
//! is printed with the individual figures. Nothing here is asserted: speed
//! is reported, never tested.
//!
//! By default every FTL of the zoo runs (see [`ZOO`]), each compared with
//! the VST figure (Jasmine OpenSSD FTLs on a 2-core machine) of its closest
//! OpenSSD counterpart; the target is twice that figure.

use clap::{Subcommand, ValueEnum};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, ExitCode};

#[derive(Subcommand)]
pub enum BenchCommand {
    /// VST's workloads on the vst-jasmine preset: effective host GB/s, requests/s,
    /// flash ops/s, WAF, CPU time and peak RSS per run, and medians.
    Stress {
        /// Which workload(s).
        #[arg(long, value_enum, default_value_t = StressBench::All)]
        workload: StressBench,
        /// Runs per workload (the median is reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// FTL configurations to measure, by label or FTL name (repeatable;
        /// default: all of them — page, page-dac, dftl, dftl-whole-table, hybrid, block).
        #[arg(long = "ftl")]
        ftls: Vec<String>,
        /// Device preset.
        #[arg(long, default_value = "vst-jasmine")]
        preset: String,
        /// Extra arguments passed to each `nandlab stress` run (e.g. --ftl-opt …).
        #[arg(last = true)]
        extra: Vec<String>,
    },
    /// Trace parsing throughput per format (lines/s, MB/s) on generated files of ≥ 1 GiB.
    Trace(crate::trace_bench::TraceBenchArgs),
    /// MQSim's scenarios and a GC-heavy run on mqsim-default, timed:
    /// simulated requests per CPU-second, host MB per CPU-second, peak RSS.
    Perf(crate::perf_cmd::BenchPerfArgs),
    /// Crash points checked per wall-second and per CPU-second for `page` and
    /// `optr` on vst-jasmine after 1x capacity of random writes, each point
    /// verifying every logical sector.
    Crash {
        /// Crash points per run.
        #[arg(long, default_value_t = 20)]
        points: u64,
        /// Runs per FTL (the median is reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// FTL to measure (repeatable; default page and optr).
        #[arg(long = "ftl")]
        ftls: Vec<String>,
        /// Device preset.
        #[arg(long, default_value = "vst-jasmine")]
        preset: String,
        /// Extra arguments passed to each `nandlab crash` run (e.g. --no-nested).
        #[arg(last = true)]
        extra: Vec<String>,
    },
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum StressBench {
    All,
    VstRand,
    VstSeq,
}

/// The standard stress workloads: (name, description, `nandlab stress` arguments).
const STRESS_WORKLOADS: [(&str, &str, &str); 2] = [
    (
        "vst-rand",
        "uniform random, 8 KiB aligned, 8-64 KiB requests, 20 % reads, writes = 4x logical capacity, seed 12345",
        "--rw randrw --rwmixread 20 --bsrange 8k-64k --blockalign 8k --write_size 4x --fsync 0 --trim_percent 0 --seed 12345",
    ),
    (
        "vst-seq",
        "sequential 64 KiB writes, 4x logical capacity",
        "--rw write --bs 64k --write_size 4x --fsync 0 --trim_percent 0 --seed 12345",
    ),
];

/// An OpenSSD FTL as VST measured it: effective host GB/s on vst-rand and vst-seq.
pub struct Counterpart {
    pub name: &'static str,
    pub rand_gbps: f64,
    pub seq_gbps: f64,
}

const VST_GREEDY: Counterpart = Counterpart { name: "VST greedy page FTL", rand_gbps: 9.2, seq_gbps: 44.8 };
const VST_DAC: Counterpart = Counterpart { name: "VST DAC", rand_gbps: 4.2, seq_gbps: 31.1 };
const VST_FASTER: Counterpart = Counterpart { name: "VST FASTer", rand_gbps: 1.6, seq_gbps: 27.3 };

/// One FTL configuration of the bench.
pub struct ZooEntry {
    pub label: &'static str,
    pub ftl: &'static str,
    pub args: &'static [&'static str],
    pub counterpart: Counterpart,
    /// Why this counterpart.
    pub why: &'static str,
}

/// The configurations `bench stress` runs by default.
pub const ZOO: [ZooEntry; 6] = [
    ZooEntry {
        label: "page",
        ftl: "page",
        args: &[],
        counterpart: VST_GREEDY,
        why: "page mapping with greedy GC and the whole map in DRAM, as Jasmine's greedy FTL",
    },
    ZooEntry {
        label: "page-dac",
        ftl: "page",
        args: &["--hot-cold", "dac:4", "--gc-policy", "cost-benefit"],
        counterpart: VST_DAC,
        why: "DAC's regions with cost-benefit cleaning over page mapping, as Jasmine's DAC FTL",
    },
    ZooEntry {
        label: "dftl",
        ftl: "dftl",
        args: &[],
        counterpart: VST_GREEDY,
        why: "page mapping with greedy GC; DFTL adds the map cache (2 MiB here, 6 % of the table) \
              — no OpenSSD FTL caches its map, so the greedy FTL is the closest",
    },
    ZooEntry {
        label: "dftl-whole-table",
        ftl: "dftl",
        args: &["--cmt-bytes", "100%"],
        counterpart: VST_GREEDY,
        why: "DFTL given the DRAM Jasmine's greedy FTL has: the same map in DRAM",
    },
    ZooEntry {
        label: "hybrid",
        ftl: "hybrid",
        args: &[],
        counterpart: VST_FASTER,
        why: "FAST's log blocks and merges are FASTer's (without its isolation area)",
    },
    ZooEntry {
        label: "block",
        ftl: "block",
        args: &[],
        counterpart: VST_FASTER,
        why: "no OpenSSD FTL maps whole blocks; FASTer's data blocks are block-mapped, so it is the closest",
    },
];

pub fn run(cmd: BenchCommand) -> ExitCode {
    match cmd {
        BenchCommand::Stress { workload, runs, ftls, preset, extra } => {
            bench_stress(workload, runs.max(1), ftls, &preset, &extra)
        }
        BenchCommand::Trace(args) => crate::trace_bench::run(args),
        BenchCommand::Perf(args) => crate::perf_cmd::bench_perf(&args),
        BenchCommand::Crash { points, runs, ftls, preset, extra } => {
            crate::crash_cmd::bench(points, runs.max(1), ftls, &preset, &extra)
        }
    }
}

struct Figures {
    gbps: f64,
    requests_per_s: f64,
    flash_ops_per_s: f64,
    waf: f64,
    wall_s: f64,
    cpu_s: f64,
    rss_mib: f64,
    errors: u64,
}

fn bench_stress(which: StressBench, runs: usize, ftls: Vec<String>, preset: &str, extra: &[String]) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: cannot find the nandlab executable: {e}");
            return ExitCode::from(2);
        }
    };
    let entries: Vec<&ZooEntry> = if ftls.is_empty() {
        ZOO.iter().collect()
    } else {
        let mut chosen = Vec::new();
        for f in &ftls {
            let matching: Vec<&ZooEntry> = ZOO.iter().filter(|e| e.label == f || e.ftl == f).collect();
            if matching.is_empty() {
                let labels: Vec<&str> = ZOO.iter().map(|e| e.label).collect();
                eprintln!("error: --ftl {f}: not a bench configuration (choose from {})", labels.join(", "));
                return ExitCode::from(2);
            }
            // A label and an FTL name may pick the same entry: measure it once.
            for e in matching {
                if !chosen.iter().any(|c: &&ZooEntry| std::ptr::eq(*c, e)) {
                    chosen.push(e);
                }
            }
        }
        chosen
    };
    let dir = std::env::temp_dir().join(format!("nandlab-bench-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("error: {}: {e}", dir.display());
        return ExitCode::from(2);
    }
    println!(
        "nandlab bench stress — preset {preset}, {runs} run(s) per workload, one process per run (single-threaded)"
    );
    let mut failed = false;
    let mut results: Vec<(&ZooEntry, &str, f64, f64, f64)> = Vec::new();
    for entry in &entries {
        let ftl = entry.label;
        println!(
            "\n== {} (--ftl {} {}) vs {}: {}",
            entry.label,
            entry.ftl,
            entry.args.join(" "),
            entry.counterpart.name,
            entry.why
        );
        for (name, description, args) in STRESS_WORKLOADS {
            if which != StressBench::All
                && which.to_possible_value().map(|v| v.get_name().to_string()) != Some(name.to_string())
            {
                continue;
            }
            println!("\n{name} / {ftl}: {description}");
            let mut figures = Vec::new();
            for i in 0..runs {
                let json = dir.join(format!("{name}-{ftl}-{i}.json"));
                let mut cmd = Command::new(&exe);
                cmd.arg("stress")
                    .args(["--preset", preset, "--ftl", entry.ftl, "--no-progress", "--json"])
                    .arg(&json)
                    .args(entry.args.iter())
                    .args(args.split_whitespace())
                    .args(extra);
                let Some(report) = report_of(cmd, &json) else {
                    println!("  run {}: failed (no report)", i + 1);
                    failed = true;
                    break;
                };
                let f = figures_of(&report);
                println!(
                    "  run {}: {:8.2} GB/s  {:>11.0} req/s  {:>12.0} flash ops/s  WAF {:.3}  wall {:6.2} s  CPU {:6.2} s  peak RSS {:6.0} MiB{}",
                    i + 1,
                    f.gbps,
                    f.requests_per_s,
                    f.flash_ops_per_s,
                    f.waf,
                    f.wall_s,
                    f.cpu_s,
                    f.rss_mib,
                    if f.errors > 0 { format!("  ({} ERRORS)", f.errors) } else { String::new() }
                );
                failed |= f.errors > 0;
                figures.push(f);
            }
            if !figures.is_empty() {
                let med = |g: fn(&Figures) -> f64| median(figures.iter().map(g).collect());
                println!(
                    "  median: {:8.2} GB/s  {:>11.0} req/s  {:>12.0} flash ops/s  WAF {:.3}  wall {:6.2} s  CPU {:6.2} s  peak RSS {:6.0} MiB",
                    med(|f| f.gbps),
                    med(|f| f.requests_per_s),
                    med(|f| f.flash_ops_per_s),
                    med(|f| f.waf),
                    med(|f| f.wall_s),
                    med(|f| f.cpu_s),
                    med(|f| f.rss_mib)
                );
                let vst = if name == "vst-rand" { entry.counterpart.rand_gbps } else { entry.counterpart.seq_gbps };
                let gbps = med(|f| f.gbps);
                println!(
                    "  target: at least {:.1} GB/s (2x {} {vst} GB/s): {}",
                    2.0 * vst,
                    entry.counterpart.name,
                    if gbps >= 2.0 * vst { "met" } else { "NOT met" }
                );
                results.push((entry, name, gbps, med(|f| f.waf), 2.0 * vst));
            }
        }
    }
    if results.len() > 1 {
        println!("\nSummary (medians; figures from this machine, which may be shared):");
        println!("  {:18} {:9} {:>9} {:>8} {:>10}  counterpart", "configuration", "workload", "GB/s", "WAF", "target");
        for (e, w, gbps, waf, target) in &results {
            println!(
                "  {:18} {:9} {:>9.2} {:>8.3} {:>10.1}  {} {}",
                e.label,
                w,
                gbps,
                waf,
                target,
                e.counterpart.name,
                if gbps >= target { "(met)" } else { "(NOT met)" }
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn figures_of(r: &Value) -> Figures {
    let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
    Figures {
        gbps: f("effective_host_gbps"),
        requests_per_s: f("requests_per_second"),
        flash_ops_per_s: f("flash_ops_per_second"),
        waf: f("waf"),
        wall_s: f("wall_seconds"),
        cpu_s: f("cpu_seconds"),
        rss_mib: f("peak_rss_bytes") / f64::from(1u32 << 20),
        errors: r["errors"].as_u64().unwrap_or(0),
    }
}

/// Run `cmd` (a `nandlab` subcommand writing its JSON report to `json`),
/// with its stdout discarded, and read the report back: `None` if it did
/// not run or left no readable report. Every bench runs each measurement
/// as its own process this way, so peak RSS is that run's alone.
pub(crate) fn report_of(mut cmd: Command, json: &Path) -> Option<Value> {
    cmd.stdout(std::process::Stdio::null())
        .status()
        .ok()
        .and_then(|_| std::fs::read_to_string(json).ok())
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
}

/// The median of `v` (0 for none).
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
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
