//! Command-line options shared by the run modes: the device (preset or
//! file, FTL and its options, rule severities), the workload (fio's option
//! names), and how the run behaves.

use clap::Args;
use nandlab::config::Config;
use nandlab::util::assignment;
use nandlab::util::size::SizeSpec;
use nandlab::workload::synthetic::{RwMode, SyntheticSpec};
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct DeviceArgs {
    /// A built-in device preset (see `nandlab presets`).
    #[arg(long, conflicts_with = "config")]
    pub preset: Option<String>,
    /// A device configuration file (TOML).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The FTL (see `nandlab ftls`), or `jasmine:DIR`: a Jasmine OpenSSD
    /// firmware tree, built against nandlab's Jasmine layer for this device
    /// (cached; see `nandlab jasmine build`); default: the configuration's.
    #[arg(long)]
    pub ftl: Option<String>,
    /// An FTL written in C: a shared library built against include/nandlab.h
    /// (see the README, "Your own FTL in C"); replaces --ftl.
    #[arg(long = "ftl-lib", value_name = "PATH.so", conflicts_with = "ftl")]
    pub ftl_lib: Option<PathBuf>,
    /// Run a library FTL (--ftl-lib) in a child process, so that a crash of
    /// its C code is reported as a violation (signal, flash operation,
    /// request, command to reproduce it) rather than ending nandlab.
    #[arg(long)]
    pub isolate: bool,
    /// An FTL option, KEY=VALUE (repeatable), e.g. --ftl-opt gc_stream=shared.
    #[arg(long = "ftl-opt", value_name = "KEY=VALUE")]
    pub ftl_opt: Vec<String>,
    /// GC victim policy: greedy, cost-benefit, fifo, random, d-choices[:d],
    /// windowed-greedy[:window] (same as --ftl-opt gc_policy=P).
    #[arg(long = "gc-policy", value_name = "POLICY")]
    pub gc_policy: Option<String>,
    /// dftl: DRAM for the cached mapping table, a size (2MiB) or a share of
    /// the whole table (25%) (same as --ftl-opt cmt_bytes=SIZE).
    #[arg(long = "cmt-bytes", value_name = "SIZE")]
    pub cmt_bytes: Option<String>,
    /// Hot/cold streams: none, dac[:regions], two-stream[:threshold]
    /// (same as --ftl-opt hot_cold=P).
    #[arg(long = "hot-cold", value_name = "POLICY")]
    pub hot_cold: Option<String>,
    /// Wear leveling: none, dynamic, static[:threshold=N]
    /// (same as --ftl-opt wear_leveling=P).
    #[arg(long = "wear-leveling", value_name = "POLICY")]
    pub wear_leveling: Option<String>,
    /// Severity of a NAND rule, RULE=allow|warn|error (repeatable; see `nandlab rules`).
    #[arg(long = "rule", value_name = "RULE=SEVERITY")]
    pub rules: Vec<String>,
    /// Turn the media reliability model on: `preset:slc|mlc|tlc|qlc`, then
    /// any `[reliability]` key as KEY=VALUE, comma-separated, e.g.
    /// `preset:tlc,program_fail_probability=0.001` (see the README, "Media
    /// reliability"). Over the device file's [reliability] table.
    #[arg(long, value_name = "preset:NAME[,KEY=VALUE...]")]
    pub reliability: Option<String>,
    /// Fail one flash operation (repeatable): `program@block=B,page=P` (the
    /// first program of that page) or `erase@block=B` (its first erase
    /// after the format). Needs the reliability model on.
    #[arg(long = "fail", value_name = "program@block=B,page=P|erase@block=B")]
    pub fail: Vec<String>,
    /// TEST ONLY (hidden): build the shipped FTL with a deliberate bug, by
    /// its kebab-case name (`nandlab::ftl::mutants::SHIPPED_MUTANTS`), to
    /// measure what `stress` and `hunt` find.
    #[arg(long, hide = true)]
    pub mutant: Option<String>,
}

impl DeviceArgs {
    /// The deliberate bug `--mutant` names, checked against the FTL `ftl`
    /// (`Mutant::None` without the option).
    pub fn mutant_for(&self, ftl: &str) -> Result<nandlab::ftl::mutants::Mutant, String> {
        use nandlab::ftl::mutants;
        let Some(name) = &self.mutant else { return Ok(mutants::Mutant::None) };
        let mutant = mutants::shipped_mutant(name).map_err(|e| format!("--mutant: {e}"))?;
        mutant.check_breaks(ftl).map_err(|e| format!("--mutant: {e}"))?;
        Ok(mutant)
    }

    /// The input files of a run, as (option, path), for [`crate::outputs::prepare`]:
    /// the configuration file and the given traces.
    pub fn inputs<'a>(
        &'a self,
        traces: impl IntoIterator<Item = &'a std::path::Path>,
    ) -> Vec<(&'static str, &'a std::path::Path)> {
        let config = self.config.iter().map(|c| ("--config", c.as_path()));
        config.chain(traces.into_iter().map(|t| ("--trace", t))).collect()
    }

    /// What every run command does first, in this order: check the input
    /// and output files ([`crate::outputs::prepare`]), install the stop
    /// flag for SIGINT/SIGTERM, load the configuration and note the
    /// workload's overrides of it. An error is bad input (exit 2), found
    /// before any work.
    pub fn start<const N: usize>(
        &self,
        workload: &WorkloadArgs,
        traces: &[&std::path::Path],
        outputs: [(&'static str, Option<&std::path::Path>); N],
    ) -> Result<([Option<crate::outputs::Output>; N], nandlab::run::StopFlag, Config), String> {
        let outputs = crate::outputs::prepare(&self.inputs(traces.iter().copied()), outputs)?;
        let stop = crate::signals::install();
        let mut config = self.load()?;
        workload.note_overrides(&mut config);
        Ok((outputs, stop, config))
    }

    /// The configuration with every command-line override applied.
    pub fn load(&self) -> Result<Config, String> {
        let mut config = match (&self.preset, &self.config) {
            (Some(p), _) => Config::preset(p).map_err(|e| e.to_string())?,
            (None, Some(f)) => Config::load(f).map_err(|e| e.to_string())?,
            (None, None) => {
                return Err("give a device: --preset NAME (see `nandlab presets`) or --config FILE.toml".into())
            }
        };
        let jasmine_dir = self.ftl.as_deref().and_then(|n| n.strip_prefix("jasmine:"));
        if let Some(dir) = jasmine_dir {
            // A Jasmine firmware tree, built for this device (cached) and
            // loaded as a library FTL.
            config.ftl_options.clear();
            config.clear_overrides("ftl");
            let dir = std::path::Path::new(dir);
            config.ftl_lib =
                Some(crate::jasmine_cmd::cached_build(dir, &config).map_err(|e| format!("--ftl jasmine:{e}"))?);
        } else if let Some(name) = &self.ftl {
            if *name != config.ftl_name {
                if !config.ftl_options.is_empty() {
                    eprintln!(
                        "note: --ftl {name} replaces the configuration's FTL `{}`; its [ftl] options are not used",
                        config.ftl_name
                    );
                }
                config.ftl_options.clear();
                config.ftl_name = name.clone();
            }
        }
        if self.ftl.is_some() && jasmine_dir.is_none() {
            config.clear_overrides("ftl");
            config.ftl_lib = None;
        }
        if let Some(lib) = &self.ftl_lib {
            if config.ftl_lib.as_ref() != Some(lib) {
                if !config.ftl_options.is_empty() {
                    eprintln!(
                        "note: --ftl-lib {} replaces the configuration's FTL `{}`; its [ftl] options are not used",
                        lib.display(),
                        config.ftl_name
                    );
                }
                config.ftl_options.clear();
                config.clear_overrides("ftl");
            }
            config.ftl_lib = Some(lib.clone());
        }
        for a in &self.ftl_opt {
            let (key, value) = assignment::parse_toml(a).map_err(|e| format!("--ftl-opt {e}"))?;
            config.note_override("ftl", &key, format!("--ftl-opt {}", a.trim()));
            config.ftl_options.insert(key, value);
        }
        // The policy flags are sugar for string-valued FTL options.
        for (key, value) in [
            ("gc_policy", &self.gc_policy),
            ("cmt_bytes", &self.cmt_bytes),
            ("hot_cold", &self.hot_cold),
            ("wear_leveling", &self.wear_leveling),
        ] {
            if let Some(v) = value {
                config.note_override("ftl", key, format!("--{} {}", key.replace('_', "-"), v.trim()));
                config.ftl_options.insert(key.to_string(), toml::Value::String(v.trim().to_string()));
            }
        }
        for r in &self.rules {
            config.rules.parse_assignment(r).map_err(|e| format!("--rule {e}"))?;
        }
        config.set_reliability(self.reliability.as_deref(), &self.fail)?;
        if let Some(lib) = config.ftl_lib.clone() {
            let how = if jasmine_dir.is_some() {
                "--ftl jasmine:".to_string()
            } else if self.ftl_lib.is_some() {
                "--ftl-lib".to_string()
            } else {
                format!("{}: [ftl] lib", config.name)
            };
            config.ftl_name = nandlab::ftl::foreign::load_for(&config, &lib).map_err(|e| format!("{how} {e}"))?;
            eprintln!("note: FTL {} from {}", config.ftl_name, lib.display());
        }
        Ok(config)
    }
}

/// Refuse the media reliability model in a mode that does not support it
/// yet (`what`): an input error before any work.
pub fn refuse_reliability(config: &Config, what: &str) -> Result<(), String> {
    if config.reliability.is_some() {
        return Err(format!(
            "{what} does not support the media reliability model yet (--reliability, --fail or a [reliability] \
             table): use stress or perf"
        ));
    }
    Ok(())
}

/// Workload options, with fio's names.
#[derive(Args, Debug, Clone, Default)]
pub struct WorkloadArgs {
    /// read, write, randread, randwrite, rw, randrw, trim, randtrim.
    #[arg(long, help_heading = "Workload (fio names)")]
    pub rw: Option<String>,
    /// Request size (4k, 64KiB, …).
    #[arg(long, conflicts_with = "bsrange", help_heading = "Workload (fio names)")]
    pub bs: Option<String>,
    /// Request sizes MIN-MAX, drawn among multiples of MIN.
    #[arg(long, help_heading = "Workload (fio names)")]
    pub bsrange: Option<String>,
    /// Alignment of random offsets (default: the minimum size).
    #[arg(long, help_heading = "Workload (fio names)")]
    pub blockalign: Option<String>,
    /// Percentage of reads in rw / randrw.
    #[arg(long, help_heading = "Workload (fio names)")]
    pub rwmixread: Option<u32>,
    /// Start of the I/O region.
    #[arg(long, help_heading = "Workload (fio names)")]
    pub offset: Option<String>,
    /// Size of the I/O region (bytes, 50%, …).
    #[arg(long, help_heading = "Workload (fio names)")]
    pub size: Option<String>,
    /// Bytes read + written per job (4g, or 4x = four times the logical capacity).
    #[arg(long = "io_size", alias = "io-size", help_heading = "Workload (fio names)")]
    pub io_size: Option<String>,
    /// nandlab: bytes written per job before stopping (4x, 100g, …).
    #[arg(long = "write_size", alias = "write-size", help_heading = "Workload (fio names)")]
    pub write_size: Option<String>,
    /// random (uniform), zipf:θ, pareto:h.
    #[arg(long = "random_distribution", alias = "random-distribution", help_heading = "Workload (fio names)")]
    pub random_distribution: Option<String>,
    /// Outstanding requests per job (`perf`; `stress` runs one request at a time).
    #[arg(long, help_heading = "Workload (fio names)")]
    pub iodepth: Option<u32>,
    /// Jobs issuing requests, interleaved; each has its own stream and limit.
    #[arg(long, help_heading = "Workload (fio names)")]
    pub numjobs: Option<u32>,
    /// A flush after every N writes.
    #[arg(long, help_heading = "Workload (fio names)")]
    pub fsync: Option<u32>,
    /// nandlab: percentage of requests that are trims.
    #[arg(long = "trim_percent", alias = "trim-percent", help_heading = "Workload (fio names)")]
    pub trim_percent: Option<f64>,
}

fn size(option: &str, text: &str) -> Result<SizeSpec, String> {
    text.parse().map_err(|e| format!("--{option}: {e}"))
}

impl WorkloadArgs {
    /// Tell `config` which workload fields these options set, so an error
    /// about one names the option rather than the file.
    pub fn note_overrides(&self, config: &mut Config) {
        let text = |v: &Option<String>| v.clone();
        let number = |v: Option<u32>| v.map(|n| n.to_string());
        for (key, value) in [
            ("rw", text(&self.rw)),
            ("bs", text(&self.bs)),
            ("bsrange", text(&self.bsrange)),
            ("blockalign", text(&self.blockalign)),
            ("rwmixread", number(self.rwmixread)),
            ("offset", text(&self.offset)),
            ("size", text(&self.size)),
            ("io_size", text(&self.io_size)),
            ("write_size", text(&self.write_size)),
            ("random_distribution", text(&self.random_distribution)),
            ("iodepth", number(self.iodepth)),
            ("numjobs", number(self.numjobs)),
            ("fsync", number(self.fsync)),
            ("trim_percent", self.trim_percent.map(|t| t.to_string())),
        ] {
            if let Some(v) = value {
                config.note_override("workload", key, format!("--{key} {v}"));
            }
        }
    }

    /// Apply the given options over a base specification (the preset's).
    pub fn apply(&self, mut s: SyntheticSpec) -> Result<SyntheticSpec, String> {
        if let Some(rw) = &self.rw {
            s.rw = rw.parse::<RwMode>().map_err(|e| format!("--rw: {e}"))?;
            // A preset's write_size cannot stop a mode that never writes:
            // the run then ends at io_size (default: the region) instead.
            // An explicit --write_size with such a mode stays an error.
            if !s.rw.writes() && self.write_size.is_none() {
                s.write_size = None;
            }
        }
        if let Some(bs) = &self.bs {
            s.bs = size("bs", bs)?;
            s.bsrange = None;
        }
        if let Some(r) = &self.bsrange {
            nandlab::util::size::parse_range(r).map_err(|e| format!("--bsrange: {e}"))?;
            s.bsrange = Some(r.clone());
        }
        if let Some(a) = &self.blockalign {
            s.blockalign = Some(size("blockalign", a)?);
        }
        if let Some(m) = self.rwmixread {
            s.rwmixread = m;
        }
        if let Some(o) = &self.offset {
            s.offset = size("offset", o)?;
        }
        if let Some(z) = &self.size {
            s.size = Some(size("size", z)?);
        }
        if let Some(i) = &self.io_size {
            s.io_size = Some(size("io_size", i)?);
            if self.write_size.is_none() {
                s.write_size = None;
            }
        }
        if let Some(w) = &self.write_size {
            s.write_size = Some(size("write_size", w)?);
        }
        if let Some(d) = &self.random_distribution {
            s.random_distribution = d.parse().map_err(|e| format!("--random_distribution: {e}"))?;
        }
        if let Some(v) = self.iodepth {
            s.iodepth = v;
        }
        if let Some(v) = self.numjobs {
            s.numjobs = v;
        }
        if let Some(v) = self.fsync {
            s.fsync = v;
        }
        if let Some(v) = self.trim_percent {
            s.trim_percent = v;
        }
        Ok(s)
    }
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Run seed (drawn and printed when absent).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Write the JSON report to FILE (`-` for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the report as one self-contained HTML page of tables and
    /// charts to FILE (`-` for standard output); the same page as
    /// `nandlab report` draws from the JSON.
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
    /// Stop after this many error violations (0: never stop).
    #[arg(long = "max-errors", default_value_t = 1)]
    pub max_errors: u64,
    /// Violations kept in full in the report.
    #[arg(long = "keep-violations", default_value_t = 20)]
    pub keep_violations: usize,
    /// At the end: clean shutdown, mount a fresh FTL, read every sector back.
    #[arg(long)]
    pub remount: bool,
    /// No progress bar (there is none either when standard error is not
    /// a terminal).
    #[arg(long = "no-progress", visible_alias = "quiet")]
    pub no_progress: bool,
    /// Oracle version grain in sectors, a power of two up to 65536
    /// (default: the workload's alignment; a trace file's is measured by a
    /// first pass).
    #[arg(long = "oracle-unit", value_parser = oracle_unit)]
    pub oracle_unit: Option<u32>,
    /// Give the FTL idle time (background work) after every N requests.
    #[arg(long = "idle-every", default_value_t = 0)]
    pub idle_every: u64,
    /// Refuse the run if its estimated memory exceeds SIZE (default: the
    /// machine's available memory); a larger SIZE tries anyway.
    #[arg(long = "max-memory", value_name = "SIZE", value_parser = max_memory)]
    pub max_memory: Option<u64>,
}

/// `--max-memory SIZE`: bytes with a binary suffix (16GiB, 512m).
pub fn max_memory(text: &str) -> Result<u64, String> {
    match nandlab::util::size::parse_bytes(text)? {
        0 => Err("must be more than 0 bytes".into()),
        b => Ok(b),
    }
}

/// Refuse a run whose estimated memory exceeds `--max-memory`, or the
/// machine's available memory when it is not given (no check where that
/// is unknown). Called before anything of the run is allocated.
pub fn check_memory(estimate: &nandlab::memory::Estimate, max_memory: Option<u64>) -> Result<(), String> {
    match max_memory {
        Some(limit) => estimate.check(limit, true),
        None => match nandlab::memory::available_bytes() {
            Some(limit) => estimate.check(limit, false),
            None => Ok(()),
        },
    }
}

/// `--oracle-unit N`: a power of two of sectors, bounded (clap names the option).
pub fn oracle_unit(text: &str) -> Result<u32, String> {
    let n: u32 = text.trim().parse().map_err(|_| format!("`{text}` is not a number of sectors"))?;
    nandlab::oracle::check_unit_sectors(n)
}

/// The command line of this run with its seed pinned (for "reproduce with").
pub fn reproduce_command(seed: u64) -> String {
    let mut out = vec!["nandlab".to_string()];
    let mut args = std::env::args().skip(1).peekable();
    while let Some(a) = args.next() {
        if a == "--seed" || a == "--json" || a == "--html" {
            args.next();
            continue;
        }
        if a.starts_with("--seed=") || a.starts_with("--json=") || a.starts_with("--html=") {
            continue;
        }
        out.push(quote(&a));
    }
    out.push(format!("--seed {seed}"));
    out.join(" ")
}

pub fn quote(a: &str) -> String {
    if a.chars().all(|c| c.is_ascii_alphanumeric() || "-_=.:/%,+".contains(c)) {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_flags_override_the_preset() {
        let args = WorkloadArgs { bs: Some("16k".into()), rw: Some("write".into()), ..Default::default() };
        let base = SyntheticSpec { bsrange: Some("4k-8k".into()), ..Default::default() };
        let s = args.apply(base).unwrap();
        assert_eq!(s.bs, SizeSpec::Bytes(16384));
        assert_eq!(s.bsrange, None);
        assert_eq!(s.rw, RwMode::Write);
        let reads = WorkloadArgs { rw: Some("randread".into()), ..Default::default() };
        let preset = SyntheticSpec { write_size: Some(SizeSpec::TimesCapacity(4.0)), ..Default::default() };
        assert_eq!(reads.apply(preset.clone()).unwrap().write_size, None, "a read mode ends at io_size");
        let explicit = WorkloadArgs { write_size: Some("1x".into()), ..reads };
        assert!(explicit.apply(preset).unwrap().write_size.is_some(), "left for the workload to reject");
        let bad = WorkloadArgs { rw: Some("sideways".into()), ..Default::default() };
        assert!(bad.apply(SyntheticSpec::default()).unwrap_err().starts_with("--rw"));
    }
}
