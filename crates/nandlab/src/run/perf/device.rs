//! The timed device: a [`Session`] (FTL, flash, oracle) behind a host
//! interface, a controller CPU, device DRAM and an optional write cache,
//! with the flash timing model attached as an observer.
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
//! order); the timing of its flash work comes from [`FlashTiming`].
//!
//! Write-back evictions go to flash through a window of at most two per
//! die in flight, as a controller's flash command queues bound them: the
//! dirty lines wait in DRAM, not as a backlog of programs queued on the
//! planes ahead of every later read. The window is not per die (the FTL,
//! not the device, chooses the die), so an eviction queued behind a
//! foreground collection holds its slot for the whole collection; what
//! keeps the other dies fed is the FTL striping past dies that are
//! collecting (the data plane does, in timed runs) and the cache reusing
//! the line whose flush ends first (see [`WriteCache`]). With both, a
//! GC-bound drive keeps its dies over 90 % busy (`tests/perf_physics.rs`);
//! without them, the evictions striped to collecting dies took the window
//! and the free lines, and the dies idled. An evicted line that is wholly dirty
//! takes along the wholly dirty lines next to it within its aligned run of
//! `planes_per_die` logical pages, as one FTL write: the FTL can program
//! them with one multi-plane program (a lone page waits for no partner).
//! A flush writes every dirty line back and keeps it cached, clean (a
//! later read still hits it).
//!
//! A write of exactly one whole page gives its host buffer to the cache
//! line (whose old buffer is freed) instead of copying its stamps into the
//! line's buffer: the line holds the same stamps either way, and a random
//! page-sized workload saves a buffer copy per request.
//!
//! Background work ([`TimedDevice::idle`]) runs in whole FTL idle steps,
//! which cannot be interrupted once started (MQSim's preemptible GC is not
//! modelled). So a step starts only when it surely ends before the next
//! arrival: when the time left is at least a bound on one step — the
//! longer of the worst case of collecting one block (every page moved
//! through the controller, serialised on one die, then the erase; see
//! [`one_block_step_ns`]) and the longest step seen so far. Steps start
//! once all flash work in flight has ended, so nothing else delays them.

use super::super::{RunError, Session};
use crate::config::Config;
use crate::flash::BufId;
use crate::ftl::{Durability, IoRequest};
use crate::host::{Host, SubmissionQueues};
use crate::timing::write_cache::WriteCache;
use crate::timing::{
    Breakdown, Component, FlashTiming, ServerPool, Timeline, Timing, TimingObserver, WriteCacheMode, NO_OWNER,
};
use crate::workload::{HostOp, HostRequest};
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::rc::Rc;

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
    pub model: Rc<RefCell<FlashTiming>>,
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
    pub idle_overruns: u64,
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
        let timing = config.require_timing().map_err(RunError::Input)?.clone();
        // The write cache takes its share of the DRAM; the FTL gets the rest.
        let mut ftl_config = config.clone();
        ftl_config.dram_budget_bytes = config.dram_budget_bytes - timing.write_cache_bytes;
        let mut session =
            Session::new(&ftl_config, seed, oracle_unit_sectors, keep_violations).map_err(|e| match e {
                RunError::Input(m) if timing.write_cache_bytes > 0 => RunError::Input(format!(
                    "{m} (the write cache takes {} MiB of the {} MiB of device DRAM)",
                    timing.write_cache_bytes >> 20,
                    config.dram_budget_bytes >> 20
                )),
                other => other,
            })?;
        let g = &config.geometry;
        let mut model = FlashTiming::new(g, &timing, interval_ns);
        model.set_enabled(false);
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
            timing,
            host,
        })
    }

    /// Switch the timing model on: from now on operations take time.
    pub fn start_timing(&mut self) {
        self.model.borrow_mut().set_enabled(true);
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

    // ----- requests -----

    /// Simulate one host request arriving at `arrival_ns` on submission
    /// queue `queue`; `seq` identifies it to the timing model.
    pub fn submit(&mut self, req: &HostRequest, queue: u32, arrival_ns: u64, seq: u64) -> Result<Completion, RunError> {
        if let Some(cache) = &self.cache {
            // The cache looks the pages up after the host interface's bookkeeping.
            for (lpn, ..) in pieces(self.spp, req.lba, req.sectors) {
                cache.prefetch(lpn);
            }
        }
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
        let (end, path) = match req.op {
            HostOp::Write => {
                let t = self.link(false, t, bytes, &mut b);
                match self.mode {
                    WriteCacheMode::None => {
                        let (r, end, p) = self.epoch(t, seq, b, |d| d.session.submit(req));
                        r?;
                        (end, p)
                    }
                    WriteCacheMode::WriteThrough => self.write_through(req, t, seq, b)?,
                    WriteCacheMode::WriteBack => self.write_back(req, t, b)?,
                }
            }
            HostOp::Read => {
                let (end, mut p) = self.read(req, t, seq, b)?;
                let end = self.link(true, end, bytes, &mut p);
                (end, p)
            }
            HostOp::Trim => {
                self.drop_cached(req.lba, u64::from(req.sectors));
                let (r, end, p) = self.epoch(t, seq, b, |d| d.session.submit(req));
                r?;
                (end, p)
            }
            HostOp::Flush => self.flush(req, t, seq, b)?,
        };
        self.queues.complete_at(queue, end);
        debug_assert_eq!(path.total(), end - arrival_ns, "breakdown sums to latency");
        Ok(Completion { completion_ns: end, breakdown: path })
    }

    fn read(&mut self, req: &HostRequest, t: u64, seq: u64, b: Breakdown) -> Result<(u64, Breakdown), RunError> {
        let Some(cache) = &self.cache else {
            let (r, end, p) = self.epoch(t, seq, b, |d| d.session.submit(req));
            r?;
            return Ok((end, p));
        };
        let bytes = u64::from(req.sectors) * self.sector_bytes;
        let all_cached = pieces(self.spp, req.lba, req.sectors)
            .all(|(lpn, first, n, _)| cache.lookup(lpn).is_some_and(|l| cache.covers(l, first, n)));
        // Cached sectors can be read once the writes that put them in DRAM are there.
        let data_ready = pieces(self.spp, req.lba, req.sectors)
            .filter_map(|(lpn, ..)| cache.lookup(lpn))
            .fold(t, |at, l| at.max(cache.line(l).data_ready_ns));
        let cache = self.cache.as_mut().expect("checked");
        if all_cached {
            cache.counters.read_hits += 1;
        } else {
            cache.counters.read_misses += 1;
        }
        let id = self.session.begin_request();
        let buf = self.session.drive_mut().alloc_host_read(req.sectors);
        let (r, mut end, mut p) = self.epoch(t, seq, b, |d| {
            if all_cached {
                Ok(())
            } else {
                let io = IoRequest { id, lba: req.lba, sectors: req.sectors, buf };
                d.session.drive_mut().read(&io)
            }
        });
        match r {
            Ok(()) => {
                self.overlay_cached(req.lba, req.sectors, buf);
                let (drive, host) = self.session.parts_mut();
                host.check_read(drive, req.lba, buf)?;
            }
            Err(e) => {
                self.session.drive_mut().ftl_error(&format!("read of {} sectors at LBA {}", req.sectors, req.lba), e)
            }
        }
        if all_cached {
            end = self.dram_copy(data_ready, bytes, &mut p);
            // (The wait for the data is DRAM work: the write's copy in.)
            p.add(Component::Dram, data_ready - t);
        } else if data_ready > end {
            // Sectors laid over from the cache arrive later than the flash data.
            p.add(Component::Dram, data_ready - end);
            end = data_ready;
        }
        let (drive, host) = self.session.parts_mut();
        drive.free_host_buffer(buf);
        host.count_read(req.sectors);
        self.session.end_request();
        Ok((end, p))
    }

    /// Lay every cached sector of `lba .. lba+sectors` over `buf`.
    fn overlay_cached(&mut self, lba: u64, sectors: u32, buf: BufId) {
        let Some(cache) = self.cache.as_ref() else {
            return;
        };
        let runs = &mut self.scratch_runs;
        let drive = self.session.drive_mut();
        for (lpn, first, n, off) in pieces(self.spp, lba, sectors) {
            let Some(line) = cache.lookup(lpn) else {
                continue;
            };
            runs.clear();
            cache.present_runs(line, self.spp, runs);
            let lbuf = cache.line(line).buf;
            for &(s, len) in runs.iter() {
                let lo = s.max(first);
                let hi = (s + len).min(first + n);
                if lo < hi {
                    let _ = drive.buf_copy(buf, off + (lo - first), lbuf, lo, hi - lo);
                }
            }
        }
    }

    /// Put sectors `off .. off+n` of host buffer `hbuf` (of `sectors`
    /// sectors) into `line` from sector `first`. A host buffer of exactly
    /// one whole page becomes the line's buffer (the line's old one is
    /// freed): the same stamps without copying them. Returns whether it
    /// did; the caller must then not free `hbuf`.
    fn fill_line(&mut self, line: u32, first: u32, n: u32, hbuf: BufId, off: u32, sectors: u32) -> bool {
        let cache = self.cache.as_mut().expect("cache present");
        if sectors == self.spp && n == self.spp {
            let old = std::mem::replace(&mut cache.line_mut(line).buf, hbuf);
            self.session.drive_mut().free_host_buffer(old);
            return true;
        }
        let lbuf = cache.line(line).buf;
        let _ = self.session.drive_mut().buf_copy(lbuf, first, hbuf, off, n);
        false
    }

    /// A line for `lpn`: cached, free, or freed by evicting the LRU line.
    fn line_for(&mut self, lpn: u64, t: u64) -> u32 {
        let cache = self.cache.as_mut().expect("cache present");
        if let Some(l) = cache.lookup(lpn) {
            cache.counters.write_hits += 1;
            cache.touch(l);
            return l;
        }
        cache.counters.write_misses += 1;
        if let Some(l) = cache.take_free(lpn) {
            return l;
        }
        let victim = cache.lru().expect("a full cache has an LRU line");
        // Alone: the lines around it may belong to the request being cached.
        self.evict(victim, t, false);
        self.cache.as_mut().expect("cache present").take_free(lpn).expect("eviction freed a line")
    }

    /// Write a line's sectors to the FTL (if dirty) and free it once that
    /// flash work completes; `together_ok`: with the lines around it (see
    /// the module docs).
    fn evict(&mut self, line: u32, t: u64, together_ok: bool) {
        self.write_back_line(line, t, false, together_ok);
    }

    /// Write a line's sectors to the FTL (if dirty), with the lines around
    /// it if `together_ok`; then free the line(s), or (`keep`) keep them
    /// cached and clean. Either way their DRAM is busy until that flash work
    /// completes. A line already written out with a neighbour is skipped.
    fn write_back_line(&mut self, line: u32, t: u64, keep: bool, together_ok: bool) {
        let cache = self.cache.as_mut().expect("cache present");
        if !cache.is_mapped(line) {
            return;
        }
        let l = cache.line(line).clone();
        if !l.dirty {
            if !keep {
                cache.release(line, l.busy_until_ns);
            }
            return;
        }
        let mut together = std::mem::take(&mut self.scratch_together);
        together.clear();
        if together_ok {
            self.lines_written_together(line, &mut together);
        }
        if together.len() > 1 {
            self.write_back_together(&together, t, keep);
            self.scratch_together = together;
            return;
        }
        self.scratch_together = together;
        let cache = self.cache.as_mut().expect("cache present");
        cache.counters.evictions += 1;
        self.scratch_runs.clear();
        cache.present_runs(line, self.spp, &mut self.scratch_runs);
        let runs = std::mem::take(&mut self.scratch_runs);
        let mut ready = t.max(l.data_ready_ns);
        if self.evictions_in_flight(t) >= self.max_evictions {
            // Wait for a slot in the window of evictions in flight.
            let Reverse(first) = self.evictions.pop().expect("window is full");
            ready = ready.max(first);
        }
        let (_, end, _) = self.epoch(ready, NO_OWNER, Breakdown::default(), |d| {
            for &(first, n) in &runs {
                d.write_line_run(l.lpn, l.buf, first, n);
            }
        });
        self.evictions.push(Reverse(end));
        self.scratch_runs = runs;
        let cache = self.cache.as_mut().expect("cache present");
        if keep {
            cache.clean(line, end);
        } else {
            cache.release(line, end);
        }
    }

    /// The wholly dirty lines around dirty `line` within its aligned run of
    /// `lines_together` logical pages, contiguous and in page order
    /// (just `line` if it is not wholly dirty).
    fn lines_written_together(&self, line: u32, out: &mut Vec<u32>) {
        out.clear();
        let cache = self.cache.as_ref().expect("cache present");
        let whole = |id: u32| cache.line(id).dirty && cache.covers(id, 0, self.spp);
        let lpn = cache.line(line).lpn;
        let n = u64::from(self.lines_together);
        if n < 2 || !whole(line) {
            out.push(line);
            return;
        }
        let base = lpn - lpn % n;
        // Each neighbour is looked up once (the map is the cost here).
        let whole_at = |l: u64| cache.lookup(l).filter(|&id| whole(id));
        out.push(line);
        let mut first = lpn;
        while first > base {
            let Some(id) = whole_at(first - 1) else { break };
            out.push(id);
            first -= 1;
        }
        out.reverse();
        let mut last = lpn;
        while last + 1 < base + n {
            let Some(id) = whole_at(last + 1) else { break };
            out.push(id);
            last += 1;
        }
    }

    /// Write wholly dirty `lines` of consecutive logical pages to the FTL
    /// as one write; free them (or `keep` them clean) once its flash work
    /// completes.
    fn write_back_together(&mut self, lines: &[u32], t: u64, keep: bool) {
        let cache = self.cache.as_mut().expect("cache present");
        cache.counters.evictions += lines.len() as u64;
        let first_lpn = cache.line(lines[0]).lpn;
        let mut ready = lines.iter().fold(t, |r, &l| r.max(cache.line(l).data_ready_ns));
        let sectors = self.spp * lines.len() as u32;
        let drive = self.session.drive_mut();
        let buf = drive.alloc_host_read(sectors);
        for (k, &l) in lines.iter().enumerate() {
            let lbuf = cache.line(l).buf;
            let _ = drive.buf_copy(buf, k as u32 * self.spp, lbuf, 0, self.spp);
        }
        if self.evictions_in_flight(t) >= self.max_evictions {
            let Reverse(first) = self.evictions.pop().expect("window is full");
            ready = ready.max(first);
        }
        let lba = first_lpn * u64::from(self.spp);
        let (_, end, _) = self.epoch(ready, NO_OWNER, Breakdown::default(), |d| d.write_to_ftl(lba, sectors, buf));
        self.session.drive_mut().free_host_buffer(buf);
        self.evictions.push(Reverse(end));
        let cache = self.cache.as_mut().expect("cache present");
        for &l in lines {
            if keep {
                cache.clean(l, end);
            } else {
                cache.release(l, end);
            }
        }
    }

    /// One FTL write of a cache eviction (an FTL failure is recorded, not returned).
    fn write_to_ftl(&mut self, lba: u64, sectors: u32, buf: BufId) {
        let drive = self.session.drive_mut();
        if drive.ftl_failed() {
            return;
        }
        let id = drive.flash().request().unwrap_or(u64::MAX);
        let io = IoRequest { id, lba, sectors, buf };
        if let Err(e) = drive.write(&io) {
            drive.ftl_error(&format!("write-cache eviction of {sectors} sectors at LBA {lba}"), e);
        }
    }

    /// Evictions whose flash work is still running at `t`.
    fn evictions_in_flight(&mut self, t: u64) -> usize {
        while self.evictions.peek().is_some_and(|Reverse(e)| *e <= t) {
            self.evictions.pop();
        }
        self.evictions.len()
    }

    /// One FTL write of sectors `first .. first+n` of a cached page.
    fn write_line_run(&mut self, lpn: u64, lbuf: BufId, first: u32, n: u32) {
        if self.session.ftl_failed() {
            return;
        }
        let lba = lpn * u64::from(self.spp) + u64::from(first);
        let (buf, temp) = if first == 0 {
            (lbuf, false)
        } else {
            let drive = self.session.drive_mut();
            let b = drive.alloc_host_read(n);
            let _ = drive.buf_copy(b, 0, lbuf, first, n);
            (b, true)
        };
        self.write_to_ftl(lba, n, buf);
        if temp {
            self.session.drive_mut().free_host_buffer(buf);
        }
    }

    fn write_back(&mut self, req: &HostRequest, t: u64, mut b: Breakdown) -> Result<(u64, Breakdown), RunError> {
        let _id = self.session.begin_request();
        let (drive, host) = self.session.parts_mut();
        let w = host.issue_write(drive, req.lba, req.sectors)?;
        let hbuf = w.buf;
        let mut lines = std::mem::take(&mut self.scratch_lines);
        lines.clear();
        let mut space = t;
        let mut adopted = false;
        for (lpn, first, n, off) in pieces(self.spp, req.lba, req.sectors) {
            let line = self.line_for(lpn, t);
            let cache = self.cache.as_mut().expect("cache present");
            space = space.max(cache.line(line).busy_until_ns);
            cache.set_present(line, first, n, true);
            cache.set_dirty(line, true);
            adopted |= self.fill_line(line, first, n, hbuf, off, req.sectors);
            lines.push(line);
        }
        b.add(Component::CacheWait, space - t);
        let bytes = u64::from(req.sectors) * self.sector_bytes;
        let ack = self.dram_copy(space, bytes, &mut b);
        self.cache.as_mut().expect("cache present").data_ready_at(&lines, ack);
        self.scratch_lines = lines;
        // Acknowledged from DRAM: durable only once written back.
        let (drive, host) = self.session.parts_mut();
        host.acknowledge_write(&w, Durability::Volatile);
        host.complete_write(drive, w, adopted);
        // Keep dirty lines under the watermark so flushing overlaps with
        // writes, as far as the window of evictions in flight allows.
        while self.evictions_in_flight(ack) < self.max_evictions {
            let Some(victim) = self.cache.as_mut().filter(|c| c.over_watermark()).and_then(WriteCache::lru_dirty)
            else {
                break;
            };
            self.evict(victim, ack, true);
        }
        // The next requests' victims: their lines arrive while those requests start.
        self.cache.as_mut().expect("cache present").warm_victims(u64::from(self.lines_together.max(1)));
        self.session.end_request();
        Ok((ack, b))
    }

    fn write_through(
        &mut self,
        req: &HostRequest,
        t: u64,
        seq: u64,
        b: Breakdown,
    ) -> Result<(u64, Breakdown), RunError> {
        let id = self.session.begin_request();
        let (drive, host) = self.session.parts_mut();
        let w = host.issue_write(drive, req.lba, req.sectors)?;
        let hbuf = w.buf;
        let io = IoRequest { id, lba: req.lba, sectors: req.sectors, buf: hbuf };
        let (r, end, p) = self.epoch(t, seq, b, |d| d.session.drive_mut().write(&io));
        let bytes = u64::from(req.sectors) * self.sector_bytes;
        let mut adopted = false;
        match r {
            Ok(_) => {
                // The cache acknowledges once the FTL's write returned: counted
                // as durable whatever the FTL said (its own buffer is its business).
                self.session.parts_mut().1.acknowledge_write(&w, Durability::Durable);
                // Keep a clean copy for reads (in DRAM while flash programs).
                let mut lines = std::mem::take(&mut self.scratch_lines);
                lines.clear();
                for (lpn, first, n, off) in pieces(self.spp, req.lba, req.sectors) {
                    let line = self.line_for(lpn, t);
                    self.cache.as_mut().expect("cache present").set_present(line, first, n, true);
                    adopted |= self.fill_line(line, first, n, hbuf, off, req.sectors);
                    lines.push(line);
                }
                let mut scratch = Breakdown::default();
                let copied = self.dram_copy(t, bytes, &mut scratch);
                self.cache.as_mut().expect("cache present").data_ready_at(&lines, copied);
                self.scratch_lines = lines;
            }
            Err(e) => {
                self.session.drive_mut().ftl_error(&format!("write of {} sectors at LBA {}", req.sectors, req.lba), e)
            }
        }
        let (drive, host) = self.session.parts_mut();
        host.complete_write(drive, w, adopted);
        self.session.end_request();
        Ok((end, p))
    }

    /// Forget cached sectors of a trimmed range (they must read as zeros).
    fn drop_cached(&mut self, lba: u64, sectors: u64) {
        let Some(cache) = self.cache.as_mut() else {
            return;
        };
        if sectors == 0 {
            return;
        }
        let spp = u64::from(self.spp);
        let end = lba + sectors;
        let mut lines = std::mem::take(&mut self.scratch_lines);
        lines.clear();
        cache.lines_in(lba / spp, (end - 1) / spp, &mut lines);
        for &l in &lines {
            let page_start = cache.line(l).lpn * spp;
            let lo = lba.max(page_start);
            let hi = end.min(page_start + spp);
            cache.set_present(l, (lo - page_start) as u32, (hi - lo) as u32, false);
            if cache.is_empty_line(l) {
                let busy = cache.line(l).busy_until_ns;
                cache.release(l, busy);
            }
        }
        self.scratch_lines = lines;
    }

    fn flush(&mut self, req: &HostRequest, t: u64, seq: u64, b: Breakdown) -> Result<(u64, Breakdown), RunError> {
        let mut done = t;
        if self.cache.is_some() {
            let _id = self.session.begin_request();
            let mut lines = std::mem::take(&mut self.scratch_lines);
            lines.clear();
            let cache = self.cache.as_mut().expect("cache present");
            cache.counters.flushes += 1;
            cache.dirty_in_lru_order(&mut lines);
            for &l in &lines {
                self.write_back_line(l, t, true, true);
            }
            self.scratch_lines = lines;
            self.session.end_request();
            done = done.max(self.cache.as_ref().expect("cache").flushed_until_ns);
        }
        let (r, end, mut p) = self.epoch(t, seq, b, |d| d.session.submit(req));
        r?;
        if done > end {
            // Waiting for every dirty line to reach flash.
            p.add(Component::CacheWait, done - end);
        }
        Ok((done.max(end), p))
    }

    /// Write every dirty cache line to the FTL (before a clean shutdown).
    pub fn write_back_all(&mut self) {
        if self.cache.is_none() {
            return;
        }
        let mut lines = Vec::new();
        self.cache.as_ref().expect("cache present").dirty_in_lru_order(&mut lines);
        let t = self.now;
        for l in lines {
            self.write_back_line(l, t, true, true);
        }
    }

    /// Background work in idle time: FTL idle steps from `from_ns` (or
    /// when the flash work in flight ends, if later), each started only if
    /// it surely ends by `until_ns` (see the module docs). Returns the
    /// steps done.
    pub fn idle(&mut self, from_ns: u64, until_ns: u64, max_steps: u32) -> u32 {
        let mut at = from_ns.max(self.model.borrow().busy_until());
        let mut steps = 0;
        while at.saturating_add(self.idle_step_bound_ns) <= until_ns && steps < max_steps && !self.session.ftl_failed()
        {
            self.session.drive_mut().set_request(None);
            let (r, end, _) = self.epoch(at, NO_OWNER, Breakdown::default(), |d| d.session.drive_mut().idle_step());
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
