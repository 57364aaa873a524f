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
//! - **Failed GC or wear-leveling copy** (a program or copyback into a
//!   frontier group, or a metadata page moved with its group): the
//!   destination group is retired as above, then the victim's pages are
//!   gathered again and copied elsewhere. The copies not yet remapped are
//!   still valid in the victim (its valid bits are cleared page by page as
//!   each copy is remapped), so gathering again finds exactly the pages
//!   still to move; a copy that did program into the failed group is never
//!   mapped and leaves with the grown bad block. Nothing is lost: the
//!   victim is erased only after all its pages moved.
//! - **Failed summary page** (the last row of a group just filled): the
//!   group is retired as for a failed data program (its data moves out
//!   at once, since a mount skips the grown bad block and would not find
//!   it). The FTL's own metadata programs (`page`'s checkpoints and trim
//!   log, `dftl`'s translation pages) handle their failures themselves,
//!   with [`DataPlane::retire_failed_groups`] for pages in frontier groups
//!   and [`DataPlane::release_group`] for the groups they hold.
//!
//! Which group failed is read from the flash: the one open (or just
//! filled) group with a block the flash marks bad that the data plane
//! does not yet count as bad. A program failure makes its block a grown
//! bad block at once, and only frontier groups and groups awaiting their
//! summary are programmed, so that scan is short and exact.
//!
//! A failed block leaves its group as a factory bad block does at format
//! or mount: the group's members are recomputed from the bad-block marks
//! (the flash's, which include grown bad blocks), the narrower group is
//! erased and freed, and a group with no block left is never used again.
//! So a mount, which rebuilds groups from the same marks, finds the same
//! groups. A unit that runs out of free groups stops with the usual
//! `NoSpace` error naming the unit: the data already acknowledged stays
//! readable.

use super::{DataPlane, GroupState, Mapper, NONE, NO_FRONTIER};
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
        self.move_out_and_drop_bad(flash, m, unit, group, true)
    }

    /// Move the valid pages of `group` (marked [`GroupState::Bad`] while
    /// they move) to other groups, then drop its failed blocks (counted as
    /// retired when `count`).
    fn move_out_and_drop_bad<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        unit: usize,
        group: u32,
        count: bool,
    ) -> Result<(), FtlError> {
        let was_in_gc = std::mem::replace(&mut self.in_gc, true);
        let moved = self.move_valid_pages(flash, m, unit, group, Cause::Gc);
        self.in_gc = was_in_gc;
        moved?;
        // As before an erase: the FTL may have to persist something first
        // (page: trims whose newest copy the group holds).
        m.before_erase(self, flash, group)?;
        self.drop_bad_members(flash, group, Cause::Gc, count)
    }

    /// Mount, after [`DataPlane::finish_mount`]: finish the retirement of
    /// every group with a grown bad block (see the module docs, "The
    /// retirement window"). The scan read the block's pages like any
    /// member's, so what it still holds is mapped; move it off now and take
    /// the block out of its group. The FTL's own metadata groups
    /// (`Reserved`) are left as they are: the FTL releases them with
    /// [`DataPlane::release_group`], which drops the failed block.
    pub fn finish_retirements_at_mount<M: Mapper>(&mut self, flash: &mut dyn Flash, m: &mut M) -> Result<(), FtlError> {
        for group in 0..self.layout.groups() {
            let state = self.state[group as usize];
            if matches!(state, GroupState::Bad | GroupState::Reserved) || !self.has_failed_member(flash, group) {
                continue;
            }
            let unit = self.unit_of(group);
            if state == GroupState::Free {
                let at = self.units[unit].free.iter().position(|&g| g == group).expect("a free group is listed");
                self.remove_free(unit, at);
            } else {
                self.policy.remove(group, &self.table);
            }
            self.state[group as usize] = GroupState::Bad;
            self.counters.mount_grown_bad_groups += 1;
            // Retired (and counted) before the power cycle, or now.
            self.move_out_and_drop_bad(flash, m, unit, group, false)?;
        }
        Ok(())
    }

    /// After a program failed with [`FlashError::ProgramFailed`]: retire
    /// every open group (a frontier, or a group awaiting its summary) with
    /// a block that failed (see the module docs).
    #[cold]
    pub fn retire_failed_groups<M: Mapper>(&mut self, flash: &mut dyn Flash, m: &mut M) -> Result<(), FtlError> {
        let mut failed = Vec::new();
        let open = self.units.iter().flat_map(|u| u.frontier.iter().map(|f| f.group));
        let awaiting_summary = self.summaries.iter().flat_map(|s| s.group.iter().copied());
        for group in open.chain(awaiting_summary) {
            if group != NONE && !failed.contains(&group) && self.has_failed_member(flash, group) {
                failed.push(group);
            }
        }
        for group in failed {
            self.retire_after_program_failure(flash, m, group)?;
        }
        Ok(())
    }

    /// Mount: finish an interrupted erase of `block` (its pages read as
    /// nothing) before the block is reused. An erase that fails leaves it
    /// a grown bad block, as does one that failed before the power cycle
    /// (not erased again: the NAND refuses it);
    /// [`DataPlane::finish_retirements_at_mount`] then drops it from its
    /// group.
    pub fn erase_undefined_block(&mut self, flash: &mut dyn Flash, block: u32) -> Result<(), FtlError> {
        let addr = BlockAddr(u64::from(block));
        if flash.is_grown_bad(addr) {
            return Ok(());
        }
        match flash.erase(Cause::Recovery, addr) {
            Ok(()) => {
                let group = self.group_of_block(block);
                self.table.erase_count[group as usize] += 1;
                Ok(())
            }
            Err(FlashError::EraseFailed) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether a block of `group` failed since the data plane last looked
    /// at the flash's bad-block marks.
    fn has_failed_member(&self, flash: &dyn Flash, group: u32) -> bool {
        let members = self.layout.members(group);
        members.iter().any(|&b| !self.bad[b as usize] && flash.is_factory_bad(BlockAddr(u64::from(b))))
    }

    /// Free a group the FTL held for its own metadata (checkpoints, logs;
    /// see [`DataPlane::take_free_group`]): erased, or, when a program into
    /// it failed, without its failed block (as [`DataPlane::erase_to_free`]
    /// otherwise, which would erase a grown bad block).
    pub fn release_group(&mut self, flash: &mut dyn Flash, group: u32, cause: Cause) -> Result<(), FtlError> {
        if self.has_failed_member(flash, group) && self.mutant != Mutant::KeepsFailedMetaProgram {
            return self.drop_bad_members(flash, group, cause, true);
        }
        self.erase_to_free(flash, group, cause)
    }

    /// After pages were programmed and committed (a host write, a GC
    /// row): program the summary of a group they completed; if that
    /// program fails, retire the group (see the module docs).
    pub(super) fn write_due_summary_or_retire<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
    ) -> Result<(), FtlError> {
        match self.write_due_summary(flash) {
            Err(FtlError::Flash(FlashError::ProgramFailed)) => self.retire_failed_groups(flash, m),
            r => r,
        }
    }

    /// An erase of `group` (emptied, being freed) failed.
    #[cold]
    pub(super) fn retire_after_erase_failure(
        &mut self,
        flash: &mut dyn Flash,
        group: u32,
        cause: Cause,
    ) -> Result<(), FtlError> {
        self.drop_bad_members(flash, group, cause, true)
    }

    /// Take the blocks of the emptied `group` the flash marks bad out of
    /// it (as a mount does with factory bad blocks); erase what is left
    /// and free the narrower group, or retire the group when nothing is.
    fn drop_bad_members(
        &mut self,
        flash: &mut dyn Flash,
        group: u32,
        cause: Cause,
        count: bool,
    ) -> Result<(), FtlError> {
        let mut members = [0u32; super::MAX_PLANES_PER_GROUP];
        let n = self.layout.members(group).len();
        members[..n].copy_from_slice(self.layout.members(group));
        for &b in &members[..n] {
            if !self.bad[b as usize] && flash.is_factory_bad(BlockAddr(u64::from(b))) {
                self.bad[b as usize] = true;
                self.counters.retired_blocks += u64::from(count);
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
        if self.counters.mount_grown_bad_groups > 0 {
            extra.insert("mount_grown_bad_groups".into(), self.counters.mount_grown_bad_groups.into());
        }
        self.lost.insert_metric(extra, self.spp);
    }
}
