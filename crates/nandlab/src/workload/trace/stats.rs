//! `nandlab trace stats`: what a trace contains, in one streaming pass.
//!
//! - Requests, and per operation (read, write, trim, flush) the count and
//!   bytes; zero-length requests are counted apart too.
//! - Request sizes: a histogram in power-of-two buckets per operation.
//! - **Footprint**: distinct 512-byte units touched by reads, writes and
//!   trims. Exact, with a bitmap, while the highest address fits in the
//!   bitmap budget (`bitmap_max_bytes`, 256 MiB by default: addresses up
//!   to 1 TiB). Past that the bitmap is folded into a HyperLogLog sketch
//!   (`hll.rs`) over 4 KiB blocks and the result is an approximation
//!   (relative standard error 0.81 %), said so in the table and the JSON
//!   (`footprint_method`). In that mode a request larger than 1 GiB adds its
//!   first 1 GiB to the sketch and the rest without deduplication, so the
//!   CPU time of one request stays bounded.
//! - **Sequentiality**: a read (write, trim) is sequential when it starts
//!   where the previous request of the same operation ended, whatever its
//!   device.
//! - **Inter-arrival** times between consecutive requests in file order
//!   (min, mean, median, p99, max), and how often time went backwards.
//! - Time span (first to last time), address range, requests per device.

use super::hll::HyperLogLog;
use super::TraceRequest;
use crate::workload::transform::{TransformCounts, Transformed};
use crate::workload::HostOp;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Bytes per footprint unit in exact mode.
pub const FOOTPRINT_UNIT_BYTES: u64 = 512;
/// Bytes per block in approximate (HyperLogLog) mode.
const SKETCH_BLOCK_BYTES: u64 = 4096;
/// Largest part of one request inserted block by block in the sketch.
const SKETCH_REQUEST_BYTES: u64 = 1 << 30;
/// Devices listed one by one; the rest are summed.
const MAX_DEVICES: usize = 1024;

/// Count and bytes of one operation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OpFigures {
    pub requests: u64,
    pub bytes: u64,
    pub zero_length: u64,
    pub sequential: u64,
}

/// One bucket of the size histogram: sizes in (previous bound, `max_bytes`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SizeBucket {
    /// Upper bound in bytes (`None`: larger than every bound).
    pub max_bytes: Option<u64>,
    pub reads: u64,
    pub writes: u64,
    pub trims: u64,
}

/// Inter-arrival summary, microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InterArrival {
    pub min_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// Consecutive requests whose time decreases.
    pub backwards: u64,
}

/// Statistics of a trace (JSON schema `schema_version` 1).
#[derive(Clone, Debug, Serialize)]
pub struct TraceStats {
    pub schema_version: u32,
    pub file: String,
    pub format: super::TraceFormat,
    pub format_chosen_because: Option<String>,
    pub compression: super::source::Compression,
    pub file_bytes: Option<u64>,
    pub lines: u64,
    pub ignored_lines: u64,
    pub skipped_bad_lines: u64,
    pub bad_line_examples: Vec<String>,
    pub transforms: Option<TransformCounts>,
    pub requests: u64,
    pub read: OpFigures,
    pub write: OpFigures,
    pub trim: OpFigures,
    pub flush: OpFigures,
    pub size_histogram: Vec<SizeBucket>,
    pub footprint_bytes: u64,
    /// `exact (bitmap)` or `approximate (HyperLogLog …)`.
    pub footprint_method: String,
    pub footprint_exact: bool,
    pub offset_min_bytes: Option<u64>,
    pub end_max_bytes: Option<u64>,
    pub time_first_ns: Option<u64>,
    pub time_last_ns: Option<u64>,
    pub span_seconds: f64,
    pub inter_arrival: InterArrival,
    /// Requests per device (at most 1024 listed; see `other_devices_requests`).
    pub devices: BTreeMap<u32, u64>,
    pub other_devices_requests: u64,
}

/// Distinct units touched: a growing bitmap, or a sketch once it is too big.
enum Footprint {
    Bitmap { words: Vec<u64>, max_words: usize },
    Sketch { hll: HyperLogLog, unsketched_bytes: u64 },
}

impl Footprint {
    fn add(&mut self, offset: u64, size: u64) {
        if size == 0 {
            return;
        }
        let first = offset / FOOTPRINT_UNIT_BYTES;
        let last = (offset.saturating_add(size) - 1) / FOOTPRINT_UNIT_BYTES;
        if let Footprint::Bitmap { words, max_words } = self {
            let need = last / 64 + 1;
            if need <= *max_words as u64 {
                if need as usize > words.len() {
                    let grown = (need as usize).max(words.len() * 2).min(*max_words);
                    words.resize(grown, 0);
                }
                set_bits(words, first, last + 1);
                return;
            }
            self.switch_to_sketch();
        }
        if let Footprint::Sketch { hll, unsketched_bytes } = self {
            let sketched = size.min(SKETCH_REQUEST_BYTES);
            *unsketched_bytes += size - sketched;
            let b0 = offset / SKETCH_BLOCK_BYTES;
            let b1 = (offset.saturating_add(sketched) - 1) / SKETCH_BLOCK_BYTES;
            for b in b0..=b1 {
                hll.insert(b);
            }
        }
    }

    fn switch_to_sketch(&mut self) {
        let Footprint::Bitmap { words, .. } = self else {
            return;
        };
        let mut hll = HyperLogLog::default();
        // A 4 KiB block is 8 units, one byte of the bitmap.
        debug_assert_eq!(SKETCH_BLOCK_BYTES / FOOTPRINT_UNIT_BYTES, 8);
        for (wi, &w) in words.iter().enumerate() {
            if w == 0 {
                continue;
            }
            for byte in 0..8 {
                if (w >> (byte * 8)) & 0xff != 0 {
                    hll.insert((wi * 8 + byte) as u64);
                }
            }
        }
        *self = Footprint::Sketch { hll, unsketched_bytes: 0 };
    }

    fn result(&self) -> (u64, String, bool) {
        match self {
            Footprint::Bitmap { words, .. } => (
                words.iter().map(|w| u64::from(w.count_ones())).sum::<u64>()
                    * FOOTPRINT_UNIT_BYTES,
                "exact (bitmap of 512-byte units)".into(),
                true,
            ),
            Footprint::Sketch {
                hll,
                unsketched_bytes,
            } => (
                hll.estimate() * SKETCH_BLOCK_BYTES + unsketched_bytes,
                format!(
                    "approximate (HyperLogLog over 4 KiB blocks, standard error {:.2} %; addresses beyond the exact bitmap's range)",
                    HyperLogLog::STANDARD_ERROR * 100.0
                ),
                false,
            ),
        }
    }
}

/// Set bits [a, b) of a bitmap.
fn set_bits(words: &mut [u64], a: u64, b: u64) {
    let (wa, wb) = ((a / 64) as usize, (b / 64) as usize);
    let (ba, bb) = (a % 64, b % 64);
    if wa == wb {
        words[wa] |= (!0u64 << ba) & ((1u64 << bb) - 1);
        return;
    }
    words[wa] |= !0u64 << ba;
    for w in &mut words[wa + 1..wb] {
        *w = !0;
    }
    if bb > 0 {
        words[wb] |= (1u64 << bb) - 1;
    }
}

/// Size buckets: ≤ 512 B, ≤ 1 KiB, …, ≤ 1 GiB, larger.
const SIZE_BOUNDS: usize = 22;

/// Collects [`TraceStats`] one request at a time.
pub struct StatsCollector {
    requests: u64,
    ops: [OpFigures; 4],
    sizes: [[u64; 3]; SIZE_BOUNDS + 1],
    footprint: Footprint,
    last_end: [Option<u64>; 3],
    offset_min: Option<u64>,
    end_max: Option<u64>,
    time_first: Option<u64>,
    time_last: Option<u64>,
    time_min: u64,
    time_max: u64,
    gaps: hdrhistogram::Histogram<u64>,
    gap_sum_ns: f64,
    backwards: u64,
    devices: BTreeMap<u32, u64>,
    other_devices: u64,
}

fn op_index(op: HostOp) -> usize {
    match op {
        HostOp::Read => 0,
        HostOp::Write => 1,
        HostOp::Trim => 2,
        HostOp::Flush => 3,
    }
}

impl StatsCollector {
    /// `bitmap_max_bytes`: memory allowed for the exact footprint bitmap.
    pub fn new(bitmap_max_bytes: u64) -> Self {
        StatsCollector {
            requests: 0,
            ops: Default::default(),
            sizes: [[0; 3]; SIZE_BOUNDS + 1],
            footprint: Footprint::Bitmap { words: Vec::new(), max_words: (bitmap_max_bytes / 8).max(1) as usize },
            last_end: [None; 3],
            offset_min: None,
            end_max: None,
            time_first: None,
            time_last: None,
            time_min: u64::MAX,
            time_max: 0,
            gaps: hdrhistogram::Histogram::new(3).expect("3 significant digits is valid"),
            gap_sum_ns: 0.0,
            backwards: 0,
            devices: BTreeMap::new(),
            other_devices: 0,
        }
    }

    pub fn add(&mut self, r: &TraceRequest) {
        self.requests += 1;
        let i = op_index(r.op);
        let fig = &mut self.ops[i];
        fig.requests += 1;
        fig.bytes = fig.bytes.saturating_add(r.size_bytes);
        if r.op != HostOp::Flush {
            if r.size_bytes == 0 {
                fig.zero_length += 1;
            }
            if self.last_end[i] == Some(r.offset_bytes) {
                fig.sequential += 1;
            }
            self.last_end[i] = Some(r.end_bytes());
            let bucket = if r.size_bytes <= 512 {
                0
            } else {
                ((64 - (r.size_bytes - 1).leading_zeros()) as usize - 9).min(SIZE_BOUNDS)
            };
            self.sizes[bucket][i] += 1;
            self.footprint.add(r.offset_bytes, r.size_bytes);
            self.offset_min = Some(self.offset_min.map_or(r.offset_bytes, |m| m.min(r.offset_bytes)));
            self.end_max = Some(self.end_max.map_or(r.end_bytes(), |m| m.max(r.end_bytes())));
        }
        if let Some(prev) = self.time_last {
            if r.time_ns < prev {
                self.backwards += 1;
            } else {
                let gap = r.time_ns - prev;
                self.gaps.saturating_record(gap);
                self.gap_sum_ns += gap as f64;
            }
        } else {
            self.time_first = Some(r.time_ns);
        }
        self.time_last = Some(r.time_ns);
        self.time_min = self.time_min.min(r.time_ns);
        self.time_max = self.time_max.max(r.time_ns);
        if let Some(n) = self.devices.get_mut(&r.device) {
            *n += 1;
        } else if self.devices.len() < MAX_DEVICES {
            self.devices.insert(r.device, 1);
        } else {
            self.other_devices += 1;
        }
    }

    fn histogram(&self) -> Vec<SizeBucket> {
        self.sizes
            .iter()
            .enumerate()
            .filter(|(_, c)| c.iter().any(|&n| n > 0))
            .map(|(b, c)| SizeBucket {
                max_bytes: (b < SIZE_BOUNDS).then(|| 512u64 << b),
                reads: c[0],
                writes: c[1],
                trims: c[2],
            })
            .collect()
    }

    fn inter_arrival(&self) -> InterArrival {
        let n = self.gaps.len();
        if n == 0 {
            return InterArrival { backwards: self.backwards, ..Default::default() };
        }
        let us = |ns: u64| ns as f64 / 1e3;
        InterArrival {
            min_us: us(self.gaps.min()),
            mean_us: self.gap_sum_ns / n as f64 / 1e3,
            p50_us: us(self.gaps.value_at_quantile(0.5)),
            p99_us: us(self.gaps.value_at_quantile(0.99)),
            max_us: us(self.gaps.max()),
            backwards: self.backwards,
        }
    }

    /// The statistics, with the reader's and transforms' figures.
    pub fn finish(&self, stream: &Transformed, with_transforms: bool) -> TraceStats {
        let r = stream.reader();
        let (footprint_bytes, footprint_method, footprint_exact) = self.footprint.result();
        let span_ns = if self.requests == 0 { 0 } else { self.time_max - self.time_min };
        TraceStats {
            schema_version: 1,
            file: r.name().to_string(),
            format: r.format(),
            format_chosen_because: r.chosen_because().map(str::to_string),
            compression: r.compression(),
            file_bytes: r.file_bytes(),
            lines: r.counts().lines,
            ignored_lines: r.counts().ignored_lines,
            skipped_bad_lines: r.counts().skipped_bad_lines,
            bad_line_examples: r.bad_line_examples().to_vec(),
            transforms: with_transforms.then(|| stream.counts().clone()),
            requests: self.requests,
            read: self.ops[0].clone(),
            write: self.ops[1].clone(),
            trim: self.ops[2].clone(),
            flush: self.ops[3].clone(),
            size_histogram: self.histogram(),
            footprint_bytes,
            footprint_method,
            footprint_exact,
            offset_min_bytes: self.offset_min,
            end_max_bytes: self.end_max,
            time_first_ns: self.time_first,
            time_last_ns: self.time_last,
            span_seconds: span_ns as f64 / 1e9,
            inter_arrival: self.inter_arrival(),
            devices: self.devices.clone(),
            other_devices_requests: self.other_devices,
        }
    }
}

/// Read the whole stream and return its statistics.
pub fn collect(
    stream: &mut Transformed,
    bitmap_max_bytes: u64,
    with_transforms: bool,
) -> Result<TraceStats, super::TraceError> {
    let mut c = StatsCollector::new(bitmap_max_bytes);
    while let Some(r) = stream.next_request()? {
        c.add(&r);
    }
    Ok(c.finish(stream, with_transforms))
}

/// `4096` → `4 KiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 || v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

impl TraceStats {
    /// The human-readable table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let pct = |n: u64, d: u64| {
            if d == 0 {
                0.0
            } else {
                100.0 * n as f64 / d as f64
            }
        };
        let _ = writeln!(s, "trace      {}", self.file);
        let _ = write!(s, "format     {}", self.format);
        if let Some(w) = &self.format_chosen_because {
            let _ = write!(s, " (auto: {w})");
        }
        let _ = writeln!(s, ", compression {}", self.compression.name());
        let _ = writeln!(
            s,
            "lines      {} ({} ignored, {} bad lines skipped)",
            self.lines, self.ignored_lines, self.skipped_bad_lines
        );
        let _ = writeln!(s, "requests   {}", self.requests);
        let _ = writeln!(
            s,
            "\n{:8} {:>12} {:>8} {:>14} {:>12} {:>12}",
            "op", "requests", "share", "bytes", "zero-length", "sequential"
        );
        for (name, f) in [("read", &self.read), ("write", &self.write), ("trim", &self.trim), ("flush", &self.flush)] {
            let _ = writeln!(
                s,
                "{name:8} {:>12} {:>7.2}% {:>14} {:>12} {:>11.2}%",
                f.requests,
                pct(f.requests, self.requests),
                human_bytes(f.bytes),
                f.zero_length,
                pct(f.sequential, f.requests)
            );
        }
        let _ = writeln!(s, "\n{:>14} {:>12} {:>12} {:>12}", "size ≤", "reads", "writes", "trims");
        for b in &self.size_histogram {
            let bound = b.max_bytes.map_or("larger".to_string(), human_bytes);
            let _ = writeln!(s, "{bound:>14} {:>12} {:>12} {:>12}", b.reads, b.writes, b.trims);
        }
        let _ = writeln!(
            s,
            "\nfootprint  {} ({} bytes), {}",
            human_bytes(self.footprint_bytes),
            self.footprint_bytes,
            self.footprint_method
        );
        if let (Some(lo), Some(hi)) = (self.offset_min_bytes, self.end_max_bytes) {
            let _ = writeln!(s, "addresses  {lo} .. {hi} bytes ({} range)", human_bytes(hi - lo));
        }
        let _ = writeln!(s, "time span  {:.6} s", self.span_seconds);
        let ia = &self.inter_arrival;
        let _ = writeln!(
            s,
            "inter-arrival  min {:.3} µs, mean {:.3} µs, median {:.3} µs, p99 {:.3} µs, max {:.3} µs; {} backwards",
            ia.min_us, ia.mean_us, ia.p50_us, ia.p99_us, ia.max_us, ia.backwards
        );
        let devs: Vec<String> = self.devices.iter().take(16).map(|(d, n)| format!("{d}: {n}")).collect();
        let more = if self.devices.len() > 16 || self.other_devices_requests > 0 { " …" } else { "" };
        let _ = writeln!(s, "devices    {} ({}{more})", self.devices.len(), devs.join(", "));
        if let Some(t) = &self.transforms {
            let _ = writeln!(
                s,
                "transforms {} filtered out, {} aligned, {} out of range ({} skipped, {} split at the end, {} cut), {} pass(es)",
                t.filtered_out, t.aligned, t.out_of_range, t.skipped_out_of_range, t.split_at_end, t.cut_to_capacity, t.passes
            );
        }
        for e in &self.bad_line_examples {
            let _ = writeln!(s, "bad line   {e}");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(op: HostOp, offset: u64, size: u64, t: u64) -> TraceRequest {
        TraceRequest { op, offset_bytes: offset, size_bytes: size, time_ns: t, device: 0, line: 1 }
    }

    #[test]
    fn bitmap_footprint_counts_overlaps_once() {
        let mut c = StatsCollector::new(1 << 20);
        c.add(&req(HostOp::Write, 0, 8192, 0));
        c.add(&req(HostOp::Read, 4096, 8192, 10));
        c.add(&req(HostOp::Write, 1000, 10, 20)); // inside unit 1
        c.add(&req(HostOp::Flush, 0, 0, 30));
        let (bytes, _, exact) = c.footprint.result();
        assert!(exact);
        assert_eq!(bytes, 12288);
    }

    #[test]
    fn set_bits_handles_word_edges() {
        let mut w = vec![0u64; 3];
        set_bits(&mut w, 63, 129);
        assert_eq!(w, vec![1 << 63, !0, 1]);
        let mut w = vec![0u64; 1];
        set_bits(&mut w, 3, 5);
        assert_eq!(w, vec![0b11000]);
    }

    #[test]
    fn a_range_beyond_the_bitmap_budget_switches_to_an_estimate() {
        let mut c = StatsCollector::new(64); // 512 units = 256 KiB exact
        for i in 0..1000u64 {
            c.add(&req(HostOp::Write, i * 4096, 4096, i));
        }
        c.add(&req(HostOp::Write, 0, 4096, 2000)); // a duplicate
        let (bytes, method, exact) = c.footprint.result();
        assert!(!exact && method.starts_with("approximate"));
        let err = (bytes as f64 - 4_096_000.0).abs() / 4_096_000.0;
        assert!(err < 0.04, "{bytes}");
    }

    #[test]
    fn sequential_sizes_and_gaps() {
        let mut c = StatsCollector::new(1 << 20);
        c.add(&req(HostOp::Write, 0, 4096, 0));
        c.add(&req(HostOp::Write, 4096, 4096, 1000));
        c.add(&req(HostOp::Read, 0, 600, 500));
        assert_eq!(c.ops[1].sequential, 1);
        assert_eq!(c.sizes[3][1], 2, "4 KiB writes in the ≤4 KiB bucket");
        assert_eq!(c.sizes[1][0], 1, "600 B read in the ≤1 KiB bucket");
        assert_eq!(c.backwards, 1);
        assert_eq!(c.gaps.len(), 1);
    }
}
