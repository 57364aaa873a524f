//! optr's garbage collection: before a program finds a plane short of
//! blocks, an internal flush and checkpoint, then a batch of victims on
//! every short plane, never a block written since the checkpoint (the
//! paper's two constraints, see the module docs of `optr`).

use super::*;

impl OptrFtl {
    /// Before a program: if a plane is short of blocks, flush, checkpoint
    /// and collect a batch (the paper's two GC constraints).
    pub(super) fn ensure_space(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        if self.in_gc || self.in_request {
            return Ok(());
        }
        self.ensure_space_for(flash, 0)
    }

    /// Before a request of `pages` pages: room for every page it may evict
    /// without a checkpoint in its middle (a checkpoint's commit point must
    /// fall between requests).
    pub(super) fn ensure_space_for(&mut self, flash: &mut dyn Flash, pages: u32) -> Result<(), FtlError> {
        let need = self.reserve + pages.div_ceil(self.ppb - 1) + 1;
        if self.in_gc || self.free.iter().all(|f| f.len() as u32 > need) {
            return Ok(());
        }
        self.in_gc = true;
        let r = self.flush_and_collect(flash, need);
        self.in_gc = false;
        r
    }

    pub(super) fn flush_and_collect(&mut self, flash: &mut dyn Flash, need: u32) -> Result<(), FtlError> {
        self.c.internal_flushes += 1;
        // The internal flush programs the cache from the reserve.
        self.flush_all(flash)?;
        self.checkpoint(flash)?;
        self.c.gc_batches += 1;
        for u in 0..self.units as usize {
            while (self.free[u].len() as u32) <= need + self.batch {
                if !self.collect(flash, u)? {
                    break;
                }
            }
        }
        if self.free.iter().any(|f| f.is_empty()) {
            return Err(FtlError::NoSpace("optr: garbage collection found nothing to reclaim".into()));
        }
        Ok(())
    }

    /// Collect the sealed block of unit `u` with the fewest valid pages that
    /// holds nothing written since the latest checkpoint.
    pub(super) fn collect(&mut self, flash: &mut dyn Flash, u: usize) -> Result<bool, FtlError> {
        let bpp = self.g.blocks_per_plane();
        let victim = (0..bpp)
            .map(|i| self.g.block_addr(u as u32, i).0 as u32)
            .filter(|&b| self.state[b as usize] == State::Sealed && self.epoch_of[b as usize] < self.epoch)
            .min_by_key(|&b| self.valid_count[b as usize]);
        let Some(v) = victim else { return Ok(false) };
        if self.valid_count[v as usize] >= self.ppb - 1 {
            return Ok(false);
        }
        self.c.gc_runs += 1;
        self.move_valid_pages(flash, v)?;
        match flash.erase(Cause::Gc, self.ba(v)) {
            Ok(()) => {}
            Err(FlashError::EraseFailed) if self.mutant != Mutant::ReusesFailedBlock => {
                self.retire_block(v); // it held nothing valid any more (see `media.rs`)
                return Ok(true);
            }
            Err(FlashError::EraseFailed) => {} // BUG (deliberate): back to the free pool
            Err(e) => return Err(e.into()),
        }
        self.state[v as usize] = State::Free { dirty: false };
        self.free[u].push_back(v);
        Ok(true)
    }
}
