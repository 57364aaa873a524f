//! Path counters of the data plane: which branch of garbage collection and
//! wear leveling ran, for `hunt`'s coverage guidance ([`crate::ftl::Ftl::paths`]).
//!
//! The event counters of [`super::DataPlaneCounters`] say how *much* GC
//! ran; a bug hides in *which kind* of victim it took (Groce et al.'s
//! swarm argument, and the reason AFL counts edges, not lines: a rare
//! combination is what finds the bug). These count victims by the shape
//! that decides the copy: how many valid pages (none, one, a few, many),
//! whether the last page of a member block is valid (the page an
//! off-by-one in a scan drops), whether the group is narrowed by a bad
//! block and holds a lone page (the row copy's odd case), and the same
//! for wear leveling's moves. Counted before the copy, from the valid
//! bits, so a bug in the copy itself does not change what is counted.
//! Kept apart from the FTL's statistics so reports stay as they were.

/// See the module docs. Each field counts victims (GC or wear leveling).
#[derive(Clone, Debug, Default)]
pub struct DataPlanePaths {
    pub gc_victim_empty: u64,
    pub gc_victim_one_valid: u64,
    /// Valid pages at most a quarter of the group's.
    pub gc_victim_few_valid: u64,
    pub gc_victim_many_valid: u64,
    pub gc_victim_last_page_valid: u64,
    pub gc_narrow_victim: u64,
    pub gc_narrow_victim_one_valid: u64,
    pub wl_move_last_page_valid: u64,
    pub wl_move_narrow: u64,
}

impl DataPlanePaths {
    /// Record a victim with `valid` valid pages of `pages`.
    pub fn victim(&mut self, wear_leveling: bool, valid: usize, pages: usize, last_page_valid: bool, narrow: bool) {
        if wear_leveling {
            self.wl_move_last_page_valid += u64::from(last_page_valid);
            self.wl_move_narrow += u64::from(narrow);
            return;
        }
        match valid {
            0 => self.gc_victim_empty += 1,
            1 => self.gc_victim_one_valid += 1,
            v if v * 4 <= pages => self.gc_victim_few_valid += 1,
            _ => self.gc_victim_many_valid += 1,
        }
        self.gc_victim_last_page_valid += u64::from(last_page_valid);
        self.gc_narrow_victim += u64::from(narrow);
        self.gc_narrow_victim_one_valid += u64::from(narrow && valid == 1);
    }

    /// The counters by name.
    pub fn list(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("gc_victim_empty", self.gc_victim_empty),
            ("gc_victim_one_valid", self.gc_victim_one_valid),
            ("gc_victim_few_valid", self.gc_victim_few_valid),
            ("gc_victim_many_valid", self.gc_victim_many_valid),
            ("gc_victim_last_page_valid", self.gc_victim_last_page_valid),
            ("gc_narrow_victim", self.gc_narrow_victim),
            ("gc_narrow_victim_one_valid", self.gc_narrow_victim_one_valid),
            ("wl_move_last_page_valid", self.wl_move_last_page_valid),
            ("wl_move_narrow", self.wl_move_narrow),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn victims_are_counted_by_shape() {
        let mut p = DataPlanePaths::default();
        p.victim(false, 1, 64, true, true);
        p.victim(false, 10, 64, false, false);
        p.victim(false, 40, 64, false, false);
        p.victim(true, 40, 64, true, false);
        let got: std::collections::BTreeMap<_, _> = p.list().into_iter().collect();
        assert_eq!(got["gc_victim_one_valid"], 1);
        assert_eq!(got["gc_victim_few_valid"], 1);
        assert_eq!(got["gc_victim_many_valid"], 1);
        assert_eq!(got["gc_victim_last_page_valid"], 1);
        assert_eq!(got["gc_narrow_victim_one_valid"], 1);
        assert_eq!(got["wl_move_last_page_valid"], 1);
        assert_eq!(got["gc_victim_empty"], 0);
    }
}
