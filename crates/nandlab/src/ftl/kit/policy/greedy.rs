//! Greedy victim selection: the candidate with the fewest valid pages.
//!
//! Candidates sit in per-unit buckets indexed by valid-page count (intrusive
//! doubly linked lists), so a page invalidation moves its block between
//! buckets in O(1) and selection scans at most `pages_per_block + 1`
//! buckets. Desnoyers (SYSTOR 2012, Eq. 12) gives greedy's steady-state write
//! amplification under uniform random writes: WAF ≈ WAF_FIFO(k·α)/k with
//! k = 1 + 1/(2b); `tests/analytic_waf.rs` checks nandlab against it.

use super::{BlockTable, VictimPolicy};

const NONE: u32 = u32::MAX;

pub struct Greedy {
    /// Head block of bucket `unit * (ppb + 1) + valid`.
    heads: Vec<u32>,
    next: Vec<u32>,
    prev: Vec<u32>,
    /// Bucket each candidate is linked in (NONE if not a candidate).
    bucket_of: Vec<u32>,
    buckets_per_unit: u32,
}

impl Greedy {
    pub fn new(blocks: usize, table: &BlockTable) -> Self {
        let per_unit = table.pages_per_block + 1;
        Greedy {
            heads: vec![NONE; (per_unit * table.units) as usize],
            next: vec![NONE; blocks],
            prev: vec![NONE; blocks],
            bucket_of: vec![NONE; blocks],
            buckets_per_unit: per_unit,
        }
    }

    #[inline(always)]
    fn link(&mut self, block: u32, bucket: u32) {
        let head = self.heads[bucket as usize];
        self.next[block as usize] = head;
        self.prev[block as usize] = NONE;
        if head != NONE {
            self.prev[head as usize] = block;
        }
        self.heads[bucket as usize] = block;
        self.bucket_of[block as usize] = bucket;
    }

    #[inline(always)]
    fn unlink(&mut self, block: u32) {
        let bucket = self.bucket_of[block as usize];
        if bucket == NONE {
            return;
        }
        let (n, p) = (self.next[block as usize], self.prev[block as usize]);
        if p != NONE {
            self.next[p as usize] = n;
        } else {
            self.heads[bucket as usize] = n;
        }
        if n != NONE {
            self.prev[n as usize] = p;
        }
        self.bucket_of[block as usize] = NONE;
    }
}

impl VictimPolicy for Greedy {
    fn insert(&mut self, block: u32, table: &BlockTable) {
        let bucket = table.unit[block as usize] * self.buckets_per_unit + table.valid[block as usize];
        self.link(block, bucket);
    }

    #[inline(always)]
    fn invalidated(&mut self, block: u32, _old_valid: u32, table: &BlockTable) {
        if self.bucket_of[block as usize] == NONE {
            return; // an open block: not a candidate yet
        }
        self.unlink(block);
        let bucket = table.unit[block as usize] * self.buckets_per_unit + table.valid[block as usize];
        self.link(block, bucket);
    }

    fn remove(&mut self, block: u32, _table: &BlockTable) {
        self.unlink(block);
    }

    fn select(&mut self, unit: u32, _table: &BlockTable) -> Option<u32> {
        let base = unit * self.buckets_per_unit;
        for bucket in base..base + self.buckets_per_unit {
            let head = self.heads[bucket as usize];
            if head != NONE {
                self.unlink(head);
                return Some(head);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftl::kit::policy::table_for_tests;

    #[test]
    fn picks_fewest_valid_and_follows_invalidations() {
        let mut t = table_for_tests(&[5, 3, 7], &[1, 2, 3]);
        let mut g = Greedy::new(3, &t);
        for b in 0..3 {
            g.insert(b, &t);
        }
        t.valid[2] = 1;
        g.invalidated(2, 7, &t);
        assert_eq!(g.select(0, &t), Some(2));
        assert_eq!(g.select(0, &t), Some(1));
        g.remove(0, &t);
        assert_eq!(g.select(0, &t), None);
    }
}
