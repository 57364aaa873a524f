//! `nandlab endurance`: project a drive's lifetime (TBW, DWPD) from its
//! wear under a workload, and with `--until worn-out` run it to its end of
//! life (see `nandlab::run::endurance`).

use crate::exit::{self, input_error};
use crate::options::{DeviceArgs, WorkloadArgs};
use crate::{signals, stress_cmd};
use clap::{Args, ValueEnum};
use nandlab::run::endurance::{self, EnduranceOptions};
use nandlab::run::RunError;
use nandlab::util::size::SizeSpec;
use nandlab::workload::synthetic::SyntheticWorkload;
use std::path::PathBuf;
use std::process::ExitCode;

/// How far an endurance run goes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Until {
    /// Stop after the projection.
    Projection,
    /// Run on until the drive loses capacity (its spare blocks worn out).
    WornOut,
}

#[derive(Args)]
pub struct EnduranceArgs {
    /// `projection` (default) or `worn-out`: run on to the end of life and
    /// report when the first uncorrectable read and the lost capacity appear.
    #[arg(long, value_enum, default_value = "projection", help_heading = "Endurance")]
    pub until: Until,
    /// Host writes before the projection, in times the logical capacity:
    /// the first half warms up, the second measures the wear rate.
    #[arg(long = "project-after", default_value_t = 8.0, help_heading = "Endurance")]
    pub project_after: f64,
    /// The run to end of life stops after this many times the capacity written.
    #[arg(long = "max-writes", default_value_t = 100_000.0, help_heading = "Endurance")]
    pub max_writes: f64,
    /// Years over which DWPD spreads the TBW.
    #[arg(long = "warranty-years", default_value_t = 5.0, help_heading = "Endurance")]
    pub warranty_years: f64,
    /// Run seed (drawn and printed when absent).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Write the JSON report to FILE (`-` for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub fn run(device: &DeviceArgs, workload_args: &WorkloadArgs, args: &EnduranceArgs) -> ExitCode {
    let ([json], stop, config) = match device.start(workload_args, &[], [("--json", args.json.as_deref())]) {
        Ok(started) => started,
        Err(e) => return input_error(e),
    };
    let seed = args.seed.unwrap_or_else(nandlab::seed::draw_run_seed);
    let opts = EnduranceOptions {
        seed,
        until_worn_out: args.until == Until::WornOut,
        project_after_capacity: args.project_after,
        max_capacity_writes: args.max_writes,
        warranty_years: args.warranty_years,
        stop,
        ..Default::default()
    };
    if let Err(e) = opts.check() {
        return input_error(e);
    }
    if config.reliability.is_none() {
        return input_error(
            "endurance needs the media reliability model: --reliability preset:NAME or a [reliability] table",
        );
    }
    let spec = match workload_args.apply(config.workload.clone().unwrap_or_default()) {
        Ok(s) => s,
        Err(e) => return input_error(e),
    };
    // The run's length is endurance's to choose: host writes, in capacities.
    let limit = SizeSpec::TimesCapacity(endurance::workload_limit(&opts));
    let spec = nandlab::workload::synthetic::SyntheticSpec { io_size: None, write_size: Some(limit), ..spec };
    stress_cmd::note_sequential("endurance", &spec);
    let mut workload =
        match SyntheticWorkload::new(&spec, config.logical_bytes(), config.geometry.sector_size_bytes(), seed) {
            Ok(w) => w,
            Err(e) => return input_error(config.locate_error(&e)),
        };
    eprintln!("nandlab endurance: preset {}, FTL {}, seed {seed}", config.name, config.ftl_name);
    eprintln!("  workload: {}", nandlab::workload::Workload::describe(&workload));
    let report = match endurance::run(&config, &mut workload, &opts) {
        Ok(r) => r,
        Err(RunError::Input(e)) | Err(RunError::Workload(e)) => return input_error(e),
    };
    if report.run.interrupted {
        signals::announce();
    }
    print!("{}", report.summary());
    stress_cmd::print_findings(&report.run);
    if let Err(e) = stress_cmd::write_json_and_html(&report, json, None, "") {
        return input_error(e);
    }
    exit::of_run(report.findings() > 0, report.run.interrupted)
}
