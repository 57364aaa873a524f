//! `page`: what survives a power cut, and how a mount finds it.
//!
//! - **Data pages** carry (kind, logical page, program sequence number) in
//!   their OOB; the newest readable copy of a logical page wins.
//! - **Torn pages.** A cut can tear only the page being programmed — the
//!   last programmed page of its block — and, with paired-page corruption,
//!   the lower pages of that page's word line. The scan reads the data of
//!   exactly those pages; an unreadable one is ignored (its OOB still looks
//!   valid: a torn page must not be trusted on its OOB alone), and the
//!   previous copy of its logical page, which GC cannot have reclaimed
//!   because the overwrite never completed, wins instead.
//! - **Undefined blocks** (an erase was cut) fail every OOB read; recovery
//!   erases them.
//! - **Trims** are made durable by a flush: each fully trimmed logical
//!   page since the last flush is listed, with the sequence number the
//!   trim happened at, in a *trim record* (a metadata page in a trim-log
//!   block). A record entry unmaps its logical page unless a newer data
//!   page exists. Trim-log blocks live until the next checkpoint (which
//!   holds the trims) supersedes them; when the log grows past a few
//!   blocks, a flush writes a checkpoint. GC makes pending trims durable
//!   before it erases a victim: the victim may hold the newest copy of a
//!   trimmed page, and without the record an older copy elsewhere would
//!   come back after a cut.
//! - **Summary pages.** A group whose summary the data plane accepts
//!   (`DataPlane::read_summary`: readable, its own, older entries, no
//!   member erased since) is read from it: its data pages were all
//!   programmed before the summary, so none is torn. Any other group is
//!   scanned page by page as below; a torn summary (a cut during its
//!   program) is such a group, and the scan checks the pages the cut may
//!   have torn with it (paired lower pages).
//! - **Lost slots** (OOB kind `OOB_LOST`: a GC copy whose read was
//!   uncorrectable, see `data_plane/lost.rs`) are versions of their
//!   logical page like data pages; a page whose newest version is one is
//!   mapped to it and marked lost again. A lost slot is never taken for
//!   torn: its data never decodes.
//! - **Checkpoints** (a clean shutdown, or a long trim log) hold the whole
//!   map. Entries are trusted only where the scan finds that logical page
//!   still at that physical page: an unflushed trim may have let GC reuse
//!   the page since.

use super::*;
use crate::flash::FlashError;
use crate::ftl::kit::data_plane::{decode_oob, SummaryRead, OOB_DATA, OOB_ERASED, OOB_KIND_MASK, OOB_LOST};
use crate::ftl::kit::wire::checkpoint::{CheckpointHeader, TrimRecords, TRIM_ENTRY_BYTES, TRIM_HEADER_BYTES};
use crate::ftl::mutants::Mutant;

const OOB_TRIM: u8 = 3;
/// Trim-log groups a flush accumulates before it writes a checkpoint instead.
pub(super) const TRIM_LOG_MAX_BLOCKS: usize = 4;

/// What the scan found in one block.
#[derive(Default)]
struct BlockScan {
    /// The OOB of each programmed page, in page order.
    oobs: Vec<[u8; OOB_BYTES]>,
    /// Page indices whose data did not survive.
    torn: Vec<u32>,
    /// An erase of the block was cut: nothing in it is readable.
    undefined: bool,
}

impl PageMap {
    /// Make the trims since the last flush durable (see the module docs).
    pub(super) fn persist_trims(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.pending_trim_groups.clear();
        if self.pending_trims.is_empty() || self.mutant == Mutant::ForgetsTrimsOnFlush {
            self.pending_trims.clear();
            return Ok(());
        }
        let per_page = (self.geometry.page_size_bytes() as usize - TRIM_HEADER_BYTES) / TRIM_ENTRY_BYTES;
        let mut trims = std::mem::take(&mut self.pending_trims);
        let mut data = std::mem::take(&mut self.trim_buf);
        data.resize(self.geometry.page_size_bytes() as usize, 0xff);
        let r = self.write_trim_records(dp, flash, &trims, per_page, &mut data);
        self.trim_buf = data;
        trims.clear();
        if self.pending_trims.is_empty() {
            self.pending_trims = trims; // keep the capacity
        }
        let failed = match r {
            Err(FtlError::Flash(FlashError::ProgramFailed)) if self.mutant != Mutant::KeepsFailedMetaProgram => true,
            // BUG (deliberate): the trim log keeps its failed block.
            Err(FtlError::Flash(FlashError::ProgramFailed)) => false,
            r => {
                r?;
                false
            }
        };
        // A failed trim-log program (media reliability): a checkpoint holds
        // every trim (the map in DRAM has them) and frees the log without
        // its failed block, whose records a mount would not read.
        if failed || self.trim_log.len() > TRIM_LOG_MAX_BLOCKS {
            self.write_checkpoint(dp, flash)?;
        }
        Ok(())
    }

    fn write_trim_records(
        &mut self,
        dp: &mut DataPlane,
        flash: &mut dyn Flash,
        trims: &[(u32, u64)],
        per_page: usize,
        data: &mut [u8],
    ) -> Result<(), FtlError> {
        for chunk in trims.chunks(per_page) {
            let ppn = self.trim_log_page(dp, flash)?;
            data.fill(0xff);
            TrimRecords::emit(chunk, data);
            let oob = encode_oob(OOB_TRIM, chunk.len() as u32, dp.next_seq());
            flash.program_meta(Cause::Metadata, page_addr(ppn), data, &oob)?;
            self.counters.checkpoint_pages += 1;
        }
        Ok(())
    }

    /// The next page of the trim log, opening a group when needed.
    fn trim_log_page(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash) -> Result<u32, FtlError> {
        let full = self.trim_log.last().is_none_or(|&g| self.trim_log_next >= dp.group_capacity(g));
        if full {
            // The unit with the most free groups, keeping its GC reserve
            // (see `DataPlane::take_spare_group`), or, if collecting cannot
            // get it there, from the reserve.
            let unit = (0..dp.units()).max_by_key(|&u| dp.unit_free_groups(u)).unwrap_or(0);
            let spare = dp.take_spare_group(flash, self, unit)?;
            let group = spare
                .or_else(|| dp.take_free_group(unit))
                .ok_or_else(|| FtlError::NoSpace("no free block for the trim log".into()))?;
            self.trim_log.push(group);
            self.trim_log_next = 0;
        }
        let group = *self.trim_log.last().expect("a trim-log group");
        self.trim_log_next += 1;
        Ok(dp.group_slot_ppn(group, self.trim_log_next - 1))
    }

    /// A checkpoint now holds every trim: the trim log can go.
    pub(super) fn release_trim_log(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash) -> Result<(), FtlError> {
        for g in std::mem::take(&mut self.trim_log) {
            dp.release_group(flash, g, Cause::Metadata)?;
        }
        self.trim_log_next = 0;
        Ok(())
    }
}

/// What a mount learns from the groups' summaries and OOBs.
struct MountScan {
    /// Per logical page: the newest copy's sequence number and page.
    best_seq: Vec<u64>,
    data_l2p: Vec<u32>,
    /// The logical page each physical page holds, to validate checkpoint entries.
    lpn_of: Vec<u32>,
    /// checkpoint seq → (pages expected, pages found: (index, ppn))
    checkpoints: BTreeMap<u64, (u32, Vec<(u32, u32)>)>,
    trim_pages: Vec<(u64, u32)>,
    written_pages: Vec<u32>,
    undefined: Vec<u32>,
    /// The lost slots found (physical pages).
    lost_slots: Vec<u32>,
    max_seq: u64,
}

impl PageFtl {
    /// Read every group's summary, or scan its blocks' OOBs where it has
    /// none; rebuild the map from the newest complete checkpoint, the data
    /// pages programmed after it and the trim records.
    pub(super) fn scan_and_rebuild(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let g = self.map.geometry.clone();
        let lpns = self.map.lpns as usize;
        let mut found = MountScan {
            best_seq: vec![0u64; lpns],
            data_l2p: vec![UNMAPPED; lpns],
            lpn_of: large_vec(g.pages() as usize, UNMAPPED),
            checkpoints: BTreeMap::new(),
            trim_pages: Vec::new(),
            written_pages: vec![0u32; g.blocks() as usize],
            undefined: Vec::new(),
            lost_slots: Vec::new(),
            max_seq: 0,
        };
        let mut scan = BlockScan::default();
        let mut summary = Vec::new();
        self.dp.begin_mount(flash);
        for group in 0..self.dp.groups() {
            match self.dp.read_summary(flash, group, &mut summary)? {
                SummaryRead::Valid => {
                    self.map.counters.mount_summaries += 1;
                    self.absorb_summary(flash, group, &summary, &mut found);
                }
                read => {
                    if read == SummaryRead::Rejected {
                        self.map.counters.mount_summaries_rejected += 1;
                    }
                    for i in 0..self.dp.group_members(group).len() {
                        let block = self.dp.group_members(group)[i];
                        self.map.scan_block(&self.dp, flash, block, &mut scan)?;
                        self.absorb_block(flash, block, &scan, &mut found);
                    }
                }
            }
        }
        self.rebuild(flash, found)
    }

    /// A group's valid summary: every data page of it, none torn, then
    /// the summary's own OOB. The group is full (its members' unwritten
    /// last pages are the summary row's).
    fn absorb_summary(&mut self, flash: &mut dyn Flash, group: u32, oobs: &[[u8; OOB_BYTES]], found: &mut MountScan) {
        let ppb = self.map.ppb;
        for &block in self.dp.group_members(group) {
            found.written_pages[block as usize] = ppb;
        }
        let (summary, data) = oobs.split_last().expect("a summary's own OOB");
        found.max_seq = found.max_seq.max(decode_oob(summary).2);
        prefetch_entries(data, found);
        // Slots run row by row, member by member (no division per slot).
        let members = self.dp.group_members(group).len();
        for (row, oobs) in data.chunks_exact(members).enumerate() {
            for (i, oob) in oobs.iter().enumerate() {
                let ppn = self.dp.group_members(group)[i] * ppb + row as u32;
                self.absorb_page(flash, ppn, oob, found);
            }
        }
    }

    /// A block scanned page by page.
    fn absorb_block(&mut self, flash: &mut dyn Flash, block: u32, scan: &BlockScan, found: &mut MountScan) {
        if scan.undefined {
            found.undefined.push(block);
            return;
        }
        found.written_pages[block as usize] = scan.oobs.len() as u32;
        prefetch_entries(&scan.oobs, found);
        for (page, oob) in scan.oobs.iter().enumerate() {
            if scan.torn.contains(&(page as u32)) {
                found.max_seq = found.max_seq.max(decode_oob(oob).2);
                continue;
            }
            self.absorb_page(flash, block * self.map.ppb + page as u32, oob, found);
        }
    }

    /// What one readable page tells: data, a checkpoint page, a trim record.
    fn absorb_page(&mut self, flash: &mut dyn Flash, ppn: u32, oob: &[u8; OOB_BYTES], found: &mut MountScan) {
        let (kind, index, seq) = decode_oob(oob);
        found.max_seq = found.max_seq.max(seq);
        let kind = match kind & OOB_KIND_MASK {
            OOB_LOST if self.map.mutant == Mutant::MountForgetsLostPages => 0, // BUG (deliberate): skipped
            OOB_LOST if index < self.map.lpns => {
                found.lost_slots.push(ppn);
                OOB_LOST
            }
            _ => kind,
        };
        match kind & OOB_KIND_MASK {
            k @ (OOB_DATA | OOB_LOST) if index < self.map.lpns => {
                if k == OOB_DATA {
                    self.dp.set_block_stream(ppn / self.map.ppb, kind >> 4);
                }
                found.lpn_of[ppn as usize] = index;
                let newer = match self.map.mutant {
                    Mutant::IgnoresSequenceNumbers => found.data_l2p[index as usize] == UNMAPPED,
                    _ => seq > found.best_seq[index as usize],
                };
                if newer {
                    found.best_seq[index as usize] = seq;
                    found.data_l2p[index as usize] = ppn;
                }
            }
            OOB_CHECKPOINT => {
                let mut meta = [0u8; CHECKPOINT_HEADER_BYTES];
                if flash.read_meta(Cause::Recovery, page_addr(ppn), &mut meta, &mut []).is_ok() {
                    if let Some(header) = CheckpointHeader::parse(&meta) {
                        found.checkpoints.entry(seq).or_insert((header.pages, Vec::new())).1.push((index, ppn));
                    }
                }
            }
            OOB_TRIM => found.trim_pages.push((seq, ppn)),
            _ => {} // summaries (already read), unknown content: garbage, collected later
        }
    }

    /// The map from what the mount found.
    fn rebuild(&mut self, flash: &mut dyn Flash, found: MountScan) -> Result<(), FtlError> {
        let lpns = self.map.lpns as usize;
        let MountScan {
            best_seq,
            data_l2p,
            lpn_of,
            checkpoints,
            trim_pages,
            written_pages,
            undefined,
            lost_slots,
            max_seq,
        } = found;
        self.dp.set_seq_after(max_seq);
        let complete = checkpoints
            .iter()
            .rev()
            .find(|(_, (total, found))| found.len() as u32 == *total)
            .map(|(seq, (_, found))| (*seq, found.clone()));
        let (m, dp) = (&mut self.map, &mut self.dp);
        let ckpt_seq = match complete {
            Some((ckpt_seq, mut pages)) => {
                pages.sort_unstable();
                m.load_checkpoint(dp, flash, &pages)?;
                for lpn in 0..lpns {
                    let ppn = m.l2p.get(lpn);
                    if best_seq[lpn] > ckpt_seq {
                        // Data programmed after the checkpoint wins over it.
                        m.l2p.set(lpn, data_l2p[lpn]);
                    } else if ppn != UNMAPPED && lpn_of.get(ppn as usize) != Some(&(lpn as u32)) {
                        // The page was reclaimed since: an unflushed trim.
                        m.l2p.set(lpn, UNMAPPED);
                    }
                }
                let mut groups: Vec<u32> = pages.iter().map(|&(_, ppn)| dp.group_of_ppn(ppn)).collect();
                groups.dedup();
                m.checkpoint_groups = groups;
                ckpt_seq
            }
            None => {
                for (lpn, &ppn) in data_l2p.iter().enumerate() {
                    m.l2p.set(lpn, ppn);
                }
                0
            }
        };
        m.apply_trim_records(dp, flash, &trim_pages, ckpt_seq, &best_seq)?;
        for ppn in lost_slots {
            let lpn = lpn_of[ppn as usize];
            if m.l2p.get(lpn as usize) == ppn {
                dp.restore_lost(lpn);
            }
        }
        if !dp.hot_cold_is_none() {
            for lpn in 0..m.lpns {
                let ppn = m.l2p.get(lpn as usize);
                if ppn != UNMAPPED {
                    dp.restore_stream(lpn, ppn);
                }
            }
        }
        for &b in &undefined {
            dp.erase_undefined_block(flash, b)?;
        }
        self.rebuild_blocks(&written_pages);
        self.dp.finish_retirements_at_mount(flash, &mut self.map)?;
        if self.map.mutant == Mutant::RecoveryNotCrashSafe {
            self.compact_open_blocks_unsafely(flash, &written_pages)?;
        }
        Ok(())
    }
}

/// The pages' logical pages are scattered over the maps: load their
/// entries together rather than one miss at a time.
fn prefetch_entries(oobs: &[[u8; OOB_BYTES]], found: &MountScan) {
    for oob in oobs {
        let lpn = decode_oob(oob).1 as usize;
        crate::util::prefetch::prefetch(&found.best_seq, lpn);
        crate::util::prefetch::prefetch(&found.data_l2p, lpn);
    }
}

impl PageMap {
    /// Read a block's OOBs up to its first erased page, and check the data
    /// of the pages a cut could have torn.
    fn scan_block(
        &mut self,
        dp: &DataPlane,
        flash: &mut dyn Flash,
        block: u32,
        scan: &mut BlockScan,
    ) -> Result<(), FtlError> {
        scan.oobs.clear();
        scan.torn.clear();
        scan.undefined = false;
        let mut oob = [0u8; OOB_BYTES];
        for page in 0..self.ppb {
            match flash.read_oob(Cause::Recovery, page_addr(block * self.ppb + page), &mut oob) {
                Ok(()) => {}
                Err(FlashError::Uncorrectable) => {
                    scan.undefined = true;
                    scan.oobs.clear();
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            }
            self.counters.mount_scanned_pages += 1;
            if oob[0] == OOB_ERASED {
                break; // pages are programmed in order: the rest are erased
            }
            scan.oobs.push(oob);
        }
        let Some(last) = (scan.oobs.len() as u32).checked_sub(1) else { return Ok(()) };
        if self.mutant == Mutant::TrustsTornPage {
            return Ok(());
        }
        let mut at_risk = Vec::new();
        self.geometry.lower_paired_pages(last, &mut at_risk);
        at_risk.push(last);
        for page in at_risk {
            let ppn = block * self.ppb + page;
            let unreadable = match scan.oobs[page as usize][0] & OOB_KIND_MASK {
                OOB_LOST if self.mutant != Mutant::MountForgetsLostPages => false, // (see the module docs)
                OOB_DATA => {
                    !matches!(crate::ftl::kit::flash_ops::page_survived(flash, page_addr(ppn), dp.tmp_buf()), Ok(true))
                }
                _ => {
                    let mut header = [0u8; 4];
                    flash.read_meta(Cause::Recovery, page_addr(ppn), &mut header, &mut []).is_err()
                }
            };
            if unreadable {
                scan.torn.push(page);
            }
        }
        Ok(())
    }

    /// Unmap logical pages trimmed (and flushed) after the checkpoint,
    /// unless a newer data page exists. Returns nothing; keeps the trim
    /// log groups that still matter.
    fn apply_trim_records(
        &mut self,
        dp: &DataPlane,
        flash: &mut dyn Flash,
        pages: &[(u64, u32)],
        ckpt_seq: u64,
        best_seq: &[u64],
    ) -> Result<(), FtlError> {
        let mut data = vec![0u8; self.geometry.page_size_bytes() as usize];
        let mut log_groups = Vec::new();
        for &(page_seq, ppn) in pages {
            if page_seq <= ckpt_seq || flash.read_meta(Cause::Recovery, page_addr(ppn), &mut data, &mut []).is_err() {
                continue;
            }
            let Some(trims) = TrimRecords::parse(&data) else { continue };
            for trim in trims {
                let (lpn, seq) = (trim.lpn.get() as usize, trim.seq.get());
                if lpn < self.l2p.len() && seq > ckpt_seq && best_seq[lpn] < seq {
                    self.l2p.set(lpn, UNMAPPED);
                }
            }
            log_groups.push(dp.group_of_ppn(ppn));
        }
        log_groups.sort_unstable();
        log_groups.dedup();
        // Kept until the next checkpoint; new records go to a fresh group.
        self.trim_log = log_groups;
        self.trim_log_next = u32::MAX;
        Ok(())
    }

    fn load_checkpoint(
        &mut self,
        dp: &mut DataPlane,
        flash: &mut dyn Flash,
        pages: &[(u32, u32)],
    ) -> Result<(), FtlError> {
        let per_page = self.entries_per_checkpoint_page();
        let map_pages = self.checkpoint_map_pages();
        let mut data = vec![0u8; self.geometry.page_size_bytes() as usize];
        for &(index, ppn) in pages {
            flash.read_meta(Cause::Recovery, page_addr(ppn), &mut data, &mut [])?;
            let count = CheckpointHeader::parse_unchecked(&data).entries as usize;
            // The map first, then the erase counts (see write_checkpoint).
            let is_map = (index as usize) < map_pages;
            let (len, i) = if is_map {
                (self.l2p.len(), index as usize)
            } else {
                (dp.table.erase_count.len(), index as usize - map_pages)
            };
            let base = i * per_page;
            if count > per_page || base + count > len {
                return Err(FtlError::Mount(format!("checkpoint page {index} at page {ppn} is inconsistent")));
            }
            for (k, entry) in CheckpointHeader::entries(&data, count).iter().enumerate() {
                let entry = entry.get();
                if is_map {
                    self.l2p.set(base + k, entry);
                } else {
                    dp.table.erase_count[base + k] = entry;
                }
            }
        }
        Ok(())
    }
}

impl PageFtl {
    /// Derive valid bits and counts, free groups and candidates from the map.
    fn rebuild_blocks(&mut self, written_pages: &[u32]) {
        let (m, dp) = (&self.map, &mut self.dp);
        for ppn in m.l2p.iter() {
            if ppn != UNMAPPED {
                dp.mark_valid(ppn);
            }
        }
        dp.finish_mount(written_pages, |g| m.checkpoint_groups.contains(&g) || m.trim_log.contains(&g));
    }

    /// [`Mutant::RecoveryNotCrashSafe`]: "tidy" each partly written block by
    /// reading its valid pages into DRAM, erasing it and programming them
    /// back — a cut between the erase and the programs loses them.
    fn compact_open_blocks_unsafely(&mut self, flash: &mut dyn Flash, written_pages: &[u32]) -> Result<(), FtlError> {
        let (m, dp) = (&mut self.map, &mut self.dp);
        let (spp, ppb) = (m.spp, m.ppb);
        for block in 0..m.geometry.blocks() {
            let w = written_pages[block as usize];
            let group = dp.group_of_block(block);
            if w == 0 || w >= ppb || dp.group_state(group) != GroupState::Sealed {
                continue;
            }
            let first = block * ppb;
            let valid: Vec<u32> = (first..first + w).filter(|&p| dp.is_valid(p)).collect();
            let lpns: Vec<u32> = (0..m.lpns).filter(|&l| valid.contains(&m.l2p.get(l as usize))).collect();
            let mut held = Vec::new();
            for &lpn in &lpns {
                let buf = flash.buf_alloc(spp)?;
                flash.read(Cause::Recovery, page_addr(m.l2p.get(lpn as usize)), 0, spp, buf, 0, &mut [])?;
                held.push((lpn, buf));
            }
            flash.erase(Cause::Recovery, crate::nand::BlockAddr(u64::from(block)))?;
            for (k, &(lpn, buf)) in held.iter().enumerate() {
                let ppn = first + k as u32;
                let oob = encode_oob(OOB_DATA, lpn, dp.next_seq());
                flash.program(Cause::Recovery, page_addr(ppn), buf, 0, &oob)?;
                m.l2p.set(lpn as usize, ppn);
            }
            for (_, buf) in held {
                flash.buf_free(buf);
            }
            for p in first..first + ppb {
                dp.clear_valid(p);
            }
            for k in 0..lpns.len() as u32 {
                dp.mark_valid(first + k);
            }
        }
        Ok(())
    }
}
