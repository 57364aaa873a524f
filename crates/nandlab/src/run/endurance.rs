//! `endurance`: how long a drive lives under a workload, projected from
//! its wear early on and, with `until_worn_out`, run to its end of life at
//! `stress` speed (every read still checked).
//!
//! # The projection
//!
//! The workload runs untimed until the host has written
//! `project_after_capacity` times the logical capacity: the first half
//! warms the drive up (the fill, GC reaching its steady state), the second
//! half measures the wear rate `r`, block erases per host byte written,
//! over the good blocks `N`. Blocks then wear on at `r / N` erases per
//! host byte each (the data plane's free-block reuse keeps them close; the
//! projection takes each block's own count as it is now). So:
//!
//! - **TBW** (rated): host bytes written when the mean block reaches the
//!   model's rated endurance `E` (`endurance_pe`): `H + (E − mean) · N / r`,
//!   in TB of 10^12 bytes; **DWPD** spreads it over the warranty:
//!   `TBW / (logical capacity · 365 · warranty years)`. (On a fresh drive
//!   this is the familiar `capacity · E / WAF`.)
//! - **Lost capacity**: a block fails every erase from `⌈worn_out_factor ·
//!   E⌉` erases on (see [`crate::nand::reliability::failures`]), and is
//!   retired; the drive loses capacity when it has no spare left, i.e. when
//!   the `S+1`-th most worn block dies, `S` the spare blocks (good blocks
//!   minus those the logical capacity fills): `H + (PE_worn − c_(S+1)) · N / r`.
//!   Random program and erase failures (`p0`, rare) are not projected.
//!
//! # The run to end of life
//!
//! The same workload goes on (to at most `max_capacity_writes` times the
//! capacity) until the FTL can no longer hold the logical capacity: it
//! fails a request with no free space (its spare blocks are gone), which
//! is the end of life, not a finding. The report says when (in host bytes
//! written) the first uncorrectable read, the first grown bad block and the
//! lost capacity appeared, and how far the projection was from it. Any
//! other FTL error, or a wrong read, is a finding as in `stress`.

use super::stress::{session_report, RunOutline, WorkloadEnd};
use super::{registry_factory, FtlFactory, Lookahead, RunError, Session, StopFlag};
use crate::config::Config;
use crate::flash::{Cause, Flash};
use crate::ftl::FtlError;
use crate::nand::BlockAddr;
use crate::report::StressReport;
use crate::workload::Workload;
use serde::Serialize;
use std::fmt::Write;
use std::time::Instant;

/// Options of an endurance run.
#[derive(Clone, Debug)]
pub struct EnduranceOptions {
    pub seed: u64,
    /// Run on to the end of life after the projection.
    pub until_worn_out: bool,
    /// Host writes before the projection, in times the logical capacity
    /// (the first half warms up, the second measures the wear rate).
    pub project_after_capacity: f64,
    /// The run to end of life stops here (times the logical capacity).
    pub max_capacity_writes: f64,
    /// Years over which DWPD spreads the TBW.
    pub warranty_years: f64,
    pub keep_violations: usize,
    pub stop: StopFlag,
}

impl Default for EnduranceOptions {
    fn default() -> Self {
        EnduranceOptions {
            seed: 0,
            until_worn_out: false,
            project_after_capacity: 8.0,
            max_capacity_writes: 100_000.0,
            warranty_years: 5.0,
            keep_violations: 20,
            stop: StopFlag::default(),
        }
    }
}

impl EnduranceOptions {
    /// Check the values (errors name the option).
    pub fn check(&self) -> Result<(), String> {
        if !(self.project_after_capacity.is_finite() && self.project_after_capacity > 0.0) {
            return Err(format!(
                "--project-after: must be a positive multiple of the capacity, got {}",
                self.project_after_capacity
            ));
        }
        if !(self.warranty_years.is_finite() && self.warranty_years > 0.0 && self.warranty_years <= 100.0) {
            return Err(format!("--warranty-years: must be within (0, 100], got {}", self.warranty_years));
        }
        if !(self.max_capacity_writes.is_finite() && self.max_capacity_writes >= self.project_after_capacity) {
            return Err(format!(
                "--max-writes: must be at least --project-after ({}x), got {}x",
                self.project_after_capacity, self.max_capacity_writes
            ));
        }
        Ok(())
    }
}

/// The lifetime projected from the measured wear rate (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Projection {
    /// Host bytes written when the rate was measured, and over which window.
    pub host_write_bytes: u64,
    pub window_host_write_bytes: u64,
    /// Block erases per GiB written by the host, over the window.
    pub erases_per_host_gib: f64,
    /// Flash pages programmed per host page programmed, over the window.
    pub waf: f64,
    pub good_blocks: u64,
    pub spare_blocks: u64,
    pub rated_pe: u32,
    pub worn_out_pe: u32,
    pub mean_pe: f64,
    pub max_pe: u32,
    /// Host bytes written when the mean block reaches the rated P/E (TBW).
    pub tbw_bytes: f64,
    pub tbw_tb: f64,
    pub dwpd: f64,
    pub warranty_years: f64,
    /// Host bytes written when the first block wears out.
    pub first_worn_out_host_bytes: f64,
    /// Host bytes written when the drive loses capacity.
    pub lost_capacity_host_bytes: f64,
}

/// What the run to end of life saw, in host bytes written.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WornOutRun {
    pub host_write_bytes: u64,
    pub first_uncorrectable_read_host_bytes: Option<u64>,
    pub first_grown_bad_block_host_bytes: Option<u64>,
    /// The FTL ran out of spare blocks (None: the run stopped first).
    pub lost_capacity_host_bytes: Option<u64>,
    /// (Measured − projected) / measured lost capacity, percent.
    pub projection_error_percent: Option<f64>,
    pub stopped: String,
}

/// The endurance section of the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EnduranceSection {
    pub projection: Option<Projection>,
    pub worn_out: Option<WornOutRun>,
}

/// An endurance run's report: the stress report of the run and the
/// endurance section.
#[derive(Clone, Debug, Serialize)]
pub struct EnduranceReport {
    #[serde(flatten)]
    pub run: StressReport,
    pub endurance: EnduranceSection,
}

impl EnduranceReport {
    /// Error findings other than the end of life (the FTL's no-space error
    /// that ends a run to end of life).
    pub fn findings(&self) -> u64 {
        let end = self.endurance.worn_out.as_ref().is_some_and(|w| w.lost_capacity_host_bytes.is_some());
        self.run.errors - u64::from(end)
    }

    /// The readable summary.
    pub fn summary(&self) -> String {
        let reached = self.endurance.worn_out.as_ref().is_some_and(|w| w.lost_capacity_host_bytes.is_some());
        let mut s = String::new();
        for line in self.run.summary().lines() {
            if reached && self.findings() == 0 && line.starts_with("  result") {
                s.push_str(
                    "  result     END OF LIFE — no violations before it (the FTL's no-space error ended the run)\n",
                );
            } else {
                s.push_str(line);
                s.push('\n');
            }
        }
        let gib = |b: f64| b / f64::from(1u32 << 30);
        if let Some(p) = &self.endurance.projection {
            let _ = writeln!(
                s,
                "  projected  after {:.2} GiB written: {:.2} erases per GiB written (WAF {:.3}), {} good blocks ({} spare), \
                 P/E mean {:.1} max {} of {} rated, {} worn out",
                gib(p.host_write_bytes as f64),
                p.erases_per_host_gib,
                p.waf,
                p.good_blocks,
                p.spare_blocks,
                p.mean_pe,
                p.max_pe,
                p.rated_pe,
                p.worn_out_pe
            );
            let _ = writeln!(
                s,
                "  lifetime   TBW {:.4} TB ({:.2} GiB), {:.3} DWPD over {} years; first block worn out at {:.2} GiB, \
                 capacity lost at {:.2} GiB written",
                p.tbw_tb,
                gib(p.tbw_bytes),
                p.dwpd,
                p.warranty_years,
                gib(p.first_worn_out_host_bytes),
                gib(p.lost_capacity_host_bytes)
            );
        }
        if let Some(w) = &self.endurance.worn_out {
            let at = |b: Option<u64>| b.map_or("never".to_string(), |b| format!("{:.2} GiB", gib(b as f64)));
            let _ = writeln!(
                s,
                "  end of life {}: first uncorrectable read at {}, first grown bad block at {}, capacity lost at {}{}",
                w.stopped,
                at(w.first_uncorrectable_read_host_bytes),
                at(w.first_grown_bad_block_host_bytes),
                at(w.lost_capacity_host_bytes),
                w.projection_error_percent.map_or(String::new(), |e| format!(" (projection off by {e:+.1} %)"))
            );
        }
        s
    }
}

/// Wear counters at one point of the run.
#[derive(Copy, Clone, Debug, Default)]
struct Mark {
    host_write_bytes: u64,
    erases: u64,
    host_programs: u64,
    programs: u64,
}

fn mark(session: &Session) -> Mark {
    let s = session.drive().flash().stats();
    Mark {
        host_write_bytes: session.host().counters().write_bytes,
        erases: s.total().block_erases,
        host_programs: s.cause(Cause::Host).programs(),
        programs: s.total().programs(),
    }
}

/// Run an endurance test of `config`'s FTL with `workload` (which should
/// be long enough: the caller sizes it, see [`workload_limit`]).
pub fn run(config: &Config, workload: &mut dyn Workload, opts: &EnduranceOptions) -> Result<EnduranceReport, RunError> {
    run_with_factory(config, registry_factory(&config.ftl_name, &config.ftl_options), workload, opts)
}

/// The host writes a run needs, in times the logical capacity.
pub fn workload_limit(opts: &EnduranceOptions) -> f64 {
    if opts.until_worn_out {
        opts.max_capacity_writes
    } else {
        opts.project_after_capacity
    }
}

/// [`run`] with an FTL built by `factory`.
pub fn run_with_factory(
    config: &Config,
    factory: FtlFactory,
    workload: &mut dyn Workload,
    opts: &EnduranceOptions,
) -> Result<EnduranceReport, RunError> {
    opts.check().map_err(RunError::Input)?;
    let settings = config.reliability.as_ref().ok_or_else(|| {
        RunError::Input(
            "endurance needs the media reliability model (--reliability preset:NAME or a [reliability] table)".into(),
        )
    })?;
    let rated_pe = settings.rber.endurance_pe;
    let worn_out_pe = (f64::from(rated_pe) * settings.failures.worn_out_factor).ceil() as u32;
    let started = Instant::now();
    let cpu_start = crate::report::resources::cpu_seconds();
    let unit = workload.alignment_sectors();
    let mut session = Session::with_factory(config, factory, opts.seed, unit, opts.keep_violations)?;
    let logical = config.logical_bytes() as f64;
    let warm_bytes = (opts.project_after_capacity / 2.0 * logical) as u64;
    let project_bytes = (opts.project_after_capacity * logical) as u64;
    let mut warm: Option<Mark> = None;
    let mut projection = None;
    let mut worn = WornOutRun::default();
    let mut interrupted = false;
    let mut stopped_early = None;
    let mut ahead = Lookahead::new(Session::PREFETCH_DISTANCE);
    while let Some(req) = ahead.next(workload)? {
        if opts.stop.is_set() {
            interrupted = true;
            break;
        }
        session.submit(&req)?;
        let written = session.host().counters().write_bytes;
        if let Some(r) = session.drive().flash().reliability_stats() {
            if r.uncorrectable_reads > 0 && worn.first_uncorrectable_read_host_bytes.is_none() {
                worn.first_uncorrectable_read_host_bytes = Some(written);
            }
            if r.grown_bad_blocks > 0 && worn.first_grown_bad_block_host_bytes.is_none() {
                worn.first_grown_bad_block_host_bytes = Some(written);
            }
        }
        if session.ftl_failed() {
            if session.drive().first_failure_code() == Some(FtlError::CODE_NO_SPACE) && opts.until_worn_out {
                worn.lost_capacity_host_bytes = Some(written);
                worn.stopped = "reached".into();
            } else {
                stopped_early = Some("the FTL returned an error".to_string());
            }
            break;
        }
        if session.drive().flash().log().errors() > 0 {
            stopped_early = Some("a violation was found".to_string());
            break;
        }
        if warm.is_none() && written >= warm_bytes {
            warm = Some(mark(&session));
        }
        if projection.is_none() && written >= project_bytes {
            projection = warm.map(|w| project(&session, config, w, rated_pe, worn_out_pe, opts.warranty_years));
            if !opts.until_worn_out {
                break;
            }
        }
    }
    if opts.until_worn_out {
        worn.host_write_bytes = session.host().counters().write_bytes;
        if worn.stopped.is_empty() {
            worn.stopped =
                if interrupted || stopped_early.is_some() { "not reached (stopped)" } else { "not reached" }.into();
        }
        if let (Some(p), Some(m)) = (&projection, worn.lost_capacity_host_bytes) {
            worn.projection_error_percent = Some((m as f64 - p.lost_capacity_host_bytes) / m as f64 * 100.0);
        }
    }
    let end = WorkloadEnd::take(&session, started);
    let outline = RunOutline {
        mode: "endurance",
        seed: opts.seed,
        workload: workload.describe(),
        workload_report: workload.report(),
        waf_steady: None,
        series: Vec::new(),
        stopped_early,
        interrupted,
        remount: None,
        started,
        cpu_start,
    };
    let run = session_report(config, &session, end, outline);
    Ok(EnduranceReport {
        run,
        endurance: EnduranceSection { projection, worn_out: opts.until_worn_out.then_some(worn) },
    })
}

/// The projection from the wear between `warm` and now (see the module docs).
fn project(session: &Session, config: &Config, warm: Mark, rated_pe: u32, worn_out_pe: u32, years: f64) -> Projection {
    let now = mark(session);
    let flash = session.drive().flash();
    let g = &config.geometry;
    let mut counts: Vec<u32> = (0..g.blocks())
        .map(|b| BlockAddr(u64::from(b)))
        .filter(|&b| !flash.is_factory_bad(b))
        .map(|b| flash.nand().erase_count(b))
        .collect();
    counts.sort_unstable_by(|a, b| b.cmp(a));
    let good = counts.len() as u64;
    let block_bytes = u64::from(g.pages_per_block()) * u64::from(g.page_size_bytes());
    let spare = good.saturating_sub(config.logical_bytes().div_ceil(block_bytes));
    let window = now.host_write_bytes - warm.host_write_bytes;
    let erases = now.erases - warm.erases;
    // Erases of one block per host byte.
    let per_block = erases as f64 / window.max(1) as f64 / good.max(1) as f64;
    let mean = counts.iter().map(|&c| f64::from(c)).sum::<f64>() / good.max(1) as f64;
    let h = now.host_write_bytes as f64;
    let until = |from: f64, to: u32| h + (f64::from(to) - from).max(0.0) / per_block;
    let tbw_bytes = until(mean, rated_pe);
    let max = counts.first().copied().unwrap_or(0);
    let at_spare = counts.get(spare as usize).copied().unwrap_or(max);
    Projection {
        host_write_bytes: now.host_write_bytes,
        window_host_write_bytes: window,
        erases_per_host_gib: erases as f64 / (window.max(1) as f64 / f64::from(1u32 << 30)),
        waf: crate::report::waf(now.host_programs - warm.host_programs, now.programs - warm.programs),
        good_blocks: good,
        spare_blocks: spare,
        rated_pe,
        worn_out_pe,
        mean_pe: mean,
        max_pe: max,
        tbw_bytes,
        tbw_tb: tbw_bytes / 1e12,
        dwpd: tbw_bytes / (config.logical_bytes() as f64 * 365.0 * years),
        warranty_years: years,
        first_worn_out_host_bytes: until(f64::from(max), worn_out_pe),
        lost_capacity_host_bytes: until(f64::from(at_spare), worn_out_pe),
    }
}
