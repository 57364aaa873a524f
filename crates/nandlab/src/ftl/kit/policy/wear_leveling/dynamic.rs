//! Dynamic wear leveling: open the free block with the fewest erases (the
//! block erased longest ago among equals). Cold data moved by static wear
//! leveling goes the other way, onto the most-worn free block.

use super::{by_erase_count, FreeBlockUse, WearLevelingPolicy};
use crate::ftl::kit::policy::BlockTable;
use std::collections::VecDeque;

pub struct Dynamic;

impl WearLevelingPolicy for Dynamic {
    fn choose_free(&mut self, free: &VecDeque<u32>, table: &BlockTable, use_: FreeBlockUse) -> usize {
        by_erase_count(free, table, use_ == FreeBlockUse::Data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftl::kit::policy::table_for_tests;

    #[test]
    fn data_goes_to_the_least_worn_block_and_cold_data_to_the_most_worn() {
        let mut t = table_for_tests(&[0; 4], &[0; 4]);
        t.erase_count = vec![5, 2, 9, 2];
        let free: VecDeque<u32> = [0, 3, 1, 2].into();
        let mut d = Dynamic;
        assert_eq!(d.choose_free(&free, &t, FreeBlockUse::Data), 1, "block 3: fewest erases, erased first");
        assert_eq!(d.choose_free(&free, &t, FreeBlockUse::ColdData), 3, "block 2: most erases");
    }
}
