//! `nandlab`: the command-line front end of the nandlab library.
//!
//! Exit codes: 0 when a run is clean, 1 when it found violations, 2 for bad
//! input (configuration, options, files), 130 when a run without violations
//! was interrupted (SIGINT, SIGTERM; see `signals`).

mod bench;
mod crash_cmd;
mod isolate;
mod options;
mod outputs;
mod perf_cmd;
mod signals;
mod trace_bench;
mod trace_cmd;

use clap::{Parser, Subcommand};
use nandlab::config::{Config, PRESETS};
use nandlab::ftl;
use nandlab::report::StressReport;
use nandlab::run::{stress, RunError};
use nandlab::violation::Rule;
use nandlab::workload::synthetic::SyntheticWorkload;
use options::{DeviceArgs, RunArgs, WorkloadArgs};
use std::io::IsTerminal;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "nandlab",
    version,
    about = "A virtual SSD laboratory for flash firmware (FTL) engineers and researchers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a workload through an FTL on checked virtual NAND, untimed, and report.
    Stress {
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        workload: WorkloadArgs,
        #[command(flatten)]
        trace: Box<trace_cmd::StressTraceArgs>,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Recorded traces: `nandlab trace stats FILE`, `nandlab trace convert IN --to F -o OUT`.
    Trace {
        #[command(subcommand)]
        which: trace_cmd::TraceCommand,
    },
    /// Run a workload timed: channels, dies, planes, host interface, DRAM
    /// cache; latency percentiles, time series, bottleneck.
    Perf {
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        workload: WorkloadArgs,
        #[command(flatten)]
        trace: Box<trace_cmd::StressTraceArgs>,
        #[command(flatten)]
        run: RunArgs,
        #[command(flatten)]
        perf: perf_cmd::PerfArgs,
    },
    /// Power-loss testing: cut the power at chosen flash operations, recover
    /// with a fresh FTL, check the guarantee the FTL claims.
    Crash {
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        workload: WorkloadArgs,
        #[command(flatten)]
        crash: crash_cmd::CrashArgs,
    },
    /// List the device presets.
    Presets,
    /// List the FTLs and their options.
    Ftls,
    /// List the rules nandlab checks.
    Rules,
    /// Benchmarks: `nandlab bench stress|trace|perf|crash`.
    Bench {
        #[command(subcommand)]
        which: bench::BenchCommand,
    },
}

/// Exit code for bad input.
const EXIT_INPUT: u8 = 2;
/// Exit code when violations were found.
pub(crate) const EXIT_VIOLATIONS: u8 = 1;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let isolate = match &cli.command {
        Command::Stress { device, .. } | Command::Perf { device, .. } | Command::Crash { device, .. } => device.isolate,
        _ => false,
    };
    if let Some(code) = isolate::maybe_isolate(isolate) {
        return code;
    }
    match cli.command {
        Command::Stress { device, workload, trace, run } => stress_command(&device, &workload, &trace, &run),
        Command::Trace { which } => trace_cmd::run(which),
        Command::Perf { device, workload, trace, run, perf } => {
            perf_cmd::perf_command(&device, &workload, &trace, &run, &perf)
        }
        Command::Crash { device, workload, crash } => crash_cmd::run(&device, &workload, &crash),
        Command::Presets => {
            for (name, _) in PRESETS {
                match Config::preset(name) {
                    Ok(c) => println!("{name:16} {}\n{:16} source: {}", c.description, "", c.source),
                    Err(e) => println!("{name:16} (invalid: {e})"),
                }
            }
            ExitCode::SUCCESS
        }
        Command::Ftls => {
            for d in ftl::registry() {
                println!("{} — {}", d.name, d.summary);
                for o in d.options {
                    println!("    {:36} default {:10} {}", o.name, o.default, o.help);
                }
            }
            ExitCode::SUCCESS
        }
        Command::Rules => {
            for r in Rule::ALL {
                let group = if r.is_nand_rule() { "nand" } else { "oracle" };
                println!(
                    "{:22} {:6} default {:6} {}",
                    r.name(),
                    group,
                    format!("{:?}", r.default_severity()).to_lowercase(),
                    r.description()
                );
            }
            ExitCode::SUCCESS
        }
        Command::Bench { which } => bench::run(which),
    }
}

/// Print an input error and return exit code 2.
pub(crate) fn input_error(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(EXIT_INPUT)
}

fn stress_command(
    device: &DeviceArgs,
    workload_args: &WorkloadArgs,
    trace: &trace_cmd::StressTraceArgs,
    run: &RunArgs,
) -> ExitCode {
    let [json] = match outputs::prepare(&device.inputs(trace.trace.as_deref()), [("--json", run.json.as_deref())]) {
        Ok(o) => o,
        Err(e) => return input_error(e),
    };
    let stop = signals::install();
    let mut config = match device.load() {
        Ok(c) => c,
        Err(e) => return input_error(e),
    };
    workload_args.note_overrides(&mut config);
    let seed = run.seed.unwrap_or_else(nandlab::seed::draw_run_seed);
    eprintln!("nandlab stress: preset {}, FTL {}, seed {seed}", config.name, config.ftl_name);
    let unit =
        trace_cmd::OracleUnit { given: run.oracle_unit, page_sectors: config.geometry.sectors_per_page(), sole: true };
    match trace.workload(workload_args, config.logical_bytes(), config.geometry.sector_size_bytes(), &unit) {
        Err(e) => return input_error(e),
        Ok(Some(mut w)) => return run_stress(&config, &mut w, seed, run, json, stop),
        Ok(None) => {}
    }
    let spec = match workload_args.apply(config.workload.clone().unwrap_or_default()) {
        Ok(s) => s,
        Err(e) => return input_error(e),
    };
    if spec.iodepth > 1 {
        eprintln!("note: stress runs requests one at a time; iodepth={} takes effect in `perf`", spec.iodepth);
    }
    let mut workload =
        match SyntheticWorkload::new(&spec, config.logical_bytes(), config.geometry.sector_size_bytes(), seed) {
            Ok(w) => w,
            Err(e) => return input_error(config.locate_error(&e)),
        };
    run_stress(&config, &mut workload, seed, run, json, stop)
}

/// Run `workload` on the device and report.
fn run_stress(
    config: &Config,
    workload: &mut dyn nandlab::workload::Workload,
    seed: u64,
    run: &RunArgs,
    json: Option<outputs::Output>,
    stop: nandlab::run::StopFlag,
) -> ExitCode {
    let reproduce = options::reproduce_command(seed);
    let alignment = workload.alignment_sectors();
    let memory = nandlab::memory::estimate(
        config,
        run.oracle_unit.unwrap_or(alignment),
        alignment,
        nandlab::memory::Mode::Single,
    );
    if let Err(e) = options::check_memory(&memory, run.max_memory) {
        return input_error(e);
    }
    eprintln!("  workload: {}", workload.describe());
    let opts = stress::StressOptions {
        seed,
        max_errors: run.max_errors,
        keep_violations: run.keep_violations,
        remount_verify: run.remount,
        oracle_unit_sectors: run.oracle_unit,
        idle_every: run.idle_every,
        stop,
    };
    let bar = progress_bar(run.no_progress);
    let result = stress::run(config, workload, &opts, &mut |p| {
        if let Some(b) = &bar {
            if let Some(t) = p.total {
                b.set_length(t);
            }
            b.set_position(p.done);
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let mut report = match result {
        Ok(r) => r,
        Err(RunError::Input(e)) | Err(RunError::Workload(e)) => return input_error(e),
    };
    if report.interrupted {
        signals::announce();
    }
    report.reproduce = Some(reproduce);
    if let Some(w) = &report.workload_report {
        for warning in trace_cmd::warnings(w) {
            eprintln!("warning: {warning}");
        }
    }
    let trace_line = report.workload_report.as_ref().and_then(trace_cmd::summary_line);
    finish_report(&report, json, trace_line.as_deref())
}

/// Print the summary and violations, write JSON, and choose the exit code.
fn finish_report(report: &StressReport, json: Option<outputs::Output>, extra: Option<&str>) -> ExitCode {
    print!("{}", report.summary());
    if let Some(line) = extra {
        println!("{line}");
    }
    if !report.violations.is_empty() {
        println!(
            "\nFirst violations ({} kept of {} errors and {} warnings):",
            report.violations.len(),
            report.errors,
            report.warnings
        );
        for v in &report.violations {
            println!("  {v}");
        }
    }
    if report.errors > 0 {
        if let Some(cmd) = &report.reproduce {
            println!("\nReproduce with:\n  {cmd}");
        }
    }
    if let Some(out) = json {
        let text = serde_json::to_string_pretty(report).expect("reports serialize") + "\n";
        if let Err(e) = out.write(text.as_bytes()) {
            return input_error(e);
        }
    }
    exit_code(report.errors > 0, report.interrupted)
}

/// The exit code of a run: a finding (1) before an interruption (130).
pub(crate) fn exit_code(findings: bool, interrupted: bool) -> ExitCode {
    if findings {
        ExitCode::from(EXIT_VIOLATIONS)
    } else if interrupted {
        ExitCode::from(signals::EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    }
}

fn progress_bar(disabled: bool) -> Option<indicatif::ProgressBar> {
    if disabled || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
        )
        .expect("valid template"),
    );
    Some(bar)
}
