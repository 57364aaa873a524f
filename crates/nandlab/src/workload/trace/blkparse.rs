//! `blkparse` default text output (Linux blktrace).
//!
//! Source: the `blkparse(1)` man page (blktrace package), sections DEFAULT
//! OUTPUT, DEFAULT OUTPUT PER ACTION, ACTION IDENTIFIERS and RWBS
//! DESCRIPTION, and the RWBS letters the kernel writes (`blk_fill_rwbs`).
//! Each event line starts with
//!
//! ```text
//! %D %2c %8s %5T.%9t %5p %2a %3d
//! 8,16   5        2     0.000001850 18615  Q   R 1444645666 + 256 [java]
//! ```
//!
//! device `major,minor`, CPU, sequence number, `seconds.nanoseconds`,
//! PID, action, RWBS; for block I/O events follow `sector + blocks`
//! (512 B units) and the process name or error in brackets.
//!
//! Which events become requests (`--blkparse-events`): `completed` (`C`,
//! the default: requests the device finished, after merging, the view an
//! FTL sees), `issued` (`D`: sent to the driver) or `queued` (`Q`: as
//! submitted, before merging). Every other event (`A`, `G`, `I`, `M`, `P`,
//! `U`, `m`, …) is ignored, as are the per-CPU and total summaries blkparse
//! prints at the end (from the first `CPUn (` or `Total (` line on).
//!
//! RWBS mapping (decisions documented here):
//!
//! - `R` → read, `W` → write, `D` → trim (discard; `DE`, secure erase, too).
//! - `F` *before* the direction is a preflush, and `B` (the old barrier)
//!   is treated the same: a flush request is emitted before the data.
//! - `F` *after* the direction is FUA: a flush is emitted after the write,
//!   as the block layer does for a device without FUA support.
//! - `N` (no data) with a preflush is a flush (`FN`); otherwise ignored.
//! - `S` (sync), `A` (readahead), `M` (metadata), `E` are ignored.
//! - An event without `+ blocks` has zero length (old kernels print empty
//!   barriers and flush completions so).
//!
//! The device number is `major << 20 | minor` (Linux `MKDEV`), so
//! `--trace-device 8,16` selects `/dev/sdb`.

use super::parse::{checked_end, parse_decimal_ns, parse_u32, parse_u64, LineError, Words};
use super::BlkparseEvents;
use super::Pending;
use crate::workload::HostOp;

pub struct BlkparseParser {
    action: &'static [u8],
    sector_bytes: u64,
    in_trailer: bool,
}

/// What the RWBS field asks for.
#[derive(Default, Debug, PartialEq, Eq)]
struct Rwbs {
    op: Option<HostOp>,
    preflush: bool,
    fua: bool,
}

const RWBS_EXPECTED: &str = "an RWBS field: F (preflush), then R, W, D or N, then F (FUA), A, S, M, B, E";

fn parse_rwbs(b: &[u8]) -> Option<Rwbs> {
    let mut r = Rwbs::default();
    let mut seen_direction = false;
    if b.is_empty() || b.len() > 8 {
        return None;
    }
    for &c in b {
        match c {
            b'F' if !seen_direction => r.preflush = true,
            b'F' => r.fua = true,
            b'R' | b'W' | b'D' | b'N' if !seen_direction => {
                seen_direction = true;
                r.op = match c {
                    b'R' => Some(HostOp::Read),
                    b'W' => Some(HostOp::Write),
                    b'D' => Some(HostOp::Trim),
                    _ => None,
                };
            }
            b'B' => r.preflush = true,
            b'A' | b'S' | b'M' | b'E' => {}
            _ => return None,
        }
    }
    seen_direction.then_some(r)
}

/// `major,minor` → `major << 20 | minor`.
pub fn parse_device(b: &[u8]) -> Option<u32> {
    let comma = memchr::memchr(b',', b)?;
    let major = parse_u32(&b[..comma])?;
    let minor = parse_u32(&b[comma + 1..])?;
    if major >= 1 << 12 || minor >= 1 << 20 {
        return None;
    }
    Some(major << 20 | minor)
}

/// Whether a line starts the summary blkparse prints after the events.
pub fn is_trailer(line: &[u8]) -> bool {
    let t = super::parse::trim(line);
    (t.starts_with(b"CPU") && t.get(3).is_some_and(u8::is_ascii_digit)) || t.starts_with(b"Total (")
}

impl BlkparseParser {
    pub fn new(events: BlkparseEvents, sector_bytes: u64) -> Self {
        BlkparseParser { action: events.action(), sector_bytes, in_trailer: false }
    }

    #[inline]
    pub fn parse(&mut self, line: &[u8], out: &mut Pending) -> Result<(), LineError> {
        if self.in_trailer {
            return Ok(());
        }
        let mut w = Words::new(line);
        let Some(dev) = w.next() else { return Ok(()) };
        if dev.first().is_some_and(|c| !c.is_ascii_digit()) {
            if is_trailer(line) {
                self.in_trailer = true;
                return Ok(());
            }
            if line.starts_with(b"Input file ") {
                return Ok(());
            }
        }
        let device = parse_device(dev).ok_or_else(|| {
            LineError::at(line, dev, "device", "`major,minor` (an event line of blkparse's default output)")
        })?;
        let mut next = |field, expected| w.next().ok_or_else(|| LineError::line(line, field, expected));
        let cpu = next("cpu", "a CPU number")?;
        let seq = next("sequence", "a sequence number")?;
        let time = next("time", "seconds.nanoseconds")?;
        let pid = next("pid", "a process id")?;
        let action = next("action", "an action letter (Q, G, I, D, C, …)")?;
        if parse_u32(cpu).is_none() {
            return Err(LineError::at(line, cpu, "cpu", "a CPU number"));
        }
        if parse_u64(seq).is_none() {
            return Err(LineError::at(line, seq, "sequence", "a sequence number"));
        }
        if parse_u64(pid).is_none() {
            return Err(LineError::at(line, pid, "pid", "a process id"));
        }
        if action != self.action {
            if action.is_empty() || action.len() > 2 || !action.iter().all(u8::is_ascii_alphabetic) {
                return Err(LineError::at(line, action, "action", "an action identifier (one or two letters)"));
            }
            return Ok(());
        }
        let time_ns = parse_decimal_ns(time, 1_000_000_000)
            .ok_or_else(|| LineError::at(line, time, "time", "seconds.nanoseconds"))?;
        let rwbs_field = w.next().ok_or_else(|| LineError::line(line, "rwbs", RWBS_EXPECTED))?;
        let rwbs = parse_rwbs(rwbs_field).ok_or_else(|| LineError::at(line, rwbs_field, "rwbs", RWBS_EXPECTED))?;
        // `sector + blocks`, `sector` alone, or nothing (`[proc]`, `(cdb)`).
        let (mut sector, mut blocks) = (0u64, 0u64);
        let (mut sector_field, mut blocks_field): (&[u8], &[u8]) = (line, line);
        if let Some(s) = w.next() {
            if s.first().is_some_and(u8::is_ascii_digit) {
                sector = parse_u64(s).ok_or_else(|| LineError::at(line, s, "sector", "a sector number"))?;
                sector_field = s;
                let mut rest = w.clone();
                if rest.next() == Some(b"+") {
                    let n = rest.next().ok_or_else(|| LineError::line(line, "blocks", "a block count after `+`"))?;
                    blocks = parse_u64(n).ok_or_else(|| LineError::at(line, n, "blocks", "a block count after `+`"))?;
                    blocks_field = n;
                }
            }
        }
        let offset_bytes = sector
            .checked_mul(self.sector_bytes)
            .ok_or_else(|| LineError::at(line, sector_field, "sector", "a sector whose byte offset fits in 64 bits"))?;
        let size_bytes = blocks.checked_mul(self.sector_bytes).ok_or_else(|| {
            LineError::at(line, blocks_field, "blocks", "a block count whose byte count fits in 64 bits")
        })?;
        checked_end(line, blocks_field, "blocks", offset_bytes, size_bytes)?;
        if rwbs.preflush {
            out.push(HostOp::Flush, 0, 0, time_ns, device);
        }
        if let Some(op) = rwbs.op {
            out.push(op, offset_bytes, size_bytes, time_ns, device);
            if rwbs.fua && op == HostOp::Write {
                out.push(HostOp::Flush, 0, 0, time_ns, device);
            }
        }
        Ok(())
    }
}

/// Whether a line looks like a blkparse event line (for sniffing).
pub fn looks_like(line: &[u8]) -> bool {
    let w: Vec<&[u8]> = Words::new(line).collect();
    w.len() >= 7
        && parse_device(w[0]).is_some()
        && parse_u32(w[1]).is_some()
        && parse_u64(w[2]).is_some()
        && w[3].contains(&b'.')
        && parse_decimal_ns(w[3], 1).is_some()
        && parse_u64(w[4]).is_some()
        && !w[5].is_empty()
        && w[5].len() <= 2
        && w[5].iter().all(u8::is_ascii_alphabetic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rwbs_letters_map_to_operations_and_flushes() {
        let r = parse_rwbs(b"FWFS").unwrap();
        assert_eq!((r.op, r.preflush, r.fua), (Some(HostOp::Write), true, true));
        assert_eq!(parse_rwbs(b"FN").unwrap().op, None);
        assert!(parse_rwbs(b"FN").unwrap().preflush);
        assert_eq!(parse_rwbs(b"DE").unwrap().op, Some(HostOp::Trim));
        assert!(parse_rwbs(b"WBS").unwrap().preflush);
        assert_eq!(parse_rwbs(b"RA").unwrap().op, Some(HostOp::Read));
        assert!(parse_rwbs(b"X").is_none());
        assert!(parse_rwbs(b"S").is_none(), "a direction is required");
        assert!(parse_rwbs(b"RW").is_none(), "one direction only");
    }

    #[test]
    fn device_numbers_follow_mkdev() {
        assert_eq!(parse_device(b"8,16"), Some(8 << 20 | 16));
        assert_eq!(parse_device(b"8"), None);
        assert_eq!(parse_device(b"8,x"), None);
    }
}
