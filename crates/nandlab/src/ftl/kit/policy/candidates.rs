//! An unordered set of candidate blocks per unit with O(1) insert, remove
//! and access by position: what the sampling policies (random, d-choices)
//! draw from.

use super::BlockTable;

const NONE: u32 = u32::MAX;

pub(crate) struct CandidateSet {
    /// Candidates of each unit, unordered.
    lists: Vec<Vec<u32>>,
    /// Position of a block in its unit's list (NONE if not a candidate).
    position: Vec<u32>,
}

impl CandidateSet {
    pub(crate) fn new(blocks: usize, table: &BlockTable) -> Self {
        CandidateSet { lists: vec![Vec::new(); table.units as usize], position: vec![NONE; blocks] }
    }

    pub(crate) fn insert(&mut self, block: u32, table: &BlockTable) {
        if self.position[block as usize] != NONE {
            return;
        }
        let list = &mut self.lists[table.unit[block as usize] as usize];
        self.position[block as usize] = list.len() as u32;
        list.push(block);
    }

    pub(crate) fn remove(&mut self, block: u32, table: &BlockTable) {
        let pos = self.position[block as usize];
        if pos == NONE {
            return;
        }
        let list = &mut self.lists[table.unit[block as usize] as usize];
        list.swap_remove(pos as usize);
        if let Some(&moved) = list.get(pos as usize) {
            self.position[moved as usize] = pos;
        }
        self.position[block as usize] = NONE;
    }

    /// The candidates of `unit`, in no particular order.
    pub(crate) fn of_unit(&self, unit: u32) -> &[u32] {
        &self.lists[unit as usize]
    }
}
