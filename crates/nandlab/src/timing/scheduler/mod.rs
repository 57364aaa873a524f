//! Transaction scheduling: which of a die's queued, eligible transactions
//! the timing core ([`super::event_core`]) starts next, and whether a read
//! may suspend the program or erase running on its die.
//!
//! A scheduler only orders; it never decides what is *eligible* (ready,
//! its dependency done, NAND order kept: see the core's docs), so no policy
//! can break a rule of the flash. One file per policy, and
//! [`SchedulerKind`] chooses one at run time:
//!
//! - [`fifo`]: in-order service per plane;
//! - [`mqsim`]: MQSim's out-of-order priority scheduler (`TSU_OutOfOrder`);
//! - [`read_priority`]: reads first, with program/erase suspend.

pub mod fifo;
pub mod mqsim;
pub mod read_priority;

use super::transaction::{Transaction, TxId};

/// A queued transaction as a scheduler sees it: its id (older is smaller)
/// and what it is.
#[derive(Copy, Clone, Debug)]
pub struct Queued {
    pub id: TxId,
    pub tx: Transaction,
}

/// A scheduling policy. See the module docs.
pub trait Scheduler {
    /// The index in `queue` (a die's queue, oldest first) of the transaction
    /// to start now, among those with `eligible[i]`; `None` leaves the die idle.
    fn pick(&self, queue: &[Queued], eligible: &[bool]) -> Option<usize>;

    /// Whether a read may suspend a program or erase in its cell phase
    /// (subject to the `[timing]` suspend flags and the time left).
    fn suspends_for_reads(&self) -> bool {
        false
    }
}

/// The scheduler chosen for a run.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum SchedulerKind {
    #[default]
    Fifo,
    Mqsim,
    ReadPriority,
}

impl SchedulerKind {
    pub const NAMES: [&'static str; 3] = ["fifo", "mqsim", "read-priority"];

    pub fn name(self) -> &'static str {
        match self {
            SchedulerKind::Fifo => "fifo",
            SchedulerKind::Mqsim => "mqsim",
            SchedulerKind::ReadPriority => "read-priority",
        }
    }
}

impl std::str::FromStr for SchedulerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fifo" => Ok(SchedulerKind::Fifo),
            "mqsim" => Ok(SchedulerKind::Mqsim),
            "read-priority" | "read_priority" => Ok(SchedulerKind::ReadPriority),
            other => Err(format!("unknown scheduler `{other}` (fifo, mqsim, read-priority)")),
        }
    }
}

impl Scheduler for SchedulerKind {
    fn pick(&self, queue: &[Queued], eligible: &[bool]) -> Option<usize> {
        match self {
            SchedulerKind::Fifo => fifo::Fifo.pick(queue, eligible),
            SchedulerKind::Mqsim => mqsim::Mqsim.pick(queue, eligible),
            SchedulerKind::ReadPriority => read_priority::ReadPriority.pick(queue, eligible),
        }
    }
    fn suspends_for_reads(&self) -> bool {
        match self {
            SchedulerKind::Fifo => fifo::Fifo.suspends_for_reads(),
            SchedulerKind::Mqsim => mqsim::Mqsim.suspends_for_reads(),
            SchedulerKind::ReadPriority => read_priority::ReadPriority.suspends_for_reads(),
        }
    }
}

/// The eligible transaction of lowest `rank` (ties: the oldest).
pub(crate) fn lowest_rank(queue: &[Queued], eligible: &[bool], rank: impl Fn(&Queued) -> u8) -> Option<usize> {
    let mut best: Option<(u8, usize)> = None;
    for (i, q) in queue.iter().enumerate() {
        if eligible[i] {
            let r = rank(q);
            if best.is_none_or(|(b, _)| r < b) {
                best = Some((r, i));
            }
        }
    }
    best.map(|(_, i)| i)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::timing::transaction::{TxClass, TxKind};

    /// A queued transaction of `kind` and `class` on plane `plane` (page = id).
    pub fn q(id: TxId, kind: TxKind, class: TxClass, plane: u32) -> Queued {
        Queued {
            id,
            tx: Transaction {
                kind,
                class,
                die: 0,
                channel: 0,
                planes_mask: 1 << plane,
                page: u64::from(id),
                block: u64::from(id),
                channel_in_ns: 0,
                cell_ns: 0,
                channel_out_ns: 0,
                ready_ns: 0,
                after: None,
                tag: 0,
            },
        }
    }

    #[test]
    fn names_round_trip_and_a_bad_name_lists_the_choices() {
        for n in SchedulerKind::NAMES {
            assert_eq!(n.parse::<SchedulerKind>().unwrap().name(), n);
        }
        let e = "lifo".parse::<SchedulerKind>().unwrap_err();
        assert!(e.contains("lifo") && e.contains("read-priority"), "{e}");
    }
}
