//! A resource timeline: the intervals in which one resource (a channel bus,
//! a die, the host link, the DRAM) is reserved.
//!
//! Requests are simulated in arrival order, but their operations may be
//! reserved far in the future (a program behind a long erase, a read's
//! data-out after its tR). A later request must not queue behind such a
//! reservation when the resource is idle earlier, so [`Timeline::fit`]
//! finds the earliest gap long enough (first fit, "backfilling") rather
//! than the end of the last reservation. Intervals that end before the
//! current simulated time can never matter again and are pruned (a slot of
//! the calendar at a time, see [`Timeline::prune`]), so a timeline holds
//! little more than the work in flight: no allocation in steady state.
//! Its calendar has at most `MAX_SLOTS` (8192) slots whatever the times booked
//! (a booking further ahead widens the slots), so its memory follows the
//! intervals held, not the simulated time between them.
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

/// A reserved interval `[start, end)` and its tag, in 16 bytes: the tag
/// rides in the top bit of the end (simulated times stay below 2^63 ns,
/// 292 years), so four intervals share a cache line instead of two and a
/// half. Timelines are booked far ahead and their slots are cold when a
/// walk or a binary search reaches them: their memory traffic is the cost.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Busy {
    start: u64,
    end_and_gc: u64,
}

impl Busy {
    const GC_BIT: u64 = 1 << 63;

    fn new(start: u64, end: u64, gc: bool) -> Busy {
        debug_assert!(end < Self::GC_BIT, "end {end} ns out of range");
        Busy { start, end_and_gc: end | if gc { Self::GC_BIT } else { 0 } }
    }

    #[inline(always)]
    fn end(&self) -> u64 {
        self.end_and_gc & !Self::GC_BIT
    }

    #[inline(always)]
    fn gc(&self) -> bool {
        self.end_and_gc & Self::GC_BIT != 0
    }

    fn set_end(&mut self, end: u64) {
        *self = Busy::new(self.start, end, self.gc());
    }
}

/// Where an operation fits on a timeline.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Fit {
    pub start: u64,
}

/// log2 of a slot's span, ns (about 1 ms): a slot holds the intervals that
/// start in it, a few dozen at most on a busy channel.
const SLOT_SHIFT: u32 = 20;

/// At most this many slots in a calendar (192 KiB of slot headers). A
/// booking further ahead than that many slots from the first (a long
/// latency, or a far arrival with work still held) doubles the slot span,
/// merging neighbouring slots, until it fits: the calendar's memory follows
/// the intervals held, never the distance in time between them. The span
/// returns to [`SLOT_SHIFT`] when the timeline empties. Backlogs seen on
/// real presets hold a few hundred slots, far below it.
const MAX_SLOTS: usize = 8192;

/// Emptied slot vectors kept for reuse, per timeline: enough to absorb the
/// swing of a GC-bound drive's backlog (a few hundred slots per timeline)
/// without freeing and regrowing vectors, and no more, since every
/// timeline holds its spares at its own high-water mark (the measurements
/// behind the number: `docs/design-notes/drive.md`).
const SPARE_SLOTS: usize = 256;

/// A position: (slot, index in the slot).
type Pos = (usize, usize);

/// Where a new interval fits: its start, and the intervals just before and
/// after it, with their positions (candidates for merging, read once by the
/// walk that found them); no `next` means after everything.
#[derive(Copy, Clone, Debug)]
struct Gap {
    start: u64,
    prev: Option<(Pos, Busy)>,
    next: Option<(Pos, Busy)>,
}

/// One resource's reservations. See the module docs.
///
/// The intervals are kept sorted and disjoint in *slots* of simulated time
/// (a calendar): each interval lives in the slot of its start. A resource
/// with work reserved far ahead (GC copy chains of many dies on one
/// channel) holds thousands of intervals; a flat sorted array would move
/// half of them on every insertion into a gap, here only the few sharing
/// its slot move. Emptied slots' vectors are reused: no allocation in
/// steady state. While any interval is held, the last slot holds one (the
/// last interval), so a booking after everything reaches it at once.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    slots: VecDeque<Vec<Busy>>,
    /// log2 of the slot span beyond [`SLOT_SHIFT`] (see [`MAX_SLOTS`]).
    extra_shift: u32,
    /// Start of slot 0, ns (a multiple of the slot span).
    base: u64,
    /// Intervals held (ended ones too, until their slot is forgotten).
    count: usize,
    spare: Vec<Vec<Busy>>,
    /// Total reserved time (for utilisation), ns.
    reserved_ns: u64,
    last_end: u64,
    /// The prune horizon: nothing is booked before it.
    pruned_to: u64,
    /// Until the horizon reaches this, ns, pruning has nothing to forget:
    /// the end of the first slot, or of its last interval if that is later.
    prune_at: u64,
    /// Every reservation ever made, when auditing (tests).
    audit: Option<Vec<(u64, u64)>>,
}

impl Timeline {
    /// The slot of time `t`. Nothing is booked before the prune horizon,
    /// so `t` is in a slot held, except in a caller's bug (a reservation in
    /// forgotten time, which [`Timeline::double_booking`] exposes): that
    /// goes to the first slot.
    fn slot_of(&self, t: u64) -> usize {
        (t.saturating_sub(self.base) >> self.shift()) as usize
    }

    /// log2 of a slot's span, ns.
    #[inline(always)]
    fn shift(&self) -> u32 {
        SLOT_SHIFT + self.extra_shift
    }

    /// Widen the slots until time `t` falls within [`MAX_SLOTS`] of the
    /// first, merging neighbouring slots (intervals keep their order).
    #[cold]
    #[inline(never)]
    fn coarsen(&mut self, t: u64) {
        let (old_shift, old_base) = (self.shift(), self.base);
        let mut shift = old_shift;
        while t.saturating_sub(old_base >> shift << shift) >> shift >= MAX_SLOTS as u64 {
            shift += 1;
        }
        let base = old_base >> shift << shift;
        let old = std::mem::take(&mut self.slots);
        for (i, v) in old.into_iter().enumerate() {
            let k = ((old_base + ((i as u64) << old_shift) - base) >> shift) as usize;
            while self.slots.len() <= k {
                self.slots.push_back(Vec::new());
            }
            if self.slots[k].is_empty() {
                let empty = std::mem::replace(&mut self.slots[k], v);
                self.recycle(empty);
            } else {
                self.slots[k].extend_from_slice(&v);
                self.recycle(v);
            }
        }
        self.extra_shift = shift - SLOT_SHIFT;
        self.base = base;
        // (prune_at may now be early: the next prune recomputes it.)
    }

    /// Slots in the calendar (for tests and memory accounting).
    pub fn slots_held(&self) -> usize {
        self.slots.len()
    }

    fn at(&self, (slot, i): Pos) -> Busy {
        self.slots[slot][i]
    }

    fn at_mut(&mut self, (slot, i): Pos) -> &mut Busy {
        &mut self.slots[slot][i]
    }

    /// The last interval of the slots before `slot`.
    fn last_before_slot(&self, slot: usize) -> Option<Pos> {
        (0..slot.min(self.slots.len())).rev().find(|&k| !self.slots[k].is_empty()).map(|k| (k, self.slots[k].len() - 1))
    }

    /// The position of the first interval that ends after `t` (past the
    /// last interval if none does), and the interval before it if that one
    /// ends by `t` (else the first one starts before `t`: a walk from it
    /// passes it, so its predecessor does not matter).
    #[inline(always)]
    fn around(&self, t: u64) -> (Option<(Pos, Busy)>, Pos) {
        let slot = self.slot_of(t);
        let before = match self.slots.get(slot) {
            Some(v) => match v.partition_point(|b| b.start < t) {
                0 => self.last_before_slot(slot),
                i => Some((slot, i - 1)),
            },
            None => self.last_before_slot(slot),
        };
        match before {
            None => (None, (slot, 0)),
            Some(p) => {
                let b = self.at(p);
                // Intervals are disjoint: only the one just before `t` may run past it.
                if b.end() > t {
                    (None, p)
                } else {
                    (Some((p, b)), (p.0, p.1 + 1))
                }
            }
        }
    }

    /// Visit the intervals from position `(slot, i)` on, in order, with
    /// their positions, while `visit` returns true, skipping no interval but
    /// stopping at the first slot that starts at or after `until_ns`. Plain
    /// slice loops per slot: the walks of [`Timeline::gc_ns_between`] may
    /// cover dozens of intervals (and empty slots) on a die queued deep
    /// with GC work, those of [`Timeline::book`] mostly end in the slot
    /// they start in (so the slots are indexed, not iterated: an iterator
    /// over a ring costs more to set up than that walk).
    #[inline(always)]
    fn walk_from(&self, (slot, i): Pos, until_ns: u64, mut visit: impl FnMut(Pos, &Busy) -> bool) {
        let mut from = i;
        let shift = self.shift();
        let mut slot_start = self.base + ((slot as u64) << shift);
        for k in slot..self.slots.len() {
            if slot_start >= until_ns {
                return;
            }
            let v = &self.slots[k];
            for (j, b) in v.iter().enumerate().skip(from) {
                if !visit((k, j), b) {
                    return;
                }
            }
            from = 0;
            slot_start += 1 << shift;
        }
    }

    /// The earliest start at or after `t` where `duration` ns are free.
    ///
    /// The quick answers are inlined into the caller; the walk is not
    /// (likewise for [`Timeline::gc_ns_between`], [`Timeline::book`] and
    /// [`Timeline::prune`]: called several times per flash operation, they
    /// mostly return at once).
    #[inline]
    pub fn fit(&self, t: u64, duration: u64) -> Fit {
        if duration == 0 || t >= self.last_end {
            return Fit { start: t }; // takes no time, or after everything reserved
        }
        debug_assert!(t >= self.pruned_to, "fit at {t} before the prune horizon {}", self.pruned_to);
        Fit { start: self.gap_start(t, duration) }
    }

    /// [`Timeline::fit`] where reservations may be in the way.
    #[inline(never)]
    fn gap_start(&self, t: u64, duration: u64) -> u64 {
        self.find_gap(t, duration).start
    }

    /// Reserve `duration` ns at the earliest start at or after `t` where
    /// they are free (first fit), and return that start: [`Timeline::fit`]
    /// then [`Timeline::reserve`] in one search, as the walk that finds the
    /// gap also finds the new interval's neighbours.
    ///
    /// Booking after everything reserved (every booking on an idle
    /// resource, most on a die) appends, or extends the last interval,
    /// without a search.
    #[inline]
    pub fn book(&mut self, t: u64, duration: u64, gc: bool) -> u64 {
        if duration == 0 {
            return t; // takes no time, needs nothing
        }
        debug_assert!(t >= self.pruned_to, "book at {t} before the prune horizon {}", self.pruned_to);
        if t >= self.last_end {
            self.append(t, t + duration, gc);
            return t;
        }
        self.book_in_gap(t, duration, gc)
    }

    /// [`Timeline::book`] where reservations may be in the way.
    #[inline(never)]
    fn book_in_gap(&mut self, t: u64, duration: u64, gc: bool) -> u64 {
        let gap = self.find_gap(t, duration);
        self.place(gap, duration, gc);
        gap.start
    }

    /// The first-fit walk: from the first interval ending after `t`, past
    /// every interval that leaves no room for `duration` ns before it.
    /// Only called with `t` before the last interval's end (so with
    /// intervals held: pruning forgets only intervals that ended by `t`).
    #[inline(always)]
    fn find_gap(&self, t: u64, duration: u64) -> Gap {
        let (mut prev, at) = self.around(t);
        let mut start = t;
        let mut next = None;
        // Intervals are disjoint and sorted, so their ends are sorted too.
        self.walk_from(at, u64::MAX, |p, b| {
            if b.start >= start + duration {
                next = Some((p, *b));
                return false;
            }
            start = start.max(b.end());
            prev = Some((p, *b));
            true
        });
        Gap { start, prev, next }
    }

    /// Time garbage collection holds this resource within `[from, to)`, ns
    /// (the GC share of a wait over that span), up to `cap_ns`: the walk
    /// stops there, as a wait's GC share never exceeds the wait (a wait
    /// behind a long queue would otherwise walk all of it).
    #[inline]
    pub fn gc_ns_between(&self, from: u64, to: u64, cap_ns: u64) -> u64 {
        if to <= from || cap_ns == 0 || self.last_end <= from {
            return 0;
        }
        self.gc_ns_walk(from, to, cap_ns)
    }

    #[inline(never)]
    fn gc_ns_walk(&self, from: u64, to: u64, cap_ns: u64) -> u64 {
        let mut ns = 0;
        self.walk_from(self.around(from).1, to, |_, b| {
            if b.start >= to {
                return false;
            }
            if b.gc() {
                ns += b.end().min(to) - b.start.max(from);
            }
            ns < cap_ns
        });
        ns.min(cap_ns)
    }

    /// The slot vector for `slot`, to insert into. Mostly it exists and
    /// has storage (the last slot, or one holding the gap's neighbours);
    /// see [`Timeline::new_slot`] for the rest.
    #[inline(always)]
    fn slot_mut(&mut self, slot: usize) -> &mut Vec<Busy> {
        if slot < self.slots.len() && self.slots[slot].capacity() > 0 {
            return &mut self.slots[slot];
        }
        self.new_slot(slot)
    }

    /// [`Timeline::slot_mut`] creating empty slots up to `slot` (empty
    /// vectors allocate nothing), and giving it a spare vector's storage
    /// if it has none.
    #[inline(never)]
    fn new_slot(&mut self, slot: usize) -> &mut Vec<Busy> {
        while self.slots.len() <= slot {
            self.slots.push_back(Vec::new());
        }
        if self.slots[slot].capacity() == 0 {
            if let Some(v) = self.spare.pop() {
                self.slots[slot] = v;
            }
        }
        &mut self.slots[slot]
    }

    /// Keep an emptied slot's storage for reuse (a bounded pool).
    fn recycle(&mut self, mut v: Vec<Busy>) {
        if v.capacity() > 0 && self.spare.len() < SPARE_SLOTS {
            v.clear();
            self.spare.push(v);
        }
    }

    /// Reserve `[start, start + duration)`, which must be free (from [`Timeline::fit`]).
    pub fn reserve(&mut self, start: u64, duration: u64, gc: bool) {
        if duration == 0 {
            return;
        }
        if start >= self.last_end {
            self.append(start, start + duration, gc);
            return;
        }
        let gap = self.find_gap(start, duration);
        assert_eq!(gap.start, start, "reserving [{start}, +{duration}) ns, which is not free");
        self.place(gap, duration, gc);
    }

    /// Count a reservation (and log it, when auditing).
    fn record(&mut self, start: u64, end: u64) {
        if let Some(log) = &mut self.audit {
            log.push((start, end));
        }
        self.reserved_ns += end - start;
    }

    /// Reserve `[start, end)`, at or after the last interval's end:
    /// extending that interval when it touches and the tags agree, else
    /// pushed onto the last slot (or a new one). Inlined into
    /// [`Timeline::book`]: it is most bookings of a die.
    #[inline(always)]
    fn append(&mut self, start: u64, end: u64, gc: bool) {
        debug_assert!(start >= self.last_end);
        self.record(start, end);
        if self.count == 0 {
            self.restart();
        } else if start == self.last_end {
            let last = self.slots.back_mut().and_then(|v| v.last_mut()).expect("the last slot holds the last interval");
            if last.gc() == gc {
                last.set_end(end);
                self.last_end = end;
                return;
            }
        }
        self.last_end = end;
        if self.slot_of(start) >= MAX_SLOTS {
            self.coarsen(start);
        }
        let slot = self.slot_of(start);
        self.slot_mut(slot).push(Busy::new(start, end, gc));
        self.count += 1;
    }

    /// An empty timeline's calendar starts again: slot 0 at the prune
    /// horizon (every later fit starts at or after it; callers prune to
    /// the current arrival).
    #[cold]
    fn restart(&mut self) {
        self.recycle_all();
        self.extra_shift = 0;
        self.base = self.pruned_to >> SLOT_SHIFT << SLOT_SHIFT;
        self.prune_at = self.base + (1 << SLOT_SHIFT);
    }

    /// Insert `duration` ns at `gap` (free), merging with the neighbours
    /// it touches when their tags agree.
    #[inline(always)]
    fn place(&mut self, gap: Gap, duration: u64, gc: bool) {
        let Gap { start, prev, next } = gap;
        let Some((next, after)) = next else {
            return self.append(start, start + duration, gc);
        };
        let end = start + duration;
        self.record(start, end);
        debug_assert!(prev.is_none_or(|(_, b)| b.end() <= start), "overlap before");
        debug_assert!(after.start >= end, "overlap after");
        let merge_prev = prev.filter(|(_, b)| b.end() == start && b.gc() == gc).map(|(p, _)| p);
        let merge_next = after.start == end && after.gc() == gc;
        // Every interval before `next` starts before `start`, so in
        // `start`'s slot the new one goes before `next` if that is there,
        // else last.
        let slot = self.slot_of(start);
        match (merge_prev, merge_next) {
            (Some(p), true) => {
                self.at_mut(p).set_end(after.end());
                self.remove(next);
            }
            (Some(p), false) => self.at_mut(p).set_end(end),
            (None, true) if next.0 == slot => self.at_mut(next).start = start,
            (None, true) => {
                // The merged interval starts in an earlier slot: move it there.
                self.remove(next);
                self.slot_mut(slot).push(Busy::new(start, after.end(), gc));
                self.count += 1;
            }
            (None, false) => {
                let i = if next.0 == slot { next.1 } else { self.slots[slot].len() };
                self.slot_mut(slot).insert(i, Busy::new(start, end, gc));
                self.count += 1;
            }
        }
    }

    /// Remove the interval at `pos` (merged into its predecessor), keeping
    /// the last slot non-empty.
    fn remove(&mut self, (slot, i): Pos) {
        self.slots[slot].remove(i);
        self.count -= 1;
        while self.slots.back().is_some_and(Vec::is_empty) {
            let v = self.slots.pop_back().expect("a last slot");
            self.recycle(v);
        }
    }

    /// Forget reservations that end at or before `now`: nothing scheduled
    /// from now on can start before `now`.
    ///
    /// Forgetting goes a slot at a time: the first slot is dropped once it
    /// lies wholly before `now` and its intervals have all ended. Until
    /// then (`now` before `prune_at`) only the horizon moves: the first
    /// slot's memory, cold since the work there was booked far ahead, is
    /// read once per slot, not once per interval ended. Ended intervals
    /// still held change nothing: a search starts at the first interval
    /// ending after its start.
    #[inline]
    pub fn prune(&mut self, now: u64) {
        self.pruned_to = self.pruned_to.max(now);
        if now >= self.prune_at {
            self.prune_slots(now);
        }
    }

    #[inline(never)]
    fn prune_slots(&mut self, now: u64) {
        while let Some(front) = self.slots.front() {
            let slot_end = self.base + (1 << self.shift());
            let ends = front.last().map_or(0, Busy::end);
            if slot_end > now || ends > now {
                self.prune_at = slot_end.max(ends);
                return;
            }
            self.count -= front.len();
            let v = self.slots.pop_front().expect("front exists");
            self.recycle(v);
            self.base = slot_end;
        }
        debug_assert_eq!(self.count, 0);
        self.prune_at = u64::MAX; // nothing held: the next booking sets it
    }

    /// Return every (empty) slot to the spare pool.
    fn recycle_all(&mut self) {
        while let Some(v) = self.slots.pop_front() {
            self.recycle(v);
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

    /// Intervals held, ended ones not yet forgotten included (for tests
    /// and memory accounting).
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
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
        assert_eq!(t.book(120, 10, false), 150, "booked after the reservation");
        assert_eq!(t.len(), 1, "and merged with it");
        assert_eq!(t.book(200, 0, false), 200, "zero-length work never waits");
        assert_eq!(t.reserved_ns(), 160);
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
        assert_eq!(t.gc_ns_between(5, f.start, u64::MAX), 30);
        assert_eq!(t.gc_ns_between(5, f.start, 12), 12, "capped");
        assert_eq!(t.gc_ns_between(20, 45, u64::MAX), 20, "clipped to the span");
        assert_eq!(t.gc_ns_between(0, 10, u64::MAX), 0);
        assert_eq!(t.fit(5, 0).start, 5, "zero-length work never waits");
    }

    #[test]
    fn the_audit_finds_a_double_booking_and_passes_a_clean_timeline() {
        let mut t = Timeline::default();
        t.enable_audit();
        let slot = 1 << SLOT_SHIFT;
        t.reserve(0, 10, false);
        t.reserve(20, 10, false);
        t.prune(slot + 30);
        let f = t.fit(slot + 30, 5);
        t.reserve(f.start, 5, false);
        assert_eq!(t.double_booking(), None);
        // Pruned work is invisible to `fit`: booking over it is caught.
        t.reserve(22, 3, false);
        assert_eq!(t.double_booking(), Some(((20, 30), (22, 25))));
    }

    #[test]
    fn pruning_forgets_slots_of_ended_work() {
        let slot = 1 << SLOT_SHIFT;
        let mut t = Timeline::default();
        for i in [0, 1, 2, 3, 4, 5, 8, 9] {
            t.reserve(i * slot, 10, false);
        }
        t.reserve(5 * slot + 20, 2 * slot, false); // runs to 7 slots + 20 ns
        t.prune(5 * slot + 5);
        assert_eq!(t.len(), 4, "five slots wholly ended");
        assert_eq!(t.fit(5 * slot + 5, 10).start, 5 * slot + 10);
        assert_eq!(t.busy_until(), 9 * slot + 10);
        t.prune(6 * slot);
        assert_eq!(t.len(), 4, "slot 5 holds an interval still running");
        t.prune(7 * slot + 20);
        assert_eq!(t.len(), 2, "and is forgotten once that has ended");
        t.prune(10 * slot);
        assert!(t.is_empty());
        assert_eq!(t.book(10 * slot, 5, false), 10 * slot, "an emptied timeline starts again");
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn intervals_across_many_slots_fit_merge_and_prune_like_a_flat_list() {
        // A reference: a flat sorted list with first fit.
        let slot = 1u64 << SLOT_SHIFT;
        let mut t = Timeline::default();
        t.enable_audit();
        let mut reference: Vec<(u64, u64, bool)> = Vec::new();
        // Every reservation, never pruned (merges bound what is held).
        let mut booked: Vec<(u64, u64, bool)> = Vec::new();
        let mut rng = 7u64;
        let mut now = 0;
        for i in 0..5000u64 {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if i % 50 == 0 {
                now += slot / 3;
                t.prune(now);
                reference.retain(|&(_, e, _)| e > now);
            }
            let ready = now + (rng >> 40) % (20 * slot);
            let len = 1 + (rng >> 20) % (slot / 2);
            let mut start = ready;
            for &(s, e, _) in &reference {
                if s < start + len && e > start {
                    start = e;
                }
            }
            let gc_ref: u64 =
                reference.iter().filter(|r| r.2).map(|&(s, e, _)| e.min(start).saturating_sub(s.max(ready))).sum();
            if i % 2 == 0 {
                assert_eq!(t.fit(ready, len).start, start, "fit {i}");
                assert_eq!(t.gc_ns_between(ready, start, u64::MAX), gc_ref, "GC's share of the wait {i}");
                t.reserve(start, len, i % 3 == 0);
            } else {
                // Booking in one step finds the same start; the new interval
                // starts where the wait ends, so GC's share is unchanged.
                assert_eq!(t.book(ready, len, i % 3 == 0), start, "book {i}");
                assert_eq!(t.gc_ns_between(ready, start, u64::MAX), gc_ref, "GC's share of the wait {i}");
            }
            reference.push((start, start + len, i % 3 == 0));
            reference.sort_unstable();
            booked.push((start, start + len, i % 3 == 0));
            booked.sort_unstable();
            // Touching intervals with the same tag are held as one; ended
            // ones may still be held (pruning forgets whole slots).
            let runs = |list: &[(u64, u64, bool)]| {
                list.windows(2).filter(|w| w[0].1 != w[1].0 || w[0].2 != w[1].2).count() + 1
            };
            assert!(t.len() >= runs(&reference), "intervals held after booking {i}");
            assert!(t.len() <= runs(&booked), "intervals held after booking {i}");
        }
        assert_eq!(t.double_booking(), None);
        t.prune(u64::MAX / 2);
        assert!(t.is_empty());
    }

    #[test]
    fn the_server_pool_uses_the_first_free_core() {
        let mut p = ServerPool::new(2);
        assert_eq!(p.serve(0, 10), (0, 10));
        assert_eq!(p.serve(0, 10), (0, 10));
        assert_eq!(p.serve(0, 10), (10, 20));
        assert_eq!(p.busy_ns(), 30);
    }

    #[test]
    fn bookings_far_ahead_keep_the_calendar_bounded_and_still_backfill() {
        // Work 10^15 ns (11.6 days) and then 2^62 ns ahead: one 1 ms slot
        // per millisecond would be 10^9 and 4 * 10^12 slots.
        let mut t = Timeline::default();
        t.enable_audit();
        t.book(0, 100, false);
        t.book(1_000_000_000_000_000, 1_000, true);
        assert!(t.slots_held() <= MAX_SLOTS, "{} slots", t.slots_held());
        t.book(1 << 62, 1_000, false);
        assert!(t.slots_held() <= MAX_SLOTS, "{} slots", t.slots_held());
        assert_eq!(t.len(), 3);
        // First fit still finds the gaps, before and between the far work.
        assert_eq!(t.book(50, 100, false), 100, "right after the first interval");
        assert_eq!(t.fit(1_000_000_000_000_000 - 10, 20).start, 1_000_000_000_000_000 + 1_000);
        assert_eq!(t.book(1_000_000_000_000_000 - 10, 10, false), 1_000_000_000_000_000 - 10);
        assert_eq!(t.gc_ns_between(0, 1 << 62, u64::MAX), 1_000);
        assert_eq!(t.double_booking(), None);
        // Pruned empty (slots are forgotten whole), the calendar starts
        // again at the usual span.
        t.prune((1 << 62) + (1 << 52));
        assert_eq!(t.len(), 0);
        t.book((1 << 62) + (1 << 52), 10, false);
        assert_eq!(t.extra_shift, 0);
    }
}
