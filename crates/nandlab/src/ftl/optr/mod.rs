//! `optr`: order-preserving translation and recovery (after Chang and Liu,
//! "OPTR: Order-Preserving Translation and Recovery Design for SSDs with a
//! Standard Block Device Interface", USENIX ATC 2019), written from the
//! paper's description.
//!
//! # Crash guarantee
//!
//! [`Guarantee::Optr`]: after a power cut the disk equals the disk after
//! some prefix of the write (and trim) requests in submission order; each
//! request is all or nothing; the prefix includes every request completed
//! before the last completed flush. Writes are acknowledged from a volatile
//! write cache ([`Durability::Volatile`]).
//!
//! # Structures
//!
//! - **Write cache** (`cache_pages`, default 512 pages, LRU) in device DRAM.
//!   A write to a logical page whose cached copy is still dirty replaces it
//!   (*coalescing*): the older request then never reaches flash for that
//!   page, so a *coalescing record* (older write id, newer write id, older
//!   request's size: 20 bytes) says the older request's page lives on in
//!   the newer one.
//! - **Per-page recovery information** in the OOB: write id (8 bytes),
//!   request size in pages (4), logical page (4). Each write or trim request
//!   gets the next write id.
//! - **Logs.** Logical pages are statically assigned to planes by modulo;
//!   each plane appends host pages to one block chain and GC copies to
//!   another. The last page of each block is a *summary page* listing its
//!   pages' recovery information and the next block of the chain, so
//!   recovery follows chains instead of scanning the drive.
//! - **Checkpoints.** A *full* checkpoint (the whole map) goes to one of two
//!   reserved areas in turn (a shadow copy: the other keeps the previous
//!   one); an *incremental* checkpoint (the map entries changed since the
//!   last checkpoint) goes to a reserved metadata log. Each ends with a
//!   *seal page*: the write id everything up to is in the checkpoint, the
//!   next write id, and where each chain continues. A checkpoint without
//!   its seal does not exist. An incremental checkpoint's seal also carries
//!   its last map entries (as many as fit after the seal's header), so a
//!   small one is a single page: a page program is atomic to recovery (a
//!   torn page does not read), so the seal needs no page of its own. The
//!   metadata log also holds coalescing records and trim records; they are
//!   written on every flush that has any, and made moot by checkpoints.
//! - **Garbage collection** obeys the two constraints of the paper: a block
//!   holding pages written after the latest checkpoint is never reclaimed
//!   (recovery may need them, or the older copies, to roll back); and GC is
//!   preceded by an internal flush and checkpoint — batched: each one
//!   collects enough victims on every short plane to last a while.
//!
//! # Recovery phases
//!
//! 1. *Locate*: the newest sealed full checkpoint (reading both areas' seal
//!    pages), then the sealed incremental checkpoints and the records after
//!    it in the metadata log.
//! 2. *Load*: the full checkpoint's map, then each sealed incremental.
//! 3. *Scan*: each chain from where the last seal says it continued,
//!    following summary pages to the next block, until an erased or
//!    unreadable page; the data of each chain's last page is read, since
//!    only it can be torn by a cut during its program (the lower pages of
//!    its word line are read too, and dropped if torn, so that recovery
//!    never maps a torn page; that does not bring their data back: see
//!    *Paired pages*).
//! 4. *Recovery point*: count, for every write id after the checkpoint,
//!    the pages found and the records that stand for coalesced pages; the
//!    first id with fewer than its request size is the first incomplete
//!    request `I`. Then every coalescing record (src → dst), newest src
//!    first: if `src < I <= dst`, the older request's page was only on
//!    flash through the lost newer one, so `I = src`.
//! 5. *Rebuild*: GC copies found in the chains are applied as they are,
//!    then host pages and trims with ids below `I`, in id order; a new full
//!    checkpoint (commit = the highest id seen) is written, so pages of
//!    rolled-back requests are never replayed, and new chains start in
//!    fresh blocks.
//!
//! # Overheads
//!
//! `ftl_stats` report the extra programs as a percentage of host page
//! programs: `overhead_incremental_checkpoint_percent` (entry pages and
//! seals of incremental checkpoints), `overhead_records_percent`,
//! `overhead_full_checkpoint_percent` (with their seals, and the one
//! written at format) and `overhead_summary_percent`. Chang et al. report
//! incremental checkpoints below 0.075 % of host writes in most workloads;
//! here they follow GC instead, because an incremental checkpoint is
//! written before every GC batch (the paper's second GC constraint), and
//! every page of a checkpoint counts (its seal, and entry pages for more
//! entries than a seal holds). Records are written on every flush that has
//! any (coalescing records, and trim records: this implementation's
//! extension, since trims must be durable at a flush); packing them into
//! the OOB of the pages a flush writes anyway would avoid most of them
//! (not done). Summary pages are the paper's design: one program per
//! block, times the WAF. Measured figures, and why they differ from the
//! paper's: `docs/design-notes/ftl.md`, *optr: overheads*.
//!
//! # Paired pages (not defended)
//!
//! With the `paired_pages` power-cut effect, a cut during an upper-page
//! program also destroys the lower page(s) of its word line, programmed
//! earlier and possibly durable long ago: a flushed or checkpointed host
//! page, a GC copy whose victim block is already erased, or a log page
//! holding a sealed incremental checkpoint. optr does not defend against
//! this (a defence would, for instance, keep metadata in lower pages only,
//! keep a GC victim until the upper pages paired with its copies are
//! written, and pad a flush to the end of its word lines); `crash` with
//! `--power-cut paired_pages=on` finds the losses (see
//! `docs/design-notes/ftl.md`, *optr: paired pages*).
//!
//! # Files
//!
//! - `mod.rs`: the FTL, its options and state, power-on and the host
//!   requests.
//! - `chains.rs`: the block chains (appending pages, closing a block with
//!   its summary page, the map updates).
//! - `cache.rs`: the write cache (LRU order in a [`crate::util::recency`]
//!   queue, coalescing, flushing).
//! - `checkpoint.rs`: the metadata log (records), incremental and full
//!   checkpoints and their seals.
//! - `gc.rs`: garbage collection under the paper's two constraints.
//! - `media.rs`: failed programs and erases (media reliability): chain
//!   blocks and reserved metadata blocks retired, their data moved out.
//! - `recovery.rs`: the recovery phases above.
//! - `layout.rs`: what optr writes to flash: OOB, seal, checkpoint, record
//!   and summary pages.

mod cache;
mod chains;
mod checkpoint;
mod gc;
mod layout;
mod media;
mod recovery;

use super::mutants::Mutant;
use super::{
    check_range, parse_options, Durability, Ftl, FtlDescriptor, FtlEnv, FtlError, FtlInfo, FtlOptions, FtlStats,
    Guarantee, IdleOutcome, IoRequest, OptionDoc,
};
use crate::flash::{BufId, Cause, Flash, FlashError};
use crate::nand::{BlockAddr, Geometry, PageAddr};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::util::recency::RecencyQueue;
use cache::Entry;
pub use layout::OOB_BYTES;
use layout::*;

pub const DESCRIPTOR: FtlDescriptor = FtlDescriptor {
    name: "optr",
    summary: "order-preserving translation and recovery (Chang & Liu, ATC'19): write cache with coalescing, \
              prefix + atomicity + flush crash guarantee",
    options: &[
        OptionDoc {
            name: "cache_pages",
            default: "512 (1/256 of the pages on small devices)",
            help: "write-cache entries (pages), LRU",
        },
        OptionDoc {
            name: "log_blocks",
            default: "32 (fewer on small devices)",
            help: "blocks of the metadata log (incremental checkpoints, coalescing and trim records)",
        },
        OptionDoc {
            name: "gc_reserve_blocks",
            default: "derived from the cache",
            help: "per plane: GC runs when free blocks fall to this",
        },
        OptionDoc {
            name: "gc_batch_blocks",
            default: "1",
            help: "per plane: blocks a GC batch frees beyond the reserve",
        },
    ],
    build: build_optr,
};

fn build_optr(env: &FtlEnv, options: &FtlOptions) -> Result<Box<dyn Ftl>, String> {
    let opts: OptrOptions = parse_options("optr", options)?;
    Ok(Box::new(OptrFtl::new(env, opts)?))
}

/// Options of the `optr` FTL (see [`DESCRIPTOR`]).
#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct OptrOptions {
    pub cache_pages: Option<u32>,
    pub log_blocks: Option<u32>,
    pub gc_reserve_blocks: Option<u32>,
    pub gc_batch_blocks: Option<u32>,
}

const NONE: u32 = u32::MAX;
const UNMAPPED: u32 = u32::MAX;
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum State {
    Reserved,
    Free { dirty: bool },
    Open,
    Sealed,
    Bad,
}

/// A block chain being appended to.
#[derive(Clone, Debug)]
struct Chain {
    block: u32,
    page: u32,
    /// (wid, size | GC flag, lpn) of the pages of `block` so far (for its summary).
    summary: Vec<(u64, u32, u32)>,
}

#[derive(Default, Clone, Debug)]
struct Counters {
    host_pages: u64,
    summary_pages: u64,
    full_pages: u64,
    inc_pages: u64,
    record_pages: u64,
    seal_pages: u64,
    coalesced: u64,
    gc_runs: u64,
    gc_batches: u64,
    internal_flushes: u64,
    recoveries: u64,
    rolled_back_requests: u64,
    /// Blocks retired after a failed program or erase (media reliability).
    retired_blocks: u64,
}

/// The OPTR FTL. See the module docs.
pub struct OptrFtl {
    g: Geometry,
    spp: u32,
    ppb: u32,
    lpns: u32,
    logical_sectors: u64,
    units: u32,
    cache_cap: u32,
    reserve: u32,
    batch: u32,
    l2p: Vec<u32>,
    valid: Vec<u64>,
    valid_count: Vec<u32>,
    /// Checkpoint epoch in which each block was last programmed (GC constraint 1).
    epoch_of: Vec<u32>,
    epoch: u32,
    state: Vec<State>,
    free: Vec<VecDeque<u32>>,
    host: Vec<Chain>,
    gc: Vec<Chain>,
    /// Reserved metadata blocks: full-checkpoint areas A and B, the log.
    area: [Vec<u32>; 2],
    log: Vec<u32>,
    log_pos: u32,
    /// Log blocks erased since the last full checkpoint.
    log_fresh: Vec<bool>,
    full_area: usize,
    meta_seq: u64,
    next_wid: u64,
    /// Logical pages whose mapping changed since the last checkpoint.
    dirty_map: Vec<u64>,
    dirty_count: u64,
    records: Vec<Record>,
    // Write cache.
    entries: Vec<Entry>,
    index: HashMap<u32, u32>,
    /// The LRU order of the cache's entries (see [`crate::util::recency`]).
    lru: RecencyQueue,
    free_entries: Vec<u32>,
    tmp: Option<BufId>,
    /// One bit per logical page: in the write cache (spares a hash lookup).
    cached: Vec<u64>,
    /// The logical pages of the last prefetch hint.
    hinted: (u32, u32),
    /// An internal flush and GC batch is running (no nested one).
    in_gc: bool,
    /// A host request is being served: no checkpoint may cut it in two.
    in_request: bool,
    deferred_flush: bool,
    /// A reserved block failed: the layout changed, so the next checkpoint
    /// is a full one (see `media.rs`).
    full_pending: bool,
    /// A deliberate bug (checker tests; see [`Mutant`]).
    mutant: Mutant,
    c: Counters,
}

impl OptrFtl {
    pub fn new(env: &FtlEnv, opts: OptrOptions) -> Result<OptrFtl, String> {
        Self::with_mutant(env, opts, Mutant::None)
    }

    /// The FTL with a deliberate bug (for checker tests; see [`Mutant`]).
    pub fn with_mutant(env: &FtlEnv, opts: OptrOptions, mutant: Mutant) -> Result<OptrFtl, String> {
        mutant.check_breaks("optr")?;
        let g = env.geometry.clone();
        let spp = g.sectors_per_page();
        let ppb = g.pages_per_block();
        if ppb < 4 {
            return Err("optr: blocks need at least 4 pages (one is the summary page)".into());
        }
        let lpns64 = env.logical_sectors.div_ceil(u64::from(spp));
        if lpns64 >= u64::from(UNMAPPED) {
            return Err(format!("optr: {lpns64} logical pages do not fit a 32-bit map"));
        }
        let lpns = lpns64 as u32;
        let units = g.planes();
        // 512 pages as in the paper's SSD, fewer on small devices (1/256 of the pages).
        let cache = opts.cache_pages.unwrap_or_else(|| (g.pages() / 256).clamp(16, 512) as u32).max(1);
        let per_unit = f64::from(cache) / f64::from(units) / f64::from(ppb - 1);
        let reserve = opts.gc_reserve_blocks.unwrap_or(1 + (1.5 * per_unit).ceil() as u32).max(1);
        let batch = opts.gc_batch_blocks.unwrap_or(1).max(1);
        let blocks = g.blocks();
        let full_pages = Self::full_pages_of(&g, lpns);
        let area_blocks = (full_pages + 1).div_ceil(ppb);
        let log_blocks = opts.log_blocks.unwrap_or((blocks / 64).clamp(4, 32)).max(2);
        let reserved = 2 * area_blocks + log_blocks;
        let data_pages = u64::from(blocks - reserved) * u64::from(ppb - 1);
        let needed = lpns64 + u64::from(units) * u64::from(reserve + batch) * u64::from(ppb - 1);
        if data_pages <= needed {
            let reserves = needed - lpns64;
            let fits = match data_pages.checked_sub(reserves + 1) {
                Some(pages) if pages > 0 => {
                    format!("lower the logical capacity to at most {} sectors", pages * u64::from(spp))
                }
                _ => "no logical capacity fits: raise `geometry.blocks_per_plane`".to_string(),
            };
            return Err(format!(
                "optr: the device is too small: {data_pages} data pages for {lpns} logical pages plus GC reserves \
                 ({reserve} blocks per plane) and {reserved} metadata blocks, needs at least {} data pages; {fits}, \
                 or use a smaller cache",
                needed + 1
            ));
        }
        let dram = u64::from(lpns) * 4 + g.pages() / 8 + u64::from(blocks) * 16 + u64::from(lpns) / 8;
        if dram + u64::from(cache) * u64::from(g.page_size_bytes()) > env.dram_budget_bytes {
            return Err(format!(
                "optr: the map and a {cache}-page write cache need {}",
                super::dram_shortfall(dram + u64::from(cache) * u64::from(g.page_size_bytes()), env.dram_budget_bytes)
            ));
        }
        Ok(OptrFtl {
            spp,
            ppb,
            lpns,
            logical_sectors: env.logical_sectors,
            units,
            cache_cap: cache,
            reserve,
            batch,
            l2p: Vec::new(),
            valid: Vec::new(),
            valid_count: vec![0; blocks as usize],
            epoch_of: vec![0; blocks as usize],
            epoch: 1,
            state: vec![State::Free { dirty: true }; blocks as usize],
            free: Vec::new(),
            host: Vec::new(),
            gc: Vec::new(),
            area: [Vec::new(), Vec::new()],
            log: Vec::new(),
            log_pos: 0,
            log_fresh: Vec::new(),
            full_area: 0,
            meta_seq: 1,
            next_wid: 1,
            dirty_map: Vec::new(),
            dirty_count: 0,
            records: Vec::new(),
            entries: Vec::new(),
            index: HashMap::new(),
            lru: RecencyQueue::new(cache as usize),
            free_entries: Vec::new(),
            tmp: None,
            cached: Vec::new(),
            hinted: (0, 0),
            in_gc: false,
            in_request: false,
            deferred_flush: false,
            full_pending: false,
            mutant,
            c: Counters::default(),
            g,
        })
        .map(|mut f| {
            f.log = vec![0; log_blocks as usize];
            f.area = [vec![0; area_blocks as usize], vec![0; area_blocks as usize]];
            f
        })
    }

    fn full_pages_of(g: &Geometry, lpns: u32) -> u32 {
        let per = (g.page_size_bytes() as usize - HEADER) / 4;
        (lpns as usize).div_ceil(per).max(1) as u32
    }
    fn pa(&self, ppn: u32) -> PageAddr {
        PageAddr(u64::from(ppn))
    }
    fn ba(&self, b: u32) -> BlockAddr {
        BlockAddr(u64::from(b))
    }
    fn unit_of_block(&self, b: u32) -> usize {
        self.g.plane_of_block(self.ba(b)) as usize
    }

    // ----- power-on -----

    /// Format: refuse a device whose good blocks cannot hold the logical
    /// space. Logical pages are assigned to planes by modulo and GC moves
    /// pages only within a plane, so each plane's good blocks outside the
    /// metadata areas must hold its pages (one page per block is the
    /// summary) with more than its two open chains (host pages, GC copies)
    /// to spare; with less, the plane runs out of free blocks once the
    /// logical space is written. This is the least a plane needs: `new`
    /// asks the whole device for the GC reserve too, but a plane a block or
    /// two short of that still runs.
    fn check_capacity(&self, flash: &dyn Flash) -> Result<(), FtlError> {
        let mut data_blocks = vec![0u64; self.units as usize];
        let mut good = vec![0u64; self.units as usize];
        for b in 0..self.g.blocks() {
            let u = self.unit_of_block(b);
            match self.state[b as usize] {
                State::Bad => {}
                State::Reserved => good[u] += 1,
                _ => (data_blocks[u], good[u]) = (data_blocks[u] + 1, good[u] + 1),
            }
        }
        let per_block = u64::from(self.ppb - 1);
        let spare = 2; // the open host and GC chains
        let share = |u: u64| u64::from(self.lpns / self.units + u32::from((u as u32) < self.lpns % self.units));
        let short =
            (0..u64::from(self.units)).find(|&u| data_blocks[u as usize] * per_block <= share(u) + spare * per_block);
        let Some(u) = short else { return Ok(()) };
        let i = u as usize;
        let needed = (share(u) + spare * per_block) / per_block + 1 + (good[i] - data_blocks[i]);
        let bad = (0..self.g.blocks()).any(|b| flash.is_factory_bad(self.ba(b)));
        Err(FtlError::NoSpace(format!(
            "optr: plane {u} has {} good blocks, needs at least {needed}: {} of them hold metadata, its share of the \
             logical pages is {} ({} per block, one page of each is its summary) and {spare} blocks are open \
             (host pages, GC copies); lower the logical capacity{}",
            good[i],
            good[i] - data_blocks[i],
            share(u),
            per_block,
            if bad { " or `device.factory_bad_block_percent`" } else { "" }
        )))
    }

    /// Reset RAM state and pick the reserved metadata blocks: spread over
    /// planes, the highest good blocks of each, in turn.
    fn reset(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let blocks = self.g.blocks() as usize;
        self.l2p = crate::util::prefetch::large_vec(self.lpns as usize, UNMAPPED);
        self.valid = vec![0; self.g.pages().div_ceil(64) as usize];
        self.valid_count.fill(0);
        self.epoch_of.fill(0);
        self.epoch = 1;
        self.state.fill(State::Free { dirty: true });
        self.dirty_map = vec![0; (self.lpns as usize).div_ceil(64)];
        self.cached = vec![0; (self.lpns as usize).div_ceil(64)];
        self.hinted = (0, 0);
        self.dirty_count = 0;
        self.records.clear();
        self.deferred_flush = false;
        self.full_pending = false;
        let reserved = self.pick_reserved(flash)?;
        self.set_reserved(reserved);
        self.log_fresh = vec![false; self.log.len()];
        self.log_pos = 0;
        for b in 0..blocks as u32 {
            if flash.is_factory_bad(self.ba(b)) {
                self.state[b as usize] = State::Bad;
            }
        }
        self.free = (0..self.units).map(|_| VecDeque::new()).collect();
        self.host.clear();
        self.gc.clear();
        self.entries.clear();
        self.index.clear();
        self.free_entries.clear();
        self.lru = RecencyQueue::new(self.cache_cap as usize);
        for _ in 0..self.cache_cap {
            let buf = flash.buf_alloc(self.spp)?;
            self.free_entries.push(self.entries.len() as u32);
            self.entries.push(Entry::free(buf));
        }
        self.tmp = Some(flash.buf_alloc(self.spp)?);
        Ok(())
    }

    /// The reserved metadata blocks, spread over planes: the highest good
    /// blocks of each, in turn (a mount makes the same choice from the
    /// flash's bad-block marks; see `media.rs` for a reserved block that
    /// fails).
    fn pick_reserved(&self, flash: &dyn Flash) -> Result<Vec<u32>, FtlError> {
        let bpp = self.g.blocks_per_plane();
        let mut reserved = Vec::new();
        let want = self.area[0].len() * 2 + self.log.len();
        'outer: for depth in 0..bpp {
            for plane in 0..self.units {
                if reserved.len() == want {
                    break 'outer;
                }
                let b = self.g.block_addr(plane, bpp - 1 - depth).0 as u32;
                if !flash.is_factory_bad(self.ba(b)) {
                    reserved.push(b);
                }
            }
        }
        if reserved.len() < want {
            return Err(FtlError::NoSpace("optr: not enough good blocks for metadata".into()));
        }
        Ok(reserved)
    }

    /// Assign the reserved blocks: full-checkpoint areas A and B, then the log.
    fn set_reserved(&mut self, reserved: Vec<u32>) {
        let n = self.area[0].len();
        self.area = [reserved[..n].to_vec(), reserved[n..2 * n].to_vec()];
        self.log = reserved[2 * n..].to_vec();
        for &b in &reserved {
            self.state[b as usize] = State::Reserved;
        }
    }

    fn request_pages(&self, lba: u64, sectors: u64) -> Vec<(u32, u32, u32, u32)> {
        let spp = u64::from(self.spp);
        let (mut s, end) = (lba, lba + sectors);
        let mut v = Vec::new();
        while s < end {
            let in_page = (s % spp) as u32;
            let n = (spp - u64::from(in_page)).min(end - s) as u32;
            v.push(((s / spp) as u32, in_page, n, (s - lba) as u32));
            s += u64::from(n);
        }
        v
    }
}

impl Ftl for OptrFtl {
    fn info(&self) -> FtlInfo {
        FtlInfo { name: "optr", guarantee: Guarantee::Optr, oob_bytes: OOB_BYTES as u32 }
    }

    fn format(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.reset(flash)?;
        for b in 0..self.g.blocks() {
            if self.state[b as usize] == State::Bad {
                continue;
            }
            match flash.erase(Cause::Format, self.ba(b)) {
                Ok(()) => {
                    if self.state[b as usize] != State::Reserved {
                        self.state[b as usize] = State::Free { dirty: false };
                    }
                }
                Err(FlashError::EraseFailed | FlashError::BadBlock) => self.state[b as usize] = State::Bad,
                Err(e) => return Err(e.into()),
            }
        }
        self.check_capacity(flash)?;
        self.log_fresh.fill(true);
        self.start_chains(flash)?;
        self.full_area = 1;
        self.write_full(flash)?;
        self.log_fresh.fill(true);
        Ok(())
    }

    fn mount(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.reset(flash)?;
        self.recover(flash)
    }

    fn read(&mut self, flash: &mut dyn Flash, req: &IoRequest) -> Result<(), FtlError> {
        check_range(req.lba, u64::from(req.sectors), self.logical_sectors)?;
        for (lpn, in_page, n, at) in self.request_pages(req.lba, u64::from(req.sectors)) {
            if self.cached[(lpn / 64) as usize] & (1 << (lpn % 64)) != 0 {
                let e = self.index[&lpn];
                flash.buf_copy(req.buf, at, self.entries[e as usize].buf, in_page, n)?;
                continue;
            }
            match self.l2p[lpn as usize] {
                UNMAPPED => flash.buf_zero(req.buf, at, n)?,
                ppn => match flash.read(Cause::Host, self.pa(ppn), in_page, n, req.buf, at, &mut []) {
                    // An uncorrectable read is the host's read error.
                    Err(FlashError::Uncorrectable) if self.mutant == Mutant::IgnoresUncorrectableRead => {} // BUG (deliberate)
                    r => r?,
                },
            }
        }
        Ok(())
    }

    fn write(&mut self, flash: &mut dyn Flash, req: &IoRequest) -> Result<Durability, FtlError> {
        check_range(req.lba, u64::from(req.sectors), self.logical_sectors)?;
        let pages = self.request_pages(req.lba, u64::from(req.sectors));
        self.ensure_space_for(flash, pages.len() as u32)?;
        let wid = self.next_wid;
        self.next_wid += 1;
        let size = pages.len() as u32;
        let spp = self.spp;
        self.in_request = true;
        let mut r = Ok(());
        for &(lpn, in_page, n, at) in &pages {
            let buf = req.buf;
            r = self.cache_page(flash, lpn, wid, size, |f, dst| f.buf_copy(dst, in_page, buf, at, n), n == spp);
            if r.is_err() {
                break;
            }
        }
        self.in_request = false;
        r?;
        if std::mem::take(&mut self.deferred_flush) {
            // ReordersAcrossFlush: this request's pages reach flash first.
            for &(lpn, ..) in &pages {
                if let Some(&e) = self.index.get(&lpn) {
                    if self.entries[e as usize].dirty {
                        self.write_back(flash, e)?;
                    }
                }
            }
            self.flush_all(flash)?;
        }
        Ok(Durability::Volatile)
    }

    fn trim(&mut self, flash: &mut dyn Flash, lba: u64, sectors: u64) -> Result<(), FtlError> {
        check_range(lba, sectors, self.logical_sectors)?;
        let pages = self.request_pages(lba, sectors);
        self.ensure_space_for(flash, 2)?;
        let wid = self.next_wid;
        self.next_wid += 1;
        let whole: Vec<u32> = pages.iter().filter(|p| p.2 == self.spp).map(|p| p.0).collect();
        let size = (pages.len() - whole.len()) as u32 + u32::from(!whole.is_empty());
        let spp = self.spp;
        self.in_request = true;
        let mut r = Ok(());
        for &(lpn, in_page, n, _) in pages.iter().filter(|p| p.2 != spp) {
            r = self.cache_page(flash, lpn, wid, size, |f, dst| f.buf_zero(dst, in_page, n), false);
            if r.is_err() {
                break;
            }
        }
        self.in_request = false;
        r?;
        if let (Some(&first), Some(&last)) = (whole.first(), whole.last()) {
            for &lpn in &whole {
                if self.mutant != Mutant::TrimKeepsCachedPage {
                    self.uncache(lpn, wid);
                }
                if self.l2p[lpn as usize] != UNMAPPED {
                    self.set_map(lpn, UNMAPPED);
                }
            }
            self.records.push(Record::Trim { wid, first_lpn: first, count: last - first + 1, size });
        }
        Ok(())
    }

    fn flush(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        if self.mutant == Mutant::ReordersAcrossFlush {
            self.deferred_flush = true;
            return Ok(());
        }
        self.flush_all(flash)
    }

    fn emergency_flush(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        if self.mutant == Mutant::EmergencyFlushDropsCache {
            self.drop_dirty_cache();
            return Ok(());
        }
        self.flush_all(flash)
    }

    fn prefetch(&mut self, flash: &dyn Flash, lba: u64, sectors: u32) {
        if self.l2p.is_empty() {
            return;
        }
        // Stage 2: the previous hint's map entries are cached by now: warm
        // the flash pages they point to. Stage 1: this hint's map entries.
        for lpn in self.hinted.0..self.hinted.1 {
            let ppn = self.l2p[lpn as usize];
            if ppn != UNMAPPED {
                flash.prefetch_page(self.pa(ppn));
            }
        }
        let spp = u64::from(self.spp);
        let first = (lba / spp) as u32;
        let last = ((lba + u64::from(sectors)).div_ceil(spp) as u32).min(self.lpns);
        for lpn in (first..last).step_by(16) {
            crate::util::prefetch::prefetch(&self.l2p, lpn as usize);
        }
        self.hinted = (first, last);
    }

    fn idle(&mut self, _flash: &mut dyn Flash) -> Result<IdleOutcome, FtlError> {
        Ok(IdleOutcome::Nothing)
    }

    fn shutdown(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.flush_all(flash)?;
        self.checkpoint(flash)
    }

    fn stats(&self) -> FtlStats {
        let c = &self.c;
        let pct = |n: u64| if c.host_pages == 0 { 0.0 } else { n as f64 * 100.0 / c.host_pages as f64 };
        let mut extra = BTreeMap::new();
        for (k, v) in [
            ("host_pages", c.host_pages),
            ("summary_pages", c.summary_pages),
            ("full_checkpoint_pages", c.full_pages),
            ("incremental_checkpoint_pages", c.inc_pages),
            ("record_pages", c.record_pages),
            ("seal_pages", c.seal_pages),
            ("coalesced_pages", c.coalesced),
            ("gc_batches", c.gc_batches),
            ("internal_flushes", c.internal_flushes),
            ("recoveries", c.recoveries),
            ("rolled_back_requests", c.rolled_back_requests),
        ] {
            extra.insert(k.to_string(), serde_json::json!(v));
        }
        for (k, v) in [
            ("overhead_incremental_checkpoint_percent", pct(c.inc_pages + c.seal_pages)),
            ("overhead_records_percent", pct(c.record_pages)),
            ("overhead_full_checkpoint_percent", pct(c.full_pages)),
            ("overhead_summary_percent", pct(c.summary_pages)),
        ] {
            extra.insert(k.to_string(), serde_json::json!(v));
        }
        super::kit::free_blocks::insert_retired_blocks(&mut extra, c.retired_blocks);
        FtlStats {
            gc_runs: c.gc_runs,
            dram_bytes: u64::from(self.lpns) * 4
                + self.g.pages() / 8
                + u64::from(self.cache_cap) * u64::from(self.g.page_size_bytes()),
            extra,
            ..Default::default()
        }
    }
}
