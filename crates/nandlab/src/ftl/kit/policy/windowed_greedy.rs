//! Windowed greedy victim selection (Hu, Haas, Eleftheriou, Iliadis &
//! Pletka, "Write amplification analysis in flash-based solid state
//! drives", SYSTOR 2009): the candidate with the fewest valid pages among
//! the `window` blocks sealed longest ago.
//!
//! `window = 1` is FIFO and a window as large as the unit is greedy; in
//! between it bounds how long a block can wait (a block reaches the head
//! of the queue eventually, which evens out wear) while still preferring
//! emptier blocks.

use super::{BlockTable, VictimPolicy};
use std::collections::VecDeque;

pub struct WindowedGreedy {
    /// Candidates of each unit in the order they were sealed.
    queues: Vec<VecDeque<u32>>,
    window: usize,
}

impl WindowedGreedy {
    pub fn new(table: &BlockTable, window: u32) -> Self {
        WindowedGreedy { queues: vec![VecDeque::new(); table.units as usize], window: window.max(1) as usize }
    }
}

impl VictimPolicy for WindowedGreedy {
    fn insert(&mut self, block: u32, table: &BlockTable) {
        self.queues[table.unit[block as usize] as usize].push_back(block);
    }

    fn remove(&mut self, block: u32, table: &BlockTable) {
        let q = &mut self.queues[table.unit[block as usize] as usize];
        if let Some(pos) = q.iter().position(|&b| b == block) {
            q.remove(pos);
        }
    }

    fn select(&mut self, unit: u32, table: &BlockTable) -> Option<u32> {
        let q = &mut self.queues[unit as usize];
        // The first of the fewest-valid blocks in the window (the oldest wins ties).
        let pos = q.iter().take(self.window).enumerate().min_by_key(|&(i, &b)| (table.valid[b as usize], i))?.0;
        q.remove(pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftl::kit::policy::table_for_tests;

    #[test]
    fn picks_the_emptiest_of_the_oldest_window() {
        // Sealed in order 0..5; block 4 is emptiest but outside a window of 3.
        let t = table_for_tests(&[6, 2, 5, 7, 0], &[1, 2, 3, 4, 5]);
        let mut w = WindowedGreedy::new(&t, 3);
        for b in 0..5 {
            w.insert(b, &t);
        }
        assert_eq!(w.select(0, &t), Some(1));
        assert_eq!(w.select(0, &t), Some(2), "the window is now 0, 2, 3");
        assert_eq!(w.select(0, &t), Some(4), "and now 0, 3, 4");
    }

    #[test]
    fn a_window_of_one_is_fifo() {
        let t = table_for_tests(&[8, 0, 4], &[1, 2, 3]);
        let mut w = WindowedGreedy::new(&t, 1);
        for b in 0..3 {
            w.insert(b, &t);
        }
        assert_eq!((w.select(0, &t), w.select(0, &t), w.select(0, &t)), (Some(0), Some(1), Some(2)));
    }
}
