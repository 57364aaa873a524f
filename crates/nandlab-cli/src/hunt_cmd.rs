//! `nandlab hunt`: a swarm campaign of short runs against one FTL (see
//! `nandlab::run::hunt`), its findings grouped, shrunk and printed each
//! with the command that repeats it from its seed alone.

use crate::exit::{self, input_error};
use crate::options::{quote, DeviceArgs};
use crate::signals;
use clap::Args;
use nandlab::ftl::mutants::Mutant;
use nandlab::run::hunt::{self, HuntOptions, HuntReport, Runs, Target};
use serde_json::json;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct HuntArgs {
    /// Runs to make (seeds --first-seed, --first-seed + 1, …).
    #[arg(long, conflicts_with_all = ["budget", "seed"])]
    pub runs: Option<u64>,
    /// Wall time to spend on runs, e.g. 90s, 10m (default: 1000 runs).
    #[arg(long, conflicts_with = "seed")]
    pub budget: Option<String>,
    /// The seed of the first run.
    #[arg(long = "first-seed", default_value_t = 1, conflicts_with = "seed")]
    pub first_seed: u64,
    /// Repeat one run: the run of this seed (a finding's reproducer).
    #[arg(long)]
    pub seed: Option<u64>,
    /// With --seed: cut the workload at this many requests.
    #[arg(long, requires = "seed")]
    pub requests: Option<u64>,
    /// With --seed: switch these features off (comma-separated; see the README).
    #[arg(long, requires = "seed", value_delimiter = ',')]
    pub without: Vec<String>,
    /// With --seed: take these draws from other seeds, NAME=SEED,... (a
    /// guided run's reproducer prints them).
    #[arg(long, requires = "seed")]
    pub splice: Option<String>,
    /// Coverage-guided: three runs in four mutate a run that reached new
    /// coverage (see the README). Off by default: on the mutants measured
    /// it did not find bugs sooner than pure swarm draws.
    #[arg(long)]
    pub guided: bool,
    /// Guided, keeping the corpus in DIR (runs that reached new coverage,
    /// one JSON file each), and starting from what it holds.
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// With --isolate: a run whose FTL call issues no flash operation for
    /// this long is killed and reported as `ftl_hang` (e.g. 10s).
    #[arg(long = "hang-timeout", default_value = "10s")]
    pub hang_timeout: String,
    /// Worker threads (default: the number of CPUs).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Stop at the first finding (the lowest seed that finds something).
    #[arg(long = "stop-at-first")]
    pub stop_at_first: bool,
    /// Do not shrink findings.
    #[arg(long = "no-shrink")]
    pub no_shrink: bool,
    /// Write the campaign's report as JSON to PATH (- for stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write each distinct finding to DIR: RULE-SEED.json and RULE-SEED.sh.
    #[arg(long)]
    pub findings: Option<PathBuf>,
}

pub fn run(device: &DeviceArgs, args: &HuntArgs) -> ExitCode {
    let (prepared, target, opts) = match prepare(device, args) {
        Ok(p) => p,
        Err(e) => return input_error(e),
    };
    let ([json], config) = prepared;
    eprintln!(
        "nandlab hunt: preset {}, FTL {}{}, {} job(s), {}",
        config.name,
        target.ftl,
        if target.mutant == Mutant::None { String::new() } else { format!(" with mutant {:?}", target.mutant) },
        opts.jobs,
        match &opts.runs {
            Runs::Count(n) => format!("{n} runs from seed {}", opts.first_seed),
            Runs::Budget(d) => format!("budget {:?} from seed {}", d, opts.first_seed),
            Runs::One { .. } => format!("one run, seed {}", opts.first_seed),
        } + match &opts.guided {
            Some(g) if !matches!(opts.runs, Runs::One { .. }) =>
                format!(", guided ({} corpus entries)", g.loaded.len()),
            Some(_) => String::new(),
            None => ", unguided".to_string(),
        }
        .as_str()
    );
    if let Runs::One { requests, without, splice } = &opts.runs {
        let swarm = hunt::swarm::Swarm::draw_spliced(&config, &target.ftl, opts.first_seed, without, splice, *requests);
        println!("run {}: {}", swarm.seed, swarm.describe());
    }
    let report = hunt::campaign(&config, &target, &opts);
    if report.interrupted {
        signals::announce();
    }
    let prefix = command_prefix(device);
    print_report(&report, &prefix);
    if let Some(dir) = &args.findings {
        if let Err(e) = write_findings(dir, &report, &prefix) {
            return input_error(e);
        }
    }
    if let Some(out) = json {
        let text = serde_json::to_string_pretty(&report_json(&report, &prefix)).expect("serializes") + "\n";
        if let Err(e) = out.write(text.as_bytes()) {
            return input_error(e);
        }
    }
    exit::of_run(!report.groups.is_empty(), report.interrupted)
}

type Prepared = ([Option<crate::outputs::Output>; 1], nandlab::config::Config);

/// Check every option before any run (exit 2 on a bad one).
fn prepare(device: &DeviceArgs, args: &HuntArgs) -> Result<(Prepared, Target, HuntOptions), String> {
    let hang_ns = nandlab::util::duration::parse_duration_ns(&args.hang_timeout)
        .map_err(|e| format!("--hang-timeout {}: {e}", args.hang_timeout))?;
    if hang_ns == 0 {
        return Err("--hang-timeout: must be more than 0".into());
    }
    let runs = match (&args.seed, args.runs, &args.budget) {
        (Some(_), _, _) => {
            let known: BTreeSet<&str> = hunt::swarm::FEATURES.iter().copied().collect();
            for w in &args.without {
                if !known.contains(w.as_str()) && !w.starts_with("opt-") {
                    return Err(format!(
                        "--without: unknown feature `{w}` (features: {}, opt-KEY)",
                        hunt::swarm::FEATURES.join(", ")
                    ));
                }
            }
            let splice = match &args.splice {
                Some(text) => hunt::swarm::parse_splice(text).map_err(|e| format!("--splice: {e}"))?,
                None => Default::default(),
            };
            Runs::One { requests: args.requests, without: args.without.iter().cloned().collect(), splice }
        }
        (None, Some(0), _) => return Err("--runs: must be at least 1".into()),
        (None, Some(n), _) => Runs::Count(n),
        (None, None, Some(b)) => {
            let ns = nandlab::util::duration::parse_duration_ns(b).map_err(|e| format!("--budget {b}: {e}"))?;
            if ns == 0 {
                return Err("--budget: must be more than 0".into());
            }
            Runs::Budget(Duration::from_nanos(ns))
        }
        (None, None, None) => Runs::Count(1000),
    };
    let jobs = match args.jobs {
        Some(0) => return Err("--jobs: must be at least 1".into()),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let outputs = crate::outputs::prepare(&device.inputs([]), [("--json", args.json.as_deref())])?;
    if let Some(dir) = &args.findings {
        std::fs::create_dir_all(dir).map_err(|e| format!("--findings {}: {e}", dir.display()))?;
    }
    let stop = signals::install();
    let config = device.load()?;
    crate::options::refuse_reliability(&config, "hunt")?;
    let library = config.ftl_name.starts_with("lib:");
    if !library {
        nandlab::ftl::descriptor(&config.ftl_name).ok_or_else(|| format!("unknown FTL `{}`", config.ftl_name))?;
    }
    if config.ftl_name == "buggy" {
        // Every hunt run ends with a mount, and `buggy` has no recovery.
        return Err("--ftl buggy: the buggy FTL cannot mount, and every hunt run mounts; hunt a shipped FTL \
                    (with --mutant NAME to measure a deliberate bug)"
            .into());
    }
    let mutant = device.mutant_for(&config.ftl_name)?;
    let mut target = Target::shipped(&config.ftl_name, mutant)?;
    if device.ftl.as_deref().is_some_and(|f| f.starts_with("jasmine:")) {
        // Named for the draws: a Jasmine firmware is given no factory bad
        // blocks (see `swarm::honours`).
        target.ftl = format!("jasmine:{}", config.ftl_name.trim_start_matches("lib:"));
    }
    // A library FTL's crash ends the process it runs in: always a child
    // per run (the child itself, running one --seed, is the run).
    let isolated = (device.isolate || library) && std::env::var_os(crate::isolate::PROGRESS_VAR).is_none();
    if isolated {
        if library && !device.isolate {
            eprintln!("note: a library FTL is hunted in a child process per run (as with --isolate)");
        }
        target.executor = Some(crate::hunt_isolate::executor(device_args(device), Duration::from_nanos(hang_ns))?);
    }
    let first_seed = args.seed.unwrap_or(args.first_seed);
    let guided = match (&args.corpus, args.guided) {
        (Some(dir), _) => Some(hunt::guide::Guided {
            loaded: hunt::guide::load_corpus(dir).map_err(|e| format!("--corpus: {e}"))?,
            dir: Some(dir.clone()),
        }),
        (None, true) => Some(hunt::guide::Guided::default()),
        (None, false) => None,
    };
    let opts = HuntOptions {
        first_seed,
        runs,
        jobs,
        shrink: !args.no_shrink && args.seed.is_none(),
        stop_at_first: args.stop_at_first,
        stop,
        guided,
    };
    Ok(((outputs, config), target, opts))
}

/// `nandlab hunt` and the device options as given (the runs' own options dropped).
fn command_prefix(device: &DeviceArgs) -> String {
    let mut out = vec!["nandlab".to_string(), "hunt".to_string()];
    out.extend(device_args(device).iter().map(|a| if a.starts_with("--") { a.clone() } else { quote(a) }));
    out.join(" ")
}

/// The device options as given, one argument each (unquoted).
fn device_args(device: &DeviceArgs) -> Vec<String> {
    let mut out = Vec::new();
    let mut add = |flag: &str, value: Option<&str>| {
        if let Some(v) = value {
            out.push(flag.to_string());
            out.push(v.to_string());
        }
    };
    add("--preset", device.preset.as_deref());
    add("--config", device.config.as_ref().and_then(|p| p.to_str()));
    add("--ftl", device.ftl.as_deref());
    for o in &device.ftl_opt {
        add("--ftl-opt", Some(o));
    }
    add("--gc-policy", device.gc_policy.as_deref());
    add("--cmt-bytes", device.cmt_bytes.as_deref());
    add("--hot-cold", device.hot_cold.as_deref());
    add("--wear-leveling", device.wear_leveling.as_deref());
    for r in &device.rules {
        add("--rule", Some(r));
    }
    add("--mutant", device.mutant.as_deref());
    add("--ftl-lib", device.ftl_lib.as_ref().and_then(|p| p.to_str()));
    if device.isolate {
        out.push("--isolate".to_string());
    }
    out
}

fn print_report(report: &HuntReport, prefix: &str) {
    println!(
        "hunt: {} runs ({} skipped: configuration refused), {:.1} s, {} distinct finding(s){}",
        report.runs,
        report.skipped,
        report.wall_seconds,
        report.groups.len(),
        if report.interrupted { ", interrupted" } else { "" }
    );
    if let Some(t) = report.first_finding_seconds {
        println!("first finding after {t:.3} s");
    }
    for (reason, seed) in &report.skip_reasons {
        println!("  skipped (first seed {seed}): {reason}");
    }
    let c = &report.coverage;
    if !c.0.is_empty() {
        println!(
            "coverage: {} FTL counters, {} (counter, power-of-two bucket) pairs above zero, {} edges (path counter with another)",
            c.0.len() - c.edges(),
            c.pairs_moved(),
            c.edges()
        );
        println!("  moved        {}", c.describe_moved().join(", "));
        let never = c.never_moved();
        println!("  never moved  {}", if never.is_empty() { "(none)".to_string() } else { never.join(", ") });
    }
    if let Some(guide) = &report.guide {
        print_guide(guide);
    }
    for g in &report.groups {
        let f = &g.first;
        println!("\nFINDING {} — {} run(s), first seed {}", f.rule, g.seeds.len(), g.swarm.seed);
        if let Some(l) = &f.location {
            println!("  at        {l}");
        }
        println!("  when      {}", f.phase);
        println!("  what      {}", f.message);
        println!("  run       {}", g.swarm.describe());
        println!("  reproduce {prefix} {}", hunt::reproduce_args(&g.swarm, false));
        if let Some(s) = &g.shrunk {
            println!("  shrunk    {prefix} {}   ({} runs to shrink)", hunt::reproduce_args(&s.swarm, true), s.runs);
            println!("            {}", s.swarm.describe());
        }
    }
    if report.groups.is_empty() {
        println!("result: nothing found");
    }
}

/// How the corpus grew: entries added, at which runs, from which origin.
fn print_guide(guide: &hunt::guide::GuideReport) {
    use hunt::guide::Origin;
    let from = |o: fn(&Origin) -> bool| guide.added.iter().filter(|(_, origin, _)| o(origin)).count();
    println!(
        "guidance: {} fresh and {} mutated runs ({} corpus entries loaded); corpus grew by {} ({} from fresh runs, {} \
         from mutations, {} loaded)",
        guide.fresh_runs,
        guide.mutated_runs,
        guide.loaded,
        guide.added.len(),
        from(|o| *o == Origin::Fresh),
        from(|o| matches!(o, Origin::Mutated(_))),
        from(|o| *o == Origin::Loaded),
    );
    let at: Vec<String> = guide.added.iter().map(|(i, _, e)| format!("{}(+{})", i + 1, e.new_pairs)).collect();
    println!("  grew at runs {}", if at.is_empty() { "(none)".to_string() } else { at.join(" ") });
    if let Some(e) = &guide.write_error {
        eprintln!("warning: --corpus: cannot write an entry: {e}");
    }
}

fn group_json(g: &hunt::FindingGroup, prefix: &str) -> serde_json::Value {
    json!({
        "rule": g.first.rule,
        "location": g.first.location,
        "phase": g.first.phase,
        "request_index": g.first.request_index,
        "message": g.first.message,
        "seeds": g.seeds,
        "run": g.swarm.describe(),
        "reproduce": format!("{prefix} {}", hunt::reproduce_args(&g.swarm, false)),
        "shrunk": g.shrunk.as_ref().map(|s| json!({
            "reproduce": format!("{prefix} {}", hunt::reproduce_args(&s.swarm, true)),
            "run": s.swarm.describe(),
            "requests": s.swarm.requests,
            "shrink_runs": s.runs,
        })),
    })
}

fn report_json(report: &HuntReport, prefix: &str) -> serde_json::Value {
    json!({
        "schema_version": nandlab::report::SCHEMA_VERSION,
        "mode": "hunt",
        "runs": report.runs,
        "skipped": report.skipped,
        "interrupted": report.interrupted,
        "wall_seconds": report.wall_seconds,
        "first_finding_seconds": report.first_finding_seconds,
        "coverage": report.coverage.0,
        "never_moved": report.coverage.never_moved(),
        "skip_reasons": report.skip_reasons,
        "guidance": report.guide.as_ref().map(|g| json!({
            "loaded": g.loaded,
            "fresh_runs": g.fresh_runs,
            "mutated_runs": g.mutated_runs,
            "added": g.added.iter().map(|(i, origin, e)| json!({
                "run": i + 1,
                "origin": format!("{origin:?}"),
                "seed": e.genes.seed,
                "splice": e.genes.splice,
                "without": e.genes.without,
                "new_pairs": e.new_pairs,
            })).collect::<Vec<_>>(),
        })),
        "findings": report.groups.iter().map(|g| group_json(g, prefix)).collect::<Vec<_>>(),
    })
}

fn write_findings(dir: &std::path::Path, report: &HuntReport, prefix: &str) -> Result<(), String> {
    for g in &report.groups {
        let stem = dir.join(format!("{}-{}", g.first.rule, g.swarm.seed));
        let text = serde_json::to_string_pretty(&group_json(g, prefix)).expect("serializes") + "\n";
        let command = match &g.shrunk {
            Some(s) => format!("{prefix} {}", hunt::reproduce_args(&s.swarm, true)),
            None => format!("{prefix} {}", hunt::reproduce_args(&g.swarm, false)),
        };
        let sh = stem.with_extension("sh");
        std::fs::write(stem.with_extension("json"), text)
            .and_then(|_| std::fs::write(&sh, format!("#!/bin/sh\n{command}\n")))
            .map_err(|e| format!("--findings {}: {e}", dir.display()))?;
    }
    Ok(())
}
