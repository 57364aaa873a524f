//! `nandlab bench`: standard workloads, measured honestly.
//!
//! Each run is a separate `nandlab stress` process (so peak RSS is that
//! run's alone), its JSON report is read back, and the median of the runs
//! is printed with the individual figures. Nothing here is asserted: speed
//! is reported, never tested.

use clap::{Subcommand, ValueEnum};
use serde_json::Value;
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
        /// FTL to measure (repeatable; default page).
        #[arg(long = "ftl")]
        ftls: Vec<String>,
        /// Device preset.
        #[arg(long, default_value = "vst-jasmine")]
        preset: String,
        /// Extra arguments passed to each `nandlab stress` run (e.g. --ftl-opt …).
        #[arg(last = true)]
        extra: Vec<String>,
    },
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

pub fn run(cmd: BenchCommand) -> ExitCode {
    match cmd {
        BenchCommand::Stress { workload, runs, ftls, preset, extra } => {
            bench_stress(workload, runs.max(1), ftls, &preset, &extra)
        }
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
    let ftls = if ftls.is_empty() { vec!["page".to_string()] } else { ftls };
    let dir = std::env::temp_dir().join(format!("nandlab-bench-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("error: {}: {e}", dir.display());
        return ExitCode::from(2);
    }
    println!(
        "nandlab bench stress — preset {preset}, {runs} run(s) per workload, one process per run (single-threaded)"
    );
    let mut failed = false;
    for ftl in &ftls {
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
                let status = Command::new(&exe)
                    .arg("stress")
                    .args(["--preset", preset, "--ftl", ftl, "--no-progress", "--json"])
                    .arg(&json)
                    .args(args.split_whitespace())
                    .args(extra)
                    .stdout(std::process::Stdio::null())
                    .status();
                let parsed = status
                    .ok()
                    .and_then(|_| std::fs::read_to_string(&json).ok())
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok());
                let Some(report) = parsed else {
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
            }
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

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}
