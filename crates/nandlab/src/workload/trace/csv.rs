//! CSV traces with a column mapping, and named layouts of published cloud
//! traces (`alibaba`, `tencent`, `vscsi`) that are presets of that mapping.
//!
//! `--trace-format csv` reads any delimited text with one I/O per line,
//! given where its fields are:
//!
//! ```text
//! --trace-columns time=2,op=3,size=4,offset=5[,device=N]   (1-based; time and device optional)
//! --trace-time-unit ns|us|ms|s        (required when a time column is mapped)
//! --trace-offset-unit bytes|sectors|4k (default bytes; sectors = 512 B)
//! --trace-size-unit   bytes|sectors|4k (default bytes)
//! --trace-ops read=R,28 --trace-ops write=W,2a --trace-ops trim=D --trace-ops ignore=X
//! --trace-delimiter ,                  (default `,`; `tab`, `space`, `;`, `|` or any one byte)
//! --trace-skip-header                  (the first content line is a header, whatever it holds)
//! ```
//!
//! Decisions (the layouts are silent on them):
//!
//! - Fields are trimmed of spaces and tabs; with a space or tab delimiter a
//!   run of blanks is one separator. Columns beyond the mapped ones
//!   are ignored; a mapped column missing from a line is an error naming
//!   the field.
//! - Operation values are matched case-insensitively against the
//!   `--trace-ops` lists (`read`, `write`, `trim`, `flush`, `ignore`; the
//!   names case-insensitive too). A value listed under `ignore` makes the
//!   line an ignored line (counted, no request). A value in no list is an
//!   error naming the line and the field. For a named layout, the user's
//!   lists are consulted first, then the layout's own. A flush keeps no
//!   offset or size (both 0, as in the other readers).
//! - No time column: every request has time 0, like a fio v2 log without
//!   `wait` lines (replay issues them back to back).
//! - Times are decimal (`1.5` allowed), converted exactly to ns; offsets,
//!   sizes and devices are unsigned integers. Offset × unit and offset +
//!   size must fit in 64 bits, or the line is bad (its offset / size).
//! - Header: the first content line is ignored (counted among the ignored
//!   lines) when none of its mapped numeric fields (time, offset, size,
//!   device) is a number — a header row of names — or when
//!   `--trace-skip-header` is given. Any other line that does not parse is
//!   a bad line.
//! - The device column becomes the request's `device`, so `--trace-device N`
//!   selects one disk or volume; without one, every request is device 0.
//!
//! Named layouts (each option above overrides the layout's own value):
//!
//! | layout | columns | units | ops | source |
//! |---|---|---|---|---|
//! | `alibaba` | `device_id,opcode,offset,length,timestamp` | offset, length bytes; timestamp µs (assumed, see below) | `R` read, `W` write | `alibaba/block-traces` README, schema of `io_traces.csv` (Alibaba Cloud EBS, 2020) |
//! | `tencent` | `timestamp,offset,size,io_type,volume_id` | timestamp s (Unix time); offset, size 512 B sectors | `0` read, `1` write | Tencent CBS trace README (SNIA IOTTA; Zhang et al., "OSCA", ATC '20): "Offset … in sectors … 1 sector = 512 bytes", "Size … in sectors", "IOType is Read(0), Write(1)", timestamp "Unix time (seconds since 1/1/1970)" |
//! | `vscsi` | `version,time,op,size,lbn` | time s; size bytes; lbn 512 B sectors | SCSI opcodes `28`/`0x28` read, `2a`/`0x2a` write | libCacheSim `data/cloudPhysicsIO.csv` (CloudPhysics VSCSI traces) |
//!
//! What was verified and what was not:
//!
//! - Alibaba: the README's schema table (as seen) gives `device_id`
//!   (uint32), `opcode` ("Either of 'R' or 'W'"), `offset` "in bytes" and
//!   `length` (bytes). The part of the table giving the `timestamp` unit was
//!   **not seen**: microseconds since 1970 is assumed (the unit commonly
//!   cited for these traces); override with `--trace-time-unit`. The files
//!   have no header row (one would be skipped).
//! - Tencent: the units above are quoted from the trace's README.
//! - vscsi: libCacheSim's documentation (FAQ, "What are the units in a
//!   trace?", and its cachesim/traceConv examples) says the sample
//!   `cloudPhysicsIO.csv` has the header `version,time,op,size,lbn`, that
//!   its time is in seconds and its size in bytes, and reads it with
//!   `time-col=2, obj-id-col=5, size-col=4`. **Not verified**: that `lbn`
//!   counts 512-byte sectors (VMware vscsiStats' convention; give
//!   `--trace-offset-unit` if your file differs) and how `op` is written
//!   (hexadecimal `28`/`2a` is assumed, with or without `0x`; if a file
//!   writes them in decimal, say `--trace-ops read=40 --trace-ops write=42`).
//!   Other SCSI opcodes (READ(16) `88`, WRITE(16) `8a`, …) are errors
//!   unless listed with `--trace-ops`.

use super::parse::{checked_end, is_blank, parse_decimal_ns, parse_u32, parse_u64, CsvFields, LineError, Words};
use super::{Pending, TimeUnit, TraceFormat};
use crate::workload::HostOp;

/// Where each field is: 0-based column indices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Columns {
    pub time: Option<usize>,
    pub op: usize,
    pub offset: usize,
    pub size: usize,
    pub device: Option<usize>,
}

impl std::str::FromStr for Columns {
    type Err = String;
    /// `time=2,op=3,size=4,offset=5[,device=1]`, 1-based.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut slots: [Option<usize>; 5] = [None; 5];
        const NAMES: [&str; 5] = ["time", "op", "offset", "size", "device"];
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (key, value) =
                part.split_once('=').ok_or_else(|| format!("`{part}`: expected FIELD=COLUMN (e.g. op=3)"))?;
            let key = key.trim().to_ascii_lowercase();
            let i = NAMES
                .iter()
                .position(|n| *n == key)
                .ok_or_else(|| format!("unknown field `{key}` in `{part}` (time, op, offset, size, device)"))?;
            let col: usize = value
                .trim()
                .parse()
                .ok()
                .filter(|&c| c >= 1 && c <= MAX_COLUMN)
                .ok_or_else(|| format!("`{part}`: the column must be a number from 1 to {MAX_COLUMN}"))?;
            if slots[i].is_some() {
                return Err(format!("field `{key}` given twice"));
            }
            if let Some(j) = slots.iter().position(|&c| c == Some(col - 1)) {
                return Err(format!("column {col} given to both `{}` and `{key}`", NAMES[j]));
            }
            slots[i] = Some(col - 1);
        }
        let need = |i: usize| {
            slots[i].ok_or_else(|| format!("`{}=N` is missing (op, offset and size are required)", NAMES[i]))
        };
        Ok(Columns { time: slots[0], op: need(1)?, offset: need(2)?, size: need(3)?, device: slots[4] })
    }
}

/// The highest column number accepted.
pub const MAX_COLUMN: usize = 1024;

/// What an operation value stands for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OpAction {
    Op(HostOp),
    /// A line to count and skip.
    Ignore,
}

/// One `--trace-ops NAME=V1,V2,…`: values that mean `action`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpRule {
    pub action: OpAction,
    /// The values, ASCII lowercase.
    pub values: Vec<Vec<u8>>,
}

impl std::str::FromStr for OpRule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, values) =
            s.split_once('=').ok_or_else(|| format!("`{s}`: expected NAME=VALUE[,VALUE…] (e.g. read=R,28)"))?;
        let action = match name.trim().to_ascii_lowercase().as_str() {
            "read" => OpAction::Op(HostOp::Read),
            "write" => OpAction::Op(HostOp::Write),
            "trim" => OpAction::Op(HostOp::Trim),
            "flush" => OpAction::Op(HostOp::Flush),
            "ignore" => OpAction::Ignore,
            other => return Err(format!("unknown operation `{other}` in `{s}` (read, write, trim, flush, ignore)")),
        };
        let values: Vec<Vec<u8>> =
            values.split(',').map(|v| v.trim().to_ascii_lowercase().into_bytes()).filter(|v| !v.is_empty()).collect();
        if values.is_empty() {
            return Err(format!("`{s}`: no value given for `{}`", name.trim()));
        }
        Ok(OpRule { action, values })
    }
}

/// Bytes per unit of an offset or size field: `bytes`, `sectors` (512) or a size such as `4k`.
pub fn parse_unit(s: &str) -> Result<u64, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "bytes" | "byte" | "b" => Ok(1),
        "sectors" | "sector" => Ok(512),
        _ => match crate::util::size::parse_bytes(s) {
            Ok(0) => Err(format!("`{s}`: a unit must be at least 1 byte")),
            Ok(b) => Ok(b),
            Err(e) => Err(format!("{e}; or bytes, sectors (512 B)")),
        },
    }
}

/// The field delimiter: one byte, or `tab`, `space`, `comma`, `semicolon`.
pub fn parse_delimiter(s: &str) -> Result<u8, String> {
    match s {
        "tab" | "\\t" | "\t" => Ok(b'\t'),
        "space" | " " => Ok(b' '),
        "comma" => Ok(b','),
        "semicolon" => Ok(b';'),
        _ if s.len() == 1 && s.as_bytes()[0].is_ascii_punctuation() && s != "#" && s != "." => Ok(s.as_bytes()[0]),
        _ => Err(format!("`{s}`: expected one punctuation character (not `#` or `.`), tab or space")),
    }
}

/// The CSV options (`ReaderOptions::csv`); `None`/empty: the layout's own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CsvOptions {
    pub columns: Option<Columns>,
    pub offset_unit: Option<u64>,
    pub size_unit: Option<u64>,
    /// Consulted before the layout's own operation values.
    pub ops: Vec<OpRule>,
    pub delimiter: Option<u8>,
    pub skip_header: bool,
}

impl CsvOptions {
    /// Whether any CSV option is given (they apply to the CSV formats only).
    pub fn given(&self) -> bool {
        *self != CsvOptions::default()
    }
}

/// A layout: columns, units, operation values and the names of its fields.
struct Layout {
    columns: Option<Columns>,
    time_unit: Option<TimeUnit>,
    offset_unit: u64,
    size_unit: u64,
    ops: &'static [(&'static [u8], HostOp)],
    /// time, op, offset, size, device.
    names: [&'static str; 5],
    op_expected: &'static str,
}

fn layout(format: TraceFormat) -> Layout {
    let cols = |time, op, offset, size, device| Some(Columns { time: Some(time), op, offset, size, device });
    match format {
        TraceFormat::Alibaba => Layout {
            columns: cols(4, 1, 2, 3, Some(0)),
            time_unit: Some(TimeUnit::Us),
            offset_unit: 1,
            size_unit: 1,
            ops: &[(b"r", HostOp::Read), (b"w", HostOp::Write)],
            names: ["timestamp", "opcode", "offset", "length", "device_id"],
            op_expected: "R (read) or W (write), or a value given with --trace-ops",
        },
        TraceFormat::Tencent => Layout {
            columns: cols(0, 3, 1, 2, Some(4)),
            time_unit: Some(TimeUnit::S),
            offset_unit: 512,
            size_unit: 512,
            ops: &[(b"0", HostOp::Read), (b"1", HostOp::Write)],
            names: ["timestamp", "io_type", "offset", "size", "volume_id"],
            op_expected: "0 (read) or 1 (write), or a value given with --trace-ops",
        },
        TraceFormat::Vscsi => Layout {
            columns: cols(1, 2, 4, 3, None),
            time_unit: Some(TimeUnit::S),
            offset_unit: 512,
            size_unit: 1,
            ops: &[(b"28", HostOp::Read), (b"0x28", HostOp::Read), (b"2a", HostOp::Write), (b"0x2a", HostOp::Write)],
            names: ["time", "op", "lbn", "size", "device"],
            op_expected: "SCSI opcode 28 (read) or 2a (write), or a value given with --trace-ops",
        },
        _ => Layout {
            columns: None,
            time_unit: None,
            offset_unit: 1,
            size_unit: 1,
            ops: &[],
            names: ["time", "op", "offset", "size", "device"],
            op_expected: "a value listed with --trace-ops (read=…, write=…, trim=…, flush=…, ignore=…)",
        },
    }
}

/// The name a CSV layout gives a request field (for errors after reading).
pub fn field_name(format: TraceFormat, field: super::RequestField) -> &'static str {
    let names = layout(format).names;
    match field {
        super::RequestField::Offset => names[2],
        super::RequestField::Size => names[3],
        super::RequestField::Device => names[4],
    }
}

/// Check the options for a CSV `format`; the message names the option.
pub fn check(format: TraceFormat, time_unit: Option<TimeUnit>, o: &CsvOptions) -> Result<(), String> {
    let l = layout(format);
    let Some(columns) = o.columns.as_ref().or(l.columns.as_ref()) else {
        return Err(format!(
            "--trace-format {format} needs --trace-columns (e.g. time=1,op=2,offset=3,size=4[,device=5])"
        ));
    };
    if columns.time.is_some() && time_unit.or(l.time_unit).is_none() {
        return Err("--trace-columns maps a time column: give its unit with --trace-time-unit ns|us|ms|s".into());
    }
    if format == TraceFormat::Csv && o.ops.iter().all(|r| r.action == OpAction::Ignore) {
        return Err("--trace-format csv needs --trace-ops to say which op values are reads and writes (e.g. --trace-ops read=R --trace-ops write=W)".into());
    }
    Ok(())
}

/// The parser of one CSV layout.
pub struct CsvParser {
    /// time, op, offset, size, device: 0-based columns.
    cols: [Option<usize>; 5],
    unit_ns: u64,
    offset_unit: u64,
    size_unit: u64,
    /// Lowercase values; `None`: ignore the line.
    ops: Vec<(Vec<u8>, Option<HostOp>)>,
    names: [&'static str; 5],
    op_expected: &'static str,
    delimiter: u8,
    skip_header: bool,
    seen_first: bool,
}

const TIME: usize = 0;
const OP: usize = 1;
const OFFSET: usize = 2;
const SIZE: usize = 3;
const DEVICE: usize = 4;

impl CsvParser {
    /// `check` must have accepted the options.
    pub fn new(format: TraceFormat, time_unit: Option<TimeUnit>, o: &CsvOptions) -> Self {
        let l = layout(format);
        let c =
            o.columns.clone().or(l.columns).unwrap_or(Columns { time: None, op: 0, offset: 1, size: 2, device: None });
        let mut ops: Vec<(Vec<u8>, Option<HostOp>)> = Vec::new();
        for rule in &o.ops {
            let op = match rule.action {
                OpAction::Op(op) => Some(op),
                OpAction::Ignore => None,
            };
            ops.extend(rule.values.iter().map(|v| (v.clone(), op)));
        }
        ops.extend(l.ops.iter().map(|&(v, op)| (v.to_vec(), Some(op))));
        CsvParser {
            cols: [c.time, Some(c.op), Some(c.offset), Some(c.size), c.device],
            unit_ns: time_unit.or(l.time_unit).unwrap_or(TimeUnit::Ns).ns(),
            offset_unit: o.offset_unit.unwrap_or(l.offset_unit),
            size_unit: o.size_unit.unwrap_or(l.size_unit),
            ops,
            names: l.names,
            op_expected: l.op_expected,
            delimiter: o.delimiter.unwrap_or(b','),
            skip_header: o.skip_header,
            seen_first: false,
        }
    }

    /// The mapped fields of `line` (`None` where the line is too short).
    #[inline]
    fn fields<'a>(&self, line: &'a [u8]) -> [Option<&'a [u8]>; 5] {
        let mut out = [None; 5];
        let last = self.cols.iter().flatten().copied().max().unwrap_or(0);
        let mut place = |i: usize, f: &'a [u8]| {
            for (slot, col) in out.iter_mut().zip(self.cols) {
                if col == Some(i) {
                    *slot = Some(f);
                }
            }
        };
        if is_blank(self.delimiter) {
            // Space or tab: a run of blanks is one separator.
            Words::new(line).enumerate().take(last + 1).for_each(|(i, f)| place(i, f));
        } else {
            CsvFields::new(line, self.delimiter).enumerate().take(last + 1).for_each(|(i, f)| place(i, f));
        }
        out
    }

    #[inline]
    pub fn parse(&mut self, line: &[u8], out: &mut Pending) -> Result<(), LineError> {
        let f = self.fields(line);
        if !self.seen_first {
            self.seen_first = true;
            let numeric =
                [TIME, OFFSET, SIZE, DEVICE].iter().any(|&i| f[i].is_some_and(|v| parse_decimal_ns(v, 1).is_some()));
            if self.skip_header || !numeric {
                return Ok(()); // a header: nothing pushed, counted as ignored
            }
        }
        let n = &self.names;
        // A line too short for some mapped column: name the leftmost missing one.
        let missing = (0..5).filter(|&i| f[i].is_none()).filter_map(|i| self.cols[i].map(|c| (c, i))).min();
        if let Some((_, i)) = missing {
            return Err(LineError::line(line, n[i], "a field in this column (the line has too few fields)"));
        }
        let get = |i: usize| -> Result<&[u8], LineError> {
            f[i].ok_or_else(|| LineError::line(line, n[i], "a field in this column (the line has too few fields)"))
        };
        let op_field = get(OP)?;
        let op = match self.ops.iter().find(|(v, _)| v.eq_ignore_ascii_case(op_field)) {
            Some((_, Some(op))) => *op,
            Some((_, None)) => return Ok(()), // listed as ignored
            None => return Err(LineError::at(line, op_field, n[OP], self.op_expected)),
        };
        let time_ns = match self.cols[TIME] {
            None => 0,
            Some(_) => {
                let t = get(TIME)?;
                parse_decimal_ns(t, self.unit_ns).ok_or_else(|| {
                    LineError::at(
                        line,
                        t,
                        n[TIME],
                        "a non-negative time (digits, optional decimal fraction) below 2^64 ns",
                    )
                })?
            }
        };
        let device = match self.cols[DEVICE] {
            None => 0,
            Some(_) => {
                let d = get(DEVICE)?;
                parse_u32(d).ok_or_else(|| LineError::at(line, d, n[DEVICE], "a device number (0..2^32)"))?
            }
        };
        if op == HostOp::Flush {
            out.push(op, 0, 0, time_ns, device);
            return Ok(());
        }
        let off = get(OFFSET)?;
        let offset_bytes = parse_u64(off).and_then(|v| v.checked_mul(self.offset_unit)).ok_or_else(|| {
            LineError::at(line, off, n[OFFSET], "an unsigned integer offset whose byte offset fits in 64 bits")
        })?;
        let sz = get(SIZE)?;
        let size_bytes = parse_u64(sz)
            .and_then(|v| v.checked_mul(self.size_unit))
            .ok_or_else(|| LineError::at(line, sz, n[SIZE], "an unsigned integer size whose bytes fit in 64 bits"))?;
        checked_end(line, sz, n[SIZE], offset_bytes, size_bytes)?;
        out.push(op, offset_bytes, size_bytes, time_ns, device);
        Ok(())
    }
}

/// Whether a line looks like an Alibaba block trace record (for sniffing):
/// five comma-separated fields, the second `R` or `W`, the others
/// integers. No other sniffed layout has a letter in its second field.
pub fn looks_like_alibaba(line: &[u8]) -> bool {
    let mut f = CsvFields::new(line, b',');
    let mut next = || f.next();
    let (Some(dev), Some(op), Some(off), Some(len), Some(ts), None) = (next(), next(), next(), next(), next(), next())
    else {
        return false;
    };
    parse_u32(dev).is_some()
        && matches!(op, b"R" | b"W" | b"r" | b"w")
        && parse_u64(off).is_some()
        && parse_u64(len).is_some()
        && parse_u64(ts).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_specs_are_one_based_and_checked() {
        let c: Columns = "time=2, op=3,size=4,offset=5".parse().unwrap();
        assert_eq!(c, Columns { time: Some(1), op: 2, offset: 4, size: 3, device: None });
        let c: Columns = "OP=1,offset=2,size=3,device=9".parse().unwrap();
        assert_eq!((c.time, c.device), (None, Some(8)));
        for (spec, want) in [
            ("op=1,offset=2", "`size=N` is missing"),
            ("op=0,offset=2,size=3", "from 1 to 1024"),
            ("op=x,offset=2,size=3", "from 1 to 1024"),
            ("op=1,offset=1,size=3", "column 1 given to both `op` and `offset`"),
            ("op=1,op=2,offset=3,size=4", "`op` given twice"),
            ("op=1,lba=2,size=3", "unknown field `lba`"),
            ("op1,offset=2,size=3", "expected FIELD=COLUMN"),
        ] {
            let e = spec.parse::<Columns>().unwrap_err();
            assert!(e.contains(want), "{spec}: {e}");
        }
    }

    #[test]
    fn op_rules_units_and_delimiters_parse() {
        let r: OpRule = "READ=R, 28".parse().unwrap();
        assert_eq!(r, OpRule { action: OpAction::Op(HostOp::Read), values: vec![b"r".to_vec(), b"28".to_vec()] });
        assert_eq!("ignore=X".parse::<OpRule>().unwrap().action, OpAction::Ignore);
        assert!("erase=E".parse::<OpRule>().unwrap_err().contains("unknown operation `erase`"));
        assert!("read=".parse::<OpRule>().unwrap_err().contains("no value"));
        assert_eq!(parse_unit("bytes"), Ok(1));
        assert_eq!(parse_unit("sectors"), Ok(512));
        assert_eq!(parse_unit("4k"), Ok(4096));
        assert!(parse_unit("0").is_err());
        assert!(parse_unit("furlongs").is_err());
        assert_eq!(parse_delimiter("tab"), Ok(b'\t'));
        assert_eq!(parse_delimiter(";"), Ok(b';'));
        assert!(parse_delimiter("ab").is_err());
        assert!(parse_delimiter("#").is_err());
    }
}
