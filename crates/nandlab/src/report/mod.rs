//! Reports: what a run did, in a versioned JSON schema, and a readable summary.
//!
//! Every mode's report types live here — the stress report and what it
//! is made of (host counters, flash traffic, GC, wear, violations) in this
//! file, the perf section and preconditioning in [`perf`], the crash
//! campaign in [`crash`] — so that the modes ([`crate::run`]) fill reports
//! and reports know nothing of the modes: `report` imports nothing from
//! `run`, and a change to how a mode runs cannot change the schema by
//! accident. Field names and order are the JSON schema
//! ([`SCHEMA_VERSION`]).

pub mod crash;
pub mod html;
pub mod latency;
pub mod perf;
pub mod resources;
pub mod timeseries;

use crate::flash::{Cause, FlashStats, OpCounts};
use crate::ftl::FtlStats;
use crate::violation::{Rule, Violation, ViolationLog};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Version of the JSON report schema; bumped when the JSON changes.
///
/// - 2: a violation of a read rule may carry `source` (`page`, `block`,
///   `page_in_block`, `sector_in_page`, `op_index`): the physical page that
///   supplied the data and the flash read that brought it. `address` is
///   unchanged (the LBA for read rules, the physical page or block for
///   NAND rules). New rule `unwritten_not_zero`.
/// - 1: the first schema.
pub const SCHEMA_VERSION: u32 = 2;

/// What the host did: requests and bytes by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HostCounters {
    pub write_bytes: u64,
    pub read_bytes: u64,
    pub trim_bytes: u64,
    pub write_requests: u64,
    pub read_requests: u64,
    pub flush_requests: u64,
    pub trim_requests: u64,
    /// Writes acknowledged from a volatile cache (durable only after a flush).
    pub volatile_writes: u64,
}

/// Flash traffic: totals and the split by cause.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlashSummary {
    /// Pages programmed (host data, GC copies including copyback, metadata).
    pub page_programs: u64,
    /// Pages read (data and metadata; OOB-only reads are counted apart).
    pub page_reads: u64,
    pub oob_reads: u64,
    pub block_erases: u64,
    pub copybacks: u64,
    pub operations: u64,
    pub by_cause: BTreeMap<&'static str, OpCounts>,
}

impl FlashSummary {
    pub fn from_stats(s: &FlashStats) -> Self {
        let t = s.total();
        FlashSummary {
            page_programs: t.programs(),
            page_reads: t.page_reads + t.meta_reads,
            oob_reads: t.oob_reads,
            block_erases: t.block_erases,
            copybacks: t.copybacks,
            operations: s.operations(),
            by_cause: Cause::ALL
                .iter()
                .map(|c| (c.name(), *s.cause(*c)))
                .filter(|(_, c)| *c != OpCounts::default())
                .collect(),
        }
    }
}

/// Garbage-collection totals.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GcSummary {
    pub runs: u64,
    /// Pages copied by GC (reads + programs or copybacks).
    pub pages_moved: u64,
    pub blocks_erased: u64,
}

/// Write amplification: all page programs over host page programs.
pub fn waf(host_programs: u64, all_programs: u64) -> f64 {
    if host_programs == 0 {
        0.0
    } else {
        all_programs as f64 / host_programs as f64
    }
}

/// Erase-count distribution over the device's blocks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WearSummary {
    pub erase_count_min: u32,
    pub erase_count_max: u32,
    pub erase_count_mean: f64,
    pub erase_count_stddev: f64,
    /// Blocks per erase-count range, from `erase_count_min` to
    /// `erase_count_max` in at most [`WearSummary::HISTOGRAM_BINS`]
    /// bins of equal width.
    pub erase_count_histogram: Vec<HistogramBin>,
}

/// Blocks whose erase count is within `erase_count_from ..= erase_count_to`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HistogramBin {
    pub erase_count_from: u32,
    pub erase_count_to: u32,
    pub blocks: u64,
}

impl WearSummary {
    /// Bins of the erase-count histogram at most.
    pub const HISTOGRAM_BINS: u32 = 16;

    pub fn from_counts(counts: impl Iterator<Item = u32> + Clone) -> Self {
        let (mut n, mut sum, mut sq, mut min, mut max) = (0u64, 0f64, 0f64, u32::MAX, 0u32);
        for c in counts.clone() {
            n += 1;
            sum += f64::from(c);
            sq += f64::from(c) * f64::from(c);
            min = min.min(c);
            max = max.max(c);
        }
        let mean = if n == 0 { 0.0 } else { sum / n as f64 };
        let var = if n == 0 { 0.0 } else { (sq / n as f64 - mean * mean).max(0.0) };
        let min = if n == 0 { 0 } else { min };
        WearSummary {
            erase_count_min: min,
            erase_count_max: max,
            erase_count_mean: mean,
            erase_count_stddev: var.sqrt(),
            erase_count_histogram: if n == 0 { Vec::new() } else { histogram(counts, min, max) },
        }
    }

    /// `max - min`: how unevenly the blocks are worn.
    pub fn spread(&self) -> u32 {
        self.erase_count_max - self.erase_count_min
    }
}

/// Equal-width bins covering `min ..= max` (one per count when they fit).
fn histogram(counts: impl Iterator<Item = u32>, min: u32, max: u32) -> Vec<HistogramBin> {
    let span = u64::from(max - min) + 1;
    let width = span.div_ceil(u64::from(WearSummary::HISTOGRAM_BINS));
    let bins = span.div_ceil(width);
    let mut out: Vec<HistogramBin> = (0..bins)
        .map(|i| HistogramBin {
            erase_count_from: min + (i * width) as u32,
            erase_count_to: (u64::from(min) + (i + 1) * width - 1).min(u64::from(max)) as u32,
            blocks: 0,
        })
        .collect();
    for c in counts {
        out[(u64::from(c - min) / width) as usize].blocks += 1;
    }
    out
}

/// A metric value for the summary: floats with 3 decimals, strings bare.
fn show(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) if n.is_f64() => format!("{:.3}", n.as_f64().unwrap_or(0.0)),
        other => other.to_string(),
    }
}

/// Cumulative counters after `requests` host requests of a `stress` run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StressSample {
    pub requests: u64,
    pub host_write_bytes: u64,
    /// Pages programmed for host writes.
    pub host_pages_programmed: u64,
    /// Pages programmed for any cause (host, GC, metadata, wear leveling).
    pub pages_programmed: u64,
    /// Pages moved by garbage collection.
    pub gc_pages_moved: u64,
    pub blocks_erased: u64,
    /// The FTL's free blocks at that point (when it counts them).
    pub free_blocks: Option<u64>,
}

impl StressSample {
    /// Samples kept at most: enough for a smooth line, small in the JSON.
    pub const MAX_SAMPLES: usize = 256;
}

/// Result of the clean power cycle at the end of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RemountSummary {
    pub mounted: bool,
    pub verified_sectors: u64,
    pub error: Option<String>,
    /// The fresh FTL instance's `mount_*` metrics, right after its mount.
    pub mount_stats: BTreeMap<String, serde_json::Value>,
}

impl RemountSummary {
    /// The summary's `remount` line.
    pub fn write_line(&self, s: &mut String) {
        let _ = match &self.error {
            None if self.mount_stats.is_empty() => writeln!(
                s,
                "  remount    clean power cycle, fresh FTL mounted, {} sectors verified",
                self.verified_sectors
            ),
            None => writeln!(
                s,
                "  remount    clean power cycle, fresh FTL mounted ({}), {} sectors verified",
                self.mount_stats.iter().map(|(k, v)| format!("{k} {}", show(v))).collect::<Vec<_>>().join(", "),
                self.verified_sectors
            ),
            Some(e) => writeln!(s, "  remount    FAILED: {e}"),
        };
    }
}

/// The summary line of an interrupted run.
pub const INTERRUPTED_LINE: &str =
    "  stopped    interrupted (SIGINT or SIGTERM) at a request boundary: partial results, of the requests run so far";

/// The report of a `stress` run.
#[derive(Clone, Debug, Serialize)]
pub struct StressReport {
    pub schema_version: u32,
    pub mode: &'static str,
    pub seed: u64,
    pub preset: String,
    pub ftl: String,
    pub workload: String,
    /// Workload-specific figures (trace readers: lines, skipped lines, …).
    pub workload_report: Option<crate::workload::WorkloadReport>,
    pub raw_bytes: u64,
    pub logical_bytes: u64,
    pub host: HostCounters,
    pub flash: FlashSummary,
    pub waf: f64,
    pub waf_steady: f64,
    pub gc: GcSummary,
    pub ftl_stats: FtlStats,
    pub wear: WearSummary,
    pub oracle_unit_sectors: u32,
    pub violation_counts: BTreeMap<Rule, u64>,
    pub errors: u64,
    pub warnings: u64,
    pub violations: Vec<Violation>,
    /// Why the run stopped before the workload ended, if it did.
    pub stopped_early: Option<String>,
    /// Stopped by a signal (SIGINT, SIGTERM) at a request boundary: the
    /// figures are those of the requests run until then. Absent from the
    /// JSON when false, so uninterrupted reports are as before.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    pub remount: Option<RemountSummary>,
    /// What the media reliability model did (absent when it is off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reliability: Option<crate::nand::reliability::ReliabilityStats>,
    /// The command that reproduces this run (set by the CLI).
    pub reproduce: Option<String>,
    /// Cumulative counters sampled along a `stress` run (at most
    /// [`StressSample::MAX_SAMPLES`], thinned as the run grows; the last
    /// one is the end of the run): what the HTML report plots WAF, free
    /// blocks and GC against host bytes written with. Absent from the JSON
    /// when empty (perf reports have their own time series).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<StressSample>,
    // --- wall-clock and memory fields (the only ones a seed does not fix) ---
    pub wall_seconds: f64,
    pub cpu_seconds: f64,
    /// Host bytes read + written per second of wall time, / 1e9.
    pub effective_host_gbps: f64,
    pub requests_per_second: f64,
    pub flash_ops_per_second: f64,
    pub peak_rss_bytes: u64,
}

impl StressReport {
    pub fn set_violations(&mut self, log: &ViolationLog) {
        self.violation_counts = log.counts().clone();
        self.errors = log.errors();
        self.warnings = log.warnings();
        self.violations = log.kept().to_vec();
    }

    /// A copy with every wall-clock and memory field zeroed (for determinism checks).
    pub fn without_measurements(&self) -> StressReport {
        StressReport {
            wall_seconds: 0.0,
            cpu_seconds: 0.0,
            effective_host_gbps: 0.0,
            requests_per_second: 0.0,
            flash_ops_per_second: 0.0,
            peak_rss_bytes: 0,
            ..self.clone()
        }
    }

    /// The `wear` lines (erase-count moments and histogram) and the `ftl`
    /// line (the FTL's own metrics), shared by the stress and perf summaries.
    pub fn write_wear_and_ftl(&self, s: &mut String) {
        let w = &self.wear;
        let _ = writeln!(
            s,
            "  wear       erase counts min {} max {} mean {:.1} sd {:.2}",
            w.erase_count_min, w.erase_count_max, w.erase_count_mean, w.erase_count_stddev
        );
        let bins: Vec<String> = w
            .erase_count_histogram
            .iter()
            .map(|b| {
                if b.erase_count_from == b.erase_count_to {
                    format!("{}:{}", b.erase_count_from, b.blocks)
                } else {
                    format!("{}-{}:{}", b.erase_count_from, b.erase_count_to, b.blocks)
                }
            })
            .collect();
        let _ = writeln!(s, "             histogram (erases:blocks) {}", bins.join(" "));
        if let Some(r) = &self.reliability {
            let _ = writeln!(
                s,
                "  media      {}: {} grown bad blocks ({} program, {} erase failures, {} worn out); \
                 {} reads decoded, {} retried ({} retries), {} bits corrected, {} uncorrectable, \
                 {} host read errors; max RBER {:.2e}, clock {:.1} days",
                r.preset,
                r.grown_bad_blocks,
                r.program_failures,
                r.erase_failures,
                r.worn_out_erases,
                r.reads_decoded,
                r.reads_retried,
                r.read_retries,
                r.corrected_bits,
                r.uncorrectable_reads,
                r.host_read_errors,
                r.max_rber,
                r.clock_days
            );
        }
        if !self.ftl_stats.extra.is_empty() {
            let metrics: Vec<String> = self.ftl_stats.extra.iter().map(|(k, v)| format!("{k} {}", show(v))).collect();
            let _ = writeln!(s, "  ftl        {}", metrics.join(", "));
        }
    }

    /// The readable summary printed at the end of a run.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
        let _ = writeln!(s, "nandlab {} — preset {} — FTL {} — seed {}", self.mode, self.preset, self.ftl, self.seed);
        let _ = writeln!(s, "  workload   {}", self.workload);
        let _ =
            writeln!(s, "  device     {:.2} GiB raw, {:.2} GiB logical", gib(self.raw_bytes), gib(self.logical_bytes));
        let h = &self.host;
        let _ = writeln!(
            s,
            "  host       {} writes ({:.2} GiB), {} reads ({:.2} GiB), {} trims, {} flushes",
            h.write_requests,
            gib(h.write_bytes),
            h.read_requests,
            gib(h.read_bytes),
            h.trim_requests,
            h.flush_requests
        );
        let f = &self.flash;
        let _ = writeln!(
            s,
            "  flash      {} programs, {} reads, {} erases, {} copybacks",
            f.page_programs, f.page_reads, f.block_erases, f.copybacks
        );
        let _ = writeln!(
            s,
            "  GC         {} runs, {} pages moved, {} blocks erased; WAF {:.3} (steady {:.3})",
            self.gc.runs, self.gc.pages_moved, self.gc.blocks_erased, self.waf, self.waf_steady
        );
        self.write_wear_and_ftl(&mut s);
        if let Some(r) = &self.remount {
            r.write_line(&mut s);
        }
        let _ = writeln!(
            s,
            "  speed      {:.2} s wall, {:.2} s CPU, {:.2} GB/s effective host traffic, {:.0} requests/s, {:.0} flash ops/s, peak RSS {:.0} MiB",
            self.wall_seconds,
            self.cpu_seconds,
            self.effective_host_gbps,
            self.requests_per_second,
            self.flash_ops_per_second,
            self.peak_rss_bytes as f64 / f64::from(1u32 << 20)
        );
        if let Some(why) = &self.stopped_early {
            let _ = writeln!(s, "  stopped    early: {why}");
        }
        if self.interrupted {
            let _ = writeln!(s, "{INTERRUPTED_LINE}");
        }
        if self.errors == 0 && self.warnings == 0 {
            let _ = writeln!(s, "  result     PASS — no violations");
        } else {
            let counts: Vec<String> = self.violation_counts.iter().map(|(r, n)| format!("{r}: {n}")).collect();
            let verdict = if self.errors == 0 { "PASS with warnings" } else { "FAIL" };
            let _ = writeln!(
                s,
                "  result     {verdict} — {} errors, {} warnings ({})",
                self.errors,
                self.warnings,
                counts.join(", ")
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wear_summary_has_moments_and_a_histogram_covering_every_block() {
        let w = WearSummary::from_counts([1u32, 1, 2, 4].into_iter());
        assert_eq!((w.erase_count_min, w.erase_count_max, w.spread()), (1, 4, 3));
        assert!((w.erase_count_mean - 2.0).abs() < 1e-9);
        assert!((w.erase_count_stddev - 1.224_744_871).abs() < 1e-6);
        let bins: Vec<_> =
            w.erase_count_histogram.iter().map(|b| (b.erase_count_from, b.erase_count_to, b.blocks)).collect();
        assert_eq!(bins, vec![(1, 1, 2), (2, 2, 1), (3, 3, 0), (4, 4, 1)]);
    }

    #[test]
    fn a_wide_histogram_uses_equal_width_bins() {
        let w = WearSummary::from_counts((0u32..100).chain([0, 0]));
        assert_eq!(w.erase_count_histogram.len(), 15, "width 7 over 0..=99");
        assert_eq!(w.erase_count_histogram[0].erase_count_to, 6);
        assert_eq!(w.erase_count_histogram[0].blocks, 9);
        assert_eq!(w.erase_count_histogram.last().unwrap().erase_count_to, 99);
        assert_eq!(w.erase_count_histogram.iter().map(|b| b.blocks).sum::<u64>(), 102);
    }
}
