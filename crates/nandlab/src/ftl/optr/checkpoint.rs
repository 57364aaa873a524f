//! optr's metadata log (coalescing and trim records) and its checkpoints:
//! incremental ones in the log, full ones in two areas used in turn, each
//! ended by a seal page (see the module docs of `optr`).

use super::*;
use crate::ftl::kit::wire::{array_mut, view_mut, U32Le, U64Le};

impl OptrFtl {
    /// The next page of the metadata log (None when it is full, or when
    /// erasing its next block failed: see `media.rs`).
    pub(super) fn log_page(&mut self, flash: &mut dyn Flash) -> Result<Option<u32>, FtlError> {
        if self.log_pos >= self.log_pages_total() {
            return Ok(None);
        }
        let (i, p) = ((self.log_pos / self.ppb) as usize, self.log_pos % self.ppb);
        if p == 0 && !self.log_fresh[i] {
            match flash.erase(Cause::Metadata, self.ba(self.log[i])) {
                Ok(()) => {}
                Err(FlashError::EraseFailed) => {
                    self.metadata_block_failed(flash, self.log[i])?;
                    return Ok(None);
                }
                Err(e) => return Err(e.into()),
            }
            self.log_fresh[i] = true;
        }
        self.log_pos += 1;
        Ok(Some(self.log[i] * self.ppb + p))
    }

    pub(super) fn log_pages_total(&self) -> u32 {
        self.log.len() as u32 * self.ppb
    }

    pub(super) fn log_pages_left(&self) -> u32 {
        self.log_pages_total().saturating_sub(self.log_pos)
    }

    /// Write a metadata page to the log (`None`: the log is full, or one
    /// of its blocks failed and the next checkpoint must be a full one).
    pub(super) fn log_write(&mut self, flash: &mut dyn Flash, kind: u8, d: &[u8]) -> Result<Option<()>, FtlError> {
        let Some(ppn) = self.log_page(flash)? else { return Ok(None) };
        let seq = self.meta_seq;
        self.meta_seq += 1;
        match flash.program_meta(Cause::Metadata, self.pa(ppn), d, &oob(kind, seq, 0, 0)) {
            Ok(()) => Ok(Some(())),
            // BUG (deliberate): taken as written; the log goes on programming the failed block.
            Err(FlashError::ProgramFailed) if self.mutant == Mutant::KeepsFailedMetaProgram => Ok(Some(())),
            Err(FlashError::ProgramFailed) => {
                self.metadata_block_failed(flash, ppn / self.ppb)?;
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    pub(super) fn write_records(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        if self.records.is_empty() {
            return Ok(());
        }
        let per = (self.g.page_size_bytes() as usize - HEADER) / RECORD_BYTES;
        let records = std::mem::take(&mut self.records);
        for chunk in records.chunks(per) {
            let mut d = vec![0xffu8; self.g.page_size_bytes() as usize];
            put_header(&mut d, &[chunk.len() as u32]);
            for (slot, r) in array_mut::<RecordBytes>(&mut d, HEADER, chunk.len()).iter_mut().zip(chunk) {
                *slot = r.emit();
            }
            if self.log_write(flash, K_RECORDS, &d)?.is_none() {
                // The log is full (or failed): a checkpoint (which makes every record moot) instead.
                return self.checkpoint(flash);
            }
            self.c.record_pages += 1;
        }
        Ok(())
    }

    /// The seal: commit point, next write id, where each chain continues,
    /// then the map entries it carries (none here; see [`Self::write_incremental`]).
    pub(super) fn seal_bytes(&self, seq: u64) -> Vec<u8> {
        let mut d = vec![0xffu8; self.g.page_size_bytes() as usize];
        *view_mut(&mut d) = SealHeader {
            magic: U32Le::new(MAGIC),
            seq: U64Le::new(seq),
            commit: U64Le::new(self.next_wid - 1),
            next_wid: U64Le::new(self.next_wid),
            units: U32Le::new(self.units),
        };
        for u in 0..self.units as usize {
            // No chains yet (during recovery): nothing to scan.
            let none = Chain { block: NONE, page: 0, summary: Vec::new() };
            let (h, g) = (self.host.get(u).unwrap_or(&none), self.gc.get(u).unwrap_or(&none));
            *view_mut(&mut d[chain_ends_at(u)..]) = ChainEnds {
                host_block: U32Le::new(h.block),
                host_page: U32Le::new(h.page),
                gc_block: U32Le::new(g.block),
                gc_page: U32Le::new(g.page),
            };
        }
        *view_mut(&mut d[seal_entries_at(self.units)..]) = U32Le::new(0);
        d
    }

    /// Map entries a seal page carries after its header.
    pub(super) fn seal_capacity(&self) -> u64 {
        ((self.g.page_size_bytes() as usize - seal_entries_at(self.units) - 4) / 8) as u64
    }

    /// Pages of an incremental checkpoint of the dirty map entries: entry
    /// pages, and the seal with the last entries.
    pub(super) fn incremental_pages(&self) -> u32 {
        let per = ((self.g.page_size_bytes() as usize - HEADER) / 8) as u64;
        1 + self.dirty_count.saturating_sub(self.seal_capacity()).div_ceil(per) as u32
    }

    /// A checkpoint (the cache must be flushed): incremental if the log has
    /// room, else full. Opens a new epoch: every block written before it may
    /// now be reclaimed.
    pub(super) fn checkpoint(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.records.clear(); // they concern requests the checkpoint now holds
        let pages = self.incremental_pages();
        let incremental =
            !self.full_pending && pages <= self.log_pages_left() && pages <= Self::full_pages_of(&self.g, self.lpns);
        // (An incremental checkpoint whose log block failed is written again as a full one.)
        if !incremental || !self.write_incremental(flash)? {
            self.write_full(flash)?;
        }
        self.dirty_map.fill(0);
        self.dirty_count = 0;
        self.epoch += 1;
        Ok(())
    }

    /// The map entries changed since the last checkpoint, in entry pages
    /// and, the last ones, in the seal page itself: a page program is
    /// atomic to recovery (a torn page does not read), so the seal needs no
    /// page of its own. `false` when a log block failed (see `media.rs`):
    /// the checkpoint is not written.
    pub(super) fn write_incremental(&mut self, flash: &mut dyn Flash) -> Result<bool, FtlError> {
        let per = (self.g.page_size_bytes() as usize - HEADER) / 8;
        let mut in_pages = self.dirty_count.saturating_sub(self.seal_capacity());
        let mut d = vec![0xffu8; self.g.page_size_bytes() as usize];
        let mut in_seal: Vec<(u32, u32)> = Vec::new();
        let mut n = 0usize;
        for word in 0..self.dirty_map.len() {
            let mut bits = self.dirty_map[word];
            while bits != 0 {
                let lpn = word as u32 * 64 + bits.trailing_zeros();
                bits &= bits - 1;
                if in_pages == 0 {
                    in_seal.push((lpn, self.l2p[lpn as usize]));
                    continue;
                }
                *view_mut(&mut d[HEADER + 8 * n..]) =
                    MapEntry { lpn: U32Le::new(lpn), ppn: U32Le::new(self.l2p[lpn as usize]) };
                (n, in_pages) = (n + 1, in_pages - 1);
                if n == per || in_pages == 0 {
                    if !self.write_inc_page(flash, &mut d, n)? {
                        return Ok(false);
                    }
                    n = 0;
                }
            }
        }
        let mut seal = self.seal_bytes(self.meta_seq);
        let at = seal_entries_at(self.units);
        if self.mutant == Mutant::SealDropsEntries {
            in_seal.clear();
        }
        *view_mut(&mut seal[at..]) = U32Le::new(in_seal.len() as u32);
        for (slot, &(lpn, ppn)) in array_mut::<MapEntry>(&mut seal, at + 4, in_seal.len()).iter_mut().zip(&in_seal) {
            *slot = MapEntry { lpn: U32Le::new(lpn), ppn: U32Le::new(ppn) };
        }
        if self.log_write(flash, K_SEAL, &seal)?.is_none() {
            return Ok(false);
        }
        self.c.seal_pages += 1;
        Ok(true)
    }

    /// An entry page of an incremental checkpoint (`false`: a log block failed).
    pub(super) fn write_inc_page(&mut self, flash: &mut dyn Flash, d: &mut [u8], n: usize) -> Result<bool, FtlError> {
        put_header(d, &[n as u32]);
        if self.log_write(flash, K_INC, d)?.is_none() {
            return Ok(false);
        }
        self.c.inc_pages += 1;
        d.fill(0xff);
        Ok(true)
    }

    /// A full checkpoint into the older area, sealed; then the log
    /// restarts. A block of the area that fails is retired and the
    /// checkpoint written again in the new layout (see `media.rs`).
    pub(super) fn write_full(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        loop {
            match self.try_write_full(flash) {
                Ok(()) => return Ok(()),
                Err((block, FlashError::EraseFailed | FlashError::ProgramFailed))
                    if self.mutant != Mutant::KeepsFailedMetaProgram =>
                {
                    self.metadata_block_failed(flash, block)?
                }
                Err((_, e)) => return Err(e.into()),
            }
        }
    }

    /// [`Self::write_full`] once; an error names the block it failed on.
    fn try_write_full(&mut self, flash: &mut dyn Flash) -> Result<(), (u32, FlashError)> {
        let target = 1 - self.full_area;
        for i in 0..self.area[target].len() {
            let b = self.area[target][i];
            flash.erase(Cause::Metadata, self.ba(b)).map_err(|e| (b, e))?;
        }
        let per = (self.g.page_size_bytes() as usize - HEADER) / 4;
        let pages = Self::full_pages_of(&self.g, self.lpns);
        let seq = self.meta_seq;
        self.meta_seq += 1;
        let mut d = vec![0xffu8; self.g.page_size_bytes() as usize];
        for i in 0..pages as usize {
            d.fill(0xff);
            let entries = &self.l2p[(i * per).min(self.l2p.len())..((i + 1) * per).min(self.l2p.len())];
            put_header(&mut d, &[i as u32, entries.len() as u32]);
            for (slot, &e) in array_mut::<U32Le>(&mut d, HEADER, entries.len()).iter_mut().zip(entries) {
                *slot = U32Le::new(e);
            }
            let ppn = self.area_page(target, i as u32);
            self.program_area_page(flash, ppn, &d, &oob(K_FULL, seq, i as u32, 0))?;
            self.c.full_pages += 1;
        }
        let seal = self.seal_bytes(seq);
        let ppn = self.area_page(target, pages);
        self.program_area_page(flash, ppn, &seal, &oob(K_SEAL, seq, 0, 0))?;
        self.c.full_pages += 1;
        self.full_area = target;
        self.full_pending = false;
        // The log's content is older than this checkpoint: reuse it from the start.
        self.log_pos = 0;
        self.log_fresh.fill(false);
        Ok(())
    }

    /// Program a page of a full-checkpoint area; an error names its block.
    fn program_area_page(&self, flash: &mut dyn Flash, ppn: u32, d: &[u8], o: &[u8]) -> Result<(), (u32, FlashError)> {
        match flash.program_meta(Cause::Metadata, self.pa(ppn), d, o) {
            // BUG (deliberate): taken as written; the area is erased and programmed again later.
            Err(FlashError::ProgramFailed) if self.mutant == Mutant::KeepsFailedMetaProgram => Ok(()),
            r => r.map_err(|e| (ppn / self.ppb, e)),
        }
    }

    pub(super) fn area_page(&self, area: usize, i: u32) -> u32 {
        self.area[area][(i / self.ppb) as usize] * self.ppb + i % self.ppb
    }
}
