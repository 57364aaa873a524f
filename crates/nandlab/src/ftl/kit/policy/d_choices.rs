//! d-choices victim selection (Van Houdt, "A mean field model for a class
//! of garbage collection algorithms in flash-based solid state drives",
//! SIGMETRICS 2013): draw `d` candidates uniformly at random (with
//! replacement) and collect the one with the fewest valid pages.
//!
//! `d = 1` is random selection; as `d` grows it approaches greedy (Van
//! Houdt finds `d = 10` within a few percent of greedy's write
//! amplification under uniform traffic) at a cost of `d` looks per victim
//! instead of an ordered structure — which is why firmware with many
//! blocks uses it. When a unit has at most `d` candidates all are looked at.

use super::candidates::CandidateSet;
use super::{BlockTable, VictimPolicy};
use crate::seed::Rng;
use rand::{RngExt, SeedableRng};

pub struct DChoices {
    set: CandidateSet,
    d: u32,
    rng: Rng,
}

impl DChoices {
    pub fn new(blocks: usize, table: &BlockTable, d: u32, seed: u64) -> Self {
        DChoices { set: CandidateSet::new(blocks, table), d: d.max(1), rng: Rng::seed_from_u64(seed) }
    }
}

impl VictimPolicy for DChoices {
    fn insert(&mut self, block: u32, table: &BlockTable) {
        self.set.insert(block, table);
    }

    fn remove(&mut self, block: u32, table: &BlockTable) {
        self.set.remove(block, table);
    }

    fn select(&mut self, unit: u32, table: &BlockTable) -> Option<u32> {
        let list = self.set.of_unit(unit);
        let better = |a: u32, b: u32| (table.valid[a as usize], a) < (table.valid[b as usize], b);
        let victim = if list.len() <= self.d as usize {
            list.iter().copied().reduce(|a, b| if better(b, a) { b } else { a })?
        } else {
            let mut best = list[self.rng.random_range(0..list.len())];
            for _ in 1..self.d {
                let b = list[self.rng.random_range(0..list.len())];
                if better(b, best) {
                    best = b;
                }
            }
            best
        };
        self.set.remove(victim, table);
        Some(victim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftl::kit::policy::table_for_tests;

    #[test]
    fn with_few_candidates_it_is_greedy() {
        let t = table_for_tests(&[5, 3, 7], &[1, 2, 3]);
        let mut p = DChoices::new(3, &t, 10, 1);
        for b in 0..3 {
            p.insert(b, &t);
        }
        assert_eq!(p.select(0, &t), Some(1));
        assert_eq!(p.select(0, &t), Some(0));
        assert_eq!(p.select(0, &t), Some(2));
        assert_eq!(p.select(0, &t), None);
    }

    #[test]
    fn the_best_of_d_samples_beats_a_random_pick_on_average() {
        // 64 candidates with valid counts 0..63: a random pick averages
        // 31.5; the best of 4 samples averages about 12.
        let valid: Vec<u32> = (0..64).map(|b| (b * 37) % 64).collect();
        let t = table_for_tests(&valid, &vec![0; 64]);
        let mut total = 0;
        for seed in 0..200 {
            let mut p = DChoices::new(64, &t, 4, seed);
            for b in 0..64 {
                p.insert(b, &t);
            }
            total += t.valid[p.select(0, &t).unwrap() as usize];
        }
        let mean = f64::from(total) / 200.0;
        assert!(mean > 8.0 && mean < 17.0, "mean valid of the victim {mean}");
    }
}
