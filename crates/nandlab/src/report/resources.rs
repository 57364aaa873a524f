//! What a run cost the host machine: peak resident memory and CPU time,
//! read from `/proc/self` (Linux). Elsewhere both read as 0.

/// Peak resident set size of this process in bytes (`VmHWM`).
pub fn peak_rss_bytes() -> u64 {
    status_kib("VmHWM:").map_or(0, |k| k * 1024)
}

/// Current resident set size in bytes (`VmRSS`).
pub fn rss_bytes() -> u64 {
    status_kib("VmRSS:").map_or(0, |k| k * 1024)
}

fn status_kib(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].trim().trim_end_matches("kB").trim().parse().ok()
}

/// User + system CPU time of this process in seconds, from
/// `/proc/self/stat` (in clock ticks, 100 per second on Linux).
pub fn cpu_seconds() -> f64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may contain spaces) start at ')'.
    let Some(rest) = s.rfind(')').map(|i| &s[i + 2..]) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the full line: 11 and 12 here.
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (ticks(11) + ticks(12)) as f64 / 100.0
}

#[cfg(test)]
mod tests {
    #[test]
    fn readings_are_plausible_on_linux() {
        if std::path::Path::new("/proc/self/status").exists() {
            assert!(super::peak_rss_bytes() >= super::rss_bytes() / 2);
            assert!(super::peak_rss_bytes() > 1 << 20);
        }
    }
}
