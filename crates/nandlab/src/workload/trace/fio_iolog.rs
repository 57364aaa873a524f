//! fio iolog, versions 2 and 3 (`write_iolog` / `read_iolog`).
//!
//! Source: fio's `HOWTO.rst`, section "Trace file format" (versions 2 and
//! 3), and fio's `iolog.c`, which writes and replays them. The first line
//! is the header `fio version 2 iolog` or `fio version 3 iolog`; then one
//! action per line:
//!
//! ```text
//! v2:            filename action [offset length]
//! v3: timestamp  filename action [offset length]
//! ```
//!
//! | action | meaning | kept as |
//! |--------|---------|---------|
//! | `add`, `open`, `close` | file management | ignored (`add` numbers the file) |
//! | `read`, `write`, `trim` | I/O of `length` bytes at byte `offset` | read, write, trim |
//! | `sync`, `datasync` | fsync / fdatasync | flush |
//! | `wait` (v2 only) | pause `offset` µs after the previous wait | advances the time |
//!
//! Decisions: each file gets a `device` number in the order it first
//! appears (0, 1, …), at most 4096 files per trace. Version 3 timestamps are
//! read as **microseconds** since the start of the job, as fio's `iolog.c`
//! writes them (`utime_since_now`) and replays them; `--trace-time-unit`
//! overrides that for logs written otherwise. In version 2 the time of a
//! request is the sum of the `wait`s before it. fio ignores `wait` in
//! version 3; so does nandlab. File names cannot contain blanks (fio's own
//! reader splits on them too).

use super::parse::{checked_end, parse_decimal_ns, parse_u64, LineError, Words};
use super::{Pending, TimeUnit, TraceRequest};
use crate::workload::HostOp;
use std::collections::HashMap;
use std::io::{self, Write};

/// Files a trace may name.
pub const MAX_FILES: usize = 4096;

const HEADER: &str = "the header `fio version 2 iolog` or `fio version 3 iolog` as the first line";

/// The iolog version a header line announces.
pub fn header_version(line: &[u8]) -> Option<u8> {
    let t = super::parse::trim(line);
    match t {
        b"fio version 2 iolog" => Some(2),
        b"fio version 3 iolog" => Some(3),
        _ => None,
    }
}

pub struct FioParser {
    version: Option<u8>,
    unit_ns: Option<u64>,
    files: HashMap<Vec<u8>, u32>,
    /// The file of the previous line (a reused buffer: switching files
    /// allocates nothing) and its number, `None` before the first.
    last_name: Vec<u8>,
    last_number: Option<u32>,
    /// Version 2: sum of the waits so far, ns.
    waited_ns: u64,
}

impl FioParser {
    pub fn new(time_unit: Option<TimeUnit>) -> Self {
        FioParser {
            version: None,
            unit_ns: time_unit.map(TimeUnit::ns),
            files: HashMap::new(),
            last_name: Vec::new(),
            last_number: None,
            waited_ns: 0,
        }
    }

    fn file_number(&mut self, line: &[u8], name: &[u8]) -> Result<u32, LineError> {
        if let Some(n) = self.last_number.filter(|_| self.last_name == name) {
            return Ok(n);
        }
        let n = match self.files.get(name) {
            Some(&n) => n,
            None => {
                if self.files.len() >= MAX_FILES {
                    return Err(LineError::at(line, name, "filename", "at most 4096 distinct files per trace"));
                }
                let n = self.files.len() as u32;
                self.files.insert(name.to_vec(), n);
                n
            }
        };
        self.last_name.clear();
        self.last_name.extend_from_slice(name);
        self.last_number = Some(n);
        Ok(n)
    }

    #[inline]
    pub fn parse(&mut self, line: &[u8], out: &mut Pending) -> Result<(), LineError> {
        let Some(version) = self.version else {
            self.version = Some(header_version(line).ok_or_else(|| LineError::line(line, "header", HEADER))?);
            return Ok(());
        };
        let mut w = Words::new(line);
        let mut time_ns = self.waited_ns;
        if version == 3 {
            let ts = w.next().ok_or_else(|| LineError::line(line, "timestamp", "a timestamp"))?;
            time_ns = parse_decimal_ns(ts, self.unit_ns.unwrap_or(1_000)).ok_or_else(|| {
                LineError::at(line, ts, "timestamp", "a non-negative time (µs unless --trace-time-unit says otherwise)")
            })?;
        }
        let layout = if version == 3 {
            "`timestamp filename action [offset length]`"
        } else {
            "`filename action [offset length]`"
        };
        let name = w.next().ok_or_else(|| LineError::line(line, "filename", layout))?;
        let action = w.next().ok_or_else(|| LineError::line(line, "action", layout))?;
        let offset = w.next();
        let length = w.next();
        if w.next().is_some() {
            return Err(LineError::line(line, "line", layout));
        }
        let device = self.file_number(line, name)?;
        let io = |field: &'static str, v: Option<&[u8]>| {
            v.and_then(parse_u64).ok_or_else(|| match v {
                Some(v) => LineError::at(line, v, field, "a number of bytes"),
                None => LineError::line(line, field, "offset and length after a read, write or trim"),
            })
        };
        match action {
            b"add" | b"open" | b"close" => {
                if offset.is_some() {
                    return Err(LineError::at(line, action, "action", "no offset after add, open or close"));
                }
            }
            b"read" | b"write" | b"trim" => {
                let off = io("offset", offset)?;
                let len = io("length", length)?;
                checked_end(line, length.unwrap_or(line), "length", off, len)?;
                let op = match action {
                    b"read" => HostOp::Read,
                    b"write" => HostOp::Write,
                    _ => HostOp::Trim,
                };
                out.push(op, off, len, time_ns, device);
            }
            b"sync" | b"datasync" => out.push(HostOp::Flush, 0, 0, time_ns, device),
            b"wait" => {
                if version == 2 {
                    let us = io("offset", offset)?;
                    self.waited_ns = self.waited_ns.saturating_add(us.saturating_mul(1_000));
                }
            }
            _ => {
                return Err(LineError::at(
                    line,
                    action,
                    "action",
                    "add, open, close, read, write, trim, sync, datasync or wait",
                ))
            }
        }
        Ok(())
    }
}

/// Writes fio iolog: the header, `add` and `open` for each file on first
/// use, the requests, and `close` for each file at the end. Version 3 writes
/// timestamps in µs; version 2 writes `wait` lines for the gaps (whole µs;
/// fio discards waits under 100 µs).
pub struct FioWriter {
    version: u8,
    file_name: String,
    opened: Vec<u32>,
    last_us: u64,
    started: bool,
}

impl FioWriter {
    /// The first device to appear is `file_name`, the next `file_name.1`, …
    pub fn new(version: u8, file_name: &str) -> Self {
        FioWriter { version, file_name: file_name.to_string(), opened: Vec::new(), last_us: 0, started: false }
    }

    fn name(&self, device: u32) -> String {
        match self.opened.iter().position(|&d| d == device) {
            Some(0) | None => self.file_name.clone(),
            Some(i) => format!("{}.{i}", self.file_name),
        }
    }

    fn prefix(&self, us: u64) -> String {
        if self.version == 3 {
            format!("{us} ")
        } else {
            String::new()
        }
    }

    /// Whether writing a request of `device` would name more files than a
    /// reader accepts ([`MAX_FILES`]).
    pub fn too_many_files(&self, device: u32) -> bool {
        self.opened.len() >= MAX_FILES && !self.opened.contains(&device)
    }

    /// Write one request; never drops one (every op has an iolog form).
    pub fn write(&mut self, w: &mut dyn Write, r: &TraceRequest) -> io::Result<bool> {
        if !self.started {
            writeln!(w, "fio version {} iolog", self.version)?;
            self.started = true;
        }
        let us = r.time_ns / 1_000;
        if !self.opened.contains(&r.device) {
            self.opened.push(r.device);
            let (p, n) = (self.prefix(us), self.name(r.device));
            writeln!(w, "{p}{n} add\n{p}{n} open")?;
        }
        if self.version == 2 && us > self.last_us {
            writeln!(w, "{} wait {} 0", self.name(r.device), us - self.last_us)?;
            self.last_us = us;
        }
        let action = match r.op {
            HostOp::Read => "read",
            HostOp::Write => "write",
            HostOp::Trim => "trim",
            HostOp::Flush => "sync",
        };
        let (off, len) = if r.op == HostOp::Flush { (0, 0) } else { (r.offset_bytes, r.size_bytes) };
        writeln!(w, "{}{} {action} {off} {len}", self.prefix(us), self.name(r.device))?;
        self.last_us = self.last_us.max(us);
        Ok(true)
    }

    /// Close every file (and write the header if nothing was written).
    pub fn finish(&mut self, w: &mut dyn Write) -> io::Result<()> {
        if !self.started {
            writeln!(w, "fio version {} iolog", self.version)?;
            self.started = true;
        }
        for &d in &self.opened {
            writeln!(w, "{}{} close", self.prefix(self.last_us), self.name(d))?;
        }
        self.opened.clear();
        Ok(())
    }
}
