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
//!
//! By default the campaign is guided ([`guide`]): runs that reached new
//! (counter, bucket) pairs of the FTL's event counters ([`coverage`]) form
//! a corpus, and most new runs are mutations of corpus runs. A run can be
//! made in a child process instead ([`Target::executor`], `--isolate`),
//! which turns a hang or a crash of the FTL into a finding.

pub mod coverage;
pub mod execute;
pub mod guide;
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
    /// Runs a swarm another way than in this process (see [`Executor`]).
    pub executor: Option<Executor>,
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
        Ok(Target { ftl: ftl.to_string(), mutant, factory, executor: None })
    }

    /// Make run `swarm`, adding what its FTL counters reached to `coverage`.
    pub fn run(&self, base: &Config, swarm: &Swarm, coverage: &mut coverage::Coverage) -> Outcome {
        match &self.executor {
            Some(exec) => exec(base, swarm, coverage),
            None => execute::run_covered(base, self, swarm, coverage),
        }
    }
}

/// How a run is made: in this process ([`execute::run_covered`]) unless
/// the target says otherwise (a child process per run, `--isolate`).
pub type Executor = Box<dyn Fn(&Config, &Swarm, &mut coverage::Coverage) -> Outcome + Send + Sync>;

/// Which runs a campaign makes.
#[derive(Clone, Debug)]
pub enum Runs {
    /// Seeds `first_seed .. first_seed + n`.
    Count(u64),
    /// As many as fit in this wall time.
    Budget(Duration),
    /// One run: seed `first_seed`, cut at `requests`, features switched
    /// off, draws spliced from other seeds.
    One { requests: Option<u64>, without: BTreeSet<String>, splice: swarm::Splice },
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
    /// Coverage guidance ([`guide`]); `None`: every run a fresh swarm draw.
    pub guided: Option<guide::Guided>,
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
    /// What guidance did (guided campaigns).
    pub guide: Option<guide::GuideReport>,
}

/// The results of a campaign's runs by run index: the run, how it ended,
/// when (seconds from the start).
type Results = BTreeMap<u64, (Swarm, Outcome, f64)>;

/// Run a campaign against `target` on `base`'s device.
pub fn campaign(base: &Config, target: &Target, opts: &HuntOptions) -> HuntReport {
    let started = Instant::now();
    let (count, deadline) = match &opts.runs {
        Runs::Count(n) => (*n, None),
        Runs::Budget(d) => (u64::MAX, Some(started + *d)),
        Runs::One { .. } => (1, None),
    };
    let interrupted = std::sync::atomic::AtomicBool::new(false);
    let found = std::sync::atomic::AtomicBool::new(false);
    // Whether a worker may take another run.
    let go_on = || {
        if opts.stop.is_set() {
            interrupted.store(true, Ordering::Relaxed);
            return false;
        }
        !(deadline.is_some_and(|d| Instant::now() >= d) || found.load(Ordering::Relaxed))
    };
    let run = |swarm: &Swarm| {
        let mut run_coverage = coverage::Coverage::new();
        let outcome = target.run(base, swarm, &mut run_coverage);
        if opts.stop_at_first && matches!(outcome, Outcome::Found(_)) {
            found.store(true, Ordering::Relaxed);
        }
        (outcome, run_coverage, started.elapsed().as_secs_f64())
    };
    let (results, covered, guide) = match (&opts.guided, &opts.runs) {
        (Some(guided), Runs::Count(_) | Runs::Budget(_)) => {
            let (results, covered, guide) = guided_runs(base, target, opts, guided, count, &go_on, &run);
            (results, covered, Some(guide))
        }
        _ => {
            let (results, covered) = swarm_runs(base, target, opts, count, &go_on, &run);
            (results, covered, None)
        }
    };
    let mut report = HuntReport {
        runs: results.len() as u64,
        skipped: 0,
        skip_reasons: BTreeMap::new(),
        groups: Vec::new(),
        interrupted: interrupted.into_inner(),
        wall_seconds: 0.0,
        first_finding_seconds: None,
        coverage: covered,
        guide,
    };
    let mut by_key: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (_, (swarm, outcome, done)) in results {
        let seed = swarm.seed;
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

/// A run's outcome, its coverage and when it ended.
type Ran = (Outcome, coverage::Coverage, f64);

/// Unguided: runs `first_seed + i`, each a fresh swarm draw, on `jobs`
/// threads.
fn swarm_runs(
    base: &Config,
    target: &Target,
    opts: &HuntOptions,
    count: u64,
    go_on: &(dyn Fn() -> bool + Sync),
    run: &(dyn Fn(&Swarm) -> Ran + Sync),
) -> (Results, coverage::Coverage) {
    let next = AtomicU64::new(0);
    let results: Mutex<Results> = Mutex::new(BTreeMap::new());
    let covered = Mutex::new(coverage::Coverage::new());
    std::thread::scope(|scope| {
        for _ in 0..opts.jobs.max(1) {
            scope.spawn(|| {
                while go_on() {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        return;
                    }
                    let seed = opts.first_seed.wrapping_add(i);
                    let swarm = match &opts.runs {
                        Runs::One { requests, without, splice } => {
                            Swarm::draw_spliced(base, &target.ftl, seed, without, splice, *requests)
                        }
                        _ => Swarm::draw(base, &target.ftl, seed, &BTreeSet::new(), None),
                    };
                    let (outcome, run_coverage, done) = run(&swarm);
                    covered.lock().expect("no worker panics outside catch").merge(run_coverage);
                    results.lock().expect("no worker panics outside catch").insert(i, (swarm, outcome, done));
                }
            });
        }
    });
    (results.into_inner().expect("workers ended"), covered.into_inner().expect("workers ended"))
}

/// Guided: batches of runs chosen from the corpus ([`guide`]).
fn guided_runs(
    base: &Config,
    target: &Target,
    opts: &HuntOptions,
    guided: &guide::Guided,
    count: u64,
    go_on: &(dyn Fn() -> bool + Sync),
    run: &(dyn Fn(&Swarm) -> Ran + Sync),
) -> (Results, coverage::Coverage, guide::GuideReport) {
    let mut corpus = guide::Corpus::new(guided);
    let mut covered = coverage::Coverage::new();
    let mut results = Results::new();
    let mut first = 0u64;
    while first < count && go_on() {
        let last = first.saturating_add(guide::BATCH).min(count);
        let batch: Vec<(u64, guide::Genes, guide::Origin)> = (first..last)
            .map(|i| {
                let (genes, origin) = corpus.next(base, &target.ftl, opts.first_seed, i);
                (i, genes, origin)
            })
            .collect();
        let next = AtomicU64::new(0);
        let done: Mutex<BTreeMap<u64, (Swarm, Ran)>> = Mutex::new(BTreeMap::new());
        std::thread::scope(|scope| {
            for _ in 0..opts.jobs.max(1) {
                scope.spawn(|| {
                    while go_on() {
                        let Some((i, genes, _)) = batch.get(next.fetch_add(1, Ordering::Relaxed) as usize) else {
                            return;
                        };
                        let swarm = genes.draw(base, &target.ftl);
                        let ran = run(&swarm);
                        done.lock().expect("no worker panics outside catch").insert(*i, (swarm, ran));
                    }
                });
            }
        });
        let mut done = done.into_inner().expect("workers ended");
        for (i, genes, origin) in batch {
            let Some((swarm, (outcome, run_coverage, at))) = done.remove(&i) else { continue };
            let new_pairs = guide::novel_pairs(&covered, &run_coverage);
            corpus.admit(i, origin, genes, new_pairs, &run_coverage);
            covered.merge(run_coverage);
            results.insert(i, (swarm, outcome, at));
        }
        first = last;
    }
    (results, covered, corpus.report)
}

/// The arguments that repeat run `swarm` (after `nandlab hunt` and the
/// device options): its seed, its length if cut, the features switched off.
pub fn reproduce_args(swarm: &Swarm, cut: bool) -> String {
    let mut args = format!("--seed {}", swarm.seed);
    if cut {
        args += &format!(" --requests {}", swarm.requests);
    }
    if !swarm.splice.is_empty() {
        let items: Vec<String> = swarm.splice.iter().map(|(k, v)| format!("{k}={v}")).collect();
        args += &format!(" --splice {}", items.join(","));
    }
    if !swarm.without.is_empty() {
        args += &format!(" --without {}", swarm.without.iter().cloned().collect::<Vec<_>>().join(","));
    }
    args
}

#[cfg(test)]
mod tests;
