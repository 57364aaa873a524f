//! Epochs on the event core: how `perf` times flash work with
//! [`super::event_core::FlashCore`] (`--scheduler fifo|mqsim|read-priority`)
//! instead of the reservation model.
//!
//! The FTL still runs synchronously when a request is simulated; every
//! flash operation it issues becomes a [`Transaction`] of the current
//! *epoch* (one request's flash work, one cache eviction, one idle step),
//! built by [`super::FlashTiming`] from the same `[timing]` figures the
//! reservation model uses. The epoch's transactions are submitted to the
//! core together when the FTL call returns (no simulated time passes
//! during it), with the dependencies of the design note
//! (`docs/design-notes/timing-core.md`): a program from a buffer waits for
//! the read that filled it in the same epoch, and after a metadata or OOB
//! read every later transaction of the epoch waits for it (when both
//! apply, the later of the two is kept: the core takes one dependency).
//!
//! An epoch *completes* when its last non-GC transaction does (or, with
//! GC work only, its last): its end is the
//! last non-GC transaction's end (plus its ECC decode), or, for an epoch of
//! GC work only, the last GC transaction's — as in the reservation model,
//! where foreground GC delays a request through what waits for it on the
//! die, not by itself. Completed epochs are handed out in completion order
//! ([`EventTiming::take_finished`]); the device turns them into request
//! completions.
//!
//! **Windowed epochs** (write-back cache evictions): at most `window` are
//! submitted to the core at a time, as the reservation model's device keeps
//! at most two evictions per die in flight; the others wait, in order, and
//! are submitted (ready no earlier than then) as earlier ones complete.

use super::event_core::FlashCore;
use super::transaction::{Transaction, TxDone, TxId};
use std::collections::{HashMap, VecDeque};

/// Identifies an epoch on the event core.
pub type EpochId = u64;

/// One transaction of the open epoch, before submission.
#[derive(Copy, Clone, Debug)]
struct Staged {
    tx: Transaction,
    /// The staged transaction (index in the epoch) it waits for.
    after: Option<u32>,
    gc: bool,
    decode_ns: u64,
}

/// What the core needs back about a submitted transaction.
#[derive(Copy, Clone, Debug, Default)]
struct TxInfo {
    epoch: EpochId,
    gc: bool,
    decode_ns: u64,
    /// Channel and cell time of its own phases (for the breakdown).
    transfer_ns: u64,
    cell_ns: u64,
}

/// An epoch submitted (or waiting for the window), not yet complete.
#[derive(Clone, Debug, Default)]
struct InFlight {
    ready_ns: u64,
    outstanding: u32,
    /// Non-GC transactions not yet complete.
    outstanding_work: u32,
    /// Handed out as finished (its non-GC work done; GC may still run).
    reported: bool,
    windowed: bool,
    end: Option<EpochEnd>,
    gc_end: Option<EpochEnd>,
}

/// When an epoch completed, and the phases of the transaction that ended it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct EpochEnd {
    pub id: EpochId,
    pub ready_ns: u64,
    pub end_ns: u64,
    /// Channel time of the last transaction's own phases, ns.
    pub transfer_ns: u64,
    /// Cell time (and ECC decode) of the last transaction, ns.
    pub cell_ns: u64,
}

/// The open epoch: transactions staged while the FTL runs.
#[derive(Clone, Debug, Default)]
struct Open {
    id: EpochId,
    ready_ns: u64,
    windowed: bool,
    staged: Vec<Staged>,
    /// The last metadata or OOB read staged (every later one waits for it).
    barrier: Option<u32>,
    /// Buffers filled by reads of this epoch: (buffer index, staged index).
    buffers: Vec<(u32, u32)>,
}

/// The event core and the epochs on it. See the module docs.
pub struct EventTiming {
    core: FlashCore,
    info: VecDeque<TxInfo>,
    info_base: TxId,
    epochs: HashMap<EpochId, InFlight>,
    open: Open,
    next_epoch: EpochId,
    window: usize,
    windowed_submitted: usize,
    waiting: VecDeque<(EpochId, Vec<Staged>)>,
    /// Per die, the occupancy of the open epoch's staged transactions and
    /// of the waiting epochs' (kept as they change: see
    /// [`EventTiming::die_busy_until_ns`]).
    staged_ns: Vec<u64>,
    waiting_ns: Vec<u64>,
    done: Vec<TxDone>,
    finished: Vec<EpochEnd>,
}

/// Add (`add`) or take away each of `staged`'s occupancies to its die's entry of `per_die`.
fn account(per_die: &mut Vec<u64>, staged: &[Staged], add: bool) {
    for s in staged {
        let die = s.tx.die as usize;
        if per_die.len() <= die {
            per_die.resize(die + 1, 0);
        }
        let ns = s.tx.occupancy_ns();
        per_die[die] = if add { per_die[die] + ns } else { per_die[die] - ns };
    }
}

impl EventTiming {
    /// Epochs on `core`; at most `window` windowed epochs submitted at a time.
    pub fn new(core: FlashCore, window: usize) -> EventTiming {
        EventTiming {
            core,
            info: VecDeque::new(),
            info_base: 0,
            epochs: HashMap::new(),
            open: Open::default(),
            next_epoch: 1,
            window: window.max(1),
            windowed_submitted: 0,
            waiting: VecDeque::new(),
            staged_ns: Vec::new(),
            waiting_ns: Vec::new(),
            done: Vec::new(),
            finished: Vec::new(),
        }
    }

    pub fn core(&self) -> &FlashCore {
        &self.core
    }

    /// Open an epoch ready at `ready_ns`; `windowed`: a cache eviction.
    pub fn begin(&mut self, ready_ns: u64, windowed: bool) -> EpochId {
        let id = self.next_epoch;
        self.next_epoch += 1;
        let mut staged = std::mem::take(&mut self.open.staged);
        account(&mut self.staged_ns, &staged, false);
        staged.clear();
        let mut buffers = std::mem::take(&mut self.open.buffers);
        buffers.clear();
        self.open = Open { id, ready_ns, windowed, staged, barrier: None, buffers };
        id
    }

    /// When the open epoch is ready.
    pub fn open_ready_ns(&self) -> u64 {
        self.open.ready_ns
    }

    /// Stage a transaction of the open epoch. `buffer`: the buffer a
    /// program takes its data from, or a read fills; `barrier`: a metadata
    /// or OOB read the FTL inspects.
    pub fn stage(&mut self, mut tx: Transaction, buffer: Option<u32>, barrier: bool, gc: bool, decode_ns: u64) {
        let o = &mut self.open;
        let index = o.staged.len() as u32;
        tx.ready_ns = o.ready_ns;
        tx.tag = o.id;
        tx.after = None;
        let mut after = o.barrier;
        if !tx.is_read() {
            if let Some(b) = buffer {
                if let Some(&(_, i)) = o.buffers.iter().rev().find(|(bi, _)| *bi == b) {
                    after = after.max(Some(i));
                }
            }
        }
        o.staged.push(Staged { tx, after, gc, decode_ns });
        account(&mut self.staged_ns, &o.staged[index as usize..], true);
        if tx.is_read() {
            if let Some(b) = buffer {
                o.buffers.push((b, index));
            }
            if barrier {
                o.barrier = Some(index);
            }
        }
    }

    /// Close the open epoch: submit it (or queue it behind the window).
    /// Returns `None` if it had no flash work (it completes at once).
    pub fn end(&mut self) -> Option<EpochId> {
        let o = &mut self.open;
        if o.staged.is_empty() {
            return None;
        }
        let id = o.id;
        let flight = InFlight { ready_ns: o.ready_ns, windowed: o.windowed, ..Default::default() };
        self.epochs.insert(id, flight);
        account(&mut self.staged_ns, &o.staged, false);
        if o.windowed && self.windowed_submitted >= self.window {
            let staged = std::mem::take(&mut o.staged);
            account(&mut self.waiting_ns, &staged, true);
            self.waiting.push_back((id, staged));
        } else {
            if o.windowed {
                self.windowed_submitted += 1;
            }
            let mut staged = std::mem::take(&mut self.open.staged);
            self.submit(id, &staged);
            // Cleared: submitted work is the core's now (the allocation is kept).
            staged.clear();
            self.open.staged = staged;
        }
        Some(id)
    }

    fn submit(&mut self, id: EpochId, staged: &[Staged]) {
        let now = self.core.now_ns();
        let first = self.core_next_id();
        let e = self.epochs.get_mut(&id).expect("epoch in flight");
        e.outstanding = staged.len() as u32;
        e.outstanding_work = staged.iter().filter(|s| !s.gc).count() as u32;
        e.ready_ns = e.ready_ns.max(now);
        for s in staged {
            let mut tx = s.tx;
            tx.after = s.after.map(|i| first + i);
            let got = self.core.submit(tx);
            debug_assert_eq!(got, self.core_next_id());
            self.info.push_back(TxInfo {
                epoch: id,
                gc: s.gc,
                decode_ns: s.decode_ns,
                transfer_ns: tx.channel_in_ns + tx.channel_out_ns,
                cell_ns: tx.cell_ns,
            });
        }
    }

    fn core_next_id(&self) -> TxId {
        self.info_base + self.info.len() as TxId
    }

    /// An estimate of when `die` finishes the work issued to it: what the
    /// core holds ([`FlashCore::die_busy_until_ns`]), then, no earlier than
    /// the open epoch's ready time, the open epoch's staged transactions and
    /// the evictions waiting for the window, back to back. The FTL asks it
    /// right after foreground GC, whose transactions are still staged.
    /// O(1): the sums are kept as transactions are staged, queued and started.
    pub fn die_busy_until_ns(&self, die: u32) -> u64 {
        let staged_ns = self.staged_ns.get(die as usize).copied().unwrap_or(0);
        let waiting_ns = self.waiting_ns.get(die as usize).copied().unwrap_or(0);
        self.core.die_busy_until_ns(die).max(self.open.ready_ns) + staged_ns + waiting_ns
    }

    /// Windowed epochs in flight or waiting for the window.
    pub fn windowed_outstanding(&self) -> usize {
        self.windowed_submitted + self.waiting.len()
    }

    /// The windowed epochs not yet complete.
    pub fn windowed_epochs(&self, out: &mut Vec<EpochId>) {
        out.extend(self.epochs.iter().filter(|(_, e)| e.windowed && !e.reported).map(|(&id, _)| id));
    }

    /// When the core's next event happens.
    pub fn next_event_ns(&self) -> Option<u64> {
        self.core.next_event_ns()
    }

    pub fn now_ns(&self) -> u64 {
        self.core.now_ns()
    }

    /// Nothing submitted is left to run.
    pub fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.core.is_idle()
    }

    /// Move an idle core's clock back to `t_ns` (see [`FlashCore::rewind_idle`]).
    pub fn rewind_idle(&mut self, t_ns: u64) {
        self.core.rewind_idle(t_ns);
    }

    /// Run the core's events up to `t_ns`; completed epochs collect for
    /// [`EventTiming::take_finished`].
    pub fn run_until(&mut self, t_ns: u64) {
        loop {
            let mut done = std::mem::take(&mut self.done);
            done.clear();
            // One event time at a time: an epoch completing may submit a
            // waiting one, whose work must start at that time.
            let next = match self.core.next_event_ns() {
                Some(n) if n <= t_ns => n,
                _ => {
                    self.core.run_until(t_ns, &mut done);
                    self.absorb(&done);
                    self.done = done;
                    return;
                }
            };
            self.core.run_until(next, &mut done);
            self.absorb(&done);
            self.done = done;
        }
    }

    fn absorb(&mut self, done: &[TxDone]) {
        for d in done {
            let i = (d.id - self.info_base) as usize;
            let info = self.info[i];
            let e = self.epochs.get_mut(&info.epoch).expect("epoch of a transaction");
            let end = EpochEnd {
                id: info.epoch,
                ready_ns: e.ready_ns,
                end_ns: d.end_ns + info.decode_ns,
                transfer_ns: info.transfer_ns,
                cell_ns: info.cell_ns + info.decode_ns,
            };
            let slot = if info.gc { &mut e.gc_end } else { &mut e.end };
            if slot.is_none_or(|s| end.end_ns >= s.end_ns) {
                *slot = Some(end);
            }
            e.outstanding -= 1;
            if !info.gc {
                e.outstanding_work -= 1;
            }
            // A request waits for its own work, not for the foreground GC it
            // issued (which delays it only through what waits behind it on
            // the die), as in the reservation model.
            let work_done = e.end.is_some() && e.outstanding_work == 0;
            if !e.reported && (work_done || e.outstanding == 0) {
                e.reported = true;
                let end = e.end.or(e.gc_end).expect("an epoch with work has an end");
                self.finished.push(end);
            }
            if e.outstanding == 0 {
                let e = self.epochs.remove(&info.epoch).expect("present");
                if e.windowed {
                    self.windowed_submitted -= 1;
                    if let Some((id, staged)) = self.waiting.pop_front() {
                        account(&mut self.waiting_ns, &staged, false);
                        self.windowed_submitted += 1;
                        self.submit(id, &staged);
                    }
                }
            }
        }
        // Drop the records of the oldest transactions once all of them are done.
        while self.info.front().is_some_and(|i| !self.epochs.contains_key(&i.epoch)) {
            self.info.pop_front();
            self.info_base += 1;
        }
    }

    /// Epochs completed since the last call, in completion order.
    pub fn take_finished(&mut self, out: &mut Vec<EpochEnd>) {
        out.append(&mut self.finished);
    }

    /// Run the core until epoch `id` completes (an idle step on an otherwise
    /// idle core); its end.
    pub fn run_epoch(&mut self, id: EpochId) -> u64 {
        let mut end = None;
        let mut buf = Vec::new();
        while end.is_none() {
            let Some(next) = self.core.next_event_ns() else { break };
            self.run_until(next);
            buf.clear();
            self.take_finished(&mut buf);
            for e in &buf {
                if e.id == id {
                    end = Some(e.end_ns);
                }
            }
            // Others (none on an idle core) go back for the device.
            self.finished.extend(buf.iter().filter(|e| e.id != id));
        }
        end.unwrap_or(self.core.now_ns())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::scheduler::SchedulerKind;
    use crate::timing::transaction::{TxClass, TxKind};

    fn program(die: u32, page: u64) -> Transaction {
        Transaction {
            kind: TxKind::Program,
            class: TxClass::User,
            die,
            channel: 0,
            planes_mask: 1,
            page,
            block: page / 4,
            channel_in_ns: 1_000,
            cell_ns: 100_000,
            channel_out_ns: 0,
            ready_ns: 0,
            after: None,
            tag: 0,
        }
    }

    /// The estimate the running sums must equal: the core's, then the open
    /// epoch's staged and the window-waiting transactions of the die summed.
    fn summed(t: &EventTiming, die: u32) -> u64 {
        let on_die = |s: &&Staged| s.tx.die == die;
        let staged_ns: u64 = t.open.staged.iter().filter(on_die).map(|s| s.tx.occupancy_ns()).sum();
        let waiting_ns: u64 =
            t.waiting.iter().flat_map(|(_, staged)| staged.iter().filter(on_die)).map(|s| s.tx.occupancy_ns()).sum();
        t.core.die_busy_until_ns(die).max(t.open.ready_ns) + staged_ns + waiting_ns
    }

    #[test]
    fn the_running_backlog_sums_equal_the_summed_queues_through_staging_windows_and_completions() {
        let core = FlashCore::new(1, 2, SchedulerKind::Fifo, None, None);
        let mut t = EventTiming::new(core, 1);
        let check = |t: &EventTiming| {
            for die in 0..2 {
                assert_eq!(t.die_busy_until_ns(die), summed(t, die), "die {die}");
            }
        };
        let mut busy = 0;
        for epoch in 0..6u64 {
            t.begin(t.now_ns(), true);
            for k in 0..3 {
                t.stage(program((epoch + k) as u32 % 2, epoch * 8 + k), None, false, false, 0);
                check(&t);
            }
            t.end();
            check(&t);
            busy = busy.max(t.die_busy_until_ns(0));
        }
        assert!(t.windowed_outstanding() > 1, "epochs wait for the window");
        assert!(busy > 3 * 101_000, "the backlog counts waiting epochs");
        while let Some(next) = t.next_event_ns() {
            t.run_until(next);
            check(&t);
        }
        assert!(t.is_idle());
        assert_eq!(t.die_busy_until_ns(0), t.now_ns(), "nothing left: free now");
    }
}
