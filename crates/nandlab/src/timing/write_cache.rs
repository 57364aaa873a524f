//! The device DRAM write cache: lines of one logical page, between the host
//! interface and the FTL (the role of MQSim's data cache manager), usable
//! with any FTL.
//!
//! This module keeps the cache's bookkeeping: which logical page each line
//! holds, which of its sectors are present, whether they are dirty, the
//! LRU order, and *when* each line's DRAM is usable (a line being flushed
//! is busy until its flash programs complete). The data itself lives in
//! flash-controller buffers, so cached sectors carry their payload stamps
//! and the oracle checks reads served from DRAM exactly as reads served
//! from flash. The perf device ([`crate::run::perf`]) moves data in and out
//! and times it.
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
//!   writes that lines flushed to other dies could take (with
//!   first-freed order, a GC-bound run left its dies 80 % idle).
//!   A flush writes every dirty line back, keeps it cached and clean (as a
//!   real write-back cache does: a later read still hits it), and completes
//!   when all flash work of every write-back so far has completed.
//! - **write-through**: a write goes to the FTL at once and completes when
//!   flash does; the line keeps a clean copy for reads.
//! - Reads are served from DRAM when every requested sector is present in
//!   cache lines; otherwise from the FTL, with cached sectors laid over
//!   (they are newer). Reads do not allocate lines.

use crate::flash::BufId;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

const NIL: u32 = u32::MAX;

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

/// A multiplicative hasher for page numbers (the std SipHash is needlessly slow here).
#[derive(Default, Clone, Copy)]
pub struct PageHasher(u64);

impl Hasher for PageHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ (v >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type PageMap = HashMap<u64, u32, BuildHasherDefault<PageHasher>>;

#[derive(Clone, Debug)]
pub struct Line {
    pub lpn: u64,
    pub buf: BufId,
    pub dirty: bool,
    /// When the line's current data is in DRAM.
    pub data_ready_ns: u64,
    /// When the line's previous contents finished flushing (reusable).
    pub busy_until_ns: u64,
    prev: u32,
    next: u32,
    mapped: bool,
}

/// Cache statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheCounters {
    pub write_hits: u64,
    pub write_misses: u64,
    pub read_hits: u64,
    pub read_misses: u64,
    pub evictions: u64,
    pub flushes: u64,
}

/// The cache's bookkeeping. See the module docs.
pub struct WriteCache {
    lines: Vec<Line>,
    words: usize,
    /// Present-sector bitmap, `words` u64 per line.
    present: Vec<u64>,
    map: PageMap,
    head: u32,
    tail: u32,
    /// Free lines by when they become usable (then by id): a write takes
    /// the line whose flush ends first, not the one freed first.
    free: BinaryHeap<Reverse<(u64, u32)>>,
    dirty_lines: u32,
    high_watermark: u32,
    pub counters: CacheCounters,
    /// When every flush issued so far completes.
    pub flushed_until_ns: u64,
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
                    prev: NIL,
                    next: NIL,
                    mapped: false,
                })
                .collect(),
            words,
            present: vec![0; n * words],
            map: PageMap::with_capacity_and_hasher(n, Default::default()),
            head: NIL,
            tail: NIL,
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
        self.map.get(&lpn).copied()
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
        self.unlink(id);
        self.push_mru(id);
    }

    fn unlink(&mut self, id: u32) {
        let (p, n) = {
            let l = &self.lines[id as usize];
            (l.prev, l.next)
        };
        if p == NIL {
            if self.head == id {
                self.head = n;
            }
        } else {
            self.lines[p as usize].next = n;
        }
        if n == NIL {
            if self.tail == id {
                self.tail = p;
            }
        } else {
            self.lines[n as usize].prev = p;
        }
        let l = &mut self.lines[id as usize];
        l.prev = NIL;
        l.next = NIL;
    }

    fn push_mru(&mut self, id: u32) {
        let t = self.tail;
        {
            let l = &mut self.lines[id as usize];
            l.prev = t;
            l.next = NIL;
        }
        if t == NIL {
            self.head = id;
        } else {
            self.lines[t as usize].next = id;
        }
        self.tail = id;
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
        self.push_mru(id);
        Some(id)
    }

    /// The least-recently-used line (the next to evict).
    pub fn lru(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }

    /// The least-recently-used dirty line, if the dirty lines exceed the watermark.
    pub fn over_watermark(&self) -> bool {
        self.dirty_lines > self.high_watermark
    }

    /// The least-recently-used dirty line.
    pub fn lru_dirty(&self) -> Option<u32> {
        let mut i = self.head;
        while i != NIL {
            if self.lines[i as usize].dirty {
                return Some(i);
            }
            i = self.lines[i as usize].next;
        }
        None
    }

    /// Unmap a line whose contents were written out (or were clean) and
    /// make it free once `busy_until_ns`.
    pub fn release(&mut self, id: u32, busy_until_ns: u64) {
        self.set_dirty(id, false);
        self.unlink(id);
        let l = &mut self.lines[id as usize];
        if l.mapped {
            self.map.remove(&l.lpn);
            l.mapped = false;
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
        let mut i = self.head;
        while i != NIL {
            if self.lines[i as usize].dirty {
                out.push(i);
            }
            i = self.lines[i as usize].next;
        }
    }

    /// Lines holding any of logical pages `first ..= last`, appended to `out`.
    pub fn lines_in(&self, first: u64, last: u64, out: &mut Vec<u32>) {
        for lpn in first..=last {
            if let Some(&id) = self.map.get(&lpn) {
                out.push(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
