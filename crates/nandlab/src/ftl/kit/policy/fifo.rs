//! FIFO victim selection: the block sealed longest ago, whatever its valid
//! count. Desnoyers (SYSTOR 2012, Eq. 4) gives its steady-state write
//! amplification under uniform random writes:
//! WAF = α / (α + W0(−α·e^(−α))), α = physical / logical pages.

use super::{BlockTable, VictimPolicy};
use std::collections::VecDeque;

pub struct Fifo {
    queues: Vec<VecDeque<u32>>,
}

impl Fifo {
    pub fn new(table: &BlockTable) -> Self {
        Fifo { queues: vec![VecDeque::new(); table.units as usize] }
    }
}

impl VictimPolicy for Fifo {
    fn insert(&mut self, block: u32, table: &BlockTable) {
        self.queues[table.unit[block as usize] as usize].push_back(block);
    }

    fn remove(&mut self, block: u32, table: &BlockTable) {
        let q = &mut self.queues[table.unit[block as usize] as usize];
        if let Some(pos) = q.iter().position(|&b| b == block) {
            q.remove(pos);
        }
    }

    fn select(&mut self, unit: u32, _table: &BlockTable) -> Option<u32> {
        self.queues[unit as usize].pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftl::kit::policy::table_for_tests;

    #[test]
    fn picks_in_seal_order_regardless_of_valid_count() {
        let t = table_for_tests(&[8, 0, 4], &[1, 2, 3]);
        let mut f = Fifo::new(&t);
        for b in 0..3 {
            f.insert(b, &t);
        }
        assert_eq!(f.select(0, &t), Some(0));
        f.remove(1, &t);
        assert_eq!(f.select(0, &t), Some(2));
        assert_eq!(f.select(0, &t), None);
    }
}
