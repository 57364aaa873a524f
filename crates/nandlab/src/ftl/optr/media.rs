//! optr's handling of media failures (media reliability: see
//! [`crate::nand::reliability`]): failed programs and erases retire the
//! block for good; uncorrectable host reads are the host's read error.
//!
//! - **A failed program in a chain block** (a host page, a GC copy, or
//!   the block's summary page): the NAND refuses further programs to the
//!   block (a grown bad block) but still reads it. The block is retired
//!   (state `Bad`, never erased or programmed again), the chain goes on
//!   in a fresh block, and the retired block's valid pages are copied
//!   (copyback, as GC does) to the plane's GC chain at once. The failed
//!   page itself was never mapped, and its data is still where it came
//!   from (the cache entry stays dirty until its program succeeds; a GC
//!   copy's source stays valid until its copy is mapped), so the caller
//!   programs it again in the new block. Moving the block's valid pages
//!   out at once, rather than leaving them in a block GC never collects,
//!   keeps every retired block empty of data.
//! - **A failed erase** (a GC victim, a free block taken for a chain, a
//!   metadata block): the block is retired; it held nothing valid.
//! - **A failed metadata program or erase** (the full-checkpoint areas,
//!   the metadata log): the reserved blocks are chosen from the bad-block
//!   marks, the highest good blocks of each plane in turn (`reset`), and a
//!   mount chooses them again from the marks the flash keeps, which
//!   include grown bad blocks. So when a reserved block fails, optr makes
//!   the same choice again at once: the failed block leaves the reserved
//!   set and the next good block in that order joins it; whatever that
//!   block held (a free block, a chain's open block, a sealed block with
//!   valid pages) is moved out first. The old checkpoint's layout is gone,
//!   so the next checkpoint is a full one (in the new layout); the
//!   failed checkpoint is written again as a full one at once.
//!   Retirement is thus persisted by the flash's bad-block mark alone, as
//!   for factory bad blocks: a mount computes the same layout and never
//!   uses a retired block.
//! - **Uncorrectable reads**: a host read returns the media error. optr's
//!   GC moves pages by copyback within the plane, which this model does
//!   not decode (as on NAND whose copyback skips the controller's ECC),
//!   so a GC move is never uncorrectable and no logical page is ever lost
//!   to GC; a read-modify-write whose read is uncorrectable fails the
//!   write with the media error (as `page` and `dftl` do).
//!
//! Crash safety during a retirement is not claimed: `crash` refuses the
//! reliability model (the model's state is not journaled with the NAND's),
//! and between a reserved block's failure and the next full checkpoint a
//! power cut would find the old checkpoint under the new layout.

use super::*;

impl OptrFtl {
    /// Count block `b` as retired: a grown bad block optr never uses again.
    pub(super) fn retire_block(&mut self, b: u32) {
        self.state[b as usize] = State::Bad;
        self.c.retired_blocks += 1;
    }

    /// A program into unit `u`'s host or GC chain block failed: retire the
    /// block, go on in a fresh one and move the retired block's valid
    /// pages out (see the module docs).
    #[cold]
    pub(super) fn retire_chain_block(&mut self, flash: &mut dyn Flash, u: usize, gc: bool) -> Result<(), FtlError> {
        let failed = if gc { self.gc[u].block } else { self.host[u].block };
        self.retire_block(failed);
        self.restart_chain(flash, u, gc)?;
        self.move_valid_pages(flash, failed)
    }

    /// Unit `u`'s host or GC chain goes on in a fresh block (its current
    /// block gets no summary page).
    fn restart_chain(&mut self, flash: &mut dyn Flash, u: usize, gc: bool) -> Result<(), FtlError> {
        let next = self.take_block(flash, u)?;
        let ch = if gc { &mut self.gc[u] } else { &mut self.host[u] };
        *ch = Chain { block: next, page: 0, summary: Vec::with_capacity(self.ppb as usize) };
        Ok(())
    }

    /// Copy the valid data pages of block `b` to its plane's GC chain
    /// (copyback) and remap them.
    pub(super) fn move_valid_pages(&mut self, flash: &mut dyn Flash, b: u32) -> Result<(), FtlError> {
        let u = self.unit_of_block(b);
        let first = b * self.ppb;
        let mut o = [0u8; OOB_BYTES];
        for src in first..first + self.ppb - 1 {
            if self.valid[(src / 64) as usize] & (1 << (src % 64)) == 0 {
                continue;
            }
            flash.read_oob(Cause::Gc, self.pa(src), &mut o)?;
            let (_, wid, size, lpn) = unoob(&o);
            let dst = self.append(flash, u, true, Err(src), wid, size & !TRIM_FLAG, lpn)?;
            self.set_map(lpn, dst);
        }
        Ok(())
    }

    /// A program or erase of reserved block `b` failed: retire it and
    /// choose the reserved blocks again (see the module docs). The next
    /// checkpoint is a full one; until then the log takes nothing.
    #[cold]
    pub(super) fn metadata_block_failed(&mut self, flash: &mut dyn Flash, b: u32) -> Result<(), FtlError> {
        self.retire_block(b);
        let old: Vec<u32> = self.area[0].iter().chain(&self.area[1]).chain(&self.log).copied().collect();
        let new = self.pick_reserved(flash)?;
        for &joins in new.iter().filter(|b| !old.contains(b)) {
            self.adopt_for_metadata(flash, joins)?;
        }
        self.set_reserved(new);
        self.log_pos = self.log_pages_total();
        self.log_fresh.fill(false);
        self.full_pending = true;
        Ok(())
    }

    /// Make block `b` a reserved block: out of the free lists, out of a
    /// chain, its valid pages moved out.
    fn adopt_for_metadata(&mut self, flash: &mut dyn Flash, b: u32) -> Result<(), FtlError> {
        let u = self.unit_of_block(b);
        match self.state[b as usize] {
            State::Free { .. } => self.free[u].retain(|&f| f != b),
            State::Open => {
                if self.host.is_empty() {
                    return Err(FtlError::NoSpace(format!(
                        "optr: metadata block {b} must replace a failed one before the chains exist"
                    )));
                }
                for gc in [false, true] {
                    if (if gc { self.gc[u].block } else { self.host[u].block }) == b {
                        self.restart_chain(flash, u, gc)?;
                    }
                }
            }
            State::Sealed | State::Reserved | State::Bad => {}
        }
        if self.valid_count[b as usize] > 0 {
            if self.gc.is_empty() {
                return Err(FtlError::NoSpace(format!(
                    "optr: block {b}, which holds data, must replace a failed metadata block during recovery"
                )));
            }
            // (It is no longer open: a copy cannot land in it.)
            self.state[b as usize] = State::Reserved;
            self.move_valid_pages(flash, b)?;
        }
        self.state[b as usize] = State::Reserved;
        Ok(())
    }
}
