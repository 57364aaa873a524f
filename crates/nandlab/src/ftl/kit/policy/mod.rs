//! FTL policies: one per file, each a small trait with default hooks and an
//! enum that dispatches to the policy chosen in the configuration.
//!
//! # Victim selection (garbage collection)
//!
//! A *candidate* is a sealed block (every page written) that may be
//! collected. The FTL tells the policy when a block becomes a candidate,
//! when one of its pages is invalidated, and asks it for a victim on a
//! parallel unit; the chosen victim stops being a candidate.
//!
//! - [`greedy`]: fewest valid pages (Rosenblum & Ousterhout's greedy
//!   cleaner; analysed for flash by Desnoyers, SYSTOR 2012).
//! - [`cost_benefit`]: highest `(1 - u) · age / 2u` (LFS, Rosenblum &
//!   Ousterhout 1992; for flash, Kawaguchi et al. 1995).
//! - [`fifo`]: oldest sealed block first (Desnoyers' FIFO model).
//! - [`random`]: a uniformly random candidate (the baseline of the
//!   d-choices analysis: an average block, WAF α/(α−1) under uniform traffic).
//! - [`d_choices`]: the fewest valid pages among `d` random candidates
//!   (Van Houdt, SIGMETRICS 2013).
//! - [`windowed_greedy`]: the fewest valid pages among the `w` oldest
//!   candidates (Hu et al., SYSTOR 2009).
//!
//! # Hot/cold separation and wear leveling
//!
//! - [`hot_cold`]: which write stream (open block) a page goes to: none,
//!   DAC's update-frequency regions, or a two-stream counter scheme.
//! - [`wear_leveling`]: which free block to open next, and when to move
//!   cold data off little-worn blocks: none, dynamic, static.

mod candidates;
pub mod cost_benefit;
pub mod d_choices;
pub mod fifo;
pub mod greedy;
pub mod hot_cold;
pub mod random;
pub mod wear_leveling;
pub mod windowed_greedy;

use serde::{Deserialize, Serialize};
use std::fmt;

/// What a policy may look at about blocks: shared with the FTL.
#[derive(Clone, Debug)]
pub struct BlockTable {
    /// Valid pages per block, counting its `fixed` pages.
    pub valid: Vec<u32>,
    /// Pages of each block that never hold data (a bad member's pages, a
    /// summary row): counted as valid pages that never move, so a block
    /// with no data left has `valid == fixed`.
    pub fixed: Vec<u32>,
    /// When each block was sealed, in the FTL's program sequence numbers.
    pub sealed_at: Vec<u64>,
    /// The parallel unit (write-allocation unit) of each block.
    pub unit: Vec<u32>,
    /// Erases of each block as the FTL counted them (its wear record).
    pub erase_count: Vec<u32>,
    pub pages_per_block: u32,
    pub units: u32,
    /// The FTL's current program sequence number (its clock).
    pub now: u64,
}

/// A victim-selection policy. Blocks and units are indices (u32).
pub trait VictimPolicy {
    /// `block` was sealed and may now be collected.
    fn insert(&mut self, block: u32, table: &BlockTable);
    /// A page of candidate `block` was invalidated; `table.valid` is updated
    /// and `old_valid` is the count before.
    fn invalidated(&mut self, _block: u32, _old_valid: u32, _table: &BlockTable) {}
    /// `block` stops being a candidate without being selected.
    fn remove(&mut self, block: u32, table: &BlockTable);
    /// Choose a victim on `unit` and stop tracking it.
    fn select(&mut self, unit: u32, table: &BlockTable) -> Option<u32>;
}

/// The victim policies a configuration can name: `greedy`,
/// `cost-benefit`, `fifo`, `random`, `d-choices[:d]`, `windowed-greedy[:w]`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(try_from = "String", into = "String")]
pub enum VictimPolicyKind {
    #[default]
    Greedy,
    CostBenefit,
    Fifo,
    Random,
    /// The best of `d` random candidates.
    DChoices {
        d: u32,
    },
    /// The best of the `window` oldest candidates.
    WindowedGreedy {
        window: u32,
    },
}

impl VictimPolicyKind {
    /// Default `d` of `d-choices` (Van Houdt finds d = 10 within a few
    /// percent of greedy).
    pub const DEFAULT_D: u32 = 10;
    /// Default window of `windowed-greedy`, in blocks per unit.
    pub const DEFAULT_WINDOW: u32 = 16;
    /// Every spelling accepted, for error messages and `nandlab ftls`.
    pub const CHOICES: &'static str = "greedy, cost-benefit, fifo, random, d-choices[:d], windowed-greedy[:window]";

    /// The policy's name without its parameter.
    pub fn name(self) -> &'static str {
        match self {
            VictimPolicyKind::Greedy => "greedy",
            VictimPolicyKind::CostBenefit => "cost-benefit",
            VictimPolicyKind::Fifo => "fifo",
            VictimPolicyKind::Random => "random",
            VictimPolicyKind::DChoices { .. } => "d-choices",
            VictimPolicyKind::WindowedGreedy { .. } => "windowed-greedy",
        }
    }
}

impl fmt::Display for VictimPolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VictimPolicyKind::DChoices { d } => write!(f, "d-choices:{d}"),
            VictimPolicyKind::WindowedGreedy { window } => write!(f, "windowed-greedy:{window}"),
            other => f.write_str(other.name()),
        }
    }
}

impl std::str::FromStr for VictimPolicyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (s.trim(), None),
        };
        let count = |what: &str, default: u32| -> Result<u32, String> {
            match arg {
                None => Ok(default),
                Some(a) => match a.parse::<u32>() {
                    Ok(v) if v >= 1 => Ok(v),
                    _ => Err(format!("`{s}`: {what} must be a whole number of at least 1")),
                },
            }
        };
        let plain = |kind: VictimPolicyKind| match arg {
            None => Ok(kind),
            Some(_) => Err(format!("`{s}`: `{name}` takes no parameter")),
        };
        match name {
            "greedy" => plain(VictimPolicyKind::Greedy),
            "cost-benefit" => plain(VictimPolicyKind::CostBenefit),
            "fifo" => plain(VictimPolicyKind::Fifo),
            "random" => plain(VictimPolicyKind::Random),
            "d-choices" => Ok(VictimPolicyKind::DChoices { d: count("d", Self::DEFAULT_D)? }),
            "windowed-greedy" => {
                Ok(VictimPolicyKind::WindowedGreedy { window: count("the window", Self::DEFAULT_WINDOW)? })
            }
            other => Err(format!("unknown victim policy `{other}` (choose from {})", Self::CHOICES)),
        }
    }
}

impl TryFrom<String> for VictimPolicyKind {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<VictimPolicyKind> for String {
    fn from(k: VictimPolicyKind) -> String {
        k.to_string()
    }
}

/// Runtime choice of policy (enum dispatch keeps the hot path inlinable).
pub enum VictimSelector {
    Greedy(greedy::Greedy),
    CostBenefit(cost_benefit::CostBenefit),
    Fifo(fifo::Fifo),
    Random(random::Random),
    DChoices(d_choices::DChoices),
    WindowedGreedy(windowed_greedy::WindowedGreedy),
}

impl VictimSelector {
    /// A selector for `blocks` blocks; `seed` seeds the random policies.
    pub fn new(kind: VictimPolicyKind, blocks: usize, table: &BlockTable, seed: u64) -> Self {
        match kind {
            VictimPolicyKind::Greedy => VictimSelector::Greedy(greedy::Greedy::new(blocks, table)),
            VictimPolicyKind::CostBenefit => VictimSelector::CostBenefit(cost_benefit::CostBenefit::new(blocks, table)),
            VictimPolicyKind::Fifo => VictimSelector::Fifo(fifo::Fifo::new(table)),
            VictimPolicyKind::Random => VictimSelector::Random(random::Random::new(blocks, table, seed)),
            VictimPolicyKind::DChoices { d } => {
                VictimSelector::DChoices(d_choices::DChoices::new(blocks, table, d, seed))
            }
            VictimPolicyKind::WindowedGreedy { window } => {
                VictimSelector::WindowedGreedy(windowed_greedy::WindowedGreedy::new(table, window))
            }
        }
    }

    fn policy(&mut self) -> &mut dyn VictimPolicy {
        match self {
            VictimSelector::Greedy(p) => p,
            VictimSelector::CostBenefit(p) => p,
            VictimSelector::Fifo(p) => p,
            VictimSelector::Random(p) => p,
            VictimSelector::DChoices(p) => p,
            VictimSelector::WindowedGreedy(p) => p,
        }
    }

    pub fn insert(&mut self, block: u32, table: &BlockTable) {
        self.policy().insert(block, table)
    }

    #[inline]
    pub fn invalidated(&mut self, block: u32, old_valid: u32, table: &BlockTable) {
        // Greedy is the hot case: call it directly.
        match self {
            VictimSelector::Greedy(p) => p.invalidated(block, old_valid, table),
            other => other.policy().invalidated(block, old_valid, table),
        }
    }

    pub fn remove(&mut self, block: u32, table: &BlockTable) {
        self.policy().remove(block, table)
    }

    pub fn select(&mut self, unit: u32, table: &BlockTable) -> Option<u32> {
        self.policy().select(unit, table)
    }
}

/// Shared test: a policy picks what its rule says on a hand-made table.
#[cfg(test)]
pub(crate) fn table_for_tests(valid: &[u32], sealed_at: &[u64]) -> BlockTable {
    BlockTable {
        valid: valid.to_vec(),
        fixed: vec![0; valid.len()],
        sealed_at: sealed_at.to_vec(),
        unit: vec![0; valid.len()],
        erase_count: vec![0; valid.len()],
        pages_per_block: 8,
        units: 1,
        now: 100,
    }
}
