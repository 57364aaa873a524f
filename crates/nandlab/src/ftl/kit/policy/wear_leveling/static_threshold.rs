//! Static wear leveling by erase-count threshold: dynamic allocation, plus
//! moving cold data when a unit's wear spread exceeds `threshold`.
//!
//! After every erase on a unit, if the unit's most-worn block has been
//! erased more than `threshold` times more than its least-worn block, the
//! least-worn block that holds data is chosen for relocation: the FTL
//! copies its valid pages onto the most-worn free block and erases it, so
//! the cold data now pins a block that has had its share of erases and the
//! little-worn block joins the blocks that cycle.
//!
//! Finding the least-worn block scans the unit, so the scan runs only when
//! the cheap test (`max - lowest known minimum > threshold`) passes, and
//! after a scan that finds nothing to move (the least-worn blocks are free
//! or open, so dynamic allocation will use them) the unit is not scanned
//! again for a while.

use super::{by_erase_count, FreeBlockUse, WearLevelingPolicy};
use crate::ftl::kit::policy::BlockTable;
use std::collections::VecDeque;
use std::ops::Range;

pub struct StaticThreshold {
    threshold: u32,
    /// Per unit: the most erases of any block.
    max: Vec<u32>,
    /// Per unit: a lower bound of the fewest erases of any block.
    min_bound: Vec<u32>,
    /// Per unit: erases to let pass before scanning again.
    quiet: Vec<u32>,
}

impl StaticThreshold {
    pub fn new(threshold: u32, units: u32) -> Self {
        let n = units as usize;
        StaticThreshold { threshold, max: vec![0; n], min_bound: vec![0; n], quiet: vec![0; n] }
    }
}

impl WearLevelingPolicy for StaticThreshold {
    fn choose_free(&mut self, free: &VecDeque<u32>, table: &BlockTable, use_: FreeBlockUse) -> usize {
        by_erase_count(free, table, use_ == FreeBlockUse::Data)
    }

    fn erased(&mut self, block: u32, table: &BlockTable) {
        let unit = table.unit[block as usize] as usize;
        self.max[unit] = self.max[unit].max(table.erase_count[block as usize]);
    }

    fn relocation(
        &mut self,
        unit: u32,
        blocks: Range<u32>,
        table: &BlockTable,
        movable: &dyn Fn(u32) -> bool,
    ) -> Option<u32> {
        let u = unit as usize;
        if self.max[u].saturating_sub(self.min_bound[u]) <= self.threshold {
            return None;
        }
        if self.quiet[u] > 0 {
            self.quiet[u] -= 1;
            return None;
        }
        let span = blocks.len() as u32;
        let (mut min_all, mut coldest) = (u32::MAX, None::<(u32, u32)>);
        for b in blocks {
            let ec = table.erase_count[b as usize];
            if table.unit[b as usize] != unit {
                continue;
            }
            min_all = min_all.min(ec);
            if movable(b) && coldest.is_none_or(|(_, e)| ec < e) {
                coldest = Some((b, ec));
            }
        }
        self.min_bound[u] = min_all.min(self.max[u]);
        match coldest {
            Some((b, ec)) if self.max[u] - ec > self.threshold => Some(b),
            _ => {
                self.quiet[u] = span / 16 + 1;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftl::kit::policy::table_for_tests;

    #[test]
    fn moves_the_least_worn_data_block_once_the_spread_exceeds_the_threshold() {
        let mut t = table_for_tests(&[0; 4], &[0; 4]);
        t.erase_count = vec![1, 3, 3, 1];
        let mut s = StaticThreshold::new(3, 1);
        let movable = |b: u32| b != 3; // block 3 is free
        s.erased(2, &t);
        assert_eq!(s.relocation(0, 0..4, &t, &movable), None, "a spread of at most 3 is left alone");
        t.erase_count[2] = 5;
        s.erased(2, &t);
        assert_eq!(s.relocation(0, 0..4, &t, &movable), Some(0), "block 0: least worn with data");
        t.erase_count[0] = 5;
        s.erased(0, &t);
        // Only the free block 3 is still far behind: nothing to move, and
        // the unit is left alone for a while.
        assert_eq!(s.relocation(0, 0..4, &t, &movable), None);
        assert_eq!(s.quiet[0], 1);
    }
}
