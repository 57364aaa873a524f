//! `nandlab crash`: power-loss testing from the command line.

use crate::exit::{self, input_error};
use crate::options::{self, DeviceArgs, WorkloadArgs};
use clap::{Args, ValueEnum};
use nandlab::ftl::Guarantee;
use nandlab::nand::power::PowerCutEffects;
use nandlab::report::crash::{self as crash_report, CrashReport, Shrunk};
use nandlab::run::crash::{self, parse_nested_cut, parse_power_cut, CrashOptions, Phase, PointSelection};
use nandlab::run::RunError;
use nandlab::util::size::SizeSpec;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum GuaranteeArg {
    Baseline,
    Optr,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum PhaseArg {
    Between,
    During,
    Both,
}

/// Options of `nandlab crash`.
#[derive(Args, Debug, Clone)]
pub struct CrashArgs {
    /// The guarantee to check (default: the one the FTL declares).
    #[arg(long, value_enum, help_heading = "Crash points")]
    pub guarantee: Option<GuaranteeArg>,
    /// Test N crash points drawn at random in the window.
    #[arg(long = "crash-points", value_name = "N", help_heading = "Crash points")]
    pub crash_points: Option<u64>,
    /// Test every K-th operation boundary of the window instead (1: all).
    #[arg(long = "crash-every", value_name = "K", conflicts_with = "crash_points", help_heading = "Crash points")]
    pub crash_every: Option<u64>,
    /// Length of the window in flash operations (default: to the end of the workload).
    #[arg(long = "crash-span", value_name = "OPS", help_heading = "Crash points")]
    pub crash_span: Option<u64>,
    /// Cut between operations, during them (tearing programs and erases), or
    /// both (--crash-points: each point draws one; --crash-every: both at
    /// each selected operation).
    #[arg(long = "crash-phase", value_enum, default_value_t = PhaseArg::Both, help_heading = "Crash points")]
    pub crash_phase: PhaseArg,
    /// Test exactly this cut: OP or OP:during (repeatable; what a reproducer uses).
    /// The cuts are absolute: the options that choose points in a window
    /// cannot be given with it (they would be dropped).
    #[arg(
        long = "crash-at",
        value_name = "OP[:during]",
        conflicts_with_all = ["crash_points", "crash_every", "crash_span", "crash_phase", "warmup"],
        help_heading = "Crash points"
    )]
    pub crash_at: Vec<String>,
    /// Host bytes written before the window opens (e.g. 1x: the logical capacity).
    #[arg(long, value_name = "SIZE", help_heading = "Crash points")]
    pub warmup: Option<String>,
    /// A power-cut effect on or off, EFFECT=on|off (repeatable): torn_programs,
    /// paired_pages, torn_erases, write_cache_lost (off: power-loss
    /// protection, the FTL finishes its request and flushes its cache as the
    /// power fails, and every acknowledged write must survive).
    #[arg(long = "power-cut", value_name = "EFFECT=on|off", help_heading = "Crash points")]
    pub power_cut: Vec<String>,
    /// Do not cut the power again during recovery.
    #[arg(long = "no-nested", help_heading = "Crash points")]
    pub no_nested: bool,
    /// Cut every recovery at its K-th state-changing flash operation
    /// (program, copyback, erase; from 0), before it or during it; K at or
    /// beyond their count: after the last (default: drawn per point).
    #[arg(long = "nested-at", value_name = "K[:during]", conflicts_with = "no_nested", help_heading = "Crash points")]
    pub nested_at: Option<String>,
    /// Requests of the workload run on each recovered drive.
    #[arg(long = "post-requests", default_value_t = 64, help_heading = "Crash points")]
    pub post_requests: u64,
    /// Threads (default: all cores).
    #[arg(long, default_value_t = 0, help_heading = "Crash points")]
    pub threads: usize,
    /// Stop the workload after N requests.
    #[arg(long = "max-requests", value_name = "N", help_heading = "Crash points")]
    pub max_requests: Option<u64>,
    /// Do not shrink the first finding.
    #[arg(long = "no-shrink", help_heading = "Crash points")]
    pub no_shrink: bool,
    /// Run seed (drawn and printed when absent).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Write the JSON report to FILE (`-` for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the report as one self-contained HTML page of tables and
    /// charts to FILE (`-` for standard output).
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
    /// Oracle version grain in sectors, a power of two up to 65536
    /// (default: the workload's alignment).
    #[arg(long = "oracle-unit", value_parser = options::oracle_unit)]
    pub oracle_unit: Option<u32>,
    /// No per-point lines for failures (summary only) and no progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// No progress bar (there is none either when standard error is not a
    /// terminal).
    #[arg(long = "no-progress")]
    pub no_progress: bool,
    /// Refuse the campaign if its estimated memory (a drive per thread)
    /// exceeds SIZE (default: the machine's available memory).
    #[arg(long = "max-memory", value_name = "SIZE", value_parser = options::max_memory)]
    pub max_memory: Option<u64>,
}

impl CrashArgs {
    fn options(&self, seed: u64, capacity_bytes: u64) -> Result<CrashOptions, String> {
        let mut effects = PowerCutEffects::default();
        for e in &self.power_cut {
            effects.set(e).map_err(|m| format!("--power-cut {m}"))?;
        }
        let points = if !self.crash_at.is_empty() {
            PointSelection::At(
                self.crash_at
                    .iter()
                    .map(|c| parse_power_cut(c).map_err(|e| format!("--crash-at {e}")))
                    .collect::<Result<_, _>>()?,
            )
        } else if let Some(k) = self.crash_every {
            if k == 0 {
                return Err("--crash-every: must be at least 1".into());
            }
            PointSelection::Every { every: k, span: self.crash_span }
        } else {
            let count = self.crash_points.unwrap_or(100);
            if count == 0 {
                return Err("--crash-points: must be at least 1".into());
            }
            PointSelection::Random { count, span: self.crash_span }
        };
        let warmup_write_bytes = match &self.warmup {
            Some(w) => w.parse::<SizeSpec>().map_err(|e| format!("--warmup: {e}"))?.resolve(capacity_bytes),
            None => 0,
        };
        Ok(CrashOptions {
            seed,
            guarantee: self.guarantee.map(|g| match g {
                GuaranteeArg::Baseline => Guarantee::Baseline,
                GuaranteeArg::Optr => Guarantee::Optr,
            }),
            points,
            phase: match self.crash_phase {
                PhaseArg::Between => Phase::Between,
                PhaseArg::During => Phase::During,
                PhaseArg::Both => Phase::Both,
            },
            effects,
            nested: !self.no_nested,
            nested_at: self
                .nested_at
                .as_deref()
                .map(parse_nested_cut)
                .transpose()
                .map_err(|e| format!("--nested-at {e}"))?,
            post_requests: self.post_requests,
            threads: self.threads,
            warmup_write_bytes,
            max_requests: self.max_requests,
            shrink: !self.no_shrink,
            oracle_unit_sectors: self.oracle_unit,
            verify_chunk_sectors: 128,
            stop: Default::default(),
            progress: None,
        })
    }
}

/// The command that reproduces the shrunk finding alone.
fn reproducer(seed: u64, shrunk: &Shrunk) -> String {
    let cut = shrunk.cut;
    let skip_value = [
        "--seed",
        "--json",
        "--html",
        "--crash-points",
        "--crash-every",
        "--crash-span",
        "--crash-at",
        "--crash-phase",
        "--warmup",
        "--max-requests",
        "--threads",
        "--nested-at",
    ];
    let mut out = vec!["nandlab".to_string()];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if skip_value.contains(&a.as_str()) {
            args.next();
            continue;
        }
        if skip_value.iter().any(|s| a.starts_with(&format!("{s}="))) || a == "--no-shrink" {
            continue;
        }
        out.push(options::quote(&a));
    }
    out.push(format!("--seed {seed}"));
    out.push(format!("--crash-at {}:{}", cut.op_index, if cut.during { "during" } else { "between" }));
    if let Some(n) = shrunk.nested_cut {
        out.push(format!("--nested-at {}", crash_report::nested_name(n)));
    }
    out.push(format!("--max-requests {}", shrunk.requests_before + 1));
    out.push("--no-shrink".into());
    out.join(" ")
}

pub fn run(device: &DeviceArgs, workload_args: &WorkloadArgs, args: &CrashArgs) -> ExitCode {
    let outputs = [("--json", args.json.as_deref()), ("--html", args.html.as_deref())];
    let ([json, html], stop, config) = match device.start(workload_args, &[], outputs) {
        Ok(started) => started,
        Err(e) => return input_error(e),
    };
    let spec = match workload_args.apply(config.workload.clone().unwrap_or_default()) {
        Ok(s) => s,
        Err(e) => return input_error(e),
    };
    let seed = args.seed.unwrap_or_else(nandlab::seed::draw_run_seed);
    let mut opts = match args.options(seed, config.logical_bytes()) {
        Ok(o) => CrashOptions { stop, ..o },
        Err(e) => return input_error(e),
    };
    if nandlab::ftl::foreign::single_instance(&config.ftl_name) && opts.threads != 1 {
        // A Jasmine firmware's globals and board memory exist once per
        // process: its instances cannot run side by side.
        eprintln!("note: FTL {} runs one instance per process: the campaign runs on one thread", config.ftl_name);
        opts.threads = 1;
    }
    eprintln!("nandlab crash: preset {}, FTL {}, seed {seed}", config.name, config.ftl_name);
    crate::stress_cmd::note_sequential("crash", &spec);
    if let Err(e) = check_memory(&config, &spec, seed, args) {
        return input_error(e);
    }
    let bar = crate::progress::CrashBar::new(args.quiet || args.no_progress);
    opts.progress = bar.board();
    let result = crash::run(&config, &spec, &opts);
    bar.finish();
    let mut report = match result {
        Ok(r) => r,
        Err(RunError::Input(e)) | Err(RunError::Workload(e)) => return input_error(e),
    };
    if report.interrupted {
        crate::signals::announce();
    }
    if let Some(sh) = &mut report.shrunk {
        sh.command = Some(reproducer(seed, sh));
    }
    finish(&report, args, json, html)
}

/// The campaign's memory against `--max-memory` or the machine: one drive
/// per thread, and a campaign runs at most one thread per point.
fn check_memory(
    config: &nandlab::config::Config,
    spec: &nandlab::workload::synthetic::SyntheticSpec,
    seed: u64,
    args: &CrashArgs,
) -> Result<(), String> {
    use nandlab::workload::Workload;
    // A workload that cannot be built is reported by the campaign itself.
    let alignment = nandlab::workload::synthetic::SyntheticWorkload::new(
        spec,
        config.logical_bytes(),
        config.geometry.sector_size_bytes(),
        seed,
    )
    .map_or(1, |w| w.alignment_sectors());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut threads = if args.threads == 0 { cores } else { args.threads };
    if !args.crash_at.is_empty() {
        threads = threads.min(args.crash_at.len());
    } else if args.crash_every.is_none() {
        threads = threads.min(usize::try_from(args.crash_points.unwrap_or(100)).unwrap_or(usize::MAX));
    }
    let memory = nandlab::memory::estimate(
        config,
        args.oracle_unit.unwrap_or(alignment),
        alignment,
        nandlab::memory::Mode::Crash { threads },
    );
    options::check_memory(&memory, args.max_memory)
}

fn finish(
    report: &CrashReport,
    args: &CrashArgs,
    json: Option<crate::outputs::Output>,
    html: Option<crate::outputs::Output>,
) -> ExitCode {
    print!("{}", report.summary());
    if !args.quiet {
        let failed: Vec<_> = report.points.iter().filter(|p| !p.passed).collect();
        if !failed.is_empty() {
            println!("\nFailed crash points ({} of {}, first 20):", failed.len(), report.points_tested);
            for p in failed.iter().take(20) {
                let what = p.first.as_ref().map_or_else(String::new, |v| v.to_string());
                println!(
                    "  op {} {}{}: {what}",
                    p.cut.op_index,
                    if p.cut.during { "during" } else { "between" },
                    p.recovery_cut.zip(p.nested_cut).map_or(String::new(), |(c, n)| format!(
                        " (recovery cut {}, op {})",
                        crash_report::describe_nested(n, p.recovery_state_changes),
                        c.op_index
                    ))
                );
            }
        }
    }
    if let Some(cmd) = report.shrunk.as_ref().and_then(|s| s.command.as_ref()) {
        println!("\nReproduce the shrunk finding with:\n  {cmd}");
    }
    if let Err(e) = crate::stress_cmd::write_json_and_html(report, json, html, "") {
        return input_error(e);
    }
    exit::of_run(report.has_findings(), report.interrupted)
}
