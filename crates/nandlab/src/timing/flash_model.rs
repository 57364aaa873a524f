//! The flash timing model: a [`FlashObserver`] that places every flash
//! operation on the timelines of its channel, die and plane(s).
//!
//! # Phases of an operation
//!
//! | operation | channel                          | die (cell)        | plane held until      |
//! |-----------|----------------------------------|-------------------|-----------------------|
//! | read      | command; data-out after the cell | tR                | data-out ends (1)     |
//! | program   | command + data-in                | tPROG             | cell ends             |
//! | copyback  | command only (data stays inside) | tR + tPROG        | cell ends             |
//! | erase     | command only                     | tBERS             | cell ends             |
//!
//! (1) With `cache_read` (the default) the plane may start its next tR as
//! soon as this one ends (ONFI READ CACHE), and the data leaves through the
//! register pipeline in channel order: after the previous read's data-out
//! from that plane. The strict one-cache-register stall (the *second* next
//! tR waits for this data-out) is not modelled: operations are reserved in
//! the order requests arrive, not in the order a work-conserving channel
//! arbiter would serve them, and that stall would turn the ordering
//! difference into a throughput loss that a real controller does not have
//! (measured: `docs/design-notes/drive.md`). Without `cache_read` the plane is
//! held until its data-out ends.
//!
//! Transfers take `bytes / (channel_rate_mtps × channel_width_bytes)`
//! (ONFI NV-DDR2 at 400 MT/s on an 8-bit bus moves 400 MB/s); the command
//! and address cycles take `command_latency_ns`. tR and tPROG depend on the
//! page type (the bit of its word line a page holds), as in MQSim
//! (Tavakkol et al., FAST 2018). A multi-plane operation moves every
//! plane's data over the channel but runs one cell phase for all planes.
//!
//! # Resources and ordering
//!
//! - A **plane** executes its operations in the order the FTL issued them
//!   (first come, first served): that keeps erase-before-program and
//!   in-order programming within a block, and a read of a page never
//!   overtakes the program that wrote it. A read holds the plane's page
//!   register until its data-out ends.
//! - A **die** runs one cell operation at a time; a **channel** carries
//!   one transfer at a time. Both are [`Timeline`]s with first-fit
//!   backfilling, so operations of different dies overlap freely: the data
//!   transfer of one die overlaps the cell operations of the others.
//! - With `cache_program`, a program's data-in goes to the plane's cache
//!   register while the previous program is still in the cell (it only
//!   needs that program to have started); without it, the die is held from
//!   the start of data-in to the end of tPROG.
//! - **Data dependencies** order operations of one request (an *epoch*):
//!   a program from a buffer starts no earlier than the read that filled
//!   that buffer in the same epoch completed (GC without copyback, a
//!   read-modify-write), and after a metadata or OOB read — bytes the FTL
//!   inspects before deciding what to do next — every later operation of
//!   the epoch starts no earlier than that read completed. Everything else
//!   overlaps.
//! - **Suspend** (optional, per program and erase): a read whose die is
//!   executing a program or erase at the moment the read could start
//!   suspends it, runs after the suspend latency, and the suspended
//!   operation's remaining work resumes later: its end moves by suspend
//!   latency + tR, placed in the die's next free time. Completions already
//!   computed for the request that issued the suspended operation are
//!   moved too (see [`FlashTiming::take_extensions`]).
//!
//! # Attributing waits to garbage collection
//!
//! A wait for a die or plane from `t` to `s` is split by the work ahead of
//! the operation on its die: the time garbage collection holds the die
//! within `[t, s)` is `gc_wait`, the rest `die_wait` (other requests' work,
//! and gaps too short to use). A request queued behind a host program that
//! itself queued behind three GC copies thus waits mostly for GC — as it
//! does on the drive — though the reservation just ahead of it is not GC's.
//! Only epochs a request waits for are split so: the breakdown of an
//! unowned epoch (a cache eviction, an idle step) is never reported, and
//! summing GC's share walks every reservation queued ahead on the die —
//! the dearest part of timing a GC-bound drive, whose flash work is nearly
//! all write-back evictions. Their waits count as `die_wait` whole.
//!
//! # Scheduling horizon
//!
//! Operations are placed no earlier than the current arrival
//! ([`FlashTiming::advance`]), the horizon before which timelines forget
//! their intervals. An epoch may be ready later than that (a cache eviction
//! waiting for a slot); that does not move the horizon, because a later
//! request may still be ready earlier and must see the work booked there.
//!
//! # What it reports
//!
//! Per epoch, when its last operation completes and the critical path's
//! [`Breakdown`]; per channel and die, reserved time (utilisation); per
//! interval of simulated time, garbage-collection pages moved and blocks
//! erased, foreground (inside a host request) and background.

use super::breakdown::{Breakdown, Component};
use super::config::Timing;
use super::event_timing::EventTiming;
use super::timeline::{Fit, Timeline};
use super::trace_out::{OpRecord, TraceRecorder};
use super::transaction::{Transaction, TxClass, TxKind};
use super::MAX_SERIES_BINS;
use crate::flash::{Cause, FlashObserver, FlashOp, OpKind};
use crate::nand::{FastDiv, Geometry, PagePairing, PageType};
use serde::Serialize;
use std::cell::RefCell;
use std::rc::Rc;

/// No request waits for this epoch (background work, cache evictions).
pub const NO_OWNER: u64 = u64::MAX;

#[derive(Copy, Clone, Debug, Default)]
struct PlaneState {
    /// When the plane's last operation (in issue order) is done.
    free_at: u64,
    /// `free_at` before the last operation (a suspending read may use it).
    prev_free_at: u64,
    /// When the cache register is free for the next program's data-in.
    cache_free_at: u64,
    /// When the last read's data-out (from the cache register) ends.
    data_out_end: u64,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum LongKind {
    Program,
    Erase,
}

/// The last program or erase reserved on a die (a suspend candidate).
#[derive(Copy, Clone, Debug)]
struct LongOp {
    start: u64,
    end: u64,
    kind: LongKind,
    owner: u64,
    first_plane: u32,
    planes: u32,
    page: u64,
    gc: bool,
}

#[derive(Copy, Clone, Debug, Default)]
struct Dep {
    epoch: u64,
    end: u64,
    path: Breakdown,
}

/// A read's media time (see [`FlashTiming::read_media_ns`]).
#[derive(Copy, Clone, Debug)]
struct ReadMedia {
    /// The die's time: tR, and for each retry command, transfer and tR.
    cell_ns: u64,
    /// The retries' commands and transfers within `cell_ns`.
    retry_transfer_ns: u64,
    /// ECC decode of every attempt, after the last data-out.
    decode_ns: u64,
}

impl ReadMedia {
    /// The breakdown booked `cell_ns` whole as cell time: the retries'
    /// transfers are flash transfer, and the decode is cell time too (the
    /// media's share of the read: tR and its ECC).
    fn attribute(&self, path: &mut Breakdown) {
        path.shift(Component::Cell, Component::FlashTransfer, self.retry_transfer_ns);
        path.add(Component::Cell, self.decode_ns);
    }
}

/// Flash work completed in one interval of simulated time.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FlashInterval {
    /// Pages programmed for any cause (copyback destinations included).
    pub pages_programmed: u64,
    /// Pages of host data programmed.
    pub host_pages_programmed: u64,
    pub foreground_gc_pages_moved: u64,
    pub background_gc_pages_moved: u64,
    pub gc_blocks_erased: u64,
    pub blocks_erased: u64,
    /// Die time reserved in the interval, summed over dies, ns.
    pub die_busy_ns: u64,
    /// Cell reads of any kind (data, OOB, metadata, copyback sources): a tR each.
    pub pages_read: u64,
}

impl FlashInterval {
    /// Add the next interval's work (merging two intervals into one).
    pub fn absorb(&mut self, o: &FlashInterval) {
        self.pages_programmed += o.pages_programmed;
        self.host_pages_programmed += o.host_pages_programmed;
        self.foreground_gc_pages_moved += o.foreground_gc_pages_moved;
        self.background_gc_pages_moved += o.background_gc_pages_moved;
        self.gc_blocks_erased += o.gc_blocks_erased;
        self.blocks_erased += o.blocks_erased;
        self.die_busy_ns += o.die_busy_ns;
        self.pages_read += o.pages_read;
    }
}

/// The operation kinds counted per die, in the order of
/// [`FlashTiming::die_pages`] (the names the timeline's slices carry).
pub const DIE_OP_NAMES: [&str; 7] = ["read", "read_oob", "read_meta", "program", "program_meta", "copyback", "erase"];

/// The index of `kind` in [`DIE_OP_NAMES`].
fn die_op_index(kind: OpKind) -> usize {
    match kind {
        OpKind::Read => 0,
        OpKind::ReadOob => 1,
        OpKind::ReadMeta => 2,
        OpKind::Program => 3,
        OpKind::ProgramMeta => 4,
        OpKind::Copyback => 5,
        OpKind::Erase => 6,
    }
}

/// Totals of what the model timed.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FlashTimingCounters {
    pub operations: u64,
    pub foreground_gc_pages_moved: u64,
    pub background_gc_pages_moved: u64,
    pub foreground_gc_erases: u64,
    pub background_gc_erases: u64,
    pub suspends: u64,
}

/// One request's (or background step's) view of the flash.
#[derive(Copy, Clone, Debug, Default)]
struct Epoch {
    id: u64,
    ready: u64,
    ready_path: Breakdown,
    end: u64,
    end_path: Breakdown,
    /// Whether any non-GC operation was timed.
    has_work: bool,
    gc_end: u64,
    gc_path: Breakdown,
    owner: u64,
}

/// The flash timing model. See the module docs.
pub struct FlashTiming {
    enabled: bool,
    t: Timing,
    /// Geometry divisors (page addresses fit in 32 bits: see `Geometry`);
    /// every operation divides its address by them.
    pages_per_block: FastDiv,
    pages_per_plane: FastDiv,
    blocks_per_plane: FastDiv,
    planes_per_die: u32,
    /// Each plane's die and channel (see [`FlashTiming::place`]).
    die_and_channel_of_plane: Vec<(u32, u32)>,
    read_ns_by_page: Vec<u64>,
    program_ns_by_page: Vec<u64>,
    channels: Vec<Timeline>,
    dies: Vec<Timeline>,
    planes: Vec<PlaneState>,
    long_ops: Vec<Option<LongOp>>,
    deps: Vec<Dep>,
    epoch: Epoch,
    next_epoch: u64,
    /// Simulated time before which nothing new can be scheduled (prune
    /// horizon): the latest arrival, never an epoch's (possibly later) ready time.
    now: u64,
    /// The first arrival: interval 0 of the flash series starts here.
    origin_ns: u64,
    extensions: Vec<(u64, u64)>,
    /// End of the operation timed last.
    last_end: u64,
    counters: FlashTimingCounters,
    /// Pages (planes) each die did per operation kind, indexed by
    /// [`DIE_OP_NAMES`]: the report's `perf.die_operations`.
    die_pages: Vec<[u64; DIE_OP_NAMES.len()]>,
    interval_ns: u64,
    flash_series: Vec<FlashInterval>,
    /// The flash series' interval used last: (index, start since `origin_ns`, ns).
    last_bin: (usize, u64),
    /// The last transfer size timed and its channel time: (bytes, ns).
    last_transfer: (u32, u64),
    /// `perf --trace-out` (see [`super::trace_out`]). Without it the
    /// booking paths only test the Option: the phases of an operation are
    /// noted in the recorder, not in this struct, so the untraced model
    /// stores nothing more than before the timeline existed.
    trace: Option<Box<TraceRecorder>>,
    /// The event core, when it times the flash work instead of the
    /// reservations ([`super::event_timing`]); the counters and the flash
    /// series are kept here either way.
    event: Option<Box<EventTiming>>,
    /// With the event core: cell time per die and channel time per
    /// channel, summed as operations are issued, ns.
    event_die_busy_ns: Vec<u64>,
    event_channel_busy_ns: Vec<u64>,
}

impl FlashTiming {
    /// A model for `geometry` with timings `t`; GC activity is binned in
    /// intervals of `interval_ns`.
    pub fn new(geometry: &Geometry, t: &Timing, interval_ns: u64) -> FlashTiming {
        let ppb = geometry.pages_per_block();
        let level = |p: u32| -> usize {
            let bits = geometry.cell_type().bits_per_cell();
            match geometry.config().page_pairing {
                PagePairing::Consecutive => (p % bits) as usize,
                PagePairing::Staggered => usize::from(geometry.page_type(p) == PageType::Msb),
            }
        };
        let dies_per_channel = geometry.chips_per_channel() * geometry.dies_per_chip();
        FlashTiming {
            enabled: true,
            pages_per_block: FastDiv::new(ppb),
            pages_per_plane: FastDiv::new(ppb * geometry.blocks_per_plane()),
            blocks_per_plane: FastDiv::new(geometry.blocks_per_plane()),
            planes_per_die: geometry.planes_per_die(),
            die_and_channel_of_plane: (0..geometry.planes())
                .map(|p| {
                    let die = p / geometry.planes_per_die();
                    (die, die / dies_per_channel)
                })
                .collect(),
            read_ns_by_page: (0..ppb).map(|p| t.read_ns_by_level[level(p)]).collect(),
            program_ns_by_page: (0..ppb).map(|p| t.program_ns_by_level[level(p)]).collect(),
            channels: vec![Timeline::default(); geometry.channels() as usize],
            dies: vec![Timeline::default(); geometry.dies() as usize],
            planes: vec![PlaneState::default(); geometry.planes() as usize],
            long_ops: vec![None; geometry.dies() as usize],
            deps: Vec::new(),
            epoch: Epoch { owner: NO_OWNER, ..Default::default() },
            next_epoch: 1,
            now: 0,
            origin_ns: 0,
            extensions: Vec::new(),
            last_end: 0,
            counters: FlashTimingCounters::default(),
            die_pages: vec![[0; DIE_OP_NAMES.len()]; geometry.dies() as usize],
            interval_ns: interval_ns.max(1),
            flash_series: Vec::new(),
            last_bin: (0, 0),
            last_transfer: (0, 0),
            trace: None,
            event: None,
            event_die_busy_ns: vec![0; geometry.dies() as usize],
            event_channel_busy_ns: vec![0; geometry.channels() as usize],
            t: t.clone(),
        }
    }

    /// Time flash work on the event core from now on (see [`super::event_timing`]).
    pub fn use_event_core(&mut self, event: EventTiming) {
        self.event = Some(Box::new(event));
    }

    /// The event core's epochs, when it times the flash work.
    pub fn event(&self) -> Option<&EventTiming> {
        self.event.as_deref()
    }
    pub fn event_mut(&mut self) -> Option<&mut EventTiming> {
        self.event.as_deref_mut()
    }

    /// Stage `op` as a transaction of the event core's open epoch.
    fn stage_event(&mut self, op: &FlashOp) {
        let erase = op.kind == OpKind::Erase;
        let plane = if erase {
            self.blocks_per_plane.quotient(op.address as u32)
        } else {
            self.pages_per_plane.quotient(op.address as u32)
        };
        let (die, ch) = self.place(plane);
        let planes_mask =
            if op.planes > 1 { (1u64 << self.planes_per_die) - 1 } else { 1u64 << (plane % self.planes_per_die) };
        let block = if erase { op.address } else { u64::from(self.pages_per_block.quotient(op.address as u32)) };
        let cmd = self.t.command_ns;
        let (kind, channel_in_ns, cell_ns, channel_out_ns, decode_ns) = match op.kind {
            OpKind::Read | OpKind::ReadOob | OpKind::ReadMeta => {
                let xfer = self.transfer_ns(op.transfer_bytes);
                let media = self.read_media_ns(op, self.read_cell_ns(op.address), xfer);
                (TxKind::Read, cmd, media.cell_ns, xfer, media.decode_ns)
            }
            OpKind::Program | OpKind::ProgramMeta => {
                let xfer = self.transfer_ns(op.transfer_bytes);
                let t_prog = self.program_ns_by_page[self.pages_per_block.remainder(op.address as u32) as usize];
                (TxKind::Program, cmd + xfer, t_prog, 0, 0)
            }
            OpKind::Copyback => {
                let src = op.source.unwrap_or(op.address);
                let ns = self.read_cell_ns(src)
                    + self.program_ns_by_page[self.pages_per_block.remainder(op.address as u32) as usize];
                (TxKind::Copyback, cmd, ns, 0, 0)
            }
            OpKind::Erase => (TxKind::Erase, cmd, self.t.erase_ns, 0, 0),
        };
        let gc = is_gc(op.cause);
        let class = match op.cause {
            Cause::Host => TxClass::User,
            Cause::Gc | Cause::WearLeveling => TxClass::Gc { urgent: op.request_id.is_some() },
            _ => TxClass::Mapping,
        };
        let tx = Transaction {
            kind,
            class,
            die: die as u32,
            channel: ch as u32,
            planes_mask,
            page: if erase { u64::MAX } else { op.address },
            block,
            channel_in_ns,
            cell_ns,
            channel_out_ns,
            ready_ns: 0,
            after: None,
            tag: 0,
        };
        self.event_die_busy_ns[die] += cell_ns;
        self.event_channel_busy_ns[ch] += channel_in_ns + channel_out_ns;
        let barrier = matches!(op.kind, OpKind::ReadMeta | OpKind::ReadOob);
        let event = self.event.as_deref_mut().expect("event core in use");
        let ready = event.open_ready_ns();
        event.stage(tx, op.buffer.map(|b| b.index()), barrier, gc, decode_ns);
        // The flash series bins the operation at its epoch's ready time.
        self.last_end = ready;
        self.bin_die_busy(ready, cell_ns);
    }

    /// Bin the flash series from `origin_ns` (the first arrival) on.
    pub fn set_origin(&mut self, origin_ns: u64) {
        self.origin_ns = origin_ns;
        if let Some(t) = &mut self.trace {
            t.set_origin(origin_ns);
        }
    }

    /// Record every timed operation into `recorder` from now on.
    pub fn set_trace(&mut self, recorder: Option<Box<TraceRecorder>>) {
        self.trace = recorder;
    }

    /// The trace recorder, if one is set.
    pub fn trace_mut(&mut self) -> Option<&mut TraceRecorder> {
        self.trace.as_deref_mut()
    }

    /// Take the trace recorder out (its last GC run closed).
    pub fn take_trace(&mut self) -> Option<Box<TraceRecorder>> {
        let mut trace = self.trace.take()?;
        trace.end_gc_run();
        Some(trace)
    }

    /// Note a channel use of the operation being timed (for the trace).
    #[inline]
    fn note_chan(&mut self, start: u64, ns: u64) {
        if let Some(t) = self.trace.as_deref_mut() {
            t.note_chan(start, ns);
        }
    }

    /// Note the cell phase of the operation being timed (for the trace).
    #[inline]
    fn note_cell(&mut self, start: u64, ns: u64) {
        if let Some(t) = self.trace.as_deref_mut() {
            t.note_cell(start, ns);
        }
    }

    /// Keep every reservation of every channel and die (tests): see
    /// [`FlashTiming::double_booking`].
    pub fn enable_audit(&mut self) {
        self.channels.iter_mut().chain(&mut self.dies).for_each(Timeline::enable_audit);
    }

    /// A channel or die booked twice for the same instant, when auditing:
    /// which resource and the two overlapping reservations.
    pub fn double_booking(&self) -> Option<String> {
        let named = self.channels.iter().enumerate().map(|(i, t)| (format!("channel {i}"), t));
        let dies = self.dies.iter().enumerate().map(|(i, t)| (format!("die {i}"), t));
        named.chain(dies).find_map(|(name, t)| t.double_booking().map(|(a, b)| format!("{name}: {a:?} and {b:?}")))
    }

    /// Untimed phases (preconditioning) switch the model off.
    pub fn set_enabled(&mut self, on: bool) {
        self.enabled = on;
    }

    /// Start an epoch: the flash work of one request (`owner`) or of one
    /// background step ([`NO_OWNER`]), which may start at `ready_ns`;
    /// `path` is the latency breakdown accumulated before it.
    pub fn begin_epoch(&mut self, ready_ns: u64, owner: u64, path: Breakdown) {
        debug_assert!(ready_ns >= self.now, "epoch ready at {ready_ns} before the horizon {}", self.now);
        self.epoch = Epoch {
            id: self.next_epoch,
            ready: ready_ns,
            ready_path: path,
            end: ready_ns,
            end_path: path,
            has_work: false,
            gc_end: ready_ns,
            gc_path: path,
            owner,
        };
        self.next_epoch += 1;
    }

    /// When the epoch's last operation completes, and the critical path.
    pub fn end_epoch(&self) -> (u64, Breakdown) {
        let e = &self.epoch;
        if e.has_work || e.gc_end <= e.end {
            (e.end, e.end_path)
        } else {
            (e.gc_end, e.gc_path)
        }
    }

    /// Declare that nothing will be scheduled before `now_ns` (lets the
    /// timelines forget finished work).
    pub fn advance(&mut self, now_ns: u64) {
        self.now = self.now.max(now_ns);
    }

    /// Requests whose completion moved because a read suspended one of
    /// their operations: (owner, new completion), drained.
    pub fn take_extensions(&mut self, out: &mut Vec<(u64, u64)>) {
        out.append(&mut self.extensions);
    }

    pub fn counters(&self) -> &FlashTimingCounters {
        &self.counters
    }

    /// The flash series' interval, ns: the one asked for, doubled each
    /// time the series reached [`MAX_SERIES_BINS`].
    pub fn flash_interval_ns(&self) -> u64 {
        self.interval_ns
    }

    pub fn flash_series(&self) -> &[FlashInterval] {
        &self.flash_series
    }

    /// Reserved time of each channel and die, ns (with the event core:
    /// the time of every operation issued).
    pub fn channel_busy_ns(&self) -> Vec<u64> {
        if self.event.is_some() {
            return self.event_channel_busy_ns.clone();
        }
        self.channels.iter().map(Timeline::reserved_ns).collect()
    }
    /// Pages (planes) each die did per operation kind, in the order of
    /// [`DIE_OP_NAMES`].
    pub fn die_pages(&self) -> &[[u64; DIE_OP_NAMES.len()]] {
        &self.die_pages
    }

    pub fn die_busy_ns(&self) -> Vec<u64> {
        if self.event.is_some() {
            return self.event_die_busy_ns.clone();
        }
        self.dies.iter().map(Timeline::reserved_ns).collect()
    }
    /// When all flash work reserved so far ends.
    pub fn busy_until(&self) -> u64 {
        self.dies.iter().chain(&self.channels).map(Timeline::busy_until).max().unwrap_or(0)
    }

    // ----- scheduling -----

    /// Account a wait for die `die` (or one of its planes) from `from` to
    /// `to`: GC's share of the die's time in that span is `gc_wait`, the
    /// rest `die_wait` (see the module docs).
    fn wait(&self, path: &mut Breakdown, die: usize, from: u64, to: u64) {
        if to > from {
            let gc = self.gc_share(die, from, to, to - from);
            path.add(Component::GcWait, gc);
            path.add(Component::DieWait, to - from - gc);
        }
    }

    /// GC's share of die `die`'s time within `[from, to)`, up to `cap_ns`
    /// — or 0 in an epoch no request waits for ([`NO_OWNER`]: its breakdown
    /// is never reported, and this walk over the work queued on the die is
    /// the costly part of timing a GC-bound drive's write-back evictions).
    fn gc_share(&self, die: usize, from: u64, to: u64, cap_ns: u64) -> u64 {
        if self.epoch.owner == NO_OWNER {
            0
        } else {
            self.dies[die].gc_ns_between(from, to, cap_ns)
        }
    }

    fn fit_channel(&mut self, ch: usize, t: u64, ns: u64, gc: bool, path: &mut Breakdown) -> u64 {
        let tl = &mut self.channels[ch];
        tl.prune(self.now);
        let start = tl.book(t, ns, gc);
        self.note_chan(start, ns);
        if start > t {
            path.add(Component::ChannelWait, start - t);
        }
        path.add(Component::FlashTransfer, ns);
        start + ns
    }

    /// Reserve `[start, start + ns)` on a die (see [`FlashTiming::bin_die_busy`]).
    fn reserve_die(&mut self, die: usize, start: u64, ns: u64, gc: bool) {
        self.dies[die].reserve(start, ns, gc);
        self.bin_die_busy(start, ns);
    }

    /// Reserve `ns` on a die at the earliest start at or after `t` where it
    /// is free (see [`FlashTiming::bin_die_busy`]); returns the start.
    fn book_die(&mut self, die: usize, t: u64, ns: u64, gc: bool) -> u64 {
        let tl = &mut self.dies[die];
        tl.prune(self.now);
        let start = tl.book(t, ns, gc);
        self.bin_die_busy(start, ns);
        start
    }

    /// Bin die busy time `[start, start + ns)` into the flash series'
    /// intervals (split at their boundaries; an operation is much shorter
    /// than an interval, so mostly it falls in one, found at once).
    #[inline]
    fn bin_die_busy(&mut self, start: u64, ns: u64) {
        let (mut t, end) = (start, start + ns);
        while t < end {
            let (i, boundary) = self.bin_of(t);
            let piece = end.min(boundary) - t;
            self.series_at(i).die_busy_ns += piece;
            t += piece;
        }
    }

    fn fit_die(&mut self, die: usize, t: u64, ns: u64) -> Fit {
        let tl = &mut self.dies[die];
        tl.prune(self.now);
        tl.fit(t, ns)
    }

    /// Channel time to move `bytes`, ns. Operations move a page or two of
    /// the same size, so the last size's time is remembered rather than
    /// divided for again.
    fn transfer_ns(&mut self, bytes: u32) -> u64 {
        if self.last_transfer.0 != bytes {
            self.last_transfer = (bytes, self.t.channel_ns(u64::from(bytes)));
        }
        self.last_transfer.1
    }

    /// The die and channel of `plane`: looked up, as dividing by the
    /// geometry for every operation was a chain of dependent divisions.
    fn place(&self, plane: u32) -> (usize, usize) {
        let (die, ch) = self.die_and_channel_of_plane[plane as usize];
        (die as usize, ch as usize)
    }

    /// The planes an operation occupies: one, or (multi-plane) all of its die's.
    fn plane_range(&self, plane: u32, planes: u32) -> std::ops::Range<usize> {
        if planes > 1 {
            let first = self.die_and_channel_of_plane[plane as usize].0 * self.planes_per_die;
            first as usize..(first + self.planes_per_die) as usize
        } else {
            plane as usize..plane as usize + 1
        }
    }

    /// When every plane in `range` is free.
    fn planes_free(&self, range: std::ops::Range<usize>) -> u64 {
        self.planes[range].iter().fold(0, |t, p| t.max(p.free_at))
    }

    /// Earliest start and path of an operation of the current epoch that
    /// reads from `buffer` (a program) or depends on nothing but the epoch.
    fn ready(&self, buffer: Option<u32>) -> (u64, Breakdown) {
        let e = &self.epoch;
        if let Some(d) = buffer.and_then(|b| self.deps.get(b as usize)) {
            if d.epoch == e.id && d.end > e.ready {
                return (d.end, d.path);
            }
        }
        (e.ready, e.ready_path)
    }

    /// Command cycles on the channel, then a cell phase of `cell_ns` on the
    /// die, for an operation ready at `ready` whose planes are free at
    /// `plane_free`. The command may be sent while the plane finishes its
    /// previous work (it ends no earlier than `plane_free - command`), so a
    /// queued operation does not wait for the bus behind that work's data.
    /// Returns the cell phase's start; `path` gets the waits and phases.
    #[allow(clippy::too_many_arguments)]
    fn command_then_cell(
        &mut self,
        ch: usize,
        die: usize,
        ready: u64,
        plane_free: u64,
        cell_ns: u64,
        gc: bool,
        path: &mut Breakdown,
    ) -> u64 {
        let cmd = self.t.command_ns;
        let c0 = ready.max(plane_free.saturating_sub(cmd));
        let tl = &mut self.channels[ch];
        tl.prune(self.now);
        let cs = tl.book(c0, cmd, gc);
        self.note_chan(cs, cmd);
        let earliest = (cs + cmd).max(plane_free);
        let start = self.book_die(die, earliest, cell_ns, gc);
        self.note_cell(start, cell_ns);
        path.add(Component::FlashTransfer, cmd);
        if cs > c0 {
            path.add(Component::ChannelWait, cs - c0);
        }
        // The rest of the way to the cell phase waits for the plane and
        // the die: split by GC's share of the die over that span (the
        // command and channel wait are accounted above).
        // (The cell phase just booked starts at `start`: not in the span.)
        let rest = start - ready - cmd - (cs - c0);
        let gc_ns = self.gc_share(die, ready, start, rest);
        path.add(Component::GcWait, gc_ns);
        path.add(Component::DieWait, rest - gc_ns);
        path.add(Component::Cell, cell_ns);
        start
    }

    /// Book an operation's end. Garbage collection inside a request counts
    /// toward the request's completion only through what waits for it (a
    /// program behind a collection on its plane); an epoch with nothing but
    /// GC (an idle step) ends with its last GC operation.
    fn finish(&mut self, end: u64, path: Breakdown, gc: bool) {
        self.last_end = end;
        let e = &mut self.epoch;
        if gc {
            if end > e.gc_end {
                e.gc_end = end;
                e.gc_path = path;
            }
        } else {
            e.has_work = true;
            if end > e.end {
                e.end = end;
                e.end_path = path;
            }
        }
    }

    /// The flash series' interval holding `t`: its index and its end, ns.
    /// Consecutive operations mostly fall in the interval of the one
    /// before, so that one is remembered rather than divided for again.
    /// Past [`MAX_SERIES_BINS`] intervals the interval doubles and
    /// neighbouring intervals merge (as the time series does).
    #[inline]
    fn bin_of(&mut self, t: u64) -> (usize, u64) {
        let since = t.saturating_sub(self.origin_ns);
        let (i, bin_start) = self.last_bin;
        if since >= bin_start && since - bin_start < self.interval_ns {
            return (i, self.origin_ns.saturating_add(bin_start + self.interval_ns));
        }
        let mut i = since / self.interval_ns;
        while i >= MAX_SERIES_BINS as u64 {
            super::merge_neighbour_pairs(&mut self.flash_series, FlashInterval::absorb);
            self.interval_ns = self.interval_ns.saturating_mul(2);
            i = since / self.interval_ns;
        }
        self.last_bin = (i as usize, i * self.interval_ns);
        (i as usize, self.origin_ns.saturating_add((i + 1).saturating_mul(self.interval_ns)))
    }

    fn bucket(&mut self, t: u64) -> &mut FlashInterval {
        let i = self.bin_of(t).0;
        self.series_at(i)
    }

    /// Interval `i` of the flash series (created, with those before it, if new).
    #[inline]
    fn series_at(&mut self, i: usize) -> &mut FlashInterval {
        if self.flash_series.len() <= i {
            self.flash_series.resize(i + 1, FlashInterval::default());
        }
        &mut self.flash_series[i]
    }

    /// The cell phase of a read of the page at `address` (tR of its page
    /// type), ns: the one place a read's duration is computed (a copyback's
    /// read half included).
    #[inline]
    pub fn read_cell_ns(&self, address: u64) -> u64 {
        self.read_ns_by_page[self.pages_per_block.remainder(address as u32) as usize]
    }

    fn read(&mut self, op: &FlashOp) {
        let plane = self.pages_per_plane.quotient(op.address as u32);
        let (die, ch) = self.place(plane);
        let t_r = self.read_cell_ns(op.address);
        let gc = is_gc(op.cause);
        let range = self.plane_range(plane, op.planes);
        let (ready, mut path) = self.ready(None);
        let xfer = self.transfer_ns(op.transfer_bytes);
        let media = self.read_media_ns(op, t_r, xfer);
        if let Some(end) = self.try_suspend(op, die, ch, range.clone(), ready, media.cell_ns, &mut path) {
            media.attribute(&mut path);
            self.after_read(op, range, end, end, media.decode_ns, path, gc);
            return;
        }
        let plane_free = self.planes_free(range.clone());
        let start = self.command_then_cell(ch, die, ready, plane_free, media.cell_ns, gc, &mut path);
        let cell_end = start + media.cell_ns;
        // The data leaves through the (cache) register once the previous
        // read's data-out from this plane is done.
        let reg_ready = self.planes[range.clone()].iter().fold(cell_end, |t, p| t.max(p.data_out_end));
        if reg_ready > cell_end {
            path.add(Component::ChannelWait, reg_ready - cell_end);
        }
        let end = self.fit_channel(ch, reg_ready, xfer, gc, &mut path);
        let free = if self.t.config.cache_read { cell_end } else { end };
        media.attribute(&mut path);
        self.after_read(op, range, free, end, media.decode_ns, path, gc);
    }

    /// A read's media time, from its retry count and decode time (set by
    /// the reliability model; both 0 without it, and the read is one tR).
    /// Each retry is a full read again: command, tR and data-out, which
    /// the die serves as one uninterrupted sequence (its cell phase holds
    /// the die and plane through them); the data-out of the last attempt
    /// then takes the channel as any read's; the ECC decode of every
    /// attempt follows it, before the data is usable (the decoder is not a
    /// shared resource here: an engine per channel keeps up with it).
    fn read_media_ns(&self, op: &FlashOp, t_r: u64, transfer_ns: u64) -> ReadMedia {
        let retry_transfer_ns = u64::from(op.read_retries) * (self.t.command_ns + transfer_ns);
        ReadMedia {
            cell_ns: t_r + u64::from(op.read_retries) * t_r + retry_transfer_ns,
            retry_transfer_ns,
            decode_ns: op.decode_ns,
        }
    }

    /// Book a read that frees its planes' page registers at `free`, whose
    /// data-out ends at `end` and whose data is decoded `decode_ns` later.
    #[allow(clippy::too_many_arguments)]
    fn after_read(
        &mut self,
        op: &FlashOp,
        range: std::ops::Range<usize>,
        free: u64,
        end: u64,
        decode_ns: u64,
        path: Breakdown,
        gc: bool,
    ) {
        for p in &mut self.planes[range] {
            p.prev_free_at = p.free_at;
            p.free_at = p.free_at.max(free);
            p.data_out_end = p.data_out_end.max(end);
            p.cache_free_at = p.cache_free_at.max(end);
        }
        let end = end + decode_ns;
        if let Some(b) = op.buffer {
            let i = b.index() as usize;
            if self.deps.len() <= i {
                self.deps.resize(i + 1, Dep::default());
            }
            self.deps[i] = Dep { epoch: self.epoch.id, end, path };
        }
        if matches!(op.kind, OpKind::ReadMeta | OpKind::ReadOob) && end > self.epoch.ready {
            // The FTL inspects these bytes before deciding what to do next.
            self.epoch.ready = end;
            self.epoch.ready_path = path;
        }
        self.finish(end, path, gc);
    }

    /// A read that finds its die executing a suspendable program or erase
    /// suspends it (see the module docs). Returns the read's end if it did.
    #[allow(clippy::too_many_arguments)]
    fn try_suspend(
        &mut self,
        op: &FlashOp,
        die: usize,
        ch: usize,
        range: std::ops::Range<usize>,
        ready: u64,
        t_r: u64,
        path: &mut Breakdown,
    ) -> Option<u64> {
        if !(self.t.config.program_suspend || self.t.config.erase_suspend) {
            return None;
        }
        let lo = self.long_ops[die]?;
        let (allowed, suspend_ns) = match lo.kind {
            LongKind::Program => (self.t.config.program_suspend, self.t.program_suspend_ns),
            LongKind::Erase => (self.t.config.erase_suspend, self.t.erase_suspend_ns),
        };
        if !allowed || (lo.kind == LongKind::Program && lo.page == op.address) {
            return None;
        }
        let lo_planes = lo.first_plane as usize..(lo.first_plane + lo.planes) as usize;
        // The read's planes, not counting the long operation if it is their last.
        let mut t0 = ready;
        for i in range {
            let p = &self.planes[i];
            let free = if lo_planes.contains(&i) && p.free_at == lo.end { p.prev_free_at } else { p.free_at };
            t0 = t0.max(free);
        }
        if !(t0 >= lo.start && t0 < lo.end) {
            return None;
        }
        self.wait(path, die, ready, t0);
        let gc = is_gc(op.cause);
        let t1 = self.fit_channel(ch, t0, self.t.command_ns, gc, path);
        // The die's time is borrowed from the suspended operation.
        path.add(Component::DieWait, suspend_ns);
        path.add(Component::Cell, t_r);
        let cell_end = t1 + suspend_ns + t_r;
        self.note_cell(t1 + suspend_ns, t_r);
        let xfer = self.transfer_ns(op.transfer_bytes);
        let end = self.fit_channel(ch, cell_end, xfer, gc, path);
        // The suspended operation finishes its remaining work later.
        let delta = suspend_ns + t_r;
        let new_end = self.book_die(die, lo.end, delta, lo.gc) + delta;
        for p in &mut self.planes[lo_planes] {
            if p.free_at == lo.end {
                p.free_at = new_end;
            }
        }
        self.long_ops[die] = Some(LongOp { end: new_end, ..lo });
        if lo.owner != NO_OWNER {
            self.extensions.push((lo.owner, new_end));
        }
        self.counters.suspends += 1;
        Some(end)
    }

    fn program(&mut self, op: &FlashOp) {
        let plane = self.pages_per_plane.quotient(op.address as u32);
        let (die, ch) = self.place(plane);
        let t_prog = self.program_ns_by_page[self.pages_per_block.remainder(op.address as u32) as usize];
        let gc = is_gc(op.cause);
        let range = self.plane_range(plane, op.planes);
        let (ready, mut path) = self.ready(op.buffer.map(|b| b.index()));
        let xfer = self.t.command_ns + self.transfer_ns(op.transfer_bytes);
        let (cell_start, end) = if self.t.config.cache_program {
            let reg_free = self.planes[range.clone()].iter().fold(0, |t, p| t.max(p.cache_free_at));
            let t0 = ready.max(reg_free);
            self.wait(&mut path, die, ready, t0);
            let t1 = self.fit_channel(ch, t0, xfer, gc, &mut path);
            let t2 = t1.max(self.planes_free(range.clone()));
            let start = self.book_die(die, t2, t_prog, gc);
            // (The program just booked starts at `start`: not in the wait.)
            self.wait(&mut path, die, t1, start);
            path.add(Component::Cell, t_prog);
            self.note_cell(start, t_prog);
            (start, start + t_prog)
        } else {
            let t0 = ready.max(self.planes_free(range.clone()));
            self.wait(&mut path, die, ready, t0);
            // The die is held from data-in to the end of tPROG: find a time
            // when both the channel (data-in) and the die (all of it) are free.
            self.channels[ch].prune(self.now);
            let (mut c, mut d) = (t0, t0);
            let _ = (c, d);
            let mut s = t0;
            for _ in 0..64 {
                c = self.channels[ch].fit(s, xfer).start;
                d = self.fit_die(die, c, xfer + t_prog).start;
                if d == c {
                    break;
                }
                s = d;
            }
            // (If no common start was found, data-in goes first and the die follows.)
            // c >= t0 and d >= c: the waits add up to d - t0.
            if c > t0 {
                path.add(Component::ChannelWait, c - t0);
            }
            self.wait(&mut path, die, c, d);
            self.channels[ch].reserve(c, xfer, gc);
            self.note_chan(c, xfer);
            self.reserve_die(die, d, xfer + t_prog, gc);
            self.note_cell(d + xfer, t_prog);
            path.add(Component::FlashTransfer, xfer);
            path.add(Component::Cell, t_prog);
            (d + xfer, d + xfer + t_prog)
        };
        for p in &mut self.planes[range.clone()] {
            p.prev_free_at = p.free_at;
            p.free_at = end;
            p.cache_free_at = if self.t.config.cache_program { cell_start } else { end };
        }
        self.long_ops[die] = Some(LongOp {
            start: cell_start,
            end,
            kind: LongKind::Program,
            owner: self.epoch.owner,
            first_plane: range.start as u32,
            planes: range.len() as u32,
            page: op.address,
            gc,
        });
        self.finish(end, path, gc);
    }

    /// Copyback and erase: a command on the channel, then a cell phase.
    fn cell_only(&mut self, op: &FlashOp, plane: u32, cell_ns: u64, long: Option<LongKind>) {
        let (die, ch) = self.place(plane);
        let gc = is_gc(op.cause);
        let range = self.plane_range(plane, op.planes);
        let (ready, mut path) = self.ready(None);
        let plane_free = self.planes_free(range.clone());
        let start = self.command_then_cell(ch, die, ready, plane_free, cell_ns, gc, &mut path);
        let end = start + cell_ns;
        for p in &mut self.planes[range.clone()] {
            p.prev_free_at = p.free_at;
            p.free_at = end;
            p.cache_free_at = end;
        }
        if let Some(kind) = long {
            self.long_ops[die] = Some(LongOp {
                start,
                end,
                kind,
                owner: self.epoch.owner,
                first_plane: range.start as u32,
                planes: range.len() as u32,
                page: op.address,
                gc,
            });
        }
        self.finish(end, path, gc);
    }

    fn count(&mut self, op: &FlashOp) {
        self.counters.operations += 1;
        let plane = if op.kind == OpKind::Erase {
            self.blocks_per_plane.quotient(op.address as u32)
        } else {
            self.pages_per_plane.quotient(op.address as u32)
        };
        let (die, _) = self.place(plane);
        self.die_pages[die][die_op_index(op.kind)] += u64::from(op.planes);
        let end = self.last_end;
        let n = u64::from(op.planes);
        let gc = is_gc(op.cause);
        let foreground = op.request_id.is_some();
        let programs = matches!(op.kind, OpKind::Program | OpKind::ProgramMeta | OpKind::Copyback);
        let b = self.bucket(end);
        if programs {
            b.pages_programmed += n;
            if op.cause == Cause::Host {
                b.host_pages_programmed += n;
            }
            if gc && foreground {
                b.foreground_gc_pages_moved += n;
            } else if gc {
                b.background_gc_pages_moved += n;
            }
        }
        if matches!(op.kind, OpKind::Read | OpKind::ReadOob | OpKind::ReadMeta | OpKind::Copyback) {
            b.pages_read += n;
        }
        if op.kind == OpKind::Erase {
            b.blocks_erased += n;
            if gc {
                b.gc_blocks_erased += n;
            }
        }
        let c = &mut self.counters;
        match (gc, foreground, programs, op.kind == OpKind::Erase) {
            (true, true, true, _) => c.foreground_gc_pages_moved += n,
            (true, false, true, _) => c.background_gc_pages_moved += n,
            (true, true, _, true) => c.foreground_gc_erases += n,
            (true, false, _, true) => c.background_gc_erases += n,
            _ => {}
        }
    }

    /// Time one operation (called after it took effect).
    pub fn observe(&mut self, op: &FlashOp) {
        if !self.enabled {
            return;
        }
        if self.event.is_some() {
            self.stage_event(op);
            self.count(op);
            return;
        }
        match op.kind {
            OpKind::Read | OpKind::ReadOob | OpKind::ReadMeta => self.read(op),
            OpKind::Program | OpKind::ProgramMeta => self.program(op),
            OpKind::Copyback => {
                let plane = self.pages_per_plane.quotient(op.address as u32);
                let src = op.source.unwrap_or(op.address);
                let ns = self.read_cell_ns(src)
                    + self.program_ns_by_page[self.pages_per_block.remainder(op.address as u32) as usize];
                self.cell_only(op, plane, ns, None);
            }
            OpKind::Erase => {
                let plane = self.blocks_per_plane.quotient(op.address as u32);
                self.cell_only(op, plane, self.t.erase_ns, Some(LongKind::Erase));
            }
        }
        self.count(op);
        if self.trace.is_some() {
            self.record(op);
        }
    }

    /// Hand the operation just timed to the trace recorder.
    #[cold]
    fn record(&mut self, op: &FlashOp) {
        let plane = if op.kind == OpKind::Erase {
            self.blocks_per_plane.quotient(op.address as u32)
        } else {
            self.pages_per_plane.quotient(op.address as u32)
        };
        let (die, ch) = self.place(plane);
        let range = self.plane_range(plane, op.planes);
        let mut r = OpRecord {
            kind: op.kind,
            cause: op.cause,
            die: die as u32,
            channel: ch as u32,
            first_plane: range.start as u32,
            plane_span: range.len() as u32,
            planes: op.planes,
            address: op.address,
            request: op.request_id,
            cell: (0, 0),
            chan: [(0, 0); 2],
            chan_n: 0,
        };
        if let Some(t) = &mut self.trace {
            (r.cell, r.chan, r.chan_n) = t.take_phases();
            t.op(r);
        }
    }

    fn now_ns(&self) -> u64 {
        // On the event core the open epoch's ready time (`begin_epoch` is
        // the reservation model's and leaves `self.epoch` at 0 there).
        match self.event.as_deref() {
            Some(e) => e.open_ready_ns(),
            None => self.epoch.ready,
        }
    }

    fn die_busy_until_ns(&self, die: u32) -> Option<u64> {
        if let Some(e) = self.event.as_deref() {
            return (die < self.dies.len() as u32).then(|| e.die_busy_until_ns(die));
        }
        self.dies.get(die as usize).map(Timeline::busy_until)
    }
}

fn is_gc(cause: Cause) -> bool {
    matches!(cause, Cause::Gc | Cause::WearLeveling)
}

/// The observer the flash controller calls; it shares the model with the
/// perf driver, which reads epochs and counters between FTL calls.
pub struct TimingObserver(pub Rc<RefCell<FlashTiming>>);

impl FlashObserver for TimingObserver {
    fn after_op(&mut self, op: &FlashOp) {
        self.0.borrow_mut().observe(op);
    }
    fn now_ns(&self) -> Option<u64> {
        let m = self.0.borrow();
        m.enabled.then(|| m.now_ns())
    }
    fn die_busy_until_ns(&self, die: u32) -> Option<u64> {
        let m = self.0.borrow();
        if m.enabled {
            m.die_busy_until_ns(die)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flash::BufId;
    use crate::nand::GeometryConfig;

    /// 2 channels x 1 chip x 1 die x 2 planes, 4 blocks x 4 pages of 4 KiB, MLC.
    fn model(extra: &str) -> (FlashTiming, Geometry) {
        let g = GeometryConfig {
            channels: 2,
            chips_per_channel: 1,
            dies_per_chip: 1,
            planes_per_die: 2,
            blocks_per_plane: 4,
            pages_per_block: 4,
            page_size_bytes: 4096,
            oob_size_bytes: 64,
            sector_size_bytes: 512,
            cell_type: crate::nand::CellType::Mlc,
            page_pairing: Default::default(),
            partial_programs_per_page: 1,
        }
        .validate()
        .unwrap();
        let mut text = "read_latency_us = [50, 80]\nprogram_latency_us = [400, 1200]\nerase_latency_us = 3000\ncommand_latency_ns = 100\n".to_string();
        if !extra.contains("channel_rate_mtps") {
            text += "channel_rate_mtps = 400\n";
        }
        let t: super::super::TimingConfig = toml::from_str(&(text + extra)).unwrap();
        let t = t.validate(2, 1 << 30).unwrap();
        (FlashTiming::new(&g, &t, 1_000_000_000), g)
    }

    fn op(kind: OpKind, address: u64, planes: u32, bytes: u32, buffer: Option<u32>) -> FlashOp {
        FlashOp {
            kind,
            cause: Cause::Host,
            request_id: Some(1),
            op_index: 0,
            address,
            source: None,
            planes,
            transfer_bytes: bytes,
            buffer: buffer.map(|i| BufId::new(i, 0)),
            read_retries: 0,
            decode_ns: 0,
        }
    }

    fn run(m: &mut FlashTiming, ops: &[FlashOp]) -> (u64, Breakdown) {
        m.begin_epoch(0, 7, Breakdown::default());
        for o in ops {
            m.observe(o);
        }
        m.end_epoch()
    }

    #[test]
    fn read_latency_is_command_plus_page_type_tr_plus_transfer() {
        let (mut m, _) = model("");
        // Page 0 of a block is an LSB page, page 1 its MSB page.
        let (lsb, b) = run(&mut m, &[op(OpKind::Read, 0, 1, 4096, None)]);
        assert_eq!(lsb, 100 + 50_000 + 10_240);
        assert_eq!(b.get(Component::Cell), 50_000);
        assert_eq!(b.get(Component::FlashTransfer), 100 + 10_240);
        assert_eq!(b.total(), lsb);
        let (mut m, _) = model("");
        let (msb, _) = run(&mut m, &[op(OpKind::Read, 1, 1, 4096, None)]);
        assert_eq!(msb, 100 + 80_000 + 10_240);
    }

    #[test]
    fn each_read_retry_costs_a_full_read_and_decode_time_follows_the_data_out() {
        let (mut m, _) = model("");
        let retried = FlashOp { read_retries: 2, decode_ns: 12_000, ..op(OpKind::Read, 0, 1, 4096, Some(3)) };
        let (end, b) = run(&mut m, &[retried]);
        // Three reads (command, tR, data-out), then the decode of all three attempts.
        assert_eq!(end, 3 * (100 + 50_000 + 10_240) + 12_000);
        assert_eq!(b.get(Component::Cell), 3 * 50_000 + 12_000);
        assert_eq!(b.get(Component::FlashTransfer), 3 * (100 + 10_240));
        assert_eq!(b.total(), end);
        // A program from the buffer waits for the decoded data.
        let (mut m, _) = model("");
        let program = op(OpKind::Program, 32, 1, 4096, Some(3));
        let (end, _) = run(&mut m, &[retried, program]);
        assert_eq!(end, 3 * (100 + 50_000 + 10_240) + 12_000 + 100 + 10_240 + 400_000);
        // The retries hold the die: a second read of the same die waits for them.
        let (mut m, _) = model("");
        let (end, _) = run(&mut m, &[retried, op(OpKind::Read, 16, 1, 4096, None)]);
        assert!(end >= 100 + 3 * 50_000 + 2 * (100 + 10_240) + 50_000 + 10_240, "{end}");
    }

    #[test]
    fn program_latency_depends_on_page_type() {
        let (mut m, _) = model("");
        let (lsb, _) = run(&mut m, &[op(OpKind::Program, 0, 1, 4096, None)]);
        assert_eq!(lsb, 100 + 10_240 + 400_000);
        let (mut m, _) = model("");
        let (msb, _) = run(&mut m, &[op(OpKind::Program, 1, 1, 4096, None)]);
        assert_eq!(msb, 100 + 10_240 + 1_200_000);
    }

    #[test]
    fn reads_on_two_channels_overlap_and_on_one_die_serialise() {
        // Die 0 is on channel 0, die 1 on channel 1 (pages 32.. are die 1).
        let (mut m, _) = model("");
        let (end, _) = run(&mut m, &[op(OpKind::Read, 0, 1, 4096, None), op(OpKind::Read, 32, 1, 4096, None)]);
        assert_eq!(end, 100 + 50_000 + 10_240, "independent dies in parallel");
        // Two reads on the two planes of one die: the second tR follows the first.
        let (mut m, _) = model("");
        let (end, b) = run(&mut m, &[op(OpKind::Read, 0, 1, 4096, None), op(OpKind::Read, 16, 1, 4096, None)]);
        assert_eq!(end, 100 + 50_000 + 50_000 + 10_240);
        assert_eq!(b.total(), end, "the critical path sums to the end");
    }

    #[test]
    fn multi_plane_program_overlaps_planes_in_one_cell_phase() {
        let (mut m, _) = model("");
        let (end, _) = run(&mut m, &[op(OpKind::Program, 0, 2, 8192, None)]);
        assert_eq!(end, 100 + 20_480 + 400_000, "two pages in one tPROG");
        let (mut m, _) = model("");
        let (end, _) = run(&mut m, &[op(OpKind::Program, 0, 1, 4096, None), op(OpKind::Program, 16, 1, 4096, None)]);
        assert_eq!(end, 100 + 10_240 + 400_000 + 400_000, "single-plane programs serialise");
    }

    #[test]
    fn copyback_avoids_the_channel() {
        let (mut m, _) = model("");
        let mut cb = op(OpKind::Copyback, 4, 1, 0, None);
        cb.source = Some(1);
        let (end, b) = run(&mut m, &[cb]);
        // tR of the MSB source + tPROG of the LSB destination, command only on the bus.
        assert_eq!(end, 100 + 80_000 + 400_000);
        assert_eq!(b.get(Component::FlashTransfer), 100);
        assert_eq!(m.channel_busy_ns()[0], 100);
    }

    #[test]
    fn a_program_from_a_buffer_waits_for_the_read_that_filled_it() {
        let (mut m, _) = model("");
        // Read page 0 (die 0) into buffer 3, program it to die 1.
        let (end, _) = run(&mut m, &[op(OpKind::Read, 0, 1, 4096, Some(3)), op(OpKind::Program, 32, 1, 4096, Some(3))]);
        let read_end = 100 + 50_000 + 10_240;
        assert_eq!(end, read_end + 100 + 10_240 + 400_000);
        // Without the dependency the program would not wait for the read.
        let (mut m, _) = model("");
        let (end, _) = run(&mut m, &[op(OpKind::Read, 0, 1, 4096, Some(3)), op(OpKind::Program, 32, 1, 4096, Some(4))]);
        assert_eq!(end, 100 + 10_240 + 400_000);
    }

    #[test]
    fn operations_after_a_metadata_read_wait_for_it() {
        let (mut m, _) = model("");
        let (end, _) = run(&mut m, &[op(OpKind::ReadMeta, 0, 1, 4096, None), op(OpKind::Read, 32, 1, 4096, None)]);
        let meta_end = 100 + 50_000 + 10_240;
        assert_eq!(end, meta_end + 100 + 50_000 + 10_240);
    }

    #[test]
    fn a_read_suspends_an_erase_when_enabled() {
        let erase_then_read = |m: &mut FlashTiming| {
            m.begin_epoch(0, 1, Breakdown::default());
            m.observe(&op(OpKind::Erase, 1, 1, 0, None)); // block 1 of plane 0
            m.begin_epoch(1_000_000, 2, Breakdown::default());
            m.observe(&op(OpKind::Read, 0, 1, 4096, None));
            m.end_epoch().0 - 1_000_000
        };
        let (mut m, _) = model("");
        let waits = erase_then_read(&mut m);
        // The command is sent while the erase finishes.
        assert_eq!(waits, 3_000_100 - 1_000_000 + 50_000 + 10_240);
        let (mut m, _) = model("erase_suspend = true\nerase_suspend_latency_us = 20\n");
        let suspended = erase_then_read(&mut m);
        assert_eq!(suspended, 100 + 20_000 + 50_000 + 10_240);
        let mut ext = Vec::new();
        m.take_extensions(&mut ext);
        assert_eq!(ext, vec![(1, 3_000_100 + 20_000 + 50_000)], "the erase ends later");
        assert_eq!(m.counters().suspends, 1);
    }

    #[test]
    fn a_read_suspends_a_program_when_enabled_but_not_the_program_of_its_own_page() {
        let program_then_read = |m: &mut FlashTiming, read_page: u64| {
            m.begin_epoch(0, 1, Breakdown::default());
            m.observe(&op(OpKind::Program, 4, 1, 4096, None)); // block 1, page 0 of plane 0 (LSB)
            m.advance(100_000);
            m.begin_epoch(100_000, 2, Breakdown::default());
            m.observe(&op(OpKind::Read, read_page, 1, 4096, None));
            m.end_epoch().0 - 100_000
        };
        let program_end = 100 + 10_240 + 400_000;
        let (mut m, _) = model("program_suspend = true\nprogram_suspend_latency_us = 20\n");
        let latency = program_then_read(&mut m, 0);
        assert_eq!(latency, 100 + 20_000 + 50_000 + 10_240, "suspend, tR, data-out");
        let mut ext = Vec::new();
        m.take_extensions(&mut ext);
        assert_eq!(ext, vec![(1, program_end + 20_000 + 50_000)], "the program resumes and ends later");
        assert_eq!(m.counters().suspends, 1);
        // Without program suspend the read waits for tPROG.
        let (mut m, _) = model("");
        assert_eq!(program_then_read(&mut m, 0), program_end - 100_000 + 50_000 + 10_240);
        // A read of the page being programmed waits for its data to be there.
        let (mut m, _) = model("program_suspend = true\nprogram_suspend_latency_us = 20\n");
        assert_eq!(program_then_read(&mut m, 4), program_end - 100_000 + 50_000 + 10_240);
        assert_eq!(m.counters().suspends, 0);
    }

    #[test]
    fn a_wait_behind_gc_is_gc_wait_even_when_host_work_is_last_in_line() {
        let (mut m, _) = model("");
        // Background GC erases a block of plane 0 (die 0): 3 ms.
        m.begin_epoch(0, NO_OWNER, Breakdown::default());
        let mut erase = op(OpKind::Erase, 1, 1, 0, None);
        erase.cause = Cause::Gc;
        m.observe(&erase);
        // A host program to plane 1 of the same die queues behind the erase.
        m.begin_epoch(0, 2, Breakdown::default());
        m.observe(&op(OpKind::Program, 16, 1, 4096, None));
        // A read of plane 1 queues behind that program — and so behind the erase.
        m.begin_epoch(0, 3, Breakdown::default());
        m.observe(&op(OpKind::Read, 20, 1, 4096, None));
        let (end, b) = m.end_epoch();
        assert_eq!(b.total(), end);
        assert_eq!(b.get(Component::GcWait), 3_000_000, "the erase ahead on the die");
        assert_eq!(b.get(Component::DieWait), 400_000, "the host program ahead");
        // A read of that plane in an epoch no request waits for (an eviction)
        // is timed as usual, but its wait is not split (it is never reported).
        m.begin_epoch(0, NO_OWNER, Breakdown::default());
        m.observe(&op(OpKind::Read, 24, 1, 4096, None));
        let (unowned_end, u) = m.end_epoch();
        assert_eq!(unowned_end, end + 50_000, "its tR right after the first read's");
        assert_eq!(u.get(Component::GcWait), 0);
        assert_eq!(u.total(), unowned_end, "the wait is all die_wait");
    }

    #[test]
    fn a_late_epoch_does_not_let_an_earlier_request_double_book_a_die() {
        let (mut m, _) = model("");
        m.enable_audit();
        m.begin_epoch(0, 1, Breakdown::default());
        m.observe(&op(OpKind::Program, 0, 1, 4096, None)); // die 0 until 410.34 us
                                                           // A cache eviction that waits for a slot until 10 ms (die 1).
        m.begin_epoch(10_000_000, NO_OWNER, Breakdown::default());
        m.observe(&op(OpKind::Program, 32, 1, 4096, None));
        // A read arriving at 100 us for plane 1 of die 0 must queue behind the program.
        m.advance(100_000);
        m.begin_epoch(100_000, 3, Breakdown::default());
        m.observe(&op(OpKind::Read, 20, 1, 4096, None));
        let (end, _) = m.end_epoch();
        assert_eq!(m.double_booking(), None);
        assert_eq!(end, 100 + 10_240 + 400_000 + 50_000 + 10_240, "tR after tPROG on die 0");
    }

    #[test]
    fn cache_read_overlaps_data_out_with_the_next_tr() {
        let reads = |m: &mut FlashTiming| {
            let ops: Vec<_> = (0..4).map(|i| op(OpKind::Read, i * 4, 1, 4096, None)).collect();
            run(m, &ops).0
        };
        let (mut m, _) = model("channel_rate_mtps = 40\n");
        // 4 reads of LSB pages on one plane: tR 50 us, data-out 102.4 us each.
        let cached = reads(&mut m);
        let (mut m, _) = model("channel_rate_mtps = 40\ncache_read = false\n");
        let uncached = reads(&mut m);
        assert_eq!(uncached, 4 * (100 + 50_000 + 102_400));
        assert!(cached < uncached - 100_000, "{cached} vs {uncached}");
    }

    #[test]
    fn gc_elsewhere_does_not_delay_a_request_but_ends_an_idle_step() {
        let mut gc_copy = op(OpKind::Copyback, 36, 1, 0, None); // die 1
        gc_copy.cause = Cause::Gc;
        gc_copy.source = Some(33);
        let (mut m, _) = model("");
        let (end, _) = run(&mut m, &[gc_copy, op(OpKind::Program, 0, 1, 4096, None)]);
        assert_eq!(end, 100 + 10_240 + 400_000, "the write waits for its own program only");
        let (mut m, _) = model("");
        let (end, _) = run(&mut m, &[gc_copy]);
        assert_eq!(end, 100 + 80_000 + 400_000, "a GC-only epoch ends with its GC");
    }
}
