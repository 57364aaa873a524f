//! `perf`: the same FTL as `stress`, timed — how fast is it on this
//! hardware, and where is the bottleneck?
//!
//! A run is a discrete-event simulation over two kinds of events, processed
//! in simulated-time order: a flow's request *arrives*, and a request
//! *completes*. At its arrival a request is simulated whole by the
//! [`TimedDevice`]: the FTL serves it at once (as in `stress`, with
//! the oracle checking every read), the timing model places its flash
//! operations on the channel, die and plane timelines, and its completion
//! time is known; the completion event records its latency. In a closed
//! loop that completion is also when the flow's next request arrives.
//!
//! Before the timed phase the drive can be preconditioned untimed
//! ([`precondition`]). Background garbage collection runs in idle time:
//! when a request arrives to an idle device (nothing outstanding), the
//! FTL's idle steps run from the last completion on, each only if it surely
//! ends before the arrival ([`TimedDevice::idle`] says how).
//!
//! Simulated time is measured from the first arrival (a trace may start
//! late) to the last completion: `simulated_seconds`, IOPS, utilisation and
//! the time series all count from there.
//!
//! # Bounds
//!
//! A run ends at [`TIME_LIMIT_NS`] of simulated time (about 146 years; see
//! [`crate::timing`]): a request that would arrive or complete later (a
//! trace time near 2^64 ns, a very slow rate, a very slow drive) stops the
//! run with an input error naming the flow, never a wrapped time. The
//! closed-loop flows keep at most [`MAX_OUTSTANDING`] requests outstanding
//! in all (`numjobs` x `iodepth` over every flow), checked before anything
//! runs: each outstanding request holds an event and a record (a few
//! hundred bytes with its flow's share), and 2^20 is past what hosts keep
//! in flight (Linux gives a device at most a few thousand tags per
//! hardware queue) while staying in a few hundred MiB. Open-loop flows
//! whose arrivals outpace the device would pile up requests without end:
//! the run stops issuing when that many are outstanding, and says so
//! (`stopped`).
//!
//! # Looking ahead
//!
//! On a large drive every request's oracle entry, map entry and old page
//! are cold cache misses. A flow's sequence of requests does not depend on
//! time, so each flow reads its workload [`Session::PREFETCH_DISTANCE`]
//! requests early ([`Lookahead`]: the end of a flow, a workload error and a
//! stop happen exactly as without it) and the newest is hinted while the
//! current one is simulated ([`Session::prefetch`], as in `stress`). With
//! a multi-flow run the distance counts the flow's own requests, further
//! in the run's order: the hints stay cached long enough either way.
//!
//! With a write-back cache a host write reaches only the oracle at its
//! arrival; the FTL writes a page when its line is evicted, so the FTL is
//! hinted the next eviction victim (the least-recently-used line) after
//! each request, and again before the next one is simulated, which
//! takes it a stage further through the FTL's prefetch pipeline.

pub mod precondition;

use super::device::TimedDevice;
use super::progress::{ProgressUnit, RunProgress};
use super::{Lookahead, RunError, Session, StopFlag};
use crate::config::Config;
use crate::flash::{Cause, FlashStats, OpCounts};
use crate::host::Arrival;
use crate::report::latency::LatencyRecorder;
use crate::report::perf::{
    per_cpu_second, BreakdownSummary, DeviceSummary, FlowSummary, PerfGc, PerfReport, PerfSection, Utilisation,
};
use crate::report::timeseries::SeriesRecorder;
use crate::report::{self, resources, FlashSummary, GcSummary, StressReport, WearSummary};
use crate::seed::{derive_seed, rng_for, Rng};
use crate::timing::trace_out::{TraceOptions, TraceRecorder};
use crate::timing::WriteCacheMode;
use crate::timing::{Component, TIME_LIMIT_NS};
use crate::workload::synthetic::{SyntheticSpec, SyntheticWorkload};
use crate::workload::{HostOp, HostRequest, Workload};
use precondition::{free_blocks, PreconditionSpec};
use std::collections::{BinaryHeap, HashMap};
use std::time::Instant;

/// At most this many closed-loop requests outstanding over all flows
/// (`numjobs` x `iodepth`): see the module docs.
pub const MAX_OUTSTANDING: u64 = 1 << 20;

/// The error of a request past the end of simulated time.
fn past_time_limit(flow: &str, what: &str, t_ns: u64) -> RunError {
    RunError::Input(format!(
        "flow {flow}: a request would {what} at {t_ns} ns of simulated time, past its end ({TIME_LIMIT_NS} ns = 2^62 ns, about 146 years)"
    ))
}

/// Options of a perf run.
#[derive(Clone, Debug)]
pub struct PerfOptions {
    pub seed: u64,
    /// Stop issuing after this many error-severity violations (0: never).
    pub max_errors: u64,
    pub keep_violations: usize,
    /// Oracle version grain in sectors (default: the flows' alignment).
    pub oracle_unit_sectors: Option<u32>,
    /// Length of one time-series interval, ns of simulated time.
    pub interval_ns: u64,
    /// Issue no request arriving after this simulated time, ns.
    pub runtime_ns: Option<u64>,
    /// Issue at most this many requests in all.
    pub max_requests: Option<u64>,
    pub precondition: Option<PreconditionSpec>,
    /// Run the FTL's background work when the device is idle.
    pub idle_gc: bool,
    /// After the run: write the cache back, power-cycle cleanly, mount a
    /// fresh FTL and verify every sector (untimed).
    pub remount_verify: bool,
    /// Stop issuing at the next arrival when set (see [`StopFlag`]); the
    /// requests in flight complete.
    pub stop: StopFlag,
    /// Record a timeline of the timed phase (`--trace-out`): see [`run_traced`].
    pub trace: Option<TraceOptions>,
}

impl Default for PerfOptions {
    fn default() -> Self {
        PerfOptions {
            seed: 0,
            max_errors: 1,
            keep_violations: 20,
            oracle_unit_sectors: None,
            interval_ns: 1_000_000_000,
            runtime_ns: None,
            max_requests: None,
            precondition: None,
            idle_gc: true,
            remount_verify: false,
            stop: StopFlag::default(),
            trace: None,
        }
    }
}

/// A stream of requests with its arrival process (one fio job).
pub struct Flow {
    pub name: String,
    pub workload: Box<dyn Workload>,
    pub arrival: Arrival,
}

impl Flow {
    /// The flows of a synthetic job description: one per `numjobs`, each
    /// with its own random stream, arriving closed-loop at `iodepth` unless
    /// `arrival` says otherwise. `index` numbers the description among the
    /// run's (it seeds the streams).
    pub fn synthetic(
        spec: &SyntheticSpec,
        arrival: Option<Arrival>,
        index: usize,
        config: &Config,
        seed: u64,
    ) -> Result<Vec<Flow>, String> {
        let arrival = arrival.unwrap_or(Arrival::Closed { iodepth: spec.iodepth });
        if let Arrival::Timestamps { .. } = arrival {
            return Err("synthetic flows have no timestamps: use closed, rate:IOPS or poisson:IOPS".into());
        }
        let one = SyntheticSpec { numjobs: 1, ..spec.clone() };
        (0..spec.numjobs.max(1))
            .map(|job| {
                let w = SyntheticWorkload::new(
                    &one,
                    config.logical_bytes(),
                    config.geometry.sector_size_bytes(),
                    derive_seed(seed, &format!("perf.flow{index}.job{job}")),
                )?;
                Ok(Flow { name: format!("flow{index}.job{job}"), workload: Box::new(w), arrival })
            })
            .collect()
    }
}

struct FlowState {
    flow: Flow,
    /// Latencies of the flow's completed requests (2 significant digits).
    latency: hdrhistogram::Histogram<u64>,
    latency_sum_ns: u128,
    queue: u32,
    /// An open-loop flow's next request, its arrival scheduled.
    pending: Option<HostRequest>,
    /// The flow's workload, read ahead (see the module docs).
    ahead: Lookahead,
    finished: bool,
    rng: Rng,
    requests: u64,
}

struct Done {
    flow: u32,
    id: u64,
    op: HostOp,
    arrival_ns: u64,
    bytes: u64,
    breakdown: crate::timing::Breakdown,
}

enum Kind {
    Arrival(u32),
    /// A request completes: its record's index in [`Sim::done`].
    Done(u32),
}

struct Event {
    time: u64,
    seq: u64,
    kind: Kind,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        (self.time, self.seq) == (o.time, o.seq)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    /// Reversed: the heap pops the earliest event (ties: the first scheduled).
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.time, o.seq).cmp(&(self.time, self.seq))
    }
}

/// `perf.stopped` when a stop was asked for ([`PerfOptions::stop`]).
const INTERRUPTED: &str = "interrupted";

/// The run loop's state.
struct Sim {
    events: BinaryHeap<Event>,
    seq: u64,
    flows: Vec<FlowState>,
    issued: u64,
    in_flight: u64,
    last_completion: u64,
    /// The first arrival: simulated time, the time series and utilisation
    /// count from here (a trace may start late).
    origin_ns: Option<u64>,
    stopping: Option<String>,
    extended: HashMap<u64, u64>,
    extensions: Vec<(u64, u64)>,
    /// Records of requests in flight, and the free slots (reused: no
    /// allocation per request in steady state).
    done: Vec<Done>,
    free_done: Vec<u32>,
    by_op: [LatencyRecorder; 4],
    series: SeriesRecorder,
    idle_steps: u64,
    sector_bytes: u64,
    sectors_per_page: u32,
    /// With the event core: the record slot of each request whose
    /// completion is not known yet, and completions handed back by the device.
    waiting_slots: HashMap<u64, u32>,
    completed: Vec<(u64, super::device::Completion)>,
}

fn op_index(op: HostOp) -> usize {
    match op {
        HostOp::Read => 0,
        HostOp::Write => 1,
        HostOp::Trim => 2,
        HostOp::Flush => 3,
    }
}
const OP_NAMES: [&str; 4] = ["read", "write", "trim", "flush"];

impl Sim {
    fn push(&mut self, time: u64, kind: Kind) {
        self.seq += 1;
        self.events.push(Event { time, seq: self.seq, kind });
    }

    /// Schedule a flow's next arrival after one at `now` (open loops).
    fn schedule_open(&mut self, f: usize, now: u64) -> Result<(), RunError> {
        let st = &mut self.flows[f];
        match st.flow.arrival {
            Arrival::Closed { .. } => Ok(()),
            Arrival::Timestamps { time_scale } => {
                match st.ahead.next(st.flow.workload.as_mut())? {
                    Some(r) => {
                        // (The cast saturates at u64::MAX.)
                        let t = ((r.arrival_ns as f64 * time_scale).round() as u64).max(now);
                        if t > TIME_LIMIT_NS {
                            return Err(past_time_limit(&st.flow.name, "arrive (trace time x scale)", t));
                        }
                        st.pending = Some(r);
                        self.push(t, Kind::Arrival(f as u32));
                    }
                    None => st.finished = true,
                }
                Ok(())
            }
            Arrival::Rate { iops, poisson } => {
                let gap = Arrival::rate_gap_ns(iops, poisson, &mut st.rng);
                let t = now.saturating_add(gap);
                if t > TIME_LIMIT_NS {
                    return Err(past_time_limit(&st.flow.name, "arrive", t));
                }
                self.push(t, Kind::Arrival(f as u32));
                Ok(())
            }
        }
    }
}

/// Run `flows` on a fresh drive built from `config`, timed.
pub fn run(
    config: &Config,
    flows: Vec<Flow>,
    opts: &PerfOptions,
    progress: &mut dyn FnMut(&RunProgress),
) -> Result<PerfReport, RunError> {
    run_traced(config, flows, opts, progress).map(|(report, _)| report)
}

/// [`run`], and the timeline of the timed phase when `opts.trace` asks for
/// one ([`crate::timing::trace_out`]).
pub fn run_traced(
    config: &Config,
    flows: Vec<Flow>,
    opts: &PerfOptions,
    progress: &mut dyn FnMut(&RunProgress),
) -> Result<(PerfReport, Option<Box<TraceRecorder>>), RunError> {
    let started = Instant::now();
    let cpu_start = resources::cpu_seconds();
    if flows.is_empty() {
        return Err(RunError::Input("perf needs at least one flow".into()));
    }
    check_options(&flows, opts)?;
    if let (Some(_), Some(s)) = (opts.trace, config.timing.as_ref().and_then(|t| t.scheduler)) {
        return Err(RunError::Input(format!(
            "--trace-out draws the reservation model's bookings; with --scheduler {} (the event core) there are none yet: leave out one of the two",
            s.name()
        )));
    }
    let spp = config.geometry.sectors_per_page();
    let unit = opts.oracle_unit_sectors.unwrap_or_else(|| {
        flows
            .iter()
            .map(|f| f.workload.alignment_sectors())
            .chain(opts.precondition.as_ref().map(|_| spp))
            .min()
            .unwrap_or(1)
    });
    let mut device = TimedDevice::new(config, opts.seed, unit, opts.keep_violations, opts.interval_ns)?;
    let precondition = match &opts.precondition {
        Some(spec) => {
            Some(precondition::precondition(device.session_mut(), spec, opts.seed, &opts.stop, &mut |done, total| {
                progress(&RunProgress { phase: "precondition", done, total: Some(total), ..RunProgress::default() })
            })?)
        }
        None => None,
    };
    // The timed phase's figures start here.
    let base_stats = device.session().drive().flash().stats().clone();
    let base_host = device.session().host().counters().clone();
    let base_gc_runs = device.session().drive().ftl().stats().gc_runs;
    let cpu_timed = resources::cpu_seconds();
    let wall_timed = Instant::now();
    device.start_timing();
    if let Some(t) = opts.trace {
        device.timing_model_mut().set_trace(Some(Box::new(TraceRecorder::new(t))));
    }

    let queues = device.queues();
    let mut sim = Sim {
        events: BinaryHeap::new(),
        seq: 0,
        flows: flows
            .into_iter()
            .enumerate()
            .map(|(i, flow)| FlowState {
                rng: rng_for(opts.seed, &format!("perf.arrival{i}")),
                latency: hdrhistogram::Histogram::new_with_bounds(1, 10_000_000_000_000, 2).expect("valid bounds"),
                latency_sum_ns: 0,
                flow,
                queue: i as u32 % queues,
                pending: None,
                ahead: Lookahead::new(Session::PREFETCH_DISTANCE),
                finished: false,
                requests: 0,
            })
            .collect(),
        issued: 0,
        in_flight: 0,
        last_completion: 0,
        origin_ns: None,
        stopping: None,
        extended: HashMap::new(),
        extensions: Vec::new(),
        done: Vec::new(),
        free_done: Vec::new(),
        by_op: Default::default(),
        series: SeriesRecorder::new(opts.interval_ns),
        idle_steps: 0,
        sector_bytes: u64::from(config.geometry.sector_size_bytes()),
        sectors_per_page: spp,
        waiting_slots: HashMap::new(),
        completed: Vec::new(),
    };
    for f in 0..sim.flows.len() {
        match sim.flows[f].flow.arrival {
            Arrival::Closed { iodepth } => {
                for _ in 0..iodepth.max(1) {
                    sim.push(0, Kind::Arrival(f as u32));
                }
            }
            Arrival::Timestamps { .. } => sim.schedule_open(f, 0)?,
            Arrival::Rate { .. } => sim.push(0, Kind::Arrival(f as u32)),
        }
    }

    let mut events = 0u64;
    let event_core = device.uses_event_core();
    loop {
        if event_core {
            // The event core's next event comes first when it is earlier
            // than the driver's (ties: the driver's, whose arrival runs the
            // core to its time before it is simulated).
            if let Some(t) = device.next_core_event_ns() {
                if sim.events.peek().is_none_or(|e| t < e.time) {
                    device.run_core_until(t);
                    collect_completions(&mut sim, &mut device)?;
                    continue;
                }
            }
        }
        let Some(ev) = sim.events.pop() else { break };
        if sim.origin_ns.is_none() {
            // Events pop in time order and arrivals come first: the first
            // arrival. Nothing before it is measured (not even idle time).
            sim.origin_ns = Some(ev.time);
            sim.last_completion = ev.time;
            sim.series.set_origin(ev.time);
            device.set_time_origin(ev.time);
        }
        {
            let session = device.session();
            sim.series.roll_to(ev.time, &mut || free_blocks(session));
        }
        events += 1;
        if events % 65_536 == 0 {
            progress(&timed_progress(&sim, &device, opts, &base_stats, &base_host));
        }
        match ev.kind {
            Kind::Arrival(f) => arrive(&mut sim, &mut device, opts, f as usize, ev.time)?,
            Kind::Done(slot) => {
                let id = sim.done[slot as usize].id;
                // (Suspends are rare: skip the hash lookup when there are none.)
                let later = if sim.extended.is_empty() { None } else { sim.extended.remove(&id) };
                if let Some(later) = later {
                    if later > ev.time {
                        // A read suspended one of its operations: it completes later.
                        sim.done[slot as usize].breakdown.add(Component::DieWait, later - ev.time);
                        sim.push(later, Kind::Done(slot));
                        continue;
                    }
                }
                sim.free_done.push(slot);
                let d = &sim.done[slot as usize];
                sim.in_flight -= 1;
                if opts.trace.is_some() {
                    if let Some(t) = device.timing_model_mut().trace_mut() {
                        t.request(id, d.op, d.arrival_ns, ev.time, d.bytes);
                        t.queue_depth(ev.time, sim.in_flight as u32);
                    }
                }
                sim.last_completion = sim.last_completion.max(ev.time);
                let latency = ev.time - d.arrival_ns;
                sim.by_op[op_index(d.op)].record(latency, d.bytes, &d.breakdown);
                sim.series.record(d.op, latency, d.bytes);
                let fs = &mut sim.flows[d.flow as usize];
                fs.latency.saturating_record(latency);
                fs.latency_sum_ns += u128::from(latency);
                let f = d.flow as usize;
                if matches!(sim.flows[f].flow.arrival, Arrival::Closed { .. })
                    && sim.stopping.is_none()
                    && !sim.flows[f].finished
                {
                    sim.push(ev.time, Kind::Arrival(d.flow));
                }
            }
        }
    }
    progress(&timed_progress(&sim, &device, opts, &base_stats, &base_host));

    let timed_cpu = resources::cpu_seconds() - cpu_timed;
    let timed_wall = wall_timed.elapsed().as_secs_f64();
    let trace = device.timing_model_mut().take_trace();
    build_report(
        config,
        opts,
        device,
        sim,
        precondition,
        (base_stats, base_host, base_gc_runs),
        (started, cpu_start, timed_cpu, timed_wall),
    )
    .map(|report| (report, trace))
}

/// Refuse what cannot run (before anything runs): see the module docs.
fn check_options(flows: &[Flow], opts: &PerfOptions) -> Result<(), RunError> {
    if opts.max_requests == Some(0) {
        return Err(RunError::Input("--requests: must be at least 1 (0 runs nothing)".into()));
    }
    if opts.interval_ns == 0 || opts.interval_ns > TIME_LIMIT_NS {
        return Err(RunError::Input(format!(
            "--interval: must be between 1 ns and {TIME_LIMIT_NS} ns (2^62 ns, about 146 years), not {} ns",
            opts.interval_ns
        )));
    }
    let outstanding: u64 = flows
        .iter()
        .map(|f| match f.arrival {
            Arrival::Closed { iodepth } => u64::from(iodepth.max(1)),
            _ => 0,
        })
        .sum();
    if outstanding > MAX_OUTSTANDING {
        return Err(RunError::Input(format!(
            "--numjobs x --iodepth: {outstanding} requests outstanding over all flows; at most {MAX_OUTSTANDING} (2^20) in a simulation (each holds simulator state)"
        )));
    }
    Ok(())
}

/// A request of flow `f` arrives at `now`.
fn arrive(sim: &mut Sim, device: &mut TimedDevice, opts: &PerfOptions, f: usize, now: u64) -> Result<(), RunError> {
    if sim.stopping.is_none() {
        if opts.runtime_ns.is_some_and(|r| now > r) {
            sim.stopping = Some("runtime reached".into());
        } else if opts.max_requests.is_some_and(|m| sim.issued >= m) {
            sim.stopping = Some("request count reached".into());
        } else if opts.stop.is_set() {
            sim.stopping = Some(INTERRUPTED.into());
        } else if sim.in_flight >= MAX_OUTSTANDING {
            sim.stopping = Some(format!(
                "{MAX_OUTSTANDING} requests outstanding (the most a simulation holds): the open-loop arrivals outpace the device"
            ));
        }
    }
    if sim.stopping.is_some() || sim.flows[f].finished {
        return Ok(());
    }
    let st = &mut sim.flows[f];
    let req = match st.pending.take() {
        Some(r) => r,
        None => match st.ahead.next(st.flow.workload.as_mut())? {
            Some(r) => r,
            None => {
                st.finished = true;
                return Ok(());
            }
        },
    };
    let queue = st.queue;
    let write_back = device.timing().config.write_cache == WriteCacheMode::WriteBack;
    if let Some(next) = st.ahead.fill(st.flow.workload.as_mut()) {
        // A write into the write-back cache reaches only the oracle now.
        device.session_mut().prefetch(&next, !(write_back && next.op == HostOp::Write));
    }
    if write_back {
        // Hinted again: the hint above took it a stage further.
        prefetch_next_victim(device, sim.sectors_per_page);
    }
    if sim.in_flight == 0 && opts.idle_gc && now > sim.last_completion {
        sim.idle_steps += u64::from(device.idle(sim.last_completion, now, u32::MAX));
    }
    let id = sim.issued;
    let c = device.submit(&req, queue, now, id)?;
    if let Some(c) = &c {
        if c.completion_ns > TIME_LIMIT_NS {
            return Err(past_time_limit(&sim.flows[f].flow.name, "complete", c.completion_ns));
        }
    }
    sim.issued += 1;
    sim.in_flight += 1;
    if opts.trace.is_some() {
        if let Some(t) = device.timing_model_mut().trace_mut() {
            t.queue_depth(now, sim.in_flight as u32);
        }
    }
    sim.flows[f].requests += 1;
    let bytes = u64::from(req.sectors) * sim.sector_bytes;
    let breakdown = c.as_ref().map(|c| c.breakdown).unwrap_or_default();
    let record = Done { flow: f as u32, id, op: req.op, arrival_ns: now, bytes, breakdown };
    let slot = match sim.free_done.pop() {
        Some(s) => {
            sim.done[s as usize] = record;
            s
        }
        None => {
            sim.done.push(record);
            (sim.done.len() - 1) as u32
        }
    };
    match c {
        Some(c) => sim.push(c.completion_ns, Kind::Done(slot)),
        None => {
            sim.waiting_slots.insert(id, slot);
        }
    }
    collect_completions(sim, device)?;
    if write_back {
        prefetch_next_victim(device, sim.sectors_per_page);
    }
    device.take_extensions(&mut sim.extensions);
    for (owner, end) in sim.extensions.drain(..) {
        let e = sim.extended.entry(owner).or_insert(0);
        *e = (*e).max(end);
    }
    let s = device.session();
    if s.ftl_failed() {
        sim.stopping = Some("the FTL returned an error".into());
    } else if opts.max_errors > 0 && s.drive().flash().log().errors() >= opts.max_errors {
        sim.stopping = Some(format!(
            "{} error violation(s) found (--max-errors {})",
            s.drive().flash().log().errors(),
            opts.max_errors
        ));
    }
    sim.schedule_open(f, now)
}

/// Completions the event core produced (requests whose flash work it
/// finished): each becomes its request's completion event.
fn collect_completions(sim: &mut Sim, device: &mut TimedDevice) -> Result<(), RunError> {
    device.take_completed(&mut sim.completed);
    for (seq, c) in std::mem::take(&mut sim.completed) {
        let slot = sim.waiting_slots.remove(&seq).expect("a completed request was waiting");
        let d = &mut sim.done[slot as usize];
        if c.completion_ns > TIME_LIMIT_NS {
            return Err(past_time_limit(&sim.flows[d.flow as usize].flow.name, "complete", c.completion_ns));
        }
        d.breakdown = c.breakdown;
        sim.push(c.completion_ns, Kind::Done(slot));
    }
    Ok(())
}

/// Tell the FTL about the write-back cache's next eviction victim: the
/// least-recently-used line, if dirty. (Not the first dirty line behind
/// clean ones: after a flush every line is clean, and finding it would walk
/// the whole cache on every request.)
fn prefetch_next_victim(device: &mut TimedDevice, spp: u32) {
    let Some(lpn) = device.cache().and_then(|c| c.peek_lru().map(|l| c.line(l)).filter(|l| l.dirty).map(|l| l.lpn))
    else {
        return;
    };
    device.session_mut().drive_mut().prefetch(lpn * u64::from(spp), spp);
}

fn build_report(
    config: &Config,
    opts: &PerfOptions,
    device: TimedDevice,
    sim: Sim,
    precondition: Option<crate::report::perf::PreconditionReport>,
    base: (FlashStats, crate::report::HostCounters, u64),
    clocks: (Instant, f64, f64, f64),
) -> Result<PerfReport, RunError> {
    let (base_stats, base_host, base_gc_runs) = base;
    let (started, cpu_start, timed_cpu, timed_wall) = clocks;
    let session: &Session = device.session();
    let model = device.timing_model();
    // Simulated time from the first arrival to the last completion.
    let origin = sim.origin_ns.unwrap_or(0);
    let end_ns = sim.last_completion;
    let span_ns = end_ns.saturating_sub(origin).max(1);
    let seconds = span_ns as f64 / 1e9;

    // Flash and host figures of the timed phase alone.
    let flash = summary_since(session.drive().flash().stats(), &base_stats);
    let host_programs = counts_since(session.drive().flash().stats(), &base_stats, Cause::Host).programs();
    let all_programs = flash.page_programs;
    let gc = counts_since(session.drive().flash().stats(), &base_stats, Cause::Gc);
    let mut host = session.host().counters().clone();
    host_diff(&mut host, &base_host);
    let ftl_stats = session.drive().ftl().stats();
    let requests = sim.issued;

    let mut total = LatencyRecorder::default();
    for r in &sim.by_op {
        total.merge(r);
    }
    let mut latency = std::collections::BTreeMap::new();
    let mut latency_cdf = std::collections::BTreeMap::new();
    for (i, r) in sim.by_op.iter().enumerate() {
        if r.count() > 0 {
            latency.insert(OP_NAMES[i], r.stats(seconds));
            latency_cdf.insert(OP_NAMES[i], r.cdf());
        }
    }
    latency.insert("all", total.stats(seconds));
    latency_cdf.insert("all", total.cdf());
    let breakdown = BreakdownSummary::new(total.breakdown(), total.count(), &sim.by_op, &OP_NAMES);

    let busy = device.host_busy();
    let frac = |ns: u64| (ns as f64 / span_ns as f64).min(1.0);
    let channels: Vec<f64> = model.channel_busy_ns().into_iter().map(frac).collect();
    let dies: Vec<f64> = model.die_busy_ns().into_iter().map(frac).collect();
    let utilisation = Utilisation::new(
        frac(busy.link_to_device_ns),
        frac(busy.link_to_host_ns),
        frac(busy.cpu_ns) / f64::from(device.cores()),
        frac(busy.dram_ns),
        channels,
        dies,
        device.host().full_duplex,
    );
    let counters = *model.counters();
    let (rows, interval_ns) = sim.series.finish(
        end_ns,
        free_blocks(session),
        model.flash_series(),
        model.flash_interval_ns(),
        config.geometry.dies(),
    );
    let host_bytes = host.read_bytes + host.write_bytes;
    let g = &config.geometry;
    let perf = PerfSection {
        flows: sim
            .flows
            .iter()
            .map(|f| {
                let n = f.latency.len();
                FlowSummary {
                    name: f.flow.name.clone(),
                    workload: f.flow.workload.describe(),
                    arrival: f.flow.arrival.to_string(),
                    queue: f.queue,
                    requests: f.requests,
                    iops: n as f64 / seconds,
                    latency_mean_us: if n == 0 { 0.0 } else { f.latency_sum_ns as f64 / n as f64 / 1000.0 },
                    latency_p99_us: if n == 0 { 0.0 } else { f.latency.value_at_quantile(0.99) as f64 / 1000.0 },
                }
            })
            .collect(),
        device: DeviceSummary {
            channels: g.channels(),
            dies: g.dies(),
            planes: g.planes(),
            link_mbps: device.host().link_bytes_per_s as f64 / 1e6,
            queues: device.host().queues,
            queue_depth: device.host().queue_depth,
            timing: device.timing().config.clone(),
            host: device.host().config.clone(),
        },
        precondition,
        simulated_seconds: seconds,
        requests,
        completed: total.count(),
        iops: total.count() as f64 / seconds,
        read_mbps: host.read_bytes as f64 / 1e6 / seconds,
        write_mbps: host.write_bytes as f64 / 1e6 / seconds,
        latency,
        latency_cdf,
        breakdown,
        utilisation,
        die_operations: model
            .die_pages()
            .iter()
            .map(|counts| {
                crate::timing::flash_model::DIE_OP_NAMES
                    .iter()
                    .zip(counts)
                    .filter(|(_, &n)| n > 0)
                    .map(|(&name, &n)| (name, n))
                    .collect()
            })
            .collect(),
        gc: PerfGc {
            foreground_pages_moved: counters.foreground_gc_pages_moved,
            background_pages_moved: counters.background_gc_pages_moved,
            foreground_blocks_erased: counters.foreground_gc_erases,
            background_blocks_erased: counters.background_gc_erases,
            background_steps: sim.idle_steps,
            background_overruns: device.idle_overruns(),
        },
        write_cache: device.cache().map(|c| c.counters),
        write_cache_mode: device.timing().config.write_cache.name(),
        scheduler: device.timing().scheduler.map(|s| s.name()),
        suspends: match model.event() {
            Some(e) => e.core().counters().suspends,
            None => counters.suspends,
        },
        timeseries_interval_s: interval_ns as f64 / 1e9,
        timeseries: rows,
        stopped: sim.stopping.clone(),
        timed_cpu_seconds: timed_cpu,
        timed_wall_seconds: timed_wall,
        requests_per_cpu_second: per_cpu_second(requests as f64, timed_cpu),
        host_mb_per_cpu_second: per_cpu_second(host_bytes as f64 / 1e6, timed_cpu),
    };
    let wall = started.elapsed().as_secs_f64();
    let stopped_early =
        if session.ftl_failed() || session.drive().flash().log().errors() > 0 { sim.stopping.clone() } else { None };
    let interrupted = sim.stopping.as_deref() == Some(INTERRUPTED);
    let mut run = StressReport {
        schema_version: report::SCHEMA_VERSION,
        mode: "perf",
        seed: opts.seed,
        preset: config.name.clone(),
        ftl: config.ftl_name.clone(),
        workload: sim.flows.iter().map(|f| f.flow.workload.describe()).collect::<Vec<_>>().join(" | "),
        workload_report: None,
        raw_bytes: g.raw_bytes(),
        logical_bytes: config.logical_bytes(),
        host,
        flash_ops_per_second: flash.operations as f64 / timed_wall.max(1e-9),
        flash,
        waf: report::waf(host_programs, all_programs),
        waf_steady: last_quarter_waf(model.flash_series()),
        gc: GcSummary {
            runs: ftl_stats.gc_runs - base_gc_runs,
            pages_moved: gc.programs(),
            blocks_erased: gc.block_erases,
        },
        ftl_stats,
        wear: WearSummary::from_counts(session.drive().flash().nand().erase_counts()),
        oracle_unit_sectors: session.host().oracle().sectors_per_unit(),
        violation_counts: Default::default(),
        errors: 0,
        warnings: 0,
        violations: Vec::new(),
        stopped_early,
        interrupted,
        remount: None,
        reliability: session.drive().flash().reliability_stats(),
        reproduce: None,
        series: Vec::new(),
        wall_seconds: wall,
        cpu_seconds: resources::cpu_seconds() - cpu_start,
        effective_host_gbps: host_bytes as f64 / timed_wall.max(1e-9) / 1e9,
        requests_per_second: requests as f64 / timed_wall.max(1e-9),
        peak_rss_bytes: resources::peak_rss_bytes(),
    };
    drop(model);
    let remount_ok = run.stopped_early.is_none() && !run.interrupted;
    let mut device = device;
    if opts.remount_verify && remount_ok {
        run.remount = Some(remount_and_verify(&mut device));
        run.reliability = device.session().drive().flash().reliability_stats();
    }
    run.set_violations(device.session().drive().flash().log());
    Ok(PerfReport { run, perf })
}

/// Clean power cycle after the timed phase (untimed): write the cache
/// back, shut the FTL down, mount a fresh instance and read every sector.
fn remount_and_verify(device: &mut TimedDevice) -> crate::report::RemountSummary {
    device.stop_timing();
    device.write_back_all();
    device.session_mut().remount_and_verify()
}

/// WAF over the last quarter of the simulated time.
fn last_quarter_waf(series: &[crate::timing::FlashInterval]) -> f64 {
    let tail = &series[series.len() - series.len().div_ceil(4)..];
    let host: u64 = tail.iter().map(|i| i.host_pages_programmed).sum();
    let all: u64 = tail.iter().map(|i| i.pages_programmed).sum();
    report::waf(host, all)
}

/// Flash counts since `before`, by cause.
/// How far the timed phase has got (for the progress callback): requests
/// issued of `--max-requests` when it bounds the run, else the flows'
/// bytes; host and flash figures since the timed phase began.
fn timed_progress(
    sim: &Sim,
    device: &TimedDevice,
    opts: &PerfOptions,
    base_stats: &FlashStats,
    base_host: &crate::report::HostCounters,
) -> RunProgress {
    let (done, total, unit) = match opts.max_requests {
        Some(max) => (sim.issued, Some(max), ProgressUnit::Requests),
        None => {
            let ws: Vec<_> = sim.flows.iter().map(|f| f.flow.workload.progress()).collect();
            let total = ws.iter().map(|w| w.total).sum::<Option<u64>>();
            (ws.iter().map(|w| w.done).sum(), total, ProgressUnit::Bytes)
        }
    };
    let session = device.session();
    let stats = session.drive().flash().stats();
    RunProgress {
        phase: "timed",
        done,
        total,
        unit,
        requests: sim.issued,
        host_write_bytes: session.host().counters().write_bytes - base_host.write_bytes,
        host_pages_programmed: counts_since(stats, base_stats, Cause::Host).programs(),
        pages_programmed: stats.total().programs() - base_stats.total().programs(),
    }
}

fn counts_since(now: &FlashStats, before: &FlashStats, cause: Cause) -> OpCounts {
    let (a, b) = (now.cause(cause), before.cause(cause));
    OpCounts {
        page_reads: a.page_reads - b.page_reads,
        oob_reads: a.oob_reads - b.oob_reads,
        meta_reads: a.meta_reads - b.meta_reads,
        page_programs: a.page_programs - b.page_programs,
        meta_programs: a.meta_programs - b.meta_programs,
        copybacks: a.copybacks - b.copybacks,
        block_erases: a.block_erases - b.block_erases,
    }
}

/// The flash summary of the work done since `before`.
fn summary_since(now: &FlashStats, before: &FlashStats) -> FlashSummary {
    let by: Vec<(Cause, OpCounts)> = Cause::ALL.iter().map(|&c| (c, counts_since(now, before, c))).collect();
    let t = by.iter().fold(OpCounts::default(), |acc, (_, c)| acc.plus(c));
    FlashSummary {
        page_programs: t.programs(),
        page_reads: t.page_reads + t.meta_reads,
        oob_reads: t.oob_reads,
        block_erases: t.block_erases,
        copybacks: t.copybacks,
        operations: t.page_reads
            + t.oob_reads
            + t.meta_reads
            + t.page_programs
            + t.meta_programs
            + t.copybacks
            + t.block_erases,
        by_cause: by
            .into_iter()
            .filter(|(_, c)| *c != OpCounts::default())
            .map(|(cause, c)| (cause.name(), c))
            .collect(),
    }
}

fn host_diff(h: &mut crate::report::HostCounters, before: &crate::report::HostCounters) {
    h.write_bytes -= before.write_bytes;
    h.read_bytes -= before.read_bytes;
    h.trim_bytes -= before.trim_bytes;
    h.write_requests -= before.write_requests;
    h.read_requests -= before.read_requests;
    h.flush_requests -= before.flush_requests;
    h.trim_requests -= before.trim_requests;
    h.volatile_writes -= before.volatile_writes;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{WorkloadError, WorkloadProgress};

    /// `good` 4 KiB writes (one every µs when replayed by timestamp), then
    /// a read error, like a trace with a bad line after `good` good ones.
    struct BadAfter {
        good: u64,
        read: u64,
    }

    impl Workload for BadAfter {
        fn next_request(&mut self) -> Result<Option<HostRequest>, WorkloadError> {
            self.read += 1;
            if self.read > self.good {
                return Err(WorkloadError(format!("bad line {}", self.read)));
            }
            Ok(Some(HostRequest {
                op: HostOp::Write,
                lba: self.read * 8,
                sectors: 8,
                arrival_ns: self.read * 1000,
                job: 0,
            }))
        }
        fn progress(&self) -> WorkloadProgress {
            WorkloadProgress::default()
        }
        fn alignment_sectors(&self) -> u32 {
            8
        }
        fn describe(&self) -> String {
            "bad-after".into()
        }
    }

    fn run_bad_after(good: u64, arrival: Arrival, max_requests: Option<u64>) -> Result<PerfReport, RunError> {
        let config = Config::preset("tiny-timed").expect("preset");
        let flow = Flow { name: "f".into(), workload: Box::new(BadAfter { good, read: 0 }), arrival };
        let opts = PerfOptions { seed: 1, max_requests, ..PerfOptions::default() };
        run(&config, vec![flow], &opts, &mut |_| {})
    }

    /// 4 KiB writes, the `at`-th arriving at `arrival_ns`, the others a µs apart.
    struct FarArrival {
        at: u64,
        arrival_ns: u64,
        read: u64,
    }

    impl Workload for FarArrival {
        fn next_request(&mut self) -> Result<Option<HostRequest>, WorkloadError> {
            self.read += 1;
            let arrival_ns = if self.read >= self.at { self.arrival_ns } else { self.read * 1000 };
            Ok(Some(HostRequest { op: HostOp::Write, lba: self.read * 8 % 4096, sectors: 8, arrival_ns, job: 0 }))
        }
        fn progress(&self) -> WorkloadProgress {
            WorkloadProgress::default()
        }
        fn alignment_sectors(&self) -> u32 {
            8
        }
        fn describe(&self) -> String {
            "far-arrival".into()
        }
    }

    fn run_flows(flows: Vec<Flow>, opts: PerfOptions) -> Result<PerfReport, RunError> {
        let config = Config::preset("tiny-timed").expect("preset");
        run(&config, flows, &PerfOptions { seed: 1, ..opts }, &mut |_| {})
    }

    fn input_error(r: Result<PerfReport, RunError>) -> String {
        match r {
            Err(RunError::Input(e)) => e,
            Err(e) => panic!("expected an input error, got {e}"),
            Ok(r) => panic!("expected an input error, got a report of {} requests", r.perf.requests),
        }
    }

    #[test]
    fn a_trace_time_past_the_end_of_simulated_time_is_an_input_error() {
        let far = |at| Flow {
            name: "trace".into(),
            workload: Box::new(FarArrival { at, arrival_ns: u64::MAX, read: 0 }),
            arrival: Arrival::Timestamps { time_scale: 1.0 },
        };
        for at in [1, 3] {
            let e = input_error(run_flows(vec![far(at)], PerfOptions::default()));
            assert!(
                e.contains("flow trace") && e.contains("18446744073709551615 ns") && e.contains("146 years"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_rate_that_passes_the_end_of_simulated_time_fails_clearly_in_bounded_memory() {
        // One request every 10^18 ns (31 years): the fourth arrives past
        // 2^62 ns. Before the bounds, 10^9 time-series rows per gap.
        let flows = Flow::synthetic(
            &SyntheticSpec::default(),
            Some(Arrival::Rate { iops: 1e-9, poisson: false }),
            0,
            &Config::preset("tiny-timed").unwrap(),
            1,
        )
        .unwrap();
        let e = input_error(run_flows(flows, PerfOptions::default()));
        assert!(e.contains("flow flow0.job0: a request would arrive at 5000000000000000000 ns"), "{e}");
    }

    #[test]
    fn a_one_nanosecond_interval_keeps_the_series_within_its_bin_cap() {
        let flows =
            Flow::synthetic(&SyntheticSpec::default(), None, 0, &Config::preset("tiny-timed").unwrap(), 1).unwrap();
        let opts = PerfOptions { interval_ns: 1, max_requests: Some(300), ..PerfOptions::default() };
        let r = run_flows(flows, opts).unwrap();
        let p = &r.perf;
        assert!(p.timeseries.len() <= crate::timing::MAX_SERIES_BINS, "{} rows", p.timeseries.len());
        assert!(p.simulated_seconds > 1e-3, "long enough to need doubling: {} s", p.simulated_seconds);
        assert!(p.timeseries_interval_s > 1e-9, "the interval doubled");
        assert_eq!(p.timeseries.iter().map(|row| row.reads + row.writes).sum::<u64>(), {
            let l = &p.latency;
            l.get("read").map_or(0, |s| s.count) + l.get("write").map_or(0, |s| s.count)
        });
    }

    #[test]
    fn open_loop_arrivals_outpacing_the_device_stop_at_the_outstanding_bound() {
        // 10^12 IOPS: every gap rounds to 0 ns, so every request arrives
        // before any completes; without the bound they all stay in flight.
        let spec = SyntheticSpec {
            rw: crate::workload::synthetic::RwMode::RandRead,
            io_size: Some(crate::util::size::SizeSpec::Bytes(1 << 40)),
            ..SyntheticSpec::default()
        };
        let config = Config::preset("tiny-timed").unwrap();
        let flows = Flow::synthetic(&spec, Some(Arrival::Rate { iops: 1e12, poisson: false }), 0, &config, 1).unwrap();
        let opts = PerfOptions { max_requests: Some(MAX_OUTSTANDING + 1000), ..PerfOptions::default() };
        let r = run_flows(flows, opts).unwrap();
        assert_eq!(r.perf.requests, MAX_OUTSTANDING);
        assert!(r.perf.stopped.as_deref().unwrap().contains("outpace the device"), "{:?}", r.perf.stopped);
    }

    #[test]
    fn too_many_outstanding_requests_are_refused_before_anything_runs() {
        let spec = SyntheticSpec { numjobs: 4096, iodepth: 65535, ..SyntheticSpec::default() };
        let flows = Flow::synthetic(&spec, None, 0, &Config::preset("tiny-timed").unwrap(), 1).unwrap();
        let e = input_error(run_flows(flows, PerfOptions::default()));
        assert!(
            e.contains("--numjobs x --iodepth: 268431360 requests outstanding") && e.contains("at most 1048576"),
            "{e}"
        );
        let e = input_error(run_flows(
            Flow::synthetic(&SyntheticSpec::default(), None, 0, &Config::preset("tiny-timed").unwrap(), 1).unwrap(),
            PerfOptions { max_requests: Some(0), ..PerfOptions::default() },
        ));
        assert!(e.contains("--requests: must be at least 1"), "{e}");
    }

    #[test]
    fn a_workload_error_read_ahead_surfaces_only_when_its_request_is_due() {
        // (A flow replayed by timestamp reads its next request when it
        // schedules it, lookahead or not.)
        for arrival in [Arrival::Closed { iodepth: 4 }, Arrival::Rate { iops: 1e5, poisson: false }] {
            // The lookahead reads past request 50 (into the error), but the
            // run stops at 50 and never needed it.
            let report = run_bad_after(50, arrival, Some(50)).unwrap_or_else(|e| panic!("{arrival}: {e}"));
            assert_eq!(report.perf.requests, 50, "{arrival}");
            assert_eq!(report.perf.stopped.as_deref(), Some("request count reached"), "{arrival}");
            // Without the limit the 51st request is due, and its error ends the run.
            match run_bad_after(50, arrival, None) {
                Err(RunError::Workload(e)) => assert_eq!(e, "bad line 51", "{arrival}"),
                other => panic!("{arrival}: expected the workload error, got {:?}", other.map(|r| r.perf.requests)),
            }
        }
    }
}
