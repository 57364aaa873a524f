//! Garbage collection and static wear leveling of the data plane (see the
//! module docs of [`super`]).

use super::lost::OOB_LOST;
use super::{decode_oob, encode_oob, DataPlane, GroupState, Mapper, OOB_BYTES, OOB_DATA, OOB_KIND_MASK};
use crate::flash::{Cause, Flash, FlashError};
use crate::ftl::mutants::Mutant;
use crate::ftl::{FtlError, IdleOutcome};
use crate::nand::{BlockAddr, PageAddr};

fn page(ppn: u32) -> PageAddr {
    PageAddr(u64::from(ppn))
}

/// Pages whose NAND state one prefetch covers: a 64-byte cache line holds
/// four 16-byte page slots (and more of the spare bytes the data plane
/// stores).
const PAGES_PER_PREFETCH: usize = 4;

/// The bits of bitmap word `word` (pages `64 × word ..`) that stand for
/// pages `first .. end`.
fn word_mask(word: u32, first: u32, end: u32) -> u64 {
    let base = word * 64;
    let low = first.saturating_sub(base).min(64);
    let high = (end - base).min(64);
    let below_high = if high == 64 { u64::MAX } else { (1u64 << high) - 1 };
    let from_low = if low == 64 { 0 } else { u64::MAX << low };
    below_high & from_low
}

impl DataPlane {
    /// Collect victims on `unit` until its free groups are above the
    /// foreground threshold, or collecting stops gaining groups.
    ///
    /// Returns [`FtlError::NoSpace`] when collecting makes no progress: when
    /// the unit's valid data leaves its victims almost no invalid pages,
    /// each victim's copies can take as many groups as erasing it frees, or
    /// more, and the free count goes up and down without ever rising; the
    /// rule below on consecutive stalls never fires then, and without this
    /// the pass would collect forever.
    pub fn foreground_gc<M: Mapper>(&mut self, flash: &mut dyn Flash, m: &mut M, unit: usize) -> Result<(), FtlError> {
        let mut stalls = 0;
        // The most free groups this pass has reached, and the victims
        // collected since: the count can rise above the threshold only by
        // new highs, so a pass that sets none in a unit's worth of victims
        // (twice over) is not going to. Below the threshold that is the
        // unit running out of space; at it, GC holds its ground and the
        // write goes on, as after a run of stalls.
        let (mut best, mut since_best) = (self.units[unit].free.len(), 0u32);
        while self.needs_gc(unit) {
            m.before_gc_step(self, flash)?;
            if !self.needs_gc(unit) {
                break; // GC the map ran while making room freed enough
            }
            let before = self.units[unit].free.len();
            if !self.collect(flash, m, unit, false)? {
                break;
            }
            // A fully valid victim (FIFO takes them) moves data without
            // freeing a group; give up after a unit's worth of those.
            let free = self.units[unit].free.len();
            stalls = if free > before { 0 } else { stalls + 1 };
            if stalls > self.geometry.blocks_per_plane() {
                break;
            }
            (best, since_best) = if free > best { (free, 0) } else { (best, since_best + 1) };
            if since_best > 2 * self.geometry.blocks_per_plane() {
                if self.units[unit].free_blocks >= self.fg_threshold * self.layout.planes_per_group {
                    break; // holding its reserve: the write may use it, as after stalls
                }
                // Below the threshold, but the write can still open a group
                // and leave one victim's copies theirs: the victims are full
                // because the unit's spare room sits in its open groups (one
                // per stream: with DAC's four regions and the metadata
                // stream, five partly written groups hold more room than the
                // threshold asks free). Rewrites of the host data will
                // invalidate pages of the sealed groups, and GC gains again;
                // failing here reported `ftl_out_of_space` on a drive whose
                // live data fits (hunt: dftl, seed 1003).
                if self.units[unit].free_blocks > self.victim_copy_groups() * self.layout.planes_per_group {
                    break;
                }
                return Err(FtlError::NoSpace(format!(
                    "garbage collection on plane unit {unit} makes no progress: {since_best} victims collected \
                     without freeing a block ({} free, {} needed); the valid data fills the unit",
                    free,
                    self.fg_threshold + 1
                )));
            }
        }
        self.maybe_level_wear(flash, m, unit)
    }

    /// One step of background work: collect a victim on the unit with the
    /// fewest free groups while that is below the background threshold.
    pub fn idle_step<M: Mapper>(&mut self, flash: &mut dyn Flash, m: &mut M) -> Result<IdleOutcome, FtlError> {
        if self.bg_threshold == 0 {
            return Ok(IdleOutcome::Nothing);
        }
        m.before_gc_step(self, flash)?;
        let mut neediest = None::<(usize, usize)>;
        for (unit, u) in self.units.iter().enumerate() {
            if neediest.is_none_or(|(_, free)| u.free.len() < free) {
                neediest = Some((unit, u.free.len()));
            }
        }
        let Some((unit, free)) = neediest else {
            return Ok(IdleOutcome::Nothing);
        };
        if free as u32 >= self.bg_threshold || !self.collect(flash, m, unit, true)? {
            return Ok(IdleOutcome::Nothing);
        }
        self.maybe_level_wear(flash, m, unit)?;
        Ok(IdleOutcome::Worked)
    }

    /// Collect until at least `needed` groups are free over all units
    /// (`what` names the purpose in the error).
    pub fn make_free_groups<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        needed: usize,
        what: &str,
    ) -> Result<(), FtlError> {
        let units = self.units.len();
        let mut idle_rounds = 0;
        let mut unit = 0;
        while self.total_free_groups() < needed {
            m.before_gc_step(self, flash)?;
            let was_in_gc = std::mem::replace(&mut self.in_gc, true);
            let worked = self.collect(flash, m, unit, false);
            self.in_gc = was_in_gc;
            idle_rounds = if worked? { 0 } else { idle_rounds + 1 };
            if idle_rounds > units {
                return Err(FtlError::NoSpace(format!("cannot free {needed} blocks for {what}")));
            }
            unit = (unit + 1) % units;
        }
        Ok(())
    }

    /// Take a free group of `unit` for the FTL's own use (checkpoints,
    /// logs), collecting on the unit first until it can spare one and keep
    /// the GC reserve (see [`DataPlane::spares_a_group`]). None when
    /// collecting cannot get it there (the caller tries another unit).
    pub fn take_spare_group<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        unit: usize,
    ) -> Result<Option<u32>, FtlError> {
        let mut victims = 0;
        while !self.spares_a_group(unit) {
            if victims > 2 * self.geometry.blocks_per_plane() {
                return Ok(None); // collecting gains nothing here
            }
            victims += 1;
            m.before_gc_step(self, flash)?;
            let was_in_gc = std::mem::replace(&mut self.in_gc, true);
            let worked = self.collect(flash, m, unit, false);
            self.in_gc = was_in_gc;
            if !worked? {
                return Ok(None);
            }
        }
        Ok(self.take_free_group(unit))
    }

    /// Collect one victim on `unit`. Returns false if there was none worth taking.
    pub(super) fn collect<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        unit: usize,
        background: bool,
    ) -> Result<bool, FtlError> {
        let Some(victim) = self.policy.select(unit as u32, &self.table) else {
            return Ok(false);
        };
        // Both count the pages of missing blocks (see `DataPlane::table`).
        let valid = self.table.valid[victim as usize];
        let capacity = self.table.pages_per_block;
        // Background GC skips victims not worth the work (FEMU's rule); in
        // the foreground a victim is taken whatever it holds, as long as its
        // pages have somewhere to go.
        let skip = if background {
            let min_invalid = (self.opts.gc_background_min_invalid_fraction * f64::from(capacity)).ceil() as u32;
            capacity - valid < min_invalid.max(1)
        } else {
            valid == capacity && self.units[unit].free.is_empty()
        };
        if skip {
            self.policy.insert(victim, &self.table);
            return Ok(false);
        }
        self.counters.gc_runs += 1;
        if background {
            self.counters.gc_background_runs += 1;
        }
        // The FTL's work before the erase (dftl: writing back the trims
        // whose newest record the victim holds) is part of the cycle: its
        // pages must not start a nested foreground GC. One did, and took a
        // victim of its own before this one was erased, and so on down:
        // each level held a victim out of both the policy and the free
        // groups while opening a group for its write-back, until a unit
        // with 14 of its groups emptied and not yet erased had no free
        // group (hunt: dftl, seed 188, `ftl_out_of_space`).
        let was_in_gc = std::mem::replace(&mut self.in_gc, true);
        let result =
            self.move_valid_pages(flash, m, unit, victim, Cause::Gc).and_then(|()| m.before_erase(self, flash, victim));
        self.in_gc = was_in_gc;
        result?;
        self.erase_to_free(flash, victim, Cause::Gc)?;
        Ok(true)
    }

    /// Groups one victim's copies may open: one per stream they go to
    /// (DAC moves a victim's pages to one region, two-stream splits them
    /// over two). A foreground pass that stalls below its threshold lets
    /// the write go on while more than this many groups are free.
    fn victim_copy_groups(&self) -> u32 {
        u32::from(self.hot_cold.gc_streams().clamp(1, 2))
    }

    /// Erase an emptied group (all its members at once) and return it to
    /// its unit's free groups.
    pub fn erase_to_free(&mut self, flash: &mut dyn Flash, group: u32, cause: Cause) -> Result<(), FtlError> {
        let members = self.layout.members(group);
        let erased = if let [block] = members {
            flash.erase(cause, BlockAddr(u64::from(*block)))
        } else {
            let mut blocks = [BlockAddr(0); super::MAX_PLANES_PER_GROUP];
            for (slot, &b) in blocks.iter_mut().zip(members) {
                *slot = BlockAddr(u64::from(b));
            }
            flash.erase_multi(cause, &blocks[..members.len()])
        };
        match erased {
            Ok(()) => {}
            Err(FlashError::EraseFailed) if self.mutant != Mutant::ReusesFailedBlock => {
                return self.retire_after_erase_failure(flash, group, cause);
            }
            Err(FlashError::EraseFailed) => {} // BUG (deliberate): freed all the same
            Err(e) => return Err(e.into()),
        }
        self.table.erase_count[group as usize] += 1;
        self.wear.erased(group, &self.table);
        self.state[group as usize] = GroupState::Free;
        self.push_free(group);
        Ok(())
    }

    /// Static wear leveling: after GC on `unit`, move the data of the group
    /// the policy names (if any) onto a worn free group. Runs only when the
    /// unit is above its GC threshold, so the group it opens for the moved
    /// data still leaves GC the groups it needs.
    fn maybe_level_wear<M: Mapper>(&mut self, flash: &mut dyn Flash, m: &mut M, unit: usize) -> Result<(), FtlError> {
        if !self.wear.relocates() || self.in_gc || self.needs_gc(unit) {
            return Ok(());
        }
        m.before_gc_step(self, flash)?;
        if self.needs_gc(unit) {
            return Ok(()); // making room used the groups to spare
        }
        let groups = self.layout.groups_of_unit(unit as u32);
        let state = &self.state;
        let movable = |g: u32| state[g as usize] == GroupState::Sealed;
        let Some(group) = self.wear.relocation(unit as u32, groups, &self.table, &movable) else {
            return Ok(());
        };
        self.policy.remove(group, &self.table);
        self.counters.wl_relocations += 1;
        self.counters.wl_pages_moved += u64::from(self.table.valid[group as usize] - self.fixed_pages(group));
        self.in_gc = true;
        let result = self.move_valid_pages(flash, m, unit, group, Cause::WearLeveling);
        self.in_gc = false;
        result?;
        // As for a GC victim: the FTL may have to persist something first
        // (page: trims whose newest copy the group holds).
        m.before_erase(self, flash, group)?;
        self.erase_to_free(flash, group, Cause::WearLeveling)
    }

    /// Copy the valid pages of `victim` (GC or wear leveling) and remap them.
    pub(super) fn move_valid_pages<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        unit: usize,
        victim: u32,
        cause: Cause,
    ) -> Result<(), FtlError> {
        // Gather the victim's valid pages first, reading each one's index
        // from its OOB (no reverse map is kept in DRAM), and prefetch the
        // map entries they will update: independent loads the CPU overlaps,
        // instead of one cache miss after another while copying.
        if Some(self.group_stream[victim as usize]) == self.meta_stream {
            self.counters.gc_meta_victims += 1;
        }
        self.note_victim_path(victim, cause);
        let mut batch = std::mem::take(&mut self.gc_batch);
        let result = loop {
            batch.clear();
            let result = self.gather_valid(flash, m, victim, cause, &mut batch);
            match result.and_then(|()| self.copy_batch(flash, m, unit, victim, cause, &mut batch)) {
                // A copy failed: retire where it went, gather what is left
                // and copy it elsewhere (see retire.rs).
                Err(FtlError::Flash(FlashError::ProgramFailed)) if self.mutant != Mutant::KeepsFailedCopy => {
                    if let Err(e) = self.retire_failed_groups(flash, m) {
                        break Err(e);
                    }
                }
                r => break r,
            }
        };
        self.gc_batch = batch;
        result
    }

    /// Count which kind of victim this is ([`super::paths`]), from the
    /// valid bits as GC finds the victim (once per victim: a retry after a
    /// failed copy is the same victim), a word of bits at a time.
    fn note_victim_path(&mut self, victim: u32, cause: Cause) {
        let width = self.layout.width(victim);
        let (mut valid, mut last_valid) = (0usize, false);
        for i in 0..width {
            let first = self.layout.member(victim, i) * self.ppb;
            let end = first + self.ppb;
            valid += (first / 64..end.div_ceil(64))
                .map(|w| (self.valid_bits[w as usize] & word_mask(w, first, end)).count_ones() as usize)
                .sum::<usize>();
            last_valid |= self.is_valid(end - 1);
        }
        let narrow = self.layout.planes_per_group > 1 && width < self.layout.planes_per_group;
        let pages = (width * self.ppb) as usize;
        self.paths.victim(cause == Cause::WearLeveling, valid, pages, last_valid, narrow);
    }

    fn gather_valid<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        victim: u32,
        cause: Cause,
        batch: &mut Vec<(u32, u32, u8, u8)>,
    ) -> Result<(), FtlError> {
        let from = self.group_stream[victim as usize];
        // The victim's pages were programmed long ago: ask for all their
        // state at once, so the misses overlap instead of coming one by one.
        for i in 0..self.layout.width(victim) {
            let first = self.layout.member(victim, i) * self.ppb;
            for ppn in (first..first + self.ppb).step_by(PAGES_PER_PREFETCH) {
                flash.prefetch_page(page(ppn));
            }
        }
        let mut oob = [0u8; OOB_BYTES];
        for i in 0..self.layout.width(victim) {
            let first = self.layout.member(victim, i) * self.ppb;
            let short = self.mutant == Mutant::GcSkipsLastValidPage
                || self.mutant == Mutant::WearLevelingDropsLastPage && cause == Cause::WearLeveling;
            let end = first + self.ppb - u32::from(short);
            // The valid bits a word at a time: a victim's pages are
            // valid and invalid at random, a branch per page mispredicted.
            for word in first / 64..end.div_ceil(64) {
                let mut bits = self.valid_bits[word as usize] & word_mask(word, first, end);
                while bits != 0 {
                    let src = word * 64 + bits.trailing_zeros();
                    bits &= bits - 1;
                    flash.read_oob(cause, page(src), &mut oob)?;
                    let (kind, index, _) = decode_oob(&oob);
                    m.prefetch_entry(index);
                    let kind = kind & OOB_KIND_MASK;
                    batch.push((src, index, kind, self.copy_stream(kind, index, from, cause)));
                }
            }
        }
        Ok(())
    }

    /// The stream a moved page of `kind` and `index`, found on stream
    /// `from`, is copied to (a pure function of its arguments and the
    /// hot/cold policy's state, which copying does not change).
    fn copy_stream(&mut self, kind: u8, index: u32, from: u8, cause: Cause) -> u8 {
        if kind != OOB_DATA && kind != OOB_LOST {
            self.meta_stream()
        } else if cause == Cause::WearLeveling {
            self.wl_stream
        } else {
            self.hot_cold.gc_stream(index, from)
        }
    }

    fn copy_batch<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        unit: usize,
        victim: u32,
        cause: Cause,
        batch: &mut [(u32, u32, u8, u8)],
    ) -> Result<(), FtlError> {
        if self.layout.planes_per_group > 1 {
            let narrow = self.layout.width(victim) < self.layout.planes_per_group;
            if self.mutant == Mutant::NarrowGroupGcDropsLonePage && narrow && batch.len() == 1 {
                return Ok(()); // BUG (deliberate): the lone page is erased with the victim
            }
            return self.copy_batch_rows(flash, m, unit, victim, cause, batch);
        }
        for &(src, index, kind, stream) in batch.iter() {
            let dst = self.alloc_page(flash, m, unit, stream)?;
            let oob = encode_oob(kind | stream << 4, index, self.next_seq());
            self.summary_entry(flash, dst, &oob)?;
            let lost = match self.copy_page(flash, cause, kind, src, dst, &oob) {
                // BUG (deliberate): the copy is remapped where it failed.
                Err(FtlError::Flash(FlashError::ProgramFailed)) if self.mutant == Mutant::KeepsFailedCopy => false,
                r => r?,
            };
            if lost {
                self.page_lost(m, victim, index, src, dst);
            } else {
                self.page_moved(m, victim, kind, index, src, dst);
            }
            self.write_due_summary_or_retire(flash, m)?;
        }
        Ok(())
    }

    /// A valid page of `victim` was copied from `src` to `dst` in the same
    /// unit: remap it (the unit's valid count is unchanged).
    #[inline(always)]
    pub(super) fn page_moved<M: Mapper>(&mut self, m: &mut M, victim: u32, kind: u8, index: u32, src: u32, dst: u32) {
        self.valid_bits[(src / 64) as usize] &= !(1 << (src % 64));
        self.table.valid[victim as usize] -= 1;
        // (A lost slot holds a logical page, as data does.)
        m.relocate(if kind == OOB_LOST { OOB_DATA } else { kind }, index, src, dst);
        self.commit_page(dst);
    }

    /// Copy one page: by copyback (same plane, no channel transfer) or by
    /// reading it out and programming it back. Returns true if the read
    /// was uncorrectable (the page is lost: see lost.rs).
    #[inline(always)]
    fn copy_page(
        &mut self,
        flash: &mut dyn Flash,
        cause: Cause,
        kind: u8,
        src: u32,
        dst: u32,
        oob: &[u8; OOB_BYTES],
    ) -> Result<bool, FtlError> {
        if self.opts.copyback {
            flash.copyback(cause, page(src), page(dst), Some(oob))?;
        } else if kind == OOB_DATA || kind == OOB_LOST {
            let buf = self.gc_buf.expect("gc buffer allocated at power-on");
            let lost = self.read_gc_copy(flash, cause, src, 0)?;
            let oob = if lost { self.lost_copy_oob(dst, oob) } else { *oob };
            flash.program(cause, page(dst), buf, 0, &oob)?;
            return Ok(lost);
        } else {
            self.move_meta_page(flash, cause, src, dst, oob)?;
        }
        Ok(false)
    }

    /// Move a page of FTL metadata by reading and programming its bytes.
    pub(super) fn move_meta_page(
        &mut self,
        flash: &mut dyn Flash,
        cause: Cause,
        src: u32,
        dst: u32,
        oob: &[u8],
    ) -> Result<(), FtlError> {
        let mut bytes = std::mem::take(&mut self.meta_page);
        bytes.resize(self.geometry.page_size_bytes() as usize, 0xff);
        let r = flash
            .read_meta(cause, page(src), &mut bytes, &mut [])
            .and_then(|()| flash.program_meta(cause, page(dst), &bytes, oob));
        self.meta_page = bytes;
        Ok(r?)
    }
}

#[cfg(test)]
mod tests {
    use super::word_mask;

    /// The mask selects exactly the pages of the range that fall in the
    /// word (the per-page model).
    #[test]
    fn word_masks_cover_exactly_the_range() {
        for (first, end) in [(0u32, 64u32), (64, 128), (3, 67), (10, 20), (100, 300), (60, 64), (127, 129)] {
            for word in first / 64..end.div_ceil(64) {
                let mask = word_mask(word, first, end);
                for bit in 0..64 {
                    let page = word * 64 + bit;
                    assert_eq!(mask >> bit & 1 == 1, (first..end).contains(&page), "page {page} of {first}..{end}");
                }
            }
        }
    }
}
