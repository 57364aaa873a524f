//! `hybrid`: a log-block FTL after FAST (Lee, Park, Chung, Lee, Park &
//! Song, "A log buffer-based flash translation layer using
//! fully-associative sector translation", ACM TECS 6(3), 2007) — the
//! design of OpenSSD's FASTer FTL without its isolation area.
//!
//! # Algorithm
//!
//! - **Data blocks** are block-mapped: logical block `lbn` (the
//!   `pages_per_block` logical pages from `lbn · pages_per_block`) lives in
//!   one physical block, logical page `i` of it at page `i`. Data blocks
//!   are only ever written by merges.
//! - **Host writes go to log blocks**, mapped page by page:
//!   - one **sequential log block**: a write at offset 0 of a logical
//!     block starts it (merging the previous one); a write at its next
//!     offset extends it;
//!   - a pool of `random_log_blocks` **random log blocks**, fully
//!     associative: every other write is appended to the newest one.
//! - **Merges** turn log pages back into data blocks:
//!   - *switch*: the sequential log block holds every page of its logical
//!     block in order: it becomes the data block and the old data block is
//!     erased. Done as soon as it fills;
//!   - *partial*: a new sequential log starts before the current one is
//!     full: the rest of its logical block is copied into it (in order),
//!     then it switches;
//!   - *full*: when the random pool is full, its oldest block is reclaimed:
//!     every logical block with a valid page in it is merged — the current
//!     version of each of its pages (from the data block or any log block)
//!     is copied into a fresh block, which becomes the data block — and the
//!     emptied log block is erased and reused. A victim with no valid page
//!     left is simply erased and reused.
//!
//!   Logical pages never written inside a merged range are padded with
//!   zero pages (pages of a block must be programmed in order); they read
//!   as zeros, as never-written sectors may.
//! - Partial-page writes are read-modify-write; **trims** are written as
//!   zero pages (a block-mapped FTL has nowhere to record a hole), so they
//!   are as durable as writes.
//!
//! Sequential writes therefore cost one program per page plus an erase per
//! block; random writes cost full merges, `pages_per_block` copies per
//! logical block touched, which is why a hybrid FTL's write amplification
//! under random writes is far above a page-mapped FTL's.
//!
//! # Persistence and crash guarantee
//!
//! Every page's OOB holds its kind (a host page of the sequential log, a
//! host page of a random log, a merge's copy, a pad), its logical page and
//! a 40-bit program sequence number, new for every program — copies too.
//! Nothing else is persisted: no map, no checkpoint, no write cache.
//!
//! **Guarantee** ([`Guarantee::Baseline`]): a write is durable when it
//! completes, and so is a trim (its zero pages are programmed), so a flush
//! has nothing to do. After a power cut every logical page reads as its
//! last completed write or trim, or — for the request in flight — as what
//! that request was writing; never older. Paired-page corruption (a torn
//! upper page destroying a completed lower page) is not defended against.
//!
//! **Why that holds.** Pages are never rewritten in place, and the newest
//! surviving copy of a logical page (by sequence number) is its current
//! version: a merge copies current versions, with new sequence numbers, and
//! erases a block (an old data block, the sequential log it superseded, a
//! reclaimed random log) only after the block it copied into is complete.
//! So at every instant each completed write has a durable copy, and a copy
//! with a newer sequence number holds it or a later write of the same page.
//! A cut can tear only the page being programmed — the last programmed page
//! of its block — or leave the block being erased undefined; recovery
//! (`recovery.rs`) verifies the last page of every block, drops what
//! a cut destroyed (a torn merge block whole: its sources survive), and
//! finishes, redoes or drops the merge the cut interrupted.
//!
//! **A cut during recovery** is survived too, however many times recovery
//! is cut in a row: recovery keeps the same rule (copy, complete the block,
//! then erase), and its own programs are merge copies and pads with new
//! sequence numbers, so a torn one is recognised like any torn merge page.
//! The order of its steps matters: a block left holding no current version
//! is erased only after every interrupted merge is finished, because until
//! then a cut can tear the merge block holding the newer copies and the
//! next recovery drops it (`recovery.rs`, *A cut during recovery*).
//!
//! Recovery needs no free block beyond the merge reserve: at any instant
//! the flash holds at most the data blocks, the sequential log, the random
//! pool and one merge block, and the pool is never refilled past its size.
//!
//! # Lost pages (media reliability)
//!
//! A merge copy by read + program (across planes, or `copyback = false`),
//! or the replacement of a failed block, may find its source
//! uncorrectable. The copy's slot is programmed with zeros under the OOB
//! kind [`OOB_LOST`] with the logical page and a sequence number as any
//! copy's, and the page is marked lost ([`LostPages`]): host reads fail
//! with `Uncorrectable` until a whole-page write or trim. The lost slot is
//! the page's current version like any other: merges carry it on (a lost
//! slot again), and a mount that finds it the newest version of its page
//! restores the mark. A superseded page or a pad found uncorrectable by a
//! replacement is replaced by zeros under its own OOB (nothing current is
//! lost; its older sequence number keeps it from ever being read).

use super::mutants::Mutant;
use super::{
    check_range,
    kit::flash_ops::{self, OOB_ERASED},
    kit::free_blocks::{self, FreeBlockPool},
    kit::lost_pages::{LostPages, OOB_LOST},
    kit::whole_page_io::{self, WholePageStore},
    parse_options, Durability, Ftl, FtlDescriptor, FtlEnv, FtlError, FtlInfo, FtlOptions, FtlStats, Guarantee,
    IdleOutcome, IoRequest, OptionDoc,
};
use crate::flash::{BufId, Cause, Flash, FlashError};
use crate::nand::{BlockAddr, FastDiv, Geometry, PageAddr};
use serde::Deserialize;
use std::collections::{BTreeMap, VecDeque};

mod recovery;

pub const DESCRIPTOR: FtlDescriptor = FtlDescriptor {
    name: "hybrid",
    summary: "FAST hybrid log-block FTL (Lee et al. 2007): block-mapped data blocks, one sequential and a pool of \
              random log blocks, switch / partial / full merges",
    options: &[
        OptionDoc {
            name: "random_log_blocks",
            default: "all spare",
            help: "random log blocks: a count, a share of the spare blocks (50%), or \"all\" (every block \
                   not needed for data, the sequential log and one merge block)",
        },
        OptionDoc { name: "copyback", default: "true", help: "merge copies within a plane use copyback" },
    ],
    build: build_hybrid,
};

fn build_hybrid(env: &FtlEnv, options: &FtlOptions) -> Result<Box<dyn Ftl>, String> {
    let opts: HybridOptions = parse_options("hybrid", options)?;
    Ok(Box::new(HybridFtl::new(env, opts)?))
}

/// How many random log blocks.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum LogBlocks {
    All,
    Count(u32),
    PercentOfSpare(f64),
}

impl<'de> Deserialize<'de> for LogBlocks {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(i64),
            S(String),
        }
        let bad = || serde::de::Error::custom("expected a count of at least 1, a share such as 50%, or \"all\"");
        match Raw::deserialize(d)? {
            Raw::N(n) if n >= 1 && n <= i64::from(u32::MAX) => Ok(LogBlocks::Count(n as u32)),
            Raw::N(_) => Err(bad()),
            Raw::S(s) if s.trim() == "all" => Ok(LogBlocks::All),
            Raw::S(s) => match s.trim().strip_suffix('%').map(|p| p.trim().parse::<f64>()) {
                Some(Ok(p)) if p > 0.0 && p <= 100.0 => Ok(LogBlocks::PercentOfSpare(p)),
                _ => s.trim().parse::<u32>().ok().filter(|&n| n >= 1).map(LogBlocks::Count).ok_or_else(bad),
            },
        }
    }
}

fn default_log_blocks() -> LogBlocks {
    LogBlocks::All
}
fn default_true() -> bool {
    true
}

/// Options of the `hybrid` FTL (see [`DESCRIPTOR`]).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HybridOptions {
    #[serde(default = "default_log_blocks")]
    pub random_log_blocks: LogBlocks,
    #[serde(default = "default_true")]
    pub copyback: bool,
}

impl Default for HybridOptions {
    fn default() -> Self {
        parse_options("hybrid", &FtlOptions::new()).expect("defaults parse")
    }
}

const NONE: u32 = u32::MAX;

/// The OOB is the shared one ([`crate::ftl::kit::wire::oob`]): kind, logical
/// page (index), sequence number.
pub use super::kit::wire::oob::OOB_BYTES;
use super::kit::wire::oob::{decode_oob, encode_oob};
/// A merge's copy of a page (into a data block being built, or the rest
/// of a logical block copied into its sequential log).
const OOB_DATA: u8 = 1;
/// A host page in the sequential log block.
const OOB_SEQ: u8 = 2;
/// A zero page padding a hole in a merged block.
const OOB_PAD: u8 = 3;
/// A host page in a random log block.
const OOB_RAND: u8 = 4;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Role {
    Free,
    Data,
    SeqLog,
    RandLog,
    Bad,
}

/// The sequential log block: which logical block it holds, and the next offset.
#[derive(Copy, Clone, Debug)]
struct SeqLog {
    block: u32,
    lbn: u32,
    next: u32,
}

#[derive(Default, Clone, Debug)]
struct Counters {
    /// Blocks retired after a failed erase (media reliability).
    retired_blocks: u64,
    switch_merges: u64,
    partial_merges: u64,
    full_merges: u64,
    merge_copies: u64,
    pad_pages: u64,
    empty_log_reclaims: u64,
    seq_log_pages: u64,
    rand_log_pages: u64,
    rmw_reads: u64,
    trim_zero_pages: u64,
    mount_scanned_pages: u64,
    mount_merged_logs: u64,
    /// Interrupted merges recovery finished (copying into their block).
    mount_finished_merges: u64,
    /// Logical blocks recovery merged into a fresh block (a torn sequential log).
    mount_rewrites: u64,
    /// Logical blocks a mount merged off grown bad blocks (see `recovery.rs`).
    mount_grown_bad_merges: u64,
    /// Blocks recovery erased (undefined, interrupted merges, superseded).
    mount_erases: u64,
}

/// The FAST hybrid FTL. See the module docs.
pub struct HybridFtl {
    opts: HybridOptions,
    geometry: Geometry,
    spp: u32,
    ppb: u32,
    logical_sectors: u64,
    lpns: u32,
    lbns: u32,
    /// Random log blocks allowed (resolved at format/mount).
    max_rand_logs: u32,
    data_block: Vec<u32>,
    /// Per logical page: its current version is in its data block.
    in_data: Vec<u64>,
    /// Per logical page: the log page holding its current version.
    log_ppn: Vec<u32>,
    role: Vec<Role>,
    /// Free blocks per plane (oldest erased first).
    free: FreeBlockPool,
    plane_div: FastDiv,
    seq_log: Option<SeqLog>,
    /// Random log blocks, oldest first; the last one is being filled.
    rand_logs: VecDeque<u32>,
    /// The random log block being filled and its next page.
    cursor: (u32, u32),
    seq: u64,
    tmp_buf: Option<BufId>,
    copy_buf: Option<BufId>,
    zero_buf: Option<BufId>,
    /// Reused by merges: logical blocks with a valid page in the victim.
    victim_lbns: Vec<u32>,
    /// Logical pages lost to the media (see *Lost pages* in the module docs).
    lost: LostPages,
    /// A deliberate bug (checker tests; see [`Mutant`]).
    mutant: Mutant,
    counters: Counters,
}

impl HybridFtl {
    pub fn new(env: &FtlEnv, opts: HybridOptions) -> Result<HybridFtl, String> {
        Self::with_mutant(env, opts, Mutant::None)
    }

    /// The FTL with a deliberate bug (for checker tests; see [`Mutant`]).
    pub fn with_mutant(env: &FtlEnv, opts: HybridOptions, mutant: Mutant) -> Result<HybridFtl, String> {
        mutant.check_breaks("hybrid")?;
        let g = env.geometry.clone();
        let spp = g.sectors_per_page();
        let ppb = g.pages_per_block();
        let lpns_u64 = env.logical_sectors.div_ceil(u64::from(spp));
        if lpns_u64 >= u64::from(NONE) {
            return Err(format!("hybrid: {lpns_u64} logical pages do not fit a 32-bit map"));
        }
        let lpns = lpns_u64 as u32;
        let lbns = lpns.div_ceil(ppb);
        let spare = i64::from(g.blocks()) - i64::from(lbns) - 2;
        if spare < 1 {
            return Err(format!(
                "hybrid: {lbns} logical blocks on {} physical blocks leave no block for a random log \
                 (one is the sequential log, one is kept for merges): lower the logical capacity",
                g.blocks()
            ));
        }
        let max_rand_logs = Self::resolve_log_blocks(opts.random_log_blocks, spare as u32)?;
        let dram = Self::dram_needed(&g, lpns, lbns, max_rand_logs);
        if dram > env.dram_budget_bytes {
            return Err(format!(
                "hybrid option `random_log_blocks`: the maps need {}",
                super::dram_shortfall(dram, env.dram_budget_bytes)
            ));
        }
        Ok(HybridFtl {
            spp,
            ppb,
            logical_sectors: env.logical_sectors,
            lpns,
            lbns,
            max_rand_logs,
            data_block: Vec::new(),
            in_data: Vec::new(),
            log_ppn: Vec::new(),
            role: vec![Role::Free; g.blocks() as usize],
            free: FreeBlockPool::new(&g),
            plane_div: FastDiv::new(g.blocks_per_plane()),
            seq_log: None,
            rand_logs: VecDeque::new(),
            cursor: (NONE, ppb),
            seq: 1,
            tmp_buf: None,
            copy_buf: None,
            zero_buf: None,
            victim_lbns: Vec::with_capacity(ppb as usize),
            lost: LostPages::default(),
            mutant,
            counters: Counters::default(),
            geometry: g,
            opts,
        })
    }

    /// Random log blocks for `spare` blocks beyond data, sequential log and merge reserve.
    fn resolve_log_blocks(setting: LogBlocks, spare: u32) -> Result<u32, String> {
        match setting {
            LogBlocks::All => Ok(spare),
            LogBlocks::PercentOfSpare(p) => Ok(((f64::from(spare) * p / 100.0).round() as u32).max(1)),
            LogBlocks::Count(n) if n <= spare => Ok(n),
            LogBlocks::Count(n) => Err(format!(
                "hybrid option `random_log_blocks`: {n} exceeds the {spare} blocks left beyond the data blocks, \
                 the sequential log and the merge reserve"
            )),
        }
    }

    /// Device DRAM: block map, page-in-data-block bits, the page map of the
    /// log blocks (8 bytes per log page) and the block roles.
    fn dram_needed(g: &Geometry, lpns: u32, lbns: u32, logs: u32) -> u64 {
        u64::from(lbns) * 4
            + u64::from(lpns).div_ceil(8)
            + u64::from(logs + 1) * u64::from(g.pages_per_block()) * 8
            + u64::from(g.blocks()) * 4
    }

    fn reset_state(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.data_block = vec![NONE; self.lbns as usize];
        self.in_data = vec![0; (self.lpns as usize).div_ceil(64)];
        self.log_ppn = crate::util::prefetch::large_vec(self.lpns as usize, NONE);
        self.role.fill(Role::Free);
        self.free.clear();
        self.seq_log = None;
        self.rand_logs.clear();
        self.cursor = (NONE, self.ppb);
        self.lost.clear();
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

    /// Random log blocks allowed now that the good blocks are known.
    fn settle_log_blocks(&mut self, good_blocks: u32) -> Result<(), FtlError> {
        let spare = i64::from(good_blocks) - i64::from(self.lbns) - 2;
        if spare < 1 {
            return Err(FtlError::NoSpace(format!(
                "hybrid: {} good blocks cannot hold {} logical blocks, a sequential log, a random log and a merge block",
                good_blocks, self.lbns
            )));
        }
        self.max_rand_logs = Self::resolve_log_blocks(self.opts.random_log_blocks, spare as u32)
            .map_err(FtlError::NoSpace)?
            .min(spare as u32);
        Ok(())
    }

    fn page_addr(&self, ppn: u32) -> PageAddr {
        PageAddr(u64::from(ppn))
    }

    #[inline]
    fn plane_of(&self, block: u32) -> u32 {
        self.plane_div.quotient(block)
    }

    fn next_seq(&mut self) -> u64 {
        let s = self.seq;
        self.seq += 1;
        s
    }

    /// Logical pages of logical block `lbn` (the last one may be short).
    fn lbn_pages(&self, lbn: u32) -> u32 {
        (self.lpns - lbn * self.ppb).min(self.ppb)
    }

    #[inline]
    fn is_in_data(&self, lpn: u32) -> bool {
        self.in_data[(lpn / 64) as usize] & (1 << (lpn % 64)) != 0
    }

    #[inline]
    fn set_in_data(&mut self, lpn: u32, on: bool) {
        let bit = 1u64 << (lpn % 64);
        let w = &mut self.in_data[(lpn / 64) as usize];
        *w = if on { *w | bit } else { *w & !bit };
    }

    /// Where the current version of `lpn` is (NONE: never written).
    #[inline]
    fn location(&self, lpn: u32) -> u32 {
        match self.log_ppn[lpn as usize] {
            NONE if self.is_in_data(lpn) => self.data_block[(lpn / self.ppb) as usize] * self.ppb + lpn % self.ppb,
            NONE => NONE,
            ppn => ppn,
        }
    }

    // ----- free blocks -----

    fn push_free(&mut self, block: u32) {
        self.role[block as usize] = Role::Free;
        self.free.push(block);
    }

    /// A free block, on `plane` if it has one (so merges can use copyback),
    /// else on the next plane in turn that has one.
    fn pop_free(&mut self, plane: Option<u32>) -> Result<u32, FtlError> {
        self.free.pop(plane).ok_or_else(|| FtlError::NoSpace("hybrid: no free block for a log or a merge".into()))
    }

    /// Erase `block` into the free pool; a block whose erase fails is
    /// retired instead (a grown bad block: the mount scan skips it).
    fn erase_to_free(&mut self, flash: &mut dyn Flash, block: u32, cause: Cause) -> Result<(), FtlError> {
        if free_blocks::erase_for_reuse(flash, block, cause)? {
            self.push_free(block);
        } else {
            self.retire(block);
        }
        Ok(())
    }

    /// Never use `block` again (a grown bad block). The random log pool
    /// gives up a block for it (the spare blocks are the log blocks), down
    /// to one log block; past that the FTL runs out of free blocks and
    /// stops with `no free space`.
    fn retire(&mut self, block: u32) {
        self.role[block as usize] = Role::Bad;
        self.counters.retired_blocks += 1;
        self.max_rand_logs = self.max_rand_logs.saturating_sub(1).max(1);
    }

    // ----- writes -----

    /// Store one full logical page from `buf` at `sector`.
    fn write_page(&mut self, flash: &mut dyn Flash, lpn: u32, buf: BufId, sector: u32) -> Result<(), FtlError> {
        let (lbn, off) = (lpn / self.ppb, lpn % self.ppb);
        if off == 0 {
            self.close_seq_log(flash)?;
            let block = self.pop_free(None)?;
            self.role[block as usize] = Role::SeqLog;
            self.seq_log = Some(SeqLog { block, lbn, next: 0 });
        }
        match self.seq_log {
            Some(s) if s.lbn == lbn && s.next == off => {
                while let Err(e) =
                    self.program_log(flash, OOB_SEQ, lpn, self.seq_log_block() * self.ppb + off, buf, sector)
                {
                    let block = self.replace_failed_block(flash, self.seq_log_block(), off, e)?;
                    self.seq_log = Some(SeqLog { block, ..s });
                }
                let s = self.seq_log.expect("the sequential log");
                self.counters.seq_log_pages += 1;
                let next = off + 1;
                self.seq_log = Some(SeqLog { next, ..s });
                if next == self.lbn_pages(lbn) {
                    self.switch_merge(flash)?;
                }
                Ok(())
            }
            _ => self.append_random(flash, lpn, buf, sector),
        }
    }

    /// Program a host page into a log page (`kind`: which log) and make it current.
    fn program_log(
        &mut self,
        flash: &mut dyn Flash,
        kind: u8,
        lpn: u32,
        ppn: u32,
        buf: BufId,
        sector: u32,
    ) -> Result<(), FtlError> {
        let oob = encode_oob(kind, lpn, self.next_seq());
        flash.program(Cause::Host, self.page_addr(ppn), buf, sector, &oob)?;
        self.set_in_data(lpn, false);
        self.log_ppn[lpn as usize] = ppn;
        self.lost.found_again(lpn);
        Ok(())
    }

    fn append_random(&mut self, flash: &mut dyn Flash, lpn: u32, buf: BufId, sector: u32) -> Result<(), FtlError> {
        if self.cursor.1 == self.ppb {
            self.new_random_log(flash)?;
        }
        let at = self.cursor.1;
        while let Err(e) = self.program_log(flash, OOB_RAND, lpn, self.cursor.0 * self.ppb + at, buf, sector) {
            let block = self.replace_failed_block(flash, self.cursor.0, at, e)?;
            *self.rand_logs.back_mut().expect("the open random log is the newest") = block;
            self.cursor.0 = block;
        }
        self.cursor.1 += 1;
        self.counters.rand_log_pages += 1;
        Ok(())
    }

    fn seq_log_block(&self) -> u32 {
        self.seq_log.expect("the sequential log").block
    }

    /// A program into page `filled` of `failed` (a log block, or a data
    /// block a merge is building) failed with `error` (media reliability;
    /// anything but `ProgramFailed` is passed on). The block is a grown bad
    /// block now: the NAND still reads it but never programs or erases it
    /// again. Copy its pages below `filled` to a fresh block at the same
    /// offsets (on the same plane when possible: copyback), with their
    /// OOBs (sequence numbers included), remap the log pages among them, and
    /// retire `failed`; the caller uses the fresh block in its place and
    /// programs page `filled` again. A failure while copying retires the
    /// fresh block too and starts over. Until the copy is done nothing
    /// points away from `failed`, and a mount skips it (bad) and finds the
    /// sources of a merge's copies still in place. With no free block left
    /// the FTL stops with `no free space`, never with wrong data.
    #[cold]
    fn replace_failed_block(
        &mut self,
        flash: &mut dyn Flash,
        failed: u32,
        filled: u32,
        error: FtlError,
    ) -> Result<u32, FtlError> {
        if !matches!(error, FtlError::Flash(FlashError::ProgramFailed)) {
            return Err(error);
        }
        if self.mutant == Mutant::KeepsFailedProgram {
            return Ok(failed); // BUG (deliberate): programs the failed block again
        }
        let role = self.role[failed as usize];
        self.retire(failed);
        'fresh: loop {
            let block = self.pop_free(Some(self.plane_of(failed)))?;
            let mut oob = [0u8; OOB_BYTES];
            for off in 0..filled {
                let (src, dst) = (failed * self.ppb + off, block * self.ppb + off);
                flash.read_oob(Cause::Gc, self.page_addr(src), &mut oob)?;
                // The copy keeps the page's OOB, sequence number included: the
                // failed block is skipped by a mount, and a superseded
                // version copied with a new number would outrank the
                // current one there.
                let lpn = decode_oob(&oob).1;
                let copyback = self.opts.copyback && self.plane_of(block) == self.plane_of(failed);
                let buf = self.copy_buf.expect("buffers allocated at power-on");
                let copied = match flash_ops::copy_page(
                    flash,
                    Cause::Gc,
                    self.page_addr(src),
                    self.page_addr(dst),
                    &oob,
                    copyback,
                    buf,
                ) {
                    Err(FlashError::Uncorrectable) => self.replace_unreadable_page(flash, src, dst, &oob),
                    r => r,
                };
                match copied {
                    Ok(()) => self.counters.merge_copies += 1,
                    Err(FlashError::ProgramFailed) => {
                        self.retire(block);
                        continue 'fresh;
                    }
                    Err(e) => return Err(e.into()),
                }
                if lpn < self.lpns && self.log_ppn[lpn as usize] == src {
                    self.log_ppn[lpn as usize] = dst;
                }
            }
            self.role[block as usize] = role;
            return Ok(block);
        }
    }

    /// A page `src` of a failed block being replaced (see
    /// [`Self::replace_failed_block`]) is uncorrectable: program its place
    /// `dst` with zeros under `oob` (the page's own OOB) instead — a pad
    /// held zeros, and a superseded version is never read again (the
    /// current one has a newer sequence number) — and a current version's
    /// as a lost slot ([`OOB_LOST`]), its logical page marked lost.
    #[cold]
    fn replace_unreadable_page(
        &mut self,
        flash: &mut dyn Flash,
        src: u32,
        dst: u32,
        oob: &[u8; OOB_BYTES],
    ) -> Result<(), FlashError> {
        let (kind, lpn, seq) = decode_oob(oob);
        let log = if lpn < self.lpns { self.log_ppn[lpn as usize] } else { src };
        // Current: the log page of `lpn`, or a page a merge in progress copied.
        let current = kind != OOB_PAD && (log == src || (log == NONE && self.is_in_data(lpn)));
        let mut oob = *oob;
        if current && self.mutant != Mutant::ForgetsLostPage {
            // (else BUG (deliberate): the zeros stand as the page's data)
            self.lost.mark(lpn);
            oob = encode_oob(OOB_LOST, lpn, seq);
        }
        let zero = self.zero_buf.expect("buffers allocated at power-on");
        flash.program(Cause::Gc, self.page_addr(dst), zero, 0, &oob)
    }

    /// Install a fresh random log block: a free one while the pool has
    /// room, else the oldest one after merging what it holds.
    fn new_random_log(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        if (self.rand_logs.len() as u32) < self.max_rand_logs {
            let block = self.pop_free(None)?;
            self.install_random_log(block);
            return Ok(());
        }
        let victim = self.rand_logs.pop_front().expect("a full pool has blocks");
        self.collect_victim_lbns(flash, victim)?;
        if self.victim_lbns.is_empty() {
            self.counters.empty_log_reclaims += 1;
            if self.mutant == Mutant::MergeReturnsEarlyWithoutLogBlock {
                // BUG (deliberate): nothing to merge, so erase and return —
                // without installing a log block.
                return self.erase_to_free(flash, victim, Cause::Gc);
            }
        }
        let lbns = std::mem::take(&mut self.victim_lbns);
        let mut result = Ok(());
        for &lbn in &lbns {
            result = self.full_merge(flash, lbn, Cause::Gc);
            if result.is_err() {
                break;
            }
        }
        self.victim_lbns = lbns;
        result?;
        if free_blocks::erase_for_reuse(flash, victim, Cause::Gc)? {
            if self.rand_logs.len() as u32 >= self.max_rand_logs {
                // The pool shrank (a block retired): give the victim back.
                self.push_free(victim);
                return self.new_random_log(flash);
            }
            self.install_random_log(victim);
        } else {
            self.retire(victim);
            let block = self.pop_free(None)?;
            self.install_random_log(block);
        }
        Ok(())
    }

    fn install_random_log(&mut self, block: u32) {
        self.role[block as usize] = Role::RandLog;
        self.rand_logs.push_back(block);
        self.cursor = (block, 0);
    }

    /// The logical blocks with a valid page in log block `victim` (from the
    /// pages' OOB), into `self.victim_lbns`.
    fn collect_victim_lbns(&mut self, flash: &mut dyn Flash, victim: u32) -> Result<(), FtlError> {
        self.victim_lbns.clear();
        let mut oob = [0u8; OOB_BYTES];
        for ppn in victim * self.ppb..(victim + 1) * self.ppb {
            flash.read_oob(Cause::Gc, self.page_addr(ppn), &mut oob)?;
            let (kind, lpn, _) = decode_oob(&oob);
            if kind == OOB_ERASED {
                break;
            }
            if lpn < self.lpns && self.log_ppn[lpn as usize] == ppn {
                let lbn = lpn / self.ppb;
                if !self.victim_lbns.contains(&lbn) {
                    self.victim_lbns.push(lbn);
                }
            }
        }
        Ok(())
    }

    // ----- merges -----

    /// End the sequential log: a partial merge (copy the rest of its
    /// logical block into it, then switch).
    fn close_seq_log(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let Some(s) = self.seq_log else { return Ok(()) };
        let last = self.last_current_offset(s.lbn, s.next);
        if let Some(last) = last {
            for off in s.next..=last {
                while let Err(e) =
                    self.fill_page(flash, s.lbn * self.ppb + off, self.seq_log_block() * self.ppb + off, Cause::Gc)
                {
                    let block = self.replace_failed_block(flash, self.seq_log_block(), off, e)?;
                    self.seq_log = Some(SeqLog { block, ..s });
                }
            }
        }
        self.counters.partial_merges += 1;
        self.adopt_seq_log(flash)
    }

    /// Switch merge: the full sequential log becomes the data block.
    fn switch_merge(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.counters.switch_merges += 1;
        self.adopt_seq_log(flash)
    }

    /// The sequential log becomes its logical block's data block.
    fn adopt_seq_log(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let s = self.seq_log.take().expect("a sequential log to adopt");
        let first = s.lbn * self.ppb;
        for off in 0..self.lbn_pages(s.lbn) {
            let lpn = first + off;
            let adopts_any = self.mutant == Mutant::MergeAdoptsSupersededPage;
            if adopts_any || self.log_ppn[lpn as usize] == s.block * self.ppb + off {
                self.log_ppn[lpn as usize] = NONE;
                self.set_in_data(lpn, true);
            }
        }
        self.replace_data_block(flash, s.lbn, s.block, Cause::Gc)
    }

    /// Merge logical block `lbn` into a fresh data block.
    fn full_merge(&mut self, flash: &mut dyn Flash, lbn: u32, cause: Cause) -> Result<(), FtlError> {
        let old = self.data_block[lbn as usize];
        let plane = (old != NONE).then(|| self.plane_of(old));
        let mut block = self.pop_free(plane)?;
        self.role[block as usize] = Role::Data;
        if let Some(last) = self.last_current_offset(lbn, 0) {
            let end = if self.mutant == Mutant::FullMergeStopsBeforeLastPage { last } else { last + 1 };
            for off in 0..end {
                while let Err(e) = self.fill_page(flash, lbn * self.ppb + off, block * self.ppb + off, cause) {
                    block = self.replace_failed_block(flash, block, off, e)?;
                }
            }
        }
        self.counters.full_merges += 1;
        // The sequential log of this logical block holds nothing current now.
        if let Some(s) = self.seq_log.filter(|s| s.lbn == lbn) {
            self.seq_log = None;
            self.erase_to_free(flash, s.block, cause)?;
        }
        self.replace_data_block(flash, lbn, block, cause)
    }

    /// The highest offset (from `from`) of `lbn` whose page holds data.
    fn last_current_offset(&self, lbn: u32, from: u32) -> Option<u32> {
        let first = lbn * self.ppb;
        (from..self.lbn_pages(lbn)).rev().find(|&off| self.location(first + off) != NONE)
    }

    /// Program page `dst` of a block being merged with the current version
    /// of `lpn` (a copy), or a zero page if it has none; `lpn` is then in
    /// the data block being built.
    fn fill_page(&mut self, flash: &mut dyn Flash, lpn: u32, dst: u32, cause: Cause) -> Result<(), FtlError> {
        let src = self.location(lpn);
        if src == NONE {
            let oob = encode_oob(OOB_PAD, lpn, self.next_seq());
            let zero = self.zero_buf.expect("buffers allocated at power-on");
            flash.program(cause, self.page_addr(dst), zero, 0, &oob)?;
            self.counters.pad_pages += 1;
            self.set_in_data(lpn, false);
            return Ok(());
        }
        let seq = self.next_seq();
        if self.lost.contains(lpn) {
            self.program_lost_slot(flash, lpn, dst, seq, cause)?;
        } else {
            let oob = encode_oob(OOB_DATA, lpn, seq);
            let copyback = self.opts.copyback && self.plane_of(src / self.ppb) == self.plane_of(dst / self.ppb);
            let buf = self.copy_buf.expect("buffers allocated at power-on");
            match flash_ops::copy_page(flash, cause, self.page_addr(src), self.page_addr(dst), &oob, copyback, buf) {
                Ok(()) => {}
                Err(FlashError::Uncorrectable) if self.mutant == Mutant::ForgetsLostPage => {
                    // BUG (deliberate): the lost page is padded like one
                    // never written, unmarked, and reads as zeros.
                    let zero = self.zero_buf.expect("buffers allocated at power-on");
                    flash.program(cause, self.page_addr(dst), zero, 0, &encode_oob(OOB_PAD, lpn, seq))?;
                    self.log_ppn[lpn as usize] = NONE;
                    self.set_in_data(lpn, false);
                    return Ok(());
                }
                Err(FlashError::Uncorrectable) => {
                    self.lost.mark(lpn);
                    self.program_lost_slot(flash, lpn, dst, seq, cause)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.counters.merge_copies += 1;
        self.log_ppn[lpn as usize] = NONE;
        self.set_in_data(lpn, true);
        Ok(())
    }

    /// Program page `dst` of a block being merged as the lost slot of
    /// `lpn` (zeros under [`OOB_LOST`]): the lost page's current version,
    /// which a mount finds as it finds any other (see *Lost pages*).
    fn program_lost_slot(
        &mut self,
        flash: &mut dyn Flash,
        lpn: u32,
        dst: u32,
        seq: u64,
        cause: Cause,
    ) -> Result<(), FtlError> {
        let zero = self.zero_buf.expect("buffers allocated at power-on");
        flash.program(cause, self.page_addr(dst), zero, 0, &encode_oob(OOB_LOST, lpn, seq))?;
        Ok(())
    }

    /// `block` is now `lbn`'s data block; the old one holds nothing current.
    fn replace_data_block(
        &mut self,
        flash: &mut dyn Flash,
        lbn: u32,
        block: u32,
        cause: Cause,
    ) -> Result<(), FtlError> {
        self.role[block as usize] = Role::Data;
        let old = std::mem::replace(&mut self.data_block[lbn as usize], block);
        if old != NONE {
            self.erase_to_free(flash, old, cause)?;
        }
        Ok(())
    }

    // ----- mount: see recovery.rs -----
}

impl WholePageStore for HybridFtl {
    fn sectors_per_page(&self) -> u32 {
        self.spp
    }

    #[inline]
    fn location(&self, lpn: u32) -> Option<PageAddr> {
        match HybridFtl::location(self, lpn) {
            NONE => None,
            ppn => Some(self.page_addr(ppn)),
        }
    }

    fn write_page(&mut self, flash: &mut dyn Flash, lpn: u32, buf: BufId, sector: u32) -> Result<(), FtlError> {
        HybridFtl::write_page(self, flash, lpn, buf, sector)
    }

    fn scratch_buf(&self) -> BufId {
        self.tmp_buf.expect("buffers allocated at power-on")
    }

    fn count_rmw_read(&mut self) {
        self.counters.rmw_reads += 1;
    }

    fn count_trim_zero_page(&mut self) {
        self.counters.trim_zero_pages += 1;
    }

    #[inline]
    fn is_lost(&self, lpn: u32) -> bool {
        self.lost.contains(lpn)
    }

    fn mutant(&self) -> Mutant {
        self.mutant
    }
}

impl Ftl for HybridFtl {
    fn info(&self) -> FtlInfo {
        FtlInfo { name: "hybrid", guarantee: Guarantee::Baseline, oob_bytes: OOB_BYTES as u32 }
    }

    fn format(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.reset_state(flash)?;
        let geometry = self.geometry.clone();
        let good = whole_page_io::format_blocks(flash, &geometry, |block, good| {
            if good {
                self.push_free(block);
            } else {
                self.role[block as usize] = Role::Bad;
            }
        })?;
        self.settle_log_blocks(good)
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
        for span in whole_page_io::page_spans(lba, sectors, self.spp) {
            whole_page_io::trim_span(self, flash, span)?;
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

    fn prefetch(&mut self, _flash: &dyn Flash, lba: u64, _sectors: u32) {
        if !self.log_ppn.is_empty() {
            let lpn = (lba / u64::from(self.spp)) as usize;
            crate::util::prefetch::prefetch(&self.log_ppn, lpn);
            crate::util::prefetch::prefetch(&self.data_block, lpn / self.ppb as usize);
        }
    }

    fn stats(&self) -> FtlStats {
        let c = &self.counters;
        let mut extra = BTreeMap::new();
        for (k, v) in [
            ("switch_merges", c.switch_merges),
            ("partial_merges", c.partial_merges),
            ("full_merges", c.full_merges),
            ("merge_copies", c.merge_copies),
            ("pad_pages", c.pad_pages),
            ("empty_log_reclaims", c.empty_log_reclaims),
            ("seq_log_pages", c.seq_log_pages),
            ("rand_log_pages", c.rand_log_pages),
            ("random_log_blocks", u64::from(self.max_rand_logs)),
            ("rmw_reads", c.rmw_reads),
            ("trim_zero_pages", c.trim_zero_pages),
        ] {
            extra.insert(k.to_string(), serde_json::json!(v));
        }
        free_blocks::insert_retired_blocks(&mut extra, c.retired_blocks);
        if c.mount_grown_bad_merges > 0 {
            extra.insert("mount_grown_bad_merges".into(), serde_json::json!(c.mount_grown_bad_merges));
        }
        self.lost.insert_metric(&mut extra, self.spp);
        let runs = c.switch_merges + c.partial_merges + c.full_merges;
        FtlStats {
            gc_runs: runs,
            dram_bytes: Self::dram_needed(&self.geometry, self.lpns, self.lbns, self.max_rand_logs),
            free_blocks: Some(u64::from(self.free.len())),
            mount: vec![
                ("mount_scanned_pages", c.mount_scanned_pages),
                ("mount_merged_logs", c.mount_merged_logs),
                ("mount_finished_merges", c.mount_finished_merges),
                ("mount_rewrites", c.mount_rewrites),
                ("mount_erases", c.mount_erases),
            ],
            extra,
        }
        .with_typed_in_extra()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: toml::Value) -> Result<LogBlocks, String> {
        let mut t = FtlOptions::new();
        t.insert("random_log_blocks".into(), v);
        parse_options::<HybridOptions>("hybrid", &t).map(|o| o.random_log_blocks)
    }

    #[test]
    fn log_block_counts_parse_as_numbers_shares_or_all() {
        assert_eq!(parse(toml::Value::Integer(8)), Ok(LogBlocks::Count(8)));
        assert_eq!(parse(toml::Value::String("8".into())), Ok(LogBlocks::Count(8)));
        assert_eq!(parse(toml::Value::String("25%".into())), Ok(LogBlocks::PercentOfSpare(25.0)));
        assert_eq!(parse(toml::Value::String("all".into())), Ok(LogBlocks::All));
        for bad in [toml::Value::Integer(0), toml::Value::String("lots".into())] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("`random_log_blocks`"), "{e}");
        }
        assert_eq!(HybridFtl::resolve_log_blocks(LogBlocks::PercentOfSpare(50.0), 10), Ok(5));
        assert!(HybridFtl::resolve_log_blocks(LogBlocks::Count(11), 10).unwrap_err().contains("exceeds"));
    }
}
