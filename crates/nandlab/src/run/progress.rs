//! Progress of a run while it goes, for a display (the CLI's bar on a
//! terminal).
//!
//! Two shapes, as the runs differ:
//!
//! - `stress` and `perf` run on the caller's thread and call a callback
//!   (`&mut dyn FnMut(&RunProgress)`) every few thousand requests or
//!   events and once at the end. The figures are counters the run keeps
//!   anyway, read at that moment; a caller that does not display anything
//!   passes `&mut |_| {}`. Nothing of it goes into the report.
//! - A `crash` campaign tests points on several threads at once, so it
//!   posts to a [`CrashProgress`] board of atomic counters the caller may
//!   share ([`CrashOptions::progress`](super::crash::CrashOptions)) and
//!   read from another thread; without a board nothing is counted.
//!
//! Progress never changes what a run does or reports: it only reads.

use std::sync::atomic::{AtomicU64, Ordering};

/// What [`RunProgress::done`] and [`RunProgress::total`] count.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum ProgressUnit {
    /// Bytes of the workload (written or read, as the workload counts them).
    #[default]
    Bytes,
    /// Host requests issued (a perf run bounded by `--max-requests`).
    Requests,
}

/// How far a `stress` or `perf` run has got.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct RunProgress {
    /// `stress`, or perf's `precondition` and `timed`.
    pub phase: &'static str,
    /// Work done of the total (unknown for an unbounded workload), in `unit`.
    pub done: u64,
    pub total: Option<u64>,
    pub unit: ProgressUnit,
    /// Host requests completed (stress) or issued (perf) in this phase.
    pub requests: u64,
    /// Bytes the host wrote in this phase.
    pub host_write_bytes: u64,
    /// Pages programmed for host data and in all, in this phase.
    pub host_pages_programmed: u64,
    pub pages_programmed: u64,
}

impl RunProgress {
    /// The write amplification so far: pages programmed per host page
    /// programmed (none before the first host program).
    pub fn waf(&self) -> Option<f64> {
        (self.host_pages_programmed > 0).then(|| self.pages_programmed as f64 / self.host_pages_programmed as f64)
    }
}

/// A crash campaign's counters, updated by its threads as they go.
#[derive(Debug, Default)]
pub struct CrashProgress {
    points_planned: AtomicU64,
    points_tested: AtomicU64,
    points_failed: AtomicU64,
    shrink_rounds: AtomicU64,
    shrink_points_tried: AtomicU64,
}

/// A reading of a [`CrashProgress`] board.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CrashProgressSnapshot {
    /// Points the campaign planned (known once the counting pass is done).
    pub points_planned: u64,
    pub points_tested: u64,
    /// Points whose recovery broke the guarantee.
    pub points_failed: u64,
    /// Rounds of shrinking the first finding, and the points they tried.
    pub shrink_rounds: u64,
    pub shrink_points_tried: u64,
}

impl CrashProgress {
    pub fn snapshot(&self) -> CrashProgressSnapshot {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CrashProgressSnapshot {
            points_planned: get(&self.points_planned),
            points_tested: get(&self.points_tested),
            points_failed: get(&self.points_failed),
            shrink_rounds: get(&self.shrink_rounds),
            shrink_points_tried: get(&self.shrink_points_tried),
        }
    }

    pub(crate) fn planned(&self, points: u64) {
        self.points_planned.store(points, Ordering::Relaxed);
    }

    pub(crate) fn tested(&self, points: u64, failed: u64) {
        self.points_tested.fetch_add(points, Ordering::Relaxed);
        self.points_failed.fetch_add(failed, Ordering::Relaxed);
    }

    pub(crate) fn shrink_round(&self, points: u64) {
        self.shrink_rounds.fetch_add(1, Ordering::Relaxed);
        self.shrink_points_tried.fetch_add(points, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waf_so_far_is_all_programs_per_host_program_and_none_before_any() {
        let mut p = RunProgress { host_pages_programmed: 0, pages_programmed: 5, ..RunProgress::default() };
        assert_eq!(p.waf(), None);
        p.host_pages_programmed = 4;
        p.pages_programmed = 6;
        assert_eq!(p.waf(), Some(1.5));
    }

    #[test]
    fn the_crash_board_adds_up_what_threads_post() {
        let b = CrashProgress::default();
        b.planned(10);
        std::thread::scope(|s| {
            s.spawn(|| b.tested(3, 1));
            s.spawn(|| b.tested(2, 0));
        });
        b.shrink_round(7);
        assert_eq!(
            b.snapshot(),
            CrashProgressSnapshot {
                points_planned: 10,
                points_tested: 5,
                points_failed: 1,
                shrink_rounds: 1,
                shrink_points_tried: 7
            }
        );
    }
}
