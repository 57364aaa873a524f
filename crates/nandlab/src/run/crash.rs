//! `crash`: power-loss testing — cut the power at chosen flash operations,
//! mount a fresh FTL on what survived, check the recovered disk against the
//! guarantee the FTL claims, run more workload on it, and report.
//!
//! # How a campaign runs
//!
//! One *base run* executes the workload on a drive with the NAND's undo
//! journal on (see [`crate::nand`]'s journal). Crash points are flash
//! operation indices, each cut *between* operations (before the operation
//! takes effect) or *during* one (the operation is torn: see
//! [`crate::nand::power`]). After each host request, every crash point that
//! fell inside it is tested without copying the drive:
//!
//! 1. the journal rolls the NAND back to the cut operation and tears it;
//!    the device DRAM (the FTL's write cache) is lost;
//! 2. with `nested`, a fresh FTL mounts once to learn which operations its
//!    recovery performs, the drive is rolled back, the power is cut again
//!    inside that recovery (see *Nested cuts*), and recovery starts over —
//!    so recovery must itself survive a cut. What both first recoveries
//!    report (rule breaks, a failed uncut mount) counts;
//! 3. a fresh FTL instance mounts (nothing of the old one survives);
//! 4. every logical sector is read back and checked by the
//!    [`CrashChecker`](crate::oracle::crash_checker) for the guarantee;
//! 5. `post_requests` more requests of the workload run on the recovered
//!    drive, their reads checked against what recovery showed;
//! 6. everything since step 1 is rolled back and the base run carries on.
//!
//! Points run in parallel: each thread owns a drive, runs the base run up to
//! its share of the points and tests them. A run is a function of the
//! configuration, workload, options and seed, whatever the thread count.
//!
//! # Nested cuts
//!
//! Only a recovery's *state-changing* operations (programs, copybacks,
//! erases) can make a cut during recovery matter: a cut anywhere among the
//! reads between two of them leaves the same flash as a cut just before
//! the next one, and a read torn changes nothing. So with `n` state-changing
//! operations there are `2n + 1` distinct nested cuts ([`NestedCut`]): before
//! or during the `k`-th of them (`k < n`), or after the last (the recovery
//! completes, then the power fails again before the host sends anything).
//! Each point draws one uniformly from its own seed, unless
//! [`CrashOptions::nested_at`] fixes it — what a reproducer and the shrinker
//! do, so a finding that needs a particular recovery cut keeps it.
//!
//! # Power-loss protection (`write_cache_lost` off)
//!
//! A drive with power-loss protection (capacitors, as enterprise SSDs have)
//! notices the power failing, finishes what it is doing and writes its
//! volatile cache to flash before the power is gone. `crash` models it so:
//! the FTL finishes the host request in flight (its memory must match the
//! flash, so no cut can stop it halfway: `during` and `between` points both
//! fall at the end of their request, and nothing is torn by them), then the
//! old instance runs [`Ftl::emergency_flush`], whose operations are not cut
//! (the capacitors last long enough). The nested cut still falls in the
//! recovery that follows. The checker then requires every write and trim
//! acknowledged before the cut to have survived (only the request in
//! flight, not acknowledged, may be missing), on top of the guarantee. An
//! FTL's memory cannot be rolled back, so each request holding such points
//! is replayed on a fresh drive from the start of the workload: these
//! campaigns cost a base run per request tested.
//!
//! # Shrinking
//!
//! A finding is shrunk: earlier crash points (fewer host requests before
//! them) are tried, with the phases the campaign allows and the finding's
//! nested cut, until the earliest one failing the same way (same rule,
//! same stage of the test: see [`Stage`]) is found. Each round tries
//! evenly spread points below the best failing point so far; once what
//! remains fits [`SHRINK_EXHAUSTIVE_POINTS`], every point of it is tried.
//! When the whole range from the first host request fits, the shrunk point
//! is the earliest failing one; otherwise [`Shrunk::clean_from_op`] says
//! from which operation on every point before it was tried and did not fail
//! that way. [`CrashReport::shrunk`] names it with the host requests it
//! needs, and the CLI prints the command that reproduces it alone.

mod point;
mod shrink;

pub use shrink::SHRINK_EXHAUSTIVE_POINTS;

use super::{registry_factory, FtlFactory, RunError, Session};
use crate::config::Config;
use crate::flash::PowerCut;
use crate::ftl::{Ftl, FtlEnv, Guarantee};
use crate::nand::power::PowerCutEffects;
use crate::oracle::crash_checker::{CrashHistory, PendingOp};
use crate::report::{self, resources};
use crate::seed::{derive_seed, rng_for};
use crate::violation::{Rule, Violation};
use crate::workload::synthetic::{SyntheticSpec, SyntheticWorkload};
use crate::workload::{HostOp, HostRequest, Workload};
use rand::RngExt;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// An FTL factory threads can share (each thread builds its own instances).
pub type SharedFactory = Arc<dyn Fn(&FtlEnv) -> Result<Box<dyn Ftl>, String> + Send + Sync>;

/// A shared factory for a registered FTL.
pub fn shared_registry_factory(config: &Config) -> SharedFactory {
    let (name, options) = (config.ftl_name.clone(), config.ftl_options.clone());
    Arc::new(move |env| registry_factory(&name, &options)(env))
}

/// Whether crash points cut between operations, during them, or both.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Between,
    During,
    /// Random points draw one of the two each; `Every` tests both at each
    /// selected operation; the shrinker tries both.
    Both,
}

impl Phase {
    /// The `during` values this phase allows, `between` first.
    pub fn cuts(self) -> &'static [bool] {
        match self {
            Phase::Between => &[false],
            Phase::During => &[true],
            Phase::Both => &[false, true],
        }
    }
}

/// Which crash points a campaign tests. Offsets count flash operations
/// from the start of the window (the end of the warm-up).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PointSelection {
    /// `count` points drawn uniformly in the window (of `span` operations,
    /// or to the end of the workload: then a first pass counts them).
    Random { count: u64, span: Option<u64> },
    /// Every `every`-th operation of the window (`every = 1`: all), each
    /// in every phase the campaign allows.
    Every { every: u64, span: Option<u64> },
    /// Exactly these cuts (absolute operation indices; no warm-up). Each
    /// must fall in an operation of a host request: a counting pass checks.
    At(Vec<PowerCut>),
}

/// Where the second power cut falls in the first recovery (see the module
/// docs, *Nested cuts*).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NestedCut {
    /// Which of the recovery's state-changing operations (programs,
    /// copybacks, erases), from 0; their count (or more) means after the
    /// last one.
    pub nth: u32,
    /// During that operation (tearing it) rather than just before it.
    pub during: bool,
}

/// Options of a crash campaign.
#[derive(Clone, Debug)]
pub struct CrashOptions {
    pub seed: u64,
    /// The guarantee to check (default: the one the FTL declares).
    pub guarantee: Option<Guarantee>,
    pub points: PointSelection,
    pub phase: Phase,
    pub effects: PowerCutEffects,
    /// Cut the power once more during recovery, then recover again.
    pub nested: bool,
    /// Every point's nested cut (default: drawn per point).
    pub nested_at: Option<NestedCut>,
    /// Requests of the workload run after each recovery.
    pub post_requests: u64,
    /// Threads (0: all cores).
    pub threads: usize,
    /// Bytes the host writes before the window of crash points opens.
    pub warmup_write_bytes: u64,
    /// Stop the workload after this many requests.
    pub max_requests: Option<u64>,
    /// Shrink the first finding to the earliest failing point.
    pub shrink: bool,
    /// Oracle version grain in sectors (default: the workload's alignment).
    pub oracle_unit_sectors: Option<u32>,
    /// Sectors read per request when verifying the recovered disk.
    pub verify_chunk_sectors: u32,
    /// Stop at the next request boundary of the base runs when set (see
    /// [`StopFlag`](super::StopFlag)); the points not reached are untested.
    pub stop: super::StopFlag,
}

impl Default for CrashOptions {
    fn default() -> Self {
        CrashOptions {
            seed: 0,
            guarantee: None,
            points: PointSelection::Random { count: 100, span: None },
            phase: Phase::Both,
            effects: PowerCutEffects::default(),
            nested: true,
            nested_at: None,
            post_requests: 64,
            threads: 0,
            warmup_write_bytes: 0,
            max_requests: None,
            shrink: true,
            oracle_unit_sectors: None,
            verify_chunk_sectors: 128,
            stop: super::StopFlag::default(),
        }
    }
}

/// The step of a crash test where a point's first finding appeared.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Power-loss protection's emergency flush by the old FTL instance.
    EmergencyFlush,
    /// The first recovery (uncut; with `nested`, the one then cut).
    Recovery,
    /// The recovery after the nested cut.
    RecoveryAfterNestedCut,
    /// Reading back the recovered disk (the crash guarantee).
    Verify,
    /// The workload run on the recovered drive.
    PostWorkload,
}

/// What one crash point found.
#[derive(Clone, Debug, Serialize)]
pub struct PointResult {
    pub cut: PowerCut,
    /// The host request in flight at the cut.
    pub request: u64,
    /// Whether the cut operation changed flash (a read cut "during" does not).
    pub tore: bool,
    pub torn_pages: u32,
    pub torn_blocks: u32,
    /// The nested cut, relative to the first recovery (when nested).
    pub nested_cut: Option<NestedCut>,
    /// The same cut as an operation index.
    pub recovery_cut: Option<PowerCut>,
    /// State-changing operations of the first recovery (when nested).
    pub recovery_state_changes: u32,
    /// Pages and blocks the nested cut tore.
    pub recovery_torn_pages: u32,
    pub recovery_torn_blocks: u32,
    /// Flash operations the final recovery took.
    pub recovery_ops: u64,
    pub passed: bool,
    /// Where the first finding appeared.
    pub stage: Option<Stage>,
    /// Violations by rule.
    pub rules: BTreeMap<Rule, u64>,
    /// The first violation, in full.
    pub first: Option<Violation>,
}

impl PointResult {
    /// What the point failed by: the first finding's rule and stage.
    pub fn signature(&self) -> Option<(Rule, Stage)> {
        Some((self.first.as_ref()?.rule, self.stage?))
    }
}

/// The shrunk reproducer of a finding.
#[derive(Clone, Debug, Serialize)]
pub struct Shrunk {
    pub cut: PowerCut,
    /// The nested cut it was found with (reproduce with the same).
    pub nested_cut: Option<NestedCut>,
    /// Host requests before the one in flight at the cut.
    pub requests_before: u64,
    pub rule: Rule,
    pub stage: Stage,
    pub message: String,
    /// Crash points tried while shrinking, and in how many rounds.
    pub tried: u64,
    pub rounds: u32,
    /// Every point from this operation up to the shrunk one was tried and
    /// did not fail the same way (the first request's operation: the
    /// shrunk point is the earliest failing one).
    pub clean_from_op: Option<u64>,
    /// The command that reproduces it (set by the CLI).
    pub command: Option<String>,
}

/// The report of a crash campaign.
#[derive(Clone, Debug, Serialize)]
pub struct CrashReport {
    pub schema_version: u32,
    pub mode: &'static str,
    pub seed: u64,
    pub preset: String,
    pub ftl: String,
    pub guarantee: Guarantee,
    pub workload: String,
    pub effects: PowerCutEffects,
    pub nested: bool,
    pub nested_at: Option<NestedCut>,
    pub post_requests: u64,
    /// Operation index of the first host request (operations before it format the drive).
    pub first_request_op: u64,
    /// Operation index where the window of crash points starts.
    pub window_start_op: u64,
    pub points_planned: u64,
    pub points_tested: u64,
    pub passed: u64,
    pub failed: u64,
    /// Failed points counted by each rule they broke.
    pub failed_by_kind: BTreeMap<Rule, u64>,
    /// Random or every-k-th points beyond the end of the workload.
    pub not_reached: u64,
    pub points: Vec<PointResult>,
    pub shrunk: Option<Shrunk>,
    /// A failure of the base run itself (the FTL failed without a power cut).
    pub base_failure: Option<String>,
    /// Stopped by a signal (SIGINT, SIGTERM): the points not reached were
    /// not tested and nothing was shrunk. Absent from the JSON when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    pub threads: usize,
    /// Times, rates and memory (in the JSON beside the other fields).
    #[serde(flatten)]
    pub measured: CrashMeasurements,
}

/// What a campaign measured (see [`CrashReport::summary`] for what each
/// covers): the fields a determinism check leaves out.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CrashMeasurements {
    /// The whole command: campaign and shrinking.
    pub wall_seconds: f64,
    pub cpu_seconds: f64,
    /// The campaign: counting pass, every thread's base run (warm-up
    /// included) and testing the points; shrinking excluded.
    pub run_wall_seconds: f64,
    pub run_cpu_seconds: f64,
    /// Testing points only: CPU summed over threads, wall of the slowest thread.
    pub test_cpu_seconds: f64,
    pub test_wall_seconds: f64,
    pub shrink_wall_seconds: f64,
    pub shrink_cpu_seconds: f64,
    /// Points tested per second of the campaign (whole run).
    pub points_per_run_wall_second: Option<f64>,
    pub points_per_run_cpu_second: Option<f64>,
    /// Points tested per second spent testing them (testing only).
    pub points_per_test_wall_second: Option<f64>,
    pub points_per_test_cpu_second: Option<f64>,
    pub peak_rss_bytes: u64,
}

impl CrashReport {
    /// Whether the campaign found something (exit code 1).
    pub fn has_findings(&self) -> bool {
        self.failed > 0 || self.base_failure.is_some()
    }

    /// A copy without wall-clock and memory fields (determinism checks).
    pub fn without_measurements(&self) -> CrashReport {
        CrashReport { measured: CrashMeasurements::default(), threads: 0, ..self.clone() }
    }

    /// The readable summary.
    pub fn summary(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "nandlab crash — preset {} — FTL {} — guarantee {:?} — seed {}",
            self.preset, self.ftl, self.guarantee, self.seed
        );
        let _ = writeln!(s, "  workload   {}", self.workload);
        let nested = match (self.nested, self.nested_at) {
            (false, _) => "no".to_string(),
            (true, None) => "yes (drawn per point)".to_string(),
            (true, Some(n)) => format!("yes, at {}", nested_name(n)),
        };
        let _ = writeln!(
            s,
            "  power cut  {}; nested cut during recovery: {nested}; {} requests after each recovery",
            self.effects.describe(),
            self.post_requests
        );
        if !self.effects.write_cache_lost {
            let _ = writeln!(
                s,
                "             power-loss protection: each cut falls at the end of its request, the old FTL \
                 flushes its cache, every acknowledged write must survive"
            );
        }
        let _ = writeln!(
            s,
            "  points     {} planned from op {} (first request at op {}), {} tested, {} passed, {} failed{}",
            self.points_planned,
            self.window_start_op,
            self.first_request_op,
            self.points_tested,
            self.passed,
            self.failed,
            match (self.not_reached, self.interrupted) {
                (0, _) => String::new(),
                (n, false) => format!(", {n} beyond the workload"),
                (n, true) => format!(", {n} not reached (interrupted)"),
            }
        );
        let torn = self.points.iter().filter(|p| p.tore).count();
        let _ = writeln!(s, "  cuts       {torn} tore a program or erase");
        if !self.failed_by_kind.is_empty() {
            let kinds: Vec<String> = self.failed_by_kind.iter().map(|(r, n)| format!("{r}: {n}")).collect();
            let _ = writeln!(s, "  failed by  {}", kinds.join(", "));
        }
        self.write_speed(&mut s);
        if let Some(b) = &self.base_failure {
            let _ = writeln!(s, "  base run   FAILED: {b}");
        }
        if self.interrupted {
            let _ = writeln!(s, "{}", crate::report::INTERRUPTED_LINE);
        }
        if let Some(first) = self.points.iter().find(|p| !p.passed) {
            if let Some(v) = &first.first {
                let _ = writeln!(
                    s,
                    "  first      cut {} op {} (request {}{}): {v}",
                    phase_name(first.cut.during),
                    first.cut.op_index,
                    first.request,
                    first.nested_cut.map_or(String::new(), |n| format!(
                        ", recovery cut {}",
                        describe_nested(n, first.recovery_state_changes)
                    ))
                );
            }
        }
        if let Some(sh) = &self.shrunk {
            let clean = match sh.clean_from_op {
                Some(op) if op <= self.first_request_op => "the earliest failing point".to_string(),
                Some(op) => format!("no point from op {op} up to it fails the same way"),
                None => "a local minimum of the points tried".to_string(),
            };
            let _ = writeln!(
                s,
                "  shrunk     {} ({:?}) at op {} {}{} ({} requests before it; {}; {} points tried in {} rounds): {}",
                sh.rule,
                sh.stage,
                sh.cut.op_index,
                phase_name(sh.cut.during),
                sh.nested_cut.map_or(String::new(), |n| format!(", --nested-at {}", nested_name(n))),
                sh.requests_before,
                clean,
                sh.tried,
                sh.rounds,
                sh.message
            );
        }
        let verdict = if self.has_findings() { "FAIL" } else { "PASS — every crash point recovered legally" };
        let _ = writeln!(s, "  result     {verdict}");
        s
    }

    fn write_speed(&self, s: &mut String) {
        let rate_text = |v: Option<f64>| v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.2}"));
        use std::fmt::Write as _;
        let _ = writeln!(
            s,
            "  speed      whole run (counting pass, base runs with warm-up, testing; {} threads): {:.2} s wall, \
             {:.2} s CPU: {} points/s, {} points per CPU-second",
            self.threads,
            self.measured.run_wall_seconds,
            self.measured.run_cpu_seconds,
            rate_text(self.measured.points_per_run_wall_second),
            rate_text(self.measured.points_per_run_cpu_second)
        );
        let _ = writeln!(
            s,
            "             testing points only: {:.2} s wall (slowest thread), {:.2} s CPU: {} points/s, \
             {} points per CPU-second",
            self.measured.test_wall_seconds,
            self.measured.test_cpu_seconds,
            rate_text(self.measured.points_per_test_wall_second),
            rate_text(self.measured.points_per_test_cpu_second)
        );
        if self.shrunk.is_some() {
            let _ = writeln!(
                s,
                "             shrinking: {:.2} s wall, {:.2} s CPU (not in the rates above)",
                self.measured.shrink_wall_seconds, self.measured.shrink_cpu_seconds
            );
        }
    }
}

fn phase_name(during: bool) -> &'static str {
    if during {
        "during"
    } else {
        "between"
    }
}

/// `k:during` or `k` (as `--nested-at` takes it), for messages.
pub fn nested_name(n: NestedCut) -> String {
    if n.during {
        format!("{}:during", n.nth)
    } else {
        n.nth.to_string()
    }
}

/// A nested cut in words, given the recovery's state-changing operations.
pub fn describe_nested(n: NestedCut, state_changes: u32) -> String {
    if n.nth >= state_changes {
        format!("after the last of the recovery's {state_changes} state changes")
    } else {
        let when = if n.during { "during" } else { "before" };
        format!("{when} state change {} of the recovery's {state_changes}", n.nth)
    }
}

/// Everything a thread needs to run its share (shared read-only).
struct Plan<'a> {
    config: &'a Config,
    factory: SharedFactory,
    spec: &'a SyntheticSpec,
    opts: &'a CrashOptions,
    guarantee: Guarantee,
    unit: u32,
}

/// A point to test: an absolute cut, or an offset from the window start.
#[derive(Copy, Clone, Debug)]
struct Planned {
    offset: u64,
    during: bool,
}

struct ThreadOutcome {
    results: Vec<PointResult>,
    not_reached: u64,
    base_failure: Option<String>,
    window_start: u64,
    first_request_op: Option<u64>,
    test_cpu: f64,
    test_wall: f64,
    interrupted: bool,
}

/// Run a crash campaign of the configured FTL.
pub fn run(config: &Config, spec: &SyntheticSpec, opts: &CrashOptions) -> Result<CrashReport, RunError> {
    run_with_factory(config, shared_registry_factory(config), spec, opts)
}

/// Run a crash campaign of the FTL `factory` builds (e.g. a test variant).
pub fn run_with_factory(
    config: &Config,
    factory: SharedFactory,
    spec: &SyntheticSpec,
    opts: &CrashOptions,
) -> Result<CrashReport, RunError> {
    let started = Instant::now();
    let cpu_start = resources::cpu_seconds();
    let workload = new_workload(config, spec, opts.seed)?;
    let unit = opts.oracle_unit_sectors.unwrap_or_else(|| workload.alignment_sectors());
    let env_probe = FtlEnv {
        geometry: config.geometry.clone(),
        logical_sectors: config.logical_sectors,
        dram_budget_bytes: config.dram_budget_bytes,
        seed: derive_seed(opts.seed, "ftl"),
    };
    let info = factory(&env_probe).map_err(|e| RunError::Input(config.locate_error(&e)))?.info();
    let guarantee = opts.guarantee.unwrap_or(info.guarantee);
    let plan = Plan { config, factory: factory.clone(), spec, opts, guarantee, unit };
    // A stop during the counting pass leaves a partial count: nothing is
    // planned from it (nor refused for it), and the report says interrupted.
    let planned = match plan_points(&plan) {
        _ if opts.stop.is_set() => Vec::new(),
        planned => planned?,
    };
    let threads = thread_count(opts.threads, planned.len());
    let outcome = run_points(&plan, &planned, threads);
    let mut report = assemble(&plan, info.name, &workload.describe(), planned.len(), outcome, threads);
    // Also when the stop came during the counting pass (no point planned yet).
    report.interrupted |= opts.stop.is_set();
    report.measured.run_wall_seconds = started.elapsed().as_secs_f64();
    report.measured.run_cpu_seconds = resources::cpu_seconds() - cpu_start;
    if opts.shrink && !report.interrupted {
        let (shrink_started, shrink_cpu) = (Instant::now(), resources::cpu_seconds());
        report.shrunk = shrink::shrink(&plan, &report, threads);
        report.measured.shrink_wall_seconds = shrink_started.elapsed().as_secs_f64();
        report.measured.shrink_cpu_seconds = resources::cpu_seconds() - shrink_cpu;
    }
    report.measured.wall_seconds = started.elapsed().as_secs_f64();
    report.measured.cpu_seconds = resources::cpu_seconds() - cpu_start;
    // No rate when the time is too short to measure (null in JSON, n/a in text).
    let rate = |seconds: f64| crate::report::perf::per_cpu_second(report.points_tested as f64, seconds);
    report.measured.points_per_run_wall_second = rate(report.measured.run_wall_seconds);
    report.measured.points_per_run_cpu_second = rate(report.measured.run_cpu_seconds);
    report.measured.points_per_test_wall_second = rate(report.measured.test_wall_seconds);
    report.measured.points_per_test_cpu_second = rate(report.measured.test_cpu_seconds);
    report.measured.peak_rss_bytes = resources::peak_rss_bytes();
    Ok(report)
}

fn new_workload(config: &Config, spec: &SyntheticSpec, seed: u64) -> Result<SyntheticWorkload, RunError> {
    SyntheticWorkload::new(spec, config.logical_bytes(), config.geometry.sector_size_bytes(), seed)
        .map_err(|e| RunError::Input(config.locate_error(&e)))
}

fn thread_count(asked: usize, points: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let t = if asked == 0 { cores } else { asked };
    t.clamp(1, points.max(1))
}

/// The most crash points one campaign plans: the plan is held in memory
/// and each point costs a recovery and a read of the whole disk, so more
/// is never a campaign that ends; it is a typo (or a span meant for
/// another workload).
pub const MAX_CRASH_POINTS: u64 = 1_000_000;

/// The crash points, sorted, as offsets from the window start.
fn plan_points(plan: &Plan) -> Result<Vec<Planned>, RunError> {
    let opts = plan.opts;
    let mut rng = rng_for(opts.seed, "crash.points");
    let mut points = match &opts.points {
        PointSelection::At(cuts) => {
            validate_cuts(plan, cuts)?;
            cuts.iter().map(|c| Planned { offset: c.op_index, during: c.during }).collect()
        }
        PointSelection::Every { every, span } => {
            let every = (*every).max(1);
            let phases = opts.phase.cuts();
            let planned = |span: u64| span.div_ceil(every).saturating_mul(phases.len() as u64);
            let span = match span {
                Some(s) => {
                    if planned(*s) > MAX_CRASH_POINTS {
                        return Err(too_many_every(every, *s, planned(*s), "--crash-span"));
                    }
                    check_span_reaches(plan, *s, "--crash-every")?;
                    *s
                }
                None => {
                    let window = count_ops(plan)?.window();
                    if window == 0 {
                        return Err(RunError::Input(
                            "--crash-every: the workload has no flash operations to cut after the warm-up, so \
                             the campaign would test nothing (use a shorter --warmup or a longer workload)"
                                .into(),
                        ));
                    }
                    if planned(window) > MAX_CRASH_POINTS {
                        return Err(too_many_every(every, window, planned(window), "the window"));
                    }
                    window
                }
            };
            (0..span.div_ceil(every))
                .flat_map(|i| phases.iter().map(move |&during| Planned { offset: i * every, during }))
                .collect()
        }
        PointSelection::Random { count, span } => {
            if *count > MAX_CRASH_POINTS {
                return Err(RunError::Input(format!(
                    "--crash-points {count}: at most {MAX_CRASH_POINTS} crash points per campaign"
                )));
            }
            let span = match span {
                Some(s) => *s,
                None => count_ops(plan)?.window(),
            };
            if span == 0 {
                return Err(RunError::Input("--crash-points: the workload has no flash operations to cut".into()));
            }
            let mut offsets: Vec<u64> = (0..*count).map(|_| rng.random_range(0..span)).collect();
            offsets.sort_unstable();
            offsets.dedup();
            if span_given(&opts.points) {
                check_span_reaches_points(plan, span, offsets.first().copied(), "--crash-points")?;
            }
            let phase = |rng: &mut crate::seed::Rng| match opts.phase {
                Phase::Between => false,
                Phase::During => true,
                Phase::Both => rng.random::<bool>(),
            };
            offsets.into_iter().map(|offset| Planned { offset, during: phase(&mut rng) }).collect::<Vec<_>>()
        }
    };
    points.sort_by_key(|p| (p.offset, p.during));
    points.dedup_by_key(|p| (p.offset, p.during));
    Ok(points)
}

fn span_given(points: &PointSelection) -> bool {
    matches!(points, PointSelection::Random { span: Some(_), .. } | PointSelection::Every { span: Some(_), .. })
}

fn too_many_every(every: u64, span: u64, planned: u64, what: &str) -> RunError {
    RunError::Input(format!(
        "--crash-every {every}: {what} of {span} flash operations makes {planned} crash points, \
         at most {MAX_CRASH_POINTS} per campaign: use a larger --crash-every or a shorter --crash-span"
    ))
}

/// With `--crash-every` and a given span, the first point is at the window start.
fn check_span_reaches(plan: &Plan, span: u64, option: &str) -> Result<(), RunError> {
    check_span_reaches_points(plan, span, (span > 0).then_some(0), option)
}

/// A window given by `--crash-span` is not counted by a first pass, so a
/// span longer than the workload can put every point past its end: a
/// campaign that would test nothing is refused before it runs (as a
/// `--crash-at` past the end is). `first`: the earliest planned offset.
fn check_span_reaches_points(plan: &Plan, span: u64, first: Option<u64>, option: &str) -> Result<(), RunError> {
    let window = count_ops(plan)?.window();
    match first {
        Some(f) if f < window => Ok(()),
        _ => Err(RunError::Input(format!(
            "--crash-span {span} with {option}: no crash point falls in the workload, whose window \
             (after the warm-up) has {window} flash operations, so the campaign would test nothing; \
             use a --crash-span of at most {window}, or leave it out to cover the whole window"
        ))),
    }
}

/// `--crash-at` cuts must fall in an operation of a host request: not in
/// the format before the first one, not past the end of the workload.
fn validate_cuts(plan: &Plan, cuts: &[PowerCut]) -> Result<(), RunError> {
    let counts = count_ops(plan)?;
    for c in cuts {
        if c.op_index < counts.first_request || c.op_index >= counts.end {
            let which = if c.op_index < counts.first_request {
                format!("operations 0..{} format the drive, before the first host request", counts.first_request)
            } else {
                format!("the workload ends after operation {}", counts.end.saturating_sub(1))
            };
            return Err(RunError::Input(format!(
                "--crash-at {}:{}: not an operation of a host request ({which}); valid: {}..={}",
                c.op_index,
                phase_name(c.during),
                counts.first_request,
                counts.end.saturating_sub(1)
            )));
        }
    }
    Ok(())
}

/// Where the workload's flash operations are (a counting pass).
struct OpCounts {
    /// The first host request's first operation (format before it).
    first_request: u64,
    /// The window's first operation (the end of the warm-up).
    window_start: u64,
    /// One past the last operation.
    end: u64,
}

impl OpCounts {
    fn window(&self) -> u64 {
        self.end.saturating_sub(self.window_start)
    }
}

/// Run the workload once, without testing anything, to count its operations.
fn count_ops(plan: &Plan) -> Result<OpCounts, RunError> {
    let mut session = new_session(plan)?;
    let mut workload = new_workload(plan.config, plan.spec, plan.opts.seed)?;
    let mut warm = Warmup::new(plan.opts.warmup_write_bytes, plan.config);
    let first_request = session.drive().flash().op_index();
    let mut requests = 0;
    while let Some(req) = next_request(&mut workload)? {
        if plan.opts.max_requests.is_some_and(|m| requests >= m) || plan.opts.stop.is_set() {
            break;
        }
        warm.before(&req, session.drive().flash().op_index());
        session.submit(&req)?;
        requests += 1;
        if session.ftl_failed() {
            break;
        }
    }
    let end = session.drive().flash().op_index();
    Ok(OpCounts { first_request, window_start: warm.start.unwrap_or(end), end })
}

fn next_request(w: &mut SyntheticWorkload) -> Result<Option<HostRequest>, RunError> {
    w.next_request().map_err(|e| RunError::Workload(e.to_string()))
}

/// Tracks the warm-up: the window opens at the first request after the
/// host wrote the warm-up bytes.
struct Warmup {
    left: u64,
    start: Option<u64>,
    sector_bytes: u64,
}

impl Warmup {
    fn new(bytes: u64, config: &Config) -> Warmup {
        Warmup { left: bytes, start: None, sector_bytes: u64::from(config.geometry.sector_size_bytes()) }
    }
    fn before(&mut self, req: &HostRequest, op_index: u64) {
        if self.start.is_none() && self.left == 0 {
            self.start = Some(op_index);
        }
        if req.op == HostOp::Write {
            self.left = self.left.saturating_sub(u64::from(req.sectors) * self.sector_bytes);
        }
    }
}

fn new_session(plan: &Plan) -> Result<Session, RunError> {
    let f = plan.factory.clone();
    let factory: FtlFactory = Box::new(move |env| f(env));
    let mut session = Session::with_factory(plan.config, factory, plan.opts.seed, plan.unit, 20)?;
    session.drive_mut().set_power_cut_effects(plan.opts.effects);
    Ok(session)
}

/// Split the points over threads (contiguous shares) and run them.
fn run_points(plan: &Plan, points: &[Planned], threads: usize) -> Vec<ThreadOutcome> {
    let share = points.len().div_ceil(threads).max(1);
    let chunks: Vec<&[Planned]> = points.chunks(share).collect();
    if chunks.len() <= 1 {
        return vec![run_thread(plan, chunks.first().copied().unwrap_or(&[]))];
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks.iter().map(|c| scope.spawn(move || run_thread(plan, c))).collect();
        handles.into_iter().map(|h| h.join().expect("crash thread panicked")).collect()
    })
}

/// The base run of one thread, testing its points as it passes them.
fn run_thread(plan: &Plan, points: &[Planned]) -> ThreadOutcome {
    let mut out = ThreadOutcome {
        results: Vec::new(),
        not_reached: 0,
        base_failure: None,
        window_start: 0,
        first_request_op: None,
        test_cpu: 0.0,
        test_wall: 0.0,
        interrupted: false,
    };
    let absolute = matches!(plan.opts.points, PointSelection::At(_));
    let (mut session, mut workload) = match (new_session(plan), new_workload(plan.config, plan.spec, plan.opts.seed)) {
        (Ok(s), Ok(w)) => (s, w),
        (Err(e), _) | (_, Err(e)) => {
            out.base_failure = Some(e.to_string());
            return out;
        }
    };
    out.first_request_op = Some(session.drive().flash().op_index());
    session.drive_mut().start_journal();
    let mut history = CrashHistory::new(plan.config.logical_sectors, plan.unit, plan.guarantee);
    let mut warm = Warmup::new(if absolute { 0 } else { plan.opts.warmup_write_bytes }, plan.config);
    let mut next = 0;
    let mut requests = 0u64;
    while next < points.len() {
        if plan.opts.stop.is_set() {
            out.interrupted = true;
            break;
        }
        let req = match next_request(&mut workload) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                out.base_failure = Some(e.to_string());
                break;
            }
        };
        if plan.opts.max_requests.is_some_and(|m| requests >= m) {
            break;
        }
        requests += 1;
        let ops_before = session.drive().flash().op_index();
        warm.before(&req, ops_before);
        let start = if absolute { Some(0) } else { warm.start };
        let write_id = session.host().next_write_id();
        let request_id = session.requests();
        if let Err(e) = session.submit(&req) {
            out.base_failure = Some(e.to_string());
            break;
        }
        let ops_after = session.drive().flash().op_index();
        let in_flight = PendingOp::of(&req, request_id, write_id, write_id.saturating_sub(1));
        if let Some(start) = start {
            out.window_start = start;
            let mut cuts = Vec::new();
            while next < points.len() && start + points[next].offset < ops_after {
                let cut = PowerCut { op_index: start + points[next].offset, during: points[next].during };
                if cut.op_index >= ops_before {
                    cuts.push(cut);
                }
                next += 1;
            }
            if !cuts.is_empty() {
                let (cpu, wall) = (thread_cpu_seconds(), Instant::now());
                let request = point::Request { id: request_id, in_flight, history: &history };
                out.results.extend(point::test_request(plan, &mut session, &request, &cuts));
                out.test_cpu += thread_cpu_seconds() - cpu;
                out.test_wall += wall.elapsed().as_secs_f64();
            }
        }
        if session.ftl_failed() {
            let v =
                session.drive().flash().log().first_error().map_or_else(|| "the FTL failed".into(), |v| v.to_string());
            out.base_failure = Some(format!("the FTL failed in the base run (no power cut): {v}"));
            break;
        }
        let flush = req.op == HostOp::Flush;
        history.record(in_flight, flush, session.host().last_durability());
        session.drive_mut().clear_journal();
    }
    out.not_reached += (points.len() - next) as u64;
    out
}

/// Thread CPU time in seconds (Linux; 0 elsewhere).
fn thread_cpu_seconds() -> f64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes the timespec it is given and nothing else.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
            return ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9;
        }
    }
    0.0
}

fn assemble(
    plan: &Plan,
    ftl: &str,
    workload: &str,
    planned: usize,
    outcomes: Vec<ThreadOutcome>,
    threads: usize,
) -> CrashReport {
    let mut points = Vec::new();
    let (mut not_reached, mut test_cpu, mut base_failure, mut window_start) = (0, 0.0, None, 0);
    let mut first_request_op = None;
    let mut test_wall: f64 = 0.0;
    let mut interrupted = false;
    for o in outcomes {
        interrupted |= o.interrupted;
        points.extend(o.results);
        not_reached += o.not_reached;
        test_cpu += o.test_cpu;
        test_wall = test_wall.max(o.test_wall);
        base_failure = base_failure.or(o.base_failure);
        window_start = window_start.max(o.window_start);
        first_request_op = first_request_op.or(o.first_request_op);
    }
    points.sort_by_key(|p| (p.cut.op_index, p.cut.during));
    let mut failed_by_kind = BTreeMap::new();
    for p in points.iter().filter(|p| !p.passed) {
        for r in p.rules.keys() {
            *failed_by_kind.entry(*r).or_insert(0) += 1;
        }
    }
    let failed = points.iter().filter(|p| !p.passed).count() as u64;
    CrashReport {
        schema_version: report::SCHEMA_VERSION,
        mode: "crash",
        seed: plan.opts.seed,
        preset: plan.config.name.clone(),
        ftl: ftl.to_string(),
        guarantee: plan.guarantee,
        workload: workload.to_string(),
        effects: plan.opts.effects,
        nested: plan.opts.nested,
        nested_at: plan.opts.nested_at.filter(|_| plan.opts.nested),
        post_requests: plan.opts.post_requests,
        first_request_op: first_request_op.unwrap_or(0),
        window_start_op: if matches!(plan.opts.points, PointSelection::At(_)) { 0 } else { window_start },
        points_planned: planned as u64,
        points_tested: points.len() as u64,
        passed: points.len() as u64 - failed,
        failed,
        failed_by_kind,
        not_reached,
        points,
        shrunk: None,
        base_failure,
        interrupted,
        threads,
        measured: CrashMeasurements { test_cpu_seconds: test_cpu, test_wall_seconds: test_wall, ..Default::default() },
    }
}
