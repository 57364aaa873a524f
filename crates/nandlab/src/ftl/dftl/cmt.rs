//! DFTL's cached mapping table (CMT): the subset of the page map kept in
//! device DRAM, with LRU or segmented-LRU replacement and per-entry dirty
//! bits.
//!
//! Entries are `(lpn, ppn)` pairs; an entry is *dirty* when its `ppn`
//! differs from what the translation page on flash says. Replacement
//! order is kept per segment in a [`RecencyQueue`] (a log of uses read
//! from its least-recently-used end, the same order as a move-to-front
//! linked list, without its pointer chasing):
//!
//! - **LRU**: one segment; a hit moves the entry to the most-recently-used end.
//! - **Segmented LRU** (Karedla, Love & Wherry 1994; the CMT of Gupta et
//!   al.'s DFTL): new entries enter a *probationary* segment; a hit there
//!   promotes the entry to a *protected* segment of bounded size, whose
//!   least-recently-used entry falls back to the probationary head when it
//!   overflows. Victims come from the probationary tail, so entries touched
//!   once (a scan) cannot flush out entries touched repeatedly.
//!
//! Entries that garbage collection creates (the new location of a page
//! whose entry was not cached) enter like any new entry, at the
//! probationary head, so they stay long enough to be written back together
//! with the other updates of their translation page. (Entered at the tail,
//! they were evicted at once, one translation-page write per moved page:
//! on `vst-jasmine` random writes with a 2 MiB cache that was 11 times the
//! write-backs and a steady WAF of 2.98 instead of 1.93.)
//!
//! Lookup by logical page is a direct index over all logical pages: the
//! simulator's stand-in for the associative lookup (a hash table or CAM)
//! firmware would use. It changes no result, only the simulator's speed;
//! device DRAM is charged per cached entry, as in the paper (8 bytes).
//!
//! Dirty bits are kept the same way, one bit per logical page, grouped by
//! translation page: a write-back finds its page's dirty entries by
//! scanning that page's bits (`entries per page / 8` bytes, 512 on a
//! 16 KiB page) and loads each entry independently of the others. (A
//! linked list of each page's dirty entries, its first version, made a
//! write-back a chain of dependent cache misses, one per entry: 13 % of
//! the CPU time on `vst-rand` with a 2 MiB cache.) The order in which a
//! write-back visits its entries changes nothing: each has its own bytes.
//!
//! The table holds `capacity + reserve` entries: `capacity` is what
//! evictions keep it to, `reserve` the room garbage collection may fill
//! between two evictions (dftl's module docs say when that bound can
//! break). Slots are allocated once; past them the table grows, and
//! counts the entries it held beyond its slots ([`Cmt::overflow`]).
//!
//! When every entry fits (`capacity >= logical pages`) nothing is ever
//! evicted, so the replacement order would never be consulted: the queues
//! are not maintained at all, which makes a whole-table DFTL as fast to
//! simulate as the page FTL.

use crate::util::recency::{RecencyQueue, Use};

const NONE: u32 = u32::MAX;
const PROBATIONARY: usize = 0;
const PROTECTED: usize = 1;
/// The segment of an entry not cached.
const NO_SEGMENT: u32 = 2;
/// How many victims ahead [`Cmt::prefetch_victims`] warms.
const PREFETCH_DEPTH: usize = 8;

/// The replacement policy of the CMT.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Replacement {
    Lru,
    #[default]
    SegmentedLru,
}

impl Replacement {
    pub fn name(self) -> &'static str {
        match self {
            Replacement::Lru => "lru",
            Replacement::SegmentedLru => "segmented-lru",
        }
    }
}

#[derive(Copy, Clone, Debug)]
struct Entry {
    lpn: u32,
    ppn: u32,
    /// The stamp of the entry's last use in its segment's recency queue.
    stamp: u32,
    /// Its segment ([`PROBATIONARY`], [`PROTECTED`]), or [`NO_SEGMENT`].
    segment: u32,
}

const EMPTY: Entry = Entry { lpn: NONE, ppn: NONE, stamp: 0, segment: NO_SEGMENT };

/// The cached mapping table. See the module docs.
pub struct Cmt {
    capacity: u32,
    /// Every entry fits: no replacement order is kept.
    resident: bool,
    slot_of: Vec<u32>,
    entries: Vec<Entry>,
    free: Vec<u32>,
    /// Replacement order of each segment, and the entries in it.
    order: [RecencyQueue; 2],
    len: [u32; 2],
    protected_max: u32,
    /// Dirty cached entries per translation page.
    dirty_in: Vec<u32>,
    /// One bit per logical page: its entry is cached and dirty. Translation
    /// page `t`'s bits are the `words_per_tpage` words from `t * words_per_tpage`.
    dirty_bits: Vec<u64>,
    words_per_tpage: u32,
    per_tpage: u32,
    live: u32,
    peak: u32,
    overflow: u32,
    /// [`Cmt::drain_dirty`]'s list of one page's dirty entries (kept to
    /// allocate once).
    drain_scratch: Vec<(u32, u32)>,
}

/// Whether `u` is the current use of its entry in `segment`'s queue.
#[inline]
fn is_live(entries: &[Entry], segment: usize) -> impl Fn(Use) -> bool + '_ {
    move |u: Use| {
        let e = &entries[u.slot as usize];
        e.segment == segment as u32 && e.stamp == u.stamp
    }
}

impl Cmt {
    /// A table over `lpns` logical pages holding `capacity` entries (plus
    /// room for `reserve` more that GC may add before the next eviction),
    /// with `per_tpage` entries per translation page.
    pub fn new(
        lpns: u32,
        capacity: u32,
        reserve: u32,
        replacement: Replacement,
        protected_fraction: f64,
        per_tpage: u32,
    ) -> Cmt {
        let capacity = capacity.clamp(1, lpns.max(1));
        let resident = capacity >= lpns;
        let slots = if resident { lpns } else { capacity + reserve } as usize;
        let protected_max = match replacement {
            Replacement::Lru => 0,
            Replacement::SegmentedLru => ((f64::from(capacity) * protected_fraction) as u32).min(capacity - 1),
        };
        let queued = |n: usize| RecencyQueue::new(if resident { 0 } else { n });
        let tpages = lpns.div_ceil(per_tpage) as usize;
        Cmt {
            capacity,
            resident,
            slot_of: crate::util::prefetch::large_vec(lpns as usize, NONE),
            entries: crate::util::prefetch::large_vec(slots, EMPTY),
            free: if resident { Vec::new() } else { (0..slots as u32).rev().collect() },
            order: [queued(slots), queued(protected_max as usize)],
            len: [0; 2],
            protected_max,
            dirty_in: vec![0; tpages],
            dirty_bits: vec![0; tpages * per_tpage.div_ceil(64) as usize],
            words_per_tpage: per_tpage.div_ceil(64),
            per_tpage,
            live: 0,
            peak: 0,
            overflow: 0,
            drain_scratch: Vec::with_capacity(per_tpage as usize),
        }
    }

    pub fn capacity(&self) -> u32 {
        self.capacity
    }
    /// Entries cached now (may exceed the capacity until the next eviction).
    pub fn len(&self) -> u32 {
        self.live
    }
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }
    /// The most entries ever cached at once.
    pub fn peak(&self) -> u32 {
        self.peak
    }

    /// Slots added past `capacity + reserve` (each once).
    pub fn overflow(&self) -> u32 {
        self.overflow
    }
    pub fn is_resident(&self) -> bool {
        self.resident
    }
    /// Whether an entry must be evicted before another is added.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.live >= self.capacity && !self.resident
    }

    /// The slot caching `lpn`, if any (does not count as a use).
    #[inline]
    pub fn get(&self, lpn: u32) -> Option<u32> {
        match self.slot_of[lpn as usize] {
            NONE => None,
            s => Some(s),
        }
    }
    #[inline]
    pub fn ppn(&self, slot: u32) -> u32 {
        self.entries[slot as usize].ppn
    }
    pub fn lpn(&self, slot: u32) -> u32 {
        self.entries[slot as usize].lpn
    }
    pub fn is_dirty(&self, slot: u32) -> bool {
        let (word, bit) = self.dirty_bit(self.entries[slot as usize].lpn);
        self.dirty_bits[word] & bit != 0
    }
    /// Where `lpn`'s dirty bit is: its word and the bit's mask.
    #[inline]
    fn dirty_bit(&self, lpn: u32) -> (usize, u64) {
        let (t, i) = (lpn / self.per_tpage, lpn % self.per_tpage);
        ((t * self.words_per_tpage + i / 64) as usize, 1 << (i % 64))
    }
    /// Dirty cached entries of translation page `tvpn`.
    pub fn dirty_in(&self, tvpn: u32) -> u32 {
        self.dirty_in[tvpn as usize]
    }
    /// Warm what a lookup and an update of `lpn` touch: its lookup slot
    /// and its dirty bit (a simulator speed hint).
    pub fn prefetch(&self, lpn: u32) {
        crate::util::prefetch::prefetch(&self.slot_of, lpn as usize);
        if lpn < self.slot_of.len() as u32 {
            crate::util::prefetch::prefetch(&self.dirty_bits, self.dirty_bit(lpn).0);
        }
    }

    /// Record a use of `slot` (a hit).
    #[inline]
    pub fn touch(&mut self, slot: u32) {
        if self.resident {
            return;
        }
        let from = self.entries[slot as usize].segment as usize;
        if from == PROBATIONARY && self.protected_max == 0 {
            self.enqueue(slot, PROBATIONARY);
            return;
        }
        self.len[from] -= 1;
        self.enqueue(slot, PROTECTED);
        self.len[PROTECTED] += 1;
        if self.len[PROTECTED] > self.protected_max {
            // The protected segment overflows into the probationary head.
            let demoted =
                self.order[PROTECTED].oldest(is_live(&self.entries, PROTECTED)).expect("protected is not empty");
            self.len[PROTECTED] -= 1;
            self.enqueue(demoted, PROBATIONARY);
            self.len[PROBATIONARY] += 1;
            let entries = &self.entries;
            self.order[PROTECTED]
                .warm(2 * PREFETCH_DEPTH, |slot| crate::util::prefetch::prefetch(entries, slot as usize));
        }
    }

    /// Make `slot` the most recently used entry of `segment` (the caller
    /// keeps the segment lengths).
    #[inline]
    fn enqueue(&mut self, slot: u32, segment: usize) {
        let stamp = self.order[segment].push(slot, is_live(&self.entries, segment));
        let e = &mut self.entries[slot as usize];
        e.stamp = stamp;
        e.segment = segment as u32;
    }

    /// Cache `lpn → ppn`, at the most-recently-used end of the probationary segment.
    pub fn insert(&mut self, lpn: u32, ppn: u32, dirty: bool) -> u32 {
        debug_assert_eq!(self.slot_of[lpn as usize], NONE, "lpn {lpn} is cached already");
        let slot = if self.resident {
            lpn
        } else {
            match self.free.pop() {
                Some(s) => s,
                None => {
                    // More than capacity + reserve entries (see dftl's
                    // module docs): grow rather than lose an entry.
                    self.overflow += 1;
                    self.entries.push(EMPTY);
                    (self.entries.len() - 1) as u32
                }
            }
        };
        self.entries[slot as usize] = Entry { lpn, ppn, ..EMPTY };
        self.slot_of[lpn as usize] = slot;
        self.live += 1;
        self.peak = self.peak.max(self.live);
        if !self.resident {
            self.enqueue(slot, PROBATIONARY);
            self.len[PROBATIONARY] += 1;
        }
        if dirty {
            self.mark_dirty(slot);
        }
        slot
    }

    /// Point a cached entry at `ppn`; it is now dirty.
    #[inline]
    pub fn update(&mut self, slot: u32, ppn: u32) {
        self.entries[slot as usize].ppn = ppn;
        self.mark_dirty(slot);
    }

    #[inline]
    fn mark_dirty(&mut self, slot: u32) {
        let lpn = self.entries[slot as usize].lpn;
        let (word, bit) = self.dirty_bit(lpn);
        if self.dirty_bits[word] & bit == 0 {
            self.dirty_bits[word] |= bit;
            self.dirty_in[(lpn / self.per_tpage) as usize] += 1;
        }
    }

    /// The entry is now what flash says.
    pub fn clean(&mut self, slot: u32) {
        let lpn = self.entries[slot as usize].lpn;
        let (word, bit) = self.dirty_bit(lpn);
        if self.dirty_bits[word] & bit != 0 {
            self.dirty_bits[word] &= !bit;
            self.dirty_in[(lpn / self.per_tpage) as usize] -= 1;
        }
    }

    /// Take every dirty entry of translation page `tvpn`: call `f(lpn, ppn)`
    /// for each (in increasing `lpn`), and mark them clean. Returns how many
    /// there were.
    pub fn drain_dirty(&mut self, tvpn: u32, mut f: impl FnMut(u32, u32)) -> u32 {
        let n = std::mem::replace(&mut self.dirty_in[tvpn as usize], 0);
        if n == 0 {
            return 0;
        }
        // Three passes, each warming what the next loads: the dirty
        // logical pages (their lookup slots), their slots (the entries),
        // then the entries' locations.
        let mut dirty = std::mem::take(&mut self.drain_scratch);
        dirty.clear();
        let words = (tvpn * self.words_per_tpage) as usize..((tvpn + 1) * self.words_per_tpage) as usize;
        let first = tvpn * self.per_tpage;
        for (w, word) in self.dirty_bits[words].iter_mut().enumerate() {
            let mut bits = std::mem::take(word);
            while bits != 0 {
                let lpn = first + w as u32 * 64 + bits.trailing_zeros();
                bits &= bits - 1;
                crate::util::prefetch::prefetch(&self.slot_of, lpn as usize);
                dirty.push((lpn, NONE));
            }
        }
        for (lpn, slot) in dirty.iter_mut() {
            *slot = self.slot_of[*lpn as usize];
            crate::util::prefetch::prefetch(&self.entries, *slot as usize);
        }
        for &(lpn, slot) in &dirty {
            f(lpn, self.entries[slot as usize].ppn);
        }
        self.drain_scratch = dirty;
        n
    }

    /// The entry to evict next: the least recently used probationary one,
    /// else the least recently used protected one.
    pub fn victim(&mut self) -> Option<u32> {
        self.victim_except(NONE)
    }

    /// [`Cmt::victim`], passing over slot `pinned` (an entry a request
    /// holds while GC runs).
    pub fn victim_except(&mut self, pinned: u32) -> Option<u32> {
        for segment in [PROBATIONARY, PROTECTED] {
            let live = is_live(&self.entries, segment);
            match self.order[segment].oldest(&live) {
                None => {}
                Some(s) if s != pinned => return Some(s),
                Some(_) => {
                    let next = self.order[segment].oldest_first().skip(1).find(|&u| live(u));
                    if let Some(u) = next {
                        return Some(u.slot);
                    }
                }
            }
        }
        None
    }

    /// The least recently used *clean* entry but `pinned`, in the order of
    /// [`Cmt::victim`] (a walk past dirty entries: for the rare eviction
    /// that may not write).
    pub fn clean_victim_except(&self, pinned: u32) -> Option<u32> {
        [PROBATIONARY, PROTECTED].into_iter().find_map(|segment| {
            let live = is_live(&self.entries, segment);
            self.order[segment]
                .oldest_first()
                .find(|&u| live(u) && u.slot != pinned && !self.is_dirty(u.slot))
                .map(|u| u.slot)
        })
    }

    /// After an eviction: warm the cache lines of the probationary entries
    /// about to be evicted (a simulator speed hint: the least recently used
    /// entries were last touched long ago, and evictions come in bursts
    /// after GC, too close together to warm only the next one). The entries
    /// of the `2 × PREFETCH_DEPTH` oldest records are fetched; the one
    /// `PREFETCH_DEPTH` from the tail, fetched by then, has its lookup slot
    /// and dirty bit fetched.
    #[inline]
    pub fn prefetch_victims(&mut self) {
        let entries = &self.entries;
        self.order[PROBATIONARY]
            .warm(2 * PREFETCH_DEPTH, |slot| crate::util::prefetch::prefetch(entries, slot as usize));
        if let Some(u) = self.order[PROBATIONARY].nth_oldest(PREFETCH_DEPTH) {
            let lpn = self.entries[u.slot as usize].lpn;
            if lpn != NONE {
                crate::util::prefetch::prefetch(&self.slot_of, lpn as usize);
                crate::util::prefetch::prefetch(&self.dirty_bits, self.dirty_bit(lpn).0);
            }
        }
    }

    /// Drop a cached entry (clean it first, or lose its update).
    pub fn remove(&mut self, slot: u32) {
        self.clean(slot);
        if !self.resident {
            self.len[self.entries[slot as usize].segment as usize] -= 1;
            self.free.push(slot);
        }
        let lpn = self.entries[slot as usize].lpn;
        self.slot_of[lpn as usize] = NONE;
        // Its queue record is stale now (EMPTY is in no segment).
        self.entries[slot as usize] = EMPTY;
        self.live -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evict_order(c: &mut Cmt) -> Vec<u32> {
        let mut out = Vec::new();
        while let Some(v) = c.victim() {
            out.push(c.lpn(v));
            c.remove(v);
        }
        out
    }

    #[test]
    fn lru_evicts_the_least_recently_used() {
        let mut c = Cmt::new(100, 3, 0, Replacement::Lru, 0.5, 10);
        for lpn in [1, 2, 3] {
            c.insert(lpn, lpn, false);
        }
        assert!(c.is_full());
        c.touch(c.get(1).unwrap());
        assert_eq!(evict_order(&mut c), vec![2, 3, 1]);
    }

    #[test]
    fn segmented_lru_protects_entries_used_twice_from_a_scan() {
        let mut c = Cmt::new(100, 4, 0, Replacement::SegmentedLru, 0.5, 10);
        c.insert(1, 1, false);
        c.touch(c.get(1).unwrap()); // 1 is protected now
        for lpn in [10, 11, 12] {
            c.insert(lpn, lpn, false); // a scan
        }
        assert_eq!(evict_order(&mut c), vec![10, 11, 12, 1], "the scan goes first");
    }

    #[test]
    fn protected_overflow_falls_back_to_probation() {
        let mut c = Cmt::new(100, 4, 0, Replacement::SegmentedLru, 0.5, 10);
        for lpn in [1, 2, 3] {
            let s = c.insert(lpn, lpn, false);
            c.touch(s);
        }
        // Protected holds at most 2: touching 3 demoted 1 to probation.
        assert_eq!(c.victim().map(|v| c.lpn(v)), Some(1));
    }

    #[test]
    fn dirty_counts_follow_translation_pages() {
        let mut c = Cmt::new(100, 4, 2, Replacement::Lru, 0.5, 10);
        c.insert(15, 7, true);
        c.insert(1, 1, false);
        assert_eq!(c.victim().map(|v| c.lpn(v)), Some(15));
        assert_eq!((c.dirty_in(0), c.dirty_in(1)), (0, 1));
        let s = c.get(1).unwrap();
        c.update(s, 9);
        assert_eq!((c.dirty_in(0), c.ppn(s)), (1, 9));
        c.clean(s);
        c.remove(c.get(15).unwrap());
        assert_eq!((c.dirty_in(0), c.dirty_in(1), c.len()), (0, 0, 1));
    }

    #[test]
    fn draining_a_translation_page_yields_and_cleans_exactly_its_dirty_entries() {
        let mut c = Cmt::new(100, 10, 0, Replacement::Lru, 0.5, 10);
        for lpn in [3, 5, 7, 12] {
            c.insert(lpn, lpn + 100, true);
        }
        c.insert(4, 104, false);
        c.clean(c.get(5).unwrap());
        let mut got = Vec::new();
        assert_eq!(c.drain_dirty(0, |l, p| got.push((l, p))), 2);
        got.sort_unstable();
        assert_eq!(got, vec![(3, 103), (7, 107)]);
        assert_eq!((c.dirty_in(0), c.dirty_in(1)), (0, 1));
        assert!(!c.is_dirty(c.get(3).unwrap()));
        c.update(c.get(3).unwrap(), 1);
        assert_eq!(c.drain_dirty(0, |_, _| {}), 1, "re-dirtied after the drain");
    }

    #[test]
    fn a_pinned_entry_is_passed_over() {
        let mut c = Cmt::new(100, 4, 0, Replacement::SegmentedLru, 0.5, 10);
        let pinned = c.insert(1, 1, false);
        c.insert(2, 2, false);
        let protected = c.insert(3, 3, false);
        c.touch(protected);
        assert_eq!(c.victim_except(pinned).map(|v| c.lpn(v)), Some(2), "the next probationary entry");
        c.remove(c.get(2).unwrap());
        assert_eq!(c.victim_except(pinned).map(|v| c.lpn(v)), Some(3), "then the protected segment");
        assert_eq!(c.victim_except(u32::MAX).map(|v| c.lpn(v)), Some(1));
    }

    #[test]
    fn a_whole_table_cache_never_evicts() {
        let mut c = Cmt::new(8, 100, 0, Replacement::SegmentedLru, 0.5, 4);
        assert!(c.is_resident() && c.capacity() == 8);
        for lpn in 0..8 {
            c.insert(lpn, lpn, true);
        }
        assert!(!c.is_full());
        assert_eq!(c.victim(), None);
        assert_eq!(c.dirty_in(1), 4);
    }

    /// The recency queues give exactly the order of move-to-front lists:
    /// a random mix of hits, misses, evictions (some passing over a pinned
    /// entry) and removals, long enough for many compactions, checked
    /// against a plain list model of LRU and segmented LRU.
    #[test]
    fn victims_match_a_move_to_front_list_model() {
        for (replacement, protected_fraction) in [(Replacement::Lru, 0.5), (Replacement::SegmentedLru, 0.5)] {
            let mut c = Cmt::new(64, 16, 4, replacement, protected_fraction, 8);
            let protected_max = if replacement == Replacement::Lru { 0 } else { 8 };
            // Most recently used first.
            let (mut probation, mut protected): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
            let model_victim = |prob: &[u32], prot: &[u32], pinned: u32| {
                let pick = |l: &[u32]| l.iter().rev().copied().find(|&x| x != pinned);
                pick(prob).or_else(|| pick(prot))
            };
            let mut rng: u64 = 0x2545_f491_4f6c_dd1d;
            let mut next = |n: u32| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                (rng % u64::from(n)) as u32
            };
            for step in 0..20_000 {
                let lpn = next(64);
                if c.is_full() {
                    let pinned = if next(4) == 0 { c.get(lpn) } else { None };
                    let want = model_victim(&probation, &protected, pinned.map_or(NONE, |_| lpn));
                    let got = c.victim_except(pinned.unwrap_or(NONE)).map(|s| c.lpn(s));
                    assert_eq!(got, want, "step {step}: victim passing over {pinned:?}");
                    c.remove(c.get(got.unwrap()).unwrap());
                    probation.retain(|&x| x != got.unwrap());
                    protected.retain(|&x| x != got.unwrap());
                }
                match c.get(lpn) {
                    Some(slot) if next(8) == 0 => {
                        c.remove(slot);
                        probation.retain(|&x| x != lpn);
                        protected.retain(|&x| x != lpn);
                    }
                    Some(slot) => {
                        c.touch(slot);
                        let in_protected = protected.contains(&lpn);
                        probation.retain(|&x| x != lpn);
                        protected.retain(|&x| x != lpn);
                        if !in_protected && protected_max == 0 {
                            probation.insert(0, lpn);
                        } else {
                            protected.insert(0, lpn);
                            if protected.len() > protected_max {
                                probation.insert(0, protected.pop().unwrap());
                            }
                        }
                    }
                    None => {
                        c.insert(lpn, lpn, next(2) == 0);
                        probation.insert(0, lpn);
                    }
                }
            }
            assert_eq!(
                evict_order(&mut c),
                probation.iter().rev().chain(protected.iter().rev()).copied().collect::<Vec<_>>()
            );
        }
    }
}
