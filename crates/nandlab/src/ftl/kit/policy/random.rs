//! Random victim selection: a candidate drawn uniformly at random.
//!
//! It ignores how much a block holds, so it is the baseline the other
//! policies are measured against. Under uniform random writes a random
//! victim is an average block, whose valid share is the drive's
//! utilisation `1/α` (α = physical / logical pages), so its write
//! amplification is `1 / (1 − 1/α) = α / (α − 1)` — the `d = 1` case of
//! Van Houdt's d-choices analysis (SIGMETRICS 2013), and well above FIFO's
//! (which takes the oldest block, the one most invalidated). Draws come
//! from the FTL's own seeded stream, so a run is reproducible.

use super::candidates::CandidateSet;
use super::{BlockTable, VictimPolicy};
use crate::seed::Rng;
use rand::{RngExt, SeedableRng};

pub struct Random {
    set: CandidateSet,
    rng: Rng,
}

impl Random {
    pub fn new(blocks: usize, table: &BlockTable, seed: u64) -> Self {
        Random { set: CandidateSet::new(blocks, table), rng: Rng::seed_from_u64(seed) }
    }
}

impl VictimPolicy for Random {
    fn insert(&mut self, block: u32, table: &BlockTable) {
        self.set.insert(block, table);
    }

    fn remove(&mut self, block: u32, table: &BlockTable) {
        self.set.remove(block, table);
    }

    fn select(&mut self, unit: u32, table: &BlockTable) -> Option<u32> {
        let list = self.set.of_unit(unit);
        if list.is_empty() {
            return None;
        }
        let victim = list[self.rng.random_range(0..list.len())];
        self.set.remove(victim, table);
        Some(victim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftl::kit::policy::table_for_tests;

    #[test]
    fn draws_every_candidate_once_and_repeats_by_seed() {
        let t = table_for_tests(&[8, 0, 4, 2, 6], &[1, 2, 3, 4, 5]);
        let order = |seed| {
            let mut r = Random::new(5, &t, seed);
            for b in 0..5 {
                r.insert(b, &t);
            }
            let picks: Vec<u32> = std::iter::from_fn(|| r.select(0, &t)).collect();
            picks
        };
        let a = order(1);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![0, 1, 2, 3, 4]);
        assert_eq!(a, order(1), "same seed, same choices");
        assert!((2..20).any(|s| order(s) != a), "another seed draws another order");
    }
}
