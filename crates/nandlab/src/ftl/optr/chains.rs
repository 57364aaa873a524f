//! optr's block chains: each plane appends host pages to one chain of
//! blocks and GC copies to another; a full block's last page is its
//! summary page, listing its pages' recovery information and naming the
//! next block of the chain, so recovery follows chains instead of
//! scanning the drive (see the module docs of `optr`).

use super::*;
use crate::ftl::kit::wire::{array_mut, U32Le, U64Le};

impl OptrFtl {
    /// Free lists from block states; every chain starts in a fresh block.
    pub(super) fn start_chains(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        // Erased blocks first, so new chains need no erase.
        for dirty in [false, true] {
            for b in 0..self.g.blocks() {
                if self.state[b as usize] == (State::Free { dirty }) {
                    let u = self.unit_of_block(b);
                    self.free[u].push_back(b);
                }
            }
        }
        self.host.clear();
        self.gc.clear();
        for u in 0..self.units as usize {
            let h = self.take_block(flash, u)?;
            let c = self.take_block(flash, u)?;
            self.host.push(Chain { block: h, page: 0, summary: Vec::new() });
            self.gc.push(Chain { block: c, page: 0, summary: Vec::new() });
        }
        Ok(())
    }

    /// A free block of unit `u`, erased.
    pub(super) fn take_block(&mut self, flash: &mut dyn Flash, u: usize) -> Result<u32, FtlError> {
        let b = self.free[u].pop_front().ok_or_else(|| self.no_free_block(u))?;
        if self.state[b as usize] == (State::Free { dirty: true }) {
            match flash.erase(Cause::Gc, self.ba(b)) {
                Ok(()) => {}
                Err(FlashError::EraseFailed) => {
                    if self.mutant == Mutant::ReusesFailedBlock {
                        self.free[u].push_back(b); // BUG (deliberate): taken again, erased again
                    } else {
                        self.retire_block(b); // see `media.rs`
                    }
                    return self.take_block(flash, u);
                }
                Err(FlashError::BadBlock) => {
                    self.state[b as usize] = State::Bad;
                    return self.take_block(flash, u);
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.state[b as usize] = State::Open;
        self.epoch_of[b as usize] = self.epoch;
        Ok(b)
    }

    /// The error of unit `u` out of free blocks, with its bad blocks
    /// (factory and retired) counted: each plane holds its own logical
    /// pages, so one plane short of blocks stops the drive.
    #[cold]
    fn no_free_block(&self, u: usize) -> FtlError {
        let bpp = self.g.blocks_per_plane();
        let bad = (0..bpp).filter(|&i| self.state[self.g.block_addr(u as u32, i).0 as usize] == State::Bad).count();
        let what = if bad > 0 { format!(" ({bad} of its {bpp} blocks are bad)") } else { String::new() };
        FtlError::NoSpace(format!("optr: plane {u} has no free block{what}"))
    }

    /// Append a data page to unit `u`'s host or GC chain; returns its ppn.
    /// A failed program retires the chain's block and programs the page
    /// again in the next one (see `media.rs`).
    pub(super) fn append(
        &mut self,
        flash: &mut dyn Flash,
        u: usize,
        gc: bool,
        src: Result<(BufId, u32), u32>,
        wid: u64,
        size: u32,
        lpn: u32,
    ) -> Result<u32, FtlError> {
        let (kind, cause) = if gc { (K_GC, Cause::Gc) } else { (K_DATA, Cause::Host) };
        let o = oob(kind, wid, size, lpn);
        let (block, ppn) = loop {
            let (block, page) = {
                let ch = if gc { &self.gc[u] } else { &self.host[u] };
                (ch.block, ch.page)
            };
            let ppn = block * self.ppb + page;
            let r = match src {
                Ok((buf, at)) => flash.program(cause, self.pa(ppn), buf, at, &o),
                Err(from) => flash.copyback(cause, self.pa(from), self.pa(ppn), Some(&o)),
            };
            match r {
                Ok(()) => break (block, ppn),
                Err(FlashError::ProgramFailed) if self.mutant == Mutant::KeepsFailedProgram => {
                    // BUG (deliberate): the block is retired, but the page stays mapped where it failed.
                    self.retire_chain_block(flash, u, gc)?;
                    return Ok(ppn);
                }
                Err(FlashError::ProgramFailed) => self.retire_chain_block(flash, u, gc)?,
                Err(e) => return Err(e.into()),
            }
        };
        self.epoch_of[block as usize] = self.epoch;
        let ch = if gc { &mut self.gc[u] } else { &mut self.host[u] };
        ch.page += 1;
        ch.summary.push((wid, size | if gc { TRIM_FLAG } else { 0 }, lpn));
        if ch.page == self.ppb - 1 {
            self.close_block(flash, u, gc)?;
        }
        Ok(ppn)
    }

    /// Write the summary page of a full chain block, naming the next block.
    pub(super) fn close_block(&mut self, flash: &mut dyn Flash, u: usize, gc: bool) -> Result<(), FtlError> {
        let next = self.take_block(flash, u)?;
        let ch = if gc { &mut self.gc[u] } else { &mut self.host[u] };
        let (block, summary) = (ch.block, std::mem::take(&mut ch.summary));
        *ch = Chain { block: next, page: 0, summary: Vec::with_capacity(self.ppb as usize) };
        let mut d = vec![0xffu8; self.g.page_size_bytes() as usize];
        put_header(&mut d, &[next, summary.len() as u32]);
        let fit = summary.len().min((d.len() - HEADER) / std::mem::size_of::<SummaryEntry>());
        for (slot, &(w, s, l)) in array_mut::<SummaryEntry>(&mut d, HEADER, fit).iter_mut().zip(&summary) {
            *slot = SummaryEntry { wid: U64Le::new(w), size: U32Le::new(s), lpn: U32Le::new(l) };
        }
        let ppn = block * self.ppb + self.ppb - 1;
        match flash.program_meta(Cause::Metadata, self.pa(ppn), &d, &oob(K_SUMMARY, 0, next, 0)) {
            Ok(()) => {}
            // BUG (deliberate): the block is sealed as if its summary were there; GC erases it later.
            Err(FlashError::ProgramFailed) if self.mutant == Mutant::KeepsFailedMetaProgram => {}
            Err(FlashError::ProgramFailed) => {
                // The block is full of data but bad: retired, its data moved out (see `media.rs`).
                self.retire_block(block);
                return self.move_valid_pages(flash, block);
            }
            Err(e) => return Err(e.into()),
        }
        self.c.summary_pages += 1;
        self.state[block as usize] = State::Sealed;
        Ok(())
    }

    pub(super) fn set_map(&mut self, lpn: u32, ppn: u32) {
        let old = self.l2p[lpn as usize];
        if old != UNMAPPED {
            self.valid[(old / 64) as usize] &= !(1 << (old % 64));
            self.valid_count[(old / self.ppb) as usize] -= 1;
        }
        if ppn != UNMAPPED {
            self.valid[(ppn / 64) as usize] |= 1 << (ppn % 64);
            self.valid_count[(ppn / self.ppb) as usize] += 1;
        }
        self.l2p[lpn as usize] = ppn;
        let bit = 1u64 << (lpn % 64);
        if self.dirty_map[(lpn / 64) as usize] & bit == 0 {
            self.dirty_map[(lpn / 64) as usize] |= bit;
            self.dirty_count += 1;
        }
    }
}
