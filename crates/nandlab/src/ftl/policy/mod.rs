//! Garbage-collection victim selection: one policy per file, a small trait
//! with default hooks, and an enum that dispatches to the policy chosen in
//! the configuration.
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

pub mod cost_benefit;
pub mod fifo;
pub mod greedy;

use serde::{Deserialize, Serialize};

/// What a policy may look at about blocks: shared with the FTL.
#[derive(Clone, Debug)]
pub struct BlockTable {
    /// Valid pages per block.
    pub valid: Vec<u32>,
    /// When each block was sealed, in the FTL's program sequence numbers.
    pub sealed_at: Vec<u64>,
    /// The parallel unit (write-allocation unit) of each block.
    pub unit: Vec<u32>,
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

/// The policies a configuration can name.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum VictimPolicyKind {
    #[default]
    Greedy,
    CostBenefit,
    Fifo,
}

impl VictimPolicyKind {
    pub fn name(self) -> &'static str {
        match self {
            VictimPolicyKind::Greedy => "greedy",
            VictimPolicyKind::CostBenefit => "cost-benefit",
            VictimPolicyKind::Fifo => "fifo",
        }
    }
}

/// Runtime choice of policy (enum dispatch keeps the hot path inlinable).
pub enum VictimSelector {
    Greedy(greedy::Greedy),
    CostBenefit(cost_benefit::CostBenefit),
    Fifo(fifo::Fifo),
}

impl VictimSelector {
    pub fn new(kind: VictimPolicyKind, blocks: usize, table: &BlockTable) -> Self {
        match kind {
            VictimPolicyKind::Greedy => VictimSelector::Greedy(greedy::Greedy::new(blocks, table)),
            VictimPolicyKind::CostBenefit => VictimSelector::CostBenefit(cost_benefit::CostBenefit::new(blocks, table)),
            VictimPolicyKind::Fifo => VictimSelector::Fifo(fifo::Fifo::new(table)),
        }
    }

    fn policy(&mut self) -> &mut dyn VictimPolicy {
        match self {
            VictimSelector::Greedy(p) => p,
            VictimSelector::CostBenefit(p) => p,
            VictimSelector::Fifo(p) => p,
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
        sealed_at: sealed_at.to_vec(),
        unit: vec![0; valid.len()],
        pages_per_block: 8,
        units: 1,
        now: 100,
    }
}
