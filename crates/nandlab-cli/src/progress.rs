//! The progress bar of a run on a terminal: on standard error, only when it
//! is a terminal and not turned off (`--no-progress`, `--quiet`).
//!
//! `stress` and `perf` show the work done of the target (bytes, or
//! requests when `--max-requests` bounds a perf run), requests per second
//! of real time, the write amplification so far and the time left; a
//! `crash` campaign shows the points tested of those planned, the failures
//! so far and, once it shrinks a finding, the shrink rounds. The figures
//! come from the library's progress callback and board
//! ([`nandlab::run::progress`]); the bar only displays them, so a report is
//! the same with or without it.

use nandlab::run::progress::{CrashProgress, CrashProgressSnapshot, ProgressUnit, RunProgress};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A bar on stderr, unless disabled or stderr is not a terminal.
fn new_bar(disabled: bool) -> Option<indicatif::ProgressBar> {
    if disabled || !std::io::stderr().is_terminal() {
        return None;
    }
    Some(indicatif::ProgressBar::new(0))
}

fn style(template: &str) -> indicatif::ProgressStyle {
    indicatif::ProgressStyle::with_template(template).expect("valid template")
}

/// The bar of a `stress` or `perf` run.
pub struct RunBar {
    bar: Option<indicatif::ProgressBar>,
    unit: Option<ProgressUnit>,
}

impl RunBar {
    pub fn new(disabled: bool) -> RunBar {
        RunBar { bar: new_bar(disabled), unit: None }
    }

    /// Show `p` (called by the run every few thousand requests).
    pub fn show(&mut self, p: &RunProgress) {
        let Some(bar) = &self.bar else { return };
        if self.unit != Some(p.unit) {
            self.unit = Some(p.unit);
            bar.set_style(style(match p.unit {
                ProgressUnit::Bytes => "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {msg} eta {eta}",
                ProgressUnit::Requests => {
                    "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} requests {msg} eta {eta}"
                }
            }));
        }
        if let Some(t) = p.total {
            bar.set_length(t);
        }
        bar.set_position(p.done);
        bar.set_message(run_message(p, bar.elapsed().as_secs_f64()));
    }

    pub fn finish(self) {
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}

/// `phase, N req/s, WAF W`: the phase only when it is not the whole run.
fn run_message(p: &RunProgress, seconds: f64) -> String {
    let rate = if seconds > 0.0 { p.requests as f64 / seconds } else { 0.0 };
    let waf = p.waf().map_or_else(|| "-".to_string(), |w| format!("{w:.2}"));
    let phase = if p.phase == "stress" { String::new() } else { format!("{}, ", p.phase) };
    format!("({phase}{rate:.0} req/s, WAF {waf})")
}

/// The text of a crash campaign's bar.
fn crash_message(s: &CrashProgressSnapshot) -> String {
    let mut m = format!("points {}/{}, failures {}", s.points_tested, s.points_planned, s.points_failed);
    if s.shrink_rounds > 0 {
        m += &format!(", shrink rounds {} ({} points tried)", s.shrink_rounds, s.shrink_points_tried);
    }
    m
}

/// The bar of a crash campaign: a thread reads the campaign's board a few
/// times a second until the campaign ends.
pub struct CrashBar {
    board: Option<Arc<CrashProgress>>,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CrashBar {
    pub fn new(disabled: bool) -> CrashBar {
        let done = Arc::new(AtomicBool::new(false));
        let Some(bar) = new_bar(disabled) else { return CrashBar { board: None, done, thread: None } };
        bar.set_style(style("{spinner} [{elapsed_precise}] {wide_bar} {msg}"));
        let board = Arc::new(CrashProgress::default());
        let (b, d) = (board.clone(), done.clone());
        let thread = std::thread::spawn(move || {
            let draw = || {
                let s = b.snapshot();
                bar.set_length(s.points_planned.max(1));
                bar.set_position(s.points_tested);
                bar.set_message(crash_message(&s));
                bar.tick();
            };
            while !d.load(Ordering::Relaxed) {
                draw();
                std::thread::sleep(Duration::from_millis(100));
            }
            // The final counts are drawn once before the bar goes, even
            // when the campaign ended between two redraws (at least 100 ms
            // after the last one, so the draw rate limit lets it through).
            draw();
            bar.finish_and_clear();
        });
        CrashBar { board: Some(board), done, thread: Some(thread) }
    }

    /// The board to give the campaign (none when nothing is shown).
    pub fn board(&self) -> Option<Arc<CrashProgress>> {
        self.board.clone()
    }

    pub fn finish(mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_message_has_the_rate_and_the_waf_so_far() {
        let p = RunProgress {
            phase: "timed",
            requests: 5000,
            host_pages_programmed: 100,
            pages_programmed: 184,
            ..RunProgress::default()
        };
        assert_eq!(run_message(&p, 2.0), "(timed, 2500 req/s, WAF 1.84)");
        let q = RunProgress { phase: "stress", ..RunProgress::default() };
        assert_eq!(run_message(&q, 0.0), "(0 req/s, WAF -)");
    }

    #[test]
    fn the_crash_message_adds_shrink_rounds_once_shrinking() {
        let mut s =
            CrashProgressSnapshot { points_planned: 40, points_tested: 12, points_failed: 2, ..Default::default() };
        assert_eq!(crash_message(&s), "points 12/40, failures 2");
        s.shrink_rounds = 3;
        s.shrink_points_tried = 90;
        assert_eq!(crash_message(&s), "points 12/40, failures 2, shrink rounds 3 (90 points tried)");
    }
}
