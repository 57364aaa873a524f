//! Geometry of the virtual NAND: how many channels, chips, dies, planes,
//! blocks and pages there are, how big a page is, and what kind of cell
//! stores it.
//!
//! Physical addresses are linear numbers. A *page address* counts pages in
//! hierarchy order `channel → chip → die → plane → block → page`, so the
//! pages of one block are consecutive and the blocks of one plane are
//! consecutive. [`Geometry`] converts between linear addresses and their
//! parts; the FTL decides its own striping order on top.
//!
//! Cell types and paired pages: an MLC/TLC/QLC word line stores 2/3/4 bits
//! per cell, each bit belonging to a different page (LSB, CSB, MSB, TSB).
//! Pages sharing a word line are *paired*: interrupting the program of an
//! upper page can destroy the lower pages of the same word line, and upper
//! pages are slower to program. Two pairing layouts are supported:
//! `consecutive` (the pages of word line `w` are `w*bits .. w*bits+bits-1`)
//! and `staggered` (MLC shadow programming, as in most 2-bit parts: the LSB
//! of word line `w+1` is programmed before the MSB of word line `w`, giving
//! the page order L0 L1 M0 L2 M1 L3 M2 …).

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A linear physical page number (see the module docs for the order).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PageAddr(pub u64);

/// A linear physical block number.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BlockAddr(pub u64);

impl std::fmt::Display for PageAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "page {}", self.0)
    }
}

impl std::fmt::Display for BlockAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "block {}", self.0)
    }
}

/// How many bits a cell stores, which decides the page types of a block.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CellType {
    #[default]
    Slc,
    Mlc,
    Tlc,
    Qlc,
}

impl CellType {
    pub fn bits_per_cell(self) -> u32 {
        match self {
            CellType::Slc => 1,
            CellType::Mlc => 2,
            CellType::Tlc => 3,
            CellType::Qlc => 4,
        }
    }
}

/// Which bit of a word line a page holds. Latencies and power-cut damage
/// depend on it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PageType {
    /// Lower (least significant) page; the only type in SLC.
    Lsb,
    /// Centre page (TLC, QLC).
    Csb,
    /// Upper (most significant) page.
    Msb,
    /// Top page (QLC only).
    Tsb,
}

/// How the pages of a block map onto word lines.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PagePairing {
    /// Word line `w` holds pages `w*bits .. w*bits + bits - 1` (LSB first).
    #[default]
    Consecutive,
    /// MLC shadow programming: page order L0 L1 M0 L2 M1 … (MLC only).
    Staggered,
}

/// The geometry as written in a configuration file. Validate it with
/// [`GeometryConfig::validate`] to get a [`Geometry`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeometryConfig {
    /// Independent flash buses.
    pub channels: u32,
    /// Chips (packages / chip enables) on each channel.
    pub chips_per_channel: u32,
    /// Dies (LUNs) in each chip; a die executes one cell operation at a time.
    pub dies_per_chip: u32,
    /// Planes in each die; multi-plane operations run on all planes at once.
    pub planes_per_die: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    /// Data area of a page in bytes (a multiple of `sector_size_bytes`).
    pub page_size_bytes: u32,
    /// Spare (out-of-band) area of a page in bytes.
    pub oob_size_bytes: u32,
    /// Host logical block size in bytes: the unit of LBAs (512 or 4096 usually).
    pub sector_size_bytes: u32,
    #[serde(default)]
    pub cell_type: CellType,
    #[serde(default)]
    pub page_pairing: PagePairing,
    /// Partial programs allowed per page between erases (NOP).
    #[serde(default = "default_nop")]
    pub partial_programs_per_page: u32,
}

fn default_nop() -> u32 {
    1
}

/// A geometry error names the field that is wrong and why.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("geometry.{field}: {reason}")]
pub struct GeometryError {
    pub field: &'static str,
    pub reason: String,
}

fn geometry_error(field: &'static str, reason: impl Into<String>) -> GeometryError {
    GeometryError { field, reason: reason.into() }
}

impl GeometryConfig {
    /// Check every field and compute the derived sizes.
    pub fn validate(&self) -> Result<Geometry, GeometryError> {
        let sizes: [(&'static str, u32); 3] = [
            ("page_size_bytes", self.page_size_bytes),
            ("sector_size_bytes", self.sector_size_bytes),
            ("partial_programs_per_page", self.partial_programs_per_page),
        ];
        for (field, value) in self.hierarchy().into_iter().chain(sizes) {
            if value == 0 {
                return Err(geometry_error(field, "must be at least 1"));
            }
        }
        if !self.sector_size_bytes.is_power_of_two() || self.sector_size_bytes < 512 {
            return Err(geometry_error(
                "sector_size_bytes",
                format!("must be a power of two of at least 512, got {}", self.sector_size_bytes),
            ));
        }
        if self.page_size_bytes % self.sector_size_bytes != 0 {
            return Err(geometry_error(
                "page_size_bytes",
                format!("{} is not a multiple of sector_size_bytes ({})", self.page_size_bytes, self.sector_size_bytes),
            ));
        }
        if self.page_size_bytes > 1 << 20 {
            return Err(geometry_error("page_size_bytes", "must be at most 1 MiB"));
        }
        if self.oob_size_bytes > 1 << 16 {
            return Err(geometry_error("oob_size_bytes", "must be at most 64 KiB"));
        }
        if self.partial_programs_per_page > 15 {
            return Err(geometry_error("partial_programs_per_page", "must be at most 15"));
        }
        let bits = self.cell_type.bits_per_cell();
        if self.pages_per_block % bits != 0 {
            return Err(geometry_error(
                "pages_per_block",
                format!(
                    "{} is not a multiple of the {} bits per cell of {:?}",
                    self.pages_per_block, bits, self.cell_type
                ),
            ));
        }
        if self.page_pairing == PagePairing::Staggered && self.cell_type != CellType::Mlc {
            return Err(geometry_error("page_pairing", "`staggered` is defined for MLC only"));
        }
        let pages = self.page_count()?;
        let dies = u64::from(self.channels) * u64::from(self.chips_per_channel) * u64::from(self.dies_per_chip);
        let planes = dies * u64::from(self.planes_per_die);
        let blocks = planes * u64::from(self.blocks_per_plane);
        Ok(Geometry {
            config: self.clone(),
            sectors_per_page: self.page_size_bytes / self.sector_size_bytes,
            dies: dies as u32,
            planes: planes as u32,
            blocks: blocks as u32,
            pages,
        })
    }
}

impl GeometryConfig {
    /// The factors of the page count, outermost first.
    fn hierarchy(&self) -> [(&'static str, u32); 6] {
        [
            ("channels", self.channels),
            ("chips_per_channel", self.chips_per_channel),
            ("dies_per_chip", self.dies_per_chip),
            ("planes_per_die", self.planes_per_die),
            ("blocks_per_plane", self.blocks_per_plane),
            ("pages_per_block", self.pages_per_block),
        ]
    }

    /// Pages in the device, at most 2^32 - 1 (FTLs keep page numbers in u32
    /// maps; more pages would silently alias). When the product is too large
    /// the error names the largest factor (the likeliest typo) and spells
    /// out the whole product.
    fn page_count(&self) -> Result<u64, GeometryError> {
        let factors = self.hierarchy();
        // Each factor is below 2^32, so the running product saturates rather than wraps.
        let pages = factors.iter().fold(1u64, |p, (_, v)| p.saturating_mul(u64::from(*v)));
        if pages <= u64::from(u32::MAX) {
            return Ok(pages);
        }
        let (largest, _) = factors.iter().copied().max_by_key(|(_, v)| *v).expect("six factors");
        let product: Vec<String> = factors.iter().map(|(n, v)| format!("{n} {v}")).collect();
        let total = if pages == u64::MAX { "more than 2^64".to_string() } else { pages.to_string() };
        Err(geometry_error(
            largest,
            format!(
                "the page count {} = {total} exceeds the 2^32 - 1 pages supported \
                 (check `{largest}`, or use fewer, larger pages)",
                product.join(" x ")
            ),
        ))
    }
}

/// A validated geometry with derived sizes and address arithmetic.
#[derive(Clone, Debug, PartialEq)]
pub struct Geometry {
    config: GeometryConfig,
    sectors_per_page: u32,
    dies: u32,
    planes: u32,
    blocks: u32,
    pages: u64,
}

/// The parts of a block address.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BlockLocation {
    pub channel: u32,
    pub chip: u32,
    pub die_in_chip: u32,
    pub plane: u32,
    pub block_in_plane: u32,
}

impl Geometry {
    pub fn config(&self) -> &GeometryConfig {
        &self.config
    }
    pub fn channels(&self) -> u32 {
        self.config.channels
    }
    pub fn chips_per_channel(&self) -> u32 {
        self.config.chips_per_channel
    }
    pub fn dies_per_chip(&self) -> u32 {
        self.config.dies_per_chip
    }
    pub fn planes_per_die(&self) -> u32 {
        self.config.planes_per_die
    }
    pub fn blocks_per_plane(&self) -> u32 {
        self.config.blocks_per_plane
    }
    pub fn pages_per_block(&self) -> u32 {
        self.config.pages_per_block
    }
    pub fn page_size_bytes(&self) -> u32 {
        self.config.page_size_bytes
    }
    pub fn oob_size_bytes(&self) -> u32 {
        self.config.oob_size_bytes
    }
    pub fn sector_size_bytes(&self) -> u32 {
        self.config.sector_size_bytes
    }
    pub fn sectors_per_page(&self) -> u32 {
        self.sectors_per_page
    }
    pub fn cell_type(&self) -> CellType {
        self.config.cell_type
    }
    pub fn partial_programs_per_page(&self) -> u32 {
        self.config.partial_programs_per_page
    }
    /// Dies in the whole device (channels × chips × dies per chip).
    pub fn dies(&self) -> u32 {
        self.dies
    }
    /// Planes in the whole device.
    pub fn planes(&self) -> u32 {
        self.planes
    }
    pub fn blocks(&self) -> u32 {
        self.blocks
    }
    pub fn pages(&self) -> u64 {
        self.pages
    }
    pub fn raw_bytes(&self) -> u64 {
        self.pages * u64::from(self.config.page_size_bytes)
    }
    pub fn raw_sectors(&self) -> u64 {
        self.pages * u64::from(self.sectors_per_page)
    }

    pub fn block_of(&self, page: PageAddr) -> BlockAddr {
        BlockAddr(page.0 / u64::from(self.config.pages_per_block))
    }
    pub fn page_in_block(&self, page: PageAddr) -> u32 {
        (page.0 % u64::from(self.config.pages_per_block)) as u32
    }
    pub fn page_addr(&self, block: BlockAddr, page_in_block: u32) -> PageAddr {
        PageAddr(block.0 * u64::from(self.config.pages_per_block) + u64::from(page_in_block))
    }
    /// The linear plane index (hierarchy order) of a block.
    pub fn plane_of_block(&self, block: BlockAddr) -> u32 {
        (block.0 / u64::from(self.config.blocks_per_plane)) as u32
    }
    /// The linear die index of a block (channel-major: die = channel × dies per channel + …).
    pub fn die_of_block(&self, block: BlockAddr) -> u32 {
        self.plane_of_block(block) / self.config.planes_per_die
    }
    pub fn channel_of_die(&self, die: u32) -> u32 {
        die / (self.config.chips_per_channel * self.config.dies_per_chip)
    }
    pub fn block_in_plane(&self, block: BlockAddr) -> u32 {
        (block.0 % u64::from(self.config.blocks_per_plane)) as u32
    }
    /// The block with index `block_in_plane` on linear plane `plane`.
    pub fn block_addr(&self, plane: u32, block_in_plane: u32) -> BlockAddr {
        BlockAddr(u64::from(plane) * u64::from(self.config.blocks_per_plane) + u64::from(block_in_plane))
    }
    pub fn locate_block(&self, block: BlockAddr) -> BlockLocation {
        let plane_linear = self.plane_of_block(block);
        let die_linear = plane_linear / self.config.planes_per_die;
        let chip_linear = die_linear / self.config.dies_per_chip;
        BlockLocation {
            channel: chip_linear / self.config.chips_per_channel,
            chip: chip_linear % self.config.chips_per_channel,
            die_in_chip: die_linear % self.config.dies_per_chip,
            plane: plane_linear % self.config.planes_per_die,
            block_in_plane: self.block_in_plane(block),
        }
    }
    /// Linear plane index of `(channel, chip, die_in_chip, plane)`.
    pub fn plane_index(&self, channel: u32, chip: u32, die_in_chip: u32, plane: u32) -> u32 {
        ((channel * self.config.chips_per_channel + chip) * self.config.dies_per_chip + die_in_chip)
            * self.config.planes_per_die
            + plane
    }

    /// The page type of a page index within a block.
    pub fn page_type(&self, page_in_block: u32) -> PageType {
        let bits = self.config.cell_type.bits_per_cell();
        let level = match self.config.page_pairing {
            PagePairing::Consecutive => page_in_block % bits,
            PagePairing::Staggered => staggered_position(page_in_block, self.config.pages_per_block).1,
        };
        match (bits, level) {
            (_, 0) => PageType::Lsb,
            (2, 1) => PageType::Msb,
            (3, 1) | (4, 1) => PageType::Csb,
            (3, 2) | (4, 3) => PageType::Msb,
            (4, 2) => PageType::Csb,
            _ => PageType::Msb,
        }
    }

    /// The word line a page belongs to.
    pub fn word_line(&self, page_in_block: u32) -> u32 {
        match self.config.page_pairing {
            PagePairing::Consecutive => page_in_block / self.config.cell_type.bits_per_cell(),
            PagePairing::Staggered => staggered_position(page_in_block, self.config.pages_per_block).0,
        }
    }

    /// The pages sharing a word line with `page_in_block` that are programmed
    /// before it (the pages an interrupted program of this page can corrupt).
    pub fn lower_paired_pages(&self, page_in_block: u32, out: &mut Vec<u32>) {
        out.clear();
        let wl = self.word_line(page_in_block);
        let bits = self.config.cell_type.bits_per_cell();
        match self.config.page_pairing {
            PagePairing::Consecutive => {
                let first = wl * bits;
                out.extend(first..page_in_block);
            }
            PagePairing::Staggered => {
                if self.page_type(page_in_block) == PageType::Msb {
                    // The LSB of the same word line was programmed earlier.
                    if let Some(lsb) = (0..page_in_block)
                        .rev()
                        .find(|&p| staggered_position(p, self.config.pages_per_block) == (wl, 0))
                    {
                        out.push(lsb);
                    }
                }
            }
        }
    }
}

/// (word line, level) of page `p` in the MLC staggered order L0 L1 M0 L2 M1 … L(n-1) M(n-2) M(n-1).
fn staggered_position(p: u32, pages_per_block: u32) -> (u32, u32) {
    let wordlines = pages_per_block / 2;
    if p == 0 {
        return (0, 0);
    }
    if p == pages_per_block - 1 {
        return (wordlines - 1, 1);
    }
    // After page 0, pages alternate L(k+1), M(k) for k = 0, 1, ...
    let k = (p - 1) / 2;
    if (p - 1) % 2 == 0 {
        (k + 1, 0)
    } else {
        (k, 1)
    }
}

/// Unit tests' devices: one die (one channel, one chip) of SLC pages with
/// 64 spare bytes, 512-byte sectors and one program per page; a test
/// overrides what it is about with struct-update syntax.
#[cfg(test)]
impl GeometryConfig {
    pub(crate) fn one_die_for_tests(
        planes_per_die: u32,
        blocks_per_plane: u32,
        pages_per_block: u32,
        page_size_bytes: u32,
    ) -> GeometryConfig {
        GeometryConfig {
            channels: 1,
            chips_per_channel: 1,
            dies_per_chip: 1,
            planes_per_die,
            blocks_per_plane,
            pages_per_block,
            page_size_bytes,
            oob_size_bytes: 64,
            sector_size_bytes: 512,
            cell_type: CellType::default(),
            page_pairing: PagePairing::default(),
            partial_programs_per_page: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn small() -> GeometryConfig {
        GeometryConfig {
            channels: 2,
            chips_per_channel: 2,
            dies_per_chip: 1,
            planes_per_die: 2,
            blocks_per_plane: 8,
            pages_per_block: 16,
            page_size_bytes: 4096,
            oob_size_bytes: 64,
            sector_size_bytes: 512,
            cell_type: CellType::Mlc,
            page_pairing: PagePairing::Consecutive,
            partial_programs_per_page: 1,
        }
    }

    #[test]
    fn derived_sizes_multiply_the_hierarchy() {
        let g = small().validate().unwrap();
        assert_eq!(g.dies(), 4);
        assert_eq!(g.planes(), 8);
        assert_eq!(g.blocks(), 64);
        assert_eq!(g.pages(), 1024);
        assert_eq!(g.sectors_per_page(), 8);
        assert_eq!(g.raw_bytes(), 1024 * 4096);
    }

    #[test]
    fn zero_field_is_named() {
        let mut c = small();
        c.pages_per_block = 0;
        assert_eq!(c.validate().unwrap_err().field, "pages_per_block");
        let mut c = small();
        c.page_size_bytes = 1000;
        assert_eq!(c.validate().unwrap_err().field, "page_size_bytes");
        let mut c = small();
        c.cell_type = CellType::Tlc;
        assert_eq!(c.validate().unwrap_err().field, "pages_per_block");
    }

    /// A page count beyond 2^32 - 1 names the factor that makes it so
    /// (before, every overflow was blamed on `blocks_per_plane`).
    #[test]
    fn an_overflowing_page_count_names_the_culprit_and_the_product() {
        let mut c = small();
        c.channels = 4_000_000_000;
        let e = c.validate().unwrap_err();
        assert_eq!(e.field, "channels", "{e}");
        assert!(e.reason.contains("channels 4000000000 x chips_per_channel 2"), "{e}");
        assert!(e.reason.contains("= 2048000000000"), "the product is spelled out: {e}");
        let mut c = small();
        c.pages_per_block = 1 << 30;
        assert_eq!(c.validate().unwrap_err().field, "pages_per_block");
        let mut c = small();
        (c.channels, c.chips_per_channel, c.blocks_per_plane) = (u32::MAX, u32::MAX, u32::MAX);
        let e = c.validate().unwrap_err();
        assert!(e.reason.contains("more than 2^64"), "saturates instead of wrapping: {e}");
    }

    #[test]
    fn block_location_round_trips() {
        let g = small().validate().unwrap();
        for b in 0..u64::from(g.blocks()) {
            let loc = g.locate_block(BlockAddr(b));
            let plane = g.plane_index(loc.channel, loc.chip, loc.die_in_chip, loc.plane);
            assert_eq!(g.block_addr(plane, loc.block_in_plane), BlockAddr(b));
        }
    }

    #[test]
    fn staggered_mlc_order_pairs_each_msb_with_an_earlier_lsb() {
        let mut c = small();
        c.page_pairing = PagePairing::Staggered;
        let g = c.validate().unwrap();
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for p in 0..16 {
            let wl = g.word_line(p);
            let t = g.page_type(p);
            assert!(seen.insert((wl, t == PageType::Msb)), "page {p} duplicates a slot");
            g.lower_paired_pages(p, &mut out);
            if t == PageType::Msb {
                assert_eq!(out.len(), 1);
                assert!(out[0] < p);
                assert_eq!(g.word_line(out[0]), wl);
            } else {
                assert!(out.is_empty());
            }
        }
    }

    #[test]
    fn consecutive_tlc_types_cycle() {
        let mut c = small();
        c.cell_type = CellType::Tlc;
        c.pages_per_block = 12;
        let g = c.validate().unwrap();
        let types: Vec<_> = (0..3).map(|p| g.page_type(p)).collect();
        assert_eq!(types, vec![PageType::Lsb, PageType::Csb, PageType::Msb]);
        let mut out = Vec::new();
        g.lower_paired_pages(5, &mut out);
        assert_eq!(out, vec![3, 4]);
    }
}
