//! `nandlab perf` (timed simulation) and `nandlab bench perf`.

use crate::bench::{median, report_of};
use crate::exit::{self, input_error};
use crate::options::{self, DeviceArgs, RunArgs, WorkloadArgs};
use crate::outputs::Output;
use crate::progress_bar;
use crate::trace_cmd::{OracleUnit, StressTraceArgs};
use clap::Args;
use nandlab::config::Config;
use nandlab::host::arrival::parse_arrival;
use nandlab::host::flow::{self, parse_flow, FlowSpec};
use nandlab::host::HostConfig;
use nandlab::report::perf::PerfReport;
use nandlab::report::timeseries::to_csv;
use nandlab::run::perf::precondition::PreconditionSpec;
use nandlab::run::perf::{self, Flow, PerfOptions};
use nandlab::run::RunError;
use nandlab::timing::TimingConfig;
use nandlab::util::assignment::override_fields;
use nandlab::workload::synthetic::SyntheticSpec;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Options of `perf` beyond those it shares with `stress`.
#[derive(Args, Debug, Clone, Default)]
pub struct PerfArgs {
    /// Simulated time to issue requests for (10s, 500ms, 250us); in-flight
    /// requests complete after it.
    #[arg(long, help_heading = "Timed run")]
    pub runtime: Option<String>,
    /// Issue at most this many requests in all.
    #[arg(long, help_heading = "Timed run")]
    pub requests: Option<u64>,
    /// How requests arrive: closed (iodepth per job, default), rate:IOPS,
    /// poisson:IOPS.
    #[arg(long, help_heading = "Timed run")]
    pub arrival: Option<String>,
    /// An extra flow, as fio options over the workload options:
    /// `rw=randread,iodepth=16[,arrival=poisson:5000]`, or a trace replayed
    /// beside the others: `trace=FILE[,arrival=...]` (read and transformed
    /// with the --trace-* options; open loop at its timestamps by default).
    /// Repeatable; when given, the flows are exactly these.
    #[arg(long = "flow", value_name = "KEY=VALUE,...", help_heading = "Timed run")]
    pub flows: Vec<String>,
    /// Precondition untimed first: fill this share of the logical space
    /// sequentially (default 100%), then overwrite it randomly until WAF and
    /// free blocks are steady.
    #[arg(long, num_args = 0..=1, default_missing_value = "100%", value_name = "FILL%", help_heading = "Timed run")]
    pub precondition: Option<String>,
    /// Cap on preconditioning's random overwrites, in times the filled volume.
    #[arg(long = "precondition-max", default_value_t = 2.0, help_heading = "Timed run")]
    pub precondition_max: f64,
    /// Write the per-interval time series as CSV.
    #[arg(long, value_name = "FILE.csv", help_heading = "Timed run")]
    pub timeseries: Option<PathBuf>,
    /// Length of a time-series interval in simulated time.
    #[arg(long, default_value = "1s", help_heading = "Timed run")]
    pub interval: String,
    /// A [timing] field, KEY=VALUE (repeatable): --timing erase_suspend=true.
    #[arg(long = "timing", value_name = "KEY=VALUE", help_heading = "Timing and host")]
    pub timing: Vec<String>,
    /// A [host] field, KEY=VALUE (repeatable): --host queue_depth=32.
    #[arg(long = "host", value_name = "KEY=VALUE", help_heading = "Timing and host")]
    pub host: Vec<String>,
    /// Write cache: none, write_through, write_back (same as --timing write_cache=…).
    #[arg(long = "write-cache", help_heading = "Timing and host")]
    pub write_cache: Option<String>,
    /// No background garbage collection in idle time.
    #[arg(long = "no-idle-gc", help_heading = "Timing and host")]
    pub no_idle_gc: bool,
}

/// A duration in simulated time: `10s`, `500ms`, `250us`, `40ns`, `2m`; a bare number is seconds.
pub fn parse_duration_ns(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (num, scale) = [("ns", 1.0), ("us", 1e3), ("µs", 1e3), ("ms", 1e6), ("s", 1e9), ("m", 60e9)]
        .iter()
        .find_map(|(suffix, scale)| t.strip_suffix(suffix).map(|n| (n, *scale)))
        .unwrap_or((t, 1e9));
    let v: f64 = num.trim().parse().map_err(|_| format!("`{text}`: expected a duration such as 10s or 500ms"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("`{text}`: a duration must be positive"));
    }
    Ok((v * scale).round() as u64)
}

/// Apply --timing / --host / --write-cache to a configuration.
fn apply_overrides(config: &mut Config, p: &PerfArgs) -> Result<(), String> {
    let mut timing_sets = p.timing.clone();
    if let Some(m) = &p.write_cache {
        timing_sets.push(format!("write_cache=\"{m}\""));
    }
    if !timing_sets.is_empty() {
        let base = config.require_timing()?.config.clone();
        let t: TimingConfig = override_fields("timing", &base, &timing_sets)?;
        config.timing = Some(
            t.validate(config.geometry.cell_type().bits_per_cell(), config.dram_budget_bytes)
                .map_err(|(k, r)| format!("--timing {k}: {r}"))?,
        );
    }
    if !p.host.is_empty() {
        let h: HostConfig = override_fields("host", &config.host.config, &p.host)?;
        config.host = h.validate().map_err(|(k, r)| format!("--host {k}: {r}"))?;
    }
    Ok(())
}

/// A `--flow trace=FILE[,arrival=...]`: the trace read with the --trace-*
/// options, arriving as the flow says.
fn trace_flow_of(
    config: &Config,
    text: &str,
    path: PathBuf,
    arrival: nandlab::host::Arrival,
    index: usize,
    trace: &StressTraceArgs,
    oracle_unit: Option<u32>,
) -> Result<Flow, String> {
    let args = StressTraceArgs { trace: Some(path), ..trace.clone() };
    let capacity = config.logical_bytes();
    let unit = OracleUnit { given: oracle_unit, page_sectors: config.geometry.sectors_per_page(), sole: false };
    let workload = args
        .workload(&WorkloadArgs::default(), capacity, config.geometry.sector_size_bytes(), &unit)
        .map_err(|e| format!("--flow `{text}`: {e}"))?
        .ok_or_else(|| format!("--flow `{text}`: trace= needs a file"))?;
    Ok(Flow { name: format!("flow{index}.trace"), workload: Box::new(workload), arrival })
}

/// The flows of the run: the workload options alone, or each --flow over
/// them (a `trace=FILE` flow replays a trace beside the synthetic ones).
fn build_flows(
    config: &Config,
    base: &SyntheticSpec,
    p: &PerfArgs,
    trace: &StressTraceArgs,
    seed: u64,
    oracle_unit: Option<u32>,
) -> Result<Vec<Flow>, String> {
    let default_arrival = p
        .arrival
        .as_deref()
        .map(|a| parse_arrival(a, base.iodepth).map_err(|e| format!("--arrival {e}")))
        .transpose()?;
    if p.flows.is_empty() {
        return Flow::synthetic(base, default_arrival, 0, config, seed);
    }
    let mut flows = Vec::new();
    for (i, text) in p.flows.iter().enumerate() {
        match parse_flow(text, base, default_arrival)? {
            FlowSpec::Trace { path, arrival } => {
                flows.push(trace_flow_of(config, text, path, arrival, i, trace, oracle_unit)?)
            }
            FlowSpec::Synthetic { spec, arrival } => flows
                .extend(Flow::synthetic(&spec, arrival, i, config, seed).map_err(|e| format!("--flow `{text}`: {e}"))?),
        }
    }
    Ok(flows)
}

/// A replayed trace as the run's one flow: open loop at the trace's own
/// timestamps (scaled with `--trace-speed`) unless `--arrival` says otherwise.
fn trace_flow(
    config: &Config,
    synthetic: &WorkloadArgs,
    trace: &StressTraceArgs,
    p: &PerfArgs,
    oracle_unit: Option<u32>,
) -> Result<Option<Flow>, String> {
    if trace.trace.is_none() && p.flows.iter().any(|f| flow::trace_path(f).is_some()) {
        return Ok(None); // the --trace-* options are for the trace flows
    }
    let unit = OracleUnit { given: oracle_unit, page_sectors: config.geometry.sectors_per_page(), sole: true };
    let Some(workload) =
        trace.workload(synthetic, config.logical_bytes(), config.geometry.sector_size_bytes(), &unit)?
    else {
        return Ok(None);
    };
    if !p.flows.is_empty() {
        return Err("--trace replays one trace alone: with --flow, give it as a flow (--flow trace=FILE)".into());
    }
    let arrival = match &p.arrival {
        Some(a) => parse_arrival(a, 1).map_err(|e| format!("--arrival {e}"))?,
        None => nandlab::host::Arrival::Timestamps { time_scale: 1.0 },
    };
    Ok(Some(Flow { name: "trace".into(), workload: Box::new(workload), arrival }))
}

fn parse_precondition(p: &PerfArgs) -> Result<Option<PreconditionSpec>, String> {
    let Some(text) = &p.precondition else {
        return Ok(None);
    };
    let t = text.trim().trim_end_matches('%');
    let fill: f64 = t.parse().map_err(|_| format!("--precondition `{text}`: expected a share such as 75%"))?;
    if !(fill > 0.0 && fill <= 100.0) {
        return Err(format!("--precondition `{text}`: must be within (0, 100]%"));
    }
    if !(p.precondition_max.is_finite() && p.precondition_max >= 0.0) {
        return Err("--precondition-max must be a non-negative number".into());
    }
    Ok(Some(PreconditionSpec { fill_percent: fill, max_overwrite: p.precondition_max, ..Default::default() }))
}

/// `nandlab perf`.
pub fn perf_command(
    device: &DeviceArgs,
    workload_args: &WorkloadArgs,
    trace: &StressTraceArgs,
    run: &RunArgs,
    p: &PerfArgs,
) -> ExitCode {
    let traces =
        trace.trace.as_deref().into_iter().chain(p.flows.iter().filter_map(|f| flow::trace_path(f)).map(Path::new));
    let outputs = [("--json", run.json.as_deref()), ("--timeseries", p.timeseries.as_deref())];
    let [json, csv] = match crate::outputs::prepare(&device.inputs(traces), outputs) {
        Ok(o) => o,
        Err(e) => return input_error(e),
    };
    let stop = crate::signals::install();
    let mut config = match device.load() {
        Ok(c) => c,
        Err(e) => return input_error(e),
    };
    workload_args.note_overrides(&mut config);
    if let Err(e) = config.require_timing().map(|_| ()) {
        return input_error(e);
    }
    if let Err(e) = apply_overrides(&mut config, p) {
        return input_error(e);
    }
    let spec = match workload_args.apply(config.workload.clone().unwrap_or_default()) {
        Ok(s) => s,
        Err(e) => return input_error(e),
    };
    let seed = run.seed.unwrap_or_else(nandlab::seed::draw_run_seed);
    let reproduce = options::reproduce_command(seed);
    let flows = match trace_flow(&config, workload_args, trace, p, run.oracle_unit) {
        Ok(Some(flow)) => vec![flow],
        Ok(None) => match build_flows(&config, &spec, p, trace, seed, run.oracle_unit) {
            Ok(f) => f,
            Err(e) => return input_error(config.locate_error(&e)),
        },
        Err(e) => return input_error(e),
    };
    let opts = match (|| -> Result<PerfOptions, String> {
        Ok(PerfOptions {
            seed,
            max_errors: run.max_errors,
            keep_violations: run.keep_violations,
            oracle_unit_sectors: run.oracle_unit,
            interval_ns: parse_duration_ns(&p.interval).map_err(|e| format!("--interval {e}"))?,
            runtime_ns: p
                .runtime
                .as_deref()
                .map(parse_duration_ns)
                .transpose()
                .map_err(|e| format!("--runtime {e}"))?,
            max_requests: p.requests,
            precondition: parse_precondition(p)?,
            idle_gc: !p.no_idle_gc,
            remount_verify: run.remount,
            stop: stop.clone(),
        })
    })() {
        Ok(o) => o,
        Err(e) => return input_error(e),
    };
    if run.idle_every > 0 {
        return input_error("--idle-every is a stress option: perf gives the FTL idle time whenever the simulated device is idle (see --no-idle-gc)");
    }
    // The oracle unit perf chooses: the finest alignment (a page with preconditioning).
    let spp = config.geometry.sectors_per_page();
    let alignment = flows
        .iter()
        .map(|f| f.workload.alignment_sectors())
        .chain(opts.precondition.as_ref().map(|_| spp))
        .min()
        .unwrap_or(1);
    let unit = run.oracle_unit.unwrap_or(alignment);
    let memory = nandlab::memory::estimate(&config, unit, alignment, nandlab::memory::Mode::Single);
    if let Err(e) = options::check_memory(&memory, run.max_memory) {
        return input_error(e);
    }
    eprintln!("nandlab perf: preset {}, FTL {}, seed {seed}, {} flow(s)", config.name, config.ftl_name, flows.len());
    let bar = progress_bar(run.no_progress);
    let result = perf::run(&config, flows, &opts, &mut |pr| {
        if let Some(b) = &bar {
            b.set_message(pr.phase);
            if let Some(t) = pr.total {
                b.set_length(t);
            }
            b.set_position(pr.done);
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let mut report = match result {
        Ok(r) => r,
        Err(RunError::Input(e)) | Err(RunError::Workload(e)) => return input_error(e),
    };
    if report.run.interrupted {
        crate::signals::announce();
    }
    report.run.reproduce = Some(reproduce);
    finish(&report, json, csv)
}

fn write_file(out: Output, mut text: String) -> Result<(), ExitCode> {
    if out.is_stdout() {
        text.push('\n'); // as printed before outputs were written through `Output`
    }
    out.write(text.as_bytes()).map_err(input_error)
}

fn finish(report: &PerfReport, json: Option<Output>, csv: Option<Output>) -> ExitCode {
    print!("{}", report.summary());
    let r = &report.run;
    if !r.violations.is_empty() {
        println!(
            "\nFirst violations ({} kept of {} errors and {} warnings):",
            r.violations.len(),
            r.errors,
            r.warnings
        );
        for v in &r.violations {
            println!("  {v}");
        }
    }
    if r.errors > 0 {
        if let Some(cmd) = &r.reproduce {
            println!("\nReproduce with:\n  {cmd}");
        }
    }
    if let Some(out) = json {
        let text = serde_json::to_string_pretty(report).expect("reports serialize") + "\n";
        if let Err(code) = write_file(out, text) {
            return code;
        }
    }
    if let Some(out) = csv {
        if let Err(code) = write_file(out, to_csv(&report.perf.timeseries)) {
            return code;
        }
    }
    exit::of_run(r.errors > 0, r.interrupted)
}

// ----- nandlab bench perf -----

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

/// `nandlab bench perf` options.
#[derive(Args, Debug, Clone)]
pub struct BenchPerfArgs {
    /// Scenarios to run (repeatable): mqsim-s1, mqsim-s1-pre75, mqsim-s2, mqsim-s2-pre75, gc-heavy (default all).
    #[arg(long = "scenario")]
    pub scenarios: Vec<String>,
    /// Runs per scenario (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Extra arguments passed to each `nandlab perf` run (the untimed
    /// floor, a `nandlab stress` run, is then left out).
    #[arg(last = true)]
    pub extra: Vec<String>,
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

/// The GC-heavy device: mqsim-default with 128 blocks per plane and 64 pages per block.
fn gc_config_text() -> String {
    let text = nandlab::config::PRESETS
        .iter()
        .find(|(n, _)| *n == "mqsim-default")
        .map(|(_, t)| *t)
        .expect("mqsim-default preset");
    let mut table: toml::Table = toml::from_str(text).expect("presets parse");
    if let Some(toml::Value::Table(g)) = table.get_mut("geometry") {
        g.insert("blocks_per_plane".into(), toml::Value::Integer(128));
        g.insert("pages_per_block".into(), toml::Value::Integer(64));
    }
    if let Some(toml::Value::Table(f)) = table.get_mut("ftl") {
        // MQSim's RGA set size is log2(blocks per plane): 7 for 128 blocks.
        f.insert("gc_policy".into(), toml::Value::String("d-choices:7".into()));
    }
    table.insert("name".into(), toml::Value::String("mqsim-default-gc (128 blocks x 64 pages)".into()));
    toml::to_string(&table).expect("tables serialise")
}

pub fn bench_perf(a: &BenchPerfArgs) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return input_error(format!("cannot find the nandlab executable: {e}")),
    };
    for s in &a.scenarios {
        if !SCENARIOS.iter().any(|c| c.name == s) {
            let known: Vec<&str> = SCENARIOS.iter().map(|c| c.name).collect();
            return input_error(format!("--scenario {s}: unknown ({})", known.join(", ")));
        }
    }
    let dir = std::env::temp_dir().join(format!("nandlab-bench-perf-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return input_error(format!("{}: {e}", dir.display()));
    }
    let gc_config = dir.join("mqsim-default-gc.toml");
    if let Err(e) = std::fs::write(&gc_config, gc_config_text()) {
        return input_error(format!("{}: {e}", gc_config.display()));
    }
    let runs = a.runs.max(1);
    println!("nandlab bench perf — {runs} run(s) per scenario, one process per run (single-threaded), oracle on");
    println!("{MQSIM_SOURCES}");
    let mut failed = false;
    for sc in SCENARIOS.iter().filter(|s| a.scenarios.is_empty() || a.scenarios.iter().any(|n| n == s.name)) {
        println!("\n{}: {}", sc.name, sc.description);
        let device: Vec<&std::ffi::OsStr> = if sc.gc_geometry {
            vec!["--config".as_ref(), gc_config.as_os_str()]
        } else {
            vec!["--preset".as_ref(), "mqsim-default".as_ref()]
        };
        let mut figures = Vec::new();
        for i in 0..runs {
            let json = dir.join(format!("{}-{i}.json", sc.name));
            let mut cmd = Command::new(&exe);
            cmd.arg("perf")
                .args(&device)
                .args(COMMON)
                .arg(&json)
                .args(sc.args.iter().flat_map(|part| part.iter()))
                .args(&a.extra);
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
            if a.extra.is_empty() {
                failed |= !untimed_floor(&exe, &dir, sc, &device, runs, med(|f| f.req_per_cpu_s));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    if failed {
        ExitCode::from(exit::VIOLATIONS)
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_and_reject_nonsense() {
        assert_eq!(parse_duration_ns("10s").unwrap(), 10_000_000_000);
        assert_eq!(parse_duration_ns("500ms").unwrap(), 500_000_000);
        assert_eq!(parse_duration_ns("250us").unwrap(), 250_000);
        assert_eq!(parse_duration_ns("2").unwrap(), 2_000_000_000);
        assert!(parse_duration_ns("soon").is_err());
        assert!(parse_duration_ns("-1s").is_err());
    }

    #[test]
    fn timing_overrides_are_validated_and_name_the_field() {
        let mut c = Config::preset("tiny-timed").unwrap();
        let p = PerfArgs {
            timing: vec!["erase_suspend=true".into()],
            host: vec!["queue_depth=8".into()],
            ..Default::default()
        };
        apply_overrides(&mut c, &p).unwrap();
        assert!(c.timing.as_ref().unwrap().config.erase_suspend);
        assert_eq!(c.host.queue_depth, 8);
        let bad = PerfArgs { timing: vec!["program_latency_us=[1,2,3]".into()], ..Default::default() };
        let e = apply_overrides(&mut c, &bad).unwrap_err();
        assert!(e.contains("program_latency_us"), "{e}");
        let unknown = PerfArgs { host: vec!["warp_drive=1".into()], ..Default::default() };
        assert!(apply_overrides(&mut c, &unknown).unwrap_err().contains("warp_drive"));
    }

    #[test]
    fn flows_override_the_workload_options() {
        let c = Config::preset("tiny-timed").unwrap();
        let base = SyntheticSpec::default();
        let p = PerfArgs {
            flows: vec!["rw=randread,iodepth=16".into(), "iodepth=2,numjobs=2,arrival=poisson:100".into()],
            ..Default::default()
        };
        let flows = build_flows(&c, &base, &p, &StressTraceArgs::default(), 1, None).unwrap();
        assert_eq!(flows.len(), 3);
        assert_eq!(flows[0].arrival, nandlab::host::Arrival::Closed { iodepth: 16 });
        assert!(flows[0].workload.describe().contains("randread"));
        assert!(matches!(flows[2].arrival, nandlab::host::Arrival::Rate { poisson: true, .. }));
        let bad = PerfArgs { flows: vec!["bogus=1".into()], ..Default::default() };
        let e = build_flows(&c, &base, &bad, &StressTraceArgs::default(), 1, None).err().expect("rejected");
        assert!(e.contains("bogus"), "{e}");
    }

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
}
