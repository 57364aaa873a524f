//! Retiring a group whose block failed (media reliability: see
//! [`crate::nand::reliability`]).
//!
//! - **Program failure**: the NAND refuses further programs to the block
//!   (a grown bad block) but still reads it. The group stops being a
//!   frontier at once, its summary is abandoned (its summary page would go
//!   to the failed block), its valid pages are moved to other groups as a
//!   GC victim's are, and it is never erased or allocated again. The
//!   caller then programs the failed data elsewhere. Moving the pages
//!   out at once, rather than when GC would next choose the group, means
//!   a mount never finds valid data in a block its bad-block scan skips.
//! - **Erase failure**: the group held nothing valid (it was being
//!   freed); it is simply not returned to the free groups.
//!
//! A whole group is retired even when only one of its blocks failed
//! (multi-plane groups): simpler and safe; the next mount rebuilds the
//! group without the bad block (as for a factory bad block), so the
//! capacity comes back then. A unit that runs out of free groups stops
//! with the usual `NoSpace` error, which names the unit: the data already
//! acknowledged stays readable.

use super::{DataPlane, GroupState, Mapper, NO_FRONTIER};
use crate::flash::{Cause, Flash, FlashError};
use crate::ftl::{FtlError, IoRequest};

impl DataPlane {
    /// A program into `group` failed: retire it (see the module docs).
    #[cold]
    pub(super) fn retire_after_program_failure<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        group: u32,
    ) -> Result<(), FtlError> {
        if self.state[group as usize] == GroupState::Bad {
            return Ok(()); // already retired (a multi-plane row failing twice)
        }
        let unit = self.unit_of(group);
        for f in &mut self.units[unit].frontier {
            if f.group == group {
                *f = NO_FRONTIER;
            }
        }
        self.abandon_summary(group);
        if self.state[group as usize] == GroupState::Sealed {
            self.policy.remove(group, &self.table);
        }
        self.state[group as usize] = GroupState::Bad;
        self.count_retired(group);
        let was_in_gc = std::mem::replace(&mut self.in_gc, true);
        let moved = self.move_valid_pages(flash, m, unit, group, Cause::Gc);
        self.in_gc = was_in_gc;
        moved?;
        // As before an erase: the FTL may have to persist something first
        // (page: trims whose newest copy the group holds), since the next
        // mount skips the failed block.
        m.before_erase(self, flash, group)
    }

    /// An erase of `group` failed: it stays out of the free groups.
    #[cold]
    pub(super) fn retire_after_erase_failure(&mut self, group: u32) {
        self.state[group as usize] = GroupState::Bad;
        self.count_retired(group);
    }

    fn count_retired(&mut self, group: u32) {
        self.counters.retired_groups += 1;
        self.counters.retired_blocks += self.layout.width(group) as u64;
    }

    /// [`crate::ftl::mutants::Mutant::SpuriousReadError`]: fail a read
    /// that touches a mapped logical page whose number is a multiple of 7.
    #[cold]
    pub(super) fn spurious_read_error<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        req: &IoRequest,
    ) -> Result<(), FtlError> {
        for (lpn, ..) in super::pieces(self.spp, req.lba, u64::from(req.sectors)) {
            if lpn % 7 == 0 && m.lookup(self, flash, lpn)?.ppn != super::UNMAPPED {
                return Err(FlashError::Uncorrectable.into()); // BUG (deliberate)
            }
        }
        Ok(())
    }

    /// The retirement counters as FTL metrics, when any group was retired
    /// (absent otherwise, so reports without media failures are unchanged).
    pub fn retirement_stats(&self, extra: &mut std::collections::BTreeMap<String, serde_json::Value>) {
        if self.counters.retired_groups > 0 {
            extra.insert("retired_groups".into(), serde_json::json!(self.counters.retired_groups));
            extra.insert("retired_blocks".into(), serde_json::json!(self.counters.retired_blocks));
        }
    }
}
