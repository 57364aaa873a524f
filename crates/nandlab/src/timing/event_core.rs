//! The discrete-event flash core: transactions queued per die and
//! dispatched in simulated-time order by a [`SchedulerKind`] policy, with a
//! first-come first-served channel arbiter and program/erase suspend.
//!
//! Design and reasons: `docs/design-notes/timing-core.md`. In short, unlike
//! the reservation model ([`super::flash_model`]), nothing is booked ahead
//! of the current time: resource state is a few numbers per channel and die
//! plus the queues of issued, unstarted work, and an event heap orders what
//! happens next. A read queued behind a program can then be started first
//! (by a scheduler that prefers reads) or suspend it.
//!
//! # Lifecycle of a transaction
//!
//! 1. **Submitted** at the current time into its die's queue, *ready* at
//!    `ready_ns` and once its dependency (`after`) completed.
//! 2. **Eligible** when ready and the NAND order allows it (the FTL's
//!    effects already happened, so the order they assume must hold):
//!    programs, erases and copybacks keep their issue order per plane; an
//!    erase overtakes nothing on its planes (GC reads a victim's pages
//!    before erasing it); a read does not overtake a queued program of its
//!    page or erase of its block.
//! 3. **Dispatched** when its die is idle and the scheduler picks it: its
//!    channel-in phase (command, data-in) starts when the channel is free
//!    (`max(now, channel free)`, in event order: first come, first served),
//!    then its cell phase runs on the die.
//! 4. A read's **data-out** asks for the channel when its cell phase ends;
//!    the die stays held until the data is out (no cache-read pipelining).
//! 5. **Completed** (reported in time order): at the end of its data-out
//!    (reads) or cell phase.
//!
//! # Suspend
//!
//! When the scheduler allows it ([`Scheduler::suspends_for_reads`]) and the
//! device can suspend the operation (`[timing]` `program_suspend`,
//! `erase_suspend`), an eligible read whose die is in the cell phase of a
//! program or erase with more than the suspend latency left suspends it:
//! the read's command goes over the channel, then the die spends the
//! suspend latency and tR on the read, and the suspended operation resumes
//! with the cell time it had left when the command arrived, so it ends
//! later by suspend latency + tR; the read's data-out overlaps the resumed
//! operation. One suspension per die at a time, and never of the program
//! of the read's own page or the erase of its block.

use super::config::Timing;
use super::scheduler::{Queued, Scheduler, SchedulerKind};
use super::transaction::{Transaction, TxDone, TxId, TxKind};
use crate::nand::Geometry;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// An operation occupying a die.
#[derive(Copy, Clone, Debug)]
struct Running {
    id: TxId,
    tx: Transaction,
    start_ns: u64,
    cell_start_ns: u64,
    cell_end_ns: u64,
    /// This read suspended the operation in [`DieState::suspended`].
    suspended_other: bool,
}

impl Running {
    /// `q` dispatched: its channel-in phase starts at `start_ns`, its cell
    /// phase at `cell_start_ns`.
    fn of(q: Queued, start_ns: u64, cell_start_ns: u64, suspended_other: bool) -> Running {
        Running {
            id: q.id,
            tx: q.tx,
            start_ns,
            cell_start_ns,
            cell_end_ns: cell_start_ns + q.tx.cell_ns,
            suspended_other,
        }
    }

    /// Its completion at `end_ns`.
    fn done(&self, end_ns: u64) -> TxDone {
        TxDone { id: self.id, tag: self.tx.tag, start_ns: self.start_ns, end_ns, suspended_other: self.suspended_other }
    }
}

#[derive(Clone, Debug, Default)]
struct DieState {
    /// Issued, not yet started, oldest first.
    queue: Vec<Queued>,
    /// The sum of `queue`'s occupancies ([`Transaction::occupancy_ns`]),
    /// kept as it changes so that [`FlashCore::die_busy_until_ns`] is O(1).
    queued_ns: u64,
    running: Option<Running>,
    /// A program or erase suspended by the running read, and its cell time left.
    suspended: Option<(Running, u64)>,
    /// Cache program: the next program, its data-in done (or under way)
    /// while `running`'s cell phase runs; its cell phase follows.
    next: Option<Running>,
    /// Bumped when a cell phase's end is cancelled (a suspension) or re-timed.
    generation: u64,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum EventKind {
    /// The die may start (or suspend for) something.
    Wake { die: u32 },
    /// The cell phase of the die's running operation ends (if `generation` is current).
    CellEnd { die: u32, generation: u64 },
    /// A transaction completes; `die` is released if set.
    Done { die: Option<u32>, id: TxId, tag: u64, start_ns: u64, suspended_other: bool },
}

/// The core's counters.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CoreCounters {
    pub dispatched: u64,
    pub completed: u64,
    pub suspends: u64,
}

/// The discrete-event flash core. See the module docs.
pub struct FlashCore {
    scheduler: SchedulerKind,
    /// Suspend latency of a program / an erase, when the device can suspend it.
    program_suspend_ns: Option<u64>,
    erase_suspend_ns: Option<u64>,
    channel_free_ns: Vec<u64>,
    dies: Vec<DieState>,
    events: BinaryHeap<Reverse<(u64, u64, EventKind)>>,
    event_seq: u64,
    now_ns: u64,
    next_id: TxId,
    /// Transactions some queued transaction waits for (thousands at a time
    /// under a write-back backlog), each with the dies whose queues hold a
    /// transaction waiting for it (so a completion looks only there).
    awaited: HashMap<TxId, Vec<u32>>,
    eligible: Vec<bool>,
    /// Scratch for [`FlashCore::mark_eligible`]: the older array writers
    /// (kind, planes, page, block).
    older_writes: Vec<(TxKind, u64, u64, u64)>,
    /// Scratch for [`FlashCore::release_dependents`].
    wakes: Vec<(u64, u32)>,
    counters: CoreCounters,
    /// Whether each transaction from `done_base` on has completed (the
    /// front is dropped as it completes): `in_flight` in O(1).
    done: VecDeque<bool>,
    done_base: TxId,
    /// The time of the last event processed.
    last_event_ns: u64,
    /// ONFI cache read / cache program (`[timing]` `cache_read`,
    /// `cache_program`): see [`FlashCore::with_cache`].
    cache_read: bool,
    cache_program: bool,
}

impl FlashCore {
    /// A core for `dies` dies on `channels` channels; `program_suspend_ns`
    /// and `erase_suspend_ns` are the suspend latencies of the operations
    /// the device can suspend (`None`: it cannot).
    pub fn new(
        channels: u32,
        dies: u32,
        scheduler: SchedulerKind,
        program_suspend_ns: Option<u64>,
        erase_suspend_ns: Option<u64>,
    ) -> FlashCore {
        FlashCore {
            scheduler,
            program_suspend_ns,
            erase_suspend_ns,
            channel_free_ns: vec![0; channels as usize],
            dies: vec![DieState::default(); dies as usize],
            events: BinaryHeap::new(),
            event_seq: 0,
            now_ns: 0,
            next_id: 0,
            awaited: HashMap::new(),
            eligible: Vec::new(),
            older_writes: Vec::new(),
            wakes: Vec::new(),
            counters: CoreCounters::default(),
            done: VecDeque::new(),
            done_base: 0,
            last_event_ns: 0,
            cache_read: false,
            cache_program: false,
        }
    }

    /// Cache read: a read releases its die when its cell phase ends (its
    /// data leaves from the cache register while the die starts its next
    /// operation; the channel still carries one transfer at a time).
    /// Cache program: a program's command and data-in may go to the die
    /// while the program before it is in its cell phase; its own cell
    /// phase starts when that one ends. Both as the reservation model
    /// has them (`super::flash_model`), one pipelined program per die.
    pub fn with_cache(mut self, cache_read: bool, cache_program: bool) -> FlashCore {
        self.cache_read = cache_read;
        self.cache_program = cache_program;
        self
    }

    /// A core for a device's geometry and `[timing]` (its suspend flags and latencies).
    pub fn for_device(g: &Geometry, t: &Timing, scheduler: SchedulerKind) -> FlashCore {
        let program = t.config.program_suspend.then_some(t.program_suspend_ns);
        let erase = t.config.erase_suspend.then_some(t.erase_suspend_ns);
        FlashCore::new(g.channels(), g.dies(), scheduler, program, erase)
            .with_cache(t.config.cache_read, t.config.cache_program)
    }

    pub fn scheduler(&self) -> SchedulerKind {
        self.scheduler
    }

    pub fn counters(&self) -> CoreCounters {
        self.counters
    }

    /// The simulated time the core has reached.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// When the next event happens, if any.
    pub fn next_event_ns(&self) -> Option<u64> {
        self.events.peek().map(|Reverse((t, ..))| *t)
    }

    /// Nothing queued, running or pending.
    pub fn is_idle(&self) -> bool {
        self.events.is_empty()
            && self.dies.iter().all(|d| d.queue.is_empty() && d.running.is_none() && d.next.is_none())
    }

    /// An estimate of when `die` finishes the work it holds: the end of
    /// what runs on it (and of the operation it suspended), then its queued
    /// transactions back to back, their channel phases included, as if
    /// nothing else held the channel and every dependency were met (a lower
    /// bound). Placement asks it to steer host writes away from a die
    /// collecting garbage (`ftl/kit/data_plane/placement.rs`).
    pub fn die_busy_until_ns(&self, die: u32) -> u64 {
        let d = &self.dies[die as usize];
        let mut free_ns = self.now_ns;
        if let Some(r) = d.running {
            let out_ns = if r.tx.is_read() && !self.cache_read { r.tx.channel_out_ns } else { 0 };
            free_ns = free_ns.max(r.cell_end_ns + out_ns);
        }
        if let Some(n) = d.next {
            free_ns = free_ns.max(n.cell_end_ns);
        }
        if let Some((_, left_ns)) = d.suspended {
            free_ns += left_ns;
        }
        free_ns + d.queued_ns
    }

    /// Append `q` to its die's queue.
    fn enqueue(&mut self, q: Queued) {
        let d = &mut self.dies[q.tx.die as usize];
        d.queued_ns += q.tx.occupancy_ns();
        d.queue.push(q);
    }

    /// Take the `i`th transaction out of `die`'s queue.
    fn dequeue(&mut self, die: u32, i: usize) -> Queued {
        let d = &mut self.dies[die as usize];
        let q = d.queue.remove(i);
        d.queued_ns -= q.tx.occupancy_ns();
        q
    }

    fn push(&mut self, t: u64, kind: EventKind) {
        self.event_seq += 1;
        self.events.push(Reverse((t, self.event_seq, kind)));
    }

    /// Queue `tx` now (its ready time is at least the current time); a
    /// dependency on a transaction that already completed is satisfied.
    pub fn submit(&mut self, mut tx: Transaction) -> TxId {
        let id = self.next_id;
        self.next_id += 1;
        self.done.push_back(false);
        tx.ready_ns = tx.ready_ns.max(self.now_ns);
        if let Some(d) = tx.after {
            if self.in_flight(d) {
                let dies = self.awaited.entry(d).or_default();
                if !dies.contains(&tx.die) {
                    dies.push(tx.die);
                }
            } else {
                tx.after = None;
            }
        }
        let die = tx.die;
        self.enqueue(Queued { id, tx });
        if tx.after.is_none() {
            self.push(tx.ready_ns, EventKind::Wake { die });
        }
        id
    }

    /// Whether `id` was submitted and has not completed.
    fn in_flight(&self, id: TxId) -> bool {
        id >= self.done_base && self.done.get((id - self.done_base) as usize).is_some_and(|d| !d)
    }

    /// When the core was last busy: the time of its last event.
    pub fn last_event_ns(&self) -> u64 {
        self.last_event_ns
    }

    /// Move the clock of an idle core back to `t_ns` (no earlier than its
    /// last event): nothing happened since, so work submitted next starts
    /// as if submitted then (idle-time work between two arrivals).
    pub fn rewind_idle(&mut self, t_ns: u64) {
        debug_assert!(self.is_idle());
        self.now_ns = t_ns.max(self.last_event_ns).min(self.now_ns);
    }

    /// Process every event up to `t_ns` and move the clock there;
    /// completions go to `out` in time order.
    pub fn run_until(&mut self, t_ns: u64, out: &mut Vec<TxDone>) {
        while let Some(&Reverse((t, _, kind))) = self.events.peek() {
            if t > t_ns {
                break;
            }
            self.events.pop();
            self.now_ns = self.now_ns.max(t);
            self.last_event_ns = self.now_ns;
            self.handle(kind, out);
        }
        self.now_ns = self.now_ns.max(t_ns);
    }

    /// Process every event until nothing is left.
    pub fn run_to_idle(&mut self, out: &mut Vec<TxDone>) {
        self.run_until(u64::MAX, out);
    }

    fn handle(&mut self, kind: EventKind, out: &mut Vec<TxDone>) {
        match kind {
            EventKind::Wake { die } => self.wake(die),
            EventKind::CellEnd { die, generation } => {
                if self.dies[die as usize].generation == generation {
                    self.cell_end(die, out);
                }
            }
            EventKind::Done { die, id, tag, start_ns, suspended_other } => {
                self.complete(TxDone { id, tag, start_ns, end_ns: self.now_ns, suspended_other }, die, out)
            }
        }
    }

    fn complete(&mut self, done: TxDone, die: Option<u32>, out: &mut Vec<TxDone>) {
        self.counters.completed += 1;
        out.push(done);
        if let Some(d) = self.done.get_mut((done.id - self.done_base) as usize) {
            *d = true;
        }
        while self.done.front() == Some(&true) {
            self.done.pop_front();
            self.done_base += 1;
        }
        if let Some(die) = die {
            let d = &mut self.dies[die as usize];
            d.running = None;
            match d.next.take() {
                Some(mut n) => {
                    // The pipelined program's cell phase follows at once.
                    n.cell_start_ns = n.cell_start_ns.max(self.now_ns);
                    n.cell_end_ns = n.cell_start_ns + n.tx.cell_ns;
                    self.run(die, n);
                }
                None => self.wake(die),
            }
        }
        if let Some(dies) = self.awaited.remove(&done.id) {
            self.release_dependents(done.id, dies);
        }
    }

    /// Transactions waiting for `id` become ready now (or at their own ready time).
    /// `dies`: the dies whose queues hold them (visited in die order, one
    /// wake per dependent, as a scan of every die would).
    fn release_dependents(&mut self, id: TxId, mut dies: Vec<u32>) {
        let now = self.now_ns;
        dies.sort_unstable();
        let mut wakes = std::mem::take(&mut self.wakes);
        wakes.clear();
        for &die in &dies {
            for q in &mut self.dies[die as usize].queue {
                if q.tx.after == Some(id) {
                    q.tx.after = None;
                    q.tx.ready_ns = q.tx.ready_ns.max(now);
                    wakes.push((q.tx.ready_ns, die));
                }
            }
        }
        for &(t, die) in &wakes {
            self.push(t, EventKind::Wake { die });
        }
        self.wakes = wakes;
    }

    /// Mark which of the die's queued transactions may start now (see the
    /// module docs); `extra` narrows further (suspension candidates).
    fn mark_eligible(&mut self, die: u32, extra: impl Fn(&Queued) -> bool) -> bool {
        let now = self.now_ns;
        let queue = &self.dies[die as usize].queue;
        self.eligible.clear();
        // What the older transactions hold, in one pass (see `blocks`): the
        // planes any of them uses, the planes array writers use, and (for
        // reads on those planes) the pages programmed and blocks erased.
        let (mut older_planes, mut writer_planes) = (0u64, 0u64);
        self.older_writes.clear();
        let mut any = false;
        for q in queue.iter() {
            let t = &q.tx;
            let mut ok = t.after.is_none() && t.ready_ns <= now && extra(q);
            if ok {
                ok = match t.kind {
                    TxKind::Erase => t.planes_mask & older_planes == 0,
                    TxKind::Program | TxKind::Copyback => t.planes_mask & writer_planes == 0,
                    TxKind::Read => {
                        t.planes_mask & writer_planes == 0
                            || !self.older_writes.iter().any(|&(kind, planes, page, block)| {
                                planes & t.planes_mask != 0
                                    && match kind {
                                        TxKind::Erase => block == t.block,
                                        _ => page == t.page,
                                    }
                            })
                    }
                };
            }
            older_planes |= t.planes_mask;
            if t.kind.writes_array() {
                writer_planes |= t.planes_mask;
                self.older_writes.push((t.kind, t.planes_mask, t.page, t.block));
            }
            any |= ok;
            self.eligible.push(ok);
        }
        any
    }

    fn wake(&mut self, die: u32) {
        let d = &self.dies[die as usize];
        match d.running {
            None => self.dispatch(die),
            Some(r) => {
                if d.suspended.is_none() && d.next.is_none() && self.scheduler.suspends_for_reads() {
                    self.try_suspend(die, r);
                }
                let d = &self.dies[die as usize];
                if self.cache_program && d.next.is_none() && d.suspended.is_none() {
                    if let Some(r) = d.running.filter(|r| r.tx.kind == TxKind::Program) {
                        self.try_pipeline(die, r);
                    }
                }
            }
        }
    }

    /// Start the scheduler's pick on an idle die, or wake it when the next
    /// queued transaction becomes ready.
    fn dispatch(&mut self, die: u32) {
        if self.dies[die as usize].queue.is_empty() {
            return;
        }
        if !self.mark_eligible(die, |_| true) {
            return self.wake_at_next_ready(die);
        }
        let Some(i) = self.scheduler.pick(&self.dies[die as usize].queue, &self.eligible) else {
            return self.wake_at_next_ready(die);
        };
        let q = self.dequeue(die, i);
        let start = self.channel(q.tx.channel, q.tx.channel_in_ns);
        let cell_start = start + q.tx.channel_in_ns;
        self.counters.dispatched += 1;
        self.run(die, Running::of(q, start, cell_start, false));
    }

    /// Cache program: while `running` (a program) is in or before its cell
    /// phase, send the scheduler's pick, if a program, to the cache
    /// register; its cell phase follows `running`'s.
    fn try_pipeline(&mut self, die: u32, running: Running) {
        if self.dies[die as usize].queue.is_empty() {
            return;
        }
        if self.now_ns < running.cell_start_ns {
            // The data-in of the running program is on the bus: try again then.
            return self.push(running.cell_start_ns, EventKind::Wake { die });
        }
        if !self.mark_eligible(die, |_| true) {
            return;
        }
        // Only if the scheduler would start a program next anyway (a read
        // it prefers, or an older one under fifo, is not overtaken).
        let Some(i) = self.scheduler.pick(&self.dies[die as usize].queue, &self.eligible) else { return };
        if self.dies[die as usize].queue[i].tx.kind != TxKind::Program {
            return;
        }
        let q = self.dequeue(die, i);
        let start = self.channel(q.tx.channel, q.tx.channel_in_ns);
        let cell_start = (start + q.tx.channel_in_ns).max(running.cell_end_ns);
        self.counters.dispatched += 1;
        self.dies[die as usize].next = Some(Running::of(q, start, cell_start, false));
    }

    /// A Wake at the earliest future ready time of the die's queue (the
    /// transactions blocked by order or dependencies are woken by completions).
    fn wake_at_next_ready(&mut self, die: u32) {
        let now = self.now_ns;
        let next = self.dies[die as usize]
            .queue
            .iter()
            .filter(|q| q.tx.after.is_none() && q.tx.ready_ns > now)
            .map(|q| q.tx.ready_ns)
            .min();
        if let Some(t) = next {
            self.push(t, EventKind::Wake { die });
        }
    }

    /// The channel for `ns` from now, first come first served: its start.
    fn channel(&mut self, channel: u32, ns: u64) -> u64 {
        let free = &mut self.channel_free_ns[channel as usize];
        let start = (*free).max(self.now_ns);
        *free = start + ns;
        start
    }

    /// `r` occupies the die; its cell phase ends at `r.cell_end_ns`.
    fn run(&mut self, die: u32, r: Running) {
        let d = &mut self.dies[die as usize];
        d.generation += 1;
        d.running = Some(r);
        let generation = d.generation;
        self.push(r.cell_end_ns, EventKind::CellEnd { die, generation });
    }

    fn cell_end(&mut self, die: u32, out: &mut Vec<TxDone>) {
        let r = self.dies[die as usize].running.expect("a cell phase ends on a running die");
        if !r.tx.is_read() {
            return self.complete(r.done(self.now_ns), Some(die), out);
        }
        let release = match self.dies[die as usize].suspended.take() {
            Some((s, left)) => {
                // The suspended operation resumes; the data-out overlaps it.
                let now = self.now_ns;
                self.run(die, Running { cell_start_ns: now, cell_end_ns: now + left, ..s });
                None
            }
            None if self.cache_read => {
                // Cache read: the die is free for its next operation now.
                self.dies[die as usize].running = None;
                self.wake(die);
                None
            }
            None => Some(die),
        };
        // (After the die's next command, if cache read started one: the
        // command is short and the die would otherwise idle behind the data.)
        let start = self.channel(r.tx.channel, r.tx.channel_out_ns);
        let end = start + r.tx.channel_out_ns;
        let d = r.done(end);
        self.push(
            end,
            EventKind::Done {
                die: release,
                id: d.id,
                tag: d.tag,
                start_ns: d.start_ns,
                suspended_other: d.suspended_other,
            },
        );
    }

    /// An eligible read suspends the program or erase in its cell phase on
    /// the die, if the scheduler, the device and the time left allow.
    fn try_suspend(&mut self, die: u32, running: Running) {
        let suspend_ns = match running.tx.kind {
            TxKind::Program => self.program_suspend_ns,
            TxKind::Erase => self.erase_suspend_ns,
            _ => None,
        };
        let Some(suspend_ns) = suspend_ns else { return };
        if self.now_ns < running.cell_start_ns {
            return;
        }
        let (page, block) = (running.tx.page, running.tx.block);
        let kind = running.tx.kind;
        let own = move |q: &Queued| {
            q.tx.is_read()
                && !(kind == TxKind::Program && q.tx.page == page)
                && !(kind == TxKind::Erase && q.tx.block == block)
        };
        if !self.mark_eligible(die, own) {
            return;
        }
        let Some(i) = self.scheduler.pick(&self.dies[die as usize].queue, &self.eligible) else { return };
        let q = self.dies[die as usize].queue[i];
        // The command reaches the die when the channel has carried it.
        let start = self.channel_free_ns[q.tx.channel as usize].max(self.now_ns);
        let arrives = start + q.tx.channel_in_ns;
        if running.cell_end_ns <= arrives || running.cell_end_ns - arrives <= suspend_ns {
            return;
        }
        self.dequeue(die, i);
        self.channel(q.tx.channel, q.tx.channel_in_ns);
        self.dies[die as usize].suspended = Some((running, running.cell_end_ns - arrives));
        self.counters.suspends += 1;
        let cell_start = arrives + suspend_ns;
        self.counters.dispatched += 1;
        self.run(die, Running::of(q, start, cell_start, true));
    }
}

/// Whether the older queued `older` keeps `t` from starting (NAND order:
/// see the module docs). The definition [`FlashCore::mark_eligible`]
/// computes in one pass (tested against it).
#[cfg(test)]
fn blocks(older: &Transaction, t: &Transaction) -> bool {
    if older.planes_mask & t.planes_mask == 0 {
        return false;
    }
    match t.kind {
        TxKind::Erase => true,
        TxKind::Program | TxKind::Copyback => older.kind.writes_array(),
        TxKind::Read => match older.kind {
            TxKind::Program | TxKind::Copyback => older.page == t.page,
            TxKind::Erase => older.block == t.block,
            TxKind::Read => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::transaction::TxClass;

    fn tx(kind: TxKind, die: u32, plane: u32, page: u64, cell_ns: u64) -> Transaction {
        let (channel_in_ns, channel_out_ns) = match kind {
            TxKind::Read => (100, 1_000),
            TxKind::Program => (1_100, 0),
            _ => (100, 0),
        };
        Transaction {
            kind,
            class: TxClass::User,
            die,
            channel: 0,
            planes_mask: 1 << plane,
            page,
            block: page / 4,
            channel_in_ns,
            cell_ns,
            channel_out_ns,
            ready_ns: 0,
            after: None,
            tag: page,
        }
    }

    /// `mark_eligible`'s one pass agrees with the pairwise definition
    /// (`blocks`) on queues of mixed kinds over few planes, pages and blocks.
    #[test]
    fn one_pass_eligibility_is_the_pairwise_nand_order() {
        let kinds = [TxKind::Read, TxKind::Program, TxKind::Erase, TxKind::Copyback];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut blocked_some = 0;
        for _ in 0..200 {
            let mut c = FlashCore::new(1, 1, SchedulerKind::Fifo, None, None);
            for _ in 0..1 + next(24) {
                let mut t = tx(kinds[next(4) as usize], 0, next(2) as u32, next(8), 1_000);
                if next(4) == 0 {
                    t.planes_mask = 0b11;
                }
                c.submit(t);
            }
            c.mark_eligible(0, |_| true);
            let queue = &c.dies[0].queue;
            for (i, q) in queue.iter().enumerate() {
                let naive = !queue[..i].iter().any(|o| blocks(&o.tx, &q.tx));
                assert_eq!(c.eligible[i], naive, "transaction {i} of {queue:?}");
                blocked_some += usize::from(!naive);
            }
        }
        assert!(blocked_some > 100, "the queues exercise the order rules ({blocked_some} blocked)");
    }

    fn run(core: &mut FlashCore) -> Vec<TxDone> {
        let mut out = Vec::new();
        core.run_to_idle(&mut out);
        out
    }

    #[test]
    fn a_read_is_command_cell_then_data_out_and_a_program_command_data_in_then_cell() {
        let mut c = FlashCore::new(1, 2, SchedulerKind::Fifo, None, None);
        c.submit(tx(TxKind::Read, 0, 0, 0, 50_000));
        c.submit(tx(TxKind::Program, 1, 0, 8, 400_000));
        let done = run(&mut c);
        // Die 0's command first, then die 1's command and data-in (channel shared).
        assert_eq!(done[0].end_ns, 100 + 50_000 + 1_000);
        assert_eq!(done[1].start_ns, 100);
        assert_eq!(done[1].end_ns, 100 + 1_100 + 400_000);
        assert!(c.is_idle());
    }

    #[test]
    fn the_channel_serves_data_outs_first_come_first_served() {
        let mut c = FlashCore::new(1, 2, SchedulerKind::Fifo, None, None);
        c.submit(tx(TxKind::Read, 0, 0, 0, 50_000));
        c.submit(tx(TxKind::Read, 1, 0, 8, 50_000));
        let done = run(&mut c);
        let ends: Vec<u64> = done.iter().map(|d| d.end_ns).collect();
        // The second command follows the first; its tR ends at 50.2 us,
        // while the first data-out holds the channel until 51.1 us.
        assert_eq!(ends, [100 + 50_000 + 1_000, 100 + 50_000 + 1_000 + 1_000]);
    }

    #[test]
    fn a_dependent_program_starts_after_the_read_it_waits_for() {
        let mut c = FlashCore::new(2, 2, SchedulerKind::Fifo, None, None);
        let r = c.submit(tx(TxKind::Read, 0, 0, 0, 50_000));
        let mut p = tx(TxKind::Program, 1, 0, 8, 400_000);
        p.channel = 1;
        p.after = Some(r);
        c.submit(p);
        let done = run(&mut c);
        assert_eq!(done[1].start_ns, done[0].end_ns);
    }

    #[test]
    fn a_read_never_overtakes_the_program_of_its_page_nor_the_erase_of_its_block() {
        for sched in [SchedulerKind::Mqsim, SchedulerKind::ReadPriority] {
            let mut c = FlashCore::new(1, 1, sched, None, None);
            c.submit(tx(TxKind::Erase, 0, 0, 0, 3_000_000)); // block 0
            c.submit(tx(TxKind::Program, 0, 0, 0, 400_000)); // page 0
            c.submit(tx(TxKind::Read, 0, 0, 0, 50_000)); // page 0
            let order: Vec<u64> = run(&mut c).iter().map(|d| d.id.into()).collect();
            assert_eq!(order, [0, 1, 2], "{sched:?}");
        }
    }

    #[test]
    fn a_dies_busy_until_is_what_runs_then_its_queue_back_to_back() {
        let mut c = FlashCore::new(1, 2, SchedulerKind::Fifo, None, None);
        assert_eq!(c.die_busy_until_ns(0), 0, "an idle die is free now");
        c.submit(tx(TxKind::Program, 0, 0, 4, 400_000));
        c.submit(tx(TxKind::Read, 0, 0, 9, 50_000));
        // Both queued, nothing started yet: back to back from now.
        assert_eq!(c.die_busy_until_ns(0), (1_100 + 400_000) + (100 + 50_000 + 1_000));
        assert_eq!(c.die_busy_until_ns(1), 0, "the other die holds nothing");
        let mut out = Vec::new();
        c.run_until(10_000, &mut out);
        // The program runs (its cell phase ends at 401.1 us); the read is queued.
        assert_eq!(c.die_busy_until_ns(0), 401_100 + 51_100);
        c.run_to_idle(&mut out);
        assert_eq!(out.last().unwrap().end_ns, 401_100 + 51_100, "exact with nothing else in the way");
    }

    #[test]
    fn a_suspended_program_ends_later_by_suspend_latency_and_tr() {
        let mut c = FlashCore::new(1, 1, SchedulerKind::ReadPriority, Some(20_000), None);
        c.submit(tx(TxKind::Program, 0, 0, 4, 400_000));
        let mut out = Vec::new();
        c.run_until(100_000, &mut out);
        c.submit(tx(TxKind::Read, 0, 1, 9, 50_000));
        c.run_to_idle(&mut out);
        let n = c.counters();
        assert_eq!((n.suspends, n.dispatched, n.completed), (1, 2, 2), "a resumption is no new dispatch");
        let read = out.iter().find(|d| d.id == 1).unwrap();
        assert_eq!(read.end_ns - 100_000, 100 + 20_000 + 50_000 + 1_000);
        assert!(read.suspended_other);
        let program = out.iter().find(|d| d.id == 0).unwrap();
        assert_eq!(program.end_ns, 1_100 + 400_000 + 20_000 + 50_000);
    }
}
