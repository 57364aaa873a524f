//! Which unit a host page (or an FTL metadata page) goes to: round-robin,
//! skipping units that hold more than their share of valid data.
//!
//! Round-robin striping places the *n*-th program on unit *n* mod *units*
//! whatever its logical page, and GC moves data only within a unit. When
//! the programs of a workload correlate with that order, valid data piles
//! up on some units: sequential 512 B writes on 4 KiB pages of 8 sectors
//! rewrite each logical page 8 times, and every final copy lands on the
//! same unit, which fills with fully valid blocks (nothing to collect)
//! while the others hold only stale copies. The drive then reports no free
//! space long before it is full.
//!
//! So each unit has a *cap* on the valid pages it may hold before new
//! data goes elsewhere: its share of the logical capacity (by usable
//! pages) plus half of what its spare space leaves beyond the GC reserve
//! (the foreground threshold and one open group per stream, plus one).
//! A unit over its cap is skipped by the cursor; uniform traffic keeps
//! units within a few standard deviations of their share (√share pages),
//! so on real geometries the cap is never reached and placement is plain
//! round-robin. The cap is a fixed number, not a share of the current
//! valid total, so checking it costs one comparison; while every unit is
//! over its cap (a drive with less spare than its GC reserve) the cursor
//! does not skip. Skips are counted (`balance_skips`).
//!
//! In a timed run the cursor also passes over a unit whose die is still
//! busy with the foreground garbage collection the data plane last ran on
//! it (the FTL asks the flash interface when that die's queued work ends,
//! right after collecting), as long as some unit is not: a die collecting
//! a victim is blocked for tens of milliseconds, and a host page striped
//! there would wait behind the whole collection, holding its write-cache
//! line, while other dies idle. This is dynamic allocation, as controllers
//! steer writes to available dies (Hu et al., "Performance impact and
//! interplay of SSD parallelism through advanced commands, allocation
//! strategy and data granularity", ICS 2011; Jung and Kandemir,
//! "Sprinkler", HPCA 2014). MQSim allocates statically but reaches the
//! same end by serving user writes before GC writes in its per-chip
//! transaction queues unless free space is critical (Tavakkol et al.,
//! FAST 2018). Untimed runs (`stress`, `crash`) never skip: the flash
//! interface reports no time there. Skips are counted (`busy_die_skips`).

use super::DataPlane;
use crate::flash::Flash;

/// Per unit: valid pages, and the cap on them.
#[derive(Clone, Debug, Default)]
pub(super) struct Balance {
    pub unit_valid: Vec<u32>,
    pub unit_cap: Vec<u32>,
    pub skips: u64,
    /// Timed runs: per unit, when the garbage collection last run on its die ends, ns.
    pub collecting_until_ns: Vec<u64>,
    pub busy_die_skips: u64,
}

impl DataPlane {
    /// Caps from the usable pages of each unit (after format or mount).
    pub(super) fn set_unit_caps(&mut self) {
        let units = self.layout.units() as usize;
        let pages: Vec<u64> = (0..units as u32)
            .map(|u| self.layout.groups_of_unit(u).map(|g| u64::from(self.layout.capacity(g))).sum())
            .collect();
        let total: u64 = pages.iter().sum::<u64>().max(1);
        let live = u64::from(self.lpns) + u64::from(self.meta_pages);
        let reserve =
            (u64::from(self.fg_threshold) + self.reserved_streams() + 1) * u64::from(self.group_capacity_max());
        self.balance.unit_cap = pages
            .iter()
            .map(|&p| {
                let share = live * p / total;
                let spare = p.saturating_sub(share).saturating_sub(reserve);
                (share + spare / 2).min(u64::from(u32::MAX)) as u32
            })
            .collect();
        self.balance.unit_valid.resize(units, 0);
        self.balance.collecting_until_ns = vec![0; units];
    }

    /// Foreground GC just ran on `unit`: in a timed run, pass over the
    /// units of its die until the work queued on the die ends.
    pub(super) fn collected_on(&mut self, flash: &dyn Flash, unit: usize) {
        let per_die = self.geometry.planes_per_die() / self.layout.planes_per_group;
        let die = self.layout.phys_of_unit[unit] / per_die;
        let Some(until_ns) = flash.die_busy_until_ns(die) else {
            return;
        };
        for phys in die * per_die..(die + 1) * per_die {
            self.balance.collecting_until_ns[self.layout.unit_of_phys[phys as usize] as usize] = until_ns;
        }
    }

    /// The unit the next host page goes to, units being planes.
    #[inline(always)]
    pub(super) fn next_plane_unit(&mut self, flash: &dyn Flash) -> usize {
        let mut cursor = self.host_cursor;
        let unit = self.place(&mut cursor, flash.now_ns());
        self.host_cursor = cursor;
        unit
    }

    /// The unit the next host page (of `stream`) goes to, units being dies
    /// (multi-plane groups): the cursor stays on a unit for a row: the rest of the
    /// stream's open row and, if that was partly written, one full row more
    /// (so a long request fills whole rows even after a short one left a
    /// row half full); a new request starts on the next unit.
    #[inline]
    pub(super) fn next_host_unit(&mut self, flash: &dyn Flash, stream: u8) -> usize {
        if self.host_budget > 0 {
            self.host_budget -= 1;
            return self.host_unit as usize;
        }
        let unit = self.next_plane_unit(flash);
        self.host_unit = unit as u32;
        self.host_budget = self.row_budget(unit, stream) - 1;
        unit
    }

    /// Host pages a visit to `unit` takes for `stream` (see [`DataPlane::next_host_unit`]).
    fn row_budget(&self, unit: usize, stream: u8) -> u32 {
        let f = &self.units[unit].frontier[stream as usize];
        if f.group == super::NONE || f.row >= f.rows {
            return self.layout.planes_per_group;
        }
        match f.member {
            0 => f.width,
            filled => 2 * f.width - filled,
        }
    }

    /// The unit the next metadata page goes to (a cursor of its own).
    pub(super) fn next_meta_unit(&mut self) -> usize {
        let mut cursor = self.meta_cursor;
        let unit = self.place(&mut cursor, None);
        self.meta_cursor = cursor;
        unit
    }

    /// The unit at `cursor`, or the next one within its cap (and, timed,
    /// whose die is not collecting at `now_ns`); advances the cursor past it.
    #[inline(always)]
    fn place(&mut self, cursor: &mut u32, now_ns: Option<u64>) -> usize {
        let units = self.layout.units();
        let mut unit = *cursor;
        if self.over_cap(unit) {
            unit = self.next_within_cap(unit);
        }
        if let Some(now) = now_ns {
            if self.collecting(unit, now) {
                unit = self.next_not_collecting(unit, now);
            }
        }
        *cursor = if unit + 1 == units { 0 } else { unit + 1 };
        unit as usize
    }

    #[inline]
    fn over_cap(&self, unit: u32) -> bool {
        self.balance.unit_valid[unit as usize] > self.balance.unit_cap[unit as usize]
    }

    /// The first unit after `from` within its cap (`from` if there is none).
    #[cold]
    fn next_within_cap(&mut self, from: u32) -> u32 {
        let units = self.layout.units();
        let found = (1..units).map(|k| (from + k) % units).find(|&u| !self.over_cap(u));
        if found.is_some() {
            self.balance.skips += 1;
        }
        found.unwrap_or(from)
    }

    #[inline]
    fn collecting(&self, unit: u32, now_ns: u64) -> bool {
        self.balance.collecting_until_ns[unit as usize] > now_ns
    }

    /// The first unit after `from` within its cap whose die is not
    /// collecting at `now_ns` (`from` if there is none).
    #[cold]
    fn next_not_collecting(&mut self, from: u32, now_ns: u64) -> u32 {
        let units = self.layout.units();
        let found = (1..units).map(|k| (from + k) % units).find(|&u| !self.over_cap(u) && !self.collecting(u, now_ns));
        if found.is_some() {
            self.balance.busy_die_skips += 1;
        }
        found.unwrap_or(from)
    }

    /// Units passed over because their die was collecting (timed runs).
    pub fn busy_die_skips(&self) -> u64 {
        self.balance.busy_die_skips
    }

    /// Placement skips so far (units over their cap passed over).
    pub fn balance_skips(&self) -> u64 {
        self.balance.skips
    }
}
