//! Replaying a trace as a [`Workload`]: transformed trace requests become
//! host requests in the device's sectors.
//!
//! - Offsets and sizes in bytes become sectors, widened to whole sectors
//!   when the trace is finer (counted).
//! - Zero-length reads, writes and trims are skipped (counted); a flush
//!   is a flush.
//! - A request of more than 2^32 − 1 sectors is issued as consecutive
//!   pieces of at most that many.
//! - The arrival time is the transformed time (first request at 0).
//! - A replay that issues no request at all (an empty trace, filters that
//!   keep nothing, a map that skips everything) is not an error, but its
//!   report carries `warnings` saying why, for the summary and the JSON.
//! - Progress is the bytes read from the trace file (compressed bytes for
//!   `.gz`/`.zst`); with `--trace-repeat-until`, the bytes written towards
//!   the target.
//! - The oracle's unit ([`Workload::alignment_sectors`]) is what
//!   `--trace-align` guarantees (1 sector without it), unless
//!   [`TraceWorkload::measure_alignment`] has made a first pass over the
//!   requests the replay will issue: then it is the largest power of two
//!   (capped, e.g. at the page's sectors) dividing every read, write and
//!   trim's start and length in sectors.
//! - What the replay did is a typed [`TraceReplayReport`]: the CLI's summary
//!   and warnings read its fields, and the JSON report serializes it.

use super::super::transform::{TransformCounts, TransformSpec, Transformed};
use super::super::{HostOp, HostRequest, Workload, WorkloadError, WorkloadProgress, WorkloadReport};
use super::source::Compression;
use super::{ReadCounts, ReaderOptions, TraceFormat, TraceReader};
use std::path::Path;

/// What a trace replay read, transformed and skipped: the `workload_report`
/// of a run that replays a trace.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TraceReplayReport {
    /// The trace's file name as given.
    pub file: String,
    pub format: TraceFormat,
    /// Why `--trace-format auto` chose the format (`None` if it was given).
    pub format_chosen_because: Option<String>,
    pub compression: Compression,
    /// The file's size in bytes, if known.
    pub file_bytes: Option<u64>,
    /// File bytes read, over every pass.
    pub file_bytes_read: u64,
    pub read: ReadCounts,
    /// The first malformed lines skipped, as error messages.
    pub bad_line_examples: Vec<String>,
    pub transforms: TransformCounts,
    /// Zero-length reads, writes and trims skipped.
    pub zero_length_skipped: u64,
    /// Requests widened to whole sectors.
    pub widened_to_sectors: u64,
    /// Why the replay issued no request, if it issued none.
    pub warnings: Vec<String>,
}

/// Where a replay's oracle unit comes from (see
/// [`TraceWorkload::choose_oracle_unit`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OracleUnitSource {
    /// `--oracle-unit`.
    Given,
    /// A first pass over the trace.
    Measured,
    /// A trace read once: what `--trace-align` guarantees (more than 1 sector).
    AlignOption,
    /// A trace read once, without `--trace-align`: 1 sector.
    Unmeasured,
}

impl OracleUnitSource {
    /// Why the unit is what it is, for the line that says it.
    pub fn describe(self) -> &'static str {
        match self {
            OracleUnitSource::Given => "from --oracle-unit",
            OracleUnitSource::Measured => "from the trace's alignment",
            OracleUnitSource::AlignOption => {
                "from --trace-align; the trace is a pipe or FIFO, read once, so its own alignment is not measured"
            }
            OracleUnitSource::Unmeasured => {
                "the trace is a pipe or FIFO, read once, so its alignment is not measured; give --oracle-unit"
            }
        }
    }
}

/// A trace replayed on a device.
pub struct TraceWorkload {
    stream: Transformed,
    sector_bytes: u64,
    alignment_sectors: u32,
    /// The rest of a request longer than 2^32 − 1 sectors: (start, sectors left).
    rest: Option<(HostRequest, u64)>,
    zero_length_skipped: u64,
    widened_to_sectors: u64,
}

impl TraceWorkload {
    /// Replay `reader` through `spec` on a device with `sector_bytes` sectors.
    /// The spec must map into the device (`spec.map`), so every request fits.
    pub fn new(reader: TraceReader, spec: TransformSpec, sector_bytes: u32) -> Result<TraceWorkload, String> {
        let Some(map) = spec.map else {
            return Err("a replayed trace needs a device map".into());
        };
        let sector = u64::from(sector_bytes);
        if let Some(n) = spec.repeat_until_written_bytes {
            if n % sector != 0 {
                return Err(format!("--trace-repeat-until {n}: must be a multiple of the {sector}-byte sector"));
            }
        }
        if let Some(s) = spec.repeat_offset_bytes {
            if s % sector != 0 {
                return Err(format!("--trace-repeat-offset {s}: must be a multiple of the {sector}-byte sector"));
            }
        }
        // The oracle's grain: what every offset and size is a multiple of.
        let alignment_sectors = match spec.align_bytes {
            None => 1,
            Some(a) => {
                let mut g = gcd(a, map.capacity_bytes);
                for v in [spec.repeat_until_written_bytes, spec.repeat_offset_bytes].into_iter().flatten() {
                    g = gcd(g, v);
                }
                if spec.repeat_until_written_bytes.is_some() && spec.repeat_offset_bytes.is_none() {
                    g = gcd(g, 1 << 20);
                }
                if g % sector != 0 {
                    1
                } else {
                    let s = g / sector;
                    1u32 << s.trailing_zeros().min(16)
                }
            }
        };
        Ok(TraceWorkload {
            stream: Transformed::new(reader, spec)?,
            sector_bytes: sector,
            alignment_sectors,
            rest: None,
            zero_length_skipped: 0,
            widened_to_sectors: 0,
        })
    }

    pub fn stream(&self) -> &Transformed {
        &self.stream
    }

    /// What the replay has done so far.
    pub fn replay_report(&self) -> TraceReplayReport {
        let r = self.stream.reader();
        TraceReplayReport {
            file: r.name().to_string(),
            format: r.format(),
            format_chosen_because: r.chosen_because().map(String::from),
            compression: r.compression(),
            file_bytes: r.file_bytes(),
            file_bytes_read: r.file_bytes_read(),
            read: r.counts().clone(),
            bad_line_examples: r.bad_line_examples().to_vec(),
            transforms: self.stream.counts().clone(),
            zero_length_skipped: self.zero_length_skipped,
            widened_to_sectors: self.widened_to_sectors,
            warnings: self.stream.warnings(),
        }
    }

    /// A first pass over `reader` (the same trace, opened again with the same
    /// reader options) through this replay's transforms: the oracle unit
    /// becomes the largest power of two, at most `max_sectors`, that divides
    /// the start and the length (in sectors) of every read, write and trim
    /// the replay will issue (flushes have none), if that is more than what
    /// `--trace-align` guarantees. Returns the unit. Streaming, with nothing
    /// kept per request; it stops early once the unit is down to 1 sector.
    ///
    /// With `--trace-repeat-until`, the pass covers pass 0 only: later
    /// passes are shifted by the repeat offset (a multiple of 1 MiB unless
    /// given), wrap at the capacity and end at the target, so the unit also
    /// divides those.
    pub fn measure_alignment(&mut self, reader: TraceReader, max_sectors: u32) -> Result<u32, String> {
        let spec = self.stream.spec();
        let mut once = spec.clone();
        once.repeat_until_written_bytes = None;
        once.repeat_offset_bytes = None;
        let cap = max_sectors.max(1).ilog2();
        // The OR of every start and length: its trailing zeros are the
        // smallest of theirs.
        let mut bits: u64 = 1 << cap;
        let mut pass = TraceWorkload::new(reader, once, self.sector_bytes as u32)?;
        while bits & 1 == 0 {
            match pass.next_request().map_err(|e| e.0)? {
                None => break,
                Some(r) if r.op == HostOp::Flush => {}
                Some(r) => bits |= r.lba | u64::from(r.sectors),
            }
        }
        let mut unit = 1u64 << bits.trailing_zeros().min(cap);
        if let Some(target) = spec.repeat_until_written_bytes {
            let mut g = gcd(unit * self.sector_bytes, target);
            g = gcd(g, spec.repeat_offset_bytes.unwrap_or(1 << 20));
            if let Some(m) = spec.map {
                g = gcd(g, m.capacity_bytes);
            }
            unit = if g % self.sector_bytes == 0 { 1 << (g / self.sector_bytes).trailing_zeros() } else { 1 };
        }
        self.alignment_sectors = self.alignment_sectors.max(unit as u32);
        Ok(self.alignment_sectors)
    }

    /// The oracle unit of this replay of `path`: `given` if any (the trace
    /// is not measured); else, if the file can be read twice, measured by
    /// [`TraceWorkload::measure_alignment`] over the file opened again with
    /// `options`, at most `max_sectors`; else what `--trace-align`
    /// guarantees ([`Workload::alignment_sectors`]).
    pub fn choose_oracle_unit(
        &mut self,
        path: &Path,
        options: &ReaderOptions,
        given: Option<u32>,
        max_sectors: u32,
    ) -> Result<(u32, OracleUnitSource), String> {
        if let Some(n) = given {
            return Ok((n, OracleUnitSource::Given));
        }
        if super::source::rereadable(path) {
            let again = TraceReader::open(path, options).map_err(|e| e.to_string())?;
            return Ok((self.measure_alignment(again, max_sectors)?, OracleUnitSource::Measured));
        }
        let n = self.alignment_sectors();
        Ok((n, if n > 1 { OracleUnitSource::AlignOption } else { OracleUnitSource::Unmeasured }))
    }

    /// Issue at most 2^32 − 1 sectors of `total` from `r`, keeping the rest.
    fn split(&mut self, mut r: HostRequest, total: u64) -> HostRequest {
        const MAX: u64 = u32::MAX as u64;
        if total > MAX {
            let rest = HostRequest { lba: r.lba + MAX, ..r };
            self.rest = Some((rest, total - MAX));
            r.sectors = u32::MAX;
        } else {
            r.sectors = total as u32;
        }
        r
    }
}

impl Workload for TraceWorkload {
    fn next_request(&mut self) -> Result<Option<HostRequest>, WorkloadError> {
        if let Some((rest, total)) = self.rest.take() {
            return Ok(Some(self.split(rest, total)));
        }
        loop {
            let Some(t) = self.stream.next_request().map_err(|e| WorkloadError(e.to_string()))? else {
                return Ok(None);
            };
            let base = HostRequest { op: t.op, lba: 0, sectors: 0, arrival_ns: t.time_ns, job: 0 };
            if t.op == HostOp::Flush {
                return Ok(Some(base));
            }
            if t.size_bytes == 0 {
                self.zero_length_skipped += 1;
                continue;
            }
            let lba = t.offset_bytes / self.sector_bytes;
            let end = t.end_bytes().div_ceil(self.sector_bytes);
            if t.offset_bytes % self.sector_bytes != 0 || t.size_bytes % self.sector_bytes != 0 {
                self.widened_to_sectors += 1;
            }
            return Ok(Some(self.split(HostRequest { lba, ..base }, end - lba)));
        }
    }

    fn progress(&self) -> WorkloadProgress {
        let spec = self.stream.spec();
        match spec.repeat_until_written_bytes {
            Some(n) => WorkloadProgress { done: self.stream.counts().written_bytes, total: Some(n) },
            None => WorkloadProgress {
                done: self.stream.reader().file_bytes_read(),
                total: self.stream.reader().file_bytes(),
            },
        }
    }

    fn alignment_sectors(&self) -> u32 {
        self.alignment_sectors
    }

    fn describe(&self) -> String {
        let s = self.stream.spec();
        let mut d = format!("trace {}", self.stream.reader().describe());
        if !s.devices.is_empty() {
            d += &format!(" devices={:?}", s.devices);
        }
        if !s.ops.is_empty() {
            let ops: Vec<&str> = s.ops.iter().map(|o| o.name()).collect();
            d += &format!(" ops={}", ops.join(","));
        }
        if s.speed != 1.0 {
            d += &format!(" speed={}", s.speed);
        }
        if let Some(a) = s.align_bytes {
            d += &format!(" align={a}");
        }
        if let Some(m) = s.map {
            d += &format!(" map={}", m.rule.name());
        }
        if let Some(n) = s.repeat_until_written_bytes {
            d += &format!(" repeat_until={n}");
        }
        if let Some(n) = s.max_requests {
            d += &format!(" requests={n}");
        }
        d
    }

    fn report(&self) -> Option<WorkloadReport> {
        Some(WorkloadReport::Trace(self.replay_report()))
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
