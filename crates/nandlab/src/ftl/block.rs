//! `block`: block-level mapping, the simplest FTL and the baseline the
//! others improve on (the scheme of early flash cards and of Ban's
//! "Flash file system", US patent 5,404,485, 1995, without its
//! replacement-block chains).
//!
//! # Algorithm
//!
//! - **Mapping.** Logical block `lbn` (the `pages_per_block` logical pages
//!   from `lbn · pages_per_block`) maps to one physical block; logical page
//!   `i` of it is always page `i` of that block. DRAM: a block number and a
//!   write pointer per logical block — nothing per page.
//! - **Writes.** A page at or beyond its block's write pointer is
//!   programmed in place (pages in between are padded with zero pages, as
//!   pages must be programmed in order; a logical block written for the
//!   first time gets a fresh block). A page *below* the write pointer
//!   cannot be rewritten in place: the logical block is rewritten whole —
//!   **read-modify-write** into a fresh block, copying every other page
//!   from the old one (copyback when on one plane), and the old block is
//!   erased. The copy of the pages after the written one is deferred while
//!   the host keeps writing that logical block in order (one replacement
//!   in progress at a time), so rewriting a logical block sequentially
//!   copies nothing; any other write completes the replacement first.
//!   Partial-page writes first read the page (page-level read-modify-write).
//! - **Trims.** A trim of a whole logical block erases its block(s); other
//!   trims are written as zero pages, so they are as durable as writes.
//!
//! Random writes of one page therefore cost a whole block of copies: the
//! write amplification block mapping is known for.
//!
//! # Persistence and crash guarantee
//!
//! Every page's OOB holds its kind (host data, copy, pad), its logical
//! block and the sequence number of its physical block's creation (newer
//! blocks of a logical block have higher ones). Nothing else is persisted:
//! no checkpoint, no write cache.
//!
//! **Guarantee** ([`Guarantee::Baseline`]): a write is durable when it
//! completes, and a trim when it completes (its zero pages are programmed
//! or its blocks erased), so a flush has nothing to do. After a power cut
//! every logical page reads as its last completed write or trim, or — for
//! the request in flight — as what that request was writing; never older.
//! Paired-page corruption (a torn upper page destroying a completed lower
//! page) is not defended against.
//!
//! **Why that holds.** Pages are never rewritten in place: data moves to a
//! newer block of its logical block only by copy (a read-modify-write, or
//! recovery), and a newer block's page at an offset is that offset's data
//! then or later. So at every instant *the newest block whose surviving
//! prefix covers an offset holds that offset's current version.* A
//! read-modify-write erases the old block only once the new one holds every
//! page, so each completed write keeps a durable copy. A whole-block trim
//! erases the logical block's blocks, the older first: a cut between leaves
//! some sectors trimmed and the rest as before, which the guarantee allows
//! for a trim in flight. A cut can tear only the page being programmed —
//! the last programmed page of its block — or leave the block being
//! erased undefined.
//!
//! **Recovery** (mount, after a clean shutdown or a cut):
//!
//! 1. Scan every block's OOBs up to its first erased page. A block whose
//!    OOB reads fail is undefined (an interrupted erase): erase it. Read
//!    the data of each block's last programmed page: if it fails ECC the
//!    page is torn, and is not trusted although its OOB looks valid.
//! 2. A torn block holding nothing but copies and pads is an interrupted
//!    copy whose sources survive: erase it. So are blocks left empty.
//! 3. Per logical block, with its remaining blocks ordered by sequence
//!    number: if the newest is intact, copy into it (after its last page)
//!    every offset an older block still holds beyond it — finishing an
//!    interrupted read-modify-write — then erase the older blocks. If the
//!    newest ends in a torn page (host data was being programmed; nothing
//!    may follow the torn page) rewrite the logical block into a fresh block
//!    from all of them, then erase them.
//!
//! Every step leaves the flash in a state step 1 recovers from, so a cut
//! during recovery is survived like any other: a torn copy is dropped in
//! step 2, an intact partial one is finished in step 3. Recovery needs one
//! free block (for a rewrite), which is why `block` keeps two spare blocks
//! beyond the logical blocks: one for the read-modify-write in progress,
//! one for recovery.
//!
//! # Lost pages (media reliability)
//!
//! A read-modify-write or a failed block's replacement copies pages by
//! read + program when it cannot use copyback (across planes, or
//! `copyback = false`); with the reliability model on such a read may be
//! uncorrectable. The page cannot be copied as data (it would come back
//! as garbage, or as zeros), nor may the FTL stop: its slot in the new
//! block is programmed with zeros under the OOB kind
//! [`OOB_LOST`](crate::ftl::kit::lost_pages) and the logical page is
//! marked lost ([`LostPages`]): host reads of it fail with
//! `Uncorrectable`, a whole-page write or trim makes it good again, and
//! later copies carry the lost slot on. The mark is on flash, so a mount
//! restores it from the OOB of the block that holds the offset's current
//! version (its recovery copies carry it on too). A pad whose read fails
//! is padded again (and a host read of it returns its zeros): it held no
//! data. A pad keeps its kind through copies: a read + program copy gets
//! it with the read, a copyback (with the media model on) by one OOB read
//! of the source. A page of trim zeros is host data to this FTL, so its loss reads
//! as a media error on trimmed sectors (which the oracle does not accept:
//! the model records only written versions as lost).
//!
//! # Grown bad blocks (media reliability)
//!
//! A block whose program fails is replaced (its pages copied to a fresh
//! block with a newer sequence number); one whose erase fails is retired
//! with its pages. Neither is programmed or erased again, but the NAND
//! still reads both, and a cut during a replacement leaves pages only
//! there. So the mount scans grown bad blocks too (the flash tells them
//! from factory bad ones) and uses them in step 3 as *sources* only: a
//! logical block whose newest block is a grown bad one is rewritten into
//! a fresh block, and a grown bad block is never mapped or erased. A
//! stale grown bad block never wins while a newer block covers its
//! offsets; the one case where none does is a whole-block trim, which
//! erases. So the FTL keeps, per logical block with pages in a grown bad
//! block (noted at the failure and by the mount scan), how many offsets
//! those may hold, and a whole-block trim of it first programs pads over
//! them into a fresh block (which outranks the bad one), then erases.
//!
//! Deliberately broken variants ([`Mutant`]s) exist for the checkers' tests.

use super::mutants::Mutant;
use super::{
    check_range,
    kit::flash_ops::{self, BlockPages},
    kit::free_blocks::{self, FreeBlockPool},
    kit::lost_pages::{LostPages, OOB_LOST},
    kit::whole_page_io::{self, WholePageStore},
    parse_options, Durability, Ftl, FtlDescriptor, FtlEnv, FtlError, FtlInfo, FtlOptions, FtlStats, Guarantee,
    IdleOutcome, IoRequest, OptionDoc,
};
use crate::flash::{BufId, Cause, Flash, FlashError};
use crate::nand::{BlockAddr, FastDiv, Geometry, PageAddr};
use serde::Deserialize;
use std::collections::BTreeMap;

pub const DESCRIPTOR: FtlDescriptor = FtlDescriptor {
    name: "block",
    summary: "block-level mapping: in-place appends, read-modify-write of whole blocks otherwise",
    options: &[OptionDoc {
        name: "copyback",
        default: "true",
        help: "read-modify-write copies within a plane use copyback",
    }],
    build: build_block,
};

fn build_block(env: &FtlEnv, options: &FtlOptions) -> Result<Box<dyn Ftl>, String> {
    let opts: BlockOptions = parse_options("block", options)?;
    Ok(Box::new(BlockFtl::new(env, opts)?))
}

fn default_true() -> bool {
    true
}

/// Options of the `block` FTL (see [`DESCRIPTOR`]).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockOptions {
    #[serde(default = "default_true")]
    pub copyback: bool,
}

impl Default for BlockOptions {
    fn default() -> Self {
        BlockOptions { copyback: true }
    }
}

const NONE: u32 = u32::MAX;

/// The OOB is the shared one ([`crate::ftl::kit::wire::oob`]): kind, logical
/// block (index), and the block's creation sequence number.
pub use super::kit::wire::oob::OOB_BYTES;
use super::kit::wire::oob::{decode_oob, encode_oob};
/// Host data (a write, or a trim's zeros).
const OOB_DATA: u8 = 1;
/// A copy of the same offset from an older block of the logical block.
const OOB_COPY: u8 = 2;
/// Zeros for an offset never written, padding up to a later page.
const OOB_PAD: u8 = 3;

/// A physical block of a logical block: where, how far written, and its
/// creation sequence number (in every page's OOB).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Mapped {
    block: u32,
    written: u32,
    seq: u64,
}

const UNMAPPED: Mapped = Mapped { block: NONE, written: 0, seq: 0 };

/// A replacement in progress: `lbn`'s new block holds its pages below
/// `new.written`, the old block the rest.
#[derive(Copy, Clone, Debug)]
struct Replacement {
    lbn: u32,
    old: Mapped,
}

#[derive(Default, Clone, Debug)]
struct Counters {
    /// Blocks retired after a failed erase (media reliability).
    retired_blocks: u64,
    rmw_merges: u64,
    rmw_copies: u64,
    appends: u64,
    fresh_blocks: u64,
    pad_pages: u64,
    page_rmw_reads: u64,
    trim_block_erases: u64,
    trim_zero_pages: u64,
    mount_scanned_pages: u64,
    /// Logical blocks recovery rewrote into a fresh block (a torn page).
    mount_rewrites: u64,
    /// Pages recovery copied (finishing read-modify-writes, rewrites).
    mount_copies: u64,
    /// Blocks recovery erased (undefined, interrupted copies, superseded).
    mount_erases: u64,
}

/// One block as the mount scan found it.
#[derive(Copy, Clone, Debug)]
struct ScannedBlock {
    lbn: u32,
    block: u32,
    seq: u64,
    /// Pages whose data survived: those programmed, less a torn last page.
    valid: u32,
    /// The last programmed page is torn.
    torn: bool,
    /// A surviving page holds host data (not only copies and pads).
    host_data: bool,
    /// A grown bad block: a source of copies only, never mapped or erased.
    grown_bad: bool,
}

/// What the mount scan found in a block.
enum Scan {
    Erased,
    /// Unreadable (an interrupted erase) or not written by this FTL.
    Garbage,
    Found(ScannedBlock),
}

/// The block-mapped FTL. See the module docs.
pub struct BlockFtl {
    opts: BlockOptions,
    geometry: Geometry,
    spp: u32,
    ppb: u32,
    logical_sectors: u64,
    lpns: u32,
    lbns: u32,
    map: Vec<Mapped>,
    replacing: Option<Replacement>,
    /// Free blocks per plane (oldest erased first).
    free: FreeBlockPool,
    plane_div: FastDiv,
    seq: u64,
    tmp_buf: Option<BufId>,
    copy_buf: Option<BufId>,
    zero_buf: Option<BufId>,
    /// Logical pages lost to the media (see *Lost pages* in the module docs).
    lost: LostPages,
    /// Per logical block with data in a grown bad block (empty without
    /// media failures): the offsets that block may hold, which a
    /// whole-block trim covers with pads (see *Grown bad blocks*).
    grown_bad_cover: BTreeMap<u32, u32>,
    /// A deliberate bug (checker tests; see [`Mutant`]).
    mutant: Mutant,
    counters: Counters,
}

/// Good blocks beyond the logical blocks: one for the read-modify-write in
/// progress, one for recovery (see the module docs).
const SPARE_BLOCKS: u32 = 2;

impl BlockFtl {
    pub fn new(env: &FtlEnv, opts: BlockOptions) -> Result<BlockFtl, String> {
        Self::with_mutant(env, opts, Mutant::None)
    }

    /// The FTL with a deliberate bug (for checker tests; see [`Mutant`]).
    pub fn with_mutant(env: &FtlEnv, opts: BlockOptions, mutant: Mutant) -> Result<BlockFtl, String> {
        mutant.check_breaks("block")?;
        let g = env.geometry.clone();
        let spp = g.sectors_per_page();
        let ppb = g.pages_per_block();
        let lpns_u64 = env.logical_sectors.div_ceil(u64::from(spp));
        if lpns_u64 >= u64::from(NONE) {
            return Err(format!("block: {lpns_u64} logical pages do not fit a 32-bit map"));
        }
        let lpns = lpns_u64 as u32;
        let lbns = lpns.div_ceil(ppb);
        if lbns + SPARE_BLOCKS > g.blocks() {
            return Err(format!(
                "block: {lbns} logical blocks need {SPARE_BLOCKS} spare blocks among the {} physical blocks",
                g.blocks()
            ));
        }
        let dram = u64::from(lbns) * 16 + u64::from(g.blocks()) * 4;
        if dram > env.dram_budget_bytes {
            return Err(format!("block: the block map needs {}", super::dram_shortfall(dram, env.dram_budget_bytes)));
        }
        Ok(BlockFtl {
            spp,
            ppb,
            logical_sectors: env.logical_sectors,
            lpns,
            lbns,
            map: Vec::new(),
            replacing: None,
            free: FreeBlockPool::new(&g),
            plane_div: FastDiv::new(g.blocks_per_plane()),
            seq: 1,
            tmp_buf: None,
            copy_buf: None,
            zero_buf: None,
            lost: LostPages::default(),
            grown_bad_cover: BTreeMap::new(),
            mutant,
            counters: Counters::default(),
            geometry: g,
            opts,
        })
    }

    fn reset_state(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.map = vec![UNMAPPED; self.lbns as usize];
        self.replacing = None;
        self.free.clear();
        self.lost.clear();
        self.grown_bad_cover.clear();
        self.seq = 1;
        if self.tmp_buf.is_none() {
            self.tmp_buf = Some(flash.buf_alloc(self.spp)?);
            self.copy_buf = Some(flash.buf_alloc(self.spp)?);
            let zero = flash.buf_alloc(self.spp)?;
            flash.buf_zero(zero, 0, self.spp)?;
            self.zero_buf = Some(zero);
        }
        Ok(())
    }

    fn check_spare(&self, good: u32) -> Result<(), FtlError> {
        if good < self.lbns + SPARE_BLOCKS {
            return Err(FtlError::NoSpace(format!(
                "block: {good} good blocks cannot hold {} logical blocks and {SPARE_BLOCKS} spares",
                self.lbns
            )));
        }
        Ok(())
    }

    fn page_addr(&self, ppn: u32) -> PageAddr {
        PageAddr(u64::from(ppn))
    }

    #[inline]
    fn plane_of(&self, block: u32) -> u32 {
        self.plane_div.quotient(block)
    }

    fn lbn_pages(&self, lbn: u32) -> u32 {
        (self.lpns - lbn * self.ppb).min(self.ppb)
    }

    /// Where logical page `lpn` is on flash (NONE: never written).
    #[inline]
    fn location(&self, lpn: u32) -> u32 {
        let (lbn, off) = (lpn / self.ppb, lpn % self.ppb);
        let m = self.map[lbn as usize];
        if off < m.written {
            return m.block * self.ppb + off;
        }
        match self.replacing {
            Some(r) if r.lbn == lbn && off < r.old.written => r.old.block * self.ppb + off,
            _ => NONE,
        }
    }

    fn pop_free(&mut self, plane: Option<u32>) -> Result<u32, FtlError> {
        self.free.pop(plane).ok_or_else(|| FtlError::NoSpace("block: no free block".into()))
    }

    /// Erase `block` into the free pool; a block whose erase fails is
    /// retired instead (a grown bad block: it keeps its pages, which a
    /// mount reads). Returns whether it was retired.
    fn erase_to_free(&mut self, flash: &mut dyn Flash, block: u32, cause: Cause) -> Result<bool, FtlError> {
        if free_blocks::erase_for_reuse(flash, block, cause)? {
            self.free.push(block);
            Ok(false)
        } else {
            self.counters.retired_blocks += 1;
            Ok(true)
        }
    }

    /// [`Self::erase_to_free`] for a block that held `written` pages of
    /// `lbn`: if its erase fails, a whole-block trim must cover them.
    fn erase_lbn_block(
        &mut self,
        flash: &mut dyn Flash,
        lbn: u32,
        block: u32,
        written: u32,
        cause: Cause,
    ) -> Result<(), FtlError> {
        if self.erase_to_free(flash, block, cause)? {
            self.note_grown_bad(lbn, written);
        }
        Ok(())
    }

    /// A free block for `lbn` (on `plane` when possible), with its creation sequence number.
    fn open_block(&mut self, flash: &mut dyn Flash, plane: Option<u32>) -> Result<Mapped, FtlError> {
        let block = match self.pop_free(plane) {
            Ok(b) => b,
            // The old block of the replacement in progress is one to spare.
            Err(_) if self.replacing.is_some() => {
                self.finish_replacement(flash)?;
                self.pop_free(plane)?
            }
            Err(e) => return Err(e),
        };
        let seq = self.seq;
        self.seq += 1;
        Ok(Mapped { block, written: 0, seq })
    }

    // ----- writes -----

    /// Store one full logical page from `buf` at `sector`.
    fn write_page(&mut self, flash: &mut dyn Flash, lpn: u32, buf: BufId, sector: u32) -> Result<(), FtlError> {
        let (lbn, off) = (lpn / self.ppb, lpn % self.ppb);
        if self.replacing.is_some_and(|r| r.lbn != lbn || off < self.map[lbn as usize].written) {
            self.finish_replacement(flash)?;
        }
        let m = self.map[lbn as usize];
        if m.block == NONE {
            self.map[lbn as usize] = self.open_block(flash, None)?;
            self.counters.fresh_blocks += 1;
        } else if off < m.written {
            self.start_replacement(flash, lbn)?;
        } else {
            self.counters.appends += 1;
        }
        loop {
            self.fill_to(flash, lbn, off)?;
            let m = self.map[lbn as usize];
            let oob = encode_oob(OOB_DATA, lbn, m.seq);
            match flash.program(Cause::Host, self.page_addr(m.block * self.ppb + off), buf, sector, &oob) {
                Ok(()) => break,
                Err(FlashError::ProgramFailed) => self.replace_failed_block(flash, lbn)?,
                Err(e) => return Err(e.into()),
            }
        }
        self.map[lbn as usize].written = off + 1;
        self.lost.found_again(lpn);
        Ok(())
    }

    /// A program into `lbn`'s block failed (media reliability): the block
    /// is a grown bad block now, which the NAND still reads but never
    /// programs or erases again. Copy the pages it holds to a fresh block
    /// (on its plane when possible: copyback), which takes its place with
    /// a newer sequence number, and retire it; the caller programs the
    /// failed page again. A failure while copying retires the fresh block
    /// too and starts over. The failed block is never erased (a mount
    /// reads it as a source: see *Grown bad blocks*), so until the copy is
    /// done its pages are still where the map says. With no free block left the FTL stops
    /// with `no free space`, never with wrong data.
    #[cold]
    fn replace_failed_block(&mut self, flash: &mut dyn Flash, lbn: u32) -> Result<(), FtlError> {
        self.counters.retired_blocks += 1;
        if self.mutant == Mutant::KeepsFailedProgram {
            return Ok(()); // BUG (deliberate): programs the failed block again
        }
        let failed = self.map[lbn as usize];
        self.note_grown_bad(lbn, failed.written);
        'fresh: loop {
            let plane = Some(self.plane_of(failed.block));
            let block = self.free.pop(plane).ok_or_else(|| {
                FtlError::NoSpace(format!("block: no free block to replace failed block {}", failed.block))
            })?;
            let fresh = Mapped { block, written: failed.written, seq: self.seq };
            self.seq += 1;
            for o in 0..failed.written {
                let (src, dst) = (failed.block * self.ppb + o, block * self.ppb + o);
                match self.copy_or_mark_lost(flash, Cause::Gc, lbn, src, dst, fresh.seq) {
                    Ok(()) => self.counters.rmw_copies += 1,
                    Err(FtlError::Flash(FlashError::ProgramFailed)) => {
                        self.counters.retired_blocks += 1;
                        continue 'fresh;
                    }
                    Err(e) => return Err(e),
                }
            }
            self.map[lbn as usize] = fresh;
            return Ok(());
        }
    }

    /// Rewrite `lbn` into a new block: its pages now come from the new
    /// block below its write pointer, from the old one above.
    fn start_replacement(&mut self, flash: &mut dyn Flash, lbn: u32) -> Result<(), FtlError> {
        let old = self.map[lbn as usize];
        let new = self.open_block(flash, Some(self.plane_of(old.block)))?;
        self.map[lbn as usize] = new;
        self.replacing = Some(Replacement { lbn, old });
        self.counters.rmw_merges += 1;
        Ok(())
    }

    /// Copy the rest of the logical block being replaced and erase its old block.
    fn finish_replacement(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let Some(r) = self.replacing else { return Ok(()) };
        let end = match self.mutant {
            Mutant::ReplacementDropsLastPage => r.old.written.saturating_sub(1),
            _ => r.old.written,
        };
        self.fill_to(flash, r.lbn, end)?;
        self.replacing = None;
        self.erase_lbn_block(flash, r.lbn, r.old.block, r.old.written, Cause::Gc)
    }

    /// Program `lbn`'s block up to (not including) offset `off`: pages of
    /// the old block of a replacement are copied, others padded with zeros.
    fn fill_to(&mut self, flash: &mut dyn Flash, lbn: u32, off: u32) -> Result<(), FtlError> {
        // (Re-read each time: a failed program replaces the block.)
        while self.map[lbn as usize].written < off {
            let m = self.map[lbn as usize];
            let (o, dst) = (m.written, m.block * self.ppb + m.written);
            let programmed = match self.replacing {
                Some(r) if r.lbn == lbn && o < r.old.written => {
                    let copied = self.copy_or_mark_lost(flash, Cause::Gc, lbn, r.old.block * self.ppb + o, dst, m.seq);
                    self.counters.rmw_copies += u64::from(copied.is_ok());
                    copied
                }
                _ => {
                    let oob = encode_oob(OOB_PAD, lbn, m.seq);
                    let zero = self.zero_buf.expect("buffers allocated at power-on");
                    let padded = flash.program(Cause::Gc, self.page_addr(dst), zero, 0, &oob);
                    self.counters.pad_pages += u64::from(padded.is_ok());
                    padded.map_err(FtlError::from)
                }
            };
            match programmed {
                Ok(()) => self.map[lbn as usize].written = o + 1,
                Err(FtlError::Flash(FlashError::ProgramFailed)) => self.replace_failed_block(flash, lbn)?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Copy page `src` to page `dst` of `lbn`'s block created at `seq`
    /// (the same offset). A page lost already, or whose read is
    /// uncorrectable now, becomes a lost slot there instead: zeros under
    /// [`OOB_LOST`], and the logical page marked lost (see *Lost pages* in
    /// the module docs). A copy by read + program keeps a pad a pad (its
    /// OOB comes with the read), so a pad whose read is uncorrectable is
    /// padded again: it held zeros for an offset never written.
    fn copy_or_mark_lost(
        &mut self,
        flash: &mut dyn Flash,
        cause: Cause,
        lbn: u32,
        src: u32,
        dst: u32,
        seq: u64,
    ) -> Result<(), FtlError> {
        let lpn = lbn * self.ppb + dst % self.ppb;
        if self.lost.contains(lpn) {
            return self.program_zeros(flash, cause, dst, &encode_oob(OOB_LOST, lbn, seq));
        }
        if self.opts.copyback && self.plane_of(src / self.ppb) == self.plane_of(dst / self.ppb) {
            // A pad stays a pad (see *Pads* in the module docs): with the
            // media model on (the flash predicts an RBER), one OOB read
            // finds the source's kind, so a later failed read of the copy
            // is known to hold zeros. Off, nothing fails to decode: no
            // extra operation, the same reports as before.
            let mut kind = OOB_COPY;
            if flash.predicted_rber(BlockAddr(u64::from(src / self.ppb))).is_some() {
                let mut src_kind = [0u8; 1];
                flash.read_oob(cause, self.page_addr(src), &mut src_kind)?;
                if src_kind[0] == OOB_PAD {
                    kind = OOB_PAD;
                }
            }
            let oob = encode_oob(kind, lbn, seq);
            return self.copy_page(flash, cause, src, dst, &oob); // raw: no decode, nothing lost
        }
        let buf = self.copy_buf.expect("buffers allocated at power-on");
        let mut src_oob = [0u8; OOB_BYTES];
        let read = flash.read(cause, self.page_addr(src), 0, self.spp, buf, 0, &mut src_oob);
        let kind = if src_oob[0] == OOB_PAD { OOB_PAD } else { OOB_COPY };
        match read {
            Ok(()) => {
                flash.program(cause, self.page_addr(dst), buf, 0, &encode_oob(kind, lbn, seq))?;
                Ok(())
            }
            Err(FlashError::Uncorrectable) if kind == OOB_PAD || self.mutant == Mutant::ForgetsLostPage => {
                // (ForgetsLostPage: BUG (deliberate): the lost page is
                // padded like an offset never written, and reads as zeros.)
                self.program_zeros(flash, cause, dst, &encode_oob(OOB_PAD, lbn, seq))
            }
            Err(FlashError::Uncorrectable) => {
                self.lost.mark(lpn);
                self.program_zeros(flash, cause, dst, &encode_oob(OOB_LOST, lbn, seq))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Program page `dst` with zeros and `oob` (a lost slot, or a pad).
    fn program_zeros(&mut self, flash: &mut dyn Flash, cause: Cause, dst: u32, oob: &[u8]) -> Result<(), FtlError> {
        let zero = self.zero_buf.expect("buffers allocated at power-on");
        flash.program(cause, self.page_addr(dst), zero, 0, oob)?;
        Ok(())
    }

    /// Copy page `src` to page `dst` (copyback within a plane when allowed).
    fn copy_page(
        &mut self,
        flash: &mut dyn Flash,
        cause: Cause,
        src: u32,
        dst: u32,
        oob: &[u8; OOB_BYTES],
    ) -> Result<(), FtlError> {
        let copyback = self.opts.copyback && self.plane_of(src / self.ppb) == self.plane_of(dst / self.ppb);
        let buf = self.copy_buf.expect("buffers allocated at power-on");
        flash_ops::copy_page(flash, cause, self.page_addr(src), self.page_addr(dst), oob, copyback, buf)?;
        Ok(())
    }

    /// A grown bad block holds up to `written` pages of `lbn` (and the
    /// failed one): a whole-block trim must cover them.
    fn note_grown_bad(&mut self, lbn: u32, written: u32) {
        let cover = (written + 1).min(self.lbn_pages(lbn));
        let c = self.grown_bad_cover.entry(lbn).or_insert(0);
        *c = (*c).max(cover);
    }

    /// Trim a whole logical block: erase what holds it.
    fn trim_block(&mut self, flash: &mut dyn Flash, lbn: u32) -> Result<(), FtlError> {
        if let Some(&cover) = self.grown_bad_cover.get(&lbn) {
            return self.trim_block_over_grown_bad(flash, lbn, cover);
        }
        if let Some(r) = self.replacing.filter(|r| r.lbn == lbn) {
            self.replacing = None;
            self.erase_lbn_block(flash, lbn, r.old.block, r.old.written, Cause::Gc)?;
        }
        if !self.lost.is_empty() {
            for lpn in lbn * self.ppb..lbn * self.ppb + self.lbn_pages(lbn) {
                self.lost.found_again(lpn);
            }
        }
        let m = std::mem::replace(&mut self.map[lbn as usize], UNMAPPED);
        if m.block != NONE {
            self.erase_lbn_block(flash, lbn, m.block, m.written, Cause::Gc)?;
            self.counters.trim_block_erases += 1;
        }
        // An erase failed: its block keeps the trimmed pages.
        match self.grown_bad_cover.get(&lbn) {
            Some(&cover) => self.trim_block_over_grown_bad(flash, lbn, cover),
            None => Ok(()),
        }
    }

    /// Trim a whole logical block some of whose pages a grown bad block
    /// still holds (never erased, and read by a mount): first program pads
    /// over them into a fresh block, which outranks it, then erase what
    /// held the logical block. A cut before the pads are complete finds
    /// the newer blocks still there (the trim did not happen).
    fn trim_block_over_grown_bad(&mut self, flash: &mut dyn Flash, lbn: u32, cover: u32) -> Result<(), FtlError> {
        let pads = self.open_block(flash, None)?; // (may finish the replacement in progress)
        let r = self.replacing.filter(|r| r.lbn == lbn);
        if r.is_some() {
            self.replacing = None;
        }
        let m = std::mem::replace(&mut self.map[lbn as usize], pads);
        self.fill_to(flash, lbn, cover)?;
        if let Some(r) = r {
            self.erase_lbn_block(flash, lbn, r.old.block, r.old.written, Cause::Gc)?;
        }
        if m.block != NONE {
            self.erase_lbn_block(flash, lbn, m.block, m.written, Cause::Gc)?;
            self.counters.trim_block_erases += 1;
        }
        // (An erase that failed left more to cover.)
        self.fill_to(flash, lbn, self.grown_bad_cover[&lbn])?;
        if !self.lost.is_empty() {
            for lpn in lbn * self.ppb..lbn * self.ppb + self.lbn_pages(lbn) {
                self.lost.found_again(lpn);
            }
        }
        Ok(())
    }

    // ----- mount -----

    /// Rebuild the map from the blocks on flash (see the module docs).
    fn scan_and_rebuild(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let mut found = Vec::new();
        let mut garbage = Vec::new();
        // (block, offset) of the lost slots found, in scan order (sorted).
        let mut lost_at = Vec::new();
        let mut oobs = Vec::with_capacity(self.ppb as usize);
        let mut good = 0;
        for block in 0..self.geometry.blocks() {
            let addr = BlockAddr(u64::from(block));
            if flash.is_factory_bad(addr) && self.mutant != Mutant::MountForgetsBadBlocks {
                // (else BUG (deliberate): skipped with the factory bad blocks)
                if flash.is_grown_bad(addr) && self.mutant != Mutant::MountSkipsGrownBadBlocks {
                    if let Scan::Found(b) = self.scan_block(flash, block, &mut oobs, &mut lost_at)? {
                        self.seq = self.seq.max(b.seq + 1);
                        self.note_grown_bad(b.lbn, b.valid);
                        if b.valid > 0 && !(b.torn && !b.host_data) {
                            found.push(ScannedBlock { grown_bad: true, ..b });
                        }
                    }
                }
                continue;
            }
            good += 1;
            match self.scan_block(flash, block, &mut oobs, &mut lost_at)? {
                Scan::Erased => self.free.push(block),
                Scan::Garbage => garbage.push(block),
                Scan::Found(b) => {
                    self.seq = self.seq.max(b.seq + 1);
                    // An interrupted copy adds nothing: its sources survive.
                    if b.valid == 0 || (b.torn && !b.host_data) {
                        garbage.push(block);
                    } else {
                        found.push(b);
                    }
                }
            }
        }
        self.check_spare(good)?;
        for block in garbage {
            self.erase_to_free(flash, block, Cause::Recovery)?;
            self.counters.mount_erases += 1;
        }
        found.sort_unstable_by_key(|b| (b.lbn, b.seq));
        for chain in found.chunk_by(|a, b| a.lbn == b.lbn) {
            self.recover_lbn(flash, chain, &lost_at)?;
        }
        Ok(())
    }

    /// Read a block's OOBs up to its first erased page (into `oobs`), and
    /// check whether its last programmed page survived; the offsets of its
    /// lost slots go to `lost_at`.
    fn scan_block(
        &mut self,
        flash: &mut dyn Flash,
        block: u32,
        oobs: &mut Vec<[u8; OOB_BYTES]>,
        lost_at: &mut Vec<(u32, u32)>,
    ) -> Result<Scan, FtlError> {
        let buf = self.tmp_buf.expect("buffers allocated at power-on");
        let trust = self.mutant == Mutant::TrustsTornPage;
        let pages = flash_ops::scan_block(flash, u64::from(block * self.ppb), self.ppb, oobs, buf, trust)?;
        self.counters.mount_scanned_pages += oobs.len() as u64;
        let (valid, torn) = match pages {
            BlockPages::Erased => return Ok(Scan::Erased),
            BlockPages::Undefined => return Ok(Scan::Garbage),
            BlockPages::Programmed { valid, torn } => (valid, torn),
        };
        let (_, lbn, seq) = decode_oob(&oobs[0]);
        let known = |k: u8| (OOB_DATA..=OOB_PAD).contains(&k) || k == OOB_LOST;
        let foreign = oobs.iter().map(decode_oob).any(|(k, l, s)| (l, s) != (lbn, seq) || !known(k));
        if foreign || lbn >= self.lbns {
            return Ok(Scan::Garbage);
        }
        if self.mutant != Mutant::MountForgetsLostPages {
            // (else BUG (deliberate): a lost slot's zeros read as the data)
            let lost = oobs[..valid as usize].iter().enumerate().filter(|(_, o)| o[0] == OOB_LOST);
            lost_at.extend(lost.map(|(off, _)| (block, off as u32)));
        }
        let host_data = oobs[..valid as usize].iter().any(|o| o[0] == OOB_DATA);
        Ok(Scan::Found(ScannedBlock { lbn, block, seq, valid, torn, host_data, grown_bad: false }))
    }

    /// Map logical block `chain[0].lbn` from its blocks (oldest first): the
    /// newest intact one is completed from the older ones, or, if the
    /// newest ends in a torn page, all are rewritten into a fresh block; the
    /// others are then erased.
    fn recover_lbn(
        &mut self,
        flash: &mut dyn Flash,
        chain: &[ScannedBlock],
        lost_at: &[(u32, u32)],
    ) -> Result<(), FtlError> {
        let newest = chain[chain.len() - 1];
        let lbn = newest.lbn;
        let cover = chain.iter().map(|b| b.valid).max().unwrap_or(0);
        let target = if newest.torn || newest.grown_bad {
            self.counters.mount_rewrites += 1;
            self.open_block(flash, Some(self.plane_of(newest.block)))?
        } else {
            Mapped { block: newest.block, written: newest.valid, seq: newest.seq }
        };
        self.map[lbn as usize] = target;
        let is_lost_at = |block: u32, off: u32| lost_at.binary_search(&(block, off)).is_ok();
        for off in (0..target.written).filter(|&off| is_lost_at(target.block, off)) {
            self.lost.restore(lbn * self.ppb + off);
        }
        for off in target.written..cover {
            // The newest other block holding the offset has its current version.
            let src = chain.iter().rev().find(|b| b.block != target.block && b.valid > off).expect("covered");
            if is_lost_at(src.block, off) {
                self.lost.restore(lbn * self.ppb + off);
            }
            let (from, to) = (src.block * self.ppb + off, target.block * self.ppb + off);
            self.copy_or_mark_lost(flash, Cause::Recovery, lbn, from, to, target.seq)?;
            self.counters.mount_copies += 1;
            self.map[lbn as usize].written = off + 1;
        }
        for b in chain.iter().filter(|b| b.block != target.block && !b.grown_bad) {
            self.erase_lbn_block(flash, lbn, b.block, b.valid, Cause::Recovery)?;
            self.counters.mount_erases += 1;
        }
        Ok(())
    }
}

impl WholePageStore for BlockFtl {
    fn sectors_per_page(&self) -> u32 {
        self.spp
    }

    #[inline]
    fn location(&self, lpn: u32) -> Option<PageAddr> {
        match BlockFtl::location(self, lpn) {
            NONE => None,
            ppn => Some(self.page_addr(ppn)),
        }
    }

    fn write_page(&mut self, flash: &mut dyn Flash, lpn: u32, buf: BufId, sector: u32) -> Result<(), FtlError> {
        BlockFtl::write_page(self, flash, lpn, buf, sector)
    }

    fn scratch_buf(&self) -> BufId {
        self.tmp_buf.expect("buffers allocated at power-on")
    }

    fn count_rmw_read(&mut self) {
        self.counters.page_rmw_reads += 1;
    }

    fn count_trim_zero_page(&mut self) {
        self.counters.trim_zero_pages += 1;
    }

    #[inline]
    fn is_lost(&self, lpn: u32) -> bool {
        self.lost.contains(lpn)
    }

    fn pad_kind(&self) -> Option<u8> {
        Some(OOB_PAD)
    }

    fn mutant(&self) -> Mutant {
        self.mutant
    }
}

impl Ftl for BlockFtl {
    fn info(&self) -> FtlInfo {
        FtlInfo { name: "block", guarantee: Guarantee::Baseline, oob_bytes: OOB_BYTES as u32 }
    }

    fn format(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.reset_state(flash)?;
        let free = &mut self.free;
        let good = whole_page_io::format_blocks(flash, &self.geometry, |block, good| {
            if good {
                free.push(block);
            }
        })?;
        self.check_spare(good)
    }

    fn mount(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.reset_state(flash)?;
        self.scan_and_rebuild(flash)
    }

    fn read(&mut self, flash: &mut dyn Flash, req: &IoRequest) -> Result<(), FtlError> {
        check_range(req.lba, u64::from(req.sectors), self.logical_sectors)?;
        whole_page_io::read(self, flash, req)
    }

    fn write(&mut self, flash: &mut dyn Flash, req: &IoRequest) -> Result<Durability, FtlError> {
        check_range(req.lba, u64::from(req.sectors), self.logical_sectors)?;
        whole_page_io::write(self, flash, req)?;
        Ok(Durability::Durable)
    }

    fn trim(&mut self, flash: &mut dyn Flash, lba: u64, sectors: u64) -> Result<(), FtlError> {
        check_range(lba, sectors, self.logical_sectors)?;
        let spp = u64::from(self.spp);
        let block_sectors = spp * u64::from(self.ppb);
        let (mut lba, end) = (lba, lba + sectors);
        while lba < end {
            let lbn = (lba / block_sectors) as u32;
            let lbn_start = u64::from(lbn) * block_sectors;
            let lbn_end = lbn_start + u64::from(self.lbn_pages(lbn)) * spp;
            let piece_end = lbn_end.min(end);
            if lba == lbn_start && piece_end == lbn_end {
                self.trim_block(flash, lbn)?; // cheaper than zeroing page by page
            } else {
                for span in whole_page_io::page_spans(lba, piece_end - lba, self.spp) {
                    whole_page_io::trim_span(self, flash, span)?;
                }
            }
            lba = piece_end;
        }
        Ok(())
    }

    fn flush(&mut self, _flash: &mut dyn Flash) -> Result<(), FtlError> {
        Ok(()) // no write cache
    }

    fn idle(&mut self, _flash: &mut dyn Flash) -> Result<IdleOutcome, FtlError> {
        Ok(IdleOutcome::Nothing)
    }

    fn shutdown(&mut self, _flash: &mut dyn Flash) -> Result<(), FtlError> {
        Ok(()) // everything a mount needs is in the OOB
    }

    fn stats(&self) -> FtlStats {
        let c = &self.counters;
        let mut extra = BTreeMap::new();
        for (k, v) in [
            ("rmw_merges", c.rmw_merges),
            ("rmw_copies", c.rmw_copies),
            ("appends", c.appends),
            ("fresh_blocks", c.fresh_blocks),
            ("pad_pages", c.pad_pages),
            ("page_rmw_reads", c.page_rmw_reads),
            ("trim_block_erases", c.trim_block_erases),
            ("trim_zero_pages", c.trim_zero_pages),
        ] {
            extra.insert(k.to_string(), serde_json::json!(v));
        }
        free_blocks::insert_retired_blocks(&mut extra, c.retired_blocks);
        self.lost.insert_metric(&mut extra, self.spp);
        FtlStats {
            gc_runs: c.rmw_merges,
            dram_bytes: u64::from(self.lbns) * 16 + u64::from(self.geometry.blocks()) * 4,
            free_blocks: Some(u64::from(self.free.len())),
            mount: vec![
                ("mount_scanned_pages", c.mount_scanned_pages),
                ("mount_rewrites", c.mount_rewrites),
                ("mount_copies", c.mount_copies),
                ("mount_erases", c.mount_erases),
            ],
            extra,
        }
        .with_typed_in_extra()
    }
}
