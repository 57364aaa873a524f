//! A resource timeline: the intervals in which one resource (a channel bus,
//! a die, the host link, the DRAM) is reserved.
//!
//! Requests are simulated in arrival order, but their operations may be
//! reserved far in the future (a program behind a long erase, a read's
//! data-out after its tR). A later request must not queue behind such a
//! reservation when the resource is idle earlier, so [`Timeline::fit`]
//! finds the earliest gap long enough (first fit, "backfilling") rather
//! than the end of the last reservation. Intervals that end before the
//! current simulated time can never matter again and are pruned, so a
//! timeline holds only the work in flight: no allocation in steady state.
//!
//! Each interval carries one tag bit (here: "reserved by garbage
//! collection") so that a wait can be attributed to what caused it;
//! neighbouring intervals merge only when their tags agree. A wait from
//! `t` to a start `s` is attributed in proportion to the work ahead of it:
//! [`Timeline::gc_ns_between`] is the time garbage collection holds the
//! resource within `[t, s)`, and the rest of the wait is other work (or
//! gaps too short to use).
//!
//! Pruning is safe only if nothing is later fitted before the prune
//! horizon; [`Timeline::enable_audit`] keeps every reservation so a test
//! can prove that no instant is ever booked twice
//! ([`Timeline::double_booking`]).

use std::collections::VecDeque;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Busy {
    start: u64,
    end: u64,
    gc: bool,
}

/// Where an operation fits on a timeline.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Fit {
    pub start: u64,
}

/// One resource's reservations. See the module docs.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    busy: VecDeque<Busy>,
    /// Total reserved time (for utilisation), ns.
    reserved_ns: u64,
    last_end: u64,
    /// The prune horizon: intervals ending at or before it are forgotten.
    pruned_to: u64,
    /// Every reservation ever made, when auditing (tests).
    audit: Option<Vec<(u64, u64)>>,
}

impl Timeline {
    /// The earliest start at or after `t` where `duration` ns are free.
    pub fn fit(&self, t: u64, duration: u64) -> Fit {
        let mut fit = Fit { start: t };
        if duration == 0 {
            return fit; // takes no time, needs nothing
        }
        debug_assert!(t >= self.pruned_to, "fit at {t} before the prune horizon {}", self.pruned_to);
        if self.busy.back().map_or(true, |b| b.end <= t) {
            return fit; // after everything reserved: the common case
        }
        // Intervals are disjoint and sorted, so their ends are sorted too.
        let mut i = self.busy.partition_point(|b| b.end <= t);
        while let Some(b) = self.busy.get(i) {
            if b.start >= fit.start.saturating_add(duration) {
                break;
            }
            fit.start = fit.start.max(b.end);
            i += 1;
        }
        fit
    }

    /// Time garbage collection holds this resource within `[from, to)`, ns
    /// (the GC share of a wait over that span).
    pub fn gc_ns_between(&self, from: u64, to: u64) -> u64 {
        if to <= from {
            return 0;
        }
        let mut i = self.busy.partition_point(|b| b.end <= from);
        let mut ns = 0;
        while let Some(b) = self.busy.get(i) {
            if b.start >= to {
                break;
            }
            if b.gc {
                ns += b.end.min(to) - b.start.max(from);
            }
            i += 1;
        }
        ns
    }

    /// Reserve `[start, start + duration)`, which must be free (from [`Timeline::fit`]).
    pub fn reserve(&mut self, start: u64, duration: u64, gc: bool) {
        if duration == 0 {
            return;
        }
        let end = start + duration;
        if let Some(log) = &mut self.audit {
            log.push((start, end));
        }
        self.reserved_ns += duration;
        self.last_end = self.last_end.max(end);
        if let Some(last) = self.busy.back_mut() {
            if last.end <= start {
                // Appending (the common case): no search.
                if last.end == start && last.gc == gc {
                    last.end = end;
                } else {
                    self.busy.push_back(Busy { start, end, gc });
                }
                return;
            }
        }
        let i = self.busy.partition_point(|b| b.start < start);
        debug_assert!(i == 0 || self.busy[i - 1].end <= start, "overlap before");
        debug_assert!(i == self.busy.len() || self.busy[i].start >= end, "overlap after");
        let merge_prev = i > 0 && self.busy[i - 1].end == start && self.busy[i - 1].gc == gc;
        let merge_next = i < self.busy.len() && self.busy[i].start == end && self.busy[i].gc == gc;
        match (merge_prev, merge_next) {
            (true, true) => {
                self.busy[i - 1].end = self.busy[i].end;
                self.busy.remove(i);
            }
            (true, false) => self.busy[i - 1].end = end,
            (false, true) => self.busy[i].start = start,
            (false, false) => self.busy.insert(i, Busy { start, end, gc }),
        }
    }

    /// Forget reservations that end at or before `now`: nothing scheduled
    /// from now on can start before `now`.
    pub fn prune(&mut self, now: u64) {
        self.pruned_to = self.pruned_to.max(now);
        while self.busy.front().is_some_and(|b| b.end <= now) {
            self.busy.pop_front();
        }
    }

    /// Keep every reservation from now on, so that
    /// [`Timeline::double_booking`] can check them all (memory grows with
    /// the run: for tests and debugging).
    pub fn enable_audit(&mut self) {
        self.audit.get_or_insert_with(Vec::new);
    }

    /// Two audited reservations that overlap, if any: a resource booked
    /// twice for the same instant.
    pub fn double_booking(&self) -> Option<((u64, u64), (u64, u64))> {
        let mut all = self.audit.clone()?;
        all.sort_unstable();
        all.windows(2).find(|w| w[1].0 < w[0].1).map(|w| (w[0], w[1]))
    }

    /// When the last reservation ends.
    pub fn busy_until(&self) -> u64 {
        self.last_end
    }

    /// Total time reserved so far, ns.
    pub fn reserved_ns(&self) -> u64 {
        self.reserved_ns
    }

    /// Intervals held (for tests and memory accounting).
    pub fn len(&self) -> usize {
        self.busy.len()
    }

    pub fn is_empty(&self) -> bool {
        self.busy.is_empty()
    }
}

/// A pool of identical servers (controller cores): each request takes the
/// core that frees first, in the order requests reach it.
#[derive(Clone, Debug)]
pub struct ServerPool {
    free_at: Vec<u64>,
    busy_ns: u64,
}

impl ServerPool {
    pub fn new(servers: u32) -> Self {
        ServerPool { free_at: vec![0; servers.max(1) as usize], busy_ns: 0 }
    }

    /// Serve `duration` ns of work ready at `t`: returns (start, end).
    pub fn serve(&mut self, t: u64, duration: u64) -> (u64, u64) {
        let (i, &free) = self.free_at.iter().enumerate().min_by_key(|(_, f)| **f).expect("at least one server");
        let start = t.max(free);
        if duration > 0 {
            self.free_at[i] = start + duration;
            self.busy_ns += duration;
        }
        (start, start + duration)
    }

    /// Total busy time of all servers, ns.
    pub fn busy_ns(&self) -> u64 {
        self.busy_ns
    }

    pub fn servers(&self) -> u32 {
        self.free_at.len() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_job_backfills_a_gap_before_a_later_reservation() {
        let mut t = Timeline::default();
        t.reserve(100, 50, false);
        assert_eq!(t.fit(0, 100).start, 0, "fits before 100");
        assert_eq!(t.fit(0, 101).start, 150, "too long for the gap");
        assert_eq!(t.fit(120, 10).start, 150, "inside the reservation");
        t.reserve(0, 100, false);
        assert_eq!(t.len(), 1, "touching intervals merge");
        assert_eq!(t.fit(0, 1).start, 150);
        assert_eq!(t.reserved_ns(), 150);
    }

    #[test]
    fn waits_are_attributed_to_gc_in_proportion_to_its_work_ahead() {
        let mut t = Timeline::default();
        t.reserve(0, 10, false);
        t.reserve(10, 30, true);
        t.reserve(40, 10, false);
        assert_eq!(t.len(), 3, "different tags do not merge");
        let f = t.fit(5, 1);
        assert_eq!(f.start, 50, "behind all three");
        // Of the 45 ns waited, GC held the resource 30: the last
        // reservation ahead was not GC's, yet most of the wait was.
        assert_eq!(t.gc_ns_between(5, f.start), 30);
        assert_eq!(t.gc_ns_between(20, 45), 20, "clipped to the span");
        assert_eq!(t.gc_ns_between(0, 10), 0);
        assert_eq!(t.fit(5, 0).start, 5, "zero-length work never waits");
    }

    #[test]
    fn the_audit_finds_a_double_booking_and_passes_a_clean_timeline() {
        let mut t = Timeline::default();
        t.enable_audit();
        t.reserve(0, 10, false);
        t.reserve(20, 10, false);
        t.prune(30);
        let f = t.fit(30, 5);
        t.reserve(f.start, 5, false);
        assert_eq!(t.double_booking(), None);
        // Pruned work is invisible to `fit`: booking over it is caught.
        t.reserve(22, 3, false);
        assert_eq!(t.double_booking(), Some(((20, 30), (22, 25))));
    }

    #[test]
    fn pruning_keeps_only_work_in_flight() {
        let mut t = Timeline::default();
        for i in 0..10 {
            t.reserve(i * 20, 10, false);
        }
        t.prune(95);
        assert_eq!(t.len(), 5);
        assert_eq!(t.fit(95, 10).start, 110);
        assert_eq!(t.busy_until(), 190);
    }

    #[test]
    fn the_server_pool_uses_the_first_free_core() {
        let mut p = ServerPool::new(2);
        assert_eq!(p.serve(0, 10), (0, 10));
        assert_eq!(p.serve(0, 10), (0, 10));
        assert_eq!(p.serve(0, 10), (10, 20));
        assert_eq!(p.busy_ns(), 30);
    }
}
