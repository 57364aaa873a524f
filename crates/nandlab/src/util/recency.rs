//! A recency queue: the order of an LRU list kept as a log of *uses*
//! instead of a linked list. It orders each LRU segment of dftl's cached
//! mapping table ([`crate::ftl::dftl::cmt`]), optr's write cache and the
//! lines of the perf device's write cache ([`crate::run::device::write_cache`]).
//!
//! Each time an entry enters the segment or is used, a record `(slot,
//! stamp)` is pushed at the most-recently-used end and the entry remembers
//! the stamp. A record is *live* while its entry is still in this segment
//! with that stamp; older records of the entry are stale and skipped. The
//! live records, read from the least-recently-used end, are exactly the
//! order a move-to-front linked list would hold, so replacement decisions
//! are the same; but finding the next victims reads the queue in order
//! (records a fixed distance ahead can be prefetched) instead of chasing
//! `prev` pointers, one dependent cache miss per eviction, and a use
//! writes no neighbour's links.
//!
//! Stale records leave at the least-recently-used end, or when the queue
//! reaches its limit (twice the entries the segment may hold, so a
//! compaction frees at least half of it: amortised one record check per
//! push). The queue never allocates after it is built unless the segment
//! holds more entries than planned (the CMT's overflow, itself counted).
//!
//! Stamps count this queue's pushes (wrapping): a stale record cannot be
//! mistaken for a live one, since its entry's newer stamp was pushed into
//! this queue fewer than `limit < 2^32` pushes later while the record was
//! still in it.

use std::collections::VecDeque;

/// How far ahead of [`RecencyQueue::warm`]'s entries it warms records
/// (eight cache lines of records).
const RECORDS_AHEAD: usize = 64;

/// One use of an entry: its slot and the stamp it got.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Use {
    pub slot: u32,
    pub stamp: u32,
}

/// The recency queue of one segment. See the module docs.
pub struct RecencyQueue {
    /// Most recently used at the front, least recently used at the back.
    uses: VecDeque<Use>,
    limit: usize,
    next_stamp: u32,
    /// Records ever dropped at the least-recently-used end, and the
    /// position (in the same count) up to which [`RecencyQueue::warm`] went.
    popped: u64,
    warmed: u64,
}

impl RecencyQueue {
    /// A queue for a segment of at most `entries` entries.
    pub fn new(entries: usize) -> RecencyQueue {
        let limit = 2 * entries + 64;
        RecencyQueue { uses: VecDeque::with_capacity(limit), limit, next_stamp: 0, popped: 0, warmed: 0 }
    }

    /// Record a use of `slot` at the most-recently-used end; returns its
    /// stamp. `is_live` says whether a record is still current.
    #[inline]
    pub fn push(&mut self, slot: u32, is_live: impl Fn(Use) -> bool) -> u32 {
        if self.uses.len() == self.limit {
            self.compact(is_live);
        }
        let stamp = self.next_stamp;
        self.next_stamp = stamp.wrapping_add(1);
        self.uses.push_front(Use { slot, stamp });
        stamp
    }

    /// Drop every stale record; grow if live ones fill more than half.
    #[cold]
    fn compact(&mut self, is_live: impl Fn(Use) -> bool) {
        self.uses.retain(|&u| is_live(u));
        self.warmed = self.popped;
        if self.uses.len() * 2 > self.limit {
            self.limit *= 2;
            self.uses.reserve(self.limit - self.uses.len());
        }
    }

    /// The least recently used live record's slot, dropping the stale
    /// records before it.
    #[inline]
    pub fn oldest(&mut self, is_live: impl Fn(Use) -> bool) -> Option<u32> {
        while let Some(&u) = self.uses.back() {
            if is_live(u) {
                return Some(u.slot);
            }
            self.uses.pop_back();
            self.popped += 1;
        }
        None
    }

    /// Call `warm(slot)` once for each record up to `depth` places from the
    /// least-recently-used end not passed to it yet (a cache hint ahead of
    /// the entries [`RecencyQueue::oldest`] will check).
    #[inline]
    pub fn warm(&mut self, depth: usize, warm: impl Fn(u32)) {
        let len = self.uses.len();
        let from = (self.warmed.max(self.popped) - self.popped) as usize;
        for k in from..depth.min(len) {
            warm(self.uses[len - 1 - k].slot);
            // And the records themselves, well ahead: the oldest were
            // written long ago, and are read one or two per eviction, too
            // slowly for the hardware to notice the stream.
            if let Some(ahead) = len.checked_sub(k + RECORDS_AHEAD) {
                crate::util::prefetch::prefetch(std::slice::from_ref(&self.uses[ahead]), 0);
            }
        }
        self.warmed = self.warmed.max(self.popped + depth.min(len) as u64);
    }

    /// Records from the least recently used end (stale ones included).
    pub fn oldest_first(&self) -> impl Iterator<Item = Use> + '_ {
        self.uses.iter().rev().copied()
    }

    /// The record `k` places from the least recently used end, if any.
    #[inline]
    pub fn nth_oldest(&self, k: usize) -> Option<Use> {
        self.uses.len().checked_sub(k + 1).and_then(|i| self.uses.get(i)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn stale_uses_are_skipped_and_compaction_keeps_the_order() {
        // stamps[slot]: the entry's current stamp (NONE: not in the queue).
        let stamps = RefCell::new(vec![u32::MAX; 4]);
        let mut q = RecencyQueue::new(2); // limit 68
        let live = |u: Use| stamps.borrow()[u.slot as usize] == u.stamp;
        for round in 0..40 {
            for slot in [0, 1, 2] {
                let s = q.push(slot, live);
                stamps.borrow_mut()[slot as usize] = s;
            }
            // Use 0 again: it becomes the most recent.
            let s = q.push(0, live);
            stamps.borrow_mut()[0] = s;
            assert!(q.uses.len() <= 68, "round {round}: the queue stayed within its limit");
        }
        assert_eq!(q.oldest(live), Some(1));
        let order: Vec<u32> = q.oldest_first().filter(|&u| live(u)).map(|u| u.slot).collect();
        assert_eq!(order, vec![1, 2, 0]);
        stamps.borrow_mut()[1] = u32::MAX; // removed
        assert_eq!(q.oldest(live), Some(2));
        assert_eq!(q.nth_oldest(0).map(|u| u.slot), Some(2));
    }
}
