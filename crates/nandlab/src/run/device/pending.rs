//! Requests whose flash work runs on the event core
//! ([`crate::timing::event_timing`]): their completion is not known when
//! they are simulated, only when the core completes the epochs they wait
//! for. The device keeps them here and finishes them (their stages after
//! the flash: the read's link transfer, the write-back copy into DRAM)
//! when the perf driver runs the core past those epochs.
//!
//! A write-back line freed by an eviction that has not completed carries
//! the eviction's epoch as its `busy_until_ns`, tagged with
//! [`PENDING_EPOCH`] (simulated time stays below 2^62, so no real time has
//! the bit); when the epoch completes its lines get the real time. The free
//! lines' heap then orders such lines after every line with a known time,
//! oldest eviction first — where the reservation model takes the line whose
//! flush ends first, which it knows at once.

use super::{Completion, TimedDevice};
use crate::timing::event_timing::{EpochEnd, EpochId};
use crate::timing::{Breakdown, Component};

/// The tag of a line busy until an epoch completes: see the module docs.
pub const PENDING_EPOCH: u64 = 1 << 63;

/// What a waiting request does once its epochs completed.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Post {
    /// Nothing more: it completes with its flash work.
    Flash,
    /// A read: cached sectors laid over (ready at `data_ready_ns`), then the
    /// link to the host.
    ReadOut { bytes: u64, data_ready_ns: u64 },
    /// A write-back write that waited for cache lines: the copy into DRAM.
    CopyIn { bytes: u64 },
}

/// A request's timing outcome at simulation: known, or waiting for epochs.
pub(crate) enum Outcome {
    At(u64, Breakdown),
    Wait { epochs: Vec<EpochId>, ready_ns: u64, path: Breakdown, post: Post },
}

/// A request waiting for epochs of the event core.
#[derive(Clone, Debug)]
pub(crate) struct PendingRequest {
    queue: u32,
    arrival_ns: u64,
    /// When its flash work (or its wait for cache lines) could start.
    ready_ns: u64,
    path: Breakdown,
    post: Post,
    waiting: u32,
    /// The epoch that ended last so far.
    last: Option<EpochEnd>,
}

/// `span` of flash time, as the phases of the transaction that ended it
/// and the wait before (GC's share of the wait is not split out on the
/// event core: all of it is `die_wait`).
fn attribute_flash(path: &mut Breakdown, span: u64, last: Option<EpochEnd>) {
    let (transfer, cell) = last.map_or((0, 0), |e| (e.transfer_ns, e.cell_ns));
    let t = transfer.min(span);
    let c = cell.min(span - t);
    path.add(Component::FlashTransfer, t);
    path.add(Component::Cell, c);
    path.add(Component::DieWait, span - t - c);
}

impl TimedDevice {
    /// Register request `seq` (admitted on `queue`, arrived at
    /// `arrival_ns`) as waiting for `epochs`.
    pub(super) fn wait_for(
        &mut self,
        seq: u64,
        queue: u32,
        arrival_ns: u64,
        epochs: Vec<EpochId>,
        ready_ns: u64,
        path: Breakdown,
        post: Post,
    ) {
        let p = PendingRequest { queue, arrival_ns, ready_ns, path, post, waiting: epochs.len() as u32, last: None };
        for e in epochs {
            self.waiters.entry(e).or_default().push(seq);
        }
        self.pending.insert(seq, p);
    }

    /// Run the event core up to `t_ns`; requests that complete meanwhile
    /// are collected for [`TimedDevice::take_completed`].
    pub fn run_core_until(&mut self, t_ns: u64) {
        let mut ends = std::mem::take(&mut self.epoch_ends);
        ends.clear();
        {
            let mut model = self.model.borrow_mut();
            let Some(event) = model.event_mut() else { return };
            event.run_until(t_ns);
            event.take_finished(&mut ends);
        }
        for &e in &ends {
            self.epoch_done(e);
        }
        self.epoch_ends = ends;
    }

    /// When the event core's next event happens, if it runs the flash.
    pub fn next_core_event_ns(&self) -> Option<u64> {
        self.model.borrow().event().and_then(|e| e.next_event_ns())
    }

    /// Whether the event core times the flash work (`--scheduler`).
    pub fn uses_event_core(&self) -> bool {
        self.model.borrow().event().is_some()
    }

    /// Requests completed by the core since the last call: (seq, completion).
    pub fn take_completed(&mut self, out: &mut Vec<(u64, Completion)>) {
        out.append(&mut self.completed);
    }

    /// Epoch `e` completed: free its lines, advance its waiters.
    pub(super) fn epoch_done(&mut self, e: EpochEnd) {
        if let Some(lines) = self.line_epochs.remove(&e.id) {
            if let Some(cache) = self.cache.as_mut() {
                for l in lines {
                    let line = cache.line_mut(l);
                    if line.busy_until_ns == PENDING_EPOCH | e.id {
                        line.busy_until_ns = e.end_ns;
                    }
                }
            }
        }
        let Some(seqs) = self.waiters.remove(&e.id) else { return };
        for seq in seqs {
            let p = self.pending.get_mut(&seq).expect("a waiter is pending");
            if p.last.is_none_or(|l| e.end_ns >= l.end_ns) {
                p.last = Some(e);
            }
            p.waiting -= 1;
            if p.waiting == 0 {
                let p = self.pending.remove(&seq).expect("present");
                self.finish_pending(seq, p);
            }
        }
    }

    /// The stages after the flash of a request whose epochs all completed.
    fn finish_pending(&mut self, seq: u64, p: PendingRequest) {
        let mut path = p.path;
        let flash_end = p.last.map_or(p.ready_ns, |l| l.end_ns.max(p.ready_ns));
        let end = match p.post {
            Post::Flash => {
                attribute_flash(&mut path, flash_end - p.ready_ns, p.last);
                flash_end
            }
            Post::ReadOut { bytes, data_ready_ns } => {
                attribute_flash(&mut path, flash_end - p.ready_ns, p.last);
                let mut end = flash_end;
                if data_ready_ns > end {
                    path.add(Component::Dram, data_ready_ns - end);
                    end = data_ready_ns;
                }
                self.link(true, end, bytes, &mut path)
            }
            Post::CopyIn { bytes } => {
                path.add(Component::CacheWait, flash_end - p.ready_ns);
                self.dram_copy(flash_end, bytes, &mut path)
            }
        };
        self.queues.complete_at(p.queue, end);
        debug_assert_eq!(path.total(), end - p.arrival_ns, "breakdown sums to latency");
        self.completed.push((seq, Completion { completion_ns: end, breakdown: path }));
    }
}
