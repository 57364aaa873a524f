//! The report of a `perf` run: everything a `stress` report has (host and
//! flash traffic, WAF, GC, wear, violations — the oracle stays on), plus a
//! `perf` section: throughput, latency percentiles per operation type,
//! the latency breakdown and the bottleneck it names, utilisation of every
//! channel and die and of the host link, controller CPU and DRAM, garbage
//! collection in the foreground and background, and the time series.

use super::latency::{CdfPoint, LatencyRecorder, LatencyStats};
use super::timeseries::IntervalRow;
use super::StressReport;
use crate::host::HostConfig;
use crate::timing::{Breakdown, Component, TimingConfig};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One window of the random phase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PreconditionWindow {
    /// Random bytes written up to the end of this window.
    pub random_bytes: u64,
    pub waf: f64,
    pub free_blocks: Option<u64>,
}

/// What preconditioning did (`run::perf::precondition`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PreconditionReport {
    pub fill_percent: f64,
    pub sequential_bytes: u64,
    pub random_bytes: u64,
    pub windows: Vec<PreconditionWindow>,
    /// Whether steady state was reached (false: stopped at the cap).
    pub steady: bool,
    /// WAF of the last window.
    pub waf_steady: f64,
    pub free_blocks: Option<u64>,
    pub wall_seconds: f64,
    pub cpu_seconds: f64,
}

/// What the device's write cache did (`perf` reports).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheCounters {
    pub write_hits: u64,
    pub write_misses: u64,
    pub read_hits: u64,
    pub read_misses: u64,
    pub evictions: u64,
    pub flushes: u64,
}

/// One flow of the run.
#[derive(Clone, Debug, Serialize)]
pub struct FlowSummary {
    pub name: String,
    pub workload: String,
    pub arrival: String,
    pub queue: u32,
    pub requests: u64,
    /// Completed requests per second of simulated time.
    pub iops: f64,
    pub latency_mean_us: f64,
    pub latency_p99_us: f64,
}

/// The simulated device, as configured.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceSummary {
    pub channels: u32,
    pub dies: u32,
    pub planes: u32,
    pub link_mbps: f64,
    pub queues: u32,
    pub queue_depth: u32,
    pub timing: TimingConfig,
    pub host: HostConfig,
}

/// Where the time went, over all requests.
#[derive(Clone, Debug, Serialize)]
pub struct BreakdownSummary {
    /// Mean µs per request of each component.
    pub mean_us: BTreeMap<&'static str, f64>,
    /// Share of all request time of each component.
    pub share: BTreeMap<&'static str, f64>,
    /// Mean µs per request by operation type.
    pub by_op_mean_us: BTreeMap<&'static str, BTreeMap<&'static str, f64>>,
    /// The component with the largest share.
    pub bottleneck_component: &'static str,
    pub bottleneck_share: f64,
    /// What that means.
    pub bottleneck: &'static str,
}

fn means(b: &Breakdown, n: u64) -> BTreeMap<&'static str, f64> {
    Component::ALL
        .iter()
        .map(|&c| {
            let v = if n == 0 { 0.0 } else { b.get(c) as f64 / n as f64 / 1000.0 };
            (c.name(), v)
        })
        .collect()
}

impl BreakdownSummary {
    pub fn new(total: &Breakdown, count: u64, by_op: &[LatencyRecorder], op_names: &[&'static str]) -> Self {
        let sum = total.total().max(1) as f64;
        let share: BTreeMap<_, _> = Component::ALL.iter().map(|&c| (c.name(), total.get(c) as f64 / sum)).collect();
        let top = Component::ALL.iter().copied().max_by_key(|&c| total.get(c)).expect("components");
        BreakdownSummary {
            mean_us: means(total, count),
            share,
            by_op_mean_us: by_op
                .iter()
                .zip(op_names)
                .filter(|(r, _)| r.count() > 0)
                .map(|(r, &name)| (name, means(r.breakdown(), r.count())))
                .collect(),
            bottleneck_component: top.name(),
            bottleneck_share: total.get(top) as f64 / sum,
            bottleneck: top.bottleneck(),
        }
    }
}

/// Busy share of each resource over the simulated time.
#[derive(Clone, Debug, Serialize)]
pub struct Utilisation {
    pub host_link_to_device: f64,
    pub host_link_to_host: f64,
    /// Mean over controller cores.
    pub controller_cpu: f64,
    pub dram: f64,
    pub channel_mean: f64,
    pub channel_max: f64,
    pub die_mean: f64,
    pub die_max: f64,
    pub channels: Vec<f64>,
    pub dies: Vec<f64>,
    /// The most utilised resource.
    pub busiest: String,
}

impl Utilisation {
    pub fn new(
        link_in: f64,
        link_out: f64,
        cpu: f64,
        dram: f64,
        channels: Vec<f64>,
        dies: Vec<f64>,
        full_duplex: bool,
    ) -> Self {
        let mean = |v: &[f64]| {
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        let argmax = |v: &[f64]| v.iter().enumerate().fold((0, 0.0), |b, (i, &x)| if x > b.1 { (i, x) } else { b });
        let (ci, cmax) = argmax(&channels);
        let (di, dmax) = argmax(&dies);
        let link = if full_duplex { link_in.max(link_out) } else { link_in };
        let candidates = [
            ("host link".to_string(), link),
            ("controller CPU".to_string(), cpu),
            ("device DRAM".to_string(), dram),
            (format!("channel {ci}"), cmax),
            (format!("die {di}"), dmax),
        ];
        let busiest = candidates.iter().fold(&candidates[0], |b, c| if c.1 > b.1 { c } else { b });
        Utilisation {
            host_link_to_device: link_in,
            host_link_to_host: if full_duplex { link_out } else { link_in },
            controller_cpu: cpu,
            dram,
            channel_mean: mean(&channels),
            channel_max: max(&channels),
            die_mean: mean(&dies),
            die_max: max(&dies),
            busiest: format!("{} ({:.1} %)", busiest.0, busiest.1 * 100.0),
            channels,
            dies,
        }
    }
}

/// Garbage collection in the timed phase.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PerfGc {
    /// Pages moved by GC inside host requests (blocking them).
    pub foreground_pages_moved: u64,
    /// Pages moved by GC in idle time.
    pub background_pages_moved: u64,
    pub foreground_blocks_erased: u64,
    pub background_blocks_erased: u64,
    /// Idle steps the FTL worked in.
    pub background_steps: u64,
    /// Idle steps that ended after the next arrival (a step longer than
    /// every bound the device starts steps with; expected 0).
    pub background_overruns: u64,
}

/// The `perf` section of the report.
#[derive(Clone, Debug, Serialize)]
pub struct PerfSection {
    pub flows: Vec<FlowSummary>,
    pub device: DeviceSummary,
    pub precondition: Option<PreconditionReport>,
    /// Simulated time from the first arrival to the last completion, s.
    pub simulated_seconds: f64,
    /// Requests issued (and completed) in the timed phase.
    pub requests: u64,
    pub completed: u64,
    pub iops: f64,
    pub read_mbps: f64,
    pub write_mbps: f64,
    /// Latency per operation type (`read`, `write`, `trim`, `flush`) and `all`.
    pub latency: BTreeMap<&'static str, LatencyStats>,
    /// The latency CDF per operation type and `all` (at most
    /// [`crate::report::latency::MAX_CDF_POINTS`] points each).
    pub latency_cdf: BTreeMap<&'static str, Vec<CdfPoint>>,
    pub breakdown: BreakdownSummary,
    pub utilisation: Utilisation,
    /// Per die (index = die), pages (planes) per operation kind (`read`,
    /// `read_oob`, `read_meta`, `program`, `program_meta`, `copyback`,
    /// `erase`; kinds a die never did are left out).
    pub die_operations: Vec<BTreeMap<&'static str, u64>>,
    pub gc: PerfGc,
    pub write_cache_mode: &'static str,
    /// The event core's scheduler (`--scheduler`); absent with the
    /// reservation model (the default), so its reports are as before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<&'static str>,
    pub write_cache: Option<CacheCounters>,
    /// Reads that suspended a program or erase.
    pub suspends: u64,
    pub timeseries_interval_s: f64,
    pub timeseries: Vec<IntervalRow>,
    /// Why the run stopped issuing requests before its flows ended, if it did.
    pub stopped: Option<String>,
    // --- measurements of the host machine (not fixed by the seed) ---
    pub timed_cpu_seconds: f64,
    pub timed_wall_seconds: f64,
    /// Simulated requests per CPU-second of the timed phase; `None` (null)
    /// when the timed phase used too little CPU time to measure (see
    /// [`per_cpu_second`]).
    pub requests_per_cpu_second: Option<f64>,
    /// Host MB (10^6 bytes) read + written per CPU-second of the timed
    /// phase; `None` (null) as above.
    pub host_mb_per_cpu_second: Option<f64>,
}

/// CPU time below which a per-CPU-second rate is not reported: the kernel
/// accounts CPU time in 10 ms ticks, so 0.1 s keeps the error within 10 %.
pub const MIN_MEASURABLE_CPU_SECONDS: f64 = 0.1;

/// `amount` per CPU-second, or `None` when `cpu_seconds` is too small to
/// measure (a short run would otherwise print a bogus speed).
pub fn per_cpu_second(amount: f64, cpu_seconds: f64) -> Option<f64> {
    (cpu_seconds >= MIN_MEASURABLE_CPU_SECONDS).then(|| amount / cpu_seconds)
}

/// A rate for the summary: the figure, or "n/a" when it was not measurable.
fn rate_text(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.decimals$}"))
}

/// A figure with `decimals` decimals, or, when that would print a
/// non-zero figure as 0, with two significant digits (0.001 IOPS on a drive
/// that takes 1000 s per request is not 0).
fn figure(v: f64, decimals: usize) -> String {
    let text = format!("{v:.decimals$}");
    if v > 0.0 && v.is_finite() && text.trim_start_matches(['0', '.']).is_empty() {
        let digits = (1 - v.log10().floor() as i64).clamp(decimals as i64, 30) as usize;
        format!("{v:.digits$}")
    } else {
        text
    }
}

/// The report of a `perf` run.
#[derive(Clone, Debug, Serialize)]
pub struct PerfReport {
    #[serde(flatten)]
    pub run: StressReport,
    pub perf: PerfSection,
}

impl PerfReport {
    /// A copy with every wall-clock and memory field zeroed (for determinism checks).
    pub fn without_measurements(&self) -> PerfReport {
        let mut r = self.clone();
        r.run = r.run.without_measurements();
        let p = &mut r.perf;
        p.timed_cpu_seconds = 0.0;
        p.timed_wall_seconds = 0.0;
        p.requests_per_cpu_second = None;
        p.host_mb_per_cpu_second = None;
        if let Some(pc) = &mut p.precondition {
            pc.wall_seconds = 0.0;
            pc.cpu_seconds = 0.0;
        }
        r
    }

    /// The readable summary printed at the end of a run.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let r = &self.run;
        let p = &self.perf;
        let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
        let _ = writeln!(s, "nandlab perf — preset {} — FTL {} — seed {}", r.preset, r.ftl, r.seed);
        for f in &p.flows {
            let _ = writeln!(
                s,
                "  flow       {} (queue {}): {} — {}; {} requests, {} IOPS, mean {:.1} µs, p99 {:.1} µs",
                f.name,
                f.queue,
                f.workload,
                f.arrival,
                f.requests,
                figure(f.iops, 0),
                f.latency_mean_us,
                f.latency_p99_us
            );
        }
        let d = &p.device;
        let _ = writeln!(
            s,
            "  device     {:.2} GiB raw, {:.2} GiB logical; {} channels, {} dies, {} planes; link {:.0} MB/s, {} queue(s) x {}; write cache {}",
            gib(r.raw_bytes),
            gib(r.logical_bytes),
            d.channels,
            d.dies,
            d.planes,
            d.link_mbps,
            d.queues,
            d.queue_depth,
            p.write_cache_mode
        );
        if let Some(name) = p.scheduler {
            let _ = writeln!(s, "  timing     event core, scheduler {name}");
        }
        if let Some(pc) = &p.precondition {
            let _ = writeln!(
                s,
                "  precond.   {}% filled: {:.2} GiB sequential + {:.2} GiB random in {} windows, {} (WAF {:.3}, free blocks {}), {:.1} s CPU",
                pc.fill_percent,
                gib(pc.sequential_bytes),
                gib(pc.random_bytes),
                pc.windows.len(),
                if pc.steady { "steady" } else { "NOT steady (stopped at the cap)" },
                pc.waf_steady,
                pc.free_blocks.map_or("?".into(), |f| f.to_string()),
                pc.cpu_seconds
            );
        }
        let _ = writeln!(
            s,
            "  simulated  {:.4} s, {} requests: {} IOPS, read {} MB/s, write {} MB/s",
            p.simulated_seconds,
            p.completed,
            figure(p.iops, 0),
            figure(p.read_mbps, 1),
            figure(p.write_mbps, 1)
        );
        let _ = writeln!(
            s,
            "  latency µs {:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "op", "count", "mean", "p50", "p90", "p99", "p99.9", "p99.99", "max"
        );
        for (op, l) in &p.latency {
            let _ = writeln!(
                s,
                "             {:>6} {:>10} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                op, l.count, l.mean_us, l.p50_us, l.p90_us, l.p99_us, l.p99_9_us, l.p99_99_us, l.max_us
            );
        }
        let mut parts: Vec<(&str, f64)> =
            p.breakdown.share.iter().filter(|(_, v)| **v >= 0.005).map(|(k, v)| (*k, *v)).collect();
        parts.sort_by(|a, b| b.1.total_cmp(&a.1));
        let _ = writeln!(
            s,
            "  breakdown  {}",
            parts.iter().map(|(k, v)| format!("{k} {:.1}%", v * 100.0)).collect::<Vec<_>>().join(", ")
        );
        let _ = writeln!(
            s,
            "  bottleneck {} ({} is {:.1}% of request time)",
            p.breakdown.bottleneck,
            p.breakdown.bottleneck_component,
            p.breakdown.bottleneck_share * 100.0
        );
        let u = &p.utilisation;
        let _ = writeln!(
            s,
            "  busy       channels mean {:.1}% max {:.1}%, dies mean {:.1}% max {:.1}%, link {:.1}%/{:.1}%, CPU {:.1}%, DRAM {:.1}%; busiest: {}",
            u.channel_mean * 100.0,
            u.channel_max * 100.0,
            u.die_mean * 100.0,
            u.die_max * 100.0,
            u.host_link_to_device * 100.0,
            u.host_link_to_host * 100.0,
            u.controller_cpu * 100.0,
            u.dram * 100.0,
            u.busiest
        );
        let g = &p.gc;
        let _ = writeln!(
            s,
            "  GC         foreground {} pages moved, {} blocks erased; background {} pages moved, {} blocks erased ({} idle steps, {} overran an arrival); WAF {:.3} (last quarter {:.3})",
            g.foreground_pages_moved,
            g.foreground_blocks_erased,
            g.background_pages_moved,
            g.background_blocks_erased,
            g.background_steps,
            g.background_overruns,
            r.waf,
            r.waf_steady
        );
        if let Some(c) = &p.write_cache {
            let _ = writeln!(
                s,
                "  cache      {}: write hits {} misses {}, read hits {} misses {}, {} evictions, {} flushes",
                p.write_cache_mode, c.write_hits, c.write_misses, c.read_hits, c.read_misses, c.evictions, c.flushes
            );
        }
        r.write_wear_and_ftl(&mut s);
        if p.suspends > 0 {
            let _ = writeln!(s, "  suspend    {} reads suspended a program or erase", p.suspends);
        }
        let _ = writeln!(
            s,
            "  speed      {:.2} s CPU timed ({:.2} s in all), {} simulated requests per CPU-second, {} host MB per CPU-second, peak RSS {:.0} MiB",
            p.timed_cpu_seconds,
            r.cpu_seconds,
            rate_text(p.requests_per_cpu_second, 0),
            rate_text(p.host_mb_per_cpu_second, 1),
            r.peak_rss_bytes as f64 / f64::from(1u32 << 20)
        );
        if let Some(m) = &r.remount {
            m.write_line(&mut s);
        }
        if let Some(why) = &r.stopped_early {
            let _ = writeln!(s, "  stopped    early: {why}");
        }
        if r.interrupted {
            let _ = writeln!(s, "{}", super::INTERRUPTED_LINE);
        }
        if r.errors == 0 && r.warnings == 0 {
            let _ = writeln!(s, "  result     PASS — no violations (oracle on)");
        } else {
            let verdict = if r.errors == 0 { "PASS with warnings" } else { "FAIL" };
            let _ = writeln!(s, "  result     {verdict} — {} errors, {} warnings", r.errors, r.warnings);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_nonzero_rate_is_printed_as_itself_not_as_zero() {
        assert_eq!(figure(0.000999, 0), "0.00100");
        assert_eq!(figure(0.04, 1), "0.040");
        assert_eq!(figure(216.4, 0), "216", "normal figures keep their format");
        assert_eq!(figure(2.71, 1), "2.7");
        assert_eq!(figure(0.0, 1), "0.0");
        assert_eq!(figure(0.6, 0), "1", "rounds to a non-zero figure: unchanged");
    }
}
