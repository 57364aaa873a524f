//! Planning a campaign: which crash points it tests, and the checks that
//! refuse a plan that would test nothing (a counting pass of the workload
//! says where its flash operations are).

use super::{new_session, new_workload, next_request, Phase, Plan, Planned, PointSelection, Warmup};
use crate::flash::PowerCut;
use crate::report::crash::phase_name;
use crate::run::RunError;
use crate::seed::rng_for;
use rand::RngExt;

/// The most crash points one campaign plans: the plan is held in memory
/// and each point costs a recovery and a read of the whole disk, so more
/// is never a campaign that ends; it is a typo (or a span meant for
/// another workload).
pub const MAX_CRASH_POINTS: u64 = 1_000_000;

/// The crash points, sorted, as offsets from the window start.
pub(super) fn plan_points(plan: &Plan) -> Result<Vec<Planned>, RunError> {
    let opts = plan.opts;
    let mut rng = rng_for(opts.seed, "crash.points");
    let mut points = match &opts.points {
        PointSelection::At(cuts) => {
            validate_cuts(plan, cuts)?;
            cuts.iter().map(|c| Planned { offset: c.op_index, during: c.during }).collect()
        }
        PointSelection::Every { every, span } => {
            let every = (*every).max(1);
            let phases = opts.phase.cuts();
            let planned = |span: u64| span.div_ceil(every).saturating_mul(phases.len() as u64);
            let span = match span {
                Some(s) => {
                    if planned(*s) > MAX_CRASH_POINTS {
                        return Err(too_many_every(every, *s, planned(*s), "--crash-span"));
                    }
                    check_span_reaches(plan, *s, "--crash-every")?;
                    *s
                }
                None => {
                    let window = count_ops(plan)?.window();
                    if window == 0 {
                        return Err(RunError::Input(
                            "--crash-every: the workload has no flash operations to cut after the warm-up, so \
                             the campaign would test nothing (use a shorter --warmup or a longer workload)"
                                .into(),
                        ));
                    }
                    if planned(window) > MAX_CRASH_POINTS {
                        return Err(too_many_every(every, window, planned(window), "the window"));
                    }
                    window
                }
            };
            (0..span.div_ceil(every))
                .flat_map(|i| phases.iter().map(move |&during| Planned { offset: i * every, during }))
                .collect()
        }
        PointSelection::Random { count, span } => {
            if *count > MAX_CRASH_POINTS {
                return Err(RunError::Input(format!(
                    "--crash-points {count}: at most {MAX_CRASH_POINTS} crash points per campaign"
                )));
            }
            let span = match span {
                Some(s) => *s,
                None => count_ops(plan)?.window(),
            };
            if span == 0 {
                return Err(RunError::Input("--crash-points: the workload has no flash operations to cut".into()));
            }
            let mut offsets: Vec<u64> = (0..*count).map(|_| rng.random_range(0..span)).collect();
            offsets.sort_unstable();
            offsets.dedup();
            if span_given(&opts.points) {
                check_span_reaches_points(plan, span, offsets.first().copied(), "--crash-points")?;
            }
            let phase = |rng: &mut crate::seed::Rng| match opts.phase {
                Phase::Between => false,
                Phase::During => true,
                Phase::Both => rng.random::<bool>(),
            };
            offsets.into_iter().map(|offset| Planned { offset, during: phase(&mut rng) }).collect::<Vec<_>>()
        }
    };
    points.sort_by_key(|p| (p.offset, p.during));
    points.dedup_by_key(|p| (p.offset, p.during));
    Ok(points)
}

fn span_given(points: &PointSelection) -> bool {
    matches!(points, PointSelection::Random { span: Some(_), .. } | PointSelection::Every { span: Some(_), .. })
}

fn too_many_every(every: u64, span: u64, planned: u64, what: &str) -> RunError {
    RunError::Input(format!(
        "--crash-every {every}: {what} of {span} flash operations makes {planned} crash points, \
         at most {MAX_CRASH_POINTS} per campaign: use a larger --crash-every or a shorter --crash-span"
    ))
}

/// With `--crash-every` and a given span, the first point is at the window start.
fn check_span_reaches(plan: &Plan, span: u64, option: &str) -> Result<(), RunError> {
    check_span_reaches_points(plan, span, (span > 0).then_some(0), option)
}

/// A window given by `--crash-span` is not counted by a first pass, so a
/// span longer than the workload can put every point past its end: a
/// campaign that would test nothing is refused before it runs (as a
/// `--crash-at` past the end is). `first`: the earliest planned offset.
fn check_span_reaches_points(plan: &Plan, span: u64, first: Option<u64>, option: &str) -> Result<(), RunError> {
    let window = count_ops(plan)?.window();
    match first {
        Some(f) if f < window => Ok(()),
        _ => Err(RunError::Input(format!(
            "--crash-span {span} with {option}: no crash point falls in the workload, whose window \
             (after the warm-up) has {window} flash operations, so the campaign would test nothing; \
             use a --crash-span of at most {window}, or leave it out to cover the whole window"
        ))),
    }
}

/// `--crash-at` cuts must fall in an operation of a host request: not in
/// the format before the first one, not past the end of the workload.
fn validate_cuts(plan: &Plan, cuts: &[PowerCut]) -> Result<(), RunError> {
    let counts = count_ops(plan)?;
    for c in cuts {
        if c.op_index < counts.first_request || c.op_index >= counts.end {
            let which = if c.op_index < counts.first_request {
                format!("operations 0..{} format the drive, before the first host request", counts.first_request)
            } else {
                format!("the workload ends after operation {}", counts.end.saturating_sub(1))
            };
            return Err(RunError::Input(format!(
                "--crash-at {}:{}: not an operation of a host request ({which}); valid: {}..={}",
                c.op_index,
                phase_name(c.during),
                counts.first_request,
                counts.end.saturating_sub(1)
            )));
        }
    }
    Ok(())
}

/// Where the workload's flash operations are (a counting pass).
struct OpCounts {
    /// The first host request's first operation (format before it).
    first_request: u64,
    /// The window's first operation (the end of the warm-up).
    window_start: u64,
    /// One past the last operation.
    end: u64,
}

impl OpCounts {
    fn window(&self) -> u64 {
        self.end.saturating_sub(self.window_start)
    }
}

/// Run the workload once, without testing anything, to count its operations.
fn count_ops(plan: &Plan) -> Result<OpCounts, RunError> {
    let mut session = new_session(plan)?;
    let mut workload = new_workload(plan.config, plan.spec, plan.opts.seed)?;
    let mut warm = Warmup::new(plan.opts.warmup_write_bytes, plan.config);
    let first_request = session.drive().flash().op_index();
    let mut requests = 0;
    while let Some(req) = next_request(&mut workload)? {
        if plan.opts.max_requests.is_some_and(|m| requests >= m) || plan.opts.stop.is_set() {
            break;
        }
        warm.before(&req, session.drive().flash().op_index());
        session.submit(&req)?;
        requests += 1;
        if session.ftl_failed() {
            break;
        }
    }
    let end = session.drive().flash().op_index();
    Ok(OpCounts { first_request, window_start: warm.start.unwrap_or(end), end })
}
