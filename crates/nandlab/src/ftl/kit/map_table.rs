//! A logical-to-physical map whose unmapped state is zero bytes.
//!
//! The map of a large drive is hundreds of MiB (4 bytes per logical page).
//! Stored as-is, "unmapped" (`u32::MAX`) would have to be written into every
//! entry before the first request, making the whole table resident at once.
//! Entries are stored inverted instead (`!ppn`), so a fresh table is all
//! zero and becomes resident only in the chunks the workload writes (see
//! [`crate::util::sparse_table`]). The inversion is one instruction per access.

use crate::util::sparse_table::SparseTable;

/// The value [`MapTable::get`] returns for an unmapped entry.
pub const UNMAPPED: u32 = u32::MAX;

/// `len` entries of physical page numbers, initially all [`UNMAPPED`].
#[derive(Default, Clone)]
pub struct MapTable {
    inverted: SparseTable,
}

impl MapTable {
    /// A map of `len` unmapped entries.
    pub fn unmapped(len: usize) -> MapTable {
        MapTable { inverted: SparseTable::zeroed(len) }
    }

    pub fn len(&self) -> usize {
        self.inverted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inverted.is_empty()
    }

    #[inline(always)]
    pub fn get(&self, index: usize) -> u32 {
        !self.inverted.get(index)
    }

    #[inline(always)]
    pub fn set(&mut self, index: usize, ppn: u32) {
        self.inverted.set(index, !ppn);
    }

    /// Hint that entry `index` will be accessed soon.
    #[inline(always)]
    pub fn prefetch(&self, index: usize) {
        self.inverted.prefetch(index);
    }

    /// The first stage of a two-stage prefetch (see [`SparseTable::prefetch_directory`]).
    #[inline(always)]
    pub fn prefetch_directory(&self, index: usize) {
        self.inverted.prefetch_directory(index);
    }

    /// Every entry, in order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.inverted.iter().map(|e| !e)
    }

    pub fn memory_bytes(&self) -> usize {
        self.inverted.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_table_is_unmapped_and_entries_round_trip() {
        let mut m = MapTable::unmapped(1000);
        assert!(m.iter().all(|e| e == UNMAPPED));
        m.set(7, 0);
        m.set(8, 123_456);
        m.set(9, UNMAPPED);
        assert_eq!((m.get(7), m.get(8), m.get(9), m.get(10)), (0, 123_456, UNMAPPED, UNMAPPED));
        assert_eq!(m.iter().filter(|&e| e != UNMAPPED).count(), 2);
    }
}
