//! Shrinking a finding to the earliest crash point that fails the same way
//! (see the module docs of [`super`], *Shrinking*).

use super::{run_points, CrashOptions, CrashReport, Plan, Planned, PointResult, PointSelection, Shrunk, Stage};
use crate::flash::PowerCut;
use crate::violation::Rule;

/// When this many points or fewer are left below the best failing point,
/// the shrinker tries every one of them.
pub const SHRINK_EXHAUSTIVE_POINTS: u64 = 4096;
/// Operations sampled evenly per round while more are left.
const SPREAD_OPS: u64 = 64;
/// Operations just below the best failing point also tried each round
/// (failures tend to cluster).
const NEAR_OPS: u64 = 8;
const MAX_ROUNDS: u32 = 16;

/// Shrink the campaign's first finding (see the module docs).
pub(super) fn shrink(plan: &Plan, report: &CrashReport, threads: usize) -> Option<Shrunk> {
    let first = report.points.iter().find(|p| !p.passed)?;
    let signature = first.signature()?;
    let phases = plan.opts.phase.cuts();
    let max_requests = plan.opts.max_requests.map_or(first.request + 1, |m| m.min(first.request + 1));
    let opts = CrashOptions {
        points: PointSelection::At(Vec::new()),
        shrink: false,
        nested_at: first.nested_cut,
        max_requests: Some(max_requests),
        // The points tried here are counted as shrink rounds, not as the campaign's.
        progress: None,
        ..plan.opts.clone()
    };
    let sub = Plan { opts: &opts, factory: plan.factory.clone(), ..*plan };
    let mut best = first.clone();
    let mut low = report.first_request_op;
    let (mut tried, mut rounds, mut clean_from_op) = (0u64, 0u32, None);
    while rounds < MAX_ROUNDS {
        let left = points_below(best.cut, low, phases);
        if left == 0 {
            clean_from_op = Some(low);
            break;
        }
        let exhaustive = left <= SHRINK_EXHAUSTIVE_POINTS;
        let (cuts, gap) = if exhaustive {
            (every_cut_below(best.cut, low, phases), low)
        } else {
            spread_below(best.cut, low, phases)
        };
        rounds += 1;
        tried += cuts.len() as u64;
        if let Some(board) = &plan.opts.progress {
            board.shrink_round(cuts.len() as u64);
        }
        match earliest_failing(&sub, &cuts, threads, signature) {
            Some(earlier) => best = earlier,
            // The sampled points passed: search the gap just below the best.
            None if !exhaustive => low = gap,
            None => {}
        }
        if exhaustive {
            clean_from_op = Some(low);
            break;
        }
    }
    let message = best.first.as_ref().map_or_else(String::new, |v| v.message.clone());
    Some(Shrunk {
        cut: best.cut,
        nested_cut: best.nested_cut,
        requests_before: best.request,
        rule: signature.0,
        stage: signature.1,
        message,
        tried,
        rounds,
        clean_from_op,
        command: None,
    })
}

/// Points `(op, phase)` with `op >= low` ordered before `best`.
fn points_below(best: PowerCut, low: u64, phases: &[bool]) -> u64 {
    let whole_ops = best.op_index.saturating_sub(low) * phases.len() as u64;
    // `between` (false) comes before `during` (true) at the same operation.
    let same_op = phases.iter().filter(|&&d| best.op_index >= low && !d && best.during).count() as u64;
    whole_ops + same_op
}

fn before(c: PowerCut, best: PowerCut) -> bool {
    (c.op_index, c.during) < (best.op_index, best.during)
}

fn every_cut_below(best: PowerCut, low: u64, phases: &[bool]) -> Vec<PowerCut> {
    (low..=best.op_index)
        .flat_map(|op| phases.iter().map(move |&during| PowerCut { op_index: op, during }))
        .filter(|&c| before(c, best))
        .collect()
}

/// `SPREAD_OPS` operations evenly over `low ..` the best, and the
/// `NEAR_OPS` just below it, in every phase; and where the gap between the
/// last evenly spread operation and the best starts.
fn spread_below(best: PowerCut, low: u64, phases: &[bool]) -> (Vec<PowerCut>, u64) {
    let hi = best.op_index;
    let spread: Vec<u64> = (0..SPREAD_OPS).map(|i| low + (hi - low) * i / SPREAD_OPS).collect();
    let gap = spread.last().map_or(low, |&op| op + 1);
    let near = hi.saturating_sub(NEAR_OPS).max(low)..=hi;
    let mut ops: Vec<u64> = spread.into_iter().chain(near).collect();
    ops.sort_unstable();
    ops.dedup();
    let cuts = ops
        .into_iter()
        .flat_map(|op| phases.iter().map(move |&during| PowerCut { op_index: op, during }))
        .filter(|&c| before(c, best))
        .collect();
    (cuts, gap)
}

/// Test `cuts` (sorted) and return the earliest failing with `signature`.
fn earliest_failing(plan: &Plan, cuts: &[PowerCut], threads: usize, signature: (Rule, Stage)) -> Option<PointResult> {
    let planned: Vec<Planned> = cuts.iter().map(|c| Planned { offset: c.op_index, during: c.during }).collect();
    let outcomes = run_points(plan, &planned, threads.min(planned.len()).max(1));
    let mut found: Vec<PointResult> = outcomes.into_iter().flat_map(|o| o.results).collect();
    found.sort_by_key(|p| (p.cut.op_index, p.cut.during));
    found.into_iter().find(|p| p.signature() == Some(signature))
}
