//! Hot/cold separation: which write stream (open block of a unit) a page
//! goes to.
//!
//! Mixing data that is rewritten often (hot) with data that is not (cold)
//! in the same blocks makes garbage collection copy the cold data again and
//! again: a victim is never as empty as it would be if it held only hot
//! data. Desnoyers (SYSTOR 2012, §5) shows that under hot/cold traffic a
//! single write frontier does worse than under uniform traffic at the same
//! over-provisioning, and that keeping the two populations in separate
//! pools (each behaving like uniform traffic over its own share of spare
//! blocks) recovers most of the loss. A policy here assigns every host
//! write and every GC copy to a stream; the FTL keeps one open block per
//! stream and unit, and records the stream in each page's OOB so a mount
//! restores the classification.
//!
//! - [`HotColdKind::None`]: host writes on stream 0, GC copies on stream 1
//!   (or 0 when the FTL shares one frontier).
//! - [`dac`]: Dynamic dAta Clustering (Chiang, Lee & Chang 1999), `n`
//!   regions by update frequency.
//! - [`two_stream`]: a per-page write counter with decay decides hot or
//!   cold (exact counters in the spirit of Hsieh, Kuo & Chang 2006).

pub mod dac;
pub mod two_stream;

use serde::{Deserialize, Serialize};
use std::fmt;

/// Most streams a hot/cold policy may use.
pub const MAX_HOT_COLD_STREAMS: u8 = 8;

/// A hot/cold separation policy. Streams are small integers `0 .. streams()`.
pub trait HotColdPolicy {
    /// Streams the policy writes to (host writes and GC copies together).
    fn streams(&self) -> u8;
    /// Distinct streams one garbage-collection cycle may copy into: the
    /// FTL keeps at least this many free blocks per unit before GC starts.
    fn gc_streams(&self) -> u8 {
        1
    }
    /// The stream of a host write of logical page `lpn`; `current` is the
    /// stream its current data was written to (None: the page holds no data).
    fn host_stream(&mut self, lpn: u32, current: Option<u8>) -> u8;
    /// The stream a GC copy of `lpn`, found on stream `from`, goes to.
    fn gc_stream(&mut self, lpn: u32, from: u8) -> u8;
    /// `lpn` was trimmed.
    fn trimmed(&mut self, _lpn: u32) {}
    /// Mount: `lpn`'s current data was found on stream `stream`.
    fn restore(&mut self, _lpn: u32, _stream: u8) {}
    /// Device DRAM the policy's state takes, in bytes.
    fn dram_bytes(&self) -> u64 {
        0
    }
}

/// The hot/cold policies a configuration can name: `none`, `dac[:regions]`,
/// `two-stream[:threshold]`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(try_from = "String", into = "String")]
pub enum HotColdKind {
    #[default]
    None,
    /// DAC with this many regions (2 ..= 8).
    Dac { regions: u8 },
    /// Hot when a page's decayed write count reaches `threshold`.
    TwoStream { threshold: u8 },
}

impl HotColdKind {
    pub const DEFAULT_DAC_REGIONS: u8 = 4;
    pub const DEFAULT_TWO_STREAM_THRESHOLD: u8 = 2;
    pub const CHOICES: &'static str = "none, dac[:regions 2-8], two-stream[:threshold]";

    pub fn name(self) -> &'static str {
        match self {
            HotColdKind::None => "none",
            HotColdKind::Dac { .. } => "dac",
            HotColdKind::TwoStream { .. } => "two-stream",
        }
    }
}

impl fmt::Display for HotColdKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HotColdKind::None => f.write_str("none"),
            HotColdKind::Dac { regions } => write!(f, "dac:{regions}"),
            HotColdKind::TwoStream { threshold } => write!(f, "two-stream:{threshold}"),
        }
    }
}

impl std::str::FromStr for HotColdKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (s.trim(), None),
        };
        let number = |what: &str, default: u8, range: std::ops::RangeInclusive<u8>| -> Result<u8, String> {
            let Some(a) = arg else { return Ok(default) };
            let a = a.strip_prefix(what).and_then(|r| r.trim_start().strip_prefix('=')).unwrap_or(a).trim();
            match a.parse::<u8>() {
                Ok(v) if range.contains(&v) => Ok(v),
                _ => Err(format!("`{s}`: {what} must be a whole number within {}..={}", range.start(), range.end())),
            }
        };
        match name {
            "none" | "off" if arg.is_none() => Ok(HotColdKind::None),
            "dac" => Ok(HotColdKind::Dac {
                regions: number("regions", Self::DEFAULT_DAC_REGIONS, 2..=MAX_HOT_COLD_STREAMS)?,
            }),
            "two-stream" => Ok(HotColdKind::TwoStream {
                threshold: number("threshold", Self::DEFAULT_TWO_STREAM_THRESHOLD, 1..=255)?,
            }),
            _ => Err(format!("unknown hot/cold policy `{s}` (choose from {})", Self::CHOICES)),
        }
    }
}

impl TryFrom<String> for HotColdKind {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<HotColdKind> for String {
    fn from(k: HotColdKind) -> String {
        k.to_string()
    }
}

/// No separation: one host stream, and GC copies on their own stream or
/// (shared) on the host's.
pub struct Unseparated {
    gc_stream: u8,
}

impl HotColdPolicy for Unseparated {
    fn streams(&self) -> u8 {
        self.gc_stream + 1
    }
    #[inline]
    fn host_stream(&mut self, _lpn: u32, _current: Option<u8>) -> u8 {
        0
    }
    fn gc_stream(&mut self, _lpn: u32, _from: u8) -> u8 {
        self.gc_stream
    }
}

/// Runtime choice of hot/cold policy.
pub enum HotColdSeparator {
    None(Unseparated),
    Dac(dac::Dac),
    TwoStream(two_stream::TwoStream),
}

impl HotColdSeparator {
    /// The policy for `kind` over `lpns` logical pages; with no separation,
    /// `gc_shares_host_stream` puts GC copies on the host stream.
    pub fn new(kind: HotColdKind, lpns: u32, gc_shares_host_stream: bool) -> Self {
        match kind {
            HotColdKind::None => HotColdSeparator::None(Unseparated { gc_stream: u8::from(!gc_shares_host_stream) }),
            HotColdKind::Dac { regions } => HotColdSeparator::Dac(dac::Dac::new(regions)),
            HotColdKind::TwoStream { threshold } => {
                HotColdSeparator::TwoStream(two_stream::TwoStream::new(lpns, threshold))
            }
        }
    }

    fn policy(&mut self) -> &mut dyn HotColdPolicy {
        match self {
            HotColdSeparator::None(p) => p,
            HotColdSeparator::Dac(p) => p,
            HotColdSeparator::TwoStream(p) => p,
        }
    }

    fn policy_ref(&self) -> &dyn HotColdPolicy {
        match self {
            HotColdSeparator::None(p) => p,
            HotColdSeparator::Dac(p) => p,
            HotColdSeparator::TwoStream(p) => p,
        }
    }

    pub fn is_none(&self) -> bool {
        matches!(self, HotColdSeparator::None(_))
    }

    pub fn streams(&self) -> u8 {
        self.policy_ref().streams()
    }

    pub fn gc_streams(&self) -> u8 {
        self.policy_ref().gc_streams()
    }

    /// The stream of a host write of `lpn`. `current` is asked only by the
    /// policies that use it, so the unseparated hot path does no extra lookup.
    #[inline(always)]
    pub fn host_stream(&mut self, lpn: u32, current: impl FnOnce() -> Option<u8>) -> u8 {
        match self {
            HotColdSeparator::None(_) => 0,
            HotColdSeparator::Dac(p) => p.host_stream(lpn, current()),
            HotColdSeparator::TwoStream(p) => p.host_stream(lpn, None),
        }
    }

    #[inline]
    pub fn gc_stream(&mut self, lpn: u32, from: u8) -> u8 {
        match self {
            HotColdSeparator::None(p) => p.gc_stream,
            other => other.policy().gc_stream(lpn, from),
        }
    }

    pub fn trimmed(&mut self, lpn: u32) {
        self.policy().trimmed(lpn)
    }

    pub fn restore(&mut self, lpn: u32, stream: u8) {
        self.policy().restore(lpn, stream)
    }

    pub fn dram_bytes(&self) -> u64 {
        self.policy_ref().dram_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_with_and_without_parameters() {
        assert_eq!("none".parse(), Ok(HotColdKind::None));
        assert_eq!("dac".parse(), Ok(HotColdKind::Dac { regions: 4 }));
        assert_eq!("dac:3".parse(), Ok(HotColdKind::Dac { regions: 3 }));
        assert_eq!("dac:regions=6".parse(), Ok(HotColdKind::Dac { regions: 6 }));
        assert_eq!("two-stream:threshold=3".parse(), Ok(HotColdKind::TwoStream { threshold: 3 }));
        assert!("dac:9".parse::<HotColdKind>().unwrap_err().contains("2..=8"));
        assert!("dac:x".parse::<HotColdKind>().is_err());
        assert!("lukewarm".parse::<HotColdKind>().unwrap_err().contains("dac"));
        for k in [HotColdKind::None, HotColdKind::Dac { regions: 5 }, HotColdKind::TwoStream { threshold: 2 }] {
            assert_eq!(k.to_string().parse(), Ok(k));
        }
    }
}
