//! `stress`: push a workload through the FTL untimed, at memory speed, with
//! every NAND rule and every read checked, and report.
//!
//! The run stops early when it has seen `max_errors` error-severity
//! violations (the first findings are the useful ones; later ones usually
//! cascade from them) or when the FTL returns an error. After the workload,
//! an optional clean power cycle mounts a fresh FTL instance on the same
//! flash and reads every logical sector back through the oracle.

use super::progress::RunProgress;
use super::{registry_factory, FtlFactory, Lookahead, RunError, Session, StopFlag};
use crate::config::Config;
use crate::flash::{Cause, FlashStats};
use crate::ftl::FtlStats;
use crate::report::{self, resources, FlashSummary, GcSummary, StressReport, StressSample, WearSummary};
use crate::workload::Workload;
use std::time::Instant;

/// Options of a stress run.
#[derive(Clone, Debug)]
pub struct StressOptions {
    pub seed: u64,
    /// Stop after this many error-severity violations (0: never stop).
    pub max_errors: u64,
    /// Violations kept in full in the report (all are counted).
    pub keep_violations: usize,
    /// Power-cycle cleanly at the end and verify every sector after mount.
    pub remount_verify: bool,
    /// Oracle version grain in sectors (default: the workload's alignment).
    pub oracle_unit_sectors: Option<u32>,
    /// Background work after every this many requests (0: never).
    pub idle_every: u64,
    /// Stop at the next request boundary when set (see [`StopFlag`]).
    pub stop: StopFlag,
}

impl Default for StressOptions {
    fn default() -> Self {
        StressOptions {
            seed: 0,
            max_errors: 1,
            keep_violations: 20,
            remount_verify: false,
            oracle_unit_sectors: None,
            idle_every: 0,
            stop: StopFlag::default(),
        }
    }
}

/// Counters sampled during the run, thinned as it grows, so the
/// steady-state WAF over the last quarter is known without knowing the
/// workload's length in advance; the samples are also the report's
/// `series` (what the HTML report plots WAF and free blocks with).
struct WafSamples {
    samples: Vec<StressSample>,
    every: u64,
}

impl WafSamples {
    const CAPACITY: usize = StressSample::MAX_SAMPLES;

    fn new() -> Self {
        WafSamples { samples: vec![StressSample::default()], every: 1024 }
    }

    fn maybe_record(&mut self, requests: u64, session: &Session) {
        if requests % self.every != 0 {
            return;
        }
        self.samples.push(sample(requests, session));
        if self.samples.len() >= Self::CAPACITY {
            // Keep every other sample and sample half as often.
            let kept: Vec<_> = self.samples.iter().step_by(2).cloned().collect();
            self.samples = kept;
            self.every *= 2;
        }
    }

    /// WAF between the sample nearest 3/4 of the run and the end.
    fn steady(&self, requests: u64, host_end: u64, all_end: u64) -> f64 {
        let cut = requests - requests / 4;
        let (h0, a0) = self
            .samples
            .iter()
            .rev()
            .find(|s| s.requests <= cut)
            .map_or((0, 0), |s| (s.host_pages_programmed, s.pages_programmed));
        report::waf(host_end - h0, all_end - a0)
    }

    /// The samples with the end of the run (`last`) appended.
    fn series(mut self, last: StressSample) -> Vec<StressSample> {
        if self.samples.last().map(|s| s.requests) != Some(last.requests) {
            self.samples.push(last);
        }
        self.samples
    }
}

/// The cumulative counters of the run after `requests` requests.
fn sample(requests: u64, session: &Session) -> StressSample {
    let s = session.drive().flash().stats();
    let gc = s.cause(Cause::Gc);
    StressSample {
        requests,
        host_write_bytes: session.host().counters().write_bytes,
        host_pages_programmed: s.cause(Cause::Host).programs(),
        pages_programmed: s.total().programs(),
        gc_pages_moved: gc.programs(),
        blocks_erased: s.total().block_erases,
        free_blocks: session.drive().ftl().stats().free_blocks,
    }
}

/// How far the run has got (for `progress`).
fn progress_of(workload: &dyn Workload, session: &Session) -> RunProgress {
    let w = workload.progress();
    let s = session.drive().flash().stats();
    RunProgress {
        phase: "stress",
        done: w.done,
        total: w.total,
        unit: super::progress::ProgressUnit::Bytes,
        requests: session.requests(),
        host_write_bytes: session.host().counters().write_bytes,
        host_pages_programmed: s.cause(Cause::Host).programs(),
        pages_programmed: s.total().programs(),
    }
}

/// Run `workload` on a fresh drive built from `config` (its FTL by name).
pub fn run(
    config: &Config,
    workload: &mut dyn Workload,
    opts: &StressOptions,
    progress: &mut dyn FnMut(&RunProgress),
) -> Result<StressReport, RunError> {
    run_with_factory(config, registry_factory(&config.ftl_name, &config.ftl_options), workload, opts, progress)
}

/// Run `workload` with an FTL built by `factory` (e.g. one outside the registry).
pub fn run_with_factory(
    config: &Config,
    factory: FtlFactory,
    workload: &mut dyn Workload,
    opts: &StressOptions,
    progress: &mut dyn FnMut(&RunProgress),
) -> Result<StressReport, RunError> {
    let started = Instant::now();
    let cpu_start = resources::cpu_seconds();
    let unit = opts.oracle_unit_sectors.unwrap_or_else(|| workload.alignment_sectors());
    let mut session = Session::with_factory(config, factory, opts.seed, unit, opts.keep_violations)?;
    let mut samples = WafSamples::new();
    let mut stopped_early = None;
    let mut interrupted = false;
    let mut ahead = Lookahead::new(Session::PREFETCH_DISTANCE);
    while let Some(req) = ahead.next(workload)? {
        if opts.stop.is_set() {
            interrupted = true;
            break;
        }
        if let Some(r) = ahead.fill(workload) {
            session.prefetch(&r, true);
        }
        session.submit(&req)?;
        let n = session.requests();
        samples.maybe_record(n, &session);
        if opts.idle_every > 0 && n % opts.idle_every == 0 {
            session.idle(u32::MAX);
        }
        if n % 8192 == 0 {
            progress(&progress_of(workload, &session));
        }
        if session.ftl_failed() {
            stopped_early = Some("the FTL returned an error".to_string());
            break;
        }
        if opts.max_errors > 0 && session.drive().flash().log().errors() >= opts.max_errors {
            stopped_early = Some(format!(
                "{} error violation(s) found (--max-errors {})",
                session.drive().flash().log().errors(),
                opts.max_errors
            ));
            break;
        }
    }
    progress(&progress_of(workload, &session));

    // Figures of the workload itself, before the power cycle adds its own traffic.
    let end = WorkloadEnd::take(&session, started);
    let waf_steady = samples.steady(end.requests, end.host_programs(), end.all_programs());
    let series = samples.series(sample(end.requests, &session));

    let remount =
        (opts.remount_verify && stopped_early.is_none() && !interrupted).then(|| session.remount_and_verify());

    let outline = RunOutline {
        mode: "stress",
        seed: opts.seed,
        workload: workload.describe(),
        workload_report: workload.report(),
        waf_steady: Some(waf_steady),
        series,
        stopped_early,
        interrupted,
        remount,
        started,
        cpu_start,
    };
    Ok(session_report(config, &session, end, outline))
}

/// A session's figures at the end of its workload, before an end-of-run
/// power cycle adds traffic of its own (the modes that report a
/// [`StressReport`] take them).
pub(crate) struct WorkloadEnd {
    pub stats: FlashStats,
    pub ftl_stats: FtlStats,
    pub requests: u64,
    pub workload_wall: f64,
}

impl WorkloadEnd {
    pub(crate) fn take(session: &Session, started: Instant) -> WorkloadEnd {
        WorkloadEnd {
            stats: session.drive().flash().stats().clone(),
            ftl_stats: session.drive().ftl().stats(),
            requests: session.requests(),
            workload_wall: started.elapsed().as_secs_f64(),
        }
    }

    pub(crate) fn host_programs(&self) -> u64 {
        self.stats.cause(Cause::Host).programs()
    }

    pub(crate) fn all_programs(&self) -> u64 {
        self.stats.total().programs()
    }
}

/// What a mode says of its run, beside the session's figures.
pub(crate) struct RunOutline {
    pub mode: &'static str,
    pub seed: u64,
    pub workload: String,
    pub workload_report: Option<crate::workload::WorkloadReport>,
    /// `None`: the whole run's WAF.
    pub waf_steady: Option<f64>,
    /// Samples along the run (empty: the mode takes none).
    pub series: Vec<StressSample>,
    pub stopped_early: Option<String>,
    pub interrupted: bool,
    pub remount: Option<report::RemountSummary>,
    pub started: Instant,
    pub cpu_start: f64,
}

/// The report of a run on `session`: its figures at the workload's `end`,
/// the rest as the session stands now.
pub(crate) fn session_report(config: &Config, session: &Session, end: WorkloadEnd, o: RunOutline) -> StressReport {
    let wall = o.started.elapsed().as_secs_f64();
    let host_bytes = session.host().counters().read_bytes + session.host().counters().write_bytes;
    let (stats, workload_wall, requests) = (&end.stats, end.workload_wall, end.requests);
    let gc = stats.cause(Cause::Gc);
    let waf = report::waf(end.host_programs(), end.all_programs());
    let mut report = StressReport {
        schema_version: report::SCHEMA_VERSION,
        mode: o.mode,
        seed: o.seed,
        preset: config.name.clone(),
        ftl: session.drive().ftl().info().name.to_string(),
        workload: o.workload,
        workload_report: o.workload_report,
        raw_bytes: config.geometry.raw_bytes(),
        logical_bytes: config.logical_bytes(),
        host: session.host().counters().clone(),
        flash: FlashSummary::from_stats(stats),
        waf,
        waf_steady: o.waf_steady.unwrap_or(waf),
        gc: GcSummary { runs: end.ftl_stats.gc_runs, pages_moved: gc.programs(), blocks_erased: gc.block_erases },
        wear: WearSummary::from_counts(session.drive().flash().nand().erase_counts()),
        oracle_unit_sectors: session.host().oracle().sectors_per_unit(),
        violation_counts: Default::default(),
        errors: 0,
        warnings: 0,
        violations: Vec::new(),
        stopped_early: o.stopped_early,
        interrupted: o.interrupted,
        remount: o.remount,
        reliability: session.drive().flash().reliability_stats(),
        reproduce: None,
        series: o.series,
        wall_seconds: wall,
        cpu_seconds: resources::cpu_seconds() - o.cpu_start,
        effective_host_gbps: host_bytes as f64 / workload_wall / 1e9,
        requests_per_second: requests as f64 / workload_wall,
        flash_ops_per_second: stats.operations() as f64 / workload_wall,
        peak_rss_bytes: resources::peak_rss_bytes(),
        ftl_stats: end.ftl_stats,
    };
    report.set_violations(session.drive().flash().log());
    report
}
