//! MQSim and DiskSim ASCII traces: `time device lba size type`.
//!
//! Sources: DiskSim 4.0 reference manual (J. Bucy et al., CMU-PDL-08-101,
//! 2008), section "Traces", the `ascii` input format; MQSim (CMU SAFARI,
//! `src/exec/IO_Flow_Trace_Based.cpp`, whose ASCII trace columns are
//! arrival time, device, address, size, type) and the traces it ships. Both
//! write five blank-separated fields per request:
//!
//! | field | MQSim (`--trace-format mqsim`) | DiskSim (`--trace-format disksim`) |
//! |-------|------------------|--------------------|
//! | 1 time | arrival, integer **nanoseconds** | arrival, fractional **milliseconds** |
//! | 2 device | device number | device number |
//! | 3 lba | start, in 512 B sectors | start block, in 512 B sectors |
//! | 4 size | length, in 512 B sectors | length in blocks |
//! | 5 type | **0 = write, 1 = read** | **flags: bit 0 set = read**, clear = write |
//!
//! The time unit (`--trace-time-unit ns|us|ms|s`) and the direction
//! convention (`--ascii-rw mqsim|disksim`) are options whose defaults follow
//! the variant; the time field may carry a decimal fraction in any unit and
//! is converted exactly. Unlike MQSim, which stops at the first line without
//! exactly five fields and reads any type other than `0` as a read, a line
//! with more or fewer than five fields, or an MQSim type other than 0 or 1,
//! is an error naming the line. Neither format has flush or trim: converting
//! to them drops those requests (and says how many).

use super::parse::{checked_end, parse_decimal_ns, parse_u32, parse_u64, LineError, Words};
use super::{AsciiRw, Pending, TimeUnit, TraceFormat, TraceRequest};
use crate::workload::HostOp;
use std::io::{self, Write};

const LAYOUT: &str = "5 blank-separated fields: time device lba size type";

pub struct AsciiParser {
    unit_ns: u64,
    rw: AsciiRw,
    sector_bytes: u64,
}

impl AsciiParser {
    pub fn new(unit: TimeUnit, rw: AsciiRw, sector_bytes: u64) -> Self {
        AsciiParser { unit_ns: unit.ns(), rw, sector_bytes }
    }

    #[inline]
    pub fn parse(&mut self, line: &[u8], out: &mut Pending) -> Result<(), LineError> {
        let mut w = Words::new(line);
        let mut next = || w.next().ok_or_else(|| LineError::line(line, "line", LAYOUT));
        let time = next()?;
        let dev = next()?;
        let lba = next()?;
        let size = next()?;
        let ty = next()?;
        if w.next().is_some() {
            return Err(LineError::line(line, "line", LAYOUT));
        }
        let time_ns = parse_decimal_ns(time, self.unit_ns).ok_or_else(|| {
            LineError::at(
                line,
                time,
                "time",
                "a non-negative arrival time (digits, optional decimal fraction) that fits in 64-bit nanoseconds",
            )
        })?;
        let device = parse_u32(dev).ok_or_else(|| LineError::at(line, dev, "device", "a device number (0..2^32)"))?;
        let offset_bytes = parse_u64(lba)
            .and_then(|v| v.checked_mul(self.sector_bytes))
            .ok_or_else(|| LineError::at(line, lba, "lba", "a start sector whose byte offset fits in 64 bits"))?;
        let size_bytes = parse_u64(size)
            .and_then(|v| v.checked_mul(self.sector_bytes))
            .ok_or_else(|| LineError::at(line, size, "size", "a length in sectors whose byte count fits in 64 bits"))?;
        checked_end(line, size, "size", offset_bytes, size_bytes)?;
        let op = match self.rw {
            AsciiRw::Mqsim => match ty {
                b"0" => HostOp::Write,
                b"1" => HostOp::Read,
                _ => return Err(LineError::at(line, ty, "type", "0 (write) or 1 (read)")),
            },
            AsciiRw::Disksim => match parse_u64(ty) {
                Some(flags) if flags & 1 == 1 => HostOp::Read,
                Some(_) => HostOp::Write,
                None => return Err(LineError::at(line, ty, "type", "a flags number (bit 0 set = read)")),
            },
        };
        out.push(op, offset_bytes, size_bytes, time_ns, device);
        Ok(())
    }
}

/// Whether a line has the ASCII layout (five numeric fields).
pub fn looks_like(line: &[u8]) -> bool {
    let w: Vec<&[u8]> = Words::new(line).collect();
    w.len() == 5 && parse_decimal_ns(w[0], 1).is_some() && w[1..].iter().all(|f| parse_u64(f).is_some())
}

/// MQSim or DiskSim, from lines that have the ASCII layout, and why.
///
/// A line shows a DiskSim feature when its time has a fraction (MQSim
/// writes integer nanoseconds) or its type is not 0 or 1 (DiskSim's flags
/// word; MQSim knows only 0 and 1). A line with an integer time and type
/// 0/1 fits both. The decision is a majority, so one odd line never flips
/// the variant (and with it the time unit, by 10^6):
///
/// - no line with a DiskSim feature: MQSim;
/// - more than half of the lines with one: DiskSim;
/// - at most one line in eight with one: MQSim, those lines being errors
///   in an MQSim trace (a type other than 0/1 is reported as a bad line;
///   a fractional time is read to the nanosecond);
/// - in between: an error asking for `--trace-format mqsim|disksim`.
pub fn which_variant(lines: &[&[u8]]) -> Result<(TraceFormat, String), String> {
    let mut n = 0usize;
    let (mut fractional, mut flags, mut disksim_like) = (0usize, 0usize, 0usize);
    for line in lines {
        let w: Vec<&[u8]> = Words::new(line).collect();
        if w.len() != 5 {
            continue;
        }
        n += 1;
        let frac = w[0].contains(&b'.');
        let flag = w[4] != b"0" && w[4] != b"1";
        fractional += usize::from(frac);
        flags += usize::from(flag);
        disksim_like += usize::from(frac || flag);
    }
    let features = format!(
        "{disksim_like} of {n} ASCII lines have DiskSim features ({fractional} fractional times, {flags} types other than 0/1)"
    );
    if disksim_like == 0 {
        return Ok((
            TraceFormat::Mqsim,
            "integer times and type 0/1 on every line: MQSim (nanoseconds; 0 = write, 1 = read); use --trace-format disksim if it is DiskSim".into(),
        ));
    }
    if disksim_like * 2 > n {
        return Ok((TraceFormat::Disksim, format!("{features}: DiskSim (milliseconds; flags bit 0 = read)")));
    }
    if disksim_like * 8 <= n {
        return Ok((
            TraceFormat::Mqsim,
            format!("only {features}, too few for DiskSim: MQSim (nanoseconds; 0 = write, 1 = read)"),
        ));
    }
    Err(format!(
        "cannot tell MQSim from DiskSim: {features}, the others have neither; give --trace-format mqsim (ns; 0 = write, 1 = read) or disksim (ms; flags bit 0 = read)"
    ))
}

/// Write one request as an ASCII line: MQSim when `mqsim` (ns, 0/1), else
/// DiskSim (ms with 6 decimals, flags 1/0). Offsets and sizes are written in
/// `sector_bytes` units, widened to whole sectors. Flushes and trims have no
/// form here: returns `Ok(false)` without writing.
pub fn write(w: &mut dyn Write, r: &TraceRequest, mqsim: bool, sector_bytes: u64) -> io::Result<bool> {
    let read = match r.op {
        HostOp::Read => true,
        HostOp::Write => false,
        HostOp::Flush | HostOp::Trim => return Ok(false),
    };
    let lba = r.offset_bytes / sector_bytes;
    let end = r.end_bytes().div_ceil(sector_bytes);
    let size = end - lba;
    if mqsim {
        writeln!(w, "{} {} {lba} {size} {}", r.time_ns, r.device, u8::from(read))?;
    } else {
        writeln!(
            w,
            "{}.{:06} {} {lba} {size} {}",
            r.time_ns / 1_000_000,
            r.time_ns % 1_000_000,
            r.device,
            u8::from(read)
        )?;
    }
    Ok(true)
}
