//! SPC / UMass trace format (CSV).
//!
//! Source: the UMass Trace Repository (OLTP "Financial" and "WebSearch"
//! traces), whose files follow the Storage Performance Council's "SPC
//! Trace File Format Specification" (revision 1.0.1, 2002). One I/O per
//! line:
//!
//! ```text
//! ASU,LBA,Size,Opcode,Timestamp[,optional fields…]
//! 0,303567,3584,w,0.000000
//! ```
//!
//! | field | meaning | kept as |
//! |-------|---------|---------|
//! | `ASU` | application specific unit (a volume) | `device` |
//! | `LBA` | start, in 512 B blocks (`--trace-sector-bytes` to change) | `offset_bytes` |
//! | `Size` | length in **bytes** | `size_bytes` |
//! | `Opcode` | `r`/`R` read, `w`/`W` write | `op` |
//! | `Timestamp` | seconds from the start of the trace, decimal | `time_ns` |
//!
//! The specification allows further fields after the timestamp; they are
//! ignored. The format has no flush or trim: converting to it drops them.

use super::parse::{checked_end, parse_decimal_ns, parse_u32, parse_u64, CsvFields, LineError};
use super::{Pending, TimeUnit, TraceRequest};
use crate::workload::HostOp;
use std::io::{self, Write};

const LAYOUT: &str = "at least 5 comma-separated fields: ASU,LBA,Size,Opcode,Timestamp";

pub struct SpcParser {
    unit_ns: u64,
    sector_bytes: u64,
}

impl SpcParser {
    pub fn new(unit: TimeUnit, sector_bytes: u64) -> Self {
        SpcParser { unit_ns: unit.ns(), sector_bytes }
    }

    #[inline]
    pub fn parse(&mut self, line: &[u8], out: &mut Pending) -> Result<(), LineError> {
        let mut f = CsvFields::new(line, b',');
        let mut next = || f.next().ok_or_else(|| LineError::line(line, "line", LAYOUT));
        let asu = next()?;
        let lba = next()?;
        let size = next()?;
        let opcode = next()?;
        let ts = next()?;
        let device = parse_u32(asu).ok_or_else(|| LineError::at(line, asu, "ASU", "a unit number (0..2^32)"))?;
        let offset_bytes = parse_u64(lba)
            .and_then(|v| v.checked_mul(self.sector_bytes))
            .ok_or_else(|| LineError::at(line, lba, "LBA", "a block address whose byte offset fits in 64 bits"))?;
        let size_bytes = parse_u64(size).ok_or_else(|| LineError::at(line, size, "Size", "a size in bytes"))?;
        checked_end(line, size, "Size", offset_bytes, size_bytes)?;
        let op = match opcode {
            b"r" | b"R" => HostOp::Read,
            b"w" | b"W" => HostOp::Write,
            _ => return Err(LineError::at(line, opcode, "Opcode", "r or w")),
        };
        let time_ns = parse_decimal_ns(ts, self.unit_ns).ok_or_else(|| {
            LineError::at(line, ts, "Timestamp", "a non-negative time in seconds (digits, optional decimal fraction)")
        })?;
        out.push(op, offset_bytes, size_bytes, time_ns, device);
        Ok(())
    }
}

/// Whether a line looks like an SPC record (for sniffing).
pub fn looks_like(line: &[u8]) -> bool {
    let f: Vec<&[u8]> = CsvFields::new(line, b',').collect();
    f.len() >= 5
        && parse_u32(f[0]).is_some()
        && parse_u64(f[1]).is_some()
        && parse_u64(f[2]).is_some()
        && matches!(f[3], b"r" | b"R" | b"w" | b"W")
        && parse_decimal_ns(f[4], 1).is_some()
}

/// Write one request as an SPC line (LBA in `sector_bytes` blocks; an
/// unaligned start is moved down to its block and the size grows to match; seconds with 9 decimals). Flushes and trims have no SPC
/// form: returns `Ok(false)` without writing.
pub fn write(w: &mut dyn Write, r: &TraceRequest, sector_bytes: u64) -> io::Result<bool> {
    let op = match r.op {
        HostOp::Read => 'r',
        HostOp::Write => 'w',
        HostOp::Flush | HostOp::Trim => return Ok(false),
    };
    let lba = r.offset_bytes / sector_bytes;
    let size = r.end_bytes() - lba * sector_bytes;
    writeln!(w, "{},{lba},{size},{op},{}.{:09}", r.device, r.time_ns / 1_000_000_000, r.time_ns % 1_000_000_000)?;
    Ok(true)
}
