//! `nandlab trace convert`: write a (transformed) trace in another format,
//! so the same requests can be fed to fio or MQSim side by side.
//!
//! | target | writes | flush | trim |
//! |--------|--------|-------|------|
//! | `fio` (v3) | header, `add`/`open` per file, `µs file op offset length`, `close` | `sync` | `trim` |
//! | `fio-v2` | same without timestamps; gaps become `wait` lines (µs) | `sync` | `trim` |
//! | `mqsim` | `ns device lba size type` (512 B sectors, 0 = write, 1 = read) | dropped | dropped |
//! | `disksim` | `ms device blkno bcount flags` (flags 1 = read, 0 = write) | dropped | dropped |
//! | `msr` | `ticks,nandlab,disk,Read/Write,offset,size,0` | dropped | dropped |
//! | `spc` | `asu,lba,size,r/w,seconds` | dropped | dropped |
//!
//! MQSim, DiskSim, MSR and SPC have no flush or trim: conversion drops them,
//! counts them, and the CLI says how many (it never turns them into writes
//! or reads, which would change what the device stores). fio names device 0
//! after `--fio-file` and device N `FILE.N`; replay it with fio's
//! `--read_iolog=FILE --replay_redirect=/dev/…`. Sector-based targets widen
//! byte ranges that are not sector-aligned to whole sectors (counted).
//! Times are written as the transformed stream has them: by default the
//! first request is at 0. fio v2 expresses time only as `wait`s, so a
//! request earlier than the one before it keeps the earlier request's time.
//!
//! **Every file written reads back**: a request the target cannot write so
//! that nandlab's own reader of that format accepts it is refused with a
//! [`ConvertError::Unrepresentable`] naming the input line and field and
//! why, and conversion stops (nothing is silently changed). The cases:
//!
//! - `mqsim`, `disksim`: a request whose end, widened to a whole 512-byte
//!   sector, would pass 2^64 − 1 bytes (the reader would overflow its
//!   sector-to-byte product).
//! - `fio`, `fio-v2`: a 4097th distinct device (the reader numbers at most
//!   [`fio_iolog::MAX_FILES`] files); and `--fio-file` must be a name the
//!   reader splits out as one field ([`check_fio_file`]).
//! - `msr`, `spc`: none; offsets, sizes, devices and times the readers
//!   produce always fit (readers refuse requests ending past 2^64 − 1).

use super::{disksim, fio_iolog, msr, spc, RequestField, TraceFormat, TraceRequest};
use crate::workload::HostOp;
use serde::Serialize;
use std::io::{self, Write};
use std::path::Path;
use thiserror::Error;

/// Why a request could not be converted.
#[derive(Debug, Error)]
pub enum ConvertError {
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The target cannot represent the request so that its reader reads it back.
    #[error("line {line}: the request's {field:?} cannot be written as {target}: {reason}")]
    Unrepresentable { line: u64, field: RequestField, target: &'static str, reason: String },
}

impl ConvertError {
    /// The message for the user, naming the input `file`, line and field
    /// (as `input`'s reader names it); I/O errors name `output`.
    pub fn located(&self, file: &str, input: TraceFormat, output: &str) -> String {
        match self {
            ConvertError::Io(e) => format!("{output}: {e}"),
            ConvertError::Unrepresentable { line, field, target, reason } => {
                format!("{file}:{line}: field `{}`: cannot be written as {target}: {reason}", input.field_name(*field))
            }
        }
    }
}

/// Check a fio file name: one blank-free field that does not start a
/// comment (`#`), as the fio reader (ours and fio's) splits lines.
pub fn check_fio_file(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains(char::is_whitespace) || name.starts_with('#') {
        return Err(format!("`{name}`: expected a file name without blanks that does not start with `#`"));
    }
    Ok(())
}

/// Formats `trace convert` writes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetFormat {
    Fio,
    FioV2,
    Mqsim,
    Disksim,
    Msr,
    Spc,
}

impl std::str::FromStr for TargetFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "fio" | "fio-v3" => TargetFormat::Fio,
            "fio-v2" => TargetFormat::FioV2,
            "mqsim" => TargetFormat::Mqsim,
            "disksim" => TargetFormat::Disksim,
            "msr" => TargetFormat::Msr,
            "spc" | "umass" => TargetFormat::Spc,
            other => return Err(format!("cannot write `{other}` (fio, fio-v2, mqsim, disksim, msr, spc)")),
        })
    }
}

impl TargetFormat {
    pub fn name(self) -> &'static str {
        match self {
            TargetFormat::Fio => "fio",
            TargetFormat::FioV2 => "fio-v2",
            TargetFormat::Mqsim => "mqsim",
            TargetFormat::Disksim => "disksim",
            TargetFormat::Msr => "msr",
            TargetFormat::Spc => "spc",
        }
    }
    /// The reader format that reads this target back.
    pub fn reader(self) -> super::TraceFormat {
        use super::TraceFormat as F;
        match self {
            TargetFormat::Fio | TargetFormat::FioV2 => F::Fio,
            TargetFormat::Mqsim => F::Mqsim,
            TargetFormat::Disksim => F::Disksim,
            TargetFormat::Msr => F::Msr,
            TargetFormat::Spc => F::Spc,
        }
    }
}

/// What a conversion wrote and dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ConvertCounts {
    pub written: u64,
    pub dropped_flushes: u64,
    pub dropped_trims: u64,
    /// Requests widened to whole sectors by a sector-based target.
    pub widened_to_sectors: u64,
}

/// Writes requests in a target format.
pub struct TraceWriter<W: Write> {
    out: W,
    target: TargetFormat,
    fio: Option<fio_iolog::FioWriter>,
    counts: ConvertCounts,
}

/// Sector size of the sector-based targets.
const SECTOR: u64 = 512;

impl<W: Write> TraceWriter<W> {
    /// `fio_file`: the file name fio logs use for device 0.
    pub fn new(out: W, target: TargetFormat, fio_file: &str) -> Self {
        let fio = match target {
            TargetFormat::Fio => Some(fio_iolog::FioWriter::new(3, fio_file)),
            TargetFormat::FioV2 => Some(fio_iolog::FioWriter::new(2, fio_file)),
            _ => None,
        };
        TraceWriter { out, target, fio, counts: ConvertCounts::default() }
    }

    /// Why the target cannot represent `r` readably, if it cannot.
    fn unrepresentable(&self, r: &TraceRequest) -> Option<(RequestField, String)> {
        let data = matches!(r.op, HostOp::Read | HostOp::Write);
        match self.target {
            TargetFormat::Mqsim | TargetFormat::Disksim if data => {
                let widened = r.end_bytes().div_ceil(SECTOR).checked_mul(SECTOR);
                widened.is_none().then(|| {
                    (
                        RequestField::Size,
                        format!(
                            "the request ends at byte {}; widened to whole {SECTOR}-byte sectors it would end at 2^64, beyond any 64-bit byte address",
                            r.end_bytes()
                        ),
                    )
                })
            }
            TargetFormat::Fio | TargetFormat::FioV2 => {
                let fio = self.fio.as_ref().expect("fio targets have a writer");
                fio.too_many_files(r.device).then(|| {
                    (
                        RequestField::Device,
                        format!(
                            "device {} would be file number {}; an iolog names at most {} files",
                            r.device,
                            fio_iolog::MAX_FILES + 1,
                            fio_iolog::MAX_FILES
                        ),
                    )
                })
            }
            _ => None,
        }
    }

    pub fn write(&mut self, r: &TraceRequest) -> Result<(), ConvertError> {
        if let Some((field, reason)) = self.unrepresentable(r) {
            return Err(ConvertError::Unrepresentable { line: r.line, field, target: self.target.name(), reason });
        }
        let sector_based = matches!(self.target, TargetFormat::Mqsim | TargetFormat::Disksim | TargetFormat::Spc);
        let written = match self.target {
            TargetFormat::Fio | TargetFormat::FioV2 => {
                self.fio.as_mut().expect("fio targets have a writer").write(&mut self.out, r)?
            }
            TargetFormat::Mqsim => disksim::write(&mut self.out, r, true, SECTOR)?,
            TargetFormat::Disksim => disksim::write(&mut self.out, r, false, SECTOR)?,
            TargetFormat::Msr => msr::write(&mut self.out, r)?,
            TargetFormat::Spc => spc::write(&mut self.out, r, SECTOR)?,
        };
        if written {
            self.counts.written += 1;
            if sector_based && (r.offset_bytes % SECTOR != 0 || r.size_bytes % SECTOR != 0) {
                self.counts.widened_to_sectors += 1;
            }
        } else if r.op == HostOp::Flush {
            self.counts.dropped_flushes += 1;
        } else {
            self.counts.dropped_trims += 1;
        }
        Ok(())
    }

    /// Finish the file (fio: `close` lines) and return the writer.
    pub fn finish(mut self) -> io::Result<(W, ConvertCounts)> {
        if let Some(f) = self.fio.as_mut() {
            f.finish(&mut self.out)?;
        }
        self.out.flush()?;
        Ok((self.out, self.counts))
    }
}

/// A writer into `file` (the output's temporary file, or stdout for `-`),
/// compressed by a `.gz` / `.zst` suffix of `path`.
pub fn compressed_writer(file: Box<dyn Write>, path: &Path, stdout: bool) -> std::io::Result<Box<dyn Write>> {
    if stdout {
        return Ok(Box::new(std::io::BufWriter::new(file)));
    }
    let file = std::io::BufWriter::with_capacity(1 << 20, file);
    let name = path.to_string_lossy();
    Ok(if name.ends_with(".gz") {
        // flate2's encoder writes the gzip trailer when dropped.
        Box::new(flate2::write::GzEncoder::new(file, flate2::Compression::default()))
    } else if name.ends_with(".zst") {
        Box::new(zstd::stream::write::Encoder::new(file, 3)?.auto_finish())
    } else {
        Box::new(file)
    })
}
