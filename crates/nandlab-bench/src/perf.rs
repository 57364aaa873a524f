//! `nandlab bench perf`: MQSim's scenarios and a GC-heavy run on
//! mqsim-default, timed, each run a separate `nandlab perf` process, and
//! with `--mqsim PATH` the same scenarios in a locally built MQSim,
//! alternating with nandlab's runs ([`crate::mqsim`]).
//!
//! Every scenario is defined once as MQSim flows ([`mqsim::Scenario`]:
//! operation, request size, alignment, queue depth, working set,
//! preconditioning, stop condition) and nandlab's `perf` arguments are
//! those flows in nandlab's options; a test checks that the two say the
//! same. Without `--mqsim` the bench prints the MQSim speed last measured
//! side by side, marked as such with its date, never a ratio against it.
//!
//! A scenario with an exact untimed twin (one flow, a fixed request
//! count, no preconditioning) also runs the twin in `nandlab stress`, so
//! what timing adds to a request's CPU cost is measured rather than
//! guessed.
//!
//! The GC-heavy device is mqsim-default with fewer, smaller blocks, so a
//! run reaches steady garbage collection quickly; it is built from the
//! preset's typed configuration ([`ConfigFile`]) and written as a
//! configuration file for the runs (and as MQSim's device file).

use crate::html::{fixed, BenchTable};
use crate::mqsim::{self, Flow, Mqsim, Stop};
use crate::{median, report_of, Verdict};
use nandlab::config::{ConfigFile, PRESETS};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// One benchmark scenario: name, description, device, the flows (as
/// MQSim runs them; nandlab's `perf` arguments are derived from them), and
/// MQSim's figures last recorded for it.
struct Scenario {
    name: &'static str,
    description: &'static str,
    gc_geometry: bool,
    flows: mqsim::Scenario,
    recorded: Recorded,
    /// Whether the scenario has an exact untimed twin in `nandlab stress`
    /// (one flow, a fixed request count, no preconditioning): its speed is
    /// the floor of the timed run's, the FTL, NAND checks and oracle alone
    /// (see [`untimed_floor`]).
    untimed_twin: bool,
    /// What makes the two simulators' work differ on this scenario, if
    /// anything beyond the model differences the README lists (printed
    /// with the ratios).
    caveat: Option<&'static str>,
}

/// MQSim's figures for a scenario, printed when MQSim does not run beside
/// nandlab (and never turned into a ratio then). Speed: the median
/// measured by this bench with `--mqsim` on the day [`RECORDED_ON`] says.
/// Simulated results: MQSim's published output for its shipped workloads
/// (MQSim's own figures, not nandlab's model).
struct Recorded {
    /// Requests simulated per CPU-second, simulation alone (whole process
    /// minus a setup-only run; see [`crate::mqsim`]).
    requests_per_cpu_second: Option<f64>,
    /// The published simulated result, as published.
    simulated: Option<&'static str>,
}

/// When and how the recorded MQSim speeds were measured.
const RECORDED_ON: &str = "MQSim speed last measured side by side with this bench (`nandlab bench perf --mqsim PATH`, MQSim 7ec40e3 built with its Makefile, medians of 3, 2026-11-26, 2-core VM); a recorded figure, not this run's: run with --mqsim for ratios. MQSim's published simulated results are for its shipped scenarios (no preconditioning).";

/// MQSim's scenario 1 as shipped (`workload.xml`, first `IO_Scenario`):
/// two flows of 4 KiB random writes, 8 KiB aligned, over 50 % of the
/// logical space, at queue depths 16 and 2, for 10 s of simulated time.
const S1_FLOWS: &[Flow] = &[
    Flow { read_percent: 0, queue_depth: 16, priority: "HIGH", seed: 798 },
    Flow { read_percent: 0, queue_depth: 2, priority: "HIGH", seed: 6533 },
];
/// MQSim's scenario 2 as shipped (second `IO_Scenario`): two flows of
/// 4 KiB random reads at queue depth 16, one URGENT and one HIGH.
const S2_FLOWS: &[Flow] = &[
    Flow { read_percent: 100, queue_depth: 16, priority: "URGENT", seed: 798 },
    Flow { read_percent: 100, queue_depth: 16, priority: "HIGH", seed: 6533 },
];
/// The GC-heavy run: one flow of 8 KiB random writes at queue depth 64.
const GC_FLOWS: &[Flow] = &[Flow { read_percent: 0, queue_depth: 64, priority: "HIGH", seed: 798 }];

/// 4 KiB requests, 8 KiB aligned, over half the logical space, 10 s.
const fn shipped(flows: &'static [Flow], precondition_percent: Option<u32>) -> mqsim::Scenario {
    mqsim::Scenario {
        flows,
        request_bytes: 4096,
        alignment_bytes: 8192,
        working_set_percent: 50,
        precondition_percent,
        stop: Stop::SimulatedNs(10_000_000_000),
    }
}

/// Requests of the GC-heavy run: 1.5 million, a count MQSim survives (it
/// crashed at 60-65 % of 3 million on this device when measured).
const GC_HEAVY_REQUESTS: u64 = 1_500_000;

/// Options every `bench perf` run takes, timed or untimed (the JSON
/// report's path follows).
#[rustfmt::skip]
const COMMON: &[&str] = &["--no-progress", "--seed", "12345", "--fsync", "0", "--trim_percent", "0", "--json"];

const SCENARIOS: [Scenario; 5] = [
    Scenario {
        name: "mqsim-s1",
        description: "MQSim scenario 1: two flows of 4 KiB random writes, 8 KiB aligned, over 50 % of the logical space, QD 16 and 2, 10 s simulated, no preconditioning",
        gc_geometry: false,
        flows: shipped(S1_FLOWS, None),
        recorded: Recorded {
            requests_per_cpu_second: None,
            simulated: Some("33,016 and 4,127 IOPS (QD 16 and QD 2 flows), 484 µs mean response"),
        },
        untimed_twin: false,
        caveat: None,
    },
    Scenario {
        name: "mqsim-s1-pre75",
        description: "MQSim scenario 1 after preconditioning 75 % of the logical space (MQSim's Enabled_Preconditioning, Initial_Occupancy_Percentage 75)",
        gc_geometry: false,
        flows: shipped(S1_FLOWS, Some(75)),
        recorded: Recorded { requests_per_cpu_second: None, simulated: None },
        untimed_twin: false,
        caveat: None,
    },
    Scenario {
        name: "mqsim-s2",
        description: "MQSim scenario 2: two flows of 4 KiB random reads, 8 KiB aligned, over 50 % of the logical space, QD 16 each, 10 s simulated, no preconditioning",
        gc_geometry: false,
        flows: shipped(S2_FLOWS, None),
        recorded: Recorded {
            requests_per_cpu_second: None,
            simulated: Some("90,691 and 62,455 IOPS, 176 and 256 µs mean response"),
        },
        untimed_twin: false,
        caveat: Some("not the same work: nothing was written, and nandlab answers a read of never-written data with zeros without touching flash (as a drive does for deallocated blocks) while MQSim reads flash for it; mqsim-s2-pre75 compares reads of written data"),
    },
    Scenario {
        name: "mqsim-s2-pre75",
        description: "MQSim scenario 2 after preconditioning 75 % of the logical space (MQSim's Enabled_Preconditioning, Initial_Occupancy_Percentage 75)",
        gc_geometry: false,
        flows: shipped(S2_FLOWS, Some(75)),
        recorded: Recorded { requests_per_cpu_second: None, simulated: None },
        untimed_twin: false,
        caveat: None,
    },
    Scenario {
        name: "gc-heavy",
        description: "GC-heavy: mqsim-default with 128 blocks per plane and 64 pages per block (8 GiB raw), random 8 KiB writes at QD 64 over the whole logical space, 1.5 million requests",
        gc_geometry: true,
        flows: mqsim::Scenario {
            flows: GC_FLOWS,
            request_bytes: 8192,
            alignment_bytes: 8192,
            working_set_percent: 100,
            precondition_percent: None,
            stop: Stop::Requests(GC_HEAVY_REQUESTS),
        },
        recorded: Recorded { requests_per_cpu_second: None, simulated: None },
        untimed_twin: true,
        caveat: None,
    },
];

/// The workload options shared by a scenario's timed and untimed runs:
/// request size, alignment and working set.
fn workload_args(sc: &mqsim::Scenario) -> Vec<String> {
    vec![
        "--bs".into(),
        sc.request_bytes.to_string(),
        "--blockalign".into(),
        sc.alignment_bytes.to_string(),
        "--size".into(),
        format!("{}%", sc.working_set_percent),
    ]
}

/// A flow's operation in fio's terms (a flow is all reads or all writes).
fn rw_of(flow: &Flow) -> &'static str {
    if flow.read_percent >= 100 {
        "randread"
    } else {
        "randwrite"
    }
}

/// `nandlab perf` arguments running exactly `sc`'s flows: one `--flow` per
/// MQSim flow (operation and queue depth), the same request size,
/// alignment and working set, the same stop condition, and the same
/// preconditioning (MQSim's occupancy; nandlab's preconditioning fills
/// that share sequentially and then overwrites it randomly, at most half
/// its volume, untimed).
fn perf_args(sc: &mqsim::Scenario) -> Vec<String> {
    let mut args = workload_args(sc);
    for flow in sc.flows {
        args.push("--flow".into());
        args.push(format!("rw={},iodepth={}", rw_of(flow), flow.queue_depth));
    }
    match sc.stop {
        // The simulated time bounds the run; the volume cap only keeps
        // it finite.
        Stop::SimulatedNs(ns) => {
            args.extend(["--io_size".into(), "100x".into(), "--runtime".into(), format!("{ns}ns")])
        }
        Stop::Requests(n) => args.extend([
            "--io_size".into(),
            "1000x".into(),
            "--requests".into(),
            (n * sc.flows.len() as u64).to_string(),
        ]),
    }
    if let Some(p) = sc.precondition_percent {
        args.extend(["--precondition".into(), format!("{p}%"), "--precondition-max".into(), "0.5".into()]);
    }
    args
}

/// `nandlab stress` arguments issuing the same requests as `sc` untimed
/// (one write flow, a request count): the same size, alignment and working
/// set, written until the same volume.
fn untimed_args(sc: &mqsim::Scenario) -> Option<Vec<String>> {
    let (Stop::Requests(n), [flow], None) = (sc.stop, sc.flows, sc.precondition_percent) else {
        return None;
    };
    let mut args = workload_args(sc);
    args.extend(["--rw".into(), rw_of(flow).into(), "--write_size".into(), (n * sc.request_bytes).to_string()]);
    Some(args)
}

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
    mqsim_per_cpu_s: Option<f64>,
) -> bool {
    let Some(args) = untimed_args(&sc.flows).filter(|_| sc.untimed_twin) else {
        return true;
    };
    let mut rates = Vec::new();
    let mut ok = true;
    for i in 0..runs {
        let json = dir.join(format!("{}-untimed-{i}.json", sc.name));
        let mut cmd = Command::new(exe);
        cmd.arg("stress").args(device).args(COMMON).arg(&json).args(&args);
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
    if let Some(m) = mqsim_per_cpu_s {
        println!(
            "  30x MQSim (this run's) allows {:.2} CPU-µs per request; the untimed floor alone is {:.0} % of that budget ({:.1}x MQSim with no timing at all)",
            us(30.0 * m),
            100.0 * us(floor) / us(30.0 * m),
            floor / m
        );
    }
    ok
}

/// The presets `bench perf` runs nandlab on (`--preset`): mqsim-default
/// for the speed comparison, mqsim-compat (mqsim-default as MQSim models
/// it: see the preset) for fidelity. MQSim is given mqsim-default's device
/// either way ([`MQSIM_DEVICE`]).
pub const PRESET_CHOICES: &[&str] = &["mqsim-default", "mqsim-compat"];

/// The device MQSim runs: its shipped one, whatever nandlab's preset.
const MQSIM_DEVICE: &str = "mqsim-default";

/// The GC-heavy device: `preset` with 128 blocks per die's plane (256 on
/// mqsim-compat's merged dies: the same capacity) and 64 pages per block,
/// and MQSim's GC victim choice for 128 blocks.
pub fn gc_heavy_device(preset: &str) -> ConfigFile {
    let mut device = preset_device(preset);
    let dies_merged = preset_device(MQSIM_DEVICE).geometry.dies_per_chip / device.geometry.dies_per_chip;
    device.geometry.blocks_per_plane = 128 * dies_merged;
    device.geometry.pages_per_block = 64;
    // MQSim's RGA set size is log2(blocks per plane): 7 for 128 blocks.
    device.ftl.insert("gc_policy".into(), toml::Value::String("d-choices:7".into()));
    device.name = Some(format!("{preset}-gc (128 blocks x 64 pages)"));
    device
}

/// [`gc_heavy_device`] as a configuration file, for `nandlab perf --config`.
fn gc_config_text(preset: &str) -> String {
    toml::to_string(&gc_heavy_device(preset)).expect("configurations serialise")
}

/// nandlab's figure against MQSim's, in percent of MQSim's (+: nandlab's
/// is higher).
fn difference_percent(nandlab: f64, mqsim: f64) -> f64 {
    100.0 * (nandlab - mqsim) / mqsim.max(1e-9)
}

/// The fidelity line of a scenario: nandlab's simulated IOPS and mean
/// response time (all flows) beside MQSim's, and the differences.
fn fidelity_line(nandlab_iops: f64, nandlab_mean_us: f64, mqsim_iops: f64, mqsim_mean_us: f64) -> String {
    format!(
        "fidelity (simulated, all flows, medians): IOPS nandlab {nandlab_iops:.0} vs MQSim {mqsim_iops:.0} ({:+.1} %); mean response nandlab {nandlab_mean_us:.1} µs vs MQSim {mqsim_mean_us:.1} µs ({:+.1} %)",
        difference_percent(nandlab_iops, mqsim_iops),
        difference_percent(nandlab_mean_us, mqsim_mean_us)
    )
}

/// Run `bench perf` on `scenarios` (none: all), `runs` times each, with
/// `extra` arguments added to every `nandlab perf` run, and with `mqsim`
/// the same scenarios in MQSim, its runs alternating with nandlab's;
/// printing as it goes and filling `table` (the `--html` page).
pub fn run(
    exe: &Path,
    preset: &str,
    scenarios: &[String],
    runs: usize,
    extra: &[String],
    mqsim: Option<&Mqsim>,
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
            "mean response, µs",
            "WAF",
            "peak RSS, MiB",
            "MQSim requests/CPU-s (same run)",
            "nandlab/MQSim",
            "MQSim IOPS",
            "IOPS difference, %",
            "MQSim mean response, µs",
            "mean response difference, %",
        ],
        "simulated requests per CPU-second (timed phase)",
    );
    if !PRESET_CHOICES.contains(&preset) {
        return Err(format!("--preset {preset}: not a bench perf device (one of {})", PRESET_CHOICES.join(", ")));
    }
    for s in scenarios {
        if !SCENARIOS.iter().any(|c| c.name == s) {
            let known: Vec<&str> = SCENARIOS.iter().map(|c| c.name).collect();
            return Err(format!("--scenario {s}: unknown ({})", known.join(", ")));
        }
    }
    let dir = std::env::temp_dir().join(format!("nandlab-bench-perf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let gc_config = dir.join(format!("{preset}-gc.toml"));
    std::fs::write(&gc_config, gc_config_text(preset)).map_err(|e| format!("{}: {e}", gc_config.display()))?;
    let runs = runs.max(1);
    println!("nandlab bench perf — nandlab on {preset}, {runs} run(s) per scenario, one process per run (single-threaded), oracle on");
    table.setup = format!(
        "nandlab on {preset}, {runs} run(s) per scenario, one process per run (single-threaded), oracle on; extra arguments: {}",
        if extra.is_empty() { "none".to_string() } else { extra.join(" ") }
    );
    table.notes.push(match mqsim {
        Some(_) => "MQSim ran beside nandlab in this run (same flows, same device; its simulation alone: whole process minus a setup-only run); the ratio is of this run's medians.".into(),
        None => "MQSim did not run beside nandlab (no --mqsim), so no MQSim figure or ratio is on this page.".into(),
    });
    match mqsim {
        Some(_) => println!(
            "MQSim beside it: each nandlab run is followed by an MQSim run of the same flows on the same device and an MQSim setup-only run (1 µs simulated); MQSim's CPU time and peak RSS by wait4. Ratios compare this run's medians only."
        ),
        None => println!("{RECORDED_ON}"),
    }
    let mut failed = false;
    for sc in SCENARIOS.iter().filter(|s| scenarios.is_empty() || scenarios.iter().any(|n| n == s.name)) {
        println!("\n{}: {}", sc.name, sc.description);
        // MQSim's device: its shipped one (the GC-heavy variant of it).
        let device_file = if sc.gc_geometry { gc_heavy_device(MQSIM_DEVICE) } else { preset_device(MQSIM_DEVICE) };
        let device: Vec<&std::ffi::OsStr> = if sc.gc_geometry {
            vec!["--config".as_ref(), gc_config.as_os_str()]
        } else {
            vec!["--preset".as_ref(), preset.as_ref()]
        };
        let args = perf_args(&sc.flows);
        println!(
            "  nandlab perf {} {}",
            device.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" "),
            args.join(" ")
        );
        let mut figures = Vec::new();
        let (mut mq_full, mut mq_setup) = (Vec::new(), Vec::new());
        for i in 0..runs {
            let json = dir.join(format!("{}-{i}.json", sc.name));
            let mut cmd = Command::new(exe);
            cmd.arg("perf").args(&device).args(COMMON).arg(&json).args(&args).args(extra);
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
            if let Some(m) = mqsim {
                let tag = format!("{}-{i}", sc.name);
                match m
                    .run(&dir, &tag, &device_file, &sc.flows, false)
                    .and_then(|full| Ok((full, m.run(&dir, &format!("{tag}-setup"), &device_file, &sc.flows, true)?)))
                {
                    Ok((full, setup)) => {
                        let flows: Vec<String> =
                            full.flows.iter().map(|(_, iops, us)| format!("{iops:.0} IOPS, {us:.0} µs")).collect();
                        println!(
                            "  MQSim {}: {:>9.0} requests ({}); CPU {:6.2} s, of which setup {:.2} s; peak RSS {:6.0} MiB",
                            i + 1,
                            full.requests,
                            flows.join("; "),
                            full.cpu_s,
                            setup.cpu_s,
                            full.rss_bytes as f64 / f64::from(1u32 << 20)
                        );
                        mq_full.push(full);
                        mq_setup.push(setup);
                    }
                    Err(e) => println!("  MQSim {}: {e}", i + 1),
                }
            }
        }
        if figures.is_empty() {
            continue;
        }
        let med = |g: fn(&Figures) -> f64| median(figures.iter().map(g).collect());
        println!(
            "  median: {:>9.0} requests/CPU-s timed ({:>9.0} incl. setup), {:>7.1} host MB/CPU-s, {:>8.0} IOPS simulated, peak RSS {:6.0} MiB",
            med(|f| f.req_per_cpu_s),
            med(|f| f.req_per_cpu_s_all),
            med(|f| f.mb_per_cpu_s),
            med(|f| f.iops),
            med(|f| f.rss_mib)
        );
        let last = figures.last().expect("non-empty");
        let flows: Vec<String> =
            last.flows.iter().map(|(w, iops, mean)| format!("{w}: {iops:.0} IOPS, {mean:.0} µs")).collect();
        println!("  nandlab simulated (seed 12345): {}", flows.join("; "));
        let mut mqsim_per_cpu_s = None;
        let mut mqsim_simulated = None;
        if mq_full.is_empty() {
            if let Some(m) = sc.recorded.simulated {
                println!("  MQSim simulated (published):    {m}");
            }
            if let Some(m) = sc.recorded.requests_per_cpu_second {
                println!("  MQSim speed (recorded, not this run): {:.1} k requests/CPU-s", m / 1e3);
            }
        } else {
            let m = mqsim::Medians::of(&mq_full, &mq_setup);
            let flows: Vec<String> = mq_full
                .last()
                .expect("non-empty")
                .flows
                .iter()
                .map(|(name, iops, us)| format!("{name}: {iops:.0} IOPS, {us:.0} µs"))
                .collect();
            println!("  MQSim simulated (this run):     {}", flows.join("; "));
            println!(
                "  MQSim median: {:>9.0} requests/CPU-s simulation alone ({:>9.0} whole process), peak RSS {:6.0} MiB",
                m.simulation_per_cpu_s(),
                m.whole_per_cpu_s(),
                m.rss_bytes / f64::from(1u32 << 20)
            );
            println!(
                "  nandlab/MQSim, side by side: {:.1}x requests per CPU-second (timed vs simulation alone), {:.1}x (whole process vs whole process); peak RSS {:.2}x",
                med(|f| f.req_per_cpu_s) / m.simulation_per_cpu_s(),
                med(|f| f.req_per_cpu_s_all) / m.whole_per_cpu_s(),
                med(|f| f.rss_mib) / (m.rss_bytes / f64::from(1u32 << 20)).max(1e-9)
            );
            let mq_med = |g: fn(&mqsim::Figures) -> f64| median(mq_full.iter().map(g).collect());
            let (mq_iops, mq_mean_us) = (mq_med(mqsim::Figures::iops), mq_med(mqsim::Figures::mean_response_us));
            println!("  {}", fidelity_line(med(|f| f.iops), med(|f| f.mean_us), mq_iops, mq_mean_us));
            if let Some(c) = sc.caveat {
                println!("  caveat: {c}");
            }
            mqsim_per_cpu_s = Some(m.simulation_per_cpu_s());
            mqsim_simulated = Some((mq_iops, mq_mean_us));
        }
        let (mq_cell, ratio_cell) = match mqsim_per_cpu_s {
            Some(m) => (fixed(m, 0), format!("{}x", fixed(med(|f| f.req_per_cpu_s) / m, 1))),
            None => ("—".to_string(), "—".to_string()),
        };
        let fidelity_cells = match mqsim_simulated {
            Some((iops, mean_us)) => vec![
                fixed(iops, 0),
                fixed(difference_percent(med(|f| f.iops), iops), 1),
                fixed(mean_us, 1),
                fixed(difference_percent(med(|f| f.mean_us), mean_us), 1),
            ],
            None => vec!["—".to_string(); 4],
        };
        table.row(
            vec![
                sc.name.to_string(),
                figures.len().to_string(),
                fixed(med(|f| f.req_per_cpu_s), 0),
                fixed(med(|f| f.req_per_cpu_s_all), 0),
                fixed(med(|f| f.mb_per_cpu_s), 1),
                fixed(med(|f| f.iops), 0),
                fixed(med(|f| f.mean_us), 1),
                fixed(med(|f| f.waf), 3),
                fixed(med(|f| f.rss_mib), 0),
                mq_cell,
                ratio_cell,
            ]
            .into_iter()
            .chain(fidelity_cells)
            .collect(),
            Some((sc.name.to_string(), "median".to_string(), med(|f| f.req_per_cpu_s))),
        );
        // Extra arguments are perf options: with them the stress twin
        // would not be the same run, so the floor is left out.
        if extra.is_empty() {
            failed |= !untimed_floor(exe, &dir, sc, &device, runs, med(|f| f.req_per_cpu_s), mqsim_per_cpu_s);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Verdict::of(failed))
}

/// A preset's device file as written (typed).
fn preset_device(name: &str) -> ConfigFile {
    let (_, text) = PRESETS.iter().find(|(n, _)| *n == name).expect("the preset exists");
    toml::from_str(text).expect("presets parse")
}

#[cfg(test)]
mod tests {
    use super::*;
    use nandlab::config::Config;

    fn scenario(name: &str) -> &'static Scenario {
        SCENARIOS.iter().find(|s| s.name == name).unwrap()
    }

    #[test]
    fn the_gc_heavy_untimed_twin_issues_the_same_requests() {
        let gc = scenario("gc-heavy");
        let timed = perf_args(&gc.flows);
        let untimed = untimed_args(&gc.flows).expect("gc-heavy has a twin");
        let value = |args: &[String], key: &str| {
            let i = args.iter().position(|a| a == key).unwrap_or_else(|| panic!("{key} missing"));
            args[i + 1].clone()
        };
        assert_eq!(value(&timed, "--requests"), "1500000");
        assert_eq!(value(&timed, "--flow"), "rw=randwrite,iodepth=64");
        assert_eq!(value(&untimed, "--write_size"), (1_500_000u64 * 8192).to_string());
        assert_eq!(value(&untimed, "--rw"), "randwrite");
        for key in ["--bs", "--blockalign", "--size"] {
            assert_eq!(value(&timed, key), value(&untimed, key), "{key}");
        }
        // Several flows, or a time bound, or preconditioning: no twin.
        for name in ["mqsim-s1", "mqsim-s1-pre75", "mqsim-s2", "mqsim-s2-pre75"] {
            assert!(untimed_args(&scenario(name).flows).is_none(), "{name}");
        }
    }

    #[test]
    fn nandlab_runs_the_flows_mqsim_runs() {
        let s1: Vec<String> = perf_args(&scenario("mqsim-s1").flows);
        assert_eq!(
            s1.join(" "),
            "--bs 4096 --blockalign 8192 --size 50% --flow rw=randwrite,iodepth=16 --flow rw=randwrite,iodepth=2 --io_size 100x --runtime 10000000000ns"
        );
        let s2 = perf_args(&scenario("mqsim-s2-pre75").flows).join(" ");
        assert!(s2.contains("--flow rw=randread,iodepth=16 --flow rw=randread,iodepth=16 "), "{s2}");
        assert!(s2.ends_with("--precondition 75% --precondition-max 0.5"), "{s2}");
        // MQSim's side of the same scenario.
        let device = preset_device("mqsim-default");
        let xml = mqsim::workload_xml(&scenario("mqsim-s2").flows, &device);
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let flows: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("IO_Flow_Parameter_Set_Synthetic")).collect();
        assert_eq!(flows.len(), 2);
        let field = |n: &roxmltree::Node, k: &str| {
            n.children().find(|c| c.has_tag_name(k)).unwrap().text().unwrap().to_string()
        };
        for f in &flows {
            assert_eq!(field(f, "Read_Percentage"), "100");
            assert_eq!(field(f, "Average_No_of_Reqs_in_Queue"), "16");
            assert_eq!(field(f, "Average_Request_Size"), "8");
            assert_eq!(field(f, "Address_Alignment_Unit"), "16");
            assert_eq!(field(f, "Working_Set_Percentage"), "50");
            assert_eq!(field(f, "Stop_Time"), "10000000000");
            assert_eq!(field(f, "Chip_IDs"), "0,1,2,3");
        }
        assert_eq!(field(&flows[0], "Priority_Class"), "URGENT");
    }

    #[test]
    fn the_fidelity_line_prints_both_figures_and_the_difference_in_percent_of_mqsims() {
        assert_eq!(difference_percent(110.0, 100.0), 10.0);
        assert_eq!(difference_percent(90.0, 100.0), -10.0);
        let line = fidelity_line(36_300.0, 440.0, 37_143.0, 484.0);
        assert!(line.contains("IOPS nandlab 36300 vs MQSim 37143 (-2.3 %)"), "{line}");
        assert!(line.contains("mean response nandlab 440.0 µs vs MQSim 484.0 µs (-9.1 %)"), "{line}");
    }

    #[test]
    fn the_compat_gc_heavy_device_keeps_the_compat_ftl_and_scheduler() {
        let c = Config::parse(&gc_config_text("mqsim-compat"), "gc.toml").unwrap();
        assert_eq!(c.geometry.raw_bytes(), 8 << 30);
        assert_eq!(c.geometry.config().blocks_per_plane, 256, "one die per chip: both dies' blocks");
        assert_eq!(c.ftl_name, "dftl");
        assert!(format!("{:?}", c.timing).contains("Mqsim"), "{:?}", c.timing);
    }

    #[test]
    fn the_gc_heavy_device_is_8_gib_raw() {
        let c = Config::parse(&gc_config_text("mqsim-default"), "gc.toml").unwrap();
        assert_eq!(c.geometry.raw_bytes(), 8 << 30);
        assert!(c.timing.is_some());
    }

    #[test]
    fn the_gc_heavy_device_is_mqsim_default_but_for_its_blocks_and_gc_policy() {
        let base = Config::preset("mqsim-default").unwrap();
        let gc = Config::parse(&gc_config_text("mqsim-default"), "gc.toml").unwrap();
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
