//! Writing a workload as a trace for VST's `vst-jasmine` (Liu, Chang,
//! Hung, ICCAD 2017), so VST can replay exactly the requests a nandlab run
//! issued (`nandlab bench stress --vst`).
//!
//! What VST's trace loader accepts (its `load_trace` reads each line with
//! C `fscanf` and the conversions `%s %d %d %d %d`):
//!
//! - one request per line, five blank-separated fields: a time token
//!   (read as a string and ignored; at most 63 characters), a device
//!   number (ignored), the start LBA in 512-byte sectors, the number of
//!   sectors, and the direction: `0` for a write, anything else a read;
//! - the three numbers are read as C `int`s, so the LBA and the count must
//!   be below 2^31; a field that does not parse does not stop the loader
//!   (it re-reads the same text and keeps the previous line's values), so
//!   a file must never contain one;
//! - no flush and no trim; at most 168,638,965 lines are loaded.
//!
//! The writer therefore emits `0 0 LBA SECTORS 0|1` (time 0, device 0,
//! `1` for a read), refuses what VST cannot read as written (a flush or a
//! trim, an LBA or count of 2^31 or more, a zero-length request, more lines
//! than VST loads) rather than changing the workload, and counts what it
//! wrote. The same text reads back with nandlab's `disksim` reader (flags
//! bit 0 set = read), which the tests use to check the round trip.

use crate::workload::{HostOp, HostRequest};
use std::io::{self, Write};
use thiserror::Error;

/// The most lines VST's loader reads (`MAX_SIZE_TRACE` in its `vst.c`).
pub const MAX_LINES: u64 = 168_638_965;

/// The largest LBA or sector count VST reads back (a C `int`).
const MAX_FIELD: u64 = i32::MAX as u64;

/// Why a request cannot be given to VST.
#[derive(Debug, Error)]
pub enum VstTraceError {
    #[error("{0}")]
    Io(#[from] io::Error),
    /// Request number `request` (0-based) is not something VST's trace can say.
    #[error("request {request}: {reason}")]
    Unrepresentable { request: u64, reason: String },
}

/// What a [`VstTraceWriter`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VstTraceCounts {
    pub reads: u64,
    pub writes: u64,
    pub read_sectors: u64,
    pub write_sectors: u64,
}

impl VstTraceCounts {
    /// Lines written.
    pub fn requests(&self) -> u64 {
        self.reads + self.writes
    }
}

/// Writes host requests as VST trace lines.
pub struct VstTraceWriter<W: Write> {
    out: W,
    counts: VstTraceCounts,
}

impl<W: Write> VstTraceWriter<W> {
    pub fn new(out: W) -> Self {
        VstTraceWriter { out, counts: VstTraceCounts::default() }
    }

    /// Write `r` (a request of 512-byte sectors) as one line.
    pub fn write(&mut self, r: &HostRequest) -> Result<(), VstTraceError> {
        let request = self.counts.requests();
        let refuse = |reason: String| Err(VstTraceError::Unrepresentable { request, reason });
        let read = match r.op {
            HostOp::Read => true,
            HostOp::Write => false,
            HostOp::Flush | HostOp::Trim => {
                return refuse(format!("a {}: VST's traces have only reads and writes", r.op.name()))
            }
        };
        if r.sectors == 0 {
            return refuse("a zero-length request: VST would count it as neither read nor written data".into());
        }
        if r.lba > MAX_FIELD || u64::from(r.sectors) > MAX_FIELD {
            return refuse(format!(
                "LBA {} and {} sectors: VST reads both as C ints (at most {MAX_FIELD})",
                r.lba, r.sectors
            ));
        }
        if request >= MAX_LINES {
            return refuse(format!("VST loads at most {MAX_LINES} trace lines"));
        }
        writeln!(self.out, "0 0 {} {} {}", r.lba, r.sectors, u8::from(read))?;
        if read {
            self.counts.reads += 1;
            self.counts.read_sectors += u64::from(r.sectors);
        } else {
            self.counts.writes += 1;
            self.counts.write_sectors += u64::from(r.sectors);
        }
        Ok(())
    }

    /// Flush and return the writer and what was written.
    pub fn finish(mut self) -> io::Result<(W, VstTraceCounts)> {
        self.out.flush()?;
        Ok((self.out, self.counts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::trace::{ReaderOptions, TraceFormat, TraceReader};

    fn req(op: HostOp, lba: u64, sectors: u32) -> HostRequest {
        HostRequest { op, lba, sectors, arrival_ns: 0, job: 0 }
    }

    #[test]
    fn requests_are_written_as_vst_reads_them_and_read_back_as_disksim() {
        let reqs =
            [req(HostOp::Write, 0, 16), req(HostOp::Read, 124_822_444, 16), req(HostOp::Write, (1 << 31) - 129, 128)];
        let mut w = VstTraceWriter::new(Vec::new());
        for r in &reqs {
            w.write(r).unwrap();
        }
        let (text, counts) = w.finish().unwrap();
        assert_eq!(String::from_utf8(text.clone()).unwrap(), "0 0 0 16 0\n0 0 124822444 16 1\n0 0 2147483519 128 0\n");
        assert_eq!(counts, VstTraceCounts { reads: 1, writes: 2, read_sectors: 16, write_sectors: 144 });
        let mut back = TraceReader::from_bytes("t", text, &ReaderOptions::for_format(TraceFormat::Disksim)).unwrap();
        for r in &reqs {
            let t = back.next_request().unwrap().expect("one line per request");
            assert_eq!((t.op, t.offset_bytes, t.size_bytes), (r.op, r.lba * 512, u64::from(r.sectors) * 512));
        }
        assert!(back.next_request().unwrap().is_none());
    }

    #[test]
    fn flushes_trims_empty_requests_and_lbas_past_a_c_int_are_refused() {
        for (r, why) in [
            (req(HostOp::Flush, 0, 0), "flush"),
            (req(HostOp::Trim, 8, 8), "trim"),
            (req(HostOp::Write, 8, 0), "zero-length"),
            (req(HostOp::Read, 1 << 31, 8), "C ints"),
        ] {
            let mut w = VstTraceWriter::new(Vec::new());
            let e = w.write(&r).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
            assert!(w.finish().unwrap().0.is_empty(), "nothing is written for {r:?}");
        }
    }
}
