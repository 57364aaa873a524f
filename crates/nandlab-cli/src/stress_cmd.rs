//! `nandlab stress`: an untimed run of a synthetic workload or a trace,
//! its summary, violations and JSON report.

use crate::exit::{self, input_error};
use crate::options::{self, DeviceArgs, RunArgs, WorkloadArgs};
use crate::progress::RunBar;
use crate::{outputs, signals, trace_cmd};
use nandlab::config::Config;
use nandlab::ftl::mutants::Mutant;
use nandlab::report::StressReport;
use nandlab::run::{stress, RunError};
use nandlab::workload::synthetic::SyntheticWorkload;
use std::process::ExitCode;

pub fn run(
    device: &DeviceArgs,
    workload_args: &WorkloadArgs,
    trace: &trace_cmd::StressTraceArgs,
    run: &RunArgs,
) -> ExitCode {
    let traces: Vec<&std::path::Path> = trace.trace.as_deref().into_iter().collect();
    let outputs = [("--json", run.json.as_deref()), ("--html", run.html.as_deref())];
    let ([json, html], stop, config) = match device.start(workload_args, &traces, outputs) {
        Ok(started) => started,
        Err(e) => return input_error(e),
    };
    let mutant = match device.mutant_for(&config.ftl_name) {
        Ok(m) => m,
        Err(e) => return input_error(e),
    };
    let seed = run.seed.unwrap_or_else(nandlab::seed::draw_run_seed);
    eprintln!("nandlab stress: preset {}, FTL {}, seed {seed}", config.name, config.ftl_name);
    let unit =
        trace_cmd::OracleUnit { given: run.oracle_unit, page_sectors: config.geometry.sectors_per_page(), sole: true };
    match trace.workload(workload_args, config.logical_bytes(), config.geometry.sector_size_bytes(), &unit) {
        Err(e) => return input_error(e),
        Ok(Some(mut w)) => return run_stress(&config, mutant, &mut w, seed, run, [json, html], stop),
        Ok(None) => {}
    }
    let spec = match workload_args.apply(config.workload.clone().unwrap_or_default()) {
        Ok(s) => s,
        Err(e) => return input_error(e),
    };
    note_sequential("stress", &spec);
    let mut workload =
        match SyntheticWorkload::new(&spec, config.logical_bytes(), config.geometry.sector_size_bytes(), seed) {
            Ok(w) => w,
            Err(e) => return input_error(config.locate_error(&e)),
        };
    run_stress(&config, mutant, &mut workload, seed, run, [json, html], stop)
}

/// `stress` and `crash` submit one request at a time: say so when the
/// workload asks for a queue depth (it takes effect in `perf`), rather than
/// ignore it silently.
pub fn note_sequential(command: &str, spec: &nandlab::workload::synthetic::SyntheticSpec) {
    if spec.iodepth > 1 {
        eprintln!("note: {command} runs requests one at a time; iodepth={} takes effect in `perf`", spec.iodepth);
    }
}

/// Run `workload` on the device and report.
fn run_stress(
    config: &Config,
    mutant: Mutant,
    workload: &mut dyn nandlab::workload::Workload,
    seed: u64,
    run: &RunArgs,
    json_html: [Option<outputs::Output>; 2],
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
    let mut bar = RunBar::new(run.no_progress);
    let mut show = |p: &nandlab::run::progress::RunProgress| bar.show(p);
    let result = if mutant == Mutant::None {
        stress::run(config, workload, &opts, &mut show)
    } else {
        let (name, options) = (config.ftl_name.clone(), config.ftl_options.clone());
        let factory: nandlab::run::FtlFactory =
            Box::new(move |env| nandlab::ftl::mutants::build_mutated(&name, env, &options, mutant));
        stress::run_with_factory(config, factory, workload, &opts, &mut show)
    };
    bar.finish();
    let mut report = match result {
        Ok(r) => r,
        Err(RunError::Input(e)) | Err(RunError::Workload(e)) => return input_error(e),
    };
    if report.interrupted {
        signals::announce();
    }
    report.reproduce = Some(reproduce);
    if let Some(w) = &report.workload_report {
        for warning in w.warnings() {
            eprintln!("warning: {warning}");
        }
    }
    let trace_line = report.workload_report.as_ref().map(trace_cmd::summary_line);
    finish_report(&report, json_html, trace_line.as_deref())
}

/// Print the summary and violations, write JSON and HTML, and choose the exit code.
fn finish_report(report: &StressReport, [json, html]: [Option<outputs::Output>; 2], extra: Option<&str>) -> ExitCode {
    print!("{}", report.summary());
    if let Some(line) = extra {
        println!("{line}");
    }
    print_findings(report);
    if let Err(e) = write_json_and_html(report, json, html, "") {
        return input_error(e);
    }
    exit::of_run(report.errors > 0, report.interrupted)
}

/// Write `report` as JSON (`--json`, followed by `json_stdout_tail` when it
/// goes to standard output) and as HTML (`--html`), whichever were given.
pub fn write_json_and_html(
    report: &impl serde::Serialize,
    json: Option<outputs::Output>,
    html: Option<outputs::Output>,
    json_stdout_tail: &str,
) -> Result<(), String> {
    if json.is_none() && html.is_none() {
        return Ok(());
    }
    let text = serde_json::to_string_pretty(report).expect("reports serialize") + "\n";
    if let Some(out) = json {
        let tail = if out.is_stdout() { json_stdout_tail } else { "" };
        out.write((text.clone() + tail).as_bytes())?;
    }
    if let Some(out) = html {
        crate::report_cmd::write_html(out, &text)?;
    }
    Ok(())
}

/// The violations kept, and the command that reproduces the run if it
/// found errors (after the summary of `stress` and of `perf`).
pub fn print_findings(report: &StressReport) {
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
}
