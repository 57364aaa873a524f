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
//!
//! # Where things are
//!
//! This file holds the options and runs a campaign; `plan.rs` decides
//! which points it tests (and refuses plans that would test nothing);
//! `base_run.rs` runs each thread's base run and assembles the report;
//! `point.rs` tests the points of one request on the drive
//! ([`Drive::cut_power_for_test`](crate::run::drive::Drive::cut_power_for_test)
//! and back); `shrink.rs` shrinks a finding. The report types are
//! [`crate::report::crash`].

mod base_run;
mod plan;
pub(crate) mod point;
mod shrink;

pub use plan::MAX_CRASH_POINTS;
pub use shrink::SHRINK_EXHAUSTIVE_POINTS;

use super::{registry_factory, FtlFactory, RunError, Session};
use crate::config::Config;
use crate::flash::PowerCut;
use crate::ftl::{Ftl, FtlEnv, Guarantee};
use crate::nand::power::PowerCutEffects;
use crate::report::crash::{CrashReport, NestedCut, PointResult, Shrunk, Stage};
use crate::report::resources;
use crate::seed::derive_seed;
use crate::workload::synthetic::{SyntheticSpec, SyntheticWorkload};
use crate::workload::{HostOp, HostRequest, Workload};
use base_run::{assemble, run_points};
use plan::plan_points;
use serde::Serialize;
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
    /// A board the campaign posts its progress to (points tested, failed,
    /// shrink rounds) for a display on another thread; none by default.
    pub progress: Option<std::sync::Arc<super::progress::CrashProgress>>,
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
            progress: None,
        }
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

/// A cut as `--crash-at` takes it: `OP`, `OP:between` or `OP:during`, OP
/// the index of a flash operation. The error names the text and the part
/// that is wrong (the caller adds the option's name).
pub fn parse_power_cut(text: &str) -> Result<PowerCut, String> {
    let (op_index, during) = parse_phased("an operation index", text)?;
    Ok(PowerCut { op_index, during })
}

/// A nested cut as `--nested-at` takes it: `K`, `K:between` or
/// `K:during`, K counting the recovery's state-changing operations.
pub fn parse_nested_cut(text: &str) -> Result<NestedCut, String> {
    let (nth, during) = parse_phased("a count of state-changing operations", text)?;
    let nth = u32::try_from(nth).map_err(|_| format!("`{text}`: {nth} is too large"))?;
    Ok(NestedCut { nth, during })
}

/// `N`, `N:between` or `N:during`: N (`what` names it in errors) and
/// whether the cut falls during the operation.
fn parse_phased(what: &str, text: &str) -> Result<(u64, bool), String> {
    let (n, phase) = text.split_once(':').unwrap_or((text, "between"));
    let n = n.trim().parse().map_err(|_| format!("`{text}`: `{n}` is not {what}"))?;
    let during = match phase.trim() {
        "during" => true,
        "between" => false,
        p => return Err(format!("`{text}`: phase `{p}` is not `during` or `between`")),
    };
    Ok((n, during))
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
    if let Some(board) = &opts.progress {
        board.planned(planned.len() as u64);
    }
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

#[cfg(test)]
mod model_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftl::Durability;
    use crate::oracle::crash_checker::{CrashHistory, PendingOp};
    use crate::workload::synthetic::RwMode;

    #[test]
    fn cuts_parse_with_their_phase_and_bad_ones_name_the_part_that_is_wrong() {
        assert_eq!(parse_power_cut("12").unwrap(), PowerCut { op_index: 12, during: false });
        assert_eq!(parse_power_cut(" 12 : during").unwrap(), PowerCut { op_index: 12, during: true });
        assert_eq!(parse_nested_cut("3:between").unwrap(), NestedCut { nth: 3, during: false });
        assert_eq!(parse_power_cut("x").unwrap_err(), "`x`: `x` is not an operation index");
        assert_eq!(
            parse_power_cut("12:sideways").unwrap_err(),
            "`12:sideways`: phase `sideways` is not `during` or `between`"
        );
        assert_eq!(parse_nested_cut("4294967296").unwrap_err(), "`4294967296`: 4294967296 is too large");
    }

    /// A point test runs its own workload on its own host side; the base
    /// run's record of how the drive acknowledged the request in flight
    /// (what the crash history takes as durable) must come out of it as it
    /// went in. The recovered drive's workload here is all reads, so a test
    /// leaking its last request's durability would leave none.
    #[test]
    fn a_tested_point_leaves_the_base_requests_durability_as_the_drive_acknowledged_it() {
        let config = Config::preset("tiny").unwrap();
        let spec = SyntheticSpec { rw: RwMode::RandRead, ..SyntheticSpec::default() };
        let opts = CrashOptions { seed: 3, post_requests: 8, ..CrashOptions::default() };
        let plan = Plan {
            config: &config,
            factory: shared_registry_factory(&config),
            spec: &spec,
            opts: &opts,
            guarantee: Guarantee::Baseline,
            unit: 8,
        };
        let mut session = new_session(&plan).unwrap();
        session.drive_mut().start_journal();
        let history = CrashHistory::new(config.logical_sectors, plan.unit, plan.guarantee);
        let write = HostRequest { op: HostOp::Write, lba: 64, sectors: 8, arrival_ns: 0, job: 0 };
        let (write_id, request_id) = (session.host().next_write_id(), session.requests());
        let ops_before = session.drive().flash().op_index();
        session.submit(&write).unwrap();
        let ops_after = session.drive().flash().op_index();
        assert!(ops_after > ops_before, "the write programs flash");
        assert_eq!(session.host().last_durability(), Some(Durability::Durable), "the page FTL writes through");
        let in_flight = PendingOp::of(&write, request_id, write_id, write_id.saturating_sub(1));
        let request = point::Request { id: request_id, in_flight, history: &history };
        let cuts = [PowerCut { op_index: ops_before, during: true }];
        let results = point::test_request(&plan, &mut session, &request, &cuts);
        assert!(results[0].passed, "{:?}", results[0].first);
        assert_eq!(session.host().last_durability(), Some(Durability::Durable));
    }
}
