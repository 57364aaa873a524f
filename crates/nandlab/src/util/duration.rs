//! Durations as people write them (`10s`, `500ms`, `250us`), in
//! nanoseconds: simulated time for `perf --runtime` and `--interval`.
//! Fractions are allowed (`1.5ms`) and rounded to the nanosecond; a bare
//! number is seconds, as in fio's `runtime`.

/// A duration in simulated time: `10s`, `500ms`, `250us`, `40ns`, `2m`; a bare number is seconds.
pub fn parse_duration_ns(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (num, scale) = [("ns", 1.0), ("us", 1e3), ("µs", 1e3), ("ms", 1e6), ("s", 1e9), ("m", 60e9)]
        .iter()
        .find_map(|(suffix, scale)| t.strip_suffix(suffix).map(|n| (n, *scale)))
        .unwrap_or((t, 1e9));
    let v: f64 = num.trim().parse().map_err(|_| format!("`{text}`: expected a duration such as 10s or 500ms"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("`{text}`: a duration must be positive"));
    }
    Ok((v * scale).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_and_reject_nonsense() {
        assert_eq!(parse_duration_ns("10s").unwrap(), 10_000_000_000);
        assert_eq!(parse_duration_ns("500ms").unwrap(), 500_000_000);
        assert_eq!(parse_duration_ns("250us").unwrap(), 250_000);
        assert_eq!(parse_duration_ns("2").unwrap(), 2_000_000_000);
        assert!(parse_duration_ns("soon").is_err());
        assert!(parse_duration_ns("-1s").is_err());
    }
}
