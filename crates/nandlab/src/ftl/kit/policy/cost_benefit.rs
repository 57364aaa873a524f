//! Cost-benefit victim selection (LFS, Rosenblum & Ousterhout, SOSP 1991;
//! applied to flash by Kawaguchi, Nishioka & Motoda, USENIX 1995).
//!
//! Collecting a block with utilisation `u` (valid data pages / pages that
//! can hold data: a block's fixed pages, such as its summary row, count in
//! neither) costs
//! reading and rewriting `u` of it and gains `1 - u` free space; older data
//! is less likely to be invalidated soon, so it is worth more to move it
//! once. The victim maximises `(1 - u) · age / (2u)`, with `age` the
//! program-sequence time since the block was sealed; an empty block
//! (`u = 0`) is always taken first. Selection scans the unit's candidates,
//! except when one is empty: empty candidates wait in a min-heap per unit
//! (ties go to the lowest block number), so sequential writes, which leave
//! mostly empty blocks behind, pay no scan.

use super::{BlockTable, VictimPolicy};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const NONE: u32 = u32::MAX;

pub struct CostBenefit {
    /// Candidates of each unit, unordered.
    candidates: Vec<Vec<u32>>,
    /// Position of a block in its unit's list (NONE if not a candidate).
    position: Vec<u32>,
    /// Per unit, blocks that were empty candidates when pushed; an entry
    /// whose block has since stopped being one is dropped when it surfaces.
    empty: Vec<BinaryHeap<Reverse<u32>>>,
    /// Whether a block has an entry in `empty` (at most one: bounds the heap).
    in_empty: Vec<bool>,
}

impl CostBenefit {
    pub fn new(blocks: usize, table: &BlockTable) -> Self {
        CostBenefit {
            candidates: vec![Vec::new(); table.units as usize],
            position: vec![NONE; blocks],
            empty: vec![BinaryHeap::new(); table.units as usize],
            in_empty: vec![false; blocks],
        }
    }

    fn note_if_empty(&mut self, block: u32, table: &BlockTable) {
        if table.valid[block as usize] == table.fixed[block as usize] && !self.in_empty[block as usize] {
            self.in_empty[block as usize] = true;
            self.empty[table.unit[block as usize] as usize].push(Reverse(block));
        }
    }

    /// The lowest-numbered empty candidate of `unit`, dropping stale entries.
    fn lowest_empty(&mut self, unit: u32, table: &BlockTable) -> Option<u32> {
        let heap = &mut self.empty[unit as usize];
        while let Some(&Reverse(block)) = heap.peek() {
            if self.position[block as usize] != NONE && table.valid[block as usize] == table.fixed[block as usize] {
                return Some(block);
            }
            heap.pop();
            self.in_empty[block as usize] = false;
        }
        None
    }

    fn score(block: u32, table: &BlockTable) -> f64 {
        let fixed = table.fixed[block as usize];
        let u = f64::from(table.valid[block as usize] - fixed) / f64::from(table.pages_per_block - fixed);
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
        self.note_if_empty(block, table);
    }

    fn invalidated(&mut self, block: u32, _old_valid: u32, table: &BlockTable) {
        if self.position[block as usize] != NONE {
            self.note_if_empty(block, table);
        }
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
        // The highest score, ties to the lowest block number; an empty
        // block scores infinity. Otherwise score each candidate once.
        let best = match self.lowest_empty(unit, table) {
            Some(empty) => empty,
            None => {
                let mut best: Option<(f64, u32)> = None;
                for &b in &self.candidates[unit as usize] {
                    let score = Self::score(b, table);
                    let better = match best {
                        None => true,
                        Some((s, id)) => score.total_cmp(&s).then(id.cmp(&b)).is_gt(),
                    };
                    if better {
                        best = Some((score, b));
                    }
                }
                best?.1
            }
        };
        self.remove(best, table);
        Some(best)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftl::kit::policy::table_for_tests;

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

    #[test]
    fn a_block_holding_only_fixed_pages_counts_as_empty_and_stale_empties_are_skipped() {
        // Block 1 holds its 2 fixed pages only; block 0 is nearly empty.
        let mut t = table_for_tests(&[1, 2, 3, 2], &[0, 99, 0, 0]);
        t.fixed = vec![0, 2, 0, 0];
        let mut c = CostBenefit::new(4, &t);
        for b in 0..4 {
            c.insert(b, &t);
        }
        // Block 3 empties, then leaves the candidates (its heap entry goes stale).
        t.valid[3] = 0;
        c.invalidated(3, 1, &t);
        c.remove(3, &t);
        assert_eq!(c.select(0, &t), Some(1));
        assert_eq!(c.select(0, &t), Some(0));
        // Block 2 empties: it is taken although block 3 (stale, lower in the heap) is not a candidate.
        t.valid[2] = 0;
        c.invalidated(2, 1, &t);
        assert_eq!(c.select(0, &t), Some(2));
        assert_eq!(c.select(0, &t), None);
    }
}
