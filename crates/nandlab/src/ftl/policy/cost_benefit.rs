//! Cost-benefit victim selection (LFS, Rosenblum & Ousterhout, SOSP 1991;
//! applied to flash by Kawaguchi, Nishioka & Motoda, USENIX 1995).
//!
//! Collecting a block with utilisation `u` (valid / pages per block) costs
//! reading and rewriting `u` of it and gains `1 - u` free space; older data
//! is less likely to be invalidated soon, so it is worth more to move it
//! once. The victim maximises `(1 - u) · age / (2u)`, with `age` the
//! program-sequence time since the block was sealed; an empty block
//! (`u = 0`) is always taken first. Selection scans the unit's candidates.

use super::{BlockTable, VictimPolicy};

const NONE: u32 = u32::MAX;

pub struct CostBenefit {
    /// Candidates of each unit, unordered.
    candidates: Vec<Vec<u32>>,
    /// Position of a block in its unit's list (NONE if not a candidate).
    position: Vec<u32>,
}

impl CostBenefit {
    pub fn new(blocks: usize, table: &BlockTable) -> Self {
        CostBenefit { candidates: vec![Vec::new(); table.units as usize], position: vec![NONE; blocks] }
    }

    fn score(block: u32, table: &BlockTable) -> f64 {
        let u = f64::from(table.valid[block as usize]) / f64::from(table.pages_per_block);
        if u == 0.0 {
            return f64::INFINITY;
        }
        let age = table.now.saturating_sub(table.sealed_at[block as usize]) as f64 + 1.0;
        (1.0 - u) * age / (2.0 * u)
    }
}

impl VictimPolicy for CostBenefit {
    fn insert(&mut self, block: u32, table: &BlockTable) {
        let list = &mut self.candidates[table.unit[block as usize] as usize];
        self.position[block as usize] = list.len() as u32;
        list.push(block);
    }

    fn remove(&mut self, block: u32, table: &BlockTable) {
        let pos = self.position[block as usize];
        if pos == NONE {
            return;
        }
        let list = &mut self.candidates[table.unit[block as usize] as usize];
        list.swap_remove(pos as usize);
        if let Some(&moved) = list.get(pos as usize) {
            self.position[moved as usize] = pos;
        }
        self.position[block as usize] = NONE;
    }

    fn select(&mut self, unit: u32, table: &BlockTable) -> Option<u32> {
        let best = self.candidates[unit as usize]
            .iter()
            .copied()
            .max_by(|&a, &b| Self::score(a, table).total_cmp(&Self::score(b, table)).then(b.cmp(&a)))?;
        self.remove(best, table);
        Some(best)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftl::policy::table_for_tests;

    #[test]
    fn prefers_old_cold_blocks_over_slightly_emptier_young_ones() {
        // Block 0: 4/8 valid, sealed long ago; block 1: 3/8 valid, just sealed.
        let t = table_for_tests(&[4, 3, 8], &[0, 99, 0]);
        let mut c = CostBenefit::new(3, &t);
        for b in 0..3 {
            c.insert(b, &t);
        }
        assert_eq!(c.select(0, &t), Some(0));
        assert_eq!(c.select(0, &t), Some(1));
        assert_eq!(c.select(0, &t), Some(2));
        assert_eq!(c.select(0, &t), None);
    }

    #[test]
    fn empty_block_wins() {
        let t = table_for_tests(&[1, 0], &[0, 99]);
        let mut c = CostBenefit::new(2, &t);
        c.insert(0, &t);
        c.insert(1, &t);
        assert_eq!(c.select(0, &t), Some(1));
    }
}
