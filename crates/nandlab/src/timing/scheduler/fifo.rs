//! `fifo`: in-order service per plane. A transaction starts only when no
//! older transaction is queued on any of its planes, so each plane serves
//! its work in the order the FTL issued it (first come, first served) —
//! the order the reservation model ([`crate::timing::flash_model`]) books
//! it in. Different planes (and dies) still proceed independently.

use super::{Queued, Scheduler};

pub struct Fifo;

impl Scheduler for Fifo {
    fn pick(&self, queue: &[Queued], eligible: &[bool]) -> Option<usize> {
        let mut older_planes = 0u64;
        for (i, q) in queue.iter().enumerate() {
            if eligible[i] && q.tx.planes_mask & older_planes == 0 {
                return Some(i);
            }
            older_planes |= q.tx.planes_mask;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::q;
    use super::*;
    use crate::timing::transaction::{TxClass, TxKind};

    #[test]
    fn a_read_never_overtakes_older_work_on_its_plane_but_may_on_another() {
        let queue = [q(0, TxKind::Program, TxClass::User, 0), q(1, TxKind::Read, TxClass::User, 0)];
        assert_eq!(Fifo.pick(&queue, &[true, true]), Some(0));
        assert_eq!(Fifo.pick(&queue, &[false, true]), None, "the plane waits for its older program");
        let queue = [q(0, TxKind::Program, TxClass::User, 0), q(1, TxKind::Read, TxClass::User, 1)];
        assert_eq!(Fifo.pick(&queue, &[false, true]), Some(1), "another plane proceeds");
    }
}
