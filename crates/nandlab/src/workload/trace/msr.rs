//! MSR Cambridge block traces (CSV).
//!
//! Source: the MSR Cambridge traces in the SNIA IOTTA repository (trace set
//! 388, "MSR Cambridge Traces"), described in D. Narayanan, A. Donnelly and
//! A. Rowstron, "Write Off-Loading: Practical Power Management for
//! Enterprise Storage", FAST '08. One I/O per line, seven fields:
//!
//! ```text
//! Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime
//! 128166372003061629,hm,1,Read,3154152960,32768,23320
//! ```
//!
//! | field | meaning | kept as |
//! |-------|---------|---------|
//! | `Timestamp` | Windows FILETIME: 100 ns ticks since 1601-01-01 | `time_ns` = ticks × 100 |
//! | `Hostname` | the traced server (`hm`, `src1`, …) | ignored (must not be empty) |
//! | `DiskNumber` | the volume on that server | `device` |
//! | `Type` | `Read` or `Write` (any letter case) | `op` |
//! | `Offset`, `Size` | bytes | `offset_bytes`, `size_bytes` |
//! | `ResponseTime` | 100 ns ticks | checked to be a number, not kept |
//!
//! Exactly seven fields; a header line (as some redistributions add) is
//! ignored. The format has no flush or trim: converting to it drops them.

use super::parse::{checked_end, parse_u32, parse_u64, CsvFields, LineError};
use super::{Pending, TraceRequest};
use crate::workload::HostOp;
use std::io::{self, Write};

const LAYOUT: &str = "7 comma-separated fields: Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime";

#[derive(Default)]
pub struct MsrParser;

impl MsrParser {
    #[inline]
    pub fn parse(&mut self, line: &[u8], out: &mut Pending) -> Result<(), LineError> {
        let mut f = CsvFields::new(line, b',');
        let mut next = || f.next().ok_or_else(|| LineError::line(line, "line", LAYOUT));
        let ts = next()?;
        let host = next()?;
        let disk = next()?;
        let ty = next()?;
        let offset = next()?;
        let size = next()?;
        let resp = next()?;
        if f.next().is_some() {
            return Err(LineError::line(line, "line", LAYOUT));
        }
        let time_ns = parse_u64(ts)
            .and_then(|t| t.checked_mul(100))
            .ok_or_else(|| LineError::at(line, ts, "Timestamp", "a Windows FILETIME (100 ns ticks) below 1.8e17"))?;
        if host.is_empty() {
            return Err(LineError::at(line, host, "Hostname", "a host name"));
        }
        let device =
            parse_u32(disk).ok_or_else(|| LineError::at(line, disk, "DiskNumber", "a disk number (0..2^32)"))?;
        let op = if ty.eq_ignore_ascii_case(b"Read") {
            HostOp::Read
        } else if ty.eq_ignore_ascii_case(b"Write") {
            HostOp::Write
        } else {
            return Err(LineError::at(line, ty, "Type", "Read or Write"));
        };
        let offset_bytes = parse_u64(offset).ok_or_else(|| LineError::at(line, offset, "Offset", "a byte offset"))?;
        let size_bytes = parse_u64(size).ok_or_else(|| LineError::at(line, size, "Size", "a size in bytes"))?;
        checked_end(line, size, "Size", offset_bytes, size_bytes)?;
        parse_u64(resp).ok_or_else(|| LineError::at(line, resp, "ResponseTime", "a response time in 100 ns ticks"))?;
        out.push(op, offset_bytes, size_bytes, time_ns, device);
        Ok(())
    }
}

/// Whether a line looks like an MSR record (for sniffing).
pub fn looks_like(line: &[u8]) -> bool {
    let f: Vec<&[u8]> = CsvFields::new(line, b',').collect();
    f.len() == 7
        && parse_u64(f[0]).is_some()
        && (f[3].eq_ignore_ascii_case(b"Read") || f[3].eq_ignore_ascii_case(b"Write"))
        && parse_u64(f[4]).is_some()
}

/// Write one request as an MSR line. Flushes and trims have no MSR form:
/// returns `Ok(false)` without writing. Hostname is `nandlab`, ResponseTime 0.
pub fn write(w: &mut dyn Write, r: &TraceRequest) -> io::Result<bool> {
    let ty = match r.op {
        HostOp::Read => "Read",
        HostOp::Write => "Write",
        HostOp::Flush | HostOp::Trim => return Ok(false),
    };
    writeln!(w, "{},nandlab,{},{ty},{},{},0", r.time_ns / 100, r.device, r.offset_bytes, r.size_bytes)?;
    Ok(true)
}
