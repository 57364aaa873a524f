//! `hybrid`: how a mount rebuilds the FAST state from flash, after a clean
//! shutdown or a power cut — including a cut during an earlier mount (see
//! the crash guarantee in `hybrid.rs`).
//!
//! 1. **Scan** every block's OOBs up to its first erased page. A block
//!    whose OOB reads fail is undefined (an interrupted erase). The data of
//!    each block's last programmed page is read: a cut tears only the page
//!    being programmed, the last of its block, and a torn page fails ECC
//!    although its OOB reads back as written, so it is not trusted.
//! 2. **Classify** each block by the kind of its first page: a *merge
//!    block* (a merge's copies or pads), a *sequential log* (host pages at
//!    their own offsets from offset 0 — also what a switched sequential log,
//!    now a data block, looks like) or a *random log*. Merge blocks and
//!    sequential logs are *data-shaped*: every page at its own offset of one
//!    logical block.
//! 3. **Drop** undefined blocks and torn merge blocks: erase them at once.
//!    A merge block is torn only if its merge was cut, and no merge —
//!    of normal operation or of a recovery — erases a block whose version it
//!    copied before the merge block is complete (step 7), so every page a
//!    torn merge block holds has a surviving source.
//! 4. **Versions**: the newest surviving copy of each logical page (by the
//!    program sequence number in its OOB) is its current version. A block
//!    holding none is *stale*; it is erased in step 7, not yet.
//! 5. **Per logical block**, its data-shaped blocks oldest first; the
//!    newest of them decides:
//!    - it is the newest sequential log on the device, intact and not full,
//!      and at most one block is older: it stays the sequential log (with
//!      its next offset after its last page) over that data block — the
//!      state the cut interrupted;
//!    - it ends in a torn page (host data in the sequential log was being
//!      programmed, or a partial merge's copy): nothing may follow the torn
//!      page, so the logical block is *rewritten* — merged into a fresh
//!      block (a full merge) — and all its data-shaped blocks are erased;
//!    - otherwise it becomes the data block: if an older one still holds
//!      current pages beyond it (an interrupted full or partial merge) the
//!      merge is *finished* into it, then the older ones are erased.
//! 6. **Random logs** are the blocks with current pages left, oldest first;
//!    they are not appended to (the next random write opens a fresh one).
//! 7. **Repair, in an order a cut cannot hurt**: finish every interrupted
//!    merge (each followed by the erase of its logical block's older
//!    blocks, which hold nothing else); only then erase the stale blocks;
//!    then rewrite the torn logical blocks; then, if there are more random
//!    logs than the pool holds (e.g. fewer good blocks now), merge the
//!    oldest down.
//!
//! # A cut during recovery
//!
//! Recovery is idempotent: it can be cut at any operation, and the next
//! mount — which sees only the flash — reaches the same state or an
//! equally valid one, because every step keeps two rules:
//!
//! - **Copy before erase.** A copy gets a new sequence number, so once it
//!   is programmed it supersedes its source; the source is erased only
//!   after the block holding the copy is *complete* — no program will
//!   follow, so no cut can tear it and make step 3 drop it. A merge block
//!   being finished is incomplete until its last copy, and a stale block
//!   may be stale only because such a block holds newer copies of its
//!   pages (a random log whose pages the interrupted merge had copied):
//!   that is why stale blocks wait for every finish. (Erasing them first
//!   lost a durable write when a finish was torn: the next mount dropped
//!   the torn merge block, and the copies' sources were gone.)
//! - **A recovery program is recognisable.** Recovery programs only merge
//!   copies and pads (`OOB_DATA`, `OOB_PAD`) with new sequence numbers,
//!   each the last programmed page of its block. Torn, it fails ECC: in a
//!   merge block (a rewrite, a finish of a full merge) step 3 drops the
//!   block and the merge is redone from its sources; in a sequential log
//!   being finished, its intact pages stay versions and step 5 rewrites the
//!   logical block. An erase cut by the power leaves an undefined block,
//!   which held nothing current (a dropped block, a stale one, or one whose
//!   versions a complete block holds): step 3 drops it.
//!
//! Free blocks suffice: at any instant the blocks on flash are at most the
//! data blocks, the sequential log, the random pool and one merge block.
//! Finishing a merge needs no free block; a rewrite (a torn sequential
//! log, or one a finish tore) needs one, and the merge reserve is free
//! whenever the sequential log is programmed — by the host or by a partial
//! merge, which runs before the next sequential log is taken. A rewrite
//! torn again is dropped in step 3 before it is redone, so nested cuts do
//! not use up blocks.

use super::*;
use crate::ftl::kit::flash_ops::BlockPages;

/// What made a block, from the kind of its first page (see the module docs).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Made {
    Merge,
    SeqLog,
    RandLog,
}

/// One block as the mount scan found it.
#[derive(Copy, Clone, Debug)]
struct Scanned {
    made: Made,
    /// The logical block of a data-shaped block.
    lbn: u32,
    /// The sequence number of its first page (blocks are ordered by it).
    first_seq: u64,
    /// Pages whose data survived: those programmed, less a torn last page.
    valid: u32,
    torn: bool,
}

enum BlockScan {
    Erased,
    /// Unreadable (an interrupted erase).
    Undefined,
    Found(Scanned),
}

/// An interrupted merge to finish: copy into `target`, from its first
/// erased page `from`, what the `older` blocks of `lbn` still hold, then
/// erase them.
struct Finish {
    lbn: u32,
    target: u32,
    from: u32,
    older: Vec<u32>,
}

/// A logical block whose newest block is torn: merge `lbn` into a fresh
/// block, then erase `blocks`.
struct Rewrite {
    lbn: u32,
    blocks: Vec<u32>,
}

/// The work step 5 leaves for step 7.
#[derive(Default)]
struct Repairs {
    finishes: Vec<Finish>,
    rewrites: Vec<Rewrite>,
}

impl HybridFtl {
    /// Rebuild every map from the blocks on flash (see the module docs).
    pub(super) fn scan_and_rebuild(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let blocks = self.geometry.blocks() as usize;
        let mut best_seq = vec![0u64; self.lpns as usize];
        let mut best_ppn = vec![NONE; self.lpns as usize];
        // The logical pages whose newest version is a lost slot.
        let mut best_lost = std::collections::HashSet::new();
        let mut scanned: Vec<Option<Scanned>> = vec![None; blocks];
        let mut dropped = Vec::new();
        let mut oobs = Vec::with_capacity(self.ppb as usize);
        let (mut good, mut max_seq) = (0, 0);
        let mut grown_bad = Vec::new();
        for block in 0..blocks as u32 {
            let addr = BlockAddr(u64::from(block));
            if flash.is_factory_bad(addr) && self.mutant != Mutant::MountForgetsBadBlocks {
                self.role[block as usize] = Role::Bad;
                // (else BUG (deliberate): skipped with the factory bad blocks)
                if flash.is_grown_bad(addr) && self.mutant != Mutant::MountSkipsGrownBadBlocks {
                    grown_bad.push(block);
                }
                continue;
            }
            good += 1;
            match self.scan_block(flash, block, &mut oobs, &mut max_seq)? {
                BlockScan::Erased => self.push_free(block),
                BlockScan::Undefined => dropped.push(block),
                // An interrupted merge: every page it holds has a surviving source.
                BlockScan::Found(b) if b.made == Made::Merge && b.torn => dropped.push(block),
                BlockScan::Found(b) => {
                    let versions = (&mut best_seq[..], &mut best_ppn[..], &mut best_lost);
                    self.record_versions(block, &oobs[..b.valid as usize], versions);
                    scanned[block as usize] = Some(b);
                }
            }
        }
        // Last: a page a replacement copied with its OOB has the same
        // sequence number in both blocks, and the good block's copy wins.
        for &block in &grown_bad {
            if let BlockScan::Found(b) = self.scan_block(flash, block, &mut oobs, &mut max_seq)? {
                let versions = (&mut best_seq[..], &mut best_ppn[..], &mut best_lost);
                self.record_versions(block, &oobs[..b.valid as usize], versions);
            }
        }
        self.seq = max_seq + 1;
        self.settle_log_blocks(good)?;
        self.erase_recovered(flash, &dropped)?;
        let stale = self.take_blocks_without_versions(&best_ppn, &mut scanned);
        let repairs = self.plan_logical_blocks(&scanned);
        self.install_versions(&best_ppn);
        if self.mutant != Mutant::MountForgetsLostPages {
            // (else BUG (deliberate): the lost slots' zeros read as data)
            best_lost.into_iter().for_each(|lpn| self.lost.restore(lpn));
        }
        self.adopt_random_logs(&scanned);
        self.repair(flash, &repairs, &stale)?;
        // Adopted logs are not appended to: the next random write opens one.
        self.cursor = (NONE, self.ppb);
        Ok(())
    }

    /// Step 7 of the module docs, in its order (see *A cut during recovery*):
    /// finish the interrupted merges, erase the `stale` blocks, rewrite the
    /// torn logical blocks, merge surplus random logs down.
    fn repair(&mut self, flash: &mut dyn Flash, repairs: &Repairs, stale: &[u32]) -> Result<(), FtlError> {
        let stale_first = self.mutant == Mutant::RecoveryErasesStaleBlocksFirst;
        if stale_first {
            self.erase_recovered(flash, stale)?;
        }
        for f in &repairs.finishes {
            self.finish_merge(flash, f)?;
            self.erase_recovered(flash, &f.older)?;
        }
        if !stale_first {
            self.erase_recovered(flash, stale)?;
        }
        for r in &repairs.rewrites {
            self.full_merge(flash, r.lbn, Cause::Recovery)?;
            self.counters.mount_rewrites += 1;
            self.erase_recovered(flash, &r.blocks)?;
        }
        self.move_off_grown_bad_blocks(flash)?;
        self.merge_down_random_logs(flash)
    }

    /// Finish the retirement of grown bad blocks (the retirement window,
    /// see `docs/design-notes/reliability.md`): a cut during a failed
    /// block's replacement leaves current versions only in the failed
    /// block, which the scan read (the NAND still reads it; it is never
    /// programmed or erased again). Each logical block with such a version
    /// is merged into a fresh data block, as a torn one is rewritten.
    fn move_off_grown_bad_blocks(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let mut lbns: Vec<u32> = (0..self.lpns)
            .filter(|&lpn| {
                let ppn = self.location(lpn);
                ppn != NONE && self.role[(ppn / self.ppb) as usize] == Role::Bad
            })
            .map(|lpn| lpn / self.ppb)
            .collect();
        lbns.dedup();
        for lbn in lbns {
            self.full_merge(flash, lbn, Cause::Recovery)?;
            self.counters.mount_grown_bad_merges += 1;
        }
        Ok(())
    }

    /// Erase `blocks` (holding nothing current) and free them.
    fn erase_recovered(&mut self, flash: &mut dyn Flash, blocks: &[u32]) -> Result<(), FtlError> {
        for &block in blocks {
            self.erase_to_free(flash, block, Cause::Recovery)?;
            self.counters.mount_erases += 1;
        }
        Ok(())
    }

    /// Read a block's OOBs (into `oobs`) up to its first erased page, check
    /// whether its last programmed page survived, and classify it.
    fn scan_block(
        &mut self,
        flash: &mut dyn Flash,
        block: u32,
        oobs: &mut Vec<[u8; OOB_BYTES]>,
        max_seq: &mut u64,
    ) -> Result<BlockScan, FtlError> {
        let buf = self.tmp_buf.expect("buffers allocated at power-on");
        let trust = self.mutant == Mutant::TrustsTornPage;
        let pages = flash_ops::scan_block(flash, u64::from(block * self.ppb), self.ppb, oobs, buf, trust)?;
        self.counters.mount_scanned_pages += oobs.len() as u64;
        *max_seq = oobs.iter().map(|o| decode_oob(o).2).fold(*max_seq, u64::max);
        let (valid, torn) = match pages {
            BlockPages::Erased => return Ok(BlockScan::Erased),
            BlockPages::Undefined => return Ok(BlockScan::Undefined),
            BlockPages::Programmed { valid, torn } => (valid, torn),
        };
        let (first_kind, first_lpn, first_seq) = decode_oob(&oobs[0]);
        let lbn = first_lpn / self.ppb;
        let shaped = first_lpn < self.lpns
            && oobs[..valid as usize].iter().enumerate().all(|(page, o)| {
                let lpn = decode_oob(o).1;
                lpn / self.ppb == lbn && lpn % self.ppb == page as u32
            });
        let made = match first_kind {
            OOB_DATA | OOB_PAD | OOB_LOST if shaped => Made::Merge,
            OOB_SEQ if shaped => Made::SeqLog,
            _ => Made::RandLog,
        };
        Ok(BlockScan::Found(Scanned { made, lbn, first_seq, valid, torn }))
    }

    /// Keep, per logical page, the newest version among the surviving pages
    /// of `block` (`oobs`) and those seen before (pads hold no version; a
    /// lost slot is one, and `best_lost` holds the pages it is the newest of).
    fn record_versions(
        &self,
        block: u32,
        oobs: &[[u8; OOB_BYTES]],
        (best_seq, best_ppn, best_lost): (&mut [u64], &mut [u32], &mut std::collections::HashSet<u32>),
    ) {
        for (page, oob) in oobs.iter().enumerate() {
            let (kind, lpn, seq) = decode_oob(oob);
            if kind != OOB_PAD && lpn < self.lpns && seq > best_seq[lpn as usize] {
                best_seq[lpn as usize] = seq;
                best_ppn[lpn as usize] = block * self.ppb + page as u32;
                if kind == OOB_LOST {
                    best_lost.insert(lpn);
                } else if !best_lost.is_empty() {
                    best_lost.remove(&lpn);
                }
            }
        }
    }

    /// Take the stale blocks (holding no current version) out of `scanned`.
    fn take_blocks_without_versions(&self, best_ppn: &[u32], scanned: &mut [Option<Scanned>]) -> Vec<u32> {
        let mut current = vec![false; scanned.len()];
        for &ppn in best_ppn.iter().filter(|&&p| p != NONE) {
            current[(ppn / self.ppb) as usize] = true;
        }
        let mut stale = Vec::new();
        for (block, s) in scanned.iter_mut().enumerate() {
            if s.is_some() && !current[block] {
                *s = None;
                stale.push(block as u32);
            }
        }
        stale
    }

    /// Step 5 of the module docs: choose each logical block's data block
    /// and the sequential log; return the merges left to finish or redo.
    fn plan_logical_blocks(&mut self, scanned: &[Option<Scanned>]) -> Repairs {
        let mut shaped: Vec<(u32, u64, u32)> = Vec::new(); // (lbn, first seq, block)
        for (block, s) in scanned.iter().enumerate() {
            if let Some(s) = s.filter(|s| s.made != Made::RandLog) {
                shaped.push((s.lbn, s.first_seq, block as u32));
            }
        }
        shaped.sort_unstable();
        let info = |block: u32| scanned[block as usize].expect("a scanned block");
        let newest_seq_log = shaped
            .iter()
            .filter(|&&(_, _, b)| info(b).made == Made::SeqLog)
            .max_by_key(|&&(_, seq, _)| seq)
            .map(|&(_, _, b)| b);
        let mut repairs = Repairs::default();
        for chain in shaped.chunk_by(|a, b| a.0 == b.0) {
            let lbn = chain[0].0;
            let newest = chain[chain.len() - 1].2;
            let older: Vec<u32> = chain[..chain.len() - 1].iter().map(|&(_, _, b)| b).collect();
            let n = info(newest);
            if Some(newest) == newest_seq_log
                && older.len() <= 1
                && n.valid < self.lbn_pages(lbn)
                && chain.iter().all(|&(_, _, b)| !info(b).torn)
            {
                self.role[newest as usize] = Role::SeqLog;
                self.seq_log = Some(SeqLog { block: newest, lbn, next: n.valid });
                if let Some(&d) = older.first() {
                    self.data_block[lbn as usize] = d;
                }
            } else if n.torn {
                let mut blocks = older;
                blocks.push(newest);
                repairs.rewrites.push(Rewrite { lbn, blocks });
            } else {
                self.data_block[lbn as usize] = newest;
                self.role[newest as usize] = Role::Data;
                if !older.is_empty() {
                    repairs.finishes.push(Finish { lbn, target: newest, from: n.valid, older });
                }
            }
        }
        repairs
    }

    /// Each current version is in its logical block's data block, or a log page.
    fn install_versions(&mut self, best_ppn: &[u32]) {
        for (lpn, &ppn) in best_ppn.iter().enumerate() {
            if ppn == NONE {
                continue;
            }
            let lpn = lpn as u32;
            let in_data =
                self.data_block[(lpn / self.ppb) as usize] == ppn / self.ppb && ppn % self.ppb == lpn % self.ppb;
            if in_data {
                self.set_in_data(lpn, true);
            } else {
                self.log_ppn[lpn as usize] = ppn;
            }
        }
    }

    /// The random logs still holding current pages join the pool, oldest first.
    fn adopt_random_logs(&mut self, scanned: &[Option<Scanned>]) {
        let mut logs: Vec<(u64, u32)> = scanned
            .iter()
            .enumerate()
            .filter_map(|(b, s)| s.filter(|s| s.made == Made::RandLog).map(|s| (s.first_seq, b as u32)))
            .collect();
        logs.sort_unstable();
        for (_, block) in logs {
            self.role[block as usize] = Role::RandLog;
            self.rand_logs.push_back(block);
        }
    }

    /// Copy into data block `target` of `lbn`, from offset `from` (its
    /// first erased page), every offset up to the last whose current
    /// version is in one of `older`.
    fn finish_merge(&mut self, flash: &mut dyn Flash, f: &Finish) -> Result<(), FtlError> {
        let Finish { lbn, target, from, ref older } = *f;
        let first = lbn * self.ppb;
        let in_older = |s: &Self, off: u32| {
            let ppn = s.location(first + off);
            ppn != NONE && older.contains(&(ppn / s.ppb))
        };
        if let Some(off) = (0..from).find(|&off| in_older(self, off)) {
            // Cannot happen (a newer block's pages are newer): refuse rather
            // than erase a current version.
            return Err(FtlError::Mount(format!(
                "hybrid: logical page {} is current in a block older than its data block {target}",
                first + off
            )));
        }
        let Some(last) = (from..self.lbn_pages(lbn)).rev().find(|&off| in_older(self, off)) else { return Ok(()) };
        for off in from..=last {
            self.fill_page(flash, first + off, target * self.ppb + off, Cause::Recovery)?;
        }
        self.counters.mount_finished_merges += 1;
        Ok(())
    }

    /// More random logs than the pool holds (e.g. fewer good blocks now):
    /// merge the oldest down.
    fn merge_down_random_logs(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        while self.rand_logs.len() as u32 > self.max_rand_logs {
            let victim = self.rand_logs.pop_front().expect("logs");
            self.collect_victim_lbns(flash, victim)?;
            let lbns = std::mem::take(&mut self.victim_lbns);
            for &lbn in &lbns {
                self.full_merge(flash, lbn, Cause::Recovery)?;
            }
            self.victim_lbns = lbns;
            self.erase_to_free(flash, victim, Cause::Recovery)?;
            self.counters.mount_merged_logs += 1;
        }
        Ok(())
    }
}
