//! Latency statistics per operation type: HDR histograms (Gil Tene's
//! `hdrhistogram`, 3 significant digits, 1 ns to 10,000 s) and the
//! percentiles the report prints, and a bounded CDF for plots.
//!
//! The CDF ([`LatencyRecorder::cdf`]) is a set of exact points of the
//! recorded distribution, (latency, share of requests at most that
//! latency), one per histogram bucket the grid of shares reaches: 256
//! evenly spaced shares for the body and 33 shares from 0.99 to 0.999999
//! (eight per decade of "nines") for the tail, where latency plots are
//! read. So it has at most [`MAX_CDF_POINTS`] points whatever the run's
//! length, and is a function of the histogram alone (deterministic).

use crate::timing::Breakdown;
use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency recorded exactly, ns (10,000 s); longer ones saturate.
const MAX_NS: u64 = 10_000_000_000_000;

/// Latencies and bytes of one operation type.
#[derive(Clone)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
    bytes: u64,
    breakdown: Breakdown,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        LatencyRecorder {
            hist: Histogram::new_with_bounds(1, MAX_NS, 3).expect("valid histogram bounds"),
            bytes: 0,
            breakdown: Breakdown::default(),
        }
    }
}

impl LatencyRecorder {
    pub fn record(&mut self, latency_ns: u64, bytes: u64, breakdown: &Breakdown) {
        self.hist.saturating_record(latency_ns);
        self.bytes += bytes;
        self.breakdown.accumulate(breakdown);
    }
    pub fn count(&self) -> u64 {
        self.hist.len()
    }
    pub fn breakdown(&self) -> &Breakdown {
        &self.breakdown
    }
    pub fn merge(&mut self, o: &LatencyRecorder) {
        let _ = self.hist.add(&o.hist);
        self.bytes += o.bytes;
        self.breakdown.accumulate(&o.breakdown);
    }

    /// The CDF of the recorded latencies (see the module docs); empty when
    /// nothing was recorded.
    pub fn cdf(&self) -> Vec<CdfPoint> {
        let buckets: Vec<(u64, f64)> =
            self.hist.iter_recorded().map(|v| (v.value_iterated_to(), v.quantile())).collect();
        let Some(&(first, first_share)) = buckets.first() else {
            return Vec::new();
        };
        let body = (1..=256).map(|i| f64::from(i) / 256.0);
        let tail = (16..=48).map(|k| 1.0 - 10f64.powf(-f64::from(k) / 8.0));
        let mut shares: Vec<f64> = body.chain(tail).collect();
        shares.sort_by(f64::total_cmp);
        let mut out = vec![CdfPoint { latency_us: first as f64 / 1000.0, fraction: first_share }];
        let mut next = 0;
        for share in shares {
            while next + 1 < buckets.len() && buckets[next].1 < share {
                next += 1;
            }
            let (value, fraction) = buckets[next];
            if out.last().is_some_and(|p| p.latency_us < value as f64 / 1000.0) {
                out.push(CdfPoint { latency_us: value as f64 / 1000.0, fraction });
            }
        }
        debug_assert!(out.len() <= MAX_CDF_POINTS);
        out
    }

    /// The statistics over a measurement of `seconds` of simulated time.
    pub fn stats(&self, seconds: f64) -> LatencyStats {
        let h = &self.hist;
        let us = |v: u64| v as f64 / 1000.0;
        let q = |p: f64| {
            if h.is_empty() {
                0.0
            } else {
                us(h.value_at_quantile(p))
            }
        };
        let per_s = |v: f64| if seconds > 0.0 { v / seconds } else { 0.0 };
        LatencyStats {
            count: h.len(),
            bytes: self.bytes,
            iops: per_s(h.len() as f64),
            bandwidth_mbps: per_s(self.bytes as f64 / 1e6),
            mean_us: if h.is_empty() { 0.0 } else { h.mean() / 1000.0 },
            p50_us: q(0.50),
            p90_us: q(0.90),
            p99_us: q(0.99),
            p99_9_us: q(0.999),
            p99_99_us: q(0.9999),
            max_us: if h.is_empty() { 0.0 } else { us(h.max()) },
        }
    }
}

/// Points of a latency CDF at most (see the module docs).
pub const MAX_CDF_POINTS: usize = 512;

/// One point of a latency CDF: `fraction` of the requests took at most
/// `latency_us`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CdfPoint {
    pub latency_us: f64,
    pub fraction: f64,
}

/// Latency statistics of one operation type (µs; MB = 10^6 bytes).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LatencyStats {
    pub count: u64,
    pub bytes: u64,
    pub iops: f64,
    pub bandwidth_mbps: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p99_9_us: f64,
    pub p99_99_us: f64,
    pub max_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_recorded_latencies() {
        let mut r = LatencyRecorder::default();
        for i in 1..=1000u64 {
            r.record(i * 1000, 4096, &Breakdown::default());
        }
        let s = r.stats(2.0);
        assert_eq!(s.count, 1000);
        assert!((s.p50_us - 500.0).abs() < 1.0, "{}", s.p50_us);
        assert!((s.p99_us - 990.0).abs() < 1.0, "{}", s.p99_us);
        assert!((s.max_us - 1000.0).abs() < 1.0);
        assert_eq!(s.iops, 500.0);
        assert!((s.bandwidth_mbps - 2.048).abs() < 1e-9);
    }

    #[test]
    fn the_cdf_is_bounded_monotone_and_ends_at_the_maximum() {
        assert!(LatencyRecorder::default().cdf().is_empty());
        let mut r = LatencyRecorder::default();
        for i in 1..=100_000u64 {
            r.record(i * 37 % 1_000_003 + 1, 4096, &Breakdown::default());
        }
        let cdf = r.cdf();
        assert!(cdf.len() > 200 && cdf.len() <= MAX_CDF_POINTS, "{} points", cdf.len());
        assert!(cdf.windows(2).all(|w| w[0].latency_us < w[1].latency_us && w[0].fraction <= w[1].fraction));
        let last = cdf.last().unwrap();
        assert_eq!(last.fraction, 1.0);
        assert!((last.latency_us - r.stats(1.0).max_us).abs() < 1e-9);
        let median = cdf.iter().find(|p| p.fraction >= 0.5).unwrap();
        assert!((median.latency_us - r.stats(1.0).p50_us).abs() / median.latency_us < 0.01, "{median:?}");
        let one = {
            let mut r = LatencyRecorder::default();
            r.record(5000, 1, &Breakdown::default());
            r.cdf()
        };
        // The bucket's highest value (3 significant digits), as `max_us`.
        assert_eq!(one, vec![CdfPoint { latency_us: 5.003, fraction: 1.0 }]);
    }
}
