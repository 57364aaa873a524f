//! Preconditioning (aging) a drive before a timed measurement, untimed, at
//! `stress` speed, with the oracle on.
//!
//! SNIA's Performance Test Specification (PTS) asks for a drive in *steady
//! state* before its performance is measured; a fresh drive has no garbage
//! to collect and flatters every FTL. nandlab fills the chosen share of the
//! logical space sequentially, then overwrites it with random page-sized
//! writes in *windows* of a fixed volume. After each window it measures
//! the window's write amplification (all pages programmed over host pages
//! programmed in the window) and the FTL's free blocks at its end.
//!
//! # Steady state
//!
//! SNIA PTS's criterion, over a measurement window of the last five
//! rounds, with nandlab's tolerances: for both WAF and free blocks,
//!
//! - **no trend**: the least-squares line through the five values moves
//!   by at most 2 % of their mean across the five windows (PTS: 10 %);
//! - **bounded excursion**: max − min is within 5 % of the mean (PTS:
//!   20 %).
//!
//! Free blocks get a slack of one block per plane in both tests (an FTL
//! that keeps a fixed reserve per plane moves by whole blocks). The
//! excursion alone is not sound (see `docs/design-notes/drive.md`): a WAF
//! that still drifts slowly passes it, and one that is stable but noisy —
//! small windows on a drive whose victims hold few invalid pages — never
//! does. The trend test catches the drift; the 5 % excursion allows the
//! noise.
//!
//! A window is 2 % of the filled volume, and at least 256 blocks' worth of
//! pages so that small drives average over many GC cycles. Preconditioning
//! stops at steady state, or after a cap on the random volume, and says
//! which.
//!
//! # Speed
//!
//! Preconditioning runs at `stress` speed: the timing observer is detached
//! (untimed work costs it nothing), random pages are drawn
//! [`Session::PREFETCH_DISTANCE`] requests ahead so the oracle's and the
//! FTL's tables are prefetched (the FTL's
//! map and valid bits are the cache misses that dominate), and the fill is
//! written in 1 MiB requests.

use super::super::{RunError, Session, StopFlag};
use crate::flash::{Cause, Flash};
use crate::report::perf::{PreconditionReport, PreconditionWindow};
use crate::report::resources;
use crate::seed::rng_for;
use crate::workload::{HostOp, HostRequest};
use rand::RngExt;
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
    /// Largest trend across the steady-state windows, as a share of the
    /// mean (see the module docs).
    pub tolerance: f64,
}

impl Default for PreconditionSpec {
    fn default() -> Self {
        PreconditionSpec { fill_percent: 100.0, max_overwrite: 2.0, window_percent: 2.0, tolerance: 0.02 }
    }
}

impl PreconditionSpec {
    /// The spec for `--precondition FILL` (a share such as `75%`) and
    /// `--precondition-max X`; the other fields keep their defaults. Errors
    /// name the option and the value.
    pub fn parse(fill: &str, max_overwrite: f64) -> Result<PreconditionSpec, String> {
        let t = fill.trim().trim_end_matches('%');
        let fill_percent: f64 =
            t.parse().map_err(|_| format!("--precondition `{fill}`: expected a share such as 75%"))?;
        if !(fill_percent > 0.0 && fill_percent <= 100.0) {
            return Err(format!("--precondition `{fill}`: must be within (0, 100]%"));
        }
        if !(max_overwrite.is_finite() && max_overwrite >= 0.0) {
            return Err("--precondition-max must be a non-negative number".into());
        }
        Ok(PreconditionSpec { fill_percent, max_overwrite, ..Default::default() })
    }
}

/// The FTL's free blocks, when it reports them.
pub fn free_blocks(session: &Session) -> Option<u64> {
    session.drive().ftl().stats().free_blocks
}

/// Windows in SNIA PTS's measurement window.
const STEADY_WINDOWS: usize = 5;
/// Largest excursion (max − min) as a share of the mean.
const EXCURSION_TOLERANCE: f64 = 0.05;

/// Whether `values` (successive windows) are steady: the least-squares
/// trend across them moves by at most `trend_tol` of their mean, and their
/// excursion is within `EXCURSION_TOLERANCE` of it (each test also passes
/// within `slack`). See the module docs.
fn settled(values: &[f64], trend_tol: f64, slack: f64) -> bool {
    let n = values.len() as f64;
    if values.len() < 2 {
        return false;
    }
    let mean = values.iter().sum::<f64>() / n;
    let (lo, hi) = values.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let mid = (n - 1.0) / 2.0;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, &v) in values.iter().enumerate() {
        let x = i as f64 - mid;
        sxy += x * (v - mean);
        sxx += x * x;
    }
    let trend = (sxy / sxx * (n - 1.0)).abs();
    trend <= (trend_tol * mean.abs()).max(slack) && hi - lo <= (EXCURSION_TOLERANCE * mean.abs()).max(slack)
}

/// Precondition `session` as `spec` says; `progress(done, total)` in bytes.
pub fn precondition(
    session: &mut Session,
    spec: &PreconditionSpec,
    seed: u64,
    stop: &StopFlag,
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
    let g = session.drive().flash().geometry().clone();
    // Untimed: the observers (the timing model) are detached meanwhile.
    let observers = session.drive_mut().take_observers();
    let result = fill_and_overwrite(session, spec, seed, stop, progress);
    session.drive_mut().restore_observers(observers);
    let (sequential_pages, random_pages, windows, steady) = result?;
    let page_bytes = u64::from(g.sectors_per_page()) * u64::from(g.sector_size_bytes());
    Ok(PreconditionReport {
        fill_percent: spec.fill_percent,
        sequential_bytes: sequential_pages * page_bytes,
        random_bytes: random_pages * page_bytes,
        waf_steady: windows.last().map_or(1.0, |w| w.waf),
        free_blocks: free_blocks(session),
        windows,
        steady,
        wall_seconds: started.elapsed().as_secs_f64(),
        cpu_seconds: resources::cpu_seconds() - cpu0,
    })
}

/// The sequential fill and the random windows: (pages filled, random
/// pages written, windows, steady).
fn fill_and_overwrite(
    session: &mut Session,
    spec: &PreconditionSpec,
    seed: u64,
    stop: &StopFlag,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(u64, u64, Vec<PreconditionWindow>, bool), RunError> {
    let g = session.drive().flash().geometry().clone();
    let spp = g.sectors_per_page();
    let sector = u64::from(g.sector_size_bytes());
    let logical_pages = session.host().oracle().logical_sectors() / u64::from(spp);
    let pages = ((logical_pages as f64 * spec.fill_percent / 100.0) as u64).max(1);
    let page_bytes = u64::from(spp) * sector;
    let random_cap = (pages as f64 * spec.max_overwrite) as u64;
    let total = (pages + random_cap) * page_bytes;
    let write = |lba: u64, sectors: u32| HostRequest { op: HostOp::Write, lba, sectors, arrival_ns: 0, job: 0 };
    let halt = |s: &Session| s.ftl_failed() || s.drive().flash().log().errors() > 0 || stop.is_set();

    // Sequential fill, in large requests.
    let chunk = (256 / u64::from(spp)).max(1) * 8;
    let mut p = 0;
    while p < pages && !halt(session) {
        let n = chunk.min(pages - p);
        session.submit(&write(p * u64::from(spp), (n * u64::from(spp)) as u32))?;
        p += n;
        if p % (chunk * 1024) == 0 {
            progress(p * page_bytes, total);
        }
    }

    if stop.is_set() {
        return Ok((p, 0, Vec::new(), false));
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
    // Pages are drawn ahead so their table entries are prefetched.
    let mut ahead: [u64; Session::PREFETCH_DISTANCE + 1] = std::array::from_fn(|_| rng.random_range(0..pages));
    while random < random_cap && !steady && !halt(session) {
        let s0 = session.drive().flash().stats();
        let (h0, a0) = (s0.cause(Cause::Host).programs(), s0.total().programs());
        let n = window.min(random_cap - random);
        for i in 0..n {
            if stop.is_set() {
                return Ok((pages, random + i, windows, false));
            }
            let page = ahead[0];
            ahead.rotate_left(1);
            let newest = ahead.last_mut().expect("not empty");
            *newest = rng.random_range(0..pages);
            session.prefetch(&write(*newest * u64::from(spp), spp), true);
            session.submit(&write(page * u64::from(spp), spp))?;
            if i % 65_536 == 0 {
                progress((pages + random + i) * page_bytes, total);
            }
        }
        random += n;
        let s1 = session.drive().flash().stats();
        let (h1, a1) = (s1.cause(Cause::Host).programs(), s1.total().programs());
        let waf = crate::report::waf(h1 - h0, a1 - a0);
        windows.push(PreconditionWindow { random_bytes: random * page_bytes, waf, free_blocks: free_blocks(session) });
        steady = steady_state(&windows, spec.tolerance, slack);
    }
    progress(total, total);
    Ok((pages, random, windows, steady))
}

/// Whether the last [`STEADY_WINDOWS`] windows are steady in WAF and in
/// free blocks (see the module docs).
fn steady_state(windows: &[PreconditionWindow], tolerance: f64, free_block_slack: f64) -> bool {
    if windows.len() < STEADY_WINDOWS {
        return false;
    }
    let last = &windows[windows.len() - STEADY_WINDOWS..];
    let waf: Vec<f64> = last.iter().map(|w| w.waf).collect();
    let free: Vec<f64> = last.iter().map(|w| w.free_blocks.map_or(0.0, |f| f as f64)).collect();
    settled(&waf, tolerance, 0.0) && settled(&free, tolerance, free_block_slack)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fill_parses_as_a_share_and_out_of_range_values_are_refused() {
        assert_eq!(PreconditionSpec::parse("75%", 2.0).unwrap().fill_percent, 75.0);
        assert_eq!(PreconditionSpec::parse("100", 0.0).unwrap().max_overwrite, 0.0);
        assert_eq!(PreconditionSpec::parse("0%", 2.0).unwrap_err(), "--precondition `0%`: must be within (0, 100]%");
        assert!(PreconditionSpec::parse("lots", 2.0).unwrap_err().contains("expected a share such as 75%"));
        assert_eq!(
            PreconditionSpec::parse("50%", f64::NAN).unwrap_err(),
            "--precondition-max must be a non-negative number"
        );
    }
    use crate::config::Config;

    #[test]
    fn steady_means_no_trend_and_a_bounded_excursion() {
        assert!(settled(&[10.0, 10.3, 9.8, 10.2, 10.0], 0.02, 0.0), "noisy but flat");
        // A slow drift within the old 2 % spread is still a trend.
        assert!(!settled(&[10.0, 10.05, 10.1, 10.15, 10.2], 0.01, 0.0), "drifting");
        assert!(!settled(&[10.0, 11.0, 9.0, 10.5, 9.6], 0.02, 0.0), "excursion of 20 %");
        assert!(settled(&[100.0, 103.0, 101.0, 104.0, 102.0], 0.0, 4.0), "within the slack");
        assert!(!settled(&[10.0], 0.02, 0.0), "one window proves nothing");
    }

    #[test]
    fn steady_state_needs_both_waf_and_free_blocks() {
        let w = |waf: f64, free: u64| PreconditionWindow { random_bytes: 0, waf, free_blocks: Some(free) };
        let flat: Vec<_> = (0..5).map(|_| w(3.0, 100)).collect();
        assert!(steady_state(&flat, 0.02, 2.0));
        assert!(!steady_state(&flat[..4], 0.02, 2.0), "five windows needed");
        let falling: Vec<_> = (0..5).map(|i| w(3.0, 100 - 10 * i)).collect();
        assert!(!steady_state(&falling, 0.02, 2.0), "free blocks still falling");
        let rising: Vec<_> = (0..5).map(|i| w(3.0 + 0.1 * i as f64, 100)).collect();
        assert!(!steady_state(&rising, 0.02, 2.0), "WAF still rising");
    }

    #[test]
    fn preconditioning_reaches_a_steady_state_and_says_so() {
        let config = Config::preset("tiny").unwrap();
        let mut s = Session::new(&config, 1, 8, 10).unwrap();
        let spec = PreconditionSpec { max_overwrite: 40.0, ..Default::default() };
        let r = precondition(&mut s, &spec, 1, &StopFlag::default(), &mut |_, _| {}).unwrap();
        assert!(r.steady, "{:?}", r.windows);
        assert!(r.waf_steady > 1.5, "overwrites on a full drive amplify: {}", r.waf_steady);
        assert!(s.drive().flash().log().is_clean());
        // Capped before steady state: the report says so.
        let mut s = Session::new(&config, 1, 8, 10).unwrap();
        let capped = PreconditionSpec { max_overwrite: 0.1, ..Default::default() };
        let r = precondition(&mut s, &capped, 1, &StopFlag::default(), &mut |_, _| {}).unwrap();
        assert!(!r.steady);
        assert_eq!(r.windows.len(), 1);
    }
}
