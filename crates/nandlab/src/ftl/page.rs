//! `page`: a page-mapped FTL with write striping, greedy-family garbage
//! collection and checkpointed mapping.
//!
//! # Algorithm
//!
//! - **Mapping.** One entry per logical page (`lpn → ppn`, 4 bytes) and a
//!   valid bit per physical page, in device DRAM. No reverse map is kept:
//!   GC reads a valid page's logical page from its OOB, as firmware does,
//!   so overwriting a page costs one bit, and DRAM is 4 bytes per logical
//!   page plus an eighth of a byte per physical page. A host write of a
//!   whole page programs it from the host buffer; a partial page is a
//!   read-modify-write through a one-page buffer (never-written sectors
//!   are filled with zeros, so they read as zeros).
//! - **Allocation.** Each plane is a *unit* with its own free-block queue
//!   and write frontier(s). Host pages are striped round-robin over units in
//!   channel → chip → die → plane order, so consecutive pages of a request
//!   land on different channels first. Free blocks are reused oldest-erased
//!   first, which spreads erases (basic dynamic wear leveling).
//! - **Garbage collection** is per unit. Before a unit opens a new block,
//!   if its free blocks are at or below the foreground threshold, victims
//!   are collected until they are above it: valid pages are copied (by
//!   copyback, since source and destination share a plane) and the victim
//!   is erased. Victims come from a [`VictimSelector`] (greedy,
//!   cost-benefit, FIFO, random, d-choices, windowed greedy). GC copies go
//!   to a separate frontier by default (`gc_stream = "separate"`), or into
//!   the host frontier (`"shared"`, Desnoyers' single-frontier model).
//!   [`Ftl::idle`] collects one victim on the neediest unit while free
//!   blocks are below the background threshold.
//! - **Hot/cold separation** (`hot_cold`, see [`super::policy::hot_cold`]):
//!   a policy assigns each host write and each GC copy a *stream*, and each
//!   unit keeps one open block per stream, so data of different heat is
//!   not mixed in a block. The stream is recorded in the OOB. GC starts
//!   early enough to open one block per stream it may copy into.
//! - **Wear leveling** (`wear_leveling`, see
//!   [`super::policy::wear_leveling`]): which free block a unit opens
//!   (oldest erased, or fewest erases), and, for `static`, moving cold data
//!   off the least-worn block of a unit when its wear spread exceeds a
//!   threshold (cause `wear_leveling`, onto the most-worn free block, on a
//!   stream of its own). The FTL counts erases per block and keeps the
//!   counts in its checkpoint.
//! - **Persistence.** Each programmed page's OOB holds `kind`, the logical
//!   page and a 40-bit program sequence number; the high nibble of `kind`
//!   is the page's stream. A clean shutdown writes a checkpoint of the
//!   whole map and the erase counts (metadata pages in dedicated blocks,
//!   superseding the previous one). Mount scans the OOB of every written
//!   page, takes the newest complete checkpoint, and replays data pages
//!   newer than it (newest sequence number wins), so a mount after a clean
//!   shutdown restores trims too, and a mount without one still finds every
//!   programmed page.
//!
//! # Crash guarantee
//!
//! [`Guarantee::Baseline`]: writes are durable when they complete (no
//! write cache); trims are durable once a flush completes after them.
//! Torn programs and interrupted erases are survived (see
//! `page_recovery.rs`); the paired-page problem is not (with paired-page
//! corruption on, a torn upper page can destroy a completed lower-page
//! write). Multi-page writes are not atomic: a cut between the programs
//! of one request can leave it half written.

use super::policy::hot_cold::{HotColdKind, HotColdSeparator};
use super::policy::wear_leveling::{FreeBlockUse, WearLeveler, WearLevelingKind};
use super::policy::{BlockTable, VictimPolicyKind, VictimSelector};
use super::{
    check_range, parse_options, Durability, Ftl, FtlDescriptor, FtlEnv, FtlError, FtlInfo, FtlOptions, FtlStats,
    Guarantee, IdleOutcome, IoRequest, OptionDoc,
};
use crate::flash::{BufId, Cause, Flash, FlashError};
use crate::nand::{BlockAddr, Geometry, PageAddr};
use crate::prefetch::{large_vec, prefetch};
use serde::Deserialize;
use std::collections::{BTreeMap, VecDeque};

#[path = "page_recovery.rs"]
mod recovery;

pub const DESCRIPTOR: FtlDescriptor = FtlDescriptor {
    name: "page",
    summary:
        "page-level mapping, striping over planes, per-plane GC, hot/cold streams, wear leveling, checkpoint on shutdown",
    options: &[
        OptionDoc {
            name: "gc_policy",
            default: "greedy",
            help: "victim selection: greedy, cost-benefit, fifo, random, d-choices[:d] (d = 10), \
                   windowed-greedy[:window] (window = 16 blocks)",
        },
        OptionDoc {
            name: "gc_foreground_free_blocks",
            default: "2",
            help: "per plane: collect before opening a block when free blocks are at or below this",
        },
        OptionDoc {
            name: "gc_foreground_free_percent",
            default: "0",
            help: "the same threshold as a percentage of the plane's blocks (the larger applies)",
        },
        OptionDoc {
            name: "gc_background_free_percent",
            default: "0 (off)",
            help: "idle time: collect while free blocks are below this percentage",
        },
        OptionDoc {
            name: "gc_background_min_invalid_fraction",
            default: "0.125",
            help: "idle time: skip victims with fewer invalid pages than this fraction (FEMU's rule)",
        },
        OptionDoc {
            name: "gc_stream",
            default: "separate",
            help: "GC copies go to their own frontier (separate) or the host's (shared)",
        },
        OptionDoc { name: "copyback", default: "true", help: "move GC pages by copyback instead of read + program" },
        OptionDoc {
            name: "hot_cold",
            default: "none",
            help: "hot/cold streams: none, dac[:regions] (DAC, 2-8 regions, default 4), \
                   two-stream[:threshold] (decayed write counter, default 2)",
        },
        OptionDoc {
            name: "wear_leveling",
            default: "none",
            help: "none (reuse the block erased longest ago), dynamic (fewest erases first), \
                   static[:threshold=N] (dynamic + move cold data when a plane's erase spread exceeds N, default 16)",
        },
    ],
    build: build_page,
};

fn build_page(env: &FtlEnv, options: &FtlOptions) -> Result<Box<dyn Ftl>, String> {
    let opts: PageOptions = parse_options("page", options)?;
    Ok(Box::new(PageFtl::new(env, opts)?))
}

/// Where GC writes the pages it moves.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum GcStream {
    #[default]
    Separate,
    Shared,
}

/// Options of the `page` FTL (see [`DESCRIPTOR`] for their meaning).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageOptions {
    #[serde(default)]
    pub gc_policy: VictimPolicyKind,
    #[serde(default = "default_fg_blocks")]
    pub gc_foreground_free_blocks: u32,
    #[serde(default)]
    pub gc_foreground_free_percent: f64,
    #[serde(default)]
    pub gc_background_free_percent: f64,
    #[serde(default = "default_bg_min_invalid")]
    pub gc_background_min_invalid_fraction: f64,
    #[serde(default)]
    pub gc_stream: GcStream,
    #[serde(default = "default_true")]
    pub copyback: bool,
    #[serde(default)]
    pub hot_cold: HotColdKind,
    #[serde(default)]
    pub wear_leveling: WearLevelingKind,
}

fn default_fg_blocks() -> u32 {
    2
}
fn default_bg_min_invalid() -> f64 {
    0.125
}
fn default_true() -> bool {
    true
}

impl Default for PageOptions {
    fn default() -> Self {
        parse_options("page", &FtlOptions::new()).expect("defaults parse")
    }
}

const NONE: u32 = u32::MAX;
use super::map_table::{MapTable, UNMAPPED};

/// OOB layout: kind (low nibble) and stream (high nibble) (1 byte), lpn or
/// checkpoint page index (4), program sequence number (5 bytes: 2^40
/// programs before it would wrap).
pub const OOB_BYTES: usize = 10;
const OOB_DATA: u8 = 1;
const OOB_CHECKPOINT: u8 = 2;
const OOB_ERASED: u8 = 0xff;
const OOB_KIND_MASK: u8 = 0x0f;
const CHECKPOINT_MAGIC: u32 = 0x4b43_4c4e; // "NLCK"
const CHECKPOINT_HEADER_BYTES: usize = 16;

fn encode_oob(kind: u8, index: u32, seq: u64) -> [u8; OOB_BYTES] {
    let mut o = [0u8; OOB_BYTES];
    o[0] = kind;
    o[1..5].copy_from_slice(&index.to_le_bytes());
    o[5..10].copy_from_slice(&seq.to_le_bytes()[..5]);
    o
}

fn decode_oob(o: &[u8; OOB_BYTES]) -> (u8, u32, u64) {
    let mut seq = [0u8; 8];
    seq[..5].copy_from_slice(&o[5..10]);
    (o[0], u32::from_le_bytes(o[1..5].try_into().unwrap()), u64::from_le_bytes(seq))
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum BlockState {
    Free,
    Open,
    Sealed,
    Checkpoint,
    Bad,
}

#[derive(Copy, Clone, Debug)]
struct Frontier {
    block: u32,
    next_page: u32,
}

const NO_FRONTIER: Frontier = Frontier { block: NONE, next_page: 0 };

/// Write streams a unit may have open: the hot/cold policy's (up to 8)
/// and wear leveling's.
const MAX_STREAMS: usize = 9;

struct Unit {
    free: VecDeque<u32>,
    frontier: [Frontier; MAX_STREAMS],
}

/// Deliberate bugs, for proving that the checkers catch them (tests and
/// demonstrations only; not reachable from a configuration).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum PageBug {
    #[default]
    None,
    /// The OpenSSD DAC bug class: the open block of every hot region
    /// (stream 1 and up) is also registered as a GC candidate, so GC can
    /// choose and erase a block a region is still writing, and the region
    /// keeps programming it at its old write offset. Needs hot/cold streams.
    GcErasesActiveBlock,
}

#[derive(Default, Clone, Debug)]
struct Counters {
    gc_runs: u64,
    gc_background_runs: u64,
    rmw_reads: u64,
    trimmed_pages: u64,
    checkpoint_pages: u64,
    mount_scanned_pages: u64,
    wl_relocations: u64,
    wl_pages_moved: u64,
    /// Pages programmed per stream (host writes and copies).
    stream_pages: [u64; MAX_STREAMS],
}

/// The page-mapped FTL. See the module docs.
pub struct PageFtl {
    opts: PageOptions,
    geometry: Geometry,
    spp: u32,
    ppb: u32,
    logical_sectors: u64,
    lpns: u32,
    l2p: MapTable,
    valid_bits: Vec<u64>,
    /// Reused by GC: (source page, logical page) of the victim's valid pages.
    gc_batch: Vec<(u32, u32)>,
    /// The logical pages of the last prefetch hint (their map entries are
    /// now cached, so the next hint prefetches what they point to).
    hinted: (u32, u32),
    table: BlockTable,
    state: Vec<BlockState>,
    units: Vec<Unit>,
    /// Blocks of the checkpoint a mount would use now.
    checkpoint_blocks: Vec<u32>,
    policy: VictimSelector,
    hot_cold: HotColdSeparator,
    wear: WearLeveler,
    /// The stream each block was opened for.
    block_stream: Vec<u8>,
    /// The stream wear-leveling copies go to (one past the hot/cold streams).
    wl_stream: u8,
    seed: u64,
    bug: PageBug,
    fg_threshold: u32,
    bg_threshold: u32,
    next_unit: u32,
    seq: u64,
    in_gc: bool,
    tmp_buf: Option<BufId>,
    gc_buf: Option<BufId>,
    counters: Counters,
    /// Logical pages fully trimmed since the last flush, with the sequence
    /// number the trim happened at (see page_recovery.rs).
    pending_trims: Vec<(u32, u64)>,
    /// Blocks holding pages those trims invalidated, and a reused record page.
    pending_trim_blocks: Vec<u32>,
    trim_buf: Vec<u8>,
    /// Blocks of trim records written since the last checkpoint, and the next page of the last.
    trim_log: Vec<u32>,
    trim_log_next: u32,
    crash_bug: super::crash_bugs::CrashBug,
}

impl PageFtl {
    pub fn new(env: &FtlEnv, opts: PageOptions) -> Result<PageFtl, String> {
        Self::with_bug(env, opts, PageBug::None)
    }

    /// The FTL with a deliberate bug (for checker tests; see [`PageBug`]).
    pub fn with_bug(env: &FtlEnv, opts: PageOptions, bug: PageBug) -> Result<PageFtl, String> {
        let g = env.geometry.clone();
        let spp = g.sectors_per_page();
        let ppb = g.pages_per_block();
        let lpns_u64 = env.logical_sectors.div_ceil(u64::from(spp));
        if lpns_u64 >= u64::from(UNMAPPED) {
            return Err(format!("page: {lpns_u64} logical pages do not fit a 32-bit map"));
        }
        let lpns = lpns_u64 as u32;
        if lpns_u64 >= g.pages() {
            return Err(format!(
                "page: logical capacity ({lpns} pages) must be smaller than the physical capacity ({} pages)",
                g.pages()
            ));
        }
        let units = g.planes();
        let per_unit = g.blocks_per_plane();
        let pct = |p: f64| (p / 100.0 * f64::from(per_unit)).ceil() as u32;
        if opts.gc_foreground_free_blocks == 0 {
            return Err("page: gc_foreground_free_blocks must be at least 1 (GC needs a block to copy into)".into());
        }
        if opts.hot_cold != HotColdKind::None && opts.gc_stream == GcStream::Shared {
            return Err(format!(
                "page: gc_stream = \"shared\" conflicts with hot_cold = \"{}\" (the hot/cold policy chooses the streams of GC copies)",
                opts.hot_cold
            ));
        }
        let hot_cold = HotColdSeparator::new(opts.hot_cold, lpns, opts.gc_stream == GcStream::Shared);
        // A GC cycle may open one block on every stream it copies into:
        // start collecting while that many blocks are still free.
        let fg_threshold = opts
            .gc_foreground_free_blocks
            .max(pct(opts.gc_foreground_free_percent))
            .max(u32::from(hot_cold.gc_streams()) + 1);
        if fg_threshold >= per_unit {
            return Err(format!(
                "page: the foreground GC threshold ({fg_threshold} blocks) leaves no blocks per plane"
            ));
        }
        if !(0.0..=1.0).contains(&opts.gc_background_min_invalid_fraction) {
            return Err("page: gc_background_min_invalid_fraction must be within 0..1".into());
        }
        let bg_threshold = pct(opts.gc_background_free_percent);
        let dram = Self::dram_needed(&g, lpns) + hot_cold.dram_bytes();
        if dram > env.dram_budget_bytes {
            return Err(format!("page: the map needs {}", super::dram_shortfall(dram, env.dram_budget_bytes)));
        }
        let blocks = g.blocks() as usize;
        let unit_of_plane = unit_order(&g);
        let table = BlockTable {
            valid: vec![0; blocks],
            sealed_at: vec![0; blocks],
            unit: (0..blocks).map(|b| unit_of_plane[g.plane_of_block(BlockAddr(b as u64)) as usize]).collect(),
            erase_count: vec![0; blocks],
            pages_per_block: ppb,
            units,
            now: 0,
        };
        let policy = VictimSelector::new(opts.gc_policy, blocks, &table, crate::seed::derive_seed(env.seed, "victim"));
        let wl_stream = hot_cold.streams();
        Ok(PageFtl {
            spp,
            ppb,
            logical_sectors: env.logical_sectors,
            lpns,
            l2p: MapTable::default(),
            valid_bits: Vec::new(),
            gc_batch: Vec::with_capacity(ppb as usize),
            hinted: (0, 0),
            state: vec![BlockState::Free; blocks],
            units: Vec::new(),
            checkpoint_blocks: Vec::new(),
            policy,
            wear: WearLeveler::new(opts.wear_leveling, units),
            hot_cold,
            block_stream: vec![0; blocks],
            wl_stream,
            seed: env.seed,
            bug,
            table,
            fg_threshold,
            bg_threshold,
            next_unit: 0,
            seq: 1,
            in_gc: false,
            tmp_buf: None,
            gc_buf: None,
            counters: Counters::default(),
            pending_trims: Vec::new(),
            pending_trim_blocks: Vec::new(),
            trim_buf: Vec::new(),
            trim_log: Vec::new(),
            trim_log_next: 0,
            crash_bug: Default::default(),
            geometry: g,
            opts,
        })
    }

    /// A deliberately broken variant for crash-checker tests (see [`super::crash_bugs`]).
    pub fn with_crash_bug(mut self, bug: super::crash_bugs::CrashBug) -> PageFtl {
        self.crash_bug = bug;
        self
    }

    /// Bytes of device DRAM the maps and block table take.
    fn dram_needed(g: &Geometry, lpns: u32) -> u64 {
        u64::from(lpns) * 4 + g.pages().div_ceil(8) + u64::from(g.blocks()) * 32
    }

    fn reset_state(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let g = &self.geometry;
        self.l2p = MapTable::unmapped(self.lpns as usize);
        self.valid_bits = vec![0; g.pages().div_ceil(64) as usize];
        self.table.valid.fill(0);
        self.table.sealed_at.fill(0);
        self.table.erase_count.fill(0);
        self.block_stream.fill(0);
        self.units = (0..self.table.units)
            .map(|_| Unit { free: VecDeque::new(), frontier: [NO_FRONTIER; MAX_STREAMS] })
            .collect();
        let victim_seed = crate::seed::derive_seed(self.seed, "victim");
        self.policy = VictimSelector::new(self.opts.gc_policy, g.blocks() as usize, &self.table, victim_seed);
        self.hot_cold = HotColdSeparator::new(self.opts.hot_cold, self.lpns, self.opts.gc_stream == GcStream::Shared);
        self.wear = WearLeveler::new(self.opts.wear_leveling, self.table.units);
        self.checkpoint_blocks.clear();
        self.pending_trims.clear();
        self.pending_trim_blocks.clear();
        self.trim_log.clear();
        self.trim_log_next = 0;
        self.next_unit = 0;
        self.seq = 1;
        self.in_gc = false;
        if self.tmp_buf.is_none() {
            self.tmp_buf = Some(flash.buf_alloc(self.spp)?);
            self.gc_buf = Some(flash.buf_alloc(self.spp)?);
        }
        Ok(())
    }

    fn unit_of(&self, block: u32) -> usize {
        self.table.unit[block as usize] as usize
    }

    fn block_addr(&self, block: u32) -> BlockAddr {
        BlockAddr(u64::from(block))
    }

    fn page_addr(&self, ppn: u32) -> PageAddr {
        PageAddr(u64::from(ppn))
    }

    // ----- allocation -----

    /// The next page to program on `unit` for `stream`, collecting garbage
    /// first if the unit is short of free blocks.
    #[inline]
    fn alloc_page(&mut self, flash: &mut dyn Flash, unit: usize, stream: u8) -> Result<u32, FtlError> {
        loop {
            let f = self.units[unit].frontier[stream as usize];
            if f.block != NONE && f.next_page < self.ppb {
                self.units[unit].frontier[stream as usize].next_page += 1;
                self.counters.stream_pages[stream as usize] += 1;
                return Ok(f.block * self.ppb + f.next_page);
            }
            if !self.in_gc && self.units[unit].free.len() as u32 <= self.fg_threshold {
                self.foreground_gc(flash, unit)?;
                let f = self.units[unit].frontier[stream as usize];
                if f.block != NONE && f.next_page < self.ppb {
                    continue; // GC opened a frontier block with room (shared stream)
                }
            }
            self.open_block(unit, stream)?;
        }
    }

    /// Open a free block of `unit` (the one wear leveling chooses) as the
    /// frontier of `stream`.
    fn open_block(&mut self, unit: usize, stream: u8) -> Result<(), FtlError> {
        let use_ = if stream == self.wl_stream { FreeBlockUse::ColdData } else { FreeBlockUse::Data };
        let at = self.wear.choose_free(&self.units[unit].free, &self.table, use_);
        let block = self.units[unit]
            .free
            .remove(at)
            .ok_or_else(|| FtlError::NoSpace(format!("plane unit {unit} has no free block and nothing to collect")))?;
        self.state[block as usize] = BlockState::Open;
        self.block_stream[block as usize] = stream;
        self.units[unit].frontier[stream as usize] = Frontier { block, next_page: 0 };
        if self.bug == PageBug::GcErasesActiveBlock && stream >= 1 && !self.hot_cold.is_none() {
            // BUG (deliberate): a hot region's open block becomes a GC candidate.
            self.policy.insert(block, &self.table);
        }
        Ok(())
    }

    /// Collect victims on `unit` until its free blocks are above the
    /// foreground threshold, or collecting stops gaining blocks.
    fn foreground_gc(&mut self, flash: &mut dyn Flash, unit: usize) -> Result<(), FtlError> {
        let mut stalls = 0;
        while self.units[unit].free.len() as u32 <= self.fg_threshold {
            let before = self.units[unit].free.len();
            if !self.collect(flash, unit, false)? {
                break;
            }
            // A fully valid victim (FIFO takes them) moves data without
            // freeing a block; give up after a unit's worth of those.
            stalls = if self.units[unit].free.len() > before { 0 } else { stalls + 1 };
            if stalls > self.geometry.blocks_per_plane() {
                break;
            }
        }
        self.maybe_level_wear(flash, unit)
    }

    /// Record that `ppn` now holds valid data; seal its block when it is full.
    fn commit_page(&mut self, ppn: u32) {
        let block = ppn / self.ppb;
        self.valid_bits[(ppn / 64) as usize] |= 1 << (ppn % 64);
        self.table.valid[block as usize] += 1;
        if ppn % self.ppb == self.ppb - 1 {
            self.seal(block);
        }
    }

    fn seal(&mut self, block: u32) {
        if self.bug == PageBug::GcErasesActiveBlock {
            self.policy.remove(block, &self.table); // it may be a candidate already
        }
        self.state[block as usize] = BlockState::Sealed;
        self.table.sealed_at[block as usize] = self.seq;
        let unit = self.unit_of(block);
        for f in &mut self.units[unit].frontier {
            if f.block == block {
                *f = NO_FRONTIER;
            }
        }
        self.policy.insert(block, &self.table);
    }

    #[inline]
    fn is_valid(&self, ppn: u32) -> bool {
        self.valid_bits[(ppn / 64) as usize] & (1 << (ppn % 64)) != 0
    }

    #[inline]
    fn invalidate(&mut self, ppn: u32) {
        let block = ppn / self.ppb;
        self.valid_bits[(ppn / 64) as usize] &= !(1 << (ppn % 64));
        let old = self.table.valid[block as usize];
        self.table.valid[block as usize] = old - 1;
        if self.state[block as usize] == BlockState::Sealed {
            self.policy.invalidated(block, old, &self.table);
        }
    }

    fn next_seq(&mut self) -> u64 {
        let s = self.seq;
        self.seq += 1;
        self.table.now = self.seq;
        s
    }

    /// Program one logical page from `buf` at `sector` and remap it.
    fn program_lpn(&mut self, flash: &mut dyn Flash, lpn: u32, buf: BufId, sector: u32) -> Result<(), FtlError> {
        let unit = self.next_unit as usize;
        self.next_unit = (self.next_unit + 1) % self.table.units;
        let (l2p, block_stream, ppb) = (&self.l2p, &self.block_stream, self.ppb);
        let stream = self.hot_cold.host_stream(lpn, || match l2p.get(lpn as usize) {
            UNMAPPED => None,
            old => Some(block_stream[(old / ppb) as usize]),
        });
        let ppn = self.alloc_page(flash, unit, stream)?;
        let oob = encode_oob(OOB_DATA | stream << 4, lpn, self.next_seq());
        flash.program(Cause::Host, self.page_addr(ppn), buf, sector, &oob)?;
        // Read the old location only now: GC during allocation may have moved it.
        let old = self.l2p.get(lpn as usize);
        if old != UNMAPPED {
            self.invalidate(old);
        }
        self.l2p.set(lpn as usize, ppn);
        self.commit_page(ppn);
        Ok(())
    }

    /// Load logical page `lpn` into the one-page buffer (zeros if unmapped).
    fn load_page(&mut self, flash: &mut dyn Flash, lpn: u32, buf: BufId) -> Result<(), FtlError> {
        match self.l2p.get(lpn as usize) {
            UNMAPPED => flash.buf_zero(buf, 0, self.spp)?,
            ppn => {
                self.counters.rmw_reads += 1;
                flash.read(Cause::Host, self.page_addr(ppn), 0, self.spp, buf, 0, &mut [])?;
            }
        }
        Ok(())
    }

    // ----- garbage collection -----

    /// Collect one victim on `unit`. Returns false if there was none worth taking.
    fn collect(&mut self, flash: &mut dyn Flash, unit: usize, background: bool) -> Result<bool, FtlError> {
        let Some(victim) = self.policy.select(unit as u32, &self.table) else {
            return Ok(false);
        };
        let valid = self.table.valid[victim as usize];
        // Background GC skips victims not worth the work (FEMU's rule); in
        // the foreground a victim is taken whatever it holds, as long as its
        // pages have somewhere to go.
        let skip = if background {
            let min_invalid = (self.opts.gc_background_min_invalid_fraction * f64::from(self.ppb)).ceil() as u32;
            self.ppb - valid < min_invalid.max(1)
        } else {
            valid == self.ppb && self.units[unit].free.is_empty()
        };
        if skip {
            self.policy.insert(victim, &self.table);
            return Ok(false);
        }
        self.counters.gc_runs += 1;
        if background {
            self.counters.gc_background_runs += 1;
        }
        let was_in_gc = std::mem::replace(&mut self.in_gc, true);
        let result = self.move_valid_pages(flash, unit, victim, Cause::Gc);
        self.in_gc = was_in_gc;
        result?;
        // The victim may hold the newest copy of a trimmed page (see page_recovery.rs).
        if self.pending_trim_blocks.contains(&victim) {
            self.persist_trims(flash)?;
        }
        self.erase_to_free(flash, unit, victim, Cause::Gc)?;
        Ok(true)
    }

    /// Erase an emptied block and return it to its unit's free blocks.
    fn erase_to_free(&mut self, flash: &mut dyn Flash, unit: usize, block: u32, cause: Cause) -> Result<(), FtlError> {
        flash.erase(cause, self.block_addr(block))?;
        self.table.erase_count[block as usize] += 1;
        self.wear.erased(block, &self.table);
        self.state[block as usize] = BlockState::Free;
        self.units[unit].free.push_back(block);
        Ok(())
    }

    /// Static wear leveling: after GC on `unit`, move the data of the block
    /// the policy names (if any) onto a worn free block. Runs only when the
    /// unit is above its GC threshold, so the block it opens for the moved
    /// data still leaves GC the blocks it needs.
    fn maybe_level_wear(&mut self, flash: &mut dyn Flash, unit: usize) -> Result<(), FtlError> {
        if !self.wear.relocates() || self.in_gc || self.units[unit].free.len() as u32 <= self.fg_threshold {
            return Ok(());
        }
        let plane = self.plane_of_unit(unit);
        let bpp = self.geometry.blocks_per_plane();
        let blocks = plane * bpp..(plane + 1) * bpp;
        let state = &self.state;
        let movable = |b: u32| state[b as usize] == BlockState::Sealed;
        let Some(block) = self.wear.relocation(unit as u32, blocks, &self.table, &movable) else {
            return Ok(());
        };
        self.policy.remove(block, &self.table);
        self.counters.wl_relocations += 1;
        self.counters.wl_pages_moved += u64::from(self.table.valid[block as usize]);
        self.in_gc = true;
        let result = self.move_valid_pages(flash, unit, block, Cause::WearLeveling);
        self.in_gc = false;
        result?;
        self.erase_to_free(flash, unit, block, Cause::WearLeveling)
    }

    /// The linear plane index of `unit`.
    fn plane_of_unit(&self, unit: usize) -> u32 {
        let bpp = self.geometry.blocks_per_plane() as usize;
        (0..self.geometry.planes())
            .find(|&p| self.table.unit[p as usize * bpp] as usize == unit)
            .expect("every unit is a plane")
    }

    /// Copy the valid pages of `victim` (GC or wear leveling) and remap them.
    fn move_valid_pages(
        &mut self,
        flash: &mut dyn Flash,
        unit: usize,
        victim: u32,
        cause: Cause,
    ) -> Result<(), FtlError> {
        // Gather the victim's valid pages first, reading each one's logical
        // page from its OOB (no reverse map is kept in DRAM), and prefetch
        // the map entries they will update: independent loads the CPU
        // overlaps, instead of one cache miss after another while copying.
        let first = victim * self.ppb;
        let mut batch = std::mem::take(&mut self.gc_batch);
        batch.clear();
        let mut oob = [0u8; OOB_BYTES];
        let mut result = Ok(());
        for src in first..first + self.ppb {
            if self.is_valid(src) {
                if let Err(e) = flash.read_oob(cause, self.page_addr(src), &mut oob) {
                    result = Err(e.into());
                    break;
                }
                let (_, lpn, _) = decode_oob(&oob);
                self.l2p.prefetch(lpn as usize);
                batch.push((src, lpn));
            }
        }
        if result.is_ok() {
            result = self.copy_batch(flash, unit, victim, cause, &batch);
        }
        self.gc_batch = batch;
        result
    }

    fn copy_batch(
        &mut self,
        flash: &mut dyn Flash,
        unit: usize,
        victim: u32,
        cause: Cause,
        batch: &[(u32, u32)],
    ) -> Result<(), FtlError> {
        let from = self.block_stream[victim as usize];
        for &(src, lpn) in batch {
            debug_assert_eq!(self.l2p.get(lpn as usize), src, "valid page {src} is not mapped by its OOB's lpn");
            let stream = if cause == Cause::WearLeveling { self.wl_stream } else { self.hot_cold.gc_stream(lpn, from) };
            let dst = self.alloc_page(flash, unit, stream)?;
            let oob = encode_oob(OOB_DATA | stream << 4, lpn, self.next_seq());
            if self.opts.copyback {
                flash.copyback(cause, self.page_addr(src), self.page_addr(dst), Some(&oob))?;
            } else {
                let buf = self.gc_buf.expect("gc buffer allocated at power-on");
                flash.read(cause, self.page_addr(src), 0, self.spp, buf, 0, &mut [])?;
                flash.program(cause, self.page_addr(dst), buf, 0, &oob)?;
            }
            self.valid_bits[(src / 64) as usize] &= !(1 << (src % 64));
            self.table.valid[victim as usize] -= 1;
            self.l2p.set(lpn as usize, dst);
            self.commit_page(dst);
        }
        Ok(())
    }

    /// Collect until at least `needed` blocks are free over all units.
    fn make_free_blocks(&mut self, flash: &mut dyn Flash, needed: usize) -> Result<(), FtlError> {
        let units = self.units.len();
        let mut idle_rounds = 0;
        let mut unit = 0;
        while self.units.iter().map(|u| u.free.len()).sum::<usize>() < needed {
            let was_in_gc = std::mem::replace(&mut self.in_gc, true);
            let worked = self.collect(flash, unit, false);
            self.in_gc = was_in_gc;
            idle_rounds = if worked? { 0 } else { idle_rounds + 1 };
            if idle_rounds > units {
                return Err(FtlError::NoSpace(format!("cannot free {needed} blocks for the checkpoint")));
            }
            unit = (unit + 1) % units;
        }
        Ok(())
    }

    // ----- checkpoint -----

    fn entries_per_checkpoint_page(&self) -> usize {
        (self.geometry.page_size_bytes() as usize - CHECKPOINT_HEADER_BYTES) / 4
    }

    /// Checkpoint pages holding the map; the erase counts follow them.
    fn checkpoint_map_pages(&self) -> usize {
        (self.lpns as usize).div_ceil(self.entries_per_checkpoint_page()).max(1)
    }

    fn write_checkpoint(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let per_page = self.entries_per_checkpoint_page();
        let map_pages = self.checkpoint_map_pages();
        let pages = map_pages + self.table.erase_count.len().div_ceil(per_page);
        let blocks = pages.div_ceil(self.ppb as usize);
        // Keep one free block per unit beyond the checkpoint so GC can still run.
        self.make_free_blocks(flash, blocks + self.units.len())?;
        let ckpt_seq = self.next_seq();
        let mut new_blocks = Vec::with_capacity(blocks);
        let mut unit = 0;
        while new_blocks.len() < blocks {
            if let Some(b) = self.units[unit].free.pop_front() {
                self.state[b as usize] = BlockState::Checkpoint;
                new_blocks.push(b);
            }
            unit = (unit + 1) % self.units.len();
        }
        let mut data = vec![0u8; self.geometry.page_size_bytes() as usize];
        // The old checkpoint's and the trim log's blocks are erased once this
        // one is complete: record them with that erase.
        let mut erase_counts = self.table.erase_count.clone();
        for &b in self.checkpoint_blocks.iter().chain(&self.trim_log) {
            erase_counts[b as usize] += 1;
        }
        for index in 0..pages {
            // The map's entries first, then the erase counts.
            let (len, i) =
                if index < map_pages { (self.l2p.len(), index) } else { (erase_counts.len(), index - map_pages) };
            let range = (i * per_page).min(len)..((i + 1) * per_page).min(len);
            data.fill(0xff);
            data[0..4].copy_from_slice(&CHECKPOINT_MAGIC.to_le_bytes());
            data[4..8].copy_from_slice(&(index as u32).to_le_bytes());
            data[8..12].copy_from_slice(&(pages as u32).to_le_bytes());
            data[12..16].copy_from_slice(&(range.len() as u32).to_le_bytes());
            for (k, entry) in range.enumerate() {
                let e = if index < map_pages { self.l2p.get(entry) } else { erase_counts[entry] };
                let at = CHECKPOINT_HEADER_BYTES + 4 * k;
                data[at..at + 4].copy_from_slice(&e.to_le_bytes());
            }
            let block = new_blocks[index / self.ppb as usize];
            let page = self.geometry.page_addr(self.block_addr(block), (index % self.ppb as usize) as u32);
            let oob = encode_oob(OOB_CHECKPOINT, index as u32, ckpt_seq);
            flash.program_meta(Cause::Metadata, page, &data, &oob)?;
            self.counters.checkpoint_pages += 1;
        }
        // The new checkpoint is complete: the old one and the trim log can go.
        self.pending_trims.clear();
        self.pending_trim_blocks.clear();
        for b in std::mem::replace(&mut self.checkpoint_blocks, new_blocks) {
            let unit = self.unit_of(b);
            self.erase_to_free(flash, unit, b, Cause::Metadata)?;
        }
        self.release_trim_log(flash)
    }

    // ----- mount: see page_recovery.rs -----

    fn unit_free_counts(&self) -> Vec<usize> {
        self.units.iter().map(|u| u.free.len()).collect()
    }
}

/// Unit index of each linear plane: units run channel → chip → die → plane,
/// so unit `i` is on channel `i % channels`.
pub(crate) fn unit_order(g: &Geometry) -> Vec<u32> {
    let mut unit_of_plane = vec![0; g.planes() as usize];
    let mut unit = 0;
    for plane in 0..g.planes_per_die() {
        for die in 0..g.dies_per_chip() {
            for chip in 0..g.chips_per_channel() {
                for channel in 0..g.channels() {
                    unit_of_plane[g.plane_index(channel, chip, die, plane) as usize] = unit;
                    unit += 1;
                }
            }
        }
    }
    unit_of_plane
}

impl Ftl for PageFtl {
    fn info(&self) -> FtlInfo {
        FtlInfo { name: "page", guarantee: Guarantee::Baseline, oob_bytes: OOB_BYTES as u32 }
    }

    fn format(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.reset_state(flash)?;
        for block in 0..self.geometry.blocks() {
            let addr = self.block_addr(block);
            if flash.is_factory_bad(addr) {
                self.state[block as usize] = BlockState::Bad;
                continue;
            }
            match flash.erase(Cause::Format, addr) {
                Ok(()) => {
                    self.table.erase_count[block as usize] += 1;
                    self.state[block as usize] = BlockState::Free;
                    let unit = self.unit_of(block);
                    self.units[unit].free.push_back(block);
                }
                Err(FlashError::EraseFailed | FlashError::BadBlock) => self.state[block as usize] = BlockState::Bad,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    fn mount(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.reset_state(flash)?;
        self.scan_and_rebuild(flash)
    }

    fn read(&mut self, flash: &mut dyn Flash, req: &IoRequest) -> Result<(), FtlError> {
        check_range(req.lba, u64::from(req.sectors), self.logical_sectors)?;
        let spp = u64::from(self.spp);
        let (mut lba, end) = (req.lba, req.lba + u64::from(req.sectors));
        while lba < end {
            let lpn = (lba / spp) as u32;
            let in_page = (lba % spp) as u32;
            let n = (spp - u64::from(in_page)).min(end - lba) as u32;
            let at = (lba - req.lba) as u32;
            match self.l2p.get(lpn as usize) {
                UNMAPPED => flash.buf_zero(req.buf, at, n)?,
                ppn => flash.read(Cause::Host, self.page_addr(ppn), in_page, n, req.buf, at, &mut [])?,
            }
            lba += u64::from(n);
        }
        Ok(())
    }

    fn write(&mut self, flash: &mut dyn Flash, req: &IoRequest) -> Result<Durability, FtlError> {
        check_range(req.lba, u64::from(req.sectors), self.logical_sectors)?;
        let spp = u64::from(self.spp);
        let (mut lba, end) = (req.lba, req.lba + u64::from(req.sectors));
        while lba < end {
            let lpn = (lba / spp) as u32;
            let in_page = (lba % spp) as u32;
            let n = (spp - u64::from(in_page)).min(end - lba) as u32;
            let at = (lba - req.lba) as u32;
            if n == self.spp {
                self.program_lpn(flash, lpn, req.buf, at)?;
            } else {
                let tmp = self.tmp_buf.expect("buffers allocated at power-on");
                self.load_page(flash, lpn, tmp)?;
                flash.buf_copy(tmp, in_page, req.buf, at, n)?;
                self.program_lpn(flash, lpn, tmp, 0)?;
            }
            lba += u64::from(n);
        }
        Ok(Durability::Durable)
    }

    fn trim(&mut self, flash: &mut dyn Flash, lba: u64, sectors: u64) -> Result<(), FtlError> {
        check_range(lba, sectors, self.logical_sectors)?;
        let spp = u64::from(self.spp);
        let (mut lba, end) = (lba, lba + sectors);
        while lba < end {
            let lpn = (lba / spp) as u32;
            let in_page = (lba % spp) as u32;
            let n = (spp - u64::from(in_page)).min(end - lba) as u32;
            let old = self.l2p.get(lpn as usize);
            if old != UNMAPPED {
                if n == self.spp {
                    self.invalidate(old);
                    self.l2p.set(lpn as usize, UNMAPPED);
                    self.hot_cold.trimmed(lpn);
                    self.counters.trimmed_pages += 1;
                    self.pending_trims.push((lpn, self.seq));
                    self.pending_trim_blocks.push(old / self.ppb);
                } else {
                    // Sectors of a page trimmed alone must still read as zeros.
                    let tmp = self.tmp_buf.expect("buffers allocated at power-on");
                    self.load_page(flash, lpn, tmp)?;
                    flash.buf_zero(tmp, in_page, n)?;
                    self.program_lpn(flash, lpn, tmp, 0)?;
                }
            }
            lba += u64::from(n);
        }
        Ok(())
    }

    fn flush(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        // No write cache: every completed write is already on flash; trims
        // become durable here.
        self.persist_trims(flash)
    }

    fn idle(&mut self, flash: &mut dyn Flash) -> Result<IdleOutcome, FtlError> {
        if self.bg_threshold == 0 {
            return Ok(IdleOutcome::Nothing);
        }
        let counts = self.unit_free_counts();
        let Some((unit, &free)) = counts.iter().enumerate().min_by_key(|(_, &f)| f) else {
            return Ok(IdleOutcome::Nothing);
        };
        if free as u32 >= self.bg_threshold {
            return Ok(IdleOutcome::Nothing);
        }
        if !self.collect(flash, unit, true)? {
            return Ok(IdleOutcome::Nothing);
        }
        self.maybe_level_wear(flash, unit)?;
        Ok(IdleOutcome::Worked)
    }

    fn shutdown(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.write_checkpoint(flash)
    }

    fn prefetch(&mut self, flash: &dyn Flash, lba: u64, sectors: u32) {
        if self.l2p.is_empty() {
            return;
        }
        // Stage 2: the previous hint's map entries are cached by now; warm
        // the valid bits and block counters their old pages will update.
        let (from, to) = self.hinted;
        for lpn in from..to {
            let ppn = self.l2p.get(lpn as usize);
            if ppn != UNMAPPED {
                prefetch(&self.valid_bits, (ppn / 64) as usize);
                prefetch(&self.table.valid, (ppn / self.ppb) as usize);
                flash.prefetch_page(self.page_addr(ppn));
            }
        }
        // Stage 1: this hint's map entries.
        let spp = u64::from(self.spp);
        let first = (lba / spp) as u32;
        let last = ((lba + u64::from(sectors)).div_ceil(spp) as u32).min(self.lpns);
        for lpn in (first..last).step_by(16) {
            self.l2p.prefetch(lpn as usize);
        }
        self.l2p.prefetch(last.saturating_sub(1) as usize);
        self.hinted = (first, last);
    }

    fn stats(&self) -> FtlStats {
        let mut extra = BTreeMap::new();
        let c = &self.counters;
        for (k, v) in [
            ("gc_background_runs", c.gc_background_runs),
            ("rmw_reads", c.rmw_reads),
            ("trimmed_pages", c.trimmed_pages),
            ("checkpoint_pages", c.checkpoint_pages),
            ("mount_scanned_pages", c.mount_scanned_pages),
            ("free_blocks", self.units.iter().map(|u| u.free.len() as u64).sum()),
            ("wl_relocations", c.wl_relocations),
            ("wl_pages_moved", c.wl_pages_moved),
        ] {
            extra.insert(k.to_string(), serde_json::json!(v));
        }
        extra.insert("gc_policy".into(), serde_json::json!(self.opts.gc_policy.to_string()));
        extra.insert("hot_cold".into(), serde_json::json!(self.opts.hot_cold.to_string()));
        extra.insert("wear_leveling".into(), serde_json::json!(self.opts.wear_leveling.to_string()));
        let streams = usize::from(self.wl_stream) + usize::from(self.wear.relocates());
        extra.insert("stream_pages".into(), serde_json::json!(c.stream_pages[..streams]));
        let dram = Self::dram_needed(&self.geometry, self.lpns) + self.hot_cold.dram_bytes();
        FtlStats { gc_runs: c.gc_runs, dram_bytes: dram, extra }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oob_round_trips_40_bit_sequence_numbers() {
        let o = encode_oob(OOB_DATA, 0xdead_beef, (1 << 40) - 3);
        assert_eq!(decode_oob(&o), (OOB_DATA, 0xdead_beef, (1 << 40) - 3));
    }

    #[test]
    fn units_stripe_channel_first() {
        let g = crate::nand::GeometryConfig {
            channels: 2,
            chips_per_channel: 2,
            dies_per_chip: 1,
            planes_per_die: 2,
            blocks_per_plane: 4,
            pages_per_block: 4,
            page_size_bytes: 4096,
            oob_size_bytes: 64,
            sector_size_bytes: 512,
            cell_type: Default::default(),
            page_pairing: Default::default(),
            partial_programs_per_page: 1,
        }
        .validate()
        .unwrap();
        let order = unit_order(&g);
        // unit 0 → channel 0, unit 1 → channel 1
        let plane_of_unit = |u: u32| order.iter().position(|&x| x == u).unwrap() as u32;
        let channel_of_unit = |u| g.channel_of_die(plane_of_unit(u) / g.planes_per_die());
        assert_eq!((0..4).map(channel_of_unit).collect::<Vec<_>>(), vec![0, 1, 0, 1]);
    }
}
