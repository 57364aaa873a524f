//! Recorded block traces: readers (one per format), format sniffing, and
//! the [`TraceRequest`] they all produce.
//!
//! | format (`--trace-format`) | file | where it is defined |
//! |---------------------------|------|---------------------|
//! | `msr`      | MSR Cambridge CSV `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime` | [`msr`]: SNIA IOTTA repository, trace set 388 (Narayanan et al., FAST '08) |
//! | `mqsim`    | `arrival_ns device lba size type`, type 0 = write, 1 = read | [`disksim`]: MQSim, `src/exec/IO_Flow_Trace_Based.cpp` and its `traces/` |
//! | `disksim`  | `arrival_ms device blkno bcount flags`, flags bit 0 = read | [`disksim`]: DiskSim 4.0 reference manual (CMU-PDL-08-101), "ascii" input format |
//! | `blkparse` | `blkparse` default text output | [`blkparse`]: `blkparse(1)` man page, DEFAULT OUTPUT and RWBS DESCRIPTION |
//! | `spc`      | SPC / UMass `ASU,LBA,Size,Opcode,Timestamp` | [`spc`]: UMass Trace Repository, "SPC trace file format specification" (Storage Performance Council, 2002) |
//! | `fio`      | fio iolog version 2 and 3 | [`fio_iolog`]: fio `HOWTO.rst`, "Trace file format" |
//! | `csv`      | any delimited text, given `--trace-columns` and `--trace-ops` | [`csv`] |
//! | `alibaba`, `tencent`, `vscsi` | Alibaba Cloud block traces, Tencent CBS, libCacheSim's CloudPhysics VSCSI CSV: presets of `csv` | [`csv`]: each trace's published README (see there) |
//!
//! [`vst`] writes (it does not read) VST's trace text, for `bench stress --vst`.
//!
//! Every reader streams: one reused line buffer, bytes parsed in place, no
//! allocation per line, memory bounded whatever the trace's length. `.gz`
//! and `.zst` files are read transparently (recognised by their magic
//! bytes, see [`source`]). A malformed line is a [`TraceError::BadLine`]
//! naming the file, the line number, the field and what was expected; with
//! [`ReaderOptions::skip_bad_lines`] it is counted instead, and the first
//! few are kept as examples for the report.
//!
//! Rules common to every format (decisions where the formats are silent):
//!
//! - Blank lines and lines whose first non-blank byte is `#` are ignored.
//! - In the CSV and ASCII formats (`msr`, `spc`, `mqsim`, `disksim`) the
//!   first non-blank line may be a header: if it does not parse and starts
//!   with a letter, it is ignored (and counted among the ignored lines).
//! - Times are kept as the file states them, converted to nanoseconds
//!   (`time_ns`); replay rebases them so the first request arrives at 0.
//! - A UTF-8 byte order mark at the start of the file is dropped.
//! - Offsets and sizes are kept in bytes. Sector-based formats (`mqsim`,
//!   `disksim`, `blkparse`, `spc`) multiply by
//!   [`ReaderOptions::sector_bytes`] (512 unless told otherwise); for the
//!   byte-addressed formats (`msr`, `fio`) a sector size is refused.
//! - A request whose end (offset + size) would pass 2^64 − 1 bytes is a bad
//!   line (its size field), so no later stage has to saturate.
//! - Zero-length reads, writes and trims are valid records: `trace stats`
//!   counts them, replay skips them (and counts them).
//!
//! `--trace-format auto` ([`sniff`]) decides by the lines that parse, not
//! by the first line that does not, and says which format it chose and
//! why:
//!
//! 1. Up to [`SNIFF_LINES`] content lines are looked at (blank and `#`
//!    lines, blkparse's `Input file` lines and everything from blkparse's
//!    summary on are left out). A fio iolog is recognised by its header.
//!    The first 64 KiB are read, and more (up to a longest line and 64 KiB)
//!    while they hold fewer lines than that, so a long first line does not
//!    hide the records after it. Lines longer than
//!    [`SNIFF_LONG_LINE_BYTES`] are no evidence (the reader still judges
//!    them: a long first line starting with a letter is a header).
//! 2. A first line that starts with a letter and matches no format is a
//!    header (the CSV and ASCII readers skip it) and is no evidence.
//! 3. Each remaining line is tested against every format's layout (the
//!    layouts are disjoint: no line matches two formats). The format that
//!    matches most lines wins if it matches at least half of them and at
//!    least three times as many as the runner-up; otherwise the evidence is
//!    too thin or mixed and the sniffer says so and asks for
//!    `--trace-format` rather than guess. Lines the winner does not match
//!    are not skipped silently: the reader reports each as a bad line
//!    (file, line, field), or counts it with `--skip-bad-lines`.
//! 4. Of the CSV layouts ([`csv`]) only `alibaba` is sniffed (its second
//!    field, `R` or `W`, sets it apart); `csv`, `tencent` and `vscsi` lines
//!    are numbers that any CSV could hold, so they need `--trace-format`.
//! 5. MQSim and DiskSim ASCII share a layout; [`disksim::which_variant`]
//!    tells them apart by a majority of lines, never by one line (see
//!    there).

pub mod blkparse;
pub mod convert;
pub mod csv;
pub mod disksim;
pub mod fio_iolog;
mod hll;
pub mod msr;
pub mod parse;
pub mod replay;
pub mod source;
pub mod spc;
pub mod stats;
pub mod vst;

use super::HostOp;
use parse::LineError;
use source::{Compression, LineFault, LineSource};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use thiserror::Error;

/// One request of a trace, in the trace's own terms (bytes, nanoseconds).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TraceRequest {
    pub op: HostOp,
    /// Byte offset on the traced device (0 for a flush).
    pub offset_bytes: u64,
    /// Length in bytes (0 for a flush; may be 0 for others).
    pub size_bytes: u64,
    /// Time as the trace states it, in ns (absolute or relative, per format).
    pub time_ns: u64,
    /// Device, disk or ASU number (blkparse: `major << 20 | minor`).
    pub device: u32,
    /// Line of the file it came from (1-based).
    pub line: u64,
}

impl TraceRequest {
    /// The end offset (exclusive), saturating.
    pub fn end_bytes(&self) -> u64 {
        self.offset_bytes.saturating_add(self.size_bytes)
    }
}

/// The trace formats nandlab reads.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    Msr,
    Mqsim,
    Disksim,
    Blkparse,
    Spc,
    Fio,
    /// Delimited text with a column mapping ([`csv`]).
    Csv,
    /// Alibaba Cloud block traces (a [`csv`] layout).
    Alibaba,
    /// Tencent CBS block traces (a [`csv`] layout).
    Tencent,
    /// libCacheSim's CloudPhysics VSCSI CSV (a [`csv`] layout).
    Vscsi,
}

impl TraceFormat {
    /// The formats read through a column mapping (never sniffed: `ALL` has
    /// the sniffable ones).
    pub const CSV_LAYOUTS: [TraceFormat; 4] =
        [TraceFormat::Csv, TraceFormat::Alibaba, TraceFormat::Tencent, TraceFormat::Vscsi];

    /// Whether this format is read by [`csv`].
    pub fn is_csv(self) -> bool {
        Self::CSV_LAYOUTS.contains(&self)
    }

    pub const ALL: [TraceFormat; 6] = [
        TraceFormat::Msr,
        TraceFormat::Mqsim,
        TraceFormat::Disksim,
        TraceFormat::Blkparse,
        TraceFormat::Spc,
        TraceFormat::Fio,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Msr => "msr",
            TraceFormat::Mqsim => "mqsim",
            TraceFormat::Disksim => "disksim",
            TraceFormat::Blkparse => "blkparse",
            TraceFormat::Spc => "spc",
            TraceFormat::Fio => "fio",
            TraceFormat::Csv => "csv",
            TraceFormat::Alibaba => "alibaba",
            TraceFormat::Tencent => "tencent",
            TraceFormat::Vscsi => "vscsi",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            TraceFormat::Msr => "MSR Cambridge CSV (Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime)",
            TraceFormat::Mqsim => "MQSim ASCII (arrival_ns device lba_sectors size_sectors type; 0 = write, 1 = read)",
            TraceFormat::Disksim => "DiskSim ASCII (arrival_ms device blkno bcount flags; flags bit 0 = read)",
            TraceFormat::Blkparse => "blkparse default text output",
            TraceFormat::Spc => "SPC / UMass CSV (ASU,LBA,Size,Opcode,Timestamp)",
            TraceFormat::Fio => "fio iolog version 2 or 3",
            TraceFormat::Csv => {
                "delimited text with a column mapping (--trace-columns, --trace-ops, units; give --trace-format csv)"
            }
            TraceFormat::Alibaba => "Alibaba Cloud block traces (device_id,opcode,offset,length,timestamp; bytes, µs)",
            TraceFormat::Tencent => "Tencent CBS (timestamp,offset,size,io_type,volume_id; s, 512 B sectors, 0 = read)",
            TraceFormat::Vscsi => {
                "CloudPhysics VSCSI CSV as libCacheSim ships it (version,time,op,size,lbn; SCSI 28/2a)"
            }
        }
    }

    /// The time unit of the format's time field when none is given.
    pub fn default_time_unit(self) -> TimeUnit {
        match self {
            TraceFormat::Mqsim => TimeUnit::Ns,
            TraceFormat::Disksim => TimeUnit::Ms,
            TraceFormat::Spc | TraceFormat::Blkparse => TimeUnit::S,
            TraceFormat::Fio | TraceFormat::Alibaba => TimeUnit::Us,
            TraceFormat::Tencent | TraceFormat::Vscsi => TimeUnit::S,
            // No default: a mapped time column needs --trace-time-unit.
            TraceFormat::Csv => TimeUnit::Ns,
            // FILETIME ticks: fixed, see `msr`.
            TraceFormat::Msr => TimeUnit::Ns,
        }
    }

    /// Whether `--trace-time-unit` means anything for this format.
    pub fn time_unit_adjustable(self) -> bool {
        matches!(self, TraceFormat::Mqsim | TraceFormat::Disksim | TraceFormat::Spc | TraceFormat::Fio) || self.is_csv()
    }

    /// Whether addresses are in sectors (so `--trace-sector-bytes` applies).
    pub fn sector_based(self) -> bool {
        matches!(self, TraceFormat::Mqsim | TraceFormat::Disksim | TraceFormat::Blkparse | TraceFormat::Spc)
    }

    /// The name this format's reader gives a request field in its errors.
    pub fn field_name(self, field: RequestField) -> &'static str {
        use RequestField::*;
        match (self, field) {
            (TraceFormat::Msr, Offset) => "Offset",
            (TraceFormat::Msr, Size) => "Size",
            (TraceFormat::Msr, Device) => "DiskNumber",
            (TraceFormat::Mqsim | TraceFormat::Disksim, Offset) => "lba",
            (TraceFormat::Mqsim | TraceFormat::Disksim, Size) => "size",
            (TraceFormat::Mqsim | TraceFormat::Disksim | TraceFormat::Blkparse, Device) => "device",
            (TraceFormat::Blkparse, Offset) => "sector",
            (TraceFormat::Blkparse, Size) => "blocks",
            (TraceFormat::Spc, Offset) => "LBA",
            (TraceFormat::Spc, Size) => "Size",
            (TraceFormat::Spc, Device) => "ASU",
            (TraceFormat::Fio, Offset) => "offset",
            (TraceFormat::Fio, Size) => "length",
            (TraceFormat::Fio, Device) => "filename",
            (TraceFormat::Csv | TraceFormat::Alibaba | TraceFormat::Tencent | TraceFormat::Vscsi, f) => {
                csv::field_name(self, f)
            }
        }
    }
}

/// A field of a [`TraceRequest`], for errors about a request (each format
/// names it its own way: [`TraceFormat::field_name`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RequestField {
    Offset,
    Size,
    Device,
}

impl std::fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for TraceFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "msr" | "msr-cambridge" => TraceFormat::Msr,
            "mqsim" => TraceFormat::Mqsim,
            "disksim" => TraceFormat::Disksim,
            "blkparse" | "blktrace" => TraceFormat::Blkparse,
            "spc" | "umass" => TraceFormat::Spc,
            "fio" | "fio-iolog" | "iolog" => TraceFormat::Fio,
            "csv" => TraceFormat::Csv,
            "alibaba" | "alicloud" => TraceFormat::Alibaba,
            "tencent" | "tencent-cbs" => TraceFormat::Tencent,
            "vscsi" | "cloudphysics" => TraceFormat::Vscsi,
            other => {
                return Err(format!(
                    "unknown trace format `{other}` (auto, msr, mqsim, disksim, blkparse, spc, fio, csv, alibaba, tencent, vscsi)"
                ))
            }
        })
    }
}

/// A unit for a trace's time field.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    Ns,
    Us,
    Ms,
    S,
}

impl TimeUnit {
    pub fn ns(self) -> u64 {
        match self {
            TimeUnit::Ns => 1,
            TimeUnit::Us => 1_000,
            TimeUnit::Ms => 1_000_000,
            TimeUnit::S => 1_000_000_000,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Ns => "ns",
            TimeUnit::Us => "us",
            TimeUnit::Ms => "ms",
            TimeUnit::S => "s",
        }
    }
}

impl std::str::FromStr for TimeUnit {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "ns" => TimeUnit::Ns,
            "us" | "µs" => TimeUnit::Us,
            "ms" => TimeUnit::Ms,
            "s" => TimeUnit::S,
            other => return Err(format!("unknown time unit `{other}` (ns, us, ms, s)")),
        })
    }
}

/// How the fifth field of an MQSim/DiskSim ASCII line gives the direction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AsciiRw {
    /// MQSim: 0 = write, 1 = read; anything else is an error.
    Mqsim,
    /// DiskSim: a flags word, bit 0 set = read, clear = write.
    Disksim,
}

impl std::str::FromStr for AsciiRw {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mqsim" => Ok(AsciiRw::Mqsim),
            "disksim" => Ok(AsciiRw::Disksim),
            other => Err(format!(
                "unknown read/write convention `{other}` (mqsim: 0 = write, 1 = read; disksim: flags bit 0 = read)"
            )),
        }
    }
}

/// Which blkparse events become requests.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum BlkparseEvents {
    /// `C`: requests the device completed (default).
    #[default]
    Completed,
    /// `Q`: I/O queued by the submitter, before merging.
    Queued,
    /// `D`: requests issued to the device driver.
    Issued,
}

impl BlkparseEvents {
    pub fn action(self) -> &'static [u8] {
        match self {
            BlkparseEvents::Completed => b"C",
            BlkparseEvents::Queued => b"Q",
            BlkparseEvents::Issued => b"D",
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            BlkparseEvents::Completed => "completed",
            BlkparseEvents::Queued => "queued",
            BlkparseEvents::Issued => "issued",
        }
    }
}

impl std::str::FromStr for BlkparseEvents {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "completed" | "C" => Ok(BlkparseEvents::Completed),
            "queued" | "Q" => Ok(BlkparseEvents::Queued),
            "issued" | "D" => Ok(BlkparseEvents::Issued),
            other => Err(format!("unknown blkparse event `{other}` (completed, queued, issued)")),
        }
    }
}

/// How to read a trace (default: sniff the format, every option at its default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReaderOptions {
    /// The format (`None`: sniff it from the first lines).
    pub format: Option<TraceFormat>,
    /// Unit of the time field (formats with a free unit only; default per format).
    pub time_unit: Option<TimeUnit>,
    /// Direction convention of the ASCII formats (default per variant).
    pub ascii_rw: Option<AsciiRw>,
    /// Which blkparse events are requests (blkparse only).
    pub blkparse_events: Option<BlkparseEvents>,
    /// Bytes per LBA unit of the sector-based formats (mqsim, disksim,
    /// blkparse, spc); `None`: 512. Refused for msr and fio, whose offsets
    /// are bytes.
    pub sector_bytes: Option<u32>,
    /// Count malformed lines and go on instead of stopping at the first.
    pub skip_bad_lines: bool,
    /// Column mapping, units, op values, delimiter, header (the CSV formats only).
    pub csv: csv::CsvOptions,
}

impl ReaderOptions {
    /// Options for `format` with every default.
    pub fn for_format(format: TraceFormat) -> Self {
        ReaderOptions { format: Some(format), ..Default::default() }
    }

    /// Reject options that mean nothing for `format`.
    fn check_for(&self, format: TraceFormat) -> Result<(), String> {
        if self.time_unit.is_some() && !format.time_unit_adjustable() {
            return Err(format!("--trace-time-unit does not apply to {format} traces (their time unit is fixed)"));
        }
        if self.ascii_rw.is_some() && !matches!(format, TraceFormat::Mqsim | TraceFormat::Disksim) {
            return Err(format!("--ascii-rw applies to mqsim and disksim traces only, not {format}"));
        }
        if self.blkparse_events.is_some() && format != TraceFormat::Blkparse {
            return Err(format!("--blkparse-events applies to blkparse traces only, not {format}"));
        }
        if format.is_csv() {
            if self.sector_bytes.is_some() {
                return Err(format!(
                    "--trace-sector-bytes does not apply to {format} traces (use --trace-offset-unit and --trace-size-unit)"
                ));
            }
            return csv::check(format, self.time_unit, &self.csv);
        }
        if self.csv.given() {
            return Err(format!(
                "--trace-columns, --trace-ops, --trace-offset-unit, --trace-size-unit, --trace-delimiter and --trace-skip-header apply to csv, alibaba, tencent and vscsi traces only, not {format}"
            ));
        }
        if let Some(sector) = self.sector_bytes {
            if !format.sector_based() {
                return Err(format!(
                    "--trace-sector-bytes applies to sector-based traces (mqsim, disksim, blkparse, spc), not {format} (its offsets and sizes are bytes)"
                ));
            }
            if sector == 0 || !sector.is_power_of_two() {
                return Err(format!("--trace-sector-bytes {sector}: must be a power of two"));
            }
        }
        Ok(())
    }

    /// Bytes per LBA unit (512 unless given).
    pub fn sector_bytes_or_default(&self) -> u32 {
        self.sector_bytes.unwrap_or(512)
    }
}

/// A trace that cannot be read.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum TraceError {
    /// The file as a whole: cannot be opened, read, decompressed, or recognised.
    #[error("{file}: {message}")]
    File { file: String, message: String },
    /// A malformed line.
    #[error("{file}:{line}: field `{field}`: expected {expected}; found {found}")]
    BadLine { file: String, line: u64, field: &'static str, expected: &'static str, found: String },
    /// A well-formed request that the chosen transforms refuse.
    #[error("{file}:{line}: {message}")]
    Request { file: String, line: u64, message: String },
}

/// Show the offending bytes of a line: quoted, escaped, at most 80 characters.
fn show_found(line: &[u8], (s, e): (usize, usize)) -> String {
    let part = line.get(s..e).unwrap_or(line);
    if part.is_empty() {
        return "nothing".into();
    }
    let mut out = String::from("`");
    for (i, c) in part.escape_ascii().enumerate() {
        if i >= 80 {
            out.push('…');
            break;
        }
        out.push(c as char);
    }
    out.push('`');
    out
}

/// Requests parsed from one line, waiting to be handed out (a blkparse line
/// with a preflush and FUA gives three).
#[derive(Default)]
pub struct Pending {
    items: [Option<TraceRequest>; 4],
    head: usize,
    len: usize,
}

impl Pending {
    /// Queue a request (line number filled in by the reader).
    #[inline]
    pub fn push(&mut self, op: HostOp, offset_bytes: u64, size_bytes: u64, time_ns: u64, device: u32) {
        debug_assert!(self.head + self.len < self.items.len());
        self.items[self.head + self.len] =
            Some(TraceRequest { op, offset_bytes, size_bytes, time_ns, device, line: 0 });
        self.len += 1;
    }
    #[inline]
    fn pop(&mut self) -> Option<TraceRequest> {
        if self.len == 0 {
            return None;
        }
        let r = self.items[self.head].take();
        self.head += 1;
        self.len -= 1;
        if self.len == 0 {
            self.head = 0;
        }
        r
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    fn clear(&mut self) {
        *self = Pending::default();
    }
    fn stamp_line(&mut self, line: u64) {
        for r in self.items[self.head..self.head + self.len].iter_mut().flatten() {
            r.line = line;
        }
    }
}

/// The per-format line parsers, dispatched by a match (no virtual call).
enum Parser {
    Msr(msr::MsrParser),
    Ascii(disksim::AsciiParser),
    Blkparse(blkparse::BlkparseParser),
    Spc(spc::SpcParser),
    Fio(fio_iolog::FioParser),
    Csv(csv::CsvParser),
}

impl Parser {
    fn new(format: TraceFormat, o: &ReaderOptions) -> Parser {
        let unit = o.time_unit.unwrap_or(format.default_time_unit());
        let sector = u64::from(o.sector_bytes_or_default());
        match format {
            TraceFormat::Msr => Parser::Msr(msr::MsrParser),
            TraceFormat::Mqsim | TraceFormat::Disksim => {
                let rw =
                    o.ascii_rw.unwrap_or(if format == TraceFormat::Mqsim { AsciiRw::Mqsim } else { AsciiRw::Disksim });
                Parser::Ascii(disksim::AsciiParser::new(unit, rw, sector))
            }
            TraceFormat::Blkparse => {
                Parser::Blkparse(blkparse::BlkparseParser::new(o.blkparse_events.unwrap_or_default(), sector))
            }
            TraceFormat::Spc => Parser::Spc(spc::SpcParser::new(unit, sector)),
            TraceFormat::Fio => Parser::Fio(fio_iolog::FioParser::new(o.time_unit)),
            TraceFormat::Csv | TraceFormat::Alibaba | TraceFormat::Tencent | TraceFormat::Vscsi => {
                Parser::Csv(csv::CsvParser::new(format, o.time_unit, &o.csv))
            }
        }
    }

    #[inline]
    fn parse(&mut self, line: &[u8], out: &mut Pending) -> Result<(), LineError> {
        match self {
            Parser::Msr(p) => p.parse(line, out),
            Parser::Ascii(p) => p.parse(line, out),
            Parser::Blkparse(p) => p.parse(line, out),
            Parser::Spc(p) => p.parse(line, out),
            Parser::Fio(p) => p.parse(line, out),
            Parser::Csv(p) => p.parse(line, out),
        }
    }

    /// Whether the first content line may be a header to ignore.
    fn allows_header(&self) -> bool {
        matches!(self, Parser::Msr(_) | Parser::Ascii(_) | Parser::Spc(_))
    }
}

/// What a reader has seen so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReadCounts {
    /// Lines read (all passes when the trace is repeated).
    pub lines: u64,
    /// Requests produced.
    pub requests: u64,
    /// Blank, comment and header lines, and events that are not requests.
    pub ignored_lines: u64,
    /// Malformed lines skipped (`--skip-bad-lines`).
    pub skipped_bad_lines: u64,
}

/// Malformed lines kept in full for the report when skipping them.
pub const BAD_LINE_EXAMPLES: usize = 10;

/// Bytes of the decompressed trace looked at to sniff its format, unless
/// they hold fewer than [`SNIFF_LINES`] lines: then more are read, up to
/// [`SNIFF_MAX_BYTES`], so that long lines at the start (a long header or
/// comment, well under the reader's [`source::MAX_LINE_BYTES`]) do not hide
/// the records after them.
const SNIFF_BYTES: usize = 64 * 1024;
/// The most bytes read to sniff the format: a longest line and 64 KiB more.
const SNIFF_MAX_BYTES: usize = source::MAX_LINE_BYTES + SNIFF_BYTES;
/// Lines longer than this are no evidence for the sniffer (no record of any
/// format is nearly this long); the reader still reads and judges them.
pub const SNIFF_LONG_LINE_BYTES: usize = 4096;
/// Content lines (at most) whose layout decides the format.
pub const SNIFF_LINES: usize = 256;

/// A streaming reader of one trace file.
pub struct TraceReader {
    name: String,
    path: Option<PathBuf>,
    options: ReaderOptions,
    format: TraceFormat,
    chosen_because: Option<String>,
    compression: Compression,
    lines: LineSource,
    parser: Parser,
    pending: Pending,
    file_bytes_read: Arc<AtomicU64>,
    file_bytes_before: u64,
    file_bytes: Option<u64>,
    seen_content: bool,
    counts: ReadCounts,
    bad_examples: Vec<String>,
}

impl TraceReader {
    /// Open `path` (plain, `.gz` or `.zst`) with `options`.
    pub fn open(path: &Path, options: &ReaderOptions) -> Result<TraceReader, TraceError> {
        let name = path.display().to_string();
        let opened = source::open(path)
            .map_err(|e| TraceError::File { file: name.clone(), message: format!("cannot open: {e}") })?;
        let mut r = Self::from_opened(name, opened, options)?;
        r.path = Some(path.to_path_buf());
        Ok(r)
    }

    /// Read a trace held in memory (tests, fuzzing); `name` is used in errors.
    pub fn from_bytes(name: &str, bytes: Vec<u8>, options: &ReaderOptions) -> Result<TraceReader, TraceError> {
        let opened = source::from_bytes(bytes)
            .map_err(|e| TraceError::File { file: name.to_string(), message: format!("cannot decompress: {e}") })?;
        Self::from_opened(name.to_string(), opened, options)
    }

    fn from_opened(
        name: String,
        mut opened: source::Opened,
        options: &ReaderOptions,
    ) -> Result<TraceReader, TraceError> {
        let file_error = |message: String| TraceError::File { file: name.clone(), message };
        let (format, chosen_because, prefix) = match options.format {
            Some(f) => (f, None, Vec::new()),
            None => {
                let (sample, complete) = read_sniff_sample(&mut opened.reader)
                    .map_err(|e| file_error(format!("cannot read ({} compression): {e}", opened.compression.name())))?;
                let (f, why) = sniff(&sample, complete).map_err(file_error)?;
                (f, Some(why), sample)
            }
        };
        options.check_for(format).map_err(file_error)?;
        Ok(TraceReader {
            parser: Parser::new(format, options),
            lines: LineSource::new(opened.reader, &prefix),
            name,
            path: None,
            options: options.clone(),
            format,
            chosen_because,
            compression: opened.compression,
            pending: Pending::default(),
            file_bytes_read: opened.file_bytes_read,
            file_bytes_before: 0,
            file_bytes: opened.file_bytes,
            seen_content: false,
            counts: ReadCounts::default(),
            bad_examples: Vec::new(),
        })
    }

    /// Start again from the first line (the file is reopened). Counts add up.
    /// A pipe or FIFO is refused ([`source::rereadable`]): reopening it
    /// would wait forever.
    pub fn rewind(&mut self) -> Result<(), TraceError> {
        let Some(path) = self.path.clone().filter(|p| source::rereadable(p)) else {
            return Err(TraceError::File {
                file: self.name.clone(),
                message: "cannot be read again (not a regular file: a pipe or FIFO is read once)".into(),
            });
        };
        let opened = source::open(&path)
            .map_err(|e| TraceError::File { file: self.name.clone(), message: format!("cannot reopen: {e}") })?;
        self.file_bytes_before += self.file_bytes_read.load(Ordering::Relaxed);
        self.file_bytes_read = opened.file_bytes_read;
        self.lines = LineSource::new(opened.reader, b"");
        self.parser = Parser::new(self.format, &self.options);
        self.pending.clear();
        self.seen_content = false;
        Ok(())
    }

    /// The next request, `None` at the end of the file.
    #[inline]
    pub fn next_request(&mut self) -> Result<Option<TraceRequest>, TraceError> {
        loop {
            if let Some(r) = self.pending.pop() {
                self.counts.requests += 1;
                return Ok(Some(r));
            }
            let (line_no, line) = match self.lines.next_line() {
                Ok(Some(l)) => l,
                Ok(None) => return Ok(None),
                Err(LineFault::Io(e)) => {
                    return Err(TraceError::File {
                        file: self.name.clone(),
                        message: format!(
                            "read error after line {} ({} compression): {e}",
                            self.lines.line_no(),
                            self.compression.name()
                        ),
                    })
                }
                Err(LineFault::TooLong) => {
                    return Err(TraceError::File {
                        file: self.name.clone(),
                        message: format!(
                            "line {} is longer than {} bytes: not a text trace?",
                            self.lines.line_no(),
                            source::MAX_LINE_BYTES
                        ),
                    })
                }
            };
            self.counts.lines += 1;
            if parse::is_blank_or_comment(line) {
                self.counts.ignored_lines += 1;
                continue;
            }
            let first_content = !self.seen_content;
            self.seen_content = true;
            match self.parser.parse(line, &mut self.pending) {
                Ok(()) => {
                    if self.pending.is_empty() {
                        self.counts.ignored_lines += 1;
                    } else {
                        self.pending.stamp_line(line_no);
                    }
                }
                Err(e) => {
                    self.pending.clear();
                    if first_content
                        && self.parser.allows_header()
                        && parse::trim(line).first().is_some_and(u8::is_ascii_alphabetic)
                    {
                        self.counts.ignored_lines += 1;
                        continue;
                    }
                    let err = TraceError::BadLine {
                        file: self.name.clone(),
                        line: line_no,
                        field: e.field,
                        expected: e.expected,
                        found: show_found(line, e.found),
                    };
                    if !self.options.skip_bad_lines {
                        return Err(err);
                    }
                    self.counts.skipped_bad_lines += 1;
                    if self.bad_examples.len() < BAD_LINE_EXAMPLES {
                        self.bad_examples.push(err.to_string());
                    }
                }
            }
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn format(&self) -> TraceFormat {
        self.format
    }
    /// Why `--trace-format auto` chose the format (`None` if it was given).
    pub fn chosen_because(&self) -> Option<&str> {
        self.chosen_because.as_deref()
    }
    pub fn compression(&self) -> Compression {
        self.compression
    }
    pub fn options(&self) -> &ReaderOptions {
        &self.options
    }
    pub fn counts(&self) -> &ReadCounts {
        &self.counts
    }
    /// The first malformed lines skipped, as error messages.
    pub fn bad_line_examples(&self) -> &[String] {
        &self.bad_examples
    }
    /// File bytes read so far, over every pass.
    pub fn file_bytes_read(&self) -> u64 {
        self.file_bytes_before + self.file_bytes_read.load(Ordering::Relaxed)
    }
    /// The file's size in bytes, if known.
    pub fn file_bytes(&self) -> Option<u64> {
        self.file_bytes
    }
    /// A one-line description: `blkparse FILE (auto-detected), gzip`. The
    /// reason for an auto-detected format is not repeated here: the CLI
    /// prints it once, and reports keep it apart ([`Self::chosen_because`]).
    pub fn describe(&self) -> String {
        let mut d = format!("{} {}", self.format, self.name);
        if self.chosen_because.is_some() {
            d += " (auto-detected)";
        }
        if self.compression != Compression::None {
            d += &format!(", {}", self.compression.name());
        }
        d
    }
}

/// The start of a trace to sniff, and whether it is the whole trace:
/// [`SNIFF_BYTES`], or more until it holds [`SNIFF_LINES`] lines, the file
/// ends, or [`SNIFF_MAX_BYTES`] are read.
fn read_sniff_sample(reader: &mut dyn std::io::Read) -> std::io::Result<(Vec<u8>, bool)> {
    let mut sample = source::read_prefix(reader, SNIFF_BYTES)?;
    let mut complete = sample.len() < SNIFF_BYTES;
    while !complete
        && sample.len() < SNIFF_MAX_BYTES
        && memchr::memchr_iter(b'\n', &sample).take(SNIFF_LINES).count() < SNIFF_LINES
    {
        let want = SNIFF_BYTES.min(SNIFF_MAX_BYTES - sample.len());
        let more = source::read_prefix(reader, want)?;
        complete = more.len() < want;
        sample.extend_from_slice(&more);
    }
    Ok((sample, complete))
}

/// A format the sniffer can recognise line by line: its layout test and
/// the layout in words.
type Layout = (TraceFormat, fn(&[u8]) -> bool, &'static str);

/// Recognise the format from the start of a (decompressed) trace.
/// `complete` says whether `sample` is the whole file (its last line is then
/// complete too). Returns the format and a sentence saying why, or why the
/// evidence does not suffice (see the module docs for the rule).
pub fn sniff(sample: &[u8], complete: bool) -> Result<(TraceFormat, String), String> {
    let sample = source::strip_bom(sample);
    let mut lines: Vec<&[u8]> = sample.split(|&c| c == b'\n').collect();
    if !complete {
        lines.pop(); // possibly cut in the middle
    }
    let mut long_lines = 0;
    let content: Vec<&[u8]> = lines
        .iter()
        .map(|l| parse::trim(l.strip_suffix(b"\r").unwrap_or(l)))
        .filter(|l| !parse::is_blank_or_comment(l))
        // No evidence: a record is never this long.
        .filter(|l| {
            let long = l.len() > SNIFF_LONG_LINE_BYTES;
            long_lines += usize::from(long);
            !long
        })
        // blkparse may print one of these per CPU before the events.
        .filter(|l| !l.starts_with(b"Input file "))
        .take_while(|l| !blkparse::is_trailer(l))
        .take(SNIFF_LINES)
        .collect();
    let Some(&first) = content.first() else {
        if !complete && lines.is_empty() {
            return Err(format!(
                "no complete line in the first {} bytes: a line longer than {} bytes is not a text trace",
                sample.len(),
                source::MAX_LINE_BYTES
            ));
        }
        if long_lines > 0 {
            return Err(format!(
                "cannot recognise the trace format: its first lines are all longer than {SNIFF_LONG_LINE_BYTES} bytes ({long_lines} of them), which no record of a known format is; give --trace-format"
            ));
        }
        return Err("the trace is empty: no line to recognise its format from".into());
    };
    if let Some(v) = fio_iolog::header_version(first) {
        return Ok((TraceFormat::Fio, format!("first line is the fio iolog version {v} header")));
    }
    let layouts: [Layout; 5] = [
        (
            TraceFormat::Blkparse,
            blkparse::looks_like,
            "lines start `major,minor cpu sequence seconds.nanoseconds pid action`",
        ),
        (TraceFormat::Msr, msr::looks_like, "7 comma-separated fields with Type Read/Write"),
        (TraceFormat::Spc, spc::looks_like, "comma-separated ASU,LBA,Size,Opcode,Timestamp with opcode r/w"),
        (TraceFormat::Mqsim, disksim::looks_like, "5 blank-separated numeric fields"),
        (
            TraceFormat::Alibaba,
            csv::looks_like_alibaba,
            "comma-separated device_id,opcode,offset,length,timestamp with opcode R/W",
        ),
    ];
    let matches_any = |l: &[u8]| layouts.iter().any(|(_, looks_like, _)| looks_like(l));
    // A header (the CSV and ASCII readers skip it) is no evidence either way.
    let header = first.first().is_some_and(u8::is_ascii_alphabetic) && !matches_any(first);
    let body = if header { &content[1..] } else { &content[..] };
    let n = body.len();
    if n == 0 {
        return Err(format!(
            "only a header line ({}), no record to recognise the format from; give --trace-format (msr, mqsim, disksim, blkparse, spc, fio)",
            show_found(first, (0, first.len()))
        ));
    }
    let mut ranked: Vec<(TraceFormat, usize, &str)> =
        layouts.iter().map(|&(f, looks_like, why)| (f, body.iter().filter(|l| looks_like(l)).count(), why)).collect();
    ranked.sort_by_key(|c| std::cmp::Reverse(c.1));
    let (format, hits, layout) = ranked[0];
    let (runner_up, runner_hits, _) = ranked[1];
    let lines_seen = format!("the first {n} line(s){}", if header { " after the header" } else { "" });
    if hits == 0 {
        return Err(format!(
            "cannot recognise the trace format from {lines_seen} (first: {}); give --trace-format (msr, mqsim, disksim, blkparse, spc, fio)",
            show_found(body[0], (0, body[0].len()))
        ));
    }
    if hits * 2 < n {
        return Err(format!(
            "cannot recognise the trace format: only {hits} of {lines_seen} look like {format} ({layout}), too few to be sure; give --trace-format"
        ));
    }
    if runner_hits > 0 && hits < 3 * runner_hits {
        return Err(format!(
            "ambiguous trace format: of {lines_seen}, {hits} look like {format} and {runner_hits} like {runner_up}; give --trace-format"
        ));
    }
    let mut why = format!("{hits} of {lines_seen} match: {layout}");
    if long_lines > 0 {
        why += &format!(" ({long_lines} line(s) longer than {SNIFF_LONG_LINE_BYTES} bytes not looked at)");
    }
    if hits < n {
        why += &format!(" (the other {} will be reported as bad lines)", n - hits);
    }
    if format == TraceFormat::Mqsim {
        let ascii: Vec<&[u8]> = body.iter().copied().filter(|l| disksim::looks_like(l)).collect();
        let (variant, detail) = disksim::which_variant(&ascii)?;
        return Ok((variant, format!("{why}; {detail}")));
    }
    Ok((format, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names_round_trip() {
        for f in TraceFormat::ALL.into_iter().chain(TraceFormat::CSV_LAYOUTS) {
            assert_eq!(f.name().parse::<TraceFormat>().unwrap(), f);
        }
        let e = "xsv".parse::<TraceFormat>().unwrap_err();
        assert!(e.contains("msr") && e.contains("csv, alibaba, tencent, vscsi"), "{e}");
    }

    #[test]
    fn sniffing_tells_every_format_apart() {
        let cases: [(&[u8], TraceFormat); 9] = [
            (b"fio version 2 iolog\n/dev/sda add\n", TraceFormat::Fio),
            (b"128166372003061629,hm,1,Read,3154152960,32768,23320\n", TraceFormat::Msr),
            (b"0,303567,3584,w,0.000000\n1,55590,3072,r,0.026214\n", TraceFormat::Spc),
            (b"938513000 4 264719034 16 0\n938828000 3 197570570 16 1\n", TraceFormat::Mqsim),
            (b"13.191135 30 0 5 1\n17.829285 20 576560 6 1\n", TraceFormat::Disksim),
            (b"0 1 2 3 4\n5 6 7 8 9\n", TraceFormat::Disksim),
            (
                b"\xef\xbb\xbfTimestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\r\n1,hm,1,Read,0,512,1\r\n",
                TraceFormat::Msr,
            ),
            (b"\xef\xbb\xbffio version 3 iolog\n", TraceFormat::Fio),
            (b"  8,16   5        2     0.000001850 18615  Q   R 1444645666 + 256 [java]\n", TraceFormat::Blkparse),
        ];
        for (text, want) in cases {
            let (got, why) = sniff(text, true).unwrap();
            assert_eq!(got, want, "{}: {why}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn sniffing_tolerates_a_header_and_refuses_garbage() {
        let text = b"Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n128166372003061629,hm,1,Read,3154152960,32768,23320\n";
        assert_eq!(sniff(text, true).unwrap().0, TraceFormat::Msr);
        let mut blk = Vec::new();
        for cpu in 0..8 {
            blk.extend_from_slice(format!("Input file sdb.blktrace.{cpu} added\n").as_bytes());
        }
        blk.extend_from_slice(b"  8,16   5        2     0.000001850 18615  Q   R 1 + 8 [java]\n");
        assert_eq!(sniff(&blk, true).unwrap().0, TraceFormat::Blkparse);
        let err = sniff(b"hello world\nthis is not a trace\n", true).unwrap_err();
        assert!(err.contains("--trace-format"), "{err}");
        assert!(sniff(b"\n\n", true).unwrap_err().contains("empty"));
    }

    /// `n` MQSim lines, with `odd` of them (spread out) given `odd_line`.
    fn mqsim_with(n: usize, odd: &[usize], odd_line: &str) -> Vec<u8> {
        let mut t = String::new();
        for i in 0..n {
            if odd.contains(&i) {
                t += odd_line;
            } else {
                t += &format!("{} 0 {} 8 {}\n", 1000 * i, 8 * i, i % 2);
            }
        }
        t.into_bytes()
    }

    #[test]
    fn one_odd_line_never_flips_mqsim_to_disksim() {
        let (f, why) = sniff(&mqsim_with(32, &[5], "5000 0 40 8 2\n"), true).unwrap();
        assert_eq!(f, TraceFormat::Mqsim, "{why}");
        assert!(why.contains("only 1 of 32 ASCII lines have DiskSim features"), "{why}");
        let (f, _) = sniff(&mqsim_with(32, &[3, 9], "1.5 0 40 8 1\n"), true).unwrap();
        assert_eq!(f, TraceFormat::Mqsim, "two fractional times in 32 lines");
        // A majority decides for DiskSim; a sizeable minority is ambiguous.
        let odd: Vec<usize> = (0..32).filter(|i| i % 2 == 0).chain([1]).collect();
        assert_eq!(sniff(&mqsim_with(32, &odd, "1.5 0 40 8 1\n"), true).unwrap().0, TraceFormat::Disksim);
        let e = sniff(&mqsim_with(32, &[1, 5, 9, 13, 17, 21], "7 0 40 8 4\n"), true).unwrap_err();
        assert!(e.contains("cannot tell MQSim from DiskSim: 6 of 32") && e.contains("--trace-format mqsim"), "{e}");
    }

    #[test]
    fn a_header_and_a_bad_line_still_give_the_format() {
        let text = b"Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n1,hm,1,Read,0,512,1\n1,hm,1,Erase,0,512,1\n2,hm,1,Write,0,512,1\n";
        let (f, why) = sniff(text, true).unwrap();
        assert_eq!(f, TraceFormat::Msr);
        assert!(
            why.contains("2 of the first 3 line(s) after the header") && why.contains("1 will be reported as bad"),
            "{why}"
        );
        // The smallest case: a header, one good line, one bad line.
        let text = b"ASU,LBA,Size,Opcode,Timestamp\n0,1,512,w,0.0\n0,1,512,x,0.1\n";
        assert_eq!(sniff(text, true).unwrap().0, TraceFormat::Spc);
    }

    #[test]
    fn thin_or_mixed_evidence_asks_for_the_format() {
        let e = sniff(b"1,hm,1,Read,0,512,1\nfoo\nbar\nbaz\n", true).unwrap_err();
        assert!(e.contains("only 1 of the first 4 line(s) look like msr") && e.contains("--trace-format"), "{e}");
        let e = sniff(b"1,hm,1,Read,0,512,1\n2,hm,1,Write,0,512,1\n0,1,512,w,0.0\n", true).unwrap_err();
        assert!(e.contains("ambiguous trace format") && e.contains("2 look like msr and 1 like spc"), "{e}");
        let e = sniff(b"Timestamp,Hostname\n", true).unwrap_err();
        assert!(e.contains("only a header line"), "{e}");
    }

    #[test]
    fn a_long_first_line_does_not_hide_the_records_after_it() {
        // 70 KB: past the 64 KiB first sample, well under the 1 MiB line limit.
        let mut text = vec![b'x'; 70_000];
        text.extend_from_slice(b"\n100 0 0 8 0\n200 0 8 8 1\n300 0 16 8 1\n");
        let mut r = TraceReader::from_bytes("long", text.clone(), &ReaderOptions::default()).unwrap();
        assert_eq!(r.format(), TraceFormat::Mqsim, "{:?}", r.chosen_because());
        let mut n = 0;
        while r.next_request().unwrap().is_some() {
            n += 1;
        }
        assert_eq!((n, r.counts().ignored_lines), (3, 1));
        // A long line among the records is no evidence, and it is said.
        let mut text = b"100 0 0 8 0\n".to_vec();
        text.extend_from_slice(&[b'7'; 5000]);
        text.extend_from_slice(b"\n200 0 8 8 1\n");
        let (f, why) = sniff(&text, true).unwrap();
        assert_eq!(f, TraceFormat::Mqsim);
        assert!(why.contains("1 line(s) longer than 4096 bytes not looked at"), "{why}");
        // A line beyond the reader's limit is not called an empty trace.
        let e = sniff(&vec![b'1'; 100], false).unwrap_err();
        assert!(e.contains("no complete line in the first 100 bytes"), "{e}");
    }

    #[test]
    fn options_that_mean_nothing_for_the_format_are_refused() {
        let o = ReaderOptions { time_unit: Some(TimeUnit::Ms), ..ReaderOptions::for_format(TraceFormat::Msr) };
        let e = TraceReader::from_bytes("x", b"".to_vec(), &o).err().unwrap();
        assert!(e.to_string().contains("--trace-time-unit"), "{e}");
        for f in [TraceFormat::Msr, TraceFormat::Fio] {
            let o = ReaderOptions { sector_bytes: Some(4096), ..ReaderOptions::for_format(f) };
            let e = TraceReader::from_bytes("x", b"".to_vec(), &o).err().unwrap().to_string();
            assert!(e.contains("--trace-sector-bytes applies to sector-based traces"), "{e}");
        }
        // Sniffed formats are checked too.
        let o = ReaderOptions { sector_bytes: Some(4096), ..ReaderOptions::default() };
        let e = TraceReader::from_bytes("x", b"1,hm,1,Read,0,512,1\n".to_vec(), &o).err().unwrap().to_string();
        assert!(e.contains("not msr"), "{e}");
        let o = ReaderOptions { sector_bytes: Some(4096), ..ReaderOptions::for_format(TraceFormat::Spc) };
        let mut r = TraceReader::from_bytes("x", b"0,2,512,w,0.0\n".to_vec(), &o).unwrap();
        assert_eq!(r.next_request().unwrap().unwrap().offset_bytes, 8192);
    }
}
