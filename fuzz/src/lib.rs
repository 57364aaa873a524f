//! The harness the trace targets share: read `data` as a trace of `format` to the end, with
//! reader options drawn from its first byte, and check what every reader
//! promises: no panic, line numbers that exist, flushes without a length,
//! and errors that name the file.

use nandlab::workload::trace::{
    AsciiRw, BlkparseEvents, ReaderOptions, TimeUnit, TraceError, TraceFormat, TraceReader,
};
use nandlab::workload::HostOp;

pub fn read_all(format: Option<TraceFormat>, data: &[u8]) {
    let Some((&bits, text)) = data.split_first() else {
        return;
    };
    let adjustable = format.is_some_and(|f| f.time_unit_adjustable());
    let options = ReaderOptions {
        format,
        skip_bad_lines: bits & 1 != 0,
        time_unit: match (bits >> 1) & 3 {
            1 if adjustable => Some(TimeUnit::Ns),
            2 if adjustable => Some(TimeUnit::Ms),
            3 if adjustable => Some(TimeUnit::S),
            _ => None,
        },
        ascii_rw: match (format, bits & 8 != 0) {
            (Some(TraceFormat::Mqsim | TraceFormat::Disksim), true) => Some(AsciiRw::Disksim),
            _ => None,
        },
        blkparse_events: match (format, (bits >> 4) & 3) {
            (Some(TraceFormat::Blkparse), 1) => Some(BlkparseEvents::Queued),
            (Some(TraceFormat::Blkparse), 2) => Some(BlkparseEvents::Issued),
            _ => None,
        },
        // Only where it applies: msr and fio refuse a sector size.
        sector_bytes: (bits & 64 != 0 && format.is_some_and(TraceFormat::sector_based)).then_some(4096),
        csv: Default::default(),
    };
    read_with(&options, text);
}

/// Read `text` to the end with `options` and check the promises above.
pub fn read_with(options: &ReaderOptions, text: &[u8]) {
    let mut reader = match TraceReader::from_bytes("fuzz.trace", text.to_vec(), options) {
        Ok(r) => r,
        Err(e) => {
            assert!(e.to_string().starts_with("fuzz.trace"));
            return;
        }
    };
    loop {
        match reader.next_request() {
            Ok(Some(r)) => {
                assert!(r.line >= 1 && r.line <= reader.counts().lines);
                if r.op == HostOp::Flush {
                    assert_eq!((r.offset_bytes, r.size_bytes), (0, 0));
                }
            }
            Ok(None) => break,
            Err(e) => {
                let text = e.to_string();
                assert!(text.starts_with("fuzz.trace"), "{text}");
                if let TraceError::BadLine { line, .. } = e {
                    assert!(!options.skip_bad_lines);
                    assert!(line >= 1);
                }
                break;
            }
        }
    }
    let c = reader.counts();
    assert!(c.ignored_lines + c.skipped_bad_lines <= c.lines);
}
