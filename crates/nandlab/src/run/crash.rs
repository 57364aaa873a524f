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
//! 2. with `nested`, a fresh FTL mounts once to learn how many operations
//!    recovery takes, the drive is rolled back, the power is cut again at a
//!    random operation of that recovery, and recovery starts over — so
//!    recovery must itself survive a cut;
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
//! A finding is shrunk: earlier crash points (with fewer host requests
//! before them) are tried until the earliest one failing with the same rule
//! is found; [`CrashReport::shrunk`] names it, and the CLI prints the
//! command that reproduces it alone.

use super::{registry_factory, FtlFactory, RunError, Session};
use crate::config::Config;
use crate::flash::PowerCut;
use crate::ftl::{Ftl, FtlEnv, FtlError, Guarantee, IoRequest};
use crate::nand::power::PowerCutEffects;
use crate::oracle::crash_checker::{CrashChecker, CrashHistory, PendingOp};
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
    /// Each point draws one of the two.
    Both,
}

/// Which crash points a campaign tests. Offsets count flash operations
/// from the start of the window (the end of the warm-up).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PointSelection {
    /// `count` points drawn uniformly in the window (of `span` operations,
    /// or to the end of the workload: then a first pass counts them).
    Random { count: u64, span: Option<u64> },
    /// Every `every`-th operation boundary of the window (`every = 1`: all).
    Every { every: u64, span: Option<u64> },
    /// Exactly these cuts (absolute operation indices; no warm-up).
    At(Vec<PowerCut>),
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
            post_requests: 64,
            threads: 0,
            warmup_write_bytes: 0,
            max_requests: None,
            shrink: true,
            oracle_unit_sectors: None,
            verify_chunk_sectors: 128,
        }
    }
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
    /// The second cut, during recovery (operation index), when nested.
    pub recovery_cut: Option<PowerCut>,
    /// Flash operations the final recovery took.
    pub recovery_ops: u64,
    pub passed: bool,
    /// Violations by rule.
    pub rules: BTreeMap<Rule, u64>,
    /// The first violation, in full.
    pub first: Option<Violation>,
}

/// The shrunk reproducer of a finding.
#[derive(Clone, Debug, Serialize)]
pub struct Shrunk {
    pub cut: PowerCut,
    /// Host requests before the one in flight at the cut.
    pub requests_before: u64,
    pub rule: Rule,
    pub message: String,
    /// Crash points tried while shrinking.
    pub tried: u64,
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
    pub post_requests: u64,
    /// Operation index where the window of crash points starts.
    pub window_start_op: u64,
    pub points_planned: u64,
    pub points_tested: u64,
    pub passed: u64,
    pub failed: u64,
    /// Failed points counted by each rule they broke.
    pub failed_by_kind: BTreeMap<Rule, u64>,
    /// Points beyond the end of the workload.
    pub not_reached: u64,
    pub points: Vec<PointResult>,
    pub shrunk: Option<Shrunk>,
    /// A failure of the base run itself (the FTL failed without a power cut).
    pub base_failure: Option<String>,
    pub threads: usize,
    // --- measurements ---
    pub wall_seconds: f64,
    pub cpu_seconds: f64,
    /// Thread CPU time spent testing crash points (not in the base run).
    pub test_cpu_seconds: f64,
    /// Wall time the slowest thread spent testing crash points.
    pub test_wall_seconds: f64,
    /// Points per second of the whole campaign's wall time (base runs included).
    pub points_per_wall_second: f64,
    /// Points per second of testing wall time (the base runs excluded).
    pub points_per_test_wall_second: f64,
    pub points_per_cpu_second: f64,
    pub peak_rss_bytes: u64,
}

impl CrashReport {
    /// Whether the campaign found something (exit code 1).
    pub fn has_findings(&self) -> bool {
        self.failed > 0 || self.base_failure.is_some()
    }

    /// A copy without wall-clock and memory fields (determinism checks).
    pub fn without_measurements(&self) -> CrashReport {
        CrashReport {
            wall_seconds: 0.0,
            cpu_seconds: 0.0,
            test_cpu_seconds: 0.0,
            test_wall_seconds: 0.0,
            points_per_wall_second: 0.0,
            points_per_test_wall_second: 0.0,
            points_per_cpu_second: 0.0,
            peak_rss_bytes: 0,
            threads: 0,
            ..self.clone()
        }
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
        let _ = writeln!(
            s,
            "  power cut  {}; nested cut during recovery: {}; {} requests after each recovery",
            self.effects.describe(),
            if self.nested { "yes" } else { "no" },
            self.post_requests
        );
        let _ = writeln!(
            s,
            "  points     {} planned from op {}, {} tested, {} passed, {} failed{}",
            self.points_planned,
            self.window_start_op,
            self.points_tested,
            self.passed,
            self.failed,
            if self.not_reached > 0 { format!(", {} beyond the workload", self.not_reached) } else { String::new() }
        );
        let torn = self.points.iter().filter(|p| p.tore).count();
        let _ = writeln!(s, "  cuts       {torn} tore a program or erase");
        if !self.failed_by_kind.is_empty() {
            let kinds: Vec<String> = self.failed_by_kind.iter().map(|(r, n)| format!("{r}: {n}")).collect();
            let _ = writeln!(s, "  failed by  {}", kinds.join(", "));
        }
        let _ = writeln!(
            s,
            "  speed      {:.2} s wall, {:.2} s CPU on {} threads; testing points: {:.2} s wall, {:.2} s CPU",
            self.wall_seconds, self.cpu_seconds, self.threads, self.test_wall_seconds, self.test_cpu_seconds
        );
        let _ = writeln!(
            s,
            "             {:.2} points/s of campaign wall time, {:.2} points/s of testing wall time, {:.2} points per CPU-second",
            self.points_per_wall_second, self.points_per_test_wall_second, self.points_per_cpu_second
        );
        if let Some(b) = &self.base_failure {
            let _ = writeln!(s, "  base run   FAILED: {b}");
        }
        if let Some(first) = self.points.iter().find(|p| !p.passed) {
            if let Some(v) = &first.first {
                let _ = writeln!(
                    s,
                    "  first      cut {} op {} (request {}): {v}",
                    phase_name(first.cut.during),
                    first.cut.op_index,
                    first.request
                );
            }
        }
        if let Some(sh) = &self.shrunk {
            let _ = writeln!(
                s,
                "  shrunk     {} at op {} {} ({} requests before it; {} points tried): {}",
                sh.rule,
                sh.cut.op_index,
                phase_name(sh.cut.during),
                sh.requests_before,
                sh.tried,
                sh.message
            );
        }
        let verdict = if self.has_findings() { "FAIL" } else { "PASS — every crash point recovered legally" };
        let _ = writeln!(s, "  result     {verdict}");
        s
    }
}

fn phase_name(during: bool) -> &'static str {
    if during {
        "during"
    } else {
        "between"
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
    test_cpu: f64,
    test_wall: f64,
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
    let info = factory(&env_probe).map_err(RunError::Input)?.info();
    let guarantee = opts.guarantee.unwrap_or(info.guarantee);
    let plan = Plan { config, factory: factory.clone(), spec, opts, guarantee, unit };
    let planned = plan_points(&plan)?;
    let threads = thread_count(opts.threads, planned.len());
    let outcome = run_points(&plan, &planned, threads);
    let mut report = assemble(&plan, &info.name, &workload.describe(), planned.len(), outcome, threads);
    if opts.shrink {
        report.shrunk = shrink(&plan, &report, threads);
    }
    report.wall_seconds = started.elapsed().as_secs_f64();
    report.cpu_seconds = resources::cpu_seconds() - cpu_start;
    report.points_per_wall_second = report.points_tested as f64 / report.wall_seconds.max(1e-9);
    report.points_per_cpu_second = report.points_tested as f64 / report.test_cpu_seconds.max(1e-9);
    report.points_per_test_wall_second = report.points_tested as f64 / report.test_wall_seconds.max(1e-9);
    report.peak_rss_bytes = resources::peak_rss_bytes();
    Ok(report)
}

fn new_workload(config: &Config, spec: &SyntheticSpec, seed: u64) -> Result<SyntheticWorkload, RunError> {
    SyntheticWorkload::new(spec, config.logical_bytes(), config.geometry.sector_size_bytes(), seed)
        .map_err(RunError::Input)
}

fn thread_count(asked: usize, points: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let t = if asked == 0 { cores } else { asked };
    t.clamp(1, points.max(1))
}

/// The crash points, sorted, as offsets from the window start.
fn plan_points(plan: &Plan) -> Result<Vec<Planned>, RunError> {
    let opts = plan.opts;
    let mut rng = rng_for(opts.seed, "crash.points");
    let phase = |rng: &mut crate::seed::Rng| match opts.phase {
        Phase::Between => false,
        Phase::During => true,
        Phase::Both => rng.random::<bool>(),
    };
    let mut points = match &opts.points {
        PointSelection::At(cuts) => cuts.iter().map(|c| Planned { offset: c.op_index, during: c.during }).collect(),
        PointSelection::Every { every, span } => {
            let span = match span {
                Some(s) => *s,
                None => count_window(plan)?,
            };
            let every = (*every).max(1);
            (0..span.div_ceil(every)).map(|i| Planned { offset: i * every, during: phase(&mut rng) }).collect()
        }
        PointSelection::Random { count, span } => {
            let span = match span {
                Some(s) => *s,
                None => count_window(plan)?,
            };
            if span == 0 {
                return Err(RunError::Input("--crash-points: the workload has no flash operations to cut".into()));
            }
            let mut offsets: Vec<u64> = (0..*count).map(|_| rng.random_range(0..span)).collect();
            offsets.sort_unstable();
            offsets.dedup();
            offsets.into_iter().map(|offset| Planned { offset, during: phase(&mut rng) }).collect::<Vec<_>>()
        }
    };
    points.sort_by_key(|p| (p.offset, p.during));
    Ok(points)
}

/// Flash operations of the workload after the warm-up (a counting pass).
fn count_window(plan: &Plan) -> Result<u64, RunError> {
    let mut session = new_session(plan)?;
    let mut workload = new_workload(plan.config, plan.spec, plan.opts.seed)?;
    let mut warm = Warmup::new(plan.opts.warmup_write_bytes);
    let mut requests = 0;
    while let Some(req) = next_request(&mut workload)? {
        if plan.opts.max_requests.is_some_and(|m| requests >= m) {
            break;
        }
        warm.before(&req, session.flash.op_index());
        session.submit(&req)?;
        requests += 1;
        if session.ftl_failed() {
            break;
        }
    }
    Ok(session.flash.op_index().saturating_sub(warm.start.unwrap_or(session.flash.op_index())))
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
    fn new(bytes: u64) -> Warmup {
        Warmup { left: bytes, start: None, sector_bytes: 512 }
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
    session.flash.set_power_cut_effects(plan.opts.effects);
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
        test_cpu: 0.0,
        test_wall: 0.0,
    };
    let absolute = matches!(plan.opts.points, PointSelection::At(_));
    let (mut session, mut workload) = match (new_session(plan), new_workload(plan.config, plan.spec, plan.opts.seed)) {
        (Ok(s), Ok(w)) => (s, w),
        (Err(e), _) | (_, Err(e)) => {
            out.base_failure = Some(e.to_string());
            return out;
        }
    };
    session.flash.nand_mut().journal_start();
    let mut history = CrashHistory::new(plan.config.logical_sectors, plan.unit);
    let mut warm = Warmup::new(if absolute { 0 } else { plan.opts.warmup_write_bytes });
    warm.sector_bytes = u64::from(plan.config.geometry.sector_size_bytes());
    let mut next = 0;
    let mut requests = 0u64;
    while next < points.len() {
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
        let ops_before = session.flash.op_index();
        warm.before(&req, ops_before);
        let start = if absolute { Some(0) } else { warm.start };
        let write_id = session.next_write_id;
        let request_id = session.requests();
        if let Err(e) = session.submit(&req) {
            out.base_failure = Some(e.to_string());
            break;
        }
        let ops_after = session.flash.op_index();
        let in_flight = PendingOp::of(&req, request_id, write_id, write_id.saturating_sub(1));
        if let Some(start) = start {
            out.window_start = start;
            while next < points.len() && start + points[next].offset < ops_after {
                let cut = PowerCut { op_index: start + points[next].offset, during: points[next].during };
                if cut.op_index >= ops_before {
                    let (cpu, wall) = (thread_cpu_seconds(), Instant::now());
                    let r = test_point(plan, &mut session, &history, in_flight, request_id, cut);
                    out.test_cpu += thread_cpu_seconds() - cpu;
                    out.test_wall += wall.elapsed().as_secs_f64();
                    out.results.push(r);
                }
                next += 1;
            }
        }
        if session.ftl_failed() {
            let v = session.flash.log().first_error().map_or_else(|| "the FTL failed".into(), |v| v.to_string());
            out.base_failure = Some(format!("the FTL failed in the base run (no power cut): {v}"));
            break;
        }
        let flush = req.op == HostOp::Flush;
        history.record(in_flight, flush, session.last_durability);
        session.flash.nand_mut().journal_discard_from(0);
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

/// The base run's host-side state, kept aside while a crash point is tested.
struct HostState {
    ftl: Box<dyn Ftl>,
    oracle: crate::oracle::Oracle,
    host: super::HostCounters,
    next_write_id: u32,
    next_request_id: u64,
    ftl_failed: bool,
}

fn test_point(
    plan: &Plan,
    session: &mut Session,
    history: &CrashHistory,
    in_flight: Option<PendingOp>,
    request: u64,
    cut: PowerCut,
) -> PointResult {
    let image = session.flash.enter_crash_image(cut);
    let mut result = PointResult {
        cut,
        request,
        tore: image.torn_pages + image.torn_blocks > 0,
        torn_pages: image.torn_pages,
        torn_blocks: image.torn_blocks,
        recovery_cut: None,
        recovery_ops: 0,
        passed: true,
        rules: BTreeMap::new(),
        first: None,
    };
    let placeholder: Box<dyn Ftl> = Box::new(NoFtl);
    let saved = HostState {
        ftl: std::mem::replace(&mut session.ftl, placeholder),
        oracle: std::mem::replace(&mut session.oracle, crate::oracle::Oracle::new(1, 1)),
        host: session.host.clone(),
        next_write_id: session.next_write_id,
        next_request_id: session.next_request_id,
        ftl_failed: session.ftl_failed,
    };
    let mut rng = rng_for(derive_seed(plan.opts.seed, "crash.point"), &format!("{}:{}", cut.op_index, cut.during));
    recover_and_check(plan, session, history, in_flight, &mut rng, &mut result);
    let log = session.flash.take_log();
    result.rules = log.counts().clone();
    result.first = log.first_error().cloned();
    result.passed = log.is_clean();
    session.flash.leave_crash_image(image);
    session.ftl = saved.ftl;
    session.oracle = saved.oracle;
    session.host = saved.host;
    session.next_write_id = saved.next_write_id;
    session.next_request_id = saved.next_request_id;
    session.ftl_failed = saved.ftl_failed;
    result
}

/// Steps 2–5 of a crash test (see the module docs). Findings go to the log.
fn recover_and_check(
    plan: &Plan,
    session: &mut Session,
    history: &CrashHistory,
    in_flight: Option<PendingOp>,
    rng: &mut crate::seed::Rng,
    result: &mut PointResult,
) {
    session.flash.restore_power();
    session.flash.set_request(None);
    if plan.opts.nested {
        let mark = session.flash.nand().journal_len();
        let start = session.flash.op_index();
        let _ = mount_fresh(session);
        let ops = session.flash.op_index() - start;
        session.flash.nand_mut().journal_rollback(mark);
        session.flash.restore_power();
        session.flash.reset_op_index(start);
        if ops > 0 {
            let second = PowerCut { op_index: start + rng.random_range(0..ops), during: rng.random::<bool>() };
            result.recovery_cut = Some(second);
            session.flash.schedule_power_cut(second);
            let _ = mount_fresh(session);
            session.flash.restore_power();
        }
        let _ = session.flash.take_log(); // the interrupted mount's findings do not count
    }
    let start = session.flash.op_index();
    if let Err(e) = mount_fresh(session) {
        record_violation(session, Rule::RecoveryFailed, format!("mount after the power cut failed: {e}"));
        return;
    }
    result.recovery_ops = session.flash.op_index() - start;
    let mut checker = history.checker(in_flight, plan.guarantee);
    if !verify_disk(session, &mut checker, plan.config.logical_sectors, plan.opts.verify_chunk_sectors) {
        return;
    }
    let ok = {
        let mut ck = session.flash.checker();
        checker.finish(&mut ck);
        session.flash.log().is_clean()
    };
    if !ok || plan.opts.post_requests == 0 {
        return;
    }
    session.oracle = checker.recovered_oracle();
    run_post_workload(plan, session, rng);
}

/// Build a fresh FTL instance and mount it on the flash.
fn mount_fresh(session: &mut Session) -> Result<(), FtlError> {
    // A power cycle: the old instance's DRAM is gone (unless the drive keeps it).
    if session.flash.power_cut_effects().write_cache_lost {
        session.flash.release_ftl_buffers();
    }
    session.ftl = (session.factory)(&session.env).map_err(FtlError::Mount)?;
    session.ftl.mount(&mut session.flash)
}

/// Read every logical sector through the recovered FTL into the checker.
/// False if the FTL failed a read (recorded).
fn verify_disk(session: &mut Session, checker: &mut CrashChecker, total: u64, chunk: u32) -> bool {
    let mut lba = 0;
    let chunk = u64::from(chunk.max(1));
    // Hints two chunks ahead: the FTL warms its map for the later one and
    // the flash pages of the nearer one (a speed hint; it changes nothing).
    let hint = |session: &mut Session, at: u64| {
        if at < total {
            session.ftl.prefetch(&session.flash, at, (total - at).min(chunk) as u32);
        }
    };
    hint(session, 0);
    hint(session, chunk);
    while lba < total {
        let n = (total - lba).min(chunk) as u32;
        hint(session, lba + 2 * chunk);
        let buf = session.flash.alloc_host_read(n);
        let io = IoRequest { id: u64::MAX, lba, sectors: n, buf };
        match session.ftl.read(&mut session.flash, &io) {
            Ok(()) => {
                let _ = session.flash.inspect_buffer(buf, |runs, ck| checker.check_read(ck, lba, runs));
            }
            Err(e) => {
                session.flash.free_host_buffer(buf);
                record_violation(
                    session,
                    Rule::FtlError,
                    format!("read of {n} sectors at LBA {lba} after recovery failed: {e}"),
                );
                return false;
            }
        }
        session.flash.free_host_buffer(buf);
        lba += u64::from(n);
    }
    true
}

/// More workload on the recovered drive, its reads checked; then the
/// sectors it wrote are read back.
fn run_post_workload(plan: &Plan, session: &mut Session, rng: &mut crate::seed::Rng) {
    let seed = rng.random::<u64>();
    let Ok(mut w) = new_workload(plan.config, plan.spec, seed) else { return };
    let mut written = Vec::new();
    for _ in 0..plan.opts.post_requests {
        let Ok(Some(req)) = next_request(&mut w) else { break };
        if session.submit(&req).is_err() || session.ftl_failed() {
            return;
        }
        if req.op == HostOp::Write {
            written.push((req.lba, req.sectors));
        }
        if !session.flash.log().is_clean() {
            return;
        }
    }
    for (lba, sectors) in written {
        let read = HostRequest { op: HostOp::Read, lba, sectors, arrival_ns: 0, job: 0 };
        if session.submit(&read).is_err() || session.ftl_failed() || !session.flash.log().is_clean() {
            return;
        }
    }
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
    let mut test_wall: f64 = 0.0;
    for o in outcomes {
        points.extend(o.results);
        not_reached += o.not_reached;
        test_cpu += o.test_cpu;
        test_wall = test_wall.max(o.test_wall);
        base_failure = base_failure.or(o.base_failure);
        window_start = window_start.max(o.window_start);
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
        post_requests: plan.opts.post_requests,
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
        threads,
        wall_seconds: 0.0,
        cpu_seconds: 0.0,
        test_cpu_seconds: test_cpu,
        test_wall_seconds: test_wall,
        points_per_wall_second: 0.0,
        points_per_test_wall_second: 0.0,
        points_per_cpu_second: 0.0,
        peak_rss_bytes: 0,
    }
}

/// Find the earliest crash point failing with the first finding's rule.
fn shrink(plan: &Plan, report: &CrashReport, threads: usize) -> Option<Shrunk> {
    let first = report.points.iter().find(|p| !p.passed)?;
    let rule = first.first.as_ref().map(|v| v.rule)?;
    let mut best = first.clone();
    let mut tried = 0u64;
    let mut low = 0u64; // no earlier failing point is known below this operation
    for _round in 0..4 {
        let hi = best.cut.op_index;
        if hi <= low {
            break;
        }
        // Evenly spread candidates below the best, and every operation just before it.
        let mut cuts = Vec::new();
        for i in 0..24u64 {
            let op = low + (hi - low) * i / 24;
            cuts.push(PowerCut { op_index: op, during: false });
            cuts.push(PowerCut { op_index: op, during: true });
        }
        for op in hi.saturating_sub(32).max(low)..=hi {
            cuts.push(PowerCut { op_index: op, during: false });
            cuts.push(PowerCut { op_index: op, during: true });
        }
        cuts.retain(|c| (c.op_index, c.during) < (best.cut.op_index, best.cut.during));
        cuts.sort_by_key(|c| (c.op_index, c.during));
        cuts.dedup();
        if cuts.is_empty() {
            break;
        }
        tried += cuts.len() as u64;
        let opts = CrashOptions { points: PointSelection::At(cuts.clone()), shrink: false, ..plan.opts.clone() };
        let sub = Plan { opts: &opts, factory: plan.factory.clone(), ..*plan };
        let planned: Vec<Planned> = cuts.iter().map(|c| Planned { offset: c.op_index, during: c.during }).collect();
        let outcome = run_points(&sub, &planned, threads);
        let mut found: Vec<PointResult> = outcome.into_iter().flat_map(|o| o.results).collect();
        found.sort_by_key(|p| (p.cut.op_index, p.cut.during));
        match found.into_iter().find(|p| p.first.as_ref().is_some_and(|v| v.rule == rule)) {
            Some(earlier) => {
                // Between the last passing candidate below it and it.
                low = cuts
                    .iter()
                    .filter(|c| c.op_index < earlier.cut.op_index)
                    .map(|c| c.op_index)
                    .max()
                    .unwrap_or(0)
                    .max(low);
                let same = earlier.cut == best.cut;
                best = earlier;
                if same {
                    break;
                }
            }
            None => break,
        }
    }
    let message = best.first.as_ref().map_or_else(String::new, |v| v.message.clone());
    Some(Shrunk { cut: best.cut, requests_before: best.request, rule, message, tried, command: None })
}

/// Record a crash finding that is not a read (recovery failed, a read failed).
fn record_violation(session: &mut Session, rule: Rule, message: String) {
    let (op_index, request_id) = (session.flash.op_index(), session.flash.request());
    let severity = crate::violation::Severity::Error;
    session.flash.log_mut().record(Violation {
        rule,
        severity,
        op_index,
        request_id,
        address: 0,
        message,
        source: None,
    });
}

/// Stands in for the base run's FTL while a crash point is tested.
struct NoFtl;

impl Ftl for NoFtl {
    fn info(&self) -> crate::ftl::FtlInfo {
        crate::ftl::FtlInfo { name: "none", guarantee: Guarantee::Baseline, oob_bytes: 0 }
    }
    fn format(&mut self, _: &mut dyn crate::flash::Flash) -> Result<(), FtlError> {
        Ok(())
    }
    fn mount(&mut self, _: &mut dyn crate::flash::Flash) -> Result<(), FtlError> {
        Ok(())
    }
    fn read(&mut self, _: &mut dyn crate::flash::Flash, _: &IoRequest) -> Result<(), FtlError> {
        Err(FtlError::Mount("no FTL".into()))
    }
    fn write(&mut self, _: &mut dyn crate::flash::Flash, _: &IoRequest) -> Result<crate::ftl::Durability, FtlError> {
        Err(FtlError::Mount("no FTL".into()))
    }
    fn trim(&mut self, _: &mut dyn crate::flash::Flash, _: u64, _: u64) -> Result<(), FtlError> {
        Ok(())
    }
    fn flush(&mut self, _: &mut dyn crate::flash::Flash) -> Result<(), FtlError> {
        Ok(())
    }
    fn idle(&mut self, _: &mut dyn crate::flash::Flash) -> Result<crate::ftl::IdleOutcome, FtlError> {
        Ok(crate::ftl::IdleOutcome::Nothing)
    }
    fn shutdown(&mut self, _: &mut dyn crate::flash::Flash) -> Result<(), FtlError> {
        Ok(())
    }
    fn stats(&self) -> crate::ftl::FtlStats {
        crate::ftl::FtlStats::default()
    }
}
