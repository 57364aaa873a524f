//! `perf --trace-out`: the timed run as a timeline that Perfetto
//! (<https://ui.perfetto.dev>) and `chrome://tracing` open.
//!
//! # Format
//!
//! The JSON object form of the Chrome *Trace Event Format* (Google, "Trace
//! Event Format", the document linked from the Catapult project:
//! <https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU>):
//! `{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}`.
//! Timestamps (`ts`) and durations (`dur`) are microseconds, as the format
//! requires, written with fractions so that nanoseconds survive; time 0 is
//! the run's first arrival (the origin of perf's simulated time).
//!
//! - One process (`pid` 1, "nandlab device") with one thread per track,
//!   named by `"M"` metadata events (`process_name`, `thread_name`,
//!   `thread_sort_index`): every channel, then every die, then every plane.
//! - One `"X"` complete event per flash operation on its **die** track (the
//!   cell phase: tR, tPROG, tR + tPROG of a copyback, tBERS) and on each of
//!   its **plane** tracks (a multi-plane operation on all the planes it
//!   occupies), named by the operation (`read`, `read_oob`, `read_meta`,
//!   `program`, `program_meta`, `copyback`, `erase`); `cat` and
//!   `args.cause` give the cause (host, gc, wear_leveling, metadata),
//!   `args` the page (or block, for an erase) address, the planes and the
//!   host request the FTL was serving, if any. Each channel use (command
//!   cycles, data-in, data-out) is an `"X"` named `transfer` on the
//!   **channel** track, `args.op` saying for which operation.
//! - Host requests are async slices (`"b"`/`"e"` with an `id`, the request
//!   number) from arrival to completion, `cat` the operation type (read,
//!   write, trim, flush).
//! - `"C"` counters: `queue_depth` (requests in flight, at each arrival and
//!   completion) and `free_blocks` (the FTL's free blocks at the end of each
//!   time-series interval, when the FTL reports them).
//!
//! - GC runs are async slices named `gc run` (`cat` `gc`, `id` the run's
//!   number from 0), from the first phase of the run's first operation to
//!   the end of its last, `args` counting its operations, page programs
//!   (with copybacks) and erases. A run is a maximal sequence of
//!   consecutive operations with cause `gc` in the order the FTL issued
//!   them: the timing model sees operations with their cause, not the
//!   FTL's own notion of a collection, so a collection interrupted by a
//!   host operation shows as two runs and two collections issued back to
//!   back as one. Async slices, not complete events on one track, because
//!   runs may overlap in time (their operations go to different dies).
//!
//! A program or erase that a read suspended is drawn with
//! the cell phase it was booked with; the resumed remainder is not drawn.
//! Flash work may end after the last completion (the end of perf's
//! simulated time): with a write-back cache, evictions a request started
//! run on past it.
//!
//! # Bounds
//!
//! Events are kept in memory until the run ends (ops are much smaller than
//! the JSON they become), at most `max_events` of them: an operation or a
//! request is kept whole or not at all, so counts stay exact for what is
//! drawn and every begin has its end. With a window, only what overlaps
//! `[start, end)` of simulated time is kept, whole (not clipped): an
//! operation whose cell phase overlaps it (with its transfers, which may
//! lie outside), a request from arrival to completion, a counter sample
//! inside it. When the cap cuts the trace, `otherData.truncated` is
//! true and `otherData.dropped_events` counts what was left out.
//!
//! The recorder is an `Option` in [`super::FlashTiming`]: the model hands
//! it each phase as it books it (the cell phase, at most two channel uses)
//! and then the operation; without `--trace-out` each of those is a test
//! of the `Option` and nothing else runs (the phases live in the recorder,
//! not in the model, which is as large as before the timeline existed).

use crate::flash::{Cause, OpKind};
use crate::util::duration::parse_duration_ns;
use crate::workload::HostOp;
use serde::Serialize;
use std::io::Write;

/// The default `--trace-out-max-events`.
pub const DEFAULT_MAX_EVENTS: u64 = 1_000_000;

/// A span of simulated time, ns since the first arrival: `[start, end)`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TraceWindow {
    pub start_ns: u64,
    pub end_ns: Option<u64>,
}

impl TraceWindow {
    pub const ALL: TraceWindow = TraceWindow { start_ns: 0, end_ns: None };

    /// Whether `[a, b]` overlaps the window.
    pub fn overlaps(&self, a: u64, b: u64) -> bool {
        b >= self.start_ns && self.end_ns.is_none_or(|e| a < e)
    }
}

/// Parse `START..END` with units (`0.5s..2s`, `100ms..`, `..1s`); an empty
/// or `0` start is the first arrival, an empty end the end of the run.
pub fn parse_window(text: &str) -> Result<TraceWindow, String> {
    let Some((a, b)) = text.split_once("..") else {
        return Err(format!("`{text}`: expected START..END of simulated time, such as 0.5s..2s or 100ms.."));
    };
    let bound = |s: &str| -> Result<Option<u64>, String> {
        let s = s.trim();
        if s.is_empty() {
            Ok(None)
        } else if s.trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == 'µ').trim().parse::<f64>() == Ok(0.0) {
            Ok(Some(0))
        } else {
            parse_duration_ns(s).map(Some)
        }
    };
    let start_ns = bound(a)?.unwrap_or(0);
    let end_ns = bound(b)?;
    if end_ns.is_some_and(|e| e <= start_ns) {
        return Err(format!("`{text}`: the end must be after the start"));
    }
    Ok(TraceWindow { start_ns, end_ns })
}

/// What to record and how much.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TraceOptions {
    pub window: TraceWindow,
    pub max_events: u64,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions { window: TraceWindow::ALL, max_events: DEFAULT_MAX_EVENTS }
    }
}

/// One flash operation as the timing model placed it (absolute ns).
#[derive(Copy, Clone, Debug)]
pub struct OpRecord {
    pub kind: OpKind,
    pub cause: Cause,
    pub die: u32,
    pub channel: u32,
    /// The plane tracks it occupies: `first_plane..first_plane + plane_span`.
    pub first_plane: u32,
    pub plane_span: u32,
    /// Planes operated on (what the flash counters count).
    pub planes: u32,
    pub address: u64,
    pub request: Option<u64>,
    /// The cell phase: start, length.
    pub cell: (u64, u64),
    /// Channel uses: start, length (`chan_n` of them).
    pub chan: [(u64, u64); 2],
    pub chan_n: u8,
}

#[derive(Copy, Clone, Debug)]
enum Rec {
    Op(OpRecord),
    Request { id: u64, op: HostOp, arrival: u64, completion: u64, bytes: u64 },
    QueueDepth { t: u64, depth: u32 },
    GcRun { id: u64, run: GcRun },
}

/// The device's tracks.
#[derive(Copy, Clone, Debug)]
pub struct Tracks {
    pub channels: u32,
    pub dies: u32,
    pub planes: u32,
}

/// Records a run's events (see the module docs).
#[derive(Debug)]
pub struct TraceRecorder {
    opts: TraceOptions,
    origin: u64,
    recs: Vec<Rec>,
    events: u64,
    dropped: u64,
    /// The phases of the operation being timed, noted by the model as it
    /// books them: cell (start, ns), channel uses (start, ns) and how many.
    cell: (u64, u64),
    chan: [(u64, u64); 2],
    chan_n: u8,
    /// The GC run being recorded (its operations so far), and runs seen.
    gc_run: Option<GcRun>,
    gc_runs: u64,
}

/// A run of consecutive GC operations (see the module docs).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct GcRun {
    start: u64,
    end: u64,
    ops: u64,
    programs: u64,
    erases: u64,
}

impl TraceRecorder {
    pub fn new(opts: TraceOptions) -> TraceRecorder {
        TraceRecorder {
            opts,
            origin: 0,
            recs: Vec::new(),
            events: 0,
            dropped: 0,
            cell: (0, 0),
            chan: [(0, 0); 2],
            chan_n: 0,
            gc_run: None,
            gc_runs: 0,
        }
    }

    /// The operation being timed uses a channel from `start` for `ns`.
    pub fn note_chan(&mut self, start: u64, ns: u64) {
        let n = usize::from(self.chan_n & 1);
        self.chan[n] = (start, ns);
        self.chan_n = (self.chan_n + 1).min(2);
    }

    /// The operation being timed has its cell phase from `start` for `ns`.
    pub fn note_cell(&mut self, start: u64, ns: u64) {
        self.cell = (start, ns);
    }

    /// Simulated time 0 (the first arrival), absolute ns.
    pub fn set_origin(&mut self, origin_ns: u64) {
        self.origin = origin_ns;
    }

    /// Events kept, and events left out by the cap (the `free_blocks`
    /// counters, one per time-series interval, come on top).
    pub fn counts(&self) -> (u64, u64) {
        (self.events, self.dropped)
    }

    pub fn truncated(&self) -> bool {
        self.dropped > 0
    }

    fn keep(&mut self, a: u64, b: u64, events: u64, rec: Rec) {
        let (a, b) = (a.saturating_sub(self.origin), b.saturating_sub(self.origin));
        if !self.opts.window.overlaps(a, b) {
            return;
        }
        if self.events + events > self.opts.max_events {
            self.dropped += events;
            return;
        }
        self.events += events;
        self.recs.push(rec);
    }

    /// The phases noted for the operation just timed (cell, channel uses
    /// and how many); the next operation starts with none.
    pub fn take_phases(&mut self) -> ((u64, u64), [(u64, u64); 2], u8) {
        let phases = (self.cell, self.chan, self.chan_n);
        self.chan_n = 0;
        phases
    }

    pub fn op(&mut self, r: OpRecord) {
        if r.cause == Cause::Gc {
            self.gc_op(&r);
        } else {
            self.end_gc_run();
        }
        let events = 1 + u64::from(r.plane_span) + u64::from(r.chan_n);
        self.keep(r.cell.0, r.cell.0 + r.cell.1, events, Rec::Op(r));
    }

    /// A host request, once its completion is final.
    pub fn request(&mut self, id: u64, op: HostOp, arrival: u64, completion: u64, bytes: u64) {
        self.keep(arrival, completion, 2, Rec::Request { id, op, arrival, completion, bytes });
    }

    /// Add a GC operation to the run being recorded (opening one).
    fn gc_op(&mut self, r: &OpRecord) {
        let phases = std::iter::once(r.cell).chain(r.chan[..usize::from(r.chan_n)].iter().copied());
        let (start, end) = phases.fold((u64::MAX, 0), |(a, b), (t, ns)| (a.min(t), b.max(t + ns)));
        let run = self.gc_run.get_or_insert(GcRun { start, end, ops: 0, programs: 0, erases: 0 });
        run.start = run.start.min(start);
        run.end = run.end.max(end);
        run.ops += 1;
        match r.kind {
            OpKind::Program | OpKind::ProgramMeta | OpKind::Copyback => run.programs += u64::from(r.planes),
            OpKind::Erase => run.erases += u64::from(r.planes),
            _ => {}
        }
    }

    /// Close the GC run being recorded, if any (a non-GC operation came,
    /// or the run ended: call it before [`TraceRecorder::write`]).
    pub fn end_gc_run(&mut self) {
        if let Some(run) = self.gc_run.take() {
            let id = self.gc_runs;
            self.gc_runs += 1;
            self.keep(run.start, run.end, 2, Rec::GcRun { id, run });
        }
    }

    pub fn queue_depth(&mut self, t: u64, depth: u32) {
        self.keep(t, t, 1, Rec::QueueDepth { t, depth });
    }

    /// Write the trace: `tracks` name the threads, `free_blocks` are
    /// (seconds since the first arrival, free blocks) samples, `other` goes
    /// into `otherData` beside the recorder's own fields.
    pub fn write(
        &self,
        out: &mut dyn Write,
        tracks: Tracks,
        free_blocks: &[(f64, u64)],
        other: &[(&str, serde_json::Value)],
    ) -> std::io::Result<()> {
        let mut w = Stream { out, first: true, written: 0 };
        w.out.write_all(b"{\"traceEvents\":[\n")?;
        let meta = |name: &str, tid: u32, args: serde_json::Value| serde_json::json!({"name": name, "ph": "M", "ts": 0, "pid": 1, "tid": tid, "args": args});
        w.event(&meta("process_name", 0, serde_json::json!({"name": "nandlab device"})))?;
        let mut tid = 1;
        for (n, what) in [(tracks.channels, "channel"), (tracks.dies, "die"), (tracks.planes, "plane")] {
            for i in 0..n {
                w.event(&meta("thread_name", tid, serde_json::json!({"name": format!("{what} {i}")})))?;
                w.event(&meta("thread_sort_index", tid, serde_json::json!({"sort_index": tid})))?;
                tid += 1;
            }
        }
        w.written = 0;
        let die_tid = |d: u32| 1 + tracks.channels + d;
        let plane_tid = |p: u32| 1 + tracks.channels + tracks.dies + p;
        let us = |t: u64| t.saturating_sub(self.origin) as f64 / 1000.0;
        let len = |ns: u64| ns as f64 / 1000.0;
        for rec in &self.recs {
            match *rec {
                Rec::Op(r) => {
                    let name = op_name(r.kind);
                    let args = Args {
                        cause: Some(r.cause.name()),
                        address: Some(r.address),
                        planes: Some(r.planes),
                        request: r.request,
                        ..Args::default()
                    };
                    let x = |tid: u32, name: &'static str, (t, ns): (u64, u64), args: Args| Ev {
                        name,
                        cat: r.cause.name(),
                        ph: "X",
                        ts: us(t),
                        dur: Some(len(ns)),
                        pid: 1,
                        tid,
                        id: None,
                        args,
                    };
                    w.event(&x(die_tid(r.die), name, r.cell, args))?;
                    for p in r.first_plane..r.first_plane + r.plane_span {
                        w.event(&x(plane_tid(p), name, r.cell, args))?;
                    }
                    for &c in &r.chan[..r.chan_n as usize] {
                        w.event(&x(1 + r.channel, "transfer", c, Args { op: Some(name), ..args }))?;
                    }
                }
                Rec::Request { id, op, arrival, completion, bytes } => {
                    let args = Args { bytes: Some(bytes), ..Args::default() };
                    w.event(&Ev::async_slice("request", op.name(), "b", us(arrival), id, args))?;
                    w.event(&Ev::async_slice("request", op.name(), "e", us(completion), id, args))?;
                }
                Rec::GcRun { id, run } => {
                    let counts = Args {
                        ops: Some(run.ops),
                        programs: Some(run.programs),
                        erases: Some(run.erases),
                        ..Args::default()
                    };
                    w.event(&Ev::async_slice("gc run", "gc", "b", us(run.start), id, counts))?;
                    w.event(&Ev::async_slice("gc run", "gc", "e", us(run.end), id, Args::default()))?;
                }
                Rec::QueueDepth { t, depth } => {
                    w.event(&Ev::counter(
                        "queue_depth",
                        us(t),
                        Args { requests: Some(u64::from(depth)), ..Args::default() },
                    ))?;
                }
            }
        }
        for &(s, free) in free_blocks {
            let t = (s * 1e9).round() as u64;
            if self.opts.window.overlaps(t, t) {
                w.event(&Ev::counter("free_blocks", s * 1e6, Args { blocks: Some(free), ..Args::default() }))?;
            }
        }
        w.out.write_all(b"\n],\"displayTimeUnit\":\"ns\",\"otherData\":{")?;
        let o = self.opts;
        use serde_json::json;
        let mut fields: Vec<(&str, serde_json::Value)> = vec![
            ("time_origin", json!("the first arrival (perf's simulated time 0)")),
            ("window_start_us", json!(len(o.window.start_ns))),
            ("window_end_us", o.window.end_ns.map_or(json!(null), |e| json!(len(e)))),
            ("max_events", json!(o.max_events)),
            ("events", json!(w.written)),
            ("truncated", json!(self.truncated())),
            ("dropped_events", json!(self.dropped)),
        ];
        fields.extend(other.iter().cloned());
        for (i, (k, v)) in fields.iter().enumerate() {
            if i > 0 {
                w.out.write_all(b",")?;
            }
            serde_json::to_writer(&mut *w.out, k)?;
            w.out.write_all(b":")?;
            serde_json::to_writer(&mut *w.out, v)?;
        }
        w.out.write_all(b"}}\n")?;
        w.out.flush()
    }
}

fn op_name(k: OpKind) -> &'static str {
    match k {
        OpKind::Read => "read",
        OpKind::ReadOob => "read_oob",
        OpKind::ReadMeta => "read_meta",
        OpKind::Program => "program",
        OpKind::ProgramMeta => "program_meta",
        OpKind::Copyback => "copyback",
        OpKind::Erase => "erase",
    }
}

struct Stream<'a> {
    out: &'a mut dyn Write,
    first: bool,
    /// Events written (metadata events not counted).
    written: u64,
}

impl Stream<'_> {
    fn event(&mut self, e: &impl Serialize) -> std::io::Result<()> {
        if !self.first {
            self.out.write_all(b",\n")?;
        }
        self.first = false;
        self.written += 1;
        serde_json::to_writer(&mut *self.out, e).map_err(std::io::Error::from)
    }
}

#[derive(Serialize, Copy, Clone, Default)]
struct Args {
    #[serde(skip_serializing_if = "Option::is_none")]
    cause: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    op: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    address: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    planes: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    requests: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    blocks: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ops: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    programs: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    erases: Option<u64>,
}

#[derive(Serialize)]
struct Ev<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    cat: &'a str,
    ph: &'static str,
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    pid: u32,
    tid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    args: Args,
}

impl<'a> Ev<'a> {
    fn counter(name: &'a str, ts: f64, args: Args) -> Ev<'a> {
        Ev { name, cat: "", ph: "C", ts, dur: None, pid: 1, tid: 0, id: None, args }
    }

    /// The begin (`ph` `b`) or end (`e`) of async slice `id`.
    fn async_slice(name: &'a str, cat: &'a str, ph: &'static str, ts: f64, id: u64, args: Args) -> Ev<'a> {
        Ev { name, cat, ph, ts, dur: None, pid: 1, tid: 0, id: Some(id), args }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_take_units_and_open_ends_and_reject_nonsense() {
        let w = |s| parse_window(s).unwrap();
        assert_eq!(w("0.5s..2s"), TraceWindow { start_ns: 500_000_000, end_ns: Some(2_000_000_000) });
        assert_eq!(w("100ms.."), TraceWindow { start_ns: 100_000_000, end_ns: None });
        assert_eq!(w("..1s"), TraceWindow { start_ns: 0, end_ns: Some(1_000_000_000) });
        assert_eq!(w("0..250us"), TraceWindow { start_ns: 0, end_ns: Some(250_000) });
        assert_eq!(w("0s.."), TraceWindow::ALL);
        for bad in ["", "1s", "2s..1s", "1s..1s", "soon..", "..-1s", "1s..2s..3s", "NaN..", "inf.."] {
            assert!(parse_window(bad).is_err(), "{bad} accepted");
        }
    }

    fn op(cell_start: u64, planes: u32) -> OpRecord {
        OpRecord {
            kind: OpKind::Program,
            cause: Cause::Host,
            die: 0,
            channel: 0,
            first_plane: 0,
            plane_span: planes,
            planes,
            address: 7,
            request: Some(1),
            cell: (cell_start, 100),
            chan: [(cell_start.saturating_sub(50), 50), (0, 0)],
            chan_n: 1,
        }
    }

    #[test]
    fn the_cap_keeps_whole_operations_and_counts_what_it_drops() {
        let mut r = TraceRecorder::new(TraceOptions { window: TraceWindow::ALL, max_events: 7 });
        r.op(op(100, 2)); // 4 events: die, 2 planes, 1 transfer
        r.op(op(300, 2)); // 4 more would pass 7
        r.queue_depth(400, 1); // 1: fits
        r.request(1, HostOp::Write, 0, 500, 4096); // 2: fits (7)
        r.queue_depth(500, 0); // dropped
        assert_eq!(r.counts(), (7, 5));
        let mut out = Vec::new();
        r.write(&mut out, Tracks { channels: 1, dies: 1, planes: 2 }, &[], &[]).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["otherData"]["truncated"], true);
        assert_eq!(v["otherData"]["events"], 7);
        let x: Vec<_> = v["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(x.len(), 4);
        assert_eq!(x[0]["ts"], 0.1);
        assert_eq!(x[0]["dur"], 0.1);
    }

    #[test]
    fn a_window_keeps_operations_whose_cell_phase_overlaps_it() {
        let window = TraceWindow { start_ns: 1_000, end_ns: Some(2_000) };
        let mut r = TraceRecorder::new(TraceOptions { window, max_events: 100 });
        r.set_origin(10_000);
        r.op(op(10_000 + 850, 1)); // cell 850..950: before
        r.op(op(10_000 + 950, 1)); // cell 950..1050: overlaps
        r.op(op(10_000 + 2_000, 1)); // starts at the end: after
        r.queue_depth(10_000 + 1_500, 3);
        r.queue_depth(10_000 + 2_500, 3);
        assert_eq!(r.counts(), (3 + 1, 0));
    }

    #[test]
    fn consecutive_gc_operations_are_one_run_spanning_their_phases() {
        let mut r = TraceRecorder::new(TraceOptions::default());
        let gc = |start, kind| OpRecord { kind, cause: Cause::Gc, request: None, ..op(start, 1) };
        r.op(op(0, 1));
        r.op(gc(1_000, OpKind::Read)); // transfer from 950
        r.op(gc(500, OpKind::Program)); // another die, earlier: transfer from 450
        r.op(gc(3_000, OpKind::Erase)); // cell to 3100
        r.op(op(4_000, 1)); // host: the run ends
        r.op(gc(5_000, OpKind::Copyback)); // a second run, ended by the end of the recording
        r.end_gc_run();
        r.end_gc_run(); // nothing open: nothing added
        let mut out = Vec::new();
        r.write(&mut out, Tracks { channels: 1, dies: 1, planes: 1 }, &[], &[]).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let runs: Vec<_> = v["traceEvents"].as_array().unwrap().iter().filter(|e| e["name"] == "gc run").collect();
        assert_eq!(runs.len(), 4, "{runs:?}");
        assert_eq!(
            (runs[0]["ph"].as_str(), runs[0]["ts"].as_f64(), runs[0]["id"].as_u64()),
            (Some("b"), Some(0.45), Some(0))
        );
        assert_eq!((runs[0]["args"]["ops"].as_u64(), runs[0]["args"]["programs"].as_u64()), (Some(3), Some(1)));
        assert_eq!(runs[0]["args"]["erases"], 1);
        assert_eq!(
            (runs[1]["ph"].as_str(), runs[1]["ts"].as_f64(), runs[1]["id"].as_u64()),
            (Some("e"), Some(3.1), Some(0))
        );
        assert_eq!((runs[2]["id"].as_u64(), runs[2]["args"]["ops"].as_u64()), (Some(1), Some(1)));
        assert_eq!(runs[3]["ts"], 5.1);
    }
}
