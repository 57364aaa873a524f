//! `read-priority`: reads (host, mapping and GC alike) before programs and
//! erases, oldest first within each; and a read that finds its die in the
//! cell phase of a program or erase may *suspend* it (program/erase
//! suspend, ONFI 4.x; Wu and He, "Reducing SSD read latency via NAND flash
//! program and erase suspension", FAST 2012). The core carries the
//! suspension out (see [`crate::timing::event_core`]): command, suspend
//! latency, tR, data-out; the suspended operation resumes after the read's
//! cell phase and ends later by the suspend latency + tR. The `[timing]`
//! flags `program_suspend` / `erase_suspend` say which operations the
//! device can suspend.

use super::{lowest_rank, Queued, Scheduler};

pub struct ReadPriority;

impl Scheduler for ReadPriority {
    fn pick(&self, queue: &[Queued], eligible: &[bool]) -> Option<usize> {
        lowest_rank(queue, eligible, |q| u8::from(!q.tx.is_read()))
    }
    fn suspends_for_reads(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::q;
    use super::*;
    use crate::timing::transaction::{TxClass, TxKind};

    #[test]
    fn the_oldest_read_goes_before_older_programs_and_erases() {
        let queue = [
            q(0, TxKind::Erase, TxClass::Gc { urgent: false }, 1),
            q(1, TxKind::Program, TxClass::User, 0),
            q(2, TxKind::Read, TxClass::Gc { urgent: false }, 0),
            q(3, TxKind::Read, TxClass::User, 0),
        ];
        assert_eq!(ReadPriority.pick(&queue, &[true; 4]), Some(2));
        assert_eq!(ReadPriority.pick(&queue, &[true, true, false, false]), Some(0));
        assert!(ReadPriority.suspends_for_reads());
    }
}
