//! `nandlab perf`: timed simulation from the command line.

use crate::exit::{self, input_error};
use crate::options::{self, DeviceArgs, RunArgs, WorkloadArgs};
use crate::outputs::Output;
use crate::progress::RunBar;
use crate::trace_cmd::{OracleUnit, StressTraceArgs};
use clap::Args;
use nandlab::config::Config;
use nandlab::host::arrival::parse_arrival;
use nandlab::host::flow::{self, parse_flow, FlowSpec};
use nandlab::report::perf::PerfReport;
use nandlab::report::timeseries::to_csv;
use nandlab::run::perf::precondition::PreconditionSpec;
use nandlab::run::perf::{self, Flow, PerfOptions};
use nandlab::run::RunError;
use nandlab::timing::trace_out::{parse_window, TraceOptions, TraceRecorder, Tracks};
use nandlab::util::duration::parse_duration_ns;
use nandlab::workload::synthetic::SyntheticSpec;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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
    /// Timing core: reservation (the default: every flash operation booked
    /// on channel/die calendars when issued), or the event core with the
    /// scheduler fifo, mqsim or read-priority (same as --timing scheduler=…).
    #[arg(long = "scheduler", value_name = "NAME", help_heading = "Timing and host")]
    pub scheduler: Option<String>,
    /// No background garbage collection in idle time.
    #[arg(long = "no-idle-gc", help_heading = "Timing and host")]
    pub no_idle_gc: bool,
    /// Write the timed phase as a timeline (Chrome trace event JSON) for
    /// Perfetto (ui.perfetto.dev) or chrome://tracing: a track per channel,
    /// die and plane, a slice per flash operation, host requests, queue
    /// depth and free blocks.
    #[arg(long = "trace-out", value_name = "FILE.json", help_heading = "Timeline")]
    pub trace_out: Option<PathBuf>,
    /// Only the part of the run overlapping START..END of simulated time
    /// since the first arrival: 0.5s..2s, 100ms.., ..1s.
    #[arg(long = "trace-out-window", value_name = "START..END", help_heading = "Timeline")]
    pub trace_out_window: Option<String>,
    /// At most this many events in the timeline (default 1000000); the
    /// rest is left out, and the file and standard error say so.
    #[arg(long = "trace-out-max-events", value_name = "N", help_heading = "Timeline")]
    pub trace_out_max_events: Option<String>,
}

/// The `--trace-out` bounds, checked before any work.
fn trace_options(p: &PerfArgs) -> Result<Option<TraceOptions>, String> {
    let Some(_) = &p.trace_out else {
        for (given, option) in [
            (p.trace_out_window.is_some(), "--trace-out-window"),
            (p.trace_out_max_events.is_some(), "--trace-out-max-events"),
        ] {
            if given {
                return Err(format!("{option} bounds the timeline of --trace-out FILE.json: give --trace-out too"));
            }
        }
        return Ok(None);
    };
    let mut o = TraceOptions::default();
    if let Some(w) = &p.trace_out_window {
        o.window = parse_window(w).map_err(|e| format!("--trace-out-window {e}"))?;
    }
    if let Some(n) = &p.trace_out_max_events {
        o.max_events = match n.trim().replace('_', "").parse::<u64>() {
            Ok(n) if n > 0 => n,
            _ => return Err(format!("--trace-out-max-events `{n}`: expected a positive whole number of events")),
        };
    }
    Ok(Some(o))
}

/// Apply --timing / --host / --write-cache to a configuration.
fn apply_overrides(config: &mut Config, p: &PerfArgs) -> Result<(), String> {
    let mut timing_sets = p.timing.clone();
    if let Some(m) = &p.write_cache {
        timing_sets.push(format!("write_cache=\"{m}\""));
    }
    if let Some(name) = &p.scheduler {
        if name != "reservation" && name.parse::<nandlab::timing::scheduler::SchedulerKind>().is_err() {
            return Err(format!("--scheduler `{name}`: unknown scheduler (reservation, fifo, mqsim, read-priority)"));
        }
        timing_sets.push(format!("scheduler={}", toml::Value::String(name.clone())));
    }
    if !timing_sets.is_empty() {
        config.override_timing(&timing_sets)?;
    }
    if !p.host.is_empty() {
        config.override_host(&p.host)?;
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
    let trace_opts = match trace_options(p) {
        Ok(o) => o,
        Err(e) => return input_error(e),
    };
    let outputs = [
        ("--json", run.json.as_deref()),
        ("--timeseries", p.timeseries.as_deref()),
        ("--html", run.html.as_deref()),
        ("--trace-out", p.trace_out.as_deref()),
    ];
    let traces: Vec<&Path> = traces.collect();
    let ([json, csv, html, trace_out], stop, mut config) = match device.start(workload_args, &traces, outputs) {
        Ok(started) => started,
        Err(e) => return input_error(e),
    };
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
            precondition: p
                .precondition
                .as_deref()
                .map(|f| PreconditionSpec::parse(f, p.precondition_max))
                .transpose()?,
            idle_gc: !p.no_idle_gc,
            remount_verify: run.remount,
            stop: stop.clone(),
            trace: trace_opts,
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
    let mut bar = RunBar::new(run.no_progress);
    let result = perf::run_traced(&config, flows, &opts, &mut |p| bar.show(p));
    bar.finish();
    let (mut report, recorder) = match result {
        Ok(r) => r,
        Err(RunError::Input(e)) | Err(RunError::Workload(e)) => return input_error(e),
    };
    if report.run.interrupted {
        crate::signals::announce();
    }
    report.run.reproduce = Some(reproduce);
    let code = finish(&report, json, csv, html);
    if let (Some(out), Some(recorder)) = (trace_out, recorder) {
        let g = &config.geometry;
        let tracks = Tracks { channels: g.channels(), dies: g.dies(), planes: g.planes() };
        if let Err(e) = write_trace(&report, &recorder, tracks, out) {
            return input_error(e);
        }
    }
    code
}

/// Write the timeline (see [`nandlab::timing::trace_out`]) and say on
/// standard error when the cap cut it.
fn write_trace(report: &PerfReport, recorder: &TraceRecorder, tracks: Tracks, out: Output) -> Result<(), String> {
    let free: Vec<(f64, u64)> =
        report.perf.timeseries.iter().filter_map(|r| r.free_blocks.map(|f| (r.start_s + r.length_s, f))).collect();
    use serde_json::json;
    let r = &report.run;
    let other = [
        ("generator", json!(format!("nandlab {}", env!("CARGO_PKG_VERSION")))),
        ("preset", json!(r.preset)),
        ("ftl", json!(r.ftl)),
        ("seed", json!(r.seed)),
        ("simulated_seconds", json!(report.perf.simulated_seconds)),
        (
            "gc_runs",
            json!("not drawn: the timing model sees operations, not GC runs; GC is the operations of category gc"),
        ),
    ];
    {
        let mut w = std::io::BufWriter::new(out.file()?);
        recorder.write(&mut w, tracks, &free, &other).map_err(|e| format!("--trace-out: cannot write: {e}"))?;
    }
    let (kept, dropped) = recorder.counts();
    if dropped > 0 {
        eprintln!(
            "nandlab perf: --trace-out: the timeline holds the first {kept} events; {dropped} more were left out \
             (--trace-out-max-events; otherData.truncated in the file)"
        );
    }
    out.commit()
}

fn write_file(out: Output, mut text: String) -> Result<(), ExitCode> {
    if out.is_stdout() {
        text.push('\n'); // as printed before outputs were written through `Output`
    }
    out.write(text.as_bytes()).map_err(input_error)
}

fn finish(report: &PerfReport, json: Option<Output>, csv: Option<Output>, html: Option<Output>) -> ExitCode {
    print!("{}", report.summary());
    let r = &report.run;
    crate::stress_cmd::print_findings(r);
    // On standard output the JSON ends with an empty line, as it was printed
    // before outputs were written through `Output`.
    if let Err(e) = crate::stress_cmd::write_json_and_html(report, json, html, "\n") {
        return input_error(e);
    }
    if let Some(out) = csv {
        if let Err(code) = write_file(out, to_csv(&report.perf.timeseries)) {
            return code;
        }
    }
    exit::of_run(r.errors > 0, r.interrupted)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
