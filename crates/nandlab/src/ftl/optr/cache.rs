//! optr's write cache: `cache_pages` pages of device DRAM in LRU order,
//! where a write to a page still dirty in the cache replaces it and leaves
//! a coalescing record (see the module docs of `optr`).
//!
//! The LRU order is a [`crate::util::recency`] queue, which evicts in
//! exactly the order of a move-to-front list without the list's links.

use super::*;
use crate::util::recency::Use;

/// A page of the write cache: a logical page's data in a buffer, with the
/// write request it came from.
#[derive(Copy, Clone, Debug)]
pub(super) struct Entry {
    pub(super) lpn: u32,
    pub(super) buf: BufId,
    pub(super) wid: u64,
    pub(super) size: u32,
    pub(super) dirty: bool,
    /// In the LRU order (holds a logical page), with the stamp of its last use.
    pub(super) queued: bool,
    pub(super) stamp: u32,
}

impl Entry {
    pub(super) fn free(buf: BufId) -> Entry {
        Entry { lpn: NONE, buf, wid: 0, size: 0, dirty: false, queued: false, stamp: 0 }
    }
}

/// Whether a use recorded in the LRU order is its entry's latest.
fn is_live(entries: &[Entry]) -> impl Fn(Use) -> bool + '_ {
    move |u| {
        let e = &entries[u.slot as usize];
        e.queued && e.stamp == u.stamp
    }
}

impl OptrFtl {
    /// Take entry `e` out of the LRU order.
    fn lru_unlink(&mut self, e: u32) {
        self.entries[e as usize].queued = false;
    }

    /// Make entry `e` the most recently used.
    fn lru_push_front(&mut self, e: u32) {
        let stamp = self.lru.push(e, is_live(&self.entries));
        let ent = &mut self.entries[e as usize];
        (ent.queued, ent.stamp) = (true, stamp);
    }

    /// Program a dirty entry to its plane's host chain.
    pub(super) fn write_back(&mut self, flash: &mut dyn Flash, e: u32) -> Result<(), FtlError> {
        let Entry { lpn, buf, wid, size, .. } = self.entries[e as usize];
        self.ensure_space(flash)?;
        let u = (lpn % self.units) as usize;
        let ppn = self.append(flash, u, false, Ok((buf, 0)), wid, size, lpn)?;
        self.set_map(lpn, ppn);
        self.entries[e as usize].dirty = false;
        self.c.host_pages += 1;
        Ok(())
    }

    /// A cache entry for `lpn`, evicting the least recently used one if needed.
    pub(super) fn entry_for(&mut self, flash: &mut dyn Flash, lpn: u32) -> Result<(u32, bool), FtlError> {
        if let Some(&e) = self.index.get(&lpn) {
            self.lru_push_front(e);
            return Ok((e, true));
        }
        let e = match self.free_entries.pop() {
            Some(e) => e,
            None => {
                let victim =
                    self.lru.oldest(is_live(&self.entries)).expect("a full cache has a least recently used page");
                if self.entries[victim as usize].dirty {
                    self.write_back(flash, victim)?;
                }
                self.lru_unlink(victim);
                let old = self.entries[victim as usize].lpn;
                self.index.remove(&old);
                self.cached[(old / 64) as usize] &= !(1 << (old % 64));
                victim
            }
        };
        self.entries[e as usize].lpn = lpn;
        self.entries[e as usize].dirty = false;
        self.index.insert(lpn, e);
        self.cached[(lpn / 64) as usize] |= 1 << (lpn % 64);
        self.lru_push_front(e);
        Ok((e, false))
    }

    /// Put one logical page of request `wid` (of `size` pages) in the cache.
    pub(super) fn cache_page(
        &mut self,
        flash: &mut dyn Flash,
        lpn: u32,
        wid: u64,
        size: u32,
        fill: impl FnOnce(&mut dyn Flash, BufId) -> Result<(), FlashError>,
        whole: bool,
    ) -> Result<(), FtlError> {
        let (e, hit) = self.entry_for(flash, lpn)?;
        let ent = self.entries[e as usize];
        if hit && ent.dirty {
            // Coalescing: the older request's page now lives in this one.
            self.records.push(Record::Coalesce { src: ent.wid, dst: wid, src_size: ent.size });
            self.c.coalesced += 1;
        }
        if !hit && !whole && self.mutant != Mutant::CacheMissSkipsFill {
            match self.l2p[lpn as usize] {
                UNMAPPED => flash.buf_zero(ent.buf, 0, self.spp)?,
                ppn => flash.read(Cause::Host, self.pa(ppn), 0, self.spp, ent.buf, 0, &mut [])?,
            }
        }
        fill(flash, ent.buf)?;
        let ent = &mut self.entries[e as usize];
        (ent.wid, ent.size, ent.dirty) = (wid, size, true);
        Ok(())
    }

    /// Drop a logical page from the cache (a trim).
    pub(super) fn uncache(&mut self, lpn: u32, wid: u64) {
        if let Some(e) = self.index.remove(&lpn) {
            self.cached[(lpn / 64) as usize] &= !(1 << (lpn % 64));
            let ent = self.entries[e as usize];
            if ent.dirty {
                self.records.push(Record::Coalesce { src: ent.wid, dst: wid, src_size: ent.size });
                self.c.coalesced += 1;
            }
            self.lru_unlink(e);
            self.entries[e as usize].dirty = false;
            self.free_entries.push(e);
        }
    }

    /// Forget the write cache's dirty pages without writing them (the
    /// [`Mutant::EmergencyFlushDropsCache`] variant).
    pub(super) fn drop_dirty_cache(&mut self) {
        for e in 0..self.entries.len() {
            self.entries[e].dirty = false;
        }
        self.records.clear();
    }

    /// Write every dirty entry, oldest request first, then the records.
    pub(super) fn flush_all(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let mut dirty: Vec<(u64, u32)> = self
            .index
            .values()
            .filter(|&&e| self.entries[e as usize].dirty)
            .map(|&e| (self.entries[e as usize].wid, e))
            .collect();
        dirty.sort_unstable();
        for (_, e) in dirty {
            if self.mutant == Mutant::LosesCacheOnFlush {
                self.entries[e as usize].dirty = false;
                continue;
            }
            self.write_back(flash, e)?;
        }
        self.write_records(flash)
    }
}
