//! Preconditioning (aging) a drive before a timed measurement, untimed, at
//! `stress` speed, with the oracle on.
//!
//! SNIA's Performance Test Specification asks for a drive in *steady
//! state* before its performance is measured; a fresh drive has no garbage
//! to collect and flatters every FTL. nandlab fills the chosen share of the
//! logical space sequentially, then overwrites it with random page-sized
//! writes in *windows* of a fixed volume. After each window it measures
//! the window's write amplification and the FTL's free blocks; the drive is
//! steady when the last four windows agree within the tolerance — SNIA's
//! "data excursion" test, tightened: the spread (max − min) of their WAF
//! within 2 % of its mean, and of their free blocks within 2 % or one block
//! per plane. A window is 2 % of the filled volume, and at least 256
//! blocks' worth of pages so that small drives average over many GC
//! cycles. It stops
//! there, or after a cap on the random volume, and says which.

use super::super::{RunError, Session};
use crate::flash::{Cause, Flash};
use crate::report::resources;
use crate::seed::rng_for;
use crate::workload::{HostOp, HostRequest};
use rand::RngExt;
use serde::Serialize;
use std::time::Instant;

/// How to precondition.
#[derive(Clone, Debug, PartialEq)]
pub struct PreconditionSpec {
    /// Share of the logical space to fill and then overwrite, percent.
    pub fill_percent: f64,
    /// Stop the random phase after this many times the filled volume.
    pub max_overwrite: f64,
    /// One window, as a percentage of the filled volume.
    pub window_percent: f64,
    /// Relative tolerance for steady state.
    pub tolerance: f64,
}

impl Default for PreconditionSpec {
    fn default() -> Self {
        PreconditionSpec { fill_percent: 100.0, max_overwrite: 2.0, window_percent: 2.0, tolerance: 0.02 }
    }
}

/// One window of the random phase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PreconditionWindow {
    /// Random bytes written up to the end of this window.
    pub random_bytes: u64,
    pub waf: f64,
    pub free_blocks: Option<u64>,
}

/// What preconditioning did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PreconditionReport {
    pub fill_percent: f64,
    pub sequential_bytes: u64,
    pub random_bytes: u64,
    pub windows: Vec<PreconditionWindow>,
    /// Whether steady state was reached (false: stopped at the cap).
    pub steady: bool,
    /// WAF of the last window.
    pub waf_steady: f64,
    pub free_blocks: Option<u64>,
    pub wall_seconds: f64,
    pub cpu_seconds: f64,
}

/// The FTL's free blocks, when it reports them.
pub fn free_blocks(session: &Session) -> Option<u64> {
    session.ftl.stats().extra.get("free_blocks").and_then(serde_json::Value::as_u64)
}

/// Consecutive windows that must agree for steady state.
const STEADY_WINDOWS: usize = 4;

/// Whether the spread of `values` is within `tol` of their mean (or `slack`).
fn settled(values: impl Iterator<Item = f64> + Clone, tol: f64, slack: f64) -> bool {
    let (mut lo, mut hi, mut sum, mut n) = (f64::MAX, f64::MIN, 0.0, 0.0);
    for v in values {
        lo = lo.min(v);
        hi = hi.max(v);
        sum += v;
        n += 1.0;
    }
    n > 0.0 && hi - lo <= (tol * (sum / n).abs()).max(slack)
}

/// Precondition `session` as `spec` says; `progress(done, total)` in bytes.
pub fn precondition(
    session: &mut Session,
    spec: &PreconditionSpec,
    seed: u64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<PreconditionReport, RunError> {
    if !(spec.fill_percent > 0.0 && spec.fill_percent <= 100.0) {
        return Err(RunError::Input(format!(
            "--precondition {}%: the fill must be within (0, 100]",
            spec.fill_percent
        )));
    }
    let started = Instant::now();
    let cpu0 = resources::cpu_seconds();
    let g = session.flash.geometry().clone();
    let spp = g.sectors_per_page();
    let sector = u64::from(g.sector_size_bytes());
    let logical_pages = session.oracle.logical_sectors() / u64::from(spp);
    let pages = ((logical_pages as f64 * spec.fill_percent / 100.0) as u64).max(1);
    let page_bytes = u64::from(spp) * sector;
    let random_cap = (pages as f64 * spec.max_overwrite) as u64;
    let total = (pages + random_cap) * page_bytes;
    let write = |lba: u64, sectors: u32| HostRequest { op: HostOp::Write, lba, sectors, arrival_ns: 0, job: 0 };
    let stop = |s: &Session| s.ftl_failed() || s.flash.log().errors() > 0;

    // Sequential fill, in large requests.
    let chunk = (256 / u64::from(spp)).max(1) * 8;
    let mut p = 0;
    while p < pages && !stop(session) {
        let n = chunk.min(pages - p);
        session.submit(&write(p * u64::from(spp), (n * u64::from(spp)) as u32))?;
        p += n;
        if p % (chunk * 1024) == 0 {
            progress(p * page_bytes, total);
        }
    }

    // Random page-sized overwrites in windows until steady.
    let mut rng = rng_for(seed, "perf.precondition");
    // Windows long enough to average over many GC cycles (at least 256
    // blocks' worth of pages), so noise does not pass for instability.
    let window = ((pages as f64 * spec.window_percent / 100.0) as u64).max(256 * u64::from(g.pages_per_block())).max(1);
    let slack = f64::from(g.planes());
    let mut windows: Vec<PreconditionWindow> = Vec::new();
    let mut random = 0u64;
    let mut steady = false;
    while random < random_cap && !steady && !stop(session) {
        let s0 = session.flash.stats();
        let (h0, a0) = (s0.cause(Cause::Host).programs(), s0.total().programs());
        let n = window;
        for i in 0..n {
            let page = rng.random_range(0..pages);
            session.submit(&write(page * u64::from(spp), spp))?;
            if i % 65_536 == 0 {
                progress((pages + random + i) * page_bytes, total);
            }
        }
        random += n;
        let s1 = session.flash.stats();
        let (h1, a1) = (s1.cause(Cause::Host).programs(), s1.total().programs());
        let waf = crate::report::waf(h1 - h0, a1 - a0);
        windows.push(PreconditionWindow { random_bytes: random * page_bytes, waf, free_blocks: free_blocks(session) });
        if windows.len() >= STEADY_WINDOWS {
            let last = &windows[windows.len() - STEADY_WINDOWS..];
            let free = |w: &PreconditionWindow| w.free_blocks.map_or(0.0, |f| f as f64);
            steady = settled(last.iter().map(|w| w.waf), spec.tolerance, 0.0)
                && settled(last.iter().map(free), spec.tolerance, slack);
        }
    }
    progress(total, total);
    Ok(PreconditionReport {
        fill_percent: spec.fill_percent,
        sequential_bytes: pages * page_bytes,
        random_bytes: random * page_bytes,
        waf_steady: windows.last().map_or(1.0, |w| w.waf),
        free_blocks: free_blocks(session),
        windows,
        steady,
        wall_seconds: started.elapsed().as_secs_f64(),
        cpu_seconds: resources::cpu_seconds() - cpu0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn the_spread_test_needs_every_window_close_to_the_mean() {
        assert!(settled([10.0, 10.1, 9.95, 10.05].into_iter(), 0.02, 0.0));
        assert!(!settled([10.0, 10.1, 9.7, 10.05].into_iter(), 0.02, 0.0));
        assert!(settled([100.0, 103.0].into_iter(), 0.02, 4.0), "slack");
    }

    #[test]
    fn preconditioning_reaches_a_steady_state_and_says_so() {
        let config = Config::preset("tiny").unwrap();
        let mut s = Session::new(&config, 1, 8, 10).unwrap();
        let spec = PreconditionSpec { max_overwrite: 40.0, ..Default::default() };
        let r = precondition(&mut s, &spec, 1, &mut |_, _| {}).unwrap();
        assert!(r.steady, "{:?}", r.windows);
        assert!(r.waf_steady > 1.5, "overwrites on a full drive amplify: {}", r.waf_steady);
        assert!(s.flash.log().is_clean());
        // Capped before steady state: the report says so.
        let mut s = Session::new(&config, 1, 8, 10).unwrap();
        let capped = PreconditionSpec { max_overwrite: 0.1, ..Default::default() };
        let r = precondition(&mut s, &capped, 1, &mut |_, _| {}).unwrap();
        assert!(!r.steady);
        assert_eq!(r.windows.len(), 1);
    }
}
