//! `dftl`'s mount: rebuild the GTD, the valid pages, the blocks and the
//! erase counts from flash alone, whatever a power cut left (see the
//! module docs of [`super`] for the algorithm and why it is correct).

use super::persist::{self, ERASE_COUNTS_MAGIC, TPAGE_MAGIC};
use super::{page_addr, DftlFtl, TranslationMap, OOB_ERASE_COUNTS, OOB_TRANSLATION};
use crate::flash::{Cause, Flash, FlashError};
use crate::ftl::kit::data_plane::{
    decode_oob, DataPlane, OOB_BYTES, OOB_DATA, OOB_ERASED, OOB_KIND_MASK, OOB_LOST, UNMAPPED,
};
use crate::ftl::mutants::Mutant;
use crate::ftl::FtlError;
use crate::util::prefetch::large_vec;
use std::cmp::Reverse;

/// What the scan of every block found.
struct Found {
    /// Per logical page: the highest sequence number of an intact data
    /// page holding it, and that page.
    data_seq: Vec<u64>,
    data_ppn: Vec<u32>,
    /// Per physical page: the logical page of the intact data page there.
    owner: Vec<u32>,
    /// Intact metadata pages: (kind, index, OOB sequence number, page),
    /// sorted by kind and index, newest copy first.
    meta: Vec<(u8, u32, u64, u32)>,
    /// Per block: pages programmed (up to the first erased one).
    written_pages: Vec<u32>,
    /// Blocks whose erase was cut: nothing in them reads.
    undefined: Vec<u32>,
    /// The lost slots found (physical pages; see `data_plane/lost.rs`):
    /// versions of their logical pages like data pages.
    lost_slots: std::collections::HashSet<u32>,
    max_seq: u64,
}

/// One block's programmed pages: their OOBs, and which of them a cut may
/// have torn and did (their data does not read).
#[derive(Default)]
struct BlockPages {
    oobs: Vec<[u8; OOB_BYTES]>,
    torn: Vec<u32>,
    at_risk: Vec<u32>,
}

impl DftlFtl {
    /// Mount: scan, load the erase counts, choose each translation page's
    /// copy and correct its entries, erase undefined blocks, rebuild the
    /// blocks, then persist the corrections.
    pub(super) fn scan_and_rebuild(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let (m, dp) = (&mut self.map, &mut self.dp);
        dp.begin_mount(flash);
        let found = m.scan(dp, flash)?;
        dp.set_seq_after(found.max_seq);
        m.load_erase_counts(dp, flash, &found.meta)?;
        m.rebuild_map(dp, flash, &found)?;
        for &block in &found.undefined {
            dp.erase_undefined_block(flash, block)?;
        }
        m.counters.mount_undefined_blocks = found.undefined.len() as u64;
        dp.finish_mount(&found.written_pages, |_| false);
        m.persist_fixes(dp, flash)?;
        dp.finish_retirements_at_mount(flash, m)
    }
}

impl TranslationMap {
    /// Read the OOB of every programmed page (and the data of the pages a
    /// cut could have torn).
    fn scan(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash) -> Result<Found, FtlError> {
        let g = self.geometry.clone();
        let mut found = Found {
            data_seq: large_vec(self.lpns as usize, 0),
            data_ppn: large_vec(self.lpns as usize, UNMAPPED),
            owner: large_vec(g.pages() as usize, UNMAPPED),
            meta: Vec::new(),
            written_pages: vec![0; g.blocks() as usize],
            undefined: Vec::new(),
            lost_slots: Default::default(),
            max_seq: 0,
        };
        let mut pages = BlockPages::default();
        for block in 0..g.blocks() {
            if dp.is_bad_block(block) {
                continue;
            }
            if !self.scan_block(dp, flash, block, &mut pages)? {
                found.undefined.push(block);
                continue;
            }
            found.written_pages[block as usize] = pages.oobs.len() as u32;
            for (page, oob) in pages.oobs.iter().enumerate() {
                let (kind, index, seq) = decode_oob(oob);
                found.max_seq = found.max_seq.max(seq);
                if pages.torn.contains(&(page as u32)) {
                    self.counters.mount_torn_pages += 1;
                    continue; // its OOB vouches for data that is gone
                }
                dp.set_block_stream(block, kind >> 4);
                self.note_page(&mut found, kind, index, seq, block * self.ppb + page as u32);
            }
        }
        found.meta.sort_unstable_by_key(|&(kind, index, seq, _)| (kind, index, Reverse(seq)));
        Ok(found)
    }

    /// Record what an intact page holds.
    fn note_page(&self, found: &mut Found, kind: u8, index: u32, seq: u64, ppn: u32) {
        match kind & OOB_KIND_MASK {
            // BUG (deliberate): lost slots skipped as unknown content.
            OOB_LOST if self.mutant == Mutant::MountForgetsLostPages => {}
            k @ (OOB_DATA | OOB_LOST) if index < self.lpns => {
                if k == OOB_LOST {
                    found.lost_slots.insert(ppn);
                }
                found.owner[ppn as usize] = index;
                if seq > found.data_seq[index as usize] {
                    found.data_seq[index as usize] = seq;
                    found.data_ppn[index as usize] = ppn;
                }
            }
            k @ (OOB_TRANSLATION | OOB_ERASE_COUNTS) => found.meta.push((k, index, seq, ppn)),
            _ => {} // unknown content: garbage, collected later
        }
    }

    /// Read `block`'s OOBs up to its first erased page, and check the data
    /// of the pages a cut could have torn: the last one programmed, and
    /// (with paired-page corruption) the lower pages of its word line.
    /// Returns false if the block is undefined (an erase of it was cut).
    fn scan_block(
        &mut self,
        dp: &DataPlane,
        flash: &mut dyn Flash,
        block: u32,
        pages: &mut BlockPages,
    ) -> Result<bool, FtlError> {
        pages.oobs.clear();
        pages.torn.clear();
        let mut oob = [0u8; OOB_BYTES];
        for page in 0..self.ppb {
            match flash.read_oob(Cause::Recovery, page_addr(block * self.ppb + page), &mut oob) {
                Ok(()) => {}
                Err(FlashError::Uncorrectable) => return Ok(false),
                Err(e) => return Err(e.into()),
            }
            self.counters.mount_scanned_pages += 1;
            if oob[0] == OOB_ERASED {
                break; // pages are programmed in order: the rest are erased
            }
            pages.oobs.push(oob);
        }
        let Some(last) = (pages.oobs.len() as u32).checked_sub(1) else { return Ok(true) };
        if self.mutant == Mutant::TrustsTornPage {
            return Ok(true);
        }
        self.geometry.lower_paired_pages(last, &mut pages.at_risk);
        pages.at_risk.push(last);
        for i in 0..pages.at_risk.len() {
            let page = pages.at_risk[i];
            let kind = pages.oobs[page as usize][0] & OOB_KIND_MASK;
            if !Self::readable(dp, flash, block * self.ppb + page, kind)? {
                pages.torn.push(page);
            }
        }
        Ok(true)
    }

    /// Whether the data of page `ppn` (of OOB `kind`) reads.
    fn readable(dp: &DataPlane, flash: &mut dyn Flash, ppn: u32, kind: u8) -> Result<bool, FtlError> {
        if kind == OOB_LOST {
            return Ok(true); // never torn: its data was gone (see `data_plane/lost.rs`)
        }
        let read = if kind == OOB_DATA {
            return Ok(crate::ftl::kit::flash_ops::page_survived(flash, page_addr(ppn), dp.tmp_buf())?);
        } else {
            let mut header = [0u8; persist::HEADER_BYTES as usize];
            flash.read_meta(Cause::Recovery, page_addr(ppn), &mut header, &mut [])
        };
        match read {
            Ok(()) => Ok(true),
            Err(FlashError::Uncorrectable) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// The newest intact copy of metadata page (`kind`, `index`) in
    /// `meta`: its page and the sequence number its content was composed
    /// at, read into `self.tpage`. A copy whose header is not its own is
    /// skipped; one that does not read fails the mount (the scan found it
    /// intact).
    fn newest_copy(
        &mut self,
        flash: &mut dyn Flash,
        meta: &[(u8, u32, u64, u32)],
        kind: u8,
        index: u32,
    ) -> Result<Option<(u32, u64)>, FtlError> {
        let magic = if kind == OOB_TRANSLATION { TPAGE_MAGIC } else { ERASE_COUNTS_MAGIC };
        let from = meta.partition_point(|&(k, i, _, _)| (k, i) < (kind, index));
        for &(_, _, _, ppn) in meta[from..].iter().take_while(|&&(k, i, _, _)| (k, i) == (kind, index)) {
            flash.read_meta(Cause::Recovery, page_addr(ppn), &mut self.tpage, &mut [])?;
            if let Some(seq) = persist::content_seq(&self.tpage, magic, index) {
                return Ok(Some((ppn, seq)));
            }
        }
        Ok(None)
    }

    /// Restore the erase counts from the newest copy of each chunk of
    /// the record.
    fn load_erase_counts(
        &mut self,
        dp: &mut DataPlane,
        flash: &mut dyn Flash,
        meta: &[(u8, u32, u64, u32)],
    ) -> Result<(), FtlError> {
        let per_page = persist::entries_per_page(&self.geometry);
        let groups = dp.table.erase_count.len() as u32;
        for chunk in 0..self.erase_record.len() {
            let Some((ppn, _)) = self.newest_copy(flash, meta, OOB_ERASE_COUNTS, chunk)? else { continue };
            self.erase_record.found(chunk, ppn);
            dp.mark_valid(ppn);
            for group in chunk * per_page..((chunk + 1) * per_page).min(groups) {
                dp.table.erase_count[group as usize] = persist::entry(&self.tpage, group - chunk * per_page);
            }
        }
        Ok(())
    }

    /// The GTD (each translation page's newest intact copy), the valid
    /// pages, and the corrections of entries data pages or GC made stale.
    fn rebuild_map(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash, found: &Found) -> Result<(), FtlError> {
        self.fixes = persist::MountFixes::new(self.tpages);
        let mut fixes = Vec::new();
        for t in 0..self.tpages {
            let content_seq = match self.newest_copy(flash, &found.meta, OOB_TRANSLATION, t)? {
                Some((ppn, seq)) => {
                    self.gtd[t as usize] = ppn;
                    dp.mark_valid(ppn);
                    seq
                }
                None => {
                    self.tpage.fill(0xff); // never written back: all unmapped
                    0
                }
            };
            let first = t * self.per_tpage;
            fixes.clear();
            for lpn in first..(first + self.per_tpage).min(self.lpns) {
                let stored = persist::entry(&self.tpage, lpn - first);
                let current = self.current_entry(found, lpn, stored, content_seq);
                if current != UNMAPPED {
                    if !found.lost_slots.is_empty() && found.lost_slots.contains(&current) {
                        dp.restore_lost(lpn);
                    }
                    dp.mark_valid(current);
                    if !dp.hot_cold_is_none() {
                        dp.restore_stream(lpn, current);
                    }
                }
                if current != stored {
                    fixes.push((lpn, current));
                }
            }
            self.fixes.add(t, fixes.iter().copied());
        }
        self.counters.mount_corrections = self.fixes.len() as u64;
        Ok(())
    }

    /// Where `lpn`'s data is, given the entry `stored` in its translation
    /// page composed at `content_seq`.
    fn current_entry(&self, found: &Found, lpn: u32, stored: u32, content_seq: u64) -> u32 {
        let newer = match self.mutant {
            // Broken: the translation page wins wherever it maps the page.
            Mutant::IgnoresSequenceNumbers => stored == UNMAPPED && found.data_seq[lpn as usize] > 0,
            _ => found.data_seq[lpn as usize] > content_seq,
        };
        if newer {
            found.data_ppn[lpn as usize] // written (or moved by GC) after the page was composed
        } else if stored != UNMAPPED && found.owner.get(stored as usize) != Some(&lpn) {
            UNMAPPED // its page was reclaimed since: the data was trimmed
        } else {
            stored
        }
    }

    /// Put the corrections where a cut cannot lose them: a whole-table
    /// cache holds them as dirty entries (it never evicts, so every later
    /// write-back of their page takes them, as a shutdown does); otherwise
    /// every corrected translation page is written back now (a later
    /// eviction could write it back without the corrections that are not
    /// cached).
    fn persist_fixes(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash) -> Result<(), FtlError> {
        if self.cmt.is_resident() {
            for (lpn, ppn) in self.fixes.drain_all() {
                self.remap_moved(lpn, ppn);
            }
            return Ok(());
        }
        for t in 0..self.tpages {
            if self.fixes.has(t) {
                self.counters.mount_writebacks += 1;
                self.write_back(dp, flash, t)?;
            }
        }
        self.fixes.drain_all();
        Ok(())
    }
}
