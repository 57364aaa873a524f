//! How a flow's requests arrive.
//!
//! - **Closed loop** (`closed`, fio's `iodepth`): the flow keeps `iodepth`
//!   requests outstanding; the first `iodepth` arrive at the start and each
//!   completion lets the next one arrive. Throughput is whatever the device
//!   sustains at that depth.
//! - **Trace timestamps** (`timestamps` or `timestamps:SCALE`): each
//!   request arrives at its own `arrival_ns` × SCALE (0.5 replays a trace
//!   twice as fast), whatever the device does: the open loop of trace
//!   replay.
//! - **Fixed rate** (`rate:IOPS`, `poisson:IOPS`, fio's `rate_iops` with
//!   `rate_process=linear|poisson`): open loop, evenly spaced or with
//!   exponentially distributed gaps; at least 0.001 IOPS (one request per
//!   1000 s of simulated time): slower rates reach the end of simulated
//!   time (see [`crate::timing`]) within a few million requests.

use crate::seed::Rng;
use rand::RngExt;
use std::fmt;

/// A flow's arrival process. See the module docs.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Arrival {
    Closed { iodepth: u32 },
    Timestamps { time_scale: f64 },
    Rate { iops: f64, poisson: bool },
}

impl Arrival {
    /// The gap before the next request of a fixed-rate flow, ns.
    pub fn rate_gap_ns(iops: f64, poisson: bool, rng: &mut Rng) -> u64 {
        let mean = 1e9 / iops;
        let gap = if poisson {
            // Inverse CDF of the exponential distribution; 1 - u avoids ln(0).
            -mean * (1.0 - rng.random::<f64>()).ln()
        } else {
            mean
        };
        gap.round().max(0.0) as u64
    }
}

impl fmt::Display for Arrival {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arrival::Closed { iodepth } => write!(f, "closed loop, iodepth {iodepth}"),
            Arrival::Timestamps { time_scale } => {
                write!(f, "open loop, trace timestamps x {time_scale}")
            }
            Arrival::Rate { iops, poisson } => {
                write!(f, "open loop, {iops} IOPS {}", if *poisson { "(Poisson)" } else { "(evenly spaced)" })
            }
        }
    }
}

/// The slowest fixed rate, IOPS: see the module docs.
pub const MIN_RATE_IOPS: f64 = 0.001;

/// Parse `closed`, `timestamps[:SCALE]`, `rate:IOPS` or `poisson:IOPS`
/// (`iodepth` fills in the closed loop's depth).
pub fn parse_arrival(text: &str, iodepth: u32) -> Result<Arrival, String> {
    let (kind, arg) = match text.split_once(':') {
        Some((k, a)) => (k.trim(), Some(a.trim())),
        None => (text.trim(), None),
    };
    let number = |what: &str| -> Result<f64, String> {
        let a = arg.ok_or_else(|| format!("`{text}`: {kind} needs a value, e.g. {kind}:{what}"))?;
        let v: f64 = a.parse().map_err(|_| format!("`{text}`: `{a}` is not a number"))?;
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(format!("`{text}`: the value must be positive"))
        }
    };
    match kind {
        "closed" if arg.is_none() => Ok(Arrival::Closed { iodepth }),
        "timestamps" => Ok(Arrival::Timestamps { time_scale: if arg.is_some() { number("0.5")? } else { 1.0 } }),
        "rate" | "poisson" => {
            let iops = number("10000")?;
            if iops < MIN_RATE_IOPS {
                return Err(format!(
                    "`{text}`: the rate must be at least {MIN_RATE_IOPS} IOPS (one request per 1000 s)"
                ));
            }
            Ok(Arrival::Rate { iops, poisson: kind == "poisson" })
        }
        _ => Err(format!("`{text}`: arrival must be closed, timestamps[:SCALE], rate:IOPS or poisson:IOPS")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seed::rng_for;

    #[test]
    fn arrivals_parse_and_reject_nonsense() {
        assert_eq!(parse_arrival("closed", 8).unwrap(), Arrival::Closed { iodepth: 8 });
        assert_eq!(parse_arrival("timestamps:0.5", 1).unwrap(), Arrival::Timestamps { time_scale: 0.5 });
        assert_eq!(parse_arrival("poisson:2000", 1).unwrap(), Arrival::Rate { iops: 2000.0, poisson: true });
        assert!(parse_arrival("rate", 1).is_err());
        assert!(parse_arrival("rate:-3", 1).is_err());
        assert!(parse_arrival("sometimes", 1).is_err());
    }

    #[test]
    fn rates_below_one_request_per_1000_s_are_refused_with_the_bound() {
        for text in ["rate:1e-9", "poisson:0.0009"] {
            let e = parse_arrival(text, 1).unwrap_err();
            assert!(e.contains("at least 0.001 IOPS"), "{text}: {e}");
        }
        assert_eq!(parse_arrival("rate:0.001", 1).unwrap(), Arrival::Rate { iops: 0.001, poisson: false });
    }

    #[test]
    fn poisson_gaps_average_the_rate() {
        let mut rng = rng_for(1, "t");
        let n = 20_000;
        let total: u64 = (0..n).map(|_| Arrival::rate_gap_ns(10_000.0, true, &mut rng)).sum();
        let mean = total as f64 / n as f64;
        assert!((mean - 100_000.0).abs() < 2_000.0, "mean gap {mean}");
        assert_eq!(Arrival::rate_gap_ns(10_000.0, false, &mut rng), 100_000);
    }
}
