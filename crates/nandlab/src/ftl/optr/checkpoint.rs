//! optr's metadata log (coalescing and trim records) and its checkpoints:
//! incremental ones in the log, full ones in two areas used in turn, each
//! ended by a seal page (see the module docs of `optr`).

use super::*;
use crate::ftl::kit::wire::{array_mut, view_mut, U32Le, U64Le};

impl OptrFtl {
    /// The next page of the metadata log (None when it is full).
    pub(super) fn log_page(&mut self, flash: &mut dyn Flash) -> Result<Option<u32>, FtlError> {
        let total = self.log.len() as u32 * self.ppb;
        if self.log_pos >= total {
            return Ok(None);
        }
        let (i, p) = ((self.log_pos / self.ppb) as usize, self.log_pos % self.ppb);
        if p == 0 && !self.log_fresh[i] {
            flash.erase(Cause::Metadata, self.ba(self.log[i]))?;
            self.log_fresh[i] = true;
        }
        self.log_pos += 1;
        Ok(Some(self.log[i] * self.ppb + p))
    }

    pub(super) fn log_pages_left(&self) -> u32 {
        (self.log.len() as u32 * self.ppb).saturating_sub(self.log_pos)
    }

    /// Write a metadata page to the log (`None`: the log is full).
    pub(super) fn log_write(&mut self, flash: &mut dyn Flash, kind: u8, d: &[u8]) -> Result<Option<()>, FtlError> {
        let Some(ppn) = self.log_page(flash)? else { return Ok(None) };
        let seq = self.meta_seq;
        self.meta_seq += 1;
        flash.program_meta(Cause::Metadata, self.pa(ppn), d, &oob(kind, seq, 0, 0))?;
        Ok(Some(()))
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
                // The log is full: a checkpoint (which makes every record moot) instead.
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
        if pages <= self.log_pages_left() && pages <= Self::full_pages_of(&self.g, self.lpns) {
            self.write_incremental(flash)?;
        } else {
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
    /// page of its own.
    pub(super) fn write_incremental(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
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
                    self.write_inc_page(flash, &mut d, n)?;
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
        self.log_write(flash, K_SEAL, &seal)?.ok_or_else(|| FtlError::NoSpace("optr: metadata log full".into()))?;
        self.c.seal_pages += 1;
        Ok(())
    }

    pub(super) fn write_inc_page(&mut self, flash: &mut dyn Flash, d: &mut [u8], n: usize) -> Result<(), FtlError> {
        put_header(d, &[n as u32]);
        self.log_write(flash, K_INC, d)?.ok_or_else(|| FtlError::NoSpace("optr: metadata log full".into()))?;
        self.c.inc_pages += 1;
        d.fill(0xff);
        Ok(())
    }

    /// A full checkpoint into the older area, sealed; then the log restarts.
    pub(super) fn write_full(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let target = 1 - self.full_area;
        for i in 0..self.area[target].len() {
            flash.erase(Cause::Metadata, self.ba(self.area[target][i]))?;
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
            flash.program_meta(Cause::Metadata, self.pa(ppn), &d, &oob(K_FULL, seq, i as u32, 0))?;
            self.c.full_pages += 1;
        }
        let seal = self.seal_bytes(seq);
        let ppn = self.area_page(target, pages);
        flash.program_meta(Cause::Metadata, self.pa(ppn), &seal, &oob(K_SEAL, seq, 0, 0))?;
        self.c.full_pages += 1;
        self.full_area = target;
        // The log's content is older than this checkpoint: reuse it from the start.
        self.log_pos = 0;
        self.log_fresh.fill(false);
        Ok(())
    }

    pub(super) fn area_page(&self, area: usize, i: u32) -> u32 {
        self.area[area][(i / self.ppb) as usize] * self.ppb + i % self.ppb
    }
}
