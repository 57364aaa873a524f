//! The data plane of the page-mapped FTLs (`page`, `dftl`): where pages are
//! written, how space is reclaimed, and how data of different heat and
//! blocks of different wear are kept apart. An FTL built on it keeps only
//! its map: `page` a table in DRAM with checkpoints, `dftl` translation
//! pages with a cached mapping table. The FTL lends its map to the data
//! plane through [`Mapper`] whenever pages move.
//!
//! # Allocation
//!
//! - **Units and groups** (see `layout.rs`). A *unit* has its own free
//!   *groups* and one open group per write stream, its *frontier*. Without
//!   multi-plane operations a unit is a plane and a group one block. With
//!   them (`multi_plane`, on by default when a die has 2 to 16 planes) a
//!   unit is a die and a group one block on each of its planes at the same
//!   block offset, filled row by row (page offset), so each row can be
//!   programmed with one multi-plane program and each group erased with
//!   one multi-plane erase (see `multi_plane.rs` for when rows are
//!   programmed, and why a host write never waits for a partner). A block
//!   that is bad from the factory (or fails its format erase) is left out
//!   of its group, which is then narrower: its rows are programmed on the
//!   remaining planes. GC thresholds and victims count groups, so larger
//!   erase units cost some write amplification (a group is reclaimed only
//!   when all its blocks are).
//! - **Striping.** Host pages go to the units round-robin in channel →
//!   chip → die → plane order, so consecutive pages of a request land on
//!   different channels first (with multi-plane groups the cursor stays on
//!   a die for a row, see `placement.rs`), except that a unit holding more than its
//!   share of valid data is passed over (`placement.rs`: without it,
//!   sequential sub-page writes pile every final copy onto one unit). Free
//!   groups are reused oldest-erased first (basic dynamic wear leveling)
//!   unless a wear-leveling policy chooses.
//! - **Streams** ([`super::policy::hot_cold`]): a policy assigns every host
//!   write and every GC copy a stream and each unit keeps one frontier per
//!   stream, so data of different heat is not mixed in a block. Wear
//!   leveling's moves and the FTL's own metadata pages (`dftl`'s
//!   translation pages) have streams of their own. The stream is recorded
//!   in each page's OOB (high nibble of the kind byte) and restored by a
//!   mount.
//!
//! # Garbage collection and wear leveling
//!
//! - **Foreground GC** is per unit: before a unit opens a group, if its
//!   free groups are at or below the foreground threshold, victims chosen
//!   by a [`VictimSelector`] (greedy, cost-benefit, FIFO, random,
//!   d-choices, windowed greedy) are collected until they are above it:
//!   valid pages are copied (by copyback when source and destination
//!   share a plane, unless `copyback = false`; multi-plane GC moves rows,
//!   see `multi_plane.rs`) and the victim is erased.
//!   The threshold is at least one more than the streams a GC cycle may
//!   copy into, so a cycle can always open the blocks it needs.
//! - **Background GC** ([`DataPlane::idle_step`]) collects one victim on
//!   the unit with the fewest free groups while that is below the
//!   background threshold, skipping victims with too few invalid pages.
//! - **Wear leveling** ([`super::policy::wear_leveling`]) chooses which
//!   free group a unit opens and, for `static`, moves cold data off the
//!   least-worn group of a unit after GC (cause `wear_leveling`).
//!
//! # OOB
//!
//! Every page's OOB holds a kind (low nibble) and stream (high nibble)
//! byte, a 4-byte index (the logical page of a data page, or an FTL
//! metadata index) and a 40-bit program sequence number ([`encode_oob`]).
//! GC reads a valid page's index from its OOB (no reverse map in DRAM);
//! pages of kind [`OOB_DATA`] are remapped through [`Mapper::relocate`],
//! any other kind (the FTL's metadata) is moved as metadata bytes and
//! reported the same way. An FTL may also have every full group end with
//! a *summary page* listing its data pages' OOBs, so its mount reads one
//! page per group instead of each page's OOB (see `summary.rs`).

mod gc;
mod layout;
mod lost;
pub use lost::OOB_LOST;
mod multi_plane;
pub mod paths;
mod placement;
mod refresh;
mod retire;
mod summary;

pub(crate) use layout::unit_order;
pub use summary::{SummaryRead, OOB_SUMMARY};

use crate::flash::{BufId, Cause, Flash, FlashError};
use crate::ftl::kit::policy::hot_cold::{HotColdKind, HotColdSeparator};
use crate::ftl::kit::policy::wear_leveling::{FreeBlockUse, WearLeveler, WearLevelingKind};
use crate::ftl::kit::policy::{BlockTable, VictimPolicyKind, VictimSelector};
use crate::ftl::mutants::Mutant;
use crate::ftl::{FtlError, IoRequest, OptionDoc};
use crate::nand::{BlockAddr, Geometry, PageAddr};
use crate::util::prefetch::prefetch;
use layout::Layout;
use serde::Deserialize;
use std::collections::VecDeque;

/// The OOB the data plane's FTLs write (kind and stream, index, 40-bit
/// program sequence number): the shared codec of [`crate::ftl::kit::wire::oob`].
pub use crate::ftl::kit::wire::oob::{decode_oob, encode_oob, OOB_BYTES, OOB_ERASED};
/// The OOB kind of a host data page (index = logical page).
pub const OOB_DATA: u8 = 1;
/// The kind bits of an OOB's first byte (the write stream is in the high nibble).
pub const OOB_KIND_MASK: u8 = 0x0f;

/// A map entry that points nowhere (an unwritten or trimmed logical page).
pub const UNMAPPED: u32 = u32::MAX;
/// No group, no tag.
const NONE: u32 = u32::MAX;

/// Where GC writes the pages it moves.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum GcStream {
    #[default]
    Separate,
    Shared,
}

/// Options of the data plane, shared by the FTLs built on it (see
/// [`OPTION_DOCS`] for their meaning).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataPlaneOptions {
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
    /// None: multi-plane when a die has several planes (at most 16).
    #[serde(default)]
    pub multi_plane: Option<bool>,
    /// Refresh groups whose predicted RBER nears the ECC limit (see `refresh.rs`).
    #[serde(default)]
    pub refresh: bool,
    /// Refresh at this fraction of the RBER the first decode corrects.
    #[serde(default = "default_refresh_threshold")]
    pub refresh_threshold: f64,
}

fn default_refresh_threshold() -> f64 {
    0.5
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

impl Default for DataPlaneOptions {
    fn default() -> Self {
        crate::ftl::parse_options("data plane", &crate::ftl::FtlOptions::new()).expect("defaults parse")
    }
}

/// The data plane's options, as `nandlab ftls` lists them.
pub const OPTION_DOCS: [OptionDoc; 12] = [
    OptionDoc {
        name: "gc_policy",
        default: "greedy",
        help: "victim selection: greedy, cost-benefit, fifo, random, d-choices[:d] (d = 10), \
               windowed-greedy[:window] (window = 16 blocks)",
    },
    OptionDoc {
        name: "gc_foreground_free_blocks",
        default: "2",
        help: "per unit (plane, or die with multi_plane; blocks then count in groups of one per plane): \
               collect before opening a block when free blocks are at or below this",
    },
    OptionDoc {
        name: "gc_foreground_free_percent",
        default: "0",
        help: "the same threshold as a percentage of a plane's blocks (the larger applies)",
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
    OptionDoc {
        name: "multi_plane",
        default: "2-16 planes",
        help: "true with 2-16 planes per die: allocate, erase and collect one block per plane of a die at one \
               block offset, program rows of them and move GC pages with multi-plane operations",
    },
    OptionDoc {
        name: "refresh",
        default: "false",
        help: "with the media reliability model: move a block's data and erase it when its predicted RBER \
               (wear, retention, read disturb) nears the ECC limit; reported as refresh_* metrics",
    },
    OptionDoc {
        name: "refresh_threshold",
        default: "0.5",
        help: "refresh at this fraction (0-1] of the RBER the first (hard) decode corrects",
    },
];

/// The state of a group of blocks.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum GroupState {
    Free,
    /// A frontier of some stream.
    Open,
    /// Full (or found partly written by a mount): a GC candidate.
    Sealed,
    /// Held by the FTL for its own purposes (checkpoints, logs): never collected.
    Reserved,
    /// No usable block.
    Bad,
}

/// A stream's open group and its next slot (row = page offset, member).
#[derive(Copy, Clone, Debug)]
struct Frontier {
    group: u32,
    row: u32,
    member: u32,
    width: u32,
    /// The first page of the member's block.
    block_ppn: u32,
    /// Rows data may fill: all, or all but the last with summaries (the
    /// frontier is full when it reaches the summary's row).
    rows: u32,
}

const NO_FRONTIER: Frontier = Frontier { group: NONE, row: 0, member: 0, width: 1, block_ppn: 0, rows: 0 };
/// Most planes a group spans (multi-plane operations of wider dies are not used).
pub const MAX_PLANES_PER_GROUP: usize = 16;

/// Write streams a unit may have open: the hot/cold policy's (up to 8),
/// wear leveling's and the FTL's metadata stream.
pub const MAX_STREAMS: usize = 10;

struct Unit {
    free: VecDeque<u32>,
    /// Usable blocks of the free groups (a group narrowed by bad blocks
    /// counts its good blocks only): what the GC threshold is checked on.
    free_blocks: u32,
    frontier: [Frontier; MAX_STREAMS],
}

/// Counters the FTLs report.
#[derive(Default, Clone, Debug)]
pub struct DataPlaneCounters {
    pub gc_runs: u64,
    /// Blocks retired after a program or erase failure (media
    /// reliability; see `retire.rs`).
    pub retired_blocks: u64,
    /// Groups with a grown bad block whose retirement a mount finished
    /// (scanned, its data moved off, the block dropped; see `retire.rs`).
    pub mount_grown_bad_groups: u64,
    pub gc_background_runs: u64,
    /// Victims that held the FTL's metadata pages (`dftl`: translation blocks).
    pub gc_meta_victims: u64,
    pub rmw_reads: u64,
    pub trimmed_pages: u64,
    pub wl_relocations: u64,
    pub wl_pages_moved: u64,
    /// Pages programmed per stream (host writes, copies, metadata).
    pub stream_pages: [u64; MAX_STREAMS],
    /// Multi-plane: host programs of a whole row, and of part of one.
    pub host_multi_plane_programs: u64,
    pub host_single_plane_programs: u64,
    /// Multi-plane: multi-plane copybacks and programs GC issued.
    pub gc_multi_plane_ops: u64,
    /// Pages programmed for host requests (data, read-modify-write).
    pub host_pages: u64,
    /// Summary pages programmed (see `summary.rs`).
    pub summary_pages: u64,
    /// Refreshes and the valid pages they moved (see `refresh.rs`).
    pub refresh_runs: u64,
    pub refresh_pages_moved: u64,
}

/// A map entry as the FTL looked it up: the physical page (or
/// [`UNMAPPED`]) and a tag the FTL gets back when it remaps the entry
/// (`dftl`: the cache slot).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub ppn: u32,
    pub tag: u32,
}

/// The FTL's map, as the data plane sees it. Each method is given the
/// data plane back, so a map that writes pages of its own (`dftl`'s
/// translation pages, `page`'s trim records) can allocate them.
pub trait Mapper {
    /// The current entry of logical page `lpn` (may read flash).
    fn lookup(&mut self, dp: &mut DataPlane, flash: &mut dyn Flash, lpn: u32) -> Result<Entry, FtlError>;
    /// Point `lpn` (looked up as `tag`) at `ppn` (or [`UNMAPPED`]);
    /// returns the page it pointed at, which the data plane invalidates.
    fn remap(&mut self, lpn: u32, tag: u32, ppn: u32) -> u32;
    /// GC or wear leveling moved a valid page of `kind` (OOB kind, low
    /// nibble) and `index` from `src` to `dst`.
    fn relocate(&mut self, kind: u8, index: u32, src: u32, dst: u32);
    /// A whole logical page was trimmed; its data was at `old`.
    fn trimmed(&mut self, _dp: &DataPlane, _lpn: u32, _old: u32) {}
    /// Warm the map entry of `index` (GC is about to remap it).
    fn prefetch_entry(&self, _index: u32) {}
    /// Whether looking `lpn` up leaves every other entry where it is (no
    /// cache eviction, no metadata written): staged multi-plane pages, whose
    /// entries are held by tag, are programmed first otherwise.
    fn lookup_keeps_entries(&self, _lpn: u32) -> bool {
        true
    }
    /// GC or wear leveling emptied `group` and is about to erase it.
    fn before_erase(&mut self, _dp: &mut DataPlane, _flash: &mut dyn Flash, _group: u32) -> Result<(), FtlError> {
        Ok(())
    }
    /// A GC or wear-leveling step is about to choose a group and move its
    /// valid pages (at most [`DataPlane::group_capacity_max`]), remapping
    /// each through [`Mapper::relocate`], which cannot write. A map that
    /// caches entries (`dftl`) makes room for them here, where it still may
    /// write (and so start GC steps of its own: no group is held yet).
    fn before_gc_step(&mut self, _dp: &mut DataPlane, _flash: &mut dyn Flash) -> Result<(), FtlError> {
        Ok(())
    }
}

/// The shared data plane. See the module docs.
pub struct DataPlane {
    /// The FTL's name, for messages.
    ftl: &'static str,
    geometry: Geometry,
    opts: DataPlaneOptions,
    spp: u32,
    ppb: u32,
    lpns: u32,
    layout: Layout,
    valid_bits: Vec<u64>,
    /// Per group: valid pages, seal time, unit, erase count (what policies
    /// see). A group narrowed by bad blocks counts the pages of its missing
    /// blocks as valid ones that never move, so every group has the same
    /// capacity and a policy ranks groups by what collecting them gains.
    pub(crate) table: BlockTable,
    state: Vec<GroupState>,
    /// The stream each group was opened for.
    group_stream: Vec<u8>,
    /// Factory bad and failed blocks.
    bad: Vec<bool>,
    units: Vec<Unit>,
    policy: VictimSelector,
    hot_cold: HotColdSeparator,
    wear: WearLeveler,
    wl_stream: u8,
    /// The stream of the FTL's metadata pages, if it writes any, and how
    /// many of them are live at most.
    meta_stream: Option<u8>,
    meta_pages: u32,
    balance: placement::Balance,
    fg_threshold: u32,
    bg_threshold: u32,
    host_cursor: u32,
    meta_cursor: u32,
    seq: u64,
    in_gc: bool,
    /// Logical pages lost to the media (see `lost.rs`).
    lost: crate::ftl::kit::lost_pages::LostPages,
    /// Reused by GC: (source page, OOB index, OOB kind, stream to copy to) of the victim's valid pages.
    gc_batch: Vec<(u32, u32, u8, u8)>,
    tmp_buf: Option<BufId>,
    /// One page per plane of a group: GC copies moved by read + program.
    gc_buf: Option<BufId>,
    /// Multi-plane: host pages staged for a row, and their read-modify-write data.
    staged: multi_plane::HostRow,
    stage_buf: Option<BufId>,
    /// The unit the cursor stays on for a row, and the host pages left for it.
    host_unit: u32,
    host_budget: u32,
    /// A page of metadata bytes, for moving metadata without copyback.
    meta_page: Vec<u8>,
    /// Summary pages, if the FTL enabled them (see `summary.rs`).
    summaries: Option<summary::Summaries>,
    seed: u64,
    /// A deliberate bug of the FTL built on it (checker tests): the data
    /// plane's hooks are [`Mutant::GcErasesActiveBlock`] and
    /// [`Mutant::SummaryBeforeLastPage`].
    mutant: Mutant,
    /// Whether format refuses a device whose good blocks cannot hold the
    /// logical space and the GC reserve (off only in tests of the GC guard).
    capacity_check: bool,
    /// Pages of groups the FTL takes for its own use at times (`page`'s
    /// checkpoints and trim log), which the capacity check counts as live.
    reserved_pages: u64,
    pub counters: DataPlaneCounters,
    /// Which branches of GC and wear leveling ran (`hunt`'s guidance).
    pub paths: paths::DataPlanePaths,
    /// The next group refresh's round-robin scan checks.
    refresh_cursor: u32,
}

impl DataPlane {
    /// A data plane for `ftl` over `lpns` logical pages; `meta_pages`
    /// (the most metadata pages of its own the FTL keeps live) gives the
    /// FTL a stream for them.
    pub fn new(
        ftl: &'static str,
        g: &Geometry,
        lpns: u32,
        opts: &DataPlaneOptions,
        meta_pages: Option<u32>,
        seed: u64,
    ) -> Result<DataPlane, String> {
        let planes = g.planes_per_die();
        if opts.multi_plane == Some(true) && planes as usize > MAX_PLANES_PER_GROUP {
            return Err(format!(
                "{ftl} option `multi_plane`: dies of {planes} planes; multi-plane groups span at most {MAX_PLANES_PER_GROUP}"
            ));
        }
        let per_die = planes > 1 && opts.multi_plane.unwrap_or(planes as usize <= MAX_PLANES_PER_GROUP);
        let layout = Layout::new(g, per_die);
        let per_unit = g.blocks_per_plane();
        for (key, value) in [
            ("gc_foreground_free_percent", opts.gc_foreground_free_percent),
            ("gc_background_free_percent", opts.gc_background_free_percent),
        ] {
            if !(0.0..=100.0).contains(&value) {
                return Err(format!(
                    "{ftl} option `{key}`: {value} is not a percentage (expected a number from 0 to 100)"
                ));
            }
        }
        let pct = |p: f64| (p / 100.0 * f64::from(per_unit)).ceil() as u32;
        if opts.gc_foreground_free_blocks == 0 {
            return Err(format!(
                "{ftl} option `gc_foreground_free_blocks`: must be at least 1 (GC needs a block to copy into)"
            ));
        }
        let shared = opts.gc_stream == GcStream::Shared;
        if opts.hot_cold != HotColdKind::None && shared {
            return Err(format!(
                "{ftl}: gc_stream = \"shared\" conflicts with hot_cold = \"{}\" (the hot/cold policy chooses the streams of GC copies)",
                opts.hot_cold
            ));
        }
        let hot_cold = HotColdSeparator::new(opts.hot_cold, lpns, shared);
        // A GC cycle may open one block on every stream it copies into:
        // start collecting while that many blocks are still free.
        let fg_threshold = opts
            .gc_foreground_free_blocks
            .max(pct(opts.gc_foreground_free_percent))
            .max(u32::from(hot_cold.gc_streams()) + 1);
        if fg_threshold >= per_unit {
            return Err(format!(
                "{ftl}: the foreground GC threshold ({fg_threshold} blocks) leaves no blocks per plane"
            ));
        }
        if !(opts.refresh_threshold > 0.0 && opts.refresh_threshold <= 1.0) {
            return Err(format!(
                "{ftl} option `refresh_threshold`: must be within (0, 1], got {}",
                opts.refresh_threshold
            ));
        }
        if !(0.0..=1.0).contains(&opts.gc_background_min_invalid_fraction) {
            return Err(format!("{ftl} option `gc_background_min_invalid_fraction`: must be within 0..1"));
        }
        let groups = layout.groups() as usize;
        let table = BlockTable {
            valid: vec![0; groups],
            fixed: vec![0; groups],
            sealed_at: vec![0; groups],
            unit: (0..groups as u32).map(|gr| layout.unit_of_group(gr)).collect(),
            erase_count: vec![0; groups],
            pages_per_block: g.pages_per_block() * layout.planes_per_group,
            units: layout.units(),
            now: 0,
        };
        let policy = VictimSelector::new(opts.gc_policy, groups, &table, crate::seed::derive_seed(seed, "victim"));
        let wl_stream = hot_cold.streams();
        Ok(DataPlane {
            spp: g.sectors_per_page(),
            ppb: g.pages_per_block(),
            lpns,
            valid_bits: Vec::new(),
            state: vec![GroupState::Free; groups],
            group_stream: vec![0; groups],
            bad: vec![false; g.blocks() as usize],
            units: Vec::new(),
            policy,
            wear: WearLeveler::new(opts.wear_leveling, layout.units()),
            hot_cold,
            wl_stream,
            meta_stream: meta_pages.map(|_| wl_stream + 1),
            meta_pages: meta_pages.unwrap_or(0),
            balance: placement::Balance::default(),
            fg_threshold,
            bg_threshold: pct(opts.gc_background_free_percent),
            host_cursor: 0,
            meta_cursor: 0,
            seq: 1,
            in_gc: false,
            lost: Default::default(),
            gc_batch: Vec::with_capacity((g.pages_per_block() * layout.planes_per_group) as usize),
            tmp_buf: None,
            gc_buf: None,
            staged: Default::default(),
            stage_buf: None,
            host_unit: 0,
            host_budget: 0,
            meta_page: Vec::new(),
            summaries: None,
            seed,
            mutant: Mutant::None,
            capacity_check: true,
            reserved_pages: 0,
            counters: DataPlaneCounters::default(),
            paths: paths::DataPlanePaths::default(),
            refresh_cursor: 0,
            ftl,
            table,
            layout,
            geometry: g.clone(),
            opts: opts.clone(),
        })
    }

    /// The data plane with the deliberate bug of the FTL built on it
    /// (checker tests; see [`Mutant`]).
    pub fn with_mutant(mut self, mutant: Mutant) -> DataPlane {
        self.mutant = mutant;
        self
    }

    pub fn options(&self) -> &DataPlaneOptions {
        &self.opts
    }

    /// Whether units are dies programmed with multi-plane operations.
    pub fn multi_plane(&self) -> bool {
        self.layout.planes_per_group > 1
    }

    /// The stream of wear leveling's moves.
    pub fn wl_stream(&self) -> u8 {
        self.wl_stream
    }

    /// The FTL's metadata stream.
    pub fn meta_stream(&self) -> u8 {
        self.meta_stream.expect("the FTL asked for a metadata stream")
    }

    /// Whether wear leveling moves data (it then writes its own stream).
    pub fn wear_relocates(&self) -> bool {
        self.wear.relocates()
    }

    pub fn hot_cold_is_none(&self) -> bool {
        self.hot_cold.is_none()
    }

    /// Device DRAM the hot/cold policy's state takes.
    pub fn hot_cold_dram_bytes(&self) -> u64 {
        self.hot_cold.dram_bytes()
    }

    /// Power-on: forget everything (the maps are rebuilt by format or mount).
    pub fn reset(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        let g = &self.geometry;
        self.valid_bits = vec![0; g.pages().div_ceil(64) as usize];
        self.table.valid.fill(0);
        self.table.sealed_at.fill(0);
        self.table.erase_count.fill(0);
        self.group_stream.fill(0);
        self.units = (0..self.layout.units())
            .map(|_| Unit { free: VecDeque::new(), free_blocks: 0, frontier: [NO_FRONTIER; MAX_STREAMS] })
            .collect();
        let victim_seed = crate::seed::derive_seed(self.seed, "victim");
        let groups = self.layout.groups() as usize;
        self.policy = VictimSelector::new(self.opts.gc_policy, groups, &self.table, victim_seed);
        let shared = self.opts.gc_stream == GcStream::Shared;
        self.hot_cold = HotColdSeparator::new(self.opts.hot_cold, self.lpns, shared);
        self.wear = WearLeveler::new(self.opts.wear_leveling, self.layout.units());
        self.host_cursor = 0;
        self.meta_cursor = 0;
        self.balance.unit_valid = vec![0; self.layout.units() as usize];
        self.seq = 1;
        self.in_gc = false;
        self.lost.clear();
        self.host_budget = 0;
        self.staged = Default::default();
        self.reset_summaries();
        if self.tmp_buf.is_none() {
            let per_group = self.spp * self.layout.planes_per_group;
            self.tmp_buf = Some(flash.buf_alloc(self.spp)?);
            self.gc_buf = Some(flash.buf_alloc(per_group)?);
            if self.layout.planes_per_group > 1 {
                self.stage_buf = Some(flash.buf_alloc(per_group)?);
            }
        }
        Ok(())
    }

    /// First power-on: erase every good block; every usable group is free.
    pub fn format(&mut self, flash: &mut dyn Flash) -> Result<(), FtlError> {
        for block in 0..self.geometry.blocks() {
            let addr = BlockAddr(u64::from(block));
            self.bad[block as usize] = flash.is_factory_bad(addr);
            if self.bad[block as usize] {
                continue;
            }
            match flash.erase(Cause::Format, addr) {
                Ok(()) => {}
                Err(FlashError::EraseFailed | FlashError::BadBlock) => self.bad[block as usize] = true,
                Err(e) => return Err(e.into()),
            }
        }
        self.layout.set_members(&self.bad);
        self.count_missing_blocks();
        for group in 0..self.layout.groups() {
            if self.layout.width(group) == 0 {
                self.state[group as usize] = GroupState::Bad;
                continue;
            }
            self.table.erase_count[group as usize] += 1;
            self.state[group as usize] = GroupState::Free;
            self.push_free(group);
        }
        self.set_unit_caps();
        if self.capacity_check {
            self.check_capacity()?;
        }
        Ok(())
    }

    /// The FTL holds up to `groups` groups of its own at a time (taken with
    /// [`DataPlane::take_free_group`]): format requires room for them.
    pub fn reserve_groups(&mut self, groups: u32) {
        self.reserved_pages = u64::from(groups) * u64::from(self.group_capacity_max());
    }

    /// A test of what happens when the good blocks do not suffice: format
    /// accepts any device.
    #[cfg(test)]
    pub(crate) fn without_capacity_check(&mut self) {
        self.capacity_check = false;
    }

    /// Format: refuse a device whose good blocks cannot hold the logical
    /// space and what garbage collection needs. GC moves pages only within
    /// a unit, and placement gives each unit a share of the live pages in
    /// proportion to its usable pages (`placement.rs`). Besides its share,
    /// a unit must hold the room garbage collection works in
    /// ([`DataPlane::gc_room_groups`], counted in usable pages: a group
    /// narrowed by bad blocks holds less): GC collects until more than
    /// `fg_threshold` full groups are free and gives up when it cannot get
    /// back to that many; with hot/cold streams its copies go to several
    /// partly written groups, and one more group is needed. With less, once
    /// the logical space is written GC copies nearly full victims without
    /// getting there ("makes no progress"). The open groups of every
    /// stream are not all counted: each is partly written at any time, and
    /// counting each as a whole group refuses drives that run (`tiny` with
    /// DAC's four streams and static wear leveling at 15 % spare runs full
    /// workloads on 5.9 groups of room per die, where five whole open
    /// groups and the threshold make 9); a unit without factory bad blocks
    /// is held only to the room per stream, as before (see
    /// [`DataPlane::gc_room_groups`]). This is the least a unit needs, not
    /// what runs well: a unit just above it collects nearly full
    /// victims (high write amplification). The message reports the unit
    /// with the fewest usable pages among those short of it.
    ///
    /// Before `hunt` found `page` failing on devices format had accepted
    /// (docs/design-notes/hunt.md), only the room per stream was counted:
    /// DAC's four-region threshold (4 groups) and a die short of factory
    /// bad blocks made GC run dry. Without hot/cold streams the bound is
    /// what it was (every device accepted before still is).
    fn check_capacity(&self) -> Result<(), FtlError> {
        let units = self.layout.units();
        let (mut pages, mut blocks) = (vec![0u64; units as usize], vec![0u64; units as usize]);
        for group in 0..self.layout.groups() {
            if self.layout.width(group) > 0 {
                let u = self.unit_of(group);
                pages[u] += u64::from(self.data_capacity(group));
                blocks[u] += u64::from(self.layout.width(group));
            }
        }
        let total: u64 = pages.iter().sum();
        let live = u64::from(self.lpns) + u64::from(self.meta_pages) + self.reserved_pages;
        // A unit with factory bad blocks needs the GC room; one without
        // them the room per stream (what was checked before hunt's finding:
        // such units run on less, see `gc_room_groups`).
        let per_unit_blocks = u64::from(self.geometry.blocks_per_plane() * self.layout.planes_per_group);
        let group_pages = u64::from(self.group_capacity_max());
        let groups_for = |u: usize| {
            if blocks[u] < per_unit_blocks {
                self.gc_room_groups()
            } else {
                self.stream_room_groups()
            }
        };
        // Unit u holds live · pages[u] / total pages and keeps the room of
        // groups_for(u) more: pages[u] - share > room, multiplied out by `total`.
        let fits = |u: usize| total > live && pages[u] * (total - live) > groups_for(u) * group_pages * total;
        let Some(u) = (0..units as usize).filter(|&u| !fits(u)).min_by_key(|&u| pages[u]) else {
            return Ok(());
        };
        let gc_groups = groups_for(u);
        let open = gc_groups * group_pages;
        let share = (live * pages[u]).checked_div(total).unwrap_or(live);
        // Data pages of a block (a group's summary row excluded).
        let per_block = (u64::from(self.data_capacity_full()) / u64::from(self.layout.planes_per_group)).max(1);
        let needed_blocks = (share + open + 1).div_ceil(per_block);
        let what = if self.layout.planes_per_group > 1 { "die" } else { "plane" };
        let mut msg = format!(
            "{}: {what} {u} has {} good blocks ({} pages for data), needs at least {needed_blocks}: its share of \
             the logical capacity{} is {share} pages, and garbage collection needs the room of {gc_groups} \
             groups of {} pages (it collects until more than {} are free)",
            self.ftl,
            blocks[u],
            pages[u],
            if self.meta_pages + self.reserved_pages as u32 > 0 { " and the FTL's metadata" } else { "" },
            self.group_capacity_max(),
            self.fg_threshold,
        );
        // The largest logical capacity every unit holds: total - live' > open · total / pages[u].
        let min_pages = pages.iter().copied().min().unwrap_or(0);
        let live_max = match min_pages {
            0 => 0,
            p => total.saturating_sub(open * total / p + 1),
        };
        let logical_max =
            live_max.saturating_sub(u64::from(self.meta_pages) + self.reserved_pages) * u64::from(self.spp);
        let mut remedies = Vec::new();
        if logical_max > 0 {
            let raw = self.geometry.pages() * u64::from(self.spp);
            let spare = 100.0 - logical_max as f64 * 100.0 / raw as f64;
            remedies.push(format!(
                "lower the logical capacity to at most {logical_max} sectors (`device.spare_percent` at least {:.1})",
                (spare * 10.0).ceil() / 10.0
            ));
        }
        if self.bad.iter().any(|&b| b) {
            remedies.push("lower `device.factory_bad_block_percent`".to_string());
        } else if total > live - self.reserved_pages {
            // The blocks per plane at which each unit has room for its
            // open groups, the logical capacity growing with the device (a
            // spare percentage) and the FTL's own groups staying as they are:
            // k blocks per plane for every one now gives the unit
            // k·pages·(k·total - k·logical - reserved) / (k·total) > open.
            let bpp = u64::from(self.geometry.blocks_per_plane());
            let logical = live - self.reserved_pages;
            let k_times = (open * total).div_ceil(pages[u]) + self.reserved_pages;
            let min_bpp = (bpp * k_times).div_ceil(total - logical) + 1;
            remedies.push(format!("raise `geometry.blocks_per_plane` to at least {min_bpp}"));
        }
        if !remedies.is_empty() {
            msg += "; ";
            msg += &remedies.join(" or ");
        }
        Err(FtlError::NoSpace(msg))
    }

    /// Data pages of a group without bad blocks.
    fn data_capacity_full(&self) -> u32 {
        let summary_rows = u32::from(self.summaries.is_some());
        self.group_capacity_max() - summary_rows * self.layout.planes_per_group
    }

    /// Full groups of room a unit needs beyond its share of the live data
    /// (see [`DataPlane::check_capacity`]): one per write stream open at
    /// once as far as host data and GC copies go (host and GC streams, at
    /// most two, and the metadata stream), and at least the foreground GC
    /// threshold, one more when GC copies into several streams (hot/cold:
    /// its copies spread over several partly written groups).
    ///
    /// Units with factory bad blocks need it: every `ftl_out_of_space`
    /// hunt found on devices format accepted had them (a short die, narrow
    /// groups), while units without them run full workloads on less
    /// (`tiny` with DAC at 12 % spare: 3.9 groups against a threshold of 4;
    /// DAC with 8 regions at 15 %: 5.9 against 8), so those keep the
    /// per-stream bound ([`DataPlane::stream_room_groups`]). Empirical, not
    /// a proof; docs/design-notes/hunt.md.
    fn gc_room_groups(&self) -> u64 {
        let threshold = u64::from(self.fg_threshold) + u64::from(self.hot_cold.gc_streams() > 1);
        self.stream_room_groups().max(threshold)
    }

    /// One group per stream open for host data and GC copies (at most
    /// two) and for the FTL's metadata: the bound before hunt's finding.
    fn stream_room_groups(&self) -> u64 {
        u64::from(self.hot_cold.streams().min(2)) + u64::from(self.meta_stream.is_some())
    }

    /// Streams the placement caps keep a group for (see `placement.rs`).
    fn reserved_streams(&self) -> u64 {
        u64::from(self.meta_stream.unwrap_or(self.wl_stream)) + 1
    }

    /// Mount, before the FTL scans: learn the factory bad blocks. A grown
    /// bad block stays a member of its group for the scan: its readable
    /// pages may hold data a cut kept from moving off (see `retire.rs`).
    pub fn begin_mount(&mut self, flash: &dyn Flash) {
        let forgets = self.mutant == Mutant::MountForgetsBadBlocks;
        let skips_grown = self.mutant == Mutant::MountSkipsGrownBadBlocks;
        for block in 0..self.geometry.blocks() {
            let addr = BlockAddr(u64::from(block));
            let scanned = flash.is_grown_bad(addr) && !skips_grown; // BUG (deliberate) when skipped
            self.bad[block as usize] = !forgets && !scanned && flash.is_factory_bad(addr);
        }
        self.layout.set_members(&self.bad);
        self.count_missing_blocks();
    }

    /// Count each group's fixed pages as valid (see `table`).
    fn count_missing_blocks(&mut self) {
        for group in 0..self.layout.groups() {
            let fixed = self.fixed_pages(group);
            self.table.fixed[group as usize] = fixed;
            self.table.valid[group as usize] = fixed;
        }
    }

    /// Pages of `group` that never hold data: those of its bad blocks and
    /// its summary row. Policies see them as valid pages that never move.
    fn fixed_pages(&self, group: u32) -> u32 {
        self.table.pages_per_block - self.data_capacity(group)
    }

    /// Pages of `group` data can go to (all but its summary row).
    fn data_capacity(&self, group: u32) -> u32 {
        self.layout.capacity(group) - self.summary_rows(group) * self.layout.width(group)
    }

    /// Whether a mount scan should skip `block` (factory bad).
    pub fn is_bad_block(&self, block: u32) -> bool {
        self.bad[block as usize]
    }

    /// Mount, after the FTL marked the valid pages: every group with no
    /// written page is free, every other one sealed (partly written groups
    /// are not appended to after a power cycle: they are left to GC),
    /// except those the FTL holds (`reserved`).
    pub fn finish_mount(&mut self, written_pages: &[u32], reserved: impl Fn(u32) -> bool) {
        for group in 0..self.layout.groups() {
            let gi = group as usize;
            if self.layout.width(group) == 0 {
                self.state[gi] = GroupState::Bad;
                continue;
            }
            if reserved(group) {
                self.state[gi] = GroupState::Reserved;
            } else if self.layout.members(group).iter().all(|&b| written_pages[b as usize] == 0) {
                self.state[gi] = GroupState::Free;
                self.push_free(group);
            } else {
                self.state[gi] = GroupState::Sealed;
                self.table.sealed_at[gi] = self.seq;
                self.policy.insert(group, &self.table);
            }
        }
        self.set_unit_caps();
    }

    // ----- addresses -----

    #[inline]
    pub fn group_of_ppn(&self, ppn: u32) -> u32 {
        self.layout.group_of_block(self.layout.block_of_ppn(ppn))
    }

    pub fn group_of_block(&self, block: u32) -> u32 {
        self.layout.group_of_block(block)
    }

    fn unit_of(&self, group: u32) -> usize {
        self.table.unit[group as usize] as usize
    }

    /// Pages `group` holds.
    pub fn group_capacity(&self, group: u32) -> u32 {
        self.layout.capacity(group)
    }

    /// Groups (used or not; see [`DataPlane::group_members`]).
    pub fn groups(&self) -> u32 {
        self.layout.groups()
    }

    /// The usable blocks of `group` (none: a group of bad blocks).
    pub fn group_members(&self, group: u32) -> &[u32] {
        self.layout.members(group)
    }

    /// Pages a group without bad blocks holds.
    pub fn group_capacity_max(&self) -> u32 {
        self.ppb * self.layout.planes_per_group
    }

    /// The page at `slot` of `group` (row by row, member by member).
    pub fn group_slot_ppn(&self, group: u32, slot: u32) -> u32 {
        self.layout.slot_ppn(group, slot)
    }

    pub fn group_state(&self, group: u32) -> GroupState {
        self.state[group as usize]
    }

    /// The stream `group` was written for.
    pub fn group_stream(&self, group: u32) -> u8 {
        self.group_stream[group as usize]
    }

    /// Mount: the pages of `block` were written for `stream`.
    pub fn set_block_stream(&mut self, block: u32, stream: u8) {
        let group = self.layout.group_of_block(block);
        self.group_stream[group as usize] = stream;
    }

    pub fn units(&self) -> usize {
        self.units.len()
    }

    pub fn unit_free_groups(&self, unit: usize) -> usize {
        self.units[unit].free.len()
    }

    /// Put the emptied `group` at the end of its unit's free groups.
    pub(super) fn push_free(&mut self, group: u32) {
        let width = self.layout.width(group);
        let unit = &mut self.units[self.table.unit[group as usize] as usize];
        unit.free.push_back(group);
        unit.free_blocks += width;
    }

    /// Take the free group at position `at` of `unit`'s free groups.
    fn remove_free(&mut self, unit: usize, at: usize) -> Option<u32> {
        let group = self.units[unit].free.remove(at)?;
        self.units[unit].free_blocks -= self.layout.width(group);
        Some(group)
    }

    /// Whether `unit`'s free groups hold no more room than the foreground
    /// GC threshold: `fg_threshold` groups of full width. The room is
    /// counted in blocks, not groups, so that groups narrowed by bad
    /// blocks (multi-plane: an other-plane block bad) count for what they
    /// hold: a GC cycle copying a full victim into half-width groups needs
    /// two of them, and a threshold counted in groups left it none (a
    /// finding of `hunt`, see docs/design-notes/hunt.md). Without bad
    /// blocks this is `free groups <= fg_threshold`.
    #[inline]
    pub(super) fn needs_gc(&self, unit: usize) -> bool {
        self.units[unit].free_blocks <= self.fg_threshold * self.layout.planes_per_group
    }

    fn total_free_groups(&self) -> usize {
        self.units.iter().map(|u| u.free.len()).sum()
    }

    /// Usable blocks in free groups (the `free_blocks` statistic).
    pub fn free_blocks(&self) -> u64 {
        self.units.iter().flat_map(|u| u.free.iter()).map(|&g| u64::from(self.layout.width(g))).sum()
    }

    pub fn fg_threshold(&self) -> u32 {
        self.fg_threshold
    }

    // ----- sequence numbers -----

    /// The sequence number the next program gets (not taken).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Mount: programs from now on are numbered after `max_seen`.
    pub fn set_seq_after(&mut self, max_seen: u64) {
        self.seq = max_seen + 1;
        self.table.now = self.seq;
    }

    pub fn next_seq(&mut self) -> u64 {
        let s = self.seq;
        self.seq += 1;
        self.table.now = self.seq;
        s
    }

    // ----- valid pages -----

    #[inline]
    pub fn is_valid(&self, ppn: u32) -> bool {
        self.valid_bits[(ppn / 64) as usize] & (1 << (ppn % 64)) != 0
    }

    /// `ppn` no longer holds current data.
    #[inline]
    pub fn invalidate(&mut self, ppn: u32) {
        let group = self.group_of_ppn(ppn);
        self.valid_bits[(ppn / 64) as usize] &= !(1 << (ppn % 64));
        let old = self.table.valid[group as usize];
        self.table.valid[group as usize] = old - 1;
        self.balance.unit_valid[self.table.unit[group as usize] as usize] -= 1;
        if self.state[group as usize] == GroupState::Sealed {
            self.policy.invalidated(group, old, &self.table);
        }
    }

    /// Mount: `ppn` holds current data.
    pub fn mark_valid(&mut self, ppn: u32) {
        let group = self.group_of_ppn(ppn);
        self.valid_bits[(ppn / 64) as usize] |= 1 << (ppn % 64);
        self.table.valid[group as usize] += 1;
        self.balance.unit_valid[self.table.unit[group as usize] as usize] += 1;
    }

    /// Mount (deliberately broken recovery only): forget that `ppn` holds data.
    pub fn clear_valid(&mut self, ppn: u32) {
        if self.is_valid(ppn) {
            self.valid_bits[(ppn / 64) as usize] &= !(1 << (ppn % 64));
            let group = self.group_of_ppn(ppn);
            self.table.valid[group as usize] -= 1;
            self.balance.unit_valid[self.table.unit[group as usize] as usize] -= 1;
        }
    }

    /// Record that the just-programmed `ppn` holds valid data; seal its
    /// group when this was the group's last page. (A new page adds to its
    /// unit's valid count, which the caller knows; a GC copy within a unit
    /// leaves it unchanged.)
    #[inline]
    fn commit_page(&mut self, ppn: u32) {
        let block = self.layout.block_of_ppn(ppn);
        let group = self.layout.group_of_block(block);
        self.valid_bits[(ppn / 64) as usize] |= 1 << (ppn % 64);
        self.table.valid[group as usize] += 1;
        if ppn - block * self.ppb == self.ppb - 1 && self.is_last_member(group, block) {
            self.seal(group);
        }
    }

    #[inline]
    fn is_last_member(&self, group: u32, block: u32) -> bool {
        self.layout.planes_per_group == 1 || self.layout.member(group, self.layout.width(group) - 1) == block
    }

    fn seal(&mut self, group: u32) {
        if self.mutant == Mutant::GcErasesActiveBlock {
            self.policy.remove(group, &self.table); // it may be a candidate already
        }
        self.state[group as usize] = GroupState::Sealed;
        self.table.sealed_at[group as usize] = self.seq;
        let unit = self.unit_of(group);
        for f in &mut self.units[unit].frontier {
            if f.group == group {
                *f = NO_FRONTIER;
            }
        }
        self.policy.insert(group, &self.table);
    }

    /// Warm what an overwrite of `ppn` will update (valid bit, group
    /// count) and the page itself.
    pub fn prefetch_page_state(&self, flash: &dyn Flash, ppn: u32) {
        prefetch(&self.valid_bits, (ppn / 64) as usize);
        prefetch(&self.table.valid, self.group_of_ppn(ppn) as usize);
        flash.prefetch_page(PageAddr(u64::from(ppn)));
    }

    /// Mount: the stream of `lpn`'s current data at `ppn`, for the hot/cold policy.
    pub fn restore_stream(&mut self, lpn: u32, ppn: u32) {
        let stream = self.group_stream[self.group_of_ppn(ppn) as usize];
        self.hot_cold.restore(lpn, stream);
    }

    // ----- allocation -----

    /// The next page to program on `unit` for `stream`, collecting garbage
    /// first if the unit is short of free groups.
    #[inline(always)]
    pub fn alloc_page<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        unit: usize,
        stream: u8,
    ) -> Result<u32, FtlError> {
        match self.take_slot(unit, stream) {
            Some(ppn) => Ok(ppn),
            None => self.alloc_page_slow(flash, m, unit, stream),
        }
    }

    /// [`DataPlane::alloc_page`] when the frontier is full: collect, open a group.
    #[inline(never)]
    fn alloc_page_slow<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        unit: usize,
        stream: u8,
    ) -> Result<u32, FtlError> {
        loop {
            if !self.in_gc && self.needs_gc(unit) {
                self.foreground_gc(flash, m, unit)?;
                self.collected_on(flash, unit);
            }
            // GC may have opened a frontier group with room (shared stream).
            if !self.frontier_has_room(unit, stream) {
                self.open_group(unit, stream)?;
            }
            if let Some(ppn) = self.take_slot(unit, stream) {
                return Ok(ppn);
            }
        }
    }

    #[inline]
    fn frontier_has_room(&self, unit: usize, stream: u8) -> bool {
        let f = &self.units[unit].frontier[stream as usize];
        f.group != NONE && f.row < f.rows
    }

    /// The frontier's next page, if it has one.
    #[inline(always)]
    fn take_slot(&mut self, unit: usize, stream: u8) -> Option<u32> {
        let ppb = self.ppb;
        let f = &mut self.units[unit].frontier[stream as usize];
        if f.group == NONE || f.row >= f.rows {
            return None;
        }
        let ppn = f.block_ppn + f.row;
        if f.width == 1 {
            f.row += 1;
        } else {
            f.member += 1;
            if f.member == f.width {
                f.member = 0;
                f.row += 1;
            }
            f.block_ppn = self.layout.member(f.group, f.member) * ppb;
        }
        self.counters.stream_pages[stream as usize] += 1;
        Some(ppn)
    }

    /// Open a free group of `unit` (the one wear leveling chooses) as the
    /// frontier of `stream`.
    fn open_group(&mut self, unit: usize, stream: u8) -> Result<(), FtlError> {
        let use_ = if stream == self.wl_stream { FreeBlockUse::ColdData } else { FreeBlockUse::Data };
        let at = self.wear.choose_free(&self.units[unit].free, &self.table, use_);
        let group = self
            .remove_free(unit, at)
            .ok_or_else(|| FtlError::NoSpace(format!("plane unit {unit} has no free block and nothing to collect")))?;
        self.state[group as usize] = GroupState::Open;
        self.group_stream[group as usize] = stream;
        let (width, block_ppn) = (self.layout.width(group), self.layout.member(group, 0) * self.ppb);
        let rows = self.ppb - self.summary_rows(group);
        self.units[unit].frontier[stream as usize] = Frontier { group, row: 0, member: 0, width, block_ppn, rows };
        if self.mutant == Mutant::GcErasesActiveBlock && stream >= 1 && !self.hot_cold.is_none() {
            // BUG (deliberate): a hot region's open group becomes a GC candidate.
            self.policy.insert(group, &self.table);
        }
        Ok(())
    }

    /// Take a free group of `unit` for the FTL's own use (checkpoints,
    /// logs), or None if it has none.
    pub fn take_free_group(&mut self, unit: usize) -> Option<u32> {
        let group = self.remove_free(unit, 0)?;
        self.state[group as usize] = GroupState::Reserved;
        Some(group)
    }

    /// Whether `unit` can give up a full group and still hold the GC
    /// reserve: `fg_threshold` full groups of free room, what one
    /// foreground GC cycle needs to copy a victim into when the unit has no
    /// partly written group to copy into (after a mount sealed them all).
    /// A group taken without collecting first (a checkpoint, the trim log,
    /// a metadata page written inside another unit's GC cycle) from a unit
    /// that cannot spare it left GC a narrow group too small for its victim
    /// (hunt: page seed 1199, dftl seed 642; docs/design-notes/hunt.md).
    fn spares_a_group(&self, unit: usize) -> bool {
        self.units[unit].free_blocks >= (self.fg_threshold + 1) * self.layout.planes_per_group
    }

    /// A page of the FTL's metadata stream on the next unit in turn.
    ///
    /// Inside a GC cycle the unit cannot collect before opening a group
    /// (GC does not nest), so a unit whose metadata group is full and that
    /// cannot spare a free group is passed over for the next one that can
    /// (or whose metadata group has room); if none can, the unit in turn
    /// takes it as before.
    pub fn alloc_meta_page<M: Mapper>(&mut self, flash: &mut dyn Flash, m: &mut M) -> Result<u32, FtlError> {
        debug_assert!(self.staged.is_empty(), "metadata is written only when no host page is staged");
        let mut unit = self.next_meta_unit();
        let stream = self.meta_stream();
        if self.in_gc && !self.frontier_has_room(unit, stream) && !self.spares_a_group(unit) {
            let units = self.units.len();
            let other = (1..units)
                .map(|k| (unit + k) % units)
                .find(|&u| self.frontier_has_room(u, stream) || self.spares_a_group(u));
            unit = other.unwrap_or(unit);
        }
        self.alloc_page(flash, m, unit, stream)
    }

    /// The just-programmed metadata page `ppn` holds current data.
    pub fn commit_meta_page(&mut self, ppn: u32) {
        let unit = self.unit_of(self.group_of_ppn(ppn));
        self.balance.unit_valid[unit] += 1;
        self.commit_page(ppn);
    }

    // ----- host requests -----

    /// Read a host request through the map.
    #[inline]
    pub fn read<M: Mapper>(&mut self, flash: &mut dyn Flash, m: &mut M, req: &IoRequest) -> Result<(), FtlError> {
        let mut read_ppns = (UNMAPPED, UNMAPPED);
        for (lpn, in_page, n, at) in pieces(self.spp, req.lba, u64::from(req.sectors)) {
            match m.lookup(self, flash, lpn)?.ppn {
                UNMAPPED => {
                    self.check_lost(lpn)?;
                    flash.buf_zero(req.buf, at, n)?
                }
                ppn => match self.check_lost(lpn).and_then(|()| {
                    flash
                        .read(Cause::Host, PageAddr(u64::from(ppn)), in_page, n, req.buf, at, &mut [])
                        .map_err(Into::into)
                }) {
                    Ok(()) => {
                        if read_ppns.0 == UNMAPPED {
                            read_ppns.0 = ppn;
                        }
                        read_ppns.1 = ppn;
                    }
                    // BUG (deliberate): the undecodable data goes to the host.
                    Err(FtlError::Flash(FlashError::Uncorrectable))
                        if self.mutant == Mutant::IgnoresUncorrectableRead => {}
                    Err(e) => return Err(e),
                },
            }
        }
        if self.mutant == Mutant::SpuriousReadError {
            self.spurious_read_error(flash, m, req)?;
        }
        if self.opts.refresh && read_ppns.0 != UNMAPPED {
            self.refresh_after_read(flash, m, read_ppns.0, read_ppns.1)?;
        }
        Ok(())
    }

    /// Write a host request: whole pages from the host buffer, partial
    /// pages by read-modify-write through a one-page buffer
    /// (never-written sectors are filled with zeros, so they read as zeros).
    #[inline]
    pub fn write<M: Mapper>(&mut self, flash: &mut dyn Flash, m: &mut M, req: &IoRequest) -> Result<(), FtlError> {
        if self.opts.refresh {
            self.refresh_scan_step(flash, m)?;
        }
        for (lpn, in_page, n, at) in pieces(self.spp, req.lba, u64::from(req.sectors)) {
            if n == self.spp {
                self.program_lpn(flash, m, lpn, req.buf, at)?;
            } else {
                let (buf, first) = self.rmw_buffer();
                self.load_page(flash, m, lpn, buf, first)?;
                let in_page = if self.mutant == Mutant::RmwAtWrongOffset { 0 } else { in_page };
                flash.buf_copy(buf, first + in_page, req.buf, at, n)?;
                self.program_lpn(flash, m, lpn, buf, first)?;
            }
        }
        self.end_host_request(flash, m)
    }

    /// Trim sectors: whole pages are unmapped; sectors of a page trimmed
    /// alone are rewritten as zeros (they must read as zeros).
    pub fn trim<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        lba: u64,
        sectors: u64,
    ) -> Result<(), FtlError> {
        for (lpn, in_page, n, _) in pieces(self.spp, lba, sectors) {
            let e = self.lookup(flash, m, lpn)?;
            if e.ppn == UNMAPPED {
                if n == self.spp {
                    self.found_again(lpn);
                }
                continue;
            }
            if n == self.spp {
                let old = m.remap(lpn, e.tag, UNMAPPED);
                if self.mutant != Mutant::TrimSkipsInvalidate {
                    self.invalidate(old);
                }
                self.hot_cold.trimmed(lpn);
                self.counters.trimmed_pages += 1;
                m.trimmed(self, lpn, old);
            } else {
                if self.mutant == Mutant::TrimSpinsAtPageEnd && in_page + n == self.spp {
                    loop {
                        std::hint::spin_loop(); // BUG (deliberate): see the mutant
                    }
                }
                let (buf, first) = self.rmw_buffer();
                self.load_page(flash, m, lpn, buf, first)?;
                while self.mutant == Mutant::TrimRereadsAtPageEnd && in_page + n == self.spp {
                    self.load_page(flash, m, lpn, buf, first)?; // BUG (deliberate): see the mutant
                }
                if self.mutant == Mutant::PartialTrimZeroesWholePage {
                    flash.buf_zero(buf, first, self.spp)?;
                } else {
                    flash.buf_zero(buf, first + in_page, n)?;
                }
                self.program_lpn(flash, m, lpn, buf, first)?;
            }
        }
        self.end_host_request(flash, m)
    }

    /// A host request is done: program what is staged; the next request
    /// starts on the next unit.
    #[inline]
    fn end_host_request<M: Mapper>(&mut self, flash: &mut dyn Flash, m: &mut M) -> Result<(), FtlError> {
        if self.layout.planes_per_group == 1 {
            return Ok(());
        }
        self.host_budget = 0;
        self.flush_host_row(flash, m)
    }

    /// The map entry of `lpn`. Staged pages are programmed first when
    /// looking it up may disturb the map (a cache miss may evict entries
    /// they are to update, or write translation pages).
    #[inline]
    fn lookup<M: Mapper>(&mut self, flash: &mut dyn Flash, m: &mut M, lpn: u32) -> Result<Entry, FtlError> {
        if !self.staged.is_empty() && !m.lookup_keeps_entries(lpn) {
            self.flush_host_row(flash, m)?;
        }
        m.lookup(self, flash, lpn)
    }

    /// Program one logical page from `buf` at `sector` and remap it
    /// (multi-plane: stage it for its row).
    fn program_lpn<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        lpn: u32,
        buf: BufId,
        sector: u32,
    ) -> Result<(), FtlError> {
        if self.layout.planes_per_group > 1 {
            return self.stage_lpn(flash, m, lpn, buf, sector);
        }
        let e = m.lookup(self, flash, lpn)?;
        let unit = self.next_plane_unit(flash);
        let stream = self.host_stream(lpn, e.ppn);
        // The entry stays valid through allocation: GC may move the old
        // copy (the map is read again when remapping) but never evicts it.
        let ppn = loop {
            let ppn = self.alloc_page(flash, m, unit, stream)?;
            let oob = encode_oob(OOB_DATA | stream << 4, lpn, self.next_seq());
            self.summary_entry(flash, ppn, &oob)?;
            match flash.program(Cause::Host, PageAddr(u64::from(ppn)), buf, sector, &oob) {
                Ok(()) => break ppn,
                Err(FlashError::ProgramFailed) => {
                    self.retire_after_program_failure(flash, m, self.group_of_ppn(ppn))?;
                    if self.mutant == Mutant::KeepsFailedProgram {
                        break ppn; // BUG (deliberate): mapped to the failed page
                    }
                }
                Err(e) => return Err(e.into()),
            }
        };
        self.host_page_programmed(m, unit, lpn, e.tag, ppn);
        self.write_due_summary_or_retire(flash, m)
    }

    /// Host page `lpn` (looked up as `tag`) was programmed at `ppn` on
    /// `unit`: remap it, invalidate its old copy.
    #[inline(always)]
    fn host_page_programmed<M: Mapper>(&mut self, m: &mut M, unit: usize, lpn: u32, tag: u32, ppn: u32) {
        self.found_again(lpn);
        let old = m.remap(lpn, tag, ppn);
        if old != UNMAPPED {
            self.invalidate(old);
        }
        self.balance.unit_valid[unit] += 1;
        self.counters.host_pages += 1;
        self.commit_page(ppn);
    }

    /// [`DataPlane::program_lpn`] with multi-plane groups.
    #[inline(never)]
    fn stage_lpn<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        lpn: u32,
        buf: BufId,
        sector: u32,
    ) -> Result<(), FtlError> {
        let e = self.lookup(flash, m, lpn)?;
        let stream = self.host_stream(lpn, e.ppn);
        let unit = self.next_host_unit(flash, stream);
        self.stage_host_page(flash, m, unit, stream, lpn, e.tag, buf, sector)
    }

    /// The stream of a host write of `lpn`, whose data is now at `current`.
    #[inline(always)]
    fn host_stream(&mut self, lpn: u32, current: u32) -> u8 {
        let (group_stream, layout) = (&self.group_stream, &self.layout);
        self.hot_cold.host_stream(lpn, || match current {
            UNMAPPED => None,
            old => Some(group_stream[layout.group_of_block(layout.block_of_ppn(old)) as usize]),
        })
    }

    /// Load logical page `lpn` into `buf` from sector `first` (zeros if unmapped).
    fn load_page<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        lpn: u32,
        buf: BufId,
        first: u32,
    ) -> Result<(), FtlError> {
        match self.lookup(flash, m, lpn)?.ppn {
            UNMAPPED => {
                self.check_lost(lpn)?;
                flash.buf_zero(buf, first, self.spp)?
            }
            ppn => {
                self.check_lost(lpn)?;
                self.counters.rmw_reads += 1;
                flash.read(Cause::Host, PageAddr(u64::from(ppn)), 0, self.spp, buf, first, &mut [])?;
            }
        }
        Ok(())
    }

    /// The one-page buffer (mount scans read into it).
    pub fn tmp_buf(&self) -> BufId {
        self.tmp_buf.expect("buffers allocated at power-on")
    }
}

/// The page-sized pieces of `sectors` sectors at `lba`, on pages of `spp`
/// sectors: (logical page, first sector in the page, sectors, offset in
/// the request).
pub fn pieces(spp: u32, lba: u64, sectors: u64) -> impl Iterator<Item = (u32, u32, u32, u32)> {
    let spp = u64::from(spp);
    let end = lba + sectors;
    let mut at = lba;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let in_page = (at % spp) as u32;
        let n = (spp - u64::from(in_page)).min(end - at) as u32;
        let piece = ((at / spp) as u32, in_page, n, (at - lba) as u32);
        at += u64::from(n);
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oob_round_trips_40_bit_sequence_numbers() {
        let o = encode_oob(OOB_DATA | 3 << 4, 0xdead_beef, (1 << 40) - 3);
        assert_eq!(decode_oob(&o), (OOB_DATA | 3 << 4, 0xdead_beef, (1 << 40) - 3));
    }

    /// One die of 2 planes x 8 blocks x 4 pages; plane 1's blocks 2..8
    /// are factory bad, so groups 2..8 are one block wide.
    fn narrow_plane() -> (DataPlane, crate::flash::FlashController) {
        use crate::nand::{GeometryConfig, Nand};
        let g = GeometryConfig::one_die_for_tests(2, 8, 4, 2048).validate().unwrap();
        let bad: Vec<BlockAddr> = (2..8).map(|b| g.block_addr(1, b)).collect();
        let nand = Nand::new(g.clone(), 16, &bad).unwrap();
        let mut flash = crate::flash::FlashController::new(nand, &crate::violation::RuleConfig::default(), 1 << 20, 10);
        let mut dp = DataPlane::new("test", &g, 4, &DataPlaneOptions::default(), None, 1).unwrap();
        dp.reset(&mut flash).unwrap();
        dp.format(&mut flash).unwrap();
        (dp, flash)
    }

    /// Foreground GC starts when the free groups hold no more than
    /// `fg_threshold` (2) full groups: four free groups one block wide
    /// hold two full groups' room (a GC copying a full victim needs two
    /// of them). Counting groups, as before `hunt` found `dftl` opening a
    /// group with none free inside a GC cycle, would wait for two.
    #[test]
    fn the_gc_threshold_counts_narrow_groups_by_their_room() {
        let (mut dp, mut flash) = narrow_plane();
        assert_eq!((dp.fg_threshold(), dp.multi_plane()), (2, true));
        assert_eq!((dp.unit_free_groups(0), dp.free_blocks()), (8, 10));
        assert!(!dp.needs_gc(0));
        // Take the two full groups and two narrow ones: four narrow left.
        for group in 0..4 {
            assert_eq!(dp.take_free_group(0), Some(group));
        }
        assert_eq!((dp.unit_free_groups(0), dp.free_blocks()), (4, 4));
        assert!(dp.needs_gc(0), "4 one-block groups are 2 full groups of room");
        dp.take_free_group(0);
        assert!(dp.needs_gc(0));
        // Erased full groups come back with their room.
        dp.erase_to_free(&mut flash, 0, Cause::Gc).unwrap();
        assert_eq!(dp.free_blocks(), 5);
        assert!(!dp.needs_gc(0), "5 blocks are more than 2 full groups");
    }

    #[test]
    fn pieces_split_a_request_at_page_boundaries() {
        let p: Vec<_> = pieces(8, 6, 12).collect();
        assert_eq!(p, vec![(0, 6, 2, 0), (1, 0, 8, 2), (2, 0, 2, 10)]);
    }
}
