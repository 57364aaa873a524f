//! `hunt`: many short runs, each configured differently from its seed, to
//! find the bugs no default workload aims at.
//!
//! The default `stress` run takes an FTL down few of its paths: aligned
//! whole-page requests, a uniform mix, a preset without bad blocks, one
//! mount at the end. A bug in read-modify-write, bad-block handling, map
//! cache write-back or recovery stays unseen. A hunt campaign instead runs
//! runs seeded `first_seed, first_seed + 1, …`, each with its own
//! configuration drawn from its seed ([`swarm`]: swarm testing, Groce et
//! al., ISSTA 2012) — request sizes down to one sector and unaligned,
//! mix, hot spots, footprint, factory bad blocks, spare, the FTL's
//! policies and caches — and its own structure: verification passes that
//! read the whole logical space back at random points, clean and unclean
//! mount cycles each followed by a verification, idle time ([`execute`]).
//! Every stress check applies on the way; a panic inside the FTL
//! ([`panics`]) and running out of space inside the stated capacity are
//! findings too.
//!
//! Runs are independent, so they run on all cores; a run's outcome is a
//! function of its seed, and the campaign's findings are reported in seed
//! order, so `--runs N` gives the same report with any number of threads.
//! Findings are grouped by rule and location (a panic's source line), the
//! lowest seed of each group is shrunk ([`shrink`]) and printed as a
//! command that repeats it from its seed alone.

pub mod coverage;
pub mod execute;
pub mod panics;
pub mod shrink;
pub mod swarm;
pub mod workload;

use crate::config::Config;
use crate::ftl::mutants::Mutant;
use crate::run::{registry_factory, FtlFactory, StopFlag};
use execute::{Finding, Outcome};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use swarm::Swarm;

/// The FTL a hunt runs: a shipped FTL by name, with a deliberate bug
/// (tests and the measurement of what `hunt` finds) or without.
pub struct Target {
    pub ftl: String,
    pub mutant: Mutant,
    /// The FTL factory for a run's configuration.
    pub factory: Box<dyn Fn(&Config) -> FtlFactory + Send + Sync>,
}

impl Target {
    /// FTL `ftl` from the registry, with `mutant` (a bug of that FTL, or
    /// [`Mutant::None`]).
    pub fn shipped(ftl: &str, mutant: Mutant) -> Result<Target, String> {
        if mutant != Mutant::None {
            mutant.check_breaks(ftl)?;
        }
        let name = ftl.to_string();
        let factory: Box<dyn Fn(&Config) -> FtlFactory + Send + Sync> = if mutant == Mutant::None {
            Box::new(move |c: &Config| registry_factory(&name, &c.ftl_options))
        } else {
            Box::new(move |c: &Config| {
                let (name, options) = (name.clone(), c.ftl_options.clone());
                Box::new(move |env| crate::ftl::mutants::build_mutated(&name, env, &options, mutant))
            })
        };
        Ok(Target { ftl: ftl.to_string(), mutant, factory })
    }
}

/// Which runs a campaign makes.
#[derive(Clone, Debug)]
pub enum Runs {
    /// Seeds `first_seed .. first_seed + n`.
    Count(u64),
    /// As many as fit in this wall time.
    Budget(Duration),
    /// One run: seed `first_seed`, cut at `requests`, features switched off.
    One { requests: Option<u64>, without: BTreeSet<String> },
}

/// Options of a campaign.
#[derive(Clone, Debug)]
pub struct HuntOptions {
    pub first_seed: u64,
    pub runs: Runs,
    /// Worker threads.
    pub jobs: usize,
    /// Shrink each distinct finding.
    pub shrink: bool,
    /// Take no new run after the first finding (the runs already started
    /// finish, so every seed below a finding's has run: the lowest seed
    /// that finds something is the same whatever the number of threads).
    pub stop_at_first: bool,
    pub stop: StopFlag,
}

/// One distinct finding: its rule and location, the runs that hit it, and
/// the first of them (lowest seed), shrunk.
#[derive(Clone, Debug)]
pub struct FindingGroup {
    pub first: Finding,
    pub swarm: Swarm,
    /// Seeds of every run that hit it, ascending.
    pub seeds: Vec<u64>,
    pub shrunk: Option<shrink::Shrunk>,
}

/// What a campaign did and found.
#[derive(Clone, Debug)]
pub struct HuntReport {
    pub runs: u64,
    pub skipped: u64,
    /// One skip reason per distinct reason, with the first seed.
    pub skip_reasons: BTreeMap<String, u64>,
    pub groups: Vec<FindingGroup>,
    pub interrupted: bool,
    pub wall_seconds: f64,
    /// Seconds from the start to the first run that found something
    /// (that run's completion, in wall time).
    pub first_finding_seconds: Option<f64>,
    /// The FTL event counters' (counter, bucket) pairs the runs reached
    /// (see [`coverage`]); a function of the runs made.
    pub coverage: coverage::Coverage,
}

/// Run a campaign against `target` on `base`'s device.
pub fn campaign(base: &Config, target: &Target, opts: &HuntOptions) -> HuntReport {
    let started = Instant::now();
    let (count, deadline, one) = match &opts.runs {
        Runs::Count(n) => (*n, None, None),
        Runs::Budget(d) => (u64::MAX, Some(started + *d), None),
        Runs::One { requests, without } => (1, None, Some((*requests, without.clone()))),
    };
    let next = AtomicU64::new(0);
    let results: Mutex<BTreeMap<u64, (Swarm, Outcome, f64)>> = Mutex::new(BTreeMap::new());
    let interrupted = std::sync::atomic::AtomicBool::new(false);
    let found = std::sync::atomic::AtomicBool::new(false);
    let covered = Mutex::new(coverage::Coverage::new());
    std::thread::scope(|scope| {
        for _ in 0..opts.jobs.max(1) {
            scope.spawn(|| loop {
                if opts.stop.is_set() {
                    interrupted.store(true, Ordering::Relaxed);
                    return;
                }
                if deadline.is_some_and(|d| Instant::now() >= d) || found.load(Ordering::Relaxed) {
                    return;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return;
                }
                let seed = opts.first_seed.wrapping_add(i);
                let swarm = match &one {
                    Some((requests, without)) => Swarm::draw(base, &target.ftl, seed, without, *requests),
                    None => Swarm::draw(base, &target.ftl, seed, &BTreeSet::new(), None),
                };
                let mut run_coverage = coverage::Coverage::new();
                let outcome = execute::run_covered(base, target, &swarm, &mut run_coverage);
                covered.lock().expect("no worker panics outside catch").merge(run_coverage);
                let done = started.elapsed().as_secs_f64();
                if opts.stop_at_first && matches!(outcome, Outcome::Found(_)) {
                    found.store(true, Ordering::Relaxed);
                }
                results.lock().expect("no worker panics outside catch").insert(seed, (swarm, outcome, done));
            });
        }
    });
    let results = results.into_inner().expect("workers ended");
    let mut report = HuntReport {
        runs: results.len() as u64,
        skipped: 0,
        skip_reasons: BTreeMap::new(),
        groups: Vec::new(),
        interrupted: interrupted.into_inner(),
        wall_seconds: 0.0,
        first_finding_seconds: None,
        coverage: covered.into_inner().expect("workers ended"),
    };
    let mut by_key: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (seed, (swarm, outcome, done)) in results {
        match outcome {
            Outcome::Clean => {}
            Outcome::Skipped(reason) => {
                report.skipped += 1;
                report.skip_reasons.entry(reason).or_insert(seed);
            }
            Outcome::Found(f) => {
                report.first_finding_seconds = Some(report.first_finding_seconds.map_or(done, |t: f64| t.min(done)));
                let key = (f.rule.clone(), f.location.clone().unwrap_or_default());
                match by_key.get(&key) {
                    Some(&g) => report.groups[g].seeds.push(seed),
                    None => {
                        by_key.insert(key, report.groups.len());
                        report.groups.push(FindingGroup { first: f, swarm, seeds: vec![seed], shrunk: None });
                    }
                }
            }
        }
    }
    if opts.shrink && !report.interrupted {
        for g in &mut report.groups {
            if opts.stop.is_set() {
                break;
            }
            g.shrunk = Some(shrink::shrink(base, target, &g.swarm, &g.first.rule, g.first.request_index));
        }
    }
    report.wall_seconds = started.elapsed().as_secs_f64();
    report
}

/// The arguments that repeat run `swarm` (after `nandlab hunt` and the
/// device options): its seed, its length if cut, the features switched off.
pub fn reproduce_args(swarm: &Swarm, cut: bool) -> String {
    let mut args = format!("--seed {}", swarm.seed);
    if cut {
        args += &format!(" --requests {}", swarm.requests);
    }
    if !swarm.without.is_empty() {
        args += &format!(" --without {}", swarm.without.iter().cloned().collect::<Vec<_>>().join(","));
    }
    args
}

#[cfg(test)]
mod tests;
