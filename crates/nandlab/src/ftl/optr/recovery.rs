//! optr's recovery from flash alone: locate the newest sealed checkpoint,
//! load it, scan the chains after it, find the recovery point and rebuild
//! (the phases in the module docs of `optr`).

use super::*;
use crate::ftl::kit::wire::{array, view, U32Le};

/// What recovery's first phase finds: the seal to recover from, the map
/// entries of the sealed incremental checkpoints after the full one, and
/// the records after the last seal.
pub(super) type Located = (Vec<u8>, Vec<(u32, u32)>, Vec<Record>);

/// What recovery found after the last seal.
#[derive(Default)]
pub(super) struct Found {
    /// (wid, ppn, lpn, size) of host pages, (ppn, lpn) of GC copies, in chain order.
    host: Vec<(u64, u32, u32, u32)>,
    gc: Vec<(u32, u32)>,
    /// wid → (pages found, request size).
    count: BTreeMap<u64, (u32, u32)>,
    max_wid: u64,
}

impl OptrFtl {
    /// Phase 1: the newest sealed full checkpoint, then the sealed
    /// incrementals and the records after it. Returns the seal to recover from.
    pub(super) fn locate(&mut self, flash: &mut dyn Flash) -> Result<Located, FtlError> {
        let pages = Self::full_pages_of(&self.g, self.lpns);
        let mut best: Option<(u64, usize, Vec<u8>)> = None;
        let mut d = vec![0u8; self.g.page_size_bytes() as usize];
        let mut o = [0u8; OOB_BYTES];
        for area in 0..2 {
            let ppn = self.area_page(area, pages);
            if flash.read_meta(Cause::Recovery, self.pa(ppn), &mut d, &mut o).is_ok() && o[0] == K_SEAL && has_magic(&d)
            {
                let seq = seal_header(&d).seq.get();
                if best.as_ref().is_none_or(|b| seq > b.0) {
                    best = Some((seq, area, d.clone()));
                }
            }
        }
        let Some((full_seq, area, full_seal)) = best else {
            return Err(FtlError::Mount("optr: no sealed full checkpoint".into()));
        };
        self.full_area = area;
        // The log, in order: pages newer than the full checkpoint.
        let mut log: Vec<(u64, u8, u32)> = Vec::new();
        let mut last_pos = 0;
        for (i, &b) in self.log.iter().enumerate() {
            for p in 0..self.ppb {
                let ppn = b * self.ppb + p;
                match flash.read_oob(Cause::Recovery, self.pa(ppn), &mut o) {
                    Ok(()) if o[0] != K_ERASED => {
                        let (kind, seq, _, _) = unoob(&o);
                        if seq > full_seq {
                            log.push((seq, kind, ppn));
                            last_pos = i as u32 * self.ppb + p + 1;
                        }
                    }
                    _ => break,
                }
            }
        }
        log.sort_unstable();
        let mut seal = full_seal;
        let mut incs: Vec<(u32, u32)> = Vec::new();
        let mut pending_inc: Vec<(u32, u32)> = Vec::new();
        let mut records: Vec<Record> = Vec::new();
        for &(_, kind, ppn) in &log {
            let readable = flash.read_meta(Cause::Recovery, self.pa(ppn), &mut d, &mut []).is_ok() && has_magic(&d);
            if !readable {
                break; // a torn page ends the log
            }
            match kind {
                K_INC => map_entries(&d, header_word(&d, 0), HEADER, &mut pending_inc),
                K_SEAL => {
                    let at = seal_entries_at(seal_header(&d).units.get().min(self.units));
                    map_entries(&d, view::<U32Le>(&d[at..]).get(), at + 4, &mut pending_inc);
                    incs.append(&mut pending_inc);
                    seal = d.clone();
                    records.clear();
                }
                K_RECORDS => {
                    let n = (header_word(&d, 0) as usize).min((d.len() - HEADER) / RECORD_BYTES);
                    records.extend(array::<RecordBytes>(&d, HEADER, n).iter().map(Record::parse));
                }
                _ => {}
            }
        }
        // New log pages go after everything found (torn ones included).
        self.log_pos = last_pos;
        for (i, fresh) in self.log_fresh.iter_mut().enumerate() {
            *fresh = (i as u32) < last_pos.div_ceil(self.ppb);
        }
        self.meta_seq = log.last().map_or(full_seq, |l| l.0) + 1;
        Ok((seal, incs, records))
    }

    /// Phase 2: load the full checkpoint and apply the incrementals.
    pub(super) fn load(&mut self, flash: &mut dyn Flash, incs: &[(u32, u32)]) -> Result<(), FtlError> {
        let per = (self.g.page_size_bytes() as usize - HEADER) / 4;
        let mut d = vec![0u8; self.g.page_size_bytes() as usize];
        for i in 0..Self::full_pages_of(&self.g, self.lpns) {
            let ppn = self.area_page(self.full_area, i);
            flash.read_meta(Cause::Recovery, self.pa(ppn), &mut d, &mut [])?;
            let n = (header_word(&d, 1) as usize).min(per);
            for (k, entry) in array::<U32Le>(&d, HEADER, n).iter().enumerate() {
                let lpn = i as usize * per + k;
                if lpn < self.l2p.len() {
                    self.l2p[lpn] = entry.get();
                }
            }
        }
        for &(lpn, ppn) in incs {
            if (lpn as usize) < self.l2p.len() {
                self.l2p[lpn as usize] = ppn;
            }
        }
        Ok(())
    }

    /// Phase 3: follow every chain from the seal.
    pub(super) fn scan_chains(&mut self, flash: &mut dyn Flash, seal: &[u8], commit: u64) -> Result<Found, FtlError> {
        let mut f = Found::default();
        let units = seal_header(seal).units.get().min(self.units) as usize;
        let mut d = vec![0u8; self.g.page_size_bytes() as usize];
        let mut o = [0u8; OOB_BYTES];
        for u in 0..units {
            for gc in [true, false] {
                let ends: &ChainEnds = view(&seal[chain_ends_at(u)..]);
                let (mut block, mut page) = if gc {
                    (ends.gc_block.get(), ends.gc_page.get())
                } else {
                    (ends.host_block.get(), ends.host_page.get())
                };
                let mut last: Option<(u32, usize, usize)> = None; // (ppn, index in host/gc)
                let mut guard = 0;
                while block < self.g.blocks() && guard < self.g.blocks() {
                    if page == self.ppb - 1 {
                        let ppn = block * self.ppb + page;
                        if flash.read_meta(Cause::Recovery, self.pa(ppn), &mut d, &mut o).is_err()
                            || o[0] != K_SUMMARY
                            || !has_magic(&d)
                        {
                            break;
                        }
                        block = header_word(&d, 0);
                        page = 0;
                        guard += 1;
                        continue;
                    }
                    let ppn = block * self.ppb + page;
                    if flash.read_oob(Cause::Recovery, self.pa(ppn), &mut o).is_err() {
                        break;
                    }
                    let (kind, wid, size, lpn) = unoob(&o);
                    if kind != K_DATA && kind != K_GC || lpn >= self.lpns {
                        break;
                    }
                    if kind == K_GC {
                        f.gc.push((ppn, lpn));
                        last = Some((ppn, f.gc.len() - 1, 1));
                    } else if wid > commit {
                        f.host.push((wid, ppn, lpn, size));
                        last = Some((ppn, f.host.len() - 1, 0));
                    }
                    page += 1;
                }
                // Only a chain's last page (and its word line's lower pages) can be torn.
                if let Some((ppn, idx, is_gc)) = last {
                    if self.torn(flash, ppn)? {
                        if is_gc == 1 {
                            f.gc.remove(idx);
                        } else {
                            f.host.remove(idx);
                        }
                    }
                    let mut lower = Vec::new();
                    self.g.lower_paired_pages(ppn % self.ppb, &mut lower);
                    for l in lower {
                        let q = ppn - ppn % self.ppb + l;
                        if self.torn(flash, q)? {
                            f.host.retain(|h| h.1 != q);
                            f.gc.retain(|h| h.0 != q);
                        }
                    }
                }
            }
        }
        for &(wid, _, _, size) in &f.host {
            let c = f.count.entry(wid).or_insert((0, size));
            c.0 += 1;
            f.max_wid = f.max_wid.max(wid);
        }
        Ok(f)
    }

    pub(super) fn torn(&self, flash: &mut dyn Flash, ppn: u32) -> Result<bool, FtlError> {
        let tmp = self.tmp.expect("buffers allocated");
        Ok(match flash.read(Cause::Recovery, self.pa(ppn), 0, 1, tmp, 0, &mut []) {
            Ok(()) => false,
            Err(FlashError::Uncorrectable) => true,
            Err(e) => return Err(e.into()),
        })
    }

    /// Phase 4: the first write id recovery must not replay.
    pub(super) fn recovery_point(&self, f: &mut Found, records: &[Record], commit: u64) -> u64 {
        for r in records {
            match *r {
                Record::Coalesce { src, src_size, dst } if src > commit => {
                    f.count.entry(src).or_insert((0, src_size)).0 += 1;
                    f.max_wid = f.max_wid.max(src).max(dst);
                }
                Record::Trim { wid, size, .. } if wid > commit => {
                    f.count.entry(wid).or_insert((0, size)).0 += 1;
                    f.max_wid = f.max_wid.max(wid);
                }
                _ => {}
            }
        }
        if self.mutant == Mutant::HalfDurableRequests {
            return f.max_wid + 1;
        }
        let mut first = commit + 1;
        while first <= f.max_wid {
            match f.count.get(&first) {
                Some(&(found, size)) if found >= size && size > 0 => first += 1,
                _ => break,
            }
        }
        let mut deps: Vec<(u64, u64)> = records
            .iter()
            .filter_map(|r| match *r {
                Record::Coalesce { src, dst, .. } => Some((src, dst)),
                _ => None,
            })
            .collect();
        deps.sort_unstable_by(|a, b| b.cmp(a));
        for (src, dst) in deps {
            if src < first && dst >= first && src > commit {
                first = src;
            }
        }
        first
    }

    /// Phases 1–5 (see the module docs).
    pub(super) fn recover(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let (seal, incs, records) = self.locate(flash)?;
        self.load(flash, &incs)?;
        let commit = seal_header(&seal).commit.get();
        let mut found = self.scan_chains(flash, &seal, commit)?;
        let first = self.recovery_point(&mut found, &records, commit);
        // Phase 5: GC copies as found, then requests before the recovery point, in order.
        for &(ppn, lpn) in &found.gc {
            self.l2p[lpn as usize] = ppn;
        }
        let mut events: Vec<(u64, u32, u32, bool)> =
            found.host.iter().filter(|h| h.0 < first).map(|&(w, ppn, lpn, _)| (w, lpn, ppn, false)).collect();
        for r in &records {
            if let Record::Trim { wid, first_lpn, count, .. } = *r {
                if wid > commit && wid < first {
                    for l in first_lpn..first_lpn.saturating_add(count).min(self.lpns) {
                        events.push((wid, l, UNMAPPED, true));
                    }
                }
            }
        }
        events.sort_by_key(|e| e.0);
        for (_, lpn, ppn, _) in events {
            self.l2p[lpn as usize] = ppn;
        }
        let highest = found.max_wid.max(commit).max(seal_header(&seal).next_wid.get().saturating_sub(1));
        self.c.rolled_back_requests += highest.saturating_sub(first.saturating_sub(1));
        self.next_wid = highest + 1;
        self.c.recoveries += 1;
        // Block states: reserved and bad as set; blocks holding valid pages
        // are sealed; everything else is free once the new checkpoint exists.
        for lpn in 0..self.lpns {
            let ppn = self.l2p[lpn as usize];
            if ppn != UNMAPPED {
                self.valid[(ppn / 64) as usize] |= 1 << (ppn % 64);
                self.valid_count[(ppn / self.ppb) as usize] += 1;
            }
        }
        let mut o = [0u8; OOB_BYTES];
        for b in 0..self.g.blocks() {
            if matches!(self.state[b as usize], State::Reserved | State::Bad) {
                continue;
            }
            self.state[b as usize] = if self.valid_count[b as usize] > 0 {
                State::Sealed
            } else {
                // Nothing may be erased before the new checkpoint exists
                // (the old seal's chains run through these blocks): new
                // chains start in blocks that are erased already.
                let clean = flash.read_oob(Cause::Recovery, self.pa(b * self.ppb), &mut o).is_ok() && o[0] == K_ERASED;
                State::Free { dirty: !clean }
            };
        }
        let changed = !found.host.is_empty() || !found.gc.is_empty() || !records.is_empty() || !incs.is_empty();
        self.host.clear();
        self.gc.clear();
        if changed || first <= highest {
            // Everything up to `highest` is now decided: a checkpoint (with
            // no chains yet) says so before any block is erased.
            self.write_full(flash)?;
            self.epoch += 1;
        }
        // New chains (erasing blocks is safe now), recorded by a seal.
        self.start_chains(flash)?;
        self.checkpoint(flash)
    }
}
