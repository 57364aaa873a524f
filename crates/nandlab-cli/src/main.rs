//! `nandlab`: the command-line front end of the nandlab library. This
//! file holds the subcommands and their dispatch; each command's module
//! parses its arguments, calls the library and prints (`stress_cmd`,
//! `perf_cmd`, `crash_cmd`, `trace_cmd`, `bench_cmd`, `serve_cmd`, `report_cmd`,
//! `jasmine_cmd`, `lists`). Exit
//! codes: see `exit`.

mod bench_cmd;
mod crash_cmd;
mod endurance_cmd;
mod exit;
mod hunt_cmd;
mod hunt_isolate;
mod isolate;
mod jasmine_cmd;
mod lists;
mod options;
mod outputs;
mod perf_cmd;
mod progress;
mod report_cmd;
mod serve_cmd;
mod signals;
mod stress_cmd;
mod trace_cmd;

use clap::{Parser, Subcommand};
use options::{DeviceArgs, RunArgs, WorkloadArgs};
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
    /// Lifetime under a workload: TBW and DWPD projected from the wear, and
    /// with `--until worn-out` a run to the end of life (needs --reliability).
    Endurance {
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        workload: WorkloadArgs,
        #[command(flatten)]
        endurance: endurance_cmd::EnduranceArgs,
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
    /// Serve the drive as a block device over NBD (fio, qemu, nbdfuse, the
    /// kernel's nbd client), every read checked; report on exit.
    Serve {
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        serve: serve_cmd::ServeArgs,
    },
    /// Draw saved JSON reports as one self-contained HTML page of tables and
    /// charts: `nandlab report A.json [B.json ...] -o report.html` (several
    /// reports of one mode on the same axes).
    Report {
        #[command(flatten)]
        args: report_cmd::ReportArgs,
    },
    /// Swarm campaign: many short runs, each configured from its seed
    /// (request sizes, mix, device features, FTL policies, mount cycles),
    /// to find bugs no default workload aims at.
    Hunt {
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        hunt: hunt_cmd::HuntArgs,
    },
    /// List the device presets.
    Presets,
    /// List the FTLs and their options; `--ftl-lib PATH.so` or `--ftl
    /// jasmine:DIR`: what a library FTL declares (name, ABI version, options).
    Ftls {
        #[command(flatten)]
        args: lists::FtlsArgs,
    },
    /// List the rules nandlab checks.
    Rules,
    /// Jasmine OpenSSD firmware: `nandlab jasmine build DIR -o ftl.so`.
    Jasmine {
        #[command(subcommand)]
        which: jasmine_cmd::JasmineCommand,
    },
    /// Benchmarks: `nandlab bench stress|trace|perf|crash|serve`.
    Bench {
        #[command(subcommand)]
        which: bench_cmd::BenchCommand,
    },
}

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
        Command::Stress { device, workload, trace, run } => stress_cmd::run(&device, &workload, &trace, &run),
        Command::Trace { which } => trace_cmd::run(which),
        Command::Endurance { device, workload, endurance } => endurance_cmd::run(&device, &workload, &endurance),
        Command::Perf { device, workload, trace, run, perf } => {
            perf_cmd::perf_command(&device, &workload, &trace, &run, &perf)
        }
        Command::Crash { device, workload, crash } => crash_cmd::run(&device, &workload, &crash),
        Command::Serve { device, serve } => serve_cmd::run(&device, &serve),
        Command::Report { args } => report_cmd::run(&args),
        Command::Hunt { device, hunt } => hunt_cmd::run(&device, &hunt),
        Command::Presets => lists::presets(),
        Command::Ftls { args } => lists::ftls(&args),
        Command::Rules => lists::rules(),
        Command::Jasmine { which } => jasmine_cmd::run(which),
        Command::Bench { which } => bench_cmd::run(which),
    }
}
