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
//! - **Data path and GC** are the data plane's ([`super::kit::data_plane`]),
//!   shared with `page`: host pages striped over the planes (rows of a
//!   die's planes programmed together with multi-plane operations), per-unit
//!   foreground (and optional background) garbage collection with a
//!   pluggable victim policy, hot/cold streams and wear leveling. A CMT
//!   miss that must evict programs the host pages staged for a row first
//!   (their cache slots must stay put), so with a small cache fewer rows
//!   are whole.
//!   Translation pages have a stream of their own, so a victim is either a
//!   data block or a translation block. Valid data pages are copied and
//!   their new locations recorded in the CMT — in place when cached,
//!   otherwise as a new dirty entry, written back later in a batch with its
//!   translation page's other updates (see [`cmt`] for why not at once).
//!   Valid translation pages are copied and the GTD updated. GC never
//!   writes translation pages itself (it would recurse into GC). Before
//!   each GC step the CMT is evicted down to its capacity, so the step can
//!   add at most a group's pages. Those evictions write translation pages
//!   back, whose allocation may itself need GC (the translation stream's
//!   group is full and the unit is short of free groups): before those
//!   nested steps only clean entries are dropped (writing back again would
//!   allocate again, without end). A reserve of `2 × pages per group`
//!   entries, charged to DRAM, holds one nested step; the CMT is trimmed
//!   back before the next outer step and at the end of the request. When
//!   the nested GC takes several steps and the cache is nearly all dirty
//!   (a cache of a few hundred entries), the CMT grows past its reserve:
//!   `cmt_overflow_entries` counts that excess, which a firmware would
//!   have to provision (or avoid by keeping a translation group in reserve).
//! - **Whole-table cache.** With `cmt_bytes` at least the whole table,
//!   nothing is evicted, and translation pages are written only to make
//!   trims durable: without trims the FTL behaves exactly like `page`
//!   (same allocation, same GC, same write amplification); with them the
//!   two differ by how they persist trims (`page` appends trim records).
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
//! once a flush completes after it: a flush writes back every translation
//! page holding a trimmed entry not yet on flash (and so does erasing a
//! block that may hold the trimmed page's newest copy, which would let an
//! older copy come back at a mount).

pub mod cmt;
mod persist;
mod recovery;

use super::kit::data_plane::{
    self, encode_oob, DataPlane, DataPlaneOptions, Entry, Mapper, OOB_BYTES, OOB_DATA, UNMAPPED,
};
use super::kit::wire::U32Le;
use super::mutants::Mutant;
use super::{
    check_range, parse_options, Durability, Ftl, FtlDescriptor, FtlEnv, FtlError, FtlInfo, FtlOptions, FtlStats,
    Guarantee, IdleOutcome, IoRequest, OptionDoc,
};
use crate::flash::{Cause, Flash, FlashError};
use crate::nand::{Geometry, PageAddr};
use crate::util::prefetch::prefetch;
use crate::util::size::SizeSpec;
use cmt::{Cmt, Replacement};
use persist::PendingTrims;
use serde::Deserialize;
use std::collections::BTreeMap;

/// `dftl`'s own options, then the data plane's.
const OPTIONS: [OptionDoc; 3 + data_plane::OPTION_DOCS.len()] = super::concat_option_docs(
    [
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
    ],
    data_plane::OPTION_DOCS,
);

pub const DESCRIPTOR: FtlDescriptor = FtlDescriptor {
    name: "dftl",
    summary: "DFTL (Gupta et al., ASPLOS 2009): page map in flash translation pages, cached mapping table in DRAM \
              (segmented LRU), batched write-back, GC of data and translation blocks",
    options: &OPTIONS,
    build: build_dftl,
};

fn build_dftl(env: &FtlEnv, options: &FtlOptions) -> Result<Box<dyn Ftl>, String> {
    let opts = DftlOptions::parse("dftl", options)?;
    Ok(Box::new(DftlFtl::new(env, opts)?))
}

/// Options of the `dftl` FTL (see [`DESCRIPTOR`] for their meaning): the
/// cached mapping table's, and the data plane's.
#[derive(Clone, Debug, Deserialize)]
#[serde(try_from = "FtlOptions")]
pub struct DftlOptions {
    pub cmt: CmtOptions,
    pub data: DataPlaneOptions,
}

/// The cached mapping table's options.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CmtOptions {
    #[serde(default = "default_cmt_bytes", deserialize_with = "size_or_bytes")]
    pub cmt_bytes: SizeSpec,
    #[serde(default)]
    pub cmt_replacement: Replacement,
    #[serde(default = "default_protected_percent")]
    pub cmt_protected_percent: f64,
}

impl DftlOptions {
    /// Parse `dftl`'s options, naming the bad one.
    pub fn parse(ftl: &str, options: &FtlOptions) -> Result<DftlOptions, String> {
        let (cmt, data) = super::split_options(options, &["cmt_bytes", "cmt_replacement", "cmt_protected_percent"]);
        Ok(DftlOptions { cmt: parse_options(ftl, &cmt)?, data: parse_options(ftl, &data)? })
    }
}

impl TryFrom<FtlOptions> for DftlOptions {
    type Error = String;
    fn try_from(options: FtlOptions) -> Result<Self, String> {
        DftlOptions::parse("dftl", &options)
    }
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

impl Default for DftlOptions {
    fn default() -> Self {
        DftlOptions::parse("dftl", &FtlOptions::new()).expect("defaults parse")
    }
}

const NONE: u32 = u32::MAX;
/// Bytes of a map entry in a translation page.
const ENTRY_BYTES: u32 = 4;
/// Device DRAM per cached entry (lpn and ppn), as the paper counts it.
const CMT_ENTRY_BYTES: u64 = 8;

/// OOB kinds of `dftl`'s metadata pages (the layout is the data plane's):
/// a translation page (index = translation page number) and a page of
/// the erase-count record (index = its chunk).
const OOB_TRANSLATION: u8 = 3;
const OOB_ERASE_COUNTS: u8 = 4;

#[derive(Default, Clone, Debug)]
struct Counters {
    cmt_hits: u64,
    cmt_misses: u64,
    cmt_cold_misses: u64,
    translation_reads: u64,
    translation_programs: u64,
    translation_gc_moves: u64,
    writebacks: u64,
    writeback_entries: u64,
    trim_writebacks: u64,
    erase_count_pages: u64,
    mount_scanned_pages: u64,
    mount_corrections: u64,
    /// Path counters (not in the statistics; see [`Ftl::paths`]): evictions
    /// of a clean entry, a dirty one, a dirty one a trim unmapped.
    evict_clean: u64,
    evict_dirty: u64,
    evict_dirty_trimmed: u64,
    mount_writebacks: u64,
    mount_torn_pages: u64,
    mount_undefined_blocks: u64,
}

/// The DFTL. See the module docs.
pub struct DftlFtl {
    dp: DataPlane,
    map: TranslationMap,
}

/// Everything of `dftl` but the data plane: the GTD, the CMT, the
/// translation pages and the erase-count record.
struct TranslationMap {
    opts: CmtOptions,
    geometry: Geometry,
    spp: u32,
    ppb: u32,
    logical_sectors: u64,
    lpns: u32,
    /// Entries per translation page, and translation pages.
    per_tpage: u32,
    tpages: u32,
    cmt_capacity: u32,
    /// Entries one GC step may add beyond the capacity (see the module docs).
    cmt_reserve: u32,
    gtd: Vec<u32>,
    cmt: Cmt,
    /// The cache slot a host request holds while it allocates a page (GC
    /// may run then); evictions pass it over.
    pinned: u32,
    /// Whether a write-back is allocating its page (a GC step it needs
    /// must not write back: see the module docs).
    allocating_writeback: bool,
    /// Trims not yet in a translation page on flash.
    trims: PendingTrims,
    /// Where the erase-count record is.
    erase_record: persist::EraseCountRecord,
    /// Mount only: entries the scan corrected, not yet written back.
    fixes: persist::MountFixes,
    /// One page of bytes, reused by write-back, records and mount.
    tpage: Vec<u8>,
    /// The logical pages of the last prefetch hint.
    hinted: (u32, u32),
    /// A deliberate bug (checker tests; see [`Mutant`]).
    mutant: Mutant,
    counters: Counters,
}

impl DftlFtl {
    pub fn new(env: &FtlEnv, opts: DftlOptions) -> Result<DftlFtl, String> {
        Self::with_mutant(env, opts, Mutant::None)
    }

    /// The FTL with a deliberate bug (for checker tests; see [`Mutant`]).
    pub fn with_mutant(env: &FtlEnv, opts: DftlOptions, mutant: Mutant) -> Result<DftlFtl, String> {
        mutant.check_breaks("dftl")?;
        let g = env.geometry.clone();
        let spp = g.sectors_per_page();
        let lpns_u64 = env.logical_sectors.div_ceil(u64::from(spp));
        if lpns_u64 >= u64::from(UNMAPPED) {
            return Err(format!("dftl: {lpns_u64} logical pages do not fit a 32-bit map"));
        }
        let lpns = lpns_u64 as u32;
        let per_tpage = persist::entries_per_page(&g);
        let tpages = lpns.div_ceil(per_tpage);
        // Translation pages and the erase-count record (a block per group
        // at most) take flash space of their own.
        let record_pages_max = persist::EraseCountRecord::pages(&g, g.blocks());
        if lpns_u64 + u64::from(tpages + record_pages_max) >= g.pages() {
            return Err(format!(
                "dftl: logical capacity ({lpns} pages) plus its {tpages} translation pages must be smaller \
                 than the physical capacity ({} pages)",
                g.pages()
            ));
        }
        let cmt_capacity = Self::cmt_capacity(&opts.cmt, lpns)?;
        if !(0.0..100.0).contains(&opts.cmt.cmt_protected_percent) {
            return Err("dftl option `cmt_protected_percent`: must be within 0..100".into());
        }
        let dp = DataPlane::new("dftl", &g, lpns, &opts.data, Some(tpages + record_pages_max), env.seed)?
            .with_mutant(mutant);
        let groups = dp.table.erase_count.len() as u32;
        let map = TranslationMap {
            spp,
            ppb: g.pages_per_block(),
            logical_sectors: env.logical_sectors,
            lpns,
            per_tpage,
            tpages,
            cmt_capacity,
            cmt_reserve: 2 * dp.group_capacity_max(),
            gtd: Vec::new(),
            cmt: Cmt::new(0, 1, 0, opts.cmt.cmt_replacement, 0.0, per_tpage),
            pinned: NONE,
            allocating_writeback: false,
            trims: PendingTrims::default(),
            erase_record: persist::EraseCountRecord::new(persist::EraseCountRecord::pages(&g, groups)),
            fixes: persist::MountFixes::default(),
            tpage: vec![0xff; g.page_size_bytes() as usize],
            hinted: (0, 0),
            mutant,
            counters: Counters::default(),
            geometry: g,
            opts: opts.cmt,
        };
        let dram = map.dram_bytes(groups) + dp.hot_cold_dram_bytes();
        if dram > env.dram_budget_bytes {
            return Err(format!(
                "dftl option `cmt_bytes`: the cache and tables need {}",
                super::dram_shortfall(dram, env.dram_budget_bytes)
            ));
        }
        Ok(DftlFtl { dp, map })
    }

    /// Entries `cmt_bytes` holds (at most the whole table).
    fn cmt_capacity(opts: &CmtOptions, lpns: u32) -> Result<u32, String> {
        let table_bytes = u64::from(lpns) * CMT_ENTRY_BYTES;
        let cmt_bytes = match opts.cmt_bytes {
            SizeSpec::Bytes(b) => b,
            SizeSpec::PercentOfCapacity(p) => (table_bytes as f64 * p / 100.0) as u64,
            SizeSpec::TimesCapacity(_) => {
                return Err("dftl option `cmt_bytes`: give a size (2MiB) or a share of the table (25%)".into())
            }
        };
        let capacity = (cmt_bytes / CMT_ENTRY_BYTES).min(u64::from(lpns)) as u32;
        if capacity == 0 {
            return Err(format!("dftl option `cmt_bytes`: {cmt_bytes} bytes hold no {CMT_ENTRY_BYTES}-byte map entry"));
        }
        Ok(capacity)
    }

    fn reset_state(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let m = &mut self.map;
        m.gtd = vec![NONE; m.tpages as usize];
        m.cmt = Cmt::new(
            m.lpns,
            m.cmt_capacity,
            m.cmt_reserve,
            m.opts.cmt_replacement,
            m.opts.cmt_protected_percent / 100.0,
            m.per_tpage,
        );
        m.pinned = NONE;
        m.allocating_writeback = false;
        m.trims = PendingTrims::new(m.tpages, self.dp.table.erase_count.len() as u32);
        m.erase_record.reset();
        m.fixes = persist::MountFixes::default();
        self.dp.reset(flash)
    }

    /// A host request is done: no entry is held; evict down to the capacity.
    fn end_request(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.map.pinned = NONE;
        self.map.trim_cache(&mut self.dp, flash)
    }
}

fn page_addr(ppn: u32) -> PageAddr {
    PageAddr(u64::from(ppn))
}

impl Mapper for TranslationMap {
    #[inline]
    fn lookup(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash, lpn: u32) -> Result<Entry, FtlError> {
        let slot = self.entry(dp, flash, lpn)?;
        self.pinned = slot;
        Ok(Entry { ppn: self.cmt.ppn(slot), tag: slot })
    }

    /// A host write or trim: `tag` is the entry's slot, which stays valid
    /// through allocation (GC updates and adds entries, and evictions pass
    /// over the pinned slot).
    #[inline]
    fn remap(&mut self, _lpn: u32, slot: u32, ppn: u32) -> u32 {
        let old = self.cmt.ppn(slot);
        self.cmt.update(slot, ppn);
        old
    }

    fn relocate(&mut self, kind: u8, index: u32, src: u32, dst: u32) {
        match kind {
            OOB_DATA => self.remap_moved(index, dst),
            OOB_TRANSLATION => {
                debug_assert_eq!(self.gtd[index as usize], src, "valid translation page {src} is not current");
                self.counters.translation_gc_moves += 1;
                self.gtd[index as usize] = dst;
            }
            _ => self.erase_record.moved(index, src, dst),
        }
    }

    fn trimmed(&mut self, dp: &DataPlane, lpn: u32, old: u32) {
        self.trims.add(lpn / self.per_tpage, dp.group_of_ppn(old));
    }

    fn prefetch_entry(&self, index: u32) {
        self.cmt.prefetch(index);
    }

    /// A hit, or a miss with room in the cache: nothing is evicted (the
    /// entry may be read from a translation page, which changes nothing).
    fn lookup_keeps_entries(&self, lpn: u32) -> bool {
        self.cmt.get(lpn).is_some() || !self.cmt.is_full()
    }

    /// The group may hold the newest copy of a trimmed page whose trim is
    /// only in DRAM: an older copy elsewhere would come back at a mount.
    fn before_erase(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash, group: u32) -> Result<(), FtlError> {
        if self.trims.in_group(group) {
            self.persist_trims(dp, flash)?;
        }
        Ok(())
    }

    /// Room for every page the step may move, unless the step is one a
    /// write-back's allocation needs (see the module docs).
    fn before_gc_step(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash) -> Result<(), FtlError> {
        if self.allocating_writeback {
            self.drop_clean_entries();
            return Ok(());
        }
        self.trim_cache(dp, flash)
    }
}

impl TranslationMap {
    /// Entries the CMT may hold: its capacity and the GC reserve (none
    /// when the whole table fits: nothing is evicted, GC updates entries
    /// in place).
    fn cmt_charged_entries(&self) -> u32 {
        if self.cmt_capacity >= self.lpns {
            self.cmt_capacity
        } else {
            self.cmt_capacity + self.cmt_reserve
        }
    }

    /// Device DRAM: the CMT's charged entries, the GTD, the erase-count
    /// record's page addresses, the pending-trim bitmaps (a bit per
    /// translation page and per group of `groups`), the valid bitmap, the
    /// block table and one page buffer.
    fn dram_bytes(&self, groups: u32) -> u64 {
        let g = &self.geometry;
        u64::from(self.cmt_charged_entries()) * CMT_ENTRY_BYTES
            + u64::from(self.tpages) * 4
            + u64::from(self.erase_record.len()) * 4
            + u64::from(self.tpages).div_ceil(8)
            + u64::from(groups).div_ceil(8)
            + g.pages().div_ceil(8)
            + u64::from(g.blocks()) * 32
            + u64::from(g.page_size_bytes())
    }

    // ----- the cached mapping table -----

    /// The CMT slot of `lpn`, loading its entry from flash on a miss.
    fn entry(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash, lpn: u32) -> Result<u32, FtlError> {
        if let Some(slot) = self.cmt.get(lpn) {
            self.counters.cmt_hits += 1;
            self.cmt.touch(slot);
            return Ok(slot);
        }
        // A new lookup: the entry held before is no longer in use.
        self.pinned = NONE;
        self.make_room(dp, flash)?;
        // Making room may have run GC, which caches the entries of the
        // pages it moves: this one may be cached now.
        if let Some(slot) = self.cmt.get(lpn) {
            self.counters.cmt_cold_misses += 1;
            self.cmt.touch(slot);
            return Ok(slot);
        }
        let ppn = self.read_entry(flash, lpn)?;
        Ok(self.cmt.insert(lpn, ppn, false))
    }

    /// Read the entry of `lpn` from its translation page on flash (a cold
    /// miss when the page was never written: every entry is unmapped).
    fn read_entry(&mut self, flash: &mut dyn Flash, lpn: u32) -> Result<u32, FtlError> {
        let tppn = self.gtd[(lpn / self.per_tpage) as usize];
        if tppn == NONE {
            self.counters.cmt_cold_misses += 1;
            return Ok(UNMAPPED);
        }
        self.counters.cmt_misses += 1;
        self.counters.translation_reads += 1;
        let mut bytes = [0u8; ENTRY_BYTES as usize];
        flash.read_meta_at(Cause::Metadata, page_addr(tppn), self.entry_offset(lpn), &mut bytes)?;
        Ok(bytemuck::cast::<_, U32Le>(bytes).get())
    }

    /// Byte offset of `lpn`'s entry in its translation page.
    fn entry_offset(&self, lpn: u32) -> u32 {
        persist::HEADER_BYTES + (lpn % self.per_tpage) * ENTRY_BYTES
    }

    /// Evict until one more entry fits.
    fn make_room(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash) -> Result<(), FtlError> {
        while self.cmt.is_full() && self.evict_one(dp, flash)? {}
        Ok(())
    }

    /// Evict down to the capacity (after GC added entries, before a GC step).
    fn trim_cache(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash) -> Result<(), FtlError> {
        while self.cmt.len() > self.cmt.capacity() && !self.cmt.is_resident() && self.evict_one(dp, flash)? {}
        Ok(())
    }

    /// Before a GC step a write-back's allocation needs: leave room for the
    /// step in the reserve by dropping clean entries only (a write-back
    /// would allocate again). Should every entry over that room be dirty,
    /// the CMT grows past its reserve (see [`Cmt::insert`]).
    fn drop_clean_entries(&mut self) {
        let room = self.cmt.capacity() + self.cmt_reserve / 2;
        while self.cmt.len() > room && !self.cmt.is_resident() {
            let Some(victim) = self.cmt.clean_victim_except(self.pinned) else { return };
            self.cmt.remove(victim);
        }
    }

    /// Evict the least recently used entry, or — when it is dirty — write
    /// its translation page back, which cleans it (the caller asks again:
    /// GC that the write-back ran may have changed the order). Returns
    /// false if only the pinned entry is left.
    fn evict_one(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash) -> Result<bool, FtlError> {
        let Some(victim) = self.cmt.victim_except(self.pinned) else { return Ok(false) };
        let drops = self.mutant == Mutant::EvictsDirtyWithoutWriteBack
            || self.mutant == Mutant::EvictsTrimmedEntryWithoutWriteBack && self.cmt.ppn(victim) == UNMAPPED;
        // Path counters (`hunt`'s guidance): which kind of entry goes.
        let (dirty, trimmed) = (self.cmt.is_dirty(victim), self.cmt.ppn(victim) == UNMAPPED);
        self.counters.evict_clean += u64::from(!dirty);
        self.counters.evict_dirty += u64::from(dirty && !trimmed);
        self.counters.evict_dirty_trimmed += u64::from(dirty && trimmed);
        if self.cmt.is_dirty(victim) && !drops {
            let tvpn = self.cmt.lpn(victim) / self.per_tpage;
            self.write_back(dp, flash, tvpn)?;
            return Ok(true);
        }
        self.cmt.remove(victim);
        self.cmt.prefetch_victims();
        Ok(true)
    }

    /// Write translation page `tvpn` back with every dirty cached entry of
    /// it (and, during a mount, the entries the scan corrected).
    fn write_back(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash, tvpn: u32) -> Result<(), FtlError> {
        // Allocate first: GC during allocation may move pages of this
        // translation page (updating cached entries) or the page itself.
        let dst = self.alloc_writeback_page(dp, flash)?;
        let mut page = std::mem::take(&mut self.tpage);
        let result = self
            .compose_tpage(flash, tvpn, self.gtd[tvpn as usize], &mut page)
            .and_then(|batched| Ok((batched, self.program_tpage(dp, flash, tvpn, dst, &mut page)?)));
        self.tpage = page;
        let (batched, dst) = result?;
        // (Read after the program: retiring a failed group may have moved it.)
        let old = self.gtd[tvpn as usize];
        self.counters.translation_programs += 1;
        self.counters.writebacks += 1;
        self.counters.writeback_entries += u64::from(batched);
        self.trims.written_back(tvpn);
        if old != NONE {
            dp.invalidate(old);
        }
        if old != NONE || self.mutant != Mutant::FirstWriteBackNotRecorded {
            self.gtd[tvpn as usize] = dst;
        }
        dp.commit_meta_page(dst);
        Ok(())
    }

    /// A page for a write-back, from the metadata stream.
    fn alloc_writeback_page(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash) -> Result<u32, FtlError> {
        // GC during allocation may move pages of this translation page
        // (updating cached entries) or the page itself.
        self.allocating_writeback = true;
        let dst = dp.alloc_meta_page(flash, self);
        self.allocating_writeback = false;
        dst
    }

    /// Program the composed translation page `tvpn` at `dst`; returns
    /// where it went. A failed program (media reliability) retires the
    /// group it went to (moving that group's valid pages, this page's old
    /// copy perhaps among them) and programs the page again elsewhere.
    fn program_tpage(
        &mut self,
        dp: &mut DataPlane,
        flash: &mut dyn Flash,
        tvpn: u32,
        mut dst: u32,
        page: &mut [u8],
    ) -> Result<u32, FtlError> {
        loop {
            // Every data page numbered below this is in the page (or newer
            // than what the page says about its logical page).
            let seq = dp.next_seq();
            persist::seal(page, persist::TPAGE_MAGIC, tvpn, seq);
            let oob = encode_oob(OOB_TRANSLATION | dp.meta_stream() << 4, tvpn, seq);
            match flash.program_meta(Cause::Metadata, page_addr(dst), page, &oob) {
                Ok(()) => return Ok(dst),
                // BUG (deliberate): mapped where the program failed.
                Err(FlashError::ProgramFailed) if self.mutant == Mutant::KeepsFailedMetaProgram => return Ok(dst),
                Err(FlashError::ProgramFailed) => {
                    self.allocating_writeback = true;
                    let retired = dp.retire_failed_groups(flash, self);
                    self.allocating_writeback = false;
                    retired?;
                    dst = self.alloc_writeback_page(dp, flash)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The bytes of translation page `tvpn` now: its copy at `old`, the
    /// mount's corrections, every dirty cached entry (which become clean).
    /// Returns how many cached entries it took.
    fn compose_tpage(&mut self, flash: &mut dyn Flash, tvpn: u32, old: u32, page: &mut [u8]) -> Result<u32, FtlError> {
        if old == NONE {
            page.fill(0xff);
        } else {
            self.counters.translation_reads += 1;
            flash.read_meta(Cause::Metadata, page_addr(old), page, &mut [])?;
        }
        let first = tvpn * self.per_tpage;
        let drops_fixes = self.mutant == Mutant::WriteBackDropsMountFixes;
        for (lpn, ppn) in self.fixes.take(tvpn) {
            if !drops_fixes {
                persist::set_entry(page, lpn - first, ppn);
            }
        }
        Ok(self.cmt.drain_dirty(tvpn, |lpn, ppn| persist::set_entry(page, lpn - first, ppn)))
    }

    /// Record that `lpn` now lives at `ppn` (GC, mount): in place when
    /// cached, else as a new dirty entry.
    fn remap_moved(&mut self, lpn: u32, ppn: u32) {
        match self.cmt.get(lpn) {
            Some(slot) => self.cmt.update(slot, ppn),
            None => {
                self.cmt.insert(lpn, ppn, true);
            }
        }
    }

    /// Write back every dirty entry (clean shutdown).
    fn write_back_all(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash) -> Result<(), FtlError> {
        // Write-backs may run GC, which dirties entries of pages already
        // written back: repeat until everything is clean.
        loop {
            let dirty: Vec<u32> = (0..self.tpages).filter(|&t| self.cmt.dirty_in(t) > 0).collect();
            if dirty.is_empty() {
                return Ok(());
            }
            for t in dirty {
                if self.cmt.dirty_in(t) > 0 {
                    self.write_back(dp, flash, t)?;
                }
            }
        }
    }

    /// Make every trim so far durable: write back each translation page
    /// holding a trimmed entry not yet on flash.
    fn persist_trims(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash) -> Result<(), FtlError> {
        if self.mutant == Mutant::ForgetsTrimsOnFlush {
            self.trims.clear();
            return Ok(());
        }
        // A write-back may run GC, whose erases persist trims too: ask
        // for the next pending page each time.
        while let Some(tvpn) = self.trims.next_page() {
            self.counters.trim_writebacks += 1;
            self.write_back(dp, flash, tvpn)?;
        }
        self.trims.clear();
        Ok(())
    }
}

impl Ftl for DftlFtl {
    fn info(&self) -> FtlInfo {
        FtlInfo { name: "dftl", guarantee: Guarantee::Baseline, oob_bytes: OOB_BYTES as u32 }
    }

    fn format(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.reset_state(flash)?;
        self.dp.format(flash)
    }

    fn mount(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.reset_state(flash)?;
        self.scan_and_rebuild(flash)
    }

    fn read(&mut self, flash: &mut dyn Flash, req: &IoRequest) -> Result<(), FtlError> {
        check_range(req.lba, u64::from(req.sectors), self.map.logical_sectors)?;
        self.dp.read(flash, &mut self.map, req)?;
        self.end_request(flash)
    }

    fn write(&mut self, flash: &mut dyn Flash, req: &IoRequest) -> Result<Durability, FtlError> {
        check_range(req.lba, u64::from(req.sectors), self.map.logical_sectors)?;
        self.dp.write(flash, &mut self.map, req)?;
        self.end_request(flash)?;
        Ok(Durability::Durable)
    }

    fn trim(&mut self, flash: &mut dyn Flash, lba: u64, sectors: u64) -> Result<(), FtlError> {
        check_range(lba, sectors, self.map.logical_sectors)?;
        self.dp.trim(flash, &mut self.map, lba, sectors)?;
        self.end_request(flash)
    }

    /// Completed writes are durable already (their pages carry their
    /// logical page and sequence number); trims become durable here.
    fn flush(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.map.persist_trims(&mut self.dp, flash)?;
        self.end_request(flash)
    }

    fn idle(&mut self, flash: &mut dyn Flash) -> Result<IdleOutcome, FtlError> {
        let outcome = self.dp.idle_step(flash, &mut self.map)?;
        if outcome == IdleOutcome::Worked {
            self.end_request(flash)?;
        }
        Ok(outcome)
    }

    fn shutdown(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        self.map.write_back_all(&mut self.dp, flash)?;
        self.map.write_erase_counts(&mut self.dp, flash)
    }

    fn prefetch(&mut self, flash: &dyn Flash, lba: u64, sectors: u32) {
        let m = &mut self.map;
        if m.gtd.is_empty() {
            return;
        }
        // Stage 2: the previous hint's cache lookups are warm now; for the
        // entries that will miss, warm their translation page bytes (the
        // request runs next) and the data pages of those that will hit.
        let (from, to) = m.hinted;
        for lpn in from..to {
            match m.cmt.get(lpn) {
                Some(slot) => match m.cmt.ppn(slot) {
                    UNMAPPED => {}
                    ppn => flash.prefetch_page(page_addr(ppn)),
                },
                None => {
                    let tppn = m.gtd[(lpn / m.per_tpage) as usize];
                    if tppn != NONE {
                        flash.prefetch_meta(page_addr(tppn), m.entry_offset(lpn));
                    }
                }
            }
        }
        // Stage 1: this hint's cache lookups.
        let spp = u64::from(m.spp);
        let first = (lba / spp) as u32;
        let last = ((lba + u64::from(sectors)).div_ceil(spp) as u32).min(m.lpns);
        for lpn in first..last {
            m.cmt.prefetch(lpn);
        }
        prefetch(&m.gtd, (first / m.per_tpage) as usize);
        m.hinted = (first, last);
    }

    fn paths(&self) -> Vec<(&'static str, u64)> {
        let c = &self.map.counters;
        let mut paths = self.dp.paths.list();
        paths.extend([
            ("cmt_evict_clean", c.evict_clean),
            ("cmt_evict_dirty", c.evict_dirty),
            ("cmt_evict_dirty_trimmed", c.evict_dirty_trimmed),
        ]);
        paths
    }

    fn stats(&self) -> FtlStats {
        let (m, d) = (&self.map, &self.dp.counters);
        let c = &m.counters;
        let mut extra = BTreeMap::new();
        let charged = m.cmt_charged_entries();
        for (k, v) in [
            ("gc_background_runs", d.gc_background_runs),
            ("gc_translation_victims", d.gc_meta_victims),
            ("cmt_hits", c.cmt_hits),
            ("cmt_misses", c.cmt_misses),
            ("cmt_cold_misses", c.cmt_cold_misses),
            ("cmt_entries", u64::from(m.cmt_capacity)),
            ("cmt_reserve_entries", u64::from(charged - m.cmt_capacity)),
            ("cmt_charged_entries", u64::from(charged)),
            ("cmt_peak_entries", u64::from(m.cmt.peak())),
            ("cmt_overflow_entries", u64::from(m.cmt.overflow())),
            ("translation_pages", u64::from(m.tpages)),
            ("translation_reads", c.translation_reads),
            ("translation_programs", c.translation_programs),
            ("translation_gc_moves", c.translation_gc_moves),
            ("writebacks", c.writebacks),
            ("writeback_entries", c.writeback_entries),
            ("trim_writebacks", c.trim_writebacks),
            ("erase_count_pages", c.erase_count_pages),
            ("rmw_reads", d.rmw_reads),
            ("trimmed_pages", d.trimmed_pages),
            ("wl_relocations", d.wl_relocations),
            ("wl_pages_moved", d.wl_pages_moved),
            ("balance_skips", self.dp.balance_skips()),
            ("busy_die_skips", self.dp.busy_die_skips()),
            ("host_multi_plane_programs", d.host_multi_plane_programs),
            ("host_single_plane_programs", d.host_single_plane_programs),
            ("gc_multi_plane_ops", d.gc_multi_plane_ops),
        ] {
            extra.insert(k.to_string(), serde_json::json!(v));
        }
        let lookups = c.cmt_hits + c.cmt_misses;
        let ratio = if lookups == 0 { 0.0 } else { c.cmt_hits as f64 / lookups as f64 };
        extra.insert("cmt_hit_ratio".into(), serde_json::json!(ratio));
        let per_writeback = if c.writebacks == 0 { 0.0 } else { c.writeback_entries as f64 / c.writebacks as f64 };
        extra.insert("writeback_batch_mean".into(), serde_json::json!(per_writeback));
        extra.insert("cmt_replacement".into(), serde_json::json!(m.opts.cmt_replacement.name()));
        self.dp.retirement_stats(&mut extra);
        self.dp.refresh_stats(&mut extra);
        let o = self.dp.options();
        extra.insert("gc_policy".into(), serde_json::json!(o.gc_policy.to_string()));
        extra.insert("hot_cold".into(), serde_json::json!(o.hot_cold.to_string()));
        extra.insert("wear_leveling".into(), serde_json::json!(o.wear_leveling.to_string()));
        extra.insert("multi_plane".into(), serde_json::json!(self.dp.multi_plane()));
        extra.insert("stream_pages".into(), serde_json::json!(d.stream_pages[..=self.dp.meta_stream() as usize]));
        let dram = m.dram_bytes(self.dp.table.erase_count.len() as u32) + self.dp.hot_cold_dram_bytes();
        let mount = vec![
            ("mount_scanned_pages", c.mount_scanned_pages),
            ("mount_corrections", c.mount_corrections),
            ("mount_writebacks", c.mount_writebacks),
            ("mount_torn_pages", c.mount_torn_pages),
            ("mount_undefined_blocks", c.mount_undefined_blocks),
        ];
        FtlStats { gc_runs: d.gc_runs, dram_bytes: dram, free_blocks: Some(self.dp.free_blocks()), mount, extra }
            .with_typed_in_extra()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oob_round_trips() {
        use crate::ftl::kit::data_plane::decode_oob;
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
