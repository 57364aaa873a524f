//! `dftl`: the demand-based page-mapped FTL of Gupta, Kim & Urgaonkar
//! ("DFTL: a flash translation layer employing demand-based selective
//! caching of page-level address mappings", ASPLOS 2009).
//!
//! # Algorithm
//!
//! - **Translation pages.** The page map (`lpn → ppn`, 4 bytes per entry)
//!   lives on flash, `page_size / 4` entries per *translation page*,
//!   written as real bytes with `program_meta` into dedicated *translation
//!   blocks*. An unmapped entry is `0xFFFF_FFFF`, so a never-written
//!   translation page reads as all unmapped. The *global translation
//!   directory* (GTD, 4 bytes per translation page, in DRAM) says where the
//!   current version of each translation page is.
//! - **Cached mapping table.** Only `cmt_bytes` of entries (8 bytes each,
//!   as in the paper) are cached in DRAM, with segmented-LRU (the paper's)
//!   or LRU replacement; see [`cmt`]. A miss reads the one entry from its
//!   translation page (`read_meta_at`: the page is sensed, 4 bytes cross
//!   the channel) — for a write too, since the old location must be
//!   invalidated. Evicting a *dirty* entry writes its translation page
//!   back: read the current version, apply **every** dirty cached entry of
//!   that page (the paper's batch update, which then become clean), and
//!   program it to the translation frontier. All translation traffic has
//!   cause `metadata`, so it counts in write amplification.
//! - **Data path and GC** follow the `page` FTL: planes are allocation
//!   units with host pages striped over them, per-unit foreground (and
//!   optional background) garbage collection with a pluggable victim
//!   policy, hot/cold streams and wear leveling. A victim is either a data
//!   block or a translation block. Valid data pages are copied and their
//!   new locations recorded in the CMT — in place when cached, otherwise as
//!   a new dirty entry, written back later in a batch with its translation
//!   page's other updates (see [`cmt`] for why not at once). Valid
//!   translation pages are copied and the GTD updated. GC never writes
//!   translation pages itself (it would recurse into GC); the CMT may
//!   briefly exceed its capacity by what one GC cycle adds, a reserve of
//!   `2 × pages_per_block` entries charged to DRAM, and is trimmed back at
//!   the end of the request.
//! - **Whole-table cache.** With `cmt_bytes` at least the whole table,
//!   nothing is evicted and no translation page is written during a run:
//!   the FTL then behaves exactly like `page` (same allocation, same GC,
//!   same write amplification).
//!
//! # Persistence and crash guarantee
//!
//! Every page's OOB holds `kind | stream << 4`, the lpn (data) or
//! translation page number, and a 40-bit program sequence number. A clean
//! shutdown writes back every dirty entry, so the translation pages are
//! the whole map. Mount scans the OOB of every written page: the newest
//! version of each translation page becomes the GTD; a data page newer
//! than its translation page overrides the entry there (it was written
//! after the entry was last written back), and an entry whose page no
//! longer holds that lpn's data (its block was collected) is dropped; the
//! corrections enter the CMT as dirty entries. Writes are durable when they
//! complete ([`Guarantee::Baseline`]); as with `page`, a trim is durable
//! once its entry has been written back (at the latest, at shutdown).

pub mod cmt;

use super::policy::hot_cold::{HotColdKind, HotColdSeparator};
use super::policy::wear_leveling::{FreeBlockUse, WearLeveler, WearLevelingKind};
use super::policy::{BlockTable, VictimPolicyKind, VictimSelector};
use super::{
    check_range, parse_options, Durability, Ftl, FtlDescriptor, FtlEnv, FtlError, FtlInfo, FtlOptions, FtlStats,
    Guarantee, IdleOutcome, IoRequest, OptionDoc,
};
use crate::flash::{BufId, Cause, Flash, FlashError};
use crate::nand::{BlockAddr, Geometry, PageAddr};
use crate::prefetch::prefetch;
use crate::workload::size::SizeSpec;
use cmt::{Cmt, Replacement};
use serde::Deserialize;
use std::collections::{BTreeMap, VecDeque};

pub const DESCRIPTOR: FtlDescriptor = FtlDescriptor {
    name: "dftl",
    summary: "DFTL (Gupta et al., ASPLOS 2009): page map in flash translation pages, cached mapping table in DRAM \
              (segmented LRU), batched write-back, GC of data and translation blocks",
    options: &[
        OptionDoc {
            name: "cmt_bytes",
            default: "2MiB",
            help: "DRAM for cached map entries (8 bytes each): a size (2MiB) or a share of the whole table (25%)",
        },
        OptionDoc { name: "cmt_replacement", default: "segmented-lru", help: "segmented-lru or lru" },
        OptionDoc {
            name: "cmt_protected_percent",
            default: "50",
            help: "segmented LRU: share of the cache the protected segment may hold",
        },
        OptionDoc {
            name: "gc_policy",
            default: "greedy",
            help: "victim selection: greedy, cost-benefit, fifo, random, d-choices[:d], windowed-greedy[:window]",
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
            help: "idle time: skip victims with fewer invalid pages than this fraction",
        },
        OptionDoc { name: "copyback", default: "true", help: "move GC pages by copyback instead of read + program" },
        OptionDoc { name: "hot_cold", default: "none", help: "hot/cold streams, as for `page`" },
        OptionDoc {
            name: "wear_leveling",
            default: "none",
            help: "none, dynamic, static[:threshold=N], as for `page`",
        },
    ],
    build: build_dftl,
};

fn build_dftl(env: &FtlEnv, options: &FtlOptions) -> Result<Box<dyn Ftl>, String> {
    let opts: DftlOptions = parse_options("dftl", options)?;
    Ok(Box::new(DftlFtl::new(env, opts)?))
}

/// Options of the `dftl` FTL (see [`DESCRIPTOR`] for their meaning).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DftlOptions {
    #[serde(default = "default_cmt_bytes", deserialize_with = "size_or_bytes")]
    pub cmt_bytes: SizeSpec,
    #[serde(default)]
    pub cmt_replacement: Replacement,
    #[serde(default = "default_protected_percent")]
    pub cmt_protected_percent: f64,
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
    #[serde(default = "default_true")]
    pub copyback: bool,
    #[serde(default)]
    pub hot_cold: HotColdKind,
    #[serde(default)]
    pub wear_leveling: WearLevelingKind,
}

fn default_cmt_bytes() -> SizeSpec {
    SizeSpec::Bytes(2 << 20)
}

/// A size written as text (`2MiB`, `25%`) or as a number of bytes.
fn size_or_bytes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SizeSpec, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        N(u64),
        S(String),
    }
    match Raw::deserialize(d).map_err(|_| serde::de::Error::custom("expected a size such as 2MiB or 25%"))? {
        Raw::N(n) => Ok(SizeSpec::Bytes(n)),
        Raw::S(s) => s.parse().map_err(serde::de::Error::custom),
    }
}
fn default_protected_percent() -> f64 {
    50.0
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

impl Default for DftlOptions {
    fn default() -> Self {
        parse_options("dftl", &FtlOptions::new()).expect("defaults parse")
    }
}

/// Deliberate bugs, for proving that the checkers catch them (tests and
/// demonstrations only; not reachable from a configuration).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum DftlBug {
    #[default]
    None,
    /// Evicts a dirty cached entry without writing its translation page
    /// back: the update is lost, and the next miss on that page reads the
    /// older mapping from flash.
    EvictsDirtyWithoutWriteBack,
}

const NONE: u32 = u32::MAX;
const UNMAPPED: u32 = u32::MAX;
/// Bytes of a map entry in a translation page.
const ENTRY_BYTES: u32 = 4;
/// Device DRAM per cached entry (lpn and ppn), as the paper counts it.
const CMT_ENTRY_BYTES: u64 = 8;

/// OOB layout: kind (low nibble) and stream (high nibble) (1 byte), lpn or
/// translation page number (4), program sequence number (5 bytes).
pub const OOB_BYTES: usize = 10;
const OOB_DATA: u8 = 1;
const OOB_TRANSLATION: u8 = 3;
const OOB_ERASED: u8 = 0xff;
const OOB_KIND_MASK: u8 = 0x0f;

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
    Bad,
}

#[derive(Copy, Clone, Debug)]
struct Frontier {
    block: u32,
    next_page: u32,
}

const NO_FRONTIER: Frontier = Frontier { block: NONE, next_page: 0 };

/// The hot/cold policy's streams (up to 8), wear leveling's, translation's.
const MAX_STREAMS: usize = 10;

struct Unit {
    free: VecDeque<u32>,
    frontier: [Frontier; MAX_STREAMS],
}

#[derive(Default, Clone, Debug)]
struct Counters {
    gc_runs: u64,
    gc_background_runs: u64,
    gc_translation_victims: u64,
    cmt_hits: u64,
    cmt_misses: u64,
    translation_reads: u64,
    translation_programs: u64,
    translation_gc_moves: u64,
    writebacks: u64,
    writeback_entries: u64,
    rmw_reads: u64,
    trimmed_pages: u64,
    mount_scanned_pages: u64,
    mount_corrections: u64,
    wl_relocations: u64,
    wl_pages_moved: u64,
    stream_pages: [u64; MAX_STREAMS],
}

/// The DFTL. See the module docs.
pub struct DftlFtl {
    opts: DftlOptions,
    geometry: Geometry,
    spp: u32,
    ppb: u32,
    logical_sectors: u64,
    lpns: u32,
    /// Entries per translation page, and translation pages.
    per_tpage: u32,
    tpages: u32,
    cmt_capacity: u32,
    cmt_reserve: u32,
    gtd: Vec<u32>,
    cmt: Cmt,
    valid_bits: Vec<u64>,
    gc_batch: Vec<(u32, u32)>,
    table: BlockTable,
    state: Vec<BlockState>,
    is_translation: Vec<bool>,
    block_stream: Vec<u8>,
    units: Vec<Unit>,
    policy: VictimSelector,
    hot_cold: HotColdSeparator,
    wear: WearLeveler,
    wl_stream: u8,
    t_stream: u8,
    fg_threshold: u32,
    bg_threshold: u32,
    next_unit: u32,
    next_tunit: u32,
    seq: u64,
    in_gc: bool,
    tmp_buf: Option<BufId>,
    gc_buf: Option<BufId>,
    /// One translation page of bytes, reused by write-back and mount.
    tpage: Vec<u8>,
    /// The logical pages of the last prefetch hint.
    hinted: (u32, u32),
    seed: u64,
    bug: DftlBug,
    counters: Counters,
}

impl DftlFtl {
    pub fn new(env: &FtlEnv, opts: DftlOptions) -> Result<DftlFtl, String> {
        Self::with_bug(env, opts, DftlBug::None)
    }

    /// The FTL with a deliberate bug (for checker tests; see [`DftlBug`]).
    pub fn with_bug(env: &FtlEnv, opts: DftlOptions, bug: DftlBug) -> Result<DftlFtl, String> {
        let g = env.geometry.clone();
        let spp = g.sectors_per_page();
        let ppb = g.pages_per_block();
        let lpns_u64 = env.logical_sectors.div_ceil(u64::from(spp));
        if lpns_u64 >= u64::from(UNMAPPED) {
            return Err(format!("dftl: {lpns_u64} logical pages do not fit a 32-bit map"));
        }
        let lpns = lpns_u64 as u32;
        let per_tpage = g.page_size_bytes() / ENTRY_BYTES;
        let tpages = lpns.div_ceil(per_tpage);
        // Translation pages take flash space of their own.
        if lpns_u64 + u64::from(tpages) >= g.pages() {
            return Err(format!(
                "dftl: logical capacity ({lpns} pages) plus its {tpages} translation pages must be smaller \
                 than the physical capacity ({} pages)",
                g.pages()
            ));
        }
        let table_bytes = u64::from(lpns) * CMT_ENTRY_BYTES;
        let cmt_bytes = match opts.cmt_bytes {
            SizeSpec::Bytes(b) => b,
            SizeSpec::PercentOfCapacity(p) => (table_bytes as f64 * p / 100.0) as u64,
            SizeSpec::TimesCapacity(_) => {
                return Err("dftl option `cmt_bytes`: give a size (2MiB) or a share of the table (25%)".into())
            }
        };
        let cmt_capacity = (cmt_bytes / CMT_ENTRY_BYTES).min(u64::from(lpns)) as u32;
        if cmt_capacity == 0 {
            return Err(format!("dftl option `cmt_bytes`: {cmt_bytes} bytes hold no {CMT_ENTRY_BYTES}-byte map entry"));
        }
        if !(0.0..100.0).contains(&opts.cmt_protected_percent) {
            return Err("dftl option `cmt_protected_percent`: must be within 0..100".into());
        }
        let units = g.planes();
        let per_unit = g.blocks_per_plane();
        let pct = |p: f64| (p / 100.0 * f64::from(per_unit)).ceil() as u32;
        if opts.gc_foreground_free_blocks == 0 {
            return Err("dftl option `gc_foreground_free_blocks`: must be at least 1".into());
        }
        let hot_cold = HotColdSeparator::new(opts.hot_cold, lpns, false);
        // A GC cycle may open a block on every stream it copies into (a
        // translation victim copies into one): start collecting while that
        // many blocks are still free, as `page` does.
        let fg_threshold = opts
            .gc_foreground_free_blocks
            .max(pct(opts.gc_foreground_free_percent))
            .max(u32::from(hot_cold.gc_streams()) + 1);
        if fg_threshold >= per_unit {
            return Err(format!(
                "dftl: the foreground GC threshold ({fg_threshold} blocks) leaves no blocks per plane"
            ));
        }
        if !(0.0..=1.0).contains(&opts.gc_background_min_invalid_fraction) {
            return Err("dftl option `gc_background_min_invalid_fraction`: must be within 0..1".into());
        }
        let bg_threshold = pct(opts.gc_background_free_percent);
        let cmt_reserve = 2 * ppb;
        let dram = Self::dram_needed(&g, cmt_capacity, cmt_reserve, tpages) + hot_cold.dram_bytes();
        if dram > env.dram_budget_bytes {
            return Err(format!(
                "dftl option `cmt_bytes`: the cache and tables need {}",
                super::dram_shortfall(dram, env.dram_budget_bytes)
            ));
        }
        let blocks = g.blocks() as usize;
        let unit_of_plane = super::page::unit_order(&g);
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
        let cmt = Cmt::new(0, 1, 0, opts.cmt_replacement, 0.0, per_tpage);
        Ok(DftlFtl {
            spp,
            ppb,
            logical_sectors: env.logical_sectors,
            lpns,
            per_tpage,
            tpages,
            cmt_capacity,
            cmt_reserve,
            gtd: Vec::new(),
            cmt,
            valid_bits: Vec::new(),
            gc_batch: Vec::with_capacity(ppb as usize),
            state: vec![BlockState::Free; blocks],
            is_translation: vec![false; blocks],
            block_stream: vec![0; blocks],
            units: Vec::new(),
            policy,
            wear: WearLeveler::new(opts.wear_leveling, units),
            hot_cold,
            wl_stream,
            t_stream: wl_stream + 1,
            table,
            fg_threshold,
            bg_threshold,
            next_unit: 0,
            next_tunit: 0,
            seq: 1,
            in_gc: false,
            tmp_buf: None,
            gc_buf: None,
            tpage: vec![0xff; g.page_size_bytes() as usize],
            hinted: (0, 0),
            seed: env.seed,
            bug,
            counters: Counters::default(),
            geometry: g,
            opts,
        })
    }

    /// Device DRAM: cached entries (with the GC reserve), the GTD, the valid
    /// bitmap, the block table and one translation page buffer.
    fn dram_needed(g: &Geometry, cmt_capacity: u32, reserve: u32, tpages: u32) -> u64 {
        u64::from(cmt_capacity + reserve) * CMT_ENTRY_BYTES
            + u64::from(tpages) * 4
            + g.pages().div_ceil(8)
            + u64::from(g.blocks()) * 32
            + u64::from(g.page_size_bytes())
    }

    fn reset_state(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let g = &self.geometry;
        self.gtd = vec![NONE; self.tpages as usize];
        self.cmt = Cmt::new(
            self.lpns,
            self.cmt_capacity,
            self.cmt_reserve,
            self.opts.cmt_replacement,
            self.opts.cmt_protected_percent / 100.0,
            self.per_tpage,
        );
        self.valid_bits = vec![0; g.pages().div_ceil(64) as usize];
        self.table.valid.fill(0);
        self.table.sealed_at.fill(0);
        self.table.erase_count.fill(0);
        self.is_translation.fill(false);
        self.block_stream.fill(0);
        self.units = (0..self.table.units)
            .map(|_| Unit { free: VecDeque::new(), frontier: [NO_FRONTIER; MAX_STREAMS] })
            .collect();
        let victim_seed = crate::seed::derive_seed(self.seed, "victim");
        self.policy = VictimSelector::new(self.opts.gc_policy, g.blocks() as usize, &self.table, victim_seed);
        self.hot_cold = HotColdSeparator::new(self.opts.hot_cold, self.lpns, false);
        self.wear = WearLeveler::new(self.opts.wear_leveling, self.table.units);
        self.next_unit = 0;
        self.next_tunit = 0;
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

    fn next_seq(&mut self) -> u64 {
        let s = self.seq;
        self.seq += 1;
        self.table.now = self.seq;
        s
    }

    // ----- the cached mapping table -----

    /// The CMT slot of `lpn`, loading its entry from flash on a miss.
    fn entry(&mut self, flash: &mut dyn Flash, lpn: u32) -> Result<u32, FtlError> {
        if let Some(slot) = self.cmt.get(lpn) {
            self.counters.cmt_hits += 1;
            self.cmt.touch(slot);
            return Ok(slot);
        }
        self.counters.cmt_misses += 1;
        self.make_room(flash)?;
        // Making room may have run GC, which caches the entries of the
        // pages it moves: this one may be cached now.
        if let Some(slot) = self.cmt.get(lpn) {
            self.cmt.touch(slot);
            return Ok(slot);
        }
        let ppn = self.read_entry(flash, lpn)?;
        Ok(self.cmt.insert(lpn, ppn, false))
    }

    /// Read the entry of `lpn` from its translation page on flash.
    fn read_entry(&mut self, flash: &mut dyn Flash, lpn: u32) -> Result<u32, FtlError> {
        let tppn = self.gtd[(lpn / self.per_tpage) as usize];
        if tppn == NONE {
            return Ok(UNMAPPED); // never written back: all unmapped
        }
        self.counters.translation_reads += 1;
        let mut bytes = [0u8; ENTRY_BYTES as usize];
        let offset = (lpn % self.per_tpage) * ENTRY_BYTES;
        flash.read_meta_at(Cause::Metadata, self.page_addr(tppn), offset, &mut bytes)?;
        Ok(u32::from_le_bytes(bytes))
    }

    /// Evict until one more entry fits.
    fn make_room(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        while self.cmt.is_full() {
            self.evict_one(flash)?;
        }
        Ok(())
    }

    /// Evict down to the capacity (after GC added entries).
    fn trim_cache(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        while self.cmt.len() > self.cmt.capacity() && !self.cmt.is_resident() {
            self.evict_one(flash)?;
        }
        Ok(())
    }

    fn evict_one(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let Some(victim) = self.cmt.victim() else { return Ok(()) };
        if self.cmt.is_dirty(victim) && self.bug != DftlBug::EvictsDirtyWithoutWriteBack {
            let tvpn = self.cmt.lpn(victim) / self.per_tpage;
            self.write_back(flash, tvpn)?;
        }
        self.cmt.remove(victim);
        self.cmt.prefetch_victim();
        Ok(())
    }

    /// Write translation page `tvpn` back with every dirty cached entry of it.
    fn write_back(&mut self, flash: &mut dyn Flash, tvpn: u32) -> Result<(), FtlError> {
        // Allocate first: GC during allocation may move pages of this
        // translation page (updating cached entries) or the page itself.
        let unit = self.next_tunit as usize;
        self.next_tunit = (self.next_tunit + 1) % self.table.units;
        let dst = self.alloc_page(flash, unit, self.t_stream)?;
        let old = self.gtd[tvpn as usize];
        let mut page = std::mem::take(&mut self.tpage);
        if old == NONE {
            page.fill(0xff);
        } else {
            self.counters.translation_reads += 1;
            flash.read_meta(Cause::Metadata, self.page_addr(old), &mut page, &mut [])?;
        }
        let first = tvpn * self.per_tpage;
        let batched = self.cmt.drain_dirty(tvpn, |lpn, ppn| {
            let at = ((lpn - first) * ENTRY_BYTES) as usize;
            page[at..at + 4].copy_from_slice(&ppn.to_le_bytes());
        });
        let oob = encode_oob(OOB_TRANSLATION | self.t_stream << 4, tvpn, self.next_seq());
        let result = flash.program_meta(Cause::Metadata, self.page_addr(dst), &page, &oob);
        self.tpage = page;
        result?;
        self.counters.translation_programs += 1;
        self.counters.writebacks += 1;
        self.counters.writeback_entries += u64::from(batched);
        if old != NONE {
            self.invalidate(old);
        }
        self.gtd[tvpn as usize] = dst;
        self.commit_page(dst);
        Ok(())
    }

    /// Record that `lpn` now lives at `ppn` (GC, mount): in place when
    /// cached, else as a new dirty entry.
    fn remap(&mut self, lpn: u32, ppn: u32) {
        match self.cmt.get(lpn) {
            Some(slot) => self.cmt.update(slot, ppn),
            None => {
                self.cmt.insert(lpn, ppn, true);
            }
        }
    }

    // ----- allocation -----

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
                    continue;
                }
            }
            self.open_block(unit, stream)?;
        }
    }

    fn open_block(&mut self, unit: usize, stream: u8) -> Result<(), FtlError> {
        let use_ = if stream == self.wl_stream { FreeBlockUse::ColdData } else { FreeBlockUse::Data };
        let at = self.wear.choose_free(&self.units[unit].free, &self.table, use_);
        let block = self.units[unit]
            .free
            .remove(at)
            .ok_or_else(|| FtlError::NoSpace(format!("plane unit {unit} has no free block and nothing to collect")))?;
        self.state[block as usize] = BlockState::Open;
        self.block_stream[block as usize] = stream;
        self.is_translation[block as usize] = stream == self.t_stream;
        self.units[unit].frontier[stream as usize] = Frontier { block, next_page: 0 };
        Ok(())
    }

    fn foreground_gc(&mut self, flash: &mut dyn Flash, unit: usize) -> Result<(), FtlError> {
        let mut stalls = 0;
        while self.units[unit].free.len() as u32 <= self.fg_threshold {
            let before = self.units[unit].free.len();
            if !self.collect(flash, unit, false)? {
                break;
            }
            stalls = if self.units[unit].free.len() > before { 0 } else { stalls + 1 };
            if stalls > self.geometry.blocks_per_plane() {
                break;
            }
        }
        self.maybe_level_wear(flash, unit)
    }

    fn commit_page(&mut self, ppn: u32) {
        let block = ppn / self.ppb;
        self.valid_bits[(ppn / 64) as usize] |= 1 << (ppn % 64);
        self.table.valid[block as usize] += 1;
        if ppn % self.ppb == self.ppb - 1 {
            self.seal(block);
        }
    }

    fn seal(&mut self, block: u32) {
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

    /// Program one logical page from `buf` at `sector` and remap it.
    fn program_lpn(&mut self, flash: &mut dyn Flash, lpn: u32, buf: BufId, sector: u32) -> Result<(), FtlError> {
        let slot = self.entry(flash, lpn)?;
        let unit = self.next_unit as usize;
        self.next_unit = (self.next_unit + 1) % self.table.units;
        let (cmt, block_stream, ppb) = (&self.cmt, &self.block_stream, self.ppb);
        let stream = self.hot_cold.host_stream(lpn, || match cmt.ppn(slot) {
            UNMAPPED => None,
            old => Some(block_stream[(old / ppb) as usize]),
        });
        // The slot stays valid through allocation: GC updates and adds
        // entries but never evicts.
        let ppn = self.alloc_page(flash, unit, stream)?;
        let oob = encode_oob(OOB_DATA | stream << 4, lpn, self.next_seq());
        flash.program(Cause::Host, self.page_addr(ppn), buf, sector, &oob)?;
        let old = self.cmt.ppn(slot);
        if old != UNMAPPED {
            self.invalidate(old);
        }
        self.cmt.update(slot, ppn);
        self.commit_page(ppn);
        Ok(())
    }

    /// Load logical page `lpn` into `buf` (zeros if unmapped).
    fn load_page(&mut self, flash: &mut dyn Flash, lpn: u32, buf: BufId) -> Result<(), FtlError> {
        let slot = self.entry(flash, lpn)?;
        match self.cmt.ppn(slot) {
            UNMAPPED => flash.buf_zero(buf, 0, self.spp)?,
            ppn => {
                self.counters.rmw_reads += 1;
                flash.read(Cause::Host, self.page_addr(ppn), 0, self.spp, buf, 0, &mut [])?;
            }
        }
        Ok(())
    }

    // ----- garbage collection -----

    fn collect(&mut self, flash: &mut dyn Flash, unit: usize, background: bool) -> Result<bool, FtlError> {
        let Some(victim) = self.policy.select(unit as u32, &self.table) else {
            return Ok(false);
        };
        let valid = self.table.valid[victim as usize];
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
        self.erase_to_free(flash, unit, victim, Cause::Gc)?;
        Ok(true)
    }

    fn erase_to_free(&mut self, flash: &mut dyn Flash, unit: usize, block: u32, cause: Cause) -> Result<(), FtlError> {
        flash.erase(cause, self.block_addr(block))?;
        self.table.erase_count[block as usize] += 1;
        self.wear.erased(block, &self.table);
        self.state[block as usize] = BlockState::Free;
        self.is_translation[block as usize] = false;
        self.units[unit].free.push_back(block);
        Ok(())
    }

    /// Static wear leveling after GC on `unit` (see `page`).
    fn maybe_level_wear(&mut self, flash: &mut dyn Flash, unit: usize) -> Result<(), FtlError> {
        if !self.wear.relocates() || self.in_gc || self.units[unit].free.len() as u32 <= self.fg_threshold {
            return Ok(());
        }
        let bpp = self.geometry.blocks_per_plane();
        let plane = (0..self.geometry.planes())
            .find(|&p| self.table.unit[(p * bpp) as usize] as usize == unit)
            .expect("every unit is a plane");
        let state = &self.state;
        let movable = |b: u32| state[b as usize] == BlockState::Sealed;
        let Some(block) = self.wear.relocation(unit as u32, plane * bpp..(plane + 1) * bpp, &self.table, &movable)
        else {
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

    /// Copy the valid pages of `victim` (data or translation) and record
    /// their new locations.
    fn move_valid_pages(
        &mut self,
        flash: &mut dyn Flash,
        unit: usize,
        victim: u32,
        cause: Cause,
    ) -> Result<(), FtlError> {
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
                let (_, index, _) = decode_oob(&oob);
                self.cmt.prefetch(index);
                batch.push((src, index));
            }
        }
        if result.is_ok() {
            result = if self.is_translation[victim as usize] {
                self.counters.gc_translation_victims += 1;
                self.copy_translation_pages(flash, unit, cause, &batch)
            } else {
                self.copy_data_pages(flash, unit, victim, cause, &batch)
            };
        }
        self.gc_batch = batch;
        result
    }

    fn copy_data_pages(
        &mut self,
        flash: &mut dyn Flash,
        unit: usize,
        victim: u32,
        cause: Cause,
        batch: &[(u32, u32)],
    ) -> Result<(), FtlError> {
        let from = self.block_stream[victim as usize];
        for &(src, lpn) in batch {
            let stream = if cause == Cause::WearLeveling { self.wl_stream } else { self.hot_cold.gc_stream(lpn, from) };
            let dst = self.alloc_page(flash, unit, stream)?;
            let oob = encode_oob(OOB_DATA | stream << 4, lpn, self.next_seq());
            self.copy_page(flash, cause, src, dst, &oob)?;
            self.invalidate(src);
            self.remap(lpn, dst);
            self.commit_page(dst);
        }
        Ok(())
    }

    fn copy_translation_pages(
        &mut self,
        flash: &mut dyn Flash,
        unit: usize,
        cause: Cause,
        batch: &[(u32, u32)],
    ) -> Result<(), FtlError> {
        for &(src, tvpn) in batch {
            debug_assert_eq!(self.gtd[tvpn as usize], src, "valid translation page {src} is not current");
            let dst = self.alloc_page(flash, unit, self.t_stream)?;
            let oob = encode_oob(OOB_TRANSLATION | self.t_stream << 4, tvpn, self.next_seq());
            if self.opts.copyback {
                flash.copyback(cause, self.page_addr(src), self.page_addr(dst), Some(&oob))?;
            } else {
                let mut page = std::mem::take(&mut self.tpage);
                let r = flash
                    .read_meta(cause, self.page_addr(src), &mut page, &mut [])
                    .and_then(|_| flash.program_meta(cause, self.page_addr(dst), &page, &oob));
                self.tpage = page;
                r?;
            }
            self.counters.translation_gc_moves += 1;
            self.invalidate(src);
            self.gtd[tvpn as usize] = dst;
            self.commit_page(dst);
        }
        Ok(())
    }

    fn copy_page(
        &mut self,
        flash: &mut dyn Flash,
        cause: Cause,
        src: u32,
        dst: u32,
        oob: &[u8],
    ) -> Result<(), FtlError> {
        if self.opts.copyback {
            flash.copyback(cause, self.page_addr(src), self.page_addr(dst), Some(oob))?;
        } else {
            let buf = self.gc_buf.expect("gc buffer allocated at power-on");
            flash.read(cause, self.page_addr(src), 0, self.spp, buf, 0, &mut [])?;
            flash.program(cause, self.page_addr(dst), buf, 0, oob)?;
        }
        Ok(())
    }

    /// Write back every dirty entry (clean shutdown).
    fn write_back_all(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        // Write-backs may run GC, which dirties entries of pages already
        // written back: repeat until everything is clean.
        loop {
            let dirty: Vec<u32> = (0..self.tpages).filter(|&t| self.cmt.dirty_in(t) > 0).collect();
            if dirty.is_empty() {
                return Ok(());
            }
            for t in dirty {
                if self.cmt.dirty_in(t) > 0 {
                    self.write_back(flash, t)?;
                }
            }
        }
    }

    // ----- mount -----

    /// Scan every written page's OOB; rebuild the GTD, the valid bitmap and
    /// the blocks; correct translation entries that data written after them
    /// (or GC) made stale.
    fn scan_and_rebuild(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let g = self.geometry.clone();
        let lpns = self.lpns as usize;
        let mut data_seq = vec![0u64; lpns];
        let mut data_ppn = vec![UNMAPPED; lpns];
        let mut t_seq = vec![0u64; self.tpages as usize];
        // The lpn of every data page (to recognise stale translation entries).
        let mut owner = vec![UNMAPPED; g.pages() as usize];
        let mut written_pages = vec![0u32; g.blocks() as usize];
        let mut max_seq = 0;
        let mut oob = [0u8; OOB_BYTES];
        for block in 0..g.blocks() {
            if flash.is_factory_bad(self.block_addr(block)) {
                self.state[block as usize] = BlockState::Bad;
                continue;
            }
            for page in 0..self.ppb {
                let ppn = block * self.ppb + page;
                flash.read_oob(Cause::Recovery, self.page_addr(ppn), &mut oob)?;
                self.counters.mount_scanned_pages += 1;
                let (kind, index, seq) = decode_oob(&oob);
                if kind == OOB_ERASED {
                    break;
                }
                written_pages[block as usize] = page + 1;
                max_seq = max_seq.max(seq);
                self.block_stream[block as usize] = kind >> 4;
                match kind & OOB_KIND_MASK {
                    OOB_DATA if index < self.lpns => {
                        owner[ppn as usize] = index;
                        if seq > data_seq[index as usize] {
                            data_seq[index as usize] = seq;
                            data_ppn[index as usize] = ppn;
                        }
                    }
                    OOB_TRANSLATION if index < self.tpages => {
                        self.is_translation[block as usize] = true;
                        if seq > t_seq[index as usize] {
                            t_seq[index as usize] = seq;
                            self.gtd[index as usize] = ppn;
                        }
                    }
                    _ => {}
                }
            }
        }
        self.seq = max_seq + 1;
        self.table.now = self.seq;
        // The current mapping, one translation page at a time.
        let mut corrections = Vec::new();
        let mut page = std::mem::take(&mut self.tpage);
        for t in 0..self.tpages {
            let tppn = self.gtd[t as usize];
            if tppn == NONE {
                page.fill(0xff);
            } else {
                self.valid_bits[(tppn / 64) as usize] |= 1 << (tppn % 64);
                self.table.valid[(tppn / self.ppb) as usize] += 1;
                flash.read_meta(Cause::Recovery, self.page_addr(tppn), &mut page, &mut [])?;
            }
            let first = t * self.per_tpage;
            for lpn in first..(first + self.per_tpage).min(self.lpns) {
                let at = ((lpn - first) * ENTRY_BYTES) as usize;
                let stored = u32::from_le_bytes(page[at..at + 4].try_into().unwrap());
                let current = if data_seq[lpn as usize] > t_seq[t as usize] {
                    data_ppn[lpn as usize] // written after the entry was
                } else if stored != UNMAPPED && owner.get(stored as usize) != Some(&lpn) {
                    UNMAPPED // the page was collected since: the data was trimmed
                } else {
                    stored
                };
                if current != UNMAPPED {
                    self.valid_bits[(current / 64) as usize] |= 1 << (current % 64);
                    self.table.valid[(current / self.ppb) as usize] += 1;
                    if !self.hot_cold.is_none() {
                        self.hot_cold.restore(lpn, self.block_stream[(current / self.ppb) as usize]);
                    }
                }
                if current != stored {
                    corrections.push((lpn, current));
                }
            }
        }
        self.tpage = page;
        self.rebuild_blocks(&written_pages);
        // Corrections are dirty entries; evictions write them back.
        self.counters.mount_corrections = corrections.len() as u64;
        for (lpn, ppn) in corrections {
            if self.cmt.get(lpn).is_none() {
                self.make_room(flash)?;
                self.cmt.insert(lpn, ppn, true);
            }
        }
        Ok(())
    }

    fn rebuild_blocks(&mut self, written_pages: &[u32]) {
        for block in 0..self.geometry.blocks() {
            let b = block as usize;
            if self.state[b] == BlockState::Bad {
                continue;
            }
            if written_pages[b] == 0 {
                self.state[b] = BlockState::Free;
                self.is_translation[b] = false;
                let unit = self.unit_of(block);
                self.units[unit].free.push_back(block);
            } else {
                // Partly written blocks are sealed and left to GC.
                self.state[b] = BlockState::Sealed;
                self.table.sealed_at[b] = self.seq;
                self.policy.insert(block, &self.table);
            }
        }
    }

    fn unit_free_counts(&self) -> Vec<usize> {
        self.units.iter().map(|u| u.free.len()).collect()
    }
}

impl Ftl for DftlFtl {
    fn info(&self) -> FtlInfo {
        FtlInfo { name: "dftl", guarantee: Guarantee::Baseline, oob_bytes: OOB_BYTES as u32 }
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
            let slot = self.entry(flash, lpn)?;
            match self.cmt.ppn(slot) {
                UNMAPPED => flash.buf_zero(req.buf, at, n)?,
                ppn => flash.read(Cause::Host, self.page_addr(ppn), in_page, n, req.buf, at, &mut [])?,
            }
            lba += u64::from(n);
        }
        self.trim_cache(flash)
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
        self.trim_cache(flash)?;
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
            let slot = self.entry(flash, lpn)?;
            let old = self.cmt.ppn(slot);
            if old != UNMAPPED {
                if n == self.spp {
                    self.invalidate(old);
                    self.cmt.update(slot, UNMAPPED);
                    self.hot_cold.trimmed(lpn);
                    self.counters.trimmed_pages += 1;
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
        self.trim_cache(flash)
    }

    fn flush(&mut self, _flash: &mut dyn Flash) -> Result<(), FtlError> {
        Ok(()) // no write cache; the map is recoverable from the OOB of data pages
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
        self.trim_cache(flash)?;
        Ok(IdleOutcome::Worked)
    }

    fn shutdown(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.write_back_all(flash)
    }

    fn prefetch(&mut self, flash: &dyn Flash, lba: u64, sectors: u32) {
        if self.gtd.is_empty() {
            return;
        }
        // Stage 2: the previous hint's cache lookups are warm now; for the
        // entries that will miss, warm their translation page bytes (the
        // request runs next) and the data pages of those that will hit.
        let (from, to) = self.hinted;
        for lpn in from..to {
            match self.cmt.get(lpn) {
                Some(slot) => match self.cmt.ppn(slot) {
                    UNMAPPED => {}
                    ppn => flash.prefetch_page(self.page_addr(ppn)),
                },
                None => {
                    let tppn = self.gtd[(lpn / self.per_tpage) as usize];
                    if tppn != NONE {
                        flash.prefetch_meta(self.page_addr(tppn), (lpn % self.per_tpage) * ENTRY_BYTES);
                    }
                }
            }
        }
        // Stage 1: this hint's cache lookups.
        let spp = u64::from(self.spp);
        let first = (lba / spp) as u32;
        let last = ((lba + u64::from(sectors)).div_ceil(spp) as u32).min(self.lpns);
        for lpn in first..last {
            self.cmt.prefetch(lpn);
        }
        prefetch(&self.gtd, (first / self.per_tpage) as usize);
        self.hinted = (first, last);
    }

    fn stats(&self) -> FtlStats {
        let c = &self.counters;
        let mut extra = BTreeMap::new();
        for (k, v) in [
            ("gc_background_runs", c.gc_background_runs),
            ("gc_translation_victims", c.gc_translation_victims),
            ("cmt_hits", c.cmt_hits),
            ("cmt_misses", c.cmt_misses),
            ("cmt_entries", u64::from(self.cmt_capacity)),
            ("cmt_peak_entries", u64::from(self.cmt.peak())),
            ("translation_pages", u64::from(self.tpages)),
            ("translation_reads", c.translation_reads),
            ("translation_programs", c.translation_programs),
            ("translation_gc_moves", c.translation_gc_moves),
            ("writebacks", c.writebacks),
            ("writeback_entries", c.writeback_entries),
            ("rmw_reads", c.rmw_reads),
            ("trimmed_pages", c.trimmed_pages),
            ("mount_scanned_pages", c.mount_scanned_pages),
            ("mount_corrections", c.mount_corrections),
            ("wl_relocations", c.wl_relocations),
            ("wl_pages_moved", c.wl_pages_moved),
            ("free_blocks", self.units.iter().map(|u| u.free.len() as u64).sum()),
        ] {
            extra.insert(k.to_string(), serde_json::json!(v));
        }
        let lookups = c.cmt_hits + c.cmt_misses;
        let ratio = if lookups == 0 { 0.0 } else { c.cmt_hits as f64 / lookups as f64 };
        extra.insert("cmt_hit_ratio".into(), serde_json::json!(ratio));
        let per_writeback = if c.writebacks == 0 { 0.0 } else { c.writeback_entries as f64 / c.writebacks as f64 };
        extra.insert("writeback_batch_mean".into(), serde_json::json!(per_writeback));
        extra.insert("cmt_replacement".into(), serde_json::json!(self.opts.cmt_replacement.name()));
        extra.insert("gc_policy".into(), serde_json::json!(self.opts.gc_policy.to_string()));
        extra.insert("hot_cold".into(), serde_json::json!(self.opts.hot_cold.to_string()));
        extra.insert("wear_leveling".into(), serde_json::json!(self.opts.wear_leveling.to_string()));
        extra.insert("stream_pages".into(), serde_json::json!(c.stream_pages[..=self.t_stream as usize]));
        let dram = Self::dram_needed(&self.geometry, self.cmt_capacity, self.cmt_reserve, self.tpages)
            + self.hot_cold.dram_bytes();
        FtlStats { gc_runs: c.gc_runs, dram_bytes: dram, extra }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oob_round_trips() {
        let o = encode_oob(OOB_TRANSLATION | 3 << 4, 77, (1 << 40) - 1);
        assert_eq!(decode_oob(&o), (OOB_TRANSLATION | 3 << 4, 77, (1 << 40) - 1));
    }

    #[test]
    fn cmt_bytes_accepts_sizes_and_shares_and_names_itself_when_wrong() {
        let env = FtlEnv {
            geometry: crate::config::Config::preset("tiny").unwrap().geometry,
            logical_sectors: 100_000,
            dram_budget_bytes: 16 << 20,
            seed: 1,
        };
        let build = |v: &str| {
            let mut t = FtlOptions::new();
            t.insert("cmt_bytes".into(), toml::Value::String(v.into()));
            build_dftl(&env, &t).map(|f| f.stats().extra["cmt_entries"].as_u64().unwrap())
        };
        assert_eq!(build("8k").unwrap(), 1024);
        let mut t = FtlOptions::new();
        t.insert("cmt_bytes".into(), toml::Value::Integer(4096));
        assert_eq!(build_dftl(&env, &t).unwrap().stats().extra["cmt_entries"], 512, "a plain number is bytes");
        assert_eq!(build("50%").unwrap(), 12_500 / 2);
        assert_eq!(build("1g").unwrap(), 12_500, "capped at the whole table");
        assert!(build("4").unwrap_err().contains("`cmt_bytes`"));
        assert!(build("2x").unwrap_err().contains("`cmt_bytes`"));
        assert!(build("lots").unwrap_err().contains("`cmt_bytes`"));
    }
}
