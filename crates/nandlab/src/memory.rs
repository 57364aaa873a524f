//! How much memory a run will need, estimated before anything is allocated.
//!
//! The big structures of a run are sized by the device and the options, not
//! by the workload: the NAND's per-page state and OOB bytes, the FTL's
//! tables, the oracle's versions, and in `crash` one drive per thread. Most
//! of them are allocated whole up front and become resident only as they
//! are written ([`crate::util::prefetch::zeroed_vec`]), so a run that is too big
//! for the machine does not fail at once: it grows until the kernel kills
//! it, possibly hours later. [`estimate`] adds up what these structures
//! hold once the workload has touched the whole drive, so a run can be
//! refused at the start, with the figure and what to change
//! ([`Estimate::check`]).
//!
//! The figures are upper-ish on purpose: every table counted at full
//! residency (a workload that writes the drive over, as the presets' do),
//! FTL metadata on flash counted as a full copy of the map plus a summary
//! entry per page, and nothing counted for what a run keeps small
//! (buffers, histograms, the NAND's slab for pages of three or more runs).
//! The FTLs shipped are estimated from their documented tables; another
//! FTL name gets a generic page-mapped estimate.

use crate::config::Config;
use crate::util::size::human;

/// What kind of run is estimated.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One drive (`stress`, `perf`).
    Single,
    /// A crash campaign: `threads` drives at once, each with a second
    /// oracle (the durable floor) and a second FTL instance recovering.
    Crash { threads: usize },
}

/// The estimated peak memory of a run, by part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// (what, bytes), largest first.
    pub parts: Vec<(&'static str, u64)>,
    pub mode: Mode,
}

/// Memory a process holds before any of the run's structures (code,
/// allocator arenas, the workload's state, reports).
const BASE_BYTES: u64 = 32 << 20;

/// Bytes per NAND page slot (see [`crate::nand`]).
const PAGE_SLOT_BYTES: u64 = 16;

impl Estimate {
    pub fn total(&self) -> u64 {
        self.parts.iter().fold(0u64, |t, (_, b)| t.saturating_add(*b))
    }

    /// `NAND page state 8.0 GiB, oracle 4.1 GiB, …` (the parts above 1 %).
    pub fn describe(&self) -> String {
        let total = self.total().max(1);
        let shown: Vec<String> = self
            .parts
            .iter()
            .filter(|(_, b)| *b > 0 && (*b as f64) >= total as f64 * 0.01)
            .map(|(what, b)| format!("{what} {}", human(*b)))
            .collect();
        shown.join(", ")
    }

    /// Refuse the run when it needs more than `limit` bytes. `limit_given`:
    /// the limit came from `--max-memory` (else from the machine).
    pub fn check(&self, limit: u64, limit_given: bool) -> Result<(), String> {
        let need = self.total();
        if need <= limit {
            return Ok(());
        }
        let suggest = human_round_up(need.saturating_add(need / 8));
        let (has, fix) = if limit_given {
            (format!("--max-memory is {}", human(limit)), format!("pass a larger --max-memory (e.g. {suggest})"))
        } else {
            (
                format!("the machine has {} available", human(limit)),
                format!("pass --max-memory {suggest} to try anyway"),
            )
        };
        let threads = if matches!(self.mode, Mode::Crash { .. }) { ", fewer --threads" } else { "" };
        Err(format!(
            "this run needs about {} ({}); {has}: use a smaller device, a larger --oracle-unit{threads} \
             or {fix}",
            human(need),
            self.describe()
        ))
    }
}

/// Estimate the peak memory of a run of `config` (its FTL by name) with the
/// oracle at `oracle_unit_sectors`, on a workload aligned to
/// `alignment_sectors` (a unit coarser than the alignment splits units into
/// per-sector versions: counted as one version per sector).
pub fn estimate(config: &Config, oracle_unit_sectors: u32, alignment_sectors: u32, mode: Mode) -> Estimate {
    let g = &config.geometry;
    let pages = g.pages();
    let blocks = u64::from(g.blocks());
    let spp = u64::from(g.sectors_per_page().max(1));
    let lpns = config.logical_sectors.div_ceil(spp);
    let ppb = u64::from(g.pages_per_block().max(1));
    let lbns = lpns.div_ceil(ppb);
    let name = config.ftl_name.as_str();

    let oob = u64::from(ftl_oob_bytes(name).min(g.oob_size_bytes()));
    let nand_pages = pages.saturating_mul(PAGE_SLOT_BYTES);
    let nand_oob = pages.saturating_mul(oob);
    // Write pointer, P/E count and two bits per block.
    let nand_blocks = blocks.saturating_mul(8) + blocks / 4 + 64;
    let (ftl_map, flash_meta) = ftl_tables(name, config, pages, blocks, lpns, lbns);

    let unit = u64::from(oracle_unit_sectors.max(1));
    let units = config.logical_sectors.div_ceil(unit);
    // Versions per unit, the sparse table's directory (1/16), and the
    // per-sector exceptions of units written in part.
    let mut oracle = units.saturating_mul(4) + units / 4;
    if oracle_unit_sectors > alignment_sectors.max(1) {
        oracle = oracle.saturating_add(config.logical_sectors.saturating_mul(4));
    }

    let mut parts = vec![
        ("NAND page state", nand_pages.saturating_add(nand_blocks)),
        ("NAND OOB", nand_oob),
        ("FTL metadata on flash", flash_meta),
        ("FTL map", ftl_map),
        ("oracle", oracle),
        ("process", BASE_BYTES),
    ];
    if let Mode::Crash { threads } = mode {
        let t = threads.max(1) as u64;
        for (what, bytes) in &mut parts {
            *bytes = match *what {
                // Each thread's drive; the recovering instance and the
                // durable floor double the FTL's tables and the oracle.
                "FTL map" | "oracle" => bytes.saturating_mul(2).saturating_mul(t),
                "process" => *bytes,
                _ => bytes.saturating_mul(t),
            };
        }
    }
    parts.sort_by_key(|p| std::cmp::Reverse(p.1));
    Estimate { parts, mode }
}

/// The OOB bytes per page the shipped FTLs declare (`FtlInfo::oob_bytes`).
fn ftl_oob_bytes(name: &str) -> u32 {
    match name {
        "page" | "dftl" => crate::ftl::kit::data_plane::OOB_BYTES as u32,
        "hybrid" => crate::ftl::hybrid::OOB_BYTES as u32,
        "block" => crate::ftl::block::OOB_BYTES as u32,
        "optr" => crate::ftl::optr::OOB_BYTES as u32,
        // buggy keeps 12; an FTL from elsewhere: assume 32.
        "buggy" => 12,
        _ => 32,
    }
}

/// (tables in host memory, metadata stored in the NAND) of the FTL `name`,
/// from its documented tables: a map entry is 4 bytes.
fn ftl_tables(name: &str, config: &Config, pages: u64, blocks: u64, lpns: u64, lbns: u64) -> (u64, u64) {
    let map = lpns.saturating_mul(4);
    // Valid bits per page and the victim policy's lists per block.
    let data_plane = pages / 8 + blocks.saturating_mul(64);
    // Summary pages (an entry per page, stored in size classes up to 1/16
    // larger) and a checkpoint of the map, stored as real bytes, and the
    // slab of pages holding more than two runs.
    let persisted = pages.saturating_mul(8).saturating_add(map);
    let hot_cold = match config.ftl_options.get("hot_cold").and_then(|v| v.as_str()) {
        Some(p) if p.trim().starts_with("two-stream") => lpns,
        _ => 0,
    };
    match name {
        // The map, and a mount's scan (the logical page of every page).
        "page" => (map + data_plane + lpns / 4 + hot_cold + pages.saturating_mul(4), persisted),
        // OPTR also writes a summary page per chain and per flush: stale
        // ones stay on flash until GC collects their blocks.
        "optr" => (
            map + data_plane + lpns / 4 + hot_cold + pages.saturating_mul(4),
            persisted.saturating_add(stale_metadata(config, 200)),
        ),
        // The cached map is at most the whole map (with its slot index);
        // the whole map lives on flash as translation pages; a mount scans
        // (sequence and page per logical page, owner per page).
        // Stale translation pages stay on flash (as real bytes) until GC
        // collects their blocks.
        "dftl" => (
            map.saturating_mul(2) + data_plane + hot_cold + lpns.saturating_mul(12) + pages.saturating_mul(4),
            persisted.saturating_add(stale_metadata(config, 100)),
        ),
        // Log-page map per logical page, data block per logical block, and
        // a mount's scan (sequence and page per logical page).
        "hybrid" => (map + lbns.saturating_mul(4) + lpns / 8 + lpns.saturating_mul(12) + blocks * 16, persisted),
        "block" => (lbns.saturating_mul(4) + blocks * 16, pages.saturating_mul(8)),
        "buggy" => (pages.saturating_mul(4) + map + blocks * 8, persisted),
        _ => (map.saturating_mul(2) + data_plane, persisted),
    }
}

/// An allowance for stale metadata pages (stored as real bytes) that an
/// FTL writing metadata often leaves on flash until GC collects their
/// blocks: `1 / share` of the raw capacity, and at least two blocks per
/// plane (what a small device's metadata streams hold open).
fn stale_metadata(config: &Config, share: u64) -> u64 {
    let g = &config.geometry;
    let blocks = u64::from(g.planes()).saturating_mul(2 * u64::from(g.pages_per_block()));
    (g.raw_bytes() / share).max(blocks.saturating_mul(u64::from(g.page_size_bytes())))
}

/// The memory the machine can give a new run: `MemAvailable` of
/// `/proc/meminfo` (None where it is unknown: no check is made).
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available(&text)
}

fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let kib: u64 = words.next()?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// A whole number of MiB, GiB or TiB at least `bytes` (for `--max-memory`).
fn human_round_up(bytes: u64) -> String {
    for (shift, unit) in [(40u32, "TiB"), (30, "GiB"), (20, "MiB")] {
        if bytes >= 1u64 << shift {
            return format!("{}{unit}", bytes.div_ceil(1u64 << shift));
        }
    }
    "1MiB".into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PRESETS;
    use crate::run::Session;
    use crate::workload::synthetic::SyntheticWorkload;
    use crate::workload::Workload;

    #[test]
    fn mem_available_is_read_from_meminfo() {
        let text = "MemTotal:       24684084 kB\nMemFree:  1 kB\nMemAvailable:   22030108 kB\n";
        assert_eq!(parse_mem_available(text), Some(22030108 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 5 kB\n"), None);
    }

    #[test]
    fn a_run_over_the_limit_is_refused_with_its_parts_and_the_override() {
        let c = Config::preset("femu-bbssd").unwrap();
        let e = estimate(&c, 8, 8, Mode::Single);
        assert!(e.check(e.total(), true).is_ok());
        let m = e.check(1 << 20, true).unwrap_err();
        assert!(m.contains("this run needs about") && m.contains("NAND page state"), "{m}");
        assert!(m.contains("--max-memory is 1.0 MiB") && m.contains("larger --max-memory"), "{m}");
        let m = e.check(1 << 20, false).unwrap_err();
        assert!(m.contains("the machine has 1.0 MiB available") && m.contains("pass --max-memory"), "{m}");
    }

    #[test]
    fn a_crash_campaign_counts_a_drive_per_thread() {
        let c = Config::preset("femu-bbssd").unwrap();
        let one = estimate(&c, 8, 8, Mode::Single).total();
        let four = estimate(&c, 8, 8, Mode::Crash { threads: 4 }).total();
        assert!(four > 4 * (one - BASE_BYTES), "{one} {four}");
    }

    #[test]
    fn a_unit_coarser_than_the_workload_counts_per_sector_versions() {
        let c = Config::preset("femu-bbssd").unwrap();
        let fine = estimate(&c, 8, 8, Mode::Single).total();
        let coarse = estimate(&c, 64, 8, Mode::Single).total();
        assert!(coarse >= fine + c.logical_sectors * 3, "{fine} {coarse}");
    }

    /// The estimate covers what the NAND and the oracle actually hold
    /// (their own accounting of heap bytes) after a workload that writes the
    /// whole drive over, for every shipped FTL on the small presets. (The
    /// FTLs keep no such accounting: their tables are compared with peak
    /// RSS on the presets instead.)
    #[test]
    fn the_estimate_covers_the_modelled_sizes_of_the_big_structures() {
        for (preset, _) in PRESETS.iter().filter(|(n, _)| n.starts_with("tiny")) {
            for ftl in ["page", "dftl", "hybrid", "block", "optr"] {
                let mut c = Config::preset(preset).unwrap();
                if c.ftl_name != ftl {
                    c.ftl_options.clear();
                    c.ftl_name = ftl.into();
                }
                let spec = c.workload.clone().unwrap_or_default();
                let mut w =
                    SyntheticWorkload::new(&spec, c.logical_bytes(), c.geometry.sector_size_bytes(), 1).unwrap();
                let unit = w.alignment_sectors();
                let e = estimate(&c, unit, unit, Mode::Single);
                let mut s = Session::new(&c, 1, unit, 20).unwrap();
                while let Some(r) = w.next_request().unwrap() {
                    s.submit(&r).unwrap();
                    if s.ftl_failed() {
                        break;
                    }
                }
                let nand = s.drive().flash().nand().memory_bytes() as u64;
                let oracle = s.host().oracle().memory_bytes() as u64;
                let part = |what: &str| e.parts.iter().find(|(w, _)| *w == what).map_or(0, |p| p.1);
                let nand_estimate = part("NAND page state") + part("NAND OOB") + part("FTL metadata on flash");
                assert!(nand_estimate >= nand, "{preset}/{ftl}: NAND holds {nand}, estimated {nand_estimate}");
                assert!(
                    part("oracle") >= oracle,
                    "{preset}/{ftl}: oracle holds {oracle}, estimated {}",
                    part("oracle")
                );
            }
        }
    }
}
