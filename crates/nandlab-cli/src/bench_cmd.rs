//! `nandlab bench stress|trace|perf|crash|serve`: the arguments, handed to the
//! harness in the `nandlab-bench` crate, which runs this very executable.

use crate::exit::{self, input_error};
use crate::options::{DeviceArgs, RunArgs, WorkloadArgs};
use clap::{Args, Parser, Subcommand, ValueEnum};
use nandlab::util::size::parse_bytes;
use nandlab::workload::trace::TraceFormat;
use nandlab_bench::html::BenchTable;
use nandlab_bench::{crash, mqsim, perf, serve, stress, trace, Verdict};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// VST's workloads on the vst-jasmine preset: effective host GB/s, requests/s,
    /// flash ops/s, WAF, CPU time and peak RSS per run, and medians; with
    /// --vst, VST on the same requests, side by side.
    Stress {
        /// Which workload(s).
        #[arg(long, value_enum, default_value_t = StressBench::All)]
        workload: StressBench,
        /// Runs per workload (the median is reported); with --vst, runs of
        /// each tool, alternating.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// FTL configurations to measure, by label or FTL name (repeatable;
        /// default: all of them — page, page-dac, dftl, dftl-whole-table, hybrid, block;
        /// with --vst: page, the configuration of VST's greedy FTL).
        #[arg(long = "ftl")]
        ftls: Vec<String>,
        /// Device preset.
        #[arg(long, default_value = "vst-jasmine")]
        preset: String,
        /// Bytes each workload writes (a size, or a multiple of the logical capacity).
        #[arg(long = "write-size", default_value = "4x", value_name = "SIZE")]
        write_size: String,
        /// A locally built VST `vst-jasmine` executable: run it on the same
        /// requests (as a VST trace) in the same run, alternating with
        /// nandlab, and print both and the ratio.
        #[arg(long, value_name = "PATH")]
        vst: Option<PathBuf>,
        /// The VST FTL shared object (default: ftl_greedy/ftl.so beside --vst).
        #[arg(long = "vst-ftl", value_name = "PATH", requires = "vst")]
        vst_ftl: Option<PathBuf>,
        /// An FTL library (e.g. examples/c-ftl's cpage built as a shared
        /// object): measured as `c-page` beside the Rust `page` FTL, runs
        /// interleaved, and the ratio of their median host GB/s printed.
        #[arg(long = "ftl-lib", value_name = "PATH.so", conflicts_with_all = ["vst", "ftls"])]
        ftl_lib: Option<PathBuf>,
        /// A Jasmine OpenSSD firmware directory (its ftl.c; e.g.
        /// OpenSSD-1.1.0/ftl_greedy): run through the Jasmine layer as the
        /// `jasmine` configuration (with --vst: beside VST's greedy FTL),
        /// with the rules ftl_greedy's known bugs break relaxed
        /// (unwritten_not_zero=allow, program_out_of_order=warn).
        #[arg(long, value_name = "DIR", conflicts_with_all = ["ftls", "ftl_lib"])]
        jasmine: Option<PathBuf>,
        /// Write the medians as one self-contained HTML page (table and a
        /// bar chart of throughput per configuration) to FILE.
        #[arg(long, value_name = "FILE.html")]
        html: Option<PathBuf>,
        /// Extra arguments passed to each `nandlab stress` run (e.g. --ftl-opt …).
        #[arg(last = true)]
        extra: Vec<String>,
    },
    /// Trace parsing throughput per format (lines/s, MB/s) on generated files of ≥ 1 GiB.
    Trace(TraceBenchArgs),
    /// MQSim's scenarios and a GC-heavy run on mqsim-default, timed:
    /// simulated requests per CPU-second, host MB per CPU-second, peak RSS.
    Perf(BenchPerfArgs),
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
        /// Write the medians as one self-contained HTML page (table and a
        /// bar chart of throughput per configuration) to FILE.
        #[arg(long, value_name = "FILE.html")]
        html: Option<PathBuf>,
        /// Extra arguments passed to each `nandlab crash` run (e.g. --no-nested).
        #[arg(last = true)]
        extra: Vec<String>,
    },
    /// `nandlab serve` beside `nbdkit memory` in the same run, runs
    /// interleaved: fio 4 KiB random write and read and 128 KiB
    /// sequential write at iodepth 16; IOPS, MiB/s, server CPU time per
    /// request, peak RSS, medians and ratios (skipped without fio or nbdkit).
    Serve {
        /// Runs per workload and server (the median is reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Seconds of fio per run.
        #[arg(long, default_value_t = 5)]
        seconds: u32,
        /// Device preset.
        #[arg(long, default_value = "femu-bbssd")]
        preset: String,
        /// FTL.
        #[arg(long, default_value = "page")]
        ftl: String,
        /// Bytes of the export fio uses (and nbdkit's RAM disk size).
        #[arg(long, default_value = "1g", value_name = "SIZE")]
        region: String,
        /// Write the medians as one self-contained HTML page (table and a
        /// bar chart of IOPS per workload, both servers) to FILE.
        #[arg(long, value_name = "FILE.html")]
        html: Option<PathBuf>,
        /// Extra arguments passed to each `nandlab serve`.
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

#[derive(Args, Debug)]
pub struct TraceBenchArgs {
    /// Size of each generated file.
    #[arg(long, default_value = "1g")]
    size: String,
    /// Where to write the files (default: the system's temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Formats to measure (comma-separated; default all).
    #[arg(long)]
    formats: Option<String>,
    /// Parsing runs per format (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Keep the generated files.
    #[arg(long)]
    keep: bool,
    /// Write the medians as one self-contained HTML page (table and a
    /// bar chart of requests parsed per CPU-second per format) to FILE.
    #[arg(long, value_name = "FILE.html")]
    html: Option<PathBuf>,
}

/// `nandlab bench perf` options.
#[derive(Args, Debug, Clone)]
pub struct BenchPerfArgs {
    /// Scenarios to run (repeatable): mqsim-s1, mqsim-s1-pre75, mqsim-s2, mqsim-s2-pre75, gc-heavy (default all).
    #[arg(long = "scenario")]
    pub scenarios: Vec<String>,
    /// Runs per scenario (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// A locally built MQSim (the `MQSim` executable of a CMU-SAFARI/MQSim
    /// checkout built with `make`): run the same scenarios in it, side by
    /// side, and print both speeds and their ratio.
    #[arg(long, value_name = "PATH")]
    pub mqsim: Option<PathBuf>,
    /// nandlab's device: mqsim-default (the speed comparison) or
    /// mqsim-compat (MQSim's mapping cache and scheduler, for fidelity).
    #[arg(long, default_value = "mqsim-default")]
    pub preset: String,
    /// Write the medians as one self-contained HTML page (table and a
    /// bar chart of throughput per configuration) to FILE.
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
    /// Extra arguments passed to each `nandlab perf` run (the untimed
    /// floor, a `nandlab stress` run, is then left out).
    #[arg(last = true)]
    pub extra: Vec<String>,
}

pub fn run(cmd: BenchCommand) -> ExitCode {
    let html_path = match &cmd {
        BenchCommand::Stress { html, .. } | BenchCommand::Crash { html, .. } => html.clone(),
        BenchCommand::Perf(a) => a.html.clone(),
        BenchCommand::Trace(a) => a.html.clone(),
        BenchCommand::Serve { html, .. } => html.clone(),
    };
    // The page's file is checked and created before any run; not standard
    // output, where the bench prints its figures.
    if html_path.as_deref().is_some_and(|p| p.as_os_str() == "-") {
        return input_error("--html -: the bench prints its figures on standard output; give the page a file");
    }
    let html = match crate::outputs::prepare(&[], [("--html", html_path.as_deref())]) {
        Ok([html]) => html,
        Err(e) => return input_error(e),
    };
    let mut table = BenchTable::default();
    let outcome = match cmd {
        BenchCommand::Stress {
            workload,
            runs,
            ftls,
            preset,
            write_size,
            vst,
            vst_ftl,
            ftl_lib,
            jasmine,
            html: _,
            extra,
        } => nandlab().and_then(|nandlab| {
            stress::run(
                &stress::StressBenchArgs {
                    nandlab,
                    workload: workload
                        .to_possible_value()
                        .filter(|_| workload != StressBench::All)
                        .map(|v| v.get_name().to_string()),
                    runs: runs.max(1),
                    ftls,
                    preset,
                    write_size,
                    vst,
                    vst_ftl,
                    ftl_lib,
                    jasmine,
                    extra,
                    read_stress_line: &read_stress_line,
                },
                &mut table,
            )
        }),
        BenchCommand::Trace(args) => trace_options(&args).and_then(|o| trace::run(&o, &mut table)),
        BenchCommand::Perf(a) => a.mqsim.as_deref().map(mqsim::Mqsim::locate).transpose().and_then(|m| {
            nandlab().and_then(|nandlab| {
                perf::run(&nandlab, &a.preset, &a.scenarios, a.runs, &a.extra, m.as_ref(), &mut table)
            })
        }),
        BenchCommand::Crash { points, runs, ftls, preset, html: _, extra } => {
            nandlab().and_then(|nandlab| crash::run(&nandlab, points, runs.max(1), ftls, &preset, &extra, &mut table))
        }
        BenchCommand::Serve { runs, seconds, preset, ftl, region, html: _, extra } => {
            let region_bytes = match parse_bytes(&region) {
                Ok(b) if b >= 1 << 20 => b,
                _ => return input_error(format!("--region {region}: expected a size of at least 1m")),
            };
            if seconds == 0 {
                return input_error("--seconds 0: at least 1");
            }
            nandlab().and_then(|nandlab| {
                serve::run(
                    &serve::ServeBenchArgs { nandlab, preset, ftl, runs: runs.max(1), seconds, region_bytes, extra },
                    &mut table,
                )
            })
        }
    };
    if let (Ok(_), Some(out)) = (&outcome, html) {
        if let Err(e) = out.write(table.render().as_bytes()) {
            return input_error(e);
        }
    }
    match outcome {
        Ok(Verdict::Measured) => ExitCode::SUCCESS,
        Ok(Verdict::Failed) => ExitCode::from(exit::VIOLATIONS),
        Err(e) => input_error(e),
    }
}

/// This executable: every bench runs it, one process per measurement.
fn nandlab() -> Result<PathBuf, String> {
    std::env::current_exe().map_err(|e| format!("cannot find the nandlab executable: {e}"))
}

/// `bench trace`'s options.
fn trace_options(args: &TraceBenchArgs) -> Result<trace::TraceBenchOptions, String> {
    let size_bytes = match parse_bytes(&args.size) {
        Ok(s) if s > 0 => s,
        _ => return Err(format!("--size {}: expected a size such as 1g", args.size)),
    };
    let formats: Vec<TraceFormat> = match &args.formats {
        None => TraceFormat::ALL.to_vec(),
        Some(list) => list
            .split(',')
            .map(|f| f.trim().parse())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("--formats: {e}"))?,
    };
    Ok(trace::TraceBenchOptions {
        size_bytes,
        dir: args.dir.clone().unwrap_or_else(std::env::temp_dir),
        formats,
        runs: args.runs.max(1),
        keep: args.keep,
    })
}

/// `nandlab stress`'s device, workload and run options, parsed as the
/// stress command parses them, to build the very workload a run issues.
#[derive(Parser)]
#[command(no_binary_name = true)]
struct StressLine {
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    workload: WorkloadArgs,
    #[command(flatten)]
    run: RunArgs,
}

/// A `nandlab stress` argument line as `stress` reads it (for `bench
/// stress --vst`, which writes the requests it issues as a VST trace).
fn read_stress_line(args: &[String]) -> Result<stress::StressRun, String> {
    let line = StressLine::try_parse_from(args)
        .map_err(|e| format!("--vst: the stress arguments cannot be replayed by VST: {}", e.to_string().trim()))?;
    let config = line.device.load()?;
    let spec = line.workload.apply(config.workload.clone().unwrap_or_default());
    Ok(stress::StressRun { config, spec, seed: line.run.seed })
}
