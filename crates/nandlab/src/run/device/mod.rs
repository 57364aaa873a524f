//! The timed device: a [`Session`] (drive and host side) behind a host
//! interface, a controller CPU, device DRAM and an optional write cache
//! ([`write_cache`]), with the flash timing model attached to the drive as
//! an observer. The perf mode ([`crate::run::perf`]) drives workloads
//! through it; the timing model itself is [`crate::timing`].
//!
//! A request's path, each stage starting when the previous one ends:
//!
//! ```text
//! arrival ─► submission queue ─► command overhead ─► controller core (firmware)
//!   write: ─► link host→device ─► [write cache: DRAM copy | FTL → flash ops]
//!   read:  ─► [all sectors cached: DRAM | FTL → flash ops] ─► link device→host
//!   trim:  ─► FTL                flush: ─► every dirty line to the FTL, FTL flush
//! ```
//!
//! Functional effects happen when a request is simulated (in arrival
//! order); the timing of its flash work comes from [`FlashTiming`]. The
//! host's half of every request (write ids, oracle, counters) is the
//! session's host side, whether the request goes straight to the FTL or
//! through the cache: one implementation of issuing a write and checking a
//! read.
//!
//! Background work ([`TimedDevice::idle`]) runs in whole FTL idle steps,
//! which cannot be interrupted once started (MQSim's preemptible GC is not
//! modelled). So a step starts only when it surely ends before the next
//! arrival: when the time left is at least a bound on one step — the
//! longer of the worst case of collecting one block (every page moved
//! through the controller, serialised on one die, then the erase; see
//! [`one_block_step_ns`]) and the longest step seen so far. Steps start
//! once all flash work in flight has ended, so nothing else delays them.

pub mod pending;
pub mod write_cache;

use super::{RunError, Session};
use crate::config::Config;
use crate::flash::BufId;
use crate::host::{Host, SubmissionQueues};
use crate::timing::event_core::FlashCore;
use crate::timing::event_timing::{EpochEnd, EpochId, EventTiming};
use crate::timing::{
    Breakdown, Component, FlashTiming, ServerPool, Timeline, Timing, TimingObserver, WriteCacheMode, NO_OWNER,
};
use crate::workload::{HostOp, HostRequest};
use pending::{Outcome, PendingRequest, Post};
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::collections::HashMap;
use std::rc::Rc;
use write_cache::WriteCache;

/// A flash epoch's timing: known at once (the reservation model, or no
/// flash work), or when the event core completes the epoch.
enum When {
    At(u64, Breakdown),
    Pending(EpochId, Breakdown),
}

/// The page-sized pieces of a request of `sectors` sectors at `lba` on
/// pages of `spp` sectors: (logical page, first sector in the page,
/// sectors, offset in the request).
fn pieces(spp: u32, lba: u64, sectors: u32) -> impl Iterator<Item = (u64, u32, u32, u32)> {
    let spp = u64::from(spp);
    let end = lba + u64::from(sectors);
    let mut at = lba;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let lpn = at / spp;
        let first = (at % spp) as u32;
        let n = (spp - u64::from(first)).min(end - at) as u32;
        let off = (at - lba) as u32;
        at += u64::from(n);
        Some((lpn, first, n, off))
    })
}

/// When a request completed and where its time went.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    pub completion_ns: u64,
    pub breakdown: Breakdown,
}

/// Busy time of the host-side resources, ns.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct HostBusy {
    pub link_to_device_ns: u64,
    pub link_to_host_ns: u64,
    pub cpu_ns: u64,
    pub dram_ns: u64,
}

/// The timed device. See the module docs.
pub struct TimedDevice {
    session: Session,
    model: Rc<RefCell<FlashTiming>>,
    timing: Timing,
    host: Host,
    queues: SubmissionQueues,
    link_in: Timeline,
    link_out: Timeline,
    cpu: ServerPool,
    dram: Timeline,
    cache: Option<WriteCache>,
    mode: WriteCacheMode,
    spp: u32,
    sector_bytes: u64,
    scratch_lines: Vec<u32>,
    scratch_runs: Vec<(u32, u32)>,
    /// Lines written back together (see the module docs), and how many at most.
    scratch_together: Vec<u32>,
    lines_together: u32,
    /// Arrival time of the request being simulated: nothing starts earlier.
    now: u64,
    /// When the cache evictions in flight complete (a bounded window, as a
    /// controller's flash command queues are: reads are not stuck behind an
    /// unbounded backlog of write-back programs).
    evictions: BinaryHeap<Reverse<u64>>,
    max_evictions: usize,
    /// Upper bound on one idle step's duration, ns (see the module docs).
    idle_step_bound_ns: u64,
    /// Idle steps that ended after the arrival they had to end before
    /// (only when a step exceeds every bound above; reported).
    idle_overruns: u64,
    /// With the event core (see [`pending`]): requests waiting for epochs,
    /// each epoch's waiting requests and the cache lines it frees, and the
    /// requests completed since the perf driver last asked.
    pending: HashMap<u64, PendingRequest>,
    waiters: HashMap<EpochId, Vec<u64>>,
    line_epochs: HashMap<EpochId, Vec<u32>>,
    completed: Vec<(u64, Completion)>,
    epoch_ends: Vec<EpochEnd>,
}

/// The worst case of one idle step that collects one block: every page of
/// the block (and one page of FTL metadata) read and programmed through the
/// controller, all on one die and channel, then the block erased, ns.
pub fn one_block_step_ns(timing: &Timing, pages_per_block: u32, page_bytes: u64) -> u64 {
    let t_r = timing.read_ns_by_level.iter().copied().max().unwrap_or(0);
    let t_prog = timing.program_ns_by_level.iter().copied().max().unwrap_or(0);
    let move_ns = 2 * timing.command_ns + t_r + t_prog + 2 * timing.channel_ns(page_bytes);
    (u64::from(pages_per_block) + 1) * move_ns + timing.command_ns + timing.erase_ns
}

impl TimedDevice {
    /// Build and format the drive; the timing model starts switched off
    /// (preconditioning runs untimed) — see [`TimedDevice::start_timing`].
    pub fn new(
        config: &Config,
        seed: u64,
        oracle_unit_sectors: u32,
        keep_violations: usize,
        interval_ns: u64,
    ) -> Result<TimedDevice, RunError> {
        let (timing, ftl_config) = Self::ftl_config(config)?;
        let session = Session::new(&ftl_config, seed, oracle_unit_sectors, keep_violations)
            .map_err(|e| Self::name_the_cache(e, config, &timing))?;
        Self::around(session, config, timing, interval_ns)
    }

    /// Build the drive on flash that holds data already (`nand`, as a
    /// drive file kept it), mounted by a fresh FTL; the host's view of
    /// the disk is `oracle`, write ids continue from `next_write_id`. The
    /// timing model starts switched off, as [`TimedDevice::new`]'s.
    pub fn on_flash(
        config: &Config,
        seed: u64,
        interval_ns: u64,
        nand: crate::nand::Nand,
        oracle: crate::oracle::Oracle,
        next_write_id: crate::nand::payload::WriteId,
    ) -> Result<TimedDevice, RunError> {
        let (timing, ftl_config) = Self::ftl_config(config)?;
        let factory = super::registry_factory(&ftl_config.ftl_name, &ftl_config.ftl_options);
        let drive = match super::Drive::mount_on(&ftl_config, factory, seed, 1, nand)
            .map_err(|e| Self::name_the_cache(e, config, &timing))?
        {
            Ok(drive) => drive,
            Err((_, e)) => return Err(RunError::Input(format!("the timed copy of the drive failed to mount: {e}"))),
        };
        let host = super::HostSide::restored(oracle, next_write_id, u64::from(config.geometry.sector_size_bytes()));
        Self::around(Session::from_parts(drive, host), config, timing, interval_ns)
    }

    /// The timing of `config` and the configuration its FTL gets: the
    /// write cache takes its share of the DRAM, the FTL the rest.
    fn ftl_config(config: &Config) -> Result<(Timing, Config), RunError> {
        let timing = config.require_timing().map_err(RunError::Input)?.clone();
        let mut ftl_config = config.clone();
        ftl_config.dram_budget_bytes = config.dram_budget_bytes - timing.write_cache_bytes;
        Ok((timing, ftl_config))
    }

    /// An input error of the FTL's, saying what the write cache took.
    fn name_the_cache(e: RunError, config: &Config, timing: &Timing) -> RunError {
        match e {
            RunError::Input(m) if timing.write_cache_bytes > 0 => RunError::Input(format!(
                "{m} (the write cache takes {} MiB of the {} MiB of device DRAM)",
                timing.write_cache_bytes >> 20,
                config.dram_budget_bytes >> 20
            )),
            other => other,
        }
    }

    /// The timed device around `session`.
    fn around(
        mut session: Session,
        config: &Config,
        timing: Timing,
        interval_ns: u64,
    ) -> Result<TimedDevice, RunError> {
        let g = &config.geometry;
        let mut model = FlashTiming::new(g, &timing, interval_ns);
        model.set_enabled(false);
        if let Some(scheduler) = timing.scheduler {
            let core = FlashCore::for_device(g, &timing, scheduler);
            model.use_event_core(EventTiming::new(core, 2 * g.dies() as usize));
        }
        let model = Rc::new(RefCell::new(model));
        session.drive_mut().add_observer(Box::new(TimingObserver(model.clone())));
        let spp = g.sectors_per_page();
        let page_bytes = u64::from(g.page_size_bytes());
        let cache = (timing.config.write_cache != WriteCacheMode::None).then(|| {
            let lines = (timing.write_cache_bytes / page_bytes).max(1) as usize;
            let bufs: Vec<BufId> = (0..lines).map(|_| session.drive_mut().alloc_host_read(spp)).collect();
            WriteCache::new(bufs, spp, timing.config.write_cache_flush_watermark)
        });
        let host = config.host.clone();
        Ok(TimedDevice {
            session,
            model,
            mode: timing.config.write_cache,
            queues: SubmissionQueues::new(host.queues, host.queue_depth),
            link_in: Timeline::default(),
            link_out: Timeline::default(),
            cpu: ServerPool::new(host.cores),
            dram: Timeline::default(),
            cache,
            spp,
            sector_bytes: u64::from(g.sector_size_bytes()),
            scratch_lines: Vec::new(),
            scratch_runs: Vec::new(),
            scratch_together: Vec::new(),
            lines_together: g.planes_per_die(),
            now: 0,
            evictions: BinaryHeap::new(),
            max_evictions: 2 * g.dies() as usize,
            idle_step_bound_ns: one_block_step_ns(&timing, g.pages_per_block(), page_bytes),
            idle_overruns: 0,
            pending: HashMap::new(),
            waiters: HashMap::new(),
            line_epochs: HashMap::new(),
            completed: Vec::new(),
            epoch_ends: Vec::new(),
            timing,
            host,
        })
    }

    /// Switch the timing model on: from now on operations take time.
    pub fn start_timing(&mut self) {
        self.model.borrow_mut().set_enabled(true);
    }

    /// Switch the timing model off (untimed work after the timed phase).
    pub fn stop_timing(&mut self) {
        self.model.borrow_mut().set_enabled(false);
    }

    /// The flash timing model, read-only.
    pub fn timing_model(&self) -> std::cell::Ref<'_, FlashTiming> {
        self.model.borrow()
    }

    /// The flash timing model, to set or take its trace recorder.
    pub fn timing_model_mut(&mut self) -> std::cell::RefMut<'_, FlashTiming> {
        self.model.borrow_mut()
    }

    /// Simulated time starts at `t_ns` (the first arrival).
    pub fn set_time_origin(&mut self, t_ns: u64) {
        self.model.borrow_mut().set_origin(t_ns);
    }

    /// Move the (owner, end) extensions the timing model noted since the
    /// last call into `out` (see [`FlashTiming::take_extensions`]).
    pub fn take_extensions(&mut self, out: &mut Vec<(u64, u64)>) {
        self.model.borrow_mut().take_extensions(out);
    }

    /// Keep every reservation of the timing model (tests): see
    /// [`FlashTiming::enable_audit`].
    pub fn enable_timing_audit(&mut self) {
        self.model.borrow_mut().enable_audit();
    }

    /// Idle steps that ended after the arrival they had to end before.
    pub fn idle_overruns(&self) -> u64 {
        self.idle_overruns
    }

    /// The drive and host side the device serves requests with.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The session, to run untimed work on (preconditioning, a test's fault injection).
    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    pub fn host(&self) -> &Host {
        &self.host
    }
    pub fn timing(&self) -> &Timing {
        &self.timing
    }
    pub fn queues(&self) -> u32 {
        self.queues.queues()
    }
    pub fn cache(&self) -> Option<&WriteCache> {
        self.cache.as_ref()
    }

    pub fn host_busy(&self) -> HostBusy {
        HostBusy {
            link_to_device_ns: self.link_in.reserved_ns(),
            link_to_host_ns: self.link_out.reserved_ns(),
            cpu_ns: self.cpu.busy_ns(),
            dram_ns: self.dram.reserved_ns(),
        }
    }

    pub fn cores(&self) -> u32 {
        self.cpu.servers()
    }

    // ----- resources -----

    /// Move `bytes` over the link (to the device or to the host) from `t`.
    fn link(&mut self, to_host: bool, t: u64, bytes: u64, path: &mut Breakdown) -> u64 {
        let ns = self.host.link_ns(bytes);
        let tl = if to_host && self.host.full_duplex { &mut self.link_out } else { &mut self.link_in };
        tl.prune(self.now);
        let start = tl.book(t, ns, false);
        path.add(Component::HostTransfer, start - t + ns);
        start + ns
    }

    /// Copy `bytes` through the device DRAM from `t`.
    fn dram_copy(&mut self, t: u64, bytes: u64, path: &mut Breakdown) -> u64 {
        let ns = self.timing.dram_ns(bytes);
        self.dram.prune(self.now);
        let start = self.dram.book(t, ns, false);
        path.add(Component::Dram, start - t + ns);
        start + ns
    }

    /// Run `f` (FTL calls) as one flash epoch ready at `ready`.
    fn epoch<R>(
        &mut self,
        ready: u64,
        owner: u64,
        path: Breakdown,
        f: impl FnOnce(&mut Self) -> R,
    ) -> (R, u64, Breakdown) {
        self.model.borrow_mut().begin_epoch(ready, owner, path);
        let r = f(self);
        let (end, p) = self.model.borrow().end_epoch();
        (r, end, p)
    }

    /// Run `f` (FTL calls) as one flash epoch ready at `ready`, on
    /// whichever core times the flash; `windowed`: a cache eviction (see
    /// [`crate::timing::event_timing`]).
    fn flash_epoch<R>(
        &mut self,
        ready: u64,
        owner: u64,
        path: Breakdown,
        windowed: bool,
        f: impl FnOnce(&mut Self) -> R,
    ) -> (R, When) {
        let event = {
            let mut m = self.model.borrow_mut();
            m.event_mut().map(|e| e.begin(ready, windowed))
        };
        if event.is_none() {
            let (r, end, p) = self.epoch(ready, owner, path, f);
            return (r, When::At(end, p));
        }
        let r = f(self);
        let id = self.model.borrow_mut().event_mut().expect("event core").end();
        match id {
            Some(id) => (r, When::Pending(id, path)),
            None => (r, When::At(ready, path)),
        }
    }

    /// A request's outcome from its flash epoch's timing.
    fn outcome(when: When, ready: u64, post: Post) -> Outcome {
        match when {
            When::At(end, p) => Outcome::At(end, p),
            When::Pending(id, path) => Outcome::Wait { epochs: vec![id], ready_ns: ready, path, post },
        }
    }

    // ----- requests -----

    /// Simulate one host request arriving at `arrival_ns` on submission
    /// queue `queue`; `seq` identifies it to the timing model. With the
    /// event core the completion may not be known yet (`None`): it comes
    /// out of [`TimedDevice::take_completed`] once the core has run past it.
    pub fn submit(
        &mut self,
        req: &HostRequest,
        queue: u32,
        arrival_ns: u64,
        seq: u64,
    ) -> Result<Option<Completion>, RunError> {
        if let Some(cache) = &self.cache {
            // The cache looks the pages up after the host interface's bookkeeping.
            for (lpn, ..) in pieces(self.spp, req.lba, req.sectors) {
                cache.prefetch(lpn);
            }
        }
        self.run_core_until(arrival_ns);
        self.model.borrow_mut().advance(arrival_ns);
        self.now = self.now.max(arrival_ns);
        let mut b = Breakdown::default();
        let admitted = self.queues.admit(queue, arrival_ns);
        b.add(Component::Queue, admitted - arrival_ns);
        let t = admitted + self.host.command_overhead_ns;
        b.add(Component::HostCommand, self.host.command_overhead_ns);
        let (start, t) = self.cpu.serve(t, self.host.firmware_ns);
        b.add(Component::Queue, start - (admitted + self.host.command_overhead_ns));
        b.add(Component::Cpu, self.host.firmware_ns);
        let bytes = u64::from(req.sectors) * self.sector_bytes;
        let outcome = match req.op {
            HostOp::Write => {
                let t = self.link(false, t, bytes, &mut b);
                match self.mode {
                    WriteCacheMode::None => {
                        let (r, when) = self.flash_epoch(t, seq, b, false, |d| d.session.submit(req));
                        r?;
                        Self::outcome(when, t, Post::Flash)
                    }
                    WriteCacheMode::WriteThrough => self.write_through(req, t, seq, b)?,
                    WriteCacheMode::WriteBack => self.write_back(req, t, b)?,
                }
            }
            HostOp::Read => match self.read(req, t, seq, b)? {
                Outcome::At(end, mut p) => {
                    let end = self.link(true, end, bytes, &mut p);
                    Outcome::At(end, p)
                }
                wait => wait,
            },
            HostOp::Trim => {
                self.drop_cached(req.lba, u64::from(req.sectors));
                let (r, when) = self.flash_epoch(t, seq, b, false, |d| d.session.submit(req));
                r?;
                Self::outcome(when, t, Post::Flash)
            }
            HostOp::Flush => self.flush(req, t, seq, b)?,
        };
        match outcome {
            Outcome::At(end, path) => {
                self.queues.complete_at(queue, end);
                debug_assert_eq!(path.total(), end - arrival_ns, "breakdown sums to latency");
                Ok(Some(Completion { completion_ns: end, breakdown: path }))
            }
            Outcome::Wait { epochs, ready_ns, path, post } => {
                self.wait_for(seq, queue, arrival_ns, epochs, ready_ns, path, post);
                Ok(None)
            }
        }
    }

    /// Background work in idle time: FTL idle steps from `from_ns` (or
    /// when the flash work in flight ends, if later), each started only if
    /// it surely ends by `until_ns` (see the module docs). Returns the
    /// steps done.
    pub fn idle(&mut self, from_ns: u64, until_ns: u64, max_steps: u32) -> u32 {
        let at = if self.uses_event_core() {
            // Steps start once the core is idle: from the later of `from_ns`
            // and its last event (see `FlashCore::rewind_idle`).
            let mut m = self.model.borrow_mut();
            let event = m.event_mut().expect("event core");
            if !event.is_idle() {
                return 0;
            }
            event.rewind_idle(from_ns);
            event.now_ns()
        } else {
            from_ns.max(self.model.borrow().busy_until())
        };
        let mut at = at;
        let mut steps = 0;
        while at.saturating_add(self.idle_step_bound_ns) <= until_ns && steps < max_steps && !self.session.ftl_failed()
        {
            self.session.drive_mut().set_request(None);
            let (r, when) =
                self.flash_epoch(at, NO_OWNER, Breakdown::default(), false, |d| d.session.drive_mut().idle_step());
            let end = match when {
                When::At(end, _) => end,
                When::Pending(id, _) => self.model.borrow_mut().event_mut().expect("event core").run_epoch(id),
            };
            match r {
                Ok(crate::ftl::IdleOutcome::Worked) => {
                    steps += 1;
                    self.idle_step_bound_ns = self.idle_step_bound_ns.max(end - at);
                    if end > until_ns {
                        self.idle_overruns += 1;
                    }
                    at = end.max(at + 1);
                }
                Ok(crate::ftl::IdleOutcome::Nothing) => break,
                Err(e) => {
                    self.session.drive_mut().ftl_error("background work", e);
                    break;
                }
            }
        }
        steps
    }
}
