//! `mqsim`: MQSim's out-of-order transaction scheduling unit
//! (`src/ssd/TSU_OutofOrder.cpp` and `TSU_Base`, MQSim 7ec40e3; Tavakkol
//! et al., "MQSim: A Framework for Enabling Realistic Studies of Modern
//! Multi-Queue SSD Devices", FAST 2018), read for its behaviour.
//!
//! MQSim keeps one queue per chip for each source — user reads, user
//! writes, mapping reads, mapping writes, GC reads, GC writes, GC erases —
//! and, when a chip can take a command, serves reads, else writes, else
//! erases, each from the queues in an order that depends on whether GC is
//! in *urgent* mode on that chip (its free-block pool below the hard
//! threshold: GC runs non-preemptively):
//!
//! | rank | preemptive GC (normal) | urgent GC            |
//! |------|------------------------|----------------------|
//! | 0    | mapping reads          | mapping reads        |
//! | 1    | user reads             | GC reads             |
//! | 2    | user writes            | GC writes            |
//! | 3    | GC reads               | GC erases            |
//! | 4    | GC writes (and mapping writes) | user reads   |
//! | 5    | GC erases              | user writes (and mapping writes) |
//!
//! Differences, each for a reason:
//! - Queues are per die, not per chip (nandlab's timing resources are dies).
//!   MQSim starts a command on a chip only when the whole chip is idle, so
//!   its shipped device (2 dies per chip) has one busy unit per chip; the
//!   `mqsim-compat` preset models that as one die per chip (see it).
//! - Urgency: nandlab's FTLs do not expose a free-block threshold; a die is
//!   urgent while it holds GC work of a host request (the FTL collected
//!   because it had to: MQSim's non-preemptive case). Background GC in idle
//!   time is preemptive.
//! - MQSim fills a multi-plane command from a second queue; nandlab's FTL
//!   issues multi-plane operations itself, so one transaction is one command.
//! - MQSim 7ec40e3's read service falls through its chip-status switch (no
//!   `break` after marking a suspension required), so it issues reads only
//!   to idle chips and never suspends: neither does this scheduler.
//! - Mapping writes: MQSim queues them but its write service never reads
//!   that queue; here they rank with GC writes rather than starve.
//!
//! Eligibility (NAND order) is the core's: programs and erases of a plane
//! stay in issue order whatever their rank.

use super::{lowest_rank, Queued, Scheduler};
use crate::timing::transaction::{TxClass, TxKind};

pub struct Mqsim;

/// The rank of a transaction (lower first): see the module docs' table.
fn rank(q: &Queued, urgent: bool) -> u8 {
    let read = q.tx.kind == TxKind::Read;
    match (q.tx.class, q.tx.kind, urgent) {
        (TxClass::Mapping, TxKind::Read, _) => 0,
        (TxClass::User, _, false) if read => 1,
        (TxClass::User, _, false) => 2,
        (TxClass::Gc { .. }, TxKind::Read, false) => 3,
        (TxClass::Gc { .. }, TxKind::Erase, false) => 5,
        (TxClass::Gc { .. } | TxClass::Mapping, _, false) => 4,
        (TxClass::Gc { .. }, TxKind::Read, true) => 1,
        (TxClass::Gc { .. }, TxKind::Erase, true) => 3,
        (TxClass::Gc { .. }, _, true) => 2,
        (TxClass::User, _, true) if read => 4,
        (TxClass::User | TxClass::Mapping, _, true) => 5,
    }
}

impl Scheduler for Mqsim {
    fn pick(&self, queue: &[Queued], eligible: &[bool]) -> Option<usize> {
        let urgent = queue.iter().any(|q| q.tx.class == TxClass::Gc { urgent: true });
        lowest_rank(queue, eligible, |q| rank(q, urgent))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::q;
    use super::*;

    #[test]
    fn user_reads_before_user_writes_before_gc_in_preemptive_mode() {
        let gc = TxClass::Gc { urgent: false };
        let queue = [
            q(0, TxKind::Erase, gc, 3),
            q(1, TxKind::Program, gc, 2),
            q(2, TxKind::Read, gc, 2),
            q(3, TxKind::Program, TxClass::User, 1),
            q(4, TxKind::Read, TxClass::User, 0),
            q(5, TxKind::Read, TxClass::Mapping, 0),
        ];
        let order: Vec<usize> = (0..6)
            .scan([true; 6], |el, _| {
                let i = Mqsim.pick(&queue, el)?;
                el[i] = false;
                Some(i)
            })
            .collect();
        assert_eq!(order, [5, 4, 3, 2, 1, 0]);
        assert!(!Mqsim.suspends_for_reads());
    }

    #[test]
    fn urgent_gc_goes_before_user_work() {
        let gc = TxClass::Gc { urgent: true };
        let queue = [q(0, TxKind::Read, TxClass::User, 0), q(1, TxKind::Program, gc, 1), q(2, TxKind::Erase, gc, 2)];
        assert_eq!(Mqsim.pick(&queue, &[true; 3]), Some(1));
        assert_eq!(Mqsim.pick(&queue, &[true, false, true]), Some(2));
        assert_eq!(Mqsim.pick(&queue, &[true, false, false]), Some(0));
    }
}
