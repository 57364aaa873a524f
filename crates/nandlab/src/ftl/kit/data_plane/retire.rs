//! Retiring a group whose block failed (media reliability: see
//! [`crate::nand::reliability`]).
//!
//! - **Program failure**: the NAND refuses further programs to the block
//!   (a grown bad block) but still reads it. The group stops being a
//!   frontier at once, its summary is abandoned (its summary page would go
//!   to the failed block), its valid pages are moved to other groups as a
//!   GC victim's are, then the failed block leaves the group (below). The
//!   caller programs the failed data elsewhere. Moving the pages out at
//!   once, rather than when GC would next choose the group, means a mount
//!   never finds valid data in a block its bad-block scan skips.
//! - **Erase failure**: the group held nothing valid (it was being
//!   freed); the failed block leaves it.
//!
//! A failed block leaves its group as a factory bad block does at format
//! or mount: the group's members are recomputed from the bad-block marks
//! (the flash's, which include grown bad blocks), the narrower group is
//! erased and freed, and a group with no block left is never used again.
//! So a mount, which rebuilds groups from the same marks, finds the same
//! groups. A unit that runs out of free groups stops with the usual
//! `NoSpace` error naming the unit: the data already acknowledged stays
//! readable.

use super::{DataPlane, GroupState, Mapper, NO_FRONTIER};
use crate::flash::{Cause, Flash, FlashError};
use crate::ftl::mutants::Mutant;
use crate::ftl::{FtlError, IoRequest};
use crate::nand::BlockAddr;

impl DataPlane {
    /// A program into `group` failed: retire its failed block (see the
    /// module docs).
    #[cold]
    pub(super) fn retire_after_program_failure<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        group: u32,
    ) -> Result<(), FtlError> {
        if self.state[group as usize] == GroupState::Bad {
            return Ok(()); // already retired (a mutant's row failing twice)
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
        // Neither open, nor a candidate, nor free while its pages move.
        self.state[group as usize] = GroupState::Bad;
        if self.mutant == Mutant::KeepsFailedProgram {
            return Ok(()); // BUG (deliberate): the caller keeps the failed page mapped
        }
        let was_in_gc = std::mem::replace(&mut self.in_gc, true);
        let moved = self.move_valid_pages(flash, m, unit, group, Cause::Gc);
        self.in_gc = was_in_gc;
        moved?;
        // As before an erase: the FTL may have to persist something first
        // (page: trims whose newest copy the group holds).
        m.before_erase(self, flash, group)?;
        self.drop_bad_members(flash, group, Cause::Gc)
    }

    /// An erase of `group` (emptied, being freed) failed.
    #[cold]
    pub(super) fn retire_after_erase_failure(
        &mut self,
        flash: &mut dyn Flash,
        group: u32,
        cause: Cause,
    ) -> Result<(), FtlError> {
        self.drop_bad_members(flash, group, cause)
    }

    /// Take the blocks of the emptied `group` the flash marks bad out of
    /// it (as a mount does with factory bad blocks); erase what is left
    /// and free the narrower group, or retire the group when nothing is.
    fn drop_bad_members(&mut self, flash: &mut dyn Flash, group: u32, cause: Cause) -> Result<(), FtlError> {
        let mut members = [0u32; super::MAX_PLANES_PER_GROUP];
        let n = self.layout.members(group).len();
        members[..n].copy_from_slice(self.layout.members(group));
        for &b in &members[..n] {
            if !self.bad[b as usize] && flash.is_factory_bad(BlockAddr(u64::from(b))) {
                self.bad[b as usize] = true;
                self.counters.retired_blocks += 1;
            }
        }
        self.layout.set_members(&self.bad);
        let fixed = self.fixed_pages(group);
        (self.table.fixed[group as usize], self.table.valid[group as usize]) = (fixed, fixed);
        self.set_unit_caps();
        if self.layout.width(group) == 0 {
            self.state[group as usize] = GroupState::Bad;
            return Ok(());
        }
        // (A failure of this erase narrows the group again.)
        self.erase_to_free(flash, group, cause)
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

    /// The retirement counter as an FTL metric, when a block was retired
    /// (absent otherwise, so reports without media failures are unchanged).
    pub fn retirement_stats(&self, extra: &mut std::collections::BTreeMap<String, serde_json::Value>) {
        crate::ftl::kit::free_blocks::insert_retired_blocks(extra, self.counters.retired_blocks);
    }
}
