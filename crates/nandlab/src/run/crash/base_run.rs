//! The base runs of a campaign: the points split over threads, each
//! thread running the workload on its own drive (journal on) and testing
//! its points as it passes them (see [`super::point`]); then the threads'
//! outcomes assembled into the report.

use super::{new_session, new_workload, next_request, point, Plan, Planned, PointSelection, Warmup};
use crate::flash::PowerCut;
use crate::oracle::crash_checker::{CrashHistory, PendingOp};
use crate::report;
use crate::report::crash::{CrashMeasurements, CrashReport, PointResult};
use crate::workload::HostOp;
use std::collections::BTreeMap;
use std::time::Instant;

pub(super) struct ThreadOutcome {
    pub(super) results: Vec<PointResult>,
    pub(super) not_reached: u64,
    pub(super) base_failure: Option<String>,
    pub(super) window_start: u64,
    pub(super) first_request_op: Option<u64>,
    pub(super) test_cpu: f64,
    pub(super) test_wall: f64,
    pub(super) interrupted: bool,
}

/// Split the points over threads (contiguous shares) and run them.
pub(super) fn run_points(plan: &Plan, points: &[Planned], threads: usize) -> Vec<ThreadOutcome> {
    let share = points.len().div_ceil(threads).max(1);
    let chunks: Vec<&[Planned]> = points.chunks(share).collect();
    if chunks.len() <= 1 {
        return vec![run_thread(plan, chunks.first().copied().unwrap_or(&[]))];
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks.iter().map(|c| scope.spawn(move || run_thread(plan, c))).collect();
        handles.into_iter().map(|h| h.join().expect("crash thread panicked")).collect()
    })
}

/// The base run of one thread, testing its points as it passes them.
fn run_thread(plan: &Plan, points: &[Planned]) -> ThreadOutcome {
    let mut out = ThreadOutcome {
        results: Vec::new(),
        not_reached: 0,
        base_failure: None,
        window_start: 0,
        first_request_op: None,
        test_cpu: 0.0,
        test_wall: 0.0,
        interrupted: false,
    };
    let absolute = matches!(plan.opts.points, PointSelection::At(_));
    let (mut session, mut workload) = match (new_session(plan), new_workload(plan.config, plan.spec, plan.opts.seed)) {
        (Ok(s), Ok(w)) => (s, w),
        (Err(e), _) | (_, Err(e)) => {
            out.base_failure = Some(e.to_string());
            return out;
        }
    };
    out.first_request_op = Some(session.drive().flash().op_index());
    session.drive_mut().start_journal();
    let mut history = CrashHistory::new(plan.config.logical_sectors, plan.unit, plan.guarantee);
    let mut warm = Warmup::new(if absolute { 0 } else { plan.opts.warmup_write_bytes }, plan.config);
    let mut next = 0;
    let mut requests = 0u64;
    while next < points.len() {
        if plan.opts.stop.is_set() {
            out.interrupted = true;
            break;
        }
        let req = match next_request(&mut workload) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                out.base_failure = Some(e.to_string());
                break;
            }
        };
        if plan.opts.max_requests.is_some_and(|m| requests >= m) {
            break;
        }
        requests += 1;
        let ops_before = session.drive().flash().op_index();
        warm.before(&req, ops_before);
        let start = if absolute { Some(0) } else { warm.start };
        let write_id = session.host().next_write_id();
        let request_id = session.requests();
        if let Err(e) = session.submit(&req) {
            out.base_failure = Some(e.to_string());
            break;
        }
        let ops_after = session.drive().flash().op_index();
        let in_flight = PendingOp::of(&req, request_id, write_id, write_id.saturating_sub(1));
        if let Some(start) = start {
            out.window_start = start;
            let mut cuts = Vec::new();
            while next < points.len() && start + points[next].offset < ops_after {
                let cut = PowerCut { op_index: start + points[next].offset, during: points[next].during };
                if cut.op_index >= ops_before {
                    cuts.push(cut);
                }
                next += 1;
            }
            if !cuts.is_empty() {
                let (cpu, wall) = (thread_cpu_seconds(), Instant::now());
                let request = point::Request { id: request_id, in_flight, history: &history };
                let results = point::test_request(plan, &mut session, &request, &cuts);
                if let Some(board) = &plan.opts.progress {
                    board.tested(results.len() as u64, results.iter().filter(|p| !p.passed).count() as u64);
                }
                out.results.extend(results);
                out.test_cpu += thread_cpu_seconds() - cpu;
                out.test_wall += wall.elapsed().as_secs_f64();
            }
        }
        if session.ftl_failed() {
            let v =
                session.drive().flash().log().first_error().map_or_else(|| "the FTL failed".into(), |v| v.to_string());
            out.base_failure = Some(format!("the FTL failed in the base run (no power cut): {v}"));
            break;
        }
        let flush = req.op == HostOp::Flush;
        history.record(in_flight, flush, session.host().last_durability());
        session.drive_mut().clear_journal();
    }
    out.not_reached += (points.len() - next) as u64;
    out
}

/// Thread CPU time in seconds (Linux; 0 elsewhere).
fn thread_cpu_seconds() -> f64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes the timespec it is given and nothing else.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
            return ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9;
        }
    }
    0.0
}

pub(super) fn assemble(
    plan: &Plan,
    ftl: &str,
    workload: &str,
    planned: usize,
    outcomes: Vec<ThreadOutcome>,
    threads: usize,
) -> CrashReport {
    let mut points = Vec::new();
    let (mut not_reached, mut test_cpu, mut base_failure, mut window_start) = (0, 0.0, None, 0);
    let mut first_request_op = None;
    let mut test_wall: f64 = 0.0;
    let mut interrupted = false;
    for o in outcomes {
        interrupted |= o.interrupted;
        points.extend(o.results);
        not_reached += o.not_reached;
        test_cpu += o.test_cpu;
        test_wall = test_wall.max(o.test_wall);
        base_failure = base_failure.or(o.base_failure);
        window_start = window_start.max(o.window_start);
        first_request_op = first_request_op.or(o.first_request_op);
    }
    points.sort_by_key(|p| (p.cut.op_index, p.cut.during));
    let mut failed_by_kind = BTreeMap::new();
    for p in points.iter().filter(|p| !p.passed) {
        for r in p.rules.keys() {
            *failed_by_kind.entry(*r).or_insert(0) += 1;
        }
    }
    let failed = points.iter().filter(|p| !p.passed).count() as u64;
    CrashReport {
        schema_version: report::SCHEMA_VERSION,
        mode: "crash",
        seed: plan.opts.seed,
        preset: plan.config.name.clone(),
        ftl: ftl.to_string(),
        guarantee: plan.guarantee,
        workload: workload.to_string(),
        effects: plan.opts.effects,
        nested: plan.opts.nested,
        nested_at: plan.opts.nested_at.filter(|_| plan.opts.nested),
        post_requests: plan.opts.post_requests,
        first_request_op: first_request_op.unwrap_or(0),
        window_start_op: if matches!(plan.opts.points, PointSelection::At(_)) { 0 } else { window_start },
        points_planned: planned as u64,
        points_tested: points.len() as u64,
        passed: points.len() as u64 - failed,
        failed,
        failed_by_kind,
        not_reached,
        points,
        shrunk: None,
        base_failure,
        interrupted,
        threads,
        measured: CrashMeasurements { test_cpu_seconds: test_cpu, test_wall_seconds: test_wall, ..Default::default() },
    }
}
