//! `serve --timed`: replies held until the simulated drive would complete
//! them, paced against the real clock.
//!
//! **How a command is timed.** The checked drive ([`super::executor`])
//! answers a command at once, with the real bytes; beside it a
//! [`TimedDevice`] — the one `perf` drives (timing model, host interface,
//! write cache), built from the same preset, FTL and seed — is given the
//! same command as host requests, arriving at the real time the command
//! was read off its socket (nanoseconds since the server started, never
//! earlier than the previous arrival, as the device takes arrivals in
//! order). The device returns the simulated completion time; the reply
//! waits in a heap ordered by it and the drive thread sends it when the
//! real clock reaches it (the thread waits for new commands in between,
//! never sleeps holding one). So a client measures the simulated drive's
//! latency and, at its queue depth, its IOPS.
//!
//! **Two drives, one request stream.** The timed device keeps its own FTL
//! and flash state (payload identities, no bytes): data and checking come
//! from the checked drive, time from the timed one. With no write cache
//! both FTLs see the same requests; with one, the timed device's FTL sees
//! the cache's write-backs instead (the data is the same). The cost is a
//! second copy of the FTL and flash state (not of the bytes). Commands are
//! mapped to requests on whole sectors: a read or write of the sectors a
//! byte range touches (an unaligned write is timed as a write of those
//! sectors, without the reads that merge its partial sectors), a trim of
//! the whole sectors, `WRITE_ZEROES` as a write (or a trim of the whole
//! sectors where it may trim), `FUA` and `FLUSH` as a flush. Background
//! work in idle time (`perf --idle-gc`) is not run. Suspended reads
//! extended by a later request are held until the extended time if their
//! reply is still waiting.
//!
//! **When the host is slower.** If a command's simulated completion has
//! already passed on the real clock once both drives have executed it,
//! the reply goes at once and the command counts as late, with its lag
//! (real minus simulated completion): the report gives the share of late
//! replies and the mean and largest lag, so a run where the server could
//! not keep up says by how much. Late replies make the clients issue later
//! than a real drive would let them, so the latencies measured are then
//! the simulation's, but the client's IOPS are lower than the simulated
//! drive's.
//!
//! **Not reproducible.** Arrival times are real times, so a timed run's
//! latencies depend on the host and on the clients' scheduling; the
//! untimed server stays a function of the request sequence.

use super::connection::Reply;
use crate::config::Config;
use crate::host::nbd::transmission::Command;
use crate::report::latency::{LatencyRecorder, LatencyStats};
use crate::run::device::TimedDevice;
use crate::run::RunError;
use crate::timing::Breakdown;
use crate::workload::{HostOp, HostRequest};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

/// Sectors per timed host request (a longer command is split, as the
/// checked drive splits it).
const CHUNK_SECTORS: u32 = super::executor::CHUNK_SECTORS;

/// The flash time series interval the timed device keeps (serve reports no series).
const SERIES_INTERVAL_NS: u64 = 1_000_000_000;

/// Where the timed device starts when the checked drive came from a drive
/// file: the same flash, and the host's view of the disk.
pub struct TimingOrigin {
    pub nand: crate::nand::Nand,
    pub oracle: crate::oracle::Oracle,
    pub next_write_id: crate::nand::payload::WriteId,
}

/// A reply waiting for its simulated completion.
struct Held {
    to: Sender<Reply>,
    reply: Reply,
    op: HostOp,
    arrival_ns: u64,
    bytes: u64,
    breakdown: Breakdown,
}

/// The timing figures of a `serve --timed` run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TimedReport {
    /// Simulated latency per operation (µs; IOPS over the simulated time
    /// from the first arrival to the last completion).
    pub read: LatencyStats,
    pub write: LatencyStats,
    pub trim: LatencyStats,
    pub flush: LatencyStats,
    /// Simulated seconds from the first arrival to the last completion.
    pub simulated_seconds: f64,
    /// Replies timed.
    pub replies: u64,
    /// Replies sent after their simulated completion because the server
    /// had not finished the command by then (see the module docs).
    pub late_replies: u64,
    /// Mean lag of the late replies, µs.
    pub lag_mean_us: f64,
    /// Largest lag, µs.
    pub lag_max_us: f64,
    /// Commands the timed device failed on (answered at once, untimed).
    pub timing_errors: u64,
}

impl TimedReport {
    /// The summary's lines.
    pub fn summary(&self) -> String {
        let mut out = format!(
            "  timed      {} replies over {:.3} simulated s; {} late ({:.1}%), lag mean {:.1} us, max {:.1} us{}\n",
            self.replies,
            self.simulated_seconds,
            self.late_replies,
            if self.replies > 0 { 100.0 * self.late_replies as f64 / self.replies as f64 } else { 0.0 },
            self.lag_mean_us,
            self.lag_max_us,
            if self.timing_errors > 0 {
                format!("; {} untimed (timing error)", self.timing_errors)
            } else {
                String::new()
            }
        );
        for (name, s) in [("read", &self.read), ("write", &self.write), ("trim", &self.trim), ("flush", &self.flush)] {
            if s.count > 0 {
                out += &format!(
                    "  latency    {name:<5} {:>8} ops {:>9.0} IOPS  mean {:.1}  p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1} us\n",
                    s.count, s.iops, s.mean_us, s.p50_us, s.p99_us, s.p99_9_us, s.max_us
                );
            }
        }
        out
    }
}

/// The timed device and the replies it holds. See the module docs.
pub struct Pacer {
    device: TimedDevice,
    started: Instant,
    sector_bytes: u64,
    queues: u32,
    last_arrival_ns: u64,
    first_arrival_ns: Option<u64>,
    last_completion_ns: u64,
    seq: u64,
    due: BinaryHeap<Reverse<(u64, u64)>>,
    held: HashMap<u64, Held>,
    extended: HashMap<u64, u64>,
    extensions: Vec<(u64, u64)>,
    by_op: [LatencyRecorder; 4],
    replies: u64,
    late: u64,
    lag_sum_ns: u128,
    lag_max_ns: u64,
    timing_errors: u64,
}

impl Pacer {
    /// A timed device for `config` (which must have a timing model); real
    /// time starts at `started`.
    ///
    /// The timed device starts formatted, or with `origin` (`--drive`: the
    /// flash the checked drive was mounted from and the host's view of it)
    /// mounted by a fresh FTL of its own.
    pub fn new(config: &Config, seed: u64, started: Instant, origin: Option<TimingOrigin>) -> Result<Pacer, RunError> {
        if let Some(s) = config.timing.as_ref().and_then(|t| t.scheduler) {
            return Err(RunError::Input(format!(
                "[timing] scheduler = \"{}\": serve --timed times flash work with the reservation model only (the event core's schedulers are for perf); remove the key or set it to \"reservation\"",
                s.name()
            )));
        }
        let mut device = match origin {
            None => TimedDevice::new(config, seed, 1, 1, SERIES_INTERVAL_NS)?,
            Some(o) => TimedDevice::on_flash(config, seed, SERIES_INTERVAL_NS, o.nand, o.oracle, o.next_write_id)?,
        };
        device.set_time_origin(0);
        device.start_timing();
        let queues = device.queues();
        Ok(Pacer {
            device,
            started,
            sector_bytes: u64::from(config.geometry.sector_size_bytes()),
            queues,
            last_arrival_ns: 0,
            first_arrival_ns: None,
            last_completion_ns: 0,
            seq: 0,
            due: BinaryHeap::new(),
            held: HashMap::new(),
            extended: HashMap::new(),
            extensions: Vec::new(),
            by_op: Default::default(),
            replies: 0,
            late: 0,
            lag_sum_ns: 0,
            lag_max_ns: 0,
            timing_errors: 0,
        })
    }

    fn real_ns(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.started).as_nanos() as u64
    }

    /// Time `command` (read off connection `connection` at `arrived`) and
    /// hold `reply` until its simulated completion, or send it now if that
    /// has passed. A failure of the timed device is returned after the
    /// reply was sent at once.
    pub fn hold(
        &mut self,
        command: &Command,
        connection: u64,
        arrived: Instant,
        to: Sender<Reply>,
        reply: Reply,
    ) -> Result<(), RunError> {
        let arrival_ns = self.real_ns(arrived).max(self.last_arrival_ns);
        self.last_arrival_ns = arrival_ns;
        self.first_arrival_ns.get_or_insert(arrival_ns);
        let (op, requests) = requests(command, self.sector_bytes);
        let id = self.seq;
        self.seq += 1;
        let queue = (connection % u64::from(self.queues)) as u32;
        let mut completion_ns = arrival_ns;
        let mut breakdown = Breakdown::default();
        for req in &requests {
            match self.device.submit(req, queue, arrival_ns, id) {
                Ok(c) => {
                    let c = c.expect("the reservation model times at once (no event core in serve)");
                    if c.completion_ns >= completion_ns {
                        completion_ns = c.completion_ns;
                        breakdown = c.breakdown;
                    }
                }
                Err(e) => {
                    self.timing_errors += 1;
                    let _ = to.send(reply);
                    return Err(e);
                }
            }
        }
        self.device.take_extensions(&mut self.extensions);
        for (owner, end) in self.extensions.drain(..) {
            if owner == id {
                completion_ns = completion_ns.max(end);
            } else if self.held.contains_key(&owner) {
                let e = self.extended.entry(owner).or_insert(0);
                *e = (*e).max(end);
            }
        }
        let bytes = requests.iter().filter(|r| r.op != HostOp::Flush).map(|r| u64::from(r.sectors)).sum::<u64>()
            * self.sector_bytes;
        let held = Held { to, reply, op, arrival_ns, bytes, breakdown };
        let now_ns = self.real_ns(Instant::now());
        if completion_ns <= now_ns {
            let lag = now_ns - completion_ns;
            self.late += 1;
            self.lag_sum_ns += u128::from(lag);
            self.lag_max_ns = self.lag_max_ns.max(lag);
            self.send(held, completion_ns);
        } else {
            self.held.insert(id, held);
            self.due.push(Reverse((completion_ns, id)));
        }
        Ok(())
    }

    /// Send the replies whose simulated completion the real clock has
    /// reached; how long until the next one is due.
    pub fn release_due(&mut self) -> Option<Duration> {
        loop {
            let now_ns = self.real_ns(Instant::now());
            let &Reverse((at, id)) = self.due.peek()?;
            if at > now_ns {
                return Some(Duration::from_nanos(at - now_ns));
            }
            self.due.pop();
            if let Some(later) = self.extended.remove(&id) {
                if later > at {
                    self.due.push(Reverse((later, id)));
                    continue;
                }
            }
            if let Some(held) = self.held.remove(&id) {
                self.send(held, at);
            }
        }
    }

    fn send(&mut self, held: Held, completion_ns: u64) {
        self.replies += 1;
        self.last_completion_ns = self.last_completion_ns.max(completion_ns);
        let mut breakdown = held.breakdown;
        let latency = completion_ns - held.arrival_ns;
        if breakdown.total() < latency {
            breakdown.add(crate::timing::Component::DieWait, latency - breakdown.total());
        }
        self.by_op[held.op.index()].record(latency, held.bytes, &breakdown);
        // A client gone before its reply is no error of the drive's.
        let _ = held.to.send(held.reply);
    }

    /// Commands the timed device failed on so far.
    pub fn timing_errors(&self) -> u64 {
        self.timing_errors
    }

    /// Replies still held.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The figures so far.
    pub fn report(&self) -> TimedReport {
        let span = self.last_completion_ns.saturating_sub(self.first_arrival_ns.unwrap_or(0));
        let seconds = span as f64 / 1e9;
        let us = |ns: f64| ns / 1000.0;
        TimedReport {
            read: self.by_op[HostOp::Read.index()].stats(seconds),
            write: self.by_op[HostOp::Write.index()].stats(seconds),
            trim: self.by_op[HostOp::Trim.index()].stats(seconds),
            flush: self.by_op[HostOp::Flush.index()].stats(seconds),
            simulated_seconds: seconds,
            replies: self.replies,
            late_replies: self.late,
            lag_mean_us: if self.late > 0 { us(self.lag_sum_ns as f64 / self.late as f64) } else { 0.0 },
            lag_max_us: us(self.lag_max_ns as f64),
            timing_errors: self.timing_errors,
        }
    }
}

/// The operation a command's latency counts under, and the host requests
/// that time it (see the module docs).
pub fn requests(command: &Command, sector_bytes: u64) -> (HostOp, Vec<HostRequest>) {
    let mut out = Vec::new();
    let covering = |offset: u64, length: u64| (offset / sector_bytes, (offset + length).div_ceil(sector_bytes));
    let whole = |offset: u64, length: u64| (offset.div_ceil(sector_bytes), (offset + length) / sector_bytes);
    let mut add = |op: HostOp, (first, end): (u64, u64)| {
        let mut lba = first;
        while lba < end {
            let sectors = (end - lba).min(u64::from(CHUNK_SECTORS)) as u32;
            out.push(HostRequest { op, lba, sectors, arrival_ns: 0, job: 0 });
            lba += u64::from(sectors);
        }
    };
    let (op, fua) = match command {
        Command::Read { offset_bytes, length_bytes } => {
            add(HostOp::Read, covering(*offset_bytes, u64::from(*length_bytes)));
            (HostOp::Read, false)
        }
        Command::Write { offset_bytes, data, fua } => {
            add(HostOp::Write, covering(*offset_bytes, data.len() as u64));
            (HostOp::Write, *fua)
        }
        Command::Flush => (HostOp::Flush, true),
        Command::Trim { offset_bytes, length_bytes, fua } => {
            add(HostOp::Trim, whole(*offset_bytes, u64::from(*length_bytes)));
            (HostOp::Trim, *fua)
        }
        Command::WriteZeroes { offset_bytes, length_bytes, fua, may_trim } => {
            let (o, l) = (*offset_bytes, u64::from(*length_bytes));
            let (first, end) = whole(o, l);
            if *may_trim && first < end {
                add(HostOp::Write, covering(o, first * sector_bytes - o));
                add(HostOp::Trim, (first, end));
                add(HostOp::Write, covering(end * sector_bytes, o + l - end * sector_bytes));
            } else {
                add(HostOp::Write, covering(o, l));
            }
            (HostOp::Write, *fua)
        }
    };
    if fua {
        out.push(HostRequest { op: HostOp::Flush, lba: 0, sectors: 0, arrival_ns: 0, job: 0 });
    }
    (op, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    fn reply(cookie: u64) -> Reply {
        Reply { cookie, offset_bytes: 0, result: Ok(Default::default()), budget_bytes: 0 }
    }

    #[test]
    fn commands_become_requests_on_the_sectors_they_touch() {
        let (op, r) = requests(&Command::Read { offset_bytes: 100, length_bytes: 1000 }, 512);
        assert_eq!(op, HostOp::Read);
        assert_eq!((r.len(), r[0].lba, r[0].sectors), (1, 0, 3));
        let w = Command::Write { offset_bytes: 4096, data: vec![0; 8192], fua: true };
        let (_, r) = requests(&w, 512);
        assert_eq!(
            r.iter().map(|r| (r.op, r.lba, r.sectors)).collect::<Vec<_>>(),
            [(HostOp::Write, 8, 16), (HostOp::Flush, 0, 0)]
        );
        let z = Command::WriteZeroes { offset_bytes: 256, length_bytes: 2048, fua: false, may_trim: true };
        let (_, r) = requests(&z, 512);
        assert_eq!(
            r.iter().map(|r| (r.op, r.lba, r.sectors)).collect::<Vec<_>>(),
            [(HostOp::Write, 0, 1), (HostOp::Trim, 1, 3), (HostOp::Write, 4, 1)]
        );
        let (_, r) = requests(&Command::Trim { offset_bytes: 100, length_bytes: 500, fua: false }, 512);
        assert!(r.is_empty(), "no whole sector");
    }

    #[test]
    fn a_read_is_held_at_least_a_page_read_and_its_latency_is_recorded() {
        let config = Config::preset("tiny-timed").unwrap();
        let t_r = config.require_timing().unwrap().read_ns_by_level.iter().copied().min().unwrap();
        let started = Instant::now();
        let mut p = Pacer::new(&config, 1, started, None).unwrap();
        let (tx, rx) = channel();
        let write = Command::Write { offset_bytes: 0, data: vec![1; 4096], fua: false };
        p.hold(&write, 1, Instant::now(), tx.clone(), reply(1)).unwrap();
        while p.release_due().is_some() {
            std::thread::sleep(Duration::from_micros(100));
        }
        assert_eq!(rx.try_recv().unwrap().cookie, 1);
        let read = Command::Read { offset_bytes: 0, length_bytes: 4096 };
        let before = Instant::now();
        p.hold(&read, 1, before, tx, reply(2)).unwrap();
        while p.release_due().is_some() {
            std::thread::sleep(Duration::from_micros(100));
        }
        assert_eq!(rx.try_recv().unwrap().cookie, 2);
        let waited = before.elapsed();
        let r = p.report();
        // Sent no earlier than its simulated completion on the real clock
        // (late or not): a lower bound only, which cannot flake (0.999: the
        // histogram keeps 3 significant digits).
        assert!(waited.as_nanos() as f64 >= r.read.mean_us * 1000.0 * 0.999, "{waited:?} vs {} us", r.read.mean_us);
        assert_eq!((r.read.count, r.write.count, r.replies), (1, 1, 2));
        assert!(r.read.mean_us * 1000.0 >= t_r as f64, "read {} us, tR {t_r} ns", r.read.mean_us);
        assert!(r.late_replies <= 2);
        assert_eq!(p.held(), 0);
    }
}
