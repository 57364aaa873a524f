//! The device DRAM write cache: lines of one logical page, between the host
//! interface and the FTL (the role of MQSim's data cache manager), usable
//! with any FTL. Its bookkeeping ([`WriteCache`]) and its policy (the
//! [`TimedDevice`] methods below that move data in and out and time it)
//! live together here.
//!
//! The data itself lives in flash-controller buffers, so cached sectors
//! carry their payload stamps and the oracle checks reads served from DRAM
//! exactly as reads served from flash. The bookkeeping says which logical
//! page each line holds, which of its sectors are present, whether they
//! are dirty, the LRU order, and *when* each line's DRAM is usable (a line
//! being flushed is busy until its flash programs complete).
//!
//! - **write-back**: a write completes when its data is in DRAM
//!   ([`crate::ftl::Durability::Volatile`]); when more than the flush
//!   watermark of lines is dirty, least-recently-used dirty lines are
//!   written to the FTL, and a line is reusable when that write's flash
//!   work completes. A full cache therefore makes writes wait for flash:
//!   they complete at DRAM speed until the cache fills, then at flash speed.
//!   A write that needs a line takes the free line whose flush ends first,
//!   not the one freed first: a line freed early whose program waits
//!   behind a long garbage collection on its die would otherwise hold up
//!   writes that lines flushed to other dies could take.
//!   A flush writes every dirty line back, keeps it cached and clean (as a
//!   real write-back cache does: a later read still hits it), and completes
//!   when all flash work of every write-back so far has completed.
//! - **write-through**: a write goes to the FTL at once and completes when
//!   flash does; the line keeps a clean copy for reads.
//! - Reads are served from DRAM when every requested sector is present in
//!   cache lines; otherwise from the FTL, with cached sectors laid over
//!   (they are newer). Reads do not allocate lines.
//!
//! ## Write-back to flash
//!
//! Evictions go to flash through a window of at most two per die in
//! flight, as a controller's flash command queues bound them: the dirty
//! lines wait in DRAM, not as a backlog of programs queued on the planes
//! ahead of every later read. The window is not per die (the FTL, not the
//! device, chooses the die), so an eviction queued behind a foreground
//! collection holds its slot for the whole collection; what keeps the
//! other dies fed is the FTL striping past dies that are collecting (the
//! data plane does, in timed runs) and the cache reusing the line whose
//! flush ends first (measurements: `docs/design-notes/drive.md`). An
//! evicted line that is wholly dirty takes along the wholly dirty lines
//! next to it within its aligned run of `planes_per_die` logical pages, as
//! one FTL write: the FTL can program them with one multi-plane program (a
//! lone page waits for no partner).
//!
//! A write of exactly one whole page gives its host buffer to the cache
//! line (whose old buffer is freed) instead of copying its stamps into the
//! line's buffer: the line holds the same stamps either way, and a random
//! page-sized workload saves a buffer copy per request.
//!
//! ## Structures
//!
//! The bookkeeping runs on every cached request, and a random workload
//! touches a different, cold line on each: what costs is cache misses, so
//! each structure is chosen for the memory it reads.
//! - Which line holds a page: a `PageTable` (`page_table.rs`) sized once for every line,
//!   whose one-byte tags answer most lookups of uncached pages without
//!   reading the slots.
//! - The LRU order: a [`RecencyQueue`] (a log of uses, giving exactly a
//!   move-to-front list's order), so a use or a removal writes no
//!   neighbour's links, and the next victims can be read ahead in order;
//!   [`WriteCache::warm_victims`] warms their lines, present bits and
//!   table slots before an eviction needs them.
//! - The free lines: a heap by (usable from, line).
//!
//! The test `lookups_victims_and_free_lines_match_plain_models` checks the
//! structures against a hash map, a move-to-front list and an ordered set.

mod page_table;

use super::pending::{Outcome, Post, PENDING_EPOCH};
use super::{pieces, TimedDevice, When};
use crate::flash::BufId;
use crate::ftl::{Durability, IoRequest};
use crate::report::perf::CacheCounters;
use crate::run::RunError;
use crate::timing::{Breakdown, Component, NO_OWNER};
use crate::util::prefetch::prefetch;
use crate::util::recency::{RecencyQueue, Use};
use crate::workload::HostRequest;
use page_table::PageTable;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const NIL: u32 = u32::MAX;

/// How many records from the least-recently-used end the cache warms the
/// lines of (the next victims), and how many it warms the page-table slots
/// of (a second pass: a slot's place needs the line's page number, so it
/// comes once the line has arrived).
const WARM_LINES: usize = 32;
const WARM_SLOTS: usize = 4;

/// The bitmap words covering sectors `first .. first+n` of a line, and in
/// each the mask of those sectors' bits: a word at a time, not a sector.
fn word_masks(first: u32, n: u32) -> impl Iterator<Item = (usize, u64)> {
    let end = first + n;
    let mut s = first;
    std::iter::from_fn(move || {
        if s >= end {
            return None;
        }
        let bit = s % 64;
        let take = (64 - bit).min(end - s); // 1..=64
        let mask = (u64::MAX >> (64 - take)) << bit;
        let word = (s / 64) as usize;
        s += take;
        Some((word, mask))
    })
}

#[derive(Clone, Debug)]
pub struct Line {
    pub lpn: u64,
    pub buf: BufId,
    pub dirty: bool,
    /// When the line's current data is in DRAM.
    pub data_ready_ns: u64,
    /// When the line's previous contents finished flushing (reusable).
    pub busy_until_ns: u64,
    /// The stamp of the line's latest use in the recency queue.
    stamp: u32,
    mapped: bool,
}

/// The cache's bookkeeping. See the module docs.
pub struct WriteCache {
    lines: Vec<Line>,
    words: usize,
    /// Present-sector bitmap, `words` u64 per line.
    present: Vec<u64>,
    map: PageTable,
    /// The mapped lines' LRU order (see the module docs).
    order: RecencyQueue,
    /// Free lines by when they become usable (then by id): a write takes
    /// the line whose flush ends first, not the one freed first.
    free: BinaryHeap<Reverse<(u64, u32)>>,
    dirty_lines: u32,
    high_watermark: u32,
    pub counters: CacheCounters,
    /// When every flush issued so far completes.
    pub flushed_until_ns: u64,
}

/// Whether a recency record is the latest use of a mapped line.
#[inline]
fn is_live(lines: &[Line], u: Use) -> bool {
    let l = &lines[u.slot as usize];
    l.mapped && l.stamp == u.stamp
}

impl WriteCache {
    /// A cache of `bufs.len()` lines of `sectors_per_page` sectors; each
    /// line's data lives in the given buffer.
    pub fn new(bufs: Vec<BufId>, sectors_per_page: u32, watermark: f64) -> WriteCache {
        let n = bufs.len();
        let words = (sectors_per_page as usize).div_ceil(64);
        WriteCache {
            lines: bufs
                .into_iter()
                .map(|buf| Line {
                    lpn: 0,
                    buf,
                    dirty: false,
                    data_ready_ns: 0,
                    busy_until_ns: 0,
                    stamp: 0,
                    mapped: false,
                })
                .collect(),
            words,
            present: vec![0; n * words],
            map: PageTable::new(n),
            order: RecencyQueue::new(n),
            free: (0..n as u32).map(|id| Reverse((0, id))).collect(),
            dirty_lines: 0,
            high_watermark: ((n as f64 * watermark).floor() as u32).clamp(1, n.max(1) as u32),
            counters: CacheCounters::default(),
            flushed_until_ns: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.lines.len()
    }
    pub fn dirty_lines(&self) -> u32 {
        self.dirty_lines
    }
    pub fn line(&self, id: u32) -> &Line {
        &self.lines[id as usize]
    }
    pub fn line_mut(&mut self, id: u32) -> &mut Line {
        &mut self.lines[id as usize]
    }
    /// Whether line `id` holds a logical page (it is not free).
    pub fn is_mapped(&self, id: u32) -> bool {
        self.lines[id as usize].mapped
    }
    pub fn lookup(&self, lpn: u64) -> Option<u32> {
        self.map.get(lpn)
    }

    /// Hint that `lpn` will be looked up soon (a request's pages, before
    /// the host interface's bookkeeping).
    #[inline]
    pub fn prefetch(&self, lpn: u64) {
        self.map.prefetch(lpn);
    }

    /// Whether sectors `first .. first+n` of a line are all present.
    pub fn covers(&self, id: u32, first: u32, n: u32) -> bool {
        let base = id as usize * self.words;
        word_masks(first, n).all(|(w, mask)| self.present[base + w] & mask == mask)
    }

    #[inline]
    pub fn is_present(&self, id: u32, sector: u32) -> bool {
        let w = id as usize * self.words + (sector / 64) as usize;
        self.present[w] >> (sector % 64) & 1 == 1
    }

    /// Mark sectors `first .. first+n` of a line present (or absent).
    pub fn set_present(&mut self, id: u32, first: u32, n: u32, on: bool) {
        let base = id as usize * self.words;
        for (w, mask) in word_masks(first, n) {
            let word = &mut self.present[base + w];
            if on {
                *word |= mask;
            } else {
                *word &= !mask;
            }
        }
    }

    pub fn is_empty_line(&self, id: u32) -> bool {
        let base = id as usize * self.words;
        self.present[base..base + self.words].iter().all(|&w| w == 0)
    }

    /// Maximal runs of present sectors of a line: (first, count), appended to `out`.
    pub fn present_runs(&self, id: u32, sectors_per_page: u32, out: &mut Vec<(u32, u32)>) {
        let base = id as usize * self.words;
        let full_words = (sectors_per_page / 64) as usize;
        let rest = sectors_per_page % 64;
        let all = self.present[base..base + full_words].iter().all(|&w| w == u64::MAX)
            && (rest == 0 || self.present[base + full_words] == (1u64 << rest) - 1);
        if all {
            out.push((0, sectors_per_page)); // a whole page (the common case)
            return;
        }
        let mut s = 0;
        while s < sectors_per_page {
            if self.is_present(id, s) {
                let start = s;
                while s < sectors_per_page && self.is_present(id, s) {
                    s += 1;
                }
                out.push((start, s - start));
            } else {
                s += 1;
            }
        }
    }

    pub fn set_dirty(&mut self, id: u32, dirty: bool) {
        let l = &mut self.lines[id as usize];
        if l.dirty != dirty {
            l.dirty = dirty;
            if dirty {
                self.dirty_lines += 1;
            } else {
                self.dirty_lines -= 1;
            }
        }
    }

    /// Move a mapped line to the most-recently-used end.
    pub fn touch(&mut self, id: u32) {
        let lines = &self.lines;
        let stamp = self.order.push(id, |u| is_live(lines, u));
        self.lines[id as usize].stamp = stamp;
    }

    /// A line for `lpn` from the free lines, if any (the caller evicts
    /// first when there is none): the one usable first. The line may still
    /// be busy flushing: see its `busy_until_ns`.
    pub fn take_free(&mut self, lpn: u64) -> Option<u32> {
        let Reverse((_, id)) = self.free.pop()?;
        let words = self.words;
        self.present[id as usize * words..(id as usize + 1) * words].fill(0);
        let l = &mut self.lines[id as usize];
        l.lpn = lpn;
        l.mapped = true;
        l.dirty = false;
        self.map.insert(lpn, id);
        self.touch(id);
        // The next write that misses takes the next free line: warm it.
        if let Some(&Reverse((_, next))) = self.free.peek() {
            prefetch(&self.lines, next as usize);
            prefetch(&self.present, next as usize * words);
        }
        Some(id)
    }

    /// The least-recently-used line (the next to evict).
    pub fn lru(&mut self) -> Option<u32> {
        let lines = &self.lines;
        self.order.oldest(|u| is_live(lines, u))
    }

    /// [`WriteCache::lru`] without dropping stale records on the way: a
    /// read-only peek (the perf run hints the FTL the next victim).
    pub fn peek_lru(&self) -> Option<u32> {
        let lines = &self.lines;
        self.order.oldest_first().find(|&u| is_live(lines, u)).map(|u| u.slot)
    }

    /// Whether the dirty lines exceed the watermark.
    pub fn over_watermark(&self) -> bool {
        self.dirty_lines > self.high_watermark
    }

    /// The least-recently-used dirty line.
    pub fn lru_dirty(&mut self) -> Option<u32> {
        self.lru()?;
        let lines = &self.lines;
        self.order.oldest_first().find(|&u| is_live(lines, u) && lines[u.slot as usize].dirty).map(|u| u.slot)
    }

    /// Warm what evicting the next least-recently-used lines reads: their
    /// lines and present bits, and (once a line is in) the page-table
    /// slots of its aligned run of `group` pages (an eviction looks its
    /// neighbours up to write them back together).
    pub fn warm_victims(&mut self, group: u64) {
        let (lines, present, words) = (&self.lines, &self.present, self.words);
        self.order.warm(WARM_LINES, |id| {
            prefetch(lines, id as usize);
            prefetch(present, id as usize * words);
        });
        if let Some(u) = self.order.nth_oldest(WARM_SLOTS) {
            let lpn = self.lines[u.slot as usize].lpn;
            let base = lpn - lpn % group;
            for page in base..base + group {
                self.map.prefetch(page);
            }
        }
    }

    /// Unmap a line whose contents were written out (or were clean) and
    /// make it free once `busy_until_ns`.
    pub fn release(&mut self, id: u32, busy_until_ns: u64) {
        self.set_dirty(id, false);
        let l = &mut self.lines[id as usize];
        if l.mapped {
            // Its records in the recency queue go stale with it.
            l.mapped = false;
            self.map.remove(l.lpn);
        }
        l.busy_until_ns = l.busy_until_ns.max(busy_until_ns);
        self.flushed_until_ns = self.flushed_until_ns.max(busy_until_ns);
        self.free.push(Reverse((l.busy_until_ns, id)));
    }

    /// The data just copied into `lines` is in DRAM from `ready_ns` on.
    pub fn data_ready_at(&mut self, lines: &[u32], ready_ns: u64) {
        for &l in lines {
            let line = &mut self.lines[l as usize];
            line.data_ready_ns = line.data_ready_ns.max(ready_ns);
        }
    }

    /// A dirty line was written back and stays cached, clean; its DRAM is
    /// busy until `busy_until_ns` (the flash work reading it).
    pub fn clean(&mut self, id: u32, busy_until_ns: u64) {
        self.set_dirty(id, false);
        let l = &mut self.lines[id as usize];
        l.busy_until_ns = l.busy_until_ns.max(busy_until_ns);
        self.flushed_until_ns = self.flushed_until_ns.max(busy_until_ns);
    }

    /// Every mapped dirty line, least recently used first.
    pub fn dirty_in_lru_order(&self, out: &mut Vec<u32>) {
        let lines = &self.lines;
        out.extend(
            self.order.oldest_first().filter(|&u| is_live(lines, u) && lines[u.slot as usize].dirty).map(|u| u.slot),
        );
    }

    /// Lines holding any of logical pages `first ..= last`, appended to `out`.
    pub fn lines_in(&self, first: u64, last: u64, out: &mut Vec<u32>) {
        out.extend((first..=last).filter_map(|lpn| self.map.get(lpn)));
    }
}

// ----- policy: the device moving data through the cache, timed -----

impl TimedDevice {
    pub(super) fn read(&mut self, req: &HostRequest, t: u64, seq: u64, b: Breakdown) -> Result<Outcome, RunError> {
        let Some(cache) = &self.cache else {
            let (r, when) = self.flash_epoch(t, seq, b, false, |d| d.session.submit(req));
            r?;
            let bytes = u64::from(req.sectors) * self.sector_bytes;
            return Ok(Self::outcome(when, t, Post::ReadOut { bytes, data_ready_ns: t }));
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
        let (r, when) = self.flash_epoch(t, seq, b, false, |d| {
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
                let (drive, host) = self.session.parts_mut();
                host.read_failed(drive, req.lba, req.sectors, e)
            }
        }
        let outcome = match when {
            When::At(mut end, mut p) => {
                if all_cached {
                    end = self.dram_copy(data_ready, bytes, &mut p);
                    // (The wait for the data is DRAM work: the write's copy in.)
                    p.add(Component::Dram, data_ready - t);
                } else if data_ready > end {
                    // Sectors laid over from the cache arrive later than the flash data.
                    p.add(Component::Dram, data_ready - end);
                    end = data_ready;
                }
                Outcome::At(end, p)
            }
            pending => Self::outcome(pending, t, Post::ReadOut { bytes, data_ready_ns: data_ready }),
        };
        let (drive, host) = self.session.parts_mut();
        drive.free_host_buffer(buf);
        host.count_read(req.sectors);
        self.session.end_request();
        Ok(outcome)
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
        if !self.uses_event_core() && self.evictions_in_flight(t) >= self.max_evictions {
            // Wait for a slot in the window of evictions in flight.
            let Reverse(first) = self.evictions.pop().expect("window is full");
            ready = ready.max(first);
        }
        let (_, when) = self.flash_epoch(ready, NO_OWNER, Breakdown::default(), true, |d| {
            for &(first, n) in &runs {
                d.write_line_run(l.lpn, l.buf, first, n);
            }
        });
        let end = self.eviction_end(when, &[line]);
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
        if !self.uses_event_core() && self.evictions_in_flight(t) >= self.max_evictions {
            let Reverse(first) = self.evictions.pop().expect("window is full");
            ready = ready.max(first);
        }
        let lba = first_lpn * u64::from(self.spp);
        let (_, when) =
            self.flash_epoch(ready, NO_OWNER, Breakdown::default(), true, |d| d.write_to_ftl(lba, sectors, buf));
        self.session.drive_mut().free_host_buffer(buf);
        let end = self.eviction_end(when, lines);
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

    /// When an eviction's lines are free: its end, or (event core) its
    /// epoch tagged [`PENDING_EPOCH`] until it completes.
    fn eviction_end(&mut self, when: When, lines: &[u32]) -> u64 {
        match when {
            When::At(end, _) => {
                if !self.uses_event_core() {
                    self.evictions.push(Reverse(end));
                }
                end
            }
            When::Pending(id, _) => {
                self.line_epochs.entry(id).or_default().extend_from_slice(lines);
                PENDING_EPOCH | id
            }
        }
    }

    /// Evictions whose flash work is still running at `t` (event core:
    /// in flight or waiting for the window).
    fn evictions_in_flight(&mut self, t: u64) -> usize {
        if let Some(e) = self.model.borrow().event() {
            return e.windowed_outstanding();
        }
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

    pub(super) fn write_back(&mut self, req: &HostRequest, t: u64, mut b: Breakdown) -> Result<Outcome, RunError> {
        let _id = self.session.begin_request();
        let (drive, host) = self.session.parts_mut();
        let w = host.issue_write(drive, req.lba, req.sectors)?;
        let hbuf = w.buf;
        let mut lines = std::mem::take(&mut self.scratch_lines);
        lines.clear();
        let mut space = t;
        let mut adopted = false;
        let mut epochs = Vec::new();
        for (lpn, first, n, off) in pieces(self.spp, req.lba, req.sectors) {
            let line = self.line_for(lpn, t);
            let cache = self.cache.as_mut().expect("cache present");
            let busy = cache.line(line).busy_until_ns;
            if busy & PENDING_EPOCH != 0 {
                // Its eviction has not completed on the event core.
                if !epochs.contains(&(busy & !PENDING_EPOCH)) {
                    epochs.push(busy & !PENDING_EPOCH);
                }
            } else {
                space = space.max(busy);
            }
            cache.set_present(line, first, n, true);
            cache.set_dirty(line, true);
            adopted |= self.fill_line(line, first, n, hbuf, off, req.sectors);
            lines.push(line);
        }
        let bytes = u64::from(req.sectors) * self.sector_bytes;
        let outcome = if epochs.is_empty() {
            b.add(Component::CacheWait, space - t);
            let ack = self.dram_copy(space, bytes, &mut b);
            self.cache.as_mut().expect("cache present").data_ready_at(&lines, ack);
            Outcome::At(ack, b)
        } else {
            // (Reads of these lines count the data there from `space` on:
            // the copy's time is not known yet.)
            self.cache.as_mut().expect("cache present").data_ready_at(&lines, space);
            Outcome::Wait { epochs, ready_ns: t, path: b, post: Post::CopyIn { bytes } }
        };
        let ack = match &outcome {
            Outcome::At(ack, _) => *ack,
            Outcome::Wait { .. } => space,
        };
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
        Ok(outcome)
    }

    pub(super) fn write_through(
        &mut self,
        req: &HostRequest,
        t: u64,
        seq: u64,
        b: Breakdown,
    ) -> Result<Outcome, RunError> {
        let id = self.session.begin_request();
        let (drive, host) = self.session.parts_mut();
        let w = host.issue_write(drive, req.lba, req.sectors)?;
        let hbuf = w.buf;
        let io = IoRequest { id, lba: req.lba, sectors: req.sectors, buf: hbuf };
        let (r, when) = self.flash_epoch(t, seq, b, false, |d| d.session.drive_mut().write(&io));
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
        Ok(Self::outcome(when, t, Post::Flash))
    }

    /// Forget cached sectors of a trimmed range (they must read as zeros).
    pub(super) fn drop_cached(&mut self, lba: u64, sectors: u64) {
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

    pub(super) fn flush(&mut self, req: &HostRequest, t: u64, seq: u64, b: Breakdown) -> Result<Outcome, RunError> {
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
        let (r, when) = self.flash_epoch(t, seq, b, false, |d| d.session.submit(req));
        r?;
        if let Some(event) = self.model.borrow().event() {
            // Event core: the flush waits for every eviction not yet complete.
            let mut epochs = Vec::new();
            event.windowed_epochs(&mut epochs);
            let path = match when {
                When::At(_, p) => p,
                When::Pending(id, p) => {
                    epochs.push(id);
                    p
                }
            };
            epochs.sort_unstable();
            return Ok(if epochs.is_empty() {
                Outcome::At(t, path)
            } else {
                Outcome::Wait { epochs, ready_ns: t, path, post: Post::Flash }
            });
        }
        let When::At(end, mut p) = when else { unreachable!("the reservation model times at once") };
        if done > end {
            // Waiting for every dirty line to reach flash.
            p.add(Component::CacheWait, done - end);
        }
        Ok(Outcome::At(done.max(end), p))
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeSet, HashMap};

    /// The plain models of [`lookups_victims_and_free_lines_match_plain_models`].
    struct Model {
        map: HashMap<u64, u32>,
        /// Least recently used first.
        order: Vec<u32>,
        /// (usable from, line).
        free: BTreeSet<(u64, u32)>,
        busy: Vec<u64>,
        dirty: Vec<bool>,
    }

    impl Model {
        fn release(&mut self, c: &mut WriteCache, id: u32, until: u64) {
            c.release(id, until);
            self.map.remove(&c.line(id).lpn);
            self.order.retain(|&x| x != id);
            self.clean(id, until);
            self.free.insert((self.busy[id as usize], id));
        }
        fn clean(&mut self, id: u32, until: u64) {
            self.busy[id as usize] = self.busy[id as usize].max(until);
            self.dirty[id as usize] = false;
        }
        fn dirty_in_order(&self) -> impl Iterator<Item = u32> + '_ {
            self.order.iter().copied().filter(|&id| self.dirty[id as usize])
        }
    }

    /// The page table, the recency queue and the free lines give exactly
    /// what plain models give: a hash map, a move-to-front list and an
    /// ordered set of (usable from, line). A random mix of write hits and
    /// misses (evicting the LRU line when no line is free), write-backs of
    /// the LRU dirty line, flushes, trims and warming, over more pages than
    /// the table has slots, long enough for many queue compactions and
    /// probe-run shifts.
    #[test]
    fn lookups_victims_and_free_lines_match_plain_models() {
        let n = 16;
        let mut c = cache(n);
        let mut m = Model {
            map: HashMap::new(),
            order: Vec::new(),
            free: (0..n).map(|id| (0, id)).collect(),
            busy: vec![0; n as usize],
            dirty: vec![false; n as usize],
        };
        let mut rng: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |bound: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % bound
        };
        for step in 0..60_000u64 {
            let t = step * 10;
            let lpn = next(80);
            match next(10) {
                0..=5 => {
                    let id = if let Some(&id) = m.map.get(&lpn) {
                        assert_eq!(c.lookup(lpn), Some(id), "step {step}: hit");
                        c.touch(id);
                        m.order.retain(|&x| x != id);
                        id
                    } else {
                        assert_eq!(c.lookup(lpn), None, "step {step}: miss");
                        if m.free.is_empty() {
                            let victim = c.lru();
                            assert_eq!(victim, m.order.first().copied(), "step {step}: LRU victim");
                            m.release(&mut c, victim.unwrap(), t + next(1000));
                        }
                        let id = c.take_free(lpn);
                        assert_eq!(id, m.free.pop_first().map(|(_, id)| id), "step {step}: free line taken");
                        m.map.insert(lpn, id.unwrap());
                        id.unwrap()
                    };
                    m.order.push(id);
                    if next(3) > 0 {
                        c.set_dirty(id, true);
                        m.dirty[id as usize] = true;
                    }
                }
                6 => {
                    let want = m.dirty_in_order().next();
                    assert_eq!(c.lru_dirty(), want, "step {step}: LRU dirty line");
                    if let Some(id) = want {
                        m.release(&mut c, id, t + next(1000));
                    }
                }
                7 => {
                    let mut got = Vec::new();
                    c.dirty_in_lru_order(&mut got);
                    assert_eq!(got, m.dirty_in_order().collect::<Vec<u32>>(), "step {step}: flush order");
                    for id in got {
                        let until = t + next(1000);
                        c.clean(id, until);
                        m.clean(id, until);
                    }
                }
                8 => {
                    if let Some(&id) = m.map.get(&lpn) {
                        m.release(&mut c, id, m.busy[id as usize]);
                    }
                }
                _ => c.warm_victims(2),
            }
            assert_eq!(c.dirty_lines() as usize, m.dirty.iter().filter(|&&d| d).count(), "step {step}");
        }
        for lpn in 0..80 {
            assert_eq!(c.lookup(lpn), m.map.get(&lpn).copied(), "page {lpn} at the end");
        }
    }

    fn cache(n: u32) -> WriteCache {
        WriteCache::new((0..n).map(|i| BufId::new(i, 0)).collect(), 16, 0.5)
    }

    #[test]
    fn sector_ranges_across_bitmap_words_set_clear_and_cover_exactly() {
        // 130 sectors: three bitmap words per line, the last one partial.
        let mut c = WriteCache::new((0..2).map(|i| BufId::new(i, 0)).collect(), 130, 0.5);
        let (l, other) = (c.take_free(1).unwrap(), c.take_free(2).unwrap());
        c.set_present(l, 60, 70, true); // 60..130: across both word boundaries
        let present: Vec<u32> = (0..130).filter(|&s| c.is_present(l, s)).collect();
        assert_eq!(present, (60..130).collect::<Vec<u32>>());
        assert!(c.covers(l, 60, 70) && c.covers(l, 64, 64) && c.covers(l, 129, 1));
        assert!(!c.covers(l, 59, 2), "sector 59 is absent");
        c.set_present(l, 63, 2, false); // one bit either side of a boundary
        assert!(!c.is_present(l, 63) && !c.is_present(l, 64));
        assert!(c.is_present(l, 62) && c.is_present(l, 65));
        assert!(!c.covers(l, 60, 70));
        assert!(c.is_empty_line(other), "another line's bits are untouched");
    }

    #[test]
    fn lines_cycle_through_lru_and_the_free_lines() {
        let mut c = cache(3);
        let a = c.take_free(10).unwrap();
        let b = c.take_free(11).unwrap();
        let _ = c.take_free(12).unwrap();
        assert!(c.take_free(13).is_none(), "full");
        assert_eq!(c.lru(), Some(a));
        c.touch(a);
        assert_eq!(c.lru(), Some(b));
        c.release(b, 500);
        assert_eq!(c.lookup(11), None);
        let again = c.take_free(13).unwrap();
        assert_eq!(again, b);
        assert_eq!(c.line(again).busy_until_ns, 500, "reusable once its flush is done");
        assert_eq!(c.flushed_until_ns, 500);
    }

    #[test]
    fn a_write_takes_the_free_line_whose_flush_ends_first() {
        let mut c = cache(3);
        let (a, b, d) = (c.take_free(1).unwrap(), c.take_free(2).unwrap(), c.take_free(3).unwrap());
        // `a` is freed first, but its program waits behind a collection.
        c.release(a, 90_000);
        c.release(b, 2_000);
        c.release(d, 5_000);
        assert_eq!(c.take_free(4), Some(b));
        assert_eq!(c.take_free(5), Some(d));
        assert_eq!(c.take_free(6), Some(a));
        assert_eq!(c.line(a).busy_until_ns, 90_000);
    }

    #[test]
    fn present_sectors_form_runs_and_dirty_lines_count_against_the_watermark() {
        let mut c = cache(4);
        let a = c.take_free(1).unwrap();
        c.set_present(a, 2, 3, true);
        c.set_present(a, 9, 1, true);
        let mut runs = Vec::new();
        c.present_runs(a, 16, &mut runs);
        assert_eq!(runs, vec![(2, 3), (9, 1)]);
        assert!(c.covers(a, 2, 3) && !c.covers(a, 2, 4));
        c.set_dirty(a, true);
        assert!(!c.over_watermark(), "1 of 4 dirty, watermark 2");
        let b = c.take_free(2).unwrap();
        c.set_dirty(b, true);
        let d = c.take_free(3).unwrap();
        c.set_dirty(d, true);
        assert!(c.over_watermark());
        assert_eq!(c.lru_dirty(), Some(a));
        let mut all = Vec::new();
        c.dirty_in_lru_order(&mut all);
        assert_eq!(all, vec![a, b, d]);
    }
}
