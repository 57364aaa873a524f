//! Which cache line holds a logical page: the write cache's page table
//! (see [`PageTable`]).

use super::NIL;
use crate::util::prefetch::prefetch;

/// One slot of the [`PageTable`]: a logical page and its line.
#[derive(Clone, Copy)]
struct Slot {
    lpn: u64,
    line: u32,
}

/// The tag of an empty slot (a used slot's tag has its top bit set).
const EMPTY_TAG: u8 = 0;

/// Which line holds a logical page: open addressing with linear probing in
/// a power-of-two table at most half full, sized once for every line, so it
/// never grows or rehashes. Beside each slot a one-byte tag (seven more
/// bits of the page's hash) lets a lookup of an uncached page — most
/// writes of a random workload — read only the tags, 1/16 of the table,
/// which stay in the CPU cache where the slots do not (the idea of
/// SwissTable's control bytes). A removal shifts the rest of its probe run
/// back (no tombstones to pile up). A page's place follows from its number,
/// so the next victims' slots can be warmed ([`PageTable::prefetch`])
/// before their removal reads them.
pub(super) struct PageTable {
    tags: Vec<u8>,
    slots: Vec<Slot>,
    /// log2 of the slot count.
    bits: u32,
}

impl PageTable {
    pub(super) fn new(lines: usize) -> PageTable {
        let n = (2 * lines).next_power_of_two().max(2);
        PageTable { tags: vec![EMPTY_TAG; n], slots: vec![Slot { lpn: 0, line: NIL }; n], bits: n.trailing_zeros() }
    }

    /// A multiplicative (Fibonacci) hash: its top bits place the page (and
    /// spread consecutive pages), the next seven are its tag.
    #[inline]
    fn hash(lpn: u64) -> u64 {
        lpn.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    /// Where `lpn`'s probe run starts.
    #[inline]
    fn home(&self, lpn: u64) -> usize {
        (Self::hash(lpn) >> (64 - self.bits)) as usize
    }

    #[inline]
    fn tag(&self, lpn: u64) -> u8 {
        0x80 | (Self::hash(lpn) >> (57 - self.bits)) as u8 & 0x7f
    }

    #[inline]
    fn next(&self, i: usize) -> usize {
        (i + 1) & (self.slots.len() - 1)
    }

    /// The slot holding `lpn`, or the empty slot ending its probe run.
    #[inline]
    fn find(&self, lpn: u64) -> usize {
        let tag = self.tag(lpn);
        let mut i = self.home(lpn);
        loop {
            let t = self.tags[i];
            if t == EMPTY_TAG || (t == tag && self.slots[i].lpn == lpn) {
                return i;
            }
            i = self.next(i);
        }
    }

    pub(super) fn get(&self, lpn: u64) -> Option<u32> {
        let i = self.find(lpn);
        (self.tags[i] != EMPTY_TAG).then(|| self.slots[i].line)
    }

    /// Map `lpn` (not mapped yet) to `line`.
    pub(super) fn insert(&mut self, lpn: u64, line: u32) {
        let i = self.find(lpn);
        debug_assert_eq!(self.tags[i], EMPTY_TAG, "page {lpn} is mapped already");
        self.tags[i] = self.tag(lpn);
        self.slots[i] = Slot { lpn, line };
    }

    /// Unmap `lpn` (mapped): the later slots of its probe run that may move
    /// back (their home is not between the hole and them) fill the hole.
    pub(super) fn remove(&mut self, lpn: u64) {
        let mut hole = self.find(lpn);
        debug_assert_ne!(self.tags[hole], EMPTY_TAG, "page {lpn} is not mapped");
        let mask = self.slots.len() - 1;
        let mut j = hole;
        loop {
            j = self.next(j);
            if self.tags[j] == EMPTY_TAG {
                break;
            }
            // Cyclic distances: slot `j` may fill the hole if its home is
            // not after the hole on the way to `j`.
            let from_home = j.wrapping_sub(self.home(self.slots[j].lpn)) & mask;
            if from_home >= j.wrapping_sub(hole) & mask {
                self.tags[hole] = self.tags[j];
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.tags[hole] = EMPTY_TAG;
    }

    /// Warm the tags and the slot where `lpn`'s probe run starts.
    #[inline]
    pub(super) fn prefetch(&self, lpn: u64) {
        let i = self.home(lpn);
        prefetch(&self.tags, i);
        prefetch(&self.slots, i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_table_shifts_probe_runs_back_across_its_end() {
        let mut t = PageTable::new(4); // 8 slots
                                       // Pages whose runs start in the last slot wrap around to slot 0.
        let last: Vec<u64> = (0..10_000).filter(|&p| t.home(p) == 7).take(3).collect();
        let first = (0..10_000).find(|&p| t.home(p) == 0).unwrap();
        for &p in &last {
            t.insert(p, p as u32);
        }
        t.insert(first, 99); // its home is taken: it lands at slot 2
        assert_eq!(t.find(first), 2);
        t.remove(last[0]); // slot 7 empties: the run moves back over the end
        assert_eq!((t.find(last[1]), t.find(last[2]), t.find(first)), (7, 0, 1));
        assert_eq!(t.get(last[0]), None);
        assert_eq!(t.get(first), Some(99));
    }
}
