//! `nandlab trace stats`: what a trace contains, in one streaming pass.
//!
//! - Requests, and per operation (read, write, trim, flush) the count and
//!   bytes; zero-length requests are counted apart too.
//! - Request sizes: a histogram in power-of-two buckets per operation.
//! - **Footprint**: distinct 512-byte units touched by reads, writes and
//!   trims, × 512 bytes (a request that is not sector-aligned touches
//!   every unit it overlaps). Units below the bitmap's range
//!   (`bitmap_max_bytes` of bitmap, 256 MiB by default: addresses below
//!   1 TiB) are counted exactly. Units at or above it, if any, go into a
//!   HyperLogLog sketch (`hll.rs`) of the same 512-byte units, so only that
//!   part is estimated: the table and the JSON give the exact part, the
//!   estimated part and its standard error (0.81 % of the estimated part),
//!   and `footprint_exact` is true only when nothing was estimated. A
//!   request reaching beyond the range adds only its units beyond it to
//!   the sketch, and at most 1 GiB of them; the rest of a larger request is
//!   added without deduplication (reported), so the CPU time of one request
//!   stays bounded.
//! - **Sequentiality**: a read (write, trim) is sequential when it starts
//!   where the previous request of the same operation ended, whatever its
//!   device.
//! - **Inter-arrival** times between consecutive requests in file order:
//!   min, mean and max exact; median and p99 from an HDR histogram over the
//!   whole u64 range with 3 significant digits (the nearest-rank quantile,
//!   reported as the top of its histogram bucket: at most 0.1 % above the
//!   true value, and never outside [min, max]); and how often time went
//!   backwards (such a pair gives no gap).
//! - Time span (earliest to latest time), address range, requests per
//!   device.
//! - Times are the transformed ones, rebased to the first request but
//!   signed ([`Transformed::next_timed`]): replay clamps a time before the
//!   first request's to 0, which would hide backward steps and shrink the
//!   span of a trace that does not start with its earliest request.

use super::hll::HyperLogLog;
use super::TraceRequest;
use crate::util::size::human_bytes;
use crate::workload::transform::{TransformCounts, Transformed};
use crate::workload::HostOp;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Bytes per footprint unit (bitmap bit or sketch item).
pub const FOOTPRINT_UNIT_BYTES: u64 = 512;
/// Largest part of one request inserted unit by unit in the sketch (1 GiB).
const SKETCH_REQUEST_UNITS: u64 = (1 << 30) / FOOTPRINT_UNIT_BYTES;
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

/// Inter-arrival summary, microseconds (see the module docs for precision).
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

/// Statistics of a trace (JSON schema `schema_version` 2: version 1 had no
/// `footprint_exact_*`/`footprint_estimated_*` fields nor `warnings`, and
/// estimated the whole footprint over 4 KiB blocks past the bitmap range).
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
    /// Distinct 512-byte units touched × 512: `footprint_exact_part_bytes`
    /// + `footprint_estimated_part_bytes`.
    pub footprint_bytes: u64,
    /// What was counted and how, in words.
    pub footprint_method: String,
    /// Nothing was estimated.
    pub footprint_exact: bool,
    /// Units below this byte address are counted exactly (the bitmap's range).
    pub footprint_exact_below_bytes: u64,
    /// The part of the footprint below `footprint_exact_below_bytes` (exact).
    pub footprint_exact_part_bytes: u64,
    /// The part at or above it (HyperLogLog estimate; 0 when exact).
    pub footprint_estimated_part_bytes: u64,
    /// One standard error of the estimated part, bytes.
    pub footprint_standard_error_bytes: u64,
    pub offset_min_bytes: Option<u64>,
    pub end_max_bytes: Option<u64>,
    /// Times after the transforms (rebased: the first request is at 0, so
    /// a later one may be negative when the trace's time goes backwards).
    pub time_first_ns: Option<i128>,
    pub time_last_ns: Option<i128>,
    pub span_seconds: f64,
    pub inter_arrival: InterArrival,
    /// Requests per device (at most 1024 listed; see `other_devices_requests`).
    pub devices: BTreeMap<u32, u64>,
    pub other_devices_requests: u64,
    /// What deserves attention (e.g. filters that kept no request).
    pub warnings: Vec<String>,
}

/// Distinct 512-byte units touched: a growing bitmap below its range, a
/// sketch (created on first use) at and above it.
struct Footprint {
    words: Vec<u64>,
    max_words: usize,
    sketch: Option<HyperLogLog>,
    /// Bytes of requests beyond [`SKETCH_REQUEST_UNITS`] added undeduplicated.
    unsketched_bytes: u64,
}

/// The footprint, split into its exact and estimated parts.
struct FootprintFigures {
    exact_below_bytes: u64,
    exact_part_bytes: u64,
    estimated_part_bytes: u64,
    standard_error_bytes: u64,
    unsketched_bytes: u64,
}

impl Footprint {
    fn new(bitmap_max_bytes: u64) -> Self {
        let max_words = usize::try_from(bitmap_max_bytes / 8).unwrap_or(usize::MAX).max(1);
        Footprint { words: Vec::new(), max_words, sketch: None, unsketched_bytes: 0 }
    }

    /// The first unit not covered by the bitmap.
    fn limit_units(&self) -> u64 {
        (self.max_words as u64).saturating_mul(64)
    }

    fn add(&mut self, offset: u64, size: u64) {
        if size == 0 {
            return;
        }
        let first = offset / FOOTPRINT_UNIT_BYTES;
        let end = (offset.saturating_add(size) - 1) / FOOTPRINT_UNIT_BYTES + 1;
        let limit = self.limit_units();
        if first < limit {
            let e = end.min(limit);
            let need = e.div_ceil(64) as usize;
            if need > self.words.len() {
                let grown = need.max(self.words.len() * 2).min(self.max_words);
                self.words.resize(grown, 0);
            }
            set_bits(&mut self.words, first, e);
        }
        if end > limit {
            let start = first.max(limit);
            let sketched = (end - start).min(SKETCH_REQUEST_UNITS);
            self.unsketched_bytes =
                self.unsketched_bytes.saturating_add((end - start - sketched) * FOOTPRINT_UNIT_BYTES);
            let hll = self.sketch.get_or_insert_with(HyperLogLog::default);
            for u in start..start + sketched {
                hll.insert(u);
            }
        }
    }

    fn figures(&self) -> FootprintFigures {
        let exact_units: u64 = self.words.iter().map(|w| u64::from(w.count_ones())).sum();
        let estimate_units = self.sketch.as_ref().map_or(0, HyperLogLog::estimate);
        let estimated_part_bytes = (estimate_units * FOOTPRINT_UNIT_BYTES).saturating_add(self.unsketched_bytes);
        FootprintFigures {
            exact_below_bytes: self.limit_units().saturating_mul(FOOTPRINT_UNIT_BYTES),
            exact_part_bytes: exact_units * FOOTPRINT_UNIT_BYTES,
            estimated_part_bytes,
            standard_error_bytes: (estimate_units as f64 * FOOTPRINT_UNIT_BYTES as f64 * HyperLogLog::STANDARD_ERROR)
                .round() as u64,
            unsketched_bytes: self.unsketched_bytes,
        }
    }
}

impl FootprintFigures {
    fn total_bytes(&self) -> u64 {
        self.exact_part_bytes.saturating_add(self.estimated_part_bytes)
    }

    fn exact(&self) -> bool {
        self.estimated_part_bytes == 0
    }

    /// What was counted and how, in words.
    fn method(&self) -> String {
        let below = human_bytes(self.exact_below_bytes);
        if self.exact() {
            return format!("exact: distinct 512-byte units touched (bitmap; every address below {below})");
        }
        let mut m = format!(
            "distinct 512-byte units touched: {} exact below {below} (bitmap), {} estimated at or above it (HyperLogLog, standard error {:.2} % = ±{})",
            human_bytes(self.exact_part_bytes),
            human_bytes(self.estimated_part_bytes),
            HyperLogLog::STANDARD_ERROR * 100.0,
            human_bytes(self.standard_error_bytes)
        );
        if self.unsketched_bytes > 0 {
            m += &format!(
                "; {} of it from requests larger than 1 GiB, counted without deduplication",
                human_bytes(self.unsketched_bytes)
            );
        }
        m
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
    time_first: Option<i128>,
    time_last: Option<i128>,
    time_min: i128,
    time_max: i128,
    gaps: hdrhistogram::Histogram<u64>,
    gap_sum_ns: u128,
    gap_min_ns: u64,
    gap_max_ns: u64,
    backwards: u64,
    devices: BTreeMap<u32, u64>,
    other_devices: u64,
}

impl StatsCollector {
    /// `bitmap_max_bytes`: memory allowed for the exact footprint bitmap.
    pub fn new(bitmap_max_bytes: u64) -> Self {
        StatsCollector {
            requests: 0,
            ops: Default::default(),
            sizes: [[0; 3]; SIZE_BOUNDS + 1],
            footprint: Footprint::new(bitmap_max_bytes),
            last_end: [None; 3],
            offset_min: None,
            end_max: None,
            time_first: None,
            time_last: None,
            time_min: i128::MAX,
            time_max: i128::MIN,
            // The whole u64 range: no gap is ever clamped.
            gaps: hdrhistogram::Histogram::new_with_bounds(1, u64::MAX, 3).expect("valid bounds"),
            gap_sum_ns: 0,
            gap_min_ns: u64::MAX,
            gap_max_ns: 0,
            backwards: 0,
            devices: BTreeMap::new(),
            other_devices: 0,
        }
    }

    /// Count `r`, whose time (signed: it may precede the first request's)
    /// is `time_ns` ([`Transformed::next_timed`]).
    pub fn add(&mut self, r: &TraceRequest, time_ns: i128) {
        self.requests += 1;
        let i = r.op.index();
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
            if time_ns < prev {
                self.backwards += 1;
            } else {
                let gap = u64::try_from(time_ns - prev).unwrap_or(u64::MAX);
                self.gaps.saturating_record(gap);
                self.gap_sum_ns += u128::from(gap);
                self.gap_min_ns = self.gap_min_ns.min(gap);
                self.gap_max_ns = self.gap_max_ns.max(gap);
            }
        } else {
            self.time_first = Some(time_ns);
        }
        self.time_last = Some(time_ns);
        self.time_min = self.time_min.min(time_ns);
        self.time_max = self.time_max.max(time_ns);
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
        let quantile = |q: f64| us(self.gaps.value_at_quantile(q).clamp(self.gap_min_ns, self.gap_max_ns));
        InterArrival {
            min_us: us(self.gap_min_ns),
            mean_us: self.gap_sum_ns as f64 / n as f64 / 1e3,
            p50_us: quantile(0.5),
            p99_us: quantile(0.99),
            max_us: us(self.gap_max_ns),
            backwards: self.backwards,
        }
    }

    /// The statistics, with the reader's and transforms' figures.
    pub fn finish(&self, stream: &Transformed, with_transforms: bool) -> TraceStats {
        let r = stream.reader();
        let fp = self.footprint.figures();
        let span_ns = if self.requests == 0 { 0 } else { self.time_max - self.time_min };
        TraceStats {
            schema_version: 2,
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
            footprint_bytes: fp.total_bytes(),
            footprint_method: fp.method(),
            footprint_exact: fp.exact(),
            footprint_exact_below_bytes: fp.exact_below_bytes,
            footprint_exact_part_bytes: fp.exact_part_bytes,
            footprint_estimated_part_bytes: fp.estimated_part_bytes,
            footprint_standard_error_bytes: fp.standard_error_bytes,
            offset_min_bytes: self.offset_min,
            end_max_bytes: self.end_max,
            time_first_ns: self.time_first,
            time_last_ns: self.time_last,
            span_seconds: span_ns as f64 / 1e9,
            inter_arrival: self.inter_arrival(),
            devices: self.devices.clone(),
            other_devices_requests: self.other_devices,
            warnings: stream.warnings(),
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
    while let Some((r, time_ns)) = stream.next_timed()? {
        c.add(&r, time_ns);
    }
    Ok(c.finish(stream, with_transforms))
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
            "\nfootprint  {}{} ({} bytes), {}",
            if self.footprint_exact { "" } else { "≈ " },
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
        for w in &self.warnings {
            let _ = writeln!(s, "warning    {w}");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl StatsCollector {
        /// Count `r` at its own (unsigned) time.
        fn add_req(&mut self, r: &TraceRequest) {
            self.add(r, i128::from(r.time_ns));
        }
    }

    fn req(op: HostOp, offset: u64, size: u64, t: u64) -> TraceRequest {
        TraceRequest { op, offset_bytes: offset, size_bytes: size, time_ns: t, device: 0, line: 1 }
    }

    #[test]
    fn bitmap_footprint_counts_overlaps_once() {
        let mut c = StatsCollector::new(1 << 20);
        c.add_req(&req(HostOp::Write, 0, 8192, 0));
        c.add_req(&req(HostOp::Read, 4096, 8192, 10));
        c.add_req(&req(HostOp::Write, 1000, 10, 20)); // inside unit 1
        c.add_req(&req(HostOp::Flush, 0, 0, 30));
        let f = c.footprint.figures();
        assert!(f.exact());
        assert_eq!((f.total_bytes(), f.exact_part_bytes, f.standard_error_bytes), (12288, 12288, 0));
        assert!(f.method().starts_with("exact"), "{}", f.method());
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
    fn only_units_beyond_the_bitmap_are_estimated() {
        let mut c = StatsCollector::new(64); // 512 units: addresses below 256 KiB exact
        for i in 0..1000u64 {
            // Unaligned 4 KiB requests each touch 9 units; neighbours share one.
            c.add_req(&req(HostOp::Write, i * 4096 + 100, 4096, i));
        }
        c.add_req(&req(HostOp::Write, 100, 4096, 2000)); // a duplicate
        let f = c.footprint.figures();
        assert!(!f.exact());
        assert_eq!(f.exact_below_bytes, 256 << 10);
        // Units 0 ..= 8000 are touched: 512 of them below the bitmap's end.
        assert_eq!(f.exact_part_bytes, 512 * 512);
        let want = (8001 - 512) * 512;
        let err = (f.estimated_part_bytes as f64 - want as f64).abs();
        assert!(err <= 3.0 * f.standard_error_bytes as f64, "{} vs {want}", f.estimated_part_bytes);
        assert!(f.method().contains("256 KiB exact below 256 KiB (bitmap)"), "{}", f.method());
    }

    #[test]
    fn a_request_straddling_the_bitmap_end_is_split_between_the_parts() {
        let mut c = StatsCollector::new(8); // 64 units: 32 KiB exact
        c.add_req(&req(HostOp::Write, 30 << 10, 4 << 10, 0));
        let f = c.footprint.figures();
        assert_eq!(f.exact_part_bytes, 2 << 10);
        assert_eq!(f.estimated_part_bytes, 2 << 10, "4 units, small enough for linear counting to be exact");
    }

    #[test]
    fn sequential_sizes_and_gaps() {
        let mut c = StatsCollector::new(1 << 20);
        c.add_req(&req(HostOp::Write, 0, 4096, 0));
        c.add_req(&req(HostOp::Write, 4096, 4096, 1000));
        c.add_req(&req(HostOp::Read, 0, 600, 500));
        assert_eq!(c.ops[1].sequential, 1);
        assert_eq!(c.sizes[3][1], 2, "4 KiB writes in the ≤4 KiB bucket");
        assert_eq!(c.sizes[1][0], 1, "600 B read in the ≤1 KiB bucket");
        assert_eq!(c.backwards, 1);
        assert_eq!(c.gaps.len(), 1);
    }

    #[test]
    fn inter_arrival_quantiles_keep_gaps_of_any_size() {
        // Gaps: 1 ms, 1 ms, 2 s, 1 µs, 3 ms (nearest-rank median 1 ms, p99 2 s).
        let mut c = StatsCollector::new(1 << 20);
        let mut t = 5_000;
        for gap in [0, 1_000_000, 1_000_000, 2_000_000_000, 1_000, 3_000_000] {
            t += gap;
            c.add_req(&req(HostOp::Read, 0, 512, t));
        }
        let ia = c.inter_arrival();
        assert_eq!((ia.min_us, ia.max_us), (1.0, 2_000_000.0));
        assert_eq!(ia.mean_us, 2_005_001_000.0 / 5.0 / 1e3);
        assert!((ia.p50_us - 1_000.0).abs() <= 1.0, "median {}", ia.p50_us);
        assert_eq!(ia.p99_us, 2_000_000.0, "clamped to the exact max");
        // A gap near 2^64 ns is neither clamped nor an error.
        c.add_req(&req(HostOp::Read, 0, 512, u64::MAX));
        assert_eq!(c.inter_arrival().max_us, (u64::MAX - t) as f64 / 1e3);
    }
}
