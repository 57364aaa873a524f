//! Wear leveling: which free block to open next, and when to move cold data
//! off blocks that are barely worn.
//!
//! Flash blocks endure a limited number of erases, so a drive lives as long
//! as its most-erased block. Garbage collection erases the blocks that
//! hold short-lived (hot) data over and over, while blocks full of
//! long-lived (cold) data are never collected and never erased.
//!
//! - **dynamic** wear leveling steers the *new* writes: a unit opens the
//!   free block with the fewest erases (instead of the one erased longest
//!   ago). It evens wear among the blocks that cycle, but cannot touch
//!   blocks pinned by cold data.
//! - **static** wear leveling also moves the cold data: when the most-worn
//!   block of a unit has been erased more than `threshold` times more than
//!   the least-worn block holding data, that block's valid pages are
//!   copied (cause `wear_leveling`) onto the most-worn free block and the
//!   little-worn block is erased and returned to circulation — the
//!   erase-count-threshold scheme of e.g. Chang, Hsieh & Kuo's "dual pool"
//!   family (DAC 2007) in its simplest form. At most one block moves per
//!   erase, and only when the unit has free blocks to spare.
//!
//! Erase counts are the FTL's own ([`BlockTable::erase_count`]), kept in
//! its shutdown checkpoint; the report's wear section shows the resulting
//! distribution (min, max, mean, standard deviation, histogram).

pub mod dynamic;
pub mod static_threshold;

use super::BlockTable;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fmt;
use std::ops::Range;

/// What a free block is opened for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FreeBlockUse {
    /// New host data and GC copies: the data that cycles.
    Data,
    /// Cold data moved by static wear leveling: best on a worn block.
    ColdData,
}

/// A wear-leveling policy.
pub trait WearLevelingPolicy {
    /// Which of a unit's free blocks (oldest erased first) to open: an
    /// index into `free`. Default: the one erased longest ago.
    fn choose_free(&mut self, _free: &VecDeque<u32>, _table: &BlockTable, _use: FreeBlockUse) -> usize {
        0
    }
    /// `block` was erased; `table.erase_count` already counts it.
    fn erased(&mut self, _block: u32, _table: &BlockTable) {}
    /// After an erase on `unit` (its blocks are `blocks`): a block holding
    /// data (`movable`) whose pages should move to a more worn block, if
    /// the wear spread calls for it. Default: never.
    fn relocation(
        &mut self,
        _unit: u32,
        _blocks: Range<u32>,
        _table: &BlockTable,
        _movable: &dyn Fn(u32) -> bool,
    ) -> Option<u32> {
        None
    }
}

/// The wear-leveling policies a configuration can name: `none`, `dynamic`,
/// `static[:threshold=N]`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(try_from = "String", into = "String")]
pub enum WearLevelingKind {
    /// Open the free block erased longest ago (FIFO reuse).
    #[default]
    None,
    Dynamic,
    /// Dynamic, plus moving cold data when the erase-count spread of a unit
    /// exceeds `threshold`.
    Static {
        threshold: u32,
    },
}

impl WearLevelingKind {
    pub const DEFAULT_STATIC_THRESHOLD: u32 = 16;
    pub const CHOICES: &'static str = "none, dynamic, static[:threshold=N]";

    pub fn name(self) -> &'static str {
        match self {
            WearLevelingKind::None => "none",
            WearLevelingKind::Dynamic => "dynamic",
            WearLevelingKind::Static { .. } => "static",
        }
    }
}

impl fmt::Display for WearLevelingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WearLevelingKind::Static { threshold } => write!(f, "static:threshold={threshold}"),
            other => f.write_str(other.name()),
        }
    }
}

impl std::str::FromStr for WearLevelingKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (s.trim(), None),
        };
        match (name, arg) {
            ("none" | "off", None) => Ok(WearLevelingKind::None),
            ("dynamic", None) => Ok(WearLevelingKind::Dynamic),
            ("static", None) => Ok(WearLevelingKind::Static { threshold: Self::DEFAULT_STATIC_THRESHOLD }),
            ("static", Some(a)) => {
                let v = a.strip_prefix("threshold").map_or(Some(a), |r| r.trim_start().strip_prefix('='));
                match v.map(str::trim).and_then(|v| v.parse::<u32>().ok()) {
                    Some(t) if t >= 1 => Ok(WearLevelingKind::Static { threshold: t }),
                    _ => Err(format!("`{s}`: expected static:threshold=N with N a whole number of at least 1")),
                }
            }
            _ => Err(format!("unknown wear-leveling policy `{s}` (choose from {})", Self::CHOICES)),
        }
    }
}

impl TryFrom<String> for WearLevelingKind {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<WearLevelingKind> for String {
    fn from(k: WearLevelingKind) -> String {
        k.to_string()
    }
}

/// No wear leveling beyond FIFO reuse of free blocks.
pub struct NoWearLeveling;

impl WearLevelingPolicy for NoWearLeveling {}

/// Runtime choice of wear-leveling policy.
pub enum WearLeveler {
    None(NoWearLeveling),
    Dynamic(dynamic::Dynamic),
    Static(static_threshold::StaticThreshold),
}

impl WearLeveler {
    pub fn new(kind: WearLevelingKind, units: u32) -> Self {
        match kind {
            WearLevelingKind::None => WearLeveler::None(NoWearLeveling),
            WearLevelingKind::Dynamic => WearLeveler::Dynamic(dynamic::Dynamic),
            WearLevelingKind::Static { threshold } => {
                WearLeveler::Static(static_threshold::StaticThreshold::new(threshold, units))
            }
        }
    }

    fn policy(&mut self) -> &mut dyn WearLevelingPolicy {
        match self {
            WearLeveler::None(p) => p,
            WearLeveler::Dynamic(p) => p,
            WearLeveler::Static(p) => p,
        }
    }

    /// Whether the policy may move data (it needs its own write stream).
    pub fn relocates(&self) -> bool {
        matches!(self, WearLeveler::Static(_))
    }

    pub fn choose_free(&mut self, free: &VecDeque<u32>, table: &BlockTable, use_: FreeBlockUse) -> usize {
        match self {
            WearLeveler::None(_) => 0,
            other => other.policy().choose_free(free, table, use_),
        }
    }

    pub fn erased(&mut self, block: u32, table: &BlockTable) {
        self.policy().erased(block, table)
    }

    pub fn relocation(
        &mut self,
        unit: u32,
        blocks: Range<u32>,
        table: &BlockTable,
        movable: &dyn Fn(u32) -> bool,
    ) -> Option<u32> {
        self.policy().relocation(unit, blocks, table, movable)
    }
}

/// The index in `free` of the block with the fewest (`fewest`) or most
/// erases; ties go to the block erased longest ago.
pub(crate) fn by_erase_count(free: &VecDeque<u32>, table: &BlockTable, fewest: bool) -> usize {
    let ec = |i: usize| table.erase_count[free[i] as usize];
    let mut best = 0;
    for i in 1..free.len() {
        if (fewest && ec(i) < ec(best)) || (!fewest && ec(i) > ec(best)) {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_print_back() {
        assert_eq!("none".parse(), Ok(WearLevelingKind::None));
        assert_eq!("dynamic".parse(), Ok(WearLevelingKind::Dynamic));
        assert_eq!("static".parse(), Ok(WearLevelingKind::Static { threshold: 16 }));
        assert_eq!("static:threshold=5".parse(), Ok(WearLevelingKind::Static { threshold: 5 }));
        assert_eq!("static:7".parse(), Ok(WearLevelingKind::Static { threshold: 7 }));
        assert!("static:threshold=0".parse::<WearLevelingKind>().unwrap_err().contains("threshold=N"));
        assert!("dynamic:3".parse::<WearLevelingKind>().is_err());
        assert!("sometimes".parse::<WearLevelingKind>().unwrap_err().contains("static"));
        let k = WearLevelingKind::Static { threshold: 9 };
        assert_eq!(k.to_string().parse(), Ok(k));
    }
}
