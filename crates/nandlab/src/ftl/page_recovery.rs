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
//! - **Checkpoints** (a clean shutdown, or a long trim log) hold the whole
//!   map. Entries are trusted only where the scan finds that logical page
//!   still at that physical page: an unflushed trim may have let GC reuse
//!   the page since.

use super::*;
use crate::ftl::crash_bugs::CrashBug;

const OOB_TRIM: u8 = 3;
const TRIM_MAGIC: u32 = 0x5254_4c4e; // "NLTR"
const TRIM_HEADER_BYTES: usize = 8;
const TRIM_ENTRY_BYTES: usize = 12;
/// Trim-log blocks a flush accumulates before it writes a checkpoint instead.
const TRIM_LOG_MAX_BLOCKS: usize = 4;

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

impl PageFtl {
    /// Make the trims since the last flush durable (see the module docs).
    pub(super) fn persist_trims(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.pending_trim_blocks.clear();
        if self.pending_trims.is_empty() || self.crash_bug == CrashBug::ForgetsTrimsOnFlush {
            self.pending_trims.clear();
            return Ok(());
        }
        let per_page = (self.geometry.page_size_bytes() as usize - TRIM_HEADER_BYTES) / TRIM_ENTRY_BYTES;
        let mut trims = std::mem::take(&mut self.pending_trims);
        let mut data = std::mem::take(&mut self.trim_buf);
        data.resize(self.geometry.page_size_bytes() as usize, 0xff);
        let r = self.write_trim_records(flash, &trims, per_page, &mut data);
        self.trim_buf = data;
        trims.clear();
        if self.pending_trims.is_empty() {
            self.pending_trims = trims; // keep the capacity
        }
        r?;
        if self.trim_log.len() > TRIM_LOG_MAX_BLOCKS {
            self.write_checkpoint(flash)?;
        }
        Ok(())
    }

    fn write_trim_records(
        &mut self,
        flash: &mut dyn Flash,
        trims: &[(u32, u64)],
        per_page: usize,
        data: &mut [u8],
    ) -> Result<(), FtlError> {
        for chunk in trims.chunks(per_page) {
            let ppn = self.trim_log_page(flash)?;
            data.fill(0xff);
            data[0..4].copy_from_slice(&TRIM_MAGIC.to_le_bytes());
            data[4..8].copy_from_slice(&(chunk.len() as u32).to_le_bytes());
            for (k, &(lpn, seq)) in chunk.iter().enumerate() {
                let at = TRIM_HEADER_BYTES + k * TRIM_ENTRY_BYTES;
                data[at..at + 4].copy_from_slice(&lpn.to_le_bytes());
                data[at + 4..at + 12].copy_from_slice(&seq.to_le_bytes());
            }
            let oob = encode_oob(OOB_TRIM, chunk.len() as u32, self.next_seq());
            flash.program_meta(Cause::Metadata, self.page_addr(ppn), data, &oob)?;
            self.counters.checkpoint_pages += 1;
        }
        Ok(())
    }

    /// The next page of the trim log, opening a block when needed.
    fn trim_log_page(&mut self, flash: &mut dyn Flash) -> Result<u32, FtlError> {
        if self.trim_log.is_empty() || self.trim_log_next >= self.ppb {
            let unit = (0..self.units.len()).max_by_key(|&u| self.units[u].free.len()).unwrap_or(0);
            if self.units[unit].free.len() as u32 <= self.fg_threshold {
                self.foreground_gc(flash, unit)?;
            }
            let block = self.units[unit]
                .free
                .pop_front()
                .ok_or_else(|| FtlError::NoSpace("no free block for the trim log".into()))?;
            self.state[block as usize] = BlockState::Checkpoint;
            self.trim_log.push(block);
            self.trim_log_next = 0;
        }
        let block = *self.trim_log.last().expect("a trim-log block");
        self.trim_log_next += 1;
        Ok(block * self.ppb + self.trim_log_next - 1)
    }

    /// A checkpoint now holds every trim: the trim log can go.
    pub(super) fn release_trim_log(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        for b in std::mem::take(&mut self.trim_log) {
            let unit = self.unit_of(b);
            self.erase_to_free(flash, unit, b, Cause::Metadata)?;
        }
        self.trim_log_next = 0;
        Ok(())
    }

    /// Scan every block; rebuild the map from the newest complete checkpoint,
    /// the data pages programmed after it and the trim records.
    pub(super) fn scan_and_rebuild(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let g = self.geometry.clone();
        let lpns = self.lpns as usize;
        let mut best_seq = vec![0u64; lpns];
        let mut data_l2p = vec![UNMAPPED; lpns];
        // The logical page each physical page holds, to validate checkpoint entries.
        let mut lpn_of = large_vec(g.pages() as usize, UNMAPPED);
        // checkpoint seq → (pages expected, pages found: (index, ppn))
        let mut checkpoints: BTreeMap<u64, (u32, Vec<(u32, u32)>)> = BTreeMap::new();
        let mut trim_pages: Vec<(u64, u32)> = Vec::new();
        let mut written_pages = vec![0u32; g.blocks() as usize];
        let mut undefined = Vec::new();
        let mut max_seq = 0;
        let mut meta = vec![0u8; CHECKPOINT_HEADER_BYTES];
        let mut scan = BlockScan::default();
        for block in 0..g.blocks() {
            if flash.is_factory_bad(self.block_addr(block)) {
                self.state[block as usize] = BlockState::Bad;
                continue;
            }
            self.scan_block(flash, block, &mut scan)?;
            if scan.undefined {
                undefined.push(block);
                continue;
            }
            written_pages[block as usize] = scan.oobs.len() as u32;
            // The block's logical pages are scattered over the maps: load
            // their entries together rather than one miss at a time.
            for oob in &scan.oobs {
                let lpn = u32::from_le_bytes(oob[1..5].try_into().unwrap()) as usize;
                crate::prefetch::prefetch(&best_seq, lpn);
                crate::prefetch::prefetch(&data_l2p, lpn);
            }
            for (page, oob) in scan.oobs.iter().enumerate() {
                let (kind, index, seq) = decode_oob(oob);
                max_seq = max_seq.max(seq);
                if scan.torn.contains(&(page as u32)) {
                    continue;
                }
                let ppn = block * self.ppb + page as u32;
                match kind & OOB_KIND_MASK {
                    OOB_DATA if index < self.lpns => {
                        self.block_stream[block as usize] = kind >> 4;
                        lpn_of[ppn as usize] = index;
                        let newer = match self.crash_bug {
                            CrashBug::IgnoresSequenceNumbers => data_l2p[index as usize] == UNMAPPED,
                            _ => seq > best_seq[index as usize],
                        };
                        if newer {
                            best_seq[index as usize] = seq;
                            data_l2p[index as usize] = ppn;
                        }
                    }
                    OOB_CHECKPOINT => {
                        if flash.read_meta(Cause::Recovery, self.page_addr(ppn), &mut meta, &mut []).is_ok()
                            && u32::from_le_bytes(meta[0..4].try_into().unwrap()) == CHECKPOINT_MAGIC
                        {
                            let total = u32::from_le_bytes(meta[8..12].try_into().unwrap());
                            checkpoints.entry(seq).or_insert((total, Vec::new())).1.push((index, ppn));
                        }
                    }
                    OOB_TRIM => trim_pages.push((seq, ppn)),
                    _ => {} // unknown content: treated as garbage, collected later
                }
            }
        }
        self.seq = max_seq + 1;
        self.table.now = self.seq;
        let complete = checkpoints
            .iter()
            .rev()
            .find(|(_, (total, found))| found.len() as u32 == *total)
            .map(|(seq, (_, found))| (*seq, found.clone()));
        let ckpt_seq = match complete {
            Some((ckpt_seq, mut pages)) => {
                pages.sort_unstable();
                self.load_checkpoint(flash, &pages)?;
                for lpn in 0..lpns {
                    let ppn = self.l2p.get(lpn);
                    if best_seq[lpn] > ckpt_seq {
                        // Data programmed after the checkpoint wins over it.
                        self.l2p.set(lpn, data_l2p[lpn]);
                    } else if ppn != UNMAPPED && lpn_of.get(ppn as usize) != Some(&(lpn as u32)) {
                        // The page was reclaimed since: an unflushed trim.
                        self.l2p.set(lpn, UNMAPPED);
                    }
                }
                let mut blocks: Vec<u32> = pages.iter().map(|&(_, ppn)| ppn / self.ppb).collect();
                blocks.dedup();
                self.checkpoint_blocks = blocks;
                ckpt_seq
            }
            None => {
                for (lpn, &ppn) in data_l2p.iter().enumerate() {
                    self.l2p.set(lpn, ppn);
                }
                0
            }
        };
        self.apply_trim_records(flash, &trim_pages, ckpt_seq, &best_seq)?;
        if !self.hot_cold.is_none() {
            for lpn in 0..self.lpns {
                let ppn = self.l2p.get(lpn as usize);
                if ppn != UNMAPPED {
                    self.hot_cold.restore(lpn, self.block_stream[(ppn / self.ppb) as usize]);
                }
            }
        }
        for &b in &undefined {
            // An interrupted erase: finish it before the block is reused.
            flash.erase(Cause::Recovery, self.block_addr(b))?;
            self.table.erase_count[b as usize] += 1;
        }
        self.rebuild_blocks(&written_pages);
        if self.crash_bug == CrashBug::RecoveryNotCrashSafe {
            self.compact_open_blocks_unsafely(flash, &written_pages)?;
        }
        Ok(())
    }

    /// Read a block's OOBs up to its first erased page, and check the data
    /// of the pages a cut could have torn.
    fn scan_block(&mut self, flash: &mut dyn Flash, block: u32, scan: &mut BlockScan) -> Result<(), FtlError> {
        scan.oobs.clear();
        scan.torn.clear();
        scan.undefined = false;
        let mut oob = [0u8; OOB_BYTES];
        for page in 0..self.ppb {
            match flash.read_oob(Cause::Recovery, self.page_addr(block * self.ppb + page), &mut oob) {
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
        if self.crash_bug == CrashBug::TrustsTornPage {
            return Ok(());
        }
        let mut at_risk = Vec::new();
        self.geometry.lower_paired_pages(last, &mut at_risk);
        at_risk.push(last);
        for page in at_risk {
            let ppn = block * self.ppb + page;
            let unreadable = match scan.oobs[page as usize][0] & OOB_KIND_MASK {
                OOB_DATA => {
                    let buf = self.tmp_buf.expect("buffers allocated at power-on");
                    flash.read(Cause::Recovery, self.page_addr(ppn), 0, 1, buf, 0, &mut []).is_err()
                }
                _ => {
                    let mut header = [0u8; 4];
                    flash.read_meta(Cause::Recovery, self.page_addr(ppn), &mut header, &mut []).is_err()
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
    /// log blocks that still matter.
    fn apply_trim_records(
        &mut self,
        flash: &mut dyn Flash,
        pages: &[(u64, u32)],
        ckpt_seq: u64,
        best_seq: &[u64],
    ) -> Result<(), FtlError> {
        let mut data = vec![0u8; self.geometry.page_size_bytes() as usize];
        let mut log_blocks = Vec::new();
        for &(page_seq, ppn) in pages {
            if page_seq <= ckpt_seq
                || flash.read_meta(Cause::Recovery, self.page_addr(ppn), &mut data, &mut []).is_err()
            {
                continue;
            }
            if u32::from_le_bytes(data[0..4].try_into().unwrap()) != TRIM_MAGIC {
                continue;
            }
            let count = u32::from_le_bytes(data[4..8].try_into().unwrap()) as usize;
            for k in 0..count.min((data.len() - TRIM_HEADER_BYTES) / TRIM_ENTRY_BYTES) {
                let at = TRIM_HEADER_BYTES + k * TRIM_ENTRY_BYTES;
                let lpn = u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
                let seq = u64::from_le_bytes(data[at + 4..at + 12].try_into().unwrap());
                if lpn < self.l2p.len() && seq > ckpt_seq && best_seq[lpn] < seq {
                    self.l2p.set(lpn, UNMAPPED);
                }
            }
            log_blocks.push(ppn / self.ppb);
        }
        log_blocks.sort_unstable();
        log_blocks.dedup();
        // Kept until the next checkpoint; new records go to a fresh block.
        self.trim_log = log_blocks;
        self.trim_log_next = self.ppb;
        Ok(())
    }

    fn load_checkpoint(&mut self, flash: &mut dyn Flash, pages: &[(u32, u32)]) -> Result<(), FtlError> {
        let per_page = self.entries_per_checkpoint_page();
        let map_pages = self.checkpoint_map_pages();
        let mut data = vec![0u8; self.geometry.page_size_bytes() as usize];
        for &(index, ppn) in pages {
            flash.read_meta(Cause::Recovery, self.page_addr(ppn), &mut data, &mut [])?;
            let count = u32::from_le_bytes(data[12..16].try_into().unwrap()) as usize;
            // The map first, then the erase counts (see write_checkpoint).
            let is_map = (index as usize) < map_pages;
            let (len, i) = if is_map {
                (self.l2p.len(), index as usize)
            } else {
                (self.table.erase_count.len(), index as usize - map_pages)
            };
            let base = i * per_page;
            if count > per_page || base + count > len {
                return Err(FtlError::Mount(format!("checkpoint page {index} at page {ppn} is inconsistent")));
            }
            for k in 0..count {
                let at = CHECKPOINT_HEADER_BYTES + 4 * k;
                let entry = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
                if is_map {
                    self.l2p.set(base + k, entry);
                } else {
                    self.table.erase_count[base + k] = entry;
                }
            }
        }
        Ok(())
    }

    /// Derive valid bits and counts, free lists and candidates from `l2p`.
    fn rebuild_blocks(&mut self, written_pages: &[u32]) {
        for ppn in self.l2p.iter() {
            if ppn != UNMAPPED {
                self.valid_bits[(ppn / 64) as usize] |= 1 << (ppn % 64);
                self.table.valid[(ppn / self.ppb) as usize] += 1;
            }
        }
        for block in 0..self.geometry.blocks() {
            let b = block as usize;
            if self.state[b] == BlockState::Bad {
                continue;
            }
            if self.checkpoint_blocks.contains(&block) || self.trim_log.contains(&block) {
                self.state[b] = BlockState::Checkpoint;
            } else if written_pages[b] == 0 {
                self.state[b] = BlockState::Free;
                let unit = self.unit_of(block);
                self.units[unit].free.push_back(block);
            } else {
                // Partly written blocks are not appended to after a power
                // cycle: they are sealed and left to GC.
                self.state[b] = BlockState::Sealed;
                self.table.sealed_at[b] = self.seq;
                self.policy.insert(block, &self.table);
            }
        }
    }

    /// [`CrashBug::RecoveryNotCrashSafe`]: "tidy" each partly written block by
    /// reading its valid pages into DRAM, erasing it and programming them
    /// back — a cut between the erase and the programs loses them.
    fn compact_open_blocks_unsafely(&mut self, flash: &mut dyn Flash, written_pages: &[u32]) -> Result<(), FtlError> {
        for block in 0..self.geometry.blocks() {
            let w = written_pages[block as usize];
            if w == 0 || w >= self.ppb || self.state[block as usize] != BlockState::Sealed {
                continue;
            }
            let first = block * self.ppb;
            let valid: Vec<u32> = (first..first + w).filter(|&p| self.is_valid(p)).collect();
            let lpns: Vec<u32> = (0..self.lpns).filter(|&l| valid.contains(&self.l2p.get(l as usize))).collect();
            let mut held = Vec::new();
            for &lpn in &lpns {
                let buf = flash.buf_alloc(self.spp)?;
                flash.read(
                    Cause::Recovery,
                    self.page_addr(self.l2p.get(lpn as usize)),
                    0,
                    self.spp,
                    buf,
                    0,
                    &mut [],
                )?;
                held.push((lpn, buf));
            }
            flash.erase(Cause::Recovery, self.block_addr(block))?;
            for (k, &(lpn, buf)) in held.iter().enumerate() {
                let ppn = first + k as u32;
                let oob = encode_oob(OOB_DATA, lpn, self.next_seq());
                flash.program(Cause::Recovery, self.page_addr(ppn), buf, 0, &oob)?;
                self.l2p.set(lpn as usize, ppn);
            }
            for (_, buf) in held {
                flash.buf_free(buf);
            }
            for p in first..first + self.ppb {
                self.valid_bits[(p / 64) as usize] &= !(1 << (p % 64));
            }
            for k in 0..lpns.len() as u32 {
                self.valid_bits[((first + k) / 64) as usize] |= 1 << ((first + k) % 64);
            }
            self.table.valid[block as usize] = lpns.len() as u32;
        }
        Ok(())
    }
}
