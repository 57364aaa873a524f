//! `nandlab bench perf`: MQSim's scenarios and a GC-heavy run on
//! mqsim-default, timed, each run a separate `nandlab perf` process, beside
//! MQSim's figures for the same scenarios.
//!
//! MQSim's figures are of two kinds and are printed as such: its speed and
//! memory as measured running MQSim on the same kind of machine, and the
//! simulated results MQSim publishes for its shipped workloads. A scenario
//! with an exact untimed twin (one flow, a fixed request count, no
//! preconditioning) also runs the twin in `nandlab stress`, so what timing
//! adds to a request's CPU cost is measured rather than guessed.
//!
//! The GC-heavy device is mqsim-default with fewer, smaller blocks, so a
//! run reaches steady garbage collection quickly; it is built from the
//! preset's typed configuration ([`ConfigFile`]) and written as a
//! configuration file for the runs.

use crate::html::{fixed, BenchTable};
use crate::{median, report_of, Verdict};
use nandlab::config::{ConfigFile, PRESETS};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// One benchmark scenario: name, description, preset override, perf
/// arguments, and MQSim's figures for it.
struct Scenario {
    name: &'static str,
    description: &'static str,
    gc_geometry: bool,
    /// Arguments, in parts (shared between scenarios).
    args: &'static [&'static [&'static str]],
    mqsim: Mqsim,
    /// `nandlab stress` arguments issuing the same requests untimed, if
    /// the scenario has an exact untimed twin (one flow, a fixed request
    /// count, no preconditioning): its speed is the floor of the timed
    /// run's, the FTL, NAND checks and oracle alone (see [`untimed_floor`]).
    untimed: Option<&'static [&'static str]>,
}

/// MQSim's figures for a scenario. Speed: measured running MQSim on the
/// same kind of 2-core machine (issue 4 of this project, which cites the
/// measurements). Simulated results: MQSim's published output for its
/// shipped workloads (no preconditioning; MQSim's own figures, not
/// nandlab's model).
struct Mqsim {
    /// Requests simulated per CPU-second.
    requests_per_cpu_second: Option<f64>,
    /// The published simulated result, as published.
    simulated: Option<&'static str>,
}

/// Where MQSim's figures come from (printed with them).
const MQSIM_SOURCES: &str = "MQSim figures: speed and memory as measured running MQSim on the same kind of 2-core machine (cited in issue 4: 25.7 k requests/CPU-s on scenario 1, 35.6 k on scenario 2, 33.5 k on the GC run before it crashes, 2.0-2.3 GB peak RSS); simulated IOPS and mean response time as MQSim publishes them for its shipped scenarios (no preconditioning). README \"Comparing with MQSim\" explains where nandlab's simulated figures differ and why.";

const MQSIM_S1: Mqsim = Mqsim {
    requests_per_cpu_second: Some(25_700.0),
    simulated: Some("33,016 and 4,127 IOPS (QD 16 and QD 2 flows), 484 µs mean response"),
};
const MQSIM_S2: Mqsim = Mqsim {
    requests_per_cpu_second: Some(35_600.0),
    simulated: Some("90,691 and 62,455 IOPS, 176 and 256 µs mean response"),
};

/// MQSim's scenario 1 (see the scenario descriptions).
#[rustfmt::skip]
const S1: &[&str] = &[
    "--rw", "randwrite", "--bs", "4k", "--blockalign", "8k", "--size", "50%", "--io_size", "100x",
    "--flow", "iodepth=16", "--flow", "iodepth=2", "--runtime", "10s",
];
/// MQSim's scenario 2.
#[rustfmt::skip]
const S2: &[&str] = &[
    "--bs", "4k", "--blockalign", "8k", "--size", "50%", "--io_size", "100x",
    "--flow", "rw=randwrite,iodepth=16", "--flow", "rw=randwrite,iodepth=2",
    "--flow", "rw=randread,iodepth=16", "--flow", "rw=randread,iodepth=16", "--runtime", "10s",
];
/// The GC-heavy run.
#[rustfmt::skip]
const GC_HEAVY: &[&str] = &[
    "--rw", "randwrite", "--bs", "8k", "--blockalign", "8k", "--size", "100%", "--iodepth", "64",
    "--io_size", "1000x", "--requests", "3000000",
];
/// Options every `bench perf` run takes, timed or untimed (the JSON
/// report's path follows).
#[rustfmt::skip]
const COMMON: &[&str] = &["--no-progress", "--seed", "12345", "--fsync", "0", "--trim_percent", "0", "--json"];
/// The GC-heavy run's untimed twin: the same 3 million 8 KiB random writes.
#[rustfmt::skip]
const GC_HEAVY_UNTIMED: &[&str] = &[
    "--rw", "randwrite", "--bs", "8k", "--blockalign", "8k", "--size", "100%", "--write_size", "24576000000",
];
/// Preconditioned to 75 % first (MQSim's Initial_Occupancy_Percentage).
const PRE75: &[&str] = &["--precondition", "75%", "--precondition-max", "0.5"];

const SCENARIOS: [Scenario; 5] = [
    Scenario {
        name: "mqsim-s1",
        description: "MQSim scenario 1: two flows of 4 KiB random writes, 8 KiB aligned, over 50 % of the logical space, QD 16 and 2, 10 s simulated, no preconditioning",
        gc_geometry: false,
        args: &[S1],
        mqsim: MQSIM_S1,
        untimed: None,
    },
    Scenario {
        name: "mqsim-s1-pre75",
        description: "MQSim scenario 1 after preconditioning 75 % of the logical space (MQSim's Initial_Occupancy_Percentage)",
        gc_geometry: false,
        args: &[S1, PRE75],
        mqsim: Mqsim { requests_per_cpu_second: Some(25_700.0), simulated: None },
        untimed: None,
    },
    Scenario {
        name: "mqsim-s2",
        description: "MQSim scenario 2: scenario 1 plus two flows of 4 KiB random reads at QD 16 each, 10 s simulated, no preconditioning",
        gc_geometry: false,
        args: &[S2],
        mqsim: MQSIM_S2,
        untimed: None,
    },
    Scenario {
        name: "mqsim-s2-pre75",
        description: "MQSim scenario 2 after preconditioning 75 % of the logical space (MQSim's Initial_Occupancy_Percentage)",
        gc_geometry: false,
        args: &[S2, PRE75],
        mqsim: Mqsim { requests_per_cpu_second: Some(35_600.0), simulated: None },
        untimed: None,
    },
    Scenario {
        name: "gc-heavy",
        description: "GC-heavy: mqsim-default with 128 blocks per plane and 64 pages per block (8 GiB raw), random 8 KiB writes at QD 64 over the whole logical space, 3 million requests",
        gc_geometry: true,
        args: &[GC_HEAVY],
        mqsim: Mqsim { requests_per_cpu_second: Some(33_500.0), simulated: None },
        untimed: Some(GC_HEAVY_UNTIMED),
    },
];

struct Figures {
    requests: f64,
    sim_s: f64,
    iops: f64,
    mean_us: f64,
    waf: f64,
    req_per_cpu_s: f64,
    mb_per_cpu_s: f64,
    req_per_cpu_s_all: f64,
    cpu_s: f64,
    precondition_cpu_s: f64,
    rss_mib: f64,
    errors: u64,
    /// Per flow: workload, IOPS, mean latency µs.
    flows: Vec<(String, f64, f64)>,
}

fn figures_of(r: &Value) -> Figures {
    let f = |v: &Value| v.as_f64().unwrap_or(0.0);
    let p = &r["perf"];
    let cpu = f(&r["cpu_seconds"]);
    Figures {
        requests: f(&p["requests"]),
        sim_s: f(&p["simulated_seconds"]),
        iops: f(&p["iops"]),
        mean_us: f(&p["latency"]["all"]["mean_us"]),
        waf: f(&r["waf"]),
        req_per_cpu_s: f(&p["requests_per_cpu_second"]),
        mb_per_cpu_s: f(&p["host_mb_per_cpu_second"]),
        req_per_cpu_s_all: f(&p["requests"]) / cpu.max(1e-9),
        cpu_s: cpu,
        precondition_cpu_s: f(&p["precondition"]["cpu_seconds"]),
        rss_mib: f(&r["peak_rss_bytes"]) / f64::from(1u32 << 20),
        errors: r["errors"].as_u64().unwrap_or(0),
        flows: p["flows"]
            .as_array()
            .map(|fl| {
                fl.iter()
                    .map(|x| {
                        let w = x["workload"].as_str().unwrap_or("?");
                        let rw = w.split_whitespace().next().unwrap_or(w).to_string();
                        (
                            format!("{rw} {}", x["arrival"].as_str().unwrap_or("")),
                            f(&x["iops"]),
                            f(&x["latency_mean_us"]),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Run a scenario's untimed twin `runs` times in `nandlab stress` and
/// print its speed beside the timed run's: the CPU a request costs with
/// the FTL, the NAND checks and the oracle alone, so what the timing,
/// write cache and host model add is a measured difference, and how far a
/// speed target is from the floor under it is plain on any machine.
/// False if a run failed or found a violation.
/// True (nothing to run) for a scenario without an untimed twin.
fn untimed_floor(
    exe: &Path,
    dir: &Path,
    sc: &Scenario,
    device: &[&std::ffi::OsStr],
    runs: usize,
    timed_per_cpu_s: f64,
) -> bool {
    let Some(args) = sc.untimed else {
        return true;
    };
    let mut rates = Vec::new();
    let mut ok = true;
    for i in 0..runs {
        let json = dir.join(format!("{}-untimed-{i}.json", sc.name));
        let mut cmd = Command::new(exe);
        cmd.arg("stress").args(device).args(COMMON).arg(&json).args(args);
        let Some(r) = report_of(cmd, &json) else {
            println!("  untimed run {}: failed (no report)", i + 1);
            return false;
        };
        let h = &r["host"];
        let count = |k: &str| h[k].as_f64().unwrap_or(0.0);
        let requests =
            count("write_requests") + count("read_requests") + count("trim_requests") + count("flush_requests");
        let cpu = r["cpu_seconds"].as_f64().unwrap_or(0.0).max(1e-9);
        let errors = r["errors"].as_u64().unwrap_or(0);
        ok &= errors == 0;
        println!(
            "  untimed run {}: {requests:>9.0} requests in `nandlab stress`, {:>9.0} requests/CPU-s, WAF {:.3}; CPU {cpu:6.2} s; peak RSS {:6.0} MiB{}",
            i + 1,
            requests / cpu,
            r["waf"].as_f64().unwrap_or(0.0),
            r["peak_rss_bytes"].as_f64().unwrap_or(0.0) / f64::from(1u32 << 20),
            if errors > 0 { format!("  ({errors} ERRORS)") } else { String::new() }
        );
        rates.push(requests / cpu);
    }
    let floor = median(rates);
    let us = |per_s: f64| 1e6 / per_s.max(1e-9);
    println!(
        "  untimed floor (same FTL, NAND checks, oracle and requests; no timing, write cache or host model): {floor:.0} requests/CPU-s, {:.2} CPU-µs per request; timed {:.2} CPU-µs: the timed model adds {:.2}",
        us(floor),
        us(timed_per_cpu_s),
        us(timed_per_cpu_s) - us(floor)
    );
    if let Some(m) = sc.mqsim.requests_per_cpu_second {
        println!(
            "  30x MQSim allows {:.2} CPU-µs per request; the untimed floor alone is {:.0} % of that budget ({:.1}x MQSim with no timing at all)",
            us(30.0 * m),
            100.0 * us(floor) / us(30.0 * m),
            floor / m
        );
    }
    ok
}

/// The GC-heavy device: mqsim-default with 128 blocks per plane and 64
/// pages per block, and MQSim's GC victim choice for that many blocks.
pub fn gc_heavy_device() -> ConfigFile {
    let (_, text) = PRESETS.iter().find(|(n, _)| *n == "mqsim-default").expect("mqsim-default preset");
    let mut device: ConfigFile = toml::from_str(text).expect("presets parse");
    device.geometry.blocks_per_plane = 128;
    device.geometry.pages_per_block = 64;
    // MQSim's RGA set size is log2(blocks per plane): 7 for 128 blocks.
    device.ftl.insert("gc_policy".into(), toml::Value::String("d-choices:7".into()));
    device.name = Some("mqsim-default-gc (128 blocks x 64 pages)".into());
    device
}

/// [`gc_heavy_device`] as a configuration file, for `nandlab perf --config`.
fn gc_config_text() -> String {
    toml::to_string(&gc_heavy_device()).expect("configurations serialise")
}

/// Run `bench perf` on `scenarios` (none: all), `runs` times each, with
/// `extra` arguments added to every `nandlab perf` run; printing as it goes.
pub fn run(
    exe: &Path,
    scenarios: &[String],
    runs: usize,
    extra: &[String],
    table: &mut BenchTable,
) -> Result<Verdict, String> {
    *table = BenchTable::new(
        "nandlab bench perf",
        &[
            "scenario",
            "runs",
            "requests/CPU-s timed",
            "incl. setup",
            "host MB/CPU-s",
            "IOPS simulated",
            "WAF",
            "peak RSS, MiB",
        ],
        "simulated requests per CPU-second (timed phase)",
    );
    for s in scenarios {
        if !SCENARIOS.iter().any(|c| c.name == s) {
            let known: Vec<&str> = SCENARIOS.iter().map(|c| c.name).collect();
            return Err(format!("--scenario {s}: unknown ({})", known.join(", ")));
        }
    }
    let dir = std::env::temp_dir().join(format!("nandlab-bench-perf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let gc_config = dir.join("mqsim-default-gc.toml");
    std::fs::write(&gc_config, gc_config_text()).map_err(|e| format!("{}: {e}", gc_config.display()))?;
    let runs = runs.max(1);
    println!("nandlab bench perf — {runs} run(s) per scenario, one process per run (single-threaded), oracle on");
    table.setup = format!(
        "{runs} run(s) per scenario, one process per run (single-threaded), oracle on; extra arguments: {}",
        if extra.is_empty() { "none".to_string() } else { extra.join(" ") }
    );
    table.notes.push(
        "MQSim's speed and published results (printed by the bench) were not measured in this run, so they are not \
         on this page."
            .into(),
    );
    println!("{MQSIM_SOURCES}");
    let mut failed = false;
    for sc in SCENARIOS.iter().filter(|s| scenarios.is_empty() || scenarios.iter().any(|n| n == s.name)) {
        println!("\n{}: {}", sc.name, sc.description);
        let device: Vec<&std::ffi::OsStr> = if sc.gc_geometry {
            vec!["--config".as_ref(), gc_config.as_os_str()]
        } else {
            vec!["--preset".as_ref(), "mqsim-default".as_ref()]
        };
        let mut figures = Vec::new();
        for i in 0..runs {
            let json = dir.join(format!("{}-{i}.json", sc.name));
            let mut cmd = Command::new(exe);
            cmd.arg("perf")
                .args(&device)
                .args(COMMON)
                .arg(&json)
                .args(sc.args.iter().flat_map(|part| part.iter()))
                .args(extra);
            let Some(report) = report_of(cmd, &json) else {
                println!("  run {}: failed (no report)", i + 1);
                failed = true;
                break;
            };
            let f = figures_of(&report);
            println!(
                "  run {}: {:>9.0} requests in {:.3} s simulated ({:>8.0} IOPS, mean {:>7.1} µs, WAF {:.3}); {:>9.0} requests/CPU-s timed ({:>9.0} incl. setup), {:>7.1} host MB/CPU-s; CPU {:6.2} s (precondition {:.2} s); peak RSS {:6.0} MiB{}",
                i + 1,
                f.requests,
                f.sim_s,
                f.iops,
                f.mean_us,
                f.waf,
                f.req_per_cpu_s,
                f.req_per_cpu_s_all,
                f.mb_per_cpu_s,
                f.cpu_s,
                f.precondition_cpu_s,
                f.rss_mib,
                if f.errors > 0 { format!("  ({} ERRORS)", f.errors) } else { String::new() }
            );
            failed |= f.errors > 0;
            figures.push(f);
        }
        if !figures.is_empty() {
            let med = |g: fn(&Figures) -> f64| median(figures.iter().map(g).collect());
            println!(
                "  median: {:>9.0} requests/CPU-s timed ({:>9.0} incl. setup), {:>7.1} host MB/CPU-s, {:>8.0} IOPS simulated, peak RSS {:6.0} MiB",
                med(|f| f.req_per_cpu_s),
                med(|f| f.req_per_cpu_s_all),
                med(|f| f.mb_per_cpu_s),
                med(|f| f.iops),
                med(|f| f.rss_mib)
            );
            table.row(
                vec![
                    sc.name.to_string(),
                    figures.len().to_string(),
                    fixed(med(|f| f.req_per_cpu_s), 0),
                    fixed(med(|f| f.req_per_cpu_s_all), 0),
                    fixed(med(|f| f.mb_per_cpu_s), 1),
                    fixed(med(|f| f.iops), 0),
                    fixed(med(|f| f.waf), 3),
                    fixed(med(|f| f.rss_mib), 0),
                ],
                Some((sc.name.to_string(), "median".to_string(), med(|f| f.req_per_cpu_s))),
            );
            let last = figures.last().expect("non-empty");
            let flows: Vec<String> =
                last.flows.iter().map(|(w, iops, mean)| format!("{w}: {iops:.0} IOPS, {mean:.0} µs")).collect();
            println!("  nandlab simulated (seed 12345): {}", flows.join("; "));
            if let Some(m) = sc.mqsim.simulated {
                println!("  MQSim simulated (published):    {m}");
            }
            if let Some(m) = sc.mqsim.requests_per_cpu_second {
                println!(
                    "  speed vs MQSim ({:.1} k requests/CPU-s measured): {:.1}x timed, {:.1}x incl. setup",
                    m / 1e3,
                    med(|f| f.req_per_cpu_s) / m,
                    med(|f| f.req_per_cpu_s_all) / m
                );
            }
            // Extra arguments are perf options: with them the stress twin
            // would not be the same run, so the floor is left out.
            if extra.is_empty() {
                failed |= !untimed_floor(exe, &dir, sc, &device, runs, med(|f| f.req_per_cpu_s));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Verdict::of(failed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nandlab::config::Config;

    #[test]
    fn the_gc_heavy_untimed_twin_issues_the_same_requests() {
        let value = |args: &[&str], key: &str| {
            let i = args.iter().position(|a| *a == key).unwrap_or_else(|| panic!("{key} missing"));
            args[i + 1].to_string()
        };
        let bytes = |v: String| nandlab::util::size::parse_bytes(&v).unwrap();
        let requests: u64 = value(GC_HEAVY, "--requests").parse().unwrap();
        assert_eq!(bytes(value(GC_HEAVY_UNTIMED, "--write_size")), requests * bytes(value(GC_HEAVY, "--bs")));
        for key in ["--rw", "--bs", "--blockalign", "--size"] {
            assert_eq!(value(GC_HEAVY, key), value(GC_HEAVY_UNTIMED, key), "{key}");
        }
        let gc = SCENARIOS.iter().find(|s| s.name == "gc-heavy").unwrap();
        assert_eq!(gc.untimed, Some(GC_HEAVY_UNTIMED));
    }

    #[test]
    fn the_gc_heavy_device_is_8_gib_raw() {
        let c = Config::parse(&gc_config_text(), "gc.toml").unwrap();
        assert_eq!(c.geometry.raw_bytes(), 8 << 30);
        assert!(c.timing.is_some());
    }

    #[test]
    fn the_gc_heavy_device_is_mqsim_default_but_for_its_blocks_and_gc_policy() {
        let base = Config::preset("mqsim-default").unwrap();
        let gc = Config::parse(&gc_config_text(), "gc.toml").unwrap();
        let debug =
            |c: &Config| format!("{:?} {:?} {:?} {:?} {}", c.timing, c.host, c.workload, c.rules, c.dram_budget_bytes);
        assert_eq!(debug(&gc), debug(&base));
        let mut options = base.ftl_options.clone();
        options.insert("gc_policy".into(), toml::Value::String("d-choices:7".into()));
        assert_eq!((&gc.ftl_name, &gc.ftl_options), (&base.ftl_name, &options));
        assert_eq!(gc.name, "mqsim-default-gc (128 blocks x 64 pages)");
        let mut geometry = base.geometry.config().clone();
        (geometry.blocks_per_plane, geometry.pages_per_block) = (128, 64);
        assert_eq!(gc.geometry.config(), &geometry);
    }
}
