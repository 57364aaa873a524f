//! Sizes written the way fio users write them.
//!
//! `4096`, `4k`, `4K`, `4KiB`, `4kb`, `1.5m`, `1g`, `2T`: binary multiples
//! (fio's default `kb_base=1024`, where `k`, `KB` and `KiB` all mean 1024).
//! Where a size is relative to the device, `50%` is a share of the logical
//! capacity and `4x` (a nandlab extension) a multiple of it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A size as written: absolute, a percentage of capacity, or a multiple of it.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum SizeSpec {
    Bytes(u64),
    PercentOfCapacity(f64),
    TimesCapacity(f64),
}

impl SizeSpec {
    /// The size in bytes on a device of `capacity_bytes`.
    pub fn resolve(self, capacity_bytes: u64) -> u64 {
        match self {
            SizeSpec::Bytes(b) => b,
            SizeSpec::PercentOfCapacity(p) => (capacity_bytes as f64 * p / 100.0) as u64,
            SizeSpec::TimesCapacity(x) => (capacity_bytes as f64 * x) as u64,
        }
    }
}

impl fmt::Display for SizeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeSpec::Bytes(b) => write!(f, "{b}"),
            SizeSpec::PercentOfCapacity(p) => write!(f, "{p}%"),
            SizeSpec::TimesCapacity(x) => write!(f, "{x}x"),
        }
    }
}

impl std::str::FromStr for SizeSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if let Some(p) = t.strip_suffix('%') {
            let v: f64 = p.trim().parse().map_err(|_| format!("`{s}`: expected a percentage such as 50%"))?;
            if !(v > 0.0 && v <= 100.0) {
                return Err(format!("`{s}`: a percentage must be within (0, 100]"));
            }
            return Ok(SizeSpec::PercentOfCapacity(v));
        }
        if let Some(x) = t.strip_suffix(['x', 'X']) {
            let v: f64 = x.trim().parse().map_err(|_| format!("`{s}`: expected a multiple of capacity such as 4x"))?;
            if !(v > 0.0 && v.is_finite()) {
                return Err(format!("`{s}`: a multiple of capacity must be positive"));
            }
            return Ok(SizeSpec::TimesCapacity(v));
        }
        parse_bytes(t).map(SizeSpec::Bytes)
    }
}

impl TryFrom<String> for SizeSpec {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<SizeSpec> for String {
    fn from(s: SizeSpec) -> String {
        s.to_string()
    }
}

/// Parse an absolute size with an optional binary suffix.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("`{s}`: expected a size such as 4k, 64KiB or 1g"));
    }
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        "p" | "pb" | "pib" => 50,
        other => {
            return Err(format!("`{s}`: unknown size suffix `{other}` (use k, m, g, t, p, optionally with B or iB)"))
        }
    };
    let value: f64 = num.parse().map_err(|_| format!("`{s}`: `{num}` is not a number"))?;
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("`{s}`: too large"));
    }
    if bytes.fract() != 0.0 {
        return Err(format!("`{s}`: not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// A size range `min-max` (fio's `bsrange`).
pub fn parse_range(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s.split_once('-').ok_or_else(|| format!("`{s}`: expected a range such as 8k-64k"))?;
    let (a, b) = (parse_bytes(a)?, parse_bytes(b)?);
    if a > b {
        return Err(format!("`{s}`: the minimum is larger than the maximum"));
    }
    Ok((a, b))
}

/// A byte count exactly, with a readable binary unit when it is 1 KiB or
/// more: `1000 bytes`, `1572864 bytes (1.50 MiB)`. For messages where a
/// rounded figure alone could read as zero.
pub fn exact_bytes(bytes: u64) -> String {
    if bytes < 1024 {
        format!("{bytes} bytes")
    } else {
        format!("{bytes} bytes ({})", human_bytes(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_suffixes_are_binary() {
        assert_eq!(parse_bytes("4k").unwrap(), 4096);
        assert_eq!(parse_bytes("64KiB").unwrap(), 65536);
        assert_eq!(parse_bytes("1g").unwrap(), 1 << 30);
        assert_eq!(parse_bytes("1.5m").unwrap(), 3 << 19);
        assert_eq!(parse_bytes("512").unwrap(), 512);
        assert_eq!(parse_range("8k-64k").unwrap(), (8192, 65536));
    }

    #[test]
    fn relative_sizes_resolve_against_capacity() {
        assert_eq!("4x".parse::<SizeSpec>().unwrap().resolve(1000), 4000);
        assert_eq!("50%".parse::<SizeSpec>().unwrap().resolve(1000), 500);
    }

    #[test]
    fn exact_bytes_keep_every_byte_and_add_a_unit() {
        assert_eq!(exact_bytes(1000), "1000 bytes");
        assert_eq!(exact_bytes(3 << 19), "1572864 bytes (1.50 MiB)");
        assert_eq!(exact_bytes(16 << 20), "16777216 bytes (16 MiB)");
    }

    #[test]
    fn bad_sizes_say_why() {
        assert!(parse_bytes("4q").unwrap_err().contains("suffix"));
        assert!(parse_bytes("k").is_err());
        assert!(parse_bytes("0.3").is_err());
        assert!("150%".parse::<SizeSpec>().is_err());
        assert!(parse_range("64k-8k").is_err());
        assert!(parse_bytes("99999999999p").is_err());
    }
}

/// `14.2 GiB`, `512.0 MiB`, `900 bytes`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1} {}", UNITS[i])
}

/// `4096` → `4 KiB`, `1572864` → `1.50 MiB` (two decimals unless exact).
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
