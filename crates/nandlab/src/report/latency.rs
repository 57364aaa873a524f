//! Latency statistics per operation type: HDR histograms (Gil Tene's
//! `hdrhistogram`, 3 significant digits, 1 ns to 10,000 s) and the
//! percentiles the report prints.

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
}
